"""Homomorphic encryption for vertical SecureBoost (TenSEAL is imported only in this package).

The active party makes a :func:`secret_context` (it alone holds the secret key) and
hands passive parties the bytes of :meth:`SecretContext.public_context`; a passive party
loads them with :func:`load_public_context` and can only sum.  Gradients and hessians
are packed into one fixed-point integer per instance (:class:`GHCodec`), a node's
instances into few BFV polynomials (:class:`Layout`), and the passive party returns its
per-mask sums as node-compact ciphertexts with every coefficient it must not reveal
overwritten by noise and the ciphertext's own noise flooded (so the key holder cannot read
the masks from it either).  Ciphertexts cross parties only as :class:`Ciphertexts` (bytes with
a declared size).  ``scheme="plain"`` runs the same protocol without encryption and counts
the operations BFV would do.  :class:`OpCounts` tallies operations; :func:`calibrate`
measures seconds per operation on this machine (:data:`REFERENCE_OP_TIMES` are fixed ones), and
:meth:`OpTimes.cost` is eq. 5 of the
CMOSB paper.
"""

from raytune_fed.crypto._calibrate import REFERENCE_OP_TIMES, calibrate
from raytune_fed.crypto._contexts import (
    MissingSecretKeyError,
    PublicContext,
    SecretContext,
    check_scheme,
    load_public_context,
    secret_context,
)
from raytune_fed.crypto._counters import OPERATIONS, OpCounts, OpTimes
from raytune_fed.crypto._fixed import GHCodec
from raytune_fed.crypto._layout import (
    MAX_BLOCK,
    POLY_DEGREE,
    Layout,
    OneHotMasks,
    ThresholdMasks,
    choose_block,
    plain_mask_sums,
)
from raytune_fed.crypto._payload import SCHEMES, Ciphertexts

__all__ = [
    "MAX_BLOCK", "OPERATIONS", "POLY_DEGREE", "REFERENCE_OP_TIMES", "SCHEMES", "Ciphertexts", "GHCodec", "Layout",
    "MissingSecretKeyError", "OneHotMasks", "OpCounts", "OpTimes", "PublicContext", "SecretContext", "ThresholdMasks",
    "calibrate", "check_scheme", "choose_block", "load_public_context", "plain_mask_sums", "secret_context",
]
