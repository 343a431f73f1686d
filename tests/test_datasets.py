"""Datasets: embedded shapes against SOURCES.md, geo5_sim, user files, bad input, OpenML."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from urllib.error import URLError

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import Bunch

from raytune_fed.data import (
    Dataset,
    DatasetInfo,
    _openml,  # the network seam, replaced by a stub in the OpenML tests
    list_datasets,
    load_dataset,
)
from raytune_fed.errors import DatasetError, DatasetUnavailableError

REPO_ROOT = Path(__file__).resolve().parents[1]

# name -> (rows, features, {class name: count}); the file-backed numbers are those of
# raytune_fed/data/files/SOURCES.md, the others those of scikit-learn's documentation.
EXPECTED = {
    "breast_cancer": (569, 30, {"malignant": 212, "benign": 357}),
    "digits": (1797, 64, {"even": 891, "odd": 906}),
    "iris": (150, 4, {"setosa": 50, "versicolor": 50, "virginica": 50}),
    "wine": (178, 13, {"class_0": 59, "class_1": 71, "class_2": 48}),
    "synthetic1": (2000, 10, {"0": 1004, "1": 996}),
    "synthetic2": (10000, 10, None),
    "twonorm": (7400, 20, {"0": 3703, "1": 3697}),
    "spambase": (4597, 57, {"0": 2785, "1": 1812}),
    "chess": (3196, 38, {"nowin": 1527, "won": 1669}),
    "satimage": (6435, 36, {"1": 1533, "2": 703, "3": 1358, "4": 626, "5": 707, "7": 1508}),
    "sat": (3041, 36, {"1": 1533, "7": 1508}),
    "texture": (5500, 40, {c: 500 for c in ("2", "3", "4", "6", "7", "8", "9", "10", "12", "13", "14")}),
    "titanic": (2201, 3, {"-1": 1490, "1": 711}),
    "default_credit": (30000, 23, {"0": 23364, "1": 6636}),
    "gina_agnostic_subset": (1763, 970, {"-1": 894, "1": 869}),
    "gse6861_subset": (128, 1000, {"RD": 80, "pCR": 48}),
    "geo5_sim": (779, 1000, None),
}


def _class_counts(ds: Dataset) -> dict[str, int]:
    return dict(zip(ds.class_names, np.bincount(ds.y, minlength=ds.n_classes).tolist()))


# --- embedded datasets -------------------------------------------------------------------

def test_every_embedded_dataset_is_listed_and_expected():
    assert [info.name for info in list_datasets()] == list(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_embedded_shape_and_class_counts(name):
    rows, features, counts = EXPECTED[name]
    ds = load_dataset(name)
    assert (ds.name, ds.n_rows, ds.n_features) == (name, rows, features)
    if counts is not None:
        assert _class_counts(ds) == counts
    assert ds.X.dtype == np.float64 and ds.y.dtype == np.int64
    assert np.isfinite(ds.X).all()
    assert len(ds.feature_names) == ds.n_features and len(set(ds.feature_names)) == ds.n_features
    assert ds.source


@pytest.mark.process
@pytest.mark.parametrize("name", list(EXPECTED))
def test_list_datasets_numbers_match_loaded_data(name):
    info = {i.name: i for i in list_datasets()}[name]
    ds = load_dataset(name)
    assert isinstance(info, DatasetInfo) and info.kind == "embedded"
    assert (info.rows, info.features, info.classes, info.sites) == (
        ds.n_rows, ds.n_features, ds.n_classes, ds.n_sites)


def _run_python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                         timeout=120)
    return out.stdout.strip()


@pytest.mark.process
def test_listing_in_a_fresh_process_imports_no_scikit_learn():
    code = ("import sys\n"
            "from raytune_fed.data import list_datasets\n"
            "print(len(list_datasets()), 'sklearn' in sys.modules)\n")
    n, sklearn_imported = _run_python(code).split()
    assert (int(n), sklearn_imported) == (len(EXPECTED), "False")


def test_synthetic2_has_ten_balanced_classes():
    counts = np.bincount(load_dataset("synthetic2").y)
    assert counts.shape == (10,) and counts.min() > 900 and counts.max() < 1100


def test_chess_is_one_hot_and_titanic_named():
    chess = load_dataset("chess")
    assert set(np.unique(chess.X)) == {0.0, 1.0}
    assert {"katri=b", "katri=n", "katri=w", "dwipd=l", "wtoeg=t"} <= set(chess.feature_names)
    assert load_dataset("titanic").feature_names == ("class", "age", "sex")


def test_loads_are_cached_and_read_only():
    first, second = load_dataset("spambase"), load_dataset("spambase")
    assert first is second
    for array in (first.X, first.y):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 0


def test_dataset_copies_a_callers_writable_array():
    X = np.zeros((4, 2))
    ds = Dataset("tiny", X, np.array([0, 1, 0, 1]), ("a", "b"), ("n", "p"))
    X[0, 0] = 5.0
    assert ds.X[0, 0] == 0.0 and not ds.X.flags.writeable and X.flags.writeable


def test_binarize_one_vs_rest():
    sat = load_dataset("satimage")
    one = sat.binarize("7")
    assert one.class_names == ("rest", "7")
    assert _class_counts(one) == {"rest": 6435 - 1508, "7": 1508}
    both = sat.binarize(["1", "7"])
    assert _class_counts(both) == {"rest": 6435 - 1533 - 1508, "1+7": 1533 + 1508}
    assert both.X is sat.X  # no copy of the features
    geo = load_dataset("geo5_sim").binarize("RD")
    assert geo.n_sites == 5 and np.array_equal(geo.y, 1 - load_dataset("geo5_sim").y)


@pytest.mark.parametrize("positive, pattern", [
    ("8", r"satimage.*class names from \['1', '2', '3', '4', '5', '7'\], got \['8'\]"),
    ([], r"satimage.*binarize"),
    (["1", "2", "3", "4", "5", "7"], r"satimage.*every class positive"),
])
def test_binarize_rejects_bad_positive(positive, pattern):
    with pytest.raises(DatasetError, match=pattern):
        load_dataset("satimage").binarize(positive)


# --- geo5_sim ------------------------------------------------------------------------------

GEO5_SITE_NAMES = ("GSE16446_sim", "GSE20194_sim", "GSE20271_sim", "GSE32646_sim", "GSE6861_sim")

def test_geo5_sim_structure():
    ds = load_dataset("geo5_sim")
    assert ds.n_sites == 5 and ds.site_names == GEO5_SITE_NAMES
    assert np.bincount(ds.sites).tolist() == [114, 211, 178, 115, 161]
    assert ds.n_features == 1000 and ds.n_rows == 779
    rates = [ds.y[ds.sites == s].mean() for s in range(5)]
    assert all(0.15 < r < 0.45 for r in rates) and 0.25 < ds.y.mean() < 0.35
    assert np.ptp(rates) > 0.05  # prevalence differs between sites
    site_means = np.array([ds.X[ds.sites == s].mean(axis=0) for s in range(5)])
    assert np.median(site_means.std(axis=0)) > 0.2  # batch effects shift gene means per site


def _digest(ds: Dataset) -> str:
    h = hashlib.sha256()
    for array in (ds.X, ds.y, ds.sites):
        h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


@pytest.mark.process
def test_geo5_sim_same_in_another_process():
    code = ("import hashlib, numpy as np\n"
            "from raytune_fed.data import load_dataset\n"
            "ds = load_dataset('geo5_sim')\n"
            "h = hashlib.sha256()\n"
            "for a in (ds.X, ds.y, ds.sites): h.update(np.ascontiguousarray(a).tobytes())\n"
            "print(h.hexdigest())\n")
    assert _run_python(code) == _digest(load_dataset("geo5_sim"))


def _logistic():
    """L2 logistic regression; the dual liblinear solver is fast when p >> n."""
    return make_pipeline(StandardScaler(), LogisticRegression(C=0.01, solver="liblinear", dual=True))


def test_geo5_sim_signal_within_site_beats_cross_site():
    ds = load_dataset("geo5_sim")
    within = []
    for s in range(ds.n_sites):
        X, y = ds.X[ds.sites == s], ds.y[ds.sites == s]
        scores = cross_val_predict(_logistic(), X, y, cv=StratifiedKFold(5, shuffle=True, random_state=0),
                                   method="decision_function")
        within.append(roc_auc_score(y, scores))
    cross = []
    for train in range(ds.n_sites):
        model = _logistic().fit(ds.X[ds.sites == train], ds.y[ds.sites == train])
        for test in range(ds.n_sites):
            if test != train:
                rows = ds.sites == test
                cross.append(roc_auc_score(ds.y[rows], model.decision_function(ds.X[rows])))
    assert all(0.6 < auc < 0.9 for auc in within), within
    assert 0.65 < np.mean(within) < 0.85, within
    assert np.mean(cross) < np.mean(within) - 0.05, (np.mean(cross), np.mean(within))
    assert np.mean(cross) > 0.55  # still learnable across sites


# --- user files ----------------------------------------------------------------------------

def _frame(n=12):
    rng = np.random.default_rng(0)
    return pd.DataFrame({
        "age": rng.integers(20, 80, n),
        "dose": rng.normal(size=n),
        "arm": np.array(["a", "b", "c"])[np.arange(n) % 3],
        "hospital": np.array(["north", "south"])[np.arange(n) // (n // 2)],
        "outcome": np.array(["no", "yes"])[np.arange(n) % 2],
    })


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_file_with_target_and_site_column(tmp_path, suffix):
    frame = _frame()
    path = tmp_path / f"cohort{suffix}"
    if suffix == ".parquet":
        frame.to_parquet(path)
    else:
        frame.to_csv(path, index=False)
    ds = load_dataset(str(path), target="outcome", site_column="hospital")
    assert ds.name == f"cohort{suffix}"
    assert ds.feature_names == ("age", "dose", "arm=a", "arm=b", "arm=c")
    assert ds.class_names == ("no", "yes") and ds.y.tolist() == [0, 1] * 6
    assert ds.site_names == ("north", "south") and ds.sites.tolist() == [0] * 6 + [1] * 6
    np.testing.assert_allclose(ds.X[:, 1], frame["dose"].to_numpy())
    assert ds.X[:, 2:].sum(axis=1).tolist() == [1.0] * 12
    without_sites = load_dataset(path, target="outcome")  # a PathLike works too
    assert without_sites.sites is None and without_sites.n_sites == 0 and without_sites.n_features == 6


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


_GOOD = "a,b,y\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(8))
_TWO_SITES = "a,site,y\n" + "".join(f"{i},{'s1' if i < 4 else 's2'},{i % 2}\n" for i in range(8))
_FREE_TEXT = "note,a,y\n" + "".join(f"word{i},{i},{i % 2}\n" for i in range(60))

# (file name, content, load_dataset keyword arguments, message pattern)
BAD_INPUTS = [
    ("nan.csv", "a,b,y\n1,,0\n2,3,1\n4,,0\n5,6,1\n", {"target": "y"},
     r"'nan\.csv': 2 missing or non-finite feature values \(NaN/inf\); first in column 'b'"),
    ("inf.csv", "a,b,y\n1,inf,0\n2,3,1\n", {"target": "y"},
     r"'inf\.csv': 1 missing or non-finite .*column 'b'"),
    ("text.csv", _FREE_TEXT, {"target": "y"},
     r"'text\.csv': non-numeric column 'note' has 60 distinct values \(more than 50\)"),
    ("missing_cat.csv", "c,a,y\nx,1,0\n,2,1\nz,3,0\nx,4,1\n", {"target": "y"},
     r"'missing_cat\.csv': non-numeric column 'c' has 1 missing values"),
    ("one_class.csv", "a,y\n1,1\n2,1\n3,1\n", {"target": "y"},
     r"'one_class\.csv': target column 'y' has only one class \('1'\)"),
    ("no_target.csv", _GOOD, {"target": "label"},
     r"'no_target\.csv': target column 'label' not found; columns are \['a', 'b', 'y'\]"),
    ("no_site.csv", _GOOD, {"target": "y", "site_column": "hospital"},
     r"'no_site\.csv': site column 'hospital' not found; columns are \['a', 'b', 'y'\]"),
    ("target_needed.csv", _GOOD, {},
     r"'target_needed\.csv': a file dataset needs target=.*columns are \['a', 'b', 'y'\]"),
    ("thin_site.csv", "a,site,y\n1,s1,0\n2,s1,1\n3,s1,0\n4,s1,1\n5,s2,0\n6,s2,0\n7,s2,1\n",
     {"target": "y", "site_column": "site"},
     r"'thin_site\.csv': site 's2' has 1 rows of class '1'; every site needs at least 2"),
    ("target_missing.csv", "a,y\n1,0\n2,\n3,1\n", {"target": "y"},
     r"'target_missing\.csv': target column 'y' has 1 missing values"),
    ("site_missing.csv", "a,s,y\n1,u,0\n2,,1\n3,u,1\n", {"target": "y", "site_column": "s"},
     r"'site_missing\.csv': site column 's' has 1 missing values"),
    ("same.csv", _TWO_SITES, {"target": "y", "site_column": "y"},
     r"'same\.csv': the site column and the target are the same column 'y'"),
    ("only_target.csv", "y\n0\n1\n", {"target": "y"}, r"'only_target\.csv': no feature columns left"),
    ("empty.csv", "", {"target": "y"}, r"'empty\.csv': the file is empty \(0 bytes\)"),
    ("blank.csv", "\n\n", {"target": "y"}, r"'blank\.csv': the file is empty"),
    ("header_only.csv", "a,b,y\n", {"target": "y"}, r"'header_only\.csv': the table has no rows"),
    ("table.txt", _GOOD, {"target": "y"},
     r"'table\.txt': unknown file extension '\.txt'; expected one of \['\.csv', '\.csv\.gz', '\.parquet'\]"),
    ("broken.parquet", "not parquet", {"target": "y"}, r"'broken\.parquet': cannot read the file as Parquet"),
]


@pytest.mark.parametrize("file_name, content, kwargs, pattern", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_file_input(tmp_path, file_name, content, kwargs, pattern):
    path = _write(tmp_path, file_name, content)
    with pytest.raises(DatasetError, match=pattern):
        load_dataset(str(path), **kwargs)


def test_good_inputs_of_the_bad_table_load(tmp_path):
    """The fixtures differ from valid files only by the fault under test."""
    assert load_dataset(str(_write(tmp_path, "good.csv", _GOOD)), target="y").n_rows == 8
    two = load_dataset(str(_write(tmp_path, "two.csv", _TWO_SITES)), target="y", site_column="site")
    assert two.n_sites == 2


@pytest.mark.parametrize("name, kwargs, pattern", [
    ("no_such_set", {}, r"unknown dataset 'no_such_set'.*Embedded: \['breast_cancer', .*'geo5_sim'\].*Bioresponse"),
    ("missing/file.csv", {"target": "y"}, r"'file\.csv': file not found"),
    ("spambase", {"target": "y"}, r"'spambase' is embedded .*\['target'\]"),
    ("geo5_sim", {"site_column": "s"}, r"'geo5_sim' is embedded .*\['site_column'\]"),
    ("", {}, r"non-empty string"),
    ("openml:", {}, r"give an OpenML name or id"),
])
def test_bad_names(name, kwargs, pattern):
    with pytest.raises(DatasetError, match=pattern):
        load_dataset(name, **kwargs)


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(y=np.array([0, 1, 2, 1])), r"'tiny': y codes must lie in 0\.\.1, got range 0\.\.2"),
    (dict(y=np.array([0.0, 1.0, 0.0, 1.0])), r"'tiny': y must hold integer class codes, got dtype float64"),
    (dict(y=np.array([0, 0, 0, 0])), r"'tiny': class\(s\) \['p'\] have no rows"),
    (dict(X=np.array([[0.0, np.nan]] * 4)), r"'tiny': 4 missing or non-finite .*first in column 'b'"),
    (dict(feature_names=("a",)), r"'tiny': need 2 distinct feature names, got 1"),
    (dict(sites=np.array([0, 0, 1, 1])), r"'tiny': give both sites and site_names or neither"),
    (dict(sites=np.array([0, 0, 1, 1]), site_names=("u", "v")), r"'tiny': site 'u' has 1 rows of class 'n'"),
])
def test_dataset_record_rejects_inconsistent_fields(kwargs, pattern):
    fields = dict(name="tiny", X=np.zeros((4, 2)), y=np.array([0, 1, 0, 1]), feature_names=("a", "b"),
                  class_names=("n", "p"))
    with pytest.raises(DatasetError, match=pattern):
        Dataset(**{**fields, **kwargs})


# --- OpenML (no network: fetch_openml is replaced) ----------------------------------------------

def test_openml_offline_names_dataset_and_file_fallback(monkeypatch, tmp_path):
    def offline(**kwargs):
        raise URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(_openml, "fetch_openml", offline)
    with pytest.raises(DatasetUnavailableError) as info:
        load_dataset("openml:Bioresponse", cache_dir=tmp_path)
    message = str(info.value)
    assert "'openml:Bioresponse' could not be fetched from OpenML" in message
    assert "Temporary failure in name resolution" in message
    assert "--dataset path/to/file.csv --target label" in message
    assert info.value.__cause__ is None and isinstance(info.value, DatasetError)


def _fake_openml(calls):
    frame = pd.DataFrame({
        "num": [0.5, 1.5, 2.5, 3.5, 4.5, 5.5],
        "colour": pd.Categorical(["red", "blue", "green", "red", "blue", "green"]),
        "flag": pd.Categorical(["t", "f", "t", "f", "t", "f"]),
        "cls": pd.Categorical(["neg", "pos", "neg", "pos", "neg", "pos"]),
    })

    def fetch(**kwargs):
        calls.append(kwargs)
        return Bunch(frame=frame, data=frame.drop(columns="cls"), target=frame["cls"], target_names=["cls"])

    return fetch


def test_openml_success_encodes_categories(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(_openml, "fetch_openml", _fake_openml(calls))
    ds = load_dataset("Bioresponse", cache_dir=tmp_path)
    assert calls == [dict(name="Bioresponse", version=1, as_frame=True, data_home=str(tmp_path))]
    assert ds.name == "openml:Bioresponse"
    assert ds.class_names == ("neg", "pos") and ds.y.tolist() == [0, 1, 0, 1, 0, 1]
    assert ds.feature_names == ("num", "colour=blue", "colour=green", "colour=red", "flag=t")
    assert ds.X[:, 1:4].tolist()[0] == [0.0, 0.0, 1.0] and ds.X[:, 4].tolist() == [1, 0, 1, 0, 1, 0]


def test_openml_ids_env_cache_and_chosen_target(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(_openml, "fetch_openml", _fake_openml(calls))
    monkeypatch.setenv("RAYTUNE_FED_CACHE", str(tmp_path / "env"))
    ds = load_dataset("openml:4134", target="flag")
    assert calls[-1] == dict(data_id=4134, as_frame=True, data_home=str(tmp_path / "env"))
    assert ds.class_names == ("f", "t") and "cls=pos" in ds.feature_names
    load_dataset("718")
    assert calls[-1]["data_id"] == 718
    load_dataset("openml:some_other_set")
    assert calls[-1]["name"] == "some_other_set" and calls[-1]["version"] == "active"
    monkeypatch.delenv("RAYTUNE_FED_CACHE")
    assert _openml.default_cache_dir() == Path.home() / ".cache" / "raytune_fed" / "openml"


def test_openml_missing_values_name_count_and_column(monkeypatch):
    frame = pd.DataFrame({"a": [1.0, np.nan, np.nan, 4.0], "cls": pd.Categorical(["x", "y", "x", "y"])})
    monkeypatch.setattr(_openml, "fetch_openml", lambda **kw: Bunch(frame=frame, target_names=["cls"]))
    with pytest.raises(DatasetError, match=r"'openml:gina_agnostic': 2 missing .*first in column 'a'"):
        load_dataset("openml:gina_agnostic")


def test_openml_unknown_name_is_a_dataset_error(monkeypatch):
    def not_found(**kwargs):
        raise ValueError("No active dataset nope found.")

    monkeypatch.setattr(_openml, "fetch_openml", not_found)
    with pytest.raises(DatasetError, match=r"'openml:nope': OpenML did not return it: No active dataset") as info:
        load_dataset("openml:nope")
    assert not isinstance(info.value, DatasetUnavailableError)


def test_directory_and_long_column_lists(tmp_path):
    with pytest.raises(DatasetError, match=r"is a directory, not a data file"):
        load_dataset(str(tmp_path))
    wide = pd.DataFrame(np.zeros((2, 30)), columns=[f"c{j}" for j in range(30)])
    path = tmp_path / "wide.parquet"
    wide.to_parquet(path)
    with pytest.raises(DatasetError, match=r"target column 'y' not found; columns are \['c0', .*'c19'\] "
                                           r"\.\.\. \(30 in all\)$"):
        load_dataset(path, target="y")


def test_number_like_text_labels_sort_numerically(monkeypatch):
    frame = pd.DataFrame({"a": np.arange(9.0), "cls": pd.Categorical(["10", "2", "1"] * 3)})
    monkeypatch.setattr(_openml, "fetch_openml", lambda **kw: Bunch(frame=frame, target_names=["cls"]))
    ds = load_dataset("openml:61")
    assert ds.class_names == ("1", "2", "10") and ds.y[:3].tolist() == [2, 1, 0]
