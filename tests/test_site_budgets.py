"""What a site answers over its whole life: the lifetime budget, analyst credentials' shares,
the lockbox's one answer, final batch caps, and requests sent twice.

Pure tests drive a :class:`Site` in this process (an analyst credential is what the
transport passes to ``Site.call``); the service tests check the same through
``raytune-fed site serve`` with two analysts' token files.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from attack_kit import balls, refusal, stump
from site_targets import OWNER, SITE, X, Y, policy, start_service

from raytune_fed.errors import BudgetExhaustedError, QueryRefusedError, SealedError
from raytune_fed.federation import Policy, Schedule, Site, SiteClient, SiteSession, Unit, _wire
from raytune_fed.federation._transports import LocalTransport
from raytune_fed.serve import service_client

CURATOR_UNITS = [Unit("s0", "s2", (SITE,), r) for r in range(3)]
LOCKBOX_UNITS = [Unit("s0", SITE, ("s2",), r) for r in range(3)]
SCHEDULE = Schedule.of(CURATOR_UNITS + LOCKBOX_UNITS)


class AsAnalyst(LocalTransport):
    """A site in this process reached with the credential ``analyst`` (what the service does per token)."""

    def __init__(self, site: Site, analyst: str) -> None:
        super().__init__(site)
        self.analyst = analyst

    def submit(self, message: bytes) -> bytes:
        return self.party.call(message, analyst=self.analyst)


def _site(tmp_path, **sections):
    return Site(X, Y, Policy.from_mapping(policy(tmp_path, **sections)), owner_secret=OWNER)


def _client(site, analyst=None):
    client = SiteClient(site if analyst is None else AsAnalyst(site, analyst), name=SITE)
    client.declare_schedule(SCHEDULE)
    return client


def _models(n, seed=0):
    rng = np.random.default_rng(seed)
    return [balls(X[rng.choice(len(X), 60, replace=False)]) for _ in range(n)]


def test_every_answer_counts_against_the_lifetime_budget_across_units_and_restarts(tmp_path):
    site = _site(tmp_path, budget={"answers": 10})
    client = _client(site)
    cur = client.open_session(CURATOR_UNITS[0], "curator")
    for m in _models(3):
        cur.query(m)
    assert cur.final_evaluation(_models(2, seed=1)).n_rows == 32  # two models: two answers
    assert cur.status().budget_left == 5
    site.stop()  # the site's process ends
    restarted = _client(_site(tmp_path, budget={"answers": 10}))  # the same policy and ledger
    lb = restarted.open_session(LOCKBOX_UNITS[0], "lockbox")
    lb.final_evaluation(_models(2, seed=2))
    other = restarted.open_session(CURATOR_UNITS[1], "curator")
    answered = 0
    for m in _models(10, seed=3):
        try:
            other.query(m)
            answered += 1
        except BudgetExhaustedError:
            break
    assert answered == 3 and other.status().budget_left == 0
    # a final batch larger than what is left is refused before anything is computed, and not sealed
    fresh = restarted.open_session(CURATOR_UNITS[2], "curator")
    assert isinstance(refusal(lambda: fresh.final_evaluation(_models(1, seed=4))), BudgetExhaustedError)
    assert not fresh.status().sealed


def test_each_analyst_credential_has_its_share_and_its_own_sessions(tmp_path):
    site = _site(tmp_path, budget={"answers": 5, "per_analyst": 3}, analysts={"alice": {"answers": 2}})
    alice, bob = _client(site, "alice"), _client(site, "bob")
    a, b = alice.open_session(CURATOR_UNITS[0], "curator"), bob.open_session(CURATOR_UNITS[0], "curator")
    models = _models(8)
    a.query(models[0])
    a.query(models[1])
    assert isinstance(refusal(lambda: a.query(models[2])), BudgetExhaustedError)  # alice's 2
    for m in models[3:6]:
        b.query(m)
    assert isinstance(refusal(lambda: b.query(models[6])), BudgetExhaustedError)  # bob's 3 (per_analyst)
    assert a.status().budget_left == 0 and b.status().budget_left == 0
    # a session belongs to the credential that opened it: bob cannot spend or read alice's
    stolen = SiteSession(bob, a.ticket)
    assert refusal(stolen.status).code == "session"
    # and the site's own total (5) bounds every credential together
    carol = _client(site, "carol").open_session(CURATOR_UNITS[1], "curator")
    assert isinstance(refusal(lambda: carol.query(models[7])), BudgetExhaustedError)


@pytest.mark.parametrize("sections, answered", [
    ({}, 1),                                               # the default: once in the site's life
    ({"lockbox": {"max_answers": 2}}, 2),                  # the owner's explicit number
    ({"schedule": {"approved": SCHEDULE.digest}}, 3),       # one per lockbox unit of the approved schedule
    ({"schedule": {"approved": SCHEDULE.digest}, "lockbox": {"max_answers": 1}}, 1),
])
def test_the_lockbox_answers_once_unless_the_owners_policy_says_more(tmp_path, sections, answered):
    client = _client(_site(tmp_path, **sections))
    got = 0
    for unit in LOCKBOX_UNITS:
        try:
            client.open_session(unit, "lockbox").final_evaluation([stump(0, 0.0)])
            got += 1
        except SealedError:
            pass
    assert got == answered


def test_an_approved_schedule_is_the_only_one_the_site_accepts(tmp_path):
    site = _site(tmp_path, schedule={"approved": SCHEDULE.digest})
    client = SiteClient(site, name=SITE)
    bigger = Schedule.of([*SCHEDULE.units, Unit("s0", SITE, ("s2",), 9)])
    assert refusal(lambda: client.declare_schedule(bigger)).code == "schedule"
    assert client.declare_schedule(SCHEDULE).n_units == 6


def test_a_final_batch_is_capped_before_anything_is_computed(tmp_path):
    client = _client(_site(tmp_path))  # [final] max_models defaults to 8
    lb = client.open_session(LOCKBOX_UNITS[0], "lockbox")
    assert refusal(lambda: lb.final_evaluation(_models(9))).code == "malformed"
    status = lb.status()
    assert not status.sealed and status.budget_left == 20  # nothing charged, nothing used up
    assert lb.final_evaluation(_models(8)).n_rows == 160
    assert lb.status().budget_left == 12


def test_the_guard_applies_across_the_models_of_one_final_batch(tmp_path):
    """Two models of one batch fewer than k rows apart: the second's loss is withheld (and charged)."""
    client = _client(_site(tmp_path))  # guard k = 5
    rows = np.arange(60)
    near = [balls(X[rows]), balls(X[rows[:-2]])]  # differ on 2 rows
    final = client.open_session(LOCKBOX_UNITS[0], "lockbox").final_evaluation(near)
    assert final.values[0] is not None and final.values[1] is None


def test_a_request_sent_again_is_answered_from_the_ledger_not_charged_twice(tmp_path):
    """What a transport does when it retries across a restart: the same message (the same request
    number) gets the recorded reply, before and after the site restarts, and costs nothing more."""
    from raytune_fed.federation._fields import model_to_wire

    site = _site(tmp_path)
    client = _client(site)
    cur = client.open_session(CURATOR_UNITS[0], "curator")
    message = _wire.encode({"method": "query", "args": {"session": cur.token, "request": 7, "mechanism": "exact",
                                                        "model": model_to_wire(stump(0, 0.0))}})
    first = client.call_raw(message)
    assert client.call_raw(message) == first and cur.status().n_queries == 1
    site.stop()
    again = SiteClient(_site(tmp_path), name=SITE)  # restarted from the ledger
    assert again.call_raw(message) == first
    assert SiteSession(again, cur.ticket).status().n_queries == 1
    # another model under a used number gets the recorded answer back: nothing new is computed
    other = _wire.encode({"method": "query", "args": {"session": cur.token, "request": 7, "mechanism": "exact",
                                                      "model": model_to_wire(stump(1, 0.5))}})
    assert again.call_raw(other) == first
    lines = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    # counted, not a line each: the 1st, 2nd, 4th, ... replay since the site started
    assert [e["count"] for e in lines if e.get("code") == "replayed"] == [1, 1, 2]


@pytest.mark.process
def test_a_served_site_charges_each_analysts_token_to_its_own_share(tmp_path):
    for name in ("alice", "bob"):
        (tmp_path / f"{name}.token").write_text(f"{name}-token-" + "x" * 20 + "\n")
    data = policy(tmp_path, budget={"answers": 4},
                  analysts={"alice": {"token_file": "alice.token", "answers": 1},
                            "bob": {"token_file": "bob.token"}})
    data["analysts"] = {k: {**v, "token_file": str(tmp_path / v["token_file"])} for k, v in data["analysts"].items()}
    proc, url, _ = start_service(tmp_path, data, None)
    try:
        alice = service_client(url, token="alice-token-" + "x" * 20)
        bob = service_client(url, token="bob-token-" + "x" * 20)
        alice.declare_schedule(SCHEDULE)
        a, b = alice.open_session(CURATOR_UNITS[0], "curator"), bob.open_session(CURATOR_UNITS[0], "curator")
        models = _models(6)
        a.query(models[0])
        assert isinstance(refusal(lambda: a.query(models[1])), BudgetExhaustedError)
        for m in models[2:5]:
            b.query(m)
        assert isinstance(refusal(lambda: b.query(models[5])), BudgetExhaustedError)  # the site's 4 in all
        assert refusal(SiteSession(bob, a.ticket).status).code == "session"
        with pytest.raises(QueryRefusedError, match="HTTP 401"):  # a token no analyst of the policy holds
            service_client(url, token="not-a-token-0123456789").declare_schedule(SCHEDULE)
    finally:
        proc.terminate()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
