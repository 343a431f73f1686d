"""Sites as they were before restricted sites (pickled pipelines, caller-chosen policy).

Kept only so the RFMS grid runs until it moves onto :class:`raytune_fed.federation.Site`;
these classes do not hold against a malicious analyst (see the README's trust model) and
are removed when RFMS moves.
"""

from raytune_fed.federation.legacy._actors import remote_site
from raytune_fed.federation.legacy._clients import SiteClient, final_all, query_all
from raytune_fed.federation.legacy._host import ROLES, SiteHost
from raytune_fed.federation.legacy._roles import Curator, Lockbox, fingerprint
from raytune_fed.federation._openbox import OpenBox

__all__ = ["ROLES", "Curator", "Lockbox", "OpenBox", "SiteClient", "SiteHost", "final_all", "fingerprint",
           "query_all", "remote_site"]
