"""The ask/tell protocol every search core follows, and the base class that implements it.

A *core* proposes configurations of a :class:`~raytune_fed.space.SearchSpace` and learns
from their *minimised*, finite objective values.  It knows nothing of Ray; the Tune
adapters in :mod:`raytune_fed.search` and the workflows drive it through four methods:

``ask(n=1, pending=()) -> list[config]``
    Up to ``n`` configurations to evaluate next.  ``pending`` lists configurations
    handed out earlier and still being evaluated (a model-based core keeps clear of them).
    GP-BO and ParEGO always return exactly ``n``; a core whose next proposals depend on
    results still outstanding (a halving rung, an NSGA-II generation) may return fewer,
    even none, and says with :attr:`~SearchCore.is_finished` that it will never propose
    again.
``tell(configs, Y, *, constraints=None)``
    ``Y`` is an ``(n, n_objectives)`` array-like of minimised finite values, one row per
    configuration (a flat length-``n`` sequence is accepted when ``n_objectives == 1``).
    A core built with ``n_constraints = m > 0`` also takes ``constraints``, an ``(n, m)``
    array of finite values where ``<= 0`` means satisfied (pymoo's convention);
    :meth:`~SearchCore.best` and the Pareto helpers then consider feasible rows only.
``get_state() -> dict`` / ``set_state(state)``
    A versioned, JSON-safe dict (``json.dumps`` works as long as categorical choices are
    JSON values): space, settings, observations, the design queue, the random stream and
    the subclass's own state.  ``set_state`` restores all of it, so a core continues
    exactly as the saved one would; settings must match the core's (one error names
    them), and anything malformed raises :class:`ConfigError` leaving the core as it was.
``discard(configs)``
    Configurations that were asked but will never be told (the trial errored or reported
    nothing usable).  Nothing to do for a core that receives ``pending`` on every ask; a
    core that tracks its own outstanding proposals overrides it.

How a subclass plugs in: call ``super().__init__(space, seed=..., n_objectives=...,
n_initial_points=..., points_to_evaluate=...)`` and implement :meth:`SearchCore._propose`,
which only runs once the design queue is empty; it reads the observations from
``self._configs`` / ``self._Y`` / ``self._G`` and draws every random number from
``self._rng`` (saved with the state).  A class attribute ``objectives_range`` bounds the
number of objectives.  Optional hooks: :meth:`_settings` (its
settings, compared by ``set_state``), :meth:`_core_state` / :meth:`_set_core_state` (its own
JSON-safe state), :meth:`_on_tell` (react to new observations, e.g. finish a generation).
A core needing another per-observation array besides ``constraints`` (a resource level, a
cost) adds a keyword to its own ``tell``, checks it, then calls ``super().tell``; a core that
must refuse an otherwise valid observation (a job it never issued, one told twice) does so in
:meth:`_check_tell`, which runs after the shared checks and before anything is stored.  The
design queue holds ``points_to_evaluate`` (always served first, in order) and then a Latin
hypercube topping the design up to ``n_initial_points``; a core that brings its own
initial population passes ``n_initial_points=0``.

Job keys.  A core over a *finite* configuration set whose proposals carry more than a
configuration (successive halving: which configuration, which rung, how many rows) lists
those keys in :attr:`SearchCore.job_keys`.  ``ask`` returns them with every proposal,
``tell``, ``discard`` and ``pending`` take them back, :attr:`~SearchCore.configs` keeps them,
and only the other keys are checked against the space (:meth:`SearchCore.normalize`).
A space parameter may not carry a job key's name.

Randomness: ``seed`` is required (an int, a SeedSequence or a Generator through
:mod:`raytune_fed.random`); the same seed and the same tells give the same proposals in
any process.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from raytune_fed._checks import check_int
from raytune_fed.errors import ConfigError
from raytune_fed.metrics import pareto_front, pareto_mask
from raytune_fed.random import Seed, as_generator, generator_from_state, generator_state
from raytune_fed.space import SearchSpace

STATE_FORMAT = "raytune_fed.core"
STATE_VERSION = 2  # version 1 was the per-core format before the shared protocol

Config = dict[str, Any]


class SearchCore(ABC):
    """Design queue, observations, random stream, results and state shared by every core.

    Parameters
    ----------
    space : the search space (configurations are plain dicts keyed by its names).
    seed : root seed (int >= 0, SeedSequence or Generator); ``None`` is not a seed.
    n_objectives : number of minimised objectives (>= 1).
    n_constraints : number of constraint values told with each observation (>= 0).
    n_initial_points : size of the initial design (``points_to_evaluate`` count towards it).
    points_to_evaluate : configurations proposed first, always, in order.
    """

    #: smallest and largest number of objectives the core accepts (``None``: no upper limit)
    objectives_range: ClassVar[tuple[int, int | None]] = (1, None)
    #: keys the core adds to its proposals besides the space's parameters (see the module notes)
    job_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self, space: SearchSpace, *, seed: Seed, n_objectives: int = 1, n_constraints: int = 0,
                 n_initial_points: int = 0, points_to_evaluate: Sequence[Mapping[str, Any]] = ()) -> None:
        if not isinstance(space, SearchSpace):
            raise ConfigError(f"space must be a SearchSpace, got {type(space).__name__}")
        low, high = self.objectives_range
        clash = sorted(set(space.names) & set(self.job_keys))
        if clash:
            raise ConfigError(f"the space of a {type(self).__name__} may not use its job keys {clash}")
        self.space = space
        self.n_objectives = check_int("n_objectives", n_objectives, low, high)
        self.n_constraints = check_int("n_constraints", n_constraints, 0)
        self.n_initial_points = check_int("n_initial_points", n_initial_points, 0)
        if isinstance(points_to_evaluate, Mapping) or not isinstance(points_to_evaluate, Sequence):
            raise ConfigError(f"points_to_evaluate must be a list of configurations, got {points_to_evaluate!r:.200}")
        forced = self.normalize(points_to_evaluate, "a point to evaluate")
        self._rng = as_generator(seed)
        n_design = max(0, self.n_initial_points - len(forced))
        self._queue: list[Config] = forced + (space.latin_hypercube(n_design, self._rng) if n_design else [])
        self._n_forced = len(forced)
        self._configs: list[Config] = []
        self._Y = np.empty((0, self.n_objectives))
        self._G = np.empty((0, self.n_constraints))

    # ------------------------------------------------------------------ the protocol
    def ask(self, n: int = 1, pending: Sequence[Mapping[str, Any]] = ()) -> list[Config]:
        """Up to ``n`` configurations to evaluate next, given those still being evaluated."""
        n = check_int("n", n, 1)
        if isinstance(pending, Mapping) or not isinstance(pending, Sequence):
            raise ConfigError(f"pending must be a list of configurations, got {pending!r:.200}")
        pending = self.normalize(pending, "a pending configuration")
        out: list[Config] = []
        while len(out) < n:
            design = self._pop_design()
            if design is None:
                break
            out.append(design)
        if len(out) < n and not self.is_finished:
            proposed = self._propose(n - len(out), pending + out)
            out.extend(self.normalize(proposed, f"a configuration proposed by {type(self).__name__}"))
        return out

    def tell(self, configs: Sequence[Mapping[str, Any]], Y: Any, *, constraints: Any = None) -> None:
        """Record minimised objective rows ``Y`` (and constraint rows) of ``configs``."""
        if isinstance(configs, Mapping) or not isinstance(configs, Sequence):
            raise ConfigError(f"configs must be a list of configurations, got {configs!r:.200}")
        configs = self.normalize(configs, "a told configuration")
        Y = _rows("Y", Y, len(configs), self.n_objectives, flat_ok=self.n_objectives == 1)
        if self.n_constraints == 0:
            if constraints is not None:
                raise ConfigError(f"{type(self).__name__} was built with n_constraints=0 but got constraints="
                                  f"{constraints!r:.200}")
            G = np.empty((len(configs), 0))
        elif constraints is None:
            raise ConfigError(f"{type(self).__name__} needs constraints with {self.n_constraints} values per "
                              "configuration, got None")
        else:
            G = _rows("constraints", constraints, len(configs), self.n_constraints,
                      flat_ok=self.n_constraints == 1)
        self._check_tell(configs, Y, G)
        self._configs.extend(configs)
        self._Y = np.vstack([self._Y, Y])
        self._G = np.vstack([self._G, G])
        self._on_tell(configs, Y, G)

    def discard(self, configs: Sequence[Mapping[str, Any]]) -> None:
        """Configurations asked but never to be told; checked, otherwise nothing to do here."""
        self.normalize(configs, "a discarded configuration")

    def normalize(self, configs: Sequence[Mapping[str, Any]], what: str = "configuration") -> list[Config]:
        """:meth:`SearchSpace.normalize` of the space's keys; :attr:`job_keys` pass through unchecked, last."""
        if not self.job_keys:
            return self.space.normalize(configs, what)
        if isinstance(configs, Mapping) or not isinstance(configs, Sequence):
            raise ConfigError(f"{what}s must be given as a list, got {configs!r:.200}")
        for c in configs:
            if not isinstance(c, Mapping):
                raise ConfigError(f"{what} must be a mapping of parameter values, got {c!r:.200}")
        plain = self.space.normalize([{k: v for k, v in c.items() if k not in self.job_keys} for c in configs], what)
        return [{**p, **{k: c[k] for k in self.job_keys if k in c}} for p, c in zip(plain, configs)]

    @property
    def is_finished(self) -> bool:
        """True once the core will never propose anything again (never, for BO cores)."""
        return False

    # ------------------------------------------------------------------ results
    @property
    def n_told(self) -> int:
        """How many observations the core has been told."""
        return len(self._configs)

    @property
    def configs(self) -> list[Config]:
        """Told configurations, in telling order."""
        return [dict(c) for c in self._configs]

    @property
    def values(self) -> np.ndarray:
        """Told objective rows, ``(n_told, n_objectives)``, minimised."""
        return self._Y.copy()

    @property
    def constraint_values(self) -> np.ndarray:
        """Told constraint rows, ``(n_told, n_constraints)`` (``<= 0`` is satisfied)."""
        return self._G.copy()

    @property
    def feasible(self) -> np.ndarray:
        """Which told rows satisfy every constraint (all of them without constraints)."""
        return np.all(self._G <= 0.0, axis=1)

    def best(self) -> tuple[Config, float]:
        """The feasible told configuration with the lowest value (first one on ties); one objective only."""
        if self.n_objectives != 1:
            raise ConfigError(f"best() needs a single objective, this core has {self.n_objectives}; "
                              "use pareto_front() / pareto_configs()")
        idx = np.flatnonzero(self.feasible)
        if len(idx) == 0:
            raise ConfigError("no feasible result told yet, so there is no best configuration")
        i = int(idx[np.argmin(self._Y[idx, 0])])
        return dict(self._configs[i]), float(self._Y[i, 0])

    def pareto_front(self) -> np.ndarray:
        """The distinct non-dominated feasible objective rows, in lexicographic order."""
        Y = self._Y[self.feasible]
        return pareto_front(Y) if len(Y) else np.empty((0, self.n_objectives))

    def pareto_configs(self) -> list[Config]:
        """One configuration per row of :meth:`pareto_front` (the first told with that row)."""
        idx = np.flatnonzero(self.feasible)
        if len(idx) == 0:
            return []
        Y = self._Y[idx]
        keep = idx[pareto_mask(Y)]
        first: dict[tuple[float, ...], int] = {}
        for i in keep:
            first.setdefault(tuple(self._Y[i]), int(i))
        return [dict(self._configs[first[tuple(row)]]) for row in self.pareto_front()]

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """Versioned, JSON-safe state: everything needed to continue exactly (see the module doc)."""
        return {"format": STATE_FORMAT, "version": STATE_VERSION, "kind": type(self).__name__,
                "space": self.space.to_dict(), "n_objectives": self.n_objectives,
                "n_constraints": self.n_constraints, "settings": self._settings(),
                "configs": [dict(c) for c in self._configs], "values": self._Y.tolist(),
                "constraints": self._G.tolist(), "queue": [dict(c) for c in self._queue],
                "n_forced": self._n_forced, "rng": generator_state(self._rng), "core": self._core_state()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`get_state`'s output; raises :class:`ConfigError` (core unchanged) if it does not fit."""
        name = type(self).__name__
        if not isinstance(state, Mapping):
            raise ConfigError(f"a {name} state must be a dict, got {type(state).__name__}")
        if state.get("format") != STATE_FORMAT or state.get("kind") != name:
            raise ConfigError(f"not a {name} state: format={state.get('format')!r}, kind={state.get('kind')!r}")
        if state.get("version") != STATE_VERSION:
            raise ConfigError(f"unsupported {name} state version {state.get('version')!r}, expected {STATE_VERSION}")
        try:
            space = SearchSpace.from_dict(state["space"])
            shape = (int(state["n_objectives"]), int(state["n_constraints"]))
            settings = state["settings"]
            configs, queue = list(state["configs"]), list(state["queue"])
            n_forced, rng = int(state["n_forced"]), generator_from_state(state["rng"])
            Y = np.asarray(state["values"], dtype=float).reshape(len(configs), shape[0])
            G = np.asarray(state["constraints"], dtype=float).reshape(len(configs), shape[1])
            core = state["core"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"malformed {name} state ({type(exc).__name__}: {exc})") from None
        if space != self.space:
            raise ConfigError(f"state was saved for parameters {space.names}, this {name} searches "
                              f"{self.space.names} (or their ranges differ)")
        if shape != (self.n_objectives, self.n_constraints):
            raise ConfigError(f"state has (n_objectives, n_constraints)={shape}, this {name} has "
                              f"{(self.n_objectives, self.n_constraints)}")
        _check_same_settings(name, settings, self._settings())
        if not (np.isfinite(Y).all() and np.isfinite(G).all()) or not 0 <= n_forced <= len(queue):
            raise ConfigError(f"malformed {name} state: non-finite values or a design queue of {len(queue)} "
                              f"with n_forced={n_forced}")
        configs = self.normalize(configs, "a configuration in the state")
        queue = self.normalize(queue, "a design point in the state")
        before = (self._configs, self._Y, self._G, self._queue, self._n_forced, self._rng)
        self._configs, self._Y, self._G, self._queue, self._n_forced, self._rng = configs, Y, G, queue, n_forced, rng
        try:
            self._set_core_state(core)
        except (ConfigError, KeyError, TypeError, ValueError) as exc:
            self._configs, self._Y, self._G, self._queue, self._n_forced, self._rng = before
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"malformed {name} state ({type(exc).__name__}: {exc})") from None

    # ------------------------------------------------------------------ for subclasses
    @abstractmethod
    def _propose(self, n: int, pending: list[Config]) -> list[Config]:
        """At most ``n`` new configurations; ``pending`` holds everything still out (checked)."""

    def _settings(self) -> dict[str, Any]:
        """JSON-safe settings that must match for :meth:`set_state` (extend in subclasses)."""
        return {"n_initial_points": self.n_initial_points}

    def _core_state(self) -> Any:
        """The subclass's own JSON-safe state (nothing by default)."""
        return {}

    def _set_core_state(self, state: Any) -> None:
        """Restore :meth:`_core_state`'s output; validate everything before assigning anything."""

    def _check_tell(self, configs: list[Config], Y: np.ndarray, G: np.ndarray) -> None:
        """Refuse checked observations the core cannot take (raise ConfigError); runs before storing."""

    def _on_tell(self, configs: list[Config], Y: np.ndarray, G: np.ndarray) -> None:
        """Called after checked observations were stored (nothing by default)."""

    def _pop_design(self) -> Config | None:
        """Next design point: ``points_to_evaluate`` always, then the LHS until enough results."""
        if self._n_forced:
            self._n_forced -= 1
            return self._queue.pop(0)
        if self._queue and self.n_told < self.n_initial_points:
            return self._queue.pop(0)
        self._queue.clear()
        return None


def _rows(name: str, values: Any, n: int, k: int, *, flat_ok: bool) -> np.ndarray:
    """``values`` as a finite ``(n, k)`` float array, or a one-line ConfigError."""
    if isinstance(values, np.ndarray) and values.dtype == bool:
        raise ConfigError(f"{name} must be numbers, got booleans")
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be numbers of shape ({n}, {k}), got {values!r:.200}") from None
    if flat_ok and arr.ndim == 1 and arr.shape[0] == n:
        arr = arr.reshape(n, 1)
    if arr.shape != (n, k):
        raise ConfigError(f"{name} must have shape ({n}, {k}) (one row per configuration), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        row = int(np.flatnonzero(~np.isfinite(arr).all(axis=1))[0])
        raise ConfigError(f"{name} must be finite, got {arr[row].tolist()} in row {row}")
    return arr


def _check_same_settings(name: str, saved: Any, mine: Mapping[str, Any]) -> None:
    if not isinstance(saved, Mapping):
        raise ConfigError(f"malformed {name} state: settings must be a dict, got {saved!r:.200}")
    mine = json.loads(json.dumps(mine))  # compare as JSON: tuples and lists are the same
    differ = sorted(k for k in set(saved) | set(mine) if saved.get(k) != mine.get(k))
    if differ:
        raise ConfigError(f"state was saved by a {name} with other settings: "
                          + ", ".join(f"{k}={saved.get(k)!r} (this one: {mine.get(k)!r})" for k in differ))
