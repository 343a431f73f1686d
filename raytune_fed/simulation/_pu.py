"""Positive-unlabelled (PU) labels from fully labelled data (SCAR assumption).

SCAR ("selected completely at random"): which positives get a label does not depend on
their features.  The label frequency ``c`` is the share of positives that are labelled,
``c = |P| / (|P| + pi |U|)`` in the ODE paper's notation (``pi`` = share of positives
among the unlabelled rows, so ``pi |U|`` counts the hidden positives).  Two draws:

``draw="exact"`` (what :func:`~raytune_fed.simulation.pu_split` uses)
    exactly ``round(c * n_pos)`` positives, chosen uniformly without replacement, are
    labelled: the paper's "random downsampling of positive samples" with ``c`` the ratio
    it defines.  A uniformly random subset is SCAR.
``draw="bernoulli"``
    each positive is labelled independently with probability ``c``.

Either way, a draw that labels no positive raises :class:`SplitError` (never a silent
"force one"): a PU learner needs at least one labelled positive.
"""

from __future__ import annotations

import numpy as np

from raytune_fed._checks import check_share
from raytune_fed.errors import ConfigError, SplitError
from raytune_fed.simulation._splits import _as_labels, _as_rng

PU_DRAWS = ("exact", "bernoulli")


def n_labelled(n_positives: int, c: float) -> int:
    """How many of ``n_positives`` the exact draw labels: ``round(c * n)``, halves rounding up."""
    return int(np.floor(c * n_positives + 0.5))


def make_pu(y, *, c: float, positive: int = 1, seed, draw: str = "bernoulli") -> np.ndarray:
    """PU indicator ``s`` (int8): 1 = labelled positive, 0 = unlabelled.

    ``c`` in ``(0, 1]``; ``draw`` is ``"bernoulli"`` or ``"exact"`` (module docstring).
    Raises :class:`SplitError` when ``y`` has no row of class ``positive`` or when the
    draw labels none of them.
    """
    labels = _as_labels(y)
    c = check_share("c", c, 0.0, 1.0, low_open=True)
    if draw not in PU_DRAWS:
        raise ConfigError(f"draw must be one of {PU_DRAWS}, got {draw!r}")
    rng = _as_rng(seed)
    positives = np.flatnonzero(labels == positive)
    if positives.size == 0:
        raise SplitError(f"y has no row of the positive class {positive!r}; cannot label any "
                         f"(classes present: {np.unique(labels).tolist()})")
    if draw == "exact":
        labelled = rng.choice(positives, size=n_labelled(positives.size, c), replace=False)
    else:
        labelled = positives[rng.random(positives.size) < c]
    if labelled.size == 0:
        raise SplitError(f"c={c:g} labelled none of the {positives.size} positives ({draw} draw); "
                         f"a PU problem needs at least one labelled positive: raise c or use more rows")
    s = np.zeros(labels.shape[0], dtype=np.int8)
    s[labelled] = 1
    return s
