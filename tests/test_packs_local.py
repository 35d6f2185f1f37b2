"""One short real run of every pack on this machine (LocalTarget), through the
same runner the CLI uses; the records must validate.

Each test skips, naming the Debian package, when its tool is missing;
`make test` installs them (see docs/packs.md for the list).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from schedlab import packrun as runner
from schedlab import packs, store
from schedlab.packs.base import PackOutputError
from schedlab.targets import LocalTarget

KERNEL_TARBALL = "/usr/src/linux-source-6.1.tar.xz"
PG_BIN = "/usr/lib/postgresql/15/bin"


def need(*tools, debs):
    missing = [t for t in tools if not (shutil.which(t) or os.path.exists(t))]
    if missing:
        pytest.skip(f"{', '.join(missing)} missing: install Debian package(s) {' '.join(debs)}")


class TrackingTarget(LocalTarget):
    """LocalTarget that remembers its scratch directories (to check they are removed)."""

    def __init__(self):
        super().__init__()
        self.made = []

    def tmpdir(self):
        d = super().tmpdir()
        self.made.append(d)
        return d


def run(pack, params, tmp_path, reps=1, warmup=0, target=None):
    target = target or TrackingTarget()
    with open(os.devnull, "w") as log:
        paths = runner.run_pack(pack, params, target, reps=reps, warmup=warmup, out_dir=tmp_path, seed=3, log=log)
    assert store.verify(tmp_path) == {}
    assert all(not os.path.exists(d) for d in target.made), "scratch directory left behind"
    recs = [json.loads(Path(p).read_text()) for p in paths]
    assert all(r["status"] == "ok" and r["study"] == f"pack-{pack}" and r["testbed"] == "local" for r in recs)
    return recs


def test_sysbench_memory(tmp_path):
    need("sysbench", debs=["sysbench"])
    recs = run("sysbench_memory", {"threads": "1,2", "time": "1"}, tmp_path)
    assert sorted(r["point"]["threads"] for r in recs) == [1, 2]
    assert all(r["metrics"]["mib_per_s"] > 100 for r in recs)


def test_sysbench_threads(tmp_path):
    need("sysbench", debs=["sysbench"])
    (rec,) = run("sysbench_threads", {"threads": "2", "time": "1"}, tmp_path)
    assert rec["metrics"]["events_per_s"] > 0 and rec["metrics"]["latency_avg_ms"] >= 0


def test_pbzip2(tmp_path):
    need("pbzip2", debs=["pbzip2"])
    recs = run("pbzip2", {"threads": "1,2", "size_mb": "4"}, tmp_path)
    assert all(0 < r["metrics"]["elapsed_s"] < 120 for r in recs)
    prepared = recs[0]["provenance"]["testbed"]["pack"]["prepared"]
    # the input is a function of (size, seed) only
    from schedlab.packs.pbzip2 import write_input

    assert write_input(str(tmp_path / "again"), 4 << 20, 3) == prepared["input_sha256"]


def test_forkexec(tmp_path):
    need("cc", debs=["gcc", "libc6-dev"])
    (rec,) = run("forkexec", {"iterations": "200"}, tmp_path)
    m = rec["metrics"]
    assert 0 < m["min_us"] <= m["median_us"] <= m["p95_us"]


def test_forkexec_on_a_target_without_cc(tmp_path):
    need("cc", debs=["gcc", "libc6-dev"])

    class NoCC(TrackingTarget):
        def run(self, argv, timeout=60, input=None, check=True):
            if argv[:2] == ["sh", "-c"] and argv[2] == "command -v cc":
                return subprocess.CompletedProcess(argv, 1, "", "")
            assert argv[0] != "cc", "the target has no compiler"
            return super().run(argv, timeout=timeout, input=input, check=check)

    (rec,) = run("forkexec", {"iterations": "100"}, tmp_path, target=NoCC())
    assert rec["provenance"]["testbed"]["pack"]["prepared"]["build"] == "static, built on the controller"


def _postgres_running_in(dirs):
    ps = subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if not line.startswith("Z") and any(d in line for d in dirs)]


def test_pgbench(tmp_path):
    need("pgbench", f"{PG_BIN}/initdb", debs=["postgresql-15", "postgresql-client-15"])
    target = TrackingTarget()
    recs = run("pgbench", {"scale": "1", "duration": "2", "clients": "1,2"}, tmp_path, target=target)
    assert sorted(r["point_id"] for r in recs) == ["clients-1", "clients-2"]
    assert all(r["metrics"]["tps"] > 10 for r in recs)
    assert not _postgres_running_in(target.made)


def test_pgbench_stops_the_server_on_bad_output(tmp_path):
    need("pgbench", f"{PG_BIN}/initdb", debs=["postgresql-15", "postgresql-client-15"])

    class Garbled(TrackingTarget):
        def run(self, argv, timeout=60, input=None, check=True):
            res = super().run(argv, timeout=timeout, input=input, check=check)
            if "pgbench" in argv and "-T" in argv:
                self.server_seen = _postgres_running_in(self.made)
                return subprocess.CompletedProcess(argv, 0, "pgbench: fatal: out of cheese\n", "")
            return res

    target = Garbled()
    with pytest.raises(PackOutputError) as e:
        with open(os.devnull, "w") as log:
            runner.run_pack(
                "pgbench",
                {"scale": "1", "duration": "1", "clients": "1"},
                target,
                reps=1,
                warmup=0,
                out_dir=tmp_path,
                seed=1,
                log=log,
            )
    assert "out of cheese" in e.value.offending_text
    assert target.server_seen, "the server was running during the run"
    assert not _postgres_running_in(target.made), "server left running"
    assert not any(os.path.exists(d) for d in target.made)
    assert not list(tmp_path.rglob("*.json"))


def test_kernbench(tmp_path):
    need("make", "cc", "flex", "bison", "bc", "xz", KERNEL_TARBALL, debs=packs.get("kernbench").debs)
    from schedlab.packs.kernbench import TEST_EXTRACT

    (rec,) = run("kernbench", {"jobs": "2", "make_target": "scripts_basic", "extract": TEST_EXTRACT}, tmp_path)
    assert rec["metrics"]["elapsed_s"] > 0
    assert len(rec["provenance"]["testbed"]["pack"]["prepared"]["config_sha256"]) == 64
