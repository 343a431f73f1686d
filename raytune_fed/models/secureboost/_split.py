"""Split finding on integer histograms (Algorithm 1's active-party step).

The active party's histogram of a node is two int64 vectors over its masks ``feature * K +
bin``: the fixed-point sums of gradients and hessians; cumulative sums over bins give every
"bin <= k" split at once (:func:`best_split`).  A passive party answers the left sums of
its candidate splits directly, in its own order (:func:`best_left_split`).  The gain is
XGBoost's without the 1/2 and gamma (as the CMOSB reference),
``GL^2/(HL+lambda) + GR^2/(HR+lambda) - G^2/(H+lambda)``.  Ties go to the lowest (feature,
bin), or the first candidate of a passive party's order; children need hessian sums of at
least ``min_child_weight``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SplitRule:
    reg_lambda: float
    min_child_weight: float
    min_split_gain: float
    scale: float          # 2**fraction_bits of the fixed-point codec


@dataclass(frozen=True)
class Candidate:
    """The best split of one party at one node (``mask = feature * K + bin``, or a passive party's candidate)."""

    gain: float
    mask: int
    party: int            # 0 = active, p >= 1 = passive party p


def best_split(hist_g: np.ndarray, hist_h: np.ndarray, n_bins: int, total_g: int, total_h: int,
               rule: SplitRule, party: int) -> Candidate | None:
    """The best valid split of a per-bin histogram, or None if no split passes the rules."""
    cg = np.cumsum(np.asarray(hist_g, dtype=np.int64).reshape(-1, n_bins), axis=1)[:, :-1]
    ch = np.cumsum(np.asarray(hist_h, dtype=np.int64).reshape(-1, n_bins), axis=1)[:, :-1]
    best = _best(cg, ch, total_g, total_h, rule)
    if best is None:
        return None
    feature, k = divmod(best[1], n_bins - 1)
    return Candidate(best[0], feature * n_bins + k, party)


def best_left_split(left_g: np.ndarray, left_h: np.ndarray, total_g: int, total_h: int, rule: SplitRule,
                    party: int) -> Candidate | None:
    """The best valid split among candidates given by their left sums (``mask``: the candidate's index)."""
    best = _best(np.asarray(left_g, dtype=np.int64), np.asarray(left_h, dtype=np.int64), total_g, total_h, rule)
    return None if best is None else Candidate(best[0], best[1], party)


def _best(cg: np.ndarray, ch: np.ndarray, total_g: int, total_h: int, rule: SplitRule) -> tuple[float, int] | None:
    if cg.size == 0:
        return None
    s, lam = rule.scale, rule.reg_lambda
    gl, hl = cg / s, ch / s
    gr, hr = (total_g - cg) / s, (total_h - ch) / s
    parent = (total_g / s) ** 2 / (total_h / s + lam)
    gain = gl ** 2 / (hl + lam) + gr ** 2 / (hr + lam) - parent
    valid = (hl >= rule.min_child_weight) & (hr >= rule.min_child_weight)
    gain = np.where(valid, gain, -np.inf)
    flat = int(np.argmax(gain))
    best = float(gain.ravel()[flat])
    if not best > rule.min_split_gain:
        return None
    return best, flat


def leaf_value(total_g: int, total_h: int, rule: SplitRule, learning_rate: float) -> float:
    """``-eta * G / (H + lambda)`` from the node's integer sums."""
    return float(-learning_rate * (total_g / rule.scale) / (total_h / rule.scale + rule.reg_lambda))


def purity(labels: np.ndarray, n_classes: int) -> float:
    """Share of the majority class among ``labels`` (1.0 for an empty set)."""
    if labels.size == 0:
        return 1.0
    return float(np.bincount(labels, minlength=n_classes).max() / labels.size)
