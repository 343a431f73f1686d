"""Datasets from the user's own files: ``.csv``, ``.csv.gz`` or ``.parquet``.

The file is read with pandas and then goes through the same encoding and checks as
every other dataset (:func:`~raytune_fed.data._validate.dataset_from_frame`).  The
dataset is named after the file (``path/to/cohort.csv`` -> ``"cohort.csv"``).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from raytune_fed.data._validate import Dataset, dataset_from_frame, describe_columns
from raytune_fed.errors import DatasetError

FILE_SUFFIXES = (".csv", ".csv.gz", ".parquet")


def file_suffix(path: str | os.PathLike) -> str | None:
    """The supported suffix ``path`` ends with (case-insensitive), or ``None``."""
    lowered = os.fspath(path).lower()
    return next((s for s in sorted(FILE_SUFFIXES, key=len, reverse=True) if lowered.endswith(s)), None)


def _read_table(path: Path) -> pd.DataFrame:
    name = path.name
    suffix = file_suffix(path)
    if path.is_dir():
        raise DatasetError(f"dataset {name!r}: {os.fspath(path)!r} is a directory, not a data file")
    if suffix is None:
        raise DatasetError(
            f"dataset {name!r}: unknown file extension {''.join(path.suffixes) or '(none)'!r}; "
            f"expected one of {list(FILE_SUFFIXES)}")
    if not path.is_file():
        raise DatasetError(f"dataset {name!r}: file not found: {os.fspath(path)!r}")
    return _read(name, path, suffix)


def load_file(path: str | os.PathLike, *, target: str | None, site_column: str | None = None) -> Dataset:
    """Read a table and encode it; ``target`` names the label column (required)."""
    path = Path(path)
    name = path.name
    frame = _read_table(path)
    if target is None:
        raise DatasetError(
            f"dataset {name!r}: a file dataset needs target=<label column> (--target on the command "
            f"line); columns are {describe_columns(frame.columns)}")
    return dataset_from_frame(name, frame, target=target, site_column=site_column, source=f"file {name}")


def _read(name: str, path: Path, suffix: str) -> pd.DataFrame:
    if path.stat().st_size == 0:
        raise DatasetError(f"dataset {name!r}: the file is empty (0 bytes)")
    try:
        if suffix == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise DatasetError(f"dataset {name!r}: the file is empty (no header and no rows)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError, ValueError) as exc:
        kind = "Parquet" if suffix == ".parquet" else "CSV"
        raise DatasetError(f"dataset {name!r}: cannot read the file as {kind}: {exc}") from None


def read_npz(path: str | os.PathLike, names: Sequence[str]) -> tuple[np.ndarray, ...]:
    """Arrays ``names`` of an ``.npz`` file, read without unpickling anything."""
    where = f"cannot read arrays {' and '.join(names)} from {os.fspath(path)!r}"
    try:
        with open(path, "rb") as f:
            zipped = f.read(4) in (b"PK\x03\x04", b"PK\x05\x06")  # else np.load reads .npy, pickle or nothing
        if zipped:
            with np.load(path, allow_pickle=False) as data:
                return tuple(data[n] for n in names)
    except (OSError, KeyError, ValueError) as exc:
        raise DatasetError(f"{where}: {exc}") from None
    except zipfile.BadZipFile as exc:
        raise DatasetError(f"{where}: not an .npz archive ({exc})") from None
    raise DatasetError(f"{where}: not an .npz archive (numpy.savez writes one)")


def load_features(path: str | os.PathLike, *, columns: Sequence[str] | None = None) -> np.ndarray:
    """A feature block without labels (a vertical party's columns): every column of the table, or
    ``columns`` in that order; each must be numeric and finite, and there must be >= 2 rows."""
    path = Path(path)
    name = path.name
    frame = _read_table(path)
    if columns is not None:
        missing = [c for c in columns if c not in frame.columns]
        if missing or not columns or len(set(columns)) != len(columns):
            raise DatasetError(f"dataset {name!r}: columns must name distinct columns of the file; unknown "
                               f"{missing}, asked {list(columns)}; columns are {describe_columns(frame.columns)}")
        frame = frame[list(columns)]
    if frame.shape[1] == 0 or frame.shape[0] < 2:
        raise DatasetError(f"dataset {name!r}: a feature block needs >= 2 rows and >= 1 column, "
                           f"got {frame.shape[0]} x {frame.shape[1]}")
    text = [str(c) for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])
            or pd.api.types.is_bool_dtype(frame[c])]
    if text:
        raise DatasetError(f"dataset {name!r}: feature columns must be numeric; not numeric: "
                           f"{describe_columns(text)}")
    X = frame.to_numpy(dtype=np.float64)
    bad = ~np.isfinite(X)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise DatasetError(f"dataset {name!r}: {int(bad.sum())} missing or infinite values (first: row {row}, "
                           f"column {str(frame.columns[col])!r})")
    return X
