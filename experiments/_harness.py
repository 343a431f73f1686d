"""The one harness every benchmark records through: what was measured, on what, at what load.

    with Benchmark("bench_blas_kernels", out) as bench:
        bench.figures["differ"] = ...          # the benchmark's own numbers
    # on leaving: out is written (atomically) with the schema below

Schema ``raytune_fed.benchmark/1`` (one JSON object):

- ``benchmark``, ``command`` (the command line, from the repository root), ``revision``
  (short commit) and ``dirty`` (uncommitted changes to tracked files when it ran);
- ``machine``: CPU model, logical CPUs, platform, Python;
- ``started_utc``, ``wall_seconds``;
- ``cpu_seconds`` and ``cpu_source``: CPU of this process and of every process it started
  while measuring, Ray's workers included whether or not they have exited (a cgroup made for
  the run: cgroup v1 ``cpuacct`` or v2 ``cpu.stat``; needs root).  Without a writable cgroup
  it falls back to ``getrusage`` of this process and its reaped children, which misses Ray's
  workers (raylet does not reap them for us), and ``cpu_source`` says so;
- ``load_average``: the one-minute load sampled every 5 s during the run (mean, max, n);
- ``figures``: the benchmark's own numbers; ``completed`` is false when the run was stopped
  by an exception (the record is still written, so a partial run is never mistaken for one);
- ``headline``: a few named numbers out of ``figures`` (a flat mapping of name to number or
  short text), the ones ``docs/measurements.md`` shows for the run; empty when the benchmark
  names none.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = "raytune_fed.benchmark/1"


class LoadSampler:
    """The one-minute load average every ``period`` seconds while a run goes on."""

    def __init__(self, period: float = 5.0):
        self.period, self.samples = period, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self.period)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        s = self.samples
        return {"mean": round(sum(s) / len(s), 2) if s else None, "max": round(max(s), 2) if s else None, "n": len(s)}


def _cgroup2_root() -> Path | None:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


class CpuGroup:
    """A cgroup for one run: every process started in it is counted, reaped or not."""

    def __init__(self, name: str):
        self.path, self.kind = None, None
        for kind, base in (("cgroup v1 cpuacct", Path("/sys/fs/cgroup/cpuacct")),
                           ("cgroup v2", _cgroup2_root())):
            if base is None or not base.is_dir():
                continue
            path = base / name
            try:
                path.mkdir()
            except OSError:
                continue
            self.path, self.kind = path, kind
            try:  # can a process be moved in? (a read-only or delegated hierarchy says no)
                subprocess.run(["true"], preexec_fn=self.join, check=True)
                self.cpu_seconds()
                break
            except (OSError, subprocess.SubprocessError, KeyError, ValueError):
                self.remove()
                self.path, self.kind = None, None

    def join(self, pid: int | None = None) -> None:
        """Put the calling process (or ``pid``) in the group (called in a child before ``exec``, or on self)."""
        if self.path is not None:
            (self.path / "cgroup.procs").write_text(str(pid or os.getpid()))

    def cpu_seconds(self) -> float:
        if self.kind == "cgroup v1 cpuacct":
            return int((self.path / "cpuacct.usage").read_text()) / 1e9
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6

    def processes_left(self) -> list[str]:
        left = []
        for pid in (self.path / "cgroup.procs").read_text().split():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
                left.append(f"{pid}: " + (cmdline[:200] or Path(f"/proc/{pid}/comm").read_text().strip()))
            except OSError:  # it ended meanwhile
                pass
        return left

    def kill_all(self) -> None:
        """SIGKILL every process still in the group (all were started by this run)."""
        if self.path is None:
            return
        for pid in (self.path / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        for _ in range(50):  # the killed processes leave the group once they are gone
            if not (self.path / "cgroup.procs").read_text().split():
                break
            time.sleep(0.1)
        self.remove()

    def remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError:  # processes are still in it: leave it
            pass


def _own_cgroup_procs() -> Path | None:
    """``cgroup.procs`` of the group this process is in now (to go back to it)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if hierarchy == "0":  # cgroup v2
            root = _cgroup2_root()
            return None if root is None else root / path.lstrip("/") / "cgroup.procs"
        if "cpuacct" in controllers.split(","):
            return Path("/sys/fs/cgroup/cpuacct") / path.lstrip("/") / "cgroup.procs"
    return None


def revision() -> tuple[str, bool]:
    """The short commit of the checkout and whether tracked files differ from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                    text=True, cwd=ROOT, check=True).stdout.strip())
        return head, dirty
    except (OSError, subprocess.CalledProcessError):
        return "unknown", False


def machine() -> dict:
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpu_model": model, "logical_cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version()}


class Benchmark:
    """Measure a benchmark run and write its record to ``out`` (see the module notes)."""

    def __init__(self, name: str, out: str | Path | None, argv: list[str] | None = None):
        self.name, self.out = name, None if out is None else Path(out)
        script = Path(sys.argv[0]).resolve()
        shown = script.relative_to(ROOT) if script.is_relative_to(ROOT) else script.name
        self.command = " ".join(["python", str(shown), *(sys.argv[1:] if argv is None else argv)])
        self.figures: dict[str, Any] = {}
        self.headline: dict[str, Any] = {}
        self._also: list[tuple[Path, str, dict[str, Any], dict[str, Any]]] = []

    def also_write(self, out: str | Path, name: str, figures: dict[str, Any],
                   headline: dict[str, Any] | None = None) -> None:
        """Write one more record on leaving: this run's measurement with ``figures`` under the name ``name`` (a
        benchmark whose one run yields several results, one file each; ``out`` None above writes only these)."""
        self._also.append((Path(out), name, figures, headline or {}))

    def __enter__(self) -> Benchmark:
        self._back = _own_cgroup_procs()
        self._group = CpuGroup(f"raytune-fed-bench-{uuid.uuid4().hex[:8]}")
        if self._group.path is not None:
            self._group.join()
        self._rusage = self._usage_now()
        self._load = LoadSampler().__enter__()
        self._started_utc = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._started = time.monotonic()
        return self

    @staticmethod
    def _usage_now() -> float:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def __exit__(self, exc_type, exc, tb) -> None:
        wall = time.monotonic() - self._started
        self._load.__exit__()
        if self._group.path is not None:
            cpu, source = self._group.cpu_seconds(), self._group.kind
            try:
                if self._back is not None:
                    self._back.write_text(str(os.getpid()))
            except OSError:
                pass
            self._group.remove()
        else:
            cpu, source = self._usage_now() - self._rusage, "getrusage (misses Ray's unreaped workers)"
        head, dirty = revision()
        record = {"schema": SCHEMA, "benchmark": self.name, "command": self.command, "revision": head,
                  "dirty": dirty, "machine": machine(), "started_utc": self._started_utc,
                  "wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2), "cpu_source": source,
                  "load_average": self._load.summary(), "completed": exc_type is None, "figures": self.figures,
                  "headline": self.headline}
        outputs = [] if self.out is None else [(self.out, record)]
        outputs += [(out, {**record, "benchmark": name, "figures": figures, "headline": headline})
                    for out, name, figures, headline in self._also]
        for out, body in outputs:
            out.parent.mkdir(parents=True, exist_ok=True)
            partial = out.with_name(out.name + ".partial")
            partial.write_text(json.dumps(body, indent=1, default=_plain) + "\n")
            partial.replace(out)


def figures_of(record: dict[str, Any]) -> dict[str, Any]:
    """A benchmark's own numbers from what it wrote: the harness record's ``figures``, or a file written before the
    harness (its numbers at the top level)."""
    return record["figures"] if record.get("schema") == SCHEMA else record


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as plain JSON."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON: {type(value).__name__}")
