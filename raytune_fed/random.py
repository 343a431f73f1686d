"""One seed convention for the whole package.

A *seed* is a non-negative ``int``, a :class:`numpy.random.SeedSequence` or a
:class:`numpy.random.Generator`.  ``None`` is not a seed: nothing in raytune_fed draws
from OS entropy or from a global random state, so one root seed in gives the same numbers
out, in any process.

* :func:`as_generator` - a Generator for a seed;
* :func:`spawn` - ``n`` independent child SeedSequences;
* :func:`derive` - the SeedSequence at a named coordinate below a root
  (``derive(root, "site", 3, "replication", 1)``): the same coordinates always give the
  same stream, and different coordinates independent ones;
* :func:`seed_int` - a 31-bit int for libraries that take ``random_state=int``.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError

Seed = int | np.integer | np.random.SeedSequence | np.random.Generator


def _check(seed: Any, name: str) -> None:
    if isinstance(seed, (np.random.SeedSequence, np.random.Generator)):
        return
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)) and seed >= 0:
        return
    raise ConfigError(f"{name} must be a non-negative int, a numpy SeedSequence or a Generator, got {seed!r}")


def as_seed_sequence(seed: Seed, name: str = "seed") -> np.random.SeedSequence:
    """A SeedSequence for ``seed`` (a Generator contributes one draw from its stream)."""
    _check(seed, name)
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(int(seed.integers(2 ** 63)))
    return np.random.SeedSequence(int(seed))


def as_generator(seed: Seed, name: str = "seed") -> np.random.Generator:
    """A Generator for ``seed``; a Generator is returned as it is (its stream is shared)."""
    _check(seed, name)
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(as_seed_sequence(seed, name))


def spawn(seed: Seed, n: int, name: str = "seed") -> list[np.random.SeedSequence]:
    """``n`` independent child SeedSequences of ``seed``.

    For an int or a Generator the children are the same on every call; a SeedSequence
    keeps numpy's own counter, so spawning from the same object twice gives new children.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ConfigError(f"n must be an integer >= 0, got {n!r}")
    return as_seed_sequence(seed, name).spawn(int(n))


def _coordinate(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        if value < 0:
            raise ConfigError(f"seed coordinates must be non-negative ints or strings, got {value!r}")
        return int(value)
    if isinstance(value, str):
        return int.from_bytes(hashlib.sha256(value.encode()).digest()[:8], "little")
    raise ConfigError(f"seed coordinates must be non-negative ints or strings, got {value!r}")


def derive(root: Seed, *coordinates: int | str) -> np.random.SeedSequence:
    """The SeedSequence at ``coordinates`` below ``root`` (strings hash stably, not by ``hash()``).

    Unlike :func:`spawn` this does not depend on call order: a cell of a grid can compute
    its own seed from its coordinates, in any process.
    """
    base = as_seed_sequence(root)
    if base.entropy is None:  # numpy fills it in on construction; None here is a bug
        raise RuntimeError("SeedSequence has no entropy")
    entropy = base.entropy if isinstance(base.entropy, int) else list(base.entropy)
    key = [*base.spawn_key, *(_coordinate(c) for c in coordinates)]
    return np.random.SeedSequence(entropy, spawn_key=key, pool_size=base.pool_size)


def seed_int(seed: Seed, name: str = "seed") -> int:
    """A non-negative 31-bit int drawn from ``seed`` (for ``random_state=`` arguments)."""
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(2 ** 31 - 1))
    return int(as_seed_sequence(seed, name).generate_state(1)[0] % (2 ** 31 - 1))


def generator_state(rng: np.random.Generator) -> dict[str, Any]:
    """JSON-safe state of a PCG64 Generator (ints only), for explicit ``get_state``."""
    state = rng.bit_generator.state
    if state.get("bit_generator") != "PCG64":
        raise ConfigError(f"only PCG64 generators can be saved, got {state.get('bit_generator')!r}")
    return {"bit_generator": "PCG64", "state": {k: int(v) for k, v in state["state"].items()},
            "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"])}


def generator_from_state(state: Any) -> np.random.Generator:
    """Rebuild a Generator saved by :func:`generator_state`; raises :class:`ConfigError` if malformed."""
    try:
        if state["bit_generator"] != "PCG64":
            raise KeyError("bit_generator")
        bit = np.random.PCG64()
        bit.state = {"bit_generator": "PCG64",
                     "state": {"state": int(state["state"]["state"]), "inc": int(state["state"]["inc"])},
                     "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"])}
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"malformed random-generator state ({exc!r}): {state!r:.200}") from None
    return np.random.Generator(bit)
