"""Raw records under faults: concurrent writers, killed writers, a full disk, the
umask, and a run resumed after failures in an earlier process."""

import errno
import fcntl
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from test_store import record

from schedlab import config, store
from schedlab.core.testbed import RunFailed
from schedlab.run import PointRunner
from schedlab.testbeds.sim import SimTestbed

# A writer process: writes the records in the JSON file RECS, optionally sweeping the
# folder before each one; its fsync sleeps (a slow disk) and touches MARKER first.
WRITER = r"""
import json, os, sys, time
from pathlib import Path
from schedlab import store
folder, recs, marker = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
delay, sweep = float(sys.argv[4]), sys.argv[5] == "1"
real_fsync = os.fsync
def slow_fsync(fd):
    marker.touch()
    time.sleep(delay)
    real_fsync(fd)
os.fsync = slow_fsync
for rec in json.loads(recs.read_text()):
    if sweep:
        store.sweep_partial(folder)
    store.write_record(folder, rec)
"""


def key(*parts) -> str:
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()


def writer(folder, recs, marker, delay, sweep=False):
    todo = marker.with_name(marker.name + ".recs.json")
    todo.write_text(json.dumps(recs))
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder), str(todo), str(marker), str(delay), "1" if sweep else "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path, timeout=60):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.01)


@pytest.mark.parametrize("pid_visible", [True, False])
def test_sweep_spares_a_live_writer(tmp_path, monkeypatch, pid_visible):
    """pid_visible=False: the writer runs on another host or in another pid namespace,
    so only its lock tells that it is alive."""
    folder = tmp_path / "raw" / "sim" / "s1"
    folder.mkdir(parents=True)
    marker = tmp_path / "in-fsync"
    slow = writer(folder, [record(key=key("slow"))], marker, delay=2.0)
    wait_for(marker)
    assert list(folder.glob(".tmp-*")), "the slow writer's temporary file should be there"
    if not pid_visible:
        monkeypatch.setattr(store, "_writer_alive", lambda name: False, raising=False)
    store.sweep_partial(folder)  # what a second PointRunner does when it starts
    store.write_record(folder, record(key=key("fast"), repetition=1))
    _, err = slow.communicate(timeout=60)
    assert slow.returncode == 0, err
    assert len(list(folder.glob("*.json"))) == 2 and not list(folder.glob(".tmp-*"))
    assert store.verify(tmp_path) == {}


def test_two_writers_sweeping_lose_no_run(tmp_path):
    folder = tmp_path / "raw" / "sim" / "s1"
    folder.mkdir(parents=True)
    procs = [
        writer(
            folder,
            [record(key=key(w, i), repetition=i) for i in range(40)],
            tmp_path / f"marker{w}",
            delay=0.005,
            sweep=True,
        )
        for w in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert len(list(folder.glob("*.json"))) == 80 and not list(folder.glob(".tmp-*"))
    assert store.verify(tmp_path) == {}


def test_sweep_removes_only_what_gone_writers_left(tmp_path):
    folder = tmp_path / "raw" / "sim" / "s1"
    folder.mkdir(parents=True)
    marker = tmp_path / "in-fsync"
    killed = writer(folder, [record()], marker, delay=600)
    wait_for(marker)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    left = list(folder.glob(".tmp-*"))
    assert len(left) == 1
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = store._host()
    unlocked_old = folder / ".tmp-k2j4h5g6"  # an earlier version's name
    locked_old = folder / ".tmp-x8c7v6b5"
    dead_here = folder / f".tmp-{host}-{dead.pid}-abcd1234"
    live_here = folder / f".tmp-{host}-{os.getpid()}-abcd1234"  # created, not yet locked
    for p in (unlocked_old, locked_old, dead_here, live_here):
        p.write_text("partial")
    with open(locked_old) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        store.sweep_partial(folder)
        assert sorted(folder.glob(".tmp-*")) == sorted([locked_old, live_here])
    store.sweep_partial(folder)
    assert list(folder.glob(".tmp-*")) == [live_here]


def test_writer_starts_again_if_swept_before_its_lock(tmp_path, monkeypatch):
    """A sweeper that cannot see the writer's process may remove its file between
    creation and lock; the writer then makes a new one instead of losing the run."""
    real_flock = fcntl.flock
    swept = []

    def flock_after_a_sweep(fd, op):
        if not swept:
            swept.append(os.readlink(f"/proc/self/fd/{fd}"))
            os.unlink(swept[0])
        return real_flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock_after_a_sweep)
    path = store.write_record(tmp_path, record())
    assert swept and store.check_record(path, json.loads(path.read_text())) == []
    assert list(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize("call", ["write", "fsync", "link"])
def test_disk_full_leaves_nothing_and_says_so(tmp_path, monkeypatch, call):
    def full(*args, **kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, call, full)
    with pytest.raises(store.RecordError) as e:
        store.write_record(tmp_path, record())
    monkeypatch.undo()
    msg = str(e.value)
    assert "no space left on device" in msg and str(tmp_path / f"{record()['run_id']}.json") in msg
    assert "\n" not in msg
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_record_honours_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = store.write_record(tmp_path, record())
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == mode


class FlakySim(SimTestbed):
    """The sim testbed on a host whose first `failures` runs fail."""

    def __init__(self, failures):
        super().__init__()
        self.failures = failures

    def run_once(self, *args):
        if self.failures:
            self.failures -= 1
            raise RunFailed("host dropped the connection", log="ssh: connection reset")
        return super().run_once(*args)


def test_resume_after_failures_continues_attempt_numbers(sim_binary, tmp_path):
    study = config.load_study("s1")
    point, variant = {"mode": "alone"}, "fixed"

    def runner(failures):
        r = PointRunner(
            study, "sim", variant, point, tmp_path, 1, runs=1, testbed=FlakySim(failures), log=io.StringIO()
        )
        r.settings["retries"] = 2
        return r

    with pytest.raises(RunFailed, match="failed 3 times"):
        runner(99).run_rep(1)  # an earlier process: three failures
    folder = store.raw_dir(tmp_path, "sim", "s1")
    assert sorted(p.name.split(".", 1)[1] for p in folder.glob("*.json")) == [
        "failed1.json",
        "failed2.json",
        "failed3.json",
    ]
    rec = runner(1).run_rep(1)  # this one: one failure, then a run
    assert rec["status"] == "ok" and rec["attempt"] == 5
    failed4 = folder / f"{rec['run_id']}.failed4.json"
    assert json.loads(failed4.read_text())["attempt"] == 4
    assert len(list(folder.glob("*.json"))) == 5
    assert store.verify(tmp_path) == {}
