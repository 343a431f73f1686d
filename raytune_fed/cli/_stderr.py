"""Keep Ray's own C++ log lines off the command line's stderr.

Ray's core worker in this process writes glog-style lines (``[2026-01-01 12:00:00,000 E
123 123] core_worker.cc:2465: ...``) straight to file descriptor 2, below Python's
logging, so neither ``log_to_driver=False`` nor a logging level reaches them.  While a
command runs, fd 2 is a pipe: a thread passes every other line through to the real
stderr unchanged and in order, and appends Ray's lines to ``ray_driver.log`` in Ray's
session log directory (or the system's temporary directory before a session exists), so
nothing is lost.  Fatal lines (``F``) are passed through.

Whether stderr is a terminal is decided before the pipe goes in: when it is, the filter
keeps :attr:`RayLineFilter.terminal`, a stream on the real terminal, for the progress bar
(the pipe passes whole lines only, and is no terminal); the lines it passes through then
clear the bar's line first, and the bar redraws below them.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from pathlib import Path
from typing import TextIO

from raytune_fed import _ray_internals

RAY_LINE = re.compile(rb"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [DIWE] \d+ \d+\] ")


def _log_dir() -> Path:
    try:
        if "ray" not in sys.modules:  # no session can exist yet, and importing Ray here would cost seconds
            raise AttributeError
        return Path(_ray_internals.session_dir()) / "logs"
    except AttributeError:
        return Path(tempfile.gettempdir())


_CLEAR_LINE = b"\r\x1b[2K"  # back to the line's start and erase it (the progress bar's line)


def _stderr_is_terminal() -> bool:
    """True when ``sys.stderr`` writes to fd 2 and fd 2 is a terminal (not when a caller redirected it)."""
    try:
        return sys.stderr.fileno() == 2 and os.isatty(2)
    except (AttributeError, OSError, ValueError):  # a StringIO in tests: no fileno
        return False


def quiet_optuna() -> None:
    """Optuna's INFO lines ("A new study created ...", one per trial) stay off the command line."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)


class RayLineFilter:
    """Context manager: fd 2 filtered as described in the module notes.

    ``terminal`` is a text stream on the real terminal while the filter is on, when stderr
    was one (else None)."""

    terminal: TextIO | None = None

    def __enter__(self) -> RayLineFilter:
        sys.stderr.flush()
        self._on_terminal = _stderr_is_terminal()
        self._saved = os.dup(2)
        self.terminal = os.fdopen(os.dup(self._saved), "w", encoding="utf-8", errors="replace") \
            if self._on_terminal else None
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self._thread = threading.Thread(target=self._pump, args=(read,), name="stderr-filter", daemon=True)
        self._thread.start()
        return self

    def _pump(self, read: int) -> None:
        pending = b""
        with os.fdopen(read, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._route(line + b"\n")
        if pending:
            self._route(pending)

    def _route(self, line: bytes) -> None:
        if RAY_LINE.match(line):
            try:
                directory = _log_dir()
                directory.mkdir(parents=True, exist_ok=True)
                with open(directory / "ray_driver.log", "ab") as log:
                    log.write(line)
                return
            except OSError:
                pass
        os.write(self._saved, _CLEAR_LINE + line if self._on_terminal else line)

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self._saved, 2)          # closes the pipe's last write end: the thread reads to the end
        self._thread.join(timeout=10)
        if self.terminal is not None:
            self.terminal.close()
            self.terminal = None
        os.close(self._saved)
