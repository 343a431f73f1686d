"""The one copy of each scorer, against hand-computed values and scikit-learn's."""

import numpy as np
import pytest
from sklearn.metrics import log_loss as sk_log_loss
from sklearn.metrics import roc_auc_score

from raytune_fed.errors import DatasetError
from raytune_fed.metrics import auc, log_loss, misclassification


def test_misclassification_is_the_error_rate():
    assert misclassification([1, 0, 1, 1], [1, 1, 1, 1]) == 0.25
    assert misclassification(np.array(["a", "b"]), np.array(["a", "b"])) == 0.0


def test_auc_closed_form_with_ties():
    # positives score 0.9 and 0.5, negatives 0.5 and 0.1: pairs (0.9>0.5, 0.9>0.1, 0.5=0.5, 0.5>0.1) -> 3.5/4
    assert auc([1, 1, 0, 0], [0.9, 0.5, 0.5, 0.1]) == pytest.approx(3.5 / 4)
    assert auc([0, 1], [0.2, 0.1]) == 0.0


def test_auc_and_log_loss_match_scikit_learn():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 500)
    s = np.round(rng.normal(size=500) + y, 1)  # rounded: many ties
    assert auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    p = 1 / (1 + np.exp(-s))
    assert log_loss(y, p) == pytest.approx(sk_log_loss(y, p), abs=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda: misclassification([1, 0], [1]), r"same length, got shapes \(2,\) and \(1,\)"),
    (lambda: misclassification([], []), "cannot score 0 rows"),
    (lambda: auc([1, 1], [0.2, 0.3]), "AUC needs both classes; got 2 rows of class 1 and 0 others"),
    (lambda: auc([1, 0], [np.nan, 0.3]), "scores must be finite"),
])
def test_scorer_errors_name_the_problem(call, message):
    with pytest.raises(DatasetError, match=message):
        call()
