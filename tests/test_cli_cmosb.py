"""``raytune-fed cmosb`` through ``main()``: a tiny real run (Tune, party actors; the suite's one run, conftest's
``cmosb_cli_run``), resume, restore, an interrupted run against an uninterrupted one, bad input."""

from __future__ import annotations

import json
from urllib.error import URLError

import pandas as pd
import pytest

from raytune_fed.cli._main import main

TINY = ["--population", "2", "--generations", "1", "--grid-levels", "1", "--bo-trials", "1",
        "--attack-sample", "100", "--he", "plain", "--seed", "3"]


def test_a_tiny_run_writes_results_summary_and_report_and_resumes(cmosb_cli_run, capsys):
    run, out = cmosb_cli_run, cmosb_cli_run.out
    assert run.code == 0, run.stderr
    frame = run.frame
    assert frame.groupby("run").size().to_dict() == {
        "cmosb": 2, "es": 4, "gs": 1, "bo_utility_loss": 1, "bo_training_cost": 1, "bo_privacy_leakage": 1}
    assert set(frame.method) == {"cmosb", "es", "gs", "bo"}
    assert frame[["utility_loss", "training_cost", "privacy_leakage"]].notna().all().all()
    assert (frame.training_cost > 0).all() and (frame.encryptions > 0).all()
    assert sorted(frame[frame.method == "es"].preset) == ["average", "fate", "point0", "vf2boost"]
    summary = json.loads((out / "summary.json").read_text())
    methods = summary["datasets"]["synthetic1"]["methods"]
    assert set(methods) == {"cmosb", "es", "gs", "bo"} and all(0 <= m["hypervolume"] <= 1 for m in methods.values())
    # the constrained front holds feasible configurations only
    assert all(r["privacy_leakage"] <= 0.9 for m in methods.values() for r in m["front"])
    assert methods["cmosb"]["n_feasible"] == int((frame[frame.method == "cmosb"].privacy_leakage <= 0.9).sum())
    assert len(summary["datasets"]["synthetic1"]["cmosb_hypervolume_by_generation"]) == 1
    assert sorted(frame[frame.method == "cmosb"].generation) == [0, 0]
    assert {"pareto3d_synthetic1.png", "pareto2d_synthetic1.png", "hypervolume_by_generation_synthetic1.png",
            "index.html", "index.md"} <= \
        {p.name for p in out.iterdir()}
    assert "cmosb: 2/2 trials" in run.stderr and "CMOSB" in run.stdout
    assert "Configuration for experiment" not in run.stdout + run.stderr   # no Tune tables in the CLI

    # a second run reruns nothing and gives the same rows
    argv = run.argv
    assert main(argv) == 0
    again = capsys.readouterr()
    assert again.err.count("finished before, not run again") == 6 and "starting" not in again.err
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), frame)

    # a run whose Tune experiment exists but was not recorded as finished is restored, not started again
    (out / "runs" / "cmosb.parquet").unlink()
    assert main(argv) == 0
    restored = capsys.readouterr()
    assert "cmosb: restoring the interrupted Tune run" in restored.err and "cmosb: starting" in restored.err
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet").sort_values(["run", "trial_id"])
                                  .reset_index(drop=True),
                                  frame.sort_values(["run", "trial_id"]).reset_index(drop=True))

    # other options on the same directory are refused
    assert main([*argv, "--generations", "2"]) == 2
    assert "holds a CMOSB run with other settings (generations differ)" in capsys.readouterr().err


# Tune's trial ids and finish times and the measured seconds differ between runs; nothing else may
VARYING = ["trial_id", "finished_at", "fit_seconds", "attack_seconds"]
ORDER = ["run", "generation", "slot", "preset", "n_federated_trees", "n_local_trees", "max_depth", "subsample",
         "purity_threshold", "learning_rate"]


def test_ctrl_c_then_the_same_command_in_another_process_gives_the_rows_of_an_uninterrupted_run(
        ray_session, tmp_path, capsys):
    """Tune ends a run on SIGINT by returning what finished: that must not be written as the method's rows, and
    the same command restores the run.  Generations come from NSGA2Search's record and BO proposes in batches
    (12 trials per objective: TPE's model proposes after its 10 random ones), so neither the interruption nor
    the order trials finish in changes a row: the restored run, in another process, equals an uninterrupted
    run of the same command in this one."""
    import signal
    import subprocess
    import sys
    import time

    options = ["cmosb", "--dataset", "synthetic1", "--population", "4", "--generations", "3", "--baselines", "bo",
               "--bo-trials", "12", "--attack-sample", "100", "--max-leakage", "0.7", "--seed", "5",
               "--address", ray_session.get_runtime_context().gcs_address]
    out = tmp_path / "interrupted"
    argv = [sys.executable, "-m", "raytune_fed.cli", *options, "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen, deadline = [], time.monotonic() + 300
    for line in proc.stderr:  # interrupt once a trial of the CMOSB run finished
        seen.append(line)
        if "cmosb: 1/12 trials" in line or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=300)[1]
    err = "".join(seen) + rest
    assert proc.returncode == 130, err
    assert f"raytune-fed: interrupted; the finished trials are kept in {out}; run the same command again to resume" \
        in err and "Traceback" not in err
    assert not (out / "runs" / "cmosb.parquet").exists() and not (out / "results.parquet").exists()
    finished = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr
    assert "cmosb: restoring the interrupted Tune run" in finished.stderr
    # the display counts the trials the interrupted run finished as done: its last step is the last of 48
    steps = [line for line in finished.stderr.splitlines() if line.startswith("[")]
    assert steps[-1].startswith("[48/48] "), finished.stderr

    assert main([*options, "--out", str(tmp_path / "uninterrupted")]) == 0
    capsys.readouterr()
    frames = [pd.read_parquet(tmp_path / name / "results.parquet") for name in ("interrupted", "uninterrupted")]
    summaries = [json.loads((tmp_path / name / "summary.json").read_text())
                 for name in ("interrupted", "uninterrupted")]
    assert frames[0].groupby("run").size().to_dict() == {
        "cmosb": 12, "bo_utility_loss": 12, "bo_training_cost": 12, "bo_privacy_leakage": 12}
    assert frames[0].trial_id.is_unique
    # the searcher's record of generations survived the restore: three generations of four, slots 0-3 each
    assert frames[0][frames[0].run == "cmosb"].groupby("generation").slot.apply(sorted).tolist() == [[0, 1, 2, 3]] * 3
    same = [f.drop(columns=VARYING).sort_values(ORDER, ignore_index=True) for f in frames]
    pd.testing.assert_frame_equal(same[0], same[1])
    assert summaries[0] == summaries[1]

    cmosb = frames[1][frames[1].method == "cmosb"]
    assert cmosb[["generation", "slot"]].values.tolist() == [[g, i] for g in range(3) for i in range(4)]
    # four members in the population after every generation, each there from its own generation on
    for g in range(3):
        alive = cmosb[(cmosb.generation <= g) & (cmosb.in_population_until >= g)]
        assert len(alive) == 4
    assert (cmosb.in_population_until >= cmosb.generation - 1).all()
    curves = summaries[1]["datasets"]["synthetic1"]
    assert len(curves["cmosb_hypervolume_by_generation"]) \
        == len(curves["cmosb_population_hypervolume_by_generation"]) == 3
    assert all(p <= a + 1e-12 for p, a in zip(curves["cmosb_population_hypervolume_by_generation"],
                                              curves["cmosb_hypervolume_by_generation"]))


@pytest.mark.parametrize("options, message", [
    (["--point", "n_f=5,n_l=1,d=0,r=0.8,theta_p=1,eta=0.3"], "max_depth must be an integer in [1, 12], got 0"),
    (["--point", "n_f=5,n_l=1,d=3,r=1.5,theta_p=1,eta=0.3"], "subsample must be in (0, 1], got 1.5"),
    (["--point", "n_f=5,n_l=1,d=3,r=0.8,theta_p=0,eta=0.3"], "purity_threshold must be in (0, 1], got 0"),
    (["--point", "n_f=5,n_l=1,d=3,r=0.8,theta_p=1.5,eta=0.3"], "purity_threshold must be in (0, 1], got 1.5"),
    (["--point", "n_f=0,n_l=1,d=3,r=0.8,theta_p=1,eta=0.3"], "n_federated_trees must be an integer >= 1, got 0"),
    (["--he", "paillier"], "argument --he: invalid choice: 'paillier' (choose from 'bfv', 'plain')"),
    (["--dataset", "iris"], "unknown CMOSB dataset 'iris'"),
    (["--baselines", "es,random"], "unknown baselines ['random']"),
    (["--max-leakage", "0"], "max_leakage must be in (0, 1], got 0.0"),
    (["--constraint-handling", "ignore"], "constraint_handling must be one of ['domination', 'penalty'], got 'ignore'"),
    (["--bo-batch", "0"], "bo_batch must be an integer in [1, 10000], got 0"),
    (["--op-times", "nope.json"], "--op-times nope.json: cannot read it"),
])
def test_bad_options_are_one_line_errors_with_exit_2(options, message, tmp_path, capsys):
    try:
        code = main(["cmosb", "--out", str(tmp_path / "never"), *TINY, *options])
    except SystemExit as usage:  # argparse: a value outside an option's choices
        code = usage.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err
    assert not (tmp_path / "never").exists()


def test_sensorless_offline_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys):
    from raytune_fed.data import _openml

    def offline(**kwargs):
        raise URLError("Name or service not known")

    monkeypatch.setattr(_openml, "fetch_openml", offline)
    monkeypatch.setenv("RAYTUNE_FED_CACHE", str(tmp_path / "cache"))
    code = main(["cmosb", "--dataset", "sensorless", "--out", str(tmp_path / "never"), *TINY])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "could not be fetched from OpenML" in err and "no network access?" in err
    assert not (tmp_path / "never").exists()


def test_help_lists_every_option_and_how_resume_works(capsys):
    with pytest.raises(SystemExit) as done:
        main(["cmosb", "--help"])
    shown = capsys.readouterr().out
    assert done.value.code == 0
    for option in ("--dataset", "--generations", "--population", "--max-cost", "--max-leakage", "--baselines",
                   "--he", "--seed", "--out", "--address", "--num-cpus"):
        assert option in shown
    assert "Tuner.restore" in shown and "exit code 2" in shown
