"""Restricted sites for an honest analyst: what curators and lockboxes answer and record.

The same checks run against the site in-process, as a Ray actor and as a TLS service.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from site_targets import UNIT, X, Y, make_target, target, tls  # noqa: F401

from raytune_fed.errors import QueryRefusedError, SealedError
from raytune_fed.federation import RECORD_TYPES, FinalLosses, Ledger, Loss, OpenBox, SiteStatus, final_all, query_all
from raytune_fed.models import get_learner
from raytune_fed.random import derive
from raytune_fed.simulation import inbag_outbag

SVM = get_learner("svm")


def model(config, rows=slice(0, 100)):
    pipeline = SVM.build(config).fit(X[rows], Y[rows])
    return pipeline, SVM.encode(config, pipeline)


def site_inbag(unit=UNIT, seed=11):
    return inbag_outbag(Y, inbag_fraction=0.8, seed=derive(seed, "inbag", unit.key))


def test_curator_answers_the_inbag_loss_the_site_computes_itself(target):
    cur = target.curator()
    inbag, _ = site_inbag()
    pipeline, record = model({"C": 1.0, "sigma": 0.05})
    loss = cur.query(record)
    assert type(loss) is Loss and loss.n_rows == len(inbag) == cur.n_rows
    assert loss.value == pytest.approx(np.mean(pipeline.predict(X[inbag]) != Y[inbag]))
    entry, = cur.ledger().entries
    assert (entry.kind, entry.answer) == ("query", loss.value)
    assert cur.status().n_queries == 1 and cur.status().budget_left == 19  # of the site's 160 // 8 answers


def test_final_evaluations_once_per_unit_on_the_right_rows(target):
    cur, lb = target.curator(), target.lockbox()
    _, outbag = site_inbag()
    pipelines, records = zip(*(model(c) for c in ({"C": 1.0, "sigma": 0.05}, {"C": 4.0, "sigma": 0.5})))
    final = cur.final_evaluation(list(records))
    assert final.n_rows == len(outbag)
    assert final.values[0] == pytest.approx(np.mean(pipelines[0].predict(X[outbag]) != Y[outbag]))
    with pytest.raises(SealedError):
        cur.query(records[0])  # the session's selection is closed
    (answer,) = final_all([lb], [records[1]])
    assert answer.n_rows == len(Y) and answer.values[0] == pytest.approx(np.mean(pipelines[1].predict(X) != Y))
    with pytest.raises(SealedError):
        lb.final_evaluation([records[0]])
    assert lb.status().sealed


def test_thresholdout_runs_in_the_curator_with_the_sites_stream(make_target):
    """fso_th: the site answers its in-bag loss plus noise, or the analyst's train value; the
    noise of a query comes from the site's seed, the unit, the query's place in its session
    and the predictions asked about."""
    from raytune_fed.algorithms.thresholdout import Thresholdout
    from raytune_fed.federation._guard import packed_hex

    configs = [{"C": 2.0 ** e, "sigma": 0.05} for e in range(-2, 8)]
    answers = []
    for _ in range(2):  # two sites with the same policy: the same answers
        cur = make_target("local").curator()
        got = []
        for i, c in enumerate(configs):
            try:
                got.append(cur.query(model(c)[1], mechanism="thresholdout", train_loss=0.0 if i % 2 else 0.5).value)
            except QueryRefusedError:
                got.append(None)
        answers.append(got)
    assert answers[0] == answers[1]
    inbag, _ = site_inbag()
    rows = np.zeros(len(Y), dtype=bool)
    rows[inbag] = True
    expected = []
    for i, c in enumerate(configs):
        if answers[0][i] is None:
            continue
        pred = np.zeros(len(Y), dtype=np.int8)
        pred[rows] = model(c)[0].predict(X[rows])
        holdout = float(np.mean(pred[rows] != Y[rows]))
        noise = np.random.default_rng(derive(11, "thresholdout", UNIT.key, i + 1, packed_hex(pred) + packed_hex(rows)))
        answer = Thresholdout(seed=0).answer(0.0 if i % 2 else 0.5, holdout, rng=noise)
        expected.append(min(max(answer, 0.0), 1.0))
    assert [a for a in answers[0] if a is not None] == pytest.approx(expected)
    assert any(a not in (0.0, 0.5) for a in answers[0] if a is not None)  # some answers are noisy holdouts


def test_thresholdout_answers_do_not_depend_on_the_order_sessions_ask(make_target):
    """Two cells of one unit (two sessions) asking alternately or one after the other get the
    same answers: nothing depends on which query reaches the site first."""
    records = [model({"C": 2.0 ** e, "sigma": 0.05})[1] for e in range(0, 6)]
    runs = []
    for interleave in (False, True):
        t = make_target("local", guard={"k": 0})
        first, second = t.curator(), t.client.open_session(UNIT, "curator")
        order = [(s, i) for i in range(3) for s in (0, 1)] if interleave else [(s, i) for s in (0, 1) for i in range(3)]
        got = {}
        for s, i in order:
            session, record = (first, records[i]) if s == 0 else (second, records[3 + i])
            got[s, i] = session.query(record, mechanism="thresholdout", train_loss=0.5).value
        runs.append(got)
    assert runs[0] == runs[1]


def test_a_mechanism_the_policy_does_not_offer_is_refused(make_target):
    cur = make_target("local", curator={"mechanisms": ["exact"]}).curator()
    with pytest.raises(QueryRefusedError, match="does not offer this answer mechanism"):
        cur.query(model({"C": 1.0, "sigma": 0.05})[1], mechanism="thresholdout", train_loss=0.2)
    assert cur.status().n_queries == 1


def test_query_all_asks_several_sites_at_once(make_target):
    sites = [make_target("local") for _ in range(2)]
    sessions = [t.curator() for t in sites]
    _, record = model({"C": 1.0, "sigma": 0.05})
    losses = query_all(sessions, record)
    assert len(losses) == 2 and losses[0] == dataclasses.replace(losses[1], seconds=losses[0].seconds)


def test_every_answer_is_a_small_record(target):
    cur, lb = target.curator(), target.lockbox()
    _, record = model({"C": 1.0, "sigma": 0.05})
    answers = [cur.query(model({"C": 3.0, "sigma": 0.2})[1]), cur.status(), cur.ledger(),
               cur.final_evaluation([record]), lb.final_evaluation([record]), lb.status(), lb.ledger()]
    for a in answers:
        assert type(a) in RECORD_TYPES
        leaves = [getattr(a, f.name) for f in dataclasses.fields(a)]
        for leaf in leaves:
            values = leaf if isinstance(leaf, tuple) else (leaf,)
            for v in values:
                assert dataclasses.is_dataclass(v) or isinstance(v, (int, float, str, bool, type(None)))
            assert not (isinstance(leaf, tuple) and len(leaf) >= len(Y) // 2)
    assert {type(a) for a in answers} == {Loss, SiteStatus, Ledger, FinalLosses}


def test_openbox_trains_on_inbag_only():
    ob = OpenBox(X, Y, seed=4)
    inbag, outbag = inbag_outbag(Y, inbag_fraction=0.8, seed=4)
    fitted = ob.fit(SVM, {"C": 1.0, "sigma": 0.05}, seed=0)
    reference = SVM.build({"C": 1.0, "sigma": 0.05}, seed=0).fit(X[inbag], Y[inbag])
    assert np.array_equal(fitted.predict(X), reference.predict(X))
    assert ob.outbag_error(fitted) == pytest.approx(np.mean(reference.predict(X[outbag]) != Y[outbag]))
