"""Simulated data sites and parties: site splits, RFMS roles, vertical and PU partitions
(SCAR labels and PU train / validation / test splits).

Pure numpy / scikit-learn (no Ray).  Every random function takes an explicit ``seed``
(an int, a ``numpy.random.SeedSequence`` or a ``Generator``).
"""

from raytune_fed.simulation._pu import PU_DRAWS, make_pu
from raytune_fed.simulation._pu_split import POSITIVE_CLASS, PUSplit, pu_dataset, pu_split
from raytune_fed.simulation._roles import Roles, inbag_outbag, role_assignments
from raytune_fed.simulation._splits import SPLIT_METHODS, SiteSplit, check_sites, split_sites
from raytune_fed.simulation._vertical import vertical_partition

__all__ = [
    "POSITIVE_CLASS",
    "PUSplit",
    "PU_DRAWS",
    "SPLIT_METHODS",
    "Roles",
    "SiteSplit",
    "check_sites",
    "inbag_outbag",
    "make_pu",
    "pu_dataset",
    "pu_split",
    "role_assignments",
    "split_sites",
    "vertical_partition",
]
