"""Fixed-point packing of a gradient and a hessian into one integer (FATE's "GH packing").

Every instance's pair ``(g, h)`` becomes one integer modulo ``2**plain_bits``::

    v = round(g * 2**f) * 2**bits_h + round(h * 2**f)      (mod 2**plain_bits)

``g`` may be negative: the modulus is a power of two, so the top field is a two's
complement integer and sums of ``v`` carry into it exactly.  The fields are sized so that
the sum over up to ``n_max`` instances never overflows: the low field holds the sum of
hessians (``0 <= h <= h_max``), the top field the signed sum of gradients
(``|g| <= 1``).  ``f`` (fractional bits) is the largest value that fits, capped at 30.

Sums of packed values decode to the exact integer sums ``(sum gq, sum hq)``; every
party and both backends work on these integers, so encrypted and plaintext training make
bit-identical decisions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from raytune_fed.errors import ConfigError

PLAIN_BITS = 59          # the BFV plaintext modulus is 2**59 (SEAL allows at most 60 bits)
MAX_FRACTION_BITS = 30


def _field_bits(n_max: int, per_value: float) -> int:
    """Bits that hold the sum of ``n_max`` non-negative values each at most ``per_value``."""
    return max(1, math.ceil(math.log2(n_max * per_value + 1)))


@dataclass(frozen=True)
class GHCodec:
    """Packs ``(g, h)`` pairs; see the module docstring.  Build with :meth:`for_rows`."""

    fraction_bits: int
    bits_h: int
    n_max: int
    h_max: float
    plain_bits: int = PLAIN_BITS

    @classmethod
    def for_rows(cls, n_max: int, h_max: float = 0.25, plain_bits: int = PLAIN_BITS) -> GHCodec:
        """The most precise codec whose sums over ``n_max`` instances cannot overflow."""
        if n_max < 1:
            raise ConfigError(f"n_max must be >= 1, got {n_max!r}")
        for f in range(MAX_FRACTION_BITS, 5, -1):
            bits_h = _field_bits(n_max, h_max * 2.0 ** f + 0.5)
            bits_g = _field_bits(n_max, 2.0 ** f + 0.5) + 1  # one sign bit
            if bits_h + bits_g <= plain_bits:
                return cls(f, bits_h, int(n_max), float(h_max), plain_bits)
        raise ConfigError(f"{n_max} rows are too many for {plain_bits}-bit fixed-point sums of gradients")

    @property
    def scale(self) -> float:
        return float(2 ** self.fraction_bits)

    def quantise(self, g: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Integer gradients and hessians ``(round(g 2**f), round(h 2**f))`` as int64."""
        g = np.asarray(g, dtype=np.float64)
        h = np.asarray(h, dtype=np.float64)
        if g.size and (np.abs(g).max() > 1.0 or h.min() < 0.0 or h.max() > self.h_max):
            raise ConfigError(f"gradients must lie in [-1, 1] and hessians in [0, {self.h_max}] for packing, "
                              f"got g in [{g.min():.3g}, {g.max():.3g}], h in [{h.min():.3g}, {h.max():.3g}]")
        return np.rint(g * self.scale).astype(np.int64), np.rint(h * self.scale).astype(np.int64)

    def pack(self, gq: np.ndarray, hq: np.ndarray) -> np.ndarray:
        """One ``uint64`` per instance, each below ``2**plain_bits``."""
        top = np.mod(np.asarray(gq, dtype=np.int64), 2 ** (self.plain_bits - self.bits_h)).astype(np.uint64)
        return (top << np.uint64(self.bits_h)) | np.asarray(hq, dtype=np.uint64)

    def unpack_sums(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact ``(sum gq, sum hq)`` as int64 from sums of packed values (mod ``2**plain_bits``)."""
        v = np.asarray(v, dtype=np.uint64) & np.uint64(2 ** self.plain_bits - 1)
        hq = (v & np.uint64(2 ** self.bits_h - 1)).astype(np.int64)
        top_bits = self.plain_bits - self.bits_h
        top = (v >> np.uint64(self.bits_h)).astype(np.int64)
        gq = np.where(top >= 2 ** (top_bits - 1), top - 2 ** top_bits, top)
        return gq, hq
