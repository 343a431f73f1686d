"""The attacks of issue 16 (a site's whole life) against the sites at commit d8d2749 and now.

    python experiments/attacks_on_d8d2749.py --out experiments/measured/attacks_on_d8d2749.json

runs every attack of ``tests/lifetime_attacks.py`` against the code of commit d8d2749 (a
temporary git worktree, ``experiments/_revisions.py``) and against this checkout, each on
the site in-process, as a Ray actor and as a TLS service where the attack applies, and
writes both under ``before`` and ``now``.  The site is the probe's: 160 rows x 12 features
(``make_classification(random_state=3)``), guard k = 5, query budget 40, 30 s per query,
defaults elsewhere; ``everything_the_site_answers`` runs under the package's default policy
(name, seed and ledger only) and ``work_before_checks`` with a 0.5 s ``seconds_per_query``.
A label attack leaks when it labels more than the majority share + 15 points of the rows
right (``lifetime_attacks.LEAK``).  ``tests/test_attacks_lifetime.py`` asserts each fails now.
``--here`` runs only on the package this interpreter imports.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
sys.path.insert(0, str(TESTS))  # the attacker's tools live with the tests
sys.path.insert(0, str(HERE))
REVISION = "d8d2749"
KINDS = ("local", "actor", "service")


def _targets(ray, tls):
    from site_targets import build_target, policy

    def make(kind, **sections):
        data = policy(Path(tempfile.mkdtemp(prefix="attack-")), **sections)
        return build_target(kind, data, ray=ray, tls=tls)

    return make


def _pid(t):
    if t.kind == "actor":
        import ray

        return ray.get(t.actor.__ray_call__.remote(lambda self: os.getpid()))
    return t.process.pid if t.kind == "service" else None


def run_here(kinds) -> dict:
    import ray

    import lifetime_attacks as la
    from raytune_fed.federation import self_signed_certificate
    from site_targets import X, Y

    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(TESTS)) if p)
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    tls = self_signed_certificate(tempfile.mkdtemp(prefix="attack-tls-"))
    make = _targets(ray, tls)
    made = []

    def target(kind, **sections):
        made.append(make(kind, **sections))
        return made[-1]

    results: dict = {}

    def record(name, kind, fn):
        start = time.perf_counter()
        try:
            out = fn()
        except Exception as exc:  # noqa: BLE001 - an attack that breaks is a result too
            out = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        out["wall_seconds"] = round(time.perf_counter() - start, 2)
        results.setdefault(name, {})[kind] = out
        print(name, kind, json.dumps(out), flush=True)

    try:
        for kind in kinds:
            record("lockbox_batch", kind, lambda: la.lockbox_batch(target(kind).client, X, Y))
            record("lockbox_per_unit", kind, lambda: la.lockbox_per_unit(target(kind).client, X, Y))
            record("curator_finals", kind, lambda: la.curator_finals(target(kind).client, X, Y))
            record("everything_the_site_answers", kind,
                   lambda: la.everything_the_site_answers(target(kind, bare=True).client, X, Y))

            def work(kind=kind):
                t = target(kind, limits={"seconds_per_query": 0.5})
                return la.work_before_checks(t.client, _pid(t), t.curator())

            record("work_before_checks", kind, work)

            def escapes(kind=kind):
                t = target(kind)
                return la.exception_escapes(t.client, t.curator().token, n=5)

            record("exception_escapes", kind, escapes)
        if "service" in kinds:
            record("unread_pipe", "service",
                   lambda: la.unread_pipe(X, Y, Path(tempfile.mkdtemp(prefix="attack-pipe-")), n=60))
        if "actor" in kinds:
            record("actor_handle", "actor", lambda: la.actor_handle(target("actor").actor, X.shape))
    finally:
        for t in made:
            for fn in t.cleanup:
                try:
                    fn()
                except Exception:  # noqa: BLE001
                    pass
        ray.shutdown()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/attacks_on_d8d2749.json")
    parser.add_argument("--here", action="store_true", help="run only on the package this interpreter imports")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated deployments")
    args = parser.parse_args()
    kinds = tuple(args.kinds.split(","))
    out = Path(args.out).resolve()
    if args.here:
        results = run_here(kinds)
        out.write_text(json.dumps({"results": results}, indent=2))
        return
    from _revisions import checkout, run_script

    load = os.getloadavg()
    with checkout(REVISION) as tree:
        before = run_script(tree, __file__, ["--here", "--kinds", args.kinds])["results"]
    now_file = Path(tempfile.mkdtemp()) / "now.json"
    import subprocess

    subprocess.run([sys.executable, __file__, "--here", "--kinds", args.kinds, "--out", str(now_file)], check=True)
    now = json.loads(now_file.read_text())["results"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "command": "python experiments/attacks_on_d8d2749.py", "before": {"commit": REVISION, "results": before},
        "now": {"results": now}, "site": "make_classification(160, 12, random_state=3), guard k = 5, query budget 40",
        "leak": "accuracy above the majority share + 0.15", "load_average_at_start": load}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
