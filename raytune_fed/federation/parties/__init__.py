"""Parties of vertical federated learning (SecureBoost): active and passive, in-process or actors.

The :class:`ActiveParty` holds labels, its features and (per training) the only secret
key; a :class:`PassiveParty` holds its features and a public context.  They exchange only
the records of :mod:`raytune_fed.federation.parties._records`; :class:`PassiveClient` is
the active party's protocol handle on a passive party (object or actor), and
:func:`remote_party` starts either party as a Ray actor pinned by ``party:<name>``.
"""

from raytune_fed.federation.parties._active_party import ActiveParty
from raytune_fed.federation.parties._actors import remote_party
from raytune_fed.federation.parties._client import PassiveClient
from raytune_fed.federation.parties._passive_party import PassiveParty
from raytune_fed.federation.parties._records import (
    PARTY_RECORD_TYPES, EncryptedHistograms, OpTally, PartyInfo, RouteBits, RowIds, TrainingReport, TreeCells,
    ViewRecord, check_party_answer)

__all__ = [
    "PARTY_RECORD_TYPES", "ActiveParty", "EncryptedHistograms", "OpTally", "PartyInfo", "PassiveClient",
    "PassiveParty", "RouteBits", "RowIds", "TrainingReport", "TreeCells", "ViewRecord", "check_party_answer",
    "remote_party",
]
