"""``raytune-fed site init`` is enough to start ``site serve`` and reach the site from a grid with ``--sites FILE``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import tomllib

import numpy as np
import pandas as pd
import pytest

from raytune_fed.cli._main import main
from raytune_fed.federation import load_policy
from tests._ports import free_port


def test_site_init_writes_a_policy_tokens_and_a_certificate_and_refuses_to_overwrite(tmp_path, capsys):
    site = tmp_path / "hospital1"
    assert main(["site", "init", str(site), "--port", "9443", "--analyst", "alice"]) == 0
    out = capsys.readouterr().out
    policy = load_policy(site / "policy.toml")                     # what site serve will read
    assert policy.name == "hospital1" and set(policy.analysts) == {"alice"}
    text = (site / "policy.toml").read_text()
    for table in ("[budget]", "[analysts.alice]", "[curator]", "[lockbox]", "[final]", "[thresholdout]", "[guard]",
                  "[limits]", "# [schedule]"):
        assert table in text                                       # every table of the policy format, commented
    for secret in ("alice.token", "owner.token", "key.pem"):
        assert (site / secret).stat().st_mode & 0o077 == 0, secret  # readable by the owner only
    assert (site / "alice.token").read_text() != (site / "owner.token").read_text()
    entry = out[out.index("[sites.hospital1]"):]
    parsed = tomllib.loads(entry)["sites"]["hospital1"]
    assert parsed["url"] == "https://127.0.0.1:9443" and set(parsed) == {"url", "token_file", "cafile"}
    assert main(["site", "init", str(site)]) == 2
    assert "already holds policy.toml" in capsys.readouterr().err
    assert main(["party", "init", str(tmp_path / "bank")]) == 0
    assert {p.name for p in (tmp_path / "bank").iterdir()} == {"active.token", "owner.token", "cert.pem", "key.pem"}


@pytest.mark.process
def test_sites_set_up_by_site_init_serve_a_grid_through_a_sites_file(ray_session, tmp_path, capsys):
    from raytune_fed.workflows.rfms import RFMSSettings, plan_sites

    plan = plan_sites(RFMSSettings(dataset="geo5_sim"))
    sites_file, servers, entries = tmp_path / "analyst" / "sites.toml", [], []
    (tmp_path / "analyst" / "tokens").mkdir(parents=True)
    (tmp_path / "analyst" / "certs").mkdir()

    def start(i: int, name: str) -> tuple[subprocess.Popen, str]:
        """The owner's steps: ``site init`` on a free port, then the printed ``site serve`` command."""
        owner_dir = tmp_path / "owners" / name
        shutil.rmtree(owner_dir, ignore_errors=True)
        # --guard-k 0: on this tiny search the models predict one class on almost every row, and the default
        # guard (k = 5) refuses every such query, which the grid now reports as an empty result (exit 1)
        assert main(["site", "init", str(owner_dir), "--port", str(free_port()), "--guard-k", "0"]) == 0
        printed = capsys.readouterr().out
        shutil.copy(owner_dir / "analyst.token", tmp_path / "analyst" / "tokens" / name)  # as the owner hands
        shutil.copy(owner_dir / "cert.pem", tmp_path / "analyst" / "certs" / f"{name}.pem")  # them over
        X, y = plan.site(i)
        np.savez(owner_dir / "rows.npz", X=X, y=y)
        serve = printed[printed.index("raytune-fed site serve"):].splitlines()[0]
        argv = serve.replace("--data ROWS --target LABEL", f"--data {owner_dir / 'rows.npz'}").split()[1:]
        return (subprocess.Popen([sys.executable, "-m", "raytune_fed.cli", *argv, "--url-file", str(owner_dir / "url")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True),
                printed[printed.index(f"[sites.{name}]"):])

    try:
        for i, name in enumerate(plan.site_names):
            proc, entry = start(i, name)
            servers.append(proc)
            entries.append(entry)
        for i, name in enumerate(plan.site_names):
            deadline, attempt = time.monotonic() + 300, 0
            while not (tmp_path / "owners" / name / "url").exists():
                if servers[i].poll() is not None:
                    error = servers[i].stderr.read()
                    # the port was free when site init chose it; another process (a Ray worker of this machine)
                    # may take it before the service binds: the owner picks another port and starts again
                    assert "the address is in use" in error and attempt < 3, error
                    attempt += 1
                    servers[i], entries[i] = start(i, name)
                assert time.monotonic() < deadline, f"site {name} did not start"
                time.sleep(0.1)
        sites_file.write_text("\n".join(entries))
        out = tmp_path / "grid"
        code = main(["rfms", "--dataset", "geo5_sim", "--pairs", "1", "--reps", "1", "--n-init", "2", "--n-iter",
                     "1", "--n-folds", "3", "--methods", "lso,fso5", "--sites", str(sites_file), "--no-report",
                     "--out", str(out)])
        assert code == 0, capsys.readouterr().err
        frame = pd.read_parquet(out / "results.parquet")
        assert set(frame["method"]) == {"lso", "fso5"}
        fso5 = frame[frame["method"] == "fso5"].iloc[0]
        assert np.sum(fso5["n_curator_queries"]) > 0               # the curators were asked over HTTPS ...
        assert np.sum(frame["unit_n_ledger_queries"].iloc[0]) > 0  # ... and their ledgers recorded it
        for name in (plan.site_names[int(c)] for c in fso5["curators"]):
            assert (tmp_path / "owners" / name / f"{name}.ledger.jsonl").read_text().strip()
    finally:
        for proc in servers:
            proc.terminate()
        for proc in servers:
            proc.wait(timeout=60)
