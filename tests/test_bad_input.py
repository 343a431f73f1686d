"""Every subcommand, every kind of bad input: one line ``raytune-fed: error: ...`` naming the problem and the
value, exit code 2, before Ray starts, and never a hang.

One table per subcommand.  Each case starts from arguments that would run (small data, a free output
directory) and changes one thing, so the error names that thing.  ``{name}`` in an argument is a path or
value of the ``world`` fixture.  The cases run in this process: ``ray.init`` is replaced by a function that
fails the test, and each case must end within ``LIMIT`` seconds (an alarm fails it otherwise).
"""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import numpy as np
import pytest
from _sites_csv import write_sites_csv

from raytune_fed.cli import main

LIMIT = 60

RFMS = ["rfms", "--dataset", "{sites_csv}", "--target", "label", "--site-column", "site", "--learners",
        "elastic_net", "--reps", "1", "--pairs", "1", "--n-init", "2", "--n-iter", "1", "--n-folds", "2",
        "--no-report", "--out", "{out}"]
PU = ["pu", "--dataset", "{pu_csv}", "--target", "label", "--c", "0.5", "--methods", "ode", "--reps", "1",
      "--no-report", "--out", "{out}"]
CMOSB = ["cmosb", "--population", "2", "--generations", "1", "--grid-levels", "1", "--bo-trials", "1",
         "--attack-sample", "100", "--he", "plain", "--out", "{out}"]
SITE = ["site", "serve", "--policy", "{policy}", "--data", "{site_npz}", "--token-file", "{token}",
        "--owner-token-file", "{owner}", "--port", "0"]
PARTY = ["party", "serve", "--data", "{party_csv}", "--token-file", "{token}", "--owner-token-file", "{owner}",
         "--port", "0"]

# Options every grid subcommand shares (rfms, demo, pu; cmosb has --out, --address and --num-cpus).
GRID_OPTIONS = [
    (["--out", "{a_file}"], "output directory '{a_file}' is an existing file, not a directory"),
    (["--out", "{a_file}/sub"], "cannot write results under '{a_file}/sub'"),
    (["--out", "{unwritable}/out"], "cannot write results under '{unwritable}/out'"),
    (["--address", "not an address"], "Ray address must be 'auto', 'host:port' or 'ray://host:port', "
                                      "got 'not an address'"),
    (["--address", "127.0.0.1:99999"], "the port of Ray address '127.0.0.1:99999' must be in [1, 65535], got 99999"),
    (["--address", "127.0.0.1:0"], "the port of Ray address '127.0.0.1:0' must be in [1, 65535], got 0"),
    (["--address", "127.0.0.1:1"], "cannot reach the Ray cluster at '127.0.0.1:1': nothing listens there"),
    (["--address", "{http_address}"], "is not a Ray cluster"),
    (["--address", "no-such-host.invalid:6379"], "cannot reach the Ray cluster at 'no-such-host.invalid:6379': "
                                                 "the host name does not resolve"),
    (["--address", "ray://127.0.0.1:1"], "cannot reach the Ray cluster at 'ray://127.0.0.1:1': nothing listens"),
    (["--num-cpus", "0"], "num_cpus must be an integer in [1, {max_cpus}], got 0"),
    (["--num-cpus", "1000000"], "num_cpus must be an integer in [1, {max_cpus}], got 1000000"),
    (["--num-cpus", "two"], "argument --num-cpus: invalid int value: 'two'"),
    (["--placement-timeout", "-1"], "placement_timeout must be a finite number >= 0.0, got -1.0"),
    (["--placement-timeout", "nan"], "placement_timeout must be a finite number >= 0.0, got nan"),
    (["--placement-timeout", "inf"], "placement_timeout must be a finite number >= 0.0, got inf"),
    (["--max-retries", "-1"], "max_retries must be an integer in [0, 100], got -1"),
    (["--max-retries", "1000000000000"], "max_retries must be an integer in [0, 100], got 1000000000000"),
    (["--out", ""], "output directory must be a non-empty path, got ''"),
]

RFMS_CASES = [
    (["--dataset", "no_such_dataset"], "unknown dataset 'no_such_dataset'"),
    (["--dataset", "{missing}.csv"], "file not found"),
    (["--dataset", "{a_dir}.csv"], "is a directory, not a data file"),
    (["--dataset", "{garbage_csv}"], "garbage"),
    (["--target", "no_column"], "no_column"),
    (["--site-column", "no_column"], "no_column"),
    (["--split", "sideways"], "argument --split: invalid choice: 'sideways'"),
    (["--pca-variance", "0"], "pca_variance must be in (0, 1], got 0.0"),
    (["--pca-variance", "1.5"], "pca_variance must be in (0, 1], got 1.5"),
    (["--pca-variance", "nan"], "pca_variance must be in (0, 1], got nan"),
    (["--learners", "gbm"], "unknown learner 'gbm'"),
    (["--learners", ","], "expected a comma-separated list, got ','"),
    (["--learners", "svm,svm"], "learners lists 'svm' twice"),
    (["--methods", "lso,magic"], "unknown method 'magic'"),
    (["--methods", "lso,lso"], "method 'lso' is listed twice"),
    (["--reps", "0"], "n_reps must be an integer >= 1, got 0"),
    (["--reps", "2147483648"], "the grid would have 2,147,483,648 cells (1 openbox/lockbox pairs x 2147483648 "
                               "replications x 1 learners); at most 100,000 cells"),
    (["--reps", "many"], "argument --reps: invalid int value: 'many'"),
    (["--pairs", "0"], "n_pairs must be an integer in [1, 6], got 0"),
    (["--pairs", "7"], "n_pairs must be an integer in [1, 6], got 7"),
    (["--n-init", "0"], "n_init must be an integer in [1, {max_points}], got 0"),
    (["--n-init", "1000000000"], "n_init must be an integer in [1, {max_points}], got 1000000000"),
    (["--n-iter", "-1"], "n_iter must be an integer in [0, {max_points}], got -1"),
    (["--n-iter", "1000000000"], "n_iter must be an integer in [0, {max_points}], got 1000000000"),
    (["--n-init", "{half_points}", "--n-iter", "{half_points_plus}"], "n_init + n_iter must be at most {max_points}"),
    (["--n-folds", "1"], "n_folds must be an integer >= 2, got 1"),
    (["--n-folds", "100000"], "n_folds must be at most 24"),
    (["--thresholdout-budget", "-1"], "thresholdout_budget must be an integer in [0, 9223372036854775807], got -1"),
    (["--thresholdout-budget", "1" + "0" * 24], "thresholdout_budget must be an integer in [0, 9223372036854775807], "
                                                "got 1" + "0" * 24),
    (["--seed", "-1"], "seed must be an integer in [0, 18446744073709551615], got -1"),
    (["--seed", "18446744073709551616"], "seed must be an integer in [0, 18446744073709551615], got "
                                         "18446744073709551616"),
    (["--guard-k", "-1"], "guard_k must be an integer >= 0, got -1"),
    (["--guard-k", "100000"], "guard_k must be at most"),
    (["--sites", "cloud"], "sites must be one of ['local', 'actor', 'service'] or a .toml/.json sites file, "
                           "got 'cloud'"),
    (["--sites", "{missing}.toml"], "sites file not found: '{missing}.toml'"),
    (["--sites", "{a_dir}.toml"], "sites file not found"),
    (["--sites", "{garbage_toml}"], "garbage"),
    (["--sites", "{sites_port_toml}"], "sites.a: the port of site URL 'https://127.0.0.1:99999' must be a number in "
                                       "[1, 65535]"),
    (["--sites", "{sites_refused_toml}"], "cannot reach site 'a' at http://127.0.0.1:1: nothing listens there "
                                          "(connection refused)"),
    (["--sites", "{sites_unknown_toml}"], "sites.a has unknown key(s) ['ca_file']; known: ['cafile', 'token_file', "
                                          "'url']"),
    (["--sites", "{sites_lacking_toml}"], "sites.a lacks ['token_file'] (url and token_file are required"),
    (["--sites", "{sites_not_pem_toml}"], "sites.a: cafile '{garbage_json}' holds no PEM certificate"),
    (["--sites", "{sites_no_ca_toml}"], "sites.a: cannot read cafile '{missing}.pem': No such file or directory"),
    (["--dataset", "{minimal_csv}"], "site 'c' cannot be an openbox or a curator: cross-validation needs at least "
                                     "2 rows of every class"),
    (["--dataset", "{constant_csv}"], "site 'b': every feature is constant on its 20 rows"),
    (["--dataset", "{constant_text_csv}"], "non-numeric column 'ward' holds the one value 'A' in every row, so it "
                                           "carries no information"),
] + GRID_OPTIONS

DEMO_CASES = [
    (["--sites", "cloud"], "got 'cloud'"),
    (["--guard-k", "-5"], "guard_k must be an integer >= 0, got -5"),
] + GRID_OPTIONS

PU_CASES = [
    (["--dataset", "no_such_dataset"], "unknown dataset 'no_such_dataset'"),
    (["--dataset", "{missing}.csv"], "file not found"),
    (["--dataset", "{garbage_csv}"], "garbage"),
    (["--target", "no_column"], "no_column"),
    (["--c", "0"], "c must be in (0, 1], got 0.0"),
    (["--c", "1.5"], "c must be in (0, 1], got 1.5"),
    (["--c", "nan"], "c must be in (0, 1], got nan"),
    (["--c", "0.5,0.5"], "c lists 0.5 twice"),
    (["--c", "half"], "expected comma-separated numbers, got 'half'"),
    (["--methods", "ode,magic"], "unknown"),
    (["--evaluator", "f1"], "unknown evaluator 'f1'"),
    (["--schedule", "sometimes"], "sometimes"),
    (["--budget-samples", "0"], "budget_samples must be an integer >= 1, got 0"),
    (["--budget-samples", "100000000000000000000"], "budget_samples must be at most 1,470,000 for dataset "
                                                    "'{pu_csv}', c=0.5, got 100,000,000,000,000,000,000: with it "
                                                    "every one of the 100 configurations already trains on all "
                                                    "2100 rows in each of the 7 rounds"),
    (["--budget-seconds", "0"], "budget_seconds must be > 0"),
    (["--budget-seconds", "-1"], "budget_seconds must be a finite number >= 0.0, got -1.0"),
    (["--budget-seconds", "inf"], "budget_seconds must be a finite number >= 0.0, got inf"),
    (["--reps", "0"], "n_reps must be an integer >= 1, got 0"),
    (["--reps", "1000000"], "at most 100,000 cells"),
    (["--supervised-trials", "0"], "supervised_trials must be an integer in [1, "),
    (["--supervised-trials", "1000000000000"], "supervised_trials must be an integer in [1, "),
    (["--methods", "ode,upu", "--baseline-configs", "0"], "baseline_configs must be an integer in [1, 100], got 0"),
    (["--methods", "upu,nnpu", "--baseline-configs", "501"], "baseline_configs must be an integer in [1, 500], got "
                                                             "501: the grid of nnpu has 500 configurations"),
    (["--baseline-configs", "5"], "baseline_configs thins the upu and nnpu baselines, and this grid runs neither"),
    (["--prior", "guess"], "unknown prior source 'guess'; known: ['tice', 'true']"),
    (["--budget-factor", "0"], "budget_factor must be > 0, got 0.0"),
    (["--budget-factor", "nan"], "budget_factor must be a finite number >= 0.0, got nan"),
    (["--budget-factor", "1e12"], "budget_factor x N (1e+12 x "),
    (["--rung-sampling", "odd"], "unknown rung sampling 'odd'; known: ['proportional', 'balanced', 'uniform']"),
    (["--seed", "-1"], "seed must be an integer in [0, 18446744073709551615], got -1"),
] + GRID_OPTIONS

CMOSB_CASES = [
    (["--dataset", "iris"], "unknown CMOSB dataset 'iris'"),
    (["--population", "1"], "population must be an integer in [2, {max_population}], got 1"),
    (["--population", "100000"], "population must be an integer in [2, {max_population}], got 100000"),
    (["--generations", "0"], "generations must be an integer in [1, "),
    (["--generations", "1000000000"], "generations must be an integer in [1, "),
    (["--max-cost", "0"], "max_cost must be a finite number of seconds > 0, got 0.0"),
    (["--max-cost", "nan"], "max_cost must be a finite number of seconds > 0, got nan"),
    (["--max-leakage", "0"], "max_leakage must be in (0, 1], got 0.0"),
    (["--max-leakage", "2"], "max_leakage must be in (0, 1], got 2.0"),
    (["--baselines", "es,random"], "unknown baselines ['random']"),
    (["--he", "paillier"], "cmosb: argument --he: invalid choice: 'paillier' (choose from 'bfv', 'plain')"),
    (["--seed", "-1"], "seed must be an integer in [0, "),
    (["--grid-levels", "0"], "grid_levels must be an integer in [1, 5], got 0"),
    (["--grid-levels", "6"], "grid_levels must be an integer in [1, 5], got 6"),
    (["--bo-trials", "0"], "bo_trials must be an integer in [1, "),
    (["--bo-trials", "1000000000"], "bo_trials must be an integer in [1, "),
    (["--attack-sample", "1"], "n_sample must be an integer in [2, "),
    (["--attack-sample", "1000000000"], "n_sample must be an integer in [2, "),
    (["--point", "n_f=5"], "a point needs exactly"),
    (["--point", "n_f=five"], "expected name=number pairs"),
    (["--point", "n_f=5,n_l=1,d=0,r=0.8,theta_p=1,eta=0.3"], "max_depth must be an integer in [1, 12], got 0"),
    (["--out", "{a_file}"], "output directory '{a_file}' is an existing file, not a directory"),
    (["--out", "{a_file}/sub"], "cannot write results under '{a_file}/sub'"),
    (["--out", "{unwritable}/out"], "cannot write results under '{unwritable}/out'"),
    (["--out", "{corrupt_cmosb}"], "settings.json is not a CMOSB settings record"),
    (["--out", "{other_cmosb}"], "holds a CMOSB run with other settings"),
    (["--out", ""], "output directory must be a non-empty path, got ''"),
    (["--address", "127.0.0.1:99999"], "must be in [1, 65535], got 99999"),
    (["--address", "127.0.0.1:1"], "cannot reach the Ray cluster at '127.0.0.1:1': nothing listens there"),
    (["--num-cpus", "0"], "num_cpus must be an integer in [1, {max_cpus}], got 0"),
    (["--num-cpus", "1000000"], "num_cpus must be an integer in [1, {max_cpus}], got 1000000"),
]

REPORT_CASES = [
    (["{missing}"], "no results.parquet in"),
    (["{a_file}"], "no results.parquet in"),
    (["{garbage_results}"], "(damaged or not a results file)"),
    (["{read_only_run}"], "cannot write results under '{read_only_run}': "),
]

DATASETS_CASES = [
    (["--format", "xml"], "unrecognized arguments: --format xml"),
]

LISTEN = [  # site serve and party serve listen the same way
    (["--port", "70000"], "--port must be an integer in [0, 65535], got 70000"),
    (["--port", "-1"], "--port must be an integer in [0, 65535], got -1"),
    (["--port", "99999"], "--port must be an integer in [0, 65535], got 99999"),
    (["--port", "{busy_port}"], "cannot listen on 127.0.0.1:{busy_port}: the address is in use"),
    (["--host", "203.0.113.7"], "cannot listen on 203.0.113.7:0: "),
    (["--host", "no-such-host.invalid"], "cannot listen on no-such-host.invalid:0: the host name does not resolve"),
    (["--url-file", "{missing}/url"], "--url-file '{missing}/url': its directory does not exist"),
    (["--url-file", "{unwritable}/url"], "--url-file '{unwritable}/url': cannot write in its directory"),
    (["--url-file", "{a_dir}"], "--url-file '{a_dir}' is a directory"),
    (["--cert", "{missing}.pem"], "give both a certificate and its key"),
    (["--cert", "{missing}.pem", "--key", "{missing}.key"], "{missing}.pem"),
    (["--token-file", "{missing}"], "cannot read the token file"),
    (["--token-file", "{short_token}"], "must hold one token of at least 16 characters"),
    (["--owner-token-file", "{a_dir}"], "cannot read the owner token file"),
]

SITE_CASES = [
    (["--policy", "{missing}.json"], "policy file not found"),
    (["--policy", "{garbage_json}"], "cannot be parsed"),
    (["--policy", "{policy_bad_ledger}"], "ledger '{missing}/ledger.jsonl': its directory does not exist"),
    (["--policy", "{policy_dir_ledger}"], "ledger '{a_dir}' is a directory"),
    (["--data", "{missing}.npz"], "{missing}.npz"),
    (["--data", "{cut_npz}"], "cannot read arrays X and y from '{cut_npz}': not an .npz archive (File is not a zip"),
    (["--data", "{npy_npz}"], "cannot read arrays X and y from '{npy_npz}': not an .npz archive (numpy.savez"),
    (["--data", "{garbage_csv}", "--target", "label"], "garbage"),
] + LISTEN

PARTY_CASES = [
    (["--data", "{missing}.csv"], "file not found"),
    (["--columns", "x0,zz"], "unknown ['zz']"),
    (["--ledger", "{missing}/ledger.jsonl"], "--ledger '{missing}/ledger.jsonl': its directory does not exist"),
    (["--ledger", "{unwritable}/ledger.jsonl"], "--ledger '{unwritable}/ledger.jsonl': cannot write in its "
                                                "directory"),
    (["--ledger", "{a_dir}"], "--ledger '{a_dir}' is a directory"),
    (["--max-sessions", "0"], "--max-sessions must be an integer in [1, "),
    (["--max-sessions", "100000000000000000000"], "--max-sessions must be an integer in [1, "),
    (["--seed", "-3"], "--seed must be an integer in [0, "),
    (["--max-bins", "1"], "--max-bins must be an integer in [2, 256], got 1"),
    (["--bin-privacy", "-1"], "--bin-privacy must be a finite number >= 0.0, got -1.0"),
    (["--bin-privacy", "nan"], "--bin-privacy must be a finite number >= 0.0, got nan"),
] + LISTEN

INIT = [  # site init and party init take the same directory, host and port
    (["--port", "70000"], "--port must be in 1..65535, got 70000"),
    (["--port", "0"], "--port must be in 1..65535, got 0"),
    (["--port", "eighty"], "argument --port: invalid int value: 'eighty'"),
    (["--host", "bad host"], "--host must be a host name or an IP address, got 'bad host'"),
    (["--host", "a..b"], "--host must be a host name or an IP address, got 'a..b'"),
    (["--name", "a/b"], "name must be letters, digits, '_', '.' or '-', got 'a/b'"),
]
SITE_INIT_CASES = [
    (["--analyst", "owner"], "the analyst credential cannot be named 'owner'"),
    (["--analyst", ""], "the analyst's name must be letters, digits, '_', '.' or '-', got ''"),
] + INIT
INIT_DIRS = [  # the directory argument replaces the base's
    (["{a_file}"], "'{a_file}' exists and is not a directory"),
    (["{unwritable}/init"], "cannot create '{unwritable}/init'"),
    ([""], "DIR must name the directory to set up, got ''"),
]

CLUSTER_BUNDLE_CASES = [  # the base names the repository (the test's working tree) and a free --out
    (["--source", "{missing}"], "{missing} is not the raytune-fed source tree (no readable pyproject.toml"),
    (["--source", "{a_file}"], "{a_file} is not the raytune-fed source tree (no readable pyproject.toml"),
    (["--config", "{missing}.yaml"], "cannot read the cluster config {missing}.yaml: FileNotFoundError"),
    (["--config", "{a_file}"], "the cluster config {a_file} is not a YAML mapping"),
    (["--config", "{garbage_json}"], "cannot read the cluster config {garbage_json}"),
    (["--out", "{a_file}"], "cannot create the bundle directory {a_file}"),
]
CLUSTER_ANNOUNCE_CASES = [  # the base names a valid autoscaler config, the argument replaces it
    (["{missing}.yaml"], "cannot read the autoscaler config {missing}.yaml: FileNotFoundError"),
    (["{a_file}"], "the autoscaler config {a_file} is not a mapping"),
    (["{garbage_json}"], "cannot read the autoscaler config {garbage_json}"),
    (["{cluster_yaml}", "--address", "127.0.0.1:1"], "cannot reach the Ray cluster at '127.0.0.1:1': nothing listens"),
    (["{cluster_yaml}", "--address", "127.0.0.1:99999"], "the port of Ray address '127.0.0.1:99999' must be in "
                                                        "[1, 65535], got 99999"),
    (["{cluster_yaml}", "--address", "{http_address}"], "is not a Ray cluster"),
    (["{cluster_yaml}", "--address", "not an address"], "Ray address must be 'auto', 'host:port' or "
                                                        "'ray://host:port', got 'not an address'"),
]

TABLES = {"rfms": (RFMS, RFMS_CASES), "demo": (["demo", "--out", "{out}"], DEMO_CASES), "pu": (PU, PU_CASES),
          "cmosb": (CMOSB, CMOSB_CASES), "report": (["report"], REPORT_CASES),
          "datasets": (["datasets"], DATASETS_CASES), "site serve": (SITE, SITE_CASES),
          "party serve": (PARTY, PARTY_CASES), "site init": (["site", "init", "{out}/site1"], SITE_INIT_CASES),
          "party init": (["party", "init", "{out}/party1"], INIT),
          "site init DIR": (["site", "init"], INIT_DIRS), "party init DIR": (["party", "init"], INIT_DIRS),
          "cluster bundle": (["cluster", "bundle", "--source", "{repo}", "--config", "none", "--out", "{out}/dist"],
                             CLUSTER_BUNDLE_CASES),
          "cluster announce": (["cluster", "announce"], CLUSTER_ANNOUNCE_CASES)}
CASES = [(command, extra, message) for command, (_, cases) in TABLES.items() for extra, message in cases]


def _unwritable(tmp_path: Path) -> Path:
    """A directory this process cannot create files in (a read-only directory; for root, /proc)."""
    candidate = tmp_path / "read_only"
    candidate.mkdir()
    candidate.chmod(0o555)
    for place in (candidate, Path("/proc")):
        try:
            (place / ".probe").write_text("")
        except OSError:
            return place
        (place / ".probe").unlink()
    raise RuntimeError("no unwritable directory found")


def _read_only(path: Path):
    """Make ``path`` read-only for this process (for root, which ignores modes: a read-only bind mount of it);
    returns what undoes it."""
    import subprocess

    if os.geteuid() != 0:
        path.chmod(0o555)
        return lambda: path.chmod(0o755)
    subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
    subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], check=True)
    return lambda: subprocess.run(["umount", "-l", str(path)], check=True)


def _sites_files(d: Path) -> dict[str, str]:
    """Sites files for the sites a, b and c of ``sites.csv``, each wrong in one way."""
    def write(name: str, **change: str | None) -> str:
        lines = []
        for site in "abc":
            entry = {"url": "http://127.0.0.1:1", "token_file": str(d / "token"), **change}
            lines.append(f"[sites.{site}]")
            lines += [f'{key} = "{value}"' for key, value in entry.items() if value is not None]
        (d / f"{name}.toml").write_text("\n".join(lines) + "\n")
        return str(d / f"{name}.toml")

    return {"sites_refused_toml": write("sites_refused"),  # nothing listens on port 1
            "sites_port_toml": write("sites_port", url="https://127.0.0.1:99999"),
            "sites_unknown_toml": write("sites_unknown", ca_file="ca.pem"),
            "sites_lacking_toml": write("sites_lacking", token_file=None),
            "sites_not_pem_toml": write("sites_not_pem", cafile=str(d / "garbage.json")),
            "sites_no_ca_toml": write("sites_no_ca", cafile=str(d / "missing.pem"))}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Files and values the cases refer to (made once: the cases only read them)."""
    from raytune_fed._limits import limits

    d = tmp_path_factory.mktemp("world")
    w: dict[str, str] = {"missing": str(d / "missing"), "a_dir": str(d / "a_dir"), "a_file": str(d / "a_file")}
    (d / "a_dir").mkdir()
    (d / "a_dir.csv").mkdir()
    (d / "a_dir.toml").mkdir()
    (d / "a_file").write_text("not a directory")
    w["unwritable"] = str(_unwritable(d))
    w["sites_csv"] = write_sites_csv(d / "sites.csv")
    w["minimal_csv"] = write_sites_csv(d / "minimal.csv", (5, 5, 2))
    w["constant_csv"] = write_sites_csv(d / "constant.csv", (5, 10, 5), constant_site="b")
    import pandas as pd

    pd.read_csv(w["sites_csv"]).assign(ward="A").to_csv(d / "constant_text.csv", index=False)
    w["constant_text_csv"] = str(d / "constant_text.csv")
    w.update(_sites_files(d))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 5))
    y = (X[:, 0] + rng.normal(size=4000) > 0).astype(int)
    pd.DataFrame(X, columns=[f"x{i}" for i in range(5)]).assign(label=y).to_csv(d / "pu.csv", index=False)
    w["pu_csv"] = str(d / "pu.csv")
    pd.DataFrame(X, columns=[f"x{i}" for i in range(5)]).to_csv(d / "party.csv", index=False)
    w["party_csv"] = str(d / "party.csv")
    np.savez(d / "site.npz", X=X, y=y)
    w["site_npz"] = str(d / "site.npz")
    (d / "cut.npz").write_bytes((d / "site.npz").read_bytes()[:200])  # an archive cut short
    np.save(d / "array.npy", X)
    (d / "array.npy").rename(d / "npy.npz")  # an .npy under an .npz name
    w.update(cut_npz=str(d / "cut.npz"), npy_npz=str(d / "npy.npz"))
    (d / "garbage.csv").write_bytes(b"\x00\x01garbage\xff\xfe" * 50)
    w["garbage_csv"] = str(d / "garbage.csv")
    (d / "garbage.toml").write_text("this is = = garbage [[")
    w["garbage_toml"] = str(d / "garbage.toml")
    (d / "garbage.json").write_text("{garbage")
    w["garbage_json"] = str(d / "garbage.json")
    w["repo"] = str(Path(__file__).resolve().parents[1])
    w["cluster_yaml"] = str(Path(w["repo"]) / "cluster.yaml")
    (d / "garbage_results").mkdir()
    (d / "garbage_results" / "results.parquet").write_bytes(b"PAR1 not parquet")
    w["garbage_results"] = str(d / "garbage_results")
    (d / "read_only_run").mkdir()
    pd.DataFrame({"hypervolume": [0.5], "experiment": ["x"]}).to_parquet(d / "read_only_run" / "results.parquet")
    w["read_only_run"] = str(d / "read_only_run")
    undo_read_only = _read_only(d / "read_only_run")
    (d / "token").write_text("t" * 24 + "\n")
    (d / "owner").write_text("o" * 24 + "\n")
    (d / "short_token").write_text("short\n")
    w.update(token=str(d / "token"), owner=str(d / "owner"), short_token=str(d / "short_token"))
    policy = {"name": "s1", "seed": 1, "ledger": str(d / "ledger.jsonl")}
    (d / "policy.json").write_text(json.dumps(policy))
    (d / "policy_bad_ledger.json").write_text(json.dumps({**policy, "ledger": str(d / "missing" / "ledger.jsonl")}))
    (d / "policy_dir_ledger.json").write_text(json.dumps({**policy, "ledger": str(d / "a_dir")}))
    w.update(policy=str(d / "policy.json"), policy_bad_ledger=str(d / "policy_bad_ledger.json"),
             policy_dir_ledger=str(d / "policy_dir_ledger.json"))
    (d / "corrupt_cmosb").mkdir()
    (d / "corrupt_cmosb" / "settings.json").write_text('{"settings": {"dataset": "synth')
    w["corrupt_cmosb"] = str(d / "corrupt_cmosb")
    (d / "other_cmosb").mkdir()
    (d / "other_cmosb" / "settings.json").write_text(json.dumps(
        {"settings": {"dataset": "synthetic2"},
         "op_times": {"encryption": 1e-3, "decryption": 1e-3, "addition": 1e-5, "product": 1e-4}}))
    w["other_cmosb"] = str(d / "other_cmosb")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    w["busy_port"] = str(busy.getsockname()[1])
    http = socket.socket()  # a listening port that answers, but not as a Ray cluster
    http.bind(("127.0.0.1", 0))
    http.listen()
    w["http_address"] = f"127.0.0.1:{http.getsockname()[1]}"
    bounds = limits()
    w.update(max_points=str(bounds.max_points), half_points=str(bounds.max_points // 2),
             half_points_plus=str(bounds.max_points - bounds.max_points // 2 + 1),
             max_cpus=str(bounds.max_cpus), max_population=str(bounds.max_population))
    yield w
    undo_read_only()
    busy.close()
    http.close()


@pytest.fixture
def no_ray(monkeypatch):
    """Bad input must be refused before Ray starts: starting it fails the test."""
    import ray

    def init(*args, **kwargs):
        raise AssertionError("the command started Ray before checking its input")

    monkeypatch.setattr(ray, "init", init)


class _Hung(Exception):
    pass


@pytest.fixture
def time_limit():
    def hung(signum, frame):
        raise _Hung(f"the case did not end within {LIMIT} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(LIMIT)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("command, extra, message", CASES,
                         ids=[f"{c}: {' '.join(e)}" for c, e, _ in CASES])
def test_bad_input_is_one_line_and_exit_2(command, extra, message, world, tmp_path, capsys, no_ray, time_limit,
                                          monkeypatch):
    monkeypatch.setenv("RAYTUNE_FED_CACHE", str(tmp_path / "cache"))  # OpenML is never reached from here
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    names = {**world, "out": str(tmp_path / "out")}
    base, _ = TABLES[command]
    argv = [a.format(**names) for a in [*base, *extra]]
    try:
        code = main(argv)
    except SystemExit as done:  # argparse
        code = done.code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("raytune-fed: error: "), err
    assert message.format(**names) in lines[0], err
    assert "Traceback" not in err
    assert not (tmp_path / "out" / "results.parquet").exists()


def test_the_sweep_covers_every_subcommand():
    from raytune_fed.cli._main import COMMANDS, build_parser

    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)
    assert commands == {"datasets", "demo", "rfms", "pu", "cmosb", "report", "site", "party", "cluster"}
    covered = {c.split()[0] for c in TABLES}
    assert covered == commands and len(COMMANDS) == 8
    assert len(CASES) >= 142
