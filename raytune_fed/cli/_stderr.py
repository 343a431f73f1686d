"""Keep Ray's own C++ log lines off the command line's stderr.

Ray's core worker in this process writes glog-style lines (``[2026-01-01 12:00:00,000 E
123 123] core_worker.cc:2465: ...``) straight to file descriptor 2, below Python's
logging, so neither ``log_to_driver=False`` nor a logging level reaches them.  While a
command runs, fd 2 is a pipe: a thread passes every other line through to the real
stderr unchanged and in order, and appends Ray's lines to ``ray_driver.log`` in Ray's
session log directory (or the system's temporary directory before a session exists), so
nothing is lost.  Fatal lines (``F``) are passed through.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from pathlib import Path

RAY_LINE = re.compile(rb"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [DIWE] \d+ \d+\] ")


def _log_dir() -> Path:
    ray = sys.modules.get("ray")
    try:
        return Path(ray._private.worker.global_worker.node.get_session_dir_path()) / "logs"
    except AttributeError:
        return Path(tempfile.gettempdir())


class RayLineFilter:
    """Context manager: fd 2 filtered as described in the module notes."""

    def __enter__(self) -> "RayLineFilter":
        sys.stderr.flush()
        self._saved = os.dup(2)
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
        os.write(self._saved, line)

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self._saved, 2)          # closes the pipe's last write end: the thread reads to the end
        self._thread.join(timeout=10)
        os.close(self._saved)
