"""Fast tests of the Xen-host workloads (schedlab/workloads/): the lock module's result
line, its histogram arithmetic, guest configs, metrics from canned results. No QEMU."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from schedlab import workloads
from schedlab.core.testbed import RunFailed, RunResult
from schedlab.workloads import lockstorm, lockwork, xl
from schedlab.workloads.lockwork import bucket_of, bucket_upper, hist_percentile, lock_cfg, merge_hists, parse_result

REPO = Path(__file__).resolve().parents[1]

# A line as guest/guest-init.sh prints it (the part from "lockmod v=1" is lockmod.c's).
LINE = (
    "SCHEDLAB-LOCK-RESULT token=0000002a1b2c3d vm=lock1 guest_ticks=150,0,240,2,0,1,3,190 "
    "lockmod v=1 flavour=spin-yield mode=ops "
    "threads=2 cpus=2 ops=4000 elapsed_ns=2000000000 ops_per_s=2000.000 wait_mean_ns=1500 "
    "wait_p50_ns=1023 wait_p90_ns=2047 wait_p99_ns=40959 wait_max_ns=40000 wait_total_ns=6000000 "
    "yields=17 compute_ns=300000 hold_ns=30000 compute_loops=90000 hold_loops=9000 "
    "loops_per_ms=300000 spin_threshold=4096 pvspin=1 xen=2 tag=0000002a1b2c3d "
    "thread_ops=2001,1999 hist=5:10,60:1990,68:1800,132:200"
)


def test_parse_result_line():
    r = parse_result(LINE)
    assert r["vm"] == "lock1" and r["token"] == "0000002a1b2c3d"
    assert r["flavour"] == "spin-yield" and r["mode"] == "ops"
    assert r["ops"] == 4000 and r["elapsed_ns"] == 2_000_000_000
    assert r["ops_per_s"] == pytest.approx(2000.0)
    assert r["wait_p99_ns"] == 40959 and r["wait_max_ns"] == 40000 and r["yields"] == 17
    assert r["thread_ops"] == [2001, 1999] and sum(r["thread_ops"]) == r["ops"]
    assert r["hist"] == {5: 10, 60: 1990, 68: 1800, 132: 200}
    assert sum(r["hist"].values()) == r["ops"]
    assert r["pvspin"] == 1 and r["xen"] == 2
    assert r["guest_ticks"]["steal"] == 190 and r["guest_ticks"]["system"] == 240
    assert parse_result(LINE.replace("guest_ticks=150,0,240,2,0,1,3,190 ", ""))["ops"] == 4000


def test_parse_result_tolerates_console_noise():
    assert parse_result(LINE + "\r")["hist"][132] == 200
    assert parse_result("  " + LINE.replace(" hist=", "  hist="))["ops"] == 4000


@pytest.mark.parametrize(
    "bad",
    [
        "SCHEDLAB-LOCK-RESULT token=1 vm=lock1 error=insmod insmod:_ERROR:_could_not_insert_module",
        "SCHEDLAB-LOCK-RESULT token=1 vm=lock1 error=no-result",
        "SCHEDLAB-LOCK-RESULT token=1 vm=lock1 something else",
        LINE.replace("lockmod v=1", "lockmod v=2"),
        LINE.replace(" elapsed_ns=2000000000", ""),
        LINE.replace("elapsed_ns=2000000000", "elapsed_ns=0"),
    ],
)
def test_parse_result_rejects(bad):
    with pytest.raises(RunFailed):
        parse_result(bad)


def test_histogram_buckets_match_the_module():
    """bucket_of/bucket_upper mirror lockmod.c: every value lies in its bucket, buckets are
    contiguous, and the upper edge is at most 12.5 % above any value in the bucket."""
    src = (REPO / "guest/lockmod/lockmod.c").read_text()
    assert "#define SUB_BITS 3" in src
    prev_upper = -1
    for i in range(0, 8 * 40):
        up = bucket_upper(i)
        assert up > prev_upper
        lo = prev_upper + 1
        assert bucket_of(lo) == i and bucket_of(up) == i
        if lo >= 8:
            assert up <= lo * 1.125 + 1
        prev_upper = up
    for v in (0, 1, 7, 8, 15, 16, 17, 1000, 12345, 10**9, 2**40 + 3, 2**63 + 5):
        i = bucket_of(v)
        assert bucket_upper(i - 1) < v <= bucket_upper(i) if i else v <= bucket_upper(i)
    assert bucket_of(2**64 - 1) == (64 - 3 + 1) * 8 - 1  # NBUCKETS - 1 in lockmod.c


def test_hist_percentile_nearest_rank():
    h = {bucket_of(v): 0 for v in (100, 1000, 10000)}
    h[bucket_of(100)] = 98
    h[bucket_of(1000)] = 1
    h[bucket_of(10000)] = 1
    assert hist_percentile(h, 0.5) == bucket_upper(bucket_of(100))
    assert hist_percentile(h, 0.98) == bucket_upper(bucket_of(100))
    assert hist_percentile(h, 0.99) == bucket_upper(bucket_of(1000))
    assert hist_percentile(h, 1.0, max_value=10000) == 10000
    assert hist_percentile({}, 0.99) == 0
    assert merge_hists([{"hist": {1: 2}}, {"hist": {1: 3, 9: 1}}]) == {1: 5, 9: 1}


def test_lock_guest_config():
    opts = {**workloads.DEFAULTS}
    params = lockwork.module_params(opts, "spin-yield", ops=1000, compute_loops=300000, hold_loops=30000)
    cfg = lock_cfg("lock2", opts, params, boot="xen_nopvspin")
    extra = re.search(r'^extra = "(.*)"$', cfg, re.M).group(1)
    assert "schedlab.role=lock" in extra and "schedlab.name=lock2" in extra
    assert "lockmod.flavour=spin-yield" in extra and "lockmod.ops=1000" in extra
    assert "lockmod.compute_loops=300000" in extra
    assert extra.endswith(" xen_nopvspin")
    assert f"vcpus = {opts['guest_vcpus']}" in cfg and 'cpus = "all"' in cfg
    with pytest.raises(RunFailed):
        lock_cfg("lock1", opts, {**params, "tag": "a b"})
    with pytest.raises(RunFailed):
        lock_cfg("lock1", opts, params, boot='x" ; rm')
    with pytest.raises(RunFailed):
        lockwork.module_params(opts, "pv-ticket", ops=1, compute_loops=1, hold_loops=1)
    with pytest.raises(RunFailed):
        lockwork.module_params(opts, "ticket", ops=1, compute_loops=0, hold_loops=1)


class FakeDomains:
    """Stands in for xl.Domains: guests 'boot' instantly, results come from `lines`."""

    def __init__(self, lines):
        self.lines, self.created, self.sent = lines, {}, []
        self.host = FakeHost()  # dom0, as xl.Domains has it

    def destroy_all(self, keep=()):
        pass

    def ensure_many(self, guests, timeout):
        out = {}
        for n, text in guests.items():
            out[n] = 0.0 if self.created.get(n) == text else 1.0
            self.created[n] = text
        return out

    def list(self):
        return {"Domain-0": "r-----", **{n: "-b----" for n in self.created}}

    def cpu_times(self):
        return {n: 1.0 for n in self.list()}

    def console_ttys(self, names):
        return {n: f"/dev/pts/{i}" for i, n in enumerate(names)}

    def console_send(self, ttys, line):
        self.sent.append((tuple(ttys), line))

    def follow_consoles(self, names):
        doms = self

        class Follow:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                pass

            nudges = {}

            def wait(self, marker, timeout, **kw):
                tok = marker.split("token=")[1].strip()
                return {n: doms.lines[n].replace("token=0000002a1b2c3d", f"token={tok}") for n in names}

        return Follow()


class FakeHost:
    clock = 1000.0  # dom0's `date +%s.%N`: 12.5 s pass between two reads

    def run(self, argv, timeout=60, check=True):
        class R:
            stdout = "Name ID VCPU CPU State Time(s) Affinity (Hard / Soft)\n"
            stderr = ""
            returncode = 0

        if argv[:1] == ["date"]:
            FakeHost.clock += 12.5
            R.stdout = f"{FakeHost.clock:.9f}\n"
        return R()


def test_lockwork_metrics_from_results():
    l1 = LINE
    l2 = LINE.replace("vm=lock1", "vm=lock2").replace("elapsed_ns=2000000000", "elapsed_ns=4000000000")
    doms = FakeDomains({"lock1": l1, "lock2": l2})
    opts = {**workloads.DEFAULTS, "lock_ops": 4000, "variant_guest": {"lock": "spin-yield"}}
    r = lockwork.run(FakeHost(), doms, opts, {"vms": 2}, 42, {"xen_scheduler": "credit"})
    assert r.metrics["time_s"] == pytest.approx(3.0)
    assert r.metrics["throughput"] == pytest.approx(100000 / 2 + 100000 / 4)
    assert r.samples["time_s"] == [2.0, 4.0]
    assert doms.sent and doms.sent[0][0] == ("lock1", "lock2") and doms.sent[0][1].startswith("run ")
    assert r.counters["per_vm"]["lock2"]["elapsed_ns"] == 4_000_000_000
    assert "hist" not in r.counters["per_vm"]["lock1"]
    assert r.counters["raw_lines"]["lock1"].startswith("SCHEDLAB-LOCK-RESULT")
    # fewer ops than the build size: not a complete build
    opts["lock_ops"] = 5000
    with pytest.raises(RunFailed, match="ops"):
        lockwork.run(FakeHost(), FakeDomains({"lock1": l1}), opts, {"vms": 1}, 1, {})


def test_lockstorm_metrics_and_pvspin_check():
    line = LINE.replace("flavour=spin-yield", "flavour=kernel").replace("mode=ops", "mode=duration")
    doms = FakeDomains({"lock1": line, "lock2": line.replace("vm=lock1", "vm=lock2")})
    opts = {**workloads.DEFAULTS, "variant_guest": {"lock": "pv-ticket"}}
    r = lockstorm.run(FakeHost(), doms, opts, {"overcommit": 2}, 7, {})
    assert r.metrics["ops_per_s"] == pytest.approx(4000.0)
    pooled = {5: 20, 60: 3980, 68: 3600, 132: 400}
    assert r.metrics["wait_p99_us"] == pytest.approx(hist_percentile(pooled, 0.99, 40000) / 1000)
    assert r.counters["wait_pooled_ns"]["n"] == 8000
    # xen_nopvspin asked for, but the guest says PV spinlocks are on: refuse the run
    opts["variant_guest"] = {"lock": "ticket", "boot": "xen_nopvspin"}
    with pytest.raises(RunFailed, match="pvspin"):
        lockstorm.run(FakeHost(), FakeDomains({"lock1": line}), opts, {"overcommit": 1}, 7, {})


def test_study_options_are_known_to_the_qemu_testbed():
    from schedlab import config
    from schedlab.testbeds.qemu import QemuTestbed

    tb = QemuTestbed()
    for name in ("s0", "s2", "s3"):
        study = config.load_study(name)
        cfg = tb.config(study)  # raises ConfigError on an unknown option
        assert workloads.get(study["workload"]["kind"])
        assert cfg["guest_vcpus"] >= 1


class LocalHost:
    """A Host whose 'remote' commands run on this machine (for ConsoleFollower)."""

    def ssh_argv(self, argv):
        return list(argv)


def test_console_follower_streams_new_lines(tmp_path, monkeypatch):
    from schedlab.host import HostError
    from schedlab.workloads import xl

    monkeypatch.setattr(xl.Domains, "console_log", staticmethod(lambda n: str(tmp_path / f"guest-{n}.log")))
    for n in ("lock1", "lock2"):
        (tmp_path / f"guest-{n}.log").write_text(f"SCHEDLAB-LOCK-RESULT token=old vm={n} lockmod v=1\n")
    with xl.ConsoleFollower(LocalHost(), ["lock1", "lock2"], timeout=20) as f:
        with open(tmp_path / "guest-lock2.log", "a") as g:
            g.write("SCHEDLAB-LOCK-START token=t1 vm=lock2\nSCHEDLAB-LOCK-RESULT token=t1 vm=lock2 lockmod v=1 ops=5\n")
        with open(tmp_path / "guest-lock1.log", "a") as g:
            g.write("SCHEDLAB-LOCK-RESULT token=t1 vm=lock1 lockmod ")
            g.flush()
            g.write("v=1 ops=7\r\n")
        lines = f.wait("SCHEDLAB-LOCK-RESULT token=t1 ", timeout=20)
    assert lines == {
        "lock1": "SCHEDLAB-LOCK-RESULT token=t1 vm=lock1 lockmod v=1 ops=7",
        "lock2": "SCHEDLAB-LOCK-RESULT token=t1 vm=lock2 lockmod v=1 ops=5",
    }
    with xl.ConsoleFollower(LocalHost(), ["lock1"], timeout=20) as f:
        with pytest.raises(RunFailed, match="within"):
            f.wait("SCHEDLAB-LOCK-RESULT token=t2 ", timeout=1.5)
        with open(tmp_path / "guest-lock1.log", "a") as g:
            g.write("[  12.3] Kernel panic - not syncing: x\n")
        with pytest.raises(RunFailed, match="Kernel panic"):
            f.wait("SCHEDLAB-LOCK-RESULT token=t2 ", timeout=20)
    # the session dies (dom0 gone): an error at once, not a timeout
    f = xl.ConsoleFollower(LocalHost(), ["lock1"], timeout=20)
    f.proc.kill()
    with pytest.raises(HostError):
        f.wait("SCHEDLAB-LOCK-RESULT token=t3 ", timeout=60)
    f.close()


def test_console_follower_puts_interleaved_lines_back_together():
    """tail -v of two logs: half a line of lock1, then lock2's line, then the rest of
    lock1's (two guests finishing together). Each file's line comes out whole."""
    from schedlab.workloads import xl

    f = xl.ConsoleFollower.__new__(xl.ConsoleFollower)
    f._buf, f._file, f._part, f._lines = b"", None, {}, []
    for chunk in (
        b"SCHEDLAB-FOLLOW-READY\n\n==> /c/guest-lock1.log <==\n\n==> /c/guest-lock2.log <==\n",
        b"\n==> /c/guest-lock1.log <==\nSCHEDLAB-LOCK-RESULT token=t vm=lock1 ops=",
        b"\n==> /c/guest-lock2.log <==\nSCHEDLAB-LOCK-RESULT token=t vm=lock2 ops=5\r\n",
        b"\n==> /c/guest-lock1.log <==\n7 hist=\r\n==> not a header\n",
    ):
        f._feed(chunk)
    assert [x.decode().strip("\r") for x in f._lines] == [
        "SCHEDLAB-FOLLOW-READY",
        "SCHEDLAB-LOCK-RESULT token=t vm=lock2 ops=5",
        "SCHEDLAB-LOCK-RESULT token=t vm=lock1 ops=7 hist=",
        "==> not a header",
    ]


def test_console_follower_nudges_a_silent_guest(tmp_path, monkeypatch):
    """A guest that does not print its START line gets the command again (nudge)."""
    from schedlab.workloads import xl

    monkeypatch.setattr(xl.Domains, "console_log", staticmethod(lambda n: str(tmp_path / f"guest-{n}.log")))
    for n in ("lock1", "lock2"):
        (tmp_path / f"guest-{n}.log").write_text("")
    nudged = []

    def nudge(late):
        nudged.append(list(late))
        with open(tmp_path / "guest-lock2.log", "a") as g:
            g.write("SCHEDLAB-LOCK-START token=t vm=lock2\nSCHEDLAB-LOCK-RESULT token=t vm=lock2 x\n")

    with xl.ConsoleFollower(LocalHost(), ["lock1", "lock2"], timeout=20) as f:
        with open(tmp_path / "guest-lock1.log", "a") as g:
            g.write("SCHEDLAB-LOCK-START token=t vm=lock1\n")
        with open(tmp_path / "guest-lock1.log", "a") as g:
            g.write("SCHEDLAB-LOCK-RESULT token=t vm=lock1 x\n")
        lines = f.wait(
            "SCHEDLAB-LOCK-RESULT token=t ", 30, started="SCHEDLAB-LOCK-START token=t ", nudge=nudge, nudge_after=1.0
        )
    assert set(lines) == {"lock1", "lock2"} and nudged == [["lock2"]] and f.nudges == {"lock2": 1}


class CreditHost:
    """dom0's `xl sched-credit -s` as a pool that keeps what it was set to (the real command
    runs in the opt-in qemu S3 test and in every S3 record)."""

    def __init__(self, refuse: bool = False):
        self.pool = {"tslice": 30, "ratelimit": 1000, "migration-delay": 0}
        self.refuse, self.calls = refuse, []

    def run(self, argv, timeout=60, check=True):
        self.calls.append(list(argv))
        for a in argv[3:]:
            name, value = a[2:].split("=")
            field = {"tslice_ms": "tslice", "ratelimit_us": "ratelimit", "migration_delay_us": "migration-delay"}[name]
            if not self.refuse:
                self.pool[field] = int(value)
        p = self.pool

        class R:
            stdout = (
                f"Cpupool Pool-0: tslice={p['tslice']}ms ratelimit={p['ratelimit']}us "
                f"migration-delay={p['migration-delay']}us\n"
            )
            stderr, returncode = "", 0

        return R()


def test_variant_sched_credit_is_set_and_read_back_before_the_workload(monkeypatch):
    """S3's delays are credit1 pool parameters set at run time: the wrapper sets them with
    `xl sched-credit -s`, reads them back, records them, and fails a run Xen did not take."""
    from schedlab import config

    study = config.load_study("s3")
    opts = {**workloads.DEFAULTS, **workloads.variant_options(study, "d1000")}
    assert opts["variant_sched_credit"] == {"migration_delay_us": 1000}
    seen = {}

    def fake_bursts(h, doms, o, point, seed, booted):
        seen["delay"] = h.pool["migration-delay"]  # already set when the workload starts
        return RunResult(metrics={"throughput": 1.0}, counters={})

    monkeypatch.setitem(workloads.WORKLOADS, "specjbb-like", fake_bursts)
    h = CreditHost()
    r = workloads.get("specjbb-like")(h, None, opts, {"vms": 2}, 1, {})
    assert seen["delay"] == 1000 and r.counters["sched_credit_set"]["migration_delay_us"] == 1000
    assert h.calls[0] == ["xl", "sched-credit", "-s", "--migration_delay_us=1000"]
    with pytest.raises(RunFailed, match="migration_delay_us"):
        workloads.get("specjbb-like")(CreditHost(refuse=True), None, opts, {"vms": 2}, 1, {})
    # a variant without run-time settings runs the workload alone
    plain = {**workloads.DEFAULTS, "variant_sched_credit": {}}
    h2 = CreditHost()
    workloads.get("specjbb-like")(h2, None, plain, {"vms": 2}, 1, {})
    assert h2.calls == []
    assert xl.parse_sched_credit("Cpupool Pool-0: tslice=30ms ratelimit=1000us migration-delay=250us") == {
        "Pool-0": {"tslice_ms": 30, "ratelimit_us": 1000, "migration_delay_us": 250}
    }
