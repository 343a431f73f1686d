"""Shared fixtures: one small local Ray session for every test that needs Ray.

Every test that uses the ``ray_session`` fixture is marked ``ray``, so
``pytest -m "not ray"`` runs the pure tests alone.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "ray_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)


@pytest.fixture(scope="session")
def ray_session():
    """A 2-CPU local Ray session shared by the whole test run; this node offers site "pinned"."""
    from raytune_fed.runtime import connect

    ray = connect(num_cpus=2, resources={"site:pinned": 1})
    yield ray
    ray.shutdown()
