"""Xen trace parsing (schedlab/workloads/xentrace.py) and S3's workload from canned
results and a synthetic trace written in xentrace's file format. No QEMU."""

from __future__ import annotations

import struct

import pytest

from schedlab import workloads
from schedlab.core.testbed import RunFailed
from schedlab.workloads import bursts, lockwork
from schedlab.workloads.xentrace import TraceError, placement, records

RUNNING, RUNNABLE, BLOCKED = 0, 1, 2


def rs(tsc: int, dom: int, vcpu: int, old: int, new: int) -> bytes:
    """A TRC_SCHED_RUNSTATE_CHANGE record as Xen writes it (trace_runstate_change)."""
    ev = 0x00021001 | old << 8 | new << 4
    return struct.pack("<IQI", ev | 1 << 28 | 1 << 31, tsc, dom << 16 | vcpu)


def window(cpu: int, *recs: bytes) -> bytes:
    """xentrace's cpu-change record followed by that pCPU's records."""
    body = b"".join(recs)
    return struct.pack("<IiI", 0x0001F003 | 2 << 28, cpu, len(body)) + body


TRACE = (
    window(0, rs(100, 1, 0, RUNNABLE, RUNNING), rs(200, 1, 0, RUNNING, BLOCKED))
    + window(1, rs(300, 1, 0, RUNNABLE, RUNNING), rs(400, 1, 0, RUNNING, RUNNABLE), rs(600, 2, 1, RUNNABLE, RUNNING))
    # dom0 and the idle domain are not guests; a second window of pCPU 0
    + window(
        0, rs(250, 0, 0, RUNNABLE, RUNNING), rs(260, 0x7FFF, 0, RUNNABLE, RUNNING), rs(500, 1, 0, RUNNABLE, RUNNING)
    )
)


def test_records_walk_windows():
    recs = list(records(TRACE))
    assert [(c, t) for c, t, _, _ in recs] == [
        (0, 100),
        (0, 200),
        (1, 300),
        (1, 400),
        (1, 600),
        (0, 250),
        (0, 260),
        (0, 500),
    ]
    assert recs[0][3] == (1 << 16,)


def test_placement_counts_migrations_and_run_time_per_pcpu():
    p = placement(TRACE)
    # d1v0: pCPU 0 (100-200), pCPU 1 (300-400, a migration), pCPU 0 from 500 (another),
    # still running when the trace ends at 600
    assert p["migrations"] == 2
    assert p["per_vcpu"]["d1/0"] == {"migrations": 2, "run_ticks_by_pcpu": {"0": 200, "1": 100}}
    assert p["per_vcpu"]["d2/1"] == {"migrations": 0, "run_ticks_by_pcpu": {"1": 0}}
    assert "d0/0" not in p["per_vcpu"] and not any(k.startswith("d32767") for k in p["per_vcpu"])
    assert p["records"] == 8 and p["lost_records"] == 0 and p["pcpus"] == [0, 1] and p["tsc_span"] == 500
    # only the named domains
    q = placement(TRACE, {2: "lock2"})
    assert q["migrations"] == 0 and list(q["per_vcpu"]) == ["lock2/1"]


def test_lost_records_are_counted():
    lost = struct.pack("<IQIIII", 0x0001F001 | 4 << 28 | 1 << 31, 700, 5, 0, 0, 0)
    assert placement(TRACE + window(1, lost))["lost_records"] == 5


@pytest.mark.parametrize(
    "bad, where",
    [
        (TRACE[:-3], "runs past the end"),
        (TRACE + b"\x00" * 5, "stray bytes at offset"),
        (rs(1, 1, 0, 1, 0) + TRACE, "no cpu-change record at offset 0"),
        (window(0, rs(1, 1, 0, 1, 0)[:-2]), "runs past its window"),
    ],
)
def test_malformed_trace_names_the_offset(bad, where):
    with pytest.raises(TraceError, match=where):
        placement(bad)


def test_module_params_sleep_and_no_lock():
    opts = {**workloads.DEFAULTS}
    p = lockwork.module_params(
        opts, "none", duration_ms=1000, compute_loops=10, hold_loops=1, sleep_us=1000, sleep_permille=500
    )
    assert p["flavour"] == "none" and p["sleep_us"] == 1000 and p["sleep_permille"] == 500
    # S0's and S2's parameters (and so their guests' command lines) are unchanged
    q = lockwork.module_params(opts, "kernel", duration_ms=1000, compute_loops=10, hold_loops=1)
    assert "sleep_us" not in q and "sleep_permille" not in q
    with pytest.raises(RunFailed, match="sleep_permille"):
        lockwork.module_params(
            opts, "none", duration_ms=1, compute_loops=1, hold_loops=1, sleep_us=10, sleep_permille=1001
        )


LINE = (
    "SCHEDLAB-LOCK-RESULT token=0000002a1b2c3d vm=lock1 guest_ticks=150,0,240,2,0,1,3,190 "
    "lockmod v=1 flavour=none mode=duration threads=2 cpus=2 ops=20000 elapsed_ns=10000000000 "
    "ops_per_s=2000.000 wait_mean_ns=0 wait_p50_ns=0 wait_p90_ns=0 wait_p99_ns=0 wait_max_ns=0 "
    "wait_total_ns=0 yields=0 compute_ns=2000 hold_ns=1000 compute_loops=1000000 hold_loops=1 "
    "loops_per_ms=1000000 spin_threshold=4096 pvspin=1 xen=2 sleep_us=1000 sleep_permille=500 "
    "sleeps=10000 slept_ns=9000000000 tag=0000002a1b2c3d thread_ops=10000,10000 hist="
)


class FakeTrace:
    """Stands in for xentrace in dom0: the trace TRACE once the measurement is over."""

    def __init__(self, host, pages, mask=None):
        self.data = b""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.data = TRACE


def test_bursts_metrics_from_results_and_trace(monkeypatch):
    from test_workloads import FakeDomains, FakeHost

    class Doms(FakeDomains):
        def ids(self):
            return {0: "Domain-0", 1: "lock1", 2: "lock2"}

    monkeypatch.setattr(bursts, "Trace", FakeTrace)
    doms = Doms({"lock1": LINE, "lock2": LINE.replace("vm=lock1", "vm=lock2").replace("ops=20000", "ops=10000")})
    r = bursts.run(FakeHost(), doms, {**workloads.DEFAULTS}, {"vms": 2}, 3, {"xen_scheduler": "credit"})
    assert r.metrics["throughput"] == pytest.approx(2000 + 1000)
    assert r.metrics["migrations"] == pytest.approx(2 / 10.0)  # 2 migrations in a 10 s run
    assert r.counters["per_vcpu"]["lock1/0"]["migrations"] == 2
    assert r.counters["trace_window_guest_s"] == 12.5  # dom0's clock around the trace
    assert "sleep_us=1000" in doms.created["lock1"] and "lockmod.flavour=none" in doms.created["lock1"]
    # a trace that lost records is not data
    lost = struct.pack("<IQIIII", 0x0001F001 | 4 << 28 | 1 << 31, 700, 5, 0, 0, 0)
    monkeypatch.setattr(FakeTrace, "__exit__", lambda self, *e: setattr(self, "data", TRACE + window(0, lost)))
    with pytest.raises(RunFailed, match="lost 5 records"):
        bursts.run(FakeHost(), Doms({"lock1": LINE, "lock2": LINE}), {**workloads.DEFAULTS}, {"vms": 2}, 3, {})


def ev(tsc: int, event: int, *words: int) -> bytes:
    """A record of `event` with its extra words, TSC included."""
    return struct.pack(f"<IQ{len(words)}I", event | len(words) << 28 | 1 << 31, tsc, *words)


def test_sched_events_counts_decisions_per_guest():
    from schedlab.workloads.xentrace import sched_events

    data = window(
        0,
        rs(100, 1, 0, RUNNABLE, RUNNING),
        ev(110, 0x00022007, 1, 0),  # BOOST_START d1v0
        ev(120, 0x00022006, 1),  # TICKLE pCPU 1
        ev(130, 0x00028005, 2, 1),  # YIELD d2v1
        ev(140, 0x00028005, 0, 0),  # YIELD by dom0: in the total only
        ev(150, 0x00022004, 1, 2, 0),  # STOLEN_VCPU from pCPU 1: d2v0
        ev(160, 0x0002800A, 1, 0, 2, 0),  # SWITCH
        ev(170, 0x00022099, 5),  # an event the counts do not name
    ) + window(1, rs(200, 1, 0, RUNNABLE, RUNNING))
    got = sched_events(data, {1: "lock1", 2: "lock2"})
    assert got["total"]["boost"] == 1 and got["total"]["tickle"] == 1 and got["total"]["switch"] == 1
    assert got["total"]["yield"] == 2
    assert got["by_vm"]["lock1"]["boost"] == 1
    assert got["by_vm"]["lock2"] == {**dict.fromkeys(got["total"], 0), "yield": 1, "steal": 1}
    assert got["migrations"] == 1 and got["lost_records"] == 0
    # the ticks the trace spans, earliest to latest record over both pCPUs' buffers
    assert got["tsc_span"] == max(t for _, t, _, _ in records(data) if t) - min(t for _, t, _, _ in records(data) if t)
    # a caller that already has placement() of the trace passes it: the same counts
    assert sched_events(data, {1: "lock1", 2: "lock2"}, placement(data, {1: "lock1", 2: "lock2"})) == got
    # a booted guest outside the measurement is counted apart, not as a measured guest
    apart = sched_events(data, {1: "lock1"}, others={2: "lock2"})
    assert "lock2" not in apart["by_vm"] and apart["by_other_vm"]["lock2"] == got["by_vm"]["lock2"]
    assert apart["total"] == got["total"] and "by_other_vm" not in got
    # dom0's own decisions are counted apart from the guests'
    assert got["dom0"]["events"] == {**dict.fromkeys(got["total"], 0), "yield": 1}


def test_sched_events_measures_dom0s_run_intervals():
    """dom0's run intervals, whatever pCPU's window holds them: counted, summed, and binned
    by powers of two; an interval the trace cuts is left out, and guests' are not dom0's."""
    from schedlab.workloads.xentrace import sched_events

    data = window(
        0,
        rs(100, 0, 0, BLOCKED, RUNNING),
        rs(1100, 0, 0, RUNNING, BLOCKED),  # 1000 ticks
        rs(2000, 0, 2, RUNNING, BLOCKED),  # began before the trace: not counted
        rs(3000, 1, 0, RUNNABLE, RUNNING),
        rs(9000, 1, 0, RUNNING, BLOCKED),  # a guest's
    ) + window(
        1,
        rs(1500, 0, 1, BLOCKED, RUNNING),  # still running when the trace ends: not counted
        rs(4000, 0, 0, BLOCKED, RUNNING),
        rs(4040, 0, 0, RUNNING, RUNNABLE),  # 40 ticks
    )
    d0 = sched_events(data, {1: "lock1"})["dom0"]
    assert d0["runs"] == 2 and d0["run_ticks"] == 1040
    assert d0["run_ticks_log2"] == {"5": 1, "9": 1}


def test_sched_events_dom0_interval_crossing_windows():
    """dom0's vCPU starts on one pCPU's window and stops in the same pCPU's later window."""
    from schedlab.workloads.xentrace import sched_events

    data = (
        window(0, rs(100, 0, 0, BLOCKED, RUNNING))
        + window(1, rs(150, 1, 0, BLOCKED, RUNNING))
        + window(0, rs(356, 0, 0, RUNNING, BLOCKED))
    )
    assert sched_events(data)["dom0"] == {
        "events": sched_events(data)["dom0"]["events"],
        "runs": 1,
        "run_ticks": 256,
        "run_ticks_log2": {"8": 1},
    }


def test_sched_events_reports_lost_records():
    from schedlab.workloads.xentrace import sched_events

    data = window(0, ev(100, 0x0001F001, 7, 0))
    assert sched_events(data)["lost_records"] == 7


def test_sum_events_adds_a_runs_traces_up():
    """S4 traces its three phases apart; the run's sched_events are their sum."""
    from schedlab.workloads.xentrace import sum_events

    a = {
        "total": {"wake": 3, "boost": 1},
        "by_vm": {"lock1": {"wake": 2, "boost": 1}},
        "migrations": 4,
        "lost_records": 0,
        "bytes": 100,
    }
    b = {
        "total": {"wake": 1, "boost": 0},
        "by_vm": {"lock1": {"wake": 1, "boost": 0}, "lock2": {"wake": 0}},
        "migrations": 1,
        "lost_records": 0,
        "bytes": 50,
    }
    a["tsc_span"], b["tsc_span"] = 1000, 400  # the phases' spans add, as their guest windows do
    got = sum_events([a, b])
    assert got["total"] == {"wake": 4, "boost": 1} and got["migrations"] == 5 and got["bytes"] == 150
    assert got["tsc_span"] == 1400
    assert "by_other_vm" not in got
    a["by_other_vm"], b["by_other_vm"] = {"lock3": {"wake": 5}}, {"lock3": {"wake": 2}}
    assert sum_events([a, b])["by_other_vm"] == {"lock3": {"wake": 7}}
    assert got["by_vm"] == {"lock1": {"wake": 3, "boost": 1}, "lock2": {"wake": 0}}
    assert a["by_vm"]["lock1"]["wake"] == 2  # the parts are left as they were
    assert "dom0" not in got
    a["dom0"] = {"events": {"wake": 2}, "runs": 3, "run_ticks": 30, "run_ticks_log2": {"3": 3}}
    b["dom0"] = {"events": {"wake": 1}, "runs": 1, "run_ticks": 100, "run_ticks_log2": {"6": 1}}
    assert sum_events([a, b])["dom0"] == {
        "events": {"wake": 3},
        "runs": 4,
        "run_ticks": 130,
        "run_ticks_log2": {"3": 3, "6": 1},
    }


def test_lockstorm_traces_the_storm_when_asked(monkeypatch):
    """S2 with sched_trace: the storm's scheduler events per guest, dom0's apart."""
    from test_workloads import FakeDomains, FakeHost

    from schedlab.workloads import lockstorm

    class Doms(FakeDomains):
        def ids(self):
            return {0: "Domain-0", 1: "lock1", 2: "lock2"}

    monkeypatch.setattr(lockstorm, "Trace", FakeTrace)
    line = LINE.replace("flavour=none", "flavour=kernel")
    doms = Doms({"lock1": line, "lock2": line.replace("vm=lock1", "vm=lock2")})
    opts = {**workloads.DEFAULTS, "variant_guest": {"lock": "pv-ticket"}}
    assert "sched_events" not in lockstorm.run(FakeHost(), doms, opts, {"overcommit": 1}, 7, {}).counters
    r = lockstorm.run(FakeHost(), doms, {**opts, "sched_trace": True}, {"overcommit": 1}, 7, {})
    ev = r.counters["sched_events"]
    assert ev["migrations"] == 2 and ev["lost_records"] == 0 and ev["bytes"] == len(TRACE)
    assert ev["by_other_vm"] == {} and r.counters["trace_window_guest_s"] == 12.5  # lock2 booted, idle


def test_coschedule_counts_how_many_vcpus_of_a_guest_ran_together():
    from schedlab.workloads.xentrace import coschedule

    trace = window(
        0,
        rs(0, 5, 0, RUNNABLE, RUNNING),  # v0 runs 0-100, preempted (runnable) 100-150, runs on
        rs(20, 5, 1, BLOCKED, RUNNING),  # v1 runs 20-80, then blocks
        rs(80, 5, 1, RUNNING, BLOCKED),
        rs(100, 5, 0, RUNNING, RUNNABLE),
        rs(150, 5, 0, RUNNABLE, RUNNING),
        rs(200, 0, 0, RUNNABLE, RUNNING),  # dom0: not the guest
    )
    c = coschedule(trace, {5: "lock1"})["lock1"]
    # 0-20 one running, 20-80 two, 80-100 one, 100-150 none, 150-200 one
    assert c["running_ticks"] == {"0": 50, "1": 90, "2": 60}
    assert c["runnable_ticks"] == {"0": 50}
    # every vCPU awake (running or runnable) only 20-80: both running
    assert c["awake"] == {"running_ticks": {"2": 60}, "runnable_ticks": {}, "ticks": 60}
    assert coschedule(trace, {9: "none"}) == {}


def test_coschedule_awake_stretch_holds_the_preemption_inside_it():
    from schedlab.workloads.xentrace import coschedule

    trace = window(
        0,
        rs(0, 5, 0, BLOCKED, RUNNING),
        rs(10, 5, 1, BLOCKED, RUNNING),  # both awake from 10 ...
        rs(40, 5, 1, RUNNING, RUNNABLE),  # v1 preempted 40-60
        rs(60, 5, 1, RUNNABLE, RUNNING),
        rs(90, 5, 0, RUNNING, BLOCKED),  # ... to 90
        rs(120, 5, 1, RUNNING, BLOCKED),
    )
    a = coschedule(trace, {5: "g"})["g"]["awake"]
    assert a == {"running_ticks": {"1": 20, "2": 60}, "runnable_ticks": {"1": 20}, "ticks": 80}
