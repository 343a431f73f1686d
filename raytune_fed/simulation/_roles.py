"""Site roles in an RFMS scenario and the in-bag / out-bag split (RFMS paper, section 5.1).

One site is the *openbox* (its data are fully available to the analyst), one the
*lockbox* (queried once, at the very end) and the rest are *curators* (answer restricted
queries).  Every ordered (openbox, lockbox) pair is one scenario: 5 sites give 20.
The openbox and the curators are split into an in-bag part (80 % in the paper) used for
training and selection and an out-bag part kept for post-hoc evaluation; the lockbox
is used whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from raytune_fed._checks import check_int, check_share
from raytune_fed.errors import ConfigError, SplitError
from raytune_fed.simulation._splits import _as_labels, _as_rng


@dataclass(frozen=True)
class Roles:
    """Site codes of the openbox, the lockbox and the curators of one scenario."""

    openbox: int
    lockbox: int
    curators: tuple[int, ...]

    def __post_init__(self) -> None:
        every = (self.openbox, self.lockbox, *self.curators)
        if any(not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 0 for s in every):
            raise ConfigError(f"roles must be non-negative int site codes, got {every!r}")
        object.__setattr__(self, "curators", tuple(int(c) for c in self.curators))
        if len(set(every)) != len(every):
            raise ConfigError(f"a site can hold only one role: openbox={self.openbox}, "
                              f"lockbox={self.lockbox}, curators={self.curators}")


def role_assignments(n_sites: int) -> list[Roles]:
    """Every ordered (openbox, lockbox) pair, openbox-major; the other sites are curators.

    Needs ``n_sites >= 3`` so that each scenario has at least one curator.
    """
    n_sites = check_int("n_sites", n_sites, 3)
    out = []
    for openbox in range(n_sites):
        for lockbox in range(n_sites):
            if lockbox != openbox:
                curators = tuple(s for s in range(n_sites) if s not in (openbox, lockbox))
                out.append(Roles(openbox=openbox, lockbox=lockbox, curators=curators))
    return out


def inbag_outbag(y, *, inbag_fraction: float = 0.8, seed) -> tuple[np.ndarray, np.ndarray]:
    """Stratified random split of positions ``0 .. len(y)-1`` into (in-bag, out-bag).

    Per class, ``round(inbag_fraction * m)`` of its ``m`` rows go in-bag, clipped so that
    both parts keep at least one row of the class.  A class with fewer than two rows
    raises :class:`SplitError`.  Both returned index arrays are sorted (int64).
    """
    labels = _as_labels(y)
    inbag_fraction = check_share("inbag_fraction", inbag_fraction, 0.0, 1.0, low_open=True)
    if inbag_fraction >= 1.0:
        raise ConfigError(f"inbag_fraction must be in (0, 1), got {inbag_fraction!r}")
    rng = _as_rng(seed)
    inbag = []
    classes, counts = np.unique(labels, return_counts=True)
    for c, m in zip(classes, counts):
        if m < 2:
            raise SplitError(f"class {c} has {m} row(s); an in-bag / out-bag split needs >= 2")
        n_in = min(max(int(np.floor(inbag_fraction * m + 0.5)), 1), m - 1)
        inbag.append(rng.permutation(np.flatnonzero(labels == c))[:n_in])
    inbag_rows = np.sort(np.concatenate(inbag)).astype(np.int64)
    mask = np.ones(labels.shape[0], dtype=bool)
    mask[inbag_rows] = False
    return inbag_rows, np.flatnonzero(mask).astype(np.int64)
