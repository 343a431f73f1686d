"""Benchmark: what the passive party's wire boundary costs a SecureBoost training.

On Synthetic1 (CMOSB's split: 5 active / 5 passive columns, 1,333 training rows; or
Synthetic2 with ``--dataset``: 10 classes, 6,667 rows), 10 federated rounds of depth 4,
per backend (``plain``, ``bfv``) and per path:

* ``worker`` - the estimator with the in-process :class:`PassiveWorker` (no boundary: the floor);
* ``local``  - :class:`PassiveParty` through ``call(bytes)`` in this process (wire encoding,
  field checks, records, ledger); ``wire_overhead_s`` is the time of the client's requests
  minus the time inside the party's handlers;
* ``actor``  - both parties as Ray actors (the CMOSB workflow's path), wall and CPU seconds
  (CPU summed over this process and every process it started, so other load on the machine
  does not count).

Each cell also counts the client's requests per protocol method.  ``--params deep`` trains the
costliest corner of CMOSB's space instead (16 local + 16 federated trees of depth 8, every
node shared), where the passive party wins hundreds of splits per training; ``--paths`` and
``--backends`` pick cells.  ``--before REV`` first runs the same cells on the code of git
revision ``REV`` (a temporary worktree, this script), labelled ``before``, under the same
machine state, so a change of the protocol is measured against the old one.

The numbers of the direct actor calls this replaced (main at 83bca69) are in the README.
Run ``python experiments/bench_party_wire.py`` (5 trainings per cell) or ``--quick`` (2);
JSON goes to ``results/bench_party_wire.json`` unless ``--out`` says otherwise.  The
batched ``splits`` request: ``python experiments/bench_party_wire.py --params deep --backends plain
--paths actor --before 944e0d5 --out results/bench_party_wire_splits.json``; the trees of a
multi-class round sharing each level's requests: ``python experiments/bench_party_wire.py
--dataset synthetic2 --backends plain --paths local,actor --trainings 3 --before ce75d34
--out results/bench_party_wire_rounds.json``; row sets by masks instead of ``setdiff1d``:
``python experiments/bench_party_wire.py --dataset synthetic2 --backends plain --paths worker,actor
--trainings 3 --before 9b83774 --out results/bench_party_wire_masks.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import Counter

from _harness import Benchmark, figures_of  # this folder's harness (the script's own folder is on sys.path)

OWNER = "bench-owner-" + "x" * 16
PARAM_SETS = {"default": dict(n_federated_trees=10, n_local_trees=0, max_depth=4, learning_rate=0.3),
              "deep": dict(n_federated_trees=16, n_local_trees=16, max_depth=8, subsample=1.0, purity_threshold=1.0,
                           learning_rate=0.3)}
_TICK = os.sysconf("SC_CLK_TCK")
_ACC = {"request": 0.0, "handler": 0.0}
_CALLS: Counter = Counter()


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and its descendants (Linux ``/proc``)."""
    stats = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                f = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
                stats[int(d)] = (int(f[1]), (int(f[11]) + int(f[12])) / _TICK)
            except (OSError, IndexError):
                continue
    keep, frontier = {os.getpid()}, [os.getpid()]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _) in stats.items():
            if ppid == parent and pid not in keep:
                keep.add(pid)
                frontier.append(pid)
    return sum(stats[p][1] for p in keep if p in stats)


def _counted_requests(acc: dict[str, float]) -> None:
    """Time the client's requests and count them per method (the driver's clients, every path)."""
    from raytune_fed.federation.parties import PassiveClient

    if getattr(PassiveClient, "_counted", False):
        return
    PassiveClient._counted = True
    request = PassiveClient._request

    def timed_request(self, method, *args, **kwargs):
        _CALLS[method] += 1
        start = time.perf_counter()
        try:
            return request(self, method, *args, **kwargs)
        finally:
            acc["request"] += time.perf_counter() - start

    PassiveClient._request = timed_request


def _timed_handlers(acc: dict[str, float]) -> None:
    from raytune_fed.federation.parties import PassiveClient, PassiveParty

    if getattr(PassiveClient, "_timed", False):
        return
    PassiveClient._timed = True

    for spec in PassiveParty.PROTOCOL.values():
        def timed(*args, _handler=spec.handler, **kwargs):
            start = time.perf_counter()
            try:
                return _handler(*args, **kwargs)
            finally:
                acc["handler"] += time.perf_counter() - start

        object.__setattr__(spec, "handler", timed)


def _run(path: str, he: str, n: int, task, base: dict) -> dict:
    from raytune_fed.federation.parties import ActiveParty, PassiveClient, PassiveParty, remote_party
    from raytune_fed.models.secureboost import PassiveWorker, SecureBoostClassifier

    Xa, Xp = task.X[:, task.active_features], task.X[:, task.passive_features[0]]
    rows, params = task.train_rows, {**base, "he": he}
    acc = _ACC
    _counted_requests(acc)
    if path == "local":
        _timed_handlers(acc)
    if path == "actor":
        import ray

        passive = remote_party(PassiveParty, "passive", ray.put(Xp), owner_secret=OWNER)
        active = remote_party(ActiveParty, "active", ray.put(Xa), task.y, train_rows=rows, test_rows=task.test_rows)
    elif path == "local":
        passive = PassiveParty(Xp, owner_secret=OWNER)
    walls, cpus, overheads = [], [], []
    for i in range(n + 1):  # the first training warms up
        acc.update(request=0.0, handler=0.0)
        _CALLS.clear()
        wall, cpu = time.perf_counter(), _cpu_seconds()
        if path == "worker":
            SecureBoostClassifier(**params).fit(Xa[rows], task.y[rows], passive=[PassiveWorker(Xp)], rows=rows)
        elif path == "local":
            client = PassiveClient.admit(passive, owner=OWNER, unit=f"t{i}")
            SecureBoostClassifier(**params).fit(Xa[rows], task.y[rows], passive=[client], rows=rows)
        else:
            import ray

            client = PassiveClient.admit(passive, owner=OWNER, unit=f"t{i}")
            ray.get(active.train.remote(f"t{i}", params, [client]))
        if i:
            walls.append(time.perf_counter() - wall)
            cpus.append(_cpu_seconds() - cpu)
            overheads.append(acc["request"] - acc["handler"])
    out = {"path": path, "he": he, "wall_median_s": statistics.median(walls), "wall_min_s": min(walls),
           "cpu_median_s": statistics.median(cpus)}
    if path == "local":  # the last training's requests (over Ray the active party sends them)
        out["requests"] = dict(sorted(_CALLS.items()))
    if path == "local":
        out["wire_overhead_s"] = statistics.median(overheads)
        out["wire_overhead_fraction"] = statistics.median(o / w for o, w in zip(overheads, walls))
    return out


def _before(revision: str, argv: list[str]) -> dict:
    """This script's cells on the code of ``revision`` (a temporary worktree; Ray's workers import it too)."""
    from _revisions import checkout, run_script

    with checkout(revision) as tree:
        return run_script(tree, __file__, argv)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--trainings", type=int, default=5)
    parser.add_argument("--params", choices=sorted(PARAM_SETS), default="default")
    parser.add_argument("--dataset", choices=["synthetic1", "synthetic2"], default="synthetic1",
                        help="synthetic2: 10 classes, a tree per class per round")
    parser.add_argument("--backends", default="plain,bfv")
    parser.add_argument("--paths", default="worker,local,actor")
    parser.add_argument("--before", default=None, help="git revision to measure first, labelled 'before'")
    parser.add_argument("--out", default="results/bench_party_wire.json")
    args = parser.parse_args()
    backends, paths = args.backends.split(","), args.paths.split(",")
    bad = sorted(set(backends) - {"plain", "bfv"}) + sorted(set(paths) - {"worker", "local", "actor"})
    if bad:
        parser.error(f"unknown backends or paths {bad}; backends: plain, bfv; paths: worker, local, actor")
    with Benchmark("bench_party_wire", args.out) as bench:
        before = None
        if args.before:
            argv = ["--trainings", str(args.trainings), "--params", args.params, "--dataset", args.dataset,
                    "--backends", args.backends,
                    "--paths", args.paths] + (["--quick"] if args.quick else [])
            before = _before(args.before, argv)
        from raytune_fed.runtime import connect
        from raytune_fed.workflows.cmosb import load_task

        n = 2 if args.quick else args.trainings
        task = load_task(args.dataset)
        connect(num_cpus=2)  # a local session of its own, even where another Ray runs on the machine
        base = PARAM_SETS[args.params]
        out = {"benchmark": "party_wire", "params": base, "params_name": args.params,
               "dataset": args.dataset,
               "trainings": n, "cells": []}
        for he in backends:
            for path in paths:
                cell = _run(path, he, n, task, base)
                out["cells"].append(cell)
                print(json.dumps(cell), flush=True)
        if before is not None:
            out["before"] = {"revision": args.before, "cells": figures_of(before)["cells"],
                             "load_average": before.get("load_average")}
        bench.figures.update(out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
