"""``experiments/bench_cmosb_seeds.py``, ``bench_nsga2.py`` and ``bench_party_wire.py``: bad options end with
one line and exit code 2 before Ray starts; the multi-seed CMOSB scoring."""

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def run(module, monkeypatch, capsys, *argv):
    monkeypatch.setattr(sys, "argv", ["bench.py", *argv])
    with pytest.raises(SystemExit) as stopped:
        module.main()
    err = capsys.readouterr().err.strip().splitlines()
    return stopped.value.code, err[-1] if err else ""


def test_bench_party_wire_names_unknown_paths_and_backends(monkeypatch, capsys):
    code, line = run(_load("bench_party_wire"), monkeypatch, capsys, "--paths", "local,ssh", "--backends", "ckks")
    assert code == 2 and "unknown backends or paths ['ckks', 'ssh']" in line


@pytest.mark.parametrize("argv, message", [
    (["--variants", "table4,speed"], "--variants takes some of table4,leakage_penalty,leakage_domination"),
    (["--seeds", "0,x"], "--seeds takes comma-separated integers, got '0,x'"),
    (["--seeds", "1,1"], "--seeds lists a seed twice: '1,1'"),
    (["--max-leakage", "1.5"], "--max-leakage in (0, 1]"),
])
def test_bench_cmosb_seeds_names_bad_options(monkeypatch, capsys, tmp_path, argv, message):
    code, line = run(_load("bench_cmosb_seeds"), monkeypatch, capsys, *argv, "--work", str(tmp_path / "w"))
    assert code == 2 and message in line
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("argv, message", [
    (["--problems", "zdt1,zdt9"], "--problems takes some of zdt1,zdt2,zdt3,dtlz2,cmosb, got 'zdt1,zdt9'"),
    (["--modes", "direct,ssh"], "--modes takes direct and/or tune, got 'direct,ssh'"),
    (["--seeds", "1"], "need --seeds >= 2"),
])
def test_bench_nsga2_names_bad_options(monkeypatch, capsys, tmp_path, argv, message):
    code, line = run(_load("bench_nsga2"), monkeypatch, capsys, *argv, "--out", str(tmp_path / "o.json"))
    assert code == 2 and message in line
    assert not (tmp_path / "o.json").exists()


def test_table4_readings_scale_each_objective_as_stated():
    """all_rows: min-max over every method's rows; natural: losses as they are, cost over its largest value."""
    import numpy as np

    seeds = _load("bench_cmosb_seeds")
    points = {"a": np.array([[0.2, 2.0, 0.6]]), "b": np.array([[0.4, 4.0, 0.8], [0.3, 1.0, 0.9]])}
    low, high = np.array([0.2, 1.0, 0.6]), np.array([0.4, 4.0, 0.9])
    hv = seeds.readings(points, low, high)
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
    seeds = _load("bench_cmosb_seeds")
    rows = {"cmosb": [0.1, 2.0, 0.5], "bo": [0.2, 1.0, 0.7]}
    frames = {s: pd.DataFrame([{"method": m, **dict(zip(seeds.OBJECTIVES, v))} for m, v in rows.items()]
                              + [{"method": "bo", **dict(zip(seeds.OBJECTIVES, [0.05 * (1 + s), 3.0, 0.4]))}])
              for s in (0, 1)}
    out = seeds.table4(frames)
    for reading, methods in out["readings"].items():
        paired = out["cmosb_minus_paired"][reading]["bo"]
        diff = [methods["cmosb"]["per_seed"][k] - methods["bo"]["per_seed"][k] for k in ("0", "1")]
        assert paired["per_seed"] == pytest.approx(dict(zip(("0", "1"), diff)))
        assert paired["mean"] == pytest.approx(sum(diff) / 2)
        assert paired["seeds_ahead"] == sum(d > 0 for d in diff) and paired["seeds"] == 2
    # all_rows, seed 0: cmosb (0.1, 2, 0.5) scales to (1/3, 1/2, 1/3) over rows ranging (0.05-0.2, 1-3, 0.4-0.7)
    assert out["readings"]["all_rows"]["cmosb"]["per_seed"]["0"] == pytest.approx(2 / 3 * 1 / 2 * 2 / 3)


def test_figures_score_a_search_still_running_up_to_the_generations_it_completed():
    seeds = _load("bench_cmosb_seeds")

    def search(rows):  # rows: (generation, utility, cost, leakage); every member stays in the population
        return pd.DataFrame([{"generation": g, "slot": i, "in_population_until": 9, "utility_loss": u,
                              "training_cost": c, "privacy_leakage": p} for i, (g, u, c, p) in enumerate(rows)])

    mosb = {0: search([(0, 0.5, 1.0, 0.5), (1, 0.1, 1.0, 0.5)]), 1: search([(0, 0.3, 1.0, 0.5), (1, 0.3, 1.0, 0.5)])}
    penalty = {0: search([(0, 0.2, 1.0, 0.5)])}  # one generation so far
    out = seeds.figures(mosb, {"leakage_penalty": penalty, "leakage_domination": {}}, "privacy_leakage", 0.6)
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
    seeds = _load("bench_cmosb_seeds")

    def search(utilities):  # one member per generation, always feasible; only utility loss varies
        return pd.DataFrame([{"generation": g, "slot": 0, "in_population_until": 9, "utility_loss": u,
                              "training_cost": 1.0, "privacy_leakage": 0.5} for g, u in enumerate(utilities)])

    mosb = {0: search([0.5, 0.1]), 1: search([0.3, 0.3])}
    penalty = {0: search([0.2, 0.1]), 1: search([0.5, 0.2])}
    out = seeds.figures(mosb, {"leakage_penalty": penalty, "leakage_domination": {}}, "privacy_leakage", 0.6)
    # utility scaled over [0.1, 0.5]; hypervolume so far = 1 - the best scaled utility loss so far
    # MOSB: seed 0 -> 0, 1; seed 1 -> 0.5, 0.5.  penalty: seed 0 -> 0.75, 1; seed 1 -> 0, 0.75
    by_generation = out["searches"]["leakage_penalty"]["so_far_minus_mosb_by_generation"]
    assert [g["n_seeds"] for g in by_generation] == [2, 2]
    assert [g["mean"] for g in by_generation] == pytest.approx([0.125, 0.125])
    assert [g["std"] for g in by_generation] == pytest.approx([0.625 * 2 ** 0.5, 0.125 * 2 ** 0.5])
    assert [g["seeds_ahead"] for g in by_generation] == [1, 1]


def test_bench_nsga2_counts_optuna_generations_from_the_runs_own_study(tmp_path):
    """The count reads the generation Optuna's sampler stored on each trial of a Tune run's searcher state."""
    import pickle

    import optuna

    nsga2 = _load("bench_nsga2")
    study = optuna.create_study(directions=["minimize", "minimize"])
    for generation in [0] * 5 + [1] * 3 + [2] * 2:
        trial = study.ask()
        study._storage.set_trial_system_attr(trial._trial_id, "NSGAIISampler:generation", generation)
        study.tell(trial, [0.0, 1.0])
    run = tmp_path / "zdt1_optuna_nsga2_7"
    run.mkdir()
    with open(run / "searcher-state-2026-01-01_00-00-00.pkl", "wb") as f:
        pickle.dump({"_ot_study": study}, f)
    runs = [{"problem": "zdt1", "mode": "tune", "method": "optuna_nsga2", "seed": 7},
            {"problem": "zdt1", "mode": "tune", "method": "nsga2search", "seed": 7},
            {"problem": "zdt2", "mode": "tune", "method": "optuna_nsga2", "seed": 7}]  # no state stored: left out
    assert nsga2.optuna_generations(tmp_path, runs) == {
        "zdt1": {"seeds": [7], "generation0_trials": [5], "last_generation": [2]}}


def test_bench_nsga2_resumes_from_another_path_to_the_same_files(monkeypatch, tmp_path):
    """A rerun resumes whatever path names its files; the JSON records no path of the machine."""
    nsga2 = _load("bench_nsga2")
    calls = []
    real = nsga2.run_direct

    def counted(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(nsga2, "run_direct", counted)
    common = ["--modes", "direct", "--problems", "zdt1", "--seeds", "2", "--population", "4", "--generations", "2",
              "--n-var", "3"]
    first = nsga2.main(common + ["--out", str(tmp_path / "o.json"), "--work", str(tmp_path / "w")])
    assert len(calls) == 2 * len(nsga2.METHODS)
    monkeypatch.chdir(tmp_path)
    again = nsga2.main(common + ["--out", "o.json", "--work", "w"])
    assert len(calls) == 2 * len(nsga2.METHODS)  # nothing ran again
    assert again["runs"] == first["runs"] and str(tmp_path) not in (tmp_path / "o.json").read_text()
    nsga2.main(common + ["--out", "o.json", "--work", "w", "--n-var", "4"])  # another problem size: runs again
    assert len(calls) == 4 * len(nsga2.METHODS)


def _stored_search(work, variant, seed, **settings):
    """A finished search as bench_cmosb_seeds leaves it: the cell's settings.json and runs/cmosb.parquet."""
    from raytune_fed.workflows.cmosb import CMOSBSettings

    out = work / "synthetic1" / variant / f"seed{seed}"
    (out / "runs").mkdir(parents=True)
    record = CMOSBSettings(dataset="synthetic1", population=2, generations=2, seed=seed, **settings).as_json()
    (out / "settings.json").write_text(__import__("json").dumps({"settings": record, "op_times": {}}))
    rows = [(0, 0, 1), (0, 1, 0), (1, 0, 1), (1, 1, 0)]  # (generation, slot, last generation in the population)
    pd.DataFrame([{"generation": g, "slot": s, "in_population_until": u, "utility_loss": 0.1 * (1 + s),
                   "training_cost": 0.3 + s, "privacy_leakage": 0.5 + 0.2 * s} for g, s, u in rows]
                 ).to_parquet(out / "runs" / "cmosb.parquet")


def test_penalty_survival_ranks_what_each_searchs_own_nsga2_ranked(tmp_path):
    survival = _load("cmosb_penalty_survival")
    _stored_search(tmp_path, "leakage_penalty", 0, max_leakage=0.6)
    search = survival.load(tmp_path, "synthetic1", "leakage_penalty", 0)
    raw = search.frame[list(survival.OBJECTIVES)].to_numpy(dtype=float)
    F = search.survival_objectives(raw)
    # the search's alpha (20) times the violation, on leakage only: 0.5 stays, 0.7 becomes 0.7 + 20 * 0.1
    assert F[:, 2].round(6).tolist() == [0.5, 2.7, 0.5, 2.7] and (F[:, :2] == raw[:, :2]).all()
    assert survival.load(tmp_path, "synthetic1", "leakage_penalty", 1) is None


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "0,x"], "--seeds takes comma-separated integers, got '0,x'"),
    (["--seeds", "0,1"], "the privacy_leakage searches under"),
])
def test_penalty_survival_names_bad_options(monkeypatch, capsys, tmp_path, argv, message):
    _stored_search(tmp_path, "leakage_penalty", 0, max_leakage=0.6)
    _stored_search(tmp_path, "leakage_domination", 1, max_leakage=0.5, constraint_handling="domination")
    code, line = run(_load("cmosb_penalty_survival"), monkeypatch, capsys, *argv, "--work", str(tmp_path),
                     "--out", str(tmp_path / "o.json"))
    assert code == 2 and message in line
    assert "different bounds [0.5, 0.6]" in line or "--seeds" in message
    assert not (tmp_path / "o.json").exists()


def test_flood_share_leaves_out_configurations_that_encrypt_nothing():
    """Old: a configuration without federated trees (training cost 0, no decryption) made its share 0/0, and
    the median over Synthetic2's rows came out NaN.  Now the share is taken over priced rows, the others counted."""
    seeds = _load("bench_cmosb_seeds")
    add = seeds.REFERENCE_OP_TIMES.addition
    frame = pd.DataFrame({"decryptions": [100, 0, 300, 200], "training_cost": [100 * add / 0.02, 0.0,
                                                                              300 * add / 0.01, 200 * add / 0.03]})
    share = seeds.flood_share(frame)
    assert share["n_rows"] == 3 and share["n_rows_without_cost"] == 1
    assert share["median"] == pytest.approx(0.02) and share["min"] == pytest.approx(0.01)
    assert share["max"] == pytest.approx(0.03)


def test_mosb_meets_bound_says_which_bounds_cut_the_unconstrained_search():
    seeds = _load("bench_cmosb_seeds")
    mosb = {0: pd.DataFrame({"privacy_leakage": [0.2, 0.3, 0.33], "training_cost": [0.1, 0.4, 104.0]}),
            1: pd.DataFrame({"privacy_leakage": [0.1, 0.25], "training_cost": [0.6, 99.0]})}
    out = seeds.mosb_meets_bound(mosb, {"privacy_leakage": 0.6, "training_cost": 0.5})
    leak, cost = out["privacy_leakage <= 0.6"], out["training_cost <= 0.5"]
    assert leak["share_per_seed"] == {"0": 1.0, "1": 1.0} and not leak["binds"]
    assert leak["largest_value_per_seed"] == {"0": 0.33, "1": 0.25}
    assert cost["share_per_seed"] == pytest.approx({"0": 2 / 3, "1": 0.0}) and cost["binds"]
    paper = seeds.mosb_meets_bound(mosb, seeds.PAPER_BOUNDS)["training_cost <= 100"]
    assert paper["share_per_seed"] == pytest.approx({"0": 2 / 3, "1": 1.0}) and paper["binds"]
