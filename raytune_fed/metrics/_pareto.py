"""Pareto filtering and dominated hypervolume (minimisation)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pymoo.indicators.hv import HV

from raytune_fed.errors import ConfigError


def _as_points(points: Sequence[Sequence[float]] | np.ndarray, what: str = "points") -> np.ndarray:
    f = np.asarray(points, dtype=float)
    if f.ndim == 1 and f.size == 0:
        return f.reshape(0, 0)
    if f.ndim != 2:
        raise ConfigError(f"{what} must be a 2-D array (n_points, n_objectives), got shape {f.shape}")
    if not np.all(np.isfinite(f)):
        raise ConfigError(f"{what} contain non-finite values: {f[~np.isfinite(f).all(axis=1)][:3].tolist()}")
    return f


def pareto_mask(points: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """Boolean mask of the non-dominated rows (duplicates of a front point are all kept)."""
    f = _as_points(points)
    n = f.shape[0]
    if n == 0:
        return np.zeros(0, dtype=bool)
    # row j dominates row i when j <= i everywhere and j < i somewhere
    le = np.all(f[:, None, :] <= f[None, :, :], axis=2)  # le[j, i]: j <= i
    lt = np.any(f[:, None, :] < f[None, :, :], axis=2)
    dominated = np.any(le & lt, axis=0)
    return ~dominated


def pareto_front(points: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """The non-dominated rows, duplicates removed, in lexicographic order."""
    f = _as_points(points)
    if f.shape[0] == 0:
        return f
    return np.unique(f[pareto_mask(f)], axis=0)


def hypervolume(points: Sequence[Sequence[float]] | np.ndarray, reference: Sequence[float]) -> float:
    """Dominated hypervolume of ``points`` w.r.t. ``reference`` (points not below it add nothing)."""
    ref = np.asarray(reference, dtype=float)
    f = _as_points(points)
    if ref.ndim != 1 or not np.all(np.isfinite(ref)):
        raise ConfigError(f"reference point must be a finite vector, got {reference!r}")
    if f.shape[0] == 0:
        return 0.0
    if f.shape[1] != ref.size:
        raise ConfigError(f"points have {f.shape[1]} objectives but the reference point has {ref.size}")
    inside = f[np.all(f < ref, axis=1)]
    if inside.shape[0] == 0:
        return 0.0
    return float(HV(ref_point=ref)(pareto_front(inside)))
