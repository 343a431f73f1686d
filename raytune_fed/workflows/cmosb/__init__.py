"""CMOSB: constrained multi-objective tuning of vertical SecureBoost (utility, cost, privacy)."""

from raytune_fed.workflows.cmosb._objectives import (
    OBJECTIVES, PARAMETERS, Evaluation, evaluate, search_space)
from raytune_fed.workflows.cmosb._tasks import TASKS, VerticalTask, load_task

__all__ = ["OBJECTIVES", "PARAMETERS", "TASKS", "Evaluation", "VerticalTask", "evaluate", "load_task", "search_space"]
