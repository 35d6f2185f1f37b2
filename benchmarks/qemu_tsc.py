"""The trace's clock on the qemu testbed: how many TSC ticks Xen's trace advances per second
of guest time, against the TSC rate Xen calibrated at boot.

xentrace stamps its records with the TSC, so dom0's run intervals in the records
(`counters.sched_events.dom0`, docs/qemu-measurements.md) are in ticks. Under icount the guest's
TSC need not tick at the rate Xen calibrated, so this measures the rate directly: one boot of
S2's virtual host (stock Xen, S2's qemu options: icount shift 5, Xen's trace on), then
`--runs` traced storms at overcommit 2. Per run: Xen's calibrated rate
(`counters.booted.cpu_mhz`), the ticks the trace spans (`sched_events.tsc_span`) over the
guest seconds it spans (`trace_window_guest_s`, dom0's clock), and dom0's median run interval
in ticks and, at the measured rate, in microseconds. The last line is
`trace TSC rate: X MHz of guest time (Xen calibrated Y MHz)`.

Needs root, QEMU and the qemu images (`python -m schedlab.builds.images all`).
Usage: .venv/bin/python benchmarks/qemu_tsc.py [--runs 2] [--variant pv]
(about 6 min on a 2-core machine)
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from schedlab import config  # noqa: E402
from schedlab.testbeds.qemu import QemuTestbed  # noqa: E402


def median_log2_ticks(hist: dict[str, int]) -> int:
    """The power of two dom0's median run interval falls in (key k: 2^k to 2^(k+1) - 1 ticks)."""
    order = sorted((int(k), n) for k, n in hist.items())
    half, seen = sum(n for _, n in order) / 2, 0
    for k, n in order:
        seen += n
        if seen >= half:
            return k
    raise ValueError("empty histogram")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="traced storms in the one boot")
    ap.add_argument("--variant", default="pv", help="variant of the lock-storm study (the lock the guests use)")
    a = ap.parse_args()
    storm = config.study_of_kind("lock-storm")  # the lock storm's study (S2's)
    tb = QemuTestbed(log=lambda m: print(m, file=sys.stderr, flush=True))
    rates, calibrated = [], set()
    try:
        for i in range(a.runs):
            r = tb.run_once(storm, a.variant, {"overcommit": 2}, seed=1000 + i)
            mhz = r.counters["booted"].get("cpu_mhz")
            ev, guest_s = r.counters["sched_events"], r.counters["trace_window_guest_s"]
            rate = ev["tsc_span"] / guest_s / 1e6
            rates.append(rate)
            calibrated.add(mhz)
            k = median_log2_ticks(ev["dom0"]["run_ticks_log2"])
            print(
                f"run {i + 1}: Xen calibrated {mhz} MHz; trace {ev['tsc_span']} ticks over {guest_s} guest s "
                f"= {rate:.1f} MHz; dom0 {ev['dom0']['runs']} runs, median 2^{k} ticks "
                f"= {2**k / rate:.0f}-{2 ** (k + 1) / rate:.0f} us at that rate",
                flush=True,
            )
    finally:
        tb.close()
    print(
        f"trace TSC rate: {statistics.mean(rates):.1f} MHz of guest time (Xen calibrated {', '.join(map(str, sorted(calibrated)))} MHz)"
    )


if __name__ == "__main__":
    main()
