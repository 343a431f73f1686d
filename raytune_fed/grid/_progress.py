"""Progress of a grid: a live bar on a terminal, plain lines otherwise.

Both show cells done / total, the time elapsed and an estimate of the time left.  The
estimate weighs cells by their ``cost`` (longest cells start first, so a count-based
estimate would be too pessimistic at the start and too optimistic at the end): time left
= elapsed x (cost still to run) / (cost finished so far).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, Protocol, TextIO

from raytune_fed.grid._cell import Outcome


class Progress(Protocol):
    """What :func:`~raytune_fed.grid.run_cells` tells about a grid as it runs."""

    def start(self, name: str, n_total: int, n_done: int, todo_cost: float) -> None: ...

    def note(self, message: str) -> None: ...

    def advance(self, outcome: Outcome) -> None: ...

    def close(self) -> None: ...


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class _Counts:
    """Shared arithmetic of the bar and the lines."""

    def start(self, name: str, n_total: int, n_done: int, todo_cost: float) -> None:
        self.name, self.n_total, self.n_resumed = name, n_total, n_done
        self.n_finished = self.n_failed = 0
        self.cost_left, self.cost_done = float(todo_cost), 0.0
        self.started = time.monotonic()

    def count(self, outcome: Outcome) -> None:
        self.n_finished += 1
        self.n_failed += outcome.error is not None
        cost = float(outcome.cell.cost)
        self.cost_done += cost
        self.cost_left = max(self.cost_left - cost, 0.0)

    @property
    def done(self) -> int:
        return self.n_resumed + self.n_finished

    def times(self) -> str:
        elapsed = time.monotonic() - self.started
        left = "--:--" if self.cost_done <= 0 else _clock(elapsed * self.cost_left / self.cost_done)
        failed = f", {self.n_failed} failed" if self.n_failed else ""
        return f"{_clock(elapsed)} elapsed, ~{left} left{failed}"


class ProgressLines(_Counts):
    """One plain line per event, through ``write`` (default: print to stderr)."""

    def __init__(self, write: Callable[[str], None] | None = None) -> None:
        self.write = write or (lambda line: print(line, file=sys.stderr, flush=True))

    def start(self, name: str, n_total: int, n_done: int, todo_cost: float) -> None:
        super().start(name, n_total, n_done, todo_cost)
        self.write(f"{name}: {n_total} cells ({n_done} already done), {n_total - n_done} to run")

    def note(self, message: str) -> None:
        self.write(message)

    def advance(self, outcome: Outcome) -> None:
        self.count(outcome)
        what = f"FAILED {outcome.error}" if outcome.error else f"{outcome.seconds:.1f} s"
        self.write(f"[{self.done}/{self.n_total}] {outcome.cell.label}: {what} ({self.times()})")

    def close(self) -> None:
        pass


class ProgressBar(_Counts):
    """A bar redrawn in place on a terminal (once a second, and at every event)."""

    def __init__(self, stream: TextIO, width: int = 24) -> None:
        self.stream, self.width = stream, width
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, name: str, n_total: int, n_done: int, todo_cost: float) -> None:
        super().start(name, n_total, n_done, todo_cost)
        self._draw()
        self._thread = threading.Thread(target=self._tick, name="grid-progress", daemon=True)
        self._thread.start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self._draw()

    def _draw(self, end: str = "") -> None:
        share = self.done / self.n_total if self.n_total else 1.0
        filled = int(round(share * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        with self._lock:
            self.stream.write(f"\r\x1b[2K{self.name} [{bar}] {self.done}/{self.n_total} cells, {self.times()}{end}")
            self.stream.flush()

    def note(self, message: str) -> None:
        with self._lock:
            self.stream.write(f"\r\x1b[2K{message}\n")
        self._draw()

    def advance(self, outcome: Outcome) -> None:
        self.count(outcome)
        if outcome.error is not None:
            self.note(f"{outcome.cell.label}: FAILED {outcome.error}")
        else:
            self._draw()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            self._draw(end="\n")


def make_progress(stream: TextIO | None = None) -> Progress:
    """A :class:`ProgressBar` when ``stream`` (default stderr) is a terminal, else :class:`ProgressLines`."""
    stream = stream or sys.stderr
    if stream.isatty():
        return ProgressBar(stream)
    return ProgressLines(lambda line: print(line, file=stream, flush=True))


class Silent:
    """No progress output."""

    def start(self, name: str, n_total: int, n_done: int, todo_cost: float) -> None:
        pass

    def note(self, message: str) -> None:
        pass

    def advance(self, outcome: Outcome) -> None:
        pass

    def close(self) -> None:
        pass
