"""The RFMS grid on Ray: experiment units spread over the cluster, resumable.

Parallel grain: one experiment unit (role assignment x replication x learner, all
methods) is one Ray task holding one CPU; it drives its searchers through their ask/tell
cores in-process and talks to long-lived site actors (one :class:`SiteHost` per site,
its rows shipped once with ``ray.put``).  So Ray costs one task per unit and about a
millisecond per curator query, never a Tune trial per evaluation.  Finished units go to
the :class:`~raytune_fed.store.ResultStore` as they arrive; a rerun skips them.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from raytune_fed._checks import check_int
from raytune_fed.errors import ConfigError, RaytuneFedError
from raytune_fed.workflows.rfms._methods import get_methods
from raytune_fed.workflows.rfms._spec import ExperimentSpec, RFMSSettings
from raytune_fed.store import ResultStore, write_atomic


@dataclass(frozen=True)
class SitePlan:
    """The dataset split into sites, as the driver simulates it."""

    X: np.ndarray
    y: np.ndarray
    site_of_row: np.ndarray
    site_names: tuple[str, ...]

    def site(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        rows = np.flatnonzero(self.site_of_row == i)
        return self.X[rows], self.y[rows]


def plan_sites(settings: RFMSSettings, *, n_sites: int = 5) -> SitePlan:
    """Load the dataset and split it into sites (natural, SRS or DRC), checking every site."""
    from raytune_fed.data import load_dataset
    from raytune_fed.simulation import split_sites

    ds = load_dataset(settings.dataset, target=settings.target, site_column=settings.site_column)
    if ds.n_classes != 2:
        raise ConfigError(f"RFMS needs a binary task; dataset {settings.dataset!r} has {ds.n_classes} classes")
    if settings.split == "natural" and ds.sites is None:
        raise ConfigError(f"dataset {settings.dataset!r} has no natural sites; use --split srs or --split drc")
    split = split_sites(ds.X, ds.y, method=settings.split, n_sites=n_sites if ds.sites is None else ds.n_sites,
                        sites=ds.sites, site_names=ds.site_names, pca_variance=settings.pca_variance,
                        seed=settings.seed)
    if split.n_sites < 3:
        raise ConfigError(f"RFMS needs at least 3 sites (openbox, curator, lockbox), got {split.n_sites}")
    return SitePlan(ds.X, ds.y, split.site_of_row, tuple(split.site_names))


def build_grid(settings: RFMSSettings, *, n_sites: int, learners: Sequence[str], reps: int,
               pairs: int | None = None, site_names: Sequence[str] = ()) -> list[ExperimentSpec]:
    """Every (openbox, lockbox) pair (or the first ``pairs``) x replications x learners."""
    from raytune_fed.models import get_learner
    from raytune_fed.simulation import role_assignments

    get_methods(settings.methods)
    for name in learners:
        get_learner(name)
    if not learners:
        raise ConfigError("no learners given")
    check_int("reps", reps, 1)
    roles = role_assignments(n_sites)
    if pairs is not None:
        check_int("pairs", pairs, 1, len(roles))
        roles = _spread(roles, pairs)
    return [ExperimentSpec(settings, r.openbox, r.lockbox, tuple(r.curators), rep, learner, tuple(site_names))
            for rep in range(reps) for r in roles for learner in learners]


def _spread(roles: list[Any], k: int) -> list[Any]:
    """``k`` role assignments with distinct openboxes first (so small runs vary the openbox)."""
    out, used = [], set()
    for r in roles:
        if r.openbox not in used and len(out) < k:
            out.append(r)
            used.add(r.openbox)
    for r in roles:
        if len(out) >= k:
            break
        if r not in out:
            out.append(r)
    return out


def _run_unit(spec: ExperimentSpec, X: np.ndarray, y: np.ndarray, curator_hosts: Sequence[Any],
              lockbox_host: Any) -> tuple[list[dict], dict]:
    """Body of one experiment unit, run inside a Ray task."""
    import ray

    from raytune_fed.workflows.rfms._experiment import run_experiment
    from raytune_fed.federation.legacy import OpenBox, SiteClient

    started = time.time()
    s = spec.settings
    from raytune_fed.models import get_learner

    learner = get_learner(spec.learner)
    if learner.warm_up is not None:  # e.g. compile the solver once per worker process, outside the timings
        learner.warm_up()
    warmup = time.time() - started
    seeds = spec.split_seed().spawn(max(len(spec.site_names), spec.openbox + 1, spec.lockbox + 1, *(
        c + 1 for c in spec.curators)))
    openbox = OpenBox(X, y, name=_name(spec, spec.openbox), inbag_fraction=s.inbag_fraction,
                      seed=seeds[spec.openbox])
    opened = [h.open_session.remote(spec.session, "curator", seed=seeds[c], inbag_fraction=s.inbag_fraction)
              for h, c in zip(curator_hosts, spec.curators)]
    opened.append(lockbox_host.open_session.remote(spec.session, "lockbox"))
    ray.get(opened)
    curators = [SiteClient(h, spec.session) for h in curator_hosts]
    lockbox = SiteClient(lockbox_host, spec.session)
    try:
        rows, info = run_experiment(spec, openbox, curators, lockbox, progress=print)
        ledgers = ray.get([h.ledger.remote(spec.session) for h in curator_hosts])
        info["ledger_queries"] = [sum(e.kind == "query" for e in led.entries) for led in ledgers]
    finally:
        ray.get([h.close_session.remote(spec.session) for h in [*curator_hosts, lockbox_host]])
    info["started"], info["finished"], info["warmup"] = started, time.time(), warmup
    return rows, info


def _name(spec: ExperimentSpec, i: int) -> str:
    return spec.site_names[i] if spec.site_names else f"site{i}"


def run_grid(settings: RFMSSettings, *, learners: Sequence[str], reps: int = 1, pairs: int | None = None,
             out: str | Path, address: str | None = None, num_cpus: int | None = None,
             progress: Callable[[str], None] | None = print) -> pd.DataFrame:
    """Run (or resume) a grid; writes ``results.parquet`` and ``summary.json`` under ``out``."""
    from raytune_fed.models import get_learner
    from raytune_fed.runtime import connect, site_placement
    from raytune_fed.federation.legacy import SiteHost, remote_site

    say = progress or (lambda _msg: None)
    plan = plan_sites(settings)
    specs = build_grid(settings, n_sites=len(plan.site_names), learners=learners, reps=reps, pairs=pairs,
                       site_names=plan.site_names)
    out = Path(out)
    store = ResultStore(out)
    # longest first, so the last units on the cluster are short ones and cores idle less at the end
    todo = sorted((s for s in specs if not store.has(s.config())), key=lambda s: -get_learner(s.learner).relative_cost)
    say(f"rfms: {len(specs)} experiment units ({len(specs) - len(todo)} already done), "
        f"{len(plan.site_names)} sites, dataset {settings.dataset!r}, split {settings.split!r}")
    failures: list[str] = []
    grid_started = time.time()
    if todo:
        ray = connect(address, num_cpus)
        refs = {i: tuple(ray.put(a) for a in plan.site(i)) for i in range(len(plan.site_names))}
        hosts = {i: remote_site(SiteHost, name, *refs[i]) for i, name in enumerate(plan.site_names)}
        unit = ray.remote(_run_unit)
        _ask_autoscaler(len(todo))
        queue = list(todo)
        pending: dict[Any, ExperimentSpec] = {}
        done = 0
        while queue or pending:
            # Ray lends a task's CPU to others while it waits on a curator, so units are throttled
            # here: at most one running unit per CPU of the (possibly growing) cluster
            while queue and len(pending) < max(1, int(ray.cluster_resources().get("CPU", 1))):
                spec = queue.pop(0)
                opts = {"num_cpus": 1, "max_retries": 0, **site_placement(plan.site_names[spec.openbox])}
                ref = unit.options(**opts).remote(spec, *refs[spec.openbox], [hosts[c] for c in spec.curators],
                                                  hosts[spec.lockbox])
                pending[ref] = spec
            ready, _ = ray.wait(list(pending), num_returns=1)
            spec = pending.pop(ready[0])
            done += 1
            try:
                rows, info = ray.get(ready[0])
            except Exception as exc:  # one failed unit must not lose the others
                failures.append(f"{spec.learner} openbox={spec.openbox} lockbox={spec.lockbox} "
                                f"rep={spec.replication}: {_short(exc)}")
                say(f"[{done}/{len(todo)}] FAILED {failures[-1]}")
                continue
            timing = info["timing"]
            extra = {f"unit_{k}": v for k, v in timing.items()}
            extra.update(settings=json.dumps(asdict(settings), sort_keys=True), unit_started=info["started"], unit_finished=info["finished"], unit_warmup=info["warmup"],
                         unit_curator_queries=info["n_curator_queries_total"],
                         unit_ledger_queries=info["ledger_queries"])
            store.put(spec.config(), [{**r, **extra} for r in rows])
            best = max(rows, key=lambda r: r["hypervolume"])
            say(f"[{done}/{len(todo)}] {spec.learner} openbox={_name(spec, spec.openbox)} "
                f"lockbox={_name(spec, spec.lockbox)} rep={spec.replication}: {timing['total']:.1f}s, "
                f"{timing['n_local']} evaluations, best HV {best['hypervolume']:.3f} ({best['method']})")
    if failures:
        raise RaytuneFedError(f"{len(failures)} of {len(todo)} experiment units failed (finished ones are stored in "
                              f"{out}; rerun to resume): " + "; ".join(failures[:3]))
    keys = {s.key for s in specs}
    frame = store.frame()
    frame = frame[frame["experiment"].isin(keys)].reset_index(drop=True)
    frame.attrs["grid_seconds"] = time.time() - grid_started
    write_results(frame, out)
    return frame


def _ask_autoscaler(n_cpus: int) -> None:
    """Tell a cluster's autoscaler how many CPUs the grid could use.

    Units are submitted only as fast as CPUs exist, so without this the autoscaler would
    never see the backlog.  On a session without an autoscaler this does nothing.
    """
    try:
        from ray.autoscaler.sdk import request_resources

        request_resources(num_cpus=n_cpus)
    except Exception:  # local sessions have no autoscaler to ask
        pass


def _short(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc
    return f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1] if str(cause).strip() else ''}"


def summarize(frame: pd.DataFrame) -> dict[str, Any]:
    """Mean and sd hypervolume per learner x method, and win/loss matrices."""
    from raytune_fed.metrics import win_loss_matrix

    methods = list(dict.fromkeys(frame["method"]))
    table = (frame.groupby(["learner", "method"], sort=False)["hypervolume"]
             .agg(["mean", "std", "count"]).reset_index())
    wide = frame.pivot_table(index=["experiment"], columns="method", values="hypervolume")[methods]
    summary: dict[str, Any] = {
        "n_experiments": int(frame["experiment"].nunique()),
        "hypervolume": [{"learner": r.learner, "method": r.method, "mean": float(r["mean"]),
                         "sd": float(r["std"]) if np.isfinite(r["std"]) else None, "n": int(r["count"])}
                        for _, r in table.iterrows()],
        "win_loss": {"winner_rows": methods,
                     "matrix": win_loss_matrix(wide).loc[methods, methods].to_numpy().tolist()}
        if len(methods) > 1 else None,
    }
    return summary


def write_results(frame: pd.DataFrame, out: str | Path) -> dict[str, Any]:
    """Write ``results.parquet`` and ``summary.json`` atomically (each appears complete or not at all)."""
    out = Path(out)
    summary = summarize(frame)
    write_atomic(out / "results.parquet", lambda p: frame.to_parquet(p, index=False))
    write_atomic(out / "summary.json", lambda p: Path(p).write_text(json.dumps(summary, indent=2)))
    return summary


def format_summary(summary: dict[str, Any]) -> str:
    """A plain-text table of mean (sd) hypervolume per learner and method."""
    lines = [f"{'learner':<14} {'method':<8} {'mean HV':>8} {'sd':>7} {'n':>4}"]
    for r in summary["hypervolume"]:
        sd = "" if r["sd"] is None else f"{r['sd']:.3f}"
        lines.append(f"{r['learner']:<14} {r['method']:<8} {r['mean']:>8.4f} {sd:>7} {r['n']:>4}")
    wl = summary.get("win_loss")
    if wl:
        names = wl["winner_rows"]
        lines.append("")
        lines.append("wins (row beats column):")
        lines.append(" " * 9 + "".join(f"{n:>8}" for n in names))
        for n, row in zip(names, wl["matrix"]):
            lines.append(f"{n:<9}" + "".join(f"{v:>8.1f}" for v in row))
    return "\n".join(lines)


def write_report(out_dir: str | Path, settings: RFMSSettings | None = None) -> Path:
    """(Re)build the plots and report page of a results directory.

    The sites picture needs the dataset: it is re-split from ``settings``, or from the
    settings the grid stored with its rows.
    """
    from raytune_fed.workflows.rfms._report import build_report

    path = Path(out_dir) / "results.parquet"
    frame = pd.read_parquet(path) if path.exists() else None
    if settings is None and frame is not None and len(frame) and "settings" in frame.columns:
        stored = json.loads(frame["settings"].iloc[0])
        settings = RFMSSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()})
    sites = None
    if settings is not None:
        plan = plan_sites(settings)
        sites = (plan.X, plan.site_of_row, plan.site_names)
    return build_report(out_dir, frame=frame, sites=sites)
