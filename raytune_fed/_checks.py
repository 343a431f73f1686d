"""Checks of parameters at the public boundary, with one message style.

Each raises :class:`~raytune_fed.errors.ConfigError` naming the parameter, the rule and
the value received, and returns the value as a plain Python number (or a ``Path`` for the
file arguments: :func:`check_new_file`, :func:`check_output_dir`).
"""

from __future__ import annotations

import errno
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError

MAX_SEED = 2 ** 64 - 1
"""Seeds are 64-bit: a root seed above this is refused (``check_int(name, seed, 0, MAX_SEED)``)."""


def check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    """An int (not a bool) in ``[low, high]`` (``high`` open-ended when None)."""
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and value >= low \
        and (high is None or value <= high)
    if not ok:
        rule = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ConfigError(f"{name} must be an integer {rule}, got {value!r}")
    return int(value)


def check_float(name: str, value: Any, low: float) -> float:
    """A finite real number >= ``low``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)) \
            or not math.isfinite(float(value)) or float(value) < low:
        raise ConfigError(f"{name} must be a finite number >= {low}, got {value!r}")
    return float(value)


def check_share(name: str, value: Any, low: float, high: float, *, low_open: bool) -> float:
    """A real number in ``(low, high]`` (``low_open``) or ``[low, high]``."""
    ok = isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_))
    if ok:
        value = float(value)
        ok = math.isfinite(value) and (value > low if low_open else value >= low) and value <= high
    if not ok:
        bracket = "(" if low_open else "["
        raise ConfigError(f"{name} must be in {bracket}{low:g}, {high:g}], got {value!r}")
    return value


def check_choice(name: str, value: Any, choices: Any) -> Any:
    """One of ``choices`` (compared with ``==``)."""
    choices = tuple(choices)
    if not any(value == c and type(value) is type(c) for c in choices):
        raise ConfigError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_unique(name: str, values: Any) -> tuple:
    """A non-empty sequence of distinct items, returned as a tuple."""
    items = tuple(values)
    if not items:
        raise ConfigError(f"{name} must list at least one item, got none")
    seen: set = set()
    for item in items:
        if item in seen:
            raise ConfigError(f"{name} lists {item!r} twice")
        seen.add(item)
    return items


def check_new_file(name: str, path: Any) -> Path:
    """A file this process may create or overwrite: not a directory, in an existing directory it can write
    in.  Nothing is created (a missing directory is an error, not made silently)."""
    path = Path(path)
    shown = f"{name} {os.fspath(path)!r}"
    if path.is_dir():
        raise ConfigError(f"{shown} is a directory")
    parent = path.parent
    if not parent.exists():
        raise ConfigError(f"{shown}: its directory does not exist")
    if not parent.is_dir():
        raise ConfigError(f"{shown}: {os.fspath(parent)!r} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".probe.", suffix=".tmp")
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot write in its directory ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)
    if path.exists():
        try:
            with open(path, "ab"):
                pass
        except OSError as exc:
            raise ConfigError(f"{shown}: cannot write it ({exc.strerror or exc})") from None
    return path


def check_output_dir(path: Any) -> Path:
    """A directory results can be written under: an existing writable directory, or one that can be
    created there (checked by writing a probe file in the nearest existing parent; nothing is created)."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).strip():  # "" would be the current folder
        raise ConfigError(f"output directory must be a non-empty path, got {path!r}")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"output directory {os.fspath(path)!r} is an existing file, not a directory")
    place = path
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        if not place.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        fd, probe = tempfile.mkstemp(dir=place, prefix=".probe.", suffix=".tmp")
    except OSError as exc:
        raise ConfigError(f"cannot write results under {os.fspath(path)!r}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(probe)
    return path
