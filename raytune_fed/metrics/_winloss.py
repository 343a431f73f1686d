"""Pairwise win/loss matrices over experiments (RFMS section 5.4.1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from raytune_fed.errors import ConfigError


def win_loss_matrix(scores: pd.DataFrame | Mapping[str, Sequence[float]], *, larger_is_better: bool = True,
                    atol: float = 1e-12) -> pd.DataFrame:
    """Count wins of each method (rows: winner) against each other (columns: loser).

    ``scores`` has one column per method and one row per experiment (e.g. hypervolumes).
    Per experiment and ordered pair a win counts 1, a tie (within ``atol``) ½ and a loss 0,
    summed over experiments.  Rows with a missing score for either method of a pair are
    left out of that pair.
    """
    df = pd.DataFrame(scores)
    if df.shape[1] < 2:
        raise ConfigError(f"a win/loss matrix needs at least two methods, got {list(df.columns)}")
    values = df.to_numpy(dtype=float)
    if not larger_is_better:
        values = -values
    names = [str(c) for c in df.columns]
    m = len(names)
    out = np.zeros((m, m))
    for a in range(m):
        for b in range(m):
            if a == b:
                continue
            va, vb = values[:, a], values[:, b]
            ok = np.isfinite(va) & np.isfinite(vb)
            diff = va[ok] - vb[ok]
            out[a, b] = np.sum(diff > atol) + 0.5 * np.sum(np.abs(diff) <= atol)
    return pd.DataFrame(out, index=pd.Index(names, name="winner"), columns=pd.Index(names, name="loser"))
