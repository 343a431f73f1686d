"""The site owner's and analyst's path as docs/sites.md writes it, and no silent empty result.

The documented block is read from docs/sites.md at test time (never copied here) and run
command for command in a temporary folder: ``site serve`` lines as real services on
127.0.0.1 (each on a free port instead of the documented one), every other line through
the CLI's ``main``.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from raytune_fed.cli._main import main
from tests._ports import free_port

ROOT = Path(__file__).resolve().parents[1]


def _documented_commands() -> list[str]:
    text = (ROOT / "docs" / "sites.md").read_text()
    (block,) = re.findall(r"<!-- site-path:.*?-->\n```sh\n(.*?)^```", text, re.S | re.M)
    return [line.strip() for line in block.splitlines() if line.strip()]


def _serve(argv: list[str], cwd: Path) -> subprocess.Popen:
    """Start a documented ``site serve`` line as a service; wait for its own banner.

    The port was free when chosen; another process of this machine may take it before the
    service binds: then the owner picks another port, and the analyst's sites file names it.
    """
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-m", "raytune_fed.cli", *argv[1:]], cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        port = argv[argv.index("--port") + 1]
        banner = proc.stdout.readline()  # "site '<name>' serving on https://127.0.0.1:<port> (...)", or EOF
        if f"serving on https://127.0.0.1:{port} " in banner:
            return proc
        error = proc.stderr.read()
        proc.wait()
        assert "the address is in use" in error, error
        new = str(free_port())
        sites = cwd / "analyst" / "sites.toml"
        sites.write_text(sites.read_text().replace(f"https://127.0.0.1:{port}\"", f"https://127.0.0.1:{new}\""))
        argv = [new if a == port else a for a in argv]
    raise AssertionError(f"no free port for {argv}")


@pytest.mark.process
def test_the_documented_site_path_runs_a_grid_with_a_nonzero_hypervolume(ray_session, tmp_path, monkeypatch, capsys):
    commands = _documented_commands()
    ports = {p: str(free_port()) for p in dict.fromkeys(re.findall(r"--port (\d+)", " ".join(commands)))}
    monkeypatch.chdir(tmp_path)
    services: list[subprocess.Popen] = []
    printed: dict[str, str] = {}
    try:
        for command in commands:
            command = re.sub(r"--port (\d+)", lambda m: f"--port {ports[m.group(1)]}", command)
            argv = shlex.split(command.removesuffix("&"))
            assert argv[0] == "raytune-fed", command
            if command.endswith("&"):
                services.append(_serve(argv, tmp_path))
                continue
            code = main(argv[1:])
            out, err = capsys.readouterr()
            assert code == 0, f"{command}\n{err}"
            printed[" ".join(argv[1:3])] = out
        digest = re.search(r"schedule digest: ([0-9a-f]{64})", printed["site plan"]).group(1)
        for policy in tmp_path.glob("owners/*/policy.toml"):
            assert f'approved = "{digest}"' in policy.read_text()     # every owner approved the grid's schedule
        summary = printed["rfms --dataset"]
        means = [float(m) for m in re.findall(r"^elastic_net\s+\S+\s+([0-9.]+)", summary, re.M)]
        assert len(means) == 3 and max(means) > 0, summary           # the CLI's own table: nonzero hypervolume
        frame = pd.read_parquet(tmp_path / "grid" / "results.parquet")
        fso5 = frame[frame["method"] == "fso5"].iloc[0]
        assert fso5["n_curator_queries"] > 0 and fso5["n_refused_evaluations"] == 0
        assert json.loads(fso5["refusals"]) == {"queries": {}, "withheld_finals": {}}
        ledgers = list(tmp_path.glob("owners/*/*.ledger.jsonl"))
        assert len(ledgers) == 5 and sum('"event":"query"' in p.read_text() for p in ledgers) >= 3  # the curators
    finally:
        for proc in services:
            proc.send_signal(signal.SIGTERM)
        for proc in services:
            proc.wait(timeout=60)
    assert [proc.returncode for proc in services] == [143] * 5
    assert all("stopped serving" in proc.stderr.read() for proc in services)


def _toy_sites(tmp_path: Path, **settings):
    """Five in-process sites of a toy split and one unit's spec (lso alone: no curator query)."""
    from sklearn.datasets import make_classification

    from raytune_fed.workflows.rfms import ExperimentSpec, RFMSSettings, SitePlan, start_sites
    from raytune_fed.workflows.rfms._sites import grid_schedule

    X, y = make_classification(n_samples=300, n_features=6, n_informative=3, random_state=0)
    plan = SitePlan(X, y, np.arange(300) % 5, tuple(f"s{i}" for i in range(5)))
    rfms = RFMSSettings(dataset="toy", n_init=2, n_iter=1, n_folds=3, **settings)
    spec = ExperimentSpec(rfms, openbox=0, lockbox=4, curators=(1, 2, 3), replication=0, learner="elastic_net",
                          site_names=plan.site_names)
    started = start_sites(plan, rfms, grid_schedule([spec]), sites="local", workdir=tmp_path / "sites")
    return plan, spec, started


def _run_unit(plan, spec, started):
    from raytune_fed.federation import OpenBox
    from raytune_fed.workflows.rfms._experiment import run_experiment
    from raytune_fed.workflows.rfms._sites import unit_of

    unit = unit_of(spec)
    clients = started.handles.clients
    curators = [clients[c].open_session(unit, "curator") for c in spec.curators]
    lockbox = clients[spec.lockbox].open_session(unit, "lockbox")
    return run_experiment(spec, OpenBox(*plan.site(0), seed=0), curators, lockbox)


def test_a_unit_run_again_past_its_finals_says_an_earlier_attempt_spent_them_and_what_the_owner_must_do(tmp_path):
    from raytune_fed.errors import SealedError

    plan, spec, started = _toy_sites(tmp_path, methods=("lso",))
    finals_per_unit = 3  # one learner x (1 + the two retries the grid allows)
    for _ in range(finals_per_unit):
        _run_unit(plan, spec, started)
    with pytest.raises(SealedError, match=r"site 's[1-4]' refused final_evaluation: .*an earlier attempt at this "
                                          r"unit .* already spent this site's final evaluation; its owner must allow "
                                          r"more \(\[lockbox\] max_answers"):
        _run_unit(plan, spec, started)


def test_rows_name_each_sites_refusals_and_a_grid_that_learnt_nothing_ends_with_them(tmp_path):
    from raytune_fed.workflows.rfms._refusals import EmptyResultError, check_answered, refusal_note

    plan, spec, started = _toy_sites(tmp_path, methods=("lso", "fso5"), guard_k=1000)  # refuses every model
    rows, _ = _run_unit(plan, spec, started)
    by = {r["method"]: json.loads(r["refusals"]) for r in rows}
    assert by["fso5"]["queries"] == {f"s{i}": {"guard": 3} for i in (1, 2, 3)}  # 3 queries, each curator refused
    assert by["lso"]["queries"] == {} and by["lso"]["withheld_finals"] == {f"s{i}": 1 for i in (1, 2, 3, 4)}
    frame = pd.DataFrame(rows)
    with pytest.raises(EmptyResultError, match=r"the sites refused every one of the 9 curator queries \(s1 guard 3, "
                                               r"s2 guard 3, s3 guard 3\) and withheld the final losses of every one "
                                               r"of the 2 selected models \(s1 guard 2, .*s4 guard 2\)"):
        check_answered(frame)
    assert "every hypervolume on this page is 0 because of these refusals" in refusal_note(frame)
    answered = frame.assign(refusals=json.dumps({"queries": {}, "withheld_finals": {}}), n_withheld_finals=0)
    check_answered(answered)  # sites that answered: no error, no note
    assert refusal_note(answered) is None


@pytest.mark.parametrize("argv, message", [
    (["site", "init", "{d}/s", "--answers", "-1"], "--answers must be an integer >= 0, got -1"),
    (["site", "init", "{d}/s", "--guard-k", "-2"], "--guard-k must be an integer >= 0, got -2"),
    (["site", "init", "{d}/s", "--for-grid", "{d}/none.json"], "--for-grid '{d}/none.json': cannot read it"),
    (["site", "init", "{d}/s", "--for-grid", "{d}/bad.json"], "--for-grid '{d}/bad.json' is not a plan written by"),
    (["site", "plan", "{d}/plan.json", "pu", "--dataset", "twonorm"], "give the grid's command after the file: rfms"),
    (["site", "rows", "{d}/rows"], "give the grid's command after the file: rfms and its options, got ''"),
])
def test_bad_site_set_up_input_is_one_line_naming_the_value(tmp_path, capsys, argv, message):
    (tmp_path / "bad.json").write_text('{"policy": {"budget": {"answers": 3}}}')
    assert main([a.format(d=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.format(d=tmp_path) in err, err
    assert not (tmp_path / "s").exists()  # nothing was written


def test_site_init_sizes_the_policy_for_a_plan_and_lists_the_site_in_the_sites_file(tmp_path, capsys):
    import tomllib

    from raytune_fed.federation import load_policy

    plan = {"max_units": 4, "budget": {"answers": 300}, "schedule": {"approved": "ab" * 32},
            "curator": {"query_budget": 200, "finals_per_unit": 3}, "lockbox": {"finals_per_unit": 3},
            "final": {"max_models": 9}, "limits": {"max_header_bytes": 1 << 18, "sessions_per_unit": 64}}
    (tmp_path / "plan.json").write_text(json.dumps({"policy": plan}))
    sites = tmp_path / "analyst" / "sites.toml"
    argv = ["site", "init", str(tmp_path / "h1"), "--for-grid", str(tmp_path / "plan.json"), "--lockbox-answers",
            "2", "--guard-k", "0", "--port", "9441", "--sites-file", str(sites)]
    assert main(argv) == 0
    policy = load_policy(tmp_path / "h1" / "policy.toml")
    assert (policy.budget.answers, policy.schedule.approved, policy.curator.query_budget, policy.max_units) == \
        (300, "ab" * 32, 200, 4)
    assert (policy.lockbox.max_answers, policy.guard.k, policy.final.max_models) == (2, 0, 9)
    assert "sized for the grid of" in capsys.readouterr().out
    entry = tomllib.loads(sites.read_text())["sites"]["h1"]
    assert entry == {"url": "https://127.0.0.1:9441", "token_file": "../h1/analyst.token", "cafile": "../h1/cert.pem"}
    assert main(["site", "init", str(tmp_path / "h2"), "--name", "h1", "--sites-file", str(sites)]) == 2
    assert "already lists site 'h1'" in capsys.readouterr().err and not (tmp_path / "h2").exists()
