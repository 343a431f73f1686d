"""numba kernels of :mod:`raytune_fed.models._forest`: ranking, growing, predicting.

All trees of a forest grow in one compiled call (no per-tree Python), each from its own
splitmix64 stream.  Split search per node and feature: when the node holds at least a
quarter as many draws as the feature has distinct values, draws are counted per distinct
value and the values scanned in order (ranger's "large q" path); otherwise the draws are
sorted by value.  Both visit the same candidates in the same order.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_LEAF = -1
_SMALL_SORT = 24  # insertion sort below this many draws in a node


@njit(cache=True)
def rank_columns(X):
    """Per feature: each row's rank among the distinct values, those values (padded), their count."""
    n_rows, n_features = X.shape
    ranks = np.empty((n_features, n_rows), np.int64)
    uniques = np.zeros((n_features, n_rows))
    n_unique = np.empty(n_features, np.int64)
    column = np.empty(n_rows)
    for f in range(n_features):
        for i in range(n_rows):
            column[i] = X[i, f]
        order = np.argsort(column, kind="mergesort")
        rank = -1
        for i in range(n_rows):
            x = column[order[i]]
            if i == 0 or x != uniques[f, rank]:
                rank += 1
                uniques[f, rank] = x
            ranks[f, order[i]] = rank
        n_unique[f] = rank + 1
    return ranks, uniques, n_unique


@njit(cache=True, inline="always")
def _next(state):
    """splitmix64: advance ``state[0]`` and return 64 random bits."""
    state[0] += np.uint64(0x9E3779B97F4A7C15)
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, inline="always")
def _below(state, n):
    """A uniform integer in [0, n)."""
    u = np.float64(_next(state) >> np.uint64(11)) * (1.0 / 9007199254740992.0)
    return min(np.int64(u * n), n - 1)


@njit(cache=True)
def _sort_keys(keys, m):
    if m <= _SMALL_SORT:
        for i in range(1, m):
            key = keys[i]
            j = i - 1
            while j >= 0 and keys[j] > key:
                keys[j + 1] = keys[j]
                j -= 1
            keys[j + 1] = key
    else:
        keys[:m].sort()


@njit(cache=True, inline="always")
def _decrease(counts, left_counts, n_left, m, n_classes):
    """ranger's Gini score of a split: sum_k l_k^2 / n_left + sum_k r_k^2 / n_right."""
    sum_left = 0.0
    sum_right = 0.0
    for k in range(n_classes):
        c_left = left_counts[k]
        c_right = counts[k] - c_left
        sum_left += c_left * c_left
        sum_right += c_right * c_right
    return sum_right / (m - n_left) + sum_left / n_left


@njit(cache=True, inline="always")
def _midpoint(low, high):
    """The split value between adjacent values: their mean, or ``low`` if the mean rounds to ``high``."""
    middle = (low + high) / 2.0
    return low if middle == high else middle


@njit(cache=True)
def _grow_tree(ranks, uniques, n_unique, codes, n_classes, mtry, min_node_size, n_draws, replace, state,
               feature, threshold, left, right, value, draws, keys, features, counts, left_counts, hist):
    """Grow one tree into the node arrays (local indices); return its node count.

    ``ranks[f, i]`` is row i's rank among the distinct values ``uniques[f]`` of feature f;
    a sort key ``rank << shift | class`` orders a node's draws by value and carries their
    class.  Nodes are processed in creation order, as ranger does.
    """
    n_rows = codes.shape[0]
    n_features = ranks.shape[0]
    shift = np.int64(1)
    while (np.int64(1) << shift) < n_classes:
        shift += 1
    mask = (np.int64(1) << shift) - 1
    if replace:
        for i in range(n_draws):
            draws[i] = _below(state, n_rows)
    else:
        perm = np.arange(n_rows)
        for i in range(n_draws):
            j = i + _below(state, n_rows - i)
            perm[i], perm[j] = perm[j], perm[i]
            draws[i] = perm[i]
    starts = np.empty(2 * n_draws, np.int64)
    ends = np.empty(2 * n_draws, np.int64)
    starts[0], ends[0] = 0, n_draws
    n_nodes = 1
    node = 0
    while node < n_nodes:
        start, end = starts[node], ends[node]
        m = end - start
        counts[:] = 0
        for i in range(start, end):
            counts[codes[draws[i]]] += 1
        n_present = 0
        for k in range(n_classes):
            n_present += counts[k] > 0
        best_feature = -1
        best_threshold = 0.0
        if m > min_node_size and n_present > 1:
            best = -1.0
            for i in range(mtry):  # partial Fisher-Yates: mtry distinct features
                j = i + _below(state, n_features - i)
                features[i], features[j] = features[j], features[i]
            for i in range(mtry):
                f = features[i]
                if 4 * m >= n_unique[f]:  # count draws per distinct value, then scan the values
                    for r in range(m):
                        row = draws[start + r]
                        hist[ranks[f, row], codes[row]] += 1
                    left_counts[:] = 0
                    n_left = 0
                    previous = -1
                    for rank in range(n_unique[f]):
                        n_here = 0
                        for k in range(n_classes):
                            n_here += hist[rank, k]
                        if n_here == 0:
                            continue
                        if previous >= 0:
                            decrease = _decrease(counts, left_counts, n_left, m, n_classes)
                            if decrease > best:
                                best, best_feature = decrease, f
                                best_threshold = _midpoint(uniques[f, previous], uniques[f, rank])
                        for k in range(n_classes):
                            left_counts[k] += hist[rank, k]
                            hist[rank, k] = 0
                        n_left += n_here
                        previous = rank
                        if n_left == m:
                            break
                    continue
                for r in range(m):  # few draws: sort them by value
                    row = draws[start + r]
                    keys[r] = (ranks[f, row] << shift) | codes[row]
                _sort_keys(keys, m)
                left_counts[:] = 0
                for r in range(m - 1):
                    left_counts[keys[r] & mask] += 1
                    rank, next_rank = keys[r] >> shift, keys[r + 1] >> shift
                    if rank == next_rank:
                        continue
                    decrease = _decrease(counts, left_counts, r + 1, m, n_classes)
                    if decrease > best:
                        best, best_feature = decrease, f
                        best_threshold = _midpoint(uniques[f, rank], uniques[f, next_rank])
        if best_feature < 0:
            feature[node], threshold[node], left[node], right[node] = _LEAF, 0.0, _LEAF, _LEAF
            for k in range(n_classes):
                value[node, k] = counts[k] / m
        else:
            lo, hi = start, end - 1  # partition: rows going left first
            while lo <= hi:
                row = draws[lo]
                if uniques[best_feature, ranks[best_feature, row]] <= best_threshold:
                    lo += 1
                else:
                    draws[lo], draws[hi] = draws[hi], draws[lo]
                    hi -= 1
            feature[node], threshold[node] = best_feature, best_threshold
            left[node], right[node] = n_nodes, n_nodes + 1
            starts[n_nodes], ends[n_nodes] = start, lo
            starts[n_nodes + 1], ends[n_nodes + 1] = lo, end
            n_nodes += 2
            value[node, :] = 0.0
        node += 1
    return n_nodes


@njit(cache=True)
def grow_forest(ranks, uniques, n_unique, codes, n_classes, mtry, min_node_size, n_draws, replace, tree_seeds):
    n_trees = tree_seeds.shape[0]
    capacity = 2 * n_draws - 1
    feature = np.empty(n_trees * capacity, np.int32)
    threshold = np.empty(n_trees * capacity, np.float64)
    left = np.empty(n_trees * capacity, np.int32)
    right = np.empty(n_trees * capacity, np.int32)
    value = np.empty((n_trees * capacity, n_classes), np.float64)
    offsets = np.zeros(n_trees + 1, np.int64)
    draws = np.empty(n_draws, np.int64)
    keys = np.empty(n_draws, np.int64)
    features = np.arange(ranks.shape[0])
    counts = np.empty(n_classes, np.int64)
    left_counts = np.empty(n_classes, np.int64)
    hist = np.zeros((codes.shape[0], n_classes), np.int64)
    state = np.empty(1, np.uint64)
    for t in range(n_trees):
        state[0] = tree_seeds[t]
        o = offsets[t]
        n_nodes = _grow_tree(ranks, uniques, n_unique, codes, n_classes, mtry, min_node_size, n_draws, replace, state,
                             feature[o:], threshold[o:], left[o:], right[o:], value[o:], draws, keys, features,
                             counts, left_counts, hist)
        offsets[t + 1] = o + n_nodes
    n = offsets[n_trees]
    return offsets, feature[:n].copy(), threshold[:n].copy(), left[:n].copy(), right[:n].copy(), value[:n].copy()


@njit(cache=True)
def predict_proba_kernel(X, offsets, feature, threshold, left, right, value):
    """Mean leaf value over trees; ``-1`` in ``bad[0]`` unless a walk left its tree or the columns."""
    n_trees = offsets.shape[0] - 1
    proba = np.zeros((X.shape[0], value.shape[1]))
    for t in range(n_trees):
        o = offsets[t]
        size = offsets[t + 1] - o
        if o < 0 or size < 1 or offsets[t + 1] > feature.shape[0]:
            return proba, t
        for i in range(X.shape[0]):
            node = 0
            while feature[o + node] >= 0:
                f = feature[o + node]
                child = left[o + node] if X[i, min(f, X.shape[1] - 1)] <= threshold[o + node] else right[o + node]
                if f >= X.shape[1] or child <= node or child >= size:
                    return proba, t
                node = child
            proba[i, :] += value[o + node, :]
    return proba / n_trees, -1
