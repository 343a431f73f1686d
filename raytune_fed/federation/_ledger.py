"""A site's append-only ledger, kept on its own disk.

One JSON object per line; every entry carries a sequence number, the time and the
SHA-256 of the previous line, so an edited or reordered file is detected when the site
starts.  Each entry is written before the answer it records leaves the site, and
``fsync``-ed when it records something a restart must not lose (a charge, an answer, a
session, a schedule), so a crash can lose only an answer that was never given (a torn
last line, which is dropped on reload) or the line of a refusal that charged nothing.  The site rebuilds everything that must survive a restart from
here: the declared schedule, open sessions (token hashes only), the budget used, the
final answers given per unit, Thresholdout's inputs and the guard's prediction bits.

Because the budget lives here, the site guards the file over its life:

* **One site per ledger.** The site holds an exclusive lock (``flock``) on the file while
  it runs; a second site started on the same ledger (a second service, an actor beside a
  service, a restarted process while the old one still runs) refuses to start, instead of
  answering the same budget twice and interleaving two hash chains.
* **No silent rollback.** Beside the ledger, ``<ledger>.head`` holds the number and hash
  of the last line made durable (replaced atomically after each ``fsync``).  A ledger
  that is missing, shorter than its head or different at the head's line (truncated,
  deleted, or an older copy put back while the site was down) stops the site with an
  error that says so; only the owner deleting the head file as well starts the site's
  life anew.  What it cannot see: the ledger and its head both deleted, or both rolled
  back together; the site's disk is its owner's.
"""

from __future__ import annotations

import fcntl
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
        self._file = None
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.head = self.path.with_name(self.path.name + ".head")
        existed = self.path.exists()
        self._file = open(self.path, "ab")
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.close()
            raise ConfigError(f"ledger {self.path.name!r} is in use by another running site; a ledger serves one "
                              f"site process at a time (stop the other first)") from None
        try:
            head = self._read_head()
            if head is not None and not existed:
                self.path.unlink()
                raise ConfigError(f"ledger {self.path.name!r} is missing, but its head file says it held "
                                  f"{head[0] + 1} entries: put the ledger back (or delete {self.head.name!r} to "
                                  f"start the site's life anew)")
            hashes = self._load()
            if head is not None and (len(hashes) <= head[0] or hashes[head[0]] != head[1]):
                raise ConfigError(f"ledger {self.path.name!r} does not reach its head ({len(hashes)} entries, the head "
                                  f"says {head[0] + 1}): it was truncated or an older copy was put back; restore it "
                                  f"(or delete {self.head.name!r} to start the site's life anew)")
            if hashes and head != (len(hashes) - 1, hashes[-1]):
                self._write_head()
        except BaseException:
            self.close()
            raise

    def _read_head(self) -> tuple[int, str] | None:
        try:
            raw = self.head.read_bytes()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(raw)
            seq, digest = data["seq"], data["sha256"]
            if type(seq) is not int or seq < 0 or not isinstance(digest, str):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            raise ConfigError(f"the ledger's head file {self.head.name!r} is damaged; if the machine crashed, "
                              f"delete it to accept the ledger as it is") from None
        return seq, digest

    def _write_head(self) -> None:
        """Record the last line as durable (called after its ``fsync``): written beside, then renamed."""
        tmp = self.head.with_name(self.head.name + ".tmp")
        tmp.write_text(json.dumps({"seq": len(self.entries) - 1, "sha256": self._last}))
        os.replace(tmp, self.head)

    def close(self) -> None:
        """Release the ledger (and its lock): the site's process ending does the same."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def _load(self) -> list[str]:
        raw = self.path.read_bytes()
        hashes: list[str] = []
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
            hashes.append(self._last)
            self.entries.append(entry)
        return hashes

    def append(self, event: str, *, sync: bool = True, **fields: Any) -> dict[str, Any]:
        """Record ``event`` with ``fields`` (JSON values); returns the stored entry.

        ``sync=False`` skips the ``fsync`` (the line is written and flushed; the next synced
        line makes it durable too).
        """
        with self._lock:
            if self.path is not None and self._file is None:
                raise ConfigError(f"ledger {self.path.name!r} is closed: its site no longer answers")
            entry = {"seq": len(self.entries), "time": time.time(), "prev": self._last, "event": event, **fields}
            line = json.dumps(entry, separators=(",", ":"), allow_nan=False).encode()
            if self._file is not None:
                self._file.write(line + b"\n")
                self._file.flush()
                if sync:
                    os.fsync(self._file.fileno())
            self._last = hashlib.sha256(line).hexdigest()
            self.entries.append(entry)
            if self._file is not None and sync:
                self._write_head()
            return entry
