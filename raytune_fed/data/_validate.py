"""The :class:`Dataset` record and the one place where raw tables become datasets.

Every loader (embedded files, generated sets, user files, OpenML) ends in
:func:`dataset_from_frame` or builds a :class:`Dataset` directly, and ``Dataset`` checks
itself when built.  So the rules below hold for every dataset the package hands out:

* ``X`` is float64, 2-D, finite; ``y`` holds int64 codes ``0..k-1`` with ``k >= 2`` and
  every class present; ``class_names[code]`` is the original label as a string.
* ``sites`` (optional) holds int64 codes ``0..s-1``; every site has at least
  :data:`MIN_ROWS_PER_CLASS_PER_SITE` rows of every class, so each site can be split
  and scored on its own.
* Arrays are read-only, so cached datasets cannot be corrupted by a caller.

Encoding rules for tables: numeric and boolean columns become floats; other columns
(text, categories) with at most :data:`MAX_CATEGORIES` distinct values are one-hot
encoded (a two-level column becomes a single 0/1 indicator of the level that sorts
last); anything else is an error that names the column, and so is a text column with
one value in every row (it carries no information; a constant numeric column is kept
and left to the learners' constant-feature filter, as scikit-learn's
``VarianceThreshold`` would drop it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from raytune_fed.errors import DatasetError

MAX_CATEGORIES = 50
MIN_ROWS_PER_CLASS_PER_SITE = 2


@dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    """A classification dataset, optionally split into data sites.

    ``sites[i]`` is the site code of row ``i`` and ``site_names[code]`` its name; both are
    ``None`` for a dataset without sites.  Instances are immutable and validated on
    construction (see the module docstring for the rules).
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    class_names: tuple[str, ...]
    sites: np.ndarray | None = None
    site_names: tuple[str, ...] | None = None
    source: str = ""

    def __post_init__(self) -> None:
        _check_dataset(self)

    def __repr__(self) -> str:
        return (f"Dataset(name={self.name!r}, n_rows={self.n_rows}, n_features={self.n_features}, "
                f"classes={list(self.class_names)}, n_sites={self.n_sites})")

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_classes(self) -> int:
        return len(self.class_names)

    @property
    def n_sites(self) -> int:
        return 0 if self.site_names is None else len(self.site_names)

    def binarize(self, positive: str | Iterable[str]) -> Dataset:
        """One-vs-rest copy: rows whose class is in ``positive`` get code 1, the rest 0.

        ``positive`` is a class name or several (as in :attr:`class_names`; a number is
        compared by its string form).  The new class names are ``("rest", "<a>+<b>")``.
        """
        wanted = [positive] if isinstance(positive, (str, int, np.integer)) else list(positive)
        wanted = [str(w) for w in wanted]
        unknown = [w for w in wanted if w not in self.class_names]
        if not wanted or unknown:
            raise DatasetError(
                f"dataset {self.name!r}: binarize(positive=...) needs class names from "
                f"{list(self.class_names)}, got {unknown or wanted!r}")
        codes = [self.class_names.index(w) for w in dict.fromkeys(wanted)]
        if len(codes) == self.n_classes:
            raise DatasetError(
                f"dataset {self.name!r}: binarize(positive={wanted!r}) makes every class positive, "
                "leaving no negative class")
        label = "+".join(self.class_names[c] for c in sorted(codes))
        return Dataset(
            name=f"{self.name}[{label}-vs-rest]",
            X=self.X,
            y=np.isin(self.y, codes).astype(np.int64),
            feature_names=self.feature_names,
            class_names=("rest", label),
            sites=self.sites,
            site_names=self.site_names,
            source=f"{self.source} (one-vs-rest: {label} positive)",
        )


def dataset_from_frame(
    name: str,
    frame: pd.DataFrame,
    *,
    target: str,
    site_column: str | None = None,
    drop: Sequence[str] = (),
    source: str = "",
) -> Dataset:
    """Encode a table into a :class:`Dataset`; ``target`` is the label column.

    ``site_column`` (optional) assigns rows to sites; ``drop`` lists columns to leave out
    (identifiers).  Raises :class:`DatasetError` naming the dataset, the problem and the
    offending column or value.
    """
    if frame.shape[1] == 0:
        raise DatasetError(f"dataset {name!r}: the table has no columns")
    if frame.shape[0] == 0:
        raise DatasetError(f"dataset {name!r}: the table has no rows (columns: {describe_columns(frame.columns)})")
    columns = [str(c) for c in frame.columns]
    duplicated = sorted({c for c in columns if columns.count(c) > 1})
    if duplicated:
        raise DatasetError(f"dataset {name!r}: duplicate column names {duplicated}")
    frame = frame.set_axis(columns, axis=1)
    for role, column in (("target", target), ("site", site_column)):
        if column is not None and column not in columns:
            raise DatasetError(
                f"dataset {name!r}: {role} column {column!r} not found; columns are {describe_columns(columns)}")
    if site_column is not None and site_column == target:
        raise DatasetError(f"dataset {name!r}: the site column and the target are the same column {target!r}")
    missing_drop = [c for c in drop if c not in columns]
    if missing_drop:
        raise DatasetError(
            f"dataset {name!r}: columns to drop {missing_drop} not found; columns are {describe_columns(columns)}")

    y, class_names = _encode_labels(name, f"target column {target!r}", frame[target])
    if len(class_names) < 2:
        raise DatasetError(
            f"dataset {name!r}: target column {target!r} has only one class ({class_names[0]!r}); "
            "need at least 2")
    sites = site_names = None
    if site_column is not None:
        sites, site_names = _encode_labels(name, f"site column {site_column!r}", frame[site_column])

    feature_columns = [c for c in columns if c not in {target, site_column, *drop}]
    if not feature_columns:
        raise DatasetError(f"dataset {name!r}: no feature columns left after removing target, site and "
                           f"dropped columns (columns: {describe_columns(columns)})")
    X, feature_names = _encode_features(name, frame[feature_columns])
    return Dataset(name=name, X=X, y=y, feature_names=feature_names, class_names=class_names,
                   sites=sites, site_names=site_names, source=source)


def describe_columns(columns: Iterable[object], limit: int = 20) -> str:
    """Column names for a message: all of them, or the first ``limit`` and the count."""
    names = [str(c) for c in columns]
    if len(names) <= limit:
        return str(names)
    return f"{names[:limit]} ... ({len(names)} in all)"


def encode_labels(name: str, what: str, values: pd.Series | np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """Codes ``0..k-1`` and the names of the ``k`` distinct values (numbers sort numerically)."""
    return _encode_labels(name, what, pd.Series(values))


def _encode_labels(name: str, what: str, series: pd.Series) -> tuple[np.ndarray, tuple[str, ...]]:
    n_missing = int(series.isna().sum())
    if n_missing:
        raise DatasetError(f"dataset {name!r}: {what} has {n_missing} missing values")
    if pd.api.types.is_numeric_dtype(series.dtype):
        values = series.to_numpy()
        if pd.api.types.is_float_dtype(series.dtype) and not np.isfinite(values).all():
            raise DatasetError(f"dataset {name!r}: {what} has non-finite values (inf)")
        levels, codes = np.unique(values, return_inverse=True)
        names = tuple(_format_level(v) for v in levels)
    else:
        levels, codes = np.unique(series.astype(str).to_numpy(dtype=object), return_inverse=True)
        as_numbers = pd.to_numeric(pd.Series(levels), errors="coerce").to_numpy(dtype=np.float64)
        if np.isfinite(as_numbers).all():  # number-like text ("2", "10") sorts numerically
            order = np.argsort(as_numbers, kind="stable")
            levels, codes = levels[order], np.argsort(order)[codes]
        names = tuple(str(v) for v in levels)
    if len(set(names)) != len(names):
        raise DatasetError(f"dataset {name!r}: {what} has distinct values with the same text {list(names)}")
    return codes.astype(np.int64).reshape(-1), names


def _format_level(value: object) -> str:
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value.item() if isinstance(value, np.generic) else value)


def _is_numeric(dtype: object) -> bool:
    return pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype)


def _encode_features(name: str, frame: pd.DataFrame) -> tuple[np.ndarray, tuple[str, ...]]:
    if all(_is_numeric(dtype) for dtype in frame.dtypes):  # fast path: one conversion
        X = frame.to_numpy(dtype=np.float64, na_value=np.nan)
        _check_finite(name, X, list(frame.columns))
        return X, tuple(frame.columns)
    blocks: list[np.ndarray] = []
    names: list[str] = []
    for column in frame.columns:
        series = frame[column]
        if _is_numeric(series.dtype):
            blocks.append(series.to_numpy(dtype=np.float64, na_value=np.nan)[:, None])
            names.append(column)
            continue
        n_missing = int(series.isna().sum())
        if n_missing:
            raise DatasetError(
                f"dataset {name!r}: non-numeric column {column!r} has {n_missing} missing values")
        text = series.astype(str).to_numpy(dtype=object)
        levels = np.unique(text)
        if len(levels) > MAX_CATEGORIES:
            raise DatasetError(
                f"dataset {name!r}: non-numeric column {column!r} has {len(levels)} distinct values "
                f"(more than {MAX_CATEGORIES}), so it cannot be one-hot encoded; drop it or convert "
                f"it to numbers (first values: {list(text[:3])})")
        if len(levels) == 1:
            raise DatasetError(
                f"dataset {name!r}: non-numeric column {column!r} holds the one value {str(levels[0])!r} in every "
                f"row, so it carries no information (its one-hot indicator would be constant); drop the column")
        kept = levels[1:] if len(levels) == 2 else levels
        blocks.append(np.stack([(text == level) for level in kept], axis=1).astype(np.float64))
        names.extend(f"{column}={level}" for level in kept)
    X = np.hstack(blocks)
    _check_finite(name, X, names)
    return X, tuple(names)


def _check_finite(name: str, X: np.ndarray, feature_names: Sequence[str]) -> None:
    bad = ~np.isfinite(X)
    n_bad = int(bad.sum())
    if n_bad:
        first = feature_names[int(np.flatnonzero(bad.any(axis=0))[0])]
        raise DatasetError(
            f"dataset {name!r}: {n_bad} missing or non-finite feature values (NaN/inf); "
            f"first in column {first!r}")


def _check_dataset(ds: Dataset) -> None:
    name = ds.name
    if not isinstance(name, str) or not name:
        raise DatasetError(f"a dataset needs a non-empty string name, got {name!r}")
    try:
        X = np.asarray(ds.X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DatasetError(f"dataset {name!r}: X must be numeric ({exc})") from None
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise DatasetError(f"dataset {name!r}: X must be 2-D with at least one row and column, "
                           f"got shape {X.shape}")
    feature_names = tuple(str(f) for f in ds.feature_names)
    if len(feature_names) != X.shape[1] or len(set(feature_names)) != len(feature_names):
        raise DatasetError(f"dataset {name!r}: need {X.shape[1]} distinct feature names, "
                           f"got {len(feature_names)} ({len(set(feature_names))} distinct)")
    _check_finite(name, X, feature_names)
    class_names = tuple(str(c) for c in ds.class_names)
    y = _check_codes(name, "y", ds.y, X.shape[0], class_names, "class")
    if len(class_names) < 2:
        raise DatasetError(f"dataset {name!r}: needs at least 2 classes, got {list(class_names)}")

    sites, site_names = ds.sites, ds.site_names
    if (sites is None) != (site_names is None):
        raise DatasetError(f"dataset {name!r}: give both sites and site_names or neither")
    if sites is not None and site_names is not None:
        site_names = tuple(str(s) for s in site_names)
        sites = _check_codes(name, "sites", sites, X.shape[0], site_names, "site")
        counts = np.zeros((len(site_names), len(class_names)), dtype=np.int64)
        np.add.at(counts, (sites, y), 1)
        s, k = np.unravel_index(np.argmin(counts), counts.shape)
        if counts[s, k] < MIN_ROWS_PER_CLASS_PER_SITE:
            raise DatasetError(
                f"dataset {name!r}: site {site_names[s]!r} has {counts[s, k]} rows of class "
                f"{class_names[k]!r}; every site needs at least {MIN_ROWS_PER_CLASS_PER_SITE} rows "
                "of every class")
        object.__setattr__(ds, "sites", _read_only(sites, ds.sites))
        object.__setattr__(ds, "site_names", site_names)
    object.__setattr__(ds, "X", _read_only(X, ds.X))
    object.__setattr__(ds, "y", _read_only(y, ds.y))
    object.__setattr__(ds, "feature_names", feature_names)
    object.__setattr__(ds, "class_names", class_names)


def _check_codes(name: str, field: str, values: object, n_rows: int, labels: tuple[str, ...],
                 what: str) -> np.ndarray:
    codes = np.asarray(values)
    if codes.ndim != 1 or codes.shape[0] != n_rows:
        raise DatasetError(f"dataset {name!r}: {field} must be 1-D with {n_rows} entries, got shape {codes.shape}")
    if not np.issubdtype(codes.dtype, np.integer):
        raise DatasetError(f"dataset {name!r}: {field} must hold integer {what} codes, got dtype {codes.dtype}")
    if len(set(labels)) != len(labels):
        raise DatasetError(f"dataset {name!r}: {what} names must be distinct, got {list(labels)}")
    codes = codes.astype(np.int64, copy=False)
    if codes.min() < 0 or codes.max() >= len(labels):
        raise DatasetError(f"dataset {name!r}: {field} codes must lie in 0..{len(labels) - 1}, "
                           f"got range {codes.min()}..{codes.max()}")
    present = np.bincount(codes, minlength=len(labels))
    empty = [labels[i] for i in np.flatnonzero(present == 0)]
    if empty:
        raise DatasetError(f"dataset {name!r}: {what}(s) {empty} have no rows")
    return codes


def _read_only(array: np.ndarray, original: object) -> np.ndarray:
    """``array`` made read-only, copied first when it may share memory with the caller's data."""
    if array is original and not array.flags.writeable:
        return array
    if isinstance(original, np.ndarray):
        shared = np.may_share_memory(array, original)
    else:
        shared = array.base is not None
    if shared:
        array = array.copy()
    array.flags.writeable = False
    return array
