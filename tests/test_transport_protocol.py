"""The boundary reaches a party only through its ``Transport`` protocol: any object with ``send``,
``submit`` and ``collect`` carries a client's messages (the HTTP one lives in ``raytune_fed.serve``);
anything else is refused with a line naming what was given."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from site_targets import OWNER, SCHEDULE, UNIT, X, Y, policy

from raytune_fed.errors import ConfigError
from raytune_fed.federation import Policy, Site, SiteClient, Transport, relay_site
from raytune_fed.serve import HttpTransport


class Recording:
    """A transport of one's own: hands each message to the party and keeps what crossed."""

    kind = "recording"

    def __init__(self, party: Site) -> None:
        self.party, self.sent = party, []

    def send(self, message: bytes) -> bytes:
        self.sent.append(len(message))
        return self.party.call(message)

    def submit(self, message: bytes) -> bytes:
        return self.send(message)

    def collect(self, pending: Sequence[Any]) -> list[bytes]:
        return list(pending)


def test_a_site_client_sends_through_any_transport(tmp_path):
    site = Site(X, Y, Policy.from_mapping(policy(tmp_path)), owner_secret=OWNER)
    transport = Recording(site)
    assert isinstance(transport, Transport) and isinstance(HttpTransport("http://127.0.0.1:9", "t" * 20), Transport)
    client = SiteClient(transport, name="s1")
    assert client.kind == "recording" and client.transport is transport
    assert client.declare_schedule(SCHEDULE).n_units == 2
    session = client.open_session(UNIT, "curator")
    assert session.status().n_queries == 0 and len(transport.sent) == 3
    site.stop()


@pytest.mark.parametrize("build", [lambda: SiteClient(object()), lambda: relay_site("http://127.0.0.1:9")])
def test_what_is_not_a_transport_is_refused(build):
    with pytest.raises(ConfigError, match=r"transport \(send, submit, collect.*got (object|str)$"):
        build()
