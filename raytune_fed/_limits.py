"""Upper bounds of search budgets, from this machine's memory (pure: no Ray).

A budget that cannot fit in memory is refused when a command starts, with the bound and
its reason in the message, instead of being found out by the out-of-memory killer once
Ray runs.  Each bound is the largest budget whose main data structure fits in the memory
one CPU may use: half of this machine's physical memory divided by its CPUs (a cell, a
trial or a search holds one CPU; the other half is left to Ray's object store and the
processes themselves).  The bytes each structure takes were measured by
``python experiments/bench_limits.py`` (``experiments/measured/bench_limits.json``) and
rounded up:

* a Gaussian process over ``n`` points holds about ``GP_BYTES_PER_PAIR * n**2`` bytes (the
  pairs' squared differences per dimension, the kernel, its factor and inverse; measured 56
  bytes per pair with 3 parameters, 92 with 6): RFMS's ``n_init + n_iter`` per method;
* NSGA-II's survival over a population of ``N`` holds about ``NSGA2_BYTES_PER_PAIR * N**2``
  bytes (pymoo's non-dominated sorting of parents and offspring): CMOSB's population;
* the label-inference attack clusters ``n`` rows through ``n x n`` similarity matrices,
  ``ATTACK_BYTES_PER_PAIR * n**2`` bytes: CMOSB's attack sample;
* a Tune trial costs the driver about ``TUNE_BYTES_PER_TRIAL`` bytes, an Optuna trial
  ``OPTUNA_BYTES_PER_TRIAL``: CMOSB's population x generations and BO trials (Optuna's TPE
  through Tune), the PU supervised baseline's trials;
* a local Ray session runs one worker process of about ``WORKER_BYTES`` per CPU.

Memory is not the only cost: a budget near its bound can take days (a GP fit is cubic in
its points).  The bounds stop what cannot run at all.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import cache

GP_BYTES_PER_PAIR = 96
NSGA2_BYTES_PER_PAIR = 32
ATTACK_BYTES_PER_PAIR = 48
TUNE_BYTES_PER_TRIAL = 64 * 1024
OPTUNA_BYTES_PER_TRIAL = 8 * 1024
WORKER_BYTES = 512 * 1024 ** 2
MEMORY_SHARE = 0.5


def physical_memory() -> int:
    """Bytes of physical memory of this machine."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # not POSIX: assume a small laptop
        return 8 * 1024 ** 3


@dataclass(frozen=True)
class Limits:
    """The bounds on this machine (see the module notes); ``memory_per_cpu`` is what they divide."""

    memory_per_cpu: int
    max_points: int        # GP points: RFMS n_init + n_iter per method
    max_population: int    # NSGA-II population
    max_attack_sample: int
    max_tune_trials: int   # trials of one Tune run
    max_optuna_trials: int
    max_cpus: int          # CPUs of a local Ray session

    def why(self, what: str) -> str:
        """The reason behind bound ``what``, for an error message."""
        gib = self.memory_per_cpu / 1024 ** 3
        per_cpu = f"the {gib:.1f} GiB of memory per CPU of this machine"
        return {
            "points": f"a Gaussian process over more points needs more than {per_cpu} "
                      f"({GP_BYTES_PER_PAIR} bytes per pair of points)",
            "population": f"NSGA-II's sorting of a larger population needs more than {per_cpu} "
                          f"({NSGA2_BYTES_PER_PAIR} bytes per pair of members)",
            "attack": f"the attack's similarity matrices of a larger sample need more than {per_cpu} "
                      f"({ATTACK_BYTES_PER_PAIR} bytes per pair of rows)",
            "tune": f"more Tune trials need more than {per_cpu} in the driver "
                    f"({TUNE_BYTES_PER_TRIAL // 1024} KiB per trial)",
            "optuna": f"more Optuna trials need more than {per_cpu} "
                      f"({OPTUNA_BYTES_PER_TRIAL // 1024} KiB per trial)",
            "cpus": f"a local session runs one worker process of about {WORKER_BYTES // 1024 ** 2} MiB per CPU "
                    f"and this machine has {physical_memory() / 1024 ** 3:.1f} GiB",
        }[what]


@cache
def limits() -> Limits:
    """The bounds of this machine (computed once)."""
    memory = physical_memory()
    per_cpu = max(int(memory * MEMORY_SHARE) // (os.cpu_count() or 1), 1)
    return Limits(
        memory_per_cpu=per_cpu,
        max_points=math.isqrt(per_cpu // GP_BYTES_PER_PAIR),
        max_population=math.isqrt(per_cpu // NSGA2_BYTES_PER_PAIR),
        max_attack_sample=math.isqrt(per_cpu // ATTACK_BYTES_PER_PAIR),
        max_tune_trials=per_cpu // TUNE_BYTES_PER_TRIAL,
        max_optuna_trials=per_cpu // OPTUNA_BYTES_PER_TRIAL,
        max_cpus=max(memory // WORKER_BYTES, 1),
    )


def check_bounded(name: str, value: object, low: int, what: str, high: int | None = None) -> int:
    """An int in ``[low, high]`` where ``high`` defaults to the memory bound ``what`` (see :class:`Limits`);
    the error says the bound and why."""
    from raytune_fed._checks import check_int
    from raytune_fed.errors import ConfigError

    bound = limits()
    top = high if high is not None else {"points": bound.max_points, "population": bound.max_population,
                                         "attack": bound.max_attack_sample, "tune": bound.max_tune_trials,
                                         "optuna": bound.max_optuna_trials, "cpus": bound.max_cpus}[what]
    try:
        return check_int(name, value, low, top)
    except ConfigError as exc:
        if isinstance(value, int) and not isinstance(value, bool) and value > top:
            raise ConfigError(f"{exc}: {bound.why(what)}") from None
        raise
