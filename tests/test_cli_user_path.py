"""A new user's path through the README: a progress bar that reaches the terminal, help choices that are
accepted, ``pu --positive``, ``rfms --split drc`` on a natural multi-site dataset, and an unknown option
pointing at its own subcommand's help."""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time

import pytest
from _sites_csv import write_sites_csv

from raytune_fed.cli._main import build_parser, main

# three quick cells in this process (no Ray): svm on a small three-site CSV
QUICK_RFMS = ["rfms", "--target", "label", "--site-column", "site", "--pairs", "1", "--reps", "3", "--n-init", "2",
              "--n-iter", "1", "--n-folds", "3", "--methods", "lso", "--learners", "svm", "--no-report",
              "--sites", "local"]
BAR = re.compile(r"\r\x1b\[2Krfms \[[#.]+\] (\d)/3 cells, \d+:\d\d elapsed, ~(\d+:\d\d|--:--) left")
CELL_LINE = re.compile(r"^\[\d/3\] svm openbox=a lockbox=b rep=\d: ", re.M)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "COLUMNS", "LINES")}


def _run_on_terminal(argv: list[str], columns: int = 100, timeout: float = 300.0) -> tuple[int, str]:
    """Run ``argv`` with its stderr on a pseudo-terminal ``columns`` wide; its exit code and what the terminal got."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, env=_env())
    os.close(slave)
    shown, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child and everything it started closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return proc.wait(timeout=60), shown.decode("utf-8", "replace").replace("\r\n", "\n")  # the tty's onlcr


@pytest.mark.process
def test_the_progress_is_a_bar_on_a_terminal_and_lines_in_a_pipe(tmp_path):
    data = write_sites_csv(tmp_path / "three_sites.csv")
    command = [sys.executable, "-m", "raytune_fed.cli", *QUICK_RFMS, "--dataset", data]
    code, shown = _run_on_terminal([*command, "--out", str(tmp_path / "tty")])
    assert code == 0, shown[-2000:]
    drawn = [int(m.group(1)) for m in BAR.finditer(shown)]
    assert len(drawn) >= 4 and drawn[-1] == 3 and sorted(drawn) == drawn, shown   # redrawn in place, up to 3/3
    assert not CELL_LINE.search(shown), shown                                     # not one line per cell
    assert shown.endswith("\n")

    piped = subprocess.run([*command, "--out", str(tmp_path / "pipe")], capture_output=True, text=True, env=_env(),
                           timeout=300)
    assert piped.returncode == 0, piped.stderr[-2000:]
    assert len(CELL_LINE.findall(piped.stderr)) == 3 and "\r" not in piped.stderr and "\x1b" not in piped.stderr


FILTER_ON_A_TERMINAL = """
import os, sys
from pathlib import Path
from raytune_fed.cli import _stderr
_stderr._log_dir = lambda: Path(sys.argv[1])
with _stderr.RayLineFilter() as filtered:
    filtered.terminal.write("\\r\\x1b[2Kbar 1/2")
    filtered.terminal.flush()
    os.write(2, b"[2026-11-26 04:18:42,653 E 1 1] core_worker.cc:1: noise\\nour own line\\n")
"""


@pytest.mark.process
def test_the_filter_keeps_rays_lines_off_the_terminal_but_not_the_bar(tmp_path):
    code, shown = _run_on_terminal([sys.executable, "-c", FILTER_ON_A_TERMINAL, str(tmp_path)])
    assert code == 0, shown
    assert shown == "\r\x1b[2Kbar 1/2\r\x1b[2Kour own line\n"    # the line clears the bar's line first
    assert (tmp_path / "ray_driver.log").read_text().endswith("noise\n")


def test_the_time_left_is_this_runs_rate_after_a_resume(monkeypatch):
    """90 of 100 cells come from a previous run: neither they nor its time make the rate."""
    from raytune_fed.grid import ProgressLines, _progress

    now = [0.0]
    monkeypatch.setattr(_progress.time, "monotonic", lambda: now[0])
    lines: list[str] = []
    p = ProgressLines(lines.append)
    p.start("g", 100, 90, 10.0)
    for t in (10.0, 20.0):
        now[0] = t
        p.step("a", 10.0)
    assert p.left() == pytest.approx(8 / (2 / 20.0))     # 8 cells at 2 cells per 20 s, not at 92 per 20 s
    now[0] = 21.0
    p.step("b", 1.0)
    assert p.left() == pytest.approx(7 / (3 / 21.0))     # this run's rate, not one smoothed over earlier rates
    assert lines[-1] == "[93/100] b: 1.0 s (0:21 elapsed, ~0:49 left)"


class _Terminal:
    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def test_make_progress_draws_on_the_terminal_the_command_line_kept(monkeypatch):
    from raytune_fed.grid import ProgressBar, ProgressLines, make_progress, progress_to

    monkeypatch.setenv("COLUMNS", "100")
    terminal = _Terminal()
    with progress_to(terminal):
        bar = make_progress()
    assert isinstance(bar, ProgressBar) and bar.stream is terminal
    with progress_to(None):
        assert isinstance(make_progress(), ProgressLines)      # stderr here is no terminal


def _quiet_optuna_reset():
    import optuna

    optuna.logging.set_verbosity(optuna.logging.INFO)
    return optuna


@pytest.mark.parametrize("argv", [["cmosb", "--population", "1"], ["pu", "--reps", "0"]])
def test_optuna_info_lines_are_quieted_by_the_commands_that_use_it(argv, tmp_path, capsys):
    optuna = _quiet_optuna_reset()
    try:
        assert main([*argv, "--out", str(tmp_path / "out")]) == 2
        assert optuna.logging.get_verbosity() == optuna.logging.WARNING
    finally:
        optuna.logging.set_verbosity(optuna.logging.WARNING)


# ---------------------------------------------------------------- every choice --help shows is accepted
def _check_split(value: str) -> None:
    from raytune_fed.workflows.rfms import RFMSSettings

    RFMSSettings(dataset="geo5_sim", split=value)


def _check_he(value: str) -> None:
    from raytune_fed.workflows.cmosb import CMOSBSettings

    CMOSBSettings(he=value).check()


CHECKERS = {("rfms", "--split"): _check_split, ("cmosb", "--he"): _check_he}
"""The validation each option with choices goes through after argparse (a new one must be listed here)."""


def _options_with_choices(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options_with_choices(sub, (*path, name))
        elif action.choices is not None and action.option_strings:
            yield path, action


def test_every_choice_that_help_lists_is_accepted():
    found = {(" ".join(path), action.option_strings[-1]): action
             for path, action in _options_with_choices(build_parser())}
    assert set(found) == set(CHECKERS)
    for (command, option), action in found.items():
        for choice in action.choices:
            args = build_parser().parse_args([*command.split(), option, choice])
            CHECKERS[command, option](getattr(args, action.dest))


def test_cmosb_help_lists_only_the_schemes_it_accepts(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["cmosb", "--help"])
    assert stop.value.code == 0
    shown = capsys.readouterr().out
    assert "--he {bfv,plain}" in shown and "ckks" not in shown


# ---------------------------------------------------------------- pu --positive
def test_pu_on_a_multi_class_dataset_names_the_option_and_the_classes(tmp_path, capsys):
    assert main(["pu", "--dataset", "iris", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("raytune-fed: error: dataset 'iris' has 3 classes ['setosa', 'versicolor', 'virginica']; name the "
                   "positive class (one against the rest) with --positive NAME (positive= in Python)")
    assert main(["pu", "--dataset", "iris", "--positive", "rose", "--out", str(tmp_path / "out")]) == 2
    assert "the positive class (--positive) needs class names from ['setosa', 'versicolor', 'virginica'], " \
           "got 'rose'" in capsys.readouterr().err


def test_pu_positive_takes_one_class_against_the_rest(tmp_path, capsys):
    from raytune_fed.workflows.pu import PUGridSettings, build_grid
    from raytune_fed.workflows.pu._grid import cell_split, check_inputs

    # past the class check, the command stops at the next one: c=0.01 labels none of iris' 50 setosa
    assert main(["pu", "--dataset", "iris", "--positive", "setosa", "--c", "0.01", "--out", str(tmp_path / "o")]) == 2
    assert re.search(r"c=0.01 labels 0 of the \d+ positives", capsys.readouterr().err)

    settings = PUGridSettings(datasets=("iris",), cs=(0.5,), methods=("upu",), n_reps=1, positive="versicolor")
    check_inputs(settings)                                   # every split and ODE's rungs: nothing is refused
    cell = build_grid(settings)[0]
    split = cell_split(cell)
    assert split.y_test.sum() + split.y_train.sum() + split.y_val.sum() == 50   # versicolor's rows are the positives
    assert cell.config()["positive"] == "versicolor"
    assert "positive" not in build_grid(PUGridSettings(datasets=("titanic",), n_reps=1))[0].config()  # keys kept


# ---------------------------------------------------------------- rfms --split drc on natural sites
def test_drc_on_a_dataset_with_natural_sites_says_what_to_do(tmp_path, capsys):
    assert main(["rfms", "--split", "drc", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("raytune-fed: error: dataset 'geo5_sim' comes in 5 natural sites (GSE16446_sim, ")
    assert "only split 'natural' applies; split 'drc' cuts a pooled dataset into sites" in err
    assert "--dataset spambase, or a CSV/Parquet file without --site-column" in err


# ---------------------------------------------------------------- unknown options
@pytest.mark.parametrize("command", [["pu"], ["cmosb"], ["rfms"], ["datasets"], ["cluster", "bundle"]])
def test_an_unknown_option_points_at_its_subcommands_help(command, capsys):
    with pytest.raises(SystemExit) as stop:
        main([*command, "--no-such-option", "1"])
    assert stop.value.code == 2
    name = " ".join(command)
    assert capsys.readouterr().err == (f"raytune-fed: error: {name}: unrecognized arguments: --no-such-option 1 "
                                       f"(see 'raytune-fed {name} --help')\n")
