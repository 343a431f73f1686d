"""What the command line prints: its own lines only (no Ray worker or C++ log lines), one progress style."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _sites_csv import write_sites_csv

from raytune_fed.cli._stderr import RAY_LINE, RayLineFilter

OWN = re.compile(r"^(raytune-fed: |rfms: |\[\d+/\d+\] )")


def test_ray_lines_on_fd_2_go_to_a_log_file_and_the_rest_passes_through(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr("raytune_fed.cli._stderr._log_dir", lambda: tmp_path)
    ray_line = b"[2026-11-26 04:18:42,653 E 22505 22505] core_worker.cc:2465: Actor with class name: 'SiteActor'\n"
    with RayLineFilter():
        os.write(2, b"our own line\n" + ray_line + b"[not a ray line] kept\n")
    err = capfd.readouterr().err
    assert err == "our own line\n[not a ray line] kept\n"
    assert (tmp_path / "ray_driver.log").read_bytes() == ray_line
    assert RAY_LINE.match(ray_line) and not RAY_LINE.match(b"[2026-11-26 04:18:42,653 F 1 1] fatal\n")


@pytest.mark.process
def test_an_rfms_run_on_actor_sites_prints_only_its_own_lines(tmp_path):
    """Its own local session (the first lines say that Ray starts) and a site actor per site (three)."""
    out = tmp_path / "out"
    data = write_sites_csv(tmp_path / "three_sites.csv")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS",)}
    proc = subprocess.run([sys.executable, "-m", "raytune_fed.cli", "rfms", "--dataset", data, "--target", "label",
                           "--site-column", "site", "--pairs", "1", "--reps", "1", "--n-init", "2", "--n-iter", "1",
                           "--n-folds", "3", "--methods", "lso,fso5", "--num-cpus", "1", "--no-report", "--sites",
                           "actor", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == "raytune-fed: Ray: starting a local session with 1 CPU"
    assert lines[1].startswith("raytune-fed: Ray: no dashboard")
    assert [line for line in lines if not OWN.match(line)] == []        # no Ray warnings, worker or C++ lines
    assert re.fullmatch(r"\[1/1\] elastic_net openbox=\S+ lockbox=\S+ rep=0: \d+\.\d s \(.*\)", lines[-1])
    assert (Path(out) / "results.parquet").is_file()
