"""raytune_fed: a Ray-based tuning backend for model selection when data cannot be pooled.

Layers, bottom up (``tests/test_layering.py`` checks that imports only go down):

* ``errors``, ``types`` (directions, objectives), ``random`` (the seed convention), ``_checks``;
* ``space`` (search spaces), ``data`` (datasets), ``metrics`` (Pareto, hypervolume, scorers);
* ``simulation`` (site splits, roles, vertical and PU partitions);
* ``algorithms`` (ask/tell search cores: GP-BO, ParEGO, Thresholdout) and ``models``
  (the learner registry, cross-validation, estimators);
* ``store`` (results store) and ``runtime`` (the one ``ray.init``);
* ``federation`` (restricted sites and parties, the records that cross their boundary);
* Ray Tune adapters (``search``), the grid engine, then ``workflows`` (RFMS) and the ``cli``.
"""

__version__ = "0.1.0"
