"""PU data: SCAR labels at label frequency c, one-vs-rest binarisation, train / validation / test splits."""

from __future__ import annotations

import numpy as np
import pytest

from raytune_fed.data import load_dataset
from raytune_fed.errors import ConfigError, DatasetError, SplitError
from raytune_fed.simulation import POSITIVE_CLASS, make_pu, pu_dataset, pu_split


def _data(n=1000, share=0.4, seed=0):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < share).astype(int)
    X = np.column_stack([np.arange(n), rng.normal(size=n) + y])     # column 0 identifies the row
    return X, y


def test_exact_draw_labels_round_c_times_the_positives():
    y = np.r_[np.ones(250), np.zeros(750)].astype(int)
    for c in (0.01, 0.05, 0.1, 0.2, 0.5, 1.0):
        s = make_pu(y, c=c, seed=4, draw="exact")
        assert s.sum() == int(np.floor(c * 250 + 0.5)) and np.all(s[y == 0] == 0)
    assert np.array_equal(make_pu(y, c=0.1, seed=4, draw="exact"), make_pu(y, c=0.1, seed=4, draw="exact"))
    assert not np.array_equal(make_pu(y, c=0.1, seed=4, draw="exact"), make_pu(y, c=0.1, seed=5, draw="exact"))


def test_exact_draw_is_uniform_over_positives():
    y = np.r_[np.ones(20), np.zeros(5)].astype(int)
    hits = sum(make_pu(y, c=0.25, seed=k, draw="exact")[:20].astype(int) for k in range(2000))
    assert hits.sum() == 2000 * 5
    assert np.abs(hits / 2000 - 0.25).max() < 0.05       # every positive is labelled about a quarter of the time


def test_split_shapes_shares_and_disjoint_rows():
    X, y = _data()
    split = pu_split(X, y, c=0.2, seed=1)
    ids = [split.X_train[:, 0], split.X_val[:, 0], split.X_test[:, 0]]
    assert sum(len(i) for i in ids) == 1000 and len(np.unique(np.concatenate(ids))) == 1000
    assert split.X_test.shape[0] == pytest.approx(300, abs=2)
    assert split.n_val == pytest.approx(0.25 * split.n_pu, abs=3)
    n_pos_d = int(y[np.isin(np.arange(1000), np.concatenate(ids[:2]).astype(int))].sum())
    assert split.s_train.sum() + split.s_val.sum() == int(np.floor(0.2 * n_pos_d + 0.5))
    assert split.s_val.sum() == pytest.approx(0.25 * (split.s_train.sum() + split.s_val.sum()), abs=1)
    # labels are honest: s = 1 only on positives; the test part keeps the true classes
    assert np.all(split.y_train[split.s_train == 1] == 1) and np.all(split.y_val[split.s_val == 1] == 1)
    assert np.array_equal(split.y_test, y[split.X_test[:, 0].astype(int)])
    assert abs(split.y_test.mean() - y.mean()) < 0.02
    assert split.unlabelled_prior() == pytest.approx(split.y_train[split.s_train == 0].mean())


def test_split_is_reproducible_and_seeded():
    X, y = _data()
    a, b, c = pu_split(X, y, c=0.1, seed=3), pu_split(X, y, c=0.1, seed=3), pu_split(X, y, c=0.1, seed=4)
    assert np.array_equal(a.X_train, b.X_train) and np.array_equal(a.s_val, b.s_val)
    assert not np.array_equal(a.X_train, c.X_train)
    with pytest.raises(ValueError):
        a.X_train[0, 0] = 5.0                             # the record's arrays are read-only


def test_multi_class_sets_become_one_class_against_the_rest():
    sat = pu_dataset(load_dataset("satimage"))
    assert sat.class_names == ("rest", "1") and sat.y.sum() == 1533 and POSITIVE_CLASS["satimage"] == "1"
    tex = pu_dataset(load_dataset("texture"))
    assert tex.class_names == ("rest", "2") and tex.y.sum() == 500
    titanic = load_dataset("titanic")
    assert pu_dataset(titanic) is titanic and titanic.class_names[1] == "1"
    assert pu_dataset(load_dataset("wine"), positive="class_1").y.sum() == (load_dataset("wine").y == 1).sum()
    with pytest.raises(ConfigError, match=r"dataset 'wine' has 3 classes \['class_0', 'class_1', 'class_2'\]; name"):
        pu_dataset(load_dataset("wine"))
    with pytest.raises(DatasetError, match=r"needs class names from"):
        pu_dataset(load_dataset("wine"), positive="7")


def test_sat_is_the_papers_class_7_against_class_1():
    # Table 1 of the ODE paper: 913 test rows (0.3 x 3041, rounded up) and a positive share of 0.495
    sat = pu_dataset(load_dataset("sat"))
    full = load_dataset("satimage")
    assert sat.n_rows == 3041 == int(np.isin(np.asarray(full.class_names)[full.y], ["1", "7"]).sum())
    assert sat.class_names == ("1", "7") and int(sat.y.sum()) == 1508 and round(sat.y.mean(), 3) == 0.496
    rows_7 = full.X[np.asarray(full.class_names)[full.y] == "7"]
    assert np.array_equal(sat.X[sat.y == 1], rows_7)
    split = pu_split(sat.X, sat.y, c=0.01, seed=0, name="sat")
    assert split.y_test.size == 912 and split.n_pu == 3041 - 912       # per-class rounding: 452 + 460


def test_every_benchmark_dataset_splits_at_the_smallest_c():
    for name in ("twonorm", "spambase", "chess", "sat", "satimage", "texture", "titanic"):
        split = pu_split(*_xy(name), c=0.01, seed=0, name=name)
        assert split.s_train.sum() >= 1 and split.s_val.sum() >= 1


def _xy(name):
    d = pu_dataset(load_dataset(name))
    return d.X, d.y


BAD_INPUT = [
    (lambda: pu_split(*_data(), c=0.0, seed=0), ConfigError, r"c must be in \(0, 1\], got 0.0"),
    (lambda: pu_split(*_data(), c=1.5, seed=0), ConfigError, r"c must be in \(0, 1\], got 1.5"),
    (lambda: pu_split(*_data(), c=-0.1, seed=0), ConfigError, r"c must be in \(0, 1\], got -0.1"),
    (lambda: pu_split(*_data(), c="high", seed=0), ConfigError, r"c must be in \(0, 1\], got 'high'"),
    (lambda: pu_split(_data()[0], np.ones(1000, dtype=int), c=0.1, seed=0, name="ones"), SplitError,
     r"dataset 'ones' has a single class \[1\]"),
    (lambda: pu_split(_data()[0], np.arange(1000) % 3, c=0.1, seed=0, name="three"), SplitError,
     r"y must be binary 0/1.*got classes \[0, 1, 2\]; use pu_dataset\(\)"),
    (lambda: pu_split(*_data(), c=0.002, seed=0, name="tiny"), SplitError,
     r"dataset 'tiny': c=0.002 labels 1 of the 2\d\d positives outside the test part; need >= 2"),
    (lambda: pu_split(*_data(), c=0.1, seed=0, test_size=1.0), ConfigError, r"test_size must be in \(0, 1\), got 1.0"),
    (lambda: pu_split(*_data(), c=0.1, seed=0, val_size=0), ConfigError, r"val_size must be in \(0, 1\]"),
    (lambda: pu_split(_data()[0][:10], _data()[1], c=0.1, seed=0), ConfigError, r"X must be 2-D with one row per"),
    (lambda: pu_split(*_data(), c=0.1, seed=-2), ConfigError, r"seed must be a non-negative int"),
    (lambda: make_pu(np.array([0, 1, 1]), c=0.1, seed=0, draw="exact"), SplitError,
     r"c=0.1 labelled none of the 2 positives \(exact draw\)"),
    (lambda: make_pu(np.array([0, 1]), c=0.5, seed=0, draw="poisson"), ConfigError,
     r"draw must be one of \('exact', 'bernoulli'\), got 'poisson'"),
    (lambda: pu_split(*_data(), c=0.1, seed=0).unlabelled_prior("test"), ConfigError, r"part must be 'train' or 'val'"),
]


@pytest.mark.parametrize("call, error, message", BAD_INPUT)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
