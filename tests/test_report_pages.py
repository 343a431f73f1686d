"""The one report layer: page rendering, the plot rules, which workflow wrote a directory,
and each workflow's page opened in headless Chromium after a real (tiny) run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from raytune_fed.cli._main import main
from raytune_fed.cli.report import recognise
from raytune_fed.errors import ConfigError
from raytune_fed.report import Page, plots, write_page


def _axes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    return plt, fig, ax


def test_fewer_than_five_values_are_points_not_a_box():
    plt, fig, ax = _axes()
    try:
        plots.distribution(ax, [[0.1, 0.2], [0.3, 0.4, 0.5, 0.6, 0.7]], ["two", "five"])
        assert len(ax.patches) == 1                         # one box: the five-value column
        assert len(ax.collections) >= 2                     # the two points (scatter) and the median line
        scatter = [c for c in ax.collections if c.get_offsets().shape[0] == 2]
        assert scatter and np.allclose(sorted(scatter[0].get_offsets()[:, 1]), [0.1, 0.2])
    finally:
        plt.close(fig)


def test_medians_are_black_and_the_axis_fits_the_data():
    import matplotlib.colors as mcolors

    plt, fig, ax = _axes()
    try:
        values = [0.40, 0.41, 0.42, 0.43, 0.44, 0.45]
        plots.distribution(ax, [values], ["m"], ["tab:blue"])
        medians = [line for line in ax.lines if np.allclose(line.get_ydata(), np.median(values))]
        assert medians and mcolors.to_hex(medians[0].get_color()) == "#000000"
        low, high = ax.get_ylim()
        assert 0.38 < low < 0.40 and 0.45 < high < 0.47     # not stretched to 0
    finally:
        plt.close(fig)


def test_generation_ticks_are_integers():
    plt, fig, ax = _axes()
    try:
        ax.plot([1, 2, 3], [0.1, 0.2, 0.3])
        plots.integer_ticks(ax, "x")
        fig.canvas.draw()
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)
    finally:
        plt.close(fig)


def test_a_page_renders_tables_figures_settings_and_keeps_its_command(tmp_path):
    plt, fig, ax = _axes()
    ax.plot([0, 1], [0, 1])
    page = Page("A run", "test", intro="intro text", settings={"seed": 3, "methods": ("a", "b")},
                command="raytune-fed test --seed 3")
    page.section("Numbers").table(["name", "value"], [["a", "0.500 (0.010)"], ["b", 2]]).figure("line", fig, "cap")
    html_path = write_page(tmp_path, page)
    html = html_path.read_text()
    assert html_path == tmp_path / "index.html" and (tmp_path / "line.png").read_bytes()[:4] == b"\x89PNG"
    assert '<td class="txt">a</td>' in html and '<td class="num">0.500 (0.010)</td>' in html
    assert html.count('src="data:image/png;base64,') == 1 and "raytune-fed test --seed 3" in html
    assert "| methods | a, b |" in (tmp_path / "index.md").read_text()
    again = write_page(tmp_path, Page("A run, rebuilt", "test"))   # no command given: the stored one is shown
    assert "raytune-fed test --seed 3" in again.read_text()
    with pytest.raises(ConfigError, match="table row 0 has 1 cells, the header 2"):
        Page("x", "test").table(["a", "b"], [["only one"]])


@pytest.mark.parametrize("columns, workflow", [
    (["dataset", "method", "experiment", "hypervolume", "learner"], "rfms"),
    (["dataset", "c", "method", "variant", "test_auc", "seconds"], "pu"),
    (["dataset", "method", "utility_loss", "training_cost", "privacy_leakage", "hypervolume"], "cmosb"),
])
def test_report_recognises_the_workflow_from_its_results(tmp_path, columns, workflow):
    pd.DataFrame({c: [1.0] for c in columns}).to_parquet(tmp_path / "results.parquet")
    assert recognise(tmp_path) == workflow


def test_report_of_a_foreign_results_file_names_the_problem(tmp_path, capsys):
    pd.DataFrame({"x": [1.0], "y": [2.0]}).to_parquet(tmp_path / "results.parquet")
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "was not written by rfms, pu or cmosb" in err


# ---------------------------------------------------------------- each workflow's page in a browser
RUNS = {
    "rfms": ["rfms", "--dataset", "geo5_sim", "--sites", "local", "--pairs", "1", "--reps", "1", "--n-init", "3",
             "--n-iter", "1", "--n-folds", "3", "--methods", "lso,fso5,fmo"],
    "pu": ["pu", "--dataset", "titanic", "--c", "0.2,0.5", "--methods", "ode,upu", "--reps", "2",
           "--baseline-configs", "3", "--schedule", "sh"],
    "cmosb": ["cmosb", "--dataset", "synthetic1", "--population", "2", "--generations", "2", "--baselines", "es",
              "--attack-sample", "100", "--he", "plain"],
}
TITLES = {"rfms": "RFMS report: dataset geo5_sim", "pu": "PU model selection report", "cmosb": "CMOSB comparison"}
IMAGES = {"rfms": {"hypervolume", "winloss", "front", "sites"}, "pu": {"auc_vs_c_titanic"},
          "cmosb": {"pareto3d_synthetic1", "pareto2d_synthetic1", "hypervolume_by_generation_synthetic1"}}


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium for the three pages (starting it costs more than a page)."""
    import browser

    assert browser.missing() is None, browser.missing()
    with browser.Browser() as session:
        yield session


@pytest.mark.process
@pytest.mark.parametrize("workflow", list(RUNS))
def test_each_workflow_page_loads_in_chromium(workflow, ray_session, chromium, tmp_path, capsys):
    out = tmp_path / workflow
    assert main([*RUNS[workflow], "--out", str(out)]) == 0, capsys.readouterr().err
    (out / "index.html").unlink()                      # the page below is the report command's own
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    assert f"report ({workflow}): {out / 'index.html'}" in capsys.readouterr().out
    page = chromium.open(out / "index.html")
    assert page.title.startswith(TITLES[workflow])
    assert {image["alt"] for image in page.images} == IMAGES[workflow]
    for image in page.images:
        assert image["complete"] and image["width"] > 200 and image["height"] > 200, image
        assert image["shown"] > 100, image                   # on screen, not collapsed
    assert page.tables >= 2                                   # the workflow's tables and the settings
    assert page.width <= 1300                                 # nothing wider than the window
    html = (out / "index.html").read_text()
    assert "raytune-fed " + RUNS[workflow][0] in html         # the command that made the run
    assert page.screenshot[:4] == b"\x89PNG" and len(page.screenshot) > 20_000
