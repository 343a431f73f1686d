"""The ``raytune-fed`` command line: one module per subcommand (``datasets``, ``rfms``, ``report``).

Exit codes: 0 done; 1 a grid did not finish every cell (the finished ones are stored and
the same command resumes); 2 bad input, printed as one line ``raytune-fed: error: ...``
(argparse's usage errors use the same code); 130 interrupted by Ctrl-C; 143 stopped by
SIGTERM.  A new subcommand is a module with ``register(subparsers)``, listed in
``_main.COMMANDS``.
"""

from raytune_fed.cli._main import main, run

__all__ = ["main", "run"]
