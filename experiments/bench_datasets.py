"""Dataset timings that used to be wall-clock bounds in the unit tests.

* listing the embedded datasets in a fresh interpreter (import included; nothing is loaded);
* generating ``geo5_sim`` (779 x 1000, five sites) from its seed.

Each is timed ``--repeats`` times; writes ``results/bench_datasets.json``.

    python experiments/bench_datasets.py
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

LIST_IN_FRESH_PROCESS = ("import time; start = time.perf_counter()\n"
                         "from raytune_fed.data import list_datasets\n"
                         "list_datasets(); print(time.perf_counter() - start)\n")
GENERATE_GEO5 = ("import time; from raytune_fed.data import load_dataset; start = time.perf_counter()\n"
                 "load_dataset('geo5_sim'); print(time.perf_counter() - start)\n")


def _seconds(code: str) -> float:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default="results/bench_datasets.json")
    args = p.parse_args()
    with Benchmark("bench_datasets", args.out) as bench:
        report: dict = {"repeats": args.repeats}
        for name, code in (("list_datasets_fresh_process", LIST_IN_FRESH_PROCESS),
                           ("geo5_sim_generate", GENERATE_GEO5)):
            times = [_seconds(code) for _ in range(args.repeats)]
            report[name] = {"median_seconds": statistics.median(times), "max_seconds": max(times), "all": times}
            print(f"{name}: median {statistics.median(times):.3f} s, max {max(times):.3f} s")
        bench.figures.update(report)
        bench.headline.update({f"{n}_median_seconds": round(report[n]["median_seconds"], 3)
                               for n in ("list_datasets_fresh_process", "geo5_sim_generate")})
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
