"""Shared fixtures: one small local Ray session for every test that needs Ray."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_session():
    """A 2-CPU local Ray session shared by the whole test run; this node offers site "pinned"."""
    from raytune_fed.runtime import connect

    ray = connect(num_cpus=2, resources={"site:pinned": 1})
    yield ray
    ray.shutdown()
