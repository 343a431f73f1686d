"""PU learners (fit on ``s``: 1 = labelled positive, 0 = unlabelled) as scikit-learn estimators.

* :class:`UPU` - du Plessis et al. 2015, squared loss in closed form, linear or Gaussian basis;
* :class:`NNPU` - Kiryo et al. 2017, a numpy MLP trained with Adam on the non-negative risk;
* :class:`WSVM` - Elkan & Noto 2008, an RBF SVC retrained with label-frequency weights;
* :class:`SupervisedPU` - LightGBM on ``s`` (unlabelled = negative) tuned by Optuna's TPE;
* class-prior estimators :class:`TIcE` (Bekker & Davis 2018) and :class:`ElkanNotoPrior`.

``PU_LEARNERS`` holds the Table-3 grids of ``upu`` and ``nnpu`` as registry entries
(``get_learner(name, task="pu")``); :func:`grid_configs` enumerates them.
"""

from raytune_fed.models.pu._base import PUClassifier, check_prior, check_pu_labels
from raytune_fed.models.pu._elkanoto import WSVM, ElkanNotoPrior
from raytune_fed.models.pu._learners import NNPU_BETAS, NNPU_GAMMAS, PU_LEARNERS, UPU_LAMBDAS, grid_configs
from raytune_fed.models.pu._nnpu import NNPU
from raytune_fed.models.pu._supervised import SupervisedPU
from raytune_fed.models.pu._tice import TIcE
from raytune_fed.models.pu._upu import UPU

__all__ = [
    "NNPU",
    "NNPU_BETAS",
    "NNPU_GAMMAS",
    "PU_LEARNERS",
    "PUClassifier",
    "SupervisedPU",
    "TIcE",
    "UPU",
    "UPU_LAMBDAS",
    "WSVM",
    "ElkanNotoPrior",
    "check_prior",
    "check_pu_labels",
    "grid_configs",
]
