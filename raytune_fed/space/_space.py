"""A search space as plain data, with a vectorised unit-cube encoding for model-based search.

The algorithm cores work in ``[0, 1]^d``; :class:`SearchSpace` maps named configurations
(plain ``dict``s) to that cube and back, one column (parameter) at a time with numpy, so
encoding a few thousand candidate points costs a handful of array operations.  No Ray
import here: :mod:`raytune_fed.search` translates Tune's domains into these types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import qmc

from raytune_fed.errors import ConfigError
from raytune_fed.space._params import Categorical, Float, Int, Param, _real_column

_KINDS = {"Float": Float, "Int": Int, "Categorical": Categorical}


@dataclass(frozen=True)
class SearchSpace:
    """An ordered tuple of parameters; configurations are plain dicts keyed by name."""

    params: tuple[Param, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.params, tuple) or not all(isinstance(p, (Float, Int, Categorical))
                                                         for p in self.params):
            raise ConfigError(f"a search space needs a tuple of Float/Int/Categorical parameters, got {self.params!r}")
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

    # ------------------------------------------------------------------ checks
    def validate(self, config: Mapping[str, Any]) -> None:
        """Raise :class:`ConfigError` naming the first missing or out-of-range value."""
        self._columns([config])

    def normalize(self, configs: Sequence[Mapping[str, Any]], what: str = "configuration") -> list[dict[str, Any]]:
        """Checked copies of ``configs`` in parameter order, with plain Python values.

        Unknown keys, missing or out-of-range values raise :class:`ConfigError`; integral
        floats of an :class:`Int` become ints, numbers of a :class:`Float` become floats,
        and a categorical value becomes the matching choice itself.
        """
        for c in configs:
            if not isinstance(c, Mapping):
                raise ConfigError(f"{what} must be a mapping of parameter values, got {c!r}")
            unknown = sorted(set(c) - set(self.names), key=str)
            if unknown:
                raise ConfigError(f"{what} has unknown parameters {unknown} (known: {self.names}): {dict(c)!r}")
        cols = self._columns(configs)
        values = [self._plain(p, col) for p, col in zip(self.params, cols)]
        return [dict(zip(self.names, row)) for row in zip(*values)] if configs else []

    def _columns(self, configs: Sequence[Mapping[str, Any]]) -> list[np.ndarray]:
        """Per parameter: float values (Float/Int) or choice indices (Categorical), checked."""
        cols = []
        for p in self.params:
            try:
                raw = [c[p.name] for c in configs]
            except KeyError:
                missing = next(c for c in configs if p.name not in c)
                raise ConfigError(f"configuration is missing parameter {p.name!r}: {dict(missing)!r}") from None
            except TypeError:
                bad = next(c for c in configs if not isinstance(c, Mapping))
                raise ConfigError(f"configuration must be a mapping of parameter values, got {bad!r}") from None
            if isinstance(p, Categorical):
                cols.append(p.index_of(raw))
                continue
            arr = _real_column(p.name, raw)
            ok = p.contains_array(arr)
            if not ok.all():
                bad = raw[int(np.flatnonzero(~ok)[0])]
                raise ConfigError(f"parameter {p.name!r}={bad!r} is outside {p!r}")
            cols.append(arr)
        return cols

    @staticmethod
    def _plain(p: Param, col: np.ndarray) -> list[Any]:
        if isinstance(p, Categorical):
            return [p.choices[i] for i in col.tolist()]
        return col.astype(np.int64).tolist() if isinstance(p, Int) else col.tolist()

    # ------------------------------------------------------------------ the unit cube
    def to_unit(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Encode configurations as rows of an ``(n, dim)`` array in ``[0, 1]``."""
        out = np.empty((len(configs), self.dim))
        for j, (p, col) in enumerate(zip(self.params, self._columns(configs))):
            out[:, j] = p.encode_array(col)
        return out

    def from_unit(self, u: Any) -> list[dict[str, Any]]:
        """Decode rows of ``u`` (clipped to the cube) into configurations."""
        u = self._unit_rows(u)
        values = [self._plain(p, p.decode_array(u[:, j])) for j, p in enumerate(self.params)]
        return [dict(zip(self.names, row)) for row in zip(*values)]

    def snap(self, u: Any) -> np.ndarray:
        """What ``to_unit(from_unit(u))`` gives, without building configurations.

        Integers and choices become the centres of their cells, everything is clipped to
        the cube; two points that decode to the same configuration snap to the same row.
        """
        u = self._unit_rows(u)
        out = np.empty_like(u)
        for j, p in enumerate(self.params):
            out[:, j] = p.encode_array(p.decode_array(u[:, j]))
        return out

    def _unit_rows(self, u: Any) -> np.ndarray:
        u = np.atleast_2d(np.asarray(u, dtype=float))
        if u.ndim != 2 or u.shape[1] != self.dim:
            raise ConfigError(f"expected points with {self.dim} coordinates, got shape {u.shape}")
        return u

    def latin_hypercube(self, n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
        """A space-filling design of ``n`` configurations (scipy's optimised LHS).

        Designs of 3 points or fewer are not optimised: scipy's ``random-cd`` search then
        gains nothing and, for 3 points, can take seconds.
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ConfigError(f"n must be an integer >= 1 for a design, got {n!r}")
        optimise = self.dim > 1 and n > 3
        sampler = qmc.LatinHypercube(d=self.dim, rng=rng, optimization="random-cd" if optimise else None)
        return self.from_unit(sampler.random(int(n)))

    def sample(self, n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
        """``n`` independent uniform draws in the encoded cube."""
        return self.from_unit(rng.random((n, self.dim)))

    # ------------------------------------------------------------------ plain data
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe description (as long as categorical choices are JSON values)."""
        return {"params": [{"type": type(p).__name__, **asdict(p)} for p in self.params]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchSpace:
        """Rebuild :meth:`to_dict`'s output; raises :class:`ConfigError` if malformed."""
        try:
            params = []
            for entry in data["params"]:
                entry = dict(entry)
                kind = _KINDS[entry.pop("type")]
                if kind is Categorical:
                    entry["choices"] = tuple(entry["choices"])  # JSON turns tuples into lists
                params.append(kind(**entry))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"malformed search space description ({exc!r}): {data!r:.200}") from None
        return cls(tuple(params))
