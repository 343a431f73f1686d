"""Parties of vertical federated learning (SecureBoost): active and passive, in-process or actors.

The :class:`ActiveParty` holds labels, its features and (per training) the only secret
key; it is the analyst's own party.  A :class:`PassiveParty` holds its features and a
public context; it is a restricted :class:`~raytune_fed.federation.Party`, reached only
through ``call(bytes) -> bytes`` with the typed protocol of its ``@restricted`` methods
and answering only the records of :mod:`raytune_fed.federation.parties._records`.
:class:`PassiveClient` is the active party's handle on one passive session (a party
here, a party actor or another transport; the owner admits a training with
:meth:`PassiveClient.admit`), and :func:`remote_party` starts either party as a Ray
actor pinned by ``party:<name>`` (the passive one as a ``PartyActor`` whose only method
is ``call``).
"""

from raytune_fed.federation.parties._active_party import ActiveParty
from raytune_fed.federation.parties._actors import remote_party
from raytune_fed.federation.parties._client import PassiveClient
from raytune_fed.federation.parties._passive_party import PassiveParty
from raytune_fed.federation.parties._records import (
    PARTY_RECORD_TYPES,
    EncryptedHistograms,
    OpTally,
    PartyInfo,
    RouteBits,
    RowIds,
    SplitRows,
    TrainingReport,
    TreeCells,
    ViewRecord,
    check_party_answer,
)

__all__ = [
    "PARTY_RECORD_TYPES", "ActiveParty", "EncryptedHistograms", "OpTally", "PartyInfo", "PassiveClient",
    "PassiveParty", "RouteBits", "RowIds", "SplitRows", "TrainingReport", "TreeCells", "ViewRecord",
    "check_party_answer", "remote_party",
]
