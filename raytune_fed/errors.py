"""The package's exception hierarchy.

Every error raised on purpose derives from :class:`RaytuneFedError`, so a caller (and the
CLI) can tell "bad input we recognised" from a bug.  Subclasses also inherit the builtin
exception whose meaning they carry (``ValueError``, ``TypeError``, ``PermissionError``),
so ``except ValueError`` keeps working for scikit-learn style callers.
"""

from __future__ import annotations


class RaytuneFedError(Exception):
    """Root of every error raised on purpose by raytune_fed."""


class ConfigError(RaytuneFedError, ValueError):
    """A parameter or option has a value outside its rule (the message names both)."""


class NoSelectionError(ConfigError):
    """A search ended with no configuration to name: nothing was told, or every job failed."""


class NoModelError(ConfigError):
    """A learner cannot fit a model on the rows it was given (the message says why), e.g. WSVM when its
    estimate of ``c`` weights every unlabelled row fully positive and no negative is left."""


class DatasetError(RaytuneFedError, ValueError):
    """A dataset cannot be loaded or is unusable (names the dataset and the problem)."""


class DatasetUnavailableError(DatasetError):
    """A dataset needs the network (OpenML) and could not be fetched."""


class SplitError(RaytuneFedError, ValueError):
    """A site split cannot satisfy its rules (e.g. a site without both classes)."""


class QueryRefusedError(RaytuneFedError, PermissionError):
    """A restricted site refused a query (wrong payload, budget spent, sealed)."""

    code: str  # set on a refusal received from a site or party: its fixed refusal code


class BudgetExhaustedError(QueryRefusedError):
    """A curator's query budget is spent."""


class SealedError(QueryRefusedError):
    """A one-shot evaluation (lockbox, final out-of-bag) was already answered or not yet open."""


class BoundaryViolationError(RaytuneFedError, TypeError):
    """Something other than a small validated record tried to cross a site boundary."""


class StoreError(RaytuneFedError, RuntimeError):
    """The results store is inconsistent (e.g. a key written twice with other content)."""
