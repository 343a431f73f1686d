"""Binary log-loss and multi-class softmax: raw scores, gradients and hessians.

Gradients lie in ``[-1, 1]`` and hessians in ``[0, 0.25]`` (what the fixed-point packing
of :mod:`raytune_fed.crypto` assumes).  Multi-class training grows one tree per class
per round (FATE 1.x "single output"), all from the same round-start scores.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, softmax

_EPS = 1e-12


def n_outputs(n_classes: int) -> int:
    """Trees per round: one for a binary task, one per class otherwise."""
    return 1 if n_classes == 2 else n_classes


def initial_scores(y: np.ndarray, n_classes: int) -> np.ndarray:
    """Log-odds (binary) or log class priors (multi-class), one row per output."""
    prior = np.bincount(y, minlength=n_classes) / y.size
    prior = np.clip(prior, _EPS, 1.0 - _EPS)
    if n_classes == 2:
        return np.array([np.log(prior[1] / prior[0])])
    return np.log(prior)


def probabilities(raw: np.ndarray, n_classes: int) -> np.ndarray:
    """Class probabilities ``(n, n_classes)`` from raw scores ``(n, n_outputs)``."""
    if n_classes == 2:
        p = expit(raw[:, 0])
        return np.column_stack([1.0 - p, p])
    return softmax(raw, axis=1)


def gradients(raw: np.ndarray, y: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(g, h)``, each ``(n, n_outputs)``: ``g = p - y``, ``h = p (1 - p)`` per output."""
    proba = probabilities(raw, n_classes)
    if n_classes == 2:
        p = proba[:, 1:]
        target = (y == 1)[:, None].astype(np.float64)
    else:
        p = proba
        target = np.zeros_like(p)
        target[np.arange(y.size), y] = 1.0
    return p - target, p * (1.0 - p)
