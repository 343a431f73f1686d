"""Shared fixtures: one small local Ray session for every test that needs Ray.

Two markers split the suite: ``ray`` (set here on every test that uses the ``ray_session``
fixture) and ``process`` (the test starts another interpreter or a site service: set on the
test, on a parameter, or here for contract checks with ``starts_process``).  The rest are the
pure tests, ``pytest -m "not ray and not process"`` (``make test-pure``); a pure test that
starts another Python interpreter fails with a message saying to mark it (small system tools,
such as the one joblib runs to count cores, are let through).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "ray_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if any(getattr(value, "starts_process", False) is True for value in params.values()):
            item.add_marker(pytest.mark.process)


@pytest.fixture(autouse=True)
def _pure_tests_start_no_process(request, monkeypatch):
    """Keep the pure selection pure: starting a process there is an error naming the fix."""
    if request.node.get_closest_marker("ray") or request.node.get_closest_marker("process"):
        return

    start = subprocess.Popen.__init__

    def refuse_interpreters(self, args, *rest, **kwargs):
        program = str(args if isinstance(args, (str, bytes, os.PathLike)) else args[0])
        if program == sys.executable or os.path.basename(program).startswith("python"):
            raise AssertionError(f"{request.node.nodeid} starts a Python process ({args!r}); mark it "
                                 f"@pytest.mark.process (or use ray_session)")
        start(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse_interpreters)


@pytest.fixture(scope="session")
def ray_session():
    """A 2-CPU local Ray session shared by the whole test run; this node offers site "pinned"."""
    from raytune_fed.runtime import connect

    ray = connect(num_cpus=2, resources={"site:pinned": 1})
    yield ray
    ray.shutdown()
