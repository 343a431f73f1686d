"""The checks of SecureBoost's parameters, run once when ``fit`` is called."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from raytune_fed._checks import check_float, check_int, check_share
from raytune_fed.crypto import MAX_BLOCK, OpTimes, check_scheme
from raytune_fed.errors import ConfigError
from raytune_fed.random import as_seed_sequence


def check_params(p: Mapping[str, Any]) -> dict[str, Any]:
    """Normalised parameters; raises :class:`ConfigError` naming the first bad one."""
    out = dict(p)
    out["n_federated_trees"] = check_int("n_federated_trees", p["n_federated_trees"], 1)
    out["n_local_trees"] = check_int("n_local_trees", p["n_local_trees"], 0)
    out["max_depth"] = check_int("max_depth", p["max_depth"], 1, 12)
    out["learning_rate"] = check_share("learning_rate", p["learning_rate"], 0.0, 1.0, low_open=True)
    out["subsample"] = check_share("subsample", p["subsample"], 0.0, 1.0, low_open=True)
    out["purity_threshold"] = check_share("purity_threshold", p["purity_threshold"], 0.0, 1.0, low_open=True)
    out["reg_lambda"] = check_float("reg_lambda", p["reg_lambda"], 0.0)
    out["n_bins"] = check_int("n_bins", p["n_bins"], 2, 256)
    out["min_child_weight"] = check_float("min_child_weight", p["min_child_weight"], 0.0)
    if out["min_child_weight"] <= 0:
        raise ConfigError(f"min_child_weight must be > 0 (children must hold instances), got {p['min_child_weight']!r}")
    out["min_split_gain"] = check_float("min_split_gain", p["min_split_gain"], 0.0)
    out["he"] = check_scheme(p["he"])
    max_block = check_int("max_block", p["max_block"], 1, MAX_BLOCK * 4)
    if max_block & (max_block - 1):
        raise ConfigError(f"max_block must be a power of two, got {max_block!r}")
    out["max_block"] = max_block
    out["op_times"] = check_op_times(p["op_times"])
    as_seed_sequence(p["random_state"], "random_state")
    return out


def check_op_times(value: Any) -> OpTimes | None:
    if value is None or isinstance(value, OpTimes):
        return value
    if isinstance(value, Mapping):
        return OpTimes.from_dict(value)
    raise ConfigError(f"op_times must be None (calibrate on this machine), an OpTimes or a dict, got {value!r}")


def passive_blocks(spec: Any, n_features: int) -> list[np.ndarray]:
    """Column indices of each passive party; ``None`` gives the last half of the columns to one party."""
    if spec is None:
        if n_features < 2:
            raise ConfigError(f"vertical training needs >= 2 features to share between parties, got {n_features}")
        return [np.arange(n_features - n_features // 2, n_features)]
    blocks = list(spec)
    if blocks and all(isinstance(b, (int, np.integer)) and not isinstance(b, bool) for b in blocks):
        blocks = [blocks]
    out: list[np.ndarray] = []
    seen: set[int] = set()
    for b in blocks:
        cols = np.asarray(list(b))
        if cols.ndim != 1 or cols.size == 0 or not np.issubdtype(cols.dtype, np.integer):
            raise ConfigError(f"passive_features must be lists of column indices, got {spec!r}")
        if cols.min() < 0 or cols.max() >= n_features or len(set(cols.tolist())) != cols.size \
                or seen & set(cols.tolist()):
            raise ConfigError(f"passive_features must be distinct columns in [0, {n_features}), got {spec!r}")
        seen |= set(cols.tolist())
        out.append(np.sort(cols))
    if not out or len(seen) >= n_features:
        raise ConfigError(f"passive_features must leave the active party >= 1 column and name >= 1, got {spec!r}")
    return out
