"""Options shared by the subcommands that run grids."""

from __future__ import annotations

import argparse
import copy
from collections.abc import Iterable
from typing import Any, NoReturn, TypeVar, overload

GRID_EPILOG = """\
Resuming: the grid stores every finished cell under OUT/units/ as it arrives; running the
same command again skips them. Ctrl-C or SIGTERM stops the run (exit 130 / 143) and keeps
every finished cell. A cell that raises, or whose worker dies more often than --max-retries
allows, is recorded in OUT/failures/ and retried by the next run; results.parquet and
summary.json are written only when every cell is done (otherwise exit 1). A unit file
that fails its checks (unreadable, another cell's record, rows edited or missing) is
reported by name and its cell is not run; --recompute-damaged moves such files to
OUT/quarantine/ and computes their cells again. A cell that no node of the cluster can
host is reported after --placement-timeout seconds."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Fills ``{learners}`` and ``{methods}`` (RFMS) in an option's help only when help is
    printed: the registries import scikit-learn, which every command line would then pay for."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        if text and "{learners}" in text:
            from raytune_fed.models import LEARNERS

            text = text.replace("{learners}", ", ".join(LEARNERS))
        if text and "{methods}" in text:
            from raytune_fed.workflows.rfms import METHODS

            text = text.replace("{methods}", ", ".join(METHODS))
        return text


def csv(text: str) -> tuple[str, ...]:
    items = tuple(t.strip() for t in text.split(",") if t.strip())
    if not items:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    return items


def add_grid_options(p: argparse.ArgumentParser, default_out: str) -> None:
    p.add_argument("--out", default=default_out, help="output directory (default: %(default)s)")
    p.add_argument("--recompute-damaged", action="store_true",
                   help="move damaged unit files to OUT/quarantine/ and compute their cells again")
    p.add_argument("--address", default=None,
                   help="Ray cluster address ('auto' inside a cluster, host:port, ray://host:port); "
                        "default: a local session or $RAY_ADDRESS")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of a local session (default: all)")
    p.add_argument("--placement-timeout", type=float, default=600.0,
                   help="seconds a cell may wait for a node that can host it (default: %(default)s)")
    p.add_argument("--max-retries", type=int, default=2,
                   help="times a cell is retried when its worker process dies (default: %(default)s)")


def add_preset_option(p: argparse.ArgumentParser, workflow: str) -> None:
    """``--preset NAME`` (:mod:`raytune_fed.cli._presets`): the preset's options become the parser's defaults,
    so an option given on the command line wins over the preset's value (see :meth:`Parser.parse_known_args`)."""
    from raytune_fed.cli._presets import PRESETS

    if not isinstance(p, Parser):
        raise TypeError(f"--preset needs the package's Parser, got {type(p).__name__}")
    p.add_argument("--preset", default=None, metavar="NAME",
                   help=f"fill the options from a named preset: {', '.join(PRESETS[workflow])} (listed below); "
                        "an option also given on the command line wins")
    p.preset_workflow = workflow


def preset_epilog(epilog: str, workflow: str) -> str:
    """A subcommand's epilog followed by its presets, one line each with meaning and cost."""
    from raytune_fed.cli._presets import presets_help

    return f"{epilog}\n\n{presets_help(workflow)}"


def grid_options(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of a workflow's ``run_grid`` from the shared options."""
    from raytune_fed.grid import make_progress

    return {"out": args.out, "address": args.address, "num_cpus": args.num_cpus,
            "recompute_damaged": args.recompute_damaged, "placement_timeout": args.placement_timeout,
            "max_retries": args.max_retries, "progress": make_progress()}


_N = TypeVar("_N")  # the namespace object argparse fills


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``raytune-fed: error: <command>: <problem>``) and exit code 2,
    and it points at the help of the (sub)command whose arguments it could not read.

    A subcommand with ``--preset`` (:func:`add_preset_option`) reads its arguments twice when a preset is
    named: the second time with the preset's options as defaults, so the options given on the command line
    win over the preset's."""

    preset_workflow: str | None = None

    @overload
    def parse_known_args(self, args: Iterable[str] | None = None,
                         namespace: None = None) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(self, args: Iterable[str] | None, namespace: _N) -> tuple[_N, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: _N) -> tuple[_N, list[str]]: ...

    def parse_known_args(self, args: Iterable[str] | None = None,
                         namespace: _N | None = None) -> tuple[_N | argparse.Namespace, list[str]]:
        # a subcommand's parser hands what it does not know up to the top parser, which would name
        # 'raytune-fed --help': refuse it where it was read
        args = None if args is None else list(args)  # read twice under a preset
        given = copy.copy(namespace) if self.preset_workflow and namespace is not None else namespace
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        workflow = self.preset_workflow
        name = getattr(parsed, "preset", None) if workflow else None
        if workflow is None or name is None:
            return parsed, extras
        return self._parse_with_preset(workflow, name, args, given), extras

    def _parse_with_preset(self, workflow: str, name: str, args: Iterable[str] | None, namespace: Any) -> Any:
        from raytune_fed.cli._presets import get_preset
        from raytune_fed.errors import ConfigError

        try:
            preset = get_preset(workflow, name)
        except ConfigError as exc:
            self.error(str(exc))
        unknown = sorted(set(preset.options) - {a.dest for a in self._actions})
        if unknown:  # the registry and the parser disagree: a bug, never a silently dropped option
            raise RuntimeError(f"{workflow} preset {name!r} sets options this command does not have: "
                               f"{unknown}")
        saved = {dest: self.get_default(dest) for dest in preset.options}
        self.set_defaults(**preset.options)
        try:
            parsed, _ = super().parse_known_args(args, namespace)
        finally:
            self.set_defaults(**saved)
        return parsed

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("raytune-fed").strip()
        where = f"{command}: " if command else ""
        self.exit(2, f"raytune-fed: error: {where}{message} (see '{self.prog} --help')\n")
