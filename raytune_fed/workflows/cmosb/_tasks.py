"""The CMOSB paper's vertical tasks: which party holds which columns, and the train/test split.

* ``synthetic1`` / ``synthetic2`` - columns 0-4 active, 5-9 passive; first 2/3 of the
  (already shuffled) generated rows train, the last third tests;
* ``default_credit`` - the authors' 13 active / 10 passive features (the first 13
  columns to the active party), first 2/3 of the rows train, no shuffling;
* ``sensorless`` - fetched from OpenML (:data:`SENSORLESS_OPENML`; needs network access
  once, then the download is cached), Table I's 12 active / 36 passive columns, rows
  shuffled with a fixed seed (OpenML lists them by class), first 2/3 train.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from raytune_fed.data import load_dataset
from raytune_fed.errors import DatasetError
from raytune_fed.random import as_generator, derive

SENSORLESS_OPENML = "openml:Sensorless-drive-diagnosis"


@dataclass(frozen=True)
class VerticalTask:
    """A dataset split between an active and passive parties, with train and test row ids."""

    name: str
    X: np.ndarray
    y: np.ndarray
    active_features: np.ndarray
    passive_features: tuple[np.ndarray, ...]
    train_rows: np.ndarray
    test_rows: np.ndarray

    @property
    def n_classes(self) -> int:
        return int(np.unique(self.y).size)

    @property
    def binary(self) -> bool:
        return self.n_classes == 2


def _first_two_thirds(name: str, n_active: int, *, source: str | None = None,
                      shuffle: bool = False) -> VerticalTask:
    ds = load_dataset(source or name)
    X, y = ds.X, ds.y
    n, d = X.shape
    if shuffle:
        order = as_generator(derive(0, "task", name)).permutation(n)
        X, y = X[order], y[order]
    cut = 2 * n // 3
    return VerticalTask(name, X, y, np.arange(n_active), (np.arange(n_active, d),),
                        np.arange(cut), np.arange(cut, n))


TASKS: dict[str, Callable[[], VerticalTask]] = {
    "synthetic1": lambda: _first_two_thirds("synthetic1", 5),
    "synthetic2": lambda: _first_two_thirds("synthetic2", 5),
    "default_credit": lambda: _first_two_thirds("default_credit", 13),
    "sensorless": lambda: _first_two_thirds("sensorless", 12, source=SENSORLESS_OPENML, shuffle=True),
}


def load_task(name: str) -> VerticalTask:
    """The task ``name``; raises :class:`DatasetError` listing the known ones."""
    if name not in TASKS:
        raise DatasetError(f"unknown CMOSB task {name!r}; known: {sorted(TASKS)}")
    return TASKS[name]()
