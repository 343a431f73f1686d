"""Named presets of ``raytune-fed rfms``, ``pu`` and ``cmosb``: a minute-scale ``quick`` run and the papers'
reproductions, each as the command-line options it sets.

A preset is data: the destination names of the subcommand's options (``n_init``, ``reps``,
``learners``, ...) and their values, already in the form the option's parser gives. The
command line fills them in before reading the user's options, so an option the user gives
wins over the preset's (``raytune-fed rfms --preset slice --reps 1``). A paper preset equals
what the benchmark script under ``experiments/`` runs for the quoted table or figure (one
of its grids, or one seed), and the run is the same grid-engine run as any other: the same
resume, progress, results and report.

``cost`` is what the preset costs on 2 cores: measured for the quick presets, else an
estimate from measured per-cell or per-trial costs (``experiments/bench_preset_costs.py``,
``experiments/measured/preset_costs.json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from raytune_fed.errors import ConfigError

WORKFLOWS = ("rfms", "pu", "cmosb")


@dataclass(frozen=True)
class Preset:
    """Options of one workflow's command under a name.

    ``summary`` says in one line what the run is, ``cost`` what it takes on 2 cores,
    ``source`` the benchmark script (and its part or variant) whose settings the preset
    equals, and ``limits`` what the command line cannot express of that benchmark (so a
    preset reproduces part of it only, never pretends to more).
    """

    name: str
    summary: str
    cost: str
    options: Mapping[str, Any]
    source: str = ""
    limits: str = ""

    def help_line(self) -> str:
        return f"{self.name}: {self.summary} ({self.cost})"


def _preset(name: str, summary: str, cost: str, source: str = "", limits: str = "", **options: Any) -> Preset:
    return Preset(name, summary, cost, MappingProxyType(options), source, limits)


_RFMS_METHODS = ("lso", "fso2", "fso5", "fso8", "fso_th", "fmo", "rand_mo")

RFMS = (
    _preset("quick", "geo5_sim's natural sites, 2 openbox/lockbox pairs x 1 replication, elastic net, every "
                     "method, 8 + 4 evaluations, 5 CV folds",
            "104 s on 2 cores at load 4-8, 95 CPU-s, measured",
            dataset="geo5_sim", split="natural", learners=("elastic_net",), methods=None, pairs=2, reps=1,
            n_init=8, n_iter=4, n_folds=5, seed=0, guard_k=0, thresholdout_budget=None),
    _preset("slice", "the measured slice of the paper's grid: geo5_sim, 2 pairs x 2 replications x elastic net, "
                     "SVM and random forest, every method, 20 + 40 evaluations",
            "about 1.7 h on 2 cores, measured in bench_grid_paper.json",
            source="experiments/bench_grid.py --runs local_tail (its slice; docs/cluster.md)",
            dataset="geo5_sim", split="natural", learners=("elastic_net", "svm", "random_forest"), methods=None,
            pairs=2, reps=2, n_init=20, n_iter=40, n_folds=10, seed=0, guard_k=0, thresholdout_budget=None),
    _preset("paper", "the paper's full grid: geo5_sim, all 20 openbox/lockbox pairs x 10 replications x three "
                     "learners (600 cells), every method, 20 + 40 evaluations",
            "about 47-64 h on 2 cores, projected in bench_grid_paper.json",
            source="experiments/bench_grid.py's projected full grid (FULL_GRID)",
            dataset="geo5_sim", split="natural", learners=("elastic_net", "svm", "random_forest"), methods=None,
            pairs=None, reps=10, n_init=20, n_iter=40, n_folds=10, seed=0, guard_k=0, thresholdout_budget=None),
    _preset("guard", "the guard comparison of docs/rfms.md: geo5_sim, 2 pairs x 1 replication, SVM, 10 + 10 "
                     "evaluations, the sites' guard k = 5 (--guard-k 0 and --sites service give its other rows)",
            "about 3-7 min on 2 cores, measured at load 25-60 in bench_rfms_sites.json",
            source="experiments/bench_rfms.py --pairs 2 --learners svm --n-init 10 --n-iter 10, its geo5_sim "
                   "grid, setup guard5_actor",
            limits="bench_rfms.py also runs the DRC split of gina_agnostic_subset (--dataset gina_agnostic_subset "
                   "--split drc) and the other site setups: one command each",
            dataset="geo5_sim", split="natural", learners=("svm",), methods=None, pairs=2, reps=1, n_init=10,
            n_iter=10, n_folds=10, seed=0, guard_k=5, thresholdout_budget=None),
)

_PU_DATASETS = ("twonorm", "spambase", "chess", "sat", "texture", "titanic")
_PU_CS = (0.01, 0.05, 0.1, 0.2)
_PU_READINGS_DATASETS = ("twonorm", "spambase", "chess", "sat", "titanic")
_PU_ABLATION_DATASETS = ("titanic", "chess", "sat", "twonorm", "spambase", "texture")
_PU_COMMON: dict[str, Any] = {"reps": 10, "seed": 0, "supervised_trials": 30, "baseline_configs": None,
                              "prior": "tice", "evaluator": ("ipm",), "schedule": ("selfpaced",),
                              "control_variate": True, "compare_control_variate": False, "cv_reading": "normalised",
                              "budget_factor": 1.0, "budget_samples": None, "rung_sampling": "balanced",
                              "budget_seconds": None, "asynchronous": False, "target": None, "positive": None}
_BENCH_PU = "experiments/bench_pu.py"


def _pu(name: str, summary: str, cost: str, source: str = "", limits: str = "", **options: Any) -> Preset:
    return _preset(name, summary, cost, source, limits, **{**_PU_COMMON, **options})


def _reading(name: str, what: str, reading: str, **change: Any) -> Preset:
    return _pu(name, f"Table 2's ODE-IPM at c = 0.01 on five datasets under another reading: {what}",
               "about 1 min on 2 cores, estimated from table2's measured cells",
               source=f"{_BENCH_PU} --parts readings, reading {reading}",
               dataset=_PU_READINGS_DATASETS, c=(0.01,), methods=("ode",), **change)


PU = (
    _pu("quick", "twonorm, c = 0.1, 1 replication, ODE-IPM and uPU",
        "29 s on 2 cores at load 7-8, 22 CPU-s, measured",
        dataset=("twonorm",), c=(0.1,), methods=("ode", "upu"), reps=1),
    _pu("table2", "Table 2: ODE-IPM and ODE-AUC on six datasets at c = 0.01-0.2, 10 replications (480 cells; "
                  "its ODE-IPM cells are Figures 3-5's ODE curve)",
        "about 7-8 min on 2 cores, estimated from measured cells",
        source=f"{_BENCH_PU} --parts main (and figures, whose cells it holds)",
        dataset=_PU_DATASETS, c=_PU_CS, methods=("ode",), evaluator=("ipm", "auc")),
    _pu("baselines", "Figures 3-5's first point: ODE-IPM beside uPU, WSVM and the supervised baseline on five "
                     "datasets at c = 0.01, 10 replications",
        "about 6-11 min on 2 cores, estimated from measured cells",
        source=f"{_BENCH_PU} --parts baselines",
        dataset=_PU_READINGS_DATASETS, c=(0.01,), methods=("ode", "upu", "wsvm", "supervised")),
    _pu("table4", "Table 4: ODE-IPM under each pruning schedule (sh, log, exp, linear, selfpaced) on six datasets "
                  "at c = 0.01-0.2, 10 replications (1,200 cells)",
        "about 17-20 min on 2 cores, estimated from table2's measured cells",
        source=f"{_BENCH_PU} --parts schedules",
        dataset=_PU_ABLATION_DATASETS, c=_PU_CS, methods=("ode",), schedule=("sh", "log", "exp", "linear",
                                                                            "selfpaced")),
    _pu("table5", "Table 5: ODE-IPM with the exp schedule, with and without the control variate, on six datasets "
                  "at c = 0.01-0.2, 10 replications",
        "about 7-8 min on 2 cores, estimated from table2's measured cells",
        source=f"{_BENCH_PU} --parts cv",
        dataset=_PU_ABLATION_DATASETS, c=_PU_CS, methods=("ode",), schedule=("exp",), compare_control_variate=True),
    _reading("table2-proportional", "rung rows stratified by s", "proportional", rung_sampling="proportional"),
    _reading("table2-uniform", "a uniformly random prefix of rows per rung", "uniform", rung_sampling="uniform"),
    _reading("table2-budget-4n", "the sample budget B = 4 N", "budget_4n", budget_factor=4.0),
    _reading("table2-true-prior", "uPU trained with the split's true prior (an oracle)", "true_prior", prior="true"),
    _reading("table2-cv-odds", "the control variate as the paper writes it", "cv_odds", cv_reading="odds"),
    _pu("table5-cv-odds", "Table 5's 'with' row under the paper's control variate: ODE-IPM, exp schedule, "
                          "titanic, chess and sat at c = 0.01, 10 replications",
        "about 1 min on 2 cores, estimated from table2's measured cells",
        source=f"{_BENCH_PU} --parts readings, reading cv_odds_exp",
        dataset=("titanic", "chess", "sat"), c=(0.01,), methods=("ode",), schedule=("exp",), cv_reading="odds"),
)

_CMOSB_SEEDS = ("experiments/bench_cmosb_seeds.py runs seeds 0, 1 and 2 of each variant and scores them together "
                "(mean and spread over seeds, the figures); one command runs one seed: --seed 1, --seed 2 for the "
                "others, and the scoring over seeds is the script's")
_CMOSB_PAPER: dict[str, Any] = {"dataset": "synthetic1", "population": 20, "generations": 40, "seed": 0,
                                "attack_sample": 1000, "he": "plain", "op_times": "reference", "bo_trials": None,
                                "grid_levels": 2, "bo_batch": 2, "max_cost": None, "max_leakage": None}


def _figure10(name: str, bound: str, handling: str) -> Preset:
    limit = {"max_leakage": 0.6} if bound == "leakage" else {"max_cost": 0.5}
    what = "privacy leakage <= 0.6" if bound == "leakage" else "training cost <= 0.5 s"
    whose = "the paper's penalty" if handling == "penalty" else "pymoo's constraint domination"
    return _preset(name, f"Figure 10: CMOSB on Synthetic1 with {what} under {whose}, 20 x 40, no baselines, seed 0",
                   "about 0.6-1.3 h on 2 cores, estimated from the README command's measured trials",
                   source=f"experiments/bench_cmosb_seeds.py, variant {bound}_{handling}, one seed",
                   limits=_CMOSB_SEEDS,
                   **{**_CMOSB_PAPER, **limit}, baselines=(), constraint_handling=handling)


CMOSB = (
    _preset("quick", "Synthetic1, CMOSB with population 4 x 3 generations against ES's three fixed settings",
            "45 s on 2 cores at load 6-7, 45 CPU-s, measured",
            dataset="synthetic1", population=4, generations=3, baselines=("es",), bo_trials=None,
            attack_sample=300, seed=0, he="plain", op_times="reference", max_cost=None, max_leakage=None),
    _preset("table4", "Table IV: CMOSB (population 20 x 40 generations) against ES, GS and BO on Synthetic1, "
                      "seed 0 (--dataset synthetic2 for its other column)",
            "about 1.3-2.7 h on 2 cores, estimated from the README command's measured trials",
            source="experiments/bench_cmosb_seeds.py, variant table4, one seed",
            limits=_CMOSB_SEEDS,
            **_CMOSB_PAPER, baselines=("es", "gs", "bo"), constraint_handling="penalty"),
    _figure10("figure10-leakage", "leakage", "penalty"),
    _figure10("figure10-leakage-domination", "leakage", "domination"),
    _figure10("figure10-cost", "cost", "penalty"),
    _figure10("figure10-cost-domination", "cost", "domination"),
)

PRESETS: Mapping[str, Mapping[str, Preset]] = MappingProxyType(
    {workflow: MappingProxyType({p.name: p for p in presets})
     for workflow, presets in (("rfms", RFMS), ("pu", PU), ("cmosb", CMOSB))})
"""Every preset, by workflow and name."""


def get_preset(workflow: str, name: str) -> Preset:
    """The preset ``name`` of ``workflow``; an unknown one is a ConfigError naming it and the known ones."""
    if workflow not in PRESETS:
        raise ConfigError(f"unknown workflow {workflow!r} for presets; known: {', '.join(PRESETS)}")
    known = PRESETS[workflow]
    if name not in known:
        raise ConfigError(f"unknown {workflow} preset {name!r}; known: {', '.join(known)}")
    return known[name]


def presets_help(workflow: str) -> str:
    """The ``--help`` text listing ``workflow``'s presets, one line each."""
    lines = ["Presets (--preset NAME; an option also given on the command line wins):"]
    for p in PRESETS[workflow].values():
        lines.append(f"  {p.help_line()}")
    return "\n".join(lines)

