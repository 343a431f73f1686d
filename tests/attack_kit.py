"""The attacker's tools: hand-made model records, built only from public knowledge.

The attacker of these tests knows the learners' declared records (they are public), the
site's feature count, and - the strongest assumption - the site's feature rows ``X``
(not its labels, not its in-bag split).  Everything here is plain numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

from raytune_fed.errors import BudgetExhaustedError, QueryRefusedError
from raytune_fed.federation import REFUSALS
from raytune_fed.models import ModelRecord

FIXED_TEXTS = set(REFUSALS.values())


def refusal(call):
    """Run ``call``; return the refusal it raised (the test fails if it was answered)."""
    with pytest.raises(QueryRefusedError) as info:
        call()
    return info.value

P = 12


def _scaled(k: int = P) -> dict[str, np.ndarray]:
    return {"keep": np.arange(k, dtype="<i8"), "mean": np.zeros(k), "scale": np.ones(k)}


def stump(feature: int, threshold: float, sign: float = 1.0) -> ModelRecord:
    """Elastic net record: class 1 where ``sign * (x_feature - threshold) > 0``."""
    return ModelRecord("elastic_net", {"alpha": 0.5, "lambda": 1.0},
                       {**_scaled(), "coef": sign * np.eye(P)[feature], "intercept": np.array([-sign * threshold])})


def balls(centres: np.ndarray, *, sigma: float = 2.0 ** 10) -> ModelRecord:
    """RBF SVM record: class 1 only within a tiny ball around each row of ``centres``."""
    centres = np.atleast_2d(np.asarray(centres, dtype=float))
    return ModelRecord("svm", {"C": 1.0, "sigma": sigma},
                       {**_scaled(), "support_vectors": centres, "dual_coef": np.ones(len(centres)),
                        "intercept": np.array([-0.5])})


def forest(nodes: list[tuple[int, int, int, float]], values: list[tuple[float, float]], *,
           n_trees: int = 100) -> ModelRecord:
    """A forest record of ``n_trees`` copies of one hand-written tree.

    ``nodes`` are (left, right, feature, threshold), leaves (-1, -1, -2, -2.0).
    """
    left, right, feat, thr = (np.array(c) for c in zip(*nodes))
    n = len(nodes)
    tile = lambda a, dt: np.tile(a.astype(dt), n_trees)  # noqa: E731
    return ModelRecord("random_forest", {"num_trees": n_trees, "min_node_size": 1, "sample_fraction": 1.0},
                       {"keep": np.arange(P, dtype="<i8"), "node_count": np.full(n_trees, n, dtype="<i8"),
                        "children_left": tile(left, "<i4"), "children_right": tile(right, "<i4"),
                        "feature": tile(feat, "<i4"), "threshold": tile(thr, "<f8"),
                        "value": np.tile(np.array(values, dtype="<f8"), (n_trees, 1))})


def box(feature_a: int, t_a: float, feature_b: int, t_b: float) -> ModelRecord:
    """A hand-written tree: class 1 exactly in the box x_a <= t_a and x_b <= t_b."""
    return forest([(1, 4, feature_a, t_a), (2, 3, feature_b, t_b), (-1, -1, -2, -2.0), (-1, -1, -2, -2.0),
                   (-1, -1, -2, -2.0)], [(1, 1), (1, 1), (0, 1), (1, 0), (1, 0)])


def with_arrays(record: ModelRecord, **arrays: np.ndarray) -> ModelRecord:
    """``record`` with some arrays replaced or added."""
    return ModelRecord(record.learner, dict(record.config), {**record.arrays, **arrays})


def group_attack(cur, X: np.ndarray, k: int) -> np.ndarray:
    """The best differencing we found within the guard: k-row group sums (a label guessed per row of ``X``).

    The attacker splits all rows into groups of k and asks one ball model per group; the
    losses give each group's count of class-1 in-bag rows up to the unknown split, and it
    labels each group by the majority its count suggests.
    """
    groups = [np.arange(i, min(i + k, len(X))) for i in range(0, len(X), k)]
    losses = {}
    for i, g in enumerate(groups):
        try:
            losses[i] = cur.query(balls(X[g])).value
        except BudgetExhaustedError:
            break
        except QueryRefusedError:  # the group holds fewer than k in-bag rows
            continue
    n = cur.n_rows
    positives = n / 2  # the attacker's best guess of the in-bag class-1 count
    guess = np.zeros(len(X), dtype=int)
    for i, loss in losses.items():
        in_bag = len(groups[i]) * n / len(X)
        share = (positives + in_bag - loss * n) / 2 / in_bag
        guess[groups[i]] = int(share > 0.5)
    return guess
