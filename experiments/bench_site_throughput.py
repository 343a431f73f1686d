"""Queries per second one restricted site actor answers, at 1, 8 and 32 concurrent clients.

For each RFMS learner (elastic net, RBF SVM, random forest) the openbox (``geo5_sim`` site 0)
fits one model; a curator (site 1, 211 rows x 1000 features) runs as a real site actor
(:func:`raytune_fed.federation.remote_site`) and answers the same query (fresh request
numbers, guard off so a repeat is answered) from ``c`` clients at once (``c`` calls kept in
flight) for ``--seconds``.  Two site actors run side by side: one answering one call at a
time (``max_concurrency 1``: the site before concurrent scoring, whose one lock held every
request through scoring) and one answering ``--threads`` calls at a time (after); each
combination is measured ``--repeats`` times, before and after back to back in alternating
order, so both see the same load.  Recorded per learner, actor and clients: queries
answered, wall seconds, queries per second, the site actor's own CPU seconds per query (its
process's user + system time, from ``/proc``), the load, and the answer (it must be one value
everywhere); per learner the median of the after/before ratios.  On this machine's 2 cores
the speed-up of threads over one call at a time is bounded by 2; on a node of ``c`` cores a
site serves at most min(threads, c) / (CPU seconds per query) queries per second, which
``projection`` applies to the paper's 600-unit grid (see :func:`projection`).

    python experiments/bench_site_throughput.py                       # ~5 minutes on 2 cores
    python experiments/bench_site_throughput.py --seconds 1 --repeats 1 --trees 100   # smoke run
    python experiments/bench_site_throughput.py --project-from experiments/measured/bench_site_throughput.json \
        --out experiments/measured/bench_site_throughput_projection.json       # the projection alone
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

QUERIES_PER_UNIT = 276
"""Curator queries per RFMS unit at the paper's budget (20 + 40 evaluations, every method): 2,210 queries
over 8 units in ``experiments/measured/bench_rfms.json`` (elastic net and SVM; forests assumed the same)."""
GRID_HOURS = 1.50
"""The 600-unit grid on 64 cores from unit CPU seconds, long tail (docs/cluster.md, bench_grid_paper.json)."""
FOREST_SHARE_OF_GRID = 0.96  # forests' share of the grid's CPU: they run first (longest first)
UNITS_PER_LEARNER = 200  # the paper's grid: 20 openbox/lockbox pairs x 10 replications, per learner
CURATED_SHARE = 3 / 5  # geo5_sim: a site is a curator in the units where it is neither openbox nor lockbox
FOREST_TREES_MEASURED = [500]  # set from --trees (the projection scales the forest's cost from it)
MODELS = {"elastic_net": {"alpha": 0.5, "lambda": 0.05}, "svm": {"C": 1.0, "sigma": 1e-3},
          "random_forest": {"num_trees": 500, "min_node_size": 1, "sample_fraction": 1.0}}


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _site_pid(actor) -> int:
    import ray

    return ray.get(actor.__ray_call__.remote(lambda _self: os.getpid()))


def _drive(actor, token: str, model_wire: dict, clients: int, seconds: float, first: int) -> dict:
    """Keep ``clients`` calls in flight for ``seconds``; the answers and the wall time to the last one."""
    import ray

    from raytune_fed.federation import _wire

    def message(number: int) -> bytes:
        return _wire.encode({"method": "query", "args": {"session": token, "request": number, "mechanism": "exact",
                                                         "model": model_wire}})

    number = first
    start = time.perf_counter()
    pending = []
    for _ in range(clients):
        pending.append(actor.call.remote(message(number)))
        number += 1
    values, refused = set(), 0
    done = 0
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        reply = _wire.decode(ray.get(ready[0]), max_bytes=1 << 30)
        if "answer" in reply:
            values.add(reply["answer"]["fields"]["value"])
        else:
            refused += 1
        done += 1
        if time.perf_counter() - start < seconds:
            pending.append(actor.call.remote(message(number)))
            number += 1
    wall = time.perf_counter() - start
    return {"queries": done, "refused": refused, "wall_seconds": round(wall, 3),
            "queries_per_second": round(done / wall, 2), "answers": sorted(values), "next": number}


def projection(results: dict, threads: int, cores: tuple[int, ...] = (1, 2, 8, 16)) -> dict:
    """Hours one curator site of the paper's 600-unit grid spends scoring, from the measured site CPU per query.

    A site serves ``UNITS_PER_LEARNER * CURATED_SHARE * QUERIES_PER_UNIT`` queries of each learner; with
    ``threads`` calls at a time on a node of ``c`` cores it needs at least CPU / min(threads, c) hours (one
    call at a time: CPU / 1).  The standard error is over the measurements (every clients x before/after run).
    """
    per_site = UNITS_PER_LEARNER * CURATED_SHARE * QUERIES_PER_UNIT
    out: dict = {"queries_per_unit_per_curator": QUERIES_PER_UNIT, "units_per_learner": UNITS_PER_LEARNER,
                 "curated_share": CURATED_SHARE, "queries_per_site_per_learner": per_site, "learners": {}}
    total = total_var = 0.0
    for name, row in results.items():
        cpu = [r["site_cpu_seconds_per_query"] for label in ("before", "after") for rs in row[label]["runs"].values()
               for r in rs]
        mean = statistics.mean(cpu)
        se = statistics.stdev(cpu) / len(cpu) ** 0.5 if len(cpu) > 1 else float("nan")
        hours, hours_se = per_site * mean / 3600, per_site * se / 3600
        total, total_var = total + hours, total_var + hours_se ** 2
        out["learners"][name] = {"site_cpu_seconds_per_query": round(mean, 5), "se": round(se, 5),
                                 "n_measurements": len(cpu), "site_cpu_hours": round(hours, 3),
                                 "site_cpu_hours_se": round(hours_se, 3)}
    out["site_cpu_hours"] = round(total, 3)
    out["site_cpu_hours_se"] = round(total_var ** 0.5, 3)
    out["site_hours_one_call_at_a_time"] = round(total, 3)
    out["site_hours_threaded"] = {str(c): round(total / min(threads, c), 3) for c in cores}
    out["site_queries_per_second_bound"] = {
        name: {str(c): round(min(threads, c) / v["site_cpu_seconds_per_query"], 1) for c in cores}
        for name, v in out["learners"].items()}
    # offered load while the grid runs in GRID_HOURS: forests first (their share of the grid's time), then the rest
    if "random_forest" in out["learners"]:
        rate = per_site / (FOREST_SHARE_OF_GRID * GRID_HOURS * 3600)
        cost = out["learners"]["random_forest"]["site_cpu_seconds_per_query"]
        out["forest_phase"] = {
            "grid_hours": GRID_HOURS, "forest_share_of_grid": FOREST_SHARE_OF_GRID,
            "offered_queries_per_second_per_site": round(rate, 2),
            "site_cpu_busy_share_one_call_at_a_time": round(rate * cost, 3),
            "cores_needed_at_5000_trees": round(rate * cost * 5000 / FOREST_TREES_MEASURED[0], 1),
            "note": "busy share > 1 means the site falls behind unless it scores that many queries at once "
                    "(threads and cores); the forest's query cost grows about linearly with its trees"}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,8,32", help="concurrent clients (calls in flight), comma-separated")
    parser.add_argument("--threads", type=int, default=8, help="the site actor's max_concurrency after the change")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of queries per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements of each combination (alternating)")
    parser.add_argument("--trees", type=int, default=500, help="the forest's trees")
    parser.add_argument("--learners", default="elastic_net,svm,random_forest")
    parser.add_argument("--out", default="experiments/measured/bench_site_throughput.json")
    parser.add_argument("--project-from", default=None, metavar="JSON",
                        help="only recompute the projection from this benchmark record; write it to --out")
    args = parser.parse_args()
    if args.project_from is not None:
        record = json.loads(Path(args.project_from).read_text())
        FOREST_TREES_MEASURED[0] = record["figures"]["forest_trees"]
        with Benchmark("bench_site_throughput_projection", args.out) as bench:
            bench.figures.update({
                "from": args.project_from, "revision_measured": record["revision"],
                "load_average_measured": record["load_average"],
                "projection": projection(record["figures"]["results"], record["figures"]["threads_after"])})
        print(json.dumps(bench.figures, indent=1))
        return
    FOREST_TREES_MEASURED[0] = args.trees
    clients = _ints(args.clients)
    learners = [name for name in args.learners.split(",") if name]
    unknown = sorted(set(learners) - set(MODELS))
    if unknown or not clients or min(clients) < 1 or args.threads < 1 or args.seconds <= 0 or args.trees < 1 \
            or args.repeats < 1:
        sys.exit(f"bad arguments: learners {unknown or learners} (known {sorted(MODELS)}), clients {clients}, "
                 f"threads {args.threads}, seconds {args.seconds}, trees {args.trees}")

    with Benchmark("bench_site_throughput", args.out) as bench:
        import ray

        from raytune_fed.data import load_dataset
        from raytune_fed.federation import Policy, Schedule, SiteClient, Unit, remote_site
        from raytune_fed.federation._fields import model_to_wire
        from raytune_fed.models import get_learner
        from raytune_fed.runtime import connect

        ds = load_dataset("geo5_sim")
        Xo, yo = ds.X[ds.sites == 0], ds.y[ds.sites == 0]
        Xs, ys = ds.X[ds.sites == 1], ds.y[ds.sites == 1]
        unit = Unit("s0", "s2", ("s1",), 0)
        schedule = Schedule.of([unit])
        base = Path(tempfile.mkdtemp(prefix="bench-site-throughput-"))
        bench.figures.update({
            "dataset": "geo5_sim", "openbox_rows": int(len(yo)), "curator_rows": int(len(ys)),
            "features": int(Xs.shape[1]), "clients": clients, "threads_after": args.threads,
            "seconds_per_measurement": args.seconds, "repeats": args.repeats, "forest_trees": args.trees,
            "note": "2 logical CPUs here: threads can at most double a site's queries per second; "
                    "'before' is the site actor answering one call at a time (max_concurrency 1)",
            "results": {}})
        connect(num_cpus=2)
        try:
            for name in learners:
                config = dict(MODELS[name], **({"num_trees": args.trees} if name == "random_forest" else {}))
                learner = get_learner(name)
                if learner.warm_up:
                    learner.warm_up()
                record = learner.encode(config, learner.build(config, seed=0).fit(Xo, yo))
                wire = model_to_wire(record)
                row: dict = {"config": config, "record_bytes": int(record.nbytes)}
                sites = {}
                for label, threads in (("before", 1), ("after", args.threads)):
                    policy = Policy.from_mapping({
                        "name": "s1", "seed": 1, "ledger": str(base / f"{name}-{label}.ledger.jsonl"),
                        "curator": {"query_budget": 10 ** 7}, "budget": {"answers": 10 ** 7}, "guard": {"k": 0},
                        "limits": {"seconds_per_query": 600.0}})
                    actor = remote_site(Xs, ys, policy, max_concurrency=threads)
                    client = SiteClient(actor, name="s1")
                    client.declare_schedule(schedule)
                    token = client.open_session(unit, "curator").token
                    number = _drive(actor, token, wire, 2, 1.0, 1)["next"]  # warm-up: the actor's first calls
                    sites[label] = [actor, token, _site_pid(actor), number]
                    row[label] = {"max_concurrency": threads, "runs": {str(c): [] for c in clients}}
                for repeat in range(args.repeats):  # before and after alternate, so both see the same load
                    for c in clients:
                        order = ("before", "after") if repeat % 2 == 0 else ("after", "before")
                        for label in order:
                            actor, token, pid, number = sites[label]
                            cpu = _process_cpu(pid)
                            run = _drive(actor, token, wire, c, args.seconds, number)
                            sites[label][3] = run.pop("next")
                            run["site_cpu_seconds_per_query"] = round((_process_cpu(pid) - cpu) / run["queries"], 5)
                            run["load_average_1min"] = round(os.getloadavg()[0], 2)
                            row[label]["runs"][str(c)].append(run)
                            print(name, label, f"repeat={repeat}", f"clients={c}", run, flush=True)
                for label, (actor, *_rest) in sites.items():
                    ray.kill(actor)
                    for c, runs in row[label]["runs"].items():
                        qps = [r["queries_per_second"] for r in runs]
                        row[label].setdefault("median_queries_per_second", {})[c] = statistics.median(qps)
                before, after = row["before"]["runs"], row["after"]["runs"]
                answers = {v for runs in (before, after) for rs in runs.values() for r in rs for v in r["answers"]}
                row["one_answer_everywhere"] = len(answers) == 1
                # per repeat, after / before measured back to back; the median of those ratios
                row["speedup_median"] = {c: round(statistics.median(
                    a["queries_per_second"] / b["queries_per_second"] for a, b in zip(after[c], before[c])), 2)
                    for c in after}
                bench.figures["results"][name] = row
            bench.figures["projection"] = projection(bench.figures["results"], args.threads)
        finally:
            ray.shutdown()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
