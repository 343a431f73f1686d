"""A site's own rows: checked once, copied, and made read-only."""

from __future__ import annotations

from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError


def site_data(name: str, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """Private read-only copies of ``X`` (float64, (n, p), finite) and ``y`` ((n,))."""
    X = np.array(X, dtype=float)
    y = np.array(y)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0] or X.shape[0] == 0:
        raise ConfigError(f"site {name!r}: need X of shape (n, p) and y of shape (n,), got {X.shape} and {y.shape}")
    if not np.isfinite(X).all():
        raise ConfigError(f"site {name!r}: X holds {int(np.size(X) - np.isfinite(X).sum())} NaN or infinite values")
    for a in (X, y):
        a.flags.writeable = False
    return X, y
