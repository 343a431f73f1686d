"""A site's policy: what its owner allows, read from a file when the site starts.

The analyst chooses none of it.  A policy file is TOML (``.toml``) or JSON (``.json``)::

    name = "site0"                      # the site's name in schedules
    roles = ["curator", "lockbox"]      # roles it may play
    seed = 20240611                     # its own random root (in-bag splits, Thresholdout noise)
    ledger = "site0.ledger.jsonl"       # append-only ledger, relative to the policy file
    max_units = 200                     # largest schedule it accepts

    [curator]
    inbag_fraction = 0.8                # share of its rows it scores queries on
    query_budget = 2000                 # curator queries over all sessions, answered or refused
    mechanisms = ["exact", "thresholdout"]
    finals_per_unit = 1                 # out-of-bag final evaluations per scheduled unit

    [lockbox]
    finals_per_unit = 1                 # answers per scheduled unit
    max_answers = 40                    # answers in the site's life (default: 1 per scheduled unit)

    [final]
    max_models = 64                     # models per final batch

    [thresholdout]                      # the paper's fso_th, run by the site (appendix A.4)
    threshold = 0.02
    sigma = 0.03
    gamma = 0.0
    budget = 200                        # over-threshold answers in the site's life (optional)

    [guard]
    k = 5                               # differencing guard, see raytune_fed.federation._guard

    [limits]
    seconds_per_query = 60.0            # scoring time limit
    max_request_bytes = 268435456

Every key is optional except ``name`` and ``seed``; an unknown key is an error (so a typo
never silently keeps a default).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from raytune_fed.errors import ConfigError

ROLES = ("curator", "lockbox")
MECHANISMS = ("exact", "thresholdout")


@dataclass(frozen=True)
class CuratorPolicy:
    inbag_fraction: float = 0.8
    query_budget: int = 1000
    mechanisms: tuple[str, ...] = ("exact",)
    finals_per_unit: int = 1


@dataclass(frozen=True)
class LockboxPolicy:
    finals_per_unit: int = 1
    max_answers: int | None = None


@dataclass(frozen=True)
class FinalPolicy:
    max_models: int = 64


@dataclass(frozen=True)
class ThresholdoutPolicy:
    threshold: float = 0.02
    sigma: float = 0.03
    gamma: float = 0.0
    budget: int | None = None


@dataclass(frozen=True)
class GuardPolicy:
    k: int = 5


@dataclass(frozen=True)
class LimitsPolicy:
    seconds_per_query: float = 60.0
    max_request_bytes: int = 1 << 28


@dataclass(frozen=True)
class Policy:
    """A site's policy (see the module docstring for the file format and meanings)."""

    name: str
    seed: int
    roles: tuple[str, ...] = ROLES
    ledger: str | None = None
    max_units: int = 200
    curator: CuratorPolicy = field(default_factory=CuratorPolicy)
    lockbox: LockboxPolicy = field(default_factory=LockboxPolicy)
    final: FinalPolicy = field(default_factory=FinalPolicy)
    thresholdout: ThresholdoutPolicy = field(default_factory=ThresholdoutPolicy)
    guard: GuardPolicy = field(default_factory=GuardPolicy)
    limits: LimitsPolicy = field(default_factory=LimitsPolicy)

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, base: str | os.PathLike | None = None) -> "Policy":
        """A policy from parsed file content; a relative ``ledger`` is resolved against ``base``."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"a policy must be a table of settings, got {type(data).__name__}")
        sections = {f.name: f.type for f in fields(cls)}
        nested = {"curator": CuratorPolicy, "lockbox": LockboxPolicy, "final": FinalPolicy,
                  "thresholdout": ThresholdoutPolicy, "guard": GuardPolicy, "limits": LimitsPolicy}
        unknown = sorted(set(data) - set(sections))
        if unknown:
            raise ConfigError(f"policy has unknown settings {unknown}; known: {sorted(sections)}")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key in nested:
                kwargs[key] = _section(key, nested[key], value)
            elif key == "roles":
                kwargs[key] = _strings("roles", value)
            else:
                kwargs[key] = value
        for key in ("name", "seed"):
            if key not in kwargs:
                raise ConfigError(f"policy must set {key!r}")
        if isinstance(kwargs.get("ledger"), str) and base is not None and not os.path.isabs(kwargs["ledger"]):
            kwargs["ledger"] = os.fspath(Path(base) / kwargs["ledger"])
        return cls(**kwargs)

    def with_ledger(self, path: str | os.PathLike) -> "Policy":
        return replace(self, ledger=os.fspath(path))


def load_policy(path: str | os.PathLike) -> Policy:
    """Read a site's policy from a ``.toml`` or ``.json`` file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"policy file not found: {os.fspath(path)!r}")
    try:
        if path.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(path.read_text())
        elif path.suffix.lower() == ".json":
            data = json.loads(path.read_text())
        else:
            raise ConfigError(f"policy file must end in .toml or .json, got {path.name!r}")
    except (ValueError, UnicodeDecodeError) as exc:  # tomllib.TOMLDecodeError and JSONDecodeError are ValueErrors
        raise ConfigError(f"policy file {path.name!r} cannot be parsed: {exc}") from None
    return Policy.from_mapping(data, base=path.parent)


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"policy {name} must be a list of strings, got {value!r}")
    return tuple(value)


def _section(name: str, cls: type, value: Any) -> Any:
    if not isinstance(value, Mapping):
        raise ConfigError(f"policy [{name}] must be a table, got {value!r}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise ConfigError(f"policy [{name}] has unknown settings {unknown}; known: {sorted(known)}")
    values = dict(value)
    if "mechanisms" in values:
        values["mechanisms"] = _strings(f"[{name}] mechanisms", values["mechanisms"])
    return cls(**values)


def _int(where: str, value: Any, low: int, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"policy {where} must be an integer >= {low}, got {value!r}")


def _real(where: str, value: Any, low: float, high: float = math.inf, *, open_low: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and (value > low if open_low else value >= low) and value <= high
    if not ok:
        raise ConfigError(f"policy {where} must be a number in {'(' if open_low else '['}{low}, {high}], "
                          f"got {value!r}")


def _check(p: Policy) -> None:
    if not isinstance(p.name, str) or not 1 <= len(p.name) <= 100:
        raise ConfigError(f"policy name must be a non-empty str of at most 100 characters, got {p.name!r}")
    _int("seed", p.seed, 0)
    bad = sorted(set(p.roles) - set(ROLES))
    if not p.roles or bad:
        raise ConfigError(f"policy roles must be a non-empty subset of {list(ROLES)}, got {list(p.roles)!r}")
    if p.ledger is not None and not isinstance(p.ledger, str):
        raise ConfigError(f"policy ledger must be a file path, got {p.ledger!r}")
    _int("max_units", p.max_units, 1)
    _real("[curator] inbag_fraction", p.curator.inbag_fraction, 0.0, 1.0, open_low=True)
    if p.curator.inbag_fraction >= 1.0:
        raise ConfigError(f"policy [curator] inbag_fraction must be below 1, got {p.curator.inbag_fraction!r}")
    _int("[curator] query_budget", p.curator.query_budget, 0)
    bad = sorted(set(p.curator.mechanisms) - set(MECHANISMS))
    if not p.curator.mechanisms or bad:
        raise ConfigError(f"policy [curator] mechanisms must be a non-empty subset of {list(MECHANISMS)}, "
                          f"got {list(p.curator.mechanisms)!r}")
    _int("[curator] finals_per_unit", p.curator.finals_per_unit, 0)
    _int("[lockbox] finals_per_unit", p.lockbox.finals_per_unit, 0)
    _int("[lockbox] max_answers", p.lockbox.max_answers, 0, optional=True)
    _int("[final] max_models", p.final.max_models, 1)
    if p.final.max_models > 256:
        raise ConfigError(f"policy [final] max_models must be at most 256, got {p.final.max_models!r}")
    _real("[thresholdout] threshold", p.thresholdout.threshold, 0.0)
    _real("[thresholdout] sigma", p.thresholdout.sigma, 0.0)
    _real("[thresholdout] gamma", p.thresholdout.gamma, 0.0)
    _int("[thresholdout] budget", p.thresholdout.budget, 0, optional=True)
    _int("[guard] k", p.guard.k, 0)
    _real("[limits] seconds_per_query", p.limits.seconds_per_query, 0.0, open_low=True)
    _int("[limits] max_request_bytes", p.limits.max_request_bytes, 1024)
