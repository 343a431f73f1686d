"""Model selection as a decoder: what the answers of a default-policy site label when they choose a model.

The attacker of ``tests/lifetime_attacks.py::select_and_label`` knows the site's feature rows
(not its labels or splits), screens one median split per feature with curator queries, scores
linear models of the best features in the lockbox's one final, and labels every row with the
best of them.  It runs under the package's default policy (name, seed and ledger only: 160 // 8
= 20 lifetime answers) on the attack tests' site (160 rows x 12 features, ``make_classification``)
over ten site seeds, beside two references: the best median split of one feature chosen with the
true labels, and a logistic regression fitted on all the site's labels (in-sample: a ceiling for a
linear model of these features).

    python experiments/bench_selection_decoder.py --out experiments/measured/bench_selection_decoder.json
"""

from __future__ import annotations

import argparse
import json
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
    parser.add_argument("--out", default="results/bench_selection_decoder.json")
    parser.add_argument("--seeds", type=int, default=10, help="site seeds 11, 12, ...")
    args = parser.parse_args()
    with Benchmark("bench_selection_decoder", args.out) as bench:
        from sklearn.linear_model import LogisticRegression

        runs = []
        for seed in range(11, 11 + args.seeds):
            data = policy(Path(tempfile.mkdtemp()), bare=True)
            data["seed"] = seed
            target = build_target("local", data)
            runs.append({"seed": seed, **la.select_and_label(target.client, X, Y)})
            for fn in target.cleanup:
                fn()
            print(json.dumps(runs[-1]), flush=True)
        acc = [r["accuracy"] for r in runs]
        splits = [float(np.mean((X[:, j] > np.median(X[:, j])) == Y)) for j in range(X.shape[1])]
        out = {
            "rows": len(Y),
            "majority": float(max(np.mean(Y), 1 - np.mean(Y))), "answers": len(Y) // 8,
            "summary": {"mean_accuracy": float(np.mean(acc)), "min": min(acc), "max": max(acc),
                        "sd": float(np.std(acc, ddof=1))},
            "references": {"best_median_split_chosen_with_the_labels": max(max(s, 1 - s) for s in splits),
                           "logistic_regression_on_all_labels_in_sample":
                               float(LogisticRegression().fit(X, Y).score(X, Y))},
            "runs": runs}
        bench.figures.update(out)
        bench.headline.update({"mean_accuracy": out["summary"]["mean_accuracy"], "majority": out["majority"]})
    print(json.dumps(out["summary"]), json.dumps(out["references"]))


if __name__ == "__main__":
    main()
