"""``raytune-fed site serve`` and the clients that reach it: TLS, tokens, errors, site lists."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from attack_kit import stump
from site_targets import SCHEDULE, UNIT, X, Y, make_target, policy, start_service, tls  # noqa: F401

from raytune_fed.cli import main
from raytune_fed.errors import ConfigError, QueryRefusedError
from raytune_fed.federation import SiteSession
from raytune_fed.serve import load_site_directory, service_client


@pytest.mark.process
def test_plain_http_when_no_certificate_is_given(tmp_path):
    proc, url, token = start_service(tmp_path, policy(tmp_path), None)
    try:
        assert url.startswith("http://")
        client = service_client(url, token=token)
        client.declare_schedule(SCHEDULE)
        assert client.open_session(UNIT, "curator").query(stump(0, 0.0)).n_rows == 128
        with pytest.raises(QueryRefusedError, match="HTTP 401"):
            service_client(url, token="wrong-token-0123456789").declare_schedule(SCHEDULE)
    finally:
        proc.terminate()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.process
def test_tls_is_verified_against_the_sites_certificate(make_target):
    t = make_target("service")
    url = t.client._transport.url
    assert url.startswith("https://")
    with pytest.raises(QueryRefusedError, match="unreachable"):  # the system's CAs do not know a self-signed cert
        service_client(url, token=t.client._transport._token).declare_schedule(SCHEDULE)
    plain = url.replace("https://", "http://")
    with pytest.raises(QueryRefusedError):
        service_client(plain, token=t.client._transport._token).declare_schedule(SCHEDULE)


@pytest.mark.process
def test_a_site_list_gives_clients_by_name(make_target, tmp_path):
    t = make_target("service")
    (tmp_path / "tok").write_text(t.client._transport._token + "\n")
    sites = tmp_path / "sites.toml"
    sites.write_text(f'[sites.s1]\nurl = "{t.client._transport.url}"\ntoken_file = "tok"\n'
                     f'cafile = "{t.client._transport.cafile}"\n')
    clients = load_site_directory(sites)
    assert list(clients) == ["s1"] and clients["s1"].kind == "service"
    assert clients["s1"].declare_schedule(SCHEDULE).n_units == 2


@pytest.mark.parametrize("text, message", [
    ("[sites]\n", "must have a \\[sites.<name>\\] table"),
    ('[sites.a]\nurl = "https://h:1"\n', r"sites.a lacks \[.token_file.\] \(url and token_file are required"),
    ('[sites.a]\nurl = "ftp://h:1"\ntoken_file = "tok"\n', "a site URL must be http"),
    ('[sites.a]\nurl = "https://h:1"\ntoken_file = "missing"\n', "cannot read the token file"),
])
def test_bad_site_lists(tmp_path, text, message):
    (tmp_path / "tok").write_text("t" * 20)
    path = tmp_path / "sites.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_site_directory(path)


@pytest.mark.parametrize("setup, message", [
    (lambda d: None, "policy file not found"),
    (lambda d: (d / "policy.json").write_text(json.dumps({"name": "s1", "seed": 1})), "cannot read the token file"),
    (lambda d: ((d / "policy.json").write_text(json.dumps({"name": "s1", "seed": 1})),
                (d / "token").write_text("short")), "must hold one token of at least 16 characters"),
    (lambda d: ((d / "policy.json").write_text(json.dumps({"name": "s1", "seed": 1})),
                (d / "token").write_text("t" * 20)), "cannot read arrays X and y"),
])
def test_site_serve_errors_are_one_line_with_exit_code_2(tmp_path, capsys, setup, message):
    setup(tmp_path)
    code = main(["site", "serve", "--policy", str(tmp_path / "policy.json"), "--data", str(tmp_path / "d.npz"),
                 "--token-file", str(tmp_path / "token"), "--port", "0"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("raytune-fed: error:") and message in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.process
def test_site_serve_refuses_a_certificate_without_its_key(tmp_path, tls):
    np.savez(tmp_path / "d.npz", X=X, y=Y)
    (tmp_path / "policy.json").write_text(json.dumps({"name": "s1", "seed": 1}))
    (tmp_path / "token").write_text("t" * 20)
    proc = subprocess.run([sys.executable, "-m", "raytune_fed.cli", "site", "serve", "--policy",
                           str(tmp_path / "policy.json"), "--data", str(tmp_path / "d.npz"), "--token-file",
                           str(tmp_path / "token"), "--port", "0", "--cert", str(tls[0])],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "give both a certificate and its key" in proc.stderr


def _simulated_answers(tmp_path, deployment):
    from raytune_fed.federation import Schedule, Unit
    from raytune_fed.serve import start_sites

    halves = {"a": (X[:80], Y[:80]), "b": (X[80:], Y[80:])}
    template = {"curator": {"query_budget": 5}, "guard": {"k": 2}}
    schedule = Schedule.of([Unit("o", "a", ("b",), 0)])
    with start_sites(halves, template=template, seed=3, workdir=tmp_path / deployment, deployment=deployment) as sites:
        assert {c.kind for c in sites.clients.values()} == {deployment}
        for client in sites.clients.values():
            client.declare_schedule(schedule)
        cur = sites.clients["b"].open_session(schedule.units[0], "curator")
        lb = sites.clients["a"].open_session(schedule.units[0], "lockbox")
        answers = (cur.query(stump(0, 0.0)).value, lb.final_evaluation([stump(1, 0.0)]).values[0],
                   cur.status().budget_left)
        sites.clients["b"].close_session(cur.token, owner=sites.owner_secret)
        with pytest.raises(QueryRefusedError, match="no open session"):
            cur.status()
    return answers


@pytest.mark.parametrize("deployment", [pytest.param("actor", marks=pytest.mark.ray),
                                        pytest.param("service", marks=pytest.mark.process)])
def test_simulated_sites_answer_alike_in_every_deployment(request, tmp_path, deployment):
    """The grid's seed, not the deployment, decides every site's answers."""
    if deployment == "actor":
        request.getfixturevalue("ray_session")
    assert _simulated_answers(tmp_path, deployment) == _simulated_answers(tmp_path, "local")


def test_a_policy_template_cannot_name_the_site(tmp_path):
    from raytune_fed.federation import start_sites

    with pytest.raises(ConfigError, match="sets neither name, seed nor ledger"):
        start_sites({"a": (X, Y)}, template={"seed": 1}, seed=0, workdir=tmp_path)
    with pytest.raises(ConfigError, match="unknown site deployment 'cloud'"):
        start_sites({"a": (X, Y)}, template={}, seed=0, workdir=tmp_path, deployment="cloud")


@pytest.mark.process
def test_a_service_session_travels_to_another_process(make_target):
    """Experiment units run in Ray workers: the analyst's session must pickle (no open sockets)."""
    import pickle

    t = make_target("service")
    cur = t.curator()
    cur.status()  # opens this thread's connection
    copy = pickle.loads(pickle.dumps(cur))
    assert copy.query(stump(0, 0.0)).n_rows == 128 and cur.status().n_queries == 1


@pytest.mark.process
def test_a_stopped_service_says_what_it_kept_and_the_same_command_serves_on(tmp_path):
    """SIGTERM (143) and Ctrl-C (130) end ``site serve`` with one line naming the site, its address and its
    ledger; the same command serves on from that ledger: a session opened before the stop still answers."""
    import signal

    data = policy(tmp_path)
    proc, url, token = start_service(tmp_path, data, None)
    client = service_client(url, token=token)
    client.declare_schedule(SCHEDULE)
    session = client.open_session(UNIT, "curator")
    assert session.query(stump(0, 0.0)).n_rows == 128
    for sig, code, how in ((signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted")):
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == code, stderr
        assert stderr.strip().splitlines() == [
            f"raytune-fed: {how}; site 's1' stopped serving on {url}; its ledger {data['ledger']} keeps every "
            f"session and answer, and the same command serves on from them"], stderr
        proc, url, token = start_service(tmp_path, data, None)  # the same command (a new port: --port 0)
        session = SiteSession(service_client(url, token=token), session.ticket)
        assert session.status().n_queries == 1
    assert session.query(stump(1, 0.0)).n_rows == 128 and session.status().n_queries == 2
    proc.terminate()
    proc.communicate(timeout=60)
