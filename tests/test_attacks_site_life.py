"""The attacker over a site's operation (its disk, restarts, ledger, request layout), on every deployment.

Each test runs one attack of ``site_life_attacks.py`` against the site in-process, as a Ray
actor and as a TLS service where it applies, and shows it fails.
The one-off ``attacks_on_8403454.py`` (git history) ran the same functions against the code of commit
8403454, where each succeeds (``experiments/measured/attacks_on_8403454.json``).
"""

from __future__ import annotations

import os
import signal
import urllib.parse

import lifetime_attacks as la
import pytest
import site_life_attacks as sa
from site_targets import KINDS, OWNER, X, Y, make_target, policy, start_service, stop, target, tls  # noqa: F401

from raytune_fed.federation import Policy, Site, SiteClient
from raytune_fed.serve import service_client

N = 300


def _pid(t):
    if t.kind == "actor":
        import ray

        return ray.get(t.actor.__ray_call__.remote(lambda self: os.getpid()))
    return t.process.pid if t.kind == "service" else None


@pytest.mark.parametrize("kind", KINDS)
def test_requests_that_charge_nothing_cannot_fill_the_sites_disk(make_target, kind):
    """Old: every garbage message, unknown session or method, refused schedule or unit, and every
    query past the budget was a ledger line of ~170 bytes (300 of each: ~50 KB; a bearer token was a
    way to fill the site's disk).  Now they are counted: a line at the 1st, 2nd, 4th, ... of each."""
    t = make_target(kind, budget={"answers": 10})
    result = sa.ledger_flood(t.client, t.ledger, N, X)
    assert result["answers_before_the_budget_ran_out"] == 10
    for name, flood in result.items():
        if isinstance(flood, dict):  # at most log2(300) + 1 = 9 lines, at most ~2.3 KB
            assert flood["ledger_bytes"] <= 9 * 256, (name, flood)


def test_a_request_sent_again_adds_no_ledger_line_each_time(target):
    result = sa.replay_flood(target.client, target.ledger, N, X)
    assert result["same_answer"] == N and result["n_queries_charged"] == 1
    assert result["ledger_bytes"] <= 9 * 256, result


def test_sessions_per_unit_are_capped(make_target):
    """Old: a credential could open sessions without end (an fsync-ed ledger line each, kept in memory
    and reloaded on every restart).  Now ``[limits] sessions_per_unit`` per unit, role and credential."""
    t = make_target("local", limits={"sessions_per_unit": 8})
    result = sa.session_flood(t.client, t.ledger, 50)
    assert result["sessions_issued"] == 8
    restarted = t.restart()
    sched, _, (unit,) = la.schedule(curator_units=1)
    with pytest.raises(Exception, match="limit"):
        restarted.open_session(unit, "curator")  # the count comes back from the ledger


def test_a_request_number_answers_only_its_own_method(target):
    """Old: a final sent under the number of an answered query got the query's Loss back (the
    client took it for a boundary violation) and left the final unused.  Now it is refused."""
    result = sa.numbers_across_methods(target.client, X)
    assert result == {"final_under_a_query_number": "malformed", "sealed_after": False}


def _service_start(tmp_path, data, tls, procs):
    """A function that starts the site's service (appending its process to ``procs``) and returns a client."""
    def start():
        proc, url, token = start_service(tmp_path, data, tls)
        procs.append(proc)
        return service_client(url, token=token, cafile=tls[0], name="s1")
    return start


def _local_start(data):
    running = []

    def start():
        running.append(Site(X, Y, Policy.from_mapping(data), owner_secret=OWNER))
        return SiteClient(running[-1], name="s1")

    def stop_all():
        for site in running:
            stop(site)
        running.clear()

    return start, stop_all


def test_two_sites_on_one_ledger_refuse_to_run_in_process(tmp_path):
    """Old: two Site objects (or services) on one ledger each answered the whole budget (2 x 10)."""
    start, stop_all = _local_start(policy(tmp_path, budget={"answers": 10}))
    result = sa.two_sites_one_ledger(start, X)
    stop_all()
    assert result == {"sites_started": 1, "answers": 10, "second_start": "ConfigError"}


@pytest.mark.process
def test_two_services_on_one_ledger_refuse_to_run(tmp_path, tls):
    data = policy(tmp_path, budget={"answers": 10})
    procs = []
    start = _service_start(tmp_path, data, tls, procs)

    try:
        result = sa.two_sites_one_ledger(start, X)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=60)
    assert result == {"sites_started": 1, "answers": 10, "second_start": "RuntimeError"}


@pytest.mark.parametrize("how", ["copy", "truncate", "delete"])
def test_a_ledger_put_back_to_an_older_state_stops_the_site(tmp_path, how):
    """Old: an older copy of the ledger, a ledger cut short or a deleted ledger gave the analyst the
    spent budget again (2 x 10 answers).  Now the site refuses to start against its head file."""
    data = policy(tmp_path, budget={"answers": 10})
    start, stop_all = _local_start(data)
    result = sa.rolled_back_ledger(start, stop_all, tmp_path / "ledger.jsonl", X, how)
    stop_all()
    assert result == {"answers": 10, "restart": "ConfigError", "answers_after_restart": 0}


@pytest.mark.process
def test_a_rolled_back_ledger_stops_the_service(tmp_path, tls):
    data = policy(tmp_path, budget={"answers": 10})
    procs = []
    start = _service_start(tmp_path, data, tls, procs)

    def stop_service():
        procs[-1].terminate()
        procs[-1].wait(timeout=60)

    result = sa.rolled_back_ledger(start, stop_service, tmp_path / "ledger.jsonl", X, "copy")
    for proc in procs:
        proc.kill()
        proc.wait(timeout=60)
    assert result == {"answers": 10, "restart": "RuntimeError", "answers_after_restart": 0}


@pytest.mark.process
def test_a_query_in_flight_survives_the_owner_restarting_the_service(tmp_path, tls):
    """Old: the analyst's call failed with 'unreachable' (and its grid with it).  Now the transport
    sends the same message again once the service is back: the site's reply, charged once, and the
    same message afterwards gets the same reply."""
    data = policy(tmp_path)
    # the service picks its own port (no probe-then-bind window another process could take); the
    # restart binds the same one again
    proc, url, token = start_service(tmp_path, data, tls)
    port = urllib.parse.urlsplit(url).port
    procs = [proc]
    client = service_client(url, token=token, cafile=tls[0], name="s1")

    def kill_and_restart():
        procs[-1].send_signal(signal.SIGKILL)
        procs[-1].wait()
        procs.append(start_service(tmp_path, data, tls, port=port, token=token)[0])

    try:
        result = sa.restart_mid_query(client, lambda: procs[-1].pid, kill_and_restart, la.deep_forest(800, 512))
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=60)
    # the site's own reply (the slow model predicts one class, so the guard's charged refusal)
    assert result["in_flight_at_the_kill"] and result["reply"] == "guard", result
    assert result["same_answer_again"] and result["n_queries_charged"] == 1, result


@pytest.mark.parametrize("kind", KINDS)
def test_a_message_cannot_make_the_site_hash_or_copy_its_bytes_many_times(make_target, kind):
    """Old: 400 array names over one 8 MiB buffer cost 3.6 s of site CPU against a 0.5 s limit (the
    fingerprint hashed each), and 120 byte strings over one 8 MiB buffer grew the site's memory by
    ~1 GB.  Now buffers must follow one another, each byte used once: both are refused unresolved."""
    t = make_target(kind, limits={"seconds_per_query": 0.5})
    result = sa.costly_layouts(t.client, _pid(t), t.curator().token)
    arrays, copies = result["aliased_arrays"], result["aliased_bytes"]
    assert arrays["reply"] == "malformed" and arrays["cpu_seconds"] <= 0.5 + 0.5, result
    assert copies["reply"] == "malformed" and copies["peak_memory_growth_bytes"] < 200 << 20, result


@pytest.mark.process
def test_parallel_bodies_do_not_pile_up_in_the_services_memory(make_target):
    """Old: 12 connections each sending a 64 MiB body at once grew the service's peak memory by 650 MB
    (every body read, then held while it waited for the site).  Now at most two bodies are read and
    held at a time: 203 MB (``experiments/measured/attacks_on_8403454_bodies.json``)."""
    t = make_target("service", limits={"max_request_bytes": 64 << 20})
    transport = t.client._transport
    result = sa.parallel_bodies(transport.url, transport._token, transport.cafile, t.process.pid, 12, 64 << 20)
    assert result["statuses"] == {"200": 12}, result  # each a fixed refusal (garbage), none dropped
    assert result["peak_memory_growth_bytes"] < 5 * (64 << 20), result


def test_a_clock_set_back_or_forward_changes_nothing(tmp_path, monkeypatch):
    """The attacker cannot move the site's clock, but an owner's machine can: budgets, sessions and
    answers come from the ledger's order, never from the time written on its lines."""
    import time

    from attack_kit import balls

    data = policy(tmp_path, budget={"answers": 6})
    start, stop_all = _local_start(data)
    sched, _, (unit,) = la.schedule(curator_units=1)
    client = start()
    client.declare_schedule(sched)
    session = client.open_session(unit, "curator")
    assert sa.spend(session, X, seed=1, limit=3) == 3
    stop_all()
    monkeypatch.setattr(time, "time", lambda: 1.0)  # the clock set back to 1970
    client = start()
    from raytune_fed.federation import SiteSession

    again = SiteSession(client, session.ticket)
    assert again.status().n_queries == 3 and again.query(balls(X[90:150])).n_rows == 128
    stop_all()
    monkeypatch.setattr(time, "time", lambda: 4e9)  # and forward to 2096
    client = start()
    assert sa.spend(SiteSession(client, session.ticket), X, seed=2) == 2  # 6 in all, whatever the clock says
    stop_all()
