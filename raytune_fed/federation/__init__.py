"""Data sites and the records that cross their boundary.

In-process classes (usable directly in tests and by other workflows) and
:func:`remote_site` to run any of them as a Ray actor.
"""

from raytune_fed.federation._actors import remote_site
from raytune_fed.federation._clients import SiteClient, final_all, query_all
from raytune_fed.federation._host import ROLES, SiteHost
from raytune_fed.federation._openbox import OpenBox
from raytune_fed.federation._records import (
    RECORD_TYPES, FinalLosses, Ledger, LedgerEntry, Loss, SiteStatus, check_outgoing)
from raytune_fed.federation._roles import Curator, Lockbox, fingerprint

__all__ = [
    "RECORD_TYPES", "ROLES", "Curator", "FinalLosses", "Ledger", "LedgerEntry", "Lockbox", "Loss", "OpenBox",
    "SiteClient", "SiteHost", "SiteStatus", "final_all", "query_all", "check_outgoing", "fingerprint", "remote_site",
]
