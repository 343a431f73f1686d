"""The RFMS methods (paper section 4.2, appendix A.4) as data."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from raytune_fed.errors import ConfigError

Kind = Literal["single", "multi", "random"]


@dataclass(frozen=True)
class Method:
    """How one method turns (local, remote) evaluations into proposals and a selection.

    ``single`` methods minimise ``alpha * local + (1 - alpha) * remote`` with GP-BO (or the
    Thresholdout answer when ``thresholdout``) and select their best configuration;
    ``multi`` runs ParEGO on (local, remote) and ``random`` samples uniformly, both
    selecting the Pareto set of what they evaluated.
    """

    name: str
    kind: Kind
    alpha: float = 1.0
    thresholdout: bool = False

    @property
    def needs_remote(self) -> bool:
        return self.kind != "single" or self.thresholdout or self.alpha < 1.0

    def scalar(self, local: float, remote: float | None) -> float:
        if self.alpha >= 1.0:
            return local
        if remote is None:
            raise ConfigError(f"method {self.name!r} needs the remote value")
        return self.alpha * local + (1.0 - self.alpha) * remote


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("lso", "single", alpha=1.0),
    Method("fso2", "single", alpha=0.2),
    Method("fso5", "single", alpha=0.5),
    Method("fso8", "single", alpha=0.8),
    Method("fso_th", "single", alpha=0.0, thresholdout=True),
    Method("fmo", "multi"),
    Method("rand_mo", "random"),
)}


def get_methods(names: Iterable[str]) -> tuple[Method, ...]:
    """Look methods up by name; an unknown name raises and lists the known ones."""
    names = list(names)
    if not names:
        raise ConfigError(f"no methods given; known methods: {list(METHODS)}")
    out = []
    for n in names:
        if n not in METHODS:
            raise ConfigError(f"unknown method {n!r}; known methods: {list(METHODS)}")
        if METHODS[n] in out:
            raise ConfigError(f"method {n!r} is listed twice")
        out.append(METHODS[n])
    return tuple(out)
