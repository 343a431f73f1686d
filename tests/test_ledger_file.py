"""A site's or party's ledger file is read and checked before it is used, and never changed by reading it.

Old: the loader cut a last line without a newline off the file before checking anything (a
text file lost its last line; a one-line file was emptied and the party started from scratch
on it), checked only the hash chain (a correctly chained line charging -100 answers refilled
a spent budget at restart), and created the ledger and its head with mode 0644.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat

import numpy as np
import pytest
from attack_kit import balls
from site_life_attacks import spend
from site_targets import OWNER, SCHEDULE, SITE, UNIT, X, Y, policy

from raytune_fed.cli import main
from raytune_fed.errors import BudgetExhaustedError, ConfigError
from raytune_fed.federation import Policy, Site, SiteClient
from raytune_fed.federation._ledger import SiteLedger


def _site(tmp_path):
    return Site(X, Y, Policy.from_mapping(policy(tmp_path, budget={"answers": 10})), owner_secret=OWNER)


def _spent_ledger(tmp_path):
    """A real site's ledger after its whole budget of 10 answers was spent in one curator session."""
    site = _site(tmp_path)
    client = SiteClient(site, name=SITE)
    client.declare_schedule(SCHEDULE)
    assert spend(client.open_session(UNIT, "curator"), X, seed=1) == 10
    site.stop()
    return tmp_path / "ledger.jsonl"


def _append_chained(path, change):
    """The attacker: the ledger's last query line, changed by ``change``, appended as the next line with
    its sequence number and the SHA-256 of the line before - the chain computed as the ledger does."""
    lines = path.read_bytes().splitlines()
    entry = json.loads(next(line for line in reversed(lines) if b'"event":"query"' in line))
    entry.update(seq=len(lines), prev=hashlib.sha256(lines[-1]).hexdigest(), request=None)
    change(entry)
    with open(path, "ab") as f:
        f.write(json.dumps(entry, separators=(",", ":")).encode() + b"\n")
    return len(lines) + 1


def _refused_unchanged(path, make, *fragments):
    before, head = path.read_bytes(), path.with_name(path.name + ".head")
    had_head = head.read_bytes() if head.exists() else None
    with pytest.raises(ConfigError) as info:
        make()
    message = str(info.value)
    assert os.fspath(path) in message and all(f in message for f in fragments), message
    assert path.read_bytes() == before  # byte for byte
    assert (head.read_bytes() if head.exists() else None) == had_head
    return message


@pytest.mark.parametrize("charged, rule", [
    (-100, "must be an integer in [1, 1]"),
    (0, "must be an integer in [1, 1]"),
    (5, "must be an integer in [1, 1]"),
    (1.0, "must be an integer in [1, 1]"),
    ("1", "must be an integer in [1, 1]"),
    (False, "got false"),
    (None, "must be an integer in [1, 1]"),
])
def test_a_chained_line_with_a_forged_charge_stops_the_restart_and_refills_nothing(tmp_path, charged, rule):
    ledger = _spent_ledger(tmp_path)
    number = _append_chained(ledger, lambda e: e.update(charged=charged))
    _refused_unchanged(ledger, lambda: _site(tmp_path), f"line {number}: field 'charged'", rule)
    # the unforged ledger still starts, with the budget spent
    ledger.write_bytes(b"".join(line + b"\n" for line in ledger.read_bytes().splitlines()[:-1]))
    client = SiteClient(_site(tmp_path), name=SITE)
    client.declare_schedule(SCHEDULE)
    with pytest.raises(BudgetExhaustedError):
        client.open_session(UNIT, "curator").query(balls(X[:40]))


@pytest.mark.parametrize("change, fragments", [
    (lambda e: e.update(event="refused", method="query", code="guard", charged=-1),
     ("field 'charged'", "got -1")),
    (lambda e: e.update(event="final_evaluation", charged=-3, fingerprints=["f"], answers=[0.1], preds=[e["pred"]],
                        unit="u", role="curator"), ("field 'charged'", "number of models evaluated (1)")),
    (lambda e: e.update(session="ab" * 32), ("field 'session'", "names no session the ledger opened before")),
    (lambda e: e.update(event="session", role="curator", unit="u"), ("field 'session'", "a second time")),
    (lambda e: e.update(event="close_session", charged=0, closed="cd" * 32), ("field 'closed'",)),
    (lambda e: e.update(answer=-0.5), ("field 'answer'", "-0.5")),
    (lambda e: e.update(pred=e["pred"][:-2]), ("field 'pred'", "as many bits as 'rows'")),
    (lambda e: e.update(th=[0.5, 0.4, -2]), ("field 'th'[2]",)),
    (lambda e: e.update(time=float("nan")), ("not a ledger line as the ledger writes it",)),
    (lambda e: e.update(mechanism="laplace"), ("field 'mechanism'", "laplace")),
    (lambda e: e.pop("time"), ("field 'time' is missing",)),
    (lambda e: e.update(seq=e["seq"] + 1), ("breaks the hash chain",)),
])
def test_every_field_of_every_line_is_checked_at_start(tmp_path, change, fragments):
    ledger = _spent_ledger(tmp_path)
    number = _append_chained(ledger, change)
    _refused_unchanged(ledger, lambda: _site(tmp_path), f"line {number}", *fragments)


def test_a_request_number_charged_twice_in_a_session_is_refused(tmp_path):
    ledger = _spent_ledger(tmp_path)
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    number = next(e["request"] for e in lines if e["event"] == "query" and e.get("request") is not None)
    n = _append_chained(ledger, lambda e: e.update(request=number))
    _refused_unchanged(ledger, lambda: _site(tmp_path), f"line {n}: field 'request'", f"request {number}")


def _real_ledger_line(tmp_path):
    ledger = SiteLedger(tmp_path / "real.jsonl")
    ledger.append("a", x=1)
    ledger.close()
    return (tmp_path / "real.jsonl").read_bytes()


@pytest.mark.parametrize("content, fragments", [
    (lambda _: b"line1\nline2", ("line 1 is not JSON",)),
    (lambda _: b"line1\nline2\n", ("line 1 is not JSON",)),
    (lambda t: _real_ledger_line(t)[:40], ("line 1 has no newline", "no head file")),  # a one-line corrupt ledger
    (lambda t: _real_ledger_line(t)[:-1], ("line 1 has no newline", "no head file")),
    (lambda _: b"name,age\nbob,3\n", ("line 1 is not JSON",)),
    (lambda _: b'{"seq": 0, "time": 1.0, "prev": "' + b"0" * 64 + b'", "event": "a"}\n',
     ("line 1 is not a ledger line as the ledger writes it",)),
    (lambda _: b"\x89PNG\r\n\x1a\n\x00\x00", ("line 1 is not JSON",)),
    (lambda _: b"[1, 2, 3]", ("line 1 has no newline",)),
])
def test_a_file_that_is_not_a_ledger_is_refused_and_left_byte_for_byte(tmp_path, content, fragments):
    path = tmp_path / "notes.txt"
    path.write_bytes(content(tmp_path))
    _refused_unchanged(path, lambda: SiteLedger(path), *fragments)
    assert not (tmp_path / "notes.txt.head").exists()


def test_a_torn_tail_is_dropped_only_after_the_ledger_before_it_is_checked(tmp_path):
    path = tmp_path / "ledger.jsonl"
    ledger = SiteLedger(path)
    for i in range(3):
        ledger.append("a", x=i)
    ledger.close()
    good, head = path.read_bytes(), path.with_name("ledger.jsonl.head")
    good_head = head.read_bytes()
    # a crash mid-append of the ledger's own next line: dropped, the file cut back to the good lines
    path.write_bytes(good + b'{"seq":3,"time":17')
    reloaded = SiteLedger(path)
    assert [e["x"] for e in reloaded.entries] == [0, 1, 2] and path.read_bytes() == good
    reloaded.append("a", x=3)
    reloaded.close()
    assert [e["x"] for e in SiteLedger(path).entries] == [0, 1, 2, 3]
    # a tail that is not the ledger's next line, or a torn tail after a damaged line: refused, nothing cut
    for damaged in (good + b'{"seq":9,"time":17', good + b"some text",
                    good.replace(b'"x":1', b'"x":7') + b'{"seq":3,"time":17'):
        path.write_bytes(damaged)
        head.write_bytes(good_head)  # the head vouches for the 3 good lines
        _refused_unchanged(path, lambda: SiteLedger(path), "line")


def test_the_ledger_and_its_head_are_created_for_the_owner_only(tmp_path):
    old = os.umask(0o022)
    try:
        ledger = SiteLedger(tmp_path / "ledger.jsonl")
        ledger.append("a", x=1)
        ledger.close()
    finally:
        os.umask(old)
    for name in ("ledger.jsonl", "ledger.jsonl.head"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name


def _one_line_error(capsys, code):
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("raytune-fed: error:") and len(err.strip().splitlines()) == 1, err
    return err


def test_party_serve_refuses_a_file_that_is_not_a_ledger_and_leaves_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.savetxt("p.csv", np.arange(20.0).reshape(10, 2), delimiter=",", header="a,b", comments="")
    (tmp_path / "token").write_text("t" * 20)
    (tmp_path / "owner").write_text("o" * 20)
    for content in (b"line1\nline2", b'{"seq":0,"time":1.5,"prev":"00'):
        (tmp_path / "notes.txt").write_bytes(content)
        code = main(["party", "serve", "--data", "p.csv", "--token-file", "token", "--owner-token-file", "owner",
                     "--port", "0", "--ledger", "notes.txt"])
        assert "ledger 'notes.txt': line 1" in _one_line_error(capsys, code)
        assert (tmp_path / "notes.txt").read_bytes() == content
        assert not (tmp_path / "notes.txt.head").exists()


def test_site_serve_refuses_a_forged_ledger_and_leaves_it(tmp_path, capsys):
    ledger = _spent_ledger(tmp_path)
    number = _append_chained(ledger, lambda e: e.update(charged=-100))
    before = ledger.read_bytes()
    (tmp_path / "policy.json").write_text(json.dumps(policy(tmp_path, budget={"answers": 10})))
    np.savez(tmp_path / "site.npz", X=X, y=Y)
    (tmp_path / "token").write_text("t" * 24)
    code = main(["site", "serve", "--policy", str(tmp_path / "policy.json"), "--data", str(tmp_path / "site.npz"),
                 "--token-file", str(tmp_path / "token"), "--port", "0"])
    err = _one_line_error(capsys, code)
    assert f"line {number}: field 'charged' must be an integer in [1, 1], got -100" in err
    assert ledger.read_bytes() == before
