"""A run's results as flat tables, and the one console summary every workflow prints.

:class:`Results` is what :func:`raytune_fed.workflows.load_results` returns: ``trials``, one
row per cell, unit or trial with scalar columns only (a configuration's keys spread into
``config.<name>`` columns, a run's settings into ``settings.<name>``), and ``tables``, the
nested data in long tables of their own, keyed by the columns that name the trial they
belong to.  Each workflow says which of its columns are nested (its ``flat_results``); the
helpers here do the spreading and exploding, so the three workflows share one layout.

:func:`format_summary_table` is the console summary of ``rfms``, ``pu`` and ``cmosb``: one
line per group, ``mean``, ``sd`` (``-`` when there is one value) and ``n``.  Pure pandas.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass(frozen=True, eq=False)
class Results:
    """One run's results: ``trials`` (flat, scalar columns) and ``tables`` (nested data, long form).

    ``complete`` is False for a grid still running or stopped incomplete (read from its partial
    results file): then ``n_done`` of ``n_total`` cells are in the tables and ``missing`` holds
    the labels of the others; for a finished run ``missing`` is empty and the counts are None.
    """

    workflow: str
    trials: pd.DataFrame
    tables: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    complete: bool = True
    missing: tuple[str, ...] = ()
    n_done: int | None = None
    n_total: int | None = None

    def __getitem__(self, name: str) -> pd.DataFrame:
        """``results["trials"]`` or one of ``results.tables`` by name."""
        if name == "trials":
            return self.trials
        if name not in self.tables:
            raise KeyError(f"no table {name!r} in these {self.workflow} results; known: {['trials', *self.tables]}")
        return self.tables[name]


def _plain(value: Any) -> Any:
    """A scalar as a column holds it: a list or tuple becomes comma-joined text, a NumPy scalar a Python one."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(_plain(v)) for v in value)
    return value.item() if hasattr(value, "item") and not isinstance(value, (str, bytes)) else value


def flatten(mapping: Mapping[str, Any] | None, prefix: str) -> dict[str, Any]:
    """``{"a": 1, "b": {"c": 2}}`` -> ``{"<prefix>.a": 1, "<prefix>.b.c": 2}`` (lists as comma-joined text)."""
    out: dict[str, Any] = {}
    for key, value in (mapping or {}).items():
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{prefix}.{key}"))
        else:
            out[f"{prefix}.{key}"] = _plain(value)
    return out


def _mapping(value: Any) -> Mapping[str, Any] | None:
    """A JSON object (text) or a mapping, or None for a missing one."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def spread_json(frame: pd.DataFrame, column: str, prefix: str) -> pd.DataFrame:
    """``frame`` with its JSON-object ``column`` replaced by one ``<prefix>.<key>`` column per key, in place of it."""
    spread = pd.DataFrame([flatten(_mapping(v), prefix) for v in frame[column]], index=frame.index)
    at = list(frame.columns).index(column)
    rest = frame.drop(columns=[column])
    return pd.concat([rest.iloc[:, :at], spread, rest.iloc[:, at:]], axis=1)


def explode(frame: pd.DataFrame, keys: Sequence[str], columns: Sequence[str], *, index: str,
            configs: str | None = None, prefix: str = "config") -> pd.DataFrame:
    """A long table: per row of ``frame`` and per item of its list ``columns`` (equally long), one row holding
    ``keys``, the item's position ``index`` and the items; ``configs`` names a column holding a JSON list of
    objects, one per item, spread into ``<prefix>.<name>`` columns."""
    rows = []
    for record in frame.to_dict("records"):
        items = {name: list(record[name]) if record[name] is not None else [] for name in columns}
        listed = [_mapping(c) for c in json.loads(record[configs])] if configs is not None else None
        n = max([len(v) for v in items.values()] + [len(listed) if listed is not None else 0])
        for i in range(n):
            row = {k: _plain(record[k]) for k in keys}
            row[index] = i
            if listed is not None:
                row.update(flatten(listed[i] if i < len(listed) else None, prefix))
            row.update({name: _plain(v[i]) if i < len(v) else None for name, v in items.items()})
            rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else [*keys, index, *columns])


def format_summary_table(title: str, rows: Sequence[Mapping[str, Any]], keys: Sequence[str], *, digits: int = 3,
                         extra: Mapping[str, str] | None = None) -> str:
    """The console summary: ``title``, then one line per row: its ``keys``, ``mean``, ``sd`` and ``n``.

    ``rows`` hold ``mean`` (None: no value), ``sd`` (None or NaN below two values: shown as ``-``) and ``n``;
    ``extra`` maps more headers to the row keys that fill them (counts, shown as they are; empty where a row
    has no such key)."""
    extra = dict(extra or {})

    def number(value: Any) -> str:
        return "-" if value is None or value != value else f"{value:.{digits}f}"

    header = [*keys, "mean", "sd", "n", *extra]
    body = [[str(_plain(r[k])) for k in keys] + [number(r["mean"]), number(r.get("sd")), str(r["n"])]
            + [str(r.get(name, "")) for name in extra.values()] for r in rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    left = len(keys)

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([title, line(header), *(line(cells) for cells in body)])
