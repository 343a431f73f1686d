"""A site's state lives in its ledger: it survives the site's process dying.

A Ray actor killed outright is restarted by Ray (``max_restarts``) and a service is
started again by its owner; either way the site reloads its ledger and comes back with
its schedule, sessions, budget use and sealed lockbox.  The same policy seed gives the
same Thresholdout answers in another process.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from attack_kit import balls, stump
from site_targets import LOCKBOX_UNIT, UNIT, X, make_target, start_service, tls  # noqa: F401

from raytune_fed.errors import BudgetExhaustedError, QueryRefusedError, SealedError
from raytune_fed.serve import service_client


def _use(cur, lb):
    """Spend 3 queries (one refused), seal the lockbox; return the answered losses."""
    answers = [cur.query(balls(X[:30])).value, cur.query(balls(X[30:70])).value]
    with pytest.raises(QueryRefusedError):
        cur.query(balls(X[:30]))  # a repeat: refused, and charged
    lb.final_evaluation([stump(0, 0.0)])
    return answers


def _check_restored(cur, lb):
    status = cur.status()
    assert (status.n_queries, status.budget_left) == (3, 16)  # 3 queries and the lockbox's one model of 20 answers
    assert [e.kind for e in cur.ledger().entries] == ["query", "query", "refused"]
    with pytest.raises(QueryRefusedError, match="privacy guard"):
        cur.query(balls(X[30:70]))  # the guard remembers what was answered
    with pytest.raises(SealedError):
        lb.final_evaluation([stump(1, 0.0)])


@pytest.mark.ray
def test_a_killed_site_actor_comes_back_with_its_ledger(make_target, ray_session):
    t = make_target("actor")
    cur, lb = t.curator(), t.lockbox()
    _use(cur, lb)
    pid = ray_session.get(t.actor.__ray_call__.remote(lambda self: os.getpid()))
    os.kill(pid, signal.SIGKILL)  # what a crashed node does to the site's process
    for _ in range(600):  # Ray restarts the actor in the background; wait for it (set-up, not a timing)
        try:
            new_pid = ray_session.get(t.actor.__ray_call__.remote(lambda self: os.getpid()))
            break
        except Exception:  # noqa: BLE001 - RayActorError while the actor restarts
            time.sleep(0.1)
    assert new_pid != pid
    _check_restored(cur, lb)  # the same tokens work: sessions came back from the ledger


@pytest.mark.process
def test_a_restarted_service_comes_back_with_its_ledger(make_target, tls):
    t = make_target("service")
    cur, lb = t.curator(), t.lockbox()
    _use(cur, lb)
    t.process.send_signal(signal.SIGKILL)
    t.process.wait()
    policy_dir = t.ledger.parent
    import json

    proc, url, token = start_service(policy_dir, json.loads((policy_dir / "policy.json").read_text()), tls)
    t.cleanup.append(lambda: (proc.terminate(), proc.wait(), proc.stdout.close(), proc.stderr.close()))
    client = service_client(url, token=token, cafile=tls[0])
    from raytune_fed.federation import SiteSession

    _check_restored(SiteSession(client, cur.ticket), SiteSession(client, lb.ticket))


def test_the_budget_outlives_the_process(make_target):
    t = make_target("local", curator={"query_budget": 2})
    cur = t.curator()
    cur.query(balls(X[:30]))
    client = t.restart()  # a new Site object on the same policy and ledger
    from raytune_fed.federation import SiteSession

    again = SiteSession(client, cur.ticket)
    again.query(balls(X[40:90]))
    with pytest.raises(BudgetExhaustedError):
        again.query(balls(X[90:140]))
    with pytest.raises(BudgetExhaustedError):
        client.open_session(UNIT, "curator").query(balls(X[100:150]))


@pytest.mark.ray
def test_thresholdout_answers_are_the_same_in_another_process(make_target, ray_session):
    answers = []
    for kind in ("local", "actor"):
        cur = make_target(kind).curator()
        answers.append([cur.query(balls(X[i:i + 40]), mechanism="thresholdout", train_loss=0.5).value
                        for i in (0, 40, 80)])
    assert answers[0] == answers[1]
    assert LOCKBOX_UNIT.key != UNIT.key
