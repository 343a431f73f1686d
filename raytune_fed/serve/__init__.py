"""The network stack that carries the trust boundary: services, transports, certificates, commands.

:mod:`raytune_fed.federation` is the boundary (records, fields, policy, ledger, sites and
parties, actors); this package serves it over the network and imports it, never the reverse.

* :func:`serve` / :class:`SiteServer` - any :class:`~raytune_fed.federation.Party` as an
  authenticated HTTP(S) service answering ``POST /call`` with :meth:`Party.call
  <raytune_fed.federation.Party.call>` (``raytune-fed site serve`` and ``raytune-fed party
  serve`` run it); :func:`log_to` writes the party's log to a rotated file.
* :class:`HttpTransport` - the boundary's :class:`~raytune_fed.federation.Transport` over
  HTTP(S) with a bearer token (give it to a ``SiteClient``, a ``PassiveClient`` or
  :func:`~raytune_fed.federation.relay_site`); :func:`read_token` reads a token file.
* :func:`service_client` - a :class:`~raytune_fed.federation.SiteClient` of a served site;
  :func:`load_site_directory` reads several from a sites file; :func:`check_reachable`
  checks one answers without sending a request.
* :func:`start_sites` - :func:`raytune_fed.federation.start_sites` plus the ``"service"``
  deployment (one ``site serve`` process per site).
* :func:`self_signed_certificate` - a certificate and key for a service's TLS.
"""

from raytune_fed.serve._certs import self_signed_certificate
from raytune_fed.serve._clients import check_reachable, load_site_directory, read_token, service_client
from raytune_fed.serve._http import CONTENT_TYPE, HttpTransport
from raytune_fed.serve._service import SiteServer, log_to, serve
from raytune_fed.serve._simulate import DEPLOYMENTS, start_sites

__all__ = [
    "CONTENT_TYPE", "DEPLOYMENTS", "HttpTransport", "SiteServer", "check_reachable", "load_site_directory", "log_to",
    "read_token", "self_signed_certificate", "serve", "service_client", "start_sites",
]
