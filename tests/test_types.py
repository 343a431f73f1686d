"""Objectives and directions: flipped once, checked at the boundary."""

import pytest

from raytune_fed.errors import ConfigError
from raytune_fed.types import Objective, objectives


def test_objective_flips_maximised_values_once():
    acc = Objective("acc", "max")
    assert acc.to_minimised(0.9) == -0.9 and acc.from_minimised(-0.9) == 0.9
    assert Objective("loss").to_minimised(2) == 2.0


def test_objectives_from_tune_style_arguments():
    assert objectives("a", "min") == [Objective("a", "min")]
    assert objectives(["a", "b"], ["min", "max"]) == [Objective("a"), Objective("b", "max")]


@pytest.mark.parametrize("metric, mode, message", [
    (None, "min", "need both metric and mode"),
    ("a", ["min"], "both be a single name/mode or both be lists"),
    (["a", "b"], ["min"], r"one 'min'/'max' per metric \(2\)"),
    (["a", "a"], ["min", "min"], "must be distinct"),
    ("a", "up", "mode must be 'min' or 'max', got 'up'"),
    ("", "min", "non-empty metric name"),
])
def test_bad_objectives_are_refused(metric, mode, message):
    with pytest.raises(ConfigError, match=message):
        objectives(metric, mode)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), None, "x", True])
def test_non_finite_values_are_refused(value):
    with pytest.raises(ConfigError, match="objective 'loss' needs a finite number"):
        Objective("loss").to_minimised(value)
