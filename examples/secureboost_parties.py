"""SecureBoost with the parties as Ray actors: the active party trains, the passive party answers.

The active party holds the labels and five columns of Synthetic1; the passive party holds
the other five columns of the same rows. The passive party's owner admits one training
(a session token the party issues); the active party's actor trains through that session
and returns only a report (utility loss, operation counts, cost), never its model or keys.

Run: python examples/secureboost_parties.py  (about 20 seconds; starts a local Ray session)
"""

import ray

from raytune_fed.federation.parties import ActiveParty, PassiveClient, PassiveParty, remote_party
from raytune_fed.runtime import connect
from raytune_fed.workflows.cmosb import load_task

OWNER = "the passive party owner's secret"


def main(he: str = "bfv"):
    task = load_task("synthetic1")
    connect(num_cpus=2)
    active = remote_party(ActiveParty, "active", task.X[:, task.active_features], task.y,
                          train_rows=task.train_rows, test_rows=task.test_rows)
    passive = remote_party(PassiveParty, "bank", task.X[:, task.passive_features[0]], owner_secret=OWNER)
    try:
        client = PassiveClient.admit(passive, owner=OWNER, unit="example-training")   # the owner's act
        params = {"n_federated_trees": 3, "n_local_trees": 1, "max_depth": 3, "learning_rate": 0.3,
                  "subsample": 0.8, "purity_threshold": 0.9, "he": he}
        report = ray.get(active.train.remote("training-1", params, [client]))
    finally:
        ray.kill(active)
        ray.kill(passive)
    print(f"encryption {he}: test {report.metric} = {report.utility_loss:.4f}, {report.n_trees} trees "
          f"({report.n_federated_trees} federated), {report.op_counts.encryptions} encryptions, "
          f"training cost {report.training_cost:.2f} s of BFV operations")
    return report


if __name__ == "__main__":
    main()
