"""What a newcomer meets: a fresh clone's ``make demo`` then ``make test``, timed.

    python tools/fresh_clone.py --out experiments/measured/fresh_clone.json
    python tools/fresh_clone.py --busy 2 --out experiments/measured/fresh_clone_busy.json
    python tools/fresh_clone.py --steps test-pure --out results/try.json   # a short check of the script

The repository is cloned (``git clone``, so only committed work counts; ``--revision``
picks another commit) into a temporary directory, and each make target of ``--steps`` runs
there in order, as a newcomer types them (``demo`` creates ``.venv`` and installs the
package first, so its time includes the install; pip's wheel cache in the user's home is
used as it is).  For every step the JSON records the exit code, wall seconds, CPU seconds
of everything the step ran, the load average before, after and its
highest one-minute value sampled every 5 s, and the last lines of its output; for a pytest
step also pytest's closing line and its counts.  ``--busy N`` keeps N pure-Python busy loops
running through every step (the suite must stay green with both cores busy), and the JSON
says so.  The machine's own load is recorded, never subtracted: on a shared machine the
CPU seconds are the number to compare, the wall seconds say what a user waited.

CPU seconds come from a cgroup made for the step (cgroup v1 ``cpuacct`` or v2
``cpu.stat``; needs root), which counts every process the step started, Ray's workers
included, whether or not anyone reaps them; its processes still alive after the step are
counted in ``processes_left``.  Without a writable cgroup the script falls back to
``getrusage(RUSAGE_CHILDREN)``, which misses Ray's workers (raylet ignores SIGCHLD, so
their time is never added to anyone's); ``cpu_source`` says which was used.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))  # the benchmark harness's CpuGroup and LoadSampler

from _harness import CpuGroup, LoadSampler  # noqa: E402

TAIL_LINES = 40
PYTEST_CLOSING = re.compile(r"^=*\s*(?P<line>(?:\d+ \w+(?: \w+)?, )*\d+ \w+(?: \w+)? in [\d.]+s.*?)\s*=*$")


def _busy_loop() -> None:  # pragma: no cover - runs in a child process until terminated
    while True:
        pass


def pytest_counts(output: str) -> dict | None:
    """Pytest's closing line (``1362 passed, 2 failed in 512.30s (0:08:32)``) and its counts."""
    for line in reversed(output.splitlines()):
        match = PYTEST_CLOSING.match(line.strip())
        if match:
            text = match["line"]
            counts = {word.replace(" ", "_"): int(n)
                      for n, word in re.findall(r"(\d+) (\w+(?: \w+)?)(?=,| in )", text)}
            seconds = float(re.search(r" in ([\d.]+)s", text)[1])
            return {"closing_line": text, "counts": counts, "pytest_seconds": seconds}
    return None


def relative_lines(lines: list[str], clone: Path) -> list[str]:
    """The output's lines with this machine's paths out: the clone as ``.``, temporary
    directories as ``<tmp>`` (the JSON is committed and read elsewhere)."""
    tmp = re.escape(tempfile.gettempdir().rstrip("/"))
    return [re.sub(tmp + r"/[^/\s]+", "<tmp>", line.replace(str(clone), ".")) for line in lines]


def run_step(target: str, clone: Path, env: dict[str, str]) -> dict:
    """``make TARGET`` in the clone: exit code, wall and CPU seconds, load, the output's tail."""
    group = CpuGroup(f"fresh_clone_{os.getpid()}_{target}")
    base = group.cpu_seconds() if group.path is not None else 0.0
    before_load = os.getloadavg()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with LoadSampler() as sampler:
        try:
            proc = subprocess.run(["make", target], cwd=clone, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
                                  preexec_fn=group.join)
        except BaseException:  # interrupted: end what the step started (its cgroup lists them), then stop
            group.kill_all()
            raise
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if group.path is not None:
        cpu, source, left = group.cpu_seconds() - base, group.kind, group.processes_left()
        group.remove()
    else:
        cpu = after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime
        source, left = "getrusage(RUSAGE_CHILDREN): Ray's workers not counted", None
    step = {"target": target, "command": f"make {target}", "exit_code": proc.returncode,
            "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1), "cpu_source": source,
            "processes_left": left,
            "load_before": [round(x, 2) for x in before_load],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "load_1min_max": round(max(sampler.samples, default=before_load[0]), 2),
            "load_1min_mean": round(sum(sampler.samples) / max(len(sampler.samples), 1), 2),
            "output_tail": relative_lines(proc.stdout.splitlines()[-TAIL_LINES:], clone)}
    counts = pytest_counts(proc.stdout)
    if counts:
        step["pytest"] = counts
    return step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="demo,test",
                        help="make targets to run in order in the fresh clone (default: demo,test)")
    parser.add_argument("--revision", default="HEAD", help="commit to clone (default: HEAD)")
    parser.add_argument("--busy", type=int, default=0,
                        help="keep this many busy loops running through every step (0: none)")
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path is in the JSON)")
    parser.add_argument("--out", default="experiments/measured/fresh_clone.json")
    args = parser.parse_args(argv)
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    if not steps:
        parser.error(f"--steps names no make target: {args.steps!r}")
    if args.busy < 0:
        parser.error(f"--busy must be >= 0, got {args.busy}")
    out = Path(args.out).resolve()
    revision = subprocess.run(["git", "rev-parse", "--verify", args.revision + "^{commit}"], cwd=ROOT,
                              capture_output=True, text=True)
    if revision.returncode != 0:
        parser.error(f"--revision is not a commit of this repository: {args.revision!r}")
    commit = revision.stdout.strip()

    # Only the standard environment: no venv of this checkout leaks into the clone's make.
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "RAY_ADDRESS")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(sys.prefix) or sys.prefix == sys.base_prefix)
    def stop(signum, frame):  # SIGTERM ends the run like Ctrl-C: busy loops stopped, clone removed
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    busy = [multiprocessing.Process(target=_busy_loop, daemon=True) for _ in range(args.busy)]
    tmp = tempfile.mkdtemp(prefix="fresh_clone_")
    clone = Path(tmp) / "raytune_fed"
    result = {"command": "python tools/fresh_clone.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "revision": commit, "steps": [], "busy_loops": args.busy, "cpu_count": os.cpu_count(),
              "python": platform.python_version(), "machine": platform.machine(),
              "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "checkout", "--quiet", commit], cwd=clone, check=True)
        for proc in busy:
            proc.start()
        for target in steps:
            step = run_step(target, clone, env)
            result["steps"].append(step)
            print(f"make {target}: exit {step['exit_code']}, {step['wall_seconds']} s wall, "
                  f"{step['cpu_seconds']} CPU s, load {step['load_1min_mean']} (max {step['load_1min_max']})"
                  + (f"; pytest: {step['pytest']['closing_line']}" if "pytest" in step else ""), flush=True)
            if step["exit_code"] != 0:
                break
    finally:
        for proc in busy:
            proc.terminate()
            proc.join()
        if args.keep:
            result["clone"] = str(clone)
        else:
            subprocess.run(["rm", "-rf", tmp], check=False)
    result["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result["ok"] = len(result["steps"]) == len(steps) and all(s["exit_code"] == 0 for s in result["steps"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
