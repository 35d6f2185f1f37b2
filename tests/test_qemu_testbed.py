"""End-to-end tests of the qemu testbed: boot Xen + dom0 under QEMU, run one short S1
point, one short S0 (lockwork) and S2 (lockstorm) run, and a study run whose QEMU is
killed in the middle of a measurement.

Slow (boot under TCG ~1-2 min, guest starts ~1-3 min; each test that boots: 5-12 min).
Runs only when SCHEDLAB_QEMU_TESTS=1, or when the images are already cached (then no root
is needed); with SCHEDLAB_QEMU_TESTS=1 and no cache it builds them first (root,
debootstrap, network). At most one QEMU runs at a time: each booting test closes the
shared testbed first.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml

from schedlab.builds import images as qi
from schedlab.host import Host

REPO = Path(__file__).resolve().parents[1]
FORCED = os.environ.get("SCHEDLAB_QEMU_TESTS") in ("1", "all")


def needs_qemu(f):
    """Opted in (SCHEDLAB_QEMU_TESTS=1/all), the test runs and builds what it boots; a
    prerequisite that cannot be had here fails it with the reason. Not opted in, it runs
    only when the images are already cached."""
    if FORCED:
        return pytest.mark.qemu(pytest.mark.usefixtures("qemu_prerequisites")(f))
    # =0: none, even where the images are cached (the Makefile's documented meaning)
    f = pytest.mark.skipif(os.environ.get("SCHEDLAB_QEMU_TESTS") == "0", reason="SCHEDLAB_QEMU_TESTS=0")(f)
    f = pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="qemu-system-x86_64 not installed")(f)
    f = pytest.mark.skipif(
        not qi.images_cached(), reason="qemu testbed: set SCHEDLAB_QEMU_TESTS=1 or build the images first"
    )(f)
    return pytest.mark.qemu(f)


@pytest.fixture(scope="session")
def qemu_prerequisites():
    missing = [t for t in ("qemu-system-x86_64", "debootstrap", "mkfs.ext4", "cpio", "ssh") if not shutil.which(t)]
    if missing:
        pytest.fail(
            f"SCHEDLAB_QEMU_TESTS asks for the qemu tests, but {', '.join(missing)} is not installed "
            "(make deps-test installs it as root)",
            pytrace=False,
        )
    if not qi.images_cached() and os.geteuid() != 0:
        pytest.fail(
            "SCHEDLAB_QEMU_TESTS asks for the qemu tests; building their dom0 image needs root "
            "(debootstrap): run as root once, or build it with `python -m schedlab.builds.images`",
            pytrace=False,
        )


def needs_qemu_all(f):
    """The long qemu tests (S0, S2, killing QEMU; ~25 min on 2 cores): only with
    SCHEDLAB_QEMU_TESTS=all, so `make test` stays within its budget with the S1 one."""
    f = pytest.mark.skipif(
        os.environ.get("SCHEDLAB_QEMU_TESTS") != "all", reason="long qemu test: set SCHEDLAB_QEMU_TESTS=all"
    )(f)
    return needs_qemu(pytest.mark.slow(f))


@pytest.fixture(scope="module")
def s1():
    return yaml.safe_load((REPO / "config/studies/s1.yaml").read_text())


@pytest.fixture(scope="module")
def testbed():
    from schedlab.testbeds.qemu import QemuTestbed

    tb = QemuTestbed(build=FORCED, duration_s=3, reuse_vm=True)
    yield tb
    tb.close()


def test_host_argv_quoting():
    """Fast, always runs: remote commands are argument lists quoted with shlex.join."""
    h = Host("127.0.0.1", port=2222, known_hosts="/tmp/kh", host_key_alias="x")
    argv = h.ssh_argv(["sh", "-c", "echo $HOME; rm -rf /", "a b"])
    assert argv[0] == "ssh" and "StrictHostKeyChecking=yes" in argv and "BatchMode=yes" in argv
    assert argv[-1] == "sh -c 'echo $HOME; rm -rf /' 'a b'"
    with pytest.raises(TypeError):
        h.run("echo hi")


def test_numa_argv():
    """Fast, always runs: QEMU's -numa arguments for S4's emulated 2-node host."""
    from schedlab.core.testbed import RunFailed
    from schedlab.machine import numa_argv

    assert numa_argv(1, 2, 2048) == []
    assert numa_argv(2, 2, 3072) == [
        "-object",
        "memory-backend-ram,id=mem0,size=1536M",
        "-numa",
        "node,nodeid=0,cpus=0,memdev=mem0",
        "-object",
        "memory-backend-ram,id=mem1,size=1536M",
        "-numa",
        "node,nodeid=1,cpus=1,memdev=mem1",
    ]
    assert "node,nodeid=1,cpus=2-3,memdev=mem1" in numa_argv(2, 4, 4096)
    with pytest.raises(RunFailed, match="must divide"):
        numa_argv(2, 3, 2048)


@needs_qemu
def test_s1_corun_end_to_end(testbed, s1):
    """Boot, check what booted (credit1), run S1 'corun' once: both metrics come back."""
    desc = testbed.describe()
    assert desc["xen_debian"]["package"] == "xen-hypervisor-4.17-amd64"
    r = testbed.run_once(s1, "fixed", {"mode": "corun"}, seed=1)
    assert r.counters["booted"]["xen_scheduler"] == "credit"
    assert float(r.counters["booted"]["cpu_mhz"]) > 0  # Xen's calibrated TSC rate
    assert "booted" not in testbed.describe()  # per run, not per process (a study boots several builds)
    assert r.metrics["throughput_mbps"] > 0
    assert r.metrics["latency_us"] > 0
    assert r.counters["xen_scheduler"] == "credit"
    assert "cpu" in r.counters["domains"] and "io" in r.counters["domains"]
    # the study's time mode and Xen's own trace are in the record, with dom0's CPU time
    assert r.counters["qemu"]["icount_shift"] == s1["testbeds"]["qemu"]["options"].get("icount_shift")
    # exactly what QEMU ran, without this machine's paths
    argv = r.counters["qemu"]["argv"]
    assert "qemu-system-x86_64" in argv and "-icount" in argv and "tcg,thread=single" in argv
    assert not any(str(qi.cache_root()) in a or "/tmp/" in a for a in argv)
    assert r.counters["dom0_cpu_seconds"] > 0
    if s1["testbeds"]["qemu"]["options"].get("sched_trace"):
        ev = r.counters["sched_events"]
        assert ev["lost_records"] == 0 and ev["by_vm"]["io"]["wake"] > 0
        # dom0 (netback, the client) ran in intervals the trace measured
        assert ev["dom0"]["runs"] > 0 and sum(ev["dom0"]["run_ticks_log2"].values()) == ev["dom0"]["runs"]


@needs_qemu
def test_cached_xen_builds_identify_themselves(testbed):
    """Every Xen in the qemu cache (after the S1 test: Debian's and our source build) yields
    the version and build-id `xl info` will show, which the lab driver checks at boot."""
    from schedlab.builds import lab as lb

    testbed.images()
    found = sorted(qi.cache_root().glob("xen*/*/xen"))
    assert {json.loads((x.parent / "meta.json").read_text())["source"] for x in found} >= {"debian-package"}
    for xen in found:
        meta = json.loads((xen.parent / "meta.json").read_text())
        ident = lb.xen_identity(xen.read_bytes(), meta["version"])
        assert ident["xen_version"].startswith("4.17.") and len(ident["build_id"]) == 40, xen
        if meta.get("source") == "debian-source":
            assert "-schedlab-" in ident["xen_version"], (xen, ident)


@needs_qemu
def test_unbuilt_patch_series_fails_cleanly(testbed, s1, tmp_path, monkeypatch):
    """A testbed that may not build says which series is missing and how to build it. The
    series is a copy of boost-bug with a unique trailer, so no cache ever holds it."""
    import uuid

    from schedlab.core.testbed import RunFailed
    from schedlab.testbeds.qemu import QemuTestbed

    series = tmp_path / "patches" / "probe"
    series.mkdir(parents=True)
    for p in sorted((qi.PATCH_DIR / "boost-bug").glob("*.patch")):
        (series / p.name).write_text(p.read_text() + f"-- \nprobe {uuid.uuid4()}\n")
    monkeypatch.setattr(qi, "PATCH_DIR", series.parent)
    study = copy.deepcopy(s1)
    study["variants"]["bug"]["xen"]["patches"] = "probe"
    testbed.images()  # built (once) by the opted-in fixture testbed
    tb = QemuTestbed(build=False, duration_s=3)
    with pytest.raises(RunFailed, match="'probe' not built"):
        tb.run_once(study, "bug", {"mode": "alone"}, seed=1)
    assert tb.build_id(study, "bug") != tb.build_id(study, "fixed")
    tb.close()


def _tiny_s2(runs: int = 2) -> dict:
    """S2 cut down to one variant, one point, `runs` runs, no warm-up, short measurements."""
    from schedlab import config

    study = copy.deepcopy(config.load_study("s2"))
    study["variants"] = {"pv": study["variants"]["pv"]}
    study["baseline"] = "pv"
    study["testbeds"]["qemu"] = {
        "axes": {"overcommit": [1]},
        "runs": runs,
        "warmup": 0,
        "retries": 2,
        "options": {"storm_duration_s": 6, "lock_vms_booted": 1},
    }
    return study


@needs_qemu_all
def test_s2_lockstorm_end_to_end(testbed):
    """S2 virtualised, overcommit 2, both variants in one boot each: the guests report the
    spinlock kind the boot option asks for, and both metrics come back."""
    from schedlab import config
    from schedlab.testbeds.qemu import QemuTestbed

    testbed.close()  # one QEMU at a time
    s2 = copy.deepcopy(config.load_study("s2"))
    s2["testbeds"]["qemu"]["options"]["storm_duration_s"] = 4
    tb = QemuTestbed(build=FORCED)
    try:
        for variant, pv in (("ticket", 0), ("pv", 1)):
            r = tb.run_once(s2, variant, {"overcommit": 2}, seed=1)
            assert r.metrics["ops_per_s"] > 0 and r.metrics["wait_p99_us"] > 0
            assert set(r.counters["per_vm"]) == {"lock1", "lock2"}
            assert all(v["pvspin"] == pv and v["flavour"] == "kernel" for v in r.counters["per_vm"].values())
            assert r.counters["cpu_seconds"]["lock1"] > 0
            if s2["testbeds"]["qemu"]["options"].get("sched_trace"):
                ev = r.counters["sched_events"]
                assert set(ev["by_vm"]) == {"lock1", "lock2"} and ev["dom0"]["runs"] > 0
    finally:
        tb.close()


@needs_qemu_all
def test_s0_lockwork_end_to_end(testbed):
    """S0 virtualised, variant yield (stock Xen, our source build as s0.yaml says), 2 VMs
    of the 3 booted, one small fixed build each."""
    from schedlab import config
    from schedlab.testbeds.qemu import QemuTestbed

    testbed.close()
    s0 = copy.deepcopy(config.load_study("s0"))
    s0["testbeds"]["qemu"]["options"]["lock_ops"] = 2000
    tb = QemuTestbed(build=FORCED)
    try:
        r = tb.run_once(s0, "yield", {"vms": 2}, seed=1)
        assert len(r.samples["time_s"]) == 2 and all(t > 0 for t in r.samples["time_s"])
        assert r.metrics["throughput"] == pytest.approx(sum(100000 / t for t in r.samples["time_s"]), rel=1e-3)
        assert set(r.counters["per_vm"]) == {"lock1", "lock2"} and r.counters["vms_booted"] == 3
        assert all(v["ops"] == 2000 and v["flavour"] == "spin-yield" for v in r.counters["per_vm"].values())
        assert r.counters["xen"]["patches"] == "stock" and r.counters["xen"]["source"] == "debian-source"
    finally:
        tb.close()


@needs_qemu_all
def test_s3_bursts_and_xentrace_end_to_end(testbed):
    """S3 on Debian's Xen with a migration delay of 1000 us set at run time (xl sched-credit):
    2 VMs of CPU bursts and sleeps, xentrace in dom0; the guests' vCPUs show up in the trace
    with run time on the pCPUs."""
    from schedlab import config
    from schedlab.testbeds.qemu import QemuTestbed

    testbed.close()
    s3 = copy.deepcopy(config.load_study("s3"))
    s3["testbeds"]["qemu"]["options"] = {"burst_duration_s": 4}
    tb = QemuTestbed(build=FORCED)
    try:
        r = tb.run_once(s3, "d1000", {"vms": 2}, seed=1)
        assert "vcpu_migration_delay" not in r.counters["booted"]["xen_commandline"]
        assert r.counters["sched_credit_set"]["migration_delay_us"] == 1000  # read back before the run
        assert r.counters["migration_delay_us"] == 1000  # what credit1 says it uses after it
        assert r.metrics["migrations_per_kunit"] >= 0
        assert r.metrics["throughput"] > 0 and r.metrics["migrations"] >= 0
        assert set(r.counters["per_vcpu"]) == {"lock1/0", "lock1/1", "lock2/0", "lock2/1"}
        ran = [sum(v["run_ticks_by_pcpu"].values()) for v in r.counters["per_vcpu"].values()]
        assert all(t > 0 for t in ran) and r.counters["trace"]["lost_records"] == 0
        assert all(v["flavour"] == "none" and v["sleeps"] > 0 for v in r.counters["per_vm"].values())
    finally:
        tb.close()


@needs_qemu_all
def test_two_numa_nodes_boot(testbed):
    """numa_nodes: 2 (S4's host): Xen sees 2 nodes with one pCPU and half the memory each
    (the boot check compares xl info's nr_nodes with the option)."""
    from schedlab import config
    from schedlab.testbeds.qemu import QemuTestbed

    testbed.close()
    s3 = copy.deepcopy(config.load_study("s3"))
    tb = QemuTestbed(build=FORCED, numa_nodes=2, memory_mb=3072)
    try:
        info = tb.boot_check(s3, "d0")
        assert info["nr_nodes"] == "2" and info["nr_cpus"] == "2"
        topo = tb._vm.host.run(["xl", "info", "-n"], timeout=60).stdout
        assert re.search(r"^\s*1:\s+\d+\s+\d+\s+1\s*$", topo, re.M), topo  # cpu 1 (core, socket) on node 1
    finally:
        tb.close()


@needs_qemu_all
def test_s4_numa_mix_end_to_end(testbed):
    """S4 on a 2-node host: guests' memory on their home nodes, the variant's affinity set
    with xl vcpu-pin, sysbench memory and forkexec inside the guests, and the share of run
    time on the home node from Xen's trace (pinned: all of it)."""
    from schedlab import config
    from schedlab.testbeds.qemu import QemuTestbed

    testbed.close()
    s4 = copy.deepcopy(config.load_study("s4"))
    s4["testbeds"]["qemu"]["options"].update(lock_vms_booted=2, numa_phase_s=3, numa_forkexec_iterations=10)
    tb = QemuTestbed(build=FORCED)
    try:
        r = tb.run_once(s4, "numa", {"vms": 2}, seed=1)
        c = r.counters
        assert c["home_node"] == {"lock1": 0, "lock2": 1}
        assert c["memory_pages_by_node"]["lock1"][0] > 0 and c["memory_pages_by_node"]["lock2"].get(0) == 0
        assert c["affinity"]["lock1"] == ["all / 0", "all / 0"] and c["affinity"]["lock2"] == ["all / 1", "all / 1"]
        assert 0 < r.metrics["home_share"] <= 100
        assert r.metrics["bursts"] > 0 and r.metrics["sysbench"] > 0 and r.metrics["lmbench"] > 0
        assert "MiB transferred" in c["phases"]["sysbench"]["output"]["lock1"]
        p = tb.run_once(s4, "pinned", {"vms": 2}, seed=2)  # same boot, same guests
        assert p.counters["boot"]["runs_in_boot"] == 2 and not p.counters.get("guest_start_seconds", {}).get("lock1")
        assert p.metrics["home_share"] == 100.0
    finally:
        tb.close()


@needs_qemu_all
def test_qemu_killed_mid_run(testbed, tmp_path, monkeypatch):
    """A study run whose QEMU is SIGKILLed while the first run measures: that run leaves a
    failure record (with the serial log's tail), the host is booted again, the remaining
    runs complete, and every completed record stays (a second run_study reuses them all)."""
    from schedlab import store
    from schedlab.run import run_study
    from schedlab.testbeds.qemu import QemuTestbed
    from schedlab.workloads import xl

    testbed.close()
    study = _tiny_s2(runs=2)
    measuring = threading.Event()
    orig = xl.Domains.console_send

    def send(self, ttys, line):  # the trigger that starts a measurement in the guests
        orig(self, ttys, line)
        measuring.set()

    monkeypatch.setattr(xl.Domains, "console_send", send)
    tb = QemuTestbed(build=FORCED)
    out: dict = {}

    def work():
        try:
            out["entries"] = run_study(study, "qemu", tmp_path, 7, tb, log=open(os.devnull, "w"), exploratory=True)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            out["error"] = e

    t = threading.Thread(target=work, daemon=True)
    t.start()
    try:
        assert measuring.wait(1200), "the first run never started measuring"
        time.sleep(2)
        vm = tb._vm
        killed_dir = vm.workdir.name
        os.kill(vm.proc.pid, signal.SIGKILL)
        t_kill = time.time()
        t.join(1800)
        assert not t.is_alive(), "run_study did not finish"
    finally:
        tb.close()
    assert "error" not in out, out.get("error")
    folder = store.raw_dir(tmp_path, "qemu", "s2")
    paths = sorted(folder.glob("*.json"))
    recs = [store.read_record(p) for p in paths]
    for p, r in zip(paths, recs):
        assert store.check_record(p, r) == []
    killed = [r for r in recs if r["status"] == "failed" and "QEMU exited" in r["error"]]
    ok = sorted((r for r in recs if r["status"] == "ok"), key=lambda r: r["repetition"])
    assert len(killed) == 1 and killed[0]["repetition"] == 0
    log = killed[0]["log"]
    assert "==> qemu.out <==" in log and ("schedlab-init" in log or "(XEN)" in log or "[ " in log)
    # the dead QEMU was noticed at once, not after a timeout
    finished = dt.datetime.fromisoformat(killed[0]["finished"]).timestamp()
    assert finished - t_kill < 60, f"failure recorded {finished - t_kill:.0f}s after the kill"
    assert [r["repetition"] for r in ok] == [0, 1] and ok[0]["attempt"] == killed[0]["attempt"] + 1
    assert all(r["counters"]["boot"]["run_dir"] != killed_dir for r in ok)
    assert ok[0]["boot_id"] != ok[1]["boot_id"]  # the unit is the boot: a fresh boot per round
    assert all(r["metrics"]["ops_per_s"] > 0 for r in ok)
    # resuming finds everything: nothing runs again, no QEMU starts
    tb2 = QemuTestbed(build=False)
    again = run_study(study, "qemu", tmp_path, 7, tb2, log=open(os.devnull, "w"), exploratory=True)
    assert tb2._vm is None
    assert sorted(r["run_id"] for rs in again.values() for r in rs) == sorted(r["run_id"] for r in ok)
    assert sorted(folder.glob("*.json")) == paths
