"""A results store that a grid can resume from.

Each finished experiment unit is one JSON file named by the SHA-256 of its full
configuration, written once and atomically (temporary file, fsync, ``os.replace``), so a
crash never leaves a half-written unit that looks complete and a rerun skips exactly the
units already on disk.  Writing a key again with the same rows is a no-op; with other rows
it is an error (the same configuration must give the same numbers).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pandas as pd

from raytune_fed.errors import StoreError

_FORMAT = 1


def config_key(config: Mapping[str, Any]) -> str:
    """Stable key of a configuration: SHA-256 of its canonical JSON (sorted keys)."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=_jsonable)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    raise TypeError(f"value {value!r} of type {type(value).__name__} cannot be stored as JSON")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


class ResultStore:
    """Directory of finished units: ``<root>/units/<key>.json``."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.units = self.root / "units"
        self.units.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.units / f"{key}.json"

    def has(self, config: Mapping[str, Any]) -> bool:
        return self._path(config_key(config)).exists()

    def put(self, config: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
        """Store the rows of one finished unit; returns its key."""
        key = config_key(config)
        record = {"format": _FORMAT, "key": key, "config": dict(config), "rows": [dict(r) for r in rows]}
        text = json.dumps(record, sort_keys=True, default=_jsonable, allow_nan=True)
        path = self._path(key)
        if path.exists():
            old = self._read(path)
            if not _same(old["rows"], json.loads(text)["rows"]):
                raise StoreError(f"unit {key} is already stored with different rows (config {dict(config)!r})")
            return key
        fd, tmp = tempfile.mkstemp(dir=self.units, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return key

    def _read(self, path: Path) -> dict[str, Any]:
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise StoreError(f"unit file {path.name} in {self.units} is unreadable: {exc}") from exc
        if record.get("format") != _FORMAT or record.get("key") != config_key(record.get("config", {})):
            raise StoreError(f"unit file {path.name} in {self.units} does not match its configuration")
        return record

    def records(self) -> Iterator[dict[str, Any]]:
        for path in sorted(self.units.glob("*.json")):
            yield self._read(path)

    def __len__(self) -> int:
        return sum(1 for _ in self.units.glob("*.json"))

    def frame(self) -> pd.DataFrame:
        """All stored rows, one per row of every unit, in key order."""
        rows = [{**r, "unit_key": rec["key"]} for rec in self.records() for r in rec["rows"]]
        return pd.DataFrame(rows)


def write_atomic(path: str | os.PathLike, write: Any) -> None:
    """Call ``write(tmp_path)`` and move the finished file into place in one step."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
