"""How a node's packed gradients and the passive party's bin masks share SEAL polynomials.

Coefficient packing (no rotations, no Galois keys).  A node's instances are cut into
blocks of ``B`` (a power of two, at most ``max_block``); block ``b`` is encrypted as the
polynomial ``sum_i v_i X^i``.  A *mask* is one (feature, bin) pair of the passive party;
``R = N / B`` masks share one plaintext polynomial ``P = sum_r X^(r B) sum_j m_r[j]
X^(B - 1 - j)``.  In the negacyclic product ``V * P`` the coefficient ``r B + B - 1`` is
exactly ``sum_j v_j m_r[j]`` (the wrap-around only reaches coefficients ``0 .. B - 2``),
so one plaintext product sums ``R`` bins of a block at once; products for the same group
of masks are added over the node's blocks.  Every other coefficient of a result holds a
shifted partial sum that would tell the active party which instances share a bin, so the
passive party overwrites them with uniform noise before it answers.

The active party picks ``B`` per node (:func:`choose_block`) and tells the passive
party.  Per node with ``n`` instances and ``M`` masks: ``ceil(n / B)`` encryptions,
``<= ceil(n / B) * ceil(M / R)`` products (only blocks and groups with a set mask bit),
``ceil(M / R)`` result ciphertexts.  The plaintext backend uses the same layout to count
the operations the encrypted run would do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from raytune_fed.errors import ConfigError

POLY_DEGREE = 8192
MAX_BLOCK = 1024


# an encryption (active party) costs about twice a result ciphertext (mask, serialise, decrypt)
_ENCRYPTION_PER_RESULT = 2.0


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def _check(n_values: int, n_masks: int, block: int, poly_degree: int, name: str) -> None:
    if n_values < 1 or n_masks < 1:
        raise ConfigError(f"a histogram needs >= 1 instance and >= 1 mask, got {n_values} and {n_masks}")
    if block < 1 or block & (block - 1) or block > poly_degree // 2:
        raise ConfigError(f"{name} must be a power of two <= {poly_degree // 2}, got {block!r}")


def choose_block(n_values: int, n_masks: int, max_block: int = MAX_BLOCK, poly_degree: int = POLY_DEGREE) -> int:
    """Block size minimising ``t_enc * n / B + t_result * M B / N`` (power of two, <= ``max_block``).

    Small nodes get small blocks (many masks per product, few result ciphertexts); a
    node of 10,000 instances with 320 masks gets 512-1024.
    """
    _check(n_values, n_masks, max_block, poly_degree, "max_block")
    best = math.sqrt(_ENCRYPTION_PER_RESULT * n_values * poly_degree / n_masks)
    block = 1 << max(0, round(math.log2(max(best, 1.0))))
    return int(min(block, max_block, _next_pow2(n_values)))


@dataclass(frozen=True)
class Layout:
    """Blocks and mask groups for one node of ``n_values`` instances and ``n_masks`` masks."""

    n_values: int
    n_masks: int
    block: int
    poly_degree: int = POLY_DEGREE

    def __post_init__(self) -> None:
        _check(self.n_values, self.n_masks, self.block, self.poly_degree, "block")

    @classmethod
    def for_node(cls, n_values: int, n_masks: int, max_block: int = MAX_BLOCK,
                 poly_degree: int = POLY_DEGREE) -> Layout:
        """The layout with :func:`choose_block`'s block size."""
        return cls(int(n_values), int(n_masks), choose_block(n_values, n_masks, max_block, poly_degree), poly_degree)

    @property
    def masks_per_product(self) -> int:
        return self.poly_degree // self.block

    @property
    def n_blocks(self) -> int:
        return -(-self.n_values // self.block)

    @property
    def n_groups(self) -> int:
        return -(-self.n_masks // self.masks_per_product)

    def targets(self) -> np.ndarray:
        """Coefficient index of each mask slot ``r`` in a result polynomial."""
        r = np.arange(self.masks_per_product)
        return r * self.block + self.block - 1

    def block_masks(self, mask_ids: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
        """For block ``b``: the mask groups that have set bits, and a ``(n_groups, N)`` 0/1 array.

        ``mask_ids`` is ``(n_values, n_features)``: the mask (``feature * n_bins + bin``) of
        each instance for each feature.
        """
        lo, hi = b * self.block, min((b + 1) * self.block, self.n_values)
        ids = np.asarray(mask_ids[lo:hi])
        j = np.arange(hi - lo)[:, None]
        group, slot = np.divmod(ids, self.masks_per_product)
        polys = np.zeros((self.n_groups, self.poly_degree), dtype=np.uint64)
        polys[group.ravel(), (slot * self.block + self.block - 1 - j).ravel()] = 1
        return np.unique(group), polys

    def n_products(self, mask_ids: np.ndarray) -> int:
        """Plaintext products a histogram of ``mask_ids`` takes (nonempty block/group pairs)."""
        ids = np.asarray(mask_ids)
        block_of = np.arange(self.n_values) // self.block
        group = ids // self.masks_per_product
        pairs = np.unique(block_of[:, None] * self.n_groups + group)
        return int(pairs.size)

    def used_groups(self, mask_ids: np.ndarray) -> np.ndarray:
        """Mask groups with at least one set bit (the others return no ciphertext)."""
        return np.unique(np.asarray(mask_ids) // self.masks_per_product)
