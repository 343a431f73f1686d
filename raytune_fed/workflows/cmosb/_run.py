"""Run CMOSB and its baselines on one task, each method as ``tune.Tuner`` experiments, with resume.

``OUT`` holds ``settings.json`` (a resumed run must ask for the same), ``tune/<run>/`` (Tune's
experiment directories), ``runs/<run>.parquet`` (written when a run finished: it is not
run again), then ``results.parquet`` (one row per evaluated configuration and method),
``summary.json`` and the report (see :mod:`raytune_fed.workflows.cmosb._summary`).  An
interrupted run is picked up with ``Tuner.restore`` (searcher state included).

The rows repeat exactly: two runs of the same settings give the same rows in the same
order (Tune's ``trial_id``, ``finished_at`` and the seconds columns aside).  CMOSB's rows
carry the generation that proposed them and their slot in it from NSGA2Search's own record
(its checkpoint), not from when trials finished; BO proposes in fixed batches; the training
cost is priced with fixed seconds per operation unless ``op_times="calibrate"``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from ray import tune
from ray.tune import Callback

from raytune_fed._checks import MAX_SEED, check_choice, check_int, check_output_dir, check_share
from raytune_fed._limits import check_bounded, limits
from raytune_fed.algorithms.nsga2 import CONSTRAINT_HANDLING
from raytune_fed.attacks import N_SAMPLE
from raytune_fed.crypto import REFERENCE_OP_TIMES, OpTimes, check_scheme
from raytune_fed.errors import ConfigError
from raytune_fed.models.secureboost import SecureBoostClassifier, check_op_times, check_params
from raytune_fed.workflows.cmosb._methods import BASELINES, ES_PRESETS, METHODS, Run, es_config, method_runs
from raytune_fed.workflows.cmosb._objectives import OBJECTIVES, PARAMETERS
from raytune_fed.workflows.cmosb._tasks import TASKS

SHORT_NAMES = {"n_f": "n_federated_trees", "n_l": "n_local_trees", "d": "max_depth", "r": "subsample",
               "theta_p": "purity_threshold", "eta": "learning_rate"}
"""The paper's symbols for the six parameters (``--point`` accepts either spelling)."""


def check_point(point: Mapping[str, Any]) -> dict[str, Any]:
    """A full configuration of the six parameters, checked like SecureBoost checks them."""
    full = {SHORT_NAMES.get(k, k): v for k, v in point.items()}
    unknown = sorted(set(full) - set(PARAMETERS))
    missing = sorted(set(PARAMETERS) - set(full))
    if unknown or missing:
        raise ConfigError(f"a point needs exactly {sorted(SHORT_NAMES)} (or {list(PARAMETERS)}); "
                          f"unknown {unknown}, missing {missing}")
    checked = check_params({**SecureBoostClassifier().get_params(), **full})
    return {k: checked[k] for k in PARAMETERS}


OP_TIMES_SOURCES = ("reference", "calibrate")


@dataclass(frozen=True)
class CMOSBSettings:
    """One CMOSB comparison; :meth:`check` runs when a workflow starts.

    ``op_times`` prices the training cost: ``"reference"`` (fixed seconds per BFV
    operation, :data:`~raytune_fed.crypto.REFERENCE_OP_TIMES`: the same cost on every run
    and machine), ``"calibrate"`` (measured on this machine when the run starts, kept in
    ``settings.json`` for a resume) or the seconds themselves (a dict or ``OpTimes``).
    ``constraint_handling`` is CMOSB's: the paper's ``"penalty"`` or pymoo's ``"domination"``.
    ``bo_batch`` is how many trials BO proposes at once.
    """

    dataset: str = "synthetic1"
    population: int = 20
    generations: int = 40
    baselines: tuple[str, ...] = BASELINES
    max_cost: float | None = None
    max_leakage: float | None = None
    he: str = "plain"
    seed: int = 0
    grid_levels: int = 2
    bo_trials: int | None = None
    n_sample: int = N_SAMPLE
    points: tuple[dict[str, Any], ...] = ()
    constraint_handling: str = "penalty"
    bo_batch: int = 2
    op_times: Any = "reference"

    def check(self) -> CMOSBSettings:
        if self.dataset not in TASKS:
            from raytune_fed.errors import DatasetError

            raise DatasetError(f"unknown CMOSB dataset {self.dataset!r}; known: {sorted(TASKS)}")
        check_bounded("population", self.population, 2, "population")
        check_bounded("generations", self.generations, 1, "tune", max(limits().max_tune_trials // self.population, 1))
        unknown = sorted(set(self.baselines) - set(BASELINES))
        if unknown:
            raise ConfigError(f"unknown baselines {unknown}; known: {list(BASELINES)}")
        if self.max_cost is not None and not (isinstance(self.max_cost, (int, float)) and math.isfinite(self.max_cost)
                                              and self.max_cost > 0):
            raise ConfigError(f"max_cost must be a finite number of seconds > 0, got {self.max_cost!r}")
        if self.max_leakage is not None:
            check_share("max_leakage", self.max_leakage, 0.0, 1.0, low_open=True)
        check_scheme(self.he)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_int("grid_levels", self.grid_levels, 1, 5)
        if self.bo_trials is not None:
            check_bounded("bo_trials", self.bo_trials, 1, "tune")
        check_bounded("n_sample", self.n_sample, 2, "attack")  # and what the task's classes hold (run_cmosb)
        for p in self.points:
            check_point(p)
        check_choice("constraint_handling", self.constraint_handling, CONSTRAINT_HANDLING)
        check_int("bo_batch", self.bo_batch, 1, 10_000)
        if not (isinstance(self.op_times, str) and self.op_times in OP_TIMES_SOURCES):
            if isinstance(self.op_times, str):
                raise ConfigError(f"op_times must be one of {list(OP_TIMES_SOURCES)} or seconds per operation, "
                                  f"got {self.op_times!r}")
            self._given_op_times()  # None (the model's "calibrate") is spelled "calibrate" here
        return self

    def resolve_op_times(self) -> dict[str, Any]:
        """The seconds per operation this run prices with (``"calibrate"`` measures now)."""
        if self.op_times == "reference":
            return REFERENCE_OP_TIMES.as_dict()
        if self.op_times == "calibrate":
            from raytune_fed.crypto import calibrate

            return calibrate().as_dict()
        return self._given_op_times().as_dict()

    def _given_op_times(self) -> OpTimes:
        """``op_times`` given as seconds per operation, as an ``OpTimes``."""
        times = check_op_times(self.op_times)
        if times is None:
            raise ConfigError(f"op_times must be one of {list(OP_TIMES_SOURCES)} or seconds per operation, got None")
        return times

    @property
    def methods(self) -> tuple[str, ...]:
        return ("cmosb",) + tuple(m for m in METHODS if m in self.baselines)

    @property
    def constraints(self) -> dict[str, tuple[str, float]]:
        out = {}
        if self.max_cost is not None:
            out["training_cost"] = ("<=", float(self.max_cost))
        if self.max_leakage is not None:
            out["privacy_leakage"] = ("<=", float(self.max_leakage))
        return out

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["op_times"] = self.op_times if isinstance(self.op_times, str) else self._given_op_times().as_dict()
        out["baselines"], out["points"] = list(self.baselines), [check_point(p) for p in self.points]
        return out


def plan(settings: CMOSBSettings, *, binary: bool) -> list[Run]:
    """Every Tune experiment of ``settings``, in order (ES runs its presets plus the user's points)."""
    s = settings
    bo_trials = s.bo_trials if s.bo_trials is not None else max(1, s.population * s.generations // len(OBJECTIVES))
    runs: list[Run] = []
    for method in s.methods:
        runs += method_runs(method, binary=binary, seed=s.seed, population=s.population, generations=s.generations,
                            constraints=s.constraints, grid_levels=s.grid_levels, bo_trials=bo_trials,
                            constraint_handling=s.constraint_handling, bo_batch=s.bo_batch)
    if s.points:
        es = [{"name": name, **es_config(name)} for name in ES_PRESETS] if "es" in s.baselines else []
        es += [{"name": f"point{i}", **check_point(p)} for i, p in enumerate(s.points)]
        runs = [r for r in runs if r.method != "es"] + [Run("es", "es", {"es": tune.grid_search(es)}, 1)]
    return runs


_DISPLAY: list[Any] = []
"""The progress display of the running ``run_cmosb`` (a restored Tune run brings back its
callbacks unpickled, without the display; they find it here)."""


class _Progress(Callback):
    """Each finished trial of a run as a step of the command's one progress display (a restored run
    counts from its restart)."""

    def __init__(self, name: str, expected: int, progress: Any) -> None:
        self.name, self.expected, self.progress = name, expected, progress
        self.n = 0
        self.counted = False

    def __getstate__(self) -> dict[str, Any]:  # Tune saves its callbacks with the experiment: not the display
        return {**self.__dict__, "progress": None, "counted": False}

    def _display(self) -> Any:
        return self.progress or (_DISPLAY[-1] if _DISPLAY else None)

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if not self.counted:  # on a restored run, the trials it finished before count as done
            self.counted = True
            self.n = sum(t.status == "TERMINATED" for t in trials)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.n += 1
        if self._display() is not None:
            seconds = (trial.last_result or {}).get("time_total_s")
            self._display().step(f"{self.name}: {self.n}/{self.expected} trials", seconds)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if self._display() is not None:
            self._display().step(f"{self.name}: trial {trial.trial_id}", error="the trial raised")


def _finished_before(path: Path) -> int:
    """How many trials the interrupted Tune run at ``path`` finished before it stopped (0 when there is none):
    a restored run does not run them again, so the display counts them as done from the start."""
    if not tune.Tuner.can_restore(str(path)):
        return 0
    try:
        trials = tune.ExperimentAnalysis(str(path)).trials
    except Exception:  # an unreadable state: Tuner.restore reports it
        return 0
    return sum(trial.status == "TERMINATED" for trial in trials)


def _expected(run: Run) -> int:
    if run.make_searcher is not None:
        return run.num_samples
    return math.prod(len(v["grid_search"]) for v in run.param_space.values() if isinstance(v, dict)) * run.num_samples


def run_method(run: Run, trainable: Any, storage: Path, progress: Any) -> pd.DataFrame:
    """Run (or restore) one Tune experiment; its finished trials as rows."""
    from raytune_fed.grid import GridIncompleteError

    path = storage / run.name
    callbacks: list[Callback] = [_Progress(run.name, _expected(run), progress)]
    if tune.Tuner.can_restore(str(path)):
        progress.note(f"{run.name}: restoring the interrupted Tune run")
        tuner = tune.Tuner.restore(str(path), trainable=trainable, param_space=run.param_space or None,
                                   resume_unfinished=True, resume_errored=True)
    else:
        searcher = run.make_searcher() if run.make_searcher is not None else None
        tuner = tune.Tuner(trainable, param_space=run.param_space,
                           tune_config=tune.TuneConfig(search_alg=searcher, num_samples=run.num_samples,
                                                       max_concurrent_trials=run.max_concurrent or None,
                                                       reuse_actors=True),
                           run_config=tune.RunConfig(storage_path=str(storage), name=run.name, verbose=0,
                                                     callbacks=callbacks))
    grid = tuner.fit()
    if grid.errors:
        raise GridIncompleteError(f"{run.name}: {len(grid.errors)} of {len(grid)} trials failed "
                                  f"(first: {type(grid.errors[0]).__name__}); the finished trials are kept in "
                                  f"{path}; run the same command again to retry",
                                  [(run.name, repr(e)[:200]) for e in grid.errors])
    rows = []
    for i in range(len(grid)):  # ResultGrid is indexable, not typed as iterable
        result = grid[i]
        m = result.metrics
        if not m or "utility_loss" not in m:
            continue
        if result.config is None:
            raise RuntimeError(f"{run.name}: Tune returned trial {m['trial_id']} without its config")
        rows.append({"method": run.method, "run": run.name, "trial_id": m["trial_id"], "finished_at": m["timestamp"],
                     "preset": result.config["es"]["name"] if "es" in result.config else "",
                     **{k: m[f"x_{k}"] for k in PARAMETERS},
                     **{k: m[k] for k in OBJECTIVES},
                     **{k: m[k] for k in ("encryptions", "decryptions", "additions", "products", "fit_seconds",
                                          "attack_seconds", "n_trees")}})
    if len(rows) < _expected(run):
        # Tune ends a run on Ctrl-C or SIGTERM by returning what finished: never record that as the whole run
        raise KeyboardInterrupt(f"{run.name}: {len(rows)} of {_expected(run)} trials finished; the Tune run in "
                                f"{path} is restored by the same command")
    frame = pd.DataFrame(rows)
    if run.method == "cmosb":
        return _with_generations(frame, run, path)
    # the other methods' rows in an order that does not depend on when trials finished
    order = ["preset", *PARAMETERS]
    frame = frame.sort_values(order, kind="stable").reset_index(drop=True)
    frame["generation"] = frame["slot"] = frame["in_population_until"] = -1
    return frame


def _with_generations(frame: pd.DataFrame, run: Run, path: Path) -> pd.DataFrame:
    """CMOSB's rows with NSGA2Search's record: generation, slot, and until when each stayed in the population.

    The record is the searcher's checkpoint in the Tune run's directory (Tune writes it when
    the run ends), so a restored run reads it like an uninterrupted one.
    """
    if run.make_searcher is None:
        raise ConfigError(f"{run.name}: a CMOSB run has no searcher to read its record from")
    searcher = run.make_searcher()
    searcher.restore_from_dir(str(path))
    members = searcher.members()
    unknown = sorted(set(frame["trial_id"]) - set(members))
    if unknown:
        raise ConfigError(f"{run.name}: trials {unknown[:3]} are not in the searcher's record in {path}; "
                          "remove that directory and run again")
    frame["generation"] = [members[t][0] for t in frame["trial_id"]]
    frame["slot"] = [members[t][1] for t in frame["trial_id"]]
    last: dict[tuple[int, int], int] = {}
    for g, survivors in enumerate(searcher.core.population_history()):
        for member in survivors:
            last[member] = g
    frame["in_population_until"] = [last.get((g, i), g - 1) for g, i in zip(frame["generation"], frame["slot"])]
    return frame.sort_values(["generation", "slot"], kind="stable").reset_index(drop=True)
def read_settings(out: Path, settings: CMOSBSettings) -> dict[str, Any] | None:
    """The ``settings.json`` of a run ``out`` holds (None if none), checked: readable, a settings record with
    valid operation times, and asking for the same ``settings`` (a resumed run must use the same options)."""
    path = out / "settings.json"
    if not path.exists():
        return None
    try:
        previous = json.loads(path.read_bytes().decode("utf-8"))
        if not isinstance(previous, dict) or not isinstance(previous.get("settings"), dict):
            raise ValueError("it holds no 'settings' object")
        check_op_times(previous.get("op_times"))
        if previous.get("op_times") is None:
            raise ValueError("it holds no 'op_times' object")
    except (OSError, ValueError, TypeError, KeyError) as exc:  # ConfigError and JSONDecodeError are ValueErrors
        raise ConfigError(f"{path} is not a CMOSB settings record (damaged?): {exc}; move it away or use "
                          f"another --out") from None
    wanted = settings.as_json()
    if previous["settings"] != wanted:
        changed = sorted(k for k in wanted if previous["settings"].get(k) != wanted[k])
        raise ConfigError(f"{out} holds a CMOSB run with other settings ({', '.join(changed)} differ); "
                          f"use another --out or the same options")
    return previous


def write_settings(out: Path, settings: CMOSBSettings, op_times: Mapping[str, Any]) -> dict[str, Any]:
    """Write ``settings.json``, or check that a resumed run asks for the same settings."""
    previous = read_settings(out, settings)
    if previous is not None:
        return previous
    record = {"settings": settings.as_json(), "op_times": dict(op_times)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "settings.json").write_text(json.dumps(record, indent=2))
    return record


def check_attack_sample(settings: CMOSBSettings, labels: Any) -> None:
    """The attack samples ``n_sample / n_classes`` rows of every class: no more than the rarest class holds."""
    import numpy as np

    counts = np.unique(np.asarray(labels), return_counts=True)[1]
    top = int(counts.size * counts.min())
    if settings.n_sample > top:
        raise ConfigError(f"n_sample (--attack-sample) must be at most {top}, got {settings.n_sample}: the attack "
                          f"samples n_sample / {counts.size} rows of each class and the rarest class of "
                          f"{settings.dataset}'s training rows has {int(counts.min())}")


def run_cmosb(settings: CMOSBSettings, out: str | Path, *, address: str | None = None, num_cpus: int | None = None,
              progress: Any = None) -> pd.DataFrame:
    """Run every method of ``settings`` on its task (resuming what ``out`` holds); all rows, by method.

    ``progress`` (default: :func:`raytune_fed.grid.make_progress`, the grids' bar or lines)
    shows each finished trial of every method as one step."""
    from raytune_fed.grid import make_progress
    from raytune_fed.runtime import check_address, check_num_cpus, connect, probe_address
    from raytune_fed.workflows.cmosb._report import keep_partial
    from raytune_fed.workflows.cmosb._tasks import load_task
    from raytune_fed.workflows.cmosb._trial import start_parties, trainable

    settings.check()
    check_address(address)
    check_num_cpus(num_cpus)
    out = check_output_dir(out)
    previous = read_settings(out, settings)  # a damaged or different record is refused before any work
    task = load_task(settings.dataset)
    check_attack_sample(settings, task.y[task.train_rows])
    runs = plan(settings, binary=task.binary)
    if any(not (out / "runs" / f"{run.name}.parquet").exists() for run in runs):
        probe_address(address)  # an unreachable cluster is reported before the calibration runs
    op_times = previous["op_times"] if previous else settings.resolve_op_times()
    op_times = write_settings(out, settings, op_times)["op_times"]
    done_dir = out / "runs"
    done_dir.mkdir(parents=True, exist_ok=True)
    frames, todo, notes = [], [], []
    for run in runs:
        finished = done_dir / f"{run.name}.parquet"
        if finished.exists():
            notes.append(f"{run.name}: finished before, not run again")
            frames.append(pd.read_parquet(finished))
        else:
            todo.append(run)
    parties = None
    if todo:  # Ray says it is starting before the progress display takes the terminal
        connect(address, num_cpus)
        parties = start_parties(task, he=settings.he, op_times=op_times, seed=settings.seed,
                                max_concurrency=max(settings.population, 4), n_sample=settings.n_sample)
    restored = {run.name: _finished_before((out / "tune" / run.name).resolve()) for run in todo}
    n_done = sum(_expected(r) for r in runs if r not in todo) + sum(restored.values())
    n_todo = sum(_expected(r) for r in todo) - sum(restored.values())
    progress = progress or make_progress()
    progress.start("cmosb", n_done + n_todo, n_done, float(n_todo), unit="trials")
    _DISPLAY.append(progress)
    try:
        for note in notes:
            progress.note(note)
        if todo:
            fn = tune.with_resources(tune.with_parameters(trainable, parties=parties), {"cpu": 1})
            for run in todo:
                progress.note(f"{run.name}: starting ({_expected(run)} trials)")
                frame = run_method(run, fn, (out / "tune").resolve(), progress)
                frame.to_parquet(done_dir / f"{run.name}.parquet")
                keep_partial(out, settings.dataset, [r.name for r in runs])  # results.partial.parquet
                frames.append(frame)
    finally:
        keep_partial(out, settings.dataset, [r.name for r in runs])  # what stopped incomplete stays readable
        _DISPLAY.remove(progress)
        progress.close()
        if parties is not None:  # the trials hold the handles through Tune's object store: end the actors here
            import ray

            for actor in (parties.active, parties.passive):
                ray.kill(actor)
    frame = pd.concat(frames, ignore_index=True)
    frame.insert(0, "dataset", settings.dataset)
    return frame
