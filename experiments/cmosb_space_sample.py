"""Real CMOSB evaluations over Table III's space: the data behind ``bench_nsga2.py``'s CMOSB problem.

``n`` configurations of the CMOSB search space (a Latin hypercube over the six parameters,
integers uniform over their values; binary tasks have ``theta_p`` in [0.7, 1]) are each
trained and attacked in this process with :func:`raytune_fed.workflows.cmosb.evaluate`
(plaintext trainings, eps_c priced with the reference seconds per BFV operation, the attack
on a class-balanced 1,000-row sample), and the three objectives are written with the
configurations to JSON.  ``bench_nsga2.py`` fits one random forest per objective to them and
searches that surrogate, so the searchers meet CMOSB's mixed integer space and objective
landscape at the cost of a function call.

    python experiments/cmosb_space_sample.py            # 300 configurations of Synthetic1
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from raytune_fed.crypto import REFERENCE_OP_TIMES
from raytune_fed.random import as_generator, derive
from raytune_fed.workflows.cmosb import OBJECTIVES, PARAMETERS, evaluate, load_task, search_space

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _revisions  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="synthetic1")
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--attack-sample", type=int, default=1000)
    p.add_argument("--out", default="experiments/measured/cmosb_space_sample_synthetic1.json")
    args = p.parse_args(argv)
    if args.n < 10 or args.attack_sample < 2:
        p.error("need --n >= 10 and --attack-sample >= 2")
    task = load_task(args.dataset)
    space = search_space(task.binary)
    configs = space.latin_hypercube(args.n, as_generator(derive(args.seed, "cmosb-space-sample")))
    rows, cpu = [], time.process_time()
    for i, config in enumerate(configs):
        e = evaluate(task, config, he="plain", op_times=REFERENCE_OP_TIMES, seed=args.seed,
                     n_sample=args.attack_sample)
        rows.append({**{k: config[k] for k in PARAMETERS}, **dict(zip(OBJECTIVES, e.objectives()))})
        if (i + 1) % 50 == 0:
            print(f"{i + 1}/{args.n} ({time.process_time() - cpu:.0f} CPU s)", flush=True)
    out = {"benchmark": "cmosb_space_sample", "command": "python experiments/cmosb_space_sample.py"
           + "".join(f" --{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                     if k != "out" and v != p.get_default(k)),
           "dataset": args.dataset, "seed": args.seed, "attack_sample": args.attack_sample,
           "op_times": REFERENCE_OP_TIMES.as_dict(), "space": space.to_dict(), "cpu_seconds": time.process_time() - cpu,
           "python": platform.python_version(), "revision": _revisions.current(), "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
