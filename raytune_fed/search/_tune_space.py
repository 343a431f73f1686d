"""Ray Tune search-space domains <-> :class:`~raytune_fed.space.SearchSpace`.

Tune domains translate as follows:

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
:class:`ConfigError`.
"""

from __future__ import annotations

import copy
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ray.tune.search.sample import Categorical as TuneCategorical
from ray.tune.search.sample import Domain, Integer, LogUniform, Quantized, Uniform
from ray.tune.search.sample import Float as TuneFloat
from ray.tune.search.variant_generator import parse_spec_vars

from raytune_fed.errors import ConfigError
from raytune_fed.space import Categorical, Float, Int, SearchSpace

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TuneSpace:
    """A :class:`SearchSpace` plus what it takes to go to and from Tune's nested configs."""

    space: SearchSpace
    paths: dict[str, tuple] = field(default_factory=dict)    # parameter -> nested keys
    quanta: dict[str, float] = field(default_factory=dict)   # parameter -> q (grid index params)
    template: dict = field(default_factory=dict)             # constants, domains replaced by None

    @classmethod
    def build(cls, space: Mapping[str, Any] | SearchSpace) -> TuneSpace:
        """From a :class:`SearchSpace` or a (nested) dict of Tune domains and constants."""
        if isinstance(space, SearchSpace):
            return cls(space, {n: (n,) for n in space.names})
        if not isinstance(space, Mapping):
            raise ConfigError(f"space must be a SearchSpace or a dict of Tune domains, got {type(space).__name__}")
        _, domain_vars, grid_vars = parse_spec_vars(dict(space))
        if grid_vars:
            raise ConfigError(f"grid search is not supported by model-based search: {_name(grid_vars[0][0])!r}")
        if not domain_vars:
            raise ConfigError(f"space has no Tune domains to search over: {dict(space)!r:.200}")
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

    @staticmethod
    def has_domains(config: Mapping[str, Any]) -> bool:
        """Whether a Tune ``param_space`` holds anything to search over."""
        return bool(config) and parse_spec_vars(dict(config))[1:] != ([], [])

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
        if not isinstance(params, Mapping):
            raise ConfigError(f"a Tune configuration must be a dict, got {params!r:.200}")
        unknown = sorted((k for k in params if k not in self.paths and k not in self.template), key=str)
        if unknown:
            raise ConfigError(f"configuration has unknown parameters {unknown} (known: {self.space.names})")
        out = {}
        for name, path in self.paths.items():
            value = params[name] if name in params else _get_path(params, path, name)
            if name in self.quanta:
                q = self.quanta[name]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ConfigError(f"parameter {name!r}={value!r} is not a finite number")
                index = value / q
                if abs(index - round(index)) > 1e-6:
                    raise ConfigError(f"parameter {name!r}={value!r} is not a multiple of {q!r}")
                value = int(round(index))
            out[name] = value
        return self.space.normalize([out])[0]

    def to_state(self) -> dict[str, Any]:
        """JSON-safe description; constants that JSON cannot hold are left out (logged).

        Inside a Tuner nothing is lost: Tune merges a suggestion into its ``param_space``,
        which carries the constants.
        """
        return {"space": self.space.to_dict(), "paths": {k: list(v) for k, v in self.paths.items()},
                "quanta": dict(self.quanta), "template": _json_safe(self.template)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> TuneSpace:
        try:
            return cls(SearchSpace.from_dict(state["space"]), {k: tuple(v) for k, v in state["paths"].items()},
                       dict(state["quanta"]), copy.deepcopy(state["template"]))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"malformed Tune space state ({type(exc).__name__}: {exc})") from None


def _json_safe(tree: Any, path: str = "") -> Any:
    if isinstance(tree, dict):
        out = {}
        for k, v in tree.items():
            if isinstance(k, str):
                out[k] = _json_safe(v, f"{path}/{k}" if path else k)
        return out
    try:
        json.dumps(tree)
    except (TypeError, ValueError):
        logger.info("constant %r is not JSON; the searcher checkpoint leaves it out", path)
        return None
    return copy.deepcopy(tree)


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
            raise ConfigError(f"configuration is missing parameter {name!r}: {dict(tree)!r:.200}")
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
