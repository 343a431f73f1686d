"""CPU seconds of every test, Ray's workers and started processes included: where the suite's time goes.

    python tools/suite_cpu.py --out experiments/measured/suite_cpu.json            # make test's selection
    python tools/suite_cpu.py --out results/cmosb_cpu.json -- tests/test_cli_cmosb.py   # some files

pytest runs (with the arguments after ``--``, default ``-m "not cluster"`` like ``make
test``) inside a cgroup made for it (``experiments/_harness.py``'s ``CpuGroup``), so every process it
starts counts, including Ray's workers, which no ``getrusage`` sees (raylet ignores
SIGCHLD).  This file is also the pytest plugin that reads the group's counter when each
test starts and ends.  The JSON holds every test's CPU and wall seconds, the sums per file
(the slowest first), the total, the load average and pytest's FAILED / ERROR lines.  The
CPU seconds of a test include its share of the shared Ray session's background work (about
0.02 CPU-seconds per second when idle, measured here), and the first test that needs the
session pays for starting it.
Needs root (a writable cgroup hierarchy).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXPERIMENTS = ROOT / "experiments"  # the benchmark harness's CpuGroup
ENV_GROUP, ENV_ROWS = "SUITE_CPU_CGROUP", "SUITE_CPU_ROWS"


# ---------------------------------------------------------------- the pytest plugin (-p suite_cpu)
def _usage() -> float:
    path, kind = os.environ[ENV_GROUP].split("|", 1)
    if kind == "cgroup v1 cpuacct":
        return int(Path(path, "cpuacct.usage").read_text()) / 1e9
    stat = dict(line.split() for line in Path(path, "cpu.stat").read_text().splitlines())
    return int(stat["usage_usec"]) / 1e6


_started: dict[str, tuple[float, float]] = {}


def pytest_runtest_logstart(nodeid, location):
    if ENV_GROUP in os.environ:
        _started[nodeid] = (_usage(), time.monotonic())


def pytest_runtest_logfinish(nodeid, location):
    if ENV_GROUP in os.environ and nodeid in _started:
        cpu, wall = _started.pop(nodeid)
        with open(os.environ[ENV_ROWS], "a") as rows:
            rows.write(json.dumps([nodeid, round(_usage() - cpu, 3), round(time.monotonic() - wall, 3)]) + "\n")


# ---------------------------------------------------------------- the runner
def summarise(rows: list[list], total_cpu: float) -> dict:
    per_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for nodeid, cpu, wall in rows:
        entry = per_file[nodeid.split("::")[0]]
        entry[0] += cpu
        entry[1] += wall
        entry[2] += 1
    files = sorted(({"file": f, "cpu_seconds": round(c, 1), "wall_seconds": round(w, 1), "tests": n}
                    for f, (c, w, n) in per_file.items()), key=lambda e: -e["cpu_seconds"])
    tests = sorted(({"test": t, "cpu_seconds": c, "wall_seconds": w} for t, c, w in rows),
                   key=lambda e: -e["cpu_seconds"])
    return {"total_cpu_seconds": round(total_cpu, 1),
            "tests_cpu_seconds": round(sum(r[1] for r in rows), 1),
            "n_tests": len(rows), "files": files, "tests": tests}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, pytest_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="experiments/measured/suite_cpu.json")
    args = parser.parse_args(ours)
    pytest_args = pytest_args or ["-m", "not cluster"]
    sys.path.insert(0, str(EXPERIMENTS))
    from _harness import CpuGroup

    group = CpuGroup(f"suite_cpu_{os.getpid()}")
    if group.path is None:
        parser.error("no writable cgroup (cgroup v1 cpuacct or v2) here: run as root")
    out = Path(args.out).resolve()
    rows_file = out.with_suffix(".rows.jsonl")
    rows_file.unlink(missing_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, ENV_GROUP: f"{group.path}|{group.kind}", ENV_ROWS: str(rows_file),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    load_before, start = os.getloadavg(), time.monotonic()
    base = group.cpu_seconds()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu", *pytest_args]
    try:
        proc = subprocess.run(command, cwd=ROOT, env=env, preexec_fn=group.join, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    except BaseException:
        group.kill_all()
        raise
    total = group.cpu_seconds() - base
    left = group.processes_left()
    group.remove()
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()] if rows_file.exists() else []
    rows_file.unlink(missing_ok=True)
    result = {"command": "python tools/suite_cpu.py " + " ".join(argv), "pytest": " ".join(command[1:]),
              "exit_code": proc.returncode, "closing_line": (proc.stdout.strip().splitlines() or [""])[-1],
              "not_passed": [line for line in proc.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))],
              "wall_seconds": round(time.monotonic() - start, 1), "cpu_source": group.kind,
              "load_before": [round(x, 2) for x in load_before],
              "load_after": [round(x, 2) for x in os.getloadavg()], "cpu_count": os.cpu_count(),
              "processes_left": left, **summarise(rows, total)}
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{result['closing_line']}; {result['total_cpu_seconds']} CPU s in {result['wall_seconds']} s wall; "
          f"wrote {out}")
    for entry in result["files"][:10]:
        print(f"  {entry['cpu_seconds']:8.1f} CPU s  {entry['tests']:4d} tests  {entry['file']}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
