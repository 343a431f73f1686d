"""Restricted sites: what curators and lockboxes answer, refuse and record.

The same classes are exercised in-process and as Ray actors.
"""

import dataclasses
import inspect

import numpy as np
import pytest
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.datasets import make_classification
from sklearn.pipeline import Pipeline

from raytune_fed.errors import BoundaryViolationError, BudgetExhaustedError, ConfigError, QueryRefusedError, SealedError
from raytune_fed.models import get_learner
from raytune_fed.simulation import inbag_outbag
from raytune_fed.federation import (
    RECORD_TYPES, Curator, FinalLosses, Lockbox, Loss, OpenBox, SiteClient, SiteHost, check_outgoing, final_all,
    query_all, remote_site)

X, Y = make_classification(n_samples=160, n_features=12, n_informative=5, random_state=3)
SVM = get_learner("svm")
CONFIG = {"C": 1.0, "sigma": 0.05}


def fitted(X_=X, y=Y, config=CONFIG):
    return SVM.build(config, seed=0).fit(X_, y)


class Exfiltrate(BaseEstimator, TransformerMixin):
    """A transformer that would copy the rows it sees: must never be admitted."""

    def fit(self, X, y=None):
        self.seen_ = None
        return self

    def transform(self, X):
        self.seen_ = np.array(X)
        return X


class SneakyPipeline(Pipeline):
    pass


def _refused_payloads():
    good = fitted()
    wrong_width = fitted(X[:, :5])
    foreign = Pipeline([("spy", Exfiltrate()), ("svc", good.steps[-1][1])]).fit(X, Y)
    sneaky = SneakyPipeline(good.steps)
    return [
        ("a dict", {"weights": [1, 2]}, "Pipeline"),
        ("a function", lambda Z: np.zeros(len(Z)), "Pipeline"),
        ("unfitted", SVM.build(CONFIG, seed=0), "fitted"),
        ("wrong width", wrong_width, "5"),
        ("foreign step", foreign, "Exfiltrate"),
        ("pipeline subclass", sneaky, "SneakyPipeline"),
    ]


def test_curator_answers_inbag_loss_and_logs_it():
    cur = Curator(X, Y, name="c0", seed=7)
    model = fitted()
    inbag, _ = inbag_outbag(Y, inbag_fraction=0.8, seed=7)
    ans = cur.query(model)
    assert type(ans) is Loss
    assert ans.value == pytest.approx(np.mean(model.predict(X[inbag]) != Y[inbag]))
    assert ans.n_rows == len(inbag)
    ledger = cur.ledger()
    assert len(ledger) == 1 and ledger.entries[0].answer == ans.value and ledger.entries[0].kind == "query"
    assert cur.status().n_queries == 1


@pytest.mark.parametrize("what, payload, message", _refused_payloads(), ids=[p[0] for p in _refused_payloads()])
def test_curator_refuses_anything_but_an_allowed_fitted_model(what, payload, message):
    cur = Curator(X, Y, name="c0", seed=1)
    with pytest.raises(QueryRefusedError, match=message):
        cur.query(payload)
    assert len(cur.ledger()) == 0 and cur.status().n_queries == 0


def test_budget_is_enforced():
    cur = Curator(X, Y, seed=0, budget=2)
    model = fitted()
    cur.query(model)
    cur.query(model)
    assert cur.status().budget_left == 0
    with pytest.raises(BudgetExhaustedError, match="budget of 2 is spent"):
        cur.query(model)
    assert len(cur.ledger()) == 2


def test_final_evaluation_once_then_sealed():
    cur = Curator(X, Y, seed=0)
    model = fitted()
    _, outbag = inbag_outbag(Y, inbag_fraction=0.8, seed=0)
    final = cur.final_evaluation([model, model])
    assert final.values[0] == pytest.approx(np.mean(model.predict(X[outbag]) != Y[outbag]))
    with pytest.raises(SealedError, match="answers once"):
        cur.final_evaluation([model])
    with pytest.raises(SealedError, match="selection is closed"):
        cur.query(model)


def test_lockbox_answers_once_on_all_rows_and_nothing_else():
    lb = Lockbox(X, Y, name="lb")
    model = fitted(X[:100], Y[:100])
    assert not hasattr(lb, "query")
    with pytest.raises(QueryRefusedError, match="list of 1..256 fitted models"):
        lb.final_evaluation([])
    final = lb.final_evaluation([model])
    assert final.n_rows == len(Y)
    assert final.values[0] == pytest.approx(np.mean(model.predict(X) != Y))
    with pytest.raises(SealedError):
        lb.final_evaluation([model])


def test_a_refused_model_in_a_final_batch_does_not_seal():
    lb = Lockbox(X, Y)
    with pytest.raises(QueryRefusedError):
        lb.final_evaluation([fitted(), {"not": "a model"}])
    assert lb.final_evaluation([fitted()]).n_rows == len(Y)


def test_host_sessions_are_single_use_and_roles_restricted():
    host = SiteHost(X, Y, name="s0", max_sessions=3)
    host.open_session("e1", "curator", seed=0)
    host.open_session("e2", "lockbox")
    model = fitted()
    assert type(host.query("e1", model)) is Loss
    with pytest.raises(QueryRefusedError, match="lockbox does not answer curator queries"):
        host.query("e2", model)
    host.final_evaluation("e2", [model])
    host.close_session("e2")
    with pytest.raises(QueryRefusedError, match="opened before"):
        host.open_session("e2", "lockbox")  # a sealed lockbox cannot be reset
    with pytest.raises(QueryRefusedError, match="is closed"):
        host.final_evaluation("e2", [model])
    with pytest.raises(ConfigError, match="unknown role 'openbox'"):
        host.open_session("e3", "openbox")
    host.open_session("e3", "curator")
    with pytest.raises(QueryRefusedError, match="cap of 3 sessions"):
        host.open_session("e4", "curator")


def test_every_public_answer_is_a_small_record():
    """No method of a restricted site returns feature rows or labels: only records of scalars."""
    model = fitted()
    host = SiteHost(X, Y, name="s0")
    answers = [host.open_session("q", "curator", seed=0), host.query("q", model), *host.query_many("q", [model]),
               host.status("q"), host.ledger("q"), host.final_evaluation("q", [model]),
               host.open_session("l", "lockbox"), host.final_evaluation("l", [model]), host.close_session("l")]
    public = {n for n, _ in inspect.getmembers(SiteHost, inspect.isfunction) if not n.startswith("_")}
    assert public == {"open_session", "query", "query_many", "final_evaluation", "status", "ledger",
                      "close_session"}
    for a in answers:
        for leaf in (a if isinstance(a, tuple) else (a,)):
            assert type(leaf) in RECORD_TYPES
            for f in dataclasses.fields(leaf):
                value = getattr(leaf, f.name)
                values = value if isinstance(value, tuple) else (value,)
                for v in values:
                    if dataclasses.is_dataclass(v):
                        continue
                    assert isinstance(v, (int, float, str, bool, type(None))), (type(leaf), f.name, type(v))
                assert not (isinstance(value, tuple) and len(value) >= len(Y) // 2)


@pytest.mark.parametrize("build, message", [
    (lambda: Loss(1.5, 10), "Loss.value"),
    (lambda: Loss(np.array([0.1, 0.2]), 10), "must be a float"),
    (lambda: Loss(0.1, 0), "n_rows"),
    (lambda: FinalLosses([0.1], 5), "tuple"),
    (lambda: FinalLosses(tuple(np.zeros(300)), 5), "1..256"),
    (lambda: check_outgoing(np.zeros(3)), "may only answer"),
    (lambda: check_outgoing({"X": [1.0]}), "may only answer"),
])
def test_records_check_themselves(build, message):
    with pytest.raises(BoundaryViolationError, match=message):
        build()


def test_openbox_trains_on_inbag_only():
    ob = OpenBox(X, Y, seed=4)
    inbag, outbag = inbag_outbag(Y, inbag_fraction=0.8, seed=4)
    model = ob.fit(SVM, CONFIG, seed=0)
    reference = SVM.build(CONFIG, seed=0).fit(X[inbag], Y[inbag])
    assert np.array_equal(model.predict(X), reference.predict(X))
    assert ob.outbag_error(model) == pytest.approx(np.mean(reference.predict(X[outbag]) != Y[outbag]))
    assert 0.0 <= ob.cv_error(SVM, CONFIG, n_folds=5, seed=0) <= 1.0


def test_sites_as_ray_actors_keep_their_restrictions(ray_session):
    ray = ray_session
    xref, yref = ray.put(X), ray.put(Y)
    hosts = [remote_site(SiteHost, f"s{i}", xref, yref) for i in range(2)]
    ray.get([hosts[0].open_session.remote("e", "curator", seed=3), hosts[1].open_session.remote("e", "lockbox")])
    curator, lockbox = SiteClient(hosts[0], "e"), SiteClient(hosts[1], "e")
    model = fitted()
    local = Curator(X, Y, seed=3).query(model)
    answers = [query_all([curator], model)[0] for _ in range(3)]
    assert all(type(a) is Loss and a.value == local.value for a in answers)
    assert len(curator.ledger()) == 3 and curator.status().n_queries == 3
    with pytest.raises(QueryRefusedError, match="Pipeline"):
        curator.query({"not": "a model"})
    with pytest.raises(QueryRefusedError, match="does not answer curator queries"):
        lockbox.query(model)
    (final,) = final_all([lockbox], [model])
    assert final.values[0] == pytest.approx(np.mean(model.predict(X) != Y))
    with pytest.raises(SealedError):
        lockbox.final_evaluation([model])
    assert len(curator.ledger()) == 3  # refusals are not answers


def test_openbox_and_roles_also_run_as_actors(ray_session):
    ray = ray_session
    openbox = remote_site(OpenBox, "ob", X, Y, seed=4)
    local = OpenBox(X, Y, seed=4)
    assert ray.get(openbox.cv_error.remote(SVM, CONFIG, n_folds=5, seed=0)) == local.cv_error(SVM, CONFIG, n_folds=5,
                                                                                                  seed=0)
    model = ray.get(openbox.fit.remote(SVM, CONFIG, seed=0))
    lockbox = remote_site(Lockbox, "lb", X, Y)
    first = ray.get(lockbox.final_evaluation.remote([model]))
    assert first.values[0] == pytest.approx(np.mean(model.predict(X) != Y))
    with pytest.raises(SealedError):
        ray.get(lockbox.final_evaluation.remote([model]))
