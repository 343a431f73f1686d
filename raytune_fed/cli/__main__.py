"""``python -m raytune_fed.cli``: the same as the ``raytune-fed`` command."""

from raytune_fed.cli import run

run()
