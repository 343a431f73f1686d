"""Semi-simulated data sites: cut one pooled dataset into sites (RFMS paper, section 4.3).

Three methods, all returning a :class:`SiteSplit`:

``natural``
    The sites are given (e.g. one GEO cohort per site); the split only encodes them.
``srs`` (stratified random split)
    Each class is shuffled and cut into ``n_sites`` buckets of random size.  The buckets
    of each class are sorted by size and paired in reverse order across classes, so the
    site with the smallest negative bucket gets the largest positive bucket.
``drc`` (dimension reduction and clustering)
    Standardise, keep ``pca_variance`` of the variance with PCA, cluster each class with
    a Gaussian mixture sharing one covariance matrix ("tied"), pair the clusters in
    reverse size order as in ``srs``, then move rows from the largest site to the
    smallest until every site holds at least ``min_share`` of all rows.

Pairing rule (both ``srs`` and ``drc``): for the first class (smallest class code) site
``i`` takes the bucket ranked ``i`` by ascending size; for every other class site ``i``
takes the bucket ranked ``i`` by descending size.  So with two classes the count of the
first class rises with the site code and the count of the second class falls.

SRS bucket sizes: every bucket first gets :data:`_MIN_PER_CLASS` rows, the remaining rows
are shared out in proportions ``(1 + _SRS_SPREAD * d_i) / n_sites`` with ``d_i`` random,
summing to zero and lying in ``(-1, 1)``.  So each bucket holds between roughly half and
one and a half times an equal share of its class: random enough that the sort-and-pair
step matters, never degenerate.

Unlike the authors' R code, the site of every row is computed on the rows themselves (not
on a reordered copy), so the stratification is real.  No Ray import here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from raytune_fed._checks import check_int, check_share
from raytune_fed.errors import ConfigError, SplitError

SPLIT_METHODS = ("natural", "srs", "drc")

_MIN_PER_CLASS = 2  # rows of every class each site must hold
_SRS_SPREAD = 0.5   # SRS bucket sizes lie in about [0.5, 1.5] x the equal share


# ---------------------------------------------------------------- shared input checks
def _as_rng(seed, name: str = "seed") -> np.random.Generator:
    """A Generator from an int, a SeedSequence or a Generator (never the global RNG)."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)) and seed >= 0:
        return np.random.default_rng(int(seed))
    raise ConfigError(
        f"{name} must be a non-negative int, a numpy SeedSequence or a Generator, got {seed!r}")


def _seed_int(rng: np.random.Generator) -> int:
    """An int seed for scikit-learn's ``random_state``, drawn from ``rng``."""
    return int(rng.integers(0, 2**31 - 1))


def _as_labels(y, name: str = "y") -> np.ndarray:
    """``y`` as a 1-D int64 array of class codes (integral floats are accepted)."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ConfigError(f"{name} must be 1-D class codes, got shape {arr.shape}")
    if arr.dtype == bool or np.issubdtype(arr.dtype, np.integer):
        return arr.astype(np.int64)
    if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        return arr.astype(np.int64)
    raise ConfigError(f"{name} must hold integer class codes, got dtype {arr.dtype}")


# ---------------------------------------------------------------- the result record
@dataclass(frozen=True, eq=False)
class SiteSplit:
    """Which site every row belongs to.

    ``site_of_row[i]`` is the site code (``0 .. n_sites-1``) of row ``i``;
    ``site_names[k]`` names site ``k``; ``method`` is one of :data:`SPLIT_METHODS`.
    The array is stored as a read-only int64 copy.
    """

    site_of_row: np.ndarray
    site_names: tuple[str, ...]
    method: str

    def __post_init__(self) -> None:
        codes = np.array(self.site_of_row, dtype=np.int64, copy=True)
        names = tuple(str(s) for s in self.site_names)
        if self.method not in SPLIT_METHODS:
            raise ConfigError(f"method must be one of {SPLIT_METHODS}, got {self.method!r}")
        if codes.ndim != 1 or codes.size == 0:
            raise SplitError(f"site_of_row must be a non-empty 1-D array, got shape {codes.shape}")
        if len(set(names)) != len(names) or not names:
            raise SplitError(f"site_names must be unique and non-empty, got {names}")
        if codes.min() < 0 or codes.max() >= len(names):
            raise SplitError(
                f"site codes must lie in 0..{len(names) - 1}, got {codes.min()}..{codes.max()}")
        sizes = np.bincount(codes, minlength=len(names))
        if np.any(sizes == 0):
            empty = int(np.flatnonzero(sizes == 0)[0])
            raise SplitError(f"site {names[empty]!r} (code {empty}) has no rows")
        codes.setflags(write=False)
        object.__setattr__(self, "site_of_row", codes)
        object.__setattr__(self, "site_names", names)

    @property
    def n_sites(self) -> int:
        return len(self.site_names)

    @property
    def sizes(self) -> np.ndarray:
        """Rows per site, indexed by site code."""
        return np.bincount(self.site_of_row, minlength=self.n_sites)

    def rows(self, site: int) -> np.ndarray:
        """Sorted row indices of site ``site`` (a site code)."""
        if not isinstance(site, (int, np.integer)) or not 0 <= site < self.n_sites:
            raise ConfigError(f"site must be a site code in 0..{self.n_sites - 1}, got {site!r}")
        return np.flatnonzero(self.site_of_row == site)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SiteSplit):
            return NotImplemented
        return (self.method == other.method and self.site_names == other.site_names
                and np.array_equal(self.site_of_row, other.site_of_row))


def check_sites(y, site_of_row, min_per_class: int = _MIN_PER_CLASS, *,
                site_names: Sequence[str] | None = None) -> np.ndarray:
    """Raise :class:`SplitError` unless every site holds ``min_per_class`` rows of every class.

    The classes are those present in ``y``; the sites are ``0 .. len(site_names)-1`` (or
    ``0 .. max(site_of_row)``).  Returns the ``(n_sites, n_classes)`` table of counts.
    """
    labels = _as_labels(y)
    codes = np.asarray(site_of_row, dtype=np.int64)
    if codes.shape != labels.shape:
        raise ConfigError(f"site_of_row has shape {codes.shape} but y has shape {labels.shape}")
    min_per_class = check_int("min_per_class", min_per_class, 0)
    n_sites = len(site_names) if site_names is not None else int(codes.max()) + 1
    classes, class_idx = np.unique(labels, return_inverse=True)
    counts = np.zeros((n_sites, classes.size), dtype=np.int64)
    np.add.at(counts, (codes, class_idx), 1)
    short = np.argwhere(counts < min_per_class)
    if short.size:
        s, c = (int(v) for v in short[0])
        name = f"{site_names[s]!r} (code {s})" if site_names is not None else str(s)
        raise SplitError(f"site {name} has {counts[s, c]} row(s) of class {classes[c]}; "
                         f"every site needs >= {min_per_class} of each class")
    return counts


# ---------------------------------------------------------------- entry point
def split_sites(X, y, *, method: str, n_sites: int = 5, sites: np.ndarray | None = None,
                site_names: Sequence[str] | None = None, pca_variance: float = 0.1,
                min_share: float = 0.10, seed=0, dataset: str | None = None) -> SiteSplit:
    """Assign every row of ``(X, y)`` to a data site.

    ``method`` is ``"natural"`` (sites taken from ``sites``; ``n_sites`` is then the number
    of distinct values there), ``"srs"`` or ``"drc"`` (see the module docstring).
    ``pca_variance`` (share of variance PCA keeps, in ``(0, 1]``) and ``min_share``
    (smallest site share after the top-up, in ``[0, 1/n_sites]``) are used by ``drc``
    only but always validated.  ``seed`` is an int, a SeedSequence or a Generator.
    ``dataset`` (its name) only makes the messages say which dataset they are about.
    Every site ends up with at least two rows of every class, or :class:`SplitError`.
    """
    if method not in SPLIT_METHODS:
        raise ConfigError(f"unknown split method {method!r}; known methods: {SPLIT_METHODS}")
    labels = _as_labels(y)
    data = np.asarray(X, dtype=float)
    if data.ndim != 2 or data.shape[0] != labels.shape[0]:
        raise ConfigError(f"X must be 2-D with one row per label: X has shape {data.shape}, "
                          f"y has {labels.shape[0]} rows")
    pca_variance = check_share("pca_variance", pca_variance, 0.0, 1.0, low_open=True)
    rng = _as_rng(seed)

    if method == "natural":
        if sites is None:
            raise ConfigError("method 'natural' needs the sites array (one site label per row)")
        site_of_row, names = _natural(sites, labels.shape[0], site_names)
    else:
        if sites is not None:
            raise ConfigError(_sites_given_message(sites, site_names, method, dataset))
        n_sites = check_int("n_sites", n_sites, 2)
        min_share = check_share("min_share", min_share, 0.0, 1.0 / n_sites, low_open=False)
        names = _default_names(site_names, n_sites)
        _check_class_sizes(labels, n_sites, method)
        if method == "srs":
            site_of_row = _srs(labels, n_sites, rng)
        else:
            site_of_row = _drc(data, labels, n_sites, pca_variance, min_share, rng)
    check_sites(labels, site_of_row, _MIN_PER_CLASS, site_names=names)
    return SiteSplit(site_of_row=site_of_row, site_names=names, method=method)


def _sites_given_message(sites, site_names, method: str, dataset: str | None) -> str:
    """Why ``srs``/``drc`` refuse rows that come in sites already, and what to do instead."""
    uniques = np.unique(np.asarray(sites))
    names = [str(n) for n in site_names] if site_names is not None else [str(u) for u in uniques]
    shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
    what = f"dataset {dataset!r} comes" if dataset else "these rows come"
    plural = "s" if uniques.size != 1 else ""
    return (f"{what} in {uniques.size} natural site{plural} ({shown}): they are its split, so only split "
            f"'natural' applies; split {method!r} cuts a pooled dataset into sites: use it on one without sites "
            f"(e.g. --dataset spambase, or a CSV/Parquet file without --site-column; sites=None in Python)")


def _natural(sites, n_rows: int, site_names) -> tuple[np.ndarray, tuple[str, ...]]:
    values = np.asarray(sites)
    if values.shape != (n_rows,):
        raise ConfigError(f"sites must have one entry per row ({n_rows}), got shape {values.shape}")
    uniques, codes = np.unique(values, return_inverse=True)
    if uniques.size < 2:
        raise ConfigError(f"sites must name at least 2 distinct sites, got {uniques.tolist()!r}")
    if site_names is None:
        return codes.astype(np.int64), tuple(str(u) for u in uniques)
    return codes.astype(np.int64), _default_names(site_names, uniques.size)


def _default_names(site_names, n_sites: int) -> tuple[str, ...]:
    if site_names is None:
        return tuple(f"site_{k}" for k in range(n_sites))
    names = tuple(str(s) for s in site_names)
    if len(names) != n_sites or len(set(names)) != n_sites:
        raise ConfigError(f"site_names must be {n_sites} unique names, got {names!r}")
    return names


def _check_class_sizes(labels: np.ndarray, n_sites: int, method: str) -> None:
    classes, counts = np.unique(labels, return_counts=True)
    if classes.size < 2:
        raise SplitError(f"y must hold at least 2 classes for method {method!r}, "
                         f"got only class {classes.tolist()}")
    need = _MIN_PER_CLASS * n_sites
    for c, m in zip(classes, counts):
        if m < need:
            raise SplitError(f"class {c} has {m} rows; method {method!r} needs >= {_MIN_PER_CLASS} "
                             f"per site, i.e. >= {need} rows for n_sites={n_sites}")


# ---------------------------------------------------------------- pairing (srs and drc)
def _pair_in_reverse(bucket_sizes: list[np.ndarray]) -> list[np.ndarray]:
    """For every class, the site code of each bucket (see the pairing rule above)."""
    site_of_bucket = []
    for c, sizes in enumerate(bucket_sizes):
        order = np.argsort(sizes, kind="stable")      # bucket ids by ascending size
        if c > 0:
            order = order[::-1]
        sites = np.empty_like(order)
        sites[order] = np.arange(order.size)
        site_of_bucket.append(sites)
    return site_of_bucket


def _assign_by_buckets(labels: np.ndarray, bucket_of_row: np.ndarray, n_sites: int) -> np.ndarray:
    """Turn per-class bucket ids (aligned with ``labels``) into site codes."""
    classes = np.unique(labels)
    sizes = [np.bincount(bucket_of_row[labels == c], minlength=n_sites) for c in classes]
    site_of_bucket = _pair_in_reverse(sizes)
    site_of_row = np.empty(labels.shape[0], dtype=np.int64)
    for c, mapping in zip(classes, site_of_bucket):
        rows = np.flatnonzero(labels == c)
        site_of_row[rows] = mapping[bucket_of_row[rows]]
    return site_of_row


# ---------------------------------------------------------------- srs
def _largest_remainder(total: int, shares: np.ndarray) -> np.ndarray:
    """Integers summing to ``total`` and closest to ``total * shares``."""
    raw = total * shares
    out = np.floor(raw).astype(np.int64)
    short = total - int(out.sum())
    if short > 0:
        out[np.argsort(-(raw - out), kind="stable")[:short]] += 1
    return out


def _srs_bucket_sizes(m: int, n_sites: int, rng: np.random.Generator) -> np.ndarray:
    u = rng.uniform(-1.0, 1.0, size=n_sites)
    d = (u - u.mean()) / 2.0                       # sums to 0, each in (-1, 1)
    shares = (1.0 + _SRS_SPREAD * d) / n_sites
    return _MIN_PER_CLASS + _largest_remainder(m - _MIN_PER_CLASS * n_sites, shares)


def _srs(labels: np.ndarray, n_sites: int, rng: np.random.Generator) -> np.ndarray:
    bucket_of_row = np.empty(labels.shape[0], dtype=np.int64)
    for c in np.unique(labels):
        rows = np.flatnonzero(labels == c)
        sizes = _srs_bucket_sizes(rows.size, n_sites, rng)
        bucket_of_row[rng.permutation(rows)] = np.repeat(np.arange(n_sites), sizes)
    return _assign_by_buckets(labels, bucket_of_row, n_sites)


# ---------------------------------------------------------------- drc
def _drc(X: np.ndarray, labels: np.ndarray, n_sites: int, pca_variance: float,
         min_share: float, rng: np.random.Generator) -> np.ndarray:
    from sklearn.decomposition import PCA
    from sklearn.mixture import GaussianMixture
    from sklearn.preprocessing import StandardScaler

    if not np.all(np.isfinite(X)):
        raise ConfigError("X must be finite for method 'drc' (found NaN or inf)")
    Z = StandardScaler().fit_transform(X)
    # a float share keeps the fewest components explaining it (always >= 1); 1.0 keeps all
    n_components = None if pca_variance >= 1.0 else pca_variance
    Z = PCA(n_components=n_components, svd_solver="full").fit_transform(Z)

    bucket_of_row = np.empty(labels.shape[0], dtype=np.int64)
    for c in np.unique(labels):
        rows = np.flatnonzero(labels == c)
        gm = GaussianMixture(n_components=n_sites, covariance_type="tied", random_state=_seed_int(rng))
        bucket_of_row[rows] = gm.fit(Z[rows]).predict(Z[rows])
    site_of_row = _assign_by_buckets(labels, bucket_of_row, n_sites)
    _top_up_classes(labels, site_of_row, n_sites, rng)
    _top_up_sizes(labels, site_of_row, n_sites, min_share, rng)
    return site_of_row


def _class_counts(labels: np.ndarray, site_of_row: np.ndarray, n_sites: int):
    classes, class_idx = np.unique(labels, return_inverse=True)
    counts = np.zeros((n_sites, classes.size), dtype=np.int64)
    np.add.at(counts, (site_of_row, class_idx), 1)
    return classes, class_idx, counts


def _top_up_classes(labels, site_of_row, n_sites, rng) -> None:
    """Give every site ``_MIN_PER_CLASS`` rows of each class, taken from the richest site."""
    classes, class_idx, counts = _class_counts(labels, site_of_row, n_sites)
    for c in range(classes.size):
        while counts[:, c].min() < _MIN_PER_CLASS:
            poor, rich = int(np.argmin(counts[:, c])), int(np.argmax(counts[:, c]))
            if counts[rich, c] <= _MIN_PER_CLASS:
                raise SplitError(f"class {classes[c]} has too few rows to give site {poor} "
                                 f"{_MIN_PER_CLASS} of them")
            row = rng.choice(np.flatnonzero((site_of_row == rich) & (class_idx == c)))
            site_of_row[row] = poor
            counts[rich, c] -= 1
            counts[poor, c] += 1


def _top_up_sizes(labels, site_of_row, n_sites, min_share, rng) -> None:
    """Move random rows from the largest site to the smallest until each has ``min_share``.

    A row is drawn uniformly from the largest site's rows, except that no class there
    drops below ``_MIN_PER_CLASS`` rows; so the moved rows follow that site's class mix.
    """
    n = labels.shape[0]
    target = math.ceil(min_share * n - 1e-9)
    _, class_idx, counts = _class_counts(labels, site_of_row, n_sites)
    sizes = counts.sum(axis=1)
    while sizes.min() < target:
        small, large = int(np.argmin(sizes)), int(np.argmax(sizes))
        if sizes[large] <= target:
            raise SplitError(f"cannot give every site {target} rows (min_share={min_share}) "
                             f"with {n} rows and {n_sites} sites")
        movable = counts[large] > _MIN_PER_CLASS
        candidates = np.flatnonzero((site_of_row == large) & movable[class_idx])
        if candidates.size == 0:
            raise SplitError(f"site {large} has no row to spare for site {small} "
                             f"without dropping below {_MIN_PER_CLASS} rows of a class")
        row = rng.choice(candidates)
        site_of_row[row] = small
        counts[large, class_idx[row]] -= 1
        counts[small, class_idx[row]] += 1
        sizes[large] -= 1
        sizes[small] += 1
