"""``raytune-fed party serve``: the passive party as its own process, and its one-line errors."""

from __future__ import annotations

import secrets
import sys

import numpy as np
import pandas as pd
import pytest
from site_targets import launch
from sklearn.datasets import make_classification

from raytune_fed.cli import main
from raytune_fed.errors import QueryRefusedError
from raytune_fed.federation import _wire
from raytune_fed.federation.parties import PassiveClient
from raytune_fed.models.secureboost import SecureBoostClassifier
from raytune_fed.serve import HttpTransport

OWNER = "party-owner-" + "o" * 20
PARAMS = dict(n_federated_trees=3, max_depth=3, purity_threshold=1.0, learning_rate=0.3)


def _data():
    X, y = make_classification(n_samples=300, n_features=8, n_informative=6, n_redundant=0, random_state=4)
    return X, y


def _serve(tmp_path, extra=()):
    token = secrets.token_urlsafe(24)
    (tmp_path / "token").write_text(token + "\n")
    (tmp_path / "owner").write_text(OWNER + "\n")
    url_file = tmp_path / "url"
    cmd = [sys.executable, "-m", "raytune_fed.cli", "party", "serve", "--data", str(tmp_path / "passive.csv"),
           "--token-file", str(tmp_path / "token"), "--owner-token-file", str(tmp_path / "owner"),
           "--ledger", str(tmp_path / "ledger.jsonl"), "--port", "0", "--url-file", str(url_file), *extra]
    proc, url = launch(cmd, url_file)
    return proc, url, token


@pytest.mark.process
def test_a_served_passive_party_trains_like_the_object_and_keeps_its_view_for_the_owner(tmp_path):
    X, y = _data()
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(8)])
    frame.assign(noise=0.0).to_csv(tmp_path / "passive.csv", index=False)
    proc, url, token = _serve(tmp_path, ["--columns", "f4,f5,f6,f7", "--name", "bank"])
    try:
        assert url.startswith("http://")
        rows = np.arange(len(y))
        client = PassiveClient.admit(HttpTransport(url, token), owner=OWNER, unit="t1")
        wired = SecureBoostClassifier(**PARAMS, he="plain").fit(X[:, :4], y, passive=[client], rows=rows)
        # the served defaults: 32 bins at most, every bin moved once by the geometric mechanism (epsilon 1), the
        # seed and the moves drawn from the owner credential
        from raytune_fed.federation.parties._passive_party import privacy_seed, seed_of_owner
        from raytune_fed.models.secureboost import PassiveWorker

        worker = PassiveWorker(X[:, 4:], max_bins=32, bin_privacy=1.0,
                               privacy_seed=privacy_seed(seed_of_owner(OWNER), OWNER))
        direct = SecureBoostClassifier(**PARAMS, he="plain").fit(X[:, :4], y, passive=[worker], rows=rows)
        assert len(wired.trees_) == len(direct.trees_)
        for s, t in zip(wired.trees_, direct.trees_):
            assert np.array_equal(s.owner, t.owner) and np.array_equal(s.value, t.value)
        assert any((t.owner > 0).any() for t in wired.trees_)  # the served party won splits
        # the active party's token cannot read the view; the owner can, and sees the trees it was shown
        with pytest.raises(QueryRefusedError, match="owner"):
            client.view(owner="guess-" + "g" * 20)
        view = client.view(owner=OWNER)
        assert [t.tree for t in view.trees] == [t.index for t in wired.trees_ if t.federated]
        # a pickled message is never loaded; a closed session's token is refused when replayed
        transport = HttpTransport(url, token)
        import pickle

        (reply,) = transport.collect([transport.submit(pickle.dumps({"method": "info", "args": {}}))])
        assert _wire.decode(reply, max_bytes=1 << 20)["refused"]["code"] == "malformed"
        client.close()
        with pytest.raises(QueryRefusedError, match="no open session has this token"):
            client.info()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
    ledger = (tmp_path / "ledger.jsonl").read_text()
    assert token not in ledger and OWNER not in ledger and client.session not in ledger


def _write(d, name, text):
    (d / name).write_text(text)


@pytest.mark.parametrize("setup, extra, message", [
    (lambda d: None, [], "cannot read the token file"),
    (lambda d: _write(d, "token", "short"), [], "must hold one token of at least 16 characters"),
    (lambda d: _write(d, "token", "t" * 20), [], "cannot read the owner token file"),
    (lambda d: (_write(d, "token", "t" * 20), _write(d, "owner", "t" * 20)), [],
     "the owner's credential must differ from the active party's token"),
    (lambda d: (_write(d, "token", "t" * 20), _write(d, "owner", "o" * 20)), [], "file not found"),
    (lambda d: (_write(d, "token", "t" * 20), _write(d, "owner", "o" * 20), _write(d, "p.csv", "a,b\n1,x\n2,y\n")),
     [], "feature columns must be numeric; not numeric: ['b']"),
    (lambda d: (_write(d, "token", "t" * 20), _write(d, "owner", "o" * 20), _write(d, "p.csv", "a,b\n1,2\n3,\n")),
     [], "1 missing or infinite values (first: row 1, column 'b')"),
    (lambda d: (_write(d, "token", "t" * 20), _write(d, "owner", "o" * 20), _write(d, "p.csv", "a,b\n1,2\n3,4\n")),
     ["--columns", "a,zz"], "unknown ['zz']"),
    (lambda d: (_write(d, "token", "t" * 20), _write(d, "owner", "o" * 20), _write(d, "p.csv", "a,b\n1,2\n")),
     [], "a feature block needs >= 2 rows and >= 1 column, got 1 x 2"),
    (lambda d: (_write(d, "token", "t" * 20), _write(d, "owner", "o" * 20), _write(d, "p.csv", "a,b\n1,2\n3,4\n")),
     ["--max-sessions", "0"], "--max-sessions must be an integer in [1, 1000000000], got 0"),
    (lambda d: (_write(d, "token", "t" * 20), _write(d, "owner", "o" * 20), _write(d, "p.csv", "a,b\n1,2\n3,4\n")),
     ["--seed", "-3"], "--seed must be an integer in [0, 18446744073709551615], got -3"),
    (lambda d: (_write(d, "token", "t" * 20), _write(d, "owner", "o" * 20), _write(d, "p.csv", "a,b\n1,2\n3,4\n")),
     ["--max-bins", "512"], "--max-bins must be an integer in [2, 256], got 512"),
    (lambda d: (_write(d, "token", "t" * 20), _write(d, "owner", "o" * 20), _write(d, "p.csv", "a,b\n1,2\n3,4\n")),
     ["--bin-privacy", "-1"], "--bin-privacy must be a finite number >= 0.0, got -1.0"),
    (lambda d: (_write(d, "token", "t" * 20), _write(d, "owner", "o" * 20), _write(d, "p.csv", "a,b\n1,2\n3,4\n")),
     ["--cert", "c.pem"], "give both a certificate and its key"),
])
def test_party_serve_errors_are_one_line_with_exit_code_2(tmp_path, capsys, monkeypatch, setup, extra, message):
    monkeypatch.chdir(tmp_path)
    setup(tmp_path)
    code = main(["party", "serve", "--data", "p.csv", "--token-file", "token", "--owner-token-file", "owner",
                 "--port", "0", *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("raytune-fed: error:") and message in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("arrays, message", [
    ({"Y": np.zeros((3, 2))}, "cannot read arrays X from"),
    ({"X": np.zeros(5)}, "X must be a numeric 2-D array with >= 2 rows and >= 1 column, got float64 of shape (5,)"),
    ({"X": np.array([["a", "b"], ["c", "d"]])}, "X must be a numeric 2-D array"),
    ({"X": np.array([[1.0, np.nan], [2.0, 3.0]])}, "X holds 1 missing or infinite values"),
])
def test_party_serve_refuses_a_bad_npz_with_one_line(tmp_path, capsys, arrays, message):
    np.savez(tmp_path / "p.npz", **arrays)
    (tmp_path / "token").write_text("t" * 20)
    (tmp_path / "owner").write_text("o" * 20)
    code = main(["party", "serve", "--data", str(tmp_path / "p.npz"), "--token-file", str(tmp_path / "token"),
                 "--owner-token-file", str(tmp_path / "owner"), "--port", "0"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_an_object_array_in_an_npz_is_not_unpickled(tmp_path, capsys):
    np.savez(tmp_path / "p.npz", X=np.array([{"a": 1}, None], dtype=object))
    (tmp_path / "token").write_text("t" * 20)
    (tmp_path / "owner").write_text("o" * 20)
    code = main(["party", "serve", "--data", str(tmp_path / "p.npz"), "--token-file", str(tmp_path / "token"),
                 "--owner-token-file", str(tmp_path / "owner"), "--port", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot read arrays X from" in err and "pickle" in err.lower(), err
