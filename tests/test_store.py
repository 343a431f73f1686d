"""The results store: atomic writes, resume without duplicates or losses."""

import json

import pytest

from raytune_fed.errors import StoreError
from raytune_fed.store import ResultStore, config_key


def test_key_is_stable_and_order_free():
    assert config_key({"a": 1, "b": [1, 2]}) == config_key({"b": [1, 2], "a": 1})
    assert config_key({"a": 1}) != config_key({"a": 2})


def test_put_once_then_resume_skips_and_never_duplicates(tmp_path):
    store = ResultStore(tmp_path)
    configs = [{"unit": i} for i in range(4)]
    for c in configs[:2]:
        store.put(c, [{"hv": c["unit"] / 10, "method": "a"}, {"hv": 0.0, "method": "b"}])
    # a "rerun": a new store object on the same directory sees what is done
    again = ResultStore(tmp_path)
    todo = [c for c in configs if not again.has(c)]
    assert todo == configs[2:]
    for c in configs:  # writing everything again: done units are no-ops
        again.put(c, [{"hv": c["unit"] / 10, "method": "a"}, {"hv": 0.0, "method": "b"}])
    frame = again.frame()
    assert len(frame) == 8 and frame["unit_key"].nunique() == 4
    assert len(again) == 4


def test_conflicting_rewrite_is_an_error(tmp_path):
    store = ResultStore(tmp_path)
    store.put({"unit": 1}, [{"hv": 0.5}])
    with pytest.raises(StoreError, match="already stored with different rows"):
        store.put({"unit": 1}, [{"hv": 0.4}])


def test_no_partial_files_and_corruption_is_detected(tmp_path):
    store = ResultStore(tmp_path)
    key = store.put({"unit": 1}, [{"hv": float("nan")}])
    store.put({"unit": 1}, [{"hv": float("nan")}])  # NaN equals NaN for idempotence
    assert [p.name for p in store.units.iterdir()] == [f"{key}.json"]
    path = store.units / f"{key}.json"
    record = json.loads(path.read_text())
    record["config"] = {"unit": 2}
    path.write_text(json.dumps(record))
    with pytest.raises(StoreError, match="does not match its configuration"):
        store.frame()
    path.write_text("{truncated")
    with pytest.raises(StoreError, match="unreadable"):
        store.frame()
