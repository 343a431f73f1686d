"""RFMS: methods, Thresholdout, experiment units in-process, the grid on Ray, the CLI."""

import json

import numpy as np
import pandas as pd
import pytest
from _sites_csv import write_sites_csv

from raytune_fed.algorithms import Thresholdout
from raytune_fed.cli import main
from raytune_fed.errors import ConfigError, DatasetError, SplitError
from raytune_fed.federation import OpenBox
from raytune_fed.grid import ProgressLines
from raytune_fed.models import get_learner
from raytune_fed.workflows.rfms import (
    METHODS,
    ExperimentSpec,
    RFMSSettings,
    build_grid,
    get_methods,
    grid_schedule,
    run_experiment,
    run_grid,
    start_sites,
    unit_of,
)

TINY = dict(n_init=3, n_iter=2, n_folds=3)


def test_method_registry_names_the_paper_methods():
    assert list(METHODS) == ["lso", "fso2", "fso5", "fso8", "fso_th", "fmo", "rand_mo"]
    assert METHODS["fso2"].scalar(0.1, 0.5) == pytest.approx(0.2 * 0.1 + 0.8 * 0.5)
    assert not METHODS["lso"].needs_remote and METHODS["fso_th"].needs_remote


@pytest.mark.parametrize("names, message", [
    (["lso", "bogus"], "unknown method 'bogus'; known methods"),
    (["fmo", "fmo"], "listed twice"),
    ([], "no methods given"),
])
def test_bad_methods(names, message):
    with pytest.raises(ConfigError, match=message):
        get_methods(names)


def test_thresholdout_answers_train_or_noisy_holdout_and_counts_budget():
    from scipy.stats import norm

    th = Thresholdout(seed=0)
    close = np.array([th.answer(0.10, 0.105) for _ in range(4000)])
    # train value iff 0.005 <= T + eta with eta ~ N(0, (4 sigma)^2): probability Phi(0.015 / 0.12)
    assert abs(np.mean(close == 0.10) - norm.cdf(0.015 / 0.12)) < 0.03
    assert abs(np.std(close[close != 0.10]) - 0.03) < 0.004  # holdout answers carry N(0, sigma^2) noise
    used = th.budget_used
    far = [th.answer(0.0, 0.5) for _ in range(200)]
    assert th.budget_used - used == 200 and abs(np.mean(far) - 0.5) < 0.01
    capped = Thresholdout(seed=0, budget=3)
    answers = [capped.answer(0.0, 0.5) for _ in range(10)]
    assert capped.budget_used == 3 and capped.n_withheld == 7 and answers[3:] == [0.0] * 7
    assert [Thresholdout(seed=5).answer(0.1, 0.4) for _ in range(3)] == \
        [Thresholdout(seed=5).answer(0.1, 0.4) for _ in range(3)]


@pytest.mark.parametrize("kwargs, message", [
    ({"n_init": 0}, r"n_init must be an integer in \[1, \d+\], got 0"),
    ({"n_iter": -1}, r"n_iter must be an integer in \[0, \d+\], got -1"),
    ({"n_folds": 1}, "n_folds must be an integer >= 2"),
    ({"inbag_fraction": 1.0}, "inbag_fraction"),
    ({"pca_variance": 0.0}, "pca_variance"),
    ({"thresholdout_budget": -1}, r"thresholdout_budget must be an integer in \[0, 9223372036854775807\], got -1"),
    ({"seed": -3}, r"seed must be an integer in \[0, 18446744073709551615\], got -3"),
    ({"split": "random"}, r"split must be one of \['natural', 'srs', 'drc'\], got 'random'"),
    ({"methods": ("fmo", "fmo")}, "method 'fmo' is listed twice"),
    ({"dataset": ""}, "dataset must be a non-empty name or path"),
])
def test_bad_settings(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        RFMSSettings(**{"dataset": "geo5_sim", **kwargs})


def test_grid_is_the_product_of_pairs_reps_learners():
    s = RFMSSettings(dataset="geo5_sim")
    grid = build_grid(s, n_sites=5, learners=["elastic_net", "svm", "random_forest"], n_reps=10)
    assert len(grid) == 600 and len({g.key for g in grid}) == 600
    small = build_grid(s, n_sites=5, learners=["svm"], n_reps=1, n_pairs=3)
    assert len({g.openbox for g in small}) == 3  # small runs vary the openbox first


@pytest.mark.parametrize("kwargs, message", [
    ({"learners": ["xgb"]}, "unknown learner 'xgb'"),
    ({"learners": ["svm", "svm"]}, "learners lists 'svm' twice"),
    ({"learners": []}, "learners must list at least one item"),
    ({"n_reps": 0}, r"n_reps must be an integer >= 1, got 0"),
    ({"n_pairs": 21}, r"n_pairs must be an integer in \[1, 20\], got 21"),
    ({"n_reps": 2 ** 31}, r"the grid would have 42,949,672,960 cells \(20 openbox/lockbox pairs x 2147483648 "
                          r"replications x 1 learners\); at most 100,000 cells"),
])
def test_bad_grids_are_refused_before_any_cell_is_built(kwargs, message):
    arguments = {"learners": ["svm"], "n_reps": 1, **kwargs}
    with pytest.raises(ConfigError, match=message):
        build_grid(RFMSSettings(dataset="geo5_sim"), n_sites=5, **arguments)


def test_cell_seeds_come_from_its_coordinates():
    from raytune_fed.random import derive

    s = RFMSSettings(dataset="geo5_sim", seed=4)
    svm, net = (ExperimentSpec(s, 0, 1, (2, 3, 4), 2, learner) for learner in ("svm", "elastic_net"))
    other_rep = ExperimentSpec(s, 0, 1, (2, 3, 4), 3, "svm")
    state = lambda seq: seq.generate_state(4).tolist()  # noqa: E731
    assert state(svm.split_seed()) == state(net.split_seed()) == state(derive(4, "split", 0, 1, 2))
    assert state(svm.split_seed()) != state(other_rep.split_seed())
    assert state(svm.search_seed()) == state(derive(4, 0, 1, 2, "svm", "search"))
    assert state(svm.search_seed()) != state(net.search_seed())
    assert svm.cost < net.cost and svm.demand.site == "site0" and svm.label == "svm openbox=site0 lockbox=site1 rep=2"


def _toy_plan(seed=0):
    from sklearn.datasets import make_classification

    from raytune_fed.workflows.rfms import SitePlan

    X, y = make_classification(n_samples=300, n_features=10, n_informative=4, random_state=seed)
    return SitePlan(X, y, np.arange(300) % 5, tuple(f"s{i}" for i in range(5)))


def _local_experiment(methods, workdir, seed=0, **settings):
    """One unit against in-process restricted sites: (rows, info, curator sessions, lockbox session, ledger dir)."""
    plan = _toy_plan(seed)
    settings = RFMSSettings(dataset="toy", methods=tuple(methods), seed=seed, **{**TINY, **settings})
    spec = ExperimentSpec(settings, openbox=0, lockbox=4, curators=(1, 2, 3), replication=0, learner="svm",
                          site_names=plan.site_names)
    started = start_sites(plan, settings, grid_schedule([spec]), sites="local", workdir=workdir)
    unit = unit_of(spec)
    curators = [started.handles.clients[c].open_session(unit, "curator") for c in spec.curators]
    lockbox = started.handles.clients[spec.lockbox].open_session(unit, "lockbox")
    openbox = OpenBox(*plan.site(0), seed=0)
    rows, info = run_experiment(spec, openbox, curators, lockbox)
    return rows, info, curators, lockbox


def _ledger_lines(workdir, site):
    return [json.loads(line) for line in (workdir / f"{site}.ledger.jsonl").read_text().splitlines()]


def test_experiment_rows_ledgers_and_seals(tmp_path):
    rows, info, curators, lockbox = _local_experiment(list(METHODS), tmp_path)
    assert [r["method"] for r in rows] == list(METHODS)
    for r in rows:
        assert 0.0 <= r["hypervolume"] <= 1.0
        assert len(r["openbox_outbag"]) == len(r["curator_outbag"]) == len(r["lockbox_loss"]) == r["n_selected"]
        assert r["n_evaluations"] == TINY["n_init"] + TINY["n_iter"]
    by = {r["method"]: r for r in rows}
    assert by["lso"]["n_curator_queries"] == 0 and by["fmo"]["n_curator_queries"] == 5
    assert by["lso"]["n_selected"] == 1
    # curators were reached only through their query: every query the unit sent is in each ledger
    for c in curators:
        entries = c.ledger().entries
        assert sum(e.kind in ("query", "refused") for e in entries) == info["n_curator_queries_total"]
        assert c.status().sealed
    assert lockbox.status().sealed


def test_fso_th_answers_come_from_the_curators_thresholdout(tmp_path):
    rows, info, curators, _ = _local_experiment(["fso5", "fso_th"], tmp_path, guard_k=5)
    by = {r["method"]: r for r in rows}
    assert by["fso_th"]["n_curator_queries"] == TINY["n_init"] + TINY["n_iter"]
    for site in ("s1", "s2", "s3"):
        lines = _ledger_lines(tmp_path, site)
        answered = [e for e in lines if e["event"] == "query"]
        refused = [e for e in lines if e["event"] == "refused" and e["method"] == "query"]
        assert {e["code"] for e in refused} <= {"guard"} and len(answered) + len(refused) == \
            info["n_curator_queries_total"]
        th = [e for e in answered if e["mechanism"] == "thresholdout"]
        # the site ran Thresholdout on its own loss and the analyst's train error; fso_th also re-asked the
        # design the exact method asked first, repeats the guard lets through for Thresholdout
        assert th and all(len(e["th"]) == 3 and 0.0 <= e["answer"] <= 1.0 for e in th)  # train, loss, draw
        assert {e["fingerprint"] for e in th} & {e["fingerprint"] for e in answered if e["mechanism"] == "exact"}


def test_lso_alone_never_queries_a_curator(tmp_path):
    rows, info, curators, _ = _local_experiment(["lso"], tmp_path)
    assert info["n_curator_queries_total"] == 0
    assert all(sum(e.kind == "query" for e in c.ledger().entries) == 0 for c in curators)


def test_same_seed_same_numbers(tmp_path):
    a, _, _, _ = _local_experiment(["fso5", "fso_th", "fmo", "rand_mo"], tmp_path / "a", seed=1)
    b, _, _, _ = _local_experiment(["fso5", "fso_th", "fmo", "rand_mo"], tmp_path / "b", seed=1)
    keep = ["method", "hypervolume", "selected", "openbox_outbag", "curator_outbag", "lockbox_loss"]
    assert [{k: r[k] for k in keep} for r in a] == [{k: r[k] for k in keep} for r in b]


def test_withheld_finals_and_refused_queries_are_reported_not_fatal(tmp_path):
    # a guard wider than any site's rows refuses every model: no remote value, no final loss
    rows, info, curators, lockbox = _local_experiment(["lso", "fso5", "fmo"], tmp_path, guard_k=1000)
    by = {r["method"]: r for r in rows}
    assert by["fmo"]["n_refused_evaluations"] == by["fmo"]["n_curator_queries"] == 5
    assert by["lso"]["n_refused_evaluations"] == 0
    for r in rows:
        assert r["lockbox_loss"] == [None] * r["n_selected"] and r["curator_outbag"] == [None] * r["n_selected"]
        assert r["n_withheld_finals"] == r["n_selected"] and r["hypervolume"] == 0.0
    assert lockbox.status().sealed  # the refused answers still used up the lockbox's one answer


def test_openbox_cv_cache_changes_no_result():
    from raytune_fed.models import cross_validated_error

    X, y = _toy_plan().site(0)
    openbox = OpenBox(X, y, seed=3)
    for name in ("svm", "elastic_net"):
        learner = get_learner(name)
        for config in learner.space.latin_hypercube(3, np.random.default_rng(0)):
            for n_folds, seed in ((3, 7), (5, 7), (3, 8)):
                cached = openbox.cv_error(learner, config, n_folds=n_folds, seed=seed)
                plain = cross_validated_error(learner, config, openbox._X_in, openbox._y_in, n_folds=n_folds,
                                              seed=seed)
                assert cached == plain
    assert sorted(openbox._plans) == [(3, 7), (3, 8), (5, 7)]  # one plan per (n_folds, seed), reused


def test_a_split_without_both_classes_fails_clearly(tmp_path):
    from raytune_fed.workflows.rfms import plan_sites

    frame = pd.DataFrame({"x1": np.arange(40.0), "x2": np.arange(40.0) % 7, "label": [0, 1] * 20,
                          "site": ["a"] * 10 + ["b"] * 10 + ["c"] * 10 + ["d"] * 10})
    frame.loc[frame["site"] == "d", "label"] = 1
    path = tmp_path / "sites.csv"
    frame.to_csv(path, index=False)
    with pytest.raises((DatasetError, SplitError), match="'d'|site d|d\\b"):
        plan_sites(RFMSSettings(dataset=str(path), target="label", site_column="site"))


def test_grid_on_ray_writes_results_and_resumes(ray_session, tmp_path):
    settings = RFMSSettings(dataset="geo5_sim", methods=("lso", "fso5", "fmo", "rand_mo"), **TINY)
    frame = run_grid(settings, learners=["svm"], n_reps=1, n_pairs=2, out=tmp_path)
    assert len(frame) == 2 * 4 and set(frame["method"]) == {"lso", "fso5", "fmo", "rand_mo"}
    for _, r in frame.iterrows():  # each curator's ledger holds every query of the unit, answered or refused
        assert list(r["unit_n_ledger_queries"]) == [r["unit_n_curator_queries"]] * 3
    assert set(frame.attrs["usage"]) == set(frame["cell_key"])  # each unit's CPU seconds, cores, wall
    assert all(u["cores"] >= 1 and u["cpu_seconds"] > 0 for u in frame.attrs["usage"].values())
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n_experiments"] == 2 and len(summary["hypervolume"]) == 4
    assert np.allclose(np.array(summary["win_loss"]["matrix"]) + np.array(summary["win_loss"]["matrix"]).T,
                       2 * (1 - np.eye(4)))
    stored = pd.read_parquet(tmp_path / "results.parquet")
    said = []
    again = run_grid(settings, learners=["svm"], n_reps=1, n_pairs=2, out=tmp_path, progress=ProgressLines(said.append))
    assert "(2 already done)" in said[0] and len(said) == 1  # nothing re-ran
    assert again.attrs["usage"] == {}
    assert len(again) == len(stored) and len(list((tmp_path / "units").glob("*.json"))) == 2
    assert sorted(again["hypervolume"]) == sorted(stored["hypervolume"])
    # the report rebuilds from the directory alone, sites picture included
    assert main(["report", str(tmp_path)]) == 0
    assert {"hypervolume.png", "winloss.png", "sites.png", "index.md", "index.html"} <= {
        p.name for p in tmp_path.iterdir()}


def test_a_torn_unit_file_is_named_and_recomputed_on_request(ray_session, tmp_path, capsys):
    data = write_sites_csv(tmp_path / "sites.csv")
    argv = ["rfms", "--dataset", data, "--target", "label", "--site-column", "site", "--learners", "svm",
            "--methods", "lso,fmo", "--n-init", "3", "--n-iter", "2", "--n-folds", "3", "--reps", "1", "--pairs", "2",
            "--no-report", "--out", str(tmp_path / "out")]
    out = tmp_path / "out"
    assert main(argv) == 0
    first = pd.read_parquet(out / "results.parquet")
    torn = sorted((out / "units").glob("*.json"))[0]
    torn.write_bytes(torn.read_bytes()[:100])
    (out / "results.parquet").unlink()
    capsys.readouterr()
    assert main(argv) == 1  # the other cell is fine; the run ends with one line naming what to do
    err = capsys.readouterr().err
    assert f"unit file {torn} is damaged: it is not readable JSON" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("raytune-fed: error: rfms: 1 of 2 cells did not finish: 1 with a "
                                                   "damaged unit file (rerun with --recompute-damaged")
    assert not (out / "results.parquet").exists()
    assert main([*argv, "--recompute-damaged"]) == 0
    assert [p.name.split(".")[0] for p in (out / "quarantine").iterdir()] == [torn.stem]
    again = pd.read_parquet(out / "results.parquet")
    compared = ["experiment", "method", "hypervolume", "selected", "lockbox_loss"]
    assert again[compared].sort_values(compared[:2]).to_json() == first[compared].sort_values(compared[:2]).to_json()


@pytest.mark.parametrize("argv, message", [
    (["rfms", "--methods", "lso,nope", "--out", "{tmp}"], "unknown method 'nope'"),
    (["rfms", "--learners", "xgb", "--out", "{tmp}"], "unknown learner 'xgb'"),
    (["rfms", "--n-init", "0", "--out", "{tmp}"], "n_init must be an integer in [1, "),
    (["rfms", "--dataset", "no_such_dataset", "--out", "{tmp}"], "no_such_dataset"),
    (["rfms", "--dataset", "breast_cancer", "--split", "natural", "--out", "{tmp}"], "no natural sites"),
    (["rfms", "--sites", "cloud", "--out", "{tmp}"],
     "sites must be one of ['local', 'actor', 'service'] or a .toml/.json sites file, got 'cloud'"),
    (["rfms", "--sites", "{tmp}/none.toml", "--out", "{tmp}"], "sites file not found: '{tmp}/none.toml'"),
    (["rfms", "--sites", "{tmp}/bad.toml", "--out", "{tmp}"], "the sites file 'bad.toml' must have a [sites.<name>]"),
    (["rfms", "--sites", "{tmp}/few.toml", "--out", "{tmp}"],
     "the sites file 'few.toml' lacks sites ['GSE20194_sim', 'GSE20271_sim', 'GSE32646_sim', 'GSE6861_sim'] of the "
     "dataset's split (it lists ['GSE16446_sim'])"),
    (["rfms", "--guard-k", "-1", "--out", "{tmp}"], "guard_k must be an integer >= 0, got -1"),
])
def test_cli_bad_arguments_exit_2_with_one_line(argv, message, tmp_path, capsys):
    (tmp_path / "bad.toml").write_text("[other]\n")
    (tmp_path / "token").write_text("t" * 24 + "\n")
    (tmp_path / "few.toml").write_text('[sites.GSE16446_sim]\nurl = "http://127.0.0.1:9"\ntoken_file = "token"\n')
    code = main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    message = message.replace("{tmp}", str(tmp_path))
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("raytune-fed: error:") and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "results.parquet").exists()


@pytest.mark.parametrize("kwargs, message", [
    ({"threshold": -0.1}, r"Thresholdout threshold must be a finite number >= 0.0, got -0.1"),
    ({"sigma": float("nan")}, r"Thresholdout sigma must be a finite number >= 0.0, got nan"),
    ({"budget": -1}, r"Thresholdout budget must be an integer in \[0, 9223372036854775807\], got -1"),
    ({"budget": True}, r"Thresholdout budget must be an integer in \[0, 9223372036854775807\], got True"),
])
def test_bad_thresholdout_parameters(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Thresholdout(**kwargs)


def test_every_deployment_and_sites_by_url_give_the_same_numbers(ray_session, tmp_path):
    """One cell (so the guard's history does not depend on which cell reaches a site first), guard on; three
    sites (openbox, lockbox, a curator), so each deployment starts three site processes, not five."""
    from raytune_fed import serve
    from raytune_fed.workflows.rfms import plan_sites, rfms_site_policy

    data = write_sites_csv(tmp_path / "sites.csv")
    settings = RFMSSettings(dataset=data, target="label", site_column="site",
                            methods=("lso", "fso5", "fso_th", "fmo"), guard_k=5, **TINY)
    compared = ["experiment", "method", "hypervolume", "selected", "curator_outbag", "lockbox_loss",
                "n_refused_evaluations"]
    frames = {kind: run_grid(settings, learners=["svm"], n_reps=1, n_pairs=1, out=tmp_path / kind, sites=kind)
              for kind in ("local", "actor", "service")}
    # sites started by their owners elsewhere, under the same policies, reached by URL from a sites file
    plan = plan_sites(settings)
    specs = build_grid(settings, n_sites=len(plan.site_names), learners=["svm"], n_reps=1, n_pairs=1,
                       site_names=plan.site_names)
    template = rfms_site_policy(settings, grid_schedule(specs), 1)
    owners = tmp_path / "owners"
    with serve.start_sites({n: plan.site(i) for i, n in enumerate(plan.site_names)}, template=template,
                           seed=settings.seed, workdir=owners, deployment="service") as served:
        listing = "".join(f'[sites.{n}]\nurl = "{c._transport.url}"\ntoken_file = "owners/{n}/token"\n'
                          for n, c in served.clients.items())
        (tmp_path / "sites.toml").write_text(listing)
        frames["url"] = run_grid(settings, learners=["svm"], n_reps=1, n_pairs=1, out=tmp_path / "url",
                                 sites=tmp_path / "sites.toml")
    as_json = {k: f[compared].sort_values(compared[:2]).to_json() for k, f in frames.items()}
    assert as_json["local"] == as_json["actor"] == as_json["service"] == as_json["url"]
    assert (frames["local"]["method"] == "fso_th").sum() == 1
