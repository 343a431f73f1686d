"""A site's append-only ledger, kept on its own disk.

One JSON object per line; every entry carries a sequence number, the time and the
SHA-256 of the previous line, so an edited or reordered file is detected when the site
starts.  Each entry is written before the answer it records leaves the site, and
``fsync``-ed when it records something a restart must not lose (a charge, an answer, a
session, a schedule), so a crash can lose only an answer that was never given (a torn
last line, which is dropped on reload) or the line of a refusal that charged nothing.  The site rebuilds everything that must survive a restart from
here: the declared schedule, open sessions (token hashes only), the budget used, the
final answers given per unit, Thresholdout's inputs and the guard's prediction bits.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from raytune_fed.errors import ConfigError

GENESIS = "0" * 64


class SiteLedger:
    """Entries in memory, mirrored to ``path`` (JSON lines) when a path is given."""

    def __init__(self, path: str | os.PathLike | None) -> None:
        self.path = None if path is None else Path(path)
        self.entries: list[dict[str, Any]] = []
        self._last = GENESIS
        self._lock = threading.Lock()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                self._load()
        self._file = None if self.path is None else open(self.path, "ab")

    def _load(self) -> None:
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        torn = lines.pop()  # after a final newline this is b""; otherwise a torn write
        if torn:
            with open(self.path, "r+b") as f:  # drop the torn tail so new lines start clean
                f.truncate(len(raw) - len(torn))
                f.flush()
                os.fsync(f.fileno())
        for number, line in enumerate(lines, 1):
            try:
                entry = json.loads(line)
            except ValueError:
                raise ConfigError(f"ledger {self.path.name!r}: line {number} is not JSON; the ledger is damaged") \
                    from None
            if not isinstance(entry, dict) or entry.get("prev") != self._last or entry.get("seq") != number - 1:
                raise ConfigError(f"ledger {self.path.name!r}: line {number} breaks the hash chain; "
                                  f"the ledger was edited or reordered")
            self._last = hashlib.sha256(line).hexdigest()
            self.entries.append(entry)

    def append(self, event: str, *, sync: bool = True, **fields: Any) -> dict[str, Any]:
        """Record ``event`` with ``fields`` (JSON values); returns the stored entry.

        ``sync=False`` skips the ``fsync`` (the line is written and flushed; the next synced
        line makes it durable too).
        """
        with self._lock:
            entry = {"seq": len(self.entries), "time": time.time(), "prev": self._last, "event": event, **fields}
            line = json.dumps(entry, separators=(",", ":"), allow_nan=False).encode()
            if self._file is not None:
                self._file.write(line + b"\n")
                self._file.flush()
                if sync:
                    os.fsync(self._file.fileno())
            self._last = hashlib.sha256(line).hexdigest()
            self.entries.append(entry)
            return entry
