"""raytune_fed: a Ray-based tuning backend for model selection when data cannot be pooled.

Layers, bottom up: ``data`` and ``simulation`` (datasets, site splits), ``metrics``,
``learners``, ``sites`` (restricted data sites and the records that cross their
boundary), ``search`` (GP-BO and ParEGO cores with Ray Tune adapters), workflows
(``rfms``), the results ``store`` and the ``cli``.  Ray is imported only where actors,
Tune and the grid live.
"""

__version__ = "0.1.0"
