"""SIGTERM while ``ray.init`` runs reaches the caller's handler, whatever ``ray.init`` does with it.

``ray.init`` installs its own SIGTERM handler (``sys.exit(15)``) while it starts; depending on when the
signal lands, the resulting ``SystemExit`` leaves ``ray.init``, or is swallowed inside it and the
session comes up as if nothing happened.  Here a stand-in for ``ray.init`` (a unit test of the hand-over
logic in :func:`raytune_fed.runtime.connect`; no Ray is started) does exactly that, deterministically.
"""

from __future__ import annotations

import os
import signal
import sys

import pytest

import raytune_fed.runtime as runtime


class Terminated(Exception):
    pass


def _callers_handler(signum, frame):
    raise Terminated


def _fake_init(swallow: bool):
    def init(**kwargs):
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))  # as ray.init does
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # let the interpreter run the handler
                pass
        except SystemExit:
            if not swallow:
                raise
    return init


@pytest.mark.parametrize("swallow", [False, True], ids=["exit leaves ray.init", "exit swallowed inside ray.init"])
def test_sigterm_during_ray_init_goes_to_the_callers_handler(monkeypatch, swallow):
    import ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", _fake_init(swallow))
    previous = signal.signal(signal.SIGTERM, _callers_handler)
    try:
        with pytest.raises(Terminated):
            runtime.connect(num_cpus=1)
        assert signal.getsignal(signal.SIGTERM) is _callers_handler  # put back for the rest of the command
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_without_a_signal_connect_returns_and_puts_the_handler_back(monkeypatch):
    import ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: (calls.append(kwargs),
                                                       signal.signal(signal.SIGTERM, signal.SIG_DFL)))
    previous = signal.signal(signal.SIGTERM, _callers_handler)
    try:
        assert runtime.connect(num_cpus=1) is ray and calls[0]["num_cpus"] == 1
        assert signal.getsignal(signal.SIGTERM) is _callers_handler
    finally:
        signal.signal(signal.SIGTERM, previous)
