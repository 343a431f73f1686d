"""Parameters of a search space and their map to and from the unit interval.

Each parameter encodes its values into ``[0, 1]`` and decodes any real number back to a
value inside its own range: inputs outside ``[0, 1]`` are clipped first, and a decoded
value never leaves ``[low, high]`` (on a log scale ``exp(log(low) + u * span)`` can round
past the bound, so the result is clipped again).  Log-scaled dimensions are encoded on
the log scale, integers own equal-width cells and are rounded on decoding, and the
choices of a categorical parameter take equal-width bins.

The ``*_array`` methods are the vectorised forms used by :class:`SearchSpace`; the scalar
``encode``/``decode`` go through them, so both give the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from raytune_fed.errors import ConfigError

_REAL_KINDS = "iuf"  # numpy dtype kinds accepted as real numbers (not bool, str, object)


def _check_bounds(name: str, low: Any, high: Any, log: bool) -> None:
    if isinstance(low, bool) or isinstance(high, bool) or not isinstance(low, (int, float, np.number)) \
            or not isinstance(high, (int, float, np.number)):
        raise ConfigError(f"parameter {name!r}: bounds must be numbers, got low={low!r}, high={high!r}")
    if not (np.isfinite(low) and np.isfinite(high)) or not low < high:
        raise ConfigError(f"parameter {name!r}: need finite low < high, got low={low!r}, high={high!r}")
    if log and low <= 0:
        raise ConfigError(f"parameter {name!r}: a log-scaled range needs low > 0, got low={low!r}")
    if not isinstance(log, bool):
        raise ConfigError(f"parameter {name!r}: log must be True or False, got {log!r}")


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a parameter needs a non-empty string name, got {name!r}")


def _real_column(name: str, values: Sequence[Any]) -> np.ndarray:
    """``values`` as a float array; raises :class:`ConfigError` naming a non-number."""
    arr = np.asarray(values)
    if arr.dtype.kind not in _REAL_KINDS or any(isinstance(v, (bool, np.bool_)) for v in values):
        bad = next((v for v in values if isinstance(v, (bool, np.bool_))
                    or not isinstance(v, (int, float, np.number))), arr.dtype)
        raise ConfigError(f"parameter {name!r}={bad!r} is not a number")
    return arr.astype(float, copy=False)


def _unit(u: Any) -> np.ndarray:
    u = np.asarray(u, dtype=float)
    return np.clip(np.nan_to_num(u, nan=0.0), 0.0, 1.0)


class _Vectorised(Protocol):
    def encode_array(self, values: np.ndarray) -> np.ndarray: ...

    def decode_array(self, u: np.ndarray) -> np.ndarray: ...


class _Scalar:
    """Scalar ``encode``/``decode`` through the vectorised forms, so both agree exactly."""

    def encode(self: _Vectorised, value: Any) -> float:
        return float(self.encode_array(np.array([value], dtype=float))[0])

    def decode(self: _Vectorised, u: float) -> Any:
        return self.decode_array(np.array([u], dtype=float))[0].item()


@dataclass(frozen=True)
class Float(_Scalar):
    """A real parameter on ``[low, high]``; ``log=True`` searches ``log(value)`` uniformly."""

    name: str
    low: float
    high: float
    log: bool = False

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_bounds(self.name, self.low, self.high, self.log)

    def _ends(self) -> tuple[float, float]:
        return (float(np.log(self.low)), float(np.log(self.high))) if self.log else (float(self.low), float(self.high))

    def encode_array(self, values: np.ndarray) -> np.ndarray:
        lo, hi = self._ends()
        v = np.log(values) if self.log else np.asarray(values, dtype=float)
        return (v - lo) / (hi - lo)

    def decode_array(self, u: np.ndarray) -> np.ndarray:
        lo, hi = self._ends()
        u = _unit(u)
        v = lo + u * (hi - lo)
        v = np.clip(np.exp(v) if self.log else v, self.low, self.high)
        v[u == 0.0], v[u == 1.0] = self.low, self.high  # the edges are the bounds, exactly
        return v

    def contains_array(self, values: np.ndarray) -> np.ndarray:
        return (values >= self.low) & (values <= self.high)

    def contains(self, value: Any) -> bool:
        return isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_)) \
            and self.low <= float(value) <= self.high


@dataclass(frozen=True)
class Int(_Scalar):
    """An integer parameter on ``[low, high]`` (both inclusive)."""

    name: str
    low: int
    high: int
    log: bool = False

    def __post_init__(self) -> None:
        _check_name(self.name)
        if not all(isinstance(b, (int, np.integer)) and not isinstance(b, (bool, np.bool_))
                   for b in (self.low, self.high)):
            raise ConfigError(f"parameter {self.name!r}: integer bounds must be ints, "
                              f"got low={self.low!r}, high={self.high!r}")
        _check_bounds(self.name, self.low, self.high, self.log)

    def _cont(self) -> Float:
        # widen by half a step so every integer owns an equal share of the cube
        lo, hi = self.low - 0.5, self.high + 0.5
        if self.log:
            lo = max(self.low - 0.5, self.low * 0.5)
        return Float(self.name, lo, hi, self.log)

    def encode_array(self, values: np.ndarray) -> np.ndarray:
        return self._cont().encode_array(values)

    def decode_array(self, u: np.ndarray) -> np.ndarray:
        return np.clip(np.round(self._cont().decode_array(u)), self.low, self.high).astype(np.int64)

    def contains_array(self, values: np.ndarray) -> np.ndarray:
        return (values == np.round(values)) & (values >= self.low) & (values <= self.high)

    def contains(self, value: Any) -> bool:
        return bool((isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
                     or isinstance(value, (float, np.floating)) and float(value).is_integer())
                    and self.low <= value <= self.high)


@dataclass(frozen=True)
class Categorical:
    """One of a fixed tuple of choices; encoded as equal-width bins of ``[0, 1]``."""

    name: str
    choices: tuple

    def __post_init__(self) -> None:
        _check_name(self.name)
        if not isinstance(self.choices, tuple) or len(self.choices) < 1:
            raise ConfigError(f"parameter {self.name!r}: categorical needs a non-empty tuple of choices, "
                              f"got {self.choices!r}")

    def index_of(self, values: Sequence[Any]) -> np.ndarray:
        """Index of each value among the choices; raises :class:`ConfigError` for a stranger."""
        out = np.empty(len(values), dtype=np.int64)
        for i, v in enumerate(values):
            k = self._index(v)
            if k < 0:
                raise ConfigError(f"parameter {self.name!r}: {v!r} is not one of {self.choices}")
            out[i] = k
        return out

    def _index(self, value: Any) -> int:
        """First choice of the same type equal to ``value``, else the first equal one, else -1."""
        if isinstance(value, np.generic):
            value = value.item()
        equal = -1
        for k, c in enumerate(self.choices):
            try:
                same = bool(c == value)
            except (TypeError, ValueError):
                same = False
            if same:
                if type(c) is type(value):
                    return k
                equal = k if equal < 0 else equal
        return equal

    def encode_array(self, index: np.ndarray) -> np.ndarray:
        return (np.asarray(index, dtype=float) + 0.5) / len(self.choices)

    def decode_array(self, u: np.ndarray) -> np.ndarray:
        k = len(self.choices)
        return np.minimum((_unit(u) * k).astype(np.int64), k - 1)

    def encode(self, value: Any) -> float:
        return float(self.encode_array(self.index_of([value]))[0])

    def decode(self, u: float) -> Any:
        return self.choices[int(self.decode_array(np.array([u], dtype=float))[0])]

    def contains(self, value: Any) -> bool:
        return self._index(value) >= 0


Param = Float | Int | Categorical
