"""A site's append-only ledger, kept on its own disk.

One JSON object per line; every entry carries a sequence number, the time and the
SHA-256 of the previous line, so an edited or reordered file is detected when the site
starts.  Each entry is written before the answer it records leaves the site, and
``fsync``-ed when it records something a restart must not lose (a charge, an answer, a
session, a schedule), so a crash can lose only an answer that was never given (a torn
last line) or the line of a refusal that charged nothing.  The site rebuilds everything
that must survive a restart from here: the declared schedule, open sessions (token hashes
only), the budget used, the final answers given per unit, Thresholdout's inputs and the
guard's prediction bits.  The ledger and its head file are created readable by the owner
only (mode 0600).

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
* **Checked before used, never changed by reading.** The whole file is read and every
  line checked (:mod:`~raytune_fed.federation._ledger_format`: the chain, and each line's
  fields, sessions, request numbers and charges) before the site uses it or writes to
  it; a file that fails stays byte for byte as it was and the site does not start.  A
  last line without its newline is dropped (the file cut back to the last good line)
  only after that check passes, when the head file agrees with the lines before it and
  the fragment begins as the ledger's next line would: the site's own append cut short
  by a crash.  Anything else there (a file that is not a ledger, a one-line file with no
  head) is refused.
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
from raytune_fed.federation._ledger_format import GENESIS, encode, parse_ledger, start_of_line

FILE_MODE = 0o600
"""The ledger and its head file are the owner's alone (created so; an existing file keeps its mode)."""


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
        self._shown = os.fspath(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.head = self.path.with_name(self.path.name + ".head")
        head = self._read_head()
        if head is not None and not self.path.exists():
            raise ConfigError(f"ledger {self._shown!r} is missing, but its head file says it held {head[0] + 1} "
                              f"entries: put the ledger back (or delete {self.head.name!r} to start the site's "
                              f"life anew)")
        self._file = os.fdopen(os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE), "ab",
                               buffering=0)  # unbuffered: a failed append is cut off again, see append()
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.close()
            raise ConfigError(f"ledger {self._shown!r} is in use by another running site; a ledger serves one "
                              f"site process at a time (stop the other first)") from None
        try:
            self._load(head)
        except BaseException:
            self.close()
            raise

    def _load(self, head: tuple[int, str] | None) -> None:
        """Read and check the whole file, then (only then) drop a torn last line and update the head."""
        if self.path is None or self._file is None:
            raise RuntimeError("SiteLedger._load needs the ledger's path and open file")
        ledger = parse_ledger(self.path.read_bytes(), self._shown)
        hashes, n = ledger.hashes, len(ledger.hashes)
        if head is not None and (n <= head[0] or hashes[head[0]] != head[1]):
            raise ConfigError(f"ledger {self._shown!r} does not reach its head ({n} entries, the head says "
                              f"{head[0] + 1}): it was truncated or an older copy was put back; restore it (or "
                              f"delete {self.head.name!r} to start the site's life anew)")
        if ledger.torn:
            self._check_torn(ledger.torn, n, head)
        self.entries, self._last = ledger.entries, hashes[-1] if hashes else GENESIS
        if ledger.torn:  # the site's own write, cut short by a crash: new lines start after the last good one
            os.ftruncate(self._file.fileno(), ledger.n_bytes)
            os.fsync(self._file.fileno())
        if hashes and head != (n - 1, hashes[-1]):
            self._write_head()

    def _check_torn(self, torn: bytes, n: int, head: tuple[int, str] | None) -> None:
        """A last line without its newline is dropped only as the ledger's own interrupted append: after a
        checked ledger its head file vouches for, and starting the way the ledger's next line would."""
        expected = start_of_line(n)
        if head is None or not expected.startswith(torn[:len(expected)]):
            why = "it has no head file to vouch for the lines before" if head is None else \
                f"it does not begin the way entry {n} would"
            raise ConfigError(f"ledger {self._shown!r}: line {n + 1} has no newline and is not an append the site "
                              f"cut short ({why}); the file is not a ledger, or it was edited (if the site crashed "
                              f"before its first durable line, delete the ledger). The file was not changed")

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
            raise ConfigError(f"the ledger's head file {os.fspath(self.head)!r} is damaged; if the machine crashed, "
                              f"delete it to accept the ledger as it is") from None
        return seq, digest

    def _write_head(self) -> None:
        """Record the last line as durable (called after its ``fsync``): written beside, then renamed."""
        tmp = self.head.with_name(self.head.name + ".tmp")
        tmp.unlink(missing_ok=True)  # a crash's leftover: created anew, with the owner-only mode
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE), "w") as f:
            f.write(json.dumps({"seq": len(self.entries) - 1, "sha256": self._last}))
        os.replace(tmp, self.head)

    def close(self) -> None:
        """Release the ledger (and its lock): the site's process ending does the same."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def append(self, event: str, *, sync: bool = True, **fields: Any) -> dict[str, Any]:
        """Record ``event`` with ``fields`` (JSON values); returns the stored entry.

        ``sync=False`` skips the ``fsync`` (the line is written and flushed; the next synced
        line makes it durable too).
        """
        with self._lock:
            if self.path is not None and self._file is None:
                raise ConfigError(f"ledger {self._shown!r} is closed: its site no longer answers")
            entry = {"seq": len(self.entries), "time": time.time(), "prev": self._last, "event": event, **fields}
            line = encode(entry)
            previous = self._last
            end = None if self._file is None else os.fstat(self._file.fileno()).st_size
            try:
                if self._file is not None:
                    data = memoryview(line + b"\n")
                    while data:
                        data = data[self._file.write(data):]
                    if sync:
                        os.fsync(self._file.fileno())
                self._last = hashlib.sha256(line).hexdigest()
                self.entries.append(entry)
                if self._file is not None and sync:
                    self._write_head()
            except OSError:  # e.g. a full disk: the line is cut off again, so no later line follows half of it
                if self.entries and self.entries[-1] is entry:
                    self.entries.pop()
                self._last = previous
                if self._file is None or end is None:  # only the file's own writes raise OSError
                    raise
                os.ftruncate(self._file.fileno(), end)
                self.head.with_name(self.head.name + ".tmp").unlink(missing_ok=True)
                raise
            return entry
