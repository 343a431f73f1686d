"""Parties as Ray actors: same training as in-process, data shipped once, placement by resource."""

import numpy as np
import pytest

from raytune_fed.federation.parties import ActiveParty, PassiveClient, PassiveParty, remote_party

OWNER = "passive-owner-" + "x" * 16
PARAMS = dict(n_federated_trees=2, max_depth=3, he="bfv",
              op_times=dict(encryption=0.005, decryption=0.002, addition=0.0003, product=0.0006))


def test_party_actors_train_as_in_process_parties(ray_session):
    from sklearn.datasets import make_classification

    ray = ray_session
    X, y = make_classification(n_samples=500, n_features=8, n_informative=8, n_redundant=0, random_state=2)
    train, test = np.arange(350), np.arange(350, 500)
    local = ActiveParty(X[:, :4], y, train_rows=train, test_rows=test).train(
        "s", PARAMS, [PassiveClient.admit(PassiveParty(X[:, 4:], name="p", owner_secret=OWNER), owner=OWNER,
                                          unit="s")])
    passive = remote_party(PassiveParty, "p", ray.put(X[:, 4:]), owner_secret=OWNER)
    active = remote_party(ActiveParty, "a", ray.put(X[:, :4]), y, train_rows=train, test_rows=test)
    client = PassiveClient.admit(passive, owner=OWNER, unit="s")
    assert client.kind == "actor"
    report = ray.get(active.train.remote("s", PARAMS, [client]))
    assert report.op_counts == local.op_counts and report.utility_loss == local.utility_loss
    view = client.view(owner=OWNER)
    assert len(view.trees) == 2 and view.ciphertext_bytes > 0
    # the passive party's actor has one method, and the active party's none that hands out key, labels or models
    assert _methods(passive) == ["call"]
    assert _methods(active) == ["close_session", "info", "train"]


def test_a_party_actor_answers_wire_bytes_only(ray_session):
    import pickle

    from raytune_fed.federation import _wire

    ray = ray_session
    passive = remote_party(PassiveParty, "p", np.ones((10, 2)), owner_secret=OWNER)
    for message in (pickle.dumps({"method": "info", "args": {}}), _wire.encode({"method": "_X", "args": {}})):
        reply = _wire.decode(ray.get(passive.call.remote(message)), max_bytes=1 << 20)
        assert reply["refused"]["code"] in ("malformed", "unknown_method")


def _methods(handle):
    return sorted(m for m in dir(handle) if not m.startswith("_") and hasattr(getattr(handle, m), "remote"))


def test_placement_pins_declared_resources_only(ray_session):
    from raytune_fed.runtime import party_placement, placement, site_placement

    assert placement("site", "pinned") == {"resources": {"site:pinned": 0.001}} == site_placement("pinned")
    assert party_placement("nowhere") == {}
    from raytune_fed.errors import ConfigError

    with pytest.raises(ConfigError, match="placement kind"):
        placement("site:x", "y")


def test_a_party_actor_handle_carries_no_data_refs_but_the_actor_transport_cannot_stop_code_in_the_actor(ray_session):
    """The handle a cell gets (Tune ships it through the object store) holds no reference to the party's rows:
    nothing in it lets a holder ``ray.get`` them.  What the actor transport cannot stop, the attacker below does
    with the handle alone: ``__ray_call__`` runs its function inside the actor and reads the rows (a pickled
    argument of ``call.remote`` would run there too).  So the actor is a simulation transport; a passive party
    that must hold against its active party runs ``raytune-fed party serve`` on its own machine."""
    ray = ray_session
    X = np.random.default_rng(3).normal(size=(40, 3))
    data = ray.put(X)
    passive = remote_party(PassiveParty, "p", data, owner_secret=OWNER)
    context = ray._private.worker.global_worker.get_serialization_context()
    carried = {ref.hex() for ref in context.serialize({"handle": passive}).contained_object_refs}
    assert data.hex() not in carried and not any(isinstance(v, ray.ObjectRef) for v in vars(passive).values())

    @ray.remote(num_cpus=0)
    def cell(handle):  # an analyst's cell holding only the handle
        import ray

        return ray.get(handle.__ray_call__.remote(lambda actor: np.asarray(actor._party._X)))

    assert np.array_equal(ray.get(cell.remote(passive)), X)  # the limit the trust table states
    ray.kill(passive)
