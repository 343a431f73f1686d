"""Positive-unlabelled (PU) labels from fully labelled data (SCAR assumption).

Each positive row is labelled independently with probability ``c`` (the label
frequency); every negative and every unlucky positive stays unlabelled.
"""

from __future__ import annotations

import numpy as np

from raytune_fed.errors import SplitError
from raytune_fed._checks import check_share
from raytune_fed.simulation._splits import _as_labels, _as_rng


def make_pu(y, *, c: float, positive: int = 1, seed) -> np.ndarray:
    """PU indicator ``s`` (int8): 1 = labelled positive, 0 = unlabelled.

    ``c`` in ``(0, 1]``.  If the draw labels no positive at all, one positive chosen at
    random is labelled, so ``s`` always holds at least one 1; with no row of class
    ``positive`` in ``y`` this is impossible and :class:`SplitError` is raised.
    """
    labels = _as_labels(y)
    c = check_share("c", c, 0.0, 1.0, low_open=True)
    rng = _as_rng(seed)
    positives = np.flatnonzero(labels == positive)
    if positives.size == 0:
        raise SplitError(f"y has no row of the positive class {positive!r}; cannot label any "
                         f"(classes present: {np.unique(labels).tolist()})")
    s = np.zeros(labels.shape[0], dtype=np.int8)
    labelled = positives[rng.random(positives.size) < c]
    if labelled.size == 0:
        labelled = rng.choice(positives, size=1)
    s[labelled] = 1
    return s
