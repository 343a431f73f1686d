"""Named presets of ``raytune-fed rfms|pu|cmosb``: each builds valid settings for its workflow, the paper presets
equal what the benchmark scripts run, an option on the command line wins over the preset, an unknown preset is one
line and exit code 2, ``--help`` lists them, and the cheapest quick preset runs end to end on Ray."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from raytune_fed.cli._main import build_parser, main
from raytune_fed.cli._presets import PRESETS, get_preset
from raytune_fed.cli.cmosb import cmosb_settings
from raytune_fed.cli.pu import pu_settings
from raytune_fed.cli.rfms import rfms_settings
from raytune_fed.errors import ConfigError

MEASURED = Path(__file__).resolve().parents[1] / "experiments" / "measured"
ALL = [(w, n) for w, presets in PRESETS.items() for n in presets]


def _measured(name: str) -> dict:
    """A stored benchmark record: the settings the quoted numbers were measured with (read, never imported)."""
    return json.loads((MEASURED / f"{name}.json").read_text())


def _parse(*argv: str):
    return build_parser().parse_args(list(argv))


def _settings(workflow: str, args):
    return {"rfms": rfms_settings, "pu": pu_settings, "cmosb": cmosb_settings}[workflow](args)


@pytest.mark.parametrize("workflow, name", ALL)
def test_every_preset_parses_into_checked_settings_of_its_workflow(workflow, name):
    preset = get_preset(workflow, name)
    args = _parse(workflow, "--preset", name)
    for dest, value in preset.options.items():   # every option the preset sets reaches the namespace as given
        assert getattr(args, dest) == value, dest
    settings = _settings(workflow, args)          # RFMS and PU check when built; cmosb_settings runs check()
    assert type(settings).__name__ == {"rfms": "RFMSSettings", "pu": "PUGridSettings", "cmosb": "CMOSBSettings"}[
        workflow]
    if workflow == "rfms":
        from raytune_fed.models import LEARNERS

        assert set(args.learners) <= set(LEARNERS) and args.reps >= 1
    assert preset.summary and preset.cost and "\n" not in preset.help_line()


def test_rfms_slice_paper_and_guard_equal_the_measured_runs():
    from raytune_fed.workflows.rfms import RFMSSettings, build_grid
    from raytune_fed.workflows.rfms._sites import plan_sites

    paper = _measured("bench_grid_paper")   # bench_grid.py --runs local_tail: the slice at 20 + 40 evaluations
    run, cut = paper["settings"], paper["slice"]
    expected = RFMSSettings(dataset=cut["dataset"], split="natural", n_init=run["n_init"], n_iter=run["n_iter"],
                            seed=run["seed"], methods=tuple(cut["methods"]))
    args = _parse("rfms", "--preset", "slice")
    assert rfms_settings(args) == expected
    assert (args.pairs, args.reps, args.learners) == (cut["n_pairs"], cut["n_reps"], tuple(cut["learners"]))
    # the paper's grid: every openbox/lockbox pair of geo5_sim's five sites x 10 replications x the three learners,
    # the 600 units bench_grid projects
    args = _parse("rfms", "--preset", "paper")
    assert rfms_settings(args) == expected and args.learners == tuple(cut["learners"])
    plan = plan_sites(expected)
    specs = build_grid(expected, n_sites=len(plan.site_names), learners=args.learners, n_reps=args.reps,
                       n_pairs=args.pairs, site_names=plan.site_names)
    assert len(specs) == paper["projection"]["n_units"] == 600
    guard = _measured("bench_rfms_sites")   # bench_rfms.py, its geo5_sim grid under setup guard5_actor
    assert "guard5_actor" in guard["setups"]
    args = _parse("rfms", "--preset", "guard")
    assert rfms_settings(args) == RFMSSettings(dataset="geo5_sim", split="natural", n_init=guard["n_init"],
                                               n_iter=guard["n_iter"], guard_k=5)
    assert (args.pairs, args.reps, args.learners, args.sites) == (guard["n_pairs"], guard["n_reps"],
                                                                  tuple(guard["learners"]), "actor")


def test_pu_paper_presets_equal_the_measured_grids_of_bench_pu():
    from raytune_fed.workflows.pu import PUGridSettings

    def as_settings(record: dict, grid: str) -> PUGridSettings:
        command = record["command"]   # bench_pu's arguments; its _grid puts these under every part's settings
        base = {"n_reps": command["reps"], "seed": command["seed"], "supervised_trials": command["supervised_trials"],
                "baseline_configs": command["baseline_configs"], "prior": command["prior"]}
        part = {k: tuple(v) if isinstance(v, list) else v for k, v in record["grids"][grid]["settings"].items()}
        return PUGridSettings(**{**base, **part})

    parts = {"table2": ("bench_pu_main", "main"), "baselines": ("bench_pu_baselines", "baselines"),
             "table4": ("bench_pu_schedules", "schedules"), "table5": ("bench_pu_cv", "cv"),
             "table2-proportional": ("bench_pu_readings", "proportional"),
             "table2-uniform": ("bench_pu_readings", "uniform"), "table2-budget-4n": ("bench_pu_readings", "budget_4n"),
             "table2-true-prior": ("bench_pu_readings", "true_prior"),
             "table2-cv-odds": ("bench_pu_readings", "cv_odds"),
             "table5-cv-odds": ("bench_pu_readings", "cv_odds_exp")}
    assert set(parts) == set(PRESETS["pu"]) - {"quick"}
    for name, (record, grid) in parts.items():
        assert pu_settings(_parse("pu", "--preset", name)) == as_settings(_measured(record), grid), name
    # Figures 3-5's ODE curve (the figures part) is a subset of table2's cells
    figures = as_settings(_measured("bench_pu_figures"), "figures")
    table2 = pu_settings(_parse("pu", "--preset", "table2"))
    assert set(figures.datasets) == set(table2.datasets) and set(figures.cs) == set(table2.cs)
    assert set(figures.evaluators) <= set(table2.evaluators) and figures.methods == table2.methods


def test_cmosb_paper_presets_equal_one_seed_of_the_measured_bench_cmosb_seeds():
    from raytune_fed.workflows.cmosb import CMOSBSettings

    run = _measured("bench_cmosb_seeds_synthetic1")["settings"]
    assert run["seeds"] == "0,1,2" and run["datasets"] == "synthetic1"
    # what bench_cmosb_seeds' SeedCell.settings() builds for a variant, at the run's settings and seed 0
    common = dict(dataset="synthetic1", population=run["population"], generations=run["generations"], seed=0,
                  n_sample=run["attack_sample"], he="plain", op_times="reference")
    expected = {"table4": CMOSBSettings(**common, bo_trials=run["bo_trials"])}
    for bound, handling in (("leakage", "penalty"), ("leakage", "domination"), ("cost", "penalty"),
                            ("cost", "domination")):
        limit = {"max_leakage": run["max_leakage"]} if bound == "leakage" else {"max_cost": run["max_cost"]}
        name = f"figure10-{bound}" + ("" if handling == "penalty" else "-domination")
        expected[name] = CMOSBSettings(**common, baselines=(), constraint_handling=handling, **limit)
    assert set(expected) == set(PRESETS["cmosb"]) - {"quick"}
    for name, settings in expected.items():
        assert cmosb_settings(_parse("cmosb", "--preset", name)) == settings.check(), name
        assert "seed" in get_preset("cmosb", name).limits  # one seed per command: said, not faked


@pytest.mark.parametrize("argv, dest, value", [
    (["rfms", "--preset", "slice", "--reps", "1"], "reps", 1),
    (["rfms", "--preset", "slice", "--learners", "svm"], "learners", ("svm",)),
    (["rfms", "--preset", "quick", "--n-folds", "10"], "n_folds", 10),     # the parser's default, given: it wins
    (["rfms", "--reps", "1", "--preset", "paper"], "reps", 1),             # wherever it stands on the line
    (["pu", "--preset", "quick", "--reps", "10"], "reps", 10),             # the parser's default, given
    (["pu", "--preset", "table2", "--dataset", "titanic"], "dataset", ("titanic",)),
    (["pu", "--preset", "table5", "--no-compare-control-variate"], "compare_control_variate", False),
    (["cmosb", "--preset", "table4", "--generations", "2"], "generations", 2),
    (["cmosb", "--preset", "figure10-cost", "--max-cost", "1.5"], "max_cost", 1.5),
])
def test_an_option_on_the_command_line_wins_over_the_preset(argv, dest, value):
    args = _parse(*argv)
    assert getattr(args, dest) == value
    preset = get_preset(argv[0], args.preset)
    others = {k: v for k, v in preset.options.items() if k != dest}
    assert others and all(getattr(args, k) == v for k, v in others.items())  # the rest still come from the preset


def test_the_preset_leaves_the_parser_defaults_as_they_were():
    parser = build_parser()
    parser.parse_args(["rfms", "--preset", "quick"])
    assert parser.parse_args(["rfms"]).reps == 10 and parser.parse_args(["rfms"]).n_init == 20


@pytest.mark.parametrize("workflow", list(PRESETS))
def test_unknown_preset_is_one_line_naming_it_and_the_known_ones_exit_2(workflow, capsys, tmp_path):
    with pytest.raises(SystemExit) as stop:
        main([workflow, "--preset", "tabel2", "--out", str(tmp_path / "out")])
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"unknown {workflow} preset 'tabel2'; known: {', '.join(PRESETS[workflow])}" in lines[0]
    assert lines[0].startswith(f"raytune-fed: error: {workflow}: ")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match=f"unknown {workflow} preset 'tabel2'"):
        get_preset(workflow, "tabel2")


@pytest.mark.parametrize("workflow", list(PRESETS))
def test_help_lists_every_preset_with_its_meaning_and_cost(workflow, capsys):
    with pytest.raises(SystemExit):
        main([workflow, "--help"])
    text = capsys.readouterr().out
    for preset in PRESETS[workflow].values():
        assert f"  {preset.help_line()}" in text


def test_pu_quick_preset_runs_end_to_end_through_the_cli(ray_session, tmp_path, capsys):
    out = tmp_path / "quick"
    assert main(["pu", "--preset", "quick", "--out", str(out)]) == 0, capsys.readouterr().err
    frame = pd.read_parquet(out / "results.parquet")
    # twonorm, c = 0.1, one replication: ODE-IPM and uPU, each selected a model that ranks test rows
    assert sorted(frame["variant"]) == ["ode-ipm-selfpaced", "upu"]
    assert set(frame["dataset"]) == {"twonorm"} and set(frame["c"]) == {0.1} and set(frame["rep"]) == {0}
    assert frame["test_auc"].between(0.6, 1.0).all(), frame["test_auc"].tolist()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_cells"] == 2
    assert "--preset quick" in (out / "index.md").read_text()   # the report names the command that made it
