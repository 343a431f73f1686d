"""Shared small types: optimisation directions and named objectives.

Internals always *minimise*.  A user-facing objective carries its direction once, as an
:class:`Objective`, and the adapter at the boundary flips maximised values with
:meth:`Objective.to_minimised` (and back with :meth:`Objective.from_minimised`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from raytune_fed.errors import ConfigError

Direction = Literal["min", "max"]
DIRECTIONS: tuple[str, ...] = ("min", "max")


def check_direction(direction: Any, name: str = "mode") -> Direction:
    """``"min"`` or ``"max"``; anything else raises :class:`ConfigError` naming the value."""
    if direction not in DIRECTIONS:
        raise ConfigError(f"{name} must be 'min' or 'max', got {direction!r}")
    return direction  # type: ignore[return-value]


@dataclass(frozen=True)
class Objective:
    """A named metric and whether it is minimised or maximised."""

    name: str
    direction: Direction = "min"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"an objective needs a non-empty metric name, got {self.name!r}")
        check_direction(self.direction, f"direction of objective {self.name!r}")

    @property
    def sign(self) -> float:
        return -1.0 if self.direction == "max" else 1.0

    def to_minimised(self, value: Any) -> float:
        """The value on the minimised scale; raises :class:`ConfigError` unless finite."""
        if isinstance(value, bool):
            raise ConfigError(f"objective {self.name!r} needs a finite number, got {value!r}")
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"objective {self.name!r} needs a finite number, got {value!r}") from None
        if not math.isfinite(v):
            raise ConfigError(f"objective {self.name!r} needs a finite number, got {value!r}")
        return self.sign * v

    def from_minimised(self, value: float) -> float:
        return self.sign * float(value)


def objectives(metric: str | Sequence[str] | None, mode: str | Sequence[str] | None) -> list[Objective]:
    """Objectives from Tune-style ``metric``/``mode`` (a name and a mode, or equal-length lists).

    Raises :class:`ConfigError` for a missing side, unequal lengths or repeated names.
    """
    if metric is None or mode is None:
        raise ConfigError(f"need both metric and mode, got metric={metric!r}, mode={mode!r}")
    if isinstance(metric, str) != isinstance(mode, str):
        raise ConfigError(f"metric and mode must both be a single name/mode or both be lists, "
                          f"got metric={metric!r}, mode={mode!r}")
    names = [metric] if isinstance(metric, str) else list(metric)
    modes = [mode] if isinstance(mode, str) else list(mode)
    if not names:
        raise ConfigError("metric must name at least one metric, got an empty list")
    if len(names) != len(modes):
        raise ConfigError(f"mode needs one 'min'/'max' per metric ({len(names)}), got {mode!r}")
    if len(set(names)) != len(names):
        raise ConfigError(f"metric names must be distinct, got {names!r}")
    return [Objective(n, check_direction(m)) for n, m in zip(names, modes)]
