"""SecureBoost for vertical federated learning (the CMOSB paper's Algorithms 1 and 4).

:class:`SecureBoostClassifier` is a scikit-learn classifier; its passive parties answer
through the :class:`PassiveEndpoint` protocol (:class:`PassiveWorker` in-process, or
clients of party actors).  A passive party's :class:`PassiveView` is everything it
received: the input of the instance clustering attack.
"""

from raytune_fed.models.secureboost._estimator import SecureBoostClassifier
from raytune_fed.models.secureboost._passive import PassiveWorker
from raytune_fed.models.secureboost._protocol import NodeQuery, PassiveEndpoint
from raytune_fed.models.secureboost._tree import Tree
from raytune_fed.models.secureboost._view import PassiveView, TreeView

__all__ = ["NodeQuery", "PassiveEndpoint", "PassiveView", "PassiveWorker", "SecureBoostClassifier", "Tree", "TreeView"]
