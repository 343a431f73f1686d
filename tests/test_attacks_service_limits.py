"""The attacker against what a served site or party spends: CPU, the party's state, the log, the client.

* Other traffic in the service's process (a thread burning CPU while a query is scored) used to
  count against the query's CPU limit (``process_time``): a legitimate query was refused
  ``timeout`` and charged.  Now a request's CPU is its own thread's.
* A passive party answered any number of trees per session and per request, with no CPU limit:
  now both are capped (``MAX_TREES_PER_SESSION``) and a request is refused before the work.
* Unauthenticated junk (64 KiB request lines, plain HTTP to the TLS port) rotated the party's
  own entries out of its log, each non-TLS connection a traceback; a 413 mid-upload made the
  client resend for ``restart_wait``.

Each test is the attacker; each fails on the code before these limits.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from attack_kit import balls
from party_attacker import OWNER as PARTY_OWNER
from party_attacker import X_PASSIVE, deployed
from site_targets import OWNER, SCHEDULE, UNIT, X, Y, policy, tls  # noqa: F401 (tls: a fixture)

from raytune_fed.cli import main
from raytune_fed.crypto import Layout, choose_block, secret_context
from raytune_fed.errors import QueryRefusedError
from raytune_fed.federation import Party, Policy, Site, restricted
from raytune_fed.federation._records import Closed
from raytune_fed.federation.parties import PassiveClient, PassiveParty
from raytune_fed.models.secureboost import NodeQuery
from raytune_fed.serve import HttpTransport, log_to, serve, service_client
from raytune_fed.serve._service import LOG_BACKUPS

TOKEN = "analyst-token-" + "a" * 20


@contextmanager
def served(party: Any, certs: Any) -> Iterator[Any]:
    """``party`` as a TLS service in a thread of this process (the process under attack)."""
    server = serve(party, token=TOKEN, certfile=str(certs[0]), keyfile=str(certs[1]))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        getattr(party, "stop", lambda: None)()


def burn(cpu_seconds: float) -> None:
    """Use ``cpu_seconds`` of this thread's CPU (counted, not timed)."""
    stop = time.thread_time() + cpu_seconds
    while time.thread_time() < stop:
        sum(range(1000))


# -- 4. a request's CPU is its own ------------------------------------------------------------------


def _burning_site(tmp_path, monkeypatch, certs, *, where: str):
    """A site served over TLS whose scoring meets 0.6 CPU seconds burnt, against a limit of 0.25, either
    by another thread of its process while the query waits (``other``) or by the scoring thread (``own``)."""
    from raytune_fed.federation import _site

    real = _site.rebuild_model
    armed = threading.Event()

    def with_burner(*args: Any, **kwargs: Any) -> Any:
        if armed.is_set():
            if where == "other":
                burner = threading.Thread(target=burn, args=(0.6,))
                burner.start()
                burner.join()
            else:
                burn(0.6)
        return real(*args, **kwargs)

    monkeypatch.setattr(_site, "rebuild_model", with_burner)
    site = Site(X, Y, Policy.from_mapping(policy(tmp_path, limits={"seconds_per_query": 0.25})), owner_secret=OWNER)
    return site, armed


@pytest.mark.parametrize("where, expected", [("other", ["answered"] * 3), ("own", ["timeout"] * 3)])
def test_cpu_of_other_threads_is_not_charged_to_a_query(tmp_path, monkeypatch, tls, where, expected):  # noqa: F811
    """Another thread of the service's process burns 0.6 CPU s during each of 3 queries whose limit is
    0.25 s: all 3 answered (before: all refused ``timeout``, each charged).  The same CPU spent by the
    scoring thread itself is still refused: the limit holds where the work is."""
    site, armed = _burning_site(tmp_path, monkeypatch, tls, where=where)
    with served(site, tls) as server:
        client = service_client(server.url, token=TOKEN, cafile=tls[0], name="s1")
        client.declare_schedule(SCHEDULE)
        session = client.open_session(UNIT, "curator")
        rng = np.random.default_rng(0)
        half = lambda: balls(X[rng.choice(len(X), len(X) // 2, replace=False)])
        session.query(half())  # warm up (imports), unburnt
        armed.set()
        outcomes = []
        for _ in range(3):
            try:
                session.query(half())
                outcomes.append("answered")
            except QueryRefusedError as exc:
                outcomes.append(getattr(exc, "code", "?"))
    assert outcomes == expected


# -- 6. the passive party's limits ------------------------------------------------------------------


def _roots(client: Any, keys: Any, n_masks: int, trees: range) -> list[NodeQuery]:
    rows = np.arange(len(X_PASSIVE), dtype=np.int64)
    layout = Layout(rows.size, n_masks, choose_block(rows.size, n_masks))
    gh = keys.encrypt(np.ones(rows.size, dtype=np.uint64), layout)
    return [NodeQuery(0, -1, rows=rows, gh=gh, block=layout.block, tree=t) for t in trees]


def _opened(dep: Any, unit: str, scheme: str = "plain") -> tuple[Any, Any, int]:
    keys = secret_context(scheme)
    client = dep.admit(unit)
    n_masks = client.open_session(keys.public_context(), 8, np.arange(len(X_PASSIVE), dtype=np.int64))
    return client, keys, n_masks


def _code(fn: Any) -> str:
    try:
        fn()
    except QueryRefusedError as exc:
        return getattr(exc, "code", "?")
    return "answered"


@pytest.mark.parametrize("kind", ["local", "service"])
def test_a_session_grows_no_more_trees_than_its_cap(kind):
    """One new tree per request: the 4th past a cap of 3 is refused ``limit`` before any sum is computed (before:
    answered, up to 2^20 trees of state a session)."""
    with deployed(kind, max_trees=3) as dep:
        client, keys, n_masks = _opened(dep, "many-trees")
        codes, products = [], []
        for t in range(5):
            codes.append(_code(lambda t=t: client.histograms(_roots(client, keys, n_masks, range(t, t + 1)))))
            products.append(client.op_counts()["products"])
    assert codes == ["answered"] * 3 + ["limit"] * 2
    assert products[0] > 0 and products[2] == products[3] == products[4]  # the refused ones computed nothing


@pytest.mark.parametrize("kind", ["local", "service"])
def test_a_request_naming_too_many_trees_is_refused_before_the_work(kind):
    """A BFV request of 40 roots against a cap of 8 per request (an honest request names one round's trees, one per
    class): refused ``limit`` with no product computed, and the client says which limit (before: answered)."""
    with deployed(kind, max_trees_per_request=8) as dep:
        client, keys, n_masks = _opened(dep, "wide", scheme="bfv")
        with pytest.raises(QueryRefusedError, match="--max-trees-per-request") as refused:
            client.histograms(_roots(client, keys, n_masks, range(40)))
        assert refused.value.code == "limit"
        assert client.op_counts()["products"] == 0
        assert len(client.histograms(_roots(client, keys, n_masks, range(8)))) == 8  # honest width still answers


def test_a_request_over_the_partys_cpu_limit_is_refused_and_ends_its_session(monkeypatch):
    """Each sum costs 0.3 CPU s (burnt on the answering thread) against a limit of 0.25 s per request: a request of
    3 roots stops after the first sum, refused ``timeout``, and its half-built session answers nothing more
    (before: a passive party had no CPU limit, the request ran to its end)."""
    from raytune_fed.crypto import _contexts

    real, sums = _contexts.PlainPublicContext.histogram, []

    def costly(self: Any, *args: Any, **kwargs: Any) -> Any:
        sums.append(1)
        burn(0.3)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(_contexts.PlainPublicContext, "histogram", costly)
    with deployed("local", seconds_per_request=0.25) as dep:
        client, keys, n_masks = _opened(dep, "slow")
        with pytest.raises(QueryRefusedError, match="--seconds-per-request") as refused:
            client.histograms(_roots(client, keys, n_masks, range(3)))
        assert refused.value.code == "timeout" and len(sums) == 1
        assert _code(lambda: client.histograms(_roots(client, keys, n_masks, range(3, 4)))) == "session"


@pytest.mark.parametrize("extra, message", [
    (["--max-trees", "0"], "--max-trees must be an integer in [1, 1048576], got 0"),
    (["--max-trees-per-request", "0"], "--max-trees-per-request must be an integer in [1, 8192], got 0"),
    (["--seconds-per-request", "0"], "--seconds-per-request must be > 0, got 0.0"),
    (["--max-request-bytes", "10"], "--max-request-bytes must be an integer in [1024, 2147483648], got 10"),
])
def test_party_serve_refuses_bad_limits_with_one_line(tmp_path, capsys, extra, message):
    np.savez(tmp_path / "p.npz", X=X_PASSIVE)
    (tmp_path / "token").write_text("t" * 20)
    (tmp_path / "owner").write_text("o" * 20)
    code = main(["party", "serve", "--data", str(tmp_path / "p.npz"), "--token-file", str(tmp_path / "token"),
                 "--owner-token-file", str(tmp_path / "owner"), "--port", "0", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


# -- 7. the log and the client's resend loop --------------------------------------------------------


class Failing(Party):
    """A party one of whose methods always fails inside: its log gets the authenticated request's traceback."""

    def __init__(self) -> None:
        super().__init__("failing", ledger=None, owner_secret=None, max_request_bytes=1 << 20)

    @restricted(answers=Closed, session=False)
    def fail(self, _: None) -> Closed:
        raise RuntimeError("MARK-authenticated-entry")


def _junk(url: str, payload: bytes, certs: Any, *, tls_on: bool = True) -> None:
    """One connection that sends ``payload`` (over TLS or not) and reads until the service closes it."""
    host, port = url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as raw:
        conn = raw
        if tls_on:
            conn = ssl.create_default_context(cafile=str(certs[0])).wrap_socket(raw, server_hostname=host)
        conn.sendall(payload)
        try:
            for _ in range(1000):
                if not conn.recv(1 << 16):
                    break
        except OSError:  # reset or TLS alert: closed either way
            pass


@pytest.fixture
def logged(tmp_path):
    log = logging.getLogger("raytune_fed.federation")
    level, propagate = log.level, log.propagate
    handler = log_to(tmp_path / "site.log")
    yield tmp_path
    log.removeHandler(handler)
    handler.close()
    log.setLevel(level)
    log.propagate = propagate


def test_unauthenticated_junk_cannot_rotate_the_log(logged, tls):  # noqa: F811
    """One authenticated request that fails inside (its traceback in the log), then 70 connections without a
    token sending a 64 KiB request line and 8 speaking plain HTTP to the TLS port: the authenticated entry
    is still in the log files and the junk added a few short lines, no traceback (before: 70 x 64 KiB pushed it
    out of all four files, each plain connection a traceback)."""
    from raytune_fed.federation import _wire

    with served(Failing(), tls) as server:
        transport = HttpTransport(server.url, TOKEN, cafile=str(tls[0]))
        reply = _wire.decode(transport.send(_wire.encode({"method": "fail", "args": {}})), max_bytes=1 << 20)
        assert reply["refused"]["code"] == "internal"
        for _ in range(70):
            _junk(server.url, b"A" * 65000 + b"\r\n", tls)
        for _ in range(8):
            _junk(server.url, b"POST /call HTTP/1.1\r\nHost: x\r\n\r\n", tls, tls_on=False)
    files = sorted(logged.glob("site.log*"))
    text = "".join(f.read_text(errors="replace") for f in files)
    assert "MARK-authenticated-entry" in text
    assert len(files) <= 1 + LOG_BACKUPS and sum(f.stat().st_size for f in files) < 20_000
    assert text.count("Traceback") == 1  # the authenticated failure's, none for the plain connections
    assert max(len(line) for line in text.splitlines()) < 400


def test_a_413_ends_the_clients_resend_loop_at_once(tls):  # noqa: F811
    """The service answers 413 to a message over its size and closes mid-upload: the client makes one attempt and
    fails with the status (before: it resent for ``restart_wait``, here ~a dozen attempts in 30 s)."""
    party = PassiveParty(X_PASSIVE, owner_secret=PARTY_OWNER, max_request_bytes=1 << 20)
    with served(party, tls) as server:
        transport = HttpTransport(server.url, TOKEN, cafile=str(tls[0]), restart_wait=30)
        client = PassiveClient.admit(transport, owner=PARTY_OWNER, unit="big")  # the service has answered
        attempts = []
        connect = transport._connection
        transport._connection = lambda: attempts.append(1) or connect()
        big = secret_context("plain").public_context() + b"\0" * (8 << 20)
        with pytest.raises(QueryRefusedError, match="HTTP 413") as refused:
            client.open_session(big, 8, np.arange(len(X_PASSIVE), dtype=np.int64))
    assert len(attempts) == 1 and "request too large" in str(refused.value)
