"""Which implementation each RFMS learner should use, measured.

On microarray-shaped data (120 x 1,000; ``make_classification`` with 20 informative
features, or the GEO GSE6861 site with ``--data geo``), one thread, stratified 10-fold CV:

* elastic net: scikit-learn saga, skglm AndersonCD, skglm ProxNewton (the package's
  ``ElasticNetLogistic``), glum and python-glmnet (the last two only if installed) over
  lambda in {2^-10, 2^-5, 2^-2, 1, 2^5} x alpha in {0.05, 0.5, 1}: seconds per 10-fold CV
  (CPU, solver only, on the same standardised folds), the objective gap to the best
  solution found, coefficients and test-fold probabilities against glmnet run to a tight
  tolerance (or ProxNewton when glmnet is absent); then the package's full CV with and
  without warm starts across folds;
* random forest: scikit-learn vs LightGBM's rf mode (per-node and per-tree feature
  sampling) at 100, 500 and 3000 trees;
* SVM: scikit-learn's SVC over the corners of its space.

Run from the repository root::

    .venv/bin/python experiments/bench_learners.py            # ~6 minutes
    .venv/bin/python experiments/bench_learners.py --quick    # smoke run, ~20 s

Writes ``results/bench_learners.json`` (or ``--out``) and prints a table.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import importlib.metadata  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from scipy.special import expit  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.feature_selection import VarianceThreshold  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from raytune_fed.models import LEARNERS, ElasticNetLogistic, cross_validate, stratified_folds, warm_up  # noqa: E402

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

LAMBDAS = (2.0 ** -10, 2.0 ** -5, 2.0 ** -2, 1.0, 2.0 ** 5)
ALPHAS = (0.05, 0.5, 1.0)
TOL = 1e-6  # optimality tolerance given to the skglm solvers and glum


# --------------------------------------------------------------------------- timing

class Clock:
    """CPU seconds of this process (robust to other jobs on the machine) and wall seconds."""

    def __enter__(self) -> "Clock":
        self._cpu, self._wall = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.cpu = time.process_time() - self._cpu
        self.wall = time.perf_counter() - self._wall


def summary(cpu: dict, wall: dict) -> dict:
    return {"cv_cpu_seconds": cpu, "cv_wall_seconds": wall,
            "mean_cv_seconds": float(np.mean(list(cpu.values()))),
            "worst_cv_seconds": float(np.max(list(cpu.values()))),
            "mean_cv_wall_seconds": float(np.mean(list(wall.values()))),
            "worst_cv_wall_seconds": float(np.max(list(wall.values())))}


# --------------------------------------------------------------------------- data

def load_data(kind: str, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    if kind == "synthetic":
        X, y = make_classification(n_samples=120, n_features=1000, n_informative=20, n_redundant=0,
                                   random_state=seed)
        return X, y, "make_classification(120 x 1000, 20 informative, seed=%d)" % seed
    path = Path(__file__).resolve().parents[1] / "raytune_fed" / "data" / "files" / "gse6861_subset_128x1000.csv.gz"
    if not path.exists():
        sys.exit(f"--data geo needs {path.name} in raytune_fed/data/files")
    import pandas as pd

    frame = pd.read_csv(path)
    X = frame.drop(columns=["sample", "microarray", "response"]).to_numpy(dtype=float)
    y = (frame["response"] == "pCR").to_numpy().astype(int)
    return X, y, f"GEO GSE6861 subset ({X.shape[0]} x {X.shape[1]}, response pCR vs RD)"


def objective(coef, intercept, X, y01, lam, alpha) -> float:
    sign = 2.0 * y01 - 1.0
    loss = np.mean(np.logaddexp(0.0, -sign * (X @ coef + intercept)))
    return float(loss + lam * (alpha * np.abs(coef).sum() + (1 - alpha) / 2 * coef @ coef))


# --------------------------------------------------------------------------- elastic net solvers
# Each takes standardised training data and returns (coef, intercept).

def fit_saga(X, y, lam, alpha):
    model = LogisticRegression(solver="saga", C=1.0 / (X.shape[0] * lam), l1_ratio=alpha, tol=1e-4, max_iter=100)
    model.fit(X, y)
    return model.coef_[0], float(model.intercept_[0])


def fit_anderson_cd(X, y, lam, alpha):
    from skglm.datafits import Logistic
    from skglm.penalties import L1_plus_L2
    from skglm.solvers import AndersonCD

    w, _, _ = AndersonCD(fit_intercept=True, tol=TOL).solve(
        np.asfortranarray(X), 2.0 * y - 1.0, Logistic(), L1_plus_L2(lam, alpha))
    return w[:-1], float(w[-1])


def fit_prox_newton(X, y, lam, alpha, tol=TOL):
    model = ElasticNetLogistic(alpha=alpha, lambda_=lam, tol=tol).fit(X, y)
    return model.coef_[0], float(model.intercept_[0])


def fit_prox_newton_tight(X, y, lam, alpha):
    return fit_prox_newton(X, y, lam, alpha, tol=1e-8)


def fit_glum(X, y, lam, alpha):
    from glum import GeneralizedLinearRegressor

    model = GeneralizedLinearRegressor(family="binomial", alpha=lam, l1_ratio=alpha, gradient_tol=TOL).fit(X, y)
    return np.asarray(model.coef_), float(model.intercept_)


def fit_glmnet(X, y, lam, alpha, tol=1e-7):
    from glmnet import LogitNet

    model = LogitNet(alpha=alpha, lambda_path=np.array([lam]), standardize=False, n_splits=0, tol=tol,
                     max_iter=10 ** 6).fit(X, y)
    return model.coef_path_[0, :, 0], float(model.intercept_path_[0, 0])


def fit_glmnet_tight(X, y, lam, alpha):
    return fit_glmnet(X, y, lam, alpha, tol=1e-11)


# glmnet's default convergence threshold (1e-7, on the change of the objective) is loose
# on separable folds; ``glmnet_tight`` (1e-11) is the reference for probabilities.
ELASTIC_NET = {"sklearn_saga": (fit_saga, "sklearn"), "skglm_anderson_cd": (fit_anderson_cd, "skglm"),
               "skglm_prox_newton": (fit_prox_newton, "skglm"),
               "skglm_prox_newton_tol1e-8": (fit_prox_newton_tight, "skglm"), "glum": (fit_glum, "glum"),
               "glmnet": (fit_glmnet, "glmnet"), "glmnet_tight": (fit_glmnet_tight, "glmnet")}
PACKAGE_ELASTIC_NET = "skglm_prox_newton"


def available(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def bench_elastic_net(X, y, folds, lambdas, alphas) -> dict:
    # the same standardised folds for every solver; preprocessing is not timed here
    prepared = []
    for train, test in folds:
        pre = Pipeline([("drop_constant", VarianceThreshold(0.0)), ("standardize", StandardScaler())])
        prepared.append((pre.fit_transform(X[train]), y[train], pre.transform(X[test])))
    names = [n for n, (_, module) in ELASTIC_NET.items() if available(module)]
    reference = "glmnet_tight" if "glmnet_tight" in names else PACKAGE_ELASTIC_NET
    tiny = (prepared[0][0][:30, :5], prepared[0][1][:30])
    result = {"reference": reference, "unavailable": [n for n in ELASTIC_NET if n not in names],
              "implementations": {}}
    fits = {}
    for name in names:
        fit = ELASTIC_NET[name][0]
        with Clock() as first_call, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit(*tiny, 0.1, 0.5)  # compile / first-call costs, reported apart
        cpu, wall, n_warned = {}, {}, 0
        for lam in lambdas:
            for alpha in alphas:
                key = f"lambda=2^{np.log2(lam):g},alpha={alpha:g}"
                out = []
                with Clock() as clock:
                    for Xs, ytr, Xte in prepared:
                        with warnings.catch_warnings(record=True) as caught:
                            warnings.simplefilter("always", ConvergenceWarning)
                            coef, intercept = fit(Xs, ytr, lam, alpha)
                        n_warned += any(issubclass(w.category, ConvergenceWarning) for w in caught)
                        out.append((coef, intercept))
                cpu[key], wall[key] = clock.cpu, clock.wall
                fits[name, key] = out
        result["implementations"][name] = {
            "first_call_seconds": first_call.cpu, **summary(cpu, wall),
            "n_fold_fits_with_convergence_warning": n_warned}
    # objective gap: relative to the lowest objective any implementation reached on that
    # fold; probabilities (test fold) and coefficients: against the reference
    gap = {name: 0.0 for name in names}
    dprob, dcoef = dict(gap), dict(gap)
    for lam in lambdas:
        for alpha in alphas:
            key = f"lambda=2^{np.log2(lam):g},alpha={alpha:g}"
            for k, (Xs, ytr, Xte) in enumerate(prepared):
                objs = {n: objective(*fits[n, key][k], Xs, ytr, lam, alpha) for n in names}
                best = min(objs.values())
                c0, b0 = fits[reference, key][k]
                for name in names:
                    c, b = fits[name, key][k]
                    gap[name] = max(gap[name], (objs[name] - best) / best)
                    dprob[name] = max(dprob[name], float(np.max(np.abs(expit(Xte @ c + b) - expit(Xte @ c0 + b0)))))
                    dcoef[name] = max(dcoef[name], float(np.max(np.abs(c - c0))))
    for name in names:
        result["implementations"][name].update(
            max_rel_objective_gap=gap[name], max_prob_diff=dprob[name], max_coef_diff=dcoef[name])
    agreeing = {n: r for n, r in result["implementations"].items() if r["max_rel_objective_gap"] <= 1e-3}
    result["fastest_agreeing"] = min(agreeing, key=lambda n: agreeing[n]["mean_cv_seconds"])
    result["package_uses"] = PACKAGE_ELASTIC_NET
    return result


def bench_warm_start(X, y, n_folds, seed, lambdas, alphas) -> dict:
    learner = LEARNERS["elastic_net"]
    out = {}
    for warm in (False, True):
        cpu, wall, errors = {}, {}, {}
        for lam in lambdas:
            for alpha in alphas:
                key = f"lambda=2^{np.log2(lam):g},alpha={alpha:g}"
                with Clock() as clock:
                    res = cross_validate(learner, {"alpha": alpha, "lambda": lam}, X, y, n_folds=n_folds, seed=seed,
                                         warm_start=warm)
                cpu[key], wall[key], errors[key] = clock.cpu, clock.wall, res.error
        out["warm" if warm else "cold"] = {**summary(cpu, wall), "cv_error": errors}
    out["speedup_mean"] = out["cold"]["mean_cv_seconds"] / out["warm"]["mean_cv_seconds"]
    out["package_default"] = False
    return out


# --------------------------------------------------------------------------- random forest

def lightgbm_forest(n_trees, min_node_size, sample_fraction, n_features, seed, by_node):
    import lightgbm as lgb

    mtry = max(1, int(np.sqrt(n_features)))
    sampling = {"feature_fraction_bynode": mtry / n_features} if by_node else {"feature_fraction": mtry / n_features}
    return Pipeline([("drop_constant", VarianceThreshold(0.0)), ("model", lgb.LGBMClassifier(
        boosting_type="rf", n_estimators=n_trees, bagging_fraction=sample_fraction, bagging_freq=1,
        # LightGBM bounds leaf size, ranger the size of a node it may split: a node of
        # min_node_size + 1 rows splits into two leaves of about half that
        min_child_samples=max(1, (min_node_size + 1) // 2), num_leaves=4096, max_depth=-1,
        n_jobs=1, verbose=-1, deterministic=True, force_col_wise=True, random_state=seed, **sampling))])


def bench_forest(X, y, n_folds, seed, tree_counts, min_node_size, sample_fraction) -> dict:
    p = int(np.sum(np.ptp(X, axis=0) > 0))
    impls = {
        "sklearn": lambda t: (LEARNERS["random_forest"], {"num_trees": t, "min_node_size": min_node_size,
                                                          "sample_fraction": sample_fraction}),
        "lightgbm_rf_bynode": lambda t: (lightgbm_forest(t, min_node_size, sample_fraction, p, seed, True), None),
        "lightgbm_rf_bytree": lambda t: (lightgbm_forest(t, min_node_size, sample_fraction, p, seed, False), None),
    }
    out = {"min_node_size": min_node_size, "sample_fraction": sample_fraction, "implementations": {}}
    for name, make in impls.items():
        rows = {}
        for t in tree_counts:
            model, config = make(t)
            with Clock() as clock:
                res = cross_validate(model, config, X, y, n_folds=n_folds, seed=seed)
            rows[str(t)] = {"cv_seconds": clock.cpu, "cv_wall_seconds": clock.wall, "cv_error": res.error}
        out["implementations"][name] = rows
    out["package_uses"] = "sklearn"
    return out


def bench_svm(X, y, n_folds, seed, values) -> dict:
    cpu, wall, errors = {}, {}, {}
    for c in values:
        for sigma in values:
            key = f"C=2^{np.log2(c):g},sigma=2^{np.log2(sigma):g}"
            with Clock() as clock:
                res = cross_validate(LEARNERS["svm"], {"C": c, "sigma": sigma}, X, y, n_folds=n_folds, seed=seed)
            cpu[key], wall[key], errors[key] = clock.cpu, clock.wall, res.error
    return {**summary(cpu, wall), "cv_error": errors}


# --------------------------------------------------------------------------- main

def versions() -> dict:
    out = {"python": platform.python_version()}
    for dist in ("numpy", "scipy", "scikit-learn", "skglm", "numba", "lightgbm", "glum", "python-glmnet"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def print_report(res: dict) -> None:
    if "elastic_net" in res:
        en = res["elastic_net"]
        print(f"\nElastic net, CPU seconds per {res['n_folds']}-fold CV (solver only); obj gap to the best "
              f"solution, dprob/dcoef against {en['reference']}")
        print(f"{'implementation':<27}{'mean s':>8}{'worst s':>9}{'1st call s':>11}{'obj gap':>9}"
              f"{'max dprob':>10}{'max dcoef':>10}{'conv.warn':>10}")
        for name, r in en["implementations"].items():
            print(f"{name:<27}{r['mean_cv_seconds']:>8.3f}{r['worst_cv_seconds']:>9.3f}"
                  f"{r['first_call_seconds']:>11.2f}{r['max_rel_objective_gap']:>9.1e}{r['max_prob_diff']:>10.1e}"
                  f"{r['max_coef_diff']:>10.1e}{r['n_fold_fits_with_convergence_warning']:>10d}")
        print(f"fastest agreeing (obj gap <= 1e-3): {en['fastest_agreeing']}; package uses {en['package_uses']}; "
              f"numba compile once per process: {res['elastic_net_jit_seconds']:.1f} s")
        ws = res["elastic_net_warm_start"]
        print(f"package CV (incl. preprocessing): cold mean {ws['cold']['mean_cv_seconds']:.3f} s / worst "
              f"{ws['cold']['worst_cv_seconds']:.3f} s; warm-started folds mean {ws['warm']['mean_cv_seconds']:.3f}"
              f" s / worst {ws['warm']['worst_cv_seconds']:.3f} s (speed-up x{ws['speedup_mean']:.2f})")
    if "random_forest" in res:
        rf = res["random_forest"]
        print(f"\nRandom forest, CPU seconds per CV (min_node_size={rf['min_node_size']}, "
              f"sample_fraction={rf['sample_fraction']}), [CV error]")
        trees = list(next(iter(rf["implementations"].values())))
        print(f"{'implementation':<22}" + "".join(f"{t + ' trees':>20}" for t in trees))
        for name, rows in rf["implementations"].items():
            print(f"{name:<22}" + "".join(f"{rows[t]['cv_seconds']:>12.2f} [{rows[t]['cv_error']:.3f}]"
                                          for t in trees))
    if "svm" in res:
        sv = res["svm"]
        print(f"\nSVM: CPU mean {sv['mean_cv_seconds']:.3f} s, worst {sv['worst_cv_seconds']:.3f} s per CV over "
              f"{len(sv['cv_cpu_seconds'])} corner configurations")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/bench_learners.json")
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 folds, small grids, few trees")
    parser.add_argument("--data", choices=("synthetic", "geo"), default="synthetic")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sections", nargs="+", choices=("elastic_net", "random_forest", "svm"),
                        default=["elastic_net", "random_forest", "svm"])
    args = parser.parse_args(argv)
    out = Path(args.out)
    with Benchmark("bench_learners", out, argv) as bench:
        X, y, description = load_data(args.data, args.seed)
        n_folds = 3 if args.quick else 10
        lambdas, alphas = ((2.0 ** -5, 1.0), (0.5,)) if args.quick else (LAMBDAS, ALPHAS)
        with Clock() as jit:
            warm_up()
        folds = stratified_folds(y, n_folds, args.seed)

        res = {"quick": args.quick, "data": description, "shape": list(X.shape), "n_folds": n_folds,
               "threads": 1, "versions": versions(), "elastic_net_jit_seconds": jit.cpu,
               "timing": "seconds are CPU seconds of the benchmark process (one thread); *_wall_* are wall clock"}
        if "elastic_net" in args.sections:
            res["elastic_net"] = bench_elastic_net(X, y, folds, lambdas, alphas)
            res["elastic_net_warm_start"] = bench_warm_start(X, y, n_folds, args.seed, lambdas, alphas)
        if "random_forest" in args.sections:
            res["random_forest"] = bench_forest(X, y, n_folds, args.seed, (100,) if args.quick else (100, 500, 3000),
                                                min_node_size=5, sample_fraction=0.632)
        if "svm" in args.sections:
            res["svm"] = bench_svm(X, y, n_folds, args.seed, (2.0 ** -15, 1.0, 2.0 ** 15))
        res["chosen"] = {"elastic_net": PACKAGE_ELASTIC_NET, "elastic_net_warm_start_folds": False,
                         "random_forest": "sklearn", "svm": "sklearn"}
        bench.figures.update(res)
    print_report(res)
    print(f"\nwrote {out}")
    return res


if __name__ == "__main__":
    main()
