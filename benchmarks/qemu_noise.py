"""A/A noise of the qemu testbed: how much identical runs differ, on a quiet host and with
the host's cores busy.

One boot of the virtual host (S0's base Xen: yield-noop, sched_ratelimit_us=0), then
`--runs` identical runs of S0's lock workload (its qemu options, `--lock-vms` VMs) and of
S3's bursts (2 VMs, `--burst-s` guest seconds), one workload at a time: one warm-up, runs on
a quiet host, then runs while this script keeps every host core busy with a CPU hog it
starts and stops itself (same guests). Each run's
guest-measured value (S0 time_s, S3 throughput) is printed; per workload and condition
the mean and coefficient of variation (CV, sd/mean) over the measured runs. The last line is `A/A cv: X% quiet, Y% loaded`, X and Y the
largest CV of the two workloads in that condition.

Needs root, QEMU and the qemu images and S0's base Xen built (`make test-all` or
`python -m schedlab.builds.images all` and `... xen-src --patches yield-noop`).
Usage: .venv/bin/python benchmarks/qemu_noise.py [--icount-shift 5 | --icount-shift none] [--runs 3]
(about 15 min at shift 5 on a 2-core machine; much longer with --icount-shift none, where the
loaded runs crawl)
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from schedlab import config  # noqa: E402
from schedlab.testbeds.qemu import QemuTestbed  # noqa: E402


def _hog() -> None:
    # at QEMU's own niceness (the testbed runs it under nice -n 10): a hog at 0 would leave
    # QEMU ~10 % of a core, a slowdown this benchmark need not wait for to show the effect
    os.nice(10)
    while True:
        pass


S3_BURST_US = 1000  # S3's mean compute burst in guest time (the sim's exp mean 1000 us)


def studies(lock_vms: int, burst_s: int, shift) -> tuple[dict, dict]:
    """The lock workload's study (S0) as configured (but booting only the guests the point
    needs), and the bursts' study (S3) booted on the lock study's base Xen (same command line,
    so both run in one boot); both with the chosen time mode. Found by workload kind."""
    lock = copy.deepcopy(config.study_of_kind("ddk-build"))
    bursts = copy.deepcopy(config.study_of_kind("specjbb-like"))
    bursts["variants"]["d0"]["xen"] = copy.deepcopy(lock["variants"]["base"]["xen"])
    # S3's bursts are loop counts sized for multi-threaded TCG (~1 ms there); under icount
    # the same guest time is fewer loops (lockmod calibrates ~2^-shift x 400 per us).
    loops = S3_BURST_US * 400 // 2**shift if shift is not None else None
    bursts_extra = {"burst_duration_s": burst_s, **({"burst_compute_loops": loops} if loops else {})}
    for s, extra in ((lock, {"lock_vms_booted": lock_vms}), (bursts, bursts_extra)):
        q = s["testbeds"].setdefault("qemu", {}) or {}
        s["testbeds"]["qemu"] = q
        q["options"] = {**(q.get("options") or {}), **extra, "icount_shift": shift}
    return lock, bursts


def measure(tb: QemuTestbed, study: dict, variant: str, point: dict, metric: str, runs: int, label: str, warmup: int):
    """`warmup` discarded runs, then `runs` measured ones of one workload; their values."""
    out: list[float] = []
    name = f"{study['study']} {metric}"
    for i in range(warmup + runs):
        t0 = time.monotonic()
        r = tb.run_once(study, variant, point, seed=1000)  # identical runs: the same seed too
        v = float(r.metrics[metric])
        tag = "warm-up" if i < warmup else f"run {i - warmup + 1}"
        print(
            f"{label:6s} {name:14s} {tag:7s} {v:12.4f}  (wall {time.monotonic() - t0:5.1f} s, "
            f"load {os.getloadavg()[0]:.2f})",
            flush=True,
        )
        if i >= warmup:
            out.append(v)
        if i == 0:  # what one run looks like: the guest's loop speed, the scheduler's decisions
            lpm = [vm.get("loops_per_ms") for vm in (r.counters.get("per_vm") or {}).values()]
            ev = (r.counters.get("sched_events") or {}).get("total")
            print(f"{label:6s} {name:14s} loops/ms {lpm}; sched events {ev}", flush=True)
    return out


def hog_started() -> list[multiprocessing.Process]:
    hogs = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(os.cpu_count() or 1)]
    for p in hogs:
        p.start()
    return hogs


def cv_pct(xs: list[float]) -> float:
    return 100 * statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--icount-shift", default="5", help="0..5, or 'none' for multi-threaded TCG")
    ap.add_argument("--runs", type=int, default=3, help="measured runs per workload and condition")
    ap.add_argument("--lock-vms", type=int, default=1, help="VMs of the lock workload (S0's)")
    ap.add_argument("--burst-s", type=int, default=30, help="bursts workload run length (guest seconds)")
    a = ap.parse_args()
    shift = None if a.icount_shift == "none" else int(a.icount_shift)
    lock, bursts = studies(a.lock_vms, a.burst_s, shift)
    tb = QemuTestbed(log=lambda m: print(m, file=sys.stderr, flush=True))
    mode = "multi-threaded TCG" if shift is None else f"icount shift={shift}"
    print(f"mode: {mode}; host cores: {os.cpu_count()}", flush=True)
    # One workload at a time (a changed module parameter means new guests): its warm-up,
    # its quiet runs, then its runs beside the hog, in the same guests.
    res: dict[str, dict[str, list[float]]] = {"quiet": {}, "loaded": {}}
    try:
        for study, variant, point, metric in (
            (lock, "base", {"vms": a.lock_vms}, "time_s"),
            (bursts, "d0", {"vms": 2}, "throughput"),
        ):
            name = f"{study['study']} {metric}"
            res["quiet"][name] = measure(tb, study, variant, point, metric, a.runs, "quiet", warmup=1)
            hogs = hog_started()
            try:
                res["loaded"][name] = measure(tb, study, variant, point, metric, a.runs, "loaded", warmup=0)
            finally:
                for p in hogs:
                    p.terminate()
    finally:
        tb.close()
    cvs: dict[str, float] = {}
    for label, by_name in res.items():
        for name, xs in by_name.items():
            print(f"{label:6s} {name:14s} n={len(xs)} mean {statistics.mean(xs):.4f} cv {cv_pct(xs):.2f}%")
        cvs[label] = max(cv_pct(xs) for xs in by_name.values())
    for name in res["quiet"]:
        shift_pct = 100 * (statistics.mean(res["loaded"][name]) / statistics.mean(res["quiet"][name]) - 1)
        print(f"loaded vs quiet, {name}: {shift_pct:+.2f}% of the mean")
    print(f"A/A cv: {cvs['quiet']:.2f}% quiet, {cvs['loaded']:.2f}% loaded")


if __name__ == "__main__":
    main()
