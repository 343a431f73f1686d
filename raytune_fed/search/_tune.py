"""Ray Tune adapters: ``GPSearch`` and ``ParEGOSearch`` around the ask/tell cores.

The only module of :mod:`raytune_fed.search` that imports Ray.  An adapter maps trial ids
to core configurations, Tune result dicts to (minimised) objective values, and the core's
explicit state to Tune's searcher checkpoints.  ``mode="max"`` is flipped here, once.

Search spaces come either from the ``space`` argument (a :class:`SearchSpace` or a dict of
Tune domains) or from the Tuner's ``param_space`` via ``set_search_properties``.  Tune
domains translate as follows:

* ``tune.uniform`` / ``tune.loguniform`` -> :class:`Float` (``log=True`` for the latter);
* ``tune.randint`` / ``tune.lograndint`` -> :class:`Int` on ``[lower, upper - 1]`` (Tune's
  upper bound is exclusive);
* ``tune.quniform``, ``tune.qloguniform``, ``tune.qrandint``, ``tune.qlograndint`` -> an
  :class:`Int` over the grid index ``i`` with ``value = i * q`` (multiples of ``q`` in
  ``[lower, upper]``, Tune's inclusive bound), so the core searches exactly the quantised
  values;
* ``tune.choice`` -> :class:`Categorical`;
* constants pass through unchanged into every suggested configuration;
* nested dicts are flattened to names ``"outer/inner"`` and rebuilt in suggestions.

``tune.grid_search``, ``tune.sample_from``, ``tune.randn`` and domains inside lists raise
:class:`ConfigError`.  A trial that errors, reports no value for a metric, or reports a
non-finite one is dropped (logged at WARNING) and the core is not told.
"""

from __future__ import annotations

import copy
import logging
import math
import pickle
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from ray.tune.search import Searcher
from ray.tune.search.sample import Categorical as TuneCategorical
from ray.tune.search.sample import Domain, Integer, LogUniform, Quantized, Uniform
from ray.tune.search.sample import Float as TuneFloat
from ray.tune.search.variant_generator import parse_spec_vars

from raytune_fed.errors import ConfigError
from raytune_fed.algorithms.gp_bo import GPMinimizer
from raytune_fed.algorithms.parego import ParEGO
from raytune_fed.space import Categorical, Float, Int, SearchSpace

logger = logging.getLogger(__name__)
_MODES = ("min", "max")
_ADAPTER_STATE_VERSION = 1


# ------------------------------------------------------------------ space conversion

@dataclass(frozen=True)
class TuneSpace:
    """A :class:`SearchSpace` plus what it takes to go to and from Tune's nested configs."""

    space: SearchSpace
    paths: dict[str, tuple] = field(default_factory=dict)    # parameter -> nested keys
    quanta: dict[str, float] = field(default_factory=dict)   # parameter -> q (grid index params)
    template: dict = field(default_factory=dict)             # constants, domains replaced by None

    @classmethod
    def build(cls, space: Mapping[str, Any] | SearchSpace) -> TuneSpace:
        if isinstance(space, SearchSpace):
            return cls(space, {n: (n,) for n in space.names})
        if not isinstance(space, Mapping):
            raise ConfigError(f"space must be a SearchSpace or a dict of Tune domains, got {type(space).__name__}")
        _, domain_vars, grid_vars = parse_spec_vars(dict(space))
        if grid_vars:
            raise ConfigError(f"grid search is not supported by model-based search: {_name(grid_vars[0][0])!r}")
        if not domain_vars:
            raise ConfigError(f"space has no Tune domains to search over: {dict(space)!r}")
        template = copy.deepcopy(dict(space))
        params, paths, quanta = [], {}, {}
        for path, domain in domain_vars:
            name = _name(path)
            _set_path(template, path, None, name)
            param, q = _param(name, domain)
            params.append(param)
            paths[name] = tuple(path)
            if q is not None:
                quanta[name] = q
        return cls(SearchSpace(tuple(params)), paths, quanta, template)

    def to_tune(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The nested Tune configuration for a core configuration (constants included)."""
        out = copy.deepcopy(self.template)
        for name, path in self.paths.items():
            value = config[name]
            if name in self.quanta:
                q = self.quanta[name]
                value = value * q if isinstance(q, int) else float(round(value * q, 12))
            _set_path(out, path, value, name)
        return out

    def from_tune(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The core configuration for a (nested or ``"a/b"``-flat) Tune configuration."""
        out = {}
        for name, path in self.paths.items():
            value = params[name] if name in params else _get_path(params, path, name)
            if name in self.quanta:
                value = int(round(value / self.quanta[name]))
            out[name] = value
        self.space.validate(out)
        return out

    def to_state(self) -> dict[str, Any]:
        return {"params": [_param_state(p) for p in self.space.params], "paths": dict(self.paths),
                "quanta": dict(self.quanta), "template": copy.deepcopy(self.template)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> TuneSpace:
        kinds = {"Float": Float, "Int": Int, "Categorical": Categorical}
        params = []
        for p in state["params"]:
            p = dict(p)
            kind = kinds[p.pop("type")]
            if kind is Categorical:
                p["choices"] = tuple(p["choices"])  # a JSON round trip turns tuples into lists
            params.append(kind(**p))
        return cls(SearchSpace(tuple(params)), {k: tuple(v) for k, v in state["paths"].items()},
                   dict(state["quanta"]), copy.deepcopy(state["template"]))


def _name(path: Sequence) -> str:
    return "/".join(str(k) for k in path)


def _set_path(tree: dict, path: Sequence, value: Any, name: str) -> None:
    node = tree
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            raise ConfigError(f"parameter {name!r}: only nested dicts are supported, not domains inside lists")
    if not isinstance(node, dict):
        raise ConfigError(f"parameter {name!r}: only nested dicts are supported, not domains inside lists")
    node[path[-1]] = value


def _get_path(tree: Mapping, path: Sequence, name: str) -> Any:
    node: Any = tree
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            raise ConfigError(f"configuration is missing parameter {name!r}: {dict(tree)!r}")
        node = node[key]
    return node


def _param(name: str, domain: Domain) -> tuple[Float | Int | Categorical, Any]:
    """The core parameter for a Tune domain, and the quantum ``q`` if it is a grid index."""
    sampler = domain.get_sampler()
    q = None
    if isinstance(sampler, Quantized):
        q, sampler = sampler.q, sampler.get_sampler()
    if isinstance(domain, TuneCategorical) and isinstance(sampler, Uniform) and q is None:
        return Categorical(name, tuple(domain.categories)), None
    if isinstance(domain, (TuneFloat, Integer)) and isinstance(sampler, (Uniform, LogUniform)):
        log = isinstance(sampler, LogUniform)
        if q is None:
            if isinstance(domain, TuneFloat):
                return Float(name, float(domain.lower), float(domain.upper), log), None
            return Int(name, int(domain.lower), int(domain.upper) - 1, log), None
        if isinstance(domain, Integer) and q == 1:  # Tune: exclusive upper bound when q == 1
            return Int(name, int(domain.lower), int(domain.upper) - 1, log), None
        q = int(q) if isinstance(domain, Integer) else float(q)
        lo, hi = math.ceil(domain.lower / q - 1e-9), math.floor(domain.upper / q + 1e-9)
        return Int(name, lo, hi, log), q
    raise ConfigError(f"parameter {name!r}: unsupported Tune domain {type(domain).__name__} with sampler "
                      f"{type(sampler).__name__}; use uniform, loguniform, (log)randint, q-variants or choice")


def _param_state(p: Float | Int | Categorical) -> dict[str, Any]:
    return {"type": type(p).__name__, **asdict(p)}


def _check_mode(mode: Any) -> str:
    if mode not in _MODES:
        raise ConfigError(f"mode must be 'min' or 'max', got {mode!r}")
    return mode


def _check_metric(metric: Any) -> str:
    if not isinstance(metric, str) or not metric:
        raise ConfigError(f"metric must be a non-empty string, got {metric!r}")
    return metric


# ------------------------------------------------------------------ shared adapter

class _CoreSearcher(Searcher):
    """Trial bookkeeping, space handling and checkpointing shared by the two adapters.

    Subclasses set ``_core_cls`` and define ``_new_core(space, points)``, ``_next(pending)``,
    ``_objective(result)`` (minimised value(s) or ``None`` to drop), ``_to_minimised(value)``
    and ``_merge_tune_metric(metric, mode)``.
    """

    _core_cls: type

    def __init__(self, space: Mapping[str, Any] | SearchSpace | None,
                 points_to_evaluate: Sequence[Mapping[str, Any]] | None, options: dict[str, Any]) -> None:
        super().__init__(metric=None, mode=None)  # checked by the subclass, set there
        self._options = self._core_cls.validate_options(**options)
        self._tspace = None if space is None else TuneSpace.build(space)
        self._points = [dict(p) for p in (points_to_evaluate or ())]
        self._core = None
        self._live: dict[str, dict[str, Any]] = {}
        self._max_concurrent: int | None = None

    # -- Tune's Searcher API
    def set_search_properties(self, metric: Any, mode: Any, config: dict, **spec: Any) -> bool:
        self._merge_tune_metric(metric, mode)
        if config and parse_spec_vars(config)[1:] != ([], []):
            converted = TuneSpace.build(config)
            if self._tspace is None:
                self._tspace = converted
            elif converted.space != self._tspace.space:
                return False  # Tune then reports that param_space has unresolved values
        return True

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Limit live trials here (so Tune's ConcurrencyLimiter does not wrap silently)."""
        if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int) or max_concurrent < 1:
            raise ConfigError(f"max_concurrent must be an integer >= 1, got {max_concurrent!r}")
        self._max_concurrent = max_concurrent
        return True

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        self.core  # built on first use; raises if the space or metrics are missing
        if self._max_concurrent is not None and len(self._live) >= self._max_concurrent:
            return None
        config = self._next(list(self._live.values()))
        self._live[trial_id] = config
        return self._tspace.to_tune(config)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        config = self._live.pop(trial_id, None)
        if config is None:
            return
        if error or result is None:
            logger.warning("trial %s errored or returned no result; the searcher ignores it", trial_id)
            return
        value = self._objective(result)
        if value is not None:
            self._core.tell(config, value)

    def add_evaluated_point(self, parameters: Mapping[str, Any], value: Any, error: bool = False,
                            pruned: bool = False, intermediate_values: Sequence[float] | None = None) -> None:
        """Tell the core about a point evaluated elsewhere (errored or pruned points are ignored)."""
        if error or pruned:
            return
        self.core  # built on first use; raises if the space or metrics are missing
        self._core.tell(self._tspace.from_tune(parameters), self._to_minimised(value))

    @property
    def core(self) -> Any:
        """The ask/tell core (built once the space and metrics are known)."""
        if self._core is None:
            if self._tspace is None:
                raise ConfigError(f"{type(self).__name__} has no search space: pass space=... or "
                                  "param_space=... to the Tuner")
            if self._metric is None or self._mode is None:
                raise ConfigError(f"{type(self).__name__} needs metric and mode (got metric={self._metric!r}, "
                                  f"mode={self._mode!r})")
            points = [self._tspace.from_tune(p) for p in self._points]
            self._core = self._new_core(self._tspace.space, points)
        return self._core

    # -- state
    def get_state(self) -> dict[str, Any]:
        """Explicit, versioned state: settings, space, live trials and the core's own state."""
        return {"version": _ADAPTER_STATE_VERSION, "kind": type(self).__name__, "metric": self._metric,
                "mode": self._mode, "options": dict(self._options),
                "space": None if self._tspace is None else self._tspace.to_state(),
                "points_to_evaluate": copy.deepcopy(self._points), "live": copy.deepcopy(self._live),
                "max_concurrent": self._max_concurrent,
                "core": None if self._core is None else self._core.get_state()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        if state.get("kind") != type(self).__name__ or state.get("version") != _ADAPTER_STATE_VERSION:
            raise ConfigError(f"not a version-{_ADAPTER_STATE_VERSION} {type(self).__name__} state: "
                              f"kind={state.get('kind')!r}, version={state.get('version')!r}")
        self._metric, self._mode = state["metric"], state["mode"]
        self._options = dict(state["options"])
        self._tspace = None if state["space"] is None else TuneSpace.from_state(state["space"])
        self._points = copy.deepcopy(state["points_to_evaluate"])
        self._live = copy.deepcopy(state["live"])
        self._max_concurrent = state["max_concurrent"]
        self._core = None
        if state["core"] is not None:
            self.core.set_state(state["core"])

    def save(self, checkpoint_path: str) -> None:
        """Pickle :meth:`get_state` (an explicit dict, not the object) to ``checkpoint_path``."""
        with open(checkpoint_path, "wb") as fh:
            pickle.dump(self.get_state(), fh)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as fh:
            self.set_state(pickle.load(fh))


def _finite(metric: str, result: Mapping[str, Any]) -> float | None:
    value = result.get(metric)
    try:
        value = float(value)
    except (TypeError, ValueError):
        value = None
    if value is None or not math.isfinite(value):
        logger.warning("result has no finite value for metric %r (%r); the searcher ignores it",
                       metric, result.get(metric))
        return None
    return value


# ------------------------------------------------------------------ the adapters

class GPSearch(_CoreSearcher):
    """Tune searcher for single-objective GP + expected-improvement search (:class:`GPMinimizer`).

    Concurrent trials enter the GP as constant liars, so parallel suggestions differ.
    """

    _core_cls = GPMinimizer

    def __init__(self, space: Mapping[str, Any] | SearchSpace | None = None, metric: str | None = None,
                 mode: str | None = None, points_to_evaluate: Sequence[Mapping[str, Any]] | None = None,
                 n_initial_points: int = 20, seed: int | None = None, noise: bool = True, *,
                 xi: float = 0.0, n_restarts: int = 2) -> None:
        super().__init__(space, points_to_evaluate, dict(n_initial_points=n_initial_points, seed=seed,
                                                         noise=noise, xi=xi, n_restarts=n_restarts))
        self._metric = None if metric is None else _check_metric(metric)
        self._mode = None if mode is None else _check_mode(mode)

    def _merge_tune_metric(self, metric: Any, mode: Any) -> None:
        for attr, given, check in (("_metric", metric, _check_metric), ("_mode", mode, _check_mode)):
            if given is None:
                continue
            given = check(given)
            if getattr(self, attr) is None:
                setattr(self, attr, given)
            elif getattr(self, attr) != given:
                raise ConfigError(f"GPSearch has {attr[1:]}={getattr(self, attr)!r} but the Tuner passed {given!r}")

    def _new_core(self, space: SearchSpace, points: list[dict[str, Any]]) -> GPMinimizer:
        return GPMinimizer(space, points_to_evaluate=points, **self._options)

    def _next(self, pending: list[dict[str, Any]]) -> dict[str, Any]:
        return self._core.ask(pending)

    def _objective(self, result: Mapping[str, Any]) -> float | None:
        return self._to_minimised(_finite(self._metric, result))

    def _to_minimised(self, value: Any) -> float | None:
        if value is None:
            return None
        return -float(value) if self._mode == "max" else float(value)


class ParEGOSearch(_CoreSearcher):
    """Tune searcher for multi-objective ParEGO (:class:`ParEGO`).

    Give the metrics here (``metric=["a", "b"], mode=["min", "max"]``), not to
    ``TuneConfig``.  When it has no buffered proposal, :meth:`suggest` asks the core for a
    batch of ``live trials + 1`` points (capped by ``max_concurrent``) from spread weight
    vectors and buffers the extras.
    """

    _core_cls = ParEGO

    def __init__(self, space: Mapping[str, Any] | SearchSpace | None = None,
                 metric: Sequence[str] | None = None, mode: Sequence[str] | None = None,
                 points_to_evaluate: Sequence[Mapping[str, Any]] | None = None, n_initial_points: int = 20,
                 seed: int | None = None, noise: bool = True, *, rho: float = 0.05,
                 lattice_size: int | None = None, sample_more_weights: int = 5, xi: float = 0.0,
                 n_restarts: int = 2) -> None:
        if metric is None or mode is None:
            raise ConfigError(f"ParEGOSearch needs metric=[...] and mode=[...], got metric={metric!r}, mode={mode!r}")
        if isinstance(metric, str) or not isinstance(metric, Sequence) or len(metric) < 2:
            raise ConfigError(f"metric must be a list of at least 2 metric names, got {metric!r}")
        if isinstance(mode, str) or not isinstance(mode, Sequence) or len(mode) != len(metric):
            raise ConfigError(f"mode must be a list with one 'min'/'max' per metric ({len(metric)}), got {mode!r}")
        metric, mode = [_check_metric(m) for m in metric], [_check_mode(m) for m in mode]
        if len(set(metric)) != len(metric):
            raise ConfigError(f"metric names must be distinct, got {metric!r}")
        super().__init__(space, points_to_evaluate, dict(
            n_objectives=len(metric), n_initial_points=n_initial_points, seed=seed, noise=noise, rho=rho,
            lattice_size=lattice_size, sample_more_weights=sample_more_weights, xi=xi, n_restarts=n_restarts))
        self._metric, self._mode = metric, mode
        self._buffer: list[dict[str, Any]] = []

    def _merge_tune_metric(self, metric: Any, mode: Any) -> None:
        if isinstance(metric, (list, tuple)) or isinstance(mode, (list, tuple)):
            raise ConfigError("give the metric/mode lists to ParEGOSearch(metric=[...], mode=[...]), "
                              f"not to TuneConfig (got metric={metric!r}, mode={mode!r})")
        if metric is None and mode is None:
            return
        if metric not in self._metric:
            raise ConfigError(f"TuneConfig metric {metric!r} is not one of ParEGOSearch's metrics {self._metric}")
        if mode is not None and mode != self._mode[self._metric.index(metric)]:
            raise ConfigError(f"TuneConfig mode {mode!r} differs from ParEGOSearch's mode for {metric!r}")

    def _new_core(self, space: SearchSpace, points: list[dict[str, Any]]) -> ParEGO:
        opts = dict(self._options)
        return ParEGO(space, opts.pop("n_objectives"), points_to_evaluate=points, **opts)

    def _next(self, pending: list[dict[str, Any]]) -> dict[str, Any]:
        if not self._buffer:
            n = len(pending) + 1
            if self._max_concurrent is not None:
                n = min(n, self._max_concurrent)
            self._buffer = self._core.ask(max(1, n), pending=pending)
        return self._buffer.pop(0)

    def _objective(self, result: Mapping[str, Any]) -> list[float] | None:
        values = [_finite(m, result) for m in self._metric]
        return None if any(v is None for v in values) else self._to_minimised(values)

    def _to_minimised(self, values: Any) -> list[float]:
        try:
            values = [float(values[m]) for m in self._metric] if isinstance(values, Mapping) \
                else [float(v) for v in values]
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"expected values for metrics {self._metric}, got {values!r}") from None
        if len(values) != len(self._metric):
            raise ConfigError(f"expected {len(self._metric)} values for metrics {self._metric}, got {values!r}")
        return [-v if m == "max" else v for v, m in zip(values, self._mode)]

    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "buffer": copy.deepcopy(self._buffer)}

    def set_state(self, state: Mapping[str, Any]) -> None:
        super().set_state(state)
        self._buffer = copy.deepcopy(state.get("buffer", []))
