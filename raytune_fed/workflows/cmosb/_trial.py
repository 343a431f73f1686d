"""One CMOSB trial: a SecureBoost training on the party actors, then the attack on the passive view.

:func:`start_parties` ships a task's columns to Ray once: the active party's actor holds
its features and the labels, the passive party's actor (a restricted party whose only
method is ``call``) its features (each pinned by ``party:<name>`` when a node declares
it).  Every trial of every method reuses them: :func:`trainable`, playing the passive
party's owner, admits one session per trial, asks the active party to train with the
trial's parameters through a client of that session, reads the passive party's view of
it with the owner's credential and runs the instance clustering attack on it, as the
simulation's attacker (:func:`run_trial`).  The trial reports the three objectives plus
the operation counts and seconds.  :func:`local_parties` sets up the same two parties as
objects in this process, so :func:`evaluate` runs a trial without Ray and measures what
the Tune trial of the same configuration and seed measures (in particular, the passive
party bins all the rows it holds in both).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from raytune_fed.attacks import N_SAMPLE, privacy_leakage
from raytune_fed.crypto import calibrate
from raytune_fed.errors import ConfigError
from raytune_fed.federation.parties import ActiveParty, PassiveClient, PassiveParty, remote_party
from raytune_fed.models.secureboost import check_op_times
from raytune_fed.random import Seed, derive, seed_int
from raytune_fed.workflows.cmosb._methods import trial_params
from raytune_fed.workflows.cmosb._objectives import Evaluation
from raytune_fed.workflows.cmosb._tasks import VerticalTask

ACTIVE, PASSIVE = "active", "passive"


@dataclass(frozen=True)
class Parties:
    """What every trial needs: the party actors and the simulation's attack inputs."""

    active: Any
    passive: Any
    train_labels: Any
    train_rows: Any
    n_outputs: int
    he: str
    op_times: dict[str, Any]
    seed: int
    n_sample: int = N_SAMPLE
    known_per_cluster: int = 1
    passive_owner: str = ""  # the simulation plays the passive party's owner (admits sessions, reads views)


def _parties(task: VerticalTask, active: Any, passive: Any, owner: str, *, he: str, op_times: dict[str, Any],
             seed: Any, n_sample: int, known_per_cluster: int) -> Parties:
    n_outputs = 1 if task.binary else task.n_classes
    return Parties(active, passive, task.y[task.train_rows], task.train_rows, n_outputs, he, dict(op_times),
                   seed_int(derive(seed, "trials")), n_sample, known_per_cluster, passive_owner=owner)


def _party_args(task: VerticalTask, seed: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two parties' arguments (features aside): the same for actors and in-process parties."""
    if len(task.passive_features) != 1:
        raise ConfigError(f"the CMOSB workflow trains with one passive party; this task has "
                          f"{len(task.passive_features)}")
    # the paper's active party is semi-honest: the passive party answers with its true bins (bin_privacy=None),
    # as the replicated results assume; a deployed passive party moves them (party serve's default)
    passive = {"seed": seed_int(derive(seed, "passive")), "owner_secret": secrets.token_urlsafe(24),
               "bin_privacy": None}
    return passive, {"train_rows": task.train_rows, "test_rows": task.test_rows}


def start_parties(task: VerticalTask, *, he: str, op_times: dict[str, Any], seed: Any, max_concurrency: int,
                  n_sample: int = N_SAMPLE, known_per_cluster: int = 1) -> Parties:
    """Start the two party actors of ``task`` (data put into the object store once)."""
    import ray  # Ray only where actors are started: evaluate() and the package import run without it

    passive_args, active_args = _party_args(task, seed)
    passive = remote_party(PassiveParty, PASSIVE, ray.put(task.X[:, task.passive_features[0]]),
                           max_concurrency=max_concurrency, **passive_args)
    active = remote_party(ActiveParty, ACTIVE, ray.put(task.X[:, task.active_features]), task.y,
                          max_concurrency=max_concurrency, **active_args)
    return _parties(task, active, passive, passive_args["owner_secret"], he=he, op_times=op_times, seed=seed,
                    n_sample=n_sample, known_per_cluster=known_per_cluster)


def local_parties(task: VerticalTask, *, he: str, op_times: dict[str, Any], seed: Any, n_sample: int = N_SAMPLE,
                  known_per_cluster: int = 1) -> Parties:
    """The two parties of ``task`` as objects in this process, set up exactly as :func:`start_parties`'s actors:
    a trial run on them (:func:`run_trial`) trains the same trees and measures the same objectives."""
    passive_args, active_args = _party_args(task, seed)
    passive = PassiveParty(task.X[:, task.passive_features[0]], name=PASSIVE, **passive_args)
    active = ActiveParty(task.X[:, task.active_features], task.y, name=ACTIVE, **active_args)
    return _parties(task, active, passive, passive_args["owner_secret"], he=he, op_times=op_times, seed=seed,
                    n_sample=n_sample, known_per_cluster=known_per_cluster)


def _on_active(parties: Parties, method: str, *args: Any) -> Any:
    """Call the active party's ``method``: on its actor (waiting for the answer) or on the object."""
    bound = getattr(parties.active, method)
    if hasattr(bound, "remote"):
        import ray  # lazily, as in start_parties: in-process parties need no Ray

        return ray.get(bound.remote(*args))
    return bound(*args)


def run_trial(config: dict, parties: Parties, session: str) -> dict[str, Any]:
    """Train with ``config`` as session ``session`` of the active party, attack, return the objectives."""
    params = {**trial_params(config), "he": parties.he, "op_times": parties.op_times,
              "random_state": seed_int(derive(parties.seed, "model"))}
    # The passive party draws each tree's candidate order from the unit it admits a training for, so the unit
    # names the training's parameters: the same configuration grows the same trees in every run and retry
    unit = "cmosb-" + hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:20]
    passive = PassiveClient.admit(parties.passive, owner=parties.passive_owner, unit=unit)
    report = _on_active(parties, "train", session, params, [passive])
    view = passive.view(owner=parties.passive_owner)
    passive.close()
    _on_active(parties, "close_session", session)
    start = time.perf_counter()
    leakage = privacy_leakage(view, parties.train_labels, rows=parties.train_rows, n_outputs=parties.n_outputs,
                              n_sample=parties.n_sample, known_per_cluster=parties.known_per_cluster,
                              seed=derive(parties.seed, "attack"))
    return {"utility_loss": report.utility_loss, "training_cost": report.training_cost,
            "privacy_leakage": leakage.value, **report.op_counts.as_dict(), "fit_seconds": report.fit_seconds,
            "attack_seconds": time.perf_counter() - start, "n_trees": report.n_trees,
            "n_federated_trees_grown": report.n_federated_trees,
            **{f"x_{k}": v for k, v in trial_params(config).items()}}


def trainable(config: dict, parties: Parties) -> dict[str, Any]:
    """Train, attack, report the objectives (Tune's function trainable)."""
    from ray import tune  # runs inside a Tune trial only

    # a session id is single-use at the active party: a retried trial gets a new one
    return run_trial(config, parties, f"{tune.get_context().get_trial_id()}-{uuid.uuid4().hex[:8]}")


def evaluate(task: VerticalTask, config: Mapping[str, Any], *, he: str = "plain", op_times: Any = None,
             seed: Seed = 0, n_sample: int = N_SAMPLE, known_per_cluster: int = 1) -> Evaluation:
    """Train SecureBoost with ``config`` on ``task`` and measure the objectives, without Ray.

    The parties are objects in this process, set up as the CMOSB workflow's party actors
    (:func:`local_parties`), and the training and attack are a workflow trial's
    (:func:`run_trial`): a configuration gives the same objectives and operation counts
    here as in a ``run_cmosb`` run with the same ``seed`` (the passive party bins all its
    rows, the active party its training rows).  ``op_times`` None calibrates on this machine.
    """
    times = check_op_times(op_times) or calibrate()
    parties = local_parties(task, he=he, op_times=times.as_dict(), seed=seed, n_sample=n_sample,
                            known_per_cluster=known_per_cluster)
    m = run_trial(dict(config), parties, f"evaluate-{uuid.uuid4().hex[:8]}")
    return Evaluation(float(m["utility_loss"]), float(m["training_cost"]), float(m["privacy_leakage"]),
                      m["encryptions"], m["decryptions"], m["additions"], m["products"], float(m["fit_seconds"]),
                      float(m["attack_seconds"]))
