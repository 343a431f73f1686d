"""Operation counts of a training and the per-operation times that turn them into a cost.

The training cost of the CMOSB paper (eq. 5) is ``sum_op count_op * t_op``.  The paper's
Paillier scheme has encryptions, decryptions and additions; the coefficient-packed BFV
scheme adds plaintext products, which dominate its histogram work, so they are a fourth
term here.  Each time is "per operation as the protocol does it" (see
:func:`raytune_fed.crypto.calibrate`), so the cost includes encoding, number-theoretic
transforms and serialisation around the bare SEAL call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from raytune_fed.errors import ConfigError

OPERATIONS = ("encryptions", "decryptions", "additions", "products")


@dataclass
class OpCounts:
    """Mutable tally of homomorphic operations (one per party, summed for a training)."""

    encryptions: int = 0
    decryptions: int = 0
    additions: int = 0
    products: int = 0

    def add(self, other: OpCounts | Mapping[str, int]) -> OpCounts:
        """Add ``other`` in place and return self."""
        items = other.as_dict() if isinstance(other, OpCounts) else dict(other)
        for name in OPERATIONS:
            setattr(self, name, getattr(self, name) + int(items.get(name, 0)))
        return self

    def as_dict(self) -> dict[str, int]:
        return {name: int(getattr(self, name)) for name in OPERATIONS}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> OpCounts:
        unknown = sorted(set(values) - set(OPERATIONS))
        if unknown:
            raise ConfigError(f"unknown operation names {unknown}; known: {list(OPERATIONS)}")
        out = cls()
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"operation count {name!r} must be an int >= 0, got {value!r}")
            setattr(out, name, value)
        return out

    @property
    def total(self) -> int:
        return sum(self.as_dict().values())


def zero_seconds() -> dict[str, float]:
    """Wall-clock seconds per kind of operation, all zero (the BFV backend adds to them)."""
    return dict.fromkeys(OPERATIONS, 0.0)


@dataclass(frozen=True)
class OpTimes:
    """Seconds per operation; :meth:`cost` is eq. 5 of the CMOSB paper (plus products)."""

    encryption: float
    decryption: float
    addition: float
    product: float
    source: str = "given"

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name == "source":
                continue
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ConfigError(f"OpTimes.{f.name} must be a finite number of seconds >= 0, got {v!r}")
            object.__setattr__(self, f.name, float(v))

    def cost(self, counts: OpCounts) -> float:
        """Estimated seconds of homomorphic work for ``counts``."""
        return (counts.encryptions * self.encryption + counts.decryptions * self.decryption
                + counts.additions * self.addition + counts.products * self.product)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> OpTimes:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown OpTimes fields {unknown}; known: {sorted(known)}")
        try:
            return cls(**dict(values))
        except TypeError as exc:
            raise ConfigError(f"OpTimes needs {sorted(known - {'source'})}, got {sorted(values)}: {exc}") from None
