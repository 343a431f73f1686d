"""A passive party as the attacker meets it: wire bytes into ``call``, nothing else.

The attacker holds a valid session of its own (it is the active party of one training)
or none, knows the protocol (it is public) and sends hand-made messages.  Every answer
must be a declared record or one of the fixed refusals, and a refusal never quotes
what was sent.
"""

import pickle

import numpy as np
import pytest

from raytune_fed.crypto import secret_context
from raytune_fed.federation import REFUSALS, _wire
from raytune_fed.federation.parties import PassiveClient, PassiveParty

OWNER = "passive-owner-" + "x" * 16
CANARY = "CANARY-7f3a"
N_ROWS = 60
FIXED_TEXTS = set(REFUSALS.values())
PICK0 = np.array([[0, 0, 0]], dtype=np.int64)  # tree 0, node 0, mask 0


@pytest.fixture()
def party(tmp_path):
    X = np.random.default_rng(0).normal(size=(N_ROWS, 3))
    return PassiveParty(X, name="bank", owner_secret=OWNER, ledger=str(tmp_path / "ledger.jsonl"),
                        max_request_bytes=1 << 22)


@pytest.fixture()
def public():
    return secret_context("plain").public_context()


def send(party, method, **args):
    return reply_of(party.call(_wire.encode({"method": method, "args": args})))


def reply_of(raw):
    assert CANARY.encode() not in raw
    data = _wire.decode(raw, max_bytes=1 << 30)
    if "refused" in data:
        assert data["refused"]["message"] == REFUSALS[data["refused"]["code"]] and \
            data["refused"]["message"] in FIXED_TEXTS
        return data["refused"]["code"]
    return data["answer"]


def token(party, unit="t"):
    return PassiveClient.admit(party, owner=OWNER, unit=unit).session


def opened(party, public):
    t = token(party)
    assert send(party, "open_session", session=t, context=public, n_bins=4,
                train_rows=np.arange(40, dtype=np.int64))["type"] == "PartyInfo"
    return t


class Boom:
    def __reduce__(self):
        return (exec, ("import pathlib; pathlib.Path('pwned').write_text('x')",))


def test_pickled_payloads_are_never_loaded(party, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for payload in (pickle.dumps({"method": "info", "args": {}}), pickle.dumps(Boom()),
                    _wire.MAGIC + pickle.dumps(Boom())):
        assert reply_of(party.call(payload)) == "malformed"
    assert not (tmp_path / "pwned").exists()
    assert reply_of(party.call("not bytes")) == "malformed"


@pytest.mark.parametrize("method", ["_worker", "_issue", "_restore", "__init__", "call", "_X", "features",
                                    "rows", "worker", "PROTOCOL", "view_rows", CANARY])
def test_only_declared_methods_exist(party, method):
    assert send(party, method, session=token(party)) == "unknown_method"


def test_a_message_must_name_a_method_and_args(party):
    for request in ({"method": "info"}, {"args": {}}, {"method": "info", "args": [], }, [1, 2],
                    {"method": 3, "args": {}}, {"method": "info", "args": {}, "extra": CANARY}):
        assert reply_of(party.call(_wire.encode(request))) in ("malformed", "unknown_method")


@pytest.mark.parametrize("fields", [
    {"context": CANARY},                                        # a str where bytes belong
    {"n_bins": 1}, {"n_bins": 10 ** 9}, {"n_bins": 4.0}, {"n_bins": True}, {"n_bins": CANARY},
    {"train_rows": list(range(40))},                            # a JSON list, not an int buffer
    {"train_rows": np.arange(40, dtype=np.float64)},            # floats
    {"train_rows": np.arange(40, dtype=np.int64)[::-1].copy()},  # not sorted
    {"train_rows": np.zeros(40, dtype=np.int64)},               # repeated ids
    {"train_rows": np.arange(-1, 39, dtype=np.int64)},          # a negative id
    {"train_rows": np.arange(N_ROWS + 1, dtype=np.int64)},      # an id the party does not hold
    {"train_rows": np.arange(200_000, dtype=np.int64)},         # a huge array
    {"train_rows": np.arange(40, dtype=np.int64).reshape(4, 10)},
    {"train_rows": np.array([], dtype=np.int64)},
    {"extra": CANARY},                                          # an undeclared field
])
def test_malformed_open_requests_are_refused(party, public, fields):
    args = {"session": token(party), "context": public, "n_bins": 4, "train_rows": np.arange(40, dtype=np.int64)}
    assert send(party, "open_session", **{**args, **fields}) == "malformed"


def test_a_message_over_the_size_cap_is_refused(party, public):
    rows = np.arange(N_ROWS, dtype=np.int64)
    assert send(party, "open_session", session=token(party), context=public + b"\0" * (1 << 22), n_bins=4,
                train_rows=rows) == "malformed"


MALFORMED_PROTOCOL = [
    ("splits", {"picks": np.array([[-1, 0, 0]], dtype=np.int64)}),
    ("splits", {"picks": np.array([[1 << 21, 0, 0]], dtype=np.int64)}),          # tree over the cap
    ("splits", {"picks": np.array([[0, 1 << 20, 0]], dtype=np.int64)}),          # node over the cap
    ("splits", {"picks": np.array([[0, -5, 0]], dtype=np.int64)}),
    ("splits", {"picks": np.array([[0, 0, -1]], dtype=np.int64)}),
    ("splits", {"picks": np.array([[0, 0, 1 << 40]], dtype=np.int64)}),
    ("splits", {"picks": np.zeros((0, 3), dtype=np.int64)}),                     # nothing asked
    ("splits", {"picks": np.zeros((1, 2), dtype=np.int64)}),                     # wrong width
    ("splits", {"picks": np.zeros(3, dtype=np.int64)}),                          # 1-D
    ("splits", {"picks": [[0, 0, 0]]}),                                          # a JSON list
    ("splits", {"picks": np.zeros((1, 3))}),                                     # floats
    ("splits", {"picks": PICK0, "tree": 0}),                                     # a field it does not take
    ("splits", {}),
    ("histograms", {"queries": []}),
    ("histograms", {"queries": [{"tree": 0, "node": 0, "parent": -1, "block": 1, "sibling": -1}]}),  # neither
    ("histograms", {"queries": [{"tree": 0, "node": 0, "parent": -1, "block": 1, "sibling": -1,
                                 "rows": np.arange(5, dtype=np.int64)}]}),                       # rows, no gh
    ("histograms", {"queries": [{"tree": 0, "node": 0, "parent": -1, "block": 1, "sibling": -1,
                                 "rows": np.arange(5, dtype=np.int64),
                                 "gh": {"scheme": "pickle", "blobs": [b"x"]}}]}),
    ("histograms", {"queries": [{"tree": 0, "node": 0, "parent": -1, "block": 1, "sibling": -1,
                                 "rows": np.arange(N_ROWS + 5, dtype=np.int64),
                                 "gh": {"scheme": "plain", "blobs": [b"x"]}}]}),
    ("histograms", {"queries": [{"tree": 0, "node": 3, "parent": 1, "block": 0, "sibling": 4, "x": CANARY}]}),
    ("histograms", {"queries": [{"tree": 0, "node": 1 << 30, "parent": 0, "block": 0, "sibling": 2}]}),
    ("histograms", {"queries": [{"tree": -1, "node": 3, "parent": 1, "block": 0, "sibling": 4}]}),
    ("histograms", {"queries": [{"node": 3, "parent": 1, "block": 0, "sibling": 4}]}),       # no tree
    ("histograms", {"tree": 0, "queries": [{"tree": 0, "node": 3, "parent": 1, "block": 0, "sibling": 4}]}),
    ("route", {"keys": np.zeros((2, 3), dtype=np.int64), "rows": np.arange(5, dtype=np.int64)}),
    ("route", {"keys": [[0, 0]], "rows": np.arange(5, dtype=np.int64)}),
    ("route", {"keys": np.zeros((1, 2), dtype=np.int64), "rows": np.arange(N_ROWS, N_ROWS + 3, dtype=np.int64)}),
    ("op_counts", {"tree": 0}),
]


@pytest.mark.parametrize("method, fields", MALFORMED_PROTOCOL)
def test_malformed_protocol_requests_are_refused(party, public, method, fields):
    assert send(party, method, session=opened(party, public), **fields) == "malformed"


def test_requests_out_of_protocol_order_are_refused(party, public):
    t = token(party)
    assert send(party, "splits", session=t, picks=PICK0) == "protocol"  # before open_session
    t = opened(party, public)
    assert send(party, "splits", session=t, picks=PICK0) == "protocol"  # a node never sent
    assert send(party, "route", session=t, keys=np.zeros((1, 2), dtype=np.int64),
                rows=np.arange(5, dtype=np.int64)) == "protocol"                   # a split it never made
    assert send(party, "histograms", session=t,
                queries=[{"tree": 0, "node": 1, "parent": 0, "block": 0, "sibling": 2}]) == "protocol"


def test_guessed_replayed_and_closed_tokens_are_refused(party, public, tmp_path):
    t = opened(party, public)
    assert send(party, "open_session", session=t, context=public, n_bins=4,
                train_rows=np.arange(40, dtype=np.int64)) == "opened"  # a second open with a used token
    for guess in (t[:-1] + ("A" if t[-1] != "A" else "B"), "x" * 43, "", CANARY, 7, None, ["t"]):
        assert send(party, "info", session=guess) == "session"
    other = PassiveParty(np.ones((N_ROWS, 2)), owner_secret=OWNER)
    assert send(other, "info", session=t) == "session"  # a token of another party
    assert send(party, "close", session=t)["type"] == "Closed"
    for method in ("info", "op_counts", "close"):  # replayed after close
        assert send(party, method, session=t) == "session"
    assert send(party, "open_session", session=t, context=public, n_bins=4,
                train_rows=np.arange(40, dtype=np.int64)) == "session"
    # a token is stored as its hash only, in memory and in the ledger
    assert t not in (tmp_path / "ledger.jsonl").read_text() and t not in repr(party._sessions)


def test_a_refused_open_uses_the_token_up(party):
    t = token(party)
    assert send(party, "open_session", session=t, context=b"raytune-fed-he/1 bfv\nnot a context", n_bins=4,
                train_rows=np.arange(40, dtype=np.int64)) == "context"
    assert send(party, "open_session", session=t, context=secret_context("plain").public_context(), n_bins=4,
                train_rows=np.arange(40, dtype=np.int64)) == "opened"


def test_sessions_and_views_are_the_owners(party, public):
    assert send(party, "new_session", unit="u") == "owner"
    assert send(party, "new_session", unit="u", owner="passive-owner-" + "y" * 16) == "owner"
    t = opened(party, public)
    assert send(party, "view", session=t) == "owner"               # the active party cannot read the view
    assert send(party, "view", session=t, owner=OWNER + "x") == "owner"
    assert send(party, "close_session", session=t) == "owner"
    assert send(party, "view", session=t, owner=OWNER)["type"] == "ViewRecord"
    assert send(PassiveParty(np.ones((N_ROWS, 2))), "new_session", unit="u", owner=OWNER) == "owner"  # no owner set


def test_the_session_cap_holds(tmp_path):
    party = PassiveParty(np.ones((N_ROWS, 2)), owner_secret=OWNER, max_sessions=2)
    token(party, "a"), token(party, "b")
    assert send(party, "new_session", unit="c", owner=OWNER) == "budget"


def test_every_answer_of_a_session_is_in_the_ledger_and_refusals_are_counted(party, public):
    """An answer is a ledger line before it leaves; a refusal that charges nothing is counted
    (a line at its 1st, 2nd, 4th, ... occurrence), so refused requests cannot fill the party's disk."""
    t = opened(party, public)
    before = len(party._ledger.entries)
    for _ in range(5):
        send(party, "splits", session=t, picks=PICK0)
    send(party, "splits", session=t, picks=-PICK0 - 1)
    send(party, "view", session=t, owner=OWNER)
    entries = party._ledger.entries[before:]
    assert [(e["event"], e.get("code"), e.get("count")) for e in entries] == [
        ("uncharged", "protocol", 1), ("uncharged", "protocol", 2), ("uncharged", "protocol", 4),
        ("uncharged", "malformed", 1), ("view", None, None)]


def test_answers_are_records_of_bytes_and_scalars_only(party, public):
    from raytune_fed.models.secureboost import SecureBoostClassifier

    X = np.random.default_rng(1).normal(size=(N_ROWS, 5))
    y = (X[:, 0] + X[:, 3] > 0).astype(int)
    party = PassiveParty(X[:, 3:], owner_secret=OWNER)
    replies = []
    original = party.call
    party.call = lambda message: replies.append(original(message)) or replies[-1]
    client = PassiveClient.admit(party, owner=OWNER, unit="u")
    SecureBoostClassifier(n_federated_trees=2, max_depth=2, he="plain").fit(X[:, :3], y, passive=[client],
                                                                            rows=np.arange(N_ROWS))

    def leaves(value):
        if isinstance(value, dict):
            for v in value.values():
                yield from leaves(v)
        elif isinstance(value, list):
            for v in value:
                yield from leaves(v)
        else:
            yield value

    kinds = set()
    for raw in replies:
        answer = _wire.decode(raw, max_bytes=1 << 30)["answer"]
        kinds.add(answer["type"])
        assert all(type(v) in (bytes, int, float, str, bool, type(None)) for v in leaves(answer))
        assert b"\x80\x04" not in raw[:64]  # no pickle frame
    assert {"SessionTicket", "PartyInfo", "EncryptedHistograms", "SplitRows"} <= kinds
    # replaying a split of the finished training is refused, and so is a node named twice
    assert send(party, "splits", session=client.session, picks=PICK0) == "protocol"
    assert send(party, "splits", session=client.session, picks=np.array([[1, 3, 0], [1, 3, 0]])) == "protocol"


def test_sessions_of_one_party_run_concurrently_and_each_one_at_a_time(party, public):
    import threading

    from raytune_fed.errors import ConfigError
    from raytune_fed.federation._party import token_key

    a, b = opened(party, public), opened(party, public)
    gate, results = threading.Event(), []

    def blocked(*args):
        assert gate.wait(10)
        raise ConfigError("never seen by the caller")

    party._workers[token_key(a)].splits = blocked
    thread = threading.Thread(target=lambda: results.append(send(party, "splits", session=a, picks=PICK0)))
    thread.start()
    assert send(party, "info", session=b)["type"] == "PartyInfo"  # answered while a's request is running
    assert not party._serial(party._sessions[token_key(a)]).acquire(blocking=False)  # a's own requests wait
    gate.set()
    thread.join(10)
    assert results == ["protocol"]


@pytest.mark.ray
def test_the_attacks_fail_the_same_way_against_the_party_actor(ray_session, public):
    """The same attacker over Ray: wire bytes into the PartyActor's only method."""
    from raytune_fed.federation.parties import remote_party

    ray = ray_session
    actor = remote_party(PassiveParty, "bank", np.random.default_rng(0).normal(size=(N_ROWS, 3)), owner_secret=OWNER)

    class OverRay:
        def call(self, message):
            return ray.get(actor.call.remote(message))

    party = OverRay()
    assert reply_of(party.call(pickle.dumps({"method": "info", "args": {}}))) == "malformed"
    fresh = PassiveClient.admit(actor, owner=OWNER, unit="a").session
    assert send(party, "open_session", session=fresh, context=public, n_bins=4,
                train_rows=list(range(40))) == "malformed"  # a JSON list, not an int array
    t = PassiveClient.admit(actor, owner=OWNER, unit="b").session
    rows = np.arange(40, dtype=np.int64)
    assert send(party, "open_session", session=t, context=public, n_bins=4, train_rows=rows)["type"] == "PartyInfo"
    assert send(party, "open_session", session=t, context=public, n_bins=4, train_rows=rows) == "opened"
    for guess in (t[:-1] + ("A" if t[-1] != "A" else "B"), CANARY, None):
        assert send(party, "info", session=guess) == "session"
    assert send(party, "view", session=t) == "owner"
    assert send(party, "new_session", unit="c") == "owner"
    assert send(party, "close", session=t)["type"] == "Closed"
    assert send(party, "info", session=t) == "session"  # replayed after close
    ray.kill(actor)


def _train_through(transport, X, y):
    from raytune_fed.models.secureboost import SecureBoostClassifier

    client = PassiveClient.admit(transport, owner=OWNER, unit="trained")
    SecureBoostClassifier(n_federated_trees=2, max_depth=2, he="plain", purity_threshold=1.0).fit(
        X[:, :3], y, passive=[client], rows=np.arange(N_ROWS))
    return client.session


def _protocol_attacks(party, admit, train, public):
    """The malformed requests, and replays into a finished training, against ``party`` (a ``call``)."""
    for method, fields in MALFORMED_PROTOCOL:
        t = admit(f"m-{method}-{len(str(fields))}")
        assert send(party, "open_session", session=t, context=public, n_bins=4,
                    train_rows=np.arange(40, dtype=np.int64))["type"] == "PartyInfo"
        assert send(party, method, session=t, **fields) == "malformed", (method, fields)
    t = train()
    assert send(party, "splits", session=t, picks=PICK0) == "protocol"  # a split of the finished training again
    assert send(party, "splits", session=t, picks=np.array([[1, 3, 0], [1, 3, 0]])) == "protocol"  # a node twice
    assert send(party, "histograms", session=t,
                queries=[{"tree": 0, "node": 1, "parent": 0, "block": 0, "sibling": 9}]) == "protocol"
    assert send(party, "histograms", session=t,  # node 2 re-derived as the empty "0 minus 0"
                queries=[{"tree": 0, "node": 2, "parent": 0, "block": 0, "sibling": 0}]) == "protocol"
    assert send(party, "histograms", session=t,  # "1 minus 0": a sibling that is not within the parent
                queries=[{"tree": 0, "node": 2, "parent": 1, "block": 0, "sibling": 0}]) == "protocol"


def _xy():
    X = np.random.default_rng(1).normal(size=(N_ROWS, 5))
    return X, (X[:, 0] + X[:, 3] > 0).astype(int)


@pytest.mark.ray
def test_the_protocol_attacks_fail_against_the_party_actor(ray_session, public):
    from raytune_fed.federation.parties import remote_party

    ray = ray_session
    X, y = _xy()
    actor = remote_party(PassiveParty, "bank", X[:, 3:], owner_secret=OWNER)

    class OverRay:
        def call(self, message):
            return ray.get(actor.call.remote(message))

    try:
        _protocol_attacks(OverRay(), lambda unit: PassiveClient.admit(actor, owner=OWNER, unit=unit).session,
                          lambda: _train_through(actor, X, y), public)
    finally:
        ray.kill(actor)


def test_the_protocol_attacks_fail_against_the_party_service(public):
    import threading

    from raytune_fed.serve import HttpTransport, serve

    X, y = _xy()
    token = "active-token-" + "s" * 16
    server = serve(PassiveParty(X[:, 3:], owner_secret=OWNER), token=token)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    transport = HttpTransport(server.url, token)

    class OverHttp:
        def call(self, message):
            (reply,) = transport.collect([transport.submit(message)])
            return reply

    try:
        _protocol_attacks(OverHttp(), lambda unit: PassiveClient.admit(transport, owner=OWNER, unit=unit).session,
                          lambda: _train_through(transport, X, y), public)
    finally:
        server.shutdown()
        server.server_close()
