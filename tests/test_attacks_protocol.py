"""The analyst as attacker of the protocol: refusals, budgets, sessions, policy, transports.

Same setting as ``test_attacks.py``: one site in-process, as a Ray actor and as a TLS
service, the attacker holding only a :class:`SiteClient`.  The old behaviour each test
answers was measured by the one-off ``attacks_on_41bffa9.py`` (git history).
"""

from __future__ import annotations

import pickle
import re
import secrets

import numpy as np
import pytest
from attack_kit import FIXED_TEXTS, balls, box, forest, refusal, stump, with_arrays
from site_targets import LOCKBOX_UNIT, OWNER, SCHEDULE, UNIT, X, make_target, target, tls  # noqa: F401

from raytune_fed.errors import BudgetExhaustedError, QueryRefusedError, SealedError
from raytune_fed.federation import Schedule, Unit, _wire


def _probes(cur):
    """Every way the attacker found to make a site refuse a query."""
    yield with_arrays(stump(0, 0.0), coef=np.zeros(11))                     # wrong width
    yield with_arrays(stump(0, 0.0), keep=np.array([0, 0, 1], dtype="<i8"))  # repeated column
    yield with_arrays(stump(0, 0.0), keep=np.arange(5, 17, dtype="<i8"))     # column 16 of 12
    yield with_arrays(stump(0, 0.0), scale=-np.ones(12))                    # negative scale
    yield balls(X[0])                                                         # one row: the guard
    yield box(0, float(np.sort(X[:, 0])[2]), 1, 1e9)                          # three rows: the guard
    yield forest([(1, 2, 10 ** 9, 0.0), (-1, -1, -2, -2.0), (-1, -1, -2, -2.0)], [(1, 1), (1, 0), (0, 1)])


def test_refusal_texts_carry_no_data(make_target):
    """Old: numpy's exception text named the leaf a row fell in: one feature value read to
    1e-8 in 4 refused queries.  Refusals are fixed texts, the same on two sites whose rows
    differ, whatever the probe."""
    texts = []
    for shift in (0.0, 1.0):
        t = make_target("local")
        t.client._transport.party._X.flags.writeable = True  # the owner's second site: other rows
        t.client._transport.party._X[:] += shift
        t.client._transport.party._X.flags.writeable = False
        cur = t.curator()
        texts.append([str(refusal(lambda: cur.query(p))) for p in _probes(cur)])
    assert texts[0] == texts[1]
    for text in texts[0]:
        assert text.split(": ", 1)[1] in FIXED_TEXTS
        assert not re.search(r"\d", text.split(": ", 1)[1])


def test_raw_refusals_are_fixed_texts_in_every_deployment(target):
    """What the site itself sends back (not the client's rendering) is a code and its fixed text."""
    from raytune_fed.federation._fields import model_to_wire

    cur = target.curator()
    for probe in _probes(cur):
        message = _wire.encode({"method": "query", "args": {"session": cur.token, "mechanism": "exact",
                                                            "model": model_to_wire(probe)}})
        reply = _wire.decode(target.client.call_raw(message), max_bytes=1 << 20)
        assert set(reply) == {"refused"} and reply["refused"]["message"] in FIXED_TEXTS


def test_refusals_are_charged_and_logged_like_answers(target):
    """Old: a refusal was free, a yes/no oracle (column maximum by binary search; 15 of 32
    queries refused and uncharged).  Here each refused query costs one answer of the site's
    lifetime budget (20: an eighth of its rows) and is in the ledger, so the search stops there."""
    cur = target.curator()
    lo, hi = float(X[:, 0].min()), float(X[:, 0].max())
    asked = refused = 0
    while True:
        t = (lo + hi) / 2
        try:
            cur.query(stump(0, t))
            lo = t
        except BudgetExhaustedError:
            break
        except QueryRefusedError:
            refused += 1
            hi = t
        asked += 1
    status = cur.status()
    assert asked == 20 and status.budget_left == 0 and status.n_queries == 20
    entries = cur.ledger().entries
    assert len(entries) == 20 and sum(e.kind == "refused" for e in entries) == refused


def test_a_refused_final_batch_uses_up_the_lockbox(target):
    """Old: a final batch with one bad model was refused without sealing, so probing a
    lockbox was unlimited.  Here the first final request is the lockbox's one answer."""
    lb = target.lockbox()
    bad = with_arrays(stump(0, 0.0), coef=np.zeros(3))
    assert refusal(lambda: lb.final_evaluation([stump(0, 0.0), bad])).code == "record"
    err = refusal(lambda: lb.final_evaluation([stump(0, 0.0)]))
    assert isinstance(err, SealedError) and lb.status().sealed


def test_the_policy_is_the_sites_not_the_callers(target):
    """Old: the caller chose budget, seed, in-bag share (0.999: 158 of 160 rows) and role."""
    target.client.declare_schedule(SCHEDULE)
    for extra in ({"budget": 10 ** 9}, {"seed": 0}, {"inbag_fraction": 0.999}):
        message = _wire.encode({"method": "open_session",
                                "args": {"unit": UNIT.key, "role": "curator", **extra}})
        assert b"malformed" in target.client.call_raw(message)
    # a lockbox unit cannot be opened as a curator, nor a unit the site is not in
    assert refusal(lambda: target.client.open_session(LOCKBOX_UNIT, "curator")).code == "schedule"
    assert refusal(lambda: target.client.open_session(Unit("s0", "s2", ("s3",), 0), "curator")).code == "schedule"
    cur = target.client.open_session(UNIT, "curator")
    assert cur.n_rows == 128 and cur.status().budget_left == 20  # 0.8 of 160 rows; 160 // 8 lifetime answers


def test_a_new_session_gives_no_second_lockbox_answer(target):
    """Old: a new session id gave the lockbox a second and third answer on the same rows."""
    first = target.lockbox()
    assert first.final_evaluation([stump(0, 0.0)]).n_rows == 160
    for _ in range(3):
        again = target.client.open_session(LOCKBOX_UNIT, "lockbox")
        assert isinstance(refusal(lambda: again.final_evaluation([stump(1, 0.0)])), SealedError)
    # nor does another schedule with more units
    more = Schedule.of([*SCHEDULE.units, Unit("s0", "s1", ("s2",), 1)])
    assert refusal(lambda: target.client.declare_schedule(more)).code == "schedule"


def test_sessions_are_unguessable_owner_closed_and_logged_for_good(target):
    """Old: session ids were guessable strings; anyone could query, read or close another
    session, and closing discarded its ledger."""
    victim = target.curator()
    victim.query(stump(0, 0.0))
    token = victim.token
    assert len(token) >= 43 and token != target.curator().token
    guesses = [token[:-1] + ("A" if token[-1] != "A" else "B"), "rfms-" + "0" * 40, secrets.token_urlsafe(32)]
    for guess in guesses:
        message = _wire.encode({"method": "ledger", "args": {"session": guess}})
        assert b'"code":"session"' in target.client.call_raw(message)
    assert refusal(lambda: target.client.close_session(token, owner="not-the-owner-credential")).code == "owner"
    assert len(victim.ledger()) == 1  # still open, still logged
    target.client.close_session(token, owner=OWNER)
    assert refusal(victim.status).code == "session"
    lines = target.ledger.read_text().splitlines()
    assert sum('"event":"query"' in line for line in lines) == 1 and token not in target.ledger.read_text()


class Payload:
    """Unpickling this creates a file: proof that a pickle was loaded."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_pickled_payload_is_refused_without_being_loaded(target, tmp_path):
    """Old: an object with a __reduce__ payload ran inside the site actor.  A site reads
    only wire messages: a pickle sent as the message (or as a model) is never loaded."""
    proof = tmp_path / "payload-ran"
    pickled = pickle.dumps(Payload(str(proof)))
    assert b'"code":"malformed"' in target.client.call_raw(pickled)
    cur = target.curator()
    hidden = _wire.encode({"method": "query", "args": {"session": cur.token, "mechanism": "exact",
                                                        "model": {"learner": "svm", "config": {}, "arrays": pickled}}})
    reply = target.client.call_raw(hidden)
    assert b'"code":"malformed"' in reply
    assert not proof.exists()


@pytest.mark.process
def test_a_pickle_posted_to_the_service_is_not_loaded(make_target, tmp_path):
    """The same payload POSTed straight to the service, with and without the bearer token."""
    import http.client
    import ssl
    from urllib.parse import urlsplit

    t = make_target("service")
    proof = tmp_path / "payload-ran"
    body = pickle.dumps(Payload(str(proof)))
    url = urlsplit(t.client._transport.url)
    context = ssl.create_default_context(cafile=t.client._transport.cafile)
    statuses = []
    for auth in ("Bearer " + t.client._transport._token, "Bearer wrong-token-0123456789"):
        for ctype in ("application/x-raytune-fed", "application/python-pickle"):
            conn = http.client.HTTPSConnection(url.hostname, url.port, context=context, timeout=60)
            conn.request("POST", "/call", body=body, headers={"Authorization": auth, "Content-Type": ctype})
            response = conn.getresponse()
            statuses.append((response.status, response.read()))
            conn.close()
    assert statuses[0][0] == 200 and b'"code":"malformed"' in statuses[0][1]
    assert [s for s, _ in statuses[1:]] == [415, 401, 401]
    assert not proof.exists()
    assert t.curator().query(stump(0, 0.0)).n_rows == 128  # and it still serves


@pytest.mark.ray
def test_the_actor_exposes_only_call(make_target, ray_session):
    """Old: host._role.remote(session) returned the whole Curator, rows and labels included."""
    t = make_target("actor")
    t.curator()
    for name in ("_role", "_site", "_X", "status", "query", "ledger"):
        with pytest.raises(AttributeError):
            getattr(t.actor, name).remote()
    from raytune_fed.federation import SiteActor

    public = {n for n in vars(SiteActor) if not n.startswith("__")}
    assert public == {"call"}


def test_thousands_of_queries_stop_at_the_sites_budget(target):
    """Old: without a budget argument a curator answered 2000 queries.  The budget is the
    site's, counted over all sessions: new sessions do not refill it."""
    answered = 0
    for s in range(3):
        cur = target.client.open_session(UNIT, "curator") if s else target.curator()
        for i in range(2000):
            try:
                cur.query(balls(X[np.arange(i % 120, i % 120 + 30)]))
                answered += 1
            except BudgetExhaustedError:
                break
            except QueryRefusedError:
                continue
    assert answered <= 20 and cur.status().budget_left == 0
