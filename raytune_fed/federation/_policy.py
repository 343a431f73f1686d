"""A site's policy: what its owner allows, read from a file when the site starts.

The analyst chooses none of it.  A policy file is TOML (``.toml``) or JSON (``.json``)::

    name = "site0"                      # the site's name in schedules
    roles = ["curator", "lockbox"]      # roles it may play
    seed = 20240611                     # its own random root (in-bag splits, Thresholdout noise)
    ledger = "site0.ledger.jsonl"       # append-only ledger, relative to the policy file
    log = "site0.log"                   # the service's log, rotated (default: the ledger's path + ".log")
    max_units = 200                     # largest schedule it accepts

    [budget]                            # what the site answers in its whole life, over all sessions,
    answers = 20                        # units and restarts: every loss it computes (each curator query,
                                        # each model of each final, refused or not once charged);
                                        # default: an eighth of its rows
    per_analyst = 20                    # each analyst credential's share (default: all of answers)

    [analysts.alice]                    # an analyst credential (more than one: one table each)
    token_file = "alice.token"          # its bearer token, relative to the policy file
    answers = 20                        # its share (default: [budget] per_analyst)

    [schedule]
    approved = "9f86d0...0f00a08"       # SHA-256 digest of the one schedule the owner approves

    [curator]
    inbag_fraction = 0.8                # share of its rows it scores queries on
    query_budget = 1000                 # curator queries over all sessions, answered or refused
    mechanisms = ["exact", "thresholdout"]
    finals_per_unit = 1                 # out-of-bag final evaluations per scheduled unit

    [lockbox]
    finals_per_unit = 1                 # final evaluations per scheduled unit
    max_answers = 1                     # final evaluations in the site's life (see below)

    [final]
    max_models = 8                      # models per final evaluation

    [thresholdout]                      # the paper's fso_th, run by the site (appendix A.4)
    threshold = 0.02
    sigma = 0.03
    gamma = 0.0
    budget = 200                        # over-threshold answers in the site's life (optional)

    [guard]
    k = 5                               # differencing guard, see raytune_fed.federation._guard

    [limits]
    seconds_per_query = 60.0            # CPU seconds a request may use: decoding, validation, scoring
    max_request_bytes = 268435456       # largest request message
    max_header_bytes = 262144           # largest JSON header of a message (checked before it is parsed)
    sessions_per_unit = 64              # sessions each credential may open per scheduled unit and role

Every key is optional except ``name`` and ``seed``; an unknown key is an error (so a typo
never silently keeps a default).

What the keys bound over the site's life (the README's trust model states the bound):

* ``[budget] answers`` counts every loss the site computes from its rows: one per curator
  query (exact or Thresholdout, answered or refused once charged), one per model of
  every final evaluation, curator or lockbox.  It is kept in the ledger, so no new
  session, unit, schedule or restart refills it.  ``per_analyst`` and
  ``[analysts.<name>] answers`` cap what each credential may use of it.
* Analyst credentials: ``raytune-fed site serve --token-file`` gives one, named
  ``analyst`` (requests in-process and over Ray count as ``analyst`` too); each
  ``[analysts.<name>]`` table with a ``token_file`` adds one.  A table without
  ``token_file`` only sets that credential's share.  A session belongs to the credential
  that opened it.
* The lockbox answers once in the site's life unless the owner says otherwise:
  ``[lockbox] max_answers`` sets the number of final evaluations outright; without it,
  a ``[schedule] approved`` digest allows ``finals_per_unit`` per unit of that schedule
  in which the site is the lockbox; with neither, one.  The analyst can declare any
  schedule (up to ``max_units`` units); only the owner's policy makes more lockbox
  answers binding.  With ``approved`` set, the site accepts no other schedule.
* ``[final] max_models`` caps the models of one final evaluation (a request with more is
  refused before anything is computed); each model is charged one answer.
* ``[limits]`` bound the work a request may cost before it is refused: the header is
  checked against ``max_header_bytes`` before it is parsed, the session and method before
  any array is decoded, and decoding, validation and scoring stop at
  ``seconds_per_query`` CPU seconds.  ``sessions_per_unit`` bounds the sessions (ledger
  lines the analyst can make without being charged) to ``max_units`` x 2 roles x that many
  per credential; every other request that charges nothing adds ``O(log N)`` ledger lines
  for ``N`` requests (see :mod:`raytune_fed.federation._party`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

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
    max_answers: int | None = None  # None: 1, or finals_per_unit per lockbox unit of the approved schedule


@dataclass(frozen=True)
class FinalPolicy:
    max_models: int = 8


@dataclass(frozen=True)
class BudgetPolicy:
    answers: int | None = None  # None: an eighth of the site's rows
    per_analyst: int | None = None  # None: all of answers


@dataclass(frozen=True)
class AnalystPolicy:
    token_file: str | None = None
    answers: int | None = None  # None: [budget] per_analyst


@dataclass(frozen=True)
class SchedulePolicy:
    approved: str | None = None


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
    max_header_bytes: int = 1 << 18
    sessions_per_unit: int = 64


@dataclass(frozen=True)
class Policy:
    """A site's policy (see the module docstring for the file format and meanings)."""

    name: str
    seed: int
    roles: tuple[str, ...] = ROLES
    ledger: str | None = None
    log: str | None = None
    max_units: int = 200
    budget: BudgetPolicy = field(default_factory=BudgetPolicy)
    analysts: Mapping[str, AnalystPolicy] = field(default_factory=dict)
    schedule: SchedulePolicy = field(default_factory=SchedulePolicy)
    curator: CuratorPolicy = field(default_factory=CuratorPolicy)
    lockbox: LockboxPolicy = field(default_factory=LockboxPolicy)
    final: FinalPolicy = field(default_factory=FinalPolicy)
    thresholdout: ThresholdoutPolicy = field(default_factory=ThresholdoutPolicy)
    guard: GuardPolicy = field(default_factory=GuardPolicy)
    limits: LimitsPolicy = field(default_factory=LimitsPolicy)

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, base: str | os.PathLike | None = None) -> Policy:
        """A policy from parsed file content; a relative ``ledger`` is resolved against ``base``."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"a policy must be a table of settings, got {type(data).__name__}")
        sections = {f.name: f.type for f in fields(cls)}
        nested = {"budget": BudgetPolicy, "schedule": SchedulePolicy, "curator": CuratorPolicy,
                  "lockbox": LockboxPolicy, "final": FinalPolicy, "thresholdout": ThresholdoutPolicy,
                  "guard": GuardPolicy, "limits": LimitsPolicy}
        unknown = sorted(set(data) - set(sections))
        if unknown:
            raise ConfigError(f"policy has unknown settings {unknown}; known: {sorted(sections)}")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key in nested:
                kwargs[key] = _section(key, nested[key], value)
            elif key == "analysts":
                kwargs[key] = _analysts(value, base)
            elif key == "roles":
                kwargs[key] = _strings("roles", value)
            else:
                kwargs[key] = value
        for key in ("name", "seed"):
            if key not in kwargs:
                raise ConfigError(f"policy must set {key!r}")
        for key in ("ledger", "log"):
            if isinstance(kwargs.get(key), str) and base is not None and not os.path.isabs(kwargs[key]):
                kwargs[key] = os.fspath(Path(base) / kwargs[key])
        return cls(**kwargs)

    def with_ledger(self, path: str | os.PathLike) -> Policy:
        return replace(self, ledger=os.fspath(path))

    @property
    def log_file(self) -> str | None:
        """Where the site's service logs (``log``, else beside the ledger)."""
        return self.log if self.log is not None else None if self.ledger is None else self.ledger + ".log"

    def lifetime_answers(self, n_rows: int) -> int:
        """``[budget] answers`` for a site of ``n_rows`` rows (default: an eighth of them, at least 1)."""
        return self.budget.answers if self.budget.answers is not None else max(1, n_rows // 8)

    def analyst_answers(self, analyst: str, n_rows: int) -> int:
        """The share of the lifetime answers credential ``analyst`` may use."""
        own = self.analysts.get(analyst)
        if own is not None and own.answers is not None:
            return own.answers
        return self.budget.per_analyst if self.budget.per_analyst is not None else self.lifetime_answers(n_rows)

    def lockbox_answers(self, approved_units: int | None) -> int:
        """Final evaluations the lockbox gives in its life; ``approved_units``: the lockbox units
        of the approved schedule once it is declared (``None`` before, or without approval)."""
        if self.lockbox.max_answers is not None:
            return self.lockbox.max_answers
        if self.schedule.approved is not None and approved_units is not None:
            return self.lockbox.finals_per_unit * approved_units
        return 1

    def as_mapping(self) -> dict[str, Any]:
        """The policy as file content (``Policy.from_mapping(p.as_mapping()) == p``); unset keys left out."""
        def plain(value: Any) -> Any:
            if hasattr(value, "__dataclass_fields__"):
                return {f.name: plain(getattr(value, f.name)) for f in fields(value)
                        if getattr(value, f.name) is not None}
            if isinstance(value, Mapping):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, tuple):
                return list(value)
            return value

        return plain(self)


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


def _analysts(value: Any, base: str | os.PathLike | None) -> dict[str, AnalystPolicy]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"policy [analysts] must be a table of analyst credentials by name, got {value!r}")
    out = {}
    for name, entry in value.items():
        analyst = _section(f"analysts.{name}", AnalystPolicy, entry)
        if isinstance(analyst.token_file, str) and base is not None and not os.path.isabs(analyst.token_file):
            analyst = replace(analyst, token_file=os.fspath(Path(base) / analyst.token_file))
        out[name] = analyst
    return out


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
    for key in ("ledger", "log"):
        if getattr(p, key) is not None and not (isinstance(getattr(p, key), str) and getattr(p, key)):
            raise ConfigError(f"policy {key} must be a file path, got {getattr(p, key)!r}")
    _int("max_units", p.max_units, 1)
    _int("[budget] answers", p.budget.answers, 0, optional=True)
    _int("[budget] per_analyst", p.budget.per_analyst, 0, optional=True)
    if not isinstance(p.analysts, Mapping):
        raise ConfigError(f"policy analysts must be a table of analyst credentials, got {p.analysts!r}")
    for name, a in p.analysts.items():
        if not isinstance(name, str) or not 1 <= len(name) <= 100 or type(a) is not AnalystPolicy:
            raise ConfigError(f"policy [analysts] names must be strings of 1..100 characters, got {name!r}")
        if a.token_file is not None and not (isinstance(a.token_file, str) and a.token_file):
            raise ConfigError(f"policy [analysts.{name}] token_file must be a file path, got {a.token_file!r}")
        _int(f"[analysts.{name}] answers", a.answers, 0, optional=True)
    approved = p.schedule.approved
    if approved is not None and not (isinstance(approved, str) and len(approved) == 64
                                     and all(c in "0123456789abcdef" for c in approved)):
        raise ConfigError(f"policy [schedule] approved must be a schedule's SHA-256 digest (64 lowercase hex "
                          f"characters), got {approved!r}")
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
    _int("[limits] max_header_bytes", p.limits.max_header_bytes, 1024)
    _int("[limits] sessions_per_unit", p.limits.sessions_per_unit, 1)
    if p.limits.max_header_bytes > 1 << 24:
        raise ConfigError(f"policy [limits] max_header_bytes must be at most {1 << 24}, "
                          f"got {p.limits.max_header_bytes!r}")
