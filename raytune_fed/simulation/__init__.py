"""Simulated data sites and parties: site splits, RFMS roles, vertical and PU partitions.

Pure numpy / scikit-learn (no Ray).  Every random function takes an explicit ``seed``
(an int, a ``numpy.random.SeedSequence`` or a ``Generator``).
"""

from raytune_fed.simulation._pu import make_pu
from raytune_fed.simulation._roles import Roles, inbag_outbag, role_assignments
from raytune_fed.simulation._splits import SPLIT_METHODS, SiteSplit, check_sites, split_sites
from raytune_fed.simulation._vertical import vertical_partition

__all__ = [
    "SPLIT_METHODS",
    "Roles",
    "SiteSplit",
    "check_sites",
    "inbag_outbag",
    "make_pu",
    "role_assignments",
    "split_sites",
    "vertical_partition",
]
