"""The pieces of the site layer, without Ray: wire format, model records, policy, schedule,
ledger, guard, and a party type of one's own."""

from __future__ import annotations

import json

import numpy as np
import pytest
from attack_kit import stump, with_arrays
from site_targets import X, Y

from raytune_fed.errors import BoundaryViolationError, ConfigError
from raytune_fed.federation import (
    Blob,
    Bytes,
    DifferencingGuard,
    FinalLosses,
    Loss,
    Party,
    Policy,
    Schedule,
    Text,
    Unit,
    _wire,
    check_outgoing,
    load_policy,
    restricted,
)
from raytune_fed.federation._ledger import SiteLedger
from raytune_fed.models import LEARNERS, ModelRecord, RecordError, get_learner, rebuild_model

CONFIGS = {"elastic_net": [{"alpha": 0.5, "lambda": 0.01}, {"alpha": 1.0, "lambda": 0.001}],
           "svm": [{"C": 1.0, "sigma": 0.05}, {"C": 100.0, "sigma": 3.0}],
           "random_forest": [{"num_trees": 100, "min_node_size": 1, "sample_fraction": 0.5},
                             {"num_trees": 150, "min_node_size": 5, "sample_fraction": 1.0}]}


@pytest.mark.parametrize("learner, config", [(n, c) for n, cs in CONFIGS.items() for c in cs])
def test_site_predictions_from_a_record_equal_the_pipelines(learner, config):
    lr = get_learner(learner)
    pipeline = lr.build(config, seed=1).fit(X[:100], Y[:100])
    record = lr.encode(config, pipeline)
    site_model = rebuild_model(record, 12, n_rows=len(X))
    assert np.array_equal(site_model.predict(X), pipeline.predict(X))
    assert all(not a.flags.writeable for a in site_model.arrays.values())


def test_every_learner_declares_a_record():
    assert all(lr.record is not None and lr.record.specs for lr in LEARNERS.values())


@pytest.mark.parametrize("change, message", [
    (lambda r: ModelRecord("lasso", r.config, r.arrays), "record learner must be one of"),
    (lambda r: ModelRecord(r.learner, {"alpha": 0.5}, r.arrays), "hyperparameters must be exactly"),
    (lambda r: ModelRecord(r.learner, {"alpha": 2.0, "lambda": 1.0}, r.arrays), "outside the elastic_net search"),
    (lambda r: ModelRecord(r.learner, {"alpha": True, "lambda": 1.0}, r.arrays), "'alpha' must be a number"),
    (lambda r: with_arrays(r, extra=np.zeros(2)), "arrays must be exactly"),
    (lambda r: with_arrays(r, coef=np.zeros(12, dtype="<f4")), "'coef' must be a 1-d f8 array"),
    (lambda r: with_arrays(r, coef=np.zeros(11)), "dimension 'k' disagrees"),
    (lambda r: with_arrays(r, intercept=np.zeros(2)), "'intercept' must have shape"),
    (lambda r: with_arrays(r, coef=np.full(12, np.inf)), "finite numbers only"),
    (lambda r: with_arrays(r, keep=np.arange(1, 13, dtype="<i8")), r"indices in \[0, 12\)"),
    (lambda r: with_arrays(r, scale=np.zeros(12)), "'scale' must be > 0"),
    (lambda r: with_arrays(r, coef=[0.0] * 12), "'coef' must be a 1-d f8 array"),
])
def test_record_validation_names_the_rule(change, message):
    with pytest.raises(RecordError, match=message):
        rebuild_model(change(stump(0, 0.0)), 12, n_rows=10)


def test_record_size_caps_and_cost_cap():
    svm = ModelRecord("svm", {"C": 1.0, "sigma": 1.0},
                      {"keep": np.arange(12, dtype="<i8"), "mean": np.zeros(12), "scale": np.ones(12),
                       "support_vectors": np.zeros((200_001, 12)), "dual_coef": np.zeros(200_001),
                       "intercept": np.zeros(1)})
    with pytest.raises(RecordError, match="'m'=200001 exceeds the learner's cap 200000"):
        rebuild_model(svm, 12, n_rows=10)
    with pytest.raises(RecordError, match="cost more than"):
        rebuild_model(ModelRecord("svm", svm.config, {**svm.arrays, "support_vectors": np.zeros((150_000, 12)),
                                                      "dual_coef": np.zeros(150_000)}), 12, n_rows=10_000)


def test_wire_round_trip_keeps_types_and_makes_arrays_read_only():
    msg = {"a": [1, 2.5, "x", None, True], "arr": np.arange(6, dtype="<i8").reshape(2, 3), "b": b"\x00\x01",
           "nested": {"f": np.ones(3)}}
    back = _wire.decode(_wire.encode(msg), max_bytes=1 << 20)
    assert back["a"] == [1, 2.5, "x", None, True] and back["b"] == b"\x00\x01"
    assert np.array_equal(back["arr"], msg["arr"]) and not back["arr"].flags.writeable


def _raw(header: bytes, payload: bytes = b"") -> bytes:
    return _wire.MAGIC + len(header).to_bytes(8, "little") + header + payload


@pytest.mark.parametrize("message, text", [
    (b"\x80\x04K\x01.", "bad magic"),
    ("not bytes", "must be bytes"),
    (_raw(b'{"a": NaN}'), "finite"),
    (_raw(b'{"a": 1, "a": 2}'), "repeat a key"),
    (_raw(b'{"a": '), "not valid JSON"),
    (_wire.MAGIC + (10 ** 9).to_bytes(8, "little"), "header length"),
    (_raw(b'{"$a": ["f8", [4], 0, 32]}', b"\x00" * 16), "outside the payload"),
    (_raw(b'{"$a": ["f8", [4], 0, 24]}', b"\x00" * 32), "does not match"),
    (_raw(b'{"$a": ["O", [1], 0, 8]}', b"\x00" * 8), "malformed array"),
    (_raw(b'{"$a": ["f8", [-1], 0, 8]}', b"\x00" * 8), "malformed array"),
    (_raw(b"[" * 100 + b"]" * 100), "deeper than"),
    (_raw(b'{"$a": ["f8", [1000000000000000000000000000000, 0], 0, 0]}'), "does not match"),  # 0 bytes, no array
])
def test_malformed_wire_messages_are_refused_without_quoting_them(message, text):
    with pytest.raises(_wire.WireError, match=text) as info:
        _wire.decode(message, max_bytes=1 << 20)
    assert "NaN" not in str(info.value).replace("(no NaN", "")


@pytest.mark.parametrize("value, text", [(np.zeros(2, dtype=object), "dtype"), ({1: 2}, "keys must be strings"),
                                         (float("inf"), "finite"), (object(), "cannot carry")])
def test_the_wire_carries_only_data(value, text):
    with pytest.raises(_wire.WireError, match=text):
        _wire.encode({"x": value})


def test_policy_files_toml_and_json(tmp_path):
    toml = tmp_path / "site.toml"
    toml.write_text('name = "s1"\nseed = 3\nledger = "l/site.jsonl"\n[curator]\nquery_budget = 7\n'
                    'mechanisms = ["exact", "thresholdout"]\n[guard]\nk = 2\n')
    p = load_policy(toml)
    assert (p.curator.query_budget, p.guard.k, p.curator.mechanisms) == (7, 2, ("exact", "thresholdout"))
    assert p.ledger == str(tmp_path / "l" / "site.jsonl")
    js = tmp_path / "site.json"
    js.write_text(json.dumps({"name": "s1", "seed": 3}))
    assert load_policy(js) == Policy(name="s1", seed=3)


@pytest.mark.parametrize("data, message", [
    ({"seed": 1}, "policy must set 'name'"),
    ({"name": "s", "seed": 1, "budgets": 5}, r"unknown settings \['budgets'\]"),
    ({"name": "s", "seed": 1, "budget": 5}, r"policy \[budget\] must be a table, got 5"),
    ({"name": "s", "seed": 1, "budget": {"answers": -1}}, r"\[budget\] answers must be an integer >= 0"),
    ({"name": "s", "seed": 1, "budget": {"queries": 3}}, r"\[budget\] has unknown settings \['queries'\]"),
    ({"name": "s", "seed": 1, "analysts": {"a": {"token": "x"}}}, r"\[analysts.a\] has unknown settings"),
    ({"name": "s", "seed": 1, "analysts": {"a": {"answers": 1.5}}}, r"\[analysts.a\] answers must be an integer"),
    ({"name": "s", "seed": 1, "analysts": ["a"]}, r"\[analysts\] must be a table of analyst credentials"),
    ({"name": "s", "seed": 1, "schedule": {"approved": "abc"}}, r"\[schedule\] approved must be a schedule's SHA"),
    ({"name": "s", "seed": 1, "limits": {"max_header_bytes": 1 << 30}}, r"max_header_bytes must be at most"),
    ({"name": "s", "seed": 1, "log": 3}, r"policy log must be a file path, got 3"),
    ({"name": "s", "seed": 1, "curator": {"budget": 5}}, r"\[curator\] has unknown settings \['budget'\]"),
    ({"name": "s", "seed": -1}, "seed must be an integer >= 0, got -1"),
    ({"name": "s", "seed": 1, "roles": ["openbox"]}, "roles must be a non-empty subset"),
    ({"name": "s", "seed": 1, "curator": {"inbag_fraction": 1.0}}, "inbag_fraction must be below 1"),
    ({"name": "s", "seed": 1, "curator": {"query_budget": 1.5}}, "query_budget must be an integer"),
    ({"name": "s", "seed": 1, "curator": {"mechanisms": ["laplace"]}}, "mechanisms must be a non-empty subset"),
    ({"name": "s", "seed": 1, "final": {"max_models": 1000}}, "max_models must be at most 256"),
    ({"name": "s", "seed": 1, "guard": {"k": -1}}, r"\[guard\] k must be an integer >= 0"),
    ({"name": "s", "seed": 1, "limits": {"seconds_per_query": 0}}, r"seconds_per_query must be a number in \(0"),
])
def test_bad_policies(data, message):
    with pytest.raises(ConfigError, match=message):
        Policy.from_mapping(data)


def test_policy_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="policy file not found"):
        load_policy(tmp_path / "nope.toml")
    bad = tmp_path / "p.yaml"
    bad.write_text("name: s")
    with pytest.raises(ConfigError, match=r"must end in .toml or .json"):
        load_policy(bad)
    broken = tmp_path / "p.toml"
    broken.write_text("name = ")
    with pytest.raises(ConfigError, match="cannot be parsed"):
        load_policy(broken)


@pytest.mark.parametrize("make, message", [
    (lambda: Unit("a", "a", ("b",), 0), "distinct"),
    (lambda: Unit("a", "b", (), 0), "non-empty tuple"),
    (lambda: Unit("a", "b", ("c",), -1), "replication must be an int"),
    (lambda: Schedule(()), "non-empty tuple"),
    (lambda: Schedule.of([Unit("a", "b", ("c",), 0)] * 2), "lists a unit twice"),
])
def test_bad_units_and_schedules(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_guard_known_answers():
    guard = DifferencingGuard(10, 2)
    rows = np.ones(10, dtype=bool)
    a = np.array([1, 1, 1, 0, 0, 0, 0, 0, 1, 0], dtype=np.int8)
    assert guard.allows(a, rows)
    guard.add(a, rows)
    assert not guard.allows(a, rows)                               # a repeat: 0 rows apart
    assert not guard.allows(np.r_[a[:9], 1].astype(np.int8), rows)  # 1 row apart
    assert guard.allows(np.r_[a[:8], 0, 1].astype(np.int8), rows)   # 2 rows apart
    assert not guard.allows(np.r_[1, np.zeros(9)].astype(np.int8), rows)  # one row in class 1
    half = np.zeros(10, dtype=bool)
    half[:5] = True
    assert guard.allows(a, half)  # the same model on rows 0-4: the 5 rows only the first was scored on
    assert not DifferencingGuard(10, 3).allows(a, half)  # ... but 2 of them in class 0 < k = 3
    assert DifferencingGuard(10, 0).allows(np.zeros(10, dtype=np.int8), rows)


def test_ledger_reloads_and_detects_edits(tmp_path):
    path = tmp_path / "ledger.jsonl"
    ledger = SiteLedger(path)
    ledger.append("a", x=1)
    ledger.append("b", x=2)
    ledger.close()
    reloaded = SiteLedger(path)
    assert [e["x"] for e in reloaded.entries] == [1, 2]
    reloaded.close()
    with open(path, "ab") as f:
        f.write(b'{"seq":2,"time":1')  # a crash mid-write of the ledger's own next line
    reloaded = SiteLedger(path)
    assert len(reloaded.entries) == 2 and path.read_bytes().endswith(b"\n")
    reloaded.close()
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0].replace('"x":1', '"x":5'), lines[1]]) + "\n")
    with pytest.raises(ConfigError, match="line 2 breaks the hash chain"):
        SiteLedger(path)


@pytest.mark.parametrize("build, message", [
    (lambda: Loss(1.5, 10), "Loss.value"),
    (lambda: Loss(np.array([0.1]), 10), "must be a float"),
    (lambda: FinalLosses([0.1], 5), "tuple"),
    (lambda: FinalLosses(tuple(np.zeros(300)), 5), "1..256"),
    (lambda: Blob(b"abc", 4), "Blob.size must equal"),
    (lambda: Blob(bytearray(b"abc"), 3), "Blob.data must be bytes"),
    (lambda: check_outgoing(np.zeros(3)), "may only answer"),
    (lambda: check_outgoing({"X": [1.0]}), "may only answer"),
])
def test_records_check_themselves(build, message):
    with pytest.raises(BoundaryViolationError, match=message):
        build()


class Echo(Party):
    """A party type of one's own: one restricted method taking and returning ciphertext bytes."""

    def __init__(self):
        super().__init__("echo", ledger=None, owner_secret=None, max_request_bytes=1 << 20)
        token, self.session = self._issue("passive", "study-1")
        self.token = token

    @restricted(request={"ciphertext": Bytes(max_size=8), "note": Text(max_len=5, optional=True)}, answers=Blob)
    def reverse(self, session, ciphertext, note):
        return Blob(ciphertext[::-1], len(ciphertext)), {"n_bytes": len(ciphertext)}


def _call(party, method, **args):
    reply = _wire.decode(party.call(_wire.encode({"method": method, "args": args})), max_bytes=1 << 20)
    return reply.get("answer", reply.get("refused"))


def test_a_new_party_type_declares_its_restricted_methods():
    party = Echo()
    assert set(Echo.PROTOCOL) == {"reverse", "close_session"}
    assert _call(party, "reverse", session=party.token, ciphertext=b"abc") == {
        "type": "Blob", "fields": {"data": b"cba", "size": 3, "kind": "ciphertext"}}
    assert _call(party, "reverse", session=party.token, ciphertext=b"too long!")["code"] == "malformed"
    assert _call(party, "reverse", session=party.token, ciphertext="abc")["code"] == "malformed"
    assert _call(party, "reverse", session="x" * 43, ciphertext=b"abc")["code"] == "session"
    assert _call(party, "__init__", session=party.token)["code"] == "unknown_method"
    assert _call(party, "_issue", role="passive", unit="u")["code"] == "unknown_method"
    events = [(e["event"], e.get("code"), e.get("count")) for e in party._ledger.entries]
    assert events == [("session", None, None), ("reverse", None, None), ("uncharged", "malformed", 1),
                      ("uncharged", "malformed", 2), ("uncharged", "session", 1),
                      ("uncharged", "unknown_method", 1), ("uncharged", "unknown_method", 2)]


def test_the_rfms_schedule_lists_every_role_assignment_and_replication():
    from raytune_fed.federation import rfms_schedule
    from raytune_fed.simulation import role_assignments

    names = [f"s{i}" for i in range(5)]
    schedule = rfms_schedule(names, role_assignments(5), reps=2)
    assert len(schedule.units) == 5 * 4 * 2
    mine = schedule.for_site("s0")
    roles = [u.role_of("s0") for u in mine.values()]
    assert roles.count("lockbox") == 4 * 2 and roles.count("curator") == 12 * 2  # openbox units are not its
    assert schedule.digest == rfms_schedule(names, role_assignments(5), reps=2).digest


class Faulty(Echo):
    """A party whose handler fails in a way nobody planned for."""

    def _charge(self, spec, session):
        return spec.name == "reverse"

    @restricted(request={"ciphertext": Bytes(max_size=8)}, answers=Blob)
    def reverse(self, session, ciphertext):
        return 1 / 0


def test_an_unplanned_exception_is_a_fixed_charged_refusal_with_a_ledger_line(caplog):
    party = Faulty()
    reply = party.call(_wire.encode({"method": "reverse", "args": {"session": party.token, "ciphertext": b"a"}}))
    assert _wire.decode(reply, max_bytes=1 << 20) == {
        "refused": {"code": "internal", "message": "the site could not answer this request"}}
    last = party._ledger.entries[-1]
    assert (last["event"], last["code"], last["charged"], last["error"]) == ("refused", "internal", 1,
                                                                            "ZeroDivisionError")
    assert "ZeroDivisionError" in caplog.text  # the traceback goes to the party's own log, not the caller


def test_the_session_is_checked_before_any_array_is_decoded():
    """A request with no valid session is refused as such even when its arrays are broken: they
    were never decoded (and cost nothing)."""
    party = Echo()
    header = b'{"method":"reverse","args":{"session":"' + b"x" * 43 + b'","ciphertext":{"$b":[0,99]}}}'
    reply = _wire.decode(party.call(_raw(header)), max_bytes=1 << 20)
    assert reply["refused"]["code"] == "session"
    header = header.replace(b"x" * 43, party.token.encode())
    assert _wire.decode(party.call(_raw(header)), max_bytes=1 << 20)["refused"]["code"] == "malformed"


def test_the_service_log_is_rotated(tmp_path):
    import logging

    from raytune_fed.serve._service import LOG_BACKUPS, LOG_BYTES, log_to

    log = logging.getLogger("raytune_fed.federation")
    level, propagate = log.level, log.propagate
    handler = log_to(tmp_path / "site.log")
    try:
        for _ in range(3 * LOG_BYTES // 1000):
            log.info("x" * 1000)
    finally:
        log.removeHandler(handler)
        handler.close()
        log.setLevel(level)
        log.propagate = propagate
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["site.log"] + [f"site.log.{i}" for i in range(1, min(LOG_BACKUPS, 3) + 1)]
    assert all((tmp_path / f).stat().st_size <= LOG_BYTES for f in files)
