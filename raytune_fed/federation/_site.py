"""An RFMS data site: a curator or a lockbox per scheduled unit, under its owner's policy.

The site holds its rows (read-only), its :class:`~raytune_fed.federation.Policy` and its
ledger.  Its protocol (every method a :func:`restricted` one, reached through
:meth:`Party.call`):

* ``declare_schedule(units)`` - the grid's units, accepted once (the same again is fine);
* ``open_session(unit, role)`` - a session for a scheduled unit in the role the site plays
  in it; the site issues the token; each credential opens at most ``[limits]
  sessions_per_unit`` per unit and role;
* ``query(session, model, mechanism, train_loss)`` - curator only: the misclassification
  of a :class:`~raytune_fed.models.ModelRecord` on the unit's in-bag rows (its split comes
  from the site's seed and the unit), exactly or through Thresholdout run by the site
  (``train_loss`` is the analyst's resubstitution error, the mechanism's train value);
  charged one answer whether answered or refused;
* ``final_evaluation(session, models)`` - once per unit and role (``finals_per_unit``),
  and for the lockbox at most ``lockbox_answers`` times in the site's life: the losses of
  at most ``[final] max_models`` models on the out-of-bag rows (curator) or on all rows
  (lockbox), each model charged one answer; the answer is used up as soon as the
  request arrives, even if it is then refused;
* ``status(session)``, ``ledger(session)`` - the session's own counts and history;
* ``close_session(session, owner)`` - the owner only.

Every model passes the learner's record validation and the differencing guard before
its loss is computed; predictions are the site's own, positions into its own label set.
Every answer is charged to the site's lifetime ``[budget] answers`` and to the share of
the analyst credential whose session asked (see :mod:`raytune_fed.federation._policy`),
before the request's arrays are decoded.

Thresholdout's noise for a query is drawn from a stream derived from the site's seed,
the unit, the query's place in its session and the predictions asked about, never from
one stream in arrival order: the same grid gets the same answers on any run, with any
number of concurrent cells, after a restart and after a resume.

A site answers many requests at once (a threaded actor, the service's request threads):
``query`` and ``final_evaluation`` are charged under the site's lock, score their models
without it, and pass the guard, Thresholdout and the ledger under it again, in the order
they were charged (see :class:`~raytune_fed.federation.Party`).  A query's place in its
session (Thresholdout's draw) is fixed when it is charged.  Scoring is numpy on the
request's own thread; run the process's BLAS on one thread (the service and the site actor
do), so an answer does not depend on how many requests run beside it and the request's CPU
limit counts all of its scoring.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Generator
from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError
from raytune_fed.federation._data import site_data
from raytune_fed.federation._fields import Model, Models, Real, Refusal, Text, Units, record_fingerprint
from raytune_fed.federation._guard import DifferencingGuard, packed_hex
from raytune_fed.federation._party import DEFAULT_ANALYST, Party, Request, Session, restricted
from raytune_fed.federation._policy import MECHANISMS, ROLES, Policy
from raytune_fed.federation._records import (
    MAX_LEDGER_ENTRIES,
    FinalLosses,
    Ledger,
    LedgerEntry,
    Loss,
    ScheduleReceipt,
    SessionTicket,
    SiteStatus,
)
from raytune_fed.federation._schedule import Schedule, Unit
from raytune_fed.models import RecordError, rebuild_model


class Site(Party):
    """One RFMS data site under its owner's ``policy`` (see the module docstring)."""

    def __init__(self, X: Any, y: Any, policy: Policy, *, owner_secret: str | None = None) -> None:
        from raytune_fed.algorithms.thresholdout import Thresholdout
        from raytune_fed.random import derive

        if type(policy) is not Policy:
            raise ConfigError(f"a site needs a Policy, got {type(policy).__name__}")
        X, y = site_data(policy.name, X, y)
        labels = np.unique(y)
        if labels.size != 2:
            raise ConfigError(f"site {policy.name!r}: RFMS sites need rows of exactly 2 classes, got {labels.size}")
        super().__init__(policy.name, ledger=policy.ledger, owner_secret=owner_secret,
                         max_request_bytes=policy.limits.max_request_bytes,
                         max_header_bytes=policy.limits.max_header_bytes,
                         seconds_per_request=policy.limits.seconds_per_query)
        self.policy = policy
        self._X = X
        self._y = (y == labels[1]).astype(np.int8)  # positions into the site's own sorted labels
        self._y.flags.writeable = False
        self._schedule: Schedule | None = None
        self._units: dict[str, Unit] = {}
        self._splits: dict[str, np.ndarray] = {}
        self._budget_used = 0
        self._answers = policy.lifetime_answers(len(y))
        self._answers_used: Counter[str] = Counter()  # by analyst credential
        self._finals: Counter[tuple[str, str]] = Counter()
        self._opened: Counter[tuple[str, str, str]] = Counter()  # sessions by (unit, role, credential)
        self._approved_lockbox_units: int | None = None
        self._guard = DifferencingGuard(len(y), policy.guard.k)
        self._exact: set[tuple[str, str]] = set()  # (predictions, rows) of every model answered exactly
        t = policy.thresholdout
        self._thresholdout = Thresholdout(threshold=t.threshold, sigma=t.sigma, gamma=t.gamma, budget=t.budget,
                                          seed=derive(policy.seed, "thresholdout"))  # noise: _noise(), per query
        self._restore()

    @property
    def n_features(self) -> int:
        return int(self._X.shape[1])

    # -- rows a unit scores -------------------------------------------------------------

    def _rows(self, session: Session, final: bool) -> np.ndarray:
        """Boolean mask of the rows a request of ``session`` is scored on."""
        if session.role == "lockbox":
            return np.ones(len(self._y), dtype=bool)
        if session.unit not in self._splits:
            from raytune_fed.random import derive
            from raytune_fed.simulation import inbag_outbag

            inbag, _ = inbag_outbag(self._y, inbag_fraction=self.policy.curator.inbag_fraction,
                                    seed=derive(self.policy.seed, "inbag", session.unit))
            mask = np.zeros(len(self._y), dtype=bool)
            mask[inbag] = True
            mask.flags.writeable = False
            self._splits[session.unit] = mask
        inbag = self._splits[session.unit]
        return ~inbag if final else inbag

    def _finals_allowed(self, session: Session) -> bool:
        if session.role == "curator":
            return self._finals[session.unit, "curator"] < self.policy.curator.finals_per_unit
        per_unit = self._finals[session.unit, "lockbox"] < self.policy.lockbox.finals_per_unit
        used = sum(n for (_, role), n in self._finals.items() if role == "lockbox")
        return per_unit and used < self.policy.lockbox_answers(self._approved_lockbox_units)

    def answers_left(self, analyst: str) -> int:
        """Answers the site may still give credential ``analyst`` (its share and the site's lifetime budget)."""
        site = self._answers - sum(self._answers_used.values())
        own = self.policy.analyst_answers(analyst, len(self._y)) - self._answers_used[analyst]
        return max(min(site, own), 0)

    # -- budget and one-shot answers (before any array is decoded) ----------------------

    def _admit(self, request: Request) -> int:
        spec, session = request.spec, request.session
        if spec.name not in ("query", "final_evaluation"):
            return 0
        if session is None:  # both are declared with a session
            raise RuntimeError(f"the site's {spec.name!r} request came without a session")
        if spec.name == "query":
            if session.role != "curator":
                raise Refusal("role")
            if session.sealed:
                raise Refusal("sealed")
            if self._budget_used >= self.policy.curator.query_budget or self.answers_left(session.analyst) < 1:
                raise Refusal("budget")
            self._budget_used += 1
            session.n_queries += 1
            self._answers_used[session.analyst] += 1
            self._current.draw = session.n_queries  # the query's place in its session, fixed now
            return 1
        models = request.args.get("models")  # final_evaluation
        if not isinstance(models, list) or not 1 <= len(models) <= self.policy.final.max_models:
            raise Refusal("malformed")  # decided by the request alone: nothing computed, nothing charged
        if session.sealed or not self._finals_allowed(session):
            raise Refusal("sealed")
        if self.answers_left(session.analyst) < len(models):
            raise Refusal("budget")
        self._finals[session.unit, session.role] += 1
        session.sealed = True
        self._answers_used[session.analyst] += len(models)
        return len(models)

    def _release(self, request: Request, charged: int) -> None:
        session = request.session
        if session is None:  # only query and final_evaluation are charged, both with a session
            raise RuntimeError(f"the site's {request.spec.name!r} request came without a session")
        if request.spec.name == "query":
            self._budget_used -= 1
            session.n_queries -= 1
        elif request.spec.name == "final_evaluation":
            self._finals[session.unit, session.role] -= 1
            session.sealed = False
        self._answers_used[session.analyst] -= charged

    # -- the protocol -------------------------------------------------------------------

    @restricted(request={"units": Units()}, answers=ScheduleReceipt, session=False)
    def declare_schedule(self, _: None, units: Schedule) -> tuple[ScheduleReceipt, dict[str, Any] | None]:
        if self._schedule is not None:
            if units.digest != self._schedule.digest:
                raise Refusal("schedule")
            return ScheduleReceipt(self.name, len(self._units), units.digest), None
        approved = self.policy.schedule.approved
        if len(units.units) > self.policy.max_units or (approved is not None and units.digest != approved):
            raise Refusal("schedule")
        self._accept(units)
        return (ScheduleReceipt(self.name, len(self._units), units.digest),
                {"units": units.as_list(), "digest": units.digest})

    def _accept(self, schedule: Schedule) -> None:
        self._schedule = schedule
        self._units = schedule.for_site(self.name)
        if schedule.digest == self.policy.schedule.approved:
            self._approved_lockbox_units = sum(u.lockbox == self.name for u in self._units.values())

    @restricted(request={"unit": Text(max_len=2000), "role": Text(choices=ROLES)}, answers=SessionTicket,
                session=False)
    def open_session(self, _: None, unit: str, role: str) -> tuple[SessionTicket, None]:
        if self._schedule is None or unit not in self._units or self._units[unit].role_of(self.name) != role:
            raise Refusal("schedule")
        if role not in self.policy.roles:
            raise Refusal("role")
        if self._opened[unit, role, self.caller] >= self.policy.limits.sessions_per_unit:
            raise Refusal("limit")
        self._opened[unit, role, self.caller] += 1
        token, session = self._issue(role, unit, self.caller)
        return SessionTicket(token, self.name, role, unit, int(self._rows(session, final=False).sum())), None

    def _score(self, record: Any, rows: np.ndarray, fingerprint: str) -> np.ndarray:
        """The site's own 0/1 predictions of a validated record on ``rows`` (all other rows 0)."""
        deadline = self.deadline.check
        try:
            model = rebuild_model(record, self.n_features, n_rows=int(rows.sum()), deadline=deadline)
            pred = model.predict(self._X[rows], deadline=deadline)
        except RecordError:
            raise Refusal("record", fingerprint=fingerprint) from None
        except TimeoutError:
            raise Refusal("timeout", fingerprint=fingerprint) from None
        if pred.shape != (int(rows.sum()),) or pred.dtype != np.int8 or np.any((pred != 0) & (pred != 1)):
            raise Refusal("internal", fingerprint=fingerprint)
        full = np.zeros(len(self._y), dtype=np.int8)
        full[rows] = pred
        return full

    @restricted(request={"model": Model(), "mechanism": Text(choices=MECHANISMS),
                         "train_loss": Real(0.0, 1.0, optional=True)}, answers=Loss)
    def query(self, session: Session, model: Any, mechanism: str, train_loss: float | None
              ) -> Generator[None, None, tuple[Loss, dict[str, Any]]]:
        start = time.thread_time()
        draw = self._current.draw
        if mechanism not in self.policy.curator.mechanisms:
            raise Refusal("mechanism")
        if (mechanism == "thresholdout") != (train_loss is not None):
            raise Refusal("malformed")
        rows = self._rows(session, final=False)
        fingerprint = record_fingerprint(model, self.deadline.check)
        pred = self._score(model, rows, fingerprint)
        bits = packed_hex(pred), packed_hex(rows)
        loss = float(np.mean(pred[rows] != self._y[rows]))
        scored = time.thread_time() - start
        yield  # from here under the site's lock, in the order the queries were charged
        start = time.thread_time()
        repeat = mechanism == "thresholdout" and bits in self._exact  # see _guard's docstring
        if not repeat and not self._guard.allows(pred, rows):
            raise Refusal("guard", fingerprint=fingerprint)
        ledger: dict[str, Any] = {"fingerprint": fingerprint, "mechanism": mechanism, "pred": bits[0],
                                  "rows": bits[1]}
        if mechanism == "exact":
            self._exact.add(bits)
        answer = loss
        if mechanism == "thresholdout":
            if train_loss is None:  # refused above
                raise RuntimeError("a thresholdout query without its training loss")
            noise = self._noise(session.unit, draw, bits)
            answer = min(max(self._thresholdout.answer(train_loss, loss, rng=noise), 0.0), 1.0)
            ledger["th"] = [train_loss, loss, draw]
        if not repeat:
            self._guard.add(pred, rows)
        ledger["answer"] = answer
        return Loss(answer, int(rows.sum()), scored + time.thread_time() - start), ledger

    def _noise(self, unit: str, draw: int, bits: tuple[str, str]) -> np.random.Generator:
        """Thresholdout's stream for the ``draw``-th query of a session of ``unit`` about predictions ``bits``."""
        from raytune_fed.random import derive

        return np.random.default_rng(derive(self.policy.seed, "thresholdout", unit, draw, bits[0] + bits[1]))

    @restricted(request={"models": Models(max_len=256)}, answers=FinalLosses)
    def final_evaluation(self, session: Session, models: tuple[Any, ...]
                         ) -> Generator[None, None, tuple[FinalLosses, dict[str, Any]]]:
        rows = self._rows(session, final=True)
        fingerprints = [record_fingerprint(m, self.deadline.check) for m in models]
        preds = [self._score(m, rows, f) for m, f in zip(models, fingerprints)]  # all validated before any loss
        yield  # from here under the site's lock, in the order the requests were charged
        values: list[float | None] = []
        kept: list[str | None] = []
        for pred in preds:
            if self._guard.allows(pred, rows):
                self._guard.add(pred, rows)
                values.append(float(np.mean(pred[rows] != self._y[rows])))
                kept.append(packed_hex(pred))
            else:
                values.append(None)
                kept.append(None)
        return FinalLosses(tuple(values), int(rows.sum())), {
            "fingerprints": fingerprints, "answers": values, "preds": kept,
            "rows": packed_hex(rows), "unit": session.unit, "role": session.role}

    @restricted(answers=SiteStatus)
    def status(self, session: Session) -> tuple[SiteStatus, None]:
        rows = self._rows(session, final=False)
        left = min(max(self.policy.curator.query_budget - self._budget_used, 0), self.answers_left(session.analyst))
        return SiteStatus(self.name, session.role, session.unit, int(rows.sum()), session.n_queries, left,
                          session.sealed), None

    @restricted(answers=Ledger)
    def ledger(self, session: Session) -> tuple[Ledger, None]:
        out: list[LedgerEntry] = []
        for e in self._ledger.entries:
            if e.get("session") != session.key:
                continue
            if e["event"] == "query":
                out.append(LedgerEntry(e["time"], e["fingerprint"], "query", e["answer"]))
            elif e["event"] == "final_evaluation":
                out.extend(LedgerEntry(e["time"], f, "final", a) for f, a in zip(e["fingerprints"], e["answers"]))
            elif e["event"] == "refused" and e.get("charged"):
                out.append(LedgerEntry(e["time"], e.get("fingerprint", ""), "refused", None))
        return Ledger(tuple(out[-MAX_LEDGER_ENTRIES:])), None

    # -- restart ------------------------------------------------------------------------

    def _replay(self, entry: Any) -> None:
        event = entry.get("event")
        session = self._sessions.get(entry.get("session"))
        if event == "declare_schedule":
            self._accept(Schedule.from_list(entry["units"], max_units=len(entry["units"])))
        elif event == "session":
            self._opened[entry["unit"], entry["role"], entry.get("analyst", DEFAULT_ANALYST)] += 1
        method = entry.get("method") if event == "refused" else event
        if entry.get("charged") and session is not None:
            charged = entry["charged"]
            if charged is True:  # a ledger written before answers were counted: a final charged its models
                charged = len(entry.get("fingerprints", ())) or 1
            self._answers_used[session.analyst] += int(charged)
            if method == "query":
                self._budget_used += 1
                session.n_queries += 1
            elif method == "final_evaluation":
                self._finals[session.unit, session.role] += 1
                session.sealed = True
        if event == "query":
            bits = entry["pred"], entry["rows"]
            if entry["mechanism"] == "exact" or bits not in self._exact:  # as query() added it (see _guard)
                self._guard.add_packed(*bits)
            if entry["mechanism"] == "exact":
                self._exact.add(bits)
            if "th" in entry:  # brings back the over-threshold count; the noise is the query's own
                if session is None:  # the ledger's check ties every query to an open session
                    raise RuntimeError("a query in the ledger without its session")
                train, holdout, draw = entry["th"]
                self._thresholdout.answer(train, holdout,
                                          rng=self._noise(session.unit, draw, (entry["pred"], entry["rows"])))
        elif event == "final_evaluation":
            for pred in entry["preds"]:
                if pred is not None:
                    self._guard.add_packed(pred, entry["rows"])
