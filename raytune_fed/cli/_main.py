"""Parser assembly, signals and exit codes of ``raytune-fed`` (see the package notes)."""

from __future__ import annotations

import argparse
import logging
import shlex
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from raytune_fed.cli import cluster, cmosb, datasets, party, pu, report, rfms, site
from raytune_fed.cli._options import Parser
from raytune_fed.cli._stderr import RayLineFilter
from raytune_fed.errors import RaytuneFedError

COMMANDS = (datasets, rfms, pu, cmosb, report, site, party, cluster)
"""Subcommand modules, in the order ``--help`` lists them; each has ``register(subparsers)``."""


_TERMINATED = threading.Event()


def _on_sigterm(signum: int, frame: Any) -> None:
    """Stop on SIGTERM the way Ctrl-C stops (Ray turns any exception raised while it waits into
    ``KeyboardInterrupt``, so the signal is remembered here rather than in the exception type)."""
    _TERMINATED.set()
    raise KeyboardInterrupt


def build_parser() -> argparse.ArgumentParser:
    from raytune_fed import __version__

    parser = Parser(prog="raytune-fed", description="Ray-based model selection when data cannot be pooled.")
    parser.add_argument("--version", action="version", version=f"raytune-fed {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def _say(message: str) -> None:
    print(f"raytune-fed: {message}", file=sys.stderr, flush=True)


class _StderrLines(logging.Handler):
    """Prints the package's log records as ``raytune-fed: <message>`` to the stderr of the moment."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"raytune-fed: {record.getMessage()}", file=sys.stderr, flush=True)


def _show_package_log() -> None:
    """Print the package's INFO records (e.g. "Ray: starting a local session ...") on stderr."""
    log = logging.getLogger("raytune_fed")
    if not any(isinstance(h, _StderrLines) for h in log.handlers):
        log.addHandler(_StderrLines(logging.INFO))
    log.setLevel(logging.INFO)
    log.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    from raytune_fed.grid import GridIncompleteError, progress_to

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    _show_package_log()
    args.command_line = "raytune-fed " + shlex.join(argv)   # shown on the run's report page
    in_main = threading.current_thread() is threading.main_thread()
    _TERMINATED.clear()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if in_main else None
    kept = (f"the finished {getattr(args, 'finished_unit', 'cells')} are kept in {args.out}"  # cmosb: trials
            if getattr(args, "out", None) else "nothing was written")
    try:
        with RayLineFilter() as filtered, progress_to(filtered.terminal):  # the bar on the real terminal
            args.run(args)
    except GridIncompleteError as exc:
        _say(f"error: {exc}")
        return 1
    except RaytuneFedError as exc:
        _say(f"error: {exc}")
        return 2
    except KeyboardInterrupt:
        how = "terminated (SIGTERM)" if _TERMINATED.is_set() else "interrupted"
        stopped = getattr(args, "stop_message", None)  # a service says what it kept (site serve, party serve)
        _say(f"{how}; {stopped}" if stopped else f"{how}; {kept}; run the same command again to resume")
        return 143 if _TERMINATED.is_set() else 130
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
    return 0


def run() -> None:
    """Console-script entry point: ``main()``, then leave with its exit code.

    After an interrupt the process ends at once (``os._exit``) once its message is out:
    Ray's own teardown at interpreter exit can abort while cancelled tasks still answer,
    which would turn a clean 130/143 into a crash.  The cluster notices the driver's exit
    and drops its tasks; the store holds only finished cells.
    """
    import os

    code = main()
    if code in (130, 143):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)

