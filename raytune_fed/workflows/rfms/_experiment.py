"""One RFMS experiment: every method on one role assignment, replication and learner.

The analyst's process holds the :class:`~raytune_fed.federation.OpenBox` and reaches the
curators and the lockbox only through :class:`~raytune_fed.federation.SiteClient` handles.
Evaluations are cached per configuration, so methods that share the initial design pay
for it once, and a method that never looks at the remote objective (``lso``) never
queries a curator.  No Ray import: the grid runner decides where this runs.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from raytune_fed.metrics import hypervolume, pareto_mask
from raytune_fed.random import seed_int
from raytune_fed.workflows.rfms._methods import Method, get_methods
from raytune_fed.workflows.rfms._spec import ExperimentSpec
from raytune_fed.algorithms.thresholdout import Thresholdout
from raytune_fed.federation.legacy import OpenBox, SiteClient, final_all, query_all

REFERENCE_POINT = (1.0, 1.0, 1.0)


def _ckey(config: Mapping[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, default=float)


@dataclass
class Timing:
    """Where an experiment's wall time went (seconds)."""

    local: float = 0.0       # openbox cross-validation
    fit: float = 0.0         # openbox fits of models sent to curators
    remote: float = 0.0      # curator round trips, including their scoring
    scoring: float = 0.0     # curators' own time answering (summed over curators: CPU accounting)
    scoring_max: float = 0.0  # the slowest curator per query (wall time if every site had its own node)
    search: float = 0.0      # searcher ask/tell
    final: float = 0.0       # refits and final evaluations
    total: float = 0.0
    n_local: int = 0
    n_remote: int = 0

    @property
    def framework(self) -> float:
        """Everything but fitting, cross-validation, scoring and the searchers' own work.

        Scoring counts every curator's time: on a machine whose cores are all busy with
        experiment units the curators of one query share the cores, so their times add up.
        ``framework_max`` counts only the slowest curator (sites on nodes of their own).
        """
        return max(self.total - self.local - self.fit - min(self.scoring, self.remote) - self.search - self.final,
                   0.0)

    @property
    def framework_max(self) -> float:
        return max(self.total - self.local - self.fit - self.scoring_max - self.search - self.final, 0.0)

    def as_dict(self) -> dict[str, float]:
        d = {k: getattr(self, k) for k in ("local", "fit", "remote", "scoring", "scoring_max", "search", "final",
                                           "total", "n_local", "n_remote")}
        d["framework"], d["framework_max"] = self.framework, self.framework_max
        return d


class Evaluator:
    """Cached objectives of one experiment: local CV error, remote (curator) error, train error."""

    def __init__(self, openbox: OpenBox, learner: Any, curators: Sequence[SiteClient], *, n_folds: int,
                 cv_seed: int, fit_seed: int, timing: Timing) -> None:
        self.openbox, self.learner, self.curators = openbox, learner, list(curators)
        self.n_folds, self.cv_seed, self.fit_seed, self.t = n_folds, cv_seed, fit_seed, timing
        self._local: dict[str, float] = {}
        self._remote: dict[str, tuple[float, float]] = {}

    def local(self, config: Mapping[str, Any]) -> float:
        k = _ckey(config)
        if k not in self._local:
            start = time.perf_counter()
            self._local[k] = self.openbox.cv_error(self.learner, config, n_folds=self.n_folds, seed=self.cv_seed)
            self.t.local += time.perf_counter() - start
            self.t.n_local += 1
        return self._local[k]

    def remote_and_train(self, config: Mapping[str, Any]) -> tuple[float, float]:
        """(size-weighted curator in-bag error, openbox in-bag resubstitution error)."""
        k = _ckey(config)
        if k not in self._remote:
            start = time.perf_counter()
            model = self.openbox.fit(self.learner, config, seed=self.fit_seed)
            train = self.openbox.inbag_error(model)
            mid = time.perf_counter()
            losses = query_all(self.curators, model)
            end = time.perf_counter()
            self.t.fit += mid - start
            self.t.remote += end - mid
            self.t.scoring += sum(loss.seconds for loss in losses)
            self.t.scoring_max += max(loss.seconds for loss in losses)
            self.t.n_remote += 1
            weights = np.array([loss.n_rows for loss in losses], dtype=float)
            remote = float(np.dot(weights, [loss.value for loss in losses]) / weights.sum())
            self._remote[k] = (remote, train)
        return self._remote[k]

    @property
    def n_remote_evaluations(self) -> int:
        return len(self._remote)


@dataclass
class MethodRun:
    method: Method
    history: list[dict[str, Any]] = field(default_factory=list)  # config, local, remote, value
    selected: list[dict[str, Any]] = field(default_factory=list)
    n_remote: int = 0
    budget_used: int | None = None
    seconds: float = 0.0


def _run_method(method: Method, ev: Evaluator, space: Any, design: list[dict], n_iter: int,
                 seed: np.random.SeedSequence, thresholdout_budget: int | None, t: Timing) -> MethodRun:
    from raytune_fed.algorithms import GPMinimizer, ParEGO

    run = MethodRun(method)
    start = time.perf_counter()
    n_total = len(design) + n_iter
    s_search, s_th, s_rand = seed.spawn(3)
    th = Thresholdout(budget=thresholdout_budget, seed=s_th) if method.thresholdout else None

    def observe(config: dict) -> tuple[float, float | None, float | None]:
        local = ev.local(config)
        remote = None
        if method.needs_remote:
            remote, train = ev.remote_and_train(config)
            run.n_remote += 1
            if th is not None:
                return local, remote, th.answer(train, remote)
        return local, remote, None

    if method.kind == "random":
        configs = space.sample(n_total, np.random.default_rng(s_rand))
        for c in configs:
            local, remote, _ = observe(c)
            run.history.append({"config": c, "local": local, "remote": remote})
    else:
        seed_int = int(s_search.generate_state(1)[0])
        common = dict(seed=seed_int, n_initial_points=len(design), points_to_evaluate=list(design))
        core = ParEGO(space, 2, **common) if method.kind == "multi" else GPMinimizer(space, **common)
        for _ in range(n_total):
            s0 = time.perf_counter()
            (c,) = core.ask(1)
            t.search += time.perf_counter() - s0
            local, remote, answer = observe(c)
            if method.kind == "multi":
                row = [local, remote]
            else:
                row = [answer if answer is not None else method.scalar(local, remote)]
            s0 = time.perf_counter()
            core.tell([c], [row])
            t.search += time.perf_counter() - s0
            run.history.append({"config": c, "local": local, "remote": remote,
                                "value": row[0] if method.kind != "multi" else None})
    run.selected = _select(method, run.history)
    run.budget_used = th.budget_used if th is not None else None
    run.seconds = time.perf_counter() - start
    return run


def _select(method: Method, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if method.kind == "single":
        best = int(np.argmin([h["value"] for h in history]))  # first of ties
        return [history[best]["config"]]
    pts = np.array([[h["local"], h["remote"]] for h in history])
    keep = np.flatnonzero(pareto_mask(pts))
    seen: dict[str, dict] = {}
    for i in keep:
        seen.setdefault(_ckey(history[i]["config"]), history[i]["config"])
    return list(seen.values())


def run_experiment(spec: ExperimentSpec, openbox: OpenBox, curators: Sequence[SiteClient], lockbox: SiteClient,
                   *, progress: Callable[[str], None] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run every method of ``spec``; returns one row per method and the experiment's timing."""
    from raytune_fed.models import get_learner

    s = spec.settings
    methods = get_methods(s.methods)
    learner = get_learner(spec.learner)
    t = Timing()
    t0 = time.perf_counter()
    ss_design, ss_cv, ss_fit, ss_methods = spec.search_seed().spawn(4)
    cv_seed, fit_seed = seed_int(ss_cv), seed_int(ss_fit)
    ev = Evaluator(openbox, learner, curators, n_folds=s.n_folds, cv_seed=cv_seed, fit_seed=fit_seed, timing=t)
    design = learner.space.latin_hypercube(s.n_init, np.random.default_rng(ss_design))

    runs = []
    for method, mseed in zip(methods, ss_methods.spawn(len(methods))):
        runs.append(_run_method(method, ev, learner.space, design, s.n_iter, mseed, s.thresholdout_budget, t))
        if progress:
            progress(f"{spec.learner} ob={spec.openbox} lb={spec.lockbox} rep={spec.replication}: {method.name} done")

    # final evaluation: refit every selected configuration once, score on all out-bags
    f0 = time.perf_counter()
    finals: dict[str, dict] = {}
    for run in runs:
        for c in run.selected:
            finals.setdefault(_ckey(c), c)
    keys = list(finals)
    models = [openbox.fit(learner, finals[k], seed=fit_seed) for k in keys]
    ob_out = [openbox.outbag_error(m) for m in models]
    cu_finals = final_all(curators, models)
    cu_out = np.mean([f.values for f in cu_finals], axis=0).tolist()  # unweighted mean over curators
    (lb_final,) = final_all([lockbox], models)
    lb_out = list(lb_final.values)
    t.final += time.perf_counter() - f0
    t.total = time.perf_counter() - t0

    index = {k: i for i, k in enumerate(keys)}
    rows = []
    for run in runs:
        idx = [index[_ckey(c)] for c in run.selected]
        pts = np.array([[ob_out[i], cu_out[i], lb_out[i]] for i in idx])
        rows.append({
            "dataset": s.dataset, "split": s.split, "learner": spec.learner, "method": run.method.name,
            "openbox": spec.openbox, "lockbox": spec.lockbox, "curators": list(spec.curators),
            "replication": spec.replication, "experiment": spec.key,
            "n_selected": len(idx), "selected": json.dumps(run.selected, sort_keys=True, default=float),
            "openbox_outbag": [ob_out[i] for i in idx], "curator_outbag": [cu_out[i] for i in idx],
            "lockbox_loss": [lb_out[i] for i in idx],
            "hypervolume": hypervolume(pts, REFERENCE_POINT),
            "n_evaluations": len(run.history), "n_curator_queries": run.n_remote,
            "thresholdout_budget_used": run.budget_used, "seconds": run.seconds,
        })
    info = {"timing": t.as_dict(), "n_curator_queries_total": ev.n_remote_evaluations, "n_final_models": len(keys)}
    return rows, info
