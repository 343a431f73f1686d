"""The results store: atomic writes, resume, checks of every record, timings never compared."""

import json
import re

import numpy as np
import pytest

from raytune_fed.errors import StoreError
from raytune_fed.store import FORMAT, ResultStore, config_key, rows_checksum

ROWS = [{"hv": 0.5, "method": "a"}, {"hv": float("nan"), "method": "b"}]


def test_key_is_stable_and_order_free():
    assert config_key({"a": 1, "b": [1, 2]}) == config_key({"b": [1, 2], "a": 1})
    assert config_key({"a": 1, "b": (1, 2)}) == config_key({"a": 1, "b": [1, 2]})
    assert config_key({"a": 1}) != config_key({"a": 2})


def test_put_once_then_resume_skips_and_never_duplicates(tmp_path):
    store = ResultStore(tmp_path)
    configs = [{"unit": i} for i in range(4)]
    for c in configs[:2]:
        store.put(c, [{"hv": c["unit"] / 10, "method": "a"}, {"hv": 0.0, "method": "b"}])
    again = ResultStore(tmp_path)  # a "rerun": a new store object on the same directory sees what is done
    assert [c for c in configs if not again.has(c)] == configs[2:]
    for c in configs:  # writing everything again: done units are no-ops
        again.put(c, [{"hv": c["unit"] / 10, "method": "a"}, {"hv": 0.0, "method": "b"}])
    assert len(again) == 4 and sorted(p.name for p in again.units.iterdir()) == sorted(
        f"{config_key(c)}.json" for c in configs)  # no temporary files left behind
    record = again.load(config_key(configs[3]))
    assert record.config == configs[3] and record.rows == [{"hv": 0.3, "method": "a"}, {"hv": 0.0, "method": "b"}]


def test_identical_rows_with_other_timings_are_the_same_result(tmp_path):
    """Two drivers on one store compute the same cell: their timings differ, their rows do not."""
    store = ResultStore(tmp_path)
    key = store.put({"unit": 1}, ROWS, [{"seconds": 1.0}, {"seconds": 2.0}])
    store.put({"unit": 1}, ROWS, [{"seconds": 7.5}, {"seconds": 0.1}])  # NaN equals NaN, timings ignored
    assert store.load(key).timing == [{"seconds": 1.0}, {"seconds": 2.0}]  # the first write stays
    with pytest.raises(StoreError, match="already stored with different rows"):
        store.put({"unit": 1}, [{"hv": 0.4, "method": "a"}, ROWS[1]])


def _record(store, key):
    return json.loads(store.path(key).read_text())


def _rewrite(store, key, change):
    record = _record(store, key)
    change(record)
    store.path(key).write_text(json.dumps(record))


def _foreign(store, key):
    other = store.put({"unit": 99}, [{"hv": 0.9, "method": "a"}])
    store.path(key).write_bytes(store.path(other).read_bytes())


def _edited(record):
    record["rows"][0]["hv"] = 0.75


def _emptied(record):
    record["rows"] = []


DAMAGE = [
    ("random bytes", lambda s, k: s.path(k).write_bytes(np.random.default_rng(0).bytes(64)), "not readable JSON"),
    ("truncated", lambda s, k: s.path(k).write_bytes(s.path(k).read_bytes()[:40]), "not readable JSON"),
    ("a JSON list", lambda s, k: s.path(k).write_text("[1, 2, 3]"), "holds a JSON list, not a unit record"),
    ("a missing key", lambda s, k: _rewrite(s, k, lambda r: r.pop("rows")), r"lacks the field\(s\) \['rows'\]"),
    ("another cell's record", _foreign, "holds the record of another cell"),
    ("an edited configuration", lambda s, k: _rewrite(s, k, lambda r: r["config"].update(unit=2)),
     "configuration does not hash to its file name"),
    ("an emptied rows list", lambda s, k: _rewrite(s, k, _emptied), r"holds 0 row\(s\) where its header says 2"),
    ("an edited value", lambda s, k: _rewrite(s, k, _edited), "rows do not match their checksum"),
    ("an older format", lambda s, k: _rewrite(s, k, lambda r: r.update(format=1)),
     f"in format 1; this version reads format {FORMAT}"),
]


@pytest.mark.parametrize("what, damage, reason", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_damaged_unit_file_is_named_with_its_reason(tmp_path, what, damage, reason):
    store = ResultStore(tmp_path)
    key = store.put({"unit": 1}, ROWS, [{"seconds": 1.0}, {"seconds": 2.0}])
    damage(store, key)
    state = store.inspect(key)
    assert state.state == "damaged" and state.path == store.path(key)
    assert re.search(reason, state.reason)
    assert not store.has({"unit": 1})
    with pytest.raises(StoreError, match=f"unit file .*{key}.json is damaged: .*--recompute-damaged"):
        store.load(key)
    # computing the cell again moves the damaged file aside and stores the good record
    store.put({"unit": 1}, ROWS)
    assert store.inspect(key).state == "done" and store.load(key).rows[0] == ROWS[0]
    assert [p.name.split(".")[0] for p in store.quarantine_dir.iterdir()] == [key]


def test_checksum_covers_every_value():
    assert rows_checksum(ROWS) == rows_checksum([dict(r) for r in ROWS])
    assert rows_checksum(ROWS) != rows_checksum([{**ROWS[0], "hv": 0.5000001}, ROWS[1]])


def test_failures_are_kept_until_the_cell_succeeds(tmp_path):
    store = ResultStore(tmp_path)
    key = config_key({"unit": 3})
    path = store.record_failure({"unit": 3}, label="unit 3", kind="failed", error_type="ValueError",
                                message="boom")
    assert store.failed_keys() == {key}
    entry = json.loads(path.read_text())
    assert (entry["error_type"], entry["message"], entry["label"]) == ("ValueError", "boom", "unit 3")
    store.clear_failure(key)
    assert store.failed_keys() == set()


def test_an_output_place_that_cannot_be_written_is_refused_up_front(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(StoreError, match="is an existing file, not a directory"):
        ResultStore(a_file)
    with pytest.raises(StoreError, match="cannot write results under .*file/sub"):
        ResultStore(a_file / "sub")


def test_a_cell_must_have_rows(tmp_path):
    with pytest.raises(StoreError, match="at least one row"):
        ResultStore(tmp_path).put({"unit": 1}, [])
