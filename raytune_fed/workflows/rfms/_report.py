"""The report of one RFMS grid: the paper's figures 1 and 3-6 for our results, one page.

``build_report`` reads ``results.parquet`` (one row per experiment x method), recomputes
everything from it (mean/sd hypervolume, win/loss counts) and writes PNG figures plus
``index.md`` and a self-contained ``index.html`` next to it.  Pure pandas/matplotlib/
scikit-learn: no Ray.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from raytune_fed.errors import ConfigError
from raytune_fed.metrics import win_loss_matrix
from raytune_fed.workflows.rfms._methods import METHODS
from raytune_fed.store import write_atomic

REQUIRED_COLUMNS = ("dataset", "split", "learner", "method", "experiment", "hypervolume")
_FRONT_COLUMNS = ("curator_outbag", "lockbox_loss")
_TSNE_MAX_ROWS = 3000

_HOW_TO_READ = {  # after the paper's captions and section 5.4
    "hypervolume": "One panel per learner (paper figures 3 and 5). Each box is the dominated hypervolume (equation 1: "
                   "openbox out-of-bag, mean curator out-of-bag and lockbox loss of the selected configurations) of "
                   "one method over all experiments; line: median, triangle: mean. Higher is better.",
    "winloss": "As paper figures 4 and 6, the horizontal axis is the winner and the vertical axis the loser. A cell "
               "counts the experiments in which the winner's hypervolume beat the loser's (a tie counts 0.5), so the "
               "two cells of a pair add up to the experiments both ran; a method whose column cells exceed half of "
               "them wins most comparisons. The table lists the same counts with winners as rows.",
    "front": "One example experiment per learner: each point is a configuration a method selected, at its mean "
             "curator out-of-bag loss (horizontal) and lockbox loss (vertical); lower is better. Points above the "
             "dashed diagonal did worse on the unseen lockbox site than on the curators.",
    "sites": "The pooled features of all sites in two dimensions, coloured by site (paper figure 1). Sites that "
             "form separate clouds indicate a distribution shift across sites.",
}


def build_report(out_dir: str | Path, *, frame: pd.DataFrame | None = None,
                 sites: tuple[np.ndarray, np.ndarray, tuple[str, ...]] | None = None, seed: int = 0) -> Path:
    """Write the figures, ``index.md`` and ``index.html`` of an RFMS grid; return the ``index.md`` path.

    ``frame`` defaults to ``out_dir/results.parquet``.  ``sites=(X, site_of_row, site_names)``
    adds the site embedding (t-SNE up to 3000 rows, else PCA of a subsample drawn with ``seed``).
    """
    out_dir = Path(out_dir)
    frame = _check_frame(out_dir, frame)
    embedding = _embed_sites(sites, seed) if sites is not None else None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = _method_order(frame["method"])
    learners = list(dict.fromkeys(frame["learner"]))
    colours = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}
    n_experiments = int(frame["experiment"].nunique())
    dataset, split = (", ".join(dict.fromkeys(frame[c])) for c in ("dataset", "split"))
    title = f"RFMS report: dataset {dataset}, split {split}"
    wins = (win_loss_matrix(frame.pivot(index="experiment", columns="method", values="hypervolume")
                            .reindex(columns=methods)).loc[methods, methods] if len(methods) > 1 else None)
    figures = {"hypervolume": lambda: _plot_hypervolume(plt, frame, methods, learners, colours, title)}
    if wins is not None:
        figures["winloss"] = lambda: win_loss_figure(wins, n_experiments)
    if all(c in frame.columns for c in _FRONT_COLUMNS):
        figures["front"] = lambda: _plot_front(plt, frame, methods, learners, colours)
    if embedding is not None:
        figures["sites"] = lambda: _plot_sites(plt, *embedding)
    for name, draw in figures.items():
        fig = draw()
        try:
            write_atomic(out_dir / f"{name}.png", lambda p: fig.savefig(p, format="png", dpi=110))
        finally:
            plt.close(fig)

    stats = frame.groupby(["learner", "method"])["hypervolume"].agg(["mean", "std"])
    n_per_learner = frame.groupby("learner")["experiment"].nunique()
    blocks: list[tuple[Any, ...]] = [
        ("h1", title),
        ("p", f"{n_experiments} experiments (openbox x lockbox x replication x learner), "
              f"{len(frame)} result rows. Learners: {', '.join(learners)}. Methods: {', '.join(methods)}."),
        *_section("Dominated hypervolume", "hypervolume", (
            "p", "Mean (sd) hypervolume over experiments; n is the number of experiments per learner."), (
            "table", ["method", *[f"{lr} (n={n_per_learner[lr]})" for lr in learners]],
            [[m, *[_mean_sd(stats, lr, m) for lr in learners]] for m in methods]))]
    if wins is not None:
        blocks += _section("Wins and losses", "winloss", (
            "table", ["winner (row) / loser (column)", *methods],
            [[w, *["-" if w == lo else f"{wins.loc[w, lo]:g}" for lo in methods]] for w in methods]))
    if "front" in figures:
        blocks += _section("Selected configurations", "front")
    if embedding is not None:
        blocks += _section("Sites", "sites", ("p", f"Embedding: {embedding[3]}."))
    for name, text in (("index.md", _render_md(blocks)), ("index.html", _render_html(blocks, title, out_dir))):
        write_atomic(out_dir / name, lambda p: Path(p).write_text(text, encoding="utf-8"))
    return out_dir / "index.md"


def write_report(out_dir: str | Path, settings: Any = None) -> Path:
    """(Re)build the plots and report page of a results directory; return the ``index.md`` path.

    The sites picture needs the dataset: it is re-split from ``settings`` (an
    :class:`~raytune_fed.workflows.rfms.RFMSSettings`), or from the settings the grid
    stored with its rows.
    """
    from raytune_fed.workflows.rfms._sites import plan_sites
    from raytune_fed.workflows.rfms._spec import RFMSSettings

    out_dir = Path(out_dir)
    frame = _check_frame(out_dir, None)
    if settings is None and "settings" in frame.columns:
        try:
            settings = RFMSSettings.from_config(json.loads(frame["settings"].iloc[0]))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{out_dir / 'results.parquet'}: its 'settings' column does not hold RFMS settings "
                              f"({type(exc).__name__}: {exc})") from None
    sites = None
    if settings is not None:
        plan = plan_sites(settings)
        sites = (plan.X, plan.site_of_row, plan.site_names)
    return build_report(out_dir, frame=frame, sites=sites)


def _check_frame(out_dir: Path, frame: pd.DataFrame | None) -> pd.DataFrame:
    if frame is None:
        path = out_dir / "results.parquet"
        if not path.is_file():
            raise ConfigError(f"no results.parquet in {out_dir}: run an RFMS grid with this output directory first")
        try:
            frame = pd.read_parquet(path)
        except Exception as exc:  # a truncated or foreign file: say which one
            first = (str(exc).strip().splitlines() or [""])[0]
            raise ConfigError(f"cannot read {path} (damaged or not a results file): {type(exc).__name__}: {first}; "
                              f"rerun the grid with the same --out to write it again") from None
        where = str(path)
    else:
        where = f"the results frame given for {out_dir}"
    if not isinstance(frame, pd.DataFrame):
        raise ConfigError(f"{where} must be a pandas DataFrame, got {type(frame).__name__}")
    if frame.empty:
        raise ConfigError(f"{where} is empty (no result rows)")
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(f"{where} lacks required columns {missing}; a results frame needs {list(REQUIRED_COLUMNS)}")
    dup = frame.duplicated(["experiment", "method"])
    if dup.any():
        first = frame.loc[dup].iloc[0]
        raise ConfigError(f"{where} has {int(dup.sum())} duplicate (experiment, method) rows, e.g. "
                          f"experiment {first['experiment']!r} method {first['method']!r}")
    try:  # astype copies: the caller's frame is left alone
        return frame.astype({"hypervolume": float, **{c: str for c in REQUIRED_COLUMNS if c != "hypervolume"}})
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: column 'hypervolume' must be numeric ({exc})") from exc


def _section(heading: str, figure: str, *before: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    return [("h2", heading), *before, ("img", figure), ("p", "How to read: " + _HOW_TO_READ[figure])]


def _method_order(names: pd.Series) -> list[str]:
    """The paper's order (the METHODS registry); unknown names after it, sorted."""
    present = set(names)
    return [m for m in METHODS if m in present] + sorted(present - set(METHODS))


def _mean_sd(stats: pd.DataFrame, learner: str, method: str) -> str:
    if (learner, method) not in stats.index:
        return "-"
    mean, sd = stats.loc[(learner, method)]
    return f"{mean:.3f} ({sd:.3f})" if np.isfinite(sd) else f"{mean:.3f} (n/a)"


def _plot_hypervolume(plt: Any, frame: pd.DataFrame, methods: list[str], learners: list[str],
                      colours: dict[str, Any], title: str) -> Any:
    fig, axes = plt.subplots(1, len(learners), figsize=(max(4.5, 3.8 * len(learners)), 4.4),
                             sharey=True, squeeze=False)
    for ax, learner in zip(axes[0], learners):
        sub = frame[frame["learner"] == learner]
        present = [m for m in methods if (sub["method"] == m).any()]
        data = [sub.loc[sub["method"] == m, "hypervolume"].dropna().to_numpy(float) for m in present]
        box = ax.boxplot(data, tick_labels=present, showmeans=True, patch_artist=True)
        for patch, m in zip(box["boxes"], present):
            patch.set(facecolor=colours[m], alpha=0.6)
        ax.set_title(learner)
        ax.tick_params(axis="x", rotation=45)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("dominated hypervolume")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def win_loss_figure(wins: pd.DataFrame, n_experiments: int) -> Any:
    """Heatmap of a win/loss matrix (winners as rows) with winners on the horizontal axis and
    losers on the vertical one, as paper figure 4; the caller closes the figure."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(wins.index)
    grid = wins.to_numpy(float).T.copy()  # grid[loser, winner]
    np.fill_diagonal(grid, np.nan)
    size = 1.6 + 0.8 * len(names)
    fig, ax = plt.subplots(figsize=(size + 1.2, size))
    image = ax.imshow(grid, cmap="Blues", vmin=0)
    top = np.nanmax(grid) if np.isfinite(grid).any() else 1.0
    for (loser, winner), value in np.ndenumerate(grid):
        if loser != winner:
            ax.text(winner, loser, f"{value:g}", ha="center", va="center", fontsize=9,
                    color="white" if value > 0.6 * top else "black")
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), names)
    ax.set(xlabel="winner", ylabel="loser", title=f"wins over {n_experiments} experiments")
    fig.colorbar(image, ax=ax, label="wins (tie = 0.5)")
    fig.tight_layout()
    return fig


def _plot_front(plt: Any, frame: pd.DataFrame, methods: list[str], learners: list[str],
                colours: dict[str, Any]) -> Any:
    fig, axes = plt.subplots(1, len(learners), figsize=(max(4.5, 4.0 * len(learners)), 4.2), squeeze=False)
    markers = "os^Dv<>Ph*"
    for ax, learner in zip(axes[0], learners):
        sub = frame[frame["learner"] == learner]
        example = sorted(sub["experiment"].unique())[0]
        sub = sub[sub["experiment"] == example]
        for i, m in enumerate(methods):
            for _, row in sub[sub["method"] == m].iterrows():
                x = np.asarray(row["curator_outbag"], dtype=float).ravel()
                y = np.asarray(row["lockbox_loss"], dtype=float).ravel()
                if x.size and x.size == y.size:
                    ax.scatter(x, y, color=colours[m], marker=markers[i % len(markers)], label=m, alpha=0.8)
        first = sub.iloc[0]
        roles = ", ".join(f"{c} {first[c]}" for c in ("openbox", "lockbox", "replication") if c in sub.columns)
        ax.set_title(f"{learner}\n{roles or example}", fontsize=9)
        ax.axline((0, 0), slope=1, color="grey", linestyle="--", linewidth=0.8)  # lockbox = curator
        ax.set_xlabel("curator out-of-bag loss")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("lockbox loss")
    axes[0][-1].legend(*axes[0][-1].get_legend_handles_labels(), fontsize=7)
    fig.tight_layout()
    return fig


def _embed_sites(sites: Sequence[Any], seed: int) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], str]:
    """2-D coordinates of the pooled rows: PCA(50) + t-SNE up to 3000 rows, else PCA of a subsample."""
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    if not isinstance(sites, (tuple, list)) or len(sites) != 3:
        raise ConfigError("sites must be a tuple (X, site_of_row, site_names)")
    X, site_of_row, names = np.asarray(sites[0], dtype=float), np.asarray(sites[1]), tuple(map(str, sites[2]))
    if X.ndim != 2 or X.shape[0] < 5 or X.shape[1] < 2 or not np.isfinite(X).all():
        raise ConfigError(f"sites X must be a finite 2-D array with at least 5 rows and 2 columns, got shape "
                          f"{X.shape} with {int(np.size(X) - np.isfinite(X).sum())} NaN or infinite values")
    if site_of_row.shape != (X.shape[0],) or not np.issubdtype(site_of_row.dtype, np.integer):
        raise ConfigError(f"site_of_row must be {X.shape[0]} integer site indices (one per row of X), "
                          f"got shape {site_of_row.shape} dtype {site_of_row.dtype}")
    if site_of_row.min() < 0 or site_of_row.max() >= len(names):
        raise ConfigError(f"site_of_row holds indices in [{site_of_row.min()}, {site_of_row.max()}] "
                          f"but only {len(names)} site names were given")
    n = X.shape[0]
    with threadpool_limits(limits=1):  # BLAS/OpenMP threads stall 4-5x when the machine is busy (measured)
        if n <= _TSNE_MAX_ROWS:
            k = min(50, n, X.shape[1])
            reduced = PCA(n_components=k, random_state=seed).fit_transform(X)
            coords = TSNE(n_components=2, init="pca", random_state=seed,
                          perplexity=min(30.0, (n - 1) / 3)).fit_transform(reduced)
            how = f"t-SNE of the first {k} principal components of all {n} rows"
        else:
            keep = np.sort(np.random.default_rng(seed).choice(n, _TSNE_MAX_ROWS, replace=False))
            coords = PCA(n_components=2, random_state=seed).fit_transform(X[keep])
            site_of_row = site_of_row[keep]
            how = f"first two principal components of a random subsample of {_TSNE_MAX_ROWS} of the {n} rows"
    return coords, site_of_row, names, how


def _plot_sites(plt: Any, coords: np.ndarray, site_of_row: np.ndarray, names: tuple[str, ...], how: str) -> Any:
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    for i, name in enumerate(names):
        rows = site_of_row == i
        if rows.any():
            ax.scatter(coords[rows, 0], coords[rows, 1], s=8, color=cmap(i % cmap.N), label=name, alpha=0.7)
    ax.set(xticks=[], yticks=[], title=how)
    ax.legend(fontsize=7, markerscale=2, title="site")
    fig.tight_layout()
    return fig


def _render_md(blocks: list[tuple[Any, ...]]) -> str:
    out = []
    for kind, *args in blocks:
        if kind in ("h1", "h2", "p"):
            out.append(("#" * int(kind[1]) + " " if kind != "p" else "") + args[0])
        elif kind == "table":
            header, rows = args
            line = lambda cells: "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"  # noqa: E731
            out.append("\n".join([line(header), "|" + "---|" * len(header), *map(line, rows)]))
        elif kind == "img":
            out.append(f"![{args[0]}]({args[0]}.png)")
    return "\n\n".join(out) + "\n"


def _render_html(blocks: list[tuple[Any, ...]], title: str, out_dir: Path) -> str:
    esc = html.escape
    out = [f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{esc(title)}</title><style>"
           "body{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.4}"
           "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.2em .6em;text-align:right}"
           "img{max-width:100%}</style></head><body>"]
    for kind, *args in blocks:
        if kind in ("h1", "h2", "p"):
            out.append(f"<{kind}>{esc(args[0])}</{kind}>")
        elif kind == "table":
            header, rows = args
            out.append("<table><thead><tr>" + "".join(f"<th>{esc(str(h))}</th>" for h in header) + "</tr></thead>"
                       "<tbody>" + "".join("<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in r) + "</tr>"
                                           for r in rows) + "</tbody></table>")
        elif kind == "img":
            data = base64.b64encode((out_dir / f"{args[0]}.png").read_bytes()).decode("ascii")
            out.append(f"<figure><img src=\"data:image/png;base64,{data}\" alt=\"{esc(args[0])}\">"
                       f"<figcaption>{esc(args[0])}.png</figcaption></figure>")
    return "\n".join(out) + "\n</body></html>\n"
