"""Pareto filtering, hypervolume against hand-computed values, win/loss matrices."""

import numpy as np
import pandas as pd
import pytest

from raytune_fed.errors import ConfigError
from raytune_fed.metrics import hypervolume, pareto_front, pareto_mask, win_loss_matrix


def test_pareto_mask_drops_dominated_keeps_duplicates():
    pts = [[0.1, 0.9], [0.5, 0.5], [0.6, 0.6], [0.9, 0.1], [0.5, 0.5]]
    assert pareto_mask(pts).tolist() == [True, True, False, True, True]
    assert pareto_front(pts).tolist() == [[0.1, 0.9], [0.5, 0.5], [0.9, 0.1]]


@pytest.mark.parametrize("points, ref, expected", [
    ([[0.5, 0.5]], [1, 1], 0.25),
    # two boxes 0.8x0.4 and 0.4x0.8 overlapping in 0.4x0.4: 0.32 + 0.32 - 0.16
    ([[0.2, 0.6], [0.6, 0.2]], [1, 1], 0.48),
    # a dominated point adds nothing
    ([[0.2, 0.6], [0.6, 0.2], [0.7, 0.7]], [1, 1], 0.48),
    # staircase 0.1/0.5/0.9: 0.9*0.1 + 0.5*0.4 + 0.1*0.4
    ([[0.1, 0.9], [0.5, 0.5], [0.9, 0.1]], [1, 1], 0.09 + 0.2 + 0.04),
    # a point outside the reference box contributes nothing
    ([[1.5, 0.1], [0.5, 0.5]], [1, 1], 0.25),
    ([[0.5, 0.5, 0.5]], [1, 1, 1], 0.125),
    # two 3-D boxes: 0.5*0.5*0.9 + 0.9*0.5*0.5 - overlap 0.5*0.5*0.5
    ([[0.5, 0.5, 0.1], [0.1, 0.5, 0.5]], [1, 1, 1], 0.225 + 0.225 - 0.125),
    # three points: inclusion-exclusion by hand
    ([[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]], [1, 1, 1], 3 * 0.25 - 3 * 0.125 + 0.125),
])
def test_hypervolume_known_values(points, ref, expected):
    assert hypervolume(points, ref) == pytest.approx(expected, abs=1e-12)


def test_hypervolume_empty_and_errors():
    assert hypervolume(np.zeros((0, 3)), [1, 1, 1]) == 0.0
    with pytest.raises(ConfigError, match="2 objectives but the reference point has 3"):
        hypervolume([[0.1, 0.2]], [1, 1, 1])
    with pytest.raises(ConfigError, match="non-finite"):
        hypervolume([[np.nan, 0.2]], [1, 1])


def test_win_loss_matrix_counts_wins_and_half_ties():
    scores = pd.DataFrame({"A": [0.5, 0.6, 0.4], "B": [0.4, 0.5, 0.4], "C": [0.9, 0.1, 0.0]})
    m = win_loss_matrix(scores)
    assert m.loc["A", "B"] == 2.5 and m.loc["B", "A"] == 0.5
    assert m.loc["A", "C"] == 2 and m.loc["C", "A"] == 1
    # every pair's counts add up to the number of experiments
    assert np.allclose(m.to_numpy() + m.to_numpy().T, 3 * (1 - np.eye(3)))
    lower = win_loss_matrix(scores, larger_is_better=False)
    assert lower.loc["A", "B"] == 0.5


def test_win_loss_needs_two_methods():
    with pytest.raises(ConfigError, match="at least two methods"):
        win_loss_matrix({"A": [1.0]})
