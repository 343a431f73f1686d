"""The schedule a grid declares to its sites once: which experiment units exist.

A :class:`Unit` is one role assignment and replication: an openbox, a lockbox, the
curators, a replication index, each site by name.  A site accepts the first schedule it
is shown (and the same one again), derives each unit's in-bag split from its own seed and
the unit's key, and refuses sessions for units it is not part of, in roles it does not
play in them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from raytune_fed.errors import ConfigError

MAX_NAME = 100


def _name(what: str, value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_NAME:
        raise ConfigError(f"unit {what} must be a site name (1..{MAX_NAME} characters), got {value!r}")
    return value


@dataclass(frozen=True)
class Unit:
    """One experiment unit: openbox, lockbox and curator site names, and a replication."""

    openbox: str
    lockbox: str
    curators: tuple[str, ...]
    replication: int

    def __post_init__(self) -> None:
        _name("openbox", self.openbox)
        _name("lockbox", self.lockbox)
        if not isinstance(self.curators, tuple) or not self.curators:
            raise ConfigError(f"unit curators must be a non-empty tuple of site names, got {self.curators!r}")
        for c in self.curators:
            _name("curator", c)
        names = [self.openbox, self.lockbox, *self.curators]
        if len(set(names)) != len(names):
            raise ConfigError(f"a unit's sites must be distinct, got {names}")
        if isinstance(self.replication, bool) or not isinstance(self.replication, int) \
                or not 0 <= self.replication < 2 ** 31:
            raise ConfigError(f"unit replication must be an int in [0, 2^31), got {self.replication!r}")

    @property
    def key(self) -> str:
        """A stable text key, e.g. ``ob=s0;lb=s4;cu=s1,s2,s3;rep=0``."""
        return f"ob={self.openbox};lb={self.lockbox};cu={','.join(self.curators)};rep={self.replication}"

    def role_of(self, site: str) -> str | None:
        if site == self.lockbox:
            return "lockbox"
        if site in self.curators:
            return "curator"
        return None

    def as_dict(self) -> dict[str, Any]:
        return {"openbox": self.openbox, "lockbox": self.lockbox, "curators": list(self.curators),
                "replication": self.replication}

    @classmethod
    def from_dict(cls, data: Any) -> Unit:
        if not isinstance(data, dict) or set(data) != {"openbox", "lockbox", "curators", "replication"}:
            raise ConfigError("a unit must have exactly openbox, lockbox, curators and replication")
        curators = data["curators"]
        if not isinstance(curators, (list, tuple)):
            raise ConfigError("unit curators must be a list of site names")
        return cls(data["openbox"], data["lockbox"], tuple(curators), data["replication"])


@dataclass(frozen=True)
class Schedule:
    """The units of a grid, in a fixed order, with a digest the sites can compare."""

    units: tuple[Unit, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.units, tuple) or not self.units or not all(type(u) is Unit for u in self.units):
            raise ConfigError("a schedule must be a non-empty tuple of Unit")
        keys = [u.key for u in self.units]
        if len(set(keys)) != len(keys):
            raise ConfigError("a schedule lists a unit twice")

    @classmethod
    def of(cls, units: Iterable[Unit]) -> Schedule:
        return cls(tuple(units))

    @property
    def digest(self) -> str:
        text = json.dumps([u.as_dict() for u in self.units], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def for_site(self, site: str) -> dict[str, Unit]:
        """The units that give ``site`` a restricted role, by key."""
        return {u.key: u for u in self.units if u.role_of(site) is not None}

    def as_list(self) -> list[dict[str, Any]]:
        return [u.as_dict() for u in self.units]

    @classmethod
    def from_list(cls, data: Any, *, max_units: int) -> Schedule:
        if not isinstance(data, (list, tuple)) or not 1 <= len(data) <= max_units:
            raise ConfigError(f"a schedule must list 1..{max_units} units")
        return cls(tuple(Unit.from_dict(u) for u in data))


def rfms_schedule(site_names: Sequence[str], assignments: Iterable[Any], reps: int) -> Schedule:
    """The schedule of an RFMS grid: every role assignment (``openbox``, ``lockbox``,
    ``curators`` as site indices) times ``reps`` replications."""
    units = []
    for rep in range(reps):
        for a in assignments:
            units.append(Unit(site_names[a.openbox], site_names[a.lockbox],
                              tuple(site_names[c] for c in a.curators), rep))
    return Schedule(tuple(units))
