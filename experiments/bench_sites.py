"""Per-query cost of a restricted site: in-process, as a Ray actor, and as a TLS service.

For each learner the openbox (``geo5_sim`` site 0) fits one model; a curator (site 1,
211 rows x 1000 features) answers the same query ``--repeats`` times in each deployment.
Recorded per learner: the openbox fit time, the encoding of the fitted pipeline into its
model record, the record's size, scikit-learn's own ``predict`` time on the curator's
rows (what the old sites ran), the site's scoring time (validation and its own
prediction, ``Loss.seconds``), and the round trip per deployment (median), whose
difference to the scoring time is the transport's overhead; and the round trip of a
``status`` request (no scoring, no ledger line), the bare cost of each transport.  The
guard is off (``k = 0``)
so the repeated query is answered every time.  Writes ``results/bench_sites.json``.

    python experiments/bench_sites.py            # about 3-5 minutes on 2 cores
    python experiments/bench_sites.py --quick    # smoke run (fewer trees, 3 repeats)
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)



def _median_time(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", default="results/bench_sites.json")
    args = parser.parse_args()
    with Benchmark("bench_sites", args.out) as bench:
        repeats = args.repeats or (3 if args.quick else 15)

        from raytune_fed.data import load_dataset
        from raytune_fed.federation import Schedule, Unit
        from raytune_fed.serve import start_sites
        from raytune_fed.models import get_learner, rebuild_model
        from raytune_fed.runtime import connect

        ds = load_dataset("geo5_sim")
        Xo, yo = ds.X[ds.sites == 0], ds.y[ds.sites == 0]
        Xs, ys = ds.X[ds.sites == 1], ds.y[ds.sites == 1]
        unit = Unit("s0", "s2", ("s1",), 0)
        schedule = Schedule.of([unit])
        trees = 500 if args.quick else 5000
        models = [("elastic_net", "elastic_net", {"alpha": 0.5, "lambda": 0.05}),
                  ("svm", "svm", {"C": 1.0, "sigma": 1e-3}),
                  (f"random_forest_{trees}", "random_forest",
                   {"num_trees": trees, "min_node_size": 1, "sample_fraction": 1.0})]
        base = Path(tempfile.mkdtemp(prefix="bench-sites-"))
        template = {"curator": {"query_budget": 10 ** 6}, "guard": {"k": 0}, "limits": {"seconds_per_query": 600.0}}

        ray = connect(num_cpus=2)
        started = {kind: start_sites({"s1": (Xs, ys)}, template=template, seed=1, workdir=base / kind, deployment=kind,
                                     tls=kind == "service")
                   for kind in ("local", "actor", "service")}
        sessions = {}
        for kind, sites in started.items():
            client = sites.clients["s1"]
            client.declare_schedule(schedule)
            sessions[kind] = client.open_session(unit, "curator")

        results = {}
        latency = {kind: _median_time(session.status, 5 * repeats)[0] for kind, session in sessions.items()}
        print("status round trip", json.dumps(latency), flush=True)
        try:
            for label, name, config in models:
                learner = get_learner(name)
                if learner.warm_up:
                    learner.warm_up()
                start = time.perf_counter()
                pipeline = learner.build(config, seed=0).fit(Xo, yo)
                fit = time.perf_counter() - start
                encode, record = _median_time(lambda: learner.encode(config, pipeline), repeats)
                sk_predict, _ = _median_time(lambda: pipeline.predict(Xs), repeats)
                own, _ = _median_time(lambda: rebuild_model(record, Xs.shape[1], n_rows=len(ys)).predict(Xs), repeats)
                row = {"fit_seconds": fit, "encode_seconds": encode, "record_bytes": record.nbytes,
                       "sklearn_predict_seconds": sk_predict, "site_predict_seconds": own, "deployments": {}}
                for kind, session in sessions.items():
                    answers = []
                    rtt, _ = _median_time(lambda: answers.append(session.query(record)), repeats)
                    scoring = statistics.median(a.seconds for a in answers)
                    row["deployments"][kind] = {"round_trip_seconds": rtt, "site_scoring_seconds": scoring,
                                                "overhead_seconds": rtt - scoring}
                    assert len({a.value for a in answers}) == 1
                results[label] = row
                print(label, json.dumps(row), flush=True)
        finally:
            for sites in started.values():
                sites.close()
            ray.shutdown()
        out = {"dataset": "geo5_sim", "openbox_rows": int(len(yo)), "curator_rows": int(len(ys)),
               "features": int(Xs.shape[1]), "repeats": repeats, "status_round_trip_seconds": latency,
               "results": results}
        bench.figures.update(out)
        bench.headline.update({f"status_round_trip_{k}_s": v for k, v in latency.items()})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
