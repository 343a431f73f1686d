"""Vertical partition of the feature columns among parties (vertical federated learning).

Party 0 is the *active* party (it also holds the labels); parties ``1 .. n_parties-1``
are *passive*.  Blocks are contiguous by default; ``shuffle=True`` deals a seeded random
permutation of the columns instead.  Every party gets at least one feature and the
blocks are disjoint and cover every column.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from raytune_fed._checks import check_int
from raytune_fed.errors import ConfigError
from raytune_fed.simulation._splits import _as_rng


def vertical_partition(n_features: int, n_parties: int, *, active_features: int | None = None,
                       seed=None, feature_names: Sequence[str] | None = None,
                       shuffle: bool = False) -> list[np.ndarray]:
    """Feature blocks, one per party, party 0 (active) first.

    ``active_features`` fixes how many columns the active party holds (the rest are split
    as evenly as possible among the passive parties); by default all parties get as
    equal a share as possible, the earlier parties taking the remainder.  Each block is
    sorted.  With ``feature_names`` (one name per column) the blocks hold names instead
    of column indices.  ``seed`` is required with ``shuffle=True`` and not used otherwise.
    """
    n_features = check_int("n_features", n_features, 2)
    n_parties = check_int("n_parties", n_parties, 2)
    if n_parties > n_features:
        raise ConfigError(f"n_parties must be <= n_features ({n_features}) so every party "
                          f"gets a feature, got n_parties={n_parties}")
    if not isinstance(shuffle, bool):
        raise ConfigError(f"shuffle must be True or False, got {shuffle!r}")
    names = None
    if feature_names is not None:
        names = np.asarray([str(f) for f in feature_names])
        if names.shape != (n_features,):
            raise ConfigError(f"feature_names must hold n_features={n_features} names, "
                              f"got {names.size}")

    columns = np.arange(n_features, dtype=np.int64)
    if shuffle:
        if seed is None:
            raise ConfigError("shuffle=True needs a seed (int, SeedSequence or Generator)")
        columns = _as_rng(seed).permutation(columns)

    if active_features is None:
        blocks = np.array_split(columns, n_parties)
    else:
        most = n_features - (n_parties - 1)
        if (not isinstance(active_features, (int, np.integer)) or isinstance(active_features, bool)
                or not 1 <= active_features <= most):
            raise ConfigError(f"active_features must be an int in 1..{most} (n_features={n_features}, "
                              f"n_parties={n_parties}), got {active_features!r}")
        blocks = [columns[:active_features],
                  *np.array_split(columns[active_features:], n_parties - 1)]
    blocks = [np.sort(b) for b in blocks]
    return blocks if names is None else [names[b] for b in blocks]
