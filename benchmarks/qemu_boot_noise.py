"""Noise across fresh boots under icount, alone and two side by side, and the boots per hour
each way: may independent boots of a campaign run as parallel jobs?

Each boot runs S0's base variant at one VM (a CPU-bound lock run in guest time, --ops
acquisitions) --runs times. First --boots boots one after another ("alone"), then --boots boots
as pairs started together ("side by side", two QEMUs on the host at once). Under icount a
boot's guest time does not follow the host's load (benchmarks/qemu_noise.py), so the per-boot
means of the two conditions should agree: the script prints both conditions' mean and
across-boot CV, their difference with Welch's interval on the per-boot values, and the wall
time per boot (boots per hour). Host load is in every line. It measures only (no records).

The last line is `side by side vs alone: D % [lo, hi] (Welch, per-boot values); boots per hour:
alone A, side by side S`. Needs root, QEMU and the cached images (yield-noop Xen build).
Usage: .venv/bin/python benchmarks/qemu_boot_noise.py [--boots 4] [--runs 2] [--ops 30000]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics as stt
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from schedlab import config, stats  # noqa: E402
from schedlab.testbeds.qemu import QemuTestbed  # noqa: E402


def lock_study_one_vm(ops: int) -> dict:
    """The lock workload's study (workload kind ddk-build: S0's) booting one guest."""
    study = copy.deepcopy(config.study_of_kind("ddk-build"))
    opts = dict(study["testbeds"]["qemu"]["options"])
    # timeouts are host wall time: generous, as a loaded host slows guest boots (not guest time)
    opts.update(lock_ops=ops, lock_vms_booted=1, sched_trace=False, guest_timeout_s=900, lock_timeout_s=1800)
    study["testbeds"]["qemu"]["options"] = opts
    return study


def one_boot(study: dict, runs: int, seed: int, out: list, tag: str) -> None:
    """Boot afresh, run `runs` times; append (tag, per-boot mean throughput, wall s, loads)."""
    tb = QemuTestbed(build=False)
    t0 = time.monotonic()
    try:
        vals, loads = [], []
        for i in range(runs):
            r = tb.run_once(study, "base", {"vms": 1}, seed=seed + i)
            vals.append(r.metrics["throughput"])
            loads.append(os.getloadavg()[0])
        out.append((tag, stt.mean(vals), time.monotonic() - t0, loads, vals))
    finally:
        tb.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--boots", type=int, default=4, help="boots per condition (side by side: in pairs)")
    ap.add_argument("--runs", type=int, default=2, help="runs per boot")
    ap.add_argument("--ops", type=int, default=30000, help="lock acquisitions per run")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("qemu_boot_noise: needs root (QEMU images)", file=sys.stderr)
        return 1
    study = lock_study_one_vm(a.ops)
    res: list = []
    t_alone = time.monotonic()
    for b in range(a.boots):
        one_boot(study, a.runs, 100 * b, res, "alone")
        tag, m, wall, loads, vals = res[-1]
        print(
            f"alone boot {b + 1}: {m:.2f} builds/100000 s ({', '.join(f'{v:.2f}' for v in vals)}), "
            f"{wall:.0f} s, load {min(loads):.1f}-{max(loads):.1f}",
            flush=True,
        )
    t_alone = time.monotonic() - t_alone
    t_pair = time.monotonic()
    for p in range(-(-a.boots // 2)):
        threads = [
            threading.Thread(target=one_boot, args=(study, a.runs, 1000 + 100 * (2 * p + k), res, f"pair{p + 1}"))
            for k in range(2)
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        for tag, m, wall, loads, vals in res[-2:]:
            print(
                f"side by side {tag}: {m:.2f} ({', '.join(f'{v:.2f}' for v in vals)}), {wall:.0f} s, "
                f"load {min(loads):.1f}-{max(loads):.1f}",
                flush=True,
            )
    t_pair = time.monotonic() - t_pair
    alone = [m for tag, m, *_ in res if tag == "alone"]
    pair = [m for tag, m, *_ in res if tag != "alone"]
    for name, xs in (("alone", alone), ("side by side", pair)):
        cv = 100 * stt.stdev(xs) / stt.mean(xs) if len(xs) > 1 else float("nan")
        print(f"{name}: {len(xs)} boots, mean {stt.mean(xs):.2f}, across-boot CV {cv:.2f} %")
    c = stats.compare(alone, pair, welch=True)
    lo, hi = c.pct - abs(c.pct_err), c.pct + abs(c.pct_err)
    per_h_alone = 3600 * len(alone) / t_alone
    per_h_pair = 3600 * len(pair) / t_pair
    print(
        f"side by side vs alone: {c.pct:+.2f} % [{lo:+.2f}, {hi:+.2f}] (Welch, per-boot values, p={c.p:.2g}); "
        f"boots per hour: alone {per_h_alone:.1f}, side by side {per_h_pair:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
