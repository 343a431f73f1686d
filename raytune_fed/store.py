"""A results store that a grid can resume from, and that says which of its files it cannot trust.

Layout of a store directory ``ROOT``::

    ROOT/units/<key>.json        one finished cell (its record), written once and atomically
    ROOT/failures/<key>.json     the last error of a cell that raised or could not be placed
    ROOT/quarantine/             damaged unit files moved aside before their cell is recomputed

``<key>`` is :func:`config_key` of the cell's configuration.  A record holds the
configuration, the rows (the cell's results), their count and SHA-256 checksum, and
separately the timing of each row.  Timings are measurements, never compared: two runs
of the same cell that produced the same rows are the same result however long they took.

Every record is checked when it is read: it must parse as a JSON object with every field,
belong to the key in its file name, have a configuration that hashes to that key, and
hold exactly the rows its count and checksum describe.  A file that fails any check is
*damaged*: :meth:`ResultStore.inspect` says why, and :meth:`ResultStore.quarantine`
moves it aside so its cell can be computed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from raytune_fed.errors import StoreError

FORMAT = 2
_FIELDS = ("format", "key", "config", "n_rows", "checksum", "rows", "timing")


def config_key(config: Mapping[str, Any]) -> str:
    """Stable key of a configuration: SHA-256 of its canonical JSON (sorted keys)."""
    return hashlib.sha256(_canonical(config).encode()).hexdigest()[:32]


def rows_checksum(rows: Sequence[Mapping[str, Any]]) -> str:
    """SHA-256 of the canonical JSON of ``rows`` (what a record's ``checksum`` holds)."""
    return hashlib.sha256(_canonical(rows).encode()).hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_jsonable, allow_nan=True)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist"):  # numpy arrays
        return value.tolist()
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    raise TypeError(f"value {value!r} of type {type(value).__name__} cannot be stored as JSON")


def _as_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists, numpy scalars floats)."""
    return json.loads(_canonical(value))


def as_stored(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` as a record holds them once written and read back (what a cell's row checks see)."""
    return _as_json([dict(r) for r in rows])


@dataclass(frozen=True)
class Record:
    """One finished cell as stored: its configuration, rows and per-row timings."""

    key: str
    config: dict[str, Any]
    rows: list[dict[str, Any]]
    timing: list[dict[str, Any]]


@dataclass(frozen=True)
class CellState:
    """What the store holds for one key: ``done``, ``missing`` or ``damaged`` (with the reason)."""

    key: str
    state: Literal["done", "missing", "damaged"]
    path: Path
    reason: str = ""


class _Damaged(Exception):
    pass


class StoreWriteError(StoreError):
    """A file of the store (or of a run's output) could not be written: the disk is full, read-only, or
    the place is not writable.  Nothing half-written is left behind (see :func:`write_atomic`);
    ``path`` is the file and ``errno`` the system's error number."""

    def __init__(self, path: str | os.PathLike, exc: OSError) -> None:
        self.path, self.errno = Path(path), exc.errno
        super().__init__(f"cannot write {os.fspath(path)}: {describe_os_error(exc)}")


def describe_os_error(exc: OSError) -> str:
    """What went wrong in the system's words, lower case (``"no space left on device"``)."""
    text = exc.strerror or (os.strerror(exc.errno) if exc.errno else "") or str(exc) or type(exc).__name__
    return text[:1].lower() + text[1:]


class ResultStore:
    """Directory of finished cells, their failures and quarantined files (see the module notes)."""

    def __init__(self, root: str | os.PathLike) -> None:
        """Open (creating it if needed) a store at ``root``; refuse a place it cannot write to."""
        if not isinstance(root, (str, os.PathLike)) or not os.fspath(root).strip():
            raise StoreError(f"output directory must be a non-empty path, got {root!r}")
        self.root = Path(root)
        self.units = self.root / "units"
        self.failures_dir = self.root / "failures"
        self.quarantine_dir = self.root / "quarantine"
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"output directory {str(self.root)!r} is an existing file, not a directory")
        made = []  # the folders this creates, deepest first: removed again if the store cannot be written
        place = self.units
        while not place.exists() and place != place.parent:
            made.append(place)
            place = place.parent
        try:
            self.units.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=self.units, prefix=".probe.", suffix=".tmp")
            try:  # a block's worth: a full disk refuses it, where creating an empty file still works
                os.write(fd, bytes(4096))
            finally:
                os.close(fd)
                os.unlink(probe)
        except OSError as exc:
            for folder in made:
                try:
                    folder.rmdir()
                except OSError:
                    break
            raise StoreError(f"cannot write results under {str(self.root)!r}: {describe_os_error(exc)}") from None

    def path(self, key: str) -> Path:
        return self.units / f"{key}.json"

    # ------------------------------------------------------------------ reading
    def inspect(self, key: str, check: Callable[[list[dict[str, Any]]], str | None] | None = None) -> CellState:
        """Whether ``key`` is stored, missing, or stored in a file that fails its checks.

        ``check(rows)`` adds the caller's own checks of a record's rows (a grid cell's: one
        row per method, finite values, ...): a reason it returns makes the file damaged.
        A record edited consistently (rows dropped or changed, the checksum recomputed)
        passes the store's checks and is caught only there.
        """
        path = self.path(key)
        if not path.exists():
            return CellState(key, "missing", path)
        try:
            record = self._read(path, key)
        except _Damaged as exc:
            return CellState(key, "damaged", path, str(exc))
        reason = check(record.rows) if check is not None else None
        if reason:
            return CellState(key, "damaged", path, f"its rows fail the cell's checks: {reason}")
        return CellState(key, "done", path)

    def has(self, config: Mapping[str, Any]) -> bool:
        """True when the cell of ``config`` is stored and its file passes every check."""
        return self.inspect(config_key(config)).state == "done"

    def load(self, key: str) -> Record:
        """The checked record of ``key``; :class:`StoreError` names the file if it is missing or damaged."""
        path = self.path(key)
        if not path.exists():
            raise StoreError(f"no unit file {path.name} in {self.units}")
        try:
            return self._read(path, key)
        except _Damaged as exc:
            raise StoreError(damaged_message(path, str(exc))) from None

    def _read(self, path: Path, key: str) -> Record:
        try:
            record = json.loads(path.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _Damaged(f"it is not readable JSON (truncated or overwritten?): {exc}") from None
        if not isinstance(record, dict):
            raise _Damaged(f"it holds a JSON {type(record).__name__}, not a unit record")
        missing = [f for f in _FIELDS if f not in record]
        if missing:
            raise _Damaged(f"it lacks the field(s) {missing}")
        if record["format"] != FORMAT:
            raise _Damaged(f"it is in format {record['format']!r}; this version reads format {FORMAT}")
        if record["key"] != key:
            raise _Damaged(f"it holds the record of another cell ({record['key']!r}), not of {key!r}")
        config, rows, timing = record["config"], record["rows"], record["timing"]
        if not isinstance(config, dict) or config_key(config) != key:
            raise _Damaged("its configuration does not hash to its file name (edited or copied from elsewhere?)")
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise _Damaged("its rows are not a list of objects")
        if len(rows) != record["n_rows"] or not rows:
            raise _Damaged(f"it holds {len(rows)} row(s) where its header says {record['n_rows']!r}")
        if rows_checksum(rows) != record["checksum"]:
            raise _Damaged("its rows do not match their checksum (edited after they were written?)")
        if not isinstance(timing, list) or len(timing) != len(rows) or not all(isinstance(t, dict) for t in timing):
            raise _Damaged("its timing is not one object per row")
        return Record(key, config, rows, timing)

    def __len__(self) -> int:
        return sum(1 for _ in self.units.glob("*.json"))

    # ------------------------------------------------------------------ writing
    def put(self, config: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
            timing: Sequence[Mapping[str, Any]] | None = None) -> str:
        """Store the rows of one finished cell (and their timings); returns its key.

        Writing a key again with the same rows is a no-op whatever the timings (two drivers
        on one store agree); with other rows it raises :class:`StoreError`.  A damaged file
        under the key is moved to the quarantine first.
        """
        key = config_key(config)
        rows_json = _as_json([dict(r) for r in rows])
        if not rows_json:
            raise StoreError(f"cell {key}: a finished cell must have at least one row")
        timing_json = _as_json([dict(t) for t in timing] if timing is not None else [{} for _ in rows_json])
        if len(timing_json) != len(rows_json):
            raise StoreError(f"cell {key}: {len(timing_json)} timing entries for {len(rows_json)} rows")
        checksum = rows_checksum(rows_json)
        state = self.inspect(key)
        if state.state == "done":
            if rows_checksum(self._read(state.path, key).rows) != checksum:
                raise StoreError(f"cell {key} is already stored with different rows (config {dict(config)!r}); "
                                 f"the same configuration must give the same numbers")
            return key
        if state.state == "damaged":
            self.quarantine(key)
        record = {"format": FORMAT, "key": key, "config": _as_json(dict(config)), "n_rows": len(rows_json),
                  "checksum": checksum, "rows": rows_json, "timing": timing_json}
        text = json.dumps(record, sort_keys=True, allow_nan=True)
        write_atomic(self.path(key), lambda tmp: Path(tmp).write_text(text), fsync=True)
        return key

    def quarantine(self, key: str) -> Path:
        """Move the unit file of ``key`` to ``quarantine/`` (stamped with the time); returns its new path."""
        target = self.quarantine_dir / f"{key}.json.{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        try:
            self.quarantine_dir.mkdir(exist_ok=True)
            os.replace(self.path(key), target)
        except OSError as exc:
            raise StoreWriteError(target, exc) from None
        return target

    # ------------------------------------------------------------------ failures
    def record_failure(self, config: Mapping[str, Any], *, label: str, kind: str, error_type: str,
                       message: str) -> Path:
        """Keep the last error of a cell (a rerun retries the cell; success removes the file)."""
        key = config_key(config)
        entry = {"key": key, "label": label, "kind": kind, "error_type": error_type, "message": message,
                 "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "config": _as_json(dict(config))}
        path = self.failures_dir / f"{key}.json"
        write_atomic(path, lambda tmp: Path(tmp).write_text(json.dumps(entry, indent=1, allow_nan=True)))
        return path

    def clear_failure(self, key: str) -> None:
        try:
            (self.failures_dir / f"{key}.json").unlink()
        except FileNotFoundError:
            pass

    def failed_keys(self) -> set[str]:
        """Keys of cells whose last attempt failed (and that no later attempt finished)."""
        if not self.failures_dir.is_dir():
            return set()
        return {p.stem for p in self.failures_dir.glob("*.json")}


def damaged_message(path: Path, reason: str) -> str:
    """How a damaged unit file is reported: its path, what is wrong, and what to do."""
    return (f"unit file {path} is damaged: {reason}; rerun with --recompute-damaged (recompute_damaged=True) "
            f"to move it to {path.parent.parent / 'quarantine'} and compute its cell again")


def write_atomic(path: str | os.PathLike, write: Callable[[str], Any], *, fsync: bool = False) -> None:
    """Call ``write(tmp_path)`` and move the finished file into place in one step.

    A failure to write (a full disk, a read-only place) raises :class:`StoreWriteError` naming
    ``path``; the temporary file is removed, so ``path`` holds its old content or nothing.
    """
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        write(tmp)
        if fsync:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
        os.replace(tmp, path)
    except OSError as exc:
        raise StoreWriteError(path, exc) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
