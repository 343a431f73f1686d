"""The one Tune adapter over the ask/tell protocol: :class:`CoreSearcher`.

A Ray Tune ``Searcher`` that drives a :class:`~raytune_fed.algorithms.SearchCore`:

* trial ids map to the configurations the core asked for; a finished trial's result dict
  becomes one objective row through :class:`~raytune_fed.types.Objective` (``mode="max"``
  flipped here, once: the core always minimises);
* with ``max_concurrent`` known (``set_max_concurrency``, which Tune's
  ``max_concurrent_trials`` calls), one ``ask`` fills every free slot at once and the
  extras are buffered; live and buffered trials are passed as ``pending``;
* a trial that errors, reports no value for a metric or a non-finite one is dropped with a
  WARNING and the core is told to ``discard`` it;
* a core built with constraints is told them too: a subclass reads them from the result
  dict in :meth:`CoreSearcher._constraint_row` (a missing one drops the trial likewise);
* ``add_evaluated_point(s)`` tells the core about points evaluated elsewhere;
* every trial id the searcher answered is kept in :attr:`CoreSearcher.proposals` with the
  index of its proposal (0, 1, ... in the order the core proposed them) and whatever the
  subclass's :meth:`CoreSearcher._proposal_tag` said when the core proposed it (NSGA2Search:
  the generation), so a workflow reads which trial came from where from the searcher's own
  record, not from when trials happened to finish;
* ``save``/``restore`` (Tune's searcher checkpoints) write and read JSON: the adapter's
  own versioned state with the core's ``get_state()`` inside, never a pickled object.

A subclass only builds its core: it passes its own options (a JSON-safe dict) to
``__init__`` and implements :meth:`CoreSearcher._build_core`.  The core is built once the
search space and the metrics are known (from the constructor or from the Tuner's
``param_space`` and ``TuneConfig(metric=..., mode=...)``).
"""

from __future__ import annotations

import copy
import json
import logging
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ray.tune.search import Searcher

from raytune_fed._checks import check_int
from raytune_fed.algorithms import SearchCore
from raytune_fed.errors import ConfigError
from raytune_fed.search._tune_space import TuneSpace
from raytune_fed.space import SearchSpace
from raytune_fed.types import Objective, objectives

logger = logging.getLogger(__name__)

STATE_FORMAT = "raytune_fed.searcher"
STATE_VERSION = 3  # 2 had no proposal record; 1 was the pickled per-searcher dict before the shared adapter


class CoreSearcher(Searcher):
    """Tune searcher around an ask/tell core (see the module docstring).

    Parameters
    ----------
    space : a :class:`SearchSpace` or a dict of Tune domains; ``None`` takes the Tuner's
        ``param_space``.
    metric, mode : a metric name and ``"min"``/``"max"``, or equal-length lists of them;
        ``None`` takes ``TuneConfig``'s.
    points_to_evaluate : Tune configurations evaluated first, in order.
    seed : root seed of the core (an int >= 0; required).
    options : the subclass's JSON-safe core options (saved in checkpoints).
    """

    #: smallest and largest number of metrics the core accepts (``None``: no upper limit)
    objectives_range: ClassVar[tuple[int, int | None]] = (1, None)

    def __init__(self, space: Mapping[str, Any] | SearchSpace | None = None,
                 metric: str | Sequence[str] | None = None, mode: str | Sequence[str] | None = None,
                 points_to_evaluate: Sequence[Mapping[str, Any]] | None = None, *, seed: int,
                 options: Mapping[str, Any]) -> None:
        super().__init__(metric=None, mode=None)
        self._seed = check_int("seed", seed, 0)
        self._objectives: list[Objective] | None = None
        if metric is not None or mode is not None:
            self._set_objectives(objectives(metric, mode))
        self._tspace = None if space is None else TuneSpace.build(space)
        if points_to_evaluate is not None and (isinstance(points_to_evaluate, Mapping)
                                               or not isinstance(points_to_evaluate, Sequence)):
            raise ConfigError(f"points_to_evaluate must be a list of configurations, got {points_to_evaluate!r:.200}")
        self._points = [dict(p) for p in (points_to_evaluate or ())]
        self._options = json.loads(json.dumps(dict(options)))
        self._core: SearchCore | None = None
        self._live: dict[str, dict[str, Any]] = {}
        self._buffer: list[dict[str, Any]] = []
        self._buffer_tag: dict[str, Any] = {}  # what _proposal_tag said when the buffer was filled
        self._proposals: dict[str, dict[str, Any]] = {}
        self._max_concurrent: int | None = None

    # ------------------------------------------------------------------ what a subclass provides
    @abstractmethod
    def _build_core(self, space: SearchSpace, n_objectives: int, points: list[dict[str, Any]],
                    seed: int) -> SearchCore:
        """A fresh core for ``space`` from ``self._options`` (``points``: the design's first points)."""

    def _proposal_tag(self) -> dict[str, Any]:
        """JSON-safe facts about the proposals ``core.ask`` just returned, kept per trial in :attr:`proposals`."""
        return {}

    # ------------------------------------------------------------------ Tune's Searcher API
    def set_search_properties(self, metric: Any, mode: Any, config: dict, **spec: Any) -> bool:
        """Take the Tuner's metric/mode and ``param_space`` where the constructor gave none."""
        if metric is not None or mode is not None:
            if isinstance(metric, (list, tuple)) or isinstance(mode, (list, tuple)):
                raise ConfigError(f"give metric/mode lists to {type(self).__name__}(metric=[...], mode=[...]), "
                                  f"not to TuneConfig (got metric={metric!r}, mode={mode!r})")
            if self._objectives is None:
                self._set_objectives(objectives(metric, mode))
            else:
                self._check_tune_metric(metric, mode)
        if config and TuneSpace.has_domains(config):
            converted = TuneSpace.build(config)
            if self._tspace is None:
                self._tspace = converted
            elif converted.space != self._tspace.space:
                return False  # Tune then reports that param_space has unresolved values
        return True

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Limit live trials here (so Tune's ConcurrencyLimiter does not wrap silently)."""
        self._max_concurrent = check_int("max_concurrent", max_concurrent, 1)
        return True

    # Ray's Searcher.suggest is annotated Optional[Dict] but documents returning Searcher.FINISHED (a str) too
    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]
        core = self.core
        if self._max_concurrent is not None and len(self._live) >= self._max_concurrent:
            return None
        if not self._buffer:
            if core.is_finished:
                return Searcher.FINISHED
            n = self._max_concurrent - len(self._live) if self._max_concurrent is not None else 1
            self._buffer = core.ask(n, pending=list(self._live.values()))
            if not self._buffer:
                return None  # the core waits for results still out
            self._buffer_tag = self._proposal_tag()
        config = self._buffer.pop(0)
        self._live[trial_id] = config
        self._proposals[trial_id] = {"index": len(self._proposals), **self._buffer_tag}
        return self._tune_space().to_tune(config)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        config = self._live.pop(trial_id, None)
        if config is None:
            return
        core = self._core
        if core is None:
            raise RuntimeError(f"{type(self).__name__} has trial {trial_id} in flight but no core")
        row, G = None, None
        if error or result is None:
            logger.warning("trial %s errored or returned no result; %s ignores it", trial_id, type(self).__name__)
        else:
            row = self._row_from_result(trial_id, result)
        if row is not None and result is not None and core.n_constraints:
            try:
                G = [self._constraint_row(result)]
            except ConfigError as exc:
                logger.warning("trial %s: %s; %s ignores it", trial_id, exc, type(self).__name__)
                row = None
        if row is None:
            core.discard([config])
        else:
            core.tell([config], [row], constraints=G)

    def add_evaluated_point(self, parameters: Mapping[str, Any], value: Any, error: bool = False,
                            pruned: bool = False, intermediate_values: Sequence[float] | None = None) -> None:
        """Tell the core a point evaluated elsewhere (errored or pruned points are ignored).

        ``value`` is a number (one metric), a list in metric order, or a dict by metric name.
        """
        if error or pruned:
            return
        self.add_evaluated_points([parameters], [value])

    def add_evaluated_points(self, parameters: Sequence[Mapping[str, Any]], values: Sequence[Any]) -> None:
        """Tell the core several points evaluated elsewhere, in one batch."""
        core = self.core
        if len(parameters) != len(values):
            raise ConfigError(f"got {len(parameters)} points but {len(values)} values")
        tspace = self._tune_space()
        configs = [tspace.from_tune(p) for p in parameters]
        rows, G = [self._row_from_value(v) for v in values], None
        if core.n_constraints:
            if not all(isinstance(v, Mapping) for v in values):
                raise ConfigError(f"{type(self).__name__} has constraints: give each value as a dict of metrics, "
                                  f"got {list(values)!r:.200}")
            G = [self._constraint_row(v) for v in values]
        core.tell(configs, rows, constraints=G)

    @property
    def core(self) -> SearchCore:
        """The ask/tell core (built once the space and metrics are known)."""
        if self._core is None:
            tspace, objs = self._tune_space(), self._known_objectives()
            points = [tspace.from_tune(p) for p in self._points]
            self._core = self._build_core(tspace.space, len(objs), points, self._seed)
        return self._core

    def _tune_space(self) -> TuneSpace:
        if self._tspace is None:
            raise ConfigError(f"{type(self).__name__} has no search space: pass space=... or "
                              "param_space=... to the Tuner")
        return self._tspace

    def _known_objectives(self) -> list[Objective]:
        if self._objectives is None:
            raise ConfigError(f"{type(self).__name__} needs metric and mode (got metric=None, mode=None)")
        return self._objectives

    @property
    def proposals(self) -> dict[str, dict[str, Any]]:
        """Every trial id this searcher answered: ``{"index": k, **tag}`` (``k``: its proposal's place, from 0)."""
        return copy.deepcopy(self._proposals)

    @property
    def objectives(self) -> list[Objective] | None:
        """The metrics and their directions, once known."""
        return None if self._objectives is None else list(self._objectives)

    # ------------------------------------------------------------------ objectives
    def _set_objectives(self, objs: list[Objective]) -> None:
        low, high = self.objectives_range
        if len(objs) < low or (high is not None and len(objs) > high):
            rule = f"exactly {low}" if low == high else f"at least {low}" if high is None else f"{low} to {high}"
            raise ConfigError(f"{type(self).__name__} needs {rule} metric(s), got metric="
                              f"{[o.name for o in objs]!r}")
        self._objectives = objs
        names, modes = [o.name for o in objs], [o.direction for o in objs]
        pair = (names[0], modes[0]) if len(objs) == 1 else (names, modes)
        # Ray's Searcher annotates _metric/_mode as str, though multi-metric searchers (OptunaSearch) store lists
        self._metric, self._mode = pair  # type: ignore[assignment]

    def _check_tune_metric(self, metric: Any, mode: Any) -> None:
        objs = self._known_objectives()
        by_name = {o.name: o for o in objs}
        if metric is not None and metric not in by_name:
            raise ConfigError(f"{type(self).__name__} has metric={list(by_name)!r} but the Tuner passed {metric!r}")
        if mode is not None:
            directions = {by_name[metric].direction} if metric is not None else {o.direction for o in objs}
            if directions != {mode}:
                raise ConfigError(f"{type(self).__name__} has mode={self._mode!r} but the Tuner passed {mode!r}")

    def _row_from_result(self, trial_id: str, result: Mapping[str, Any]) -> list[float] | None:
        row = []
        for o in self._known_objectives():
            value = result.get(o.name)
            try:
                row.append(o.to_minimised(value))
            except ConfigError:
                logger.warning("trial %s has no finite value for metric %r (%r); %s ignores it", trial_id, o.name,
                               value, type(self).__name__)
                return None
        return row

    def _constraint_row(self, result: Mapping[str, Any]) -> list[float]:
        """Constraint values (``<= 0`` satisfied) read from a result dict, for a core with constraints.

        A subclass whose core has ``n_constraints > 0`` overrides this; a missing or
        non-finite value raises :class:`ConfigError` (the trial is then dropped).
        """
        raise ConfigError(f"{type(self).__name__} does not read constraint values from results")

    def _row_from_value(self, value: Any) -> list[float]:
        objs = self._known_objectives()
        names = [o.name for o in objs]
        if isinstance(value, Mapping):
            missing = [n for n in names if n not in value]
            if missing:
                raise ConfigError(f"value has no entry for metric(s) {missing}: {dict(value)!r:.200}")
            value = [value[n] for n in names]
        elif len(objs) == 1 and not isinstance(value, (list, tuple)):
            value = [value]
        if not isinstance(value, (list, tuple)) or len(value) != len(objs):
            raise ConfigError(f"expected {len(objs)} values for metrics {names}, got {value!r:.200}")
        return [o.to_minimised(v) for o, v in zip(objs, value)]

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """Versioned, JSON-safe state: settings, space, trials in flight and the core's state."""
        return {"format": STATE_FORMAT, "version": STATE_VERSION, "kind": type(self).__name__,
                "objectives": None if self._objectives is None
                else [[o.name, o.direction] for o in self._objectives],
                "space": None if self._tspace is None else self._tspace.to_state(),
                "points_to_evaluate": copy.deepcopy(self._points), "seed": self._seed,
                "options": copy.deepcopy(self._options), "live": copy.deepcopy(self._live),
                "buffer": copy.deepcopy(self._buffer), "buffer_tag": copy.deepcopy(self._buffer_tag),
                "proposals": copy.deepcopy(self._proposals), "max_concurrent": self._max_concurrent,
                "core": None if self._core is None else self._core.get_state()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`get_state`'s output; raises :class:`ConfigError` (searcher unchanged) if it does not fit."""
        name = type(self).__name__
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT or state.get("kind") != name:
            kind = state.get("kind") if isinstance(state, Mapping) else type(state).__name__
            raise ConfigError(f"not a {name} checkpoint (kind={kind!r})")
        if state.get("version") != STATE_VERSION:
            raise ConfigError(f"unsupported {name} checkpoint version {state.get('version')!r}, "
                              f"expected {STATE_VERSION}")
        fresh = copy.copy(self)
        try:
            fresh._objectives = None
            if state["objectives"] is not None:
                fresh._set_objectives([Objective(n, d) for n, d in state["objectives"]])
            fresh._tspace = None if state["space"] is None else TuneSpace.from_state(state["space"])
            fresh._points = [dict(p) for p in state["points_to_evaluate"]]
            fresh._seed = check_int("seed", state["seed"], 0)
            fresh._options = dict(state["options"])
            fresh._live = {str(k): dict(v) for k, v in state["live"].items()}
            fresh._buffer = [dict(c) for c in state["buffer"]]
            fresh._buffer_tag = dict(state["buffer_tag"])
            fresh._proposals = {str(k): dict(v) for k, v in state["proposals"].items()}
            if sorted(v["index"] for v in fresh._proposals.values()) != list(range(len(fresh._proposals))):
                raise ConfigError(f"malformed {name} checkpoint (the proposal indices are not 0..n-1)")
            fresh._max_concurrent = None if state["max_concurrent"] is None \
                else check_int("max_concurrent", state["max_concurrent"], 1)
            fresh._core = None
            if state["core"] is not None:
                fresh.core.set_state(state["core"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"malformed {name} checkpoint ({type(exc).__name__}: {exc})") from None
        self.__dict__.update(fresh.__dict__)

    def save(self, checkpoint_path: str) -> None:
        """Write :meth:`get_state` as JSON (Tune calls this for its searcher checkpoints)."""
        with open(checkpoint_path, "w", encoding="utf-8") as fh:
            json.dump(self.get_state(), fh)

    def restore(self, checkpoint_path: str) -> None:
        """Read a checkpoint written by :meth:`save`."""
        try:
            with open(checkpoint_path, encoding="utf-8") as fh:
                state = json.load(fh)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{checkpoint_path} is not a JSON searcher checkpoint ({exc})") from None
        except OSError as exc:
            raise ConfigError(f"cannot read searcher checkpoint {checkpoint_path}: {exc.strerror}") from None
        self.set_state(state)

