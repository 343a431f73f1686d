"""The attacker over a site's operation: its disk, its restarts, its ledger, its request layout.

Each attack plays an analyst who holds a bearer token (and, where it says so, several), or
the accidents an owner makes over a site's life (a second service on one ledger, an older
copy of the ledger put back), and returns what it got: answers beyond the lifetime budget,
ledger bytes it made the site write without being charged, CPU seconds or memory a request
cost the site.  ``tests/test_attacks_site_life.py`` runs them against the site in-process,
as a Ray actor and as a TLS service and asserts that each fails;
The one-off ``attacks_on_8403454.py`` (git history) ran the same functions against the code of commit
8403454, where each succeeds.  Only client calls both revisions share are used.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from attack_kit import balls
from lifetime_attacks import cpu_seconds, reply_code, schedule, site_cpu

from raytune_fed.errors import BudgetExhaustedError, QueryRefusedError
from raytune_fed.federation import _wire
from raytune_fed.federation._fields import model_to_wire


def raw(header: dict, payload: bytes = b"") -> bytes:
    """A wire message written by hand: any header, any payload."""
    h = json.dumps(header, separators=(",", ":")).encode()
    return _wire.MAGIC + struct.pack("<Q", len(h)) + h + payload


def spend(session: Any, X: np.ndarray, seed: int, limit: int = 400) -> int:
    """Query distinct random-half models until the site says the budget is spent; the answers got."""
    rng = np.random.default_rng(seed)
    answered = 0
    for _ in range(limit):
        try:
            session.query(balls(X[rng.choice(len(X), len(X) // 2, replace=False)]))
            answered += 1
        except BudgetExhaustedError:
            break
        except QueryRefusedError:  # the guard: charged, no answer
            continue
    return answered


# -- (a) the site's disk: ledger lines no charge pays for --------------------------------------


def ledger_flood(client: Any, ledger: Path, n: int, X: np.ndarray) -> dict[str, Any]:
    """With only a bearer token, send ``n`` of each request that costs the attacker nothing: garbage,
    an unknown session, an unknown method, another schedule, a session for an unscheduled unit;
    then, with a session of its own, ``n`` queries after its budget is spent and ``n`` copies of
    one answered request.  Returns the ledger bytes each kind added, per request."""
    sched, _, (unit,) = schedule(curator_units=1)
    client.declare_schedule(sched)
    session = client.open_session(unit, "curator")
    other, _, _ = schedule(curator_units=2)
    kinds = {
        "garbage": lambda: b"not a wire message",
        "unknown session": lambda: raw({"method": "status", "args": {"session": "x" * 43}}),
        "unknown method": lambda: raw({"method": "drop_ledger", "args": {}}),
        "another schedule": lambda: raw({"method": "declare_schedule", "args": {"units": other.as_list()}}),
        "unscheduled unit": lambda: raw({"method": "open_session", "args": {"unit": "nowhere", "role": "curator"}}),
    }
    out: dict[str, Any] = {}

    def flood(name: str, make: Callable[[], bytes]) -> None:
        message = make()
        before = ledger.stat().st_size
        for _ in range(n):
            client.call_raw(message)
        out[name] = {"requests": n, "ledger_bytes": ledger.stat().st_size - before,
                     "bytes_per_request": round((ledger.stat().st_size - before) / n, 2)}

    for name, make in kinds.items():
        flood(name, make)
    answered = spend(session, X, seed=5)
    model = model_to_wire(balls(X[:80]))
    flood("queries past the budget", lambda: _wire.encode(
        {"method": "query", "args": {"session": session.token, "mechanism": "exact", "model": model}}))
    out["answers_before_the_budget_ran_out"] = answered
    return out


def replay_flood(client: Any, ledger: Path, n: int, X: np.ndarray) -> dict[str, Any]:
    """One charged query, then the same message (the same request number) ``n`` times: each copy
    is answered from the ledger and charged nothing; what it adds to the ledger."""
    sched, _, (unit,) = schedule(curator_units=1)
    client.declare_schedule(sched)
    session = client.open_session(unit, "curator")
    message = _wire.encode({"method": "query", "args": {"session": session.token, "request": 77, "mechanism": "exact",
                                                        "model": model_to_wire(balls(X[:80]))}})
    first = client.call_raw(message)
    before = ledger.stat().st_size
    same = sum(client.call_raw(message) == first for _ in range(n))
    return {"requests": n, "same_answer": same, "ledger_bytes": ledger.stat().st_size - before,
            "bytes_per_request": round((ledger.stat().st_size - before) / n, 2),
            "n_queries_charged": session.status().n_queries}


def session_flood(client: Any, ledger: Path, n: int) -> dict[str, Any]:
    """``n`` sessions opened for one scheduled unit (no session is charged): how many the site
    issued and what they added to its ledger (and to the memory of every later restart)."""
    sched, _, (unit,) = schedule(curator_units=1)
    client.declare_schedule(sched)
    before = ledger.stat().st_size
    issued = 0
    for _ in range(n):
        try:
            client.open_session(unit, "curator")
            issued += 1
        except QueryRefusedError:
            pass
    return {"requests": n, "sessions_issued": issued, "ledger_bytes": ledger.stat().st_size - before}


def numbers_across_methods(client: Any, X: np.ndarray) -> dict[str, Any]:
    """A final evaluation sent under the request number of an answered query: what comes back
    (the query's recorded answer, while the final stays unused) and whether the final is then sealed."""
    sched, _, (unit,) = schedule(curator_units=1)
    client.declare_schedule(sched)
    session = client.open_session(unit, "curator")
    query = _wire.encode({"method": "query", "args": {"session": session.token, "request": 5, "mechanism": "exact",
                                                      "model": model_to_wire(balls(X[:80]))}})
    client.call_raw(query)
    final = _wire.encode({"method": "final_evaluation", "args": {"session": session.token, "request": 5,
                                                                 "models": [model_to_wire(balls(X[40:120]))]}})
    reply = _wire.decode(client.call_raw(final), max_bytes=1 << 30)
    got = reply["refused"]["code"] if "refused" in reply else reply["answer"]["type"]
    return {"final_under_a_query_number": got, "sealed_after": session.status().sealed}


# -- the ledger over the site's life: two sites on it, an older copy put back ------------------


def two_sites_one_ledger(start: Callable[[], Any], X: np.ndarray) -> dict[str, Any]:
    """The owner starts the site twice on one ledger (a second service, a restart while the first
    still runs).  The attacker spends the budget on each that answers; the answers it got in all."""
    sched, _, (unit,) = schedule(curator_units=1)
    clients = [start()]
    try:
        clients.append(start())
        second = "started"
    except Exception as exc:  # noqa: BLE001 - the second start refused: what the owner sees
        second = type(exc).__name__
    answers = 0
    for i, client in enumerate(clients):
        client.declare_schedule(sched)
        answers += spend(client.open_session(unit, "curator"), X, seed=10 + i)
    return {"sites_started": len(clients), "answers": answers, "second_start": second}


def rolled_back_ledger(start: Callable[[], Any], stop: Callable[[], None], ledger: Path, X: np.ndarray,
                       how: str) -> dict[str, Any]:
    """The budget is spent; while the site is down its ledger is put back to an older state
    (``how``: ``"copy"`` an older copy, ``"truncate"`` cut after the session line, ``"delete"``), and
    the site is started again.  The answers the attacker got in both lives."""
    sched, _, (unit,) = schedule(curator_units=1)
    client = start()
    client.declare_schedule(sched)
    session = client.open_session(unit, "curator")
    early = ledger.read_bytes()
    answers = spend(session, X, seed=20)
    stop()
    if how == "copy":
        shutil.copyfile(ledger, ledger.with_name("spent.jsonl"))
        ledger.write_bytes(early)
    elif how == "truncate":
        with open(ledger, "r+b") as f:
            f.truncate(len(early))
    else:
        ledger.unlink()
    try:
        client = start()
    except Exception as exc:  # noqa: BLE001 - the restart refused: what the owner sees
        return {"answers": answers, "restart": type(exc).__name__, "answers_after_restart": 0}
    client.declare_schedule(sched)
    again = spend(client.open_session(unit, "curator"), X, seed=21)
    return {"answers": answers + again, "restart": "started", "answers_after_restart": again}


# -- (b) the owner restarts the service mid-grid ------------------------------------------------


def restart_mid_query(client: Any, service_pid: Callable[[], int], kill_and_restart: Callable[[], None],
                      model: Any) -> dict[str, Any]:
    """A slow query is in flight when the owner restarts the service (SIGKILL, then the same
    command on the same port).  What the analyst's call got, what the site charged, and whether
    the same message sent again afterwards gets the same answer."""
    sched, _, (unit,) = schedule(curator_units=1)
    client.declare_schedule(sched)
    session = client.open_session(unit, "curator")
    message = _wire.encode({"method": "query", "args": {"session": session.token, "request": 4242,
                                                        "mechanism": "exact", "model": model_to_wire(model)}})
    box: dict[str, Any] = {}

    def send() -> None:
        try:
            box["reply"] = client.call_raw(message)
        except Exception as exc:  # noqa: BLE001 - what the analyst saw
            box["reply"] = exc

    pid = service_pid()
    before = cpu_seconds(pid)
    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    give_up = time.monotonic() + 120
    while cpu_seconds(pid) - before < 0.3 and thread.is_alive() and time.monotonic() < give_up:
        time.sleep(0.02)  # the site is scoring it now
    in_flight = thread.is_alive()
    kill_and_restart()
    thread.join(timeout=900)
    first = box.get("reply")
    out = {"in_flight_at_the_kill": in_flight, "reply": reply_code(first) if first is not None else "none"}
    if isinstance(first, bytes):
        out["same_answer_again"] = client.call_raw(message) == first
    status = session.status()
    out["n_queries_charged"] = status.n_queries
    return out


# -- work and memory a request can cost before a check --------------------------------------------


def aliased_arrays(token: str, n_refs: int = 400, megabytes: int = 8) -> bytes:
    """A query whose model names one ``megabytes`` buffer under ``n_refs`` array names: the site
    hashes each array for its ledger's fingerprint, so a small message costs ``n_refs`` times its size."""
    n = megabytes * (1 << 20) // 8
    arrays = {f"a{i}": {"$a": ["f8", [n], 0, n * 8]} for i in range(n_refs)}
    model = {"learner": "elastic_net", "config": {"alpha": 0.5, "lambda": 1.0}, "arrays": arrays}
    return raw({"method": "query", "args": {"session": token, "mechanism": "exact", "model": model}}, bytes(n * 8))


def aliased_bytes(token: str, n_refs: int = 120, megabytes: int = 8) -> bytes:
    """A query whose model holds ``n_refs`` byte-string references to one ``megabytes`` buffer: each is
    copied when the message is resolved, so the site holds ``n_refs`` times the message at once."""
    nbytes = megabytes << 20
    arrays = {f"a{i}": {"$b": [0, nbytes]} for i in range(n_refs)}
    model = {"learner": "elastic_net", "config": {"alpha": 0.5, "lambda": 1.0}, "arrays": arrays}
    return raw({"method": "query", "args": {"session": token, "mechanism": "exact", "model": model}}, bytes(nbytes))


def peak_rss(pid: int | None) -> int:
    """The peak resident memory (bytes) of a process so far (``None``: this one)."""
    for line in open(f"/proc/{os.getpid() if pid is None else pid}/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) * 1024
    return 0


def costly_layouts(client: Any, pid: int | None, token: str) -> dict[str, Any]:
    """The site's CPU seconds for the aliased-array query and its peak memory growth for the
    aliased-bytes query (each a message of 8 MiB)."""
    message = aliased_arrays(token)
    cpu, reply = site_cpu(lambda: client.call_raw(message), pid)
    out = {"aliased_arrays": {"message_bytes": len(message), "cpu_seconds": round(cpu, 3), "reply": reply_code(reply)}}
    message = aliased_bytes(token)
    before = peak_rss(pid)
    cpu, reply = site_cpu(lambda: client.call_raw(message), pid)
    out["aliased_bytes"] = {"message_bytes": len(message), "peak_memory_growth_bytes": peak_rss(pid) - before,
                            "cpu_seconds": round(cpu, 3), "reply": reply_code(reply)}
    return out


def parallel_bodies(url: str, token: str, cafile: str | None, pid: int, n: int, nbytes: int) -> dict[str, Any]:
    """``n`` connections each send a garbage body of ``nbytes`` (the site's largest) at once: the service
    reads a body before the site (one request at a time) takes it, so every waiting body is held in
    memory together.  The service's peak memory growth and what each connection got."""
    import http.client
    import ssl
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    body = b"\0" * nbytes
    statuses: list[Any] = []
    lock = threading.Lock()

    def send() -> None:
        try:
            if parts.scheme == "https":
                conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=600,
                                                   context=ssl.create_default_context(cafile=cafile))
            else:
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
            conn.request("POST", "/call", body=body, headers={"Authorization": f"Bearer {token}",
                                                              "Content-Type": "application/x-raytune-fed"})
            response = conn.getresponse()
            response.read()
            status: Any = response.status
            conn.close()
        except Exception as exc:  # noqa: BLE001 - what the attacker saw
            status = type(exc).__name__
        with lock:
            statuses.append(status)

    before = peak_rss(pid)
    threads = [threading.Thread(target=send, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
    return {"connections": n, "body_bytes": nbytes, "peak_memory_growth_bytes": peak_rss(pid) - before,
            "statuses": {str(s): statuses.count(s) for s in set(statuses)}}
