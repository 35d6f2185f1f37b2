"""A/A noise of S1's TCP stream under icount, and whether host-timed I/O causes it.

Under icount (`-icount shift=N,sleep=off`) a guest's time depends only on the instructions it
runs, except where something timed by the host enters: packets from this machine (the ssh
session that drives the run, its keepalives every few seconds) and disk completions. S1's
CPU-bound work repeats to well under 1 % this way, but its stream's throughput varied
23-33 % (CV) between identical runs of one boot (docs/qemu-measurements.md, "S1 under icount").

One boot of S1's virtual host (its qemu options, the `fixed` Xen), the I/O guest alone
(`mode: alone`). Then `--runs` identical iperf3 streams (S1's client command, from dom0, of
`--duration` guest seconds) in each of two conditions, alternating:

  ssh        the client runs in the ssh command that waits for it, as S1's runs do
  traced     as ssh, with xentrace recording every scheduler event in dom0 around it, as
             S1's runs with `sched_trace` do (dom0's one vCPU then runs netback, the
             client and xentrace)
  detached   the client starts in the background (nohup), this script closes its ssh
             connection (no keepalives) and waits silently for `--quiet-wait` seconds of
             wall time, then reconnects and reads the result; nothing from this machine
             reaches the virtual host while the stream runs

Each stream's throughput (Mbit/s, iperf3's receiver side) is printed; the last line is
`stream A/A cv: X% ssh, ...` for the conditions run (`--conditions`, default ssh,detached). If
detached is well below ssh, host-timed I/O in the window is the cause and S1's runs should
detach; if traced is well above ssh, the trace is.

Needs root, QEMU, the qemu images and S1's Xen built (`make test` builds them).
Usage: .venv/bin/python benchmarks/qemu_stream_noise.py [--runs 5] [--duration 10] [--quiet-wait 120]
(about 25 min at shift 5 on a 2-core machine)
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from schedlab import config  # noqa: E402
from schedlab.testbeds.qemu import QemuTestbed  # noqa: E402
from schedlab.testbeds.qemu_host import machine  # noqa: E402
from schedlab.workloads import netpair  # noqa: E402
from schedlab.workloads.xentrace import SCHED_ALL_MASK, Trace  # noqa: E402

OUT = "/run/schedlab-stream.json"  # dom0's /run is tmpfs: no disk I/O for the result either


def iperf_argv(duration: int) -> list[str]:
    return [
        "taskset",
        "-c",
        "0",
        "iperf3",
        "-c",
        netpair.IO_IP,
        "-p",
        str(netpair.IPERF_PORT),
        "-t",
        str(duration),
        "-J",
    ]


def mbps(text: str) -> float:
    j = json.loads(text)
    if "error" in j:
        raise RuntimeError(f"iperf3: {j['error']}")
    return j["end"]["sum_received"]["bits_per_second"] / 1e6


def via_ssh(h, duration: int) -> float:
    return mbps(h.run(iperf_argv(duration), timeout=duration * 60 + 120).stdout)


def detached(h, duration: int, quiet_wait: float) -> float:
    cmd = " ".join(iperf_argv(duration))
    h.run(["sh", "-c", f"rm -f {OUT} {OUT}.done; (nohup {cmd} > {OUT} 2>&1; touch {OUT}.done) >/dev/null 2>&1 &"])
    h.close()  # the shared connection and its keepalives end here
    time.sleep(quiet_wait)
    deadline = time.monotonic() + duration * 60 + 600
    while h.run(["test", "-e", f"{OUT}.done"], check=False).returncode != 0:
        if time.monotonic() > deadline:
            raise RuntimeError("the detached iperf3 did not finish")
        time.sleep(15)
    return mbps(h.run(["cat", OUT]).stdout)


def traced(h, duration: int, pages: int) -> float:
    with Trace(h, pages=pages, mask=SCHED_ALL_MASK):
        return via_ssh(h, duration)


def cv_pct(xs: list[float]) -> float:
    return 100 * statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duration", type=int, default=10, help="guest seconds per stream")
    ap.add_argument("--quiet-wait", type=float, default=120, help="wall seconds to wait in silence (detached)")
    ap.add_argument("--conditions", default="ssh,detached", help="comma-separated: ssh, traced, detached")
    a = ap.parse_args()
    conds = [c for c in a.conditions.split(",") if c]
    unknown = sorted(set(conds) - {"ssh", "traced", "detached"})
    if unknown:
        ap.error(f"--conditions: unknown {', '.join(unknown)}")
    netpair = copy.deepcopy(config.study_of_kind("netperf-pair"))  # the network pair's study (S1's)
    netpair["testbeds"]["qemu"]["options"] = {**netpair["testbeds"]["qemu"]["options"], "sched_trace": False}
    tb = QemuTestbed(log=lambda m: print(m, file=sys.stderr, flush=True))
    m = machine(tb.config(netpair))
    print(f"qemu options: icount_shift {m.icount_shift}, smp {m.smp}", flush=True)
    try:
        # boots, creates the I/O guest and pauses the CPU guest: S1's alone point as measured
        tb.run_once(netpair, "fixed", {"mode": "alone"}, seed=1)
        h = tb._vm.host
        got: dict[str, list[float]] = {c: [] for c in conds}
        pages = int(tb.config(netpair)["trace_pages"])
        via_ssh(h, a.duration)  # warm-up stream
        for i in range(a.runs):
            for cond in conds:
                t0 = time.monotonic()
                if cond == "ssh":
                    v = via_ssh(h, a.duration)
                elif cond == "traced":
                    v = traced(h, a.duration, pages)
                else:
                    v = detached(h, a.duration, a.quiet_wait)
                got[cond].append(v)
                print(
                    f"{cond:8s} run {i + 1}: {v:8.2f} Mbit/s (wall {time.monotonic() - t0:5.1f} s, "
                    f"load {os.getloadavg()[0]:.2f})",
                    flush=True,
                )
        for cond, xs in got.items():
            print(f"{cond:8s} mean {statistics.mean(xs):8.2f} Mbit/s, cv {cv_pct(xs):.1f} %", flush=True)
        print("stream A/A cv: " + ", ".join(f"{cv_pct(got[c]):.1f}% {c}" for c in conds))
    finally:
        tb.close()


if __name__ == "__main__":
    main()
