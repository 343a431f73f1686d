"""Parties of vertical SecureBoost: records at the boundary, key custody, sessions, views."""

import numpy as np
import pytest

from raytune_fed.attacks import privacy_leakage
from raytune_fed.crypto import secret_context
from raytune_fed.errors import BoundaryViolationError, ConfigError, QueryRefusedError
from raytune_fed.federation.parties import (
    ActiveParty, PassiveClient, PassiveParty, RouteBits, RowIds, TrainingReport, check_party_answer)
from raytune_fed.models.secureboost import SecureBoostClassifier

TIMES = dict(encryption=0.005, decryption=0.002, addition=0.0003, product=0.0006)
PARAMS = dict(n_federated_trees=3, n_local_trees=1, max_depth=3, subsample=0.8, op_times=TIMES)


@pytest.fixture(scope="module")
def data():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=600, n_features=8, n_informative=8, n_redundant=0, random_state=1)
    return X, y, np.arange(400), np.arange(400, 600)


def test_parties_train_the_model_the_estimator_trains(data):
    X, y, train, test = data
    active = ActiveParty(X[:, :4], y, train_rows=train, test_rows=test)
    passive = PassiveParty(X[:, 4:], name="bank")
    report = active.train("s1", {**PARAMS, "he": "bfv"}, [PassiveClient(passive, "s1")])
    model = SecureBoostClassifier(**PARAMS, he="plain").fit(X[train], y[train])
    assert isinstance(report, TrainingReport) and report.metric == "1-auc"
    assert report.op_counts.as_dict() == model.op_counts_
    from raytune_fed.metrics import auc

    assert report.utility_loss == pytest.approx(1 - auc(y[test], model.predict_proba(X[test])[:, 1]))
    # the passive party's view is the in-process worker's view
    view = passive.view("s1")
    assert [t for t, _ in view.partitions()] == [t for t, _ in model.passive_views_[0].partitions()]
    assert privacy_leakage(view, y[train], n_sample=200).value == \
        privacy_leakage(model.passive_views_[0], y[train], n_sample=200).value
    assert view.ciphertext_bytes > 0 and view.context_bytes > 1000


def test_a_passive_party_refuses_a_secret_key(data):
    X, _, train, _ = data
    active = secret_context("bfv")
    leaked = b"raytune-fed-he/1 bfv\n" + active._ts.serialize(save_secret_key=True)
    with pytest.raises(ConfigError, match="holds a secret key"):
        PassiveParty(X[:, 4:]).open_session("s", leaked, 32, RowIds.of(train))


def test_mismatched_party_rows_are_refused(data):
    X, y, train, test = data
    active = ActiveParty(X[:, :4], y, train_rows=train, test_rows=test)
    short = PassiveParty(X[:599, 4:], name="short")
    with pytest.raises(ConfigError, match="parties hold different rows: active 'active' has 600, passive 'short' "
                                          "has 599"):
        active.train("s", PARAMS, [PassiveClient(short, "s")])


@pytest.mark.parametrize("params, message", [
    ({"max_depth": 0}, "max_depth must be an integer"),
    ({"n_trees": 3}, r"unknown SecureBoost parameters \['n_trees'\]"),
    ({"passive_features": [1]}, r"unknown SecureBoost parameters \['passive_features'\]"),
    ({"he": "ckks"}, "unknown HE scheme 'ckks'"),
])
def test_active_party_checks_parameters(data, params, message):
    X, y, train, test = data
    active = ActiveParty(X[:, :4], y, train_rows=train, test_rows=test)
    with pytest.raises(ConfigError, match=message):
        active.train("s", {**PARAMS, **params}, [PassiveClient(PassiveParty(X[:, 4:]), "s")])


def test_sessions_are_single_use_and_closed_ones_answer_nothing(data):
    X, _, train, _ = data
    party = PassiveParty(X[:, 4:], name="p")
    public = secret_context("plain").public_context()
    info = party.open_session("a", public, 16, RowIds.of(train))
    assert (info.n_masks, info.n_rows) == (4 * 16, 600)
    with pytest.raises(QueryRefusedError, match="session 'a' was opened before"):
        party.open_session("a", public, 16, RowIds.of(train))
    party.close_session("a")
    with pytest.raises(QueryRefusedError, match="session 'a' is closed"):
        party.view("a")
    with pytest.raises(QueryRefusedError, match="session 'b' is not open"):
        party.split("b", 0, 0, 0)


def test_party_answers_are_checked_records():
    rows = RowIds.of(np.array([1, 5, 9]))
    assert rows.array().tolist() == [1, 5, 9]
    bits = RouteBits.of(np.array([[True, False], [False, True], [True, True]]))
    assert bits.array().tolist() == [[True, False], [False, True], [True, True]]
    with pytest.raises(BoundaryViolationError, match="RowIds.data must be 16 bytes"):
        RowIds(2, b"123")
    with pytest.raises(BoundaryViolationError, match="a party may only answer with"):
        check_party_answer(np.arange(3))
    with pytest.raises(BoundaryViolationError, match="utility_loss must be a finite float"):
        from raytune_fed.federation.parties import OpTally

        TrainingReport(1.5, "1-auc", OpTally(0, 0, 0, 0), 0.0, 0.0, 1, 0)
