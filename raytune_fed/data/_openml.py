"""Datasets fetched from OpenML through :func:`sklearn.datasets.fetch_openml`.

Downloads are cached on disk in ``cache_dir``, else ``$RAYTUNE_FED_CACHE``, else
``~/.cache/raytune_fed/openml``.  Without network access the loader raises
:class:`~raytune_fed.errors.DatasetUnavailableError` with one message that says how to
pass the same data as a file instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.error import URLError

from raytune_fed.data._validate import Dataset, dataset_from_frame, describe_columns
from raytune_fed.errors import DatasetError, DatasetUnavailableError

CACHE_ENV_VAR = "RAYTUNE_FED_CACHE"
OPENML_PREFIX = "openml:"

# OpenML sets used by the papers this package reproduces, by name -> version.
KNOWN_OPENML = {
    "gina_agnostic": 1,  # RFMS (the full 3468-row set; a partial copy is embedded)
    "Bioresponse": 1,  # RFMS
    "fri_c4_500_100": 1,  # RFMS
}

_FILE_HINT = ("To use it offline, save it as a CSV or Parquet file and pass the file instead, e.g. "
              "`--dataset path/to/file.csv --target label` (in Python: "
              "load_dataset('path/to/file.csv', target='label')).")


def fetch_openml(**kwargs: object) -> object:
    """scikit-learn's ``fetch_openml``, imported on first use (tests replace this function)."""
    import warnings

    from sklearn.datasets import fetch_openml as sklearn_fetch_openml

    with warnings.catch_warnings():  # its "network error, retrying" warnings would bury our one-line error
        warnings.simplefilter("ignore", UserWarning)
        return sklearn_fetch_openml(**kwargs)


def default_cache_dir() -> Path:
    """``$RAYTUNE_FED_CACHE`` if set, else ``~/.cache/raytune_fed/openml``."""
    env = os.environ.get(CACHE_ENV_VAR)
    return Path(env) if env else Path.home() / ".cache" / "raytune_fed" / "openml"


def is_openml_spec(spec: str) -> bool:
    """True for ``openml:<name or id>``, a known OpenML name, or a bare integer id."""
    return spec.startswith(OPENML_PREFIX) or spec in KNOWN_OPENML or spec.isdigit()


def load_openml(spec: str, *, target: str | None = None, site_column: str | None = None,
                cache_dir: str | os.PathLike | None = None) -> Dataset:
    """Fetch ``spec`` (``openml:<name or id>``, a known name or an id) and encode it.

    ``target`` defaults to OpenML's default target; ``site_column`` optionally names a
    column whose values become sites.
    """
    key = spec.removeprefix(OPENML_PREFIX).strip()
    name = f"{OPENML_PREFIX}{key}"
    if not key:
        raise DatasetError(f"dataset {spec!r}: give an OpenML name or id after {OPENML_PREFIX!r}")
    query: dict[str, object] = (
        {"data_id": int(key)} if key.isdigit() else {"name": key, "version": KNOWN_OPENML.get(key, "active")})
    data_home = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    try:
        bunch = fetch_openml(**query, as_frame=True, data_home=os.fspath(data_home))
    except (URLError, OSError, TimeoutError) as exc:
        raise DatasetUnavailableError(
            f"dataset {name!r} could not be fetched from OpenML ({type(exc).__name__}: "
            f"{_short(exc)}); no network access? {_FILE_HINT}") from None
    except ValueError as exc:
        raise DatasetError(f"dataset {name!r}: OpenML did not return it: {_short(exc)}") from None

    frame = getattr(bunch, "frame", None)
    if frame is None:
        raise DatasetError(f"dataset {name!r}: OpenML returned no data frame (sparse data are not supported)")
    if target is None:
        defaults = list(getattr(bunch, "target_names", None) or [])
        if len(defaults) != 1:
            raise DatasetError(
                f"dataset {name!r}: OpenML gives {len(defaults)} default targets {defaults}; "
                f"pass target=<column>; columns are {describe_columns(frame.columns)}")
        target = str(defaults[0])
    return dataset_from_frame(name, frame, target=target, site_column=site_column,
                              source=f"OpenML {key} (fetched with scikit-learn's fetch_openml)")


def _short(exc: BaseException, limit: int = 200) -> str:
    text = str(exc).strip().replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
