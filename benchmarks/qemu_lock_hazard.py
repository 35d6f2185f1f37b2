"""The emulator's own lock-holder stalls: how much of S0's lock waiting at one VM does Xen's
scheduling explain, and how much is the emulator's?

One lock VM (S0's base variant: the yield-noop Xen, a spin-yield ticket lock), two lock threads
on its two vCPUs, the other guests idle and dom0 idle: with 25 us held per 275 us of work, two
threads should find the lock taken about one time in eleven and wait a few microseconds. Each
run reports lockmod's own view (mean wait, the share of the threads' time spent waiting) beside
Xen's trace of the lock VM (xentrace.coschedule: ticks with both, one or none of its vCPUs
running, and ticks a vCPU was runnable but not running, i.e. descheduled by Xen). A holder spins
its hold with preemption off and never blocks, so Xen can stall it only by descheduling its
vCPU while it is runnable; each second of that delays one waiter by at most a second. The
lock VM's runnable time therefore bounds the wait Xen's own scheduling can explain (an upper
bound: not every runnable moment falls on a holder). It is taken over the run itself: the
longest stretch of the trace in which neither lock vCPU blocked (coschedule's "awake": the
two threads keep both vCPUs busy from their start until the first finishes; before and after,
the guest idles); its length is printed beside lockmod's elapsed time. The rest of the wait is made below Xen: by the emulator's turns
between the emulated pCPUs (one host thread runs both in turn under icount, so a holder is
frozen while the waiter spins through its turn) or, under multi-threaded TCG, by the host's
scheduling of QEMU's threads.

Settings (time mode and knobs), each over --boots fresh boots and --runs runs per boot:
  icount5         icount shift 5, 2 pCPUs: S0's design
  icount3         icount shift 3: instructions 4x shorter, the same timer deadlines in guest time
  mttcg           multi-threaded TCG (no icount): 2 host threads, the host schedules them
  icount5-1pcpu   icount shift 5, both lock vCPUs hard-pinned to pCPU 1: only Xen can
                  deschedule a holder while its sibling waits
  icount5-1vcpu   icount shift 5, one vCPU: both threads on it (no cross-vCPU spinning)

The one-vCPU setting is the control: one lock thread, no contention at all, yet lockmod still
times its lock path; what it reports there is the floor of the measurement itself under this
time mode, present in every setting. The line before the last gives icount5's wait per
acquisition beyond that floor and the share of that excess Xen's runnable time cannot explain.

Prints one line per run and per setting; the last line is `not explained by Xen's own
scheduling (icount5): X %`. It measures only (no records); its output goes into the dated log docs/qemu-measurements.md.
Needs root, QEMU, the cached images and the yield-noop Xen build (python -m schedlab.builds.images
xen-src --patches yield-noop). About 6 min per boot on a quiet 2-core host.
Usage: .venv/bin/python benchmarks/qemu_lock_hazard.py [--boots 2] [--runs 2] [--setting icount5 ...]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics as st
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from schedlab import config  # noqa: E402
from schedlab.core.testbed import RunFailed  # noqa: E402
from schedlab.testbeds.qemu import QemuTestbed  # noqa: E402

SETTINGS = {
    "icount5": {"icount_shift": 5},
    "icount3": {"icount_shift": 3},
    "mttcg": {"icount_shift": None},
    "icount5-1pcpu": {"icount_shift": 5, "lock_cpus": "1"},
    "icount5-1vcpu": {"icount_shift": 5, "guest_vcpus": 1},
}


def study_for(setting: str, ops: int) -> dict:
    study = copy.deepcopy(config.study_of_kind("ddk-build"))  # the lock workload's study (S0's)
    opts = dict(study["testbeds"]["qemu"]["options"])
    # timeouts are host wall time: generous, as a loaded host slows guest boots (not guest time)
    opts.update(lock_ops=ops, lock_vms_booted=1, sched_trace=True, guest_timeout_s=900, lock_timeout_s=1800)
    for k, v in SETTINGS[setting].items():
        if v is None:
            opts.pop(k, None)
        else:
            opts[k] = v
    study["testbeds"]["qemu"]["options"] = opts
    return study


def one_run(r) -> dict:
    c = r.counters
    vm = c["per_vm"]["lock1"]
    threads = int(vm["threads"])
    elapsed_s = vm["elapsed_ns"] / 1e9
    wait_s = vm["wait_total_ns"] / 1e9
    ev = c["sched_events"]
    co = (ev.get("coschedule") or {}).get("lock1") or {"running_ticks": {}, "runnable_ticks": {}}
    # the trace's tick rate against dom0's clock (Xen's system time) over the same window
    rate = ev["tsc_span"] / c["trace_window_guest_s"] if c.get("trace_window_guest_s") else None
    awake = co.get("awake") or {"running_ticks": {}, "runnable_ticks": {}, "ticks": 0}
    ticks = awake["running_ticks"]
    span = sum(ticks.values()) or 1
    one_s = ticks.get("1", 0) / rate if rate else float("nan")
    runnable_s = sum(awake["runnable_ticks"].values()) / rate if rate else float("nan")
    awake_s = awake["ticks"] / rate if rate else float("nan")
    explained = min(runnable_s, wait_s) / wait_s if wait_s > 0 else 0.0
    return {
        "ops": int(vm["ops"]),
        "elapsed_s": elapsed_s,
        "wait_s": wait_s,
        "awake_s": awake_s,
        "wait_mean_us": vm["wait_mean_ns"] / 1000,
        "wait_share": wait_s / (threads * elapsed_s),
        "both_running": ticks.get("2", 0) / span,
        "one_running_s": one_s,
        "runnable_s": runnable_s,
        "blocks": ev["by_vm"].get("lock1", {}).get("block", 0),
        "not_explained": 1 - explained,
        "boot": c["boot"]["run_dir"],
        "load": c.get("host_loadavg", [float("nan")])[0],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--boots", type=int, default=2, help="fresh boots per setting")
    ap.add_argument("--runs", type=int, default=2, help="runs per boot")
    ap.add_argument("--ops", type=int, default=30000, help="lock acquisitions per run (S0: 90000)")
    ap.add_argument("--setting", action="append", choices=list(SETTINGS), help="default: all")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("qemu_lock_hazard: needs root (QEMU images)", file=sys.stderr)
        return 1
    summary: dict[str, float] = {}
    per_op: dict[str, tuple[float, float]] = {}  # wait and Xen's runnable time per acquisition, us
    for setting in a.setting or list(SETTINGS):
        study = study_for(setting, a.ops)
        tb = QemuTestbed(build=False)
        rows = []
        try:
            for b in range(a.boots):
                tb.fresh_boot(study)
                for i in range(a.runs):
                    try:
                        r = one_run(tb.run_once(study, "base", {"vms": 1}, seed=1000 * b + i))
                    except RunFailed as e:  # a failed run is reported, the next one boots afresh
                        print(f"{setting} boot {b + 1} run {i + 1}: FAILED: {str(e).splitlines()[0][:300]}", flush=True)
                        break
                    rows.append(r)
                    print(
                        f"{setting} boot {b + 1} run {i + 1}: {r['ops']} ops in {r['elapsed_s']:.2f} s, "
                        f"wait {r['wait_s']:.2f} s (mean {r['wait_mean_us']:.1f} us, "
                        f"{100 * r['wait_share']:.1f} % of the threads' time); Xen, over the "
                        f"{r['awake_s']:.2f} s both vCPUs stayed awake: runnable {r['runnable_s']:.3f} s, "
                        f"one vCPU running {r['one_running_s']:.2f} s, both {100 * r['both_running']:.1f} %; "
                        f"{r['blocks']} blocks in the trace; not explained "
                        f"by Xen {100 * r['not_explained']:.1f} % (load {r['load']:.1f})",
                        flush=True,
                    )
        finally:
            tb.close()
        if not rows:
            print(f"{setting}: no run completed", flush=True)
            continue
        boots = len({r["boot"] for r in rows})
        ne = [r["not_explained"] for r in rows]
        share = [r["wait_share"] for r in rows]
        summary[setting] = st.mean(ne)
        per_op[setting] = (
            st.mean(1e6 * r["wait_s"] / r["ops"] for r in rows),
            st.mean(1e6 * r["runnable_s"] / r["ops"] for r in rows),
        )
        print(
            f"{setting}: {boots} boots, {len(rows)} runs: waiting {100 * st.mean(share):.1f} % "
            f"({100 * min(share):.1f}-{100 * max(share):.1f}), mean wait "
            f"{st.mean(r['wait_mean_us'] for r in rows):.1f} us; not explained by Xen {100 * st.mean(ne):.1f} % "
            f"({100 * min(ne):.1f}-{100 * max(ne):.1f})",
            flush=True,
        )
    if "icount5" in per_op and "icount5-1vcpu" in per_op:
        (wait, xen), (floor, _) = per_op["icount5"], per_op["icount5-1vcpu"]
        excess = max(wait - floor, 0.0)
        below = 1 - min(xen, excess) / excess if excess > 0 else 0.0
        print(
            f"icount5 beyond the one-vCPU floor: {wait:.1f} us of lock wait per acquisition, {floor:.1f} us of it "
            f"the floor, {excess:.1f} us excess, Xen's runnable time {xen:.1f} us: {100 * below:.1f} % of the "
            "excess not explained by Xen"
        )
    if "icount5" in summary:
        print(f"not explained by Xen's own scheduling (icount5): {100 * summary['icount5']:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
