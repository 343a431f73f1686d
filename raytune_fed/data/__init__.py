"""Datasets: the :class:`Dataset` record, embedded sets, user files and OpenML.

``load_dataset(name)`` resolves an embedded name (``list_datasets()``), a ``.csv`` /
``.csv.gz`` / ``.parquet`` file (with ``target=`` and optional ``site_column=``), or an
OpenML reference (``openml:<name or id>``).  Every dataset is validated once, here at
the boundary: finite float features, integer class codes, and enough rows of every
class in every site.  Provenance of the embedded files: ``files/SOURCES.md``.
"""

from raytune_fed.data._registry import DatasetInfo, embedded_names, list_datasets, load_dataset
from raytune_fed.data._validate import MAX_CATEGORIES, MIN_ROWS_PER_CLASS_PER_SITE, Dataset

__all__ = [
    "MAX_CATEGORIES",
    "MIN_ROWS_PER_CLASS_PER_SITE",
    "Dataset",
    "DatasetInfo",
    "embedded_names",
    "list_datasets",
    "load_dataset",
]
