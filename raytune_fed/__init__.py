"""raytune_fed: a Ray-based tuning backend for model selection when data cannot be pooled.

Layers, bottom up (``tests/test_layering.py`` checks that imports only go down):

* ``errors``, ``types`` (directions, objectives), ``random`` (the seed convention), ``_checks``;
* ``space`` (search spaces), ``data`` (datasets), ``metrics`` (Pareto, hypervolume, scorers);
* ``simulation`` (site splits, roles, vertical and PU partitions);
* ``algorithms`` (ask/tell search cores: GP-BO, ParEGO, Thresholdout) and ``models``
  (the learner registry, cross-validation, estimators);
* ``store`` (results store) and ``runtime`` (the one ``ray.init``);
* ``federation`` (restricted sites and parties, the records that cross their boundary);
* Ray Tune adapters (``search``), the grid engine, then ``workflows`` (RFMS, PU, CMOSB) and the ``cli``.

``raytune_fed.load_results(OUT)`` reads any workflow's run back as flat tables (imported on first use,
so importing a lower layer never loads the workflows).
"""

__version__ = "0.1.0"
__all__ = ["__version__", "load_results"]


def __getattr__(name: str):
    if name == "load_results":
        from raytune_fed.workflows import load_results

        return load_results
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
