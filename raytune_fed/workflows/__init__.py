"""Workflows: short compositions of the shared layers (RFMS; PU selection and vertical boosting follow)."""
