"""Search spaces as plain data, with a unit-cube encoding for model-based search.

The algorithm cores (GP-BO, ParEGO) work in ``[0, 1]^d``; this module maps named
configurations to that cube and back.  Log-scaled dimensions are encoded on the log
scale, integers are rounded on decoding, and categorical choices take equal-width bins.
No Ray import here: the Tune adapters translate Tune's domains into these types.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.stats import qmc

from raytune_fed.errors import ConfigError


@dataclass(frozen=True)
class Float:
    """A real parameter on ``[low, high]``; ``log=True`` searches ``log(value)`` uniformly."""

    name: str
    low: float
    high: float
    log: bool = False

    def __post_init__(self) -> None:
        _check_bounds(self.name, self.low, self.high, self.log)

    def encode(self, value: float) -> float:
        lo, hi, v = (math.log(self.low), math.log(self.high), math.log(value)) if self.log else (
            self.low, self.high, float(value))
        return (v - lo) / (hi - lo)

    def decode(self, u: float) -> float:
        u = min(max(float(u), 0.0), 1.0)
        if self.log:
            return float(math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low))))
        return float(self.low + u * (self.high - self.low))

    def contains(self, value: Any) -> bool:
        return isinstance(value, (int, float, np.number)) and self.low <= float(value) <= self.high


@dataclass(frozen=True)
class Int:
    """An integer parameter on ``[low, high]`` (both inclusive)."""

    name: str
    low: int
    high: int
    log: bool = False

    def __post_init__(self) -> None:
        _check_bounds(self.name, self.low, self.high, self.log)

    def _cont(self) -> Float:
        # widen by half a step so every integer owns an equal share of the cube
        lo, hi = self.low - 0.5, self.high + 0.5
        if self.log:
            lo, hi = max(self.low - 0.5, self.low * 0.5), self.high + 0.5
        return Float(self.name, lo, hi, self.log)

    def encode(self, value: int) -> float:
        return self._cont().encode(value)

    def decode(self, u: float) -> int:
        return int(min(max(round(self._cont().decode(u)), self.low), self.high))

    def contains(self, value: Any) -> bool:
        return (isinstance(value, (int, np.integer)) or (isinstance(value, float) and value.is_integer())) \
            and self.low <= value <= self.high


@dataclass(frozen=True)
class Categorical:
    """One of a fixed tuple of choices; encoded as equal-width bins of ``[0, 1]``."""

    name: str
    choices: tuple

    def __post_init__(self) -> None:
        if len(self.choices) < 1:
            raise ConfigError(f"parameter {self.name!r}: categorical needs at least one choice")

    def encode(self, value: Any) -> float:
        try:
            i = list(self.choices).index(value)
        except ValueError:
            raise ConfigError(f"parameter {self.name!r}: {value!r} is not one of {self.choices}") from None
        return (i + 0.5) / len(self.choices)

    def decode(self, u: float) -> Any:
        k = len(self.choices)
        return self.choices[min(int(float(u) * k), k - 1)]

    def contains(self, value: Any) -> bool:
        return value in self.choices


Param = Float | Int | Categorical


def _check_bounds(name: str, low: float, high: float, log: bool) -> None:
    if not (np.isfinite(low) and np.isfinite(high)) or not low < high:
        raise ConfigError(f"parameter {name!r}: need finite low < high, got low={low!r}, high={high!r}")
    if log and low <= 0:
        raise ConfigError(f"parameter {name!r}: a log-scaled range needs low > 0, got low={low!r}")


@dataclass(frozen=True)
class SearchSpace:
    """An ordered tuple of parameters; configurations are plain ``dict``s keyed by name."""

    params: tuple[Param, ...]

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ConfigError(f"search space has duplicate parameter names: {names}")
        if not names:
            raise ConfigError("search space needs at least one parameter")

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    @property
    def dim(self) -> int:
        return len(self.params)

    def validate(self, config: Mapping[str, Any]) -> None:
        """Raise :class:`ConfigError` naming the first missing or out-of-range value."""
        for p in self.params:
            if p.name not in config:
                raise ConfigError(f"configuration is missing parameter {p.name!r}: {dict(config)!r}")
            if not p.contains(config[p.name]):
                raise ConfigError(f"parameter {p.name!r}={config[p.name]!r} is outside {p!r}")

    def to_unit(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Encode configurations as rows of an ``(n, dim)`` array in ``[0, 1]``."""
        out = np.empty((len(configs), self.dim))
        for i, c in enumerate(configs):
            self.validate(c)
            out[i] = [p.encode(c[p.name]) for p in self.params]
        return out

    def from_unit(self, u: np.ndarray) -> list[dict[str, Any]]:
        """Decode rows of ``u`` (clipped to the cube) into configurations."""
        u = np.atleast_2d(np.asarray(u, dtype=float))
        if u.shape[1] != self.dim:
            raise ConfigError(f"expected points with {self.dim} coordinates, got shape {u.shape}")
        return [{p.name: p.decode(x) for p, x in zip(self.params, row)} for row in u]

    def round_trip(self, u: np.ndarray) -> np.ndarray:
        """Snap unit points to what decoding yields (integers and choices become exact)."""
        return self.to_unit(self.from_unit(u))

    def latin_hypercube(self, n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
        """A space-filling design of ``n`` configurations (scipy's optimised LHS)."""
        if n < 1:
            raise ConfigError(f"n must be >= 1 for a design, got {n!r}")
        sampler = qmc.LatinHypercube(d=self.dim, rng=rng, optimization="random-cd" if self.dim > 1 else None)
        return self.from_unit(sampler.random(n))

    def sample(self, n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
        """``n`` independent uniform draws in the encoded cube."""
        return self.from_unit(rng.random((n, self.dim)))
