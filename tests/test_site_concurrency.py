"""A site answers many requests at once: scoring runs in parallel, charging and recording keep one order.

The rule (``raytune_fed.federation.Party``): a ``query`` or ``final_evaluation`` is charged under the
site's lock and takes the next admission number, scores its model without the lock, and is checked by
the guard, run through Thresholdout and written to the ledger under the lock again in admission order.
So the ledger lists charged requests in admission order, and each answer is the one a site answering
one request at a time gives when the requests arrive in that order.  The tests check that rule with
the guard and Thresholdout on (where answers depend on order), that order does not matter where
nothing depends on it, that scoring really overlaps (requests meet at a barrier inside ``_score``,
which the old one-lock site never let two requests reach at once), that the budget is never
overspent, and that a request sent again while its first copy is still scoring is charged once.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from attack_kit import balls
from site_targets import OWNER, SCHEDULE, SITE, UNIT, X, Y, policy

from raytune_fed.federation import Policy, Site, SiteClient, _wire
from raytune_fed.federation._fields import model_to_wire

N_THREADS = 8


class MeetingSite(Site):
    """A real site whose scoring first waits until ``meet`` requests are scoring at the same time."""

    def __init__(self, *args: Any, meet: int, **kwargs: Any) -> None:
        self.barrier = threading.Barrier(meet, timeout=60)
        super().__init__(*args, **kwargs)

    def _score(self, record: Any, rows: np.ndarray, fingerprint: str) -> np.ndarray:
        self.barrier.wait()  # broken (an internal refusal) unless `meet` requests score at once
        return super()._score(record, rows, fingerprint)


class HeldSite(Site):
    """A real site whose scoring waits for ``release``; ``entered`` counts the requests that began scoring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.release, self.entered, self._count = threading.Event(), threading.Event(), threading.Lock()
        self.n_scored = 0
        super().__init__(*args, **kwargs)

    def _score(self, record: Any, rows: np.ndarray, fingerprint: str) -> np.ndarray:
        with self._count:
            self.n_scored += 1
        self.entered.set()
        self.release.wait(timeout=60)
        return super()._score(record, rows, fingerprint)


def _site(tmp_path: Path, name: str, cls: type = Site, **kwargs: Any) -> Site:
    """A site on the tests' policy (lifetime answers raised to 1000: every query reaches scoring) plus ``sections``."""
    sections = {"budget": {"answers": 1000}, **kwargs.pop("sections", {})}
    data = policy(tmp_path, **sections)
    data["ledger"] = str(tmp_path / f"{name}.jsonl")
    return cls(X, Y, Policy.from_mapping(data), owner_secret=OWNER, **kwargs)


def _session(site: Site) -> str:
    client = SiteClient(site, name=SITE)
    client.declare_schedule(SCHEDULE)
    return client.open_session(UNIT, "curator").token


def _queries(n: int, *, mixed: bool) -> list[dict[str, Any]]:
    """``n`` queries of distinct random-half models; ``mixed``: every other one goes through Thresholdout,
    and two of every four repeat the model of an exact query before them, once exactly (the guard refuses
    whichever copy comes second) and once through Thresholdout (let through after the exact answer)."""
    rng = np.random.default_rng(5)
    models = [balls(X[rng.choice(len(X), len(X) // 2, replace=False)]) for _ in range(n)]
    out = []
    for i in range(n):
        model = models[i - i % 4] if mixed and i % 4 in (2, 3) else models[i]
        if mixed and i % 2:
            out.append({"model": model_to_wire(model), "mechanism": "thresholdout",
                        "train_loss": float(rng.uniform(0.1, 0.5))})
        else:
            out.append({"model": model_to_wire(model), "mechanism": "exact"})
    return out


def _message(token: str, number: int, query: dict[str, Any]) -> bytes:
    return _wire.encode({"method": "query", "args": {"session": token, "request": number, **query}})


def _outcome(reply: bytes) -> Any:
    """An answer's value, or a refusal's code (``Loss.seconds`` is the site's own timing, not the answer)."""
    data = _wire.decode(reply, max_bytes=1 << 30)
    if "refused" in data:
        return ("refused", data["refused"]["code"])
    return ("answer", data["answer"]["fields"]["value"])


def _ledger(site: Site) -> list[dict[str, Any]]:
    """The site's charged lines without what a run cannot repeat (time, hash chain, session token, timings)."""
    out = []
    for entry in site._ledger.entries:
        if not entry.get("charged"):
            continue
        entry = {k: v for k, v in entry.items() if k not in ("seq", "time", "prev", "session")}
        if "reply" in entry:
            entry["reply"] = {k: v for k, v in entry["reply"]["fields"].items() if k != "seconds"}
        out.append(entry)
    return out


def _concurrently(site: Site, messages: dict[int, bytes], n_threads: int = N_THREADS) -> dict[int, bytes]:
    todo: queue.Queue[tuple[int, bytes]] = queue.Queue()
    for item in messages.items():
        todo.put(item)
    replies: dict[int, bytes] = {}

    def work() -> None:
        while True:
            try:
                number, message = todo.get_nowait()
            except queue.Empty:
                return
            replies[number] = site.call(message)

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return replies


def test_requests_score_at_the_same_time(tmp_path):
    """Eight queries meet at a barrier inside the site's scoring: all eight are scoring at once (the old
    site held its one lock through scoring, so the barrier broke and every query was refused)."""
    site = _site(tmp_path, "meet", MeetingSite, meet=N_THREADS, sections={"guard": {"k": 0}})
    token = _session(site)
    queries = _queries(N_THREADS, mixed=False)
    replies = _concurrently(site, {i + 1: _message(token, i + 1, q) for i, q in enumerate(queries)})
    assert [_outcome(r)[0] for r in replies.values()] == ["answer"] * N_THREADS
    assert sorted(e["request"] for e in site._ledger.entries if e["event"] == "query") == list(range(1, 9))


@pytest.mark.parametrize("mixed", [False, True], ids=["order-free", "guard-and-thresholdout"])
def test_concurrent_answers_are_the_serial_answers_in_admission_order(tmp_path, mixed):
    """32 queries from 8 threads, scored 8 at a time (a barrier), against the same queries sent one at a
    time, in the order the concurrent site's ledger admitted them, to a fresh site with the same policy:
    the same answer to every request and the same ledger line for line.  With the guard off and exact
    answers only, order does not matter: the answers also equal a serial run in request order."""
    sections = {} if mixed else {"guard": {"k": 0}}
    queries = _queries(32, mixed=mixed)
    site = _site(tmp_path, "concurrent", MeetingSite, meet=N_THREADS, sections=sections)
    token = _session(site)
    replies = _concurrently(site, {i + 1: _message(token, i + 1, q) for i, q in enumerate(queries)})
    admitted = [e["request"] for e in site._ledger.entries if e.get("charged")]
    assert sorted(admitted) == list(range(1, 33))  # every request charged exactly once

    serial = _site(tmp_path, "serial", sections=sections)
    serial_token = _session(serial)
    serial_replies = {n: serial.call(_message(serial_token, n, queries[n - 1])) for n in admitted}
    assert {n: _outcome(r) for n, r in replies.items()} == {n: _outcome(r) for n, r in serial_replies.items()}
    assert _ledger(site) == _ledger(serial)
    outcomes = [_outcome(r)[1] for r in replies.values()]
    if mixed:  # the order-dependent parts were exercised: the guard refused repeats, Thresholdout answered
        assert "guard" in outcomes and any(e.get("th") for e in site._ledger.entries)
    else:
        in_order = _site(tmp_path, "in_order", sections=sections)
        in_order_token = _session(in_order)
        by_number = {n: _outcome(in_order.call(_message(in_order_token, n, q))) for n, q in
                     enumerate(queries, 1)}
        assert by_number == {n: _outcome(r) for n, r in replies.items()}


def test_a_restarted_site_replays_the_concurrent_ledger(tmp_path):
    """The ledger written by concurrent requests is a valid ledger: a restarted site loads it, has the same
    budget use and guard, and answers a request sent again from the ledger without charging it."""
    queries = _queries(16, mixed=True)
    site = _site(tmp_path, "life", MeetingSite, meet=N_THREADS)
    token = _session(site)
    replies = _concurrently(site, {i + 1: _message(token, i + 1, q) for i, q in enumerate(queries)})
    site.stop()
    again = _site(tmp_path, "life")
    lines = len(again._ledger.entries)
    assert again._budget_used == 16 and len(again._guard) == len(site._guard)
    assert again.call(_message(token, 7, queries[6])) == replies[7]  # from the ledger, byte for byte
    assert again._budget_used == 16 and all(e["event"] == "uncharged" for e in again._ledger.entries[lines:])


def test_a_request_sent_again_while_it_is_scoring_is_charged_once(tmp_path):
    """Eight copies of one message (one request number) at once: the first is scored, the other seven wait
    for its answer and get it back; one query line, one query charged."""
    site = _site(tmp_path, "held", HeldSite)
    token = _session(site)
    message = _message(token, 42, _queries(1, mixed=False)[0])
    replies: list[bytes] = []
    lock = threading.Lock()

    def send() -> None:
        reply = site.call(message)
        with lock:
            replies.append(reply)

    threads = [threading.Thread(target=send) for _ in range(N_THREADS)]
    threads[0].start()
    assert site.entered.wait(timeout=60)
    for t in threads[1:]:
        t.start()
    time.sleep(0.5)  # let the copies arrive while the first is still scoring (not a timing assertion)
    site.release.set()
    for t in threads:
        t.join(timeout=600)
    assert len(replies) == N_THREADS and len({_outcome(r) for r in replies}) == 1
    assert _outcome(replies[0])[0] == "answer"
    assert site.n_scored == 1 and site._budget_used == 1
    assert [e["event"] for e in site._ledger.entries].count("query") == 1


def test_a_time_limit_counts_each_scoring_threads_cpu(tmp_path):
    """Eight queries scoring at once, each of an SVM of 100,000 support vectors (seconds of CPU) against a
    limit of 0.05 CPU seconds per query: each is refused ``timeout``, charged and recorded.  The limit is
    the request thread's own CPU, and the query scores on that thread, outside the site's lock."""
    site = _site(tmp_path, "limit", sections={"guard": {"k": 0}, "limits": {"seconds_per_query": 0.05}})
    token = _session(site)
    rng = np.random.default_rng(9)
    heavy = [{"model": model_to_wire(balls(X[rng.choice(len(X), 100_000)] + rng.normal(0, 1e-3, (100_000, 12)))),
              "mechanism": "exact"} for _ in range(N_THREADS)]
    replies = _concurrently(site, {i + 1: _message(token, i + 1, q) for i, q in enumerate(heavy)})
    assert {_outcome(r) for r in replies.values()} == {("refused", "timeout")}
    assert site._budget_used == N_THREADS
    assert [e.get("code") for e in site._ledger.entries if e.get("charged")] == ["timeout"] * N_THREADS


def test_a_threaded_site_actor_answers_exactly_its_budget(ray_session, tmp_path):
    """40 queries sent at once to a site actor answering 8 calls at a time, with a budget of 10: exactly
    10 answers, 30 refused for the budget, 10 charged query lines; each answer equals the answer of the
    same query on a site in this process, one request at a time."""
    from raytune_fed.federation import remote_site
    from raytune_fed.federation._transports import ActorTransport

    sections = {"guard": {"k": 0}, "curator": {"query_budget": 10}}
    data = policy(tmp_path, **sections)
    actor = remote_site(X, Y, Policy.from_mapping(data), owner_secret=OWNER, max_concurrency=N_THREADS)
    transport = ActorTransport(actor)
    token = _session_of(SiteClient(actor, name=SITE))
    queries = _queries(40, mixed=False)
    pending = [transport.submit(_message(token, i + 1, q)) for i, q in enumerate(queries)]
    outcomes = [_outcome(r) for r in transport.collect(pending)]
    answered = [i for i, o in enumerate(outcomes) if o[0] == "answer"]
    assert len(answered) == 10
    assert [o for o in outcomes if o[0] != "answer"] == [("refused", "budget")] * 30

    serial = _site(tmp_path, "serial", sections={"guard": {"k": 0}})
    serial_token = _session(serial)
    for i in answered:
        assert outcomes[i] == _outcome(serial.call(_message(serial_token, i + 1, queries[i])))
    lines = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert sum(1 for e in lines if e["event"] == "query" and e["charged"] == 1) == 10
    assert not any(e.get("charged") for e in lines if e["event"] == "refused")  # budget refusals charge nothing


def _session_of(client: SiteClient) -> str:
    client.declare_schedule(SCHEDULE)
    return client.open_session(UNIT, "curator").token


def test_a_session_closed_while_its_query_scores_is_closed_after_that_query_is_recorded(tmp_path):
    """The owner closes a session while one of its queries is scoring: the close waits for it, so the ledger
    never names the session after its close (the site would refuse that ledger at its next start); a query of
    the session sent after the close began is refused, uncharged."""
    site = _site(tmp_path, "s", cls=HeldSite)
    token = _session(site)
    first, later = _queries(2, mixed=False)
    replies: dict[str, bytes] = {}
    scoring = threading.Thread(target=lambda: replies.setdefault("query", site.call(_message(token, 1, first))))
    scoring.start()
    assert site.entered.wait(60)
    close = _wire.encode({"method": "close_session", "args": {"session": token, "owner": OWNER}})
    closing = threading.Thread(target=lambda: replies.setdefault("close", site.call(close)))
    closing.start()
    while not site._sessions[_wire_key(token)].closed:  # the close has begun (and waits for the query)
        time.sleep(0.01)
    assert _outcome(site.call(_message(token, 2, later))) == ("refused", "session")
    site.release.set()
    scoring.join(60)
    closing.join(60)
    assert _outcome(replies["query"])[0] == "answer"
    assert "answer" in _wire.decode(replies["close"], max_bytes=1 << 30)
    events = [e["event"] for e in site._ledger.entries if e["event"] in {"query", "close_session", "refused"}]
    assert events == ["query", "close_session"]
    site.stop()
    restarted = Site(X, Y, site.policy, owner_secret=OWNER)  # the ledger is one a site starts from
    assert restarted._sessions[_wire_key(token)].closed
    restarted.stop()


def _wire_key(token: str) -> str:
    from raytune_fed.federation._party import token_key

    return token_key(token)
