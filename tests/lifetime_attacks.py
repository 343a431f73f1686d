"""The analyst as attacker over a site's whole life: every answer it can get, across units and finals.

Each attack plays the analyst of issue 16 with only a :class:`SiteClient` and public
knowledge (the learners' declared records, the site's feature rows ``X``; not its labels,
not its in-bag splits) and returns what it recovered.  ``tests/test_attacks_lifetime.py``
runs them against the site in-process, as a Ray actor and as a TLS service and asserts
that each fails; the one-off ``attacks_on_d8d2749.py`` (git history) ran the same functions against
the code of commit d8d2749, where each succeeds.  Only client calls both revisions share
are used.

The label attacks send *subset models*: an RBF SVM of tiny balls around a random half of
the rows predicts class 1 exactly on those rows, so each loss is a linear measurement of
the labels.  :func:`decode` solves the measurements for the labels the way an attacker
would (a box-constrained linear program and least squares, rounded) and keeps the better.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from attack_kit import balls, stump

from raytune_fed.errors import BudgetExhaustedError, QueryRefusedError
from raytune_fed.federation import Schedule, Unit

SITE = "s1"
LEAK = 0.15
"""A label attack leaks when it labels more rows right than guessing the majority class by this much."""


# -- the attacker's tools --------------------------------------------------------------------


@dataclass
class Measurements:
    """Linear measurements of the labels: ``rows @ y ~= values`` (exact when ``exact``)."""

    rows: list[np.ndarray] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    exact: list[bool] = field(default_factory=list)
    answers: int = 0

    def add(self, pred: np.ndarray, loss: float, n_scored: int, n_rows: int, *, known_rows: bool) -> None:
        """A model predicting ``pred`` (0/1 per row) had ``loss`` on ``n_scored`` of the ``n_rows`` rows.

        ``n_scored * loss = sum over scored rows of [pred != y] = sum pred + sum (1 - 2 pred) y``.  When the
        scored rows are all rows this is exact; otherwise (a curator's unknown in-bag or out-of-bag rows)
        the attacker takes each row to be scored with probability ``n_scored / n_rows``.
        """
        share = 1.0 if known_rows else n_scored / n_rows
        self.rows.append(share * (1.0 - 2.0 * pred))
        self.values.append(n_scored * loss - share * pred.sum())
        self.exact.append(known_rows)
        self.answers += 1


def decode(m: Measurements, y_true: np.ndarray) -> dict[str, Any]:
    """The labels the measurements give a linear decoder, scored against ``y_true``.

    Two decoders, the better one kept (generous to the attacker): the box-constrained
    linear program ``min |A y - b|_1, 0 <= y <= 1`` and least squares from ``y = 1/2``,
    each rounded at 1/2.  Returns the accuracy, the majority-class share, and counts.
    """
    from scipy.optimize import linprog

    n = len(y_true)
    majority = float(max(np.mean(y_true), 1 - np.mean(y_true)))
    out = {"answers": m.answers, "majority": majority, "accuracy": majority, "decoder": "majority guess"}
    if not m.rows:
        return out
    A, b = np.vstack(m.rows), np.asarray(m.values)
    k = len(b)
    guesses = {}
    lp = linprog(np.r_[np.zeros(n), np.ones(2 * k)], A_eq=np.hstack([A, np.eye(k), -np.eye(k)]), b_eq=b,
                 bounds=[(0, 1)] * n + [(0, None)] * (2 * k), method="highs")
    if lp.status == 0:
        guesses["linear program"] = lp.x[:n]
    half = np.full(n, 0.5)
    guesses["least squares"] = half + np.linalg.lstsq(A, b - A @ half, rcond=None)[0]
    scores = {name: float(np.mean((g > 0.5).astype(int) == y_true)) for name, g in guesses.items()}
    best = max(scores, key=scores.get)
    out.update(accuracy=scores[best], decoder=best, by_decoder=scores)
    return out


def subset_models(X: np.ndarray, n_models: int, seed: int) -> list[tuple[Any, np.ndarray]]:
    """``n_models`` records each predicting class 1 on a random half of the rows, with that 0/1 vector."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_models):
        pred = np.zeros(len(X))
        pred[rng.choice(len(X), len(X) // 2, replace=False)] = 1.0
        out.append((balls(X[pred == 1]), pred))
    return out


def largest_final(session: Any, models: list[tuple[Any, np.ndarray]]) -> tuple[Any, list[tuple[Any, np.ndarray]]]:
    """The attacker's final: all ``models``, or as many as the site takes (a batch refused as too
    large before anything is computed costs nothing, so it halves the batch and asks again)."""
    batch = list(models)
    while True:
        try:
            return session.final_evaluation([r for r, _ in batch]), batch
        except QueryRefusedError as err:
            if err.code != "malformed" or len(batch) == 1:
                raise
            batch = batch[:len(batch) // 2]


def schedule(lockbox_units: int = 0, curator_units: int = 0) -> tuple[Schedule, list[Unit], list[Unit]]:
    """A schedule the attacker declares: the site is the lockbox in ``lockbox_units`` units and a
    curator in ``curator_units`` (distinct replications)."""
    lb = [Unit("s0", SITE, ("s2",), r) for r in range(lockbox_units)]
    cu = [Unit("s0", "s2", (SITE,), r) for r in range(curator_units)]
    return Schedule.of(lb + cu), lb, cu


# -- label attacks over the site's life ----------------------------------------------------------


def lockbox_batch(client: Any, X: np.ndarray, Y: np.ndarray) -> dict[str, Any]:
    """Issue 16, 1: one lockbox final of 64 subset models, decoded by linear programming."""
    sched, (unit,), _ = schedule(lockbox_units=1)
    client.declare_schedule(sched)
    lb = client.open_session(unit, "lockbox")
    m = Measurements()
    final, sent = largest_final(lb, subset_models(X, 64, seed=1))
    for (_, pred), value in zip(sent, final.values):
        if value is not None:
            m.add(pred, value, final.n_rows, len(X), known_rows=True)
    return {**decode(m, Y), "models_answered": sum(v is not None for v in final.values)}


def lockbox_per_unit(client: Any, X: np.ndarray, Y: np.ndarray, n_units: int = 3) -> dict[str, Any]:
    """Issue 16, 2: a schedule naming the site as lockbox in 3 units; one final of 64 models in each."""
    sched, units, _ = schedule(lockbox_units=n_units)
    client.declare_schedule(sched)
    m, finals = Measurements(), 0
    for i, unit in enumerate(units):
        try:
            final, sent = largest_final(client.open_session(unit, "lockbox"), subset_models(X, 64, seed=10 + i))
        except QueryRefusedError:
            continue
        finals += 1
        for (_, pred), value in zip(sent, final.values):
            if value is not None:
                m.add(pred, value, final.n_rows, len(X), known_rows=True)
    return {**decode(m, Y), "lockbox_finals_answered": finals}


def curator_finals(client: Any, X: np.ndarray, Y: np.ndarray, n_units: int = 30) -> dict[str, Any]:
    """Issue 16, 3: spend the query budget in one curator unit, then a final of 64 models in each of
    30 curator units (out-of-bag rows unknown to the attacker), decoded by least squares."""
    sched, _, units = schedule(curator_units=n_units)
    client.declare_schedule(sched)
    m, queries, finals = Measurements(), 0, 0
    sessions = [client.open_session(u, "curator") for u in units]
    for pred_record, pred in subset_models(X, 2000, seed=3):
        try:
            loss = sessions[0].query(pred_record)
        except BudgetExhaustedError:
            break
        except QueryRefusedError:
            continue
        queries += 1
        m.add(pred, loss.value, loss.n_rows, len(X), known_rows=False)
    for i, session in enumerate(sessions):
        try:
            final, sent = largest_final(session, subset_models(X, 64, seed=100 + i))
        except QueryRefusedError:
            continue
        finals += 1
        for (_, pred), value in zip(sent, final.values):
            if value is not None:
                m.add(pred, value, final.n_rows, len(X), known_rows=False)
    return {**decode(m, Y), "queries_answered": queries, "curator_finals_answered": finals}


def everything_the_site_answers(client: Any, X: np.ndarray, Y: np.ndarray, *, lockbox_units: int = 3,
                                curator_units: int = 30) -> dict[str, Any]:
    """Every answer a site gives over its life, under whatever policy it runs: lockbox finals in
    every lockbox unit it accepts, then curator queries until refused, then a curator final in
    every curator unit; all decoded together."""
    sched, lb_units, cu_units = schedule(lockbox_units, curator_units)
    client.declare_schedule(sched)
    m = Measurements()
    counts = {"lockbox_finals_answered": 0, "queries_answered": 0, "curator_finals_answered": 0}
    for i, unit in enumerate(lb_units):
        try:
            final, sent = largest_final(client.open_session(unit, "lockbox"), subset_models(X, 64, seed=20 + i))
        except QueryRefusedError:
            continue
        counts["lockbox_finals_answered"] += 1
        for (_, pred), value in zip(sent, final.values):
            if value is not None:
                m.add(pred, value, final.n_rows, len(X), known_rows=True)
    sessions = [client.open_session(u, "curator") for u in cu_units]
    for record, pred in subset_models(X, 2000, seed=4):
        try:
            loss = sessions[0].query(record)
        except BudgetExhaustedError:
            break
        except QueryRefusedError:
            continue
        counts["queries_answered"] += 1
        m.add(pred, loss.value, loss.n_rows, len(X), known_rows=False)
    for i, session in enumerate(sessions):
        try:
            final, sent = largest_final(session, subset_models(X, 64, seed=200 + i))
        except QueryRefusedError:
            continue
        counts["curator_finals_answered"] += 1
        for (_, pred), value in zip(sent, final.values):
            if value is not None:
                m.add(pred, value, final.n_rows, len(X), known_rows=False)
    return {**decode(m, Y), **counts}


# -- work before checks, and what escapes call() ---------------------------------------------------


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds (user + system) a process has used: this one (``None``) or another, from /proc."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def site_cpu(call: Callable[[], Any], pid: int | None) -> tuple[float, Any]:
    """The site's CPU seconds while ``call`` runs (its process, or this one in-process), and what it returned."""
    before = cpu_seconds(pid)
    try:
        result = call()
    except Exception as exc:  # noqa: BLE001 - what the analyst saw is the result
        result = exc
    time.sleep(0.05 if pid is not None else 0.0)  # /proc is updated at clock ticks
    return cpu_seconds(pid) - before, result


def big_header(n_refs: int = 700_000) -> bytes:
    """A ~15 MiB JSON header with no valid session: hundreds of thousands of empty array references."""
    import struct

    refs = ",".join(['{"$a":["f8",[0],0,0]}'] * n_refs)
    header = ('{"method":"query","args":{"session":"not-a-session-token-0123456789","model":[' + refs + ']}}').encode()
    return b"RTFWIRE1" + struct.pack("<Q", len(header)) + header


def chain_forest(n_nodes: int = 2_000_000, n_trees: int = 100) -> Any:
    """A forest record whose first tree is a chain of ``n_nodes`` nodes (every right child the next
    inner node, every left child a leaf) and whose other trees are single leaves: structurally
    valid except for its depth, so only the depth walk refuses it."""
    from raytune_fed.models import ModelRecord

    n_inner = (n_nodes - 1) // 2
    n_chain = 2 * n_inner + 1
    left = np.full(n_chain, -1, dtype="<i4")
    right = np.full(n_chain, -1, dtype="<i4")
    inner = np.arange(0, 2 * n_inner, 2)
    left[inner], right[inner] = inner + 1, inner + 2
    n_all = n_chain + n_trees - 1
    pad = lambda a, v: np.concatenate([a, np.full(n_trees - 1, v, dtype=a.dtype)])  # noqa: E731
    return ModelRecord("random_forest", {"num_trees": n_trees, "min_node_size": 1, "sample_fraction": 1.0},
                       {"keep": np.arange(12, dtype="<i8"),
                        "node_count": np.array([n_chain] + [1] * (n_trees - 1), dtype="<i8"),
                        "children_left": pad(left, -1), "children_right": pad(right, -1),
                        "feature": np.zeros(n_all, dtype="<i4"), "threshold": np.zeros(n_all),
                        "value": np.ones((n_all, 2))})


def zero_byte_giant_array(token: str) -> bytes:
    """A query whose model holds an array reference of shape (10^30, 0): zero bytes, so it passes the
    byte-count check, and numpy cannot make it."""
    import json
    import struct

    header = json.dumps({"method": "query", "args": {
        "session": token, "mechanism": "exact",
        "model": {"learner": "elastic_net", "config": {"alpha": 0.5, "lambda": 1.0},
                  "arrays": {"keep": {"$a": ["i8", [10 ** 30, 0], 0, 0]}}}}}).encode()
    return b"RTFWIRE1" + struct.pack("<Q", len(header)) + header


def reply_code(reply: Any) -> str:
    """What a raw reply was: a refusal's code, ``answer``, or the exception the caller got."""
    if isinstance(reply, BaseException):
        return f"raised {type(reply).__name__}"
    from raytune_fed.federation import _wire

    data = _wire.decode(reply, max_bytes=1 << 30)
    return data["refused"]["code"] if "refused" in data else "answer"


def work_before_checks(client: Any, pid: int | None, curator: Any) -> dict[str, Any]:
    """Issue 16, 4: the site's CPU seconds for a 15 MiB header with no valid session and for a
    2M-node chain forest in a valid session (the site's ``seconds_per_query`` is 0.5 s)."""
    header = big_header()
    cpu_header, reply_header = site_cpu(lambda: client.call_raw(header), pid)
    cpu_chain, reply_chain = site_cpu(lambda: curator.query(chain_forest()), pid)
    alive = curator.query(stump(0, 0.0)).n_rows  # and the site still answers
    return {"header_bytes": len(header), "header_cpu_seconds": cpu_header, "header_reply": reply_code(reply_header),
            "chain_cpu_seconds": cpu_chain,
            "chain_reply": getattr(reply_chain, "code", f"raised {type(reply_chain).__name__}"),
            "answers_after": alive}


def exception_escapes(client: Any, token: str, n: int = 40, timeout: float | None = None) -> dict[str, Any]:
    """Issue 16, 5: ``n`` queries with a (10^30, 0) array reference; what each caller got back."""
    message = zero_byte_giant_array(token)
    seen: dict[str, int] = {}
    for _ in range(n):
        _, reply = site_cpu(lambda: client.call_raw(message), None)
        code = reply_code(reply)
        seen[code] = seen.get(code, 0) + 1
    return {"replies": seen, "fixed_refusals": sum(v for k, v in seen.items() if not k.startswith("raised"))}


def unread_pipe(X: np.ndarray, Y: np.ndarray, workdir: Any, n: int = 60, timeout: float = 10.0) -> dict[str, Any]:
    """Issue 16, 5 over HTTP: a site service the package starts (``start_sites(deployment="service")``)
    sent (10^30, 0) array references until a request hangs; how many were answered before."""
    from pathlib import Path

    from raytune_fed.serve import service_client, start_sites

    sched, _, (unit,) = schedule(curator_units=1)
    with start_sites({SITE: (X, Y), "s0": (X, Y), "s2": (X, Y)}, template={}, seed=0, workdir=workdir,
                     deployment="service") as sites:
        served = sites.clients[SITE]
        token = (Path(workdir) / SITE / "token").read_text().strip()
        client = service_client(served.transport.url, token=token, timeout=timeout, name=SITE)
        client.declare_schedule(sched)
        session = client.open_session(unit, "curator")
        message = zero_byte_giant_array(session.token)
        seen: dict[str, int] = {}
        hung_at = None
        for i in range(n):
            _, reply = site_cpu(lambda: client.call_raw(message), None)
            code = reply_code(reply)
            if isinstance(reply, QueryRefusedError) and "timed out" in str(reply):
                hung_at = i + 1
                break
            seen[code] = seen.get(code, 0) + 1
        stderr = Path(workdir) / SITE / "serve.err"  # while it serves (d8d2749: a pipe, not a file)
        stderr_bytes = stderr.stat().st_size if stderr.exists() else None
    return {"replies": seen, "hung_at_request": hung_at,
            "fixed_refusals": sum(v for k, v in seen.items() if not k.startswith("raised")),
            "stderr_bytes": stderr_bytes}


def actor_handle(handle: Any, shape: tuple[int, int]) -> dict[str, Any]:
    """Issue 16, 7: what the holder of a site actor's handle reads without the protocol: object refs the
    handle carries (``ray.get`` gives the rows), and arrays of the rows' shape in the actor's process."""
    import ray

    def site_arrays_here(self: Any, shape: tuple[int, int]) -> dict[str, Any]:  # runs in the actor's process
        import numpy

        found, seen, todo = 0, set(), [(self, 0)]
        while todo:  # every object reachable from the actor's attributes, a few levels down
            obj, depth = todo.pop()
            if id(obj) in seen or depth > 4:
                continue
            seen.add(id(obj))
            if isinstance(obj, numpy.ndarray):
                found += obj.shape == shape
                continue
            items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else \
                vars(obj).values() if hasattr(obj, "__dict__") else ()
            todo.extend((v, depth + 1) for v in items)
        return {"attributes": sorted(vars(self)), "arrays_of_the_rows_shape": found}

    refs = [v for v in vars(handle).values() if isinstance(v, ray.ObjectRef)]
    refs += [r for v in vars(handle).values() if isinstance(v, tuple) for r in v if isinstance(r, ray.ObjectRef)]
    rows_from_refs = [np.shape(ray.get(r)) for r in refs]
    inside = ray.get(handle.__ray_call__.remote(site_arrays_here, shape))
    return {"object_refs_on_handle": len(refs), "shapes_read_from_refs": [list(s) for s in rows_from_refs],
            **inside}


def deep_forest(n_trees: int = 1500, depth: int = 512) -> Any:
    """A valid forest record at the depth cap: ``n_trees`` chains of ``depth`` inner nodes, cheap to
    send and to check, slow to score (every row walks every tree to the bottom)."""
    from raytune_fed.models import ModelRecord

    n = 2 * depth + 1
    left = np.full(n, -1, dtype="<i4")
    right = np.full(n, -1, dtype="<i4")
    inner = np.arange(0, 2 * depth, 2)
    left[inner], right[inner] = inner + 1, inner + 2
    tile = lambda a: np.tile(a, n_trees)  # noqa: E731
    return ModelRecord("random_forest", {"num_trees": n_trees, "min_node_size": 1, "sample_fraction": 1.0},
                       {"keep": np.arange(12, dtype="<i8"), "node_count": np.full(n_trees, n, dtype="<i8"),
                        "children_left": tile(left), "children_right": tile(right),
                        "feature": np.zeros(n * n_trees, dtype="<i4"), "threshold": np.full(n * n_trees, 1e9),
                        "value": np.tile(np.array([[1.0, 2.0]]), (n * n_trees, 1))})


def linear(X: np.ndarray, weights: np.ndarray) -> tuple[Any, np.ndarray]:
    """An elastic-net record predicting class 1 where ``weights . x`` exceeds its median over the
    rows of ``X`` (half the rows each way), and those predictions."""
    from raytune_fed.models import ModelRecord

    score = X @ weights
    cut = float(np.median(score))
    record = ModelRecord("elastic_net", {"alpha": 0.5, "lambda": 1.0},
                         {"keep": np.arange(X.shape[1], dtype="<i8"), "mean": np.zeros(X.shape[1]),
                          "scale": np.ones(X.shape[1]), "coef": weights.astype(float), "intercept": np.array([-cut])})
    return record, (score > cut).astype(int)


def select_and_label(client: Any, X: np.ndarray, Y: np.ndarray) -> dict[str, Any]:
    """Model selection as a decoder: the answers choose a model of the features, which then labels
    every row.  Curator queries screen one median split per feature; the lockbox's final (exact, all
    rows) scores linear models of the best features found; the best labels the rows (its complement
    when its loss is above 1/2).  What any analyst learns by selecting a model on a site's answers,
    bounded by how well the site's features predict its labels, not by the site's protection."""
    sched, (lb_unit,), (cu_unit,) = schedule(lockbox_units=1, curator_units=1)
    client.declare_schedule(sched)
    centred = (X - np.median(X, axis=0)) / X.std(axis=0)
    cur = client.open_session(cu_unit, "curator")
    signs, strength = np.zeros(X.shape[1]), np.zeros(X.shape[1])
    for j in range(X.shape[1]):
        record, _ = linear(centred, np.eye(X.shape[1])[j])
        try:
            loss = cur.query(record).value
        except QueryRefusedError:
            continue
        signs[j], strength[j] = (1.0 if loss < 0.5 else -1.0), abs(loss - 0.5)
    order = np.argsort(-strength)
    candidates = [linear(centred, np.where(np.isin(np.arange(X.shape[1]), order[:m]), signs * strength, 0.0))
                  for m in range(1, 9)]
    final, sent = largest_final(client.open_session(lb_unit, "lockbox"), candidates)
    losses = [(v, pred) for (_, pred), v in zip(sent, final.values) if v is not None]
    if not losses:
        return {"accuracy": float(max(np.mean(Y), 1 - np.mean(Y))), "decoder": "majority guess"}
    loss, pred = min(losses, key=lambda t: min(t[0], 1 - t[0]))
    guess = pred if loss <= 0.5 else 1 - pred
    return {"accuracy": float(np.mean(guess == Y)), "decoder": "selected model",
            "majority": float(max(np.mean(Y), 1 - np.mean(Y))), "models_scored_by_lockbox": len(losses)}
