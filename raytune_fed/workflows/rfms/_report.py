"""The report of one RFMS grid: the paper's figures 1 and 3-6 for our results, one page.

``build_report`` reads ``results.parquet`` (one row per experiment x method), recomputes
everything from it (mean/sd hypervolume, win/loss counts) and renders the page through the
one report layer (:mod:`raytune_fed.report`: ``index.html`` with embedded figures,
``index.md`` and the PNGs beside it).  Pure pandas/matplotlib/scikit-learn: no Ray.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from raytune_fed.errors import ConfigError
from raytune_fed.metrics import win_loss_matrix
from raytune_fed.workflows._results import Partial, read_results, results_file
from raytune_fed.workflows.rfms._methods import METHODS

REQUIRED_COLUMNS = ("dataset", "split", "learner", "method", "experiment", "hypervolume")
_FRONT_COLUMNS = ("curator_outbag", "lockbox_loss")
_TSNE_MAX_ROWS = 3000

_HOW_TO_READ = {  # after the paper's captions and section 5.4
    "hypervolume": "One panel per learner (paper figures 3 and 5). Each column is the dominated hypervolume "
                   "(equation 1: openbox out-of-bag, mean curator out-of-bag and lockbox loss of the selected "
                   "configurations) of one method over all experiments. Higher is better.",
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
                 sites: tuple[np.ndarray, np.ndarray, tuple[str, ...]] | None = None, seed: int = 0,
                 command: str | None = None, partial: Partial | None = None) -> Path:
    """Write the figures, ``index.html`` and ``index.md`` of an RFMS grid; return the ``index.html`` path.

    ``frame`` defaults to ``out_dir/results.parquet`` (or, while the grid runs or after it stopped
    incomplete, its ``results.partial.parquet``: the page is then marked partial, as it is when
    ``partial`` is given).  ``sites=(X, site_of_row, site_names)``
    adds the site embedding (t-SNE up to 3000 rows, else PCA of a subsample drawn with ``seed``).
    ``command`` is the command line that made the run (kept with it; see :func:`raytune_fed.report.write_page`).
    """
    from raytune_fed.report import Page, plots, write_page

    out_dir = Path(out_dir)
    where = None
    if frame is None:
        frame, partial, where = _read(out_dir)
    frame = _check_frame(out_dir, frame, where)
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
    stats = frame.groupby(["learner", "method"])["hypervolume"].agg(["mean", "std"])
    n_per_learner = frame.groupby("learner")["experiment"].nunique()
    groups = [frame.loc[(frame["learner"] == lr) & (frame["method"] == m), "hypervolume"]
              for lr in learners for m in methods]
    page = Page(title, "rfms", settings=_settings_of(frame), command=command,
                intro=f"{n_experiments} experiments (openbox x lockbox x replication x learner), {len(frame)} "
                      f"result rows. Learners: {', '.join(learners)}. Methods: {', '.join(methods)}.")
    if partial is not None:
        page.mark_partial(partial.n_done, partial.n_total, partial.missing, partial.unit)
    from raytune_fed.workflows.rfms._refusals import refusal_note

    note = refusal_note(frame)
    if note:
        page.section("What the sites refused").text(note)
    page.section("Dominated hypervolume").text(
        "Mean (sd) hypervolume over experiments; n is the number of experiments per learner.")
    page.table(["method", *[f"{lr} (n={n_per_learner[lr]})" for lr in learners]],
               [[m, *[_mean_sd(stats, lr, m) for lr in learners]] for m in methods])
    page.figure("hypervolume", _plot_hypervolume(plt, frame, methods, learners, colours, title),
                "How to read: " + _HOW_TO_READ["hypervolume"] + " " + plots.describe_distribution(groups))
    if wins is not None:
        page.section("Wins and losses").table(
            ["winner (row) / loser (column)", *methods],
            [[w, *["-" if w == lo else f"{wins.loc[w, lo]:g}" for lo in methods]] for w in methods])
        page.figure("winloss", win_loss_figure(wins, n_experiments), "How to read: " + _HOW_TO_READ["winloss"])
    if all(c in frame.columns for c in _FRONT_COLUMNS):
        page.section("Selected configurations").figure(
            "front", _plot_front(plt, frame, methods, learners, colours), "How to read: " + _HOW_TO_READ["front"])
    if embedding is not None:
        page.section("Sites").text(f"Embedding: {embedding[3]}.").figure(
            "sites", _plot_sites(plt, *embedding), "How to read: " + _HOW_TO_READ["sites"])
    return write_page(out_dir, page)


def _settings_of(frame: pd.DataFrame) -> dict[str, Any]:
    """The grid's settings as stored with its rows (the ``settings`` column), if any."""
    if "settings" not in frame.columns:
        return {}
    try:
        settings = json.loads(str(frame["settings"].iloc[0]))
    except ValueError:
        return {}
    if not isinstance(settings, dict):
        return {}
    extra = {"learners": list(dict.fromkeys(frame["learner"])),
             "replications": int(frame["replication"].nunique()) if "replication" in frame.columns else None}
    return {**settings, **{k: v for k, v in extra.items() if v is not None}}


def write_report(out_dir: str | Path, settings: Any = None, *, command: str | None = None) -> Path:
    """(Re)build the plots and report page of a results directory; return the ``index.html`` path.

    The sites picture needs the dataset: it is re-split from ``settings`` (an
    :class:`~raytune_fed.workflows.rfms.RFMSSettings`), or from the settings the grid
    stored with its rows.
    """
    from raytune_fed.workflows.rfms._sites import plan_sites
    from raytune_fed.workflows.rfms._spec import RFMSSettings

    out_dir = Path(out_dir)
    frame, partial, where = _read(out_dir)
    frame = _check_frame(out_dir, frame, where)
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
    return build_report(out_dir, frame=frame, sites=sites, command=command, partial=partial)


def _read(out_dir: Path) -> tuple[pd.DataFrame, Partial | None, str]:
    """The grid's rows (``results.parquet``, or its partial file while it runs), what a partial file says of
    itself, and the file's path."""
    frame, partial = read_results(out_dir, "run an RFMS grid with this output directory first")
    return frame, partial, str(results_file(out_dir))


def _check_frame(out_dir: Path, frame: Any, where: str | None = None) -> pd.DataFrame:
    where = where or f"the results frame given for {out_dir}"
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
    from raytune_fed.report import plots

    fig, axes = plt.subplots(1, len(learners), figsize=(max(4.8, 0.55 * len(methods) * len(learners) + 2.5), 4.4),
                             sharey=True, squeeze=False)
    for ax, learner in zip(axes[0], learners):
        sub = frame[frame["learner"] == learner]
        present = [m for m in methods if (sub["method"] == m).any()]
        data = [sub.loc[sub["method"] == m, "hypervolume"].to_numpy(float) for m in present]
        plots.distribution(ax, data, present, [colours[m] for m in present])
        ax.set_title(learner)
        ax.tick_params(axis="x", rotation=45)
        ax.grid(axis="y", alpha=0.3)
    plots.fit_axis(axes[0][0], frame["hypervolume"].to_numpy(float), "y", floor=0.0, ceiling=1.0)
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


def _losses(rows: pd.DataFrame, column: str) -> np.ndarray:
    """Every finite loss in the list column ``column`` of ``rows`` (withheld finals are None)."""
    values = [np.asarray([np.nan if v is None else v for v in np.ravel(np.asarray(cell, dtype=object))], dtype=float)
              for cell in rows[column]]
    flat = np.concatenate(values) if values else np.empty(0)
    return flat[np.isfinite(flat)]


def _plot_front(plt: Any, frame: pd.DataFrame, methods: list[str], learners: list[str],
                colours: dict[str, Any]) -> Any:
    from raytune_fed.report import plots

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
        xs, ys = _losses(sub, "curator_outbag"), _losses(sub, "lockbox_loss")
        both = np.concatenate([xs, ys])
        plots.fit_axis(ax, both, "x", margin=0.1)  # one window for both axes, so the diagonal is at 45 degrees
        plots.fit_axis(ax, both, "y", margin=0.1)
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
