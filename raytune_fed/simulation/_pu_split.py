"""PU benchmark splits: a binary task, SCAR labels at frequency ``c``, train / validation / test.

:func:`pu_split` builds what the ODE paper's experiments use (Table 1 splits about 70/30):

1. a stratified (by the true class) train/test split, ``test_size`` of the rows to test;
2. SCAR labels on the non-test part ``D`` with the exact draw of
   :func:`~raytune_fed.simulation.make_pu` (``round(c * n_pos)`` labelled positives);
3. a validation part carved from ``D`` (``val_size`` of it), stratified by labelled /
   unlabelled-positive / negative, so both parts get labelled positives in proportion.

Training and validation rows carry only ``s`` (1 = labelled, 0 = unlabelled); the test
rows keep the true labels and are used only for the final score.  The true labels of the
PU parts are kept on the record (``y_train``, ``y_val``) for diagnostics and tests
(Theorem 1, the true class prior); no learner or evaluator receives them.

Multi-class datasets become one class against the rest (:func:`pu_dataset`):
:data:`POSITIVE_CLASS` fixes the class for the embedded multi-class sets by one rule, the
largest class (satimage: class ``1``, red soil, 1533 of 6435 rows; texture: eleven classes
of 500 rows each, so the first class code ``2``).  For a binary dataset the positive
class is class code 1 (the class name that sorts last, e.g. ``1`` for titanic's
survivors, ``won`` for chess).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from raytune_fed._checks import check_share
from raytune_fed.data import Dataset
from raytune_fed.errors import ConfigError, DatasetError, SplitError
from raytune_fed.random import derive
from raytune_fed.simulation._pu import make_pu, n_labelled
from raytune_fed.simulation._roles import inbag_outbag
from raytune_fed.simulation._splits import _as_labels

POSITIVE_CLASS = {"satimage": "1", "texture": "2"}


def pu_dataset(dataset: Dataset, positive: str | None = None) -> Dataset:
    """``dataset`` as a binary task: unchanged if binary, else ``positive`` against the rest.

    ``positive`` defaults to :data:`POSITIVE_CLASS` for the embedded multi-class sets; any
    other multi-class dataset needs it (the error lists the classes).
    """
    if dataset.n_classes == 2 and positive is None:
        return dataset
    positive = positive if positive is not None else POSITIVE_CLASS.get(dataset.name)
    if positive is None:
        raise ConfigError(f"dataset {dataset.name!r} has {dataset.n_classes} classes "
                          f"{list(dataset.class_names)}; name the positive class (one against the rest) with "
                          f"--positive NAME (positive= in Python)")
    if str(positive) not in dataset.class_names:
        raise DatasetError(f"dataset {dataset.name!r}: the positive class (--positive) needs class names from "
                           f"{list(dataset.class_names)}, got {positive!r}")
    return dataset.binarize(positive)


@dataclass(frozen=True, eq=False, repr=False)
class PUSplit:
    """Train and validation rows with PU indicators ``s``; test rows with true labels ``y``."""

    name: str
    c: float
    X_train: np.ndarray
    s_train: np.ndarray
    X_val: np.ndarray
    s_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    y_train: np.ndarray = field(repr=False)   # true labels: diagnostics only
    y_val: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        for part in ("train", "val", "test"):
            X = getattr(self, f"X_{part}")
            labels = getattr(self, "y_test" if part == "test" else f"s_{part}")
            if X.ndim != 2 or X.shape[0] != labels.shape[0]:
                raise SplitError(f"{part}: X has shape {X.shape} but {labels.shape[0]} labels")
        for arr in (self.X_train, self.s_train, self.X_val, self.s_val, self.X_test, self.y_test,
                    self.y_train, self.y_val):
            arr.setflags(write=False)

    def __repr__(self) -> str:
        return (f"PUSplit(name={self.name!r}, c={self.c:g}, train={self.n_train} "
                f"({int(self.s_train.sum())} labelled), val={self.n_val} ({int(self.s_val.sum())} labelled), "
                f"test={self.y_test.shape[0]})")

    @property
    def n_train(self) -> int:
        return int(self.X_train.shape[0])

    @property
    def n_val(self) -> int:
        return int(self.X_val.shape[0])

    @property
    def n_pu(self) -> int:
        """Rows of the PU data ``D`` (training + validation): the paper's ``N``."""
        return self.n_train + self.n_val

    def unlabelled_prior(self, part: str = "train") -> float:
        """True share of positives among the unlabelled rows of ``part`` (the paper's pi)."""
        if part not in ("train", "val"):
            raise ConfigError(f"part must be 'train' or 'val', got {part!r}")
        s, y = (self.s_train, self.y_train) if part == "train" else (self.s_val, self.y_val)
        return float(y[s == 0].mean())


def pu_split(X, y, *, c: float, seed, test_size: float = 0.3, val_size: float = 0.25,
             name: str = "") -> PUSplit:
    """Split ``(X, y)`` (binary, 1 = positive) into PU train / PU validation / labelled test.

    Raises :class:`ConfigError` for ``c`` outside ``(0, 1]`` or shares outside ``(0, 1)``,
    and :class:`SplitError` for a single-class ``y`` or when ``c`` labels fewer than two
    positives of ``D`` (one is needed for training and one for validation).
    """
    X = np.asarray(X, dtype=np.float64)
    labels = _as_labels(y)
    c = check_share("c", c, 0.0, 1.0, low_open=True)
    test_size = _open_share("test_size", test_size)
    val_size = _open_share("val_size", val_size)
    if X.ndim != 2 or X.shape[0] != labels.shape[0]:
        raise ConfigError(f"X must be 2-D with one row per label, got shape {X.shape} for {labels.shape[0]} labels")
    classes = np.unique(labels)
    if classes.size < 2:
        raise SplitError(f"dataset {name!r} has a single class {classes.tolist()}; PU learning needs "
                         "positives and negatives")
    if not set(classes.tolist()) <= {0, 1}:
        raise SplitError(f"dataset {name!r}: y must be binary 0/1 (1 = positive), got classes "
                         f"{classes.tolist()}; use pu_dataset() for a multi-class set")
    rest, test = inbag_outbag(labels, inbag_fraction=1.0 - test_size, seed=derive(seed, "pu", "test"))
    n_pos = int(labels[rest].sum())
    if n_labelled(n_pos, c) < 2:
        raise SplitError(f"dataset {name!r}: c={c:g} labels {n_labelled(n_pos, c)} of the {n_pos} positives "
                         f"outside the test part; need >= 2 (one to train on, one to validate with): "
                         f"raise c or use more rows")
    s_rest = make_pu(labels[rest], c=c, seed=derive(seed, "pu", "labels"), draw="exact")
    strata = np.where(s_rest == 1, 2, labels[rest])          # 2 labelled, 1 hidden positive, 0 negative
    if np.sum(strata == 1) < 2:
        strata = np.where(strata == 1, 0, strata)              # too few hidden positives to stratify on
    train, val = inbag_outbag(strata, inbag_fraction=1.0 - val_size, seed=derive(seed, "pu", "validation"))
    return PUSplit(name=name, c=c,
                   X_train=X[rest][train], s_train=s_rest[train].astype(np.int8),
                   X_val=X[rest][val], s_val=s_rest[val].astype(np.int8),
                   X_test=X[test], y_test=labels[test].astype(np.int8),
                   y_train=labels[rest][train].astype(np.int8), y_val=labels[rest][val].astype(np.int8))


def _open_share(name: str, value: float) -> float:
    value = check_share(name, value, 0.0, 1.0, low_open=True)
    if value >= 1.0:
        raise ConfigError(f"{name} must be in (0, 1), got {value!r}")
    return value
