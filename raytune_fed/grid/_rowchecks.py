"""Small predicates for :meth:`Cell.check_rows <raytune_fed.grid.Cell.check_rows>` (pure).

A cell's rows are checked as the store holds them (JSON values: lists, floats, ints,
``None``).  Each helper returns the reason a row fails, or ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def number_problem(name: str, value: Any, low: float, high: float, *, optional: bool = False,
                   integer: bool = False) -> str | None:
    """Why ``value`` is not a finite number in ``[low, high]`` (an int when ``integer``; None allowed when
    ``optional``)."""
    if value is None and optional:
        return None
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) \
            or not low <= value <= high:
        what = "an integer" if integer else "a finite number"
        return f"its {name} is {value!r}, not {what} in [{low:g}, {high:g}]"
    return None


def identity_problem(row: Mapping[str, Any], identity: Mapping[str, Any]) -> str | None:
    """Why ``row`` belongs to another cell: a coordinate that differs from ``identity``."""
    for field, expected in identity.items():
        if row.get(field, _MISSING) != expected:
            return f"its {field} is {row.get(field, 'missing')!r}, not this cell's {expected!r}"
    return None


def one_row_each(rows: Sequence[Mapping[str, Any]], field: str, expected: Sequence[Any]) -> str | None:
    """Why ``rows`` are not exactly one row per value of ``expected`` in ``field``, in that order."""
    got = [row.get(field) for row in rows]
    if got != list(expected):
        return f"it holds rows for {field} {got} where the cell gives one row each for {list(expected)}"
    return None


_MISSING = object()
