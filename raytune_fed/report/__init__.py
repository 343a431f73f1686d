"""The one report layer: every workflow's run becomes one HTML page (and Markdown beside it).

A workflow builds a :class:`Page` from its own content (headings, paragraphs, tables,
matplotlib figures, its settings, the command that made the run) and
:func:`write_page` renders it in one style: ``index.html`` with the figures embedded as
PNG (the page is one self-contained file), ``index.md`` and the PNG files beside it.
:mod:`raytune_fed.report.plots` holds the plot rules every workflow follows (points
instead of a box below five values, visible medians, axes fitted to the data, integer
generation ticks).  :mod:`raytune_fed.report._results` holds a run's results as flat tables
(:class:`Results`, filled by each workflow's ``flat_results``) and the one console summary format
(:func:`format_summary_table`).  Pure matplotlib, pandas and the standard library: no Ray.
"""

from raytune_fed.report import plots
from raytune_fed.report._page import Figure, Page, Table, write_page
from raytune_fed.report._results import Results, explode, flatten, format_summary_table, spread_json

__all__ = ["Figure", "Page", "Results", "Table", "explode", "flatten", "format_summary_table", "plots",
           "spread_json", "write_page"]
