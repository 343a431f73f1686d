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
passive party overwrites them with uniform noise before it answers, and floods the
result's ciphertext noise (the active party's noise times the mask polynomial, which the
key holder could divide out) with a wide uniform noise of its own.

Which masks an instance falls into is a :class:`OneHotMasks` (one mask per feature: the
instance's bin) or a :class:`ThresholdMasks` (mask "bin <= k" for every threshold ``k`` of a
feature, in an order only the passive party knows): either way the passive party sums each
mask's instances.

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

from raytune_fed.crypto._fixed import PLAIN_BITS
from raytune_fed.errors import ConfigError

POLY_DEGREE = 8192
MAX_BLOCK = 1024
_MODULUS = np.uint64(2 ** PLAIN_BITS - 1)


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


def plain_mask_sums(v: np.ndarray, mask_ids: np.ndarray, n_masks: int) -> np.ndarray:
    """Exact ``sum`` of packed values per mask, modulo ``2**59`` (30-bit halves summed in float64)."""
    ids = np.asarray(mask_ids, dtype=np.int64)
    n_features = ids.shape[1]
    lo = (v & np.uint64(2 ** 30 - 1)).astype(np.float64)
    hi = (v >> np.uint64(30)).astype(np.float64)
    flat = ids.ravel()
    lo_sum = np.bincount(flat, weights=np.repeat(lo, n_features), minlength=n_masks).astype(np.uint64)
    hi_sum = np.bincount(flat, weights=np.repeat(hi, n_features), minlength=n_masks).astype(np.uint64)
    return ((hi_sum << np.uint64(30)) + lo_sum) & _MODULUS


@dataclass(frozen=True)
class OneHotMasks:
    """``ids[j, f]``: the one mask instance ``j`` falls into for feature ``f`` (``feature * n_bins + bin``)."""

    ids: np.ndarray

    def touched(self, lo: int, hi: int, n_masks: int) -> np.ndarray:
        out = np.zeros(n_masks, dtype=bool)
        out[np.asarray(self.ids[lo:hi]).ravel()] = True
        return out

    def member(self, lo: int, hi: int, n_masks: int) -> np.ndarray:
        ids = np.asarray(self.ids[lo:hi])
        out = np.zeros((hi - lo, n_masks), dtype=bool)
        out[np.repeat(np.arange(hi - lo), ids.shape[1]), ids.ravel()] = True
        return out

    def sums(self, v: np.ndarray, n_masks: int) -> np.ndarray:
        return plain_mask_sums(v, self.ids, n_masks)


@dataclass(frozen=True)
class ThresholdMasks:
    """Instance ``j`` falls into mask ``slot_of[f * (K - 1) + k]`` for every ``k`` in ``[bins[j, f], K - 2]``.

    Mask "feature ``f``, threshold ``k``" sums the instances with ``bin <= k``: a split's left side.
    ``slot_of`` is a permutation of ``range(n_features * (K - 1))``: where each threshold's sum
    goes in the answer.
    """

    bins: np.ndarray
    n_bins: int
    slot_of: np.ndarray

    def _flat(self, member: np.ndarray, n_masks: int) -> np.ndarray:
        out = np.zeros(member.shape[:-2] + (n_masks,), dtype=member.dtype)
        out[..., self.slot_of] = member.reshape(member.shape[:-2] + (-1,))
        return out

    def touched(self, lo: int, hi: int, n_masks: int) -> np.ndarray:
        lowest = np.asarray(self.bins[lo:hi]).min(axis=0)
        return self._flat(lowest[:, None] <= np.arange(self.n_bins - 1), n_masks)

    def member(self, lo: int, hi: int, n_masks: int) -> np.ndarray:
        return self._flat(np.asarray(self.bins[lo:hi])[:, :, None] <= np.arange(self.n_bins - 1), n_masks)

    def sums(self, v: np.ndarray, n_masks: int) -> np.ndarray:
        bins = np.asarray(self.bins, dtype=np.int64)
        k = self.n_bins
        per_bin = plain_mask_sums(v, bins + np.arange(bins.shape[1]) * k, bins.shape[1] * k).reshape(-1, k)
        left = np.cumsum(per_bin, axis=1, dtype=np.uint64) & _MODULUS  # uint64 wraps modulo 2**64, a multiple
        return self._flat(left[:, :-1], n_masks)


Masks = OneHotMasks | ThresholdMasks


def as_masks(masks: Masks | np.ndarray) -> Masks:
    """``masks``, with an array of mask ids read as :class:`OneHotMasks`."""
    return masks if isinstance(masks, (OneHotMasks, ThresholdMasks)) else OneHotMasks(np.asarray(masks))


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

    def block_masks(self, masks: Masks | np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
        """For block ``b``: the mask groups that have set bits, and a ``(n_groups, N)`` 0/1 array.

        ``masks`` says which masks each instance falls into (an array of mask ids is
        :class:`OneHotMasks`: ``(n_values, n_features)``, ``feature * n_bins + bin``).
        """
        masks = as_masks(masks)
        lo, hi = b * self.block, min((b + 1) * self.block, self.n_values)
        if isinstance(masks, OneHotMasks):
            ids = np.asarray(masks.ids[lo:hi])
            j = np.arange(hi - lo)[:, None]
            group, slot = np.divmod(ids, self.masks_per_product)
            polys = np.zeros((self.n_groups, self.poly_degree), dtype=np.uint64)
            polys[group.ravel(), (slot * self.block + self.block - 1 - j).ravel()] = 1
            return np.unique(group), polys
        n_rows, n_slots = hi - lo, self.n_groups * self.masks_per_product
        member = np.zeros((n_rows, n_slots), dtype=bool)
        member[:, :self.n_masks] = masks.member(lo, hi, self.n_masks)
        by_group = member.T.reshape(self.n_groups, self.masks_per_product, n_rows)
        polys = np.zeros((self.n_groups, self.masks_per_product, self.block), dtype=np.uint64)
        polys[:, :, self.block - n_rows:] = by_group[:, :, ::-1]  # instance j at coefficient r B + B - 1 - j
        return np.flatnonzero(by_group.any(axis=(1, 2))), polys.reshape(self.n_groups, self.poly_degree)

    def _touched_groups(self, masks: Masks) -> list[np.ndarray]:
        return [np.unique(np.flatnonzero(masks.touched(lo, min(lo + self.block, self.n_values), self.n_masks))
                          // self.masks_per_product) for lo in range(0, self.n_values, self.block)]

    def n_products(self, masks: Masks | np.ndarray) -> int:
        """Plaintext products a histogram of ``masks`` takes (nonempty block/group pairs)."""
        masks = as_masks(masks)
        if isinstance(masks, OneHotMasks):
            ids = np.asarray(masks.ids)
            block_of = np.arange(self.n_values) // self.block
            group = ids // self.masks_per_product
            return int(np.unique(block_of[:, None] * self.n_groups + group).size)
        return int(sum(g.size for g in self._touched_groups(masks)))

    def used_groups(self, masks: Masks | np.ndarray) -> np.ndarray:
        """Mask groups with at least one set bit (the others return no ciphertext)."""
        masks = as_masks(masks)
        if isinstance(masks, OneHotMasks):
            return np.unique(np.asarray(masks.ids) // self.masks_per_product)
        return np.unique(np.concatenate(self._touched_groups(masks)))
