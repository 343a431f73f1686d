"""Workflows: short compositions of the shared layers (RFMS, PU selection, vertical boosting).

:func:`load_results` reads any of their runs back as flat tables.
"""

from raytune_fed.workflows._results import load_results, recognise

__all__ = ["load_results", "recognise"]
