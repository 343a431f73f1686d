"""A report page as data, and its two renderings (self-contained HTML, Markdown with PNG files).

A page of a grid that is still running or stopped incomplete is marked (:meth:`Page.mark_partial`):
both renderings open with the banner "partial: N of M cells; missing: ..." and the title says
"(partial)", so a page of some cells is never taken for the whole run's.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raytune_fed.errors import ConfigError
from raytune_fed.store import write_atomic

COMMAND_FILE = "command.txt"
"""Where a run's command line is kept, so that rebuilding the page later still shows it."""

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;max-width:70em;
  margin:2em auto;padding:0 1.2em;line-height:1.45}
h1{font-size:1.6em;border-bottom:2px solid #3a6ea5;padding-bottom:.25em}
h2{font-size:1.25em;margin-top:1.8em;color:#24446b}
p.lead{color:#444}
.scroll{overflow-x:auto;margin:.6em 0 1em}
table{border-collapse:collapse;font-size:.92em}
th,td{border:1px solid #c9d1dc;padding:.3em .7em;white-space:nowrap}
th{background:#e8eef6;text-align:center}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.txt{text-align:left}
tbody tr:nth-child(even){background:#f6f8fb}
figure{margin:1em 0}
figure img{max-width:100%;height:auto;border:1px solid #e1e6ee}
figcaption,.note{color:#555;font-size:.9em}
pre{background:#f3f5f8;border:1px solid #dde3ea;padding:.6em .8em;overflow-x:auto}
.partial{background:#fff4d6;border:1px solid #e0b84c;border-left:6px solid #d49a00;padding:.6em .9em;margin:1em 0}
"""

MISSING_SHOWN = 5
"""How many missing cells a partial page names (the rest are counted)."""


def partial_note(n_done: int, n_total: int, missing: Sequence[str], unit: str = "cells") -> str:
    """``partial: 3 of 8 cells; missing: a, b, c, d, e and 2 more`` (the first :data:`MISSING_SHOWN` labels)."""
    shown = ", ".join(missing[:MISSING_SHOWN]) or "-"
    more = f" and {len(missing) - MISSING_SHOWN} more" if len(missing) > MISSING_SHOWN else ""
    return f"partial: {n_done} of {n_total} {unit}; missing: {shown}{more}"


@dataclass(frozen=True)
class Table:
    """A table: ``header`` and ``rows`` of cells (numbers are right-aligned)."""

    header: Sequence[str]
    rows: Sequence[Sequence[Any]]
    caption: str = ""

    def __post_init__(self) -> None:
        width = len(self.header)
        for i, row in enumerate(self.rows):
            if len(row) != width:
                raise ConfigError(f"table row {i} has {len(row)} cells, the header {width}")


@dataclass
class Figure:
    """A matplotlib figure under a file name (``name.png``) with a caption saying how to read it.

    The figure is rendered once, at 110 dpi, and closed by :func:`write_page`."""

    name: str
    figure: Any
    caption: str = ""
    _png: bytes | None = field(default=None, repr=False)

    def png(self) -> bytes:
        if self._png is None:
            import matplotlib.pyplot as plt

            buffer = io.BytesIO()
            try:
                self.figure.savefig(buffer, format="png", dpi=110)
            finally:
                plt.close(self.figure)
            self._png = buffer.getvalue()
        return self._png


@dataclass
class Page:
    """One run's page: ``title``, an introduction, then sections of blocks in order.

    Blocks are added with :meth:`section`, :meth:`text`, :meth:`table` and :meth:`figure`;
    ``settings`` (a flat mapping) and ``command`` are shown at the end.
    """

    title: str
    workflow: str
    intro: str = ""
    settings: Mapping[str, Any] = field(default_factory=dict)
    command: str | None = None
    blocks: list[tuple[str, Any]] = field(default_factory=list)
    partial: str = ""

    def mark_partial(self, n_done: int, n_total: int, missing: Sequence[str], unit: str = "cells") -> Page:
        """Mark the page as one of an incomplete grid (see the module notes): ``n_done`` of ``n_total``
        ``unit`` are in it, ``missing`` are the labels of the others."""
        self.partial = (f"{partial_note(n_done, n_total, missing, unit)}. The grid is still running or stopped "
                        f"before it finished: every table and figure covers only the {unit} stored so far.")
        return self

    @property
    def full_title(self) -> str:
        return f"{self.title} (partial)" if self.partial else self.title

    def section(self, heading: str) -> Page:
        self.blocks.append(("h2", heading))
        return self

    def text(self, text: str) -> Page:
        self.blocks.append(("p", text))
        return self

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> Page:
        self.blocks.append(("table", Table(list(header), [list(r) for r in rows], caption)))
        return self

    def figure(self, name: str, figure: Any, caption: str = "") -> Page:
        if not name or "/" in name or name.endswith(".png"):
            raise ConfigError(f"a figure name is a plain file stem like 'hypervolume', got {name!r}")
        self.blocks.append(("img", Figure(name, figure, caption)))
        return self

    @property
    def figures(self) -> list[Figure]:
        return [b for kind, b in self.blocks if kind == "img"]


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    text = str(value).strip().replace("±", "").replace("(", "").replace(")", "").replace(",", "")
    parts = text.split()
    try:
        return bool(parts) and all(float(p) is not None for p in parts)
    except ValueError:
        return text in ("-", "n/a")


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


def _settings_rows(settings: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for key, value in settings.items():
        if isinstance(value, (list, tuple)):
            value = ", ".join(map(str, value))
        elif isinstance(value, Mapping):
            value = json.dumps(value, sort_keys=True)
        rows.append([str(key), "-" if value is None else str(value)])
    return rows


def render_html(page: Page) -> str:
    esc = html.escape
    out = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
           f"<title>{esc(page.full_title)}</title><style>{_CSS}</style></head><body>",
           f"<h1>{esc(page.full_title)}</h1>"]
    if page.partial:
        out.append(f"<div class=\"partial\" id=\"partial\">{esc(page.partial)}</div>")
    if page.intro:
        out.append(f"<p class=\"lead\">{esc(page.intro)}</p>")

    def table(t: Table) -> str:
        head = "".join(f"<th>{esc(str(h))}</th>" for h in t.header)
        body = "".join("<tr>" + "".join(
            f"<td class=\"{'num' if _is_number(v) else 'txt'}\">{esc(_format(v))}</td>" for v in row) + "</tr>"
                       for row in t.rows)
        caption = f"<p class=\"note\">{esc(t.caption)}</p>" if t.caption else ""
        return (f"<div class=\"scroll\"><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table></div>{caption}")

    for kind, block in page.blocks:
        if kind in ("h2", "p"):
            out.append(f"<{kind}>{esc(block)}</{kind}>")
        elif kind == "table":
            out.append(table(block))
        elif kind == "img":
            data = base64.b64encode(block.png()).decode("ascii")
            caption = f"<figcaption>{esc(block.caption)}</figcaption>" if block.caption else ""
            out.append(f"<figure><img src=\"data:image/png;base64,{data}\" alt=\"{esc(block.name)}\">{caption}"
                       "</figure>")
    if page.settings:
        out += ["<h2>Settings</h2>", table(Table(["setting", "value"], _settings_rows(page.settings)))]
    out.append("<h2>Command</h2>")
    out.append(f"<pre>{esc(page.command)}</pre>" if page.command else
               "<p class=\"note\">Made from Python (no command line recorded).</p>")
    return "\n".join(out) + "\n</body></html>\n"


def render_markdown(page: Page) -> str:
    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(_format(c).replace("|", "\\|") for c in cells) + " |"

    def table(t: Table) -> str:
        text = "\n".join([line(t.header), "|" + "---|" * len(t.header), *map(line, t.rows)])
        return text + (f"\n\n{t.caption}" if t.caption else "")

    out = [f"# {page.full_title}"]
    if page.partial:
        out.append(f"> **{page.partial}**")
    if page.intro:
        out.append(page.intro)
    for kind, block in page.blocks:
        if kind == "h2":
            out.append(f"## {block}")
        elif kind == "p":
            out.append(block)
        elif kind == "table":
            out.append(table(block))
        elif kind == "img":
            out.append(f"![{block.name}]({block.name}.png)" + (f"\n\n{block.caption}" if block.caption else ""))
    if page.settings:
        out += ["## Settings", table(Table(["setting", "value"], _settings_rows(page.settings)))]
    out += ["## Command", f"    {page.command}" if page.command else "Made from Python (no command line recorded)."]
    return "\n\n".join(out) + "\n"


def write_page(out_dir: str | Path, page: Page) -> Path:
    """Write ``index.html``, ``index.md`` and one PNG per figure under ``out_dir``; return the HTML path.

    A page without a command shows the one stored with the run (``command.txt``) if any;
    a page with one stores it there, so a later rebuild keeps it.
    """
    out_dir = Path(out_dir)
    stored = out_dir / COMMAND_FILE
    command = page.command
    if command:
        write_atomic(stored, lambda p: Path(p).write_text(command + "\n", encoding="utf-8"))
    elif stored.is_file():
        page.command = stored.read_text(encoding="utf-8").strip() or None
    for fig in page.figures:
        data = fig.png()
        write_atomic(out_dir / f"{fig.name}.png", lambda p: Path(p).write_bytes(data))  # noqa: B023 - called here
    md, page_html = render_markdown(page), render_html(page)
    write_atomic(out_dir / "index.md", lambda p: Path(p).write_text(md, encoding="utf-8"))
    write_atomic(out_dir / "index.html", lambda p: Path(p).write_text(page_html, encoding="utf-8"))
    return out_dir / "index.html"
