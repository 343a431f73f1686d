"""Every core and every Tune searcher of the package passes the shipped contract suites."""

import pytest

from raytune_fed.testing import CORE_CASES, CORE_CHECKS, SEARCHER_CASES, SEARCHER_CHECKS


@pytest.mark.parametrize("case", CORE_CASES, ids=str)
@pytest.mark.parametrize("check", CORE_CHECKS, ids=lambda c: c.__name__)
def test_core_contract(check, case):
    check(case)


@pytest.mark.parametrize("case", SEARCHER_CASES, ids=str)
@pytest.mark.parametrize("check", SEARCHER_CHECKS, ids=lambda c: c.__name__)
def test_searcher_contract(check, case):
    check(case)
