"""Run a benchmark script on the code of another git revision (``--before REV`` of the benchmarks).

:func:`checkout` makes a temporary worktree of the revision; :func:`run_script` runs a
script (normally the calling benchmark itself, so old and new code are measured the same
way) on that worktree's package and returns the JSON the script wrote.  The package is
found through ``PYTHONPATH`` (inherited by Ray's worker processes too), and the bootstrap
drops this checkout's editable-install finder from the driver, so nothing of the new code
is imported by mistake; the script's own folder comes last on the path, so its ``_harness``
(not package code) is the one of this checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

_HERE = Path(__file__).resolve().parent
_BOOTSTRAP = ("import os, runpy, sys; sys.meta_path[:] = [f for f in sys.meta_path "
              "if not type(f).__module__.startswith('__editable__')]; "
              "sys.path.insert(0, sys.argv.pop(1)); sys.argv.pop(0); "
              "sys.path.append(os.path.dirname(sys.argv[0])); runpy.run_path(sys.argv[0], run_name='__main__')")


@contextmanager
def checkout(revision: str) -> Iterator[Path]:
    """A temporary git worktree of ``revision`` (removed afterwards)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(path), revision], check=True, cwd=_HERE,
                       capture_output=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=_HERE, capture_output=True)


def run_script(tree: Path, script: str | Path, argv: Sequence[str]) -> dict[str, Any]:
    """Run ``script argv --out FILE`` on the package of ``tree``; the JSON it wrote to FILE."""
    handle, name = tempfile.mkstemp(suffix=".json", dir=tree.parent)
    os.close(handle)
    out = Path(name)
    subprocess.run([sys.executable, "-c", _BOOTSTRAP, str(tree), str(Path(script).resolve()), *argv,
                    "--out", str(out)], check=True, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)})
    return json.loads(out.read_text())


def current() -> str:
    """The short commit this checkout is at (what a result was measured on), or ``"unknown"``."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=_HERE, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
