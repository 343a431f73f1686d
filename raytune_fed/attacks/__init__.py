"""Label inference against vertical SecureBoost, from a passive party's view only.

:func:`privacy_leakage` runs the instance clustering attack (CMOSB Algorithm 2) and
returns eps_p (eq. 6); :func:`partition_mutual_information` and
:func:`leaf_mutual_information` measure how much a tree's instance distribution says
about the labels (Figure 3).  The defences are SecureBoost parameters
(``n_local_trees``, ``purity_threshold``).
"""

from raytune_fed.attacks._ica import (
    N_SAMPLE,
    Leakage,
    balanced_sample,
    cluster_and_label,
    component_clusters,
    cooccurrence,
    privacy_leakage,
    spectral_clusters,
)
from raytune_fed.attacks._mutual_info import leaf_mutual_information, partition_mutual_information

__all__ = ["N_SAMPLE", "Leakage", "balanced_sample", "cluster_and_label", "component_clusters", "cooccurrence",
           "leaf_mutual_information", "partition_mutual_information", "privacy_leakage", "spectral_clusters"]
