"""How much the best label attack we found recovers within a site's guard and budget.

The attacker of ``tests/test_attacks.py`` (it knows the site's feature rows, not its
labels or in-bag split) asks one tiny-ball SVM per group of rows and labels each group by
the class-1 count the loss suggests.  For each guard ``k``, group size and site seed this
records the share of rows it labels right, the majority-class share (what guessing
gives), and how many of its queries were answered, refused and charged.  The site is the
tests' one (160 rows x 12 features, 128 in-bag, budget 40; its lifetime answers raised from
the default 160 // 8 to 40 so the budget is the 40 queries).  Writes
``results/bench_attacks.json``.

    python experiments/bench_attacks.py             # about a minute
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the attacker's tools live with the tests

from attack_kit import group_attack  # noqa: E402
from site_targets import SCHEDULE, UNIT, X, Y, policy  # noqa: E402

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/bench_attacks.json")
    args = parser.parse_args()
    with Benchmark("bench_attacks", args.out) as bench:
        from raytune_fed.federation import Policy, Site, SiteClient

        rows = []
        majority = float(max(np.mean(Y), 1 - np.mean(Y)))
        for k in (2, 5, 10):
            for group in (5, 6, 7, 8, 10, 12, 16):
                for seed in (11, 12, 13):
                    data = policy(Path(tempfile.mkdtemp()), guard={"k": k}, budget={"answers": 40})  # all 40 queries
                    data["seed"] = seed
                    client = SiteClient(Site(X, Y, Policy.from_mapping(data)))
                    client.declare_schedule(SCHEDULE)
                    cur = client.open_session(UNIT, "curator")
                    accuracy = float(np.mean(group_attack(cur, X, group) == Y))
                    kinds = [e.kind for e in cur.ledger().entries]
                    rows.append({"k": k, "group": group, "seed": seed, "accuracy": accuracy,
                                 "answered": kinds.count("query"), "refused": kinds.count("refused")})
                    print(json.dumps(rows[-1]), flush=True)
        best = {k: max(r["accuracy"] for r in rows if r["k"] == k) for k in (2, 5, 10)}
        out = {"majority": majority, "budget": 40, "in_bag_rows": 128, "best_accuracy_by_k": best, "runs": rows}
        bench.figures.update(out)
        bench.headline.update({"majority": majority, **{f"best_accuracy_k{k}": v for k, v in best.items()}})
    print("majority", majority, "best accuracy by k", best)


if __name__ == "__main__":
    main()
