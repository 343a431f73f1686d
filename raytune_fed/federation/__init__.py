"""Restricted data sites and the records that cross their boundary.

* :class:`Site` - an RFMS data site (curator / lockbox per scheduled unit) under its
  owner's :class:`Policy` (read with :func:`load_policy`), with an append-only ledger,
  site-issued sessions, a query budget, one-shot finals, Thresholdout and the
  differencing guard.  It is reached only through :meth:`Party.call` (wire bytes in and
  out), the base every restricted party type builds on (:func:`restricted` declares a
  protocol method with typed request fields; :func:`register_record` declares another
  party type's answer records; :class:`Blob` carries ciphertext bytes with a declared
  size; :class:`PartyActor` runs any party as a Ray actor whose one method is ``call``).
* :class:`SiteClient` - the analyst's handle on a site through a :class:`Transport`: a local
  ``Site``, a Ray actor from :func:`remote_site` (or a :func:`relay_site` actor holding no
  data that forwards through a transport), or any other transport.
  :func:`query_all` / :func:`final_all` fan one model record out to several sessions.
* :class:`Schedule` / :class:`Unit` - what a grid declares to its sites once.
* :func:`start_sites` - every site of a simulated split started under one policy
  template, in-process or as actors (the grid plays their owners).
* :class:`OpenBox` - the analyst's own site (full access, local training).

This package is the trust boundary only: it holds no network code.  The network service,
the HTTP(S) transport, certificates, served-site clients and the ``site``/``party`` serve and
init commands are :mod:`raytune_fed.serve`, which imports this package (never the reverse).

Models travel as :class:`~raytune_fed.models.ModelRecord` (``Learner.encode``), never as
Python objects.
"""

from raytune_fed.federation._actors import PartyActor, SiteActor, SiteRelay, relay_site, remote_site
from raytune_fed.federation._clients import SiteClient, SiteSession, final_all, query_all
from raytune_fed.federation._fields import (
    Bytes,
    Field,
    Int,
    IntArray,
    ListOf,
    Model,
    Models,
    Real,
    Refusal,
    Struct,
    Text,
    Units,
)
from raytune_fed.federation._guard import DifferencingGuard
from raytune_fed.federation._openbox import OpenBox
from raytune_fed.federation._party import DEFAULT_ANALYST, REFUSALS, Party, Session, restricted
from raytune_fed.federation._policy import Policy, load_policy
from raytune_fed.federation._records import (
    RECORD_TYPES,
    Blob,
    Closed,
    FinalLosses,
    Ledger,
    LedgerEntry,
    Loss,
    ScheduleReceipt,
    SessionTicket,
    SiteStatus,
    check_outgoing,
    register_record,
)
from raytune_fed.federation._schedule import Schedule, Unit, rfms_schedule
from raytune_fed.federation._simulate import DEPLOYMENTS, SimulatedSites, site_policy, start_sites
from raytune_fed.federation._site import Site
from raytune_fed.federation._transports import ActorTransport, LocalTransport, Transport

__all__ = [
    "DEFAULT_ANALYST", "DEPLOYMENTS", "SimulatedSites", "site_policy", "start_sites",
    "RECORD_TYPES", "REFUSALS", "ActorTransport", "Blob", "Bytes", "Closed", "DifferencingGuard", "Field",
    "FinalLosses", "Int", "IntArray", "Ledger", "LedgerEntry", "ListOf", "LocalTransport", "Loss", "Model", "Models",
    "OpenBox", "Party", "PartyActor", "Policy", "Real", "Refusal", "Schedule", "Struct",
    "ScheduleReceipt", "Session", "SessionTicket", "Site", "SiteActor", "SiteClient", "SiteRelay", "SiteSession",
    "SiteStatus", "Text", "Transport", "Unit", "Units", "check_outgoing", "final_all", "load_policy",
    "query_all", "register_record", "relay_site", "remote_site", "restricted", "rfms_schedule",
]
