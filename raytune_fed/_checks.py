"""Checks of scalar parameters at the public boundary, with one message style.

Each raises :class:`~raytune_fed.errors.ConfigError` naming the parameter, the rule and
the value received, and returns the value as a plain Python number.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError


def check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    """An int (not a bool) in ``[low, high]`` (``high`` open-ended when None)."""
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and value >= low \
        and (high is None or value <= high)
    if not ok:
        rule = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ConfigError(f"{name} must be an integer {rule}, got {value!r}")
    return int(value)


def check_float(name: str, value: Any, low: float) -> float:
    """A finite real number >= ``low``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)) \
            or not math.isfinite(float(value)) or float(value) < low:
        raise ConfigError(f"{name} must be a finite number >= {low}, got {value!r}")
    return float(value)


def check_share(name: str, value: Any, low: float, high: float, *, low_open: bool) -> float:
    """A real number in ``(low, high]`` (``low_open``) or ``[low, high]``."""
    ok = isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_))
    if ok:
        value = float(value)
        ok = math.isfinite(value) and (value > low if low_open else value >= low) and value <= high
    if not ok:
        bracket = "(" if low_open else "["
        raise ConfigError(f"{name} must be in {bracket}{low:g}, {high:g}], got {value!r}")
    return value


def check_choice(name: str, value: Any, choices: Any) -> Any:
    """One of ``choices`` (compared with ``==``)."""
    choices = tuple(choices)
    if not any(value == c and type(value) is type(c) for c in choices):
        raise ConfigError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_unique(name: str, values: Any) -> tuple:
    """A non-empty sequence of distinct items, returned as a tuple."""
    items = tuple(values)
    if not items:
        raise ConfigError(f"{name} must list at least one item, got none")
    seen: set = set()
    for item in items:
        if item in seen:
            raise ConfigError(f"{name} lists {item!r} twice")
        seen.add(item)
    return items
