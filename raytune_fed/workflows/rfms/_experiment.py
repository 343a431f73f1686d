"""One RFMS experiment: every method on one role assignment, replication and learner.

The analyst's process holds the :class:`~raytune_fed.federation.OpenBox` and reaches the
curators and the lockbox only through :class:`~raytune_fed.federation.SiteSession` s, to
which it sends model records.
Evaluations are cached per configuration, so methods that share the initial design pay
for it once, and a method that never looks at the remote objective (``lso``) never
queries a curator.  No Ray import: the grid runner decides where this runs.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raytune_fed.algorithms import GPMinimizer, ParEGO
from raytune_fed.federation import Loss, OpenBox, SiteSession, final_all, query_all
from raytune_fed.metrics import hypervolume, pareto_mask
from raytune_fed.models import get_learner
from raytune_fed.random import seed_int
from raytune_fed.workflows.rfms._methods import Method, get_methods
from raytune_fed.workflows.rfms._refusals import owner_must_act, refusals_json
from raytune_fed.workflows.rfms._spec import REFERENCE_POINT, ExperimentSpec

REFUSED_LOSS = 1.0
"""The remote value of a configuration every curator refused (the worst misclassification)."""
TOLERATED_REFUSALS = ("guard",)
"""Refusals a benign method meets and goes on from; any other refusal ends the experiment."""


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
    """Cached objectives of one experiment: local CV error, remote (curator) error, Thresholdout answers.

    A model goes to the curators as its record (``learner.encode``), never as an object.
    A curator's differencing guard may refuse a model (for example one that predicts one
    class on almost every row, or one too close to a model it answered before); the
    remote value is then the size-weighted mean over the curators that answered, and
    :data:`REFUSED_LOSS` when none did, so the search steers away from what the sites
    will not answer.
    """

    def __init__(self, openbox: OpenBox, learner: Any, curators: Sequence[SiteSession], *, n_folds: int,
                 cv_seed: int, fit_seed: int, timing: Timing) -> None:
        self.openbox, self.learner, self.curators = openbox, learner, list(curators)
        self.n_folds, self.cv_seed, self.fit_seed, self.t = n_folds, cv_seed, fit_seed, timing
        self._local: dict[str, float] = {}
        self._remote: dict[str, tuple[float, tuple[tuple[str, str], ...]]] = {}
        self.n_queries = 0

    def local(self, config: Mapping[str, Any]) -> float:
        k = _ckey(config)
        if k not in self._local:
            start = time.perf_counter()
            self._local[k] = self.openbox.cv_error(self.learner, config, n_folds=self.n_folds, seed=self.cv_seed)
            self.t.local += time.perf_counter() - start
            self.t.n_local += 1
        return self._local[k]

    def _fit(self, config: Mapping[str, Any]) -> tuple[Any, float]:
        """The record of ``config`` fitted on the openbox's in-bag rows, and its resubstitution error."""
        start = time.perf_counter()
        pipeline = self.openbox.fit(self.learner, config, seed=self.fit_seed)
        out = self.learner.encode(config, pipeline), self.openbox.inbag_error(pipeline)
        self.t.fit += time.perf_counter() - start
        return out

    def _ask(self, record: Any, **how: Any) -> tuple[float, tuple[tuple[str, str], ...]]:
        """(size-weighted answer of the curators that answered, (site, refusal code) of each that refused)."""
        start = time.perf_counter()
        answers = query_all(self.curators, record, tolerate=TOLERATED_REFUSALS, **how)
        self.t.remote += time.perf_counter() - start
        self.t.n_remote += 1
        self.n_queries += 1
        losses = [a for a in answers if isinstance(a, Loss)]
        if losses:
            self.t.scoring += sum(loss.seconds for loss in losses)
            self.t.scoring_max += max(loss.seconds for loss in losses)
        refused = tuple((c.client.name, a.code) for c, a in zip(self.curators, answers) if not isinstance(a, Loss))
        if not losses:
            return REFUSED_LOSS, refused
        weights = np.array([loss.n_rows for loss in losses], dtype=float)
        return float(np.dot(weights, [loss.value for loss in losses]) / weights.sum()), refused

    def remote(self, config: Mapping[str, Any]) -> tuple[float, tuple[tuple[str, str], ...]]:
        """(the curators' exact in-bag error, (site, code) of each curator that refused); asked once per
        configuration."""
        k = _ckey(config)
        if k not in self._remote:
            record, _ = self._fit(config)
            self._remote[k] = self._ask(record, mechanism="exact")
        return self._remote[k]

    def thresholdout(self, config: Mapping[str, Any]) -> tuple[float, tuple[tuple[str, str], ...]]:
        """The curators' Thresholdout answers (each site runs it on its own random stream), asked afresh."""
        record, train = self._fit(config)
        return self._ask(record, mechanism="thresholdout", train_loss=train)

    @property
    def n_remote_evaluations(self) -> int:
        """Queries sent to the curators (each one goes to every curator)."""
        return self.n_queries


@dataclass
class MethodRun:
    method: Method
    history: list[dict[str, Any]] = field(default_factory=list)  # config, local, remote, value
    selected: list[dict[str, Any]] = field(default_factory=list)
    n_remote: int = 0
    n_refused: int = 0      # evaluations at least one curator refused
    refused: Counter = field(default_factory=Counter)  # (site, code) -> queries it refused
    seconds: float = 0.0


def _run_method(method: Method, ev: Evaluator, space: Any, design: list[dict], n_iter: int,
                 seed: np.random.SeedSequence, t: Timing) -> MethodRun:
    run = MethodRun(method)
    start = time.perf_counter()
    n_total = len(design) + n_iter
    s_search, _, s_rand = seed.spawn(3)  # the middle stream fed the analyst-side Thresholdout before sites ran it

    def observe(config: dict) -> tuple[float, float | None, float | None]:
        """(local, exact remote or None, Thresholdout answer or None)."""
        local = ev.local(config)
        if not method.needs_remote:
            return local, None, None
        answer, refused = ev.thresholdout(config) if method.thresholdout else ev.remote(config)
        run.n_remote += 1
        run.n_refused += bool(refused)
        run.refused.update(refused)
        return (local, None, answer) if method.thresholdout else (local, answer, None)

    if method.kind == "random":
        configs = space.sample(n_total, np.random.default_rng(s_rand))
        for c in configs:
            local, remote, _ = observe(c)
            run.history.append({"config": c, "local": local, "remote": remote})
    else:
        search_seed, points = int(s_search.generate_state(1)[0]), list(design)
        core = (ParEGO(space, 2, seed=search_seed, n_initial_points=len(points), points_to_evaluate=points)
                if method.kind == "multi"
                else GPMinimizer(space, seed=search_seed, n_initial_points=len(points), points_to_evaluate=points))
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


def _final_losses(openbox: OpenBox, learner: Any, configs: list[dict], fit_seed: int,
                  curators: Sequence[SiteSession], lockbox: SiteSession
                  ) -> tuple[list[float], list[float | None], list[float | None], list[tuple[str, ...]]]:
    """Refit every selected configuration once; its out-bag errors at the openbox, the curators
    (mean over those that answered) and the lockbox, and the sites that withheld each.  ``None``: the
    sites withheld it (guard)."""
    pipelines = [openbox.fit(learner, c, seed=fit_seed) for c in configs]
    ob_out = [openbox.outbag_error(p) for p in pipelines]
    records = [learner.encode(c, p) for c, p in zip(configs, pipelines)]
    *cu_finals, lb_final = final_all([*curators, lockbox], records)
    sessions = [*curators, lockbox]
    withheld = [tuple(s.client.name for s, f in zip(sessions, [*cu_finals, lb_final]) if f.values[i] is None)
                for i in range(len(configs))]
    cu_out: list[float | None] = []
    for i in range(len(configs)):
        answered = [v for v in (f.values[i] for f in cu_finals) if v is not None]
        cu_out.append(float(np.mean(answered)) if answered else None)  # unweighted mean over curators
    return ob_out, cu_out, list(lb_final.values), withheld


def run_experiment(spec: ExperimentSpec, openbox: OpenBox, curators: Sequence[SiteSession], lockbox: SiteSession,
                   *, progress: Callable[[str], None] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run every method of ``spec``; returns one row per method and the experiment's timing.

    A final loss the sites withheld is ``None`` in the row's lists (counted in
    ``n_withheld_finals``) and counts as the reference point's coordinate, 1.0, in the
    hypervolume, so that model adds no volume.
    """
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
    with owner_must_act():  # a spent budget or final says what the site's owner must change
        for method, mseed in zip(methods, ss_methods.spawn(len(methods))):
            runs.append(_run_method(method, ev, learner.space, design, s.n_iter, mseed, t))
            if progress:
                progress(f"{spec.learner} ob={spec.openbox} lb={spec.lockbox} rep={spec.replication}: "
                         f"{method.name} done")
        f0 = time.perf_counter()
        finals: dict[str, dict] = {}
        for run in runs:
            for c in run.selected:
                finals.setdefault(_ckey(c), c)
        keys = list(finals)
        ob_out, cu_out, lb_out, withheld = _final_losses(openbox, learner, [finals[k] for k in keys], fit_seed,
                                                         curators, lockbox)
    t.final += time.perf_counter() - f0
    t.total = time.perf_counter() - t0

    index = {k: i for i, k in enumerate(keys)}
    worst = lambda v: REFERENCE_POINT[0] if v is None else v  # noqa: E731
    rows = []
    for run in runs:
        idx = [index[_ckey(c)] for c in run.selected]
        pts = np.array([[ob_out[i], worst(cu_out[i]), worst(lb_out[i])] for i in idx])
        rows.append({
            "dataset": s.dataset, "split": s.split, "learner": spec.learner, "method": run.method.name,
            "openbox": spec.openbox, "lockbox": spec.lockbox, "curators": list(spec.curators),
            "replication": spec.replication, "experiment": spec.key,
            "n_selected": len(idx), "selected": json.dumps(run.selected, sort_keys=True, default=float),
            "openbox_outbag": [ob_out[i] for i in idx], "curator_outbag": [cu_out[i] for i in idx],
            "lockbox_loss": [lb_out[i] for i in idx],
            "hypervolume": hypervolume(pts, REFERENCE_POINT),
            "n_evaluations": len(run.history), "n_curator_queries": run.n_remote,
            "n_refused_evaluations": run.n_refused,
            "n_withheld_finals": sum(cu_out[i] is None or lb_out[i] is None for i in idx), "seconds": run.seconds,
            "refusals": refusals_json(run.refused, (site for i in idx for site in withheld[i])),
        })
    info = {"timing": t.as_dict(), "n_curator_queries_total": ev.n_remote_evaluations, "n_final_models": len(keys)}
    return rows, info
