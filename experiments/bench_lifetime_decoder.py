"""What the best linear decoder recovers from everything a site answers over its life.

The attacker of ``tests/lifetime_attacks.py`` (it knows the site's feature rows, not its
labels or in-bag splits) asks for every answer the site will give - a lockbox final in
every unit it accepts (as many subset models as a final takes), curator queries until the
budget refuses, a curator final in each of 30 units - and decodes all of them together by
a box-constrained linear program and by least squares, keeping the better (the accuracy is
scored against the true labels, so this is generous to the attacker).

For the site of the attack tests (160 rows x 12 features, ``make_classification``) it runs
the package's default policy (name, seed and ledger only: 160 // 8 = 20 lifetime answers)
and the same policy with other ``[budget] answers``, over ten site seeds, and records each
accuracy, the majority share, and least squares' expected accuracy for ``B`` random
half-subset sums of ``n`` labels, ``1/2 + arcsin(sqrt(B / n)) / pi``.

    python experiments/bench_lifetime_decoder.py --out experiments/measured/bench_lifetime_decoder.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the attacker's tools live with the tests

import lifetime_attacks as la  # noqa: E402
from site_targets import X, Y, build_target, policy  # noqa: E402

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/bench_lifetime_decoder.json")
    parser.add_argument("--budgets", default="default,10,40,80", help="[budget] answers values ('default': unset)")
    parser.add_argument("--seeds", type=int, default=10, help="site seeds 11, 12, ...")
    args = parser.parse_args()
    with Benchmark("bench_lifetime_decoder", args.out) as bench:
        majority = float(max(np.mean(Y), 1 - np.mean(Y)))
        runs = []
        for budget in args.budgets.split(","):
            for seed in range(11, 11 + args.seeds):
                sections = {} if budget == "default" else {"budget": {"answers": int(budget)}}
                data = policy(Path(tempfile.mkdtemp()), bare=True, **sections)
                data["seed"] = seed
                result = la.everything_the_site_answers(build_target("local", data).client, X, Y)
                runs.append({"budget": budget, "seed": seed, **result})
                print(json.dumps(runs[-1]), flush=True)
        summary = {}
        for budget in args.budgets.split(","):
            acc = [r["accuracy"] for r in runs if r["budget"] == budget]
            answers = [r["answers"] for r in runs if r["budget"] == budget][0]
            expected = 0.5 + math.asin(math.sqrt(min(answers / len(Y), 1.0))) / math.pi
            summary[budget] = {"answers": answers, "mean_accuracy": float(np.mean(acc)), "min": min(acc),
                               "max": max(acc), "sd": float(np.std(acc, ddof=1)), "least_squares_expected": expected}
        out = {"rows": len(Y), "majority": majority,
               "leak_threshold": majority + la.LEAK, "summary": summary, "runs": runs}
        bench.figures.update(out)
        bench.headline.update({f"mean_accuracy_{b}": round(s["mean_accuracy"], 3) for b, s in summary.items()})
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
