"""Progress of a grid (or of any run of countable steps): a live bar on a wide terminal, plain lines otherwise.

Both show steps done / total, the time elapsed and an estimate of the time left.  The
estimate is rate based and counts this process's run only: the rate is the cost finished
in this run over the time since it started (steps loaded from a previous run count
neither as done work nor as time), measured at events; between events the estimate counts
down instead of growing with every redraw.  Steps are weighed by their ``cost`` (longest
cells start first, so a count-based estimate would be too pessimistic at the start and
too optimistic at the end); it is shown once two steps have finished.

The bar is used only on a terminal at least :data:`MIN_BAR_COLUMNS` wide; it never draws
past the terminal's width (so it never wraps).  Elsewhere (a pipe, a file, a narrow
terminal) each event is one line.  A command line whose stderr goes through a filter
(no terminal any more) hands the real terminal to :func:`progress_to`.  Every command
line of the package (``rfms``, ``pu``, ``cmosb``) reports through these classes.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TextIO

from raytune_fed.grid._cell import Outcome

MIN_BAR_COLUMNS = 72
"""Narrower terminals get one line per event instead of a bar."""

_TERMINALS: list[TextIO] = []
"""The terminals :func:`progress_to` names, innermost last."""


class Progress(Protocol):
    """What :func:`~raytune_fed.grid.run_cells` (and the CMOSB runs) tell as they run."""

    def start(self, name: str, n_total: int, n_done: int, todo_cost: float, unit: str = "cells",
              n_todo: int | None = None, n_skipped: int = 0) -> None: ...

    def note(self, message: str) -> None: ...

    def advance(self, outcome: Outcome) -> None: ...

    def step(self, label: str, seconds: float | None = None, error: Any = None, cost: float = 1.0) -> None: ...

    def close(self) -> None: ...


def describe_start(name: str, n_total: int, n_done: int, n_todo: int, n_skipped: int, unit: str = "cells") -> str:
    """``rfms: 4 cells (1 already done, 2 not run: damaged unit files), 1 to run``."""
    skipped = f", {n_skipped} not run: damaged unit files" if n_skipped else ""
    return f"{name}: {n_total} {unit} ({n_done} already done{skipped}), {n_todo} to run"


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class _Counts:
    """Shared arithmetic of the bar and the lines."""

    def start(self, name: str, n_total: int, n_done: int, todo_cost: float, unit: str = "cells",
              n_todo: int | None = None, n_skipped: int = 0) -> None:
        self.name, self.n_total, self.n_resumed = name, n_total, n_done
        self.n_todo = n_total - n_done - n_skipped if n_todo is None else n_todo
        self.n_skipped = n_skipped
        self.n_finished = self.n_failed = 0
        self.cost_left, self.cost_done = float(todo_cost), 0.0
        self.started = self._last_event = time.monotonic()
        self._rate: float | None = None   # cost finished in this run per second of it, at the last event

    def step(self, label: str, seconds: float | None = None, error: Any = None, cost: float = 1.0) -> None:
        """One finished step (a cell, a trial) of ``cost``; ``error`` when it failed."""
        now = time.monotonic()
        self.n_finished += 1
        self.n_failed += error is not None
        cost = max(float(cost), 0.0)
        self.cost_done += cost
        self.cost_left = max(self.cost_left - cost, 0.0)
        self._rate = self.cost_done / max(now - self.started, 1e-9)
        self._last_event = now

    def count(self, outcome: Outcome) -> None:
        self.step(outcome.cell.label, outcome.seconds, outcome.error, float(outcome.cell.cost))

    @property
    def done(self) -> int:
        return self.n_resumed + self.n_finished

    def left(self) -> float | None:
        """Seconds left: the cost still to run at this run's rate, counted down since the last event."""
        if self._rate is None or self.n_finished < 2 or self._rate <= 0:
            return None if self.cost_left > 0 else 0.0
        return max(self.cost_left / self._rate - (time.monotonic() - self._last_event), 0.0)

    def times(self) -> str:
        elapsed = time.monotonic() - self.started
        left = self.left()
        failed = f", {self.n_failed} failed" if self.n_failed else ""
        return f"{_clock(elapsed)} elapsed, ~{'--:--' if left is None else _clock(left)} left{failed}"


class ProgressLines(_Counts):
    """One plain line per event, through ``write`` (default: print to stderr)."""

    def __init__(self, write: Callable[[str], None] | None = None) -> None:
        self.write = write or (lambda line: print(line, file=sys.stderr, flush=True))

    def start(self, name: str, n_total: int, n_done: int, todo_cost: float, unit: str = "cells",
              n_todo: int | None = None, n_skipped: int = 0) -> None:
        super().start(name, n_total, n_done, todo_cost, unit, n_todo, n_skipped)
        self.write(describe_start(name, n_total, n_done, self.n_todo, n_skipped, unit))

    def note(self, message: str) -> None:
        self.write(message)

    def step(self, label: str, seconds: float | None = None, error: Any = None, cost: float = 1.0) -> None:
        super().step(label, seconds, error, cost)
        what = f"FAILED {error}" if error is not None else ("done" if seconds is None else f"{seconds:.1f} s")
        self.write(f"[{self.done}/{self.n_total}] {label}: {what} ({self.times()})")

    def advance(self, outcome: Outcome) -> None:
        self.count(outcome)

    def close(self) -> None:
        pass


def _columns(stream: TextIO) -> int:
    """The width of the terminal behind ``stream`` ($COLUMNS, else 80, when it has none)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError and a ValueError
        return shutil.get_terminal_size().columns


class ProgressBar(_Counts):
    """A bar redrawn in place on a terminal (once a second, and at every event), cut to the terminal's width."""

    def __init__(self, stream: TextIO, width: int = 24, columns: int | None = None) -> None:
        self.stream, self.width = stream, width
        self.columns = columns or _columns(stream)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, name: str, n_total: int, n_done: int, todo_cost: float, unit: str = "cells",
              n_todo: int | None = None, n_skipped: int = 0) -> None:
        super().start(name, n_total, n_done, todo_cost, unit, n_todo, n_skipped)
        self.unit = unit
        if n_skipped:
            self.note(describe_start(name, n_total, n_done, self.n_todo, n_skipped, unit))
        self._draw()
        self._thread = threading.Thread(target=self._tick, name="grid-progress", daemon=True)
        self._thread.start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self._draw()

    def _line(self) -> str:
        share = self.done / self.n_total if self.n_total else 1.0
        text = f"{self.done}/{self.n_total} {getattr(self, 'unit', 'cells')}, {self.times()}"
        room = self.columns - 1 - len(self.name) - len(text) - 4
        width = min(self.width, room)
        if width >= 8:
            filled = int(round(share * width))
            return f"{self.name} [{'#' * filled}{'.' * (width - filled)}] {text}"
        return f"{self.name} {text}"[: self.columns - 1]

    def _draw(self, end: str = "") -> None:
        with self._lock:
            self.stream.write(f"\r\x1b[2K{self._line()}{end}")
            self.stream.flush()

    def note(self, message: str) -> None:
        with self._lock:
            self.stream.write(f"\r\x1b[2K{message}\n")
        self._draw()

    def step(self, label: str, seconds: float | None = None, error: Any = None, cost: float = 1.0) -> None:
        super().step(label, seconds, error, cost)
        if error is not None:
            self.note(f"{label}: FAILED {error}")
        else:
            self._draw()

    def advance(self, outcome: Outcome) -> None:
        self.count(outcome)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            self._draw(end="\n")


@contextmanager
def progress_to(terminal: TextIO | None) -> Iterator[None]:
    """While open, :func:`make_progress` without a stream draws its bar on ``terminal`` (None: no change).

    The command line opens it with the real terminal it kept before filtering stderr."""
    if terminal is None:
        yield
        return
    _TERMINALS.append(terminal)
    try:
        yield
    finally:
        _TERMINALS.remove(terminal)


def make_progress(stream: TextIO | None = None) -> Progress:
    """A :class:`ProgressBar` on a terminal at least :data:`MIN_BAR_COLUMNS` wide, else :class:`ProgressLines`.

    ``stream`` defaults to the terminal of :func:`progress_to`, else stderr; lines that are not
    for a given ``stream`` go to stderr (the command line's own, in order with its other lines)."""
    terminal = stream or (_TERMINALS[-1] if _TERMINALS else sys.stderr)
    if terminal.isatty() and _columns(terminal) >= MIN_BAR_COLUMNS:
        return ProgressBar(terminal)
    if stream is not None:
        return ProgressLines(lambda line: print(line, file=stream, flush=True))
    return ProgressLines()


class Silent:
    """No progress output."""

    def start(self, name: str, n_total: int, n_done: int, todo_cost: float, unit: str = "cells",
              n_todo: int | None = None, n_skipped: int = 0) -> None:
        pass

    def note(self, message: str) -> None:
        pass

    def step(self, label: str, seconds: float | None = None, error: Any = None, cost: float = 1.0) -> None:
        pass

    def advance(self, outcome: Outcome) -> None:
        pass

    def close(self) -> None:
        pass
