"""The searchers in tune.Tuner on a real RFMS objective: an openbox's CV error and the
curators' answers, with the curators as restricted site actors reached only through their
query, to which each trial sends its model's record."""

from __future__ import annotations

import numpy as np
import pytest
from ray import tune

from raytune_fed.data import load_dataset
from raytune_fed.federation import OpenBox, Schedule, Unit, start_sites
from raytune_fed.models import get_learner
from raytune_fed.search import GPSearch, ParEGOSearch

N_TRIALS = 8


def make_rfms_objective():
    # built inside a function so cloudpickle ships it by value (tests/ is not importable on workers)
    def rfms_objective(config, openbox, curators):
        from raytune_fed.federation import query_all
        from raytune_fed.models import get_learner

        learner = get_learner("svm")
        local = openbox.cv_error(learner, config, n_folds=3, seed=0)
        losses = query_all(curators, learner.encode(config, openbox.fit(learner, config, seed=0)))
        weights = np.array([loss.n_rows for loss in losses], dtype=float)
        remote = float(np.dot(weights, [loss.value for loss in losses]) / weights.sum())
        return {"local": local, "remote": remote, "fso5": 0.5 * local + 0.5 * remote}
    return rfms_objective


UNITS = {"parego": Unit("site0", "site3", ("site1", "site2"), 0), "gp": Unit("site0", "site3", ("site1", "site2"), 1)}


@pytest.fixture(scope="module")
def rfms_sites(ray_session, tmp_path_factory):
    ds = load_dataset("geo5_sim")
    data = {f"site{i}": (ds.X[ds.sites == i], ds.y[ds.sites == i]) for i in (1, 2)}
    # guard off: the test compares every trial's value with the ledgers, so no model may be refused
    sites = start_sites(data, template={"guard": {"k": 0}}, seed=0, workdir=tmp_path_factory.mktemp("sites"),
                        deployment="actor")
    for client in sites.clients.values():
        client.declare_schedule(Schedule.of(UNITS.values()))
    return OpenBox(ds.X[ds.sites == 0], ds.y[ds.sites == 0], seed=0), list(sites.clients.values())


SVM_SPACE = {"C": tune.loguniform(2.0 ** -15, 2.0 ** 15), "sigma": tune.loguniform(2.0 ** -15, 2.0 ** 15)}


@pytest.mark.parametrize("make_searcher, session", [
    (lambda: ParEGOSearch(metric=["local", "remote"], mode=["min", "min"], n_initial_points=4, seed=3), "parego"),
    (lambda: GPSearch(metric="fso5", mode="min", n_initial_points=4, seed=3), "gp"),
])
def test_searchers_drive_a_real_rfms_objective(rfms_sites, ray_session, tmp_path, make_searcher, session):
    openbox, clients = rfms_sites
    curators = [c.open_session(UNITS[session], "curator") for c in clients]
    searcher = make_searcher()
    tuner = tune.Tuner(
        tune.with_parameters(make_rfms_objective(), openbox=openbox, curators=curators),
        param_space=SVM_SPACE,
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=N_TRIALS, max_concurrent_trials=2,
                                    reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0))
    results = tuner.fit()
    frame = results.get_dataframe()
    assert len(frame) == N_TRIALS and not results.errors
    assert frame[["local", "remote"]].apply(lambda c: c.between(0, 1)).all().all()
    # every trial reached each curator exactly once, through its query and nothing else
    answers: dict[str, list[tuple[float, int]]] = {}
    for c in curators:
        status = c.status()
        assert status.n_queries == N_TRIALS
        for e in c.ledger().entries:
            answers.setdefault(e.fingerprint, []).append((e.answer, status.n_rows))
    # the remote values the trials reported are exactly the ledgers' answers, size-weighted per model
    from_ledgers = sorted(sum(a * n for a, n in v) / sum(n for _, n in v) for v in answers.values())
    assert len(answers) == N_TRIALS and all(len(v) == len(curators) for v in answers.values())
    assert np.allclose(from_ledgers, sorted(frame["remote"]))
    assert searcher.core.n_told == N_TRIALS
    # the proposals are distinct configurations of the learner's space
    configs = frame[["config/C", "config/sigma"]].to_numpy()
    assert len(np.unique(configs, axis=0)) == N_TRIALS
    get_learner("svm").space.validate({"C": configs[0, 0], "sigma": configs[0, 1]})
