"""Pruning schedules of the ODE paper (section 4.1) and the rung table they give (pure functions).

The paper leaves several things loose; this module fixes them, and ``docs/pu.md`` lists
them with the reasons.

Rounds.  Algorithm 1 runs ``T = ceil(-log_mu(eta0 K)) + 1`` rounds for every schedule,
``ceil(-log_mu(eta0 K))`` being the least integer ``T'`` with ``eta0 mu^T' K <= 1``
(computed by counting, not with floating-point logarithms).  Round ``t`` trains each of
its ``n_t`` configurations on ``r_t = floor(B / (T n_t))`` rows (capped at the rows
available), so the rows of all rounds never exceed the sample budget ``B`` (eq. 16).

What the pruning parameter means.  For ``sh``, ``log``, ``exp`` and ``linear``, ``eta_t``
is the share *discarded*: round ``t`` drops ``floor(eta_t n_t)`` configurations.  Only
this reading works for the paper's formulas: ``log``/``exp``/``linear`` start at
``eta_0 = 1/K`` (one configuration dropped) and rise towards 1, so read as a share kept
they would end the search after its first round; and eq. (15) asks for a strictly smaller
set every round, which ``eta_0 = 1/K`` then just gives.  ``selfpaced`` is the
paper's "constant" schedule: a share ``eta0`` of the ``K`` configurations is kept after
the first round and a constant share ``mu`` of the survivors after every later one, i.e.
``n_{t+1} = ceil(eta0 mu^t K)``; with the ``T`` above exactly one configuration is left
after the last round (section 4.2).

Rounding.  Every round keeps at least one configuration and drops at least one (eq. 15:
``Omega_{t+1}`` is a strict subset).  The search ends after round ``T - 1``, or earlier
once a round keeps a single configuration; the answer is then the best configuration of
the last round trained (the paper: "for other halving schedules, we return the best
configuration in the last iteration").  A round with one configuration would select
nothing, so it is never trained.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from raytune_fed._checks import check_int, check_share
from raytune_fed.errors import ConfigError

SCHEDULES = ("sh", "log", "exp", "linear", "selfpaced")
DEFAULT_ETA0 = 0.9
DEFAULT_MU = 0.45
_STEEPNESS = 5.0  # the "x 5" of the log and exp schedules
_EPS = 1e-9


def check_schedule(schedule: str) -> str:
    if schedule not in SCHEDULES:
        raise ConfigError(f"unknown schedule {schedule!r}; known schedules: {list(SCHEDULES)}")
    return schedule


def n_rounds(n_configs: int, *, eta0: float = DEFAULT_ETA0, mu: float = DEFAULT_MU) -> int:
    """``T = T' + 1`` with ``T'`` the least integer ``>= 0`` such that ``eta0 mu^T' K <= 1``."""
    k = check_int("n_configs", n_configs, 1)
    eta0 = check_share("eta0", eta0, 0.0, 1.0, low_open=True)
    mu = _check_mu(mu)
    t = 0
    while eta0 * mu ** t * k > 1.0 + _EPS:
        t += 1
    return t + 1


def _check_mu(mu: float) -> float:
    mu = check_share("mu", mu, 0.0, 1.0, low_open=True)
    if mu >= 1.0:
        raise ConfigError(f"mu must be in (0, 1), got {mu!r}")
    return mu


def pruning_parameter(schedule: str, t: int, n_total_rounds: int, n_configs: int) -> float:
    """``eta_t``, the share of round ``t``'s configurations discarded (not for ``selfpaced``)."""
    check_schedule(schedule)
    x, k = t / n_total_rounds, n_configs
    if schedule == "sh":
        return 0.5
    if schedule == "log":
        return (1.0 - math.exp(-_STEEPNESS * x)) * (1.0 - 1.0 / k) + 1.0 / k
    if schedule == "exp":
        return math.exp(_STEEPNESS * (x - 1.0)) * (1.0 - 1.0 / k) + 1.0 / k
    if schedule == "linear":
        return x * (1.0 - 1.0 / k) + 1.0 / k
    raise ConfigError("the selfpaced schedule keeps eta0 mu^t K configurations; it has no discarded share")


def n_kept(schedule: str, t: int, n_current: int, *, n_configs: int, n_total_rounds: int,
           eta0: float = DEFAULT_ETA0, mu: float = DEFAULT_MU) -> int:
    """Configurations kept after round ``t`` from ``n_current`` (at least 1, at most ``n_current - 1``)."""
    if schedule == "selfpaced":
        kept = math.ceil(eta0 * mu ** t * n_configs - _EPS)
    else:
        eta = pruning_parameter(schedule, t, n_total_rounds, n_configs)
        kept = n_current - math.floor(eta * n_current + _EPS)
    return max(1, min(n_current - 1, kept))


@dataclass(frozen=True)
class Rung:
    """Round ``index``: ``n_configs`` configurations, each trained on ``n_rows`` rows, ``n_kept`` survive."""

    index: int
    n_configs: int
    n_rows: int
    n_kept: int


@dataclass(frozen=True)
class RungTable:
    """The rounds of one search; ``n_rounds`` is the paper's ``T`` (``len(rungs) <= T``)."""

    schedule: str
    n_configs: int
    n_rounds: int
    budget_samples: int
    rungs: tuple[Rung, ...]

    @property
    def total_rows(self) -> int:
        """Rows trained on by all configurations in all rounds (``<= budget_samples``)."""
        return sum(r.n_configs * r.n_rows for r in self.rungs)

    def as_rows(self) -> list[tuple[int, int, int, int]]:
        """``(index, n_configs, n_rows, n_kept)`` per rung, for tables and tests."""
        return [(r.index, r.n_configs, r.n_rows, r.n_kept) for r in self.rungs]


def rung_table(n_configs: int, *, n_rows: int, budget_samples: int | None = None, schedule: str = "selfpaced",
               eta0: float = DEFAULT_ETA0, mu: float = DEFAULT_MU, min_rows: int = 1) -> RungTable:
    """The rounds of a search over ``n_configs`` configurations with ``n_rows`` training rows.

    ``budget_samples`` defaults to ``n_rows``.  Raises :class:`ConfigError` when the first
    round would give a configuration fewer than ``min_rows`` rows.
    """
    k = check_int("n_configs", n_configs, 2)
    n_rows = check_int("n_rows", n_rows, 1)
    budget = n_rows if budget_samples is None else check_int("budget_samples", budget_samples, 1)
    min_rows = check_int("min_rows", min_rows, 1)
    check_schedule(schedule)
    eta0 = check_share("eta0", eta0, 0.0, 1.0, low_open=True)
    mu = _check_mu(mu)
    big_t = n_rounds(k, eta0=eta0, mu=mu)
    first = budget // (big_t * k)
    if first < min_rows:
        raise ConfigError(
            f"budget_samples={budget} gives {first} rows per configuration in the first round ({k} configurations "
            f"x {big_t} rounds); need budget_samples >= {big_t * k * min_rows} for {min_rows} row(s) each")
    rungs, n = [], k
    for t in range(big_t):
        kept = n_kept(schedule, t, n, n_configs=k, n_total_rounds=big_t, eta0=eta0, mu=mu)
        rungs.append(Rung(t, n, min(budget // (big_t * n), n_rows), kept))
        if kept == 1:
            break
        n = kept
    return RungTable(schedule, k, big_t, budget, tuple(rungs))
