"""One restricted site, three deployments: in-process, Ray actor, network service.

``target`` is a fixture parametrised over the three; each gives the analyst a
:class:`SiteClient` and nothing else of the site (the owner's credential and ledger path
stay on the :class:`Target` for tests that play the owner).  The service runs in its own
process, started with ``raytune-fed site serve`` over TLS with a self-signed certificate
(:func:`raytune_fed.serve.self_signed_certificate`).
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.datasets import make_classification

from raytune_fed.federation import Policy, Schedule, Site, SiteClient, Unit, remote_site
from raytune_fed.serve import service_client

X, Y = make_classification(n_samples=160, n_features=12, n_informative=5, random_state=3)
SITE = "s1"
UNIT = Unit("s0", "s2", (SITE,), 0)          # s1 is a curator here
LOCKBOX_UNIT = Unit("s0", SITE, ("s2",), 0)  # and the lockbox here
SCHEDULE = Schedule.of([UNIT, LOCKBOX_UNIT])
OWNER = "owner-" + "x" * 24


def policy(tmp_path: Path, *, bare: bool = False, **sections: Any) -> dict[str, Any]:
    """The tests' site policy: query budget 40, guard k = 5, Thresholdout offered, 30 s per query
    (``bare``: only name, seed and ledger, every other key at the package's default)."""
    data: dict[str, Any] = {"name": SITE, "seed": 11, "ledger": str(tmp_path / "ledger.jsonl")}
    if not bare:
        data.update({"curator": {"query_budget": 40, "mechanisms": ["exact", "thresholdout"]},
                     "guard": {"k": 5}, "limits": {"seconds_per_query": 30.0}})
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return data


@dataclass
class Target:
    kind: str
    client: SiteClient
    ledger: Path
    restart: Callable[[], SiteClient] | None = None
    cleanup: list[Callable[[], None]] = field(default_factory=list)

    def curator(self) -> Any:
        self.client.declare_schedule(SCHEDULE)
        return self.client.open_session(UNIT, "curator")

    def lockbox(self) -> Any:
        self.client.declare_schedule(SCHEDULE)
        return self.client.open_session(LOCKBOX_UNIT, "lockbox")


def _local(tmp_path: Path, data: dict[str, Any]) -> Target:
    running: list[Site] = []

    def start() -> SiteClient:
        """A new Site object on the same policy and ledger, after the running one stops (a restart)."""
        for site in running:
            stop(site)
        running[:] = [Site(X, Y, Policy.from_mapping(data), owner_secret=OWNER)]
        return SiteClient(running[0])

    target = Target("local", start(), Path(data["ledger"]), restart=start)
    target.cleanup.append(lambda: [stop(site) for site in running])
    return target


def stop(site: Any) -> None:
    """End an in-process site as its process ending would (code before ``Party.stop`` kept nothing to release)."""
    getattr(site, "stop", lambda: None)()


def _actor(tmp_path: Path, data: dict[str, Any], ray: Any) -> Target:
    actor = remote_site(X, Y, Policy.from_mapping(data), owner_secret=OWNER)
    target = Target("actor", SiteClient(actor, name=SITE), Path(data["ledger"]))
    target.actor = actor  # the test playing Ray's failure needs the handle
    target.cleanup.append(lambda: ray.kill(actor))
    return target


def start_service(tmp_path: Path, data: dict[str, Any], certs: tuple[Path, Path] | None, *, port: int = 0,
                  token: str | None = None) -> tuple[Any, str, str]:
    """Start ``raytune-fed site serve`` in its own process; returns (process, url, analyst token)."""
    import json

    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps(data))
    np.savez(tmp_path / "site.npz", X=X, y=Y)
    token = token or secrets.token_urlsafe(24)
    (tmp_path / "token").write_text(token + "\n")
    (tmp_path / "owner").write_text(OWNER + "\n")
    url_file = tmp_path / "url"
    url_file.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "raytune_fed.cli", "site", "serve", "--policy", str(policy_file), "--data",
           str(tmp_path / "site.npz"), "--token-file", str(tmp_path / "token"), "--owner-token-file",
           str(tmp_path / "owner"), "--port", str(port), "--url-file", str(url_file)]
    if certs is not None:
        cmd += ["--cert", str(certs[0]), "--key", str(certs[1])]
    proc, url = launch(cmd, url_file)
    return proc, url, token


def launch(cmd: list[str], url_file: Path) -> tuple[Any, str]:
    """Start a ``serve`` command in its own process; wait for the URL it writes once it listens."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    give_up = time.monotonic() + 300  # set-up only: a service that never starts fails the test, not hangs it
    while not url_file.exists() or not url_file.read_text().strip():
        if proc.poll() is not None or time.monotonic() > give_up:
            proc.kill()
            raise RuntimeError(f"service did not start: {proc.stderr.read()}")
        time.sleep(0.05)
    return proc, url_file.read_text().strip()


def _service(tmp_path: Path, data: dict[str, Any], certs: tuple[Path, Path]) -> Target:
    proc, url, token = start_service(tmp_path, data, certs)
    client = service_client(url, token=token, cafile=certs[0], name=SITE)
    target = Target("service", client, Path(data["ledger"]))
    target.process = proc

    def stop() -> None:
        proc.terminate()
        proc.wait(timeout=30)
        for stream in (proc.stdout, proc.stderr):
            stream.close()

    target.cleanup.append(stop)
    return target


KINDS = [pytest.param("local"), pytest.param("actor", marks=pytest.mark.ray),
         pytest.param("service", marks=pytest.mark.process)]


@pytest.fixture(scope="session")
def tls(tmp_path_factory: Any) -> tuple[Path, Path]:
    from raytune_fed.serve import self_signed_certificate

    return self_signed_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def make_target(request: Any, tmp_path: Path) -> Any:
    """``make_target(kind, bare=False, **policy_sections)`` -> a fresh :class:`Target` (cleaned up after the test)."""
    made: list[Target] = []

    def make(kind: str, bare: bool = False, **sections: Any) -> Target:
        data = policy(tmp_path / f"{kind}{len(made)}", bare=bare, **sections)
        ray = request.getfixturevalue("ray_session") if kind == "actor" else None
        t = build_target(kind, data, ray=ray, tls=request.getfixturevalue("tls") if kind == "service" else None)
        made.append(t)
        return t

    yield make
    for t in made:
        for fn in t.cleanup:
            fn()


def build_target(kind: str, data: dict[str, Any], *, ray: Any = None, tls: tuple[Path, Path] | None = None) -> Target:
    """A site under policy ``data`` (its ledger's directory holds its files) as ``kind``."""
    Path(data["ledger"]).parent.mkdir(parents=True, exist_ok=True)
    if kind == "local":
        return _local(Path(data["ledger"]).parent, data)
    if kind == "actor":
        return _actor(Path(data["ledger"]).parent, data, ray)
    return _service(Path(data["ledger"]).parent, data, tls)


@pytest.fixture(params=KINDS)
def target(request: Any, make_target: Any) -> Target:
    """A fresh site with the default test policy, in each of the three deployments."""
    return make_target(request.param)
