"""A small multi-site CSV for command-line tests (three sites a, b, c)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def write_sites_csv(path, rows_per_class=(30, 30, 30), *, n_features: int = 6, constant_site: str | None = None,
                    seed: int = 0) -> str:
    """Sites a, b, c with ``rows_per_class[i]`` rows of each class; columns x0.., label, site.

    Features are Gaussian, shifted by 0.8 for class 1; those of ``constant_site`` are all 1.0.
    """
    rng = np.random.default_rng(seed)
    parts = []
    for site, n in zip("abc", rows_per_class):
        y = np.repeat([0, 1], n)
        X = rng.normal(size=(2 * n, n_features)) + 0.8 * y[:, None]
        if site == constant_site:
            X[:] = 1.0
        parts.append(pd.DataFrame(X, columns=[f"x{i}" for i in range(n_features)]).assign(label=y, site=site))
    pd.concat(parts).to_csv(path, index=False)
    return str(path)
