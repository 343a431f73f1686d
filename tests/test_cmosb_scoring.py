"""How the CMOSB reproduction scores its searches (``raytune_fed.workflows.cmosb._scoring``, which
``experiments/bench_cmosb_seeds.py`` reports): Table 4's readings, the paired differences, Figures 10-11 by
generation, the flooding share and what each bound cuts away, on known answers."""

import numpy as np
import pandas as pd
import pytest

from raytune_fed.crypto import REFERENCE_OP_TIMES
from raytune_fed.workflows.cmosb import OBJECTIVES
from raytune_fed.workflows.cmosb._scoring import PAPER_BOUNDS, figures, flood_share, mosb_meets_bound, readings, table4


def test_table4_readings_scale_each_objective_as_stated():
    """all_rows: min-max over every method's rows; natural: losses as they are, cost over its largest value."""
    points = {"a": np.array([[0.2, 2.0, 0.6]]), "b": np.array([[0.4, 4.0, 0.8], [0.3, 1.0, 0.9]])}
    low, high = np.array([0.2, 1.0, 0.6]), np.array([0.4, 4.0, 0.9])
    hv = readings(points, low, high)
    # a's point scaled over every row: (0, 1/3, 0) -> box 1 x 2/3 x 1
    assert hv["all_rows"]["a"] == pytest.approx(2 / 3)
    # natural: (0.2, 2/4, 0.6) -> 0.8 x 0.5 x 0.4
    assert hv["natural"]["a"] == pytest.approx(0.8 * 0.5 * 0.4)
    # own rows: a single point sits at its own minimum on every axis
    assert hv["own_rows"]["a"] == pytest.approx(1.0)
    # b's two points, natural: (0.4, 1, 0.8) adds nothing (cost at the reference); (0.3, 0.25, 0.9)
    assert hv["natural"]["b"] == pytest.approx(0.7 * 0.75 * 0.1)


def test_table4_pairs_cmosb_with_each_baseline_by_seed():
    """CMOSB minus a baseline is taken within a seed (the seed's own normalisation), then averaged."""
    rows = {"cmosb": [0.1, 2.0, 0.5], "bo": [0.2, 1.0, 0.7]}
    frames = {s: pd.DataFrame([{"method": m, **dict(zip(OBJECTIVES, v))} for m, v in rows.items()]
                              + [{"method": "bo", **dict(zip(OBJECTIVES, [0.05 * (1 + s), 3.0, 0.4]))}])
              for s in (0, 1)}
    out = table4(frames)
    for reading, methods in out["readings"].items():
        paired = out["cmosb_minus_paired"][reading]["bo"]
        diff = [methods["cmosb"]["per_seed"][k] - methods["bo"]["per_seed"][k] for k in ("0", "1")]
        assert paired["per_seed"] == pytest.approx(dict(zip(("0", "1"), diff)))
        assert paired["mean"] == pytest.approx(sum(diff) / 2)
        assert paired["seeds_ahead"] == sum(d > 0 for d in diff) and paired["seeds"] == 2
    # all_rows, seed 0: cmosb (0.1, 2, 0.5) scales to (1/3, 1/2, 1/3) over rows ranging (0.05-0.2, 1-3, 0.4-0.7)
    assert out["readings"]["all_rows"]["cmosb"]["per_seed"]["0"] == pytest.approx(2 / 3 * 1 / 2 * 2 / 3)


def test_figures_score_a_search_still_running_up_to_the_generations_it_completed():

    def search(rows):  # rows: (generation, utility, cost, leakage); every member stays in the population
        return pd.DataFrame([{"generation": g, "slot": i, "in_population_until": 9, "utility_loss": u,
                              "training_cost": c, "privacy_leakage": p} for i, (g, u, c, p) in enumerate(rows)])

    mosb = {0: search([(0, 0.5, 1.0, 0.5), (1, 0.1, 1.0, 0.5)]), 1: search([(0, 0.3, 1.0, 0.5), (1, 0.3, 1.0, 0.5)])}
    penalty = {0: search([(0, 0.2, 1.0, 0.5)])}  # one generation so far
    out = figures(mosb, {"leakage_penalty": penalty, "leakage_domination": {}}, "privacy_leakage", 0.6)
    assert set(out["searches"]) == {"mosb", "leakage_penalty"}
    assert out["searches"]["leakage_penalty"]["generations_reached"] == {"0": 1}
    assert out["searches"]["mosb"]["so_far"]["n_seeds"] == [2, 2]
    paired = out["searches"]["leakage_penalty"]["so_far_final_minus_mosb"]
    # compared with MOSB at generation 1 (index 0), seed 0 only; utility scaled over [0.1, 0.5]
    assert paired["seeds_compared"] == ["0"] and paired["at_generation"] == {"0": 1}
    assert paired["per_seed"][0] == pytest.approx((1 - 0.25) - (1 - 1.0))
    # after every generation, over the seeds where both searches reached it: here only generation 1, seed 0
    by_generation = out["searches"]["leakage_penalty"]["so_far_minus_mosb_by_generation"]
    assert [g["n_seeds"] for g in by_generation] == [1]
    assert by_generation[0]["mean"] == pytest.approx((1 - 0.25) - (1 - 1.0)) and by_generation[0]["seeds_ahead"] == 1


def test_figures_pair_each_constrained_search_with_mosb_after_every_generation():

    def search(utilities):  # one member per generation, always feasible; only utility loss varies
        return pd.DataFrame([{"generation": g, "slot": 0, "in_population_until": 9, "utility_loss": u,
                              "training_cost": 1.0, "privacy_leakage": 0.5} for g, u in enumerate(utilities)])

    mosb = {0: search([0.5, 0.1]), 1: search([0.3, 0.3])}
    penalty = {0: search([0.2, 0.1]), 1: search([0.5, 0.2])}
    out = figures(mosb, {"leakage_penalty": penalty, "leakage_domination": {}}, "privacy_leakage", 0.6)
    # utility scaled over [0.1, 0.5]; hypervolume so far = 1 - the best scaled utility loss so far
    # MOSB: seed 0 -> 0, 1; seed 1 -> 0.5, 0.5.  penalty: seed 0 -> 0.75, 1; seed 1 -> 0, 0.75
    by_generation = out["searches"]["leakage_penalty"]["so_far_minus_mosb_by_generation"]
    assert [g["n_seeds"] for g in by_generation] == [2, 2]
    assert [g["mean"] for g in by_generation] == pytest.approx([0.125, 0.125])
    assert [g["std"] for g in by_generation] == pytest.approx([0.625 * 2 ** 0.5, 0.125 * 2 ** 0.5])
    assert [g["seeds_ahead"] for g in by_generation] == [1, 1]


def test_flood_share_leaves_out_configurations_that_encrypt_nothing():
    """Old: a configuration without federated trees (training cost 0, no decryption) made its share 0/0, and
    the median over Synthetic2's rows came out NaN.  Now the share is taken over priced rows, the others counted."""
    add = REFERENCE_OP_TIMES.addition
    frame = pd.DataFrame({"decryptions": [100, 0, 300, 200], "training_cost": [100 * add / 0.02, 0.0,
                                                                              300 * add / 0.01, 200 * add / 0.03]})
    share = flood_share(frame)
    assert share["n_rows"] == 3 and share["n_rows_without_cost"] == 1
    assert share["median"] == pytest.approx(0.02) and share["min"] == pytest.approx(0.01)
    assert share["max"] == pytest.approx(0.03)


def test_mosb_meets_bound_says_which_bounds_cut_the_unconstrained_search():
    mosb = {0: pd.DataFrame({"privacy_leakage": [0.2, 0.3, 0.33], "training_cost": [0.1, 0.4, 104.0]}),
            1: pd.DataFrame({"privacy_leakage": [0.1, 0.25], "training_cost": [0.6, 99.0]})}
    out = mosb_meets_bound(mosb, {"privacy_leakage": 0.6, "training_cost": 0.5})
    leak, cost = out["privacy_leakage <= 0.6"], out["training_cost <= 0.5"]
    assert leak["share_per_seed"] == {"0": 1.0, "1": 1.0} and not leak["binds"]
    assert leak["largest_value_per_seed"] == {"0": 0.33, "1": 0.25}
    assert cost["share_per_seed"] == pytest.approx({"0": 2 / 3, "1": 0.0}) and cost["binds"]
    paper = mosb_meets_bound(mosb, PAPER_BOUNDS)["training_cost <= 100"]
    assert paper["share_per_seed"] == pytest.approx({"0": 2 / 3, "1": 1.0}) and paper["binds"]
