"""Site splits, RFMS roles, in-bag / out-bag, vertical partitions and PU labels."""

from __future__ import annotations

import hashlib
import math
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import make_classification

from raytune_fed.errors import ConfigError, SplitError
from raytune_fed.simulation import (
    SPLIT_METHODS,
    Roles,
    SiteSplit,
    check_sites,
    inbag_outbag,
    make_pu,
    role_assignments,
    split_sites,
    vertical_partition,
)

SRS_SPREAD = 0.5  # documented: SRS buckets get 2 rows, then (1 +- 0.5 * d) / n_sites of the rest


# ---------------------------------------------------------------- data
@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=500, n_features=30, n_informative=8, weights=[0.65],
                               flip_y=0.0, random_state=0)
    return X, y


def _tiny_cluster_data():
    """Class 0: four clusters of 300 rows and one of 10; class 1: five clusters of 15.

    The clusters lie far apart along one direction that carries most of the variance, so
    the raw DRC clustering finds them and the site holding the 10-row cluster (paired with
    a 15-row cluster of class 1) has 25 of 1285 rows, far below 10 %.
    """
    rng = np.random.default_rng(0)
    p = 20
    direction = np.ones(p) / np.sqrt(p)
    parts, labels = [], []
    for cls, offset, sizes in ((0, 0.0, [300, 300, 300, 300, 10]), (1, 5.0, [15] * 5)):
        for t, m in zip([0.0, 10.0, 20.0, 30.0, 60.0], sizes):
            parts.append((t + offset) * direction + rng.normal(size=(m, p)))
            labels += [cls] * m
    return np.vstack(parts), np.array(labels)


def _counts(y, split: SiteSplit) -> np.ndarray:
    """(n_sites, n_classes) rows of each class per site, computed independently."""
    classes = np.unique(y)
    return np.array([[np.sum(y[split.rows(s)] == c) for c in classes] for s in range(split.n_sites)])


def _split(method, X, y, **kw):
    if method == "natural":
        kw.setdefault("sites", np.random.default_rng(1).choice(["a", "b", "c", "d"], size=len(y)))
    return split_sites(X, y, method=method, **kw)


# ---------------------------------------------------------------- every method
@pytest.mark.parametrize("method", SPLIT_METHODS)
def test_every_row_in_exactly_one_site(data, method):
    X, y = data
    split = _split(method, X, y, seed=3)
    n_expected = 4 if method == "natural" else 5
    assert split.method == method
    assert split.n_sites == n_expected == len(split.site_names)
    assert split.site_of_row.dtype == np.int64 and split.site_of_row.shape == (len(y),)
    rows = [split.rows(s) for s in range(split.n_sites)]
    assert all(np.all(np.diff(r) > 0) for r in rows)                  # sorted, no repeats
    assert np.array_equal(np.sort(np.concatenate(rows)), np.arange(len(y)))
    assert split.sizes.sum() == len(y)
    check_sites(y, split.site_of_row)                                  # >= 2 of each class
    assert _counts(y, split).min() >= 2
    with pytest.raises(ValueError):
        split.site_of_row[0] = 1                                       # read-only


def test_natural_split_uses_the_given_sites(data):
    X, y = data
    sites = np.where(np.arange(len(y)) < 200, "geo_b", "geo_a")
    split = split_sites(X, y, method="natural", sites=sites)
    assert split.site_names == ("geo_a", "geo_b")
    assert np.array_equal(split.rows(1), np.arange(200))
    renamed = split_sites(X, y, method="natural", sites=sites, site_names=["A", "B"])
    assert renamed.site_names == ("A", "B")
    only_negatives = np.where(y == 0, "x", "y")
    with pytest.raises(SplitError, match=r"site 'x' \(code 0\) has 0 row\(s\) of class 1"):
        split_sites(X, y, method="natural", sites=only_negatives)


# ---------------------------------------------------------------- srs
def _srs_bucket_bounds(m: int, n_sites: int) -> tuple[int, int]:
    rest = m - 2 * n_sites
    return (2 + math.floor(rest * (1 - SRS_SPREAD) / n_sites),
            2 + math.floor(rest * (1 + SRS_SPREAD) / n_sites) + 1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_srs_is_stratified(data, seed):
    X, y = data
    split = split_sites(X, y, method="srs", seed=seed)
    counts = _counts(y, split)
    m = np.bincount(y)
    (lo0, hi0), (lo1, hi1) = (_srs_bucket_bounds(int(mc), 5) for mc in m)
    assert np.all((counts[:, 0] >= lo0) & (counts[:, 0] <= hi0))
    assert np.all((counts[:, 1] >= lo1) & (counts[:, 1] <= hi1))
    # the positive share of a site is bounded by the extreme bucket sizes
    overall = m[1] / m.sum()
    tol = max(hi1 / (hi1 + lo0) - overall, overall - lo1 / (lo1 + hi0))
    assert tol < 0.3
    share = counts[:, 1] / counts.sum(axis=1)
    assert np.all(np.abs(share - overall) <= tol), (share, overall, tol)
    # the buckets really have random sizes (otherwise sorting and pairing is moot)
    assert len(set(counts[:, 0])) > 1


def test_srs_class_counts_do_not_depend_on_row_order(data):
    # the authors' R code assigned sites on a reordered copy and applied them to the
    # original order; then the per-site class counts change with the row order
    X, y = data
    order = np.argsort(y, kind="stable")                  # all negatives first
    base = split_sites(X, y, method="srs", seed=5)
    sorted_split = split_sites(X[order], y[order], method="srs", seed=5)
    assert np.array_equal(_counts(y, base), _counts(y[order], sorted_split))


@pytest.mark.parametrize("method", ["srs", "drc"])
def test_buckets_are_paired_in_reverse_size_order(data, method):
    if method == "drc":
        X, y = _tiny_cluster_data()
        kw = {"min_share": 0.0}           # the raw pairing, before any top-up
    else:
        (X, y), kw = data, {}
    counts = _counts(y, split_sites(X, y, method=method, seed=4, **kw))
    assert np.all(np.diff(counts[:, 0]) >= 0)             # first class ascending
    assert np.all(np.diff(counts[:, 1]) <= 0)             # second class descending
    for i, j in combinations(range(5), 2):
        if counts[i, 0] < counts[j, 0]:
            assert counts[i, 1] >= counts[j, 1]


def test_srs_with_three_classes_pairs_first_class_against_the_others():
    X, y = make_classification(n_samples=450, n_features=10, n_informative=5, n_classes=3,
                               random_state=1)
    counts = _counts(y, split_sites(X, y, method="srs", seed=0))
    assert np.all(np.diff(counts[:, 0]) >= 0)
    assert np.all(np.diff(counts[:, 1]) <= 0) and np.all(np.diff(counts[:, 2]) <= 0)


# ---------------------------------------------------------------- drc
def test_drc_tops_up_the_smallest_site_to_ten_percent():
    X, y = _tiny_cluster_data()
    n = len(y)
    target = math.ceil(0.1 * n)
    raw = split_sites(X, y, method="drc", min_share=0.0, seed=0)
    assert raw.sizes.min() < 0.05 * n                     # the clustering made a tiny site
    topped = split_sites(X, y, method="drc", min_share=0.10, seed=0)
    assert topped.sizes.min() >= target
    moved = np.flatnonzero(raw.site_of_row != topped.site_of_row)
    small = int(np.argmin(raw.sizes))
    assert moved.size == target - raw.sizes[small]        # only the rows that were needed
    assert np.all(topped.site_of_row[moved] == small)     # all went to the small site
    assert np.all(raw.sizes[raw.site_of_row[moved]] > target)   # from sites that could spare them
    assert set(np.unique(y[moved])) == {0, 1}             # the largest sites' class mix moved
    assert _counts(y, topped).min() >= 2


@pytest.mark.parametrize("pca_variance", [0.1, 0.5, 1.0])
def test_drc_pca_variance_settings_work(data, pca_variance):
    X, y = data
    split = split_sites(X, y, method="drc", pca_variance=pca_variance, seed=1)
    assert split.n_sites == 5
    assert split.sizes.min() >= math.ceil(0.1 * len(y))
    assert _counts(y, split).min() >= 2


# ---------------------------------------------------------------- seeds
@pytest.mark.parametrize("method", ["srs", "drc"])
def test_same_seed_same_split_other_seed_other_split(data, method):
    X, y = data
    a = split_sites(X, y, method=method, seed=11)
    b = split_sites(X, y, method=method, seed=np.random.SeedSequence(11))
    c = split_sites(X, y, method=method, seed=12)
    assert a == b
    assert np.array_equal(a.site_of_row, b.site_of_row)
    assert not np.array_equal(a.site_of_row, c.site_of_row)


_XPROC_SCRIPT = """
import hashlib
from sklearn.datasets import make_classification
from raytune_fed.simulation import split_sites
X, y = make_classification(n_samples=400, n_features=15, n_informative=6, random_state=2)
for method in ("srs", "drc"):
    s = split_sites(X, y, method=method, seed=2024)
    print(method, hashlib.sha256(s.site_of_row.tobytes()).hexdigest())
"""


@pytest.mark.process
def test_split_is_reproducible_in_another_process():
    X, y = make_classification(n_samples=400, n_features=15, n_informative=6, random_state=2)
    here = {m: hashlib.sha256(split_sites(X, y, method=m, seed=2024).site_of_row.tobytes()).hexdigest()
            for m in ("srs", "drc")}
    out = subprocess.run([sys.executable, "-c", _XPROC_SCRIPT], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], timeout=120, check=True)
    there = dict(line.split() for line in out.stdout.strip().splitlines())
    assert there == here


# ---------------------------------------------------------------- check_sites
def test_check_sites_names_site_and_class():
    y = np.array([0, 0, 1, 1, 0, 0, 1])
    site = np.array([0, 0, 0, 0, 1, 1, 1])
    assert check_sites(y, site, min_per_class=1).tolist() == [[2, 2], [2, 1]]
    with pytest.raises(SplitError, match=r"site 1 has 1 row\(s\) of class 1"):
        check_sites(y, site)
    with pytest.raises(SplitError, match=r"site 'lyon' \(code 2\) has 0 row\(s\) of class 0"):
        check_sites(y, site, min_per_class=1, site_names=["paris", "bonn", "lyon"])


# ---------------------------------------------------------------- roles, in-bag
def test_role_assignments_for_five_sites():
    roles = role_assignments(5)
    assert len(roles) == 20
    pairs = [(r.openbox, r.lockbox) for r in roles]
    assert len(set(pairs)) == 20 and all(o != lb for o, lb in pairs)
    assert pairs == sorted(pairs)                          # openbox-major
    for r in roles:
        assert len(r.curators) == 3
        assert set(r.curators) == set(range(5)) - {r.openbox, r.lockbox}
    assert roles[0] == Roles(openbox=0, lockbox=1, curators=(2, 3, 4))
    assert len(role_assignments(3)) == 6
    with pytest.raises(ConfigError, match="one role"):
        Roles(openbox=1, lockbox=1, curators=(2,))


def test_inbag_outbag_is_stratified_and_seeded():
    y = np.repeat([0, 1, 2], [500, 120, 2])
    inbag, outbag = inbag_outbag(y, inbag_fraction=0.8, seed=0)
    assert inbag.dtype == outbag.dtype == np.int64
    assert np.all(np.diff(inbag) > 0) and np.all(np.diff(outbag) > 0)
    assert np.array_equal(np.sort(np.concatenate([inbag, outbag])), np.arange(len(y)))
    assert np.bincount(y[inbag]).tolist() == [400, 96, 1]
    assert np.bincount(y[outbag]).tolist() == [100, 24, 1]
    again, _ = inbag_outbag(y, inbag_fraction=0.8, seed=0)
    other, _ = inbag_outbag(y, inbag_fraction=0.8, seed=1)
    assert np.array_equal(inbag, again) and not np.array_equal(inbag, other)
    with pytest.raises(SplitError, match=r"class 2 has 1 row\(s\)"):
        inbag_outbag(np.array([0, 0, 0, 1, 1, 2]), seed=0)


# ---------------------------------------------------------------- vertical
@pytest.mark.parametrize("n_features, n_parties, active, shuffle",
                         [(10, 2, None, False), (10, 3, None, True), (7, 7, None, False),
                          (12, 3, 6, False), (12, 4, 2, True)])
def test_vertical_partition_is_disjoint_and_complete(n_features, n_parties, active, shuffle):
    blocks = vertical_partition(n_features, n_parties, active_features=active, seed=0, shuffle=shuffle)
    assert len(blocks) == n_parties
    assert all(b.size >= 1 for b in blocks)
    assert np.array_equal(np.sort(np.concatenate(blocks)), np.arange(n_features))
    if active is not None:
        assert blocks[0].size == active
    if not shuffle:
        assert all(np.array_equal(b, np.arange(b[0], b[-1] + 1)) for b in blocks)  # contiguous


def test_vertical_partition_shuffle_and_names():
    assert [b.tolist() for b in vertical_partition(5, 2)] == [[0, 1, 2], [3, 4]]
    a = vertical_partition(30, 3, seed=7, shuffle=True)
    b = vertical_partition(30, 3, seed=7, shuffle=True)
    c = vertical_partition(30, 3, seed=8, shuffle=True)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert not all(np.array_equal(u, v) for u, v in zip(a, c))
    named = vertical_partition(4, 2, feature_names=["age", "bmi", "hr", "sbp"])
    assert [b.tolist() for b in named] == [["age", "bmi"], ["hr", "sbp"]]


# ---------------------------------------------------------------- pu
@pytest.mark.parametrize("c", [0.1, 0.5, 0.9])
def test_make_pu_labels_positives_at_rate_c(c):
    y = np.random.default_rng(0).integers(0, 2, size=40_000)
    s = make_pu(y, c=c, seed=1)
    assert s.dtype == np.int8 and set(np.unique(s)) <= {0, 1}
    assert np.all(s[y == 0] == 0)
    n_pos = int(np.sum(y == 1))
    rate = s[y == 1].mean()
    assert abs(rate - c) <= 4 * math.sqrt(c * (1 - c) / n_pos)
    assert np.array_equal(s, make_pu(y, c=c, seed=1))


def test_make_pu_edge_cases():
    y = np.array([0, 0, 1, 1, 1, 2])
    assert make_pu(y, c=1.0, seed=0).tolist() == [0, 0, 1, 1, 1, 0]
    assert make_pu(y, c=1.0, positive=2, seed=0).tolist() == [0, 0, 0, 0, 0, 1]
    with pytest.raises(SplitError, match=r"c=1e-09 labelled none of the 3 positives"):
        make_pu(y, c=1e-9, seed=0)
    with pytest.raises(SplitError, match="no row of the positive class 3"):
        make_pu(y, c=0.5, positive=3, seed=0)


# ---------------------------------------------------------------- bad input
def _xy(n_pos: int = 50):
    y = np.repeat([0, 1], [100, n_pos])
    return np.random.default_rng(0).normal(size=(y.size, 4)), y


BAD_INPUT = [
    ("unknown method", lambda: split_sites(*_xy(), method="kmeans"),
     ConfigError, r"unknown split method 'kmeans'.*'natural', 'srs', 'drc'"),
    ("natural without sites", lambda: split_sites(*_xy(), method="natural"),
     ConfigError, r"'natural' needs the sites array"),
    ("sites with srs", lambda: split_sites(*_xy(), method="srs", sites=np.zeros(150)),
     ConfigError, r"these rows come in 1 natural site \(0.0\): .*only split 'natural' applies; split 'srs' cuts a "
                  r"pooled dataset into sites: .*sites=None in Python"),
    ("n_sites < 2", lambda: split_sites(*_xy(), method="srs", n_sites=1),
     ConfigError, r"n_sites must be an integer >= 2, got 1"),
    ("pca_variance 0", lambda: split_sites(*_xy(), method="drc", pca_variance=0.0),
     ConfigError, r"pca_variance must be in \(0, 1\], got 0"),
    ("pca_variance > 1", lambda: split_sites(*_xy(), method="drc", pca_variance=1.5),
     ConfigError, r"pca_variance must be in \(0, 1\], got 1.5"),
    ("min_share too big", lambda: split_sites(*_xy(), method="drc", min_share=0.3),
     ConfigError, r"min_share must be in \[0, 0.2\], got 0.3"),
    ("class too small (srs)", lambda: split_sites(*_xy(n_pos=7), method="srs"),
     SplitError, r"class 1 has 7 rows; method 'srs' needs >= 2 per site.*n_sites=5"),
    ("class too small (drc)", lambda: split_sites(*_xy(n_pos=15), method="drc", n_sites=8),
     SplitError, r"class 1 has 15 rows; method 'drc'.*>= 16 rows for n_sites=8"),
    ("bad seed", lambda: split_sites(*_xy(), method="srs", seed=-1),
     ConfigError, r"seed must be .*got -1"),
    ("float labels", lambda: split_sites(_xy()[0], _xy()[1] + 0.5, method="srs"),
     ConfigError, r"y must hold integer class codes"),
    ("c = 0", lambda: make_pu(np.array([0, 1]), c=0.0, seed=0),
     ConfigError, r"c must be in \(0, 1\], got 0"),
    ("c > 1", lambda: make_pu(np.array([0, 1]), c=1.2, seed=0),
     ConfigError, r"c must be in \(0, 1\], got 1.2"),
    ("inbag_fraction 1", lambda: inbag_outbag(np.array([0, 0, 1, 1]), inbag_fraction=1.0, seed=0),
     ConfigError, r"inbag_fraction must be in \(0, 1\), got 1.0"),
    ("two sites have no curator", lambda: role_assignments(2),
     ConfigError, r"n_sites must be an integer >= 3, got 2"),
    ("one party", lambda: vertical_partition(5, 1),
     ConfigError, r"n_parties must be an integer >= 2, got 1"),
    ("more parties than features", lambda: vertical_partition(3, 4),
     ConfigError, r"n_parties must be <= n_features \(3\).*got n_parties=4"),
    ("active_features leaves none", lambda: vertical_partition(5, 3, active_features=4),
     ConfigError, r"active_features must be an int in 1..3.*got 4"),
    ("shuffle without seed", lambda: vertical_partition(5, 2, shuffle=True),
     ConfigError, r"shuffle=True needs a seed"),
]


@pytest.mark.parametrize("call, error, message", [row[1:] for row in BAD_INPUT],
                         ids=[row[0] for row in BAD_INPUT])
def test_bad_input_is_refused_with_a_helpful_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
