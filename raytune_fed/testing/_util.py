"""Small helpers of the contract suites: failures, expected errors, runs in another process."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from raytune_fed.errors import ConfigError


class ContractError(AssertionError):
    """A core or searcher broke the contract (the message says which rule and how)."""


def expect(ok: Any, message: str) -> None:
    """Raise :class:`ContractError` with ``message`` unless ``ok`` (works under ``python -O``)."""
    if not ok:
        raise ContractError(message)


def expect_config_error(what: str, call: Callable[[], Any], pattern: str) -> None:
    """``call()`` must raise :class:`ConfigError` whose message matches ``pattern``."""
    try:
        call()
    except ConfigError as exc:
        expect(re.search(pattern, str(exc)), f"{what}: ConfigError message {str(exc)!r} does not match {pattern!r}")
        expect("\n" not in str(exc), f"{what}: the error message should be one line, got {str(exc)!r}")
        return
    except Exception as exc:  # noqa: BLE001 - any other exception breaks the contract
        raise ContractError(f"{what}: expected ConfigError matching {pattern!r}, got "
                            f"{type(exc).__name__}: {exc}") from exc
    raise ContractError(f"{what}: expected ConfigError matching {pattern!r}, nothing was raised")


def reference(fn: Callable) -> str:
    """``"module:qualname"`` of a module-level function (what another process can import)."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or "<" in qualname or "." in qualname:
        raise ConfigError(f"{fn!r} must be a module-level function so another process can import it")
    return f"{module}:{qualname}"


def resolve(ref: str) -> Callable:
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def run_elsewhere(script: str, payload: dict) -> Any:
    """Run ``script`` in a fresh interpreter with this one's import path; it prints JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", script, json.dumps(payload)], capture_output=True, text=True,
                         env=env, check=False)
    if out.returncode != 0:
        raise ContractError(f"the run in another process failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
