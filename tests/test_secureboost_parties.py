"""Parties of vertical SecureBoost: records at the boundary, key custody, sessions, views."""

import numpy as np
import pytest

from raytune_fed.attacks import privacy_leakage
from raytune_fed.crypto import secret_context
from raytune_fed.errors import BoundaryViolationError, ConfigError, QueryRefusedError
from raytune_fed.federation.parties import (
    ActiveParty,
    PassiveClient,
    PassiveParty,
    RouteBits,
    RowIds,
    TrainingReport,
    check_party_answer,
)
from raytune_fed.federation.parties._passive_party import privacy_seed
from raytune_fed.models.secureboost import PassiveWorker, SecureBoostClassifier

OWNER = "passive-owner-" + "x" * 16
TIMES = dict(encryption=0.005, decryption=0.002, addition=0.0003, product=0.0006)
PARAMS = dict(n_federated_trees=3, n_local_trees=1, max_depth=3, subsample=0.8, op_times=TIMES)


@pytest.fixture(scope="module")
def data():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=600, n_features=8, n_informative=8, n_redundant=0, random_state=1)
    return X, y, np.arange(400), np.arange(400, 600)


def admit(party, unit="s1"):
    return PassiveClient.admit(party, owner=OWNER, unit=unit)


def test_parties_train_the_model_the_estimator_trains(data):
    X, y, train, test = data
    active = ActiveParty(X[:, :4], y, train_rows=train, test_rows=test)
    passive = PassiveParty(X[:, 4:], name="bank", owner_secret=OWNER)
    client = admit(passive)
    report = active.train("s1", {**PARAMS, "he": "bfv"}, [client])
    model = in_process(X, y, train)
    assert isinstance(report, TrainingReport) and report.metric == "1-auc"
    assert report.op_counts.as_dict() == model.op_counts_
    from raytune_fed.metrics import auc

    proba = model.predict_proba(X[test, :4], rows=test)[:, 1]
    assert report.utility_loss == pytest.approx(1 - auc(y[test], proba))
    # the passive party's view (its owner's to read) is the in-process worker's view
    view = client.view(owner=OWNER)
    assert [t for t, _ in view.partitions()] == [t for t, _ in model.passive_views_[0].partitions()]
    assert privacy_leakage(view, y[train], n_sample=200).value == \
        privacy_leakage(model.passive_views_[0], y[train], n_sample=200).value
    assert view.ciphertext_bytes > 0 and view.context_bytes > 1000


def test_a_passive_party_refuses_a_secret_key(data):
    X, _, train, _ = data
    active = secret_context("bfv")
    leaked = b"raytune-fed-he/1 bfv\n" + active._ts.serialize(save_secret_key=True)
    with pytest.raises(QueryRefusedError, match="refused open_session: the context is not a public encryption "
                                                "context \\(a secret key is never accepted\\)") as info:
        admit(PassiveParty(X[:, 4:], owner_secret=OWNER)).open_session(leaked, 32, train)
    assert info.value.code == "context"


def test_mismatched_party_rows_are_refused(data):
    X, y, train, test = data
    active = ActiveParty(X[:, :4], y, train_rows=train, test_rows=test)
    short = PassiveParty(X[:599, 4:], name="short", owner_secret=OWNER)
    with pytest.raises(ConfigError, match="parties hold different rows: active 'active' has 600, passive 'short' "
                                          "has 599"):
        active.train("s", PARAMS, [admit(short)])


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
        active.train("s", {**PARAMS, **params}, [admit(PassiveParty(X[:, 4:], owner_secret=OWNER))])


def test_sessions_are_single_use_and_closed_ones_answer_nothing(data):
    X, _, train, _ = data
    party = PassiveParty(X[:, 4:], name="p", owner_secret=OWNER)
    public = secret_context("plain").public_context()
    a = admit(party, "a")
    assert a.info().n_masks == 0
    assert a.open_session(public, 16, train) == 4 * 15 and a.n_rows_ == 600
    assert a.info().n_masks == 4 * 15
    with pytest.raises(QueryRefusedError, match="this session was opened before; a session is opened once"):
        a.open_session(public, 16, train)
    a.close()
    with pytest.raises(QueryRefusedError, match="no open session has this token"):
        a.view(owner=OWNER)
    b = admit(party, "b")
    with pytest.raises(QueryRefusedError, match="refused splits: the request does not follow the protocol"):
        b.splits([(0, 0, 0)])
    # the owner may end a session too (its state is dropped)
    b.open_session(public, 16, train)
    from raytune_fed.federation import SiteClient

    assert SiteClient(party).close_session(b.session, owner=OWNER).unit == "b"
    with pytest.raises(QueryRefusedError, match="no open session has this token"):
        b.op_counts()
    assert party._workers == {}


def test_party_answers_are_checked_records():
    rows = RowIds.of(np.array([1, 5, 9]))
    assert rows.array().tolist() == [1, 5, 9]
    bits = RouteBits.of(np.array([[True, False], [False, True], [True, True]]))
    assert bits.array().tolist() == [[True, False], [False, True], [True, True]]
    with pytest.raises(BoundaryViolationError, match="RowIds.data must be 16 bytes"):
        RowIds(2, b"123")
    with pytest.raises(BoundaryViolationError, match="a party may only answer with"):
        check_party_answer(np.arange(3))
    with pytest.raises(BoundaryViolationError, match=r"TrainingReport.utility_loss must be finite and in \[0.0, 1.0\]"):
        from raytune_fed.federation.parties import OpTally

        TrainingReport(1.5, "1-auc", OpTally(0, 0, 0, 0), 0.0, 0.0, 1, 0)


def test_a_restarted_party_reads_its_used_sessions_from_its_ledger(data, tmp_path):
    X, _, train, _ = data
    public = secret_context("plain").public_context()
    party = PassiveParty(X[:, 4:], name="p", ledger=str(tmp_path / "p.jsonl"), owner_secret=OWNER)
    opened, issued = admit(party, "a"), admit(party, "b")
    opened.open_session(public, 16, train)
    party.stop()  # its process ends
    restarted = PassiveParty(X[:, 4:], name="p", ledger=str(tmp_path / "p.jsonl"), owner_secret=OWNER)
    for old in (opened, issued):  # every token issued before the restart answers nothing
        with pytest.raises(QueryRefusedError, match="no open session has this token"):
            PassiveClient(restarted, old.session).open_session(public, 16, train)
    assert admit(restarted, "c").open_session(public, 16, train) == 4 * 15  # candidate splits: features x (bins - 1)


def in_process(X, y, train):
    """The estimator with a passive worker in this process holding the same (all aligned) rows as a party of
    seed 0 with the defaults (32 bins at most, its bins moved by the geometric mechanism, epsilon 1)."""
    worker = PassiveWorker(X[:, 4:], max_bins=32, bin_privacy=1.0, privacy_seed=privacy_seed(0, OWNER))
    return SecureBoostClassifier(**PARAMS, he="plain").fit(X[train, :4], y[train], passive=[worker], rows=train)


def test_encrypted_and_plain_training_through_the_wire_grow_the_in_process_trees(data):
    X, y, train, _ = data
    direct = in_process(X, y, train)
    for he in ("plain", "bfv"):
        client = admit(PassiveParty(X[:, 4:], owner_secret=OWNER), unit=he)
        wired = SecureBoostClassifier(**PARAMS, he=he).fit(X[train, :4], y[train], passive=[client], rows=train)
        assert len(wired.trees_) == len(direct.trees_)
        for s, t in zip(wired.trees_, direct.trees_):
            for name in ("owner", "mask", "value", "shared"):
                assert np.array_equal(getattr(s, name), getattr(t, name)), (he, name)
        assert wired.op_counts_ == direct.op_counts_
        np.testing.assert_array_equal(wired.predict_proba(X[train, :4], rows=train),
                                      direct.predict_proba(X[train, :4], rows=train))


def test_a_passive_party_served_over_http_trains_and_refuses_like_the_object(data):
    """The passive party on its own machine: ``raytune_fed.serve.serve`` answers POST /call with ``Party.call``."""
    import pickle
    import threading

    from raytune_fed.federation import _wire
    from raytune_fed.serve import HttpTransport, serve

    X, y, train, _ = data
    token = "analyst-token-" + "z" * 16
    server = serve(PassiveParty(X[:, 4:], owner_secret=OWNER), token=token)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        over_http = HttpTransport(server.url, token)
        client = PassiveClient.admit(over_http, owner=OWNER, unit="http")
        wired = SecureBoostClassifier(**PARAMS, he="plain").fit(X[train, :4], y[train], passive=[client], rows=train)
        direct = in_process(X, y, train)
        for s, t in zip(wired.trees_, direct.trees_):
            assert np.array_equal(s.mask, t.mask) and np.array_equal(s.value, t.value)

        def post(message, transport=over_http):
            (reply,) = transport.collect([transport.submit(message)])
            return _wire.decode(reply, max_bytes=1 << 20)

        assert post(pickle.dumps({"method": "info", "args": {}}))["refused"]["code"] == "malformed"
        assert post(_wire.encode({"method": "view", "args": {"session": client.session}}))["refused"]["code"] == "owner"
        client.close()
        assert post(_wire.encode({"method": "info", "args": {"session": client.session}}))["refused"]["code"] \
            == "session"  # replayed after close
        with pytest.raises(Exception, match="401|unauthori"):
            post(_wire.encode({"method": "info", "args": {}}), HttpTransport(server.url, "wrong-token-" + "q" * 16))
    finally:
        server.shutdown()
        server.server_close()
