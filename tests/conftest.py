"""Shared fixtures: one small local Ray session for every test that needs Ray.

Two markers split the suite: ``ray`` (set here on every test that uses the ``ray_session``
fixture) and ``process`` (the test starts another interpreter or a site service: set on the
test, on a parameter, or here for contract checks with ``starts_process``).  The rest are the
pure tests, ``pytest -m "not ray and not process"`` (``make test-pure``); a pure test that
starts another Python interpreter fails with a message saying to mark it (small system tools,
such as the one joblib runs to count cores, are let through).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tempfile
from types import SimpleNamespace

import pytest

SERIAL_GROUP = "ray_and_processes"
_SERIAL_DIR = "raytune_fed_serial_dir"  # the controller's directory for the workers' lists, in each workerinput


def pytest_itemcollected(item):
    # per item as it is collected, before ``-m`` selects
    if "ray_session" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.ray)
    params = getattr(getattr(item, "callspec", None), "params", {})
    if any(getattr(value, "starts_process", False) is True for value in params.values()):
        item.add_marker(pytest.mark.process)


# `make test` runs pytest-xdist's ``-n 2 --dist loadgroup``: every Ray and process test goes to one worker, in
# collection order, on the one shared Ray session; the pure tests run on the other worker beside them (they start
# no process, and the Ray tests leave much of a core idle while they wait on Ray).  pytest-xdist groups by a suffix
# it writes into each test's id, which pytest 9.2 no longer lets it write, so each worker writes the ids of its Ray
# and process tests to a file in a directory the controller hands them, and the controller's scheduler reads the
# group from there.

def pytest_configure(config):
    if not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") == "loadgroup":
        config._serial_dir = tempfile.mkdtemp(prefix="raytune-fed-tests-")


def pytest_unconfigure(config):
    if getattr(config, "_serial_dir", None):
        shutil.rmtree(config._serial_dir, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    workerinput = getattr(config, "workerinput", {})
    if workerinput.get(_SERIAL_DIR):
        serial = [item.nodeid for item in items if item.get_closest_marker("ray") or item.get_closest_marker("process")]
        path = os.path.join(workerinput[_SERIAL_DIR], workerinput["workerid"])
        with open(path + ".part", "w") as f:
            f.write("\n".join(serial))
        os.replace(path + ".part", path)


if importlib.util.find_spec("xdist") is not None:  # hooks pytest knows only with pytest-xdist installed
    def pytest_configure_node(node):
        if getattr(node.config, "_serial_dir", None):
            node.workerinput[_SERIAL_DIR] = node.config._serial_dir

    def pytest_xdist_make_scheduler(config, log):
        if getattr(config, "_serial_dir", None) is None:
            return None
        from xdist.scheduler import LoadGroupScheduling

        class SerialGroupScheduling(LoadGroupScheduling):
            serial: set[str] | None = None

            def _split_scope(self, nodeid: str) -> str:
                if self.serial is None:  # first called once every worker has sent its collection
                    self.serial = set()
                    for name in os.listdir(config._serial_dir):
                        if not name.endswith(".part"):
                            with open(os.path.join(config._serial_dir, name)) as f:
                                self.serial.update(line for line in f.read().splitlines() if line)
                return SERIAL_GROUP if nodeid in self.serial else super()._split_scope(nodeid)

        return SerialGroupScheduling(config, log)


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


@pytest.fixture(scope="session")
def cmosb_cli_run(ray_session, tmp_path_factory):
    """One small ``raytune-fed cmosb`` run of every method through ``main()`` on the shared session, read by
    tests/test_cli_cmosb.py (the command's output, resume, restore) and tests/test_cmosb_trial.py (each row
    against an in-process ``evaluate``).  A CMOSB run pays Tune's and the party actors' start-up for each of
    its six Tune experiments (tens of CPU-seconds for a handful of trials), so the suite runs it once.

    ``frame`` is ``results.parquet`` as the first run wrote it; ``out``, ``stdout``, ``stderr`` and ``code``
    are that run's.  A test may run ``argv`` again on ``out`` (the resume tests do)."""
    from raytune_fed.cli._main import main

    seed, n_sample = 3, 100
    out = tmp_path_factory.mktemp("cmosb_cli") / "run"
    argv = ["cmosb", "--dataset", "synthetic1", "--max-leakage", "0.9", "--out", str(out),
            "--population", "2", "--generations", "1", "--grid-levels", "1", "--bo-trials", "1",
            "--attack-sample", str(n_sample), "--he", "plain", "--seed", str(seed),
            "--point", "n_f=3,n_l=1,d=4,r=0.5,theta_p=0.8,eta=0.2"]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(argv)
    import pandas as pd

    frame = pd.read_parquet(out / "results.parquet") if code == 0 else None
    return SimpleNamespace(argv=argv, out=out, code=code, stdout=stdout.getvalue(), stderr=stderr.getvalue(),
                           frame=frame, seed=seed, n_sample=n_sample)
