"""The attacks on a site's operation (disk, restarts, ledger, request layout) against commit 8403454 and now.

    python experiments/attacks_on_8403454.py --kinds local,service --out experiments/measured/attacks_on_8403454.json
    python experiments/attacks_on_8403454.py --kinds actor --out experiments/measured/attacks_on_8403454_actor.json
    python experiments/attacks_on_8403454.py --kinds service --attacks parallel_bodies \
        --out experiments/measured/attacks_on_8403454_bodies.json

runs every attack of ``tests/site_life_attacks.py`` against the code of commit 8403454 (a
temporary git worktree, ``experiments/_revisions.py``) and against this checkout, on the
site in-process, as a Ray actor and as a TLS service where the attack applies, and
writes both under ``before`` and ``now``.  The site is the tests' (160 rows x 12
features, ``make_classification(random_state=3)``, guard k = 5, query budget 40, 30 s per
query) with a lifetime budget of 10 answers where the attack spends it, and 0.5 s per
query for the costly layouts.  ``tests/test_attacks_site_life.py`` asserts each fails now.
``--here`` runs only on the package this interpreter imports.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
sys.path.insert(0, str(TESTS))  # the attacker's tools live with the tests
sys.path.insert(0, str(HERE))
REVISION = "8403454"
KINDS = ("local", "actor", "service")
N = 300


def _stop_all(stop_last):
    """Stop every site a starter started (``stop_last`` raises IndexError once none is left)."""
    while True:
        try:
            stop_last()
        except IndexError:
            return


def _pid(t):
    if t.kind == "actor":
        import ray

        return ray.get(t.actor.__ray_call__.remote(lambda self: os.getpid()))
    return t.process.pid if t.kind == "service" else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_here(kinds, attacks) -> dict:
    import lifetime_attacks as la
    import site_life_attacks as sa
    from raytune_fed.federation import Policy, Site, SiteClient, self_signed_certificate
    from site_targets import OWNER, X, Y, build_target, policy, start_service, stop

    from raytune_fed.runtime import connect

    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(TESTS)) if p)
    ray = connect(num_cpus=2) if "actor" in kinds else None  # a session of its own, whatever else runs Ray here
    tls = self_signed_certificate(tempfile.mkdtemp(prefix="attack-tls-"))
    made, procs = [], []

    def target(kind, **sections):
        data = policy(Path(tempfile.mkdtemp(prefix="attack-")), **sections)
        made.append(build_target(kind, data, ray=ray, tls=tls))
        return made[-1]

    results: dict = {}

    def record(name, kind, fn):
        if attacks and not any(name.startswith(a) for a in attacks):
            return
        start = time.perf_counter()
        try:
            out = fn()
        except Exception as exc:  # noqa: BLE001 - an attack that breaks is a result too
            out = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        out["wall_seconds"] = round(time.perf_counter() - start, 2)
        results.setdefault(name, {})[kind] = out
        print(name, kind, json.dumps(out), flush=True)

    def starters(kind, data, root):
        """start() and stop() of a site on ``data``'s ledger, as ``kind``."""
        running = []
        if kind == "local":
            def start():
                running.append(Site(X, Y, Policy.from_mapping(data), owner_secret=OWNER))
                return SiteClient(running[-1], name="s1")

            def stop_last():
                stop(running.pop())
        else:
            def start():
                proc, url, token = start_service(root, data, tls)
                procs.append(proc)
                running.append(proc)
                return SiteClient.service(url, token=token, cafile=tls[0], name="s1")

            def stop_last():
                proc = running.pop()
                proc.terminate()
                proc.wait(timeout=60)
        return start, stop_last

    try:
        for kind in kinds:
            def flood(kind=kind):
                t = target(kind, budget={"answers": 10})
                return sa.ledger_flood(t.client, t.ledger, N, X)

            record("ledger_flood", kind, flood)

            def replays(kind=kind):
                t = target(kind)
                return sa.replay_flood(t.client, t.ledger, N, X)

            record("replay_flood", kind, replays)

            def sessions(kind=kind):
                t = target(kind)
                return sa.session_flood(t.client, t.ledger, 200)

            record("session_flood", kind, sessions)
            record("numbers_across_methods", kind, lambda kind=kind: sa.numbers_across_methods(target(kind).client, X))

            def layouts(kind=kind):
                t = target(kind, limits={"seconds_per_query": 0.5})
                return sa.costly_layouts(t.client, _pid(t), t.curator().token)

            record("costly_layouts", kind, layouts)
            if kind == "actor":
                continue
            for how in (("copy", "truncate", "delete") if kind == "local" else ("copy",)):
                def rollback(kind=kind, how=how):
                    root = Path(tempfile.mkdtemp(prefix="attack-"))
                    data = policy(root, budget={"answers": 10})
                    start, stop_last = starters(kind, data, root)
                    try:
                        return sa.rolled_back_ledger(start, stop_last, root / "ledger.jsonl", X, how)
                    finally:
                        _stop_all(stop_last)

                record(f"rolled_back_ledger_{how}", kind, rollback)

            def two(kind=kind):
                root = Path(tempfile.mkdtemp(prefix="attack-"))
                data = policy(root, budget={"answers": 10})
                start, stop_last = starters(kind, data, root)
                try:
                    return sa.two_sites_one_ledger(start, X)
                finally:
                    _stop_all(stop_last)

            record("two_sites_one_ledger", kind, two)
        if "service" in kinds:
            def restart():
                root = Path(tempfile.mkdtemp(prefix="attack-"))
                data = policy(root)
                port = _free_port()
                proc, url, token = start_service(root, data, tls, port=port)
                running = [proc]
                procs.append(proc)
                client = SiteClient.service(url, token=token, cafile=tls[0], name="s1")

                def kill_and_restart():
                    running[-1].send_signal(signal.SIGKILL)
                    running[-1].wait()
                    running.append(start_service(root, data, tls, port=port, token=token)[0])
                    procs.append(running[-1])

                return sa.restart_mid_query(client, lambda: running[-1].pid, kill_and_restart,
                                            la.deep_forest(800, 512))

            record("restart_mid_query", "service", restart)

            def bodies():
                t = target("service", limits={"max_request_bytes": 64 << 20})
                transport = t.client._transport
                return sa.parallel_bodies(transport.url, transport._token, transport.cafile, t.process.pid, 12,
                                          64 << 20)

            record("parallel_bodies", "service", bodies)
    finally:
        for t in made:
            for fn in t.cleanup:
                try:
                    fn()
                except Exception:  # noqa: BLE001
                    pass
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=60)
        if ray is not None:
            ray.shutdown()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/attacks_on_8403454.json")
    parser.add_argument("--here", action="store_true", help="run only on the package this interpreter imports")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated deployments")
    parser.add_argument("--attacks", default="", help="comma-separated attack names to run (default: all)")
    args = parser.parse_args()
    attacks = tuple(a for a in args.attacks.split(",") if a)
    out = Path(args.out).resolve()
    if args.here:
        results = run_here(tuple(args.kinds.split(",")), attacks)
        out.write_text(json.dumps({"results": results}, indent=2))
        return
    import subprocess

    from _revisions import checkout, run_script

    load = os.getloadavg()
    cpu = os.times()
    with checkout(REVISION) as tree:
        before = run_script(tree, __file__, ["--here", "--kinds", args.kinds, "--attacks", args.attacks])["results"]
    now_file = Path(tempfile.mkdtemp()) / "now.json"
    subprocess.run([sys.executable, __file__, "--here", "--kinds", args.kinds, "--attacks", args.attacks, "--out",
                    str(now_file)], check=True)
    now = json.loads(now_file.read_text())["results"]
    done = os.times()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "command": f"python experiments/attacks_on_8403454.py --kinds {args.kinds}"
                   + (f" --attacks {args.attacks}" if args.attacks else ""), "before": {"commit": REVISION, "results": before},
        "now": {"results": now},
        "site": "make_classification(160, 12, random_state=3), guard k = 5, query budget 40, 30 s per query; "
                "lifetime budget 10 where the attack spends it; 0.5 s per query for costly_layouts",
        "load_average_at_start": load, "load_average_at_end": os.getloadavg(),
        "cpu_seconds_children": round(done.children_user + done.children_system
                                      - cpu.children_user - cpu.children_system, 1)}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
