"""Raw records: written atomically and once, checked on every read."""

import json
import re

import pytest
from conftest import schedlab

from schedlab import store


def record(key="a" * 64, **over):
    """A valid record; its run_id is derived as schedlab.run derives it, unless given."""
    rec = {
        "format": store.FORMAT,
        "run_key": key,
        "study": "s1",
        "testbed": "sim",
        "variant": "v",
        "point": {"p": 1},
        "point_id": "p-1",
        "repetition": 0,
        "warmup": False,
        "seed": 1,
        "status": "ok",
        "metrics": {"x": 1.5},
        "started": "2026-01-01T00:00:00+00:00",
        "finished": "2026-01-01T00:00:01+00:00",
        "run_order": {"index": 0, "plan_size": 1, "plan_seed": 1},
        "definition_hash": "b" * 64,
        "provenance": {"repo_commit": "c", "schedlab_version": "0", "testbed": {}, "build_id": "d", "host": {}},
    }
    rec.update(over)
    rec.setdefault("run_id", f"{rec['variant']}_{rec['point_id']}_r{rec['repetition']:02d}_{key[:10]}")
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
    tampered = store.write_record(raw, record(key="e" * 64, repetition=1))
    rec = json.loads(tampered.read_text())
    rec["metrics"]["x"] = 99.0
    tampered.write_text(json.dumps(rec))
    dup = store.write_record(raw, record(repetition=2))  # same run key as `good`
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


@pytest.mark.parametrize(
    "field, over",
    [
        ("metrics.x", {"metrics": {"x": float("nan")}}),
        ("metrics.y", {"metrics": {"x": 1.0, "y": float("inf")}}),
        ("point.p", {"point": {"p": float("-inf")}}),
        ("samples.x.1", {"samples": {"x": [1.0, float("nan")]}}),
    ],
)
def test_non_finite_values_are_refused(tmp_path, field, over):
    with pytest.raises(store.RecordError, match=rf"field {re.escape(field)}: .*not a finite number"):
        store.write_record(tmp_path, record(**over))
    assert not list(tmp_path.iterdir())


def written_by_hand(folder, rec):
    """A record as an older or foreign writer might have left it (checksum right, json.dumps defaults)."""
    rec = dict(rec, checksum=store.checksum(rec))
    path = folder / f"{rec['run_id']}.json"
    path.write_text(json.dumps(rec))
    return path


def test_verify_flags_non_finite_and_empty_metrics(tmp_path):
    raw = tmp_path / "raw" / "sim" / "s1"
    raw.mkdir(parents=True)
    nan = written_by_hand(raw, record(metrics={"x": float("nan")}))
    inf = written_by_hand(raw, record(key="c" * 64, metrics={"x": 1e999}))
    empty = written_by_hand(raw, record(key="d" * 64, metrics={}))
    problems = store.verify(tmp_path)
    assert set(problems) == {str(nan), str(inf), str(empty)}
    assert any("field metrics.x" in p and "not a finite number" in p for p in problems[str(nan)])
    assert any("field metrics.x" in p and "not a finite number" in p for p in problems[str(inf)])
    assert any("field metrics" in p for p in problems[str(empty)])


def test_verify_checks_where_a_record_lives_and_its_run_id(tmp_path):
    raw = tmp_path / "raw"
    good = store.write_record(raw / "sim" / "s1", record())
    failed = store.write_record(
        raw / "sim" / "s1",
        record(run_id=record()["run_id"] + ".failed2", status="failed", attempt=2, metrics={}, error="boom"),
    )
    elsewhere = store.write_record(raw / "qemu" / "s1", record(key="c" * 64))
    other_study = store.write_record(raw / "sim" / "s2", record(key="d" * 64))
    made_up = store.write_record(raw / "sim" / "s1", record(key="e" * 64, run_id="v_p-1_r00_zzz"))
    wrong_rep = store.write_record(raw / "sim" / "s1", record(key="f" * 64, run_id="v_p-1_r03_ffffffffff"))
    bare_failed = store.write_record(raw / "sim" / "s1", record(key="1" * 64, status="failed", metrics={}))
    wrong_attempt = store.write_record(
        raw / "sim" / "s1",
        record(
            key="2" * 64, run_id=record(key="2" * 64)["run_id"] + ".failed1", status="failed", attempt=3, metrics={}
        ),
    )
    problems = store.verify(tmp_path)
    assert str(good) not in problems and str(failed) not in problems
    assert set(problems) == {str(p) for p in (elsewhere, other_study, made_up, wrong_rep, bare_failed, wrong_attempt)}
    one = lambda p: " | ".join(problems[str(p)])
    assert "field testbed" in one(elsewhere) and "raw/qemu/s1" in one(elsewhere)
    assert "field study" in one(other_study) and "raw/sim/s2" in one(other_study)
    for p in (made_up, wrong_rep, bare_failed, wrong_attempt):
        assert "field run_id" in one(p)
    assert all("\n" not in x for ps in problems.values() for x in ps)


def test_dataset_refuses_two_records_of_one_run(tmp_path):
    from schedlab import config
    from schedlab.run import dataset

    raw = store.raw_dir(tmp_path, "sim", "s1")
    a = store.write_record(raw, record())
    b = store.write_record(raw, record(repetition=1))  # same run key
    with pytest.raises(store.RecordError) as e:
        dataset(config.load_study("s1"), "sim", tmp_path, 1, tmp_path / "m.json")
    msg = str(e.value)
    assert str(a) in msg and str(b) in msg and "run key" in msg and "\n" not in msg
