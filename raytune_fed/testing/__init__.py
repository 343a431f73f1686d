"""Contract suites shipped with the package (as Optuna ships ``optuna.testing``).

Every ask/tell core passes ``CORE_CHECKS`` and every Tune searcher ``SEARCHER_CHECKS``::

    import pytest
    from raytune_fed.testing import CORE_CASES, CORE_CHECKS

    @pytest.mark.parametrize("case", CORE_CASES, ids=str)
    @pytest.mark.parametrize("check", CORE_CHECKS, ids=lambda c: c.__name__)
    def test_core_contract(check, case):
        check(case)

A new core is a :class:`CoreCase` (a module-level ``make(seed)`` and ``evaluate(config)``);
add it to ``CORE_CASES`` in ``raytune_fed/testing/_cases.py`` or run the checks over it in
its own tests.  A failed check raises :class:`ContractError` naming the rule.  Ray is
imported only when a searcher check runs.  A check that starts another interpreter has the
attribute ``starts_process = True`` (the project's tests mark those ``process``).
"""

from raytune_fed.testing._cases import CORE_CASES, SEARCHER_CASES
from raytune_fed.testing._cores import CORE_CHECKS, CoreCase
from raytune_fed.testing._searchers import SEARCHER_CHECKS, SearcherCase
from raytune_fed.testing._util import ContractError

__all__ = ["CORE_CASES", "CORE_CHECKS", "ContractError", "CoreCase", "SEARCHER_CASES", "SEARCHER_CHECKS",
           "SearcherCase"]
