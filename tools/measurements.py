"""Write ``docs/measurements.md``, the project's measurement history, from ``experiments/measured/*.json``.

    python tools/measurements.py            # rewrite docs/measurements.md (``make measurements``)
    python tools/measurements.py --check    # exit 1 if docs/measurements.md is not what this would write

One row per output file, grouped by the script that wrote it (the section names the script and
what it measures, the first paragraph of its docstring): the revision it measured, the date, the
machine, the command and the headline figures.  A file written through the benchmark harness
(``experiments/_harness.py``, schema ``raytune_fed.benchmark/1``) carries all of these; a file
written before the harness is marked *legacy* and shows what it happened to record, "not
recorded" otherwise.  A file whose script is gone (a one-off, kept in git history) is listed
under "Removed scripts".  The page depends only on the files' contents, never on when or where
it is generated, so ``tests/test_experiments_layout.py`` can compare it with a fresh generation.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "experiments" / "measured"
PAGE = ROOT / "docs" / "measurements.md"
SCRIPT_FOLDERS = ("experiments", "tools")
SCHEMA = "raytune_fed.benchmark/1"
NOT_RECORDED = "not recorded"
# outputs whose name does not start with their script's name
WRITTEN_BY = {"bench_party_flood": "bench_party_defences"}


def scripts() -> dict[str, Path]:
    """Every script that writes measurements, by name (``bench_pu`` -> ``experiments/bench_pu.py``)."""
    found: dict[str, Path] = {}
    for folder in SCRIPT_FOLDERS:
        for path in sorted((ROOT / folder).glob("*.py")):
            if not path.name.startswith("_") and path.stem != "measurements":
                found[path.stem] = path
    return found


def script_of(record: dict[str, Any], stem: str, known: dict[str, Path]) -> str:
    """The name of the script that wrote an output: from the command the harness recorded, else the file name."""
    command = record.get("command")
    if record.get("schema") == SCHEMA and isinstance(command, str):
        for word in command.split()[1:2]:
            name = Path(word).stem
            if name in known:
                return name
    if stem in WRITTEN_BY:
        return WRITTEN_BY[stem]
    prefixes = [name for name in known if stem == name or stem.startswith(name + "_")]
    if prefixes:
        return max(prefixes, key=len)
    return stem.split("_on_")[0] if "_on_" in stem else stem  # a removed script: its name as the file shows it


def summary(path: Path) -> str:
    """The first paragraph of a script's docstring (what it measures)."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def _cell(text: Any) -> str:
    """One table cell: no line breaks, no column separators, no path of the machine that ran it."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text.replace(str(ROOT) + "/", "").replace(str(ROOT), ".")


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _revision(record: dict[str, Any]) -> str:
    revision = record.get("revision")
    if not isinstance(revision, str) or not revision:
        return NOT_RECORDED
    shown = f"`{revision[:7]}`"
    return shown + " (with uncommitted changes)" if record.get("dirty") or record.get("uncommitted_changes") else shown


def _date(record: dict[str, Any]) -> str:
    for key in ("started_utc", "measured_at", "date"):
        if isinstance(record.get(key), str):
            return record[key][:10]
    return NOT_RECORDED


def _machine(record: dict[str, Any]) -> str:
    machine = record.get("machine")
    if isinstance(machine, dict) and "cpu_model" in machine:
        return f"{machine['cpu_model']}, {machine.get('logical_cpus')} logical CPUs"
    if isinstance(machine, dict):
        cores = machine.get("cores") or machine.get("cpus")
        return f"{cores} cores" if cores else NOT_RECORDED
    if isinstance(machine, str):
        return machine
    return NOT_RECORDED


def _command(record: dict[str, Any]) -> str:
    command = record.get("command")
    if isinstance(command, str) and command.strip():
        return f"`{command.strip()}`"
    commands = record.get("commands")
    if isinstance(commands, list) and commands and all(isinstance(c, str) for c in commands):
        return "; ".join(f"`{c}`" for c in commands)
    return NOT_RECORDED


def _measured(record: dict[str, Any]) -> str:
    if record.get("schema") != SCHEMA:
        return ""
    cpu = record.get("cpu_seconds")
    load = (record.get("load_average") or {}).get("mean")
    parts = [f"{_number(record.get('wall_seconds'))} s wall, {_number(cpu)} CPU-s"]
    if load is not None:
        parts.append(f"load {_number(load)}")
    if record.get("completed") is False:
        parts.append("**stopped before the end**")
    return ", ".join(parts)


def _headline(record: dict[str, Any]) -> str:
    headline = record.get("headline") if record.get("schema") == SCHEMA else None
    if not headline:
        return "-"
    return "; ".join(f"{name} {_number(value)}" for name, value in headline.items())


def rows() -> dict[str, list[dict[str, str]]]:
    """Every output file's row, by the script that wrote it."""
    known = scripts()
    by_script: dict[str, list[dict[str, str]]] = {}
    for path in sorted(MEASURED.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except ValueError as exc:
            raise SystemExit(f"{path.relative_to(ROOT)}: not JSON ({exc})") from None
        if not isinstance(record, dict):
            record = {}
        harness = record.get("schema") == SCHEMA
        by_script.setdefault(script_of(record, path.stem, known), []).append({
            "file": f"`{path.name}`" + ("" if harness else " (legacy)"),
            "revision": _revision(record), "date": _date(record), "machine": _machine(record),
            "command": _command(record), "run": _measured(record) or "-", "headline": _headline(record)})
    return by_script


def page() -> str:
    known = scripts()
    by_script = rows()
    lines = ["# Measurements", "",
             "Generated by `make measurements` (`tools/measurements.py`) from `experiments/measured/*.json`; do not",
             "edit by hand.  One row per output file.  Files written through the benchmark harness",
             "(`experiments/_harness.py`) record the revision, machine, load and CPU of every process of the run;",
             "files marked *legacy* were written before it and show what they happened to record.  The prose that",
             "reads these numbers is in the workflow pages (`docs/rfms.md`, `docs/pu.md`, `docs/cmosb.md`,",
             "`docs/sites.md`, `docs/tests.md`).  Commands are shown as recorded: a script since moved to `tools/`",
             "shows its old path.", ""]
    header = ["| File | Revision | Date | Machine | Command | Run | Headline |", "|---|---|---|---|---|---|---|"]
    present = sorted((name for name in by_script if name in known), key=lambda n: (known[n].parent.name, n))
    removed = sorted(name for name in by_script if name not in known)
    for name in present:
        where = known[name].relative_to(ROOT).as_posix()
        lines += [f"## `{where}`", "", _cell(summary(known[name])), "", *header]
        lines += ["| " + " | ".join(_cell(row[k]) for k in ("file", "revision", "date", "machine", "command", "run",
                                                                "headline")) + " |" for row in by_script[name]]
        lines.append("")
    if removed:
        lines += ["## Removed scripts", "",
                  "One-off analyses whose scripts live in git history; their outputs stay because the docs quote them.",
                  "", *header]
        for name in removed:
            lines += ["| " + " | ".join(_cell(row[k]) for k in ("file", "revision", "date", "machine", "command",
                                                                    "run", "headline")) + " |"
                      for row in by_script[name]]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page differs from a fresh generation")
    args = parser.parse_args(argv)
    text = page()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: run make measurements", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
