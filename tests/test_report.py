"""build_report: figures, index pages and checked inputs, from synthetic grids (no Ray)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from raytune_fed.errors import ConfigError
from raytune_fed.workflows.rfms import REQUIRED_COLUMNS, build_report, win_loss_figure

PAPER_ORDER = ["lso", "fso2", "fso5", "fso8", "fso_th", "fmo", "rand_mo"]
LEARNERS = ["elastic_net", "svm"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _grid_frame(seed: int = 0, n_per_learner: int = 6) -> pd.DataFrame:
    """2 learners x 7 methods x 6 experiments, with the columns the grid writes."""
    rng = np.random.default_rng(seed)
    rows = []
    for learner in LEARNERS:
        for e in range(n_per_learner):
            openbox, replication = e % 3, e // 3
            lockbox = (openbox + 1) % 3
            key = f"{learner}-ob{openbox}-lb{lockbox}-r{replication}"
            for method in reversed(PAPER_ORDER):  # stored out of order on purpose
                k = int(rng.integers(1, 4))
                rows.append(dict(
                    dataset="geo", split="natural", learner=learner, method=method, openbox=openbox,
                    lockbox=lockbox, replication=replication, experiment=key,
                    hypervolume=float(rng.uniform(0.3, 0.9)),
                    openbox_outbag=rng.uniform(0.1, 0.5, k).tolist(),
                    curator_outbag=rng.uniform(0.1, 0.5, k).tolist(),
                    lockbox_loss=rng.uniform(0.1, 0.6, k).tolist(),
                    n_curator_queries=int(rng.integers(0, 30)), seconds=float(rng.uniform(1, 5))))
    return pd.DataFrame(rows)


def _md_table(text: str, heading: str) -> dict[str, list[str]]:
    """The Markdown table under ``## heading``: header under key '', then row label -> cells."""
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines if not ln.startswith("|---")]
    return {"": cells[0][1:], **{row[0]: row[1:] for row in cells[1:]}}


def _assert_png(path: Path) -> None:
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[0] >= 200 and pixels.shape[1] >= 200, pixels.shape
    assert pixels[..., :3].std() > 0.01, f"{path.name} is blank"


@pytest.fixture(scope="module")
def grid_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    frame = _grid_frame()
    frame.to_parquet(out / "results.parquet", index=False)
    build_report(out)
    return out, frame, out / "index.md"


def test_report_writes_valid_figures(grid_report):
    out, _, page = grid_report
    assert build_report(out) == out / "index.html"
    for name in ("hypervolume", "winloss", "front"):
        _assert_png(out / f"{name}.png")
    assert not (out / "sites.png").exists()


def test_index_md_lists_methods_learners_and_links_images(grid_report):
    out, frame, page = grid_report
    text = page.read_text()
    assert text.startswith("# RFMS report: dataset geo, split natural")
    assert "12 experiments" in text
    for name in (*PAPER_ORDER, *LEARNERS):
        assert name in text
    for image in ("hypervolume.png", "winloss.png", "front.png"):
        assert f"]({image})" in text
    assert "sites.png" not in text
    assert text.count("How to read:") == 3

    table = _md_table(text, "Dominated hypervolume")
    assert [k for k in table if k] == PAPER_ORDER  # the paper's order, not the stored one
    assert table[""] == [f"{learner} (n=6)" for learner in LEARNERS]
    for method in PAPER_ORDER:
        for col, learner in enumerate(LEARNERS):
            hv = frame.loc[(frame["method"] == method) & (frame["learner"] == learner), "hypervolume"]
            assert table[method][col] == f"{hv.mean():.3f} ({hv.std():.3f})"

    wins = _md_table(text, "Wins and losses")
    assert wins[""] == PAPER_ORDER
    for i, winner in enumerate(PAPER_ORDER):
        for j, loser in enumerate(PAPER_ORDER):
            if i != j:  # every pair is compared in all 12 experiments (no ties in random floats)
                assert float(wins[winner][j]) + float(wins[loser][i]) == 12.0


def test_index_html_is_self_contained(grid_report):
    out, _, _ = grid_report
    page = (out / "index.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count("<table>") == 2
    assert page.count('src="data:image/png;base64,') == 3
    assert "http" not in page
    for name in (*PAPER_ORDER, *LEARNERS):
        assert f'<td class="txt">{name}</td>' in page or f"<th>{name}</th>" in page or f"{name} (n=" in page


def _tiny_frame() -> pd.DataFrame:
    """fmo beats lso in experiments e0 and e1 and ties in e2: fmo over lso 2.5, lso over fmo 0.5."""
    hv = {"fmo": [0.8, 0.7, 0.5], "lso": [0.6, 0.5, 0.5]}
    return pd.DataFrame([dict(dataset="toy", split="srs", learner="svm", method=m, experiment=f"e{i}",
                              hypervolume=v[i]) for m, v in hv.items() for i in range(3)])


def test_win_loss_known_answer(tmp_path):
    build_report(tmp_path, frame=_tiny_frame())
    wins = _md_table((tmp_path / "index.md").read_text(), "Wins and losses")
    assert wins == {"": ["lso", "fmo"], "lso": ["-", "0.5"], "fmo": ["2.5", "-"]}
    assert not (tmp_path / "front.png").exists()  # no loss columns: no front figure
    _assert_png(tmp_path / "winloss.png")


def test_win_loss_heatmap_puts_winners_on_horizontal_axis():
    import matplotlib.pyplot as plt

    wins = pd.DataFrame([[0.0, 0.5], [2.5, 0.0]], index=["lso", "fmo"], columns=["lso", "fmo"])
    fig = win_loss_figure(wins, 3)
    try:
        ax = fig.axes[0]
        assert ax.get_xlabel() == "winner" and ax.get_ylabel() == "loser"
        grid = ax.images[0].get_array()
        assert grid[0, 1] == 2.5  # row lso (loser), column fmo (winner)
        assert grid[1, 0] == 0.5
        labels = {(t.get_position(), t.get_text()) for t in ax.texts}
        assert ((1, 0), "2.5") in labels and ((0, 1), "0.5") in labels
    finally:
        plt.close(fig)


def _sites(n_per_site: int, n_features: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    shifts = rng.normal(0, 3, (3, n_features))
    X = np.vstack([rng.normal(0, 1, (n_per_site, n_features)) + s for s in shifts])
    return X, np.repeat(np.arange(3), n_per_site), ("gse1", "gse2", "gse3")


def test_sites_figure_with_tsne(tmp_path):
    build_report(tmp_path, frame=_tiny_frame(), sites=_sites(40, 30))
    _assert_png(tmp_path / "sites.png")
    text = (tmp_path / "index.md").read_text()
    assert "](sites.png)" in text and "t-SNE of the first 30 principal components of all 120 rows" in text


def test_many_rows_are_embedded_by_pca_of_a_seeded_subsample(tmp_path):
    sites = _sites(1100, 5)
    build_report(tmp_path / "a", frame=_tiny_frame(), sites=sites, seed=3)
    build_report(tmp_path / "b", frame=_tiny_frame(), sites=sites, seed=3)
    assert "first two principal components of a random subsample of 3000 of the 3300 rows" in \
        (tmp_path / "a" / "index.md").read_text()
    assert (tmp_path / "a" / "sites.png").read_bytes() == (tmp_path / "b" / "sites.png").read_bytes()


def _write(frame: pd.DataFrame):
    def setup(out: Path) -> None:
        out.mkdir()
        frame.to_parquet(out / "results.parquet", index=False)
    return setup


def _corrupt(out: Path) -> None:
    out.mkdir()
    (out / "results.parquet").write_bytes(b"not parquet")


BAD_INPUTS = [  # (id, setup of the output directory, build_report keywords, expected message)
    ("missing dir", lambda out: None, {}, r"no results\.parquet in .*results_dir: run an RFMS grid"),
    ("missing file", lambda out: out.mkdir(), {}, r"no results\.parquet in .*results_dir"),
    ("corrupt file", _corrupt, {}, r"cannot read .*results_dir.*results\.parquet"),
    ("empty file", _write(pd.DataFrame({c: [] for c in REQUIRED_COLUMNS})), {}, r"results\.parquet is empty"),
    ("missing columns", _write(_tiny_frame().drop(columns=["method", "hypervolume"])), {},
     r"lacks required columns \['method', 'hypervolume'\]; a results frame needs \['dataset'"),
    ("duplicate rows", _write(pd.concat([_tiny_frame(), _tiny_frame().iloc[:1]])), {},
     r"1 duplicate \(experiment, method\) rows, e\.g\. experiment 'e0' method 'fmo'"),
    ("text hypervolume", lambda out: None, {"frame": _tiny_frame().assign(hypervolume="high")},
     r"column 'hypervolume' must be numeric"),
    ("frame not a frame", lambda out: None, {"frame": [1, 2]},
     r"results frame given for .*results_dir must be a pandas DataFrame, got list"),
    ("empty frame", lambda out: None, {"frame": pd.DataFrame()}, r"results frame given for .*results_dir is empty"),
    ("sites wrong length", _write(_tiny_frame()), {"sites": (np.zeros((10, 3)), np.zeros(9, int), ("a",))},
     r"site_of_row must be 10 integer site indices"),
    ("sites unknown index", _write(_tiny_frame()), {"sites": (np.ones((10, 3)), np.arange(10) % 3, ("a", "b"))},
     r"indices in \[0, 2\] but only 2 site names"),
    ("sites not finite", _write(_tiny_frame()), {"sites": (np.full((10, 3), np.nan), np.zeros(10, int), ("a",))},
     r"sites X must be a finite 2-D array .* got shape \(10, 3\) with 30 NaN"),
]


@pytest.mark.parametrize("setup, kwargs, match", [b[1:] for b in BAD_INPUTS], ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_raises_config_error(tmp_path, setup, kwargs, match):
    out = tmp_path / "results_dir"
    setup(out)
    with pytest.raises(ConfigError, match=match):
        build_report(out, **kwargs)
    assert not (out / "index.md").exists() and not (out / "hypervolume.png").exists()
