"""The one-clock factor of the qemu testbed: how much slower a busy pCPU runs, in guest time,
when another pCPU is busy too.

Under icount (`-icount shift=N`) QEMU runs all vCPUs on one host thread, round-robin, and
advances virtual time with every instruction of every vCPU: with two pCPUs busy each should
run at about half the speed of one. Under multi-threaded TCG each vCPU has a host thread, so
the factor depends on free host cores instead. Comparisons whose variants keep different
numbers of pCPUs busy inherit this factor (docs/qemu-testbed.md, "One clock for all vCPUs").

Per time mode: one boot of the virtual host (2 pCPUs, S1's stock Xen), dom0 (one vCPU)
pinned to pCPU 0, S1's CPU guest (one busy loop, one vCPU) pinned to pCPU 1. A fixed shell
loop in dom0 is timed inside dom0 (guest time, `date +%s.%N`), `--runs` times with the CPU
guest paused (pCPU 1 idle), then `--runs` times with it running (pCPU 1 busy). The factor is
the mean busy time over the mean idle time. The last line is
`one-clock factor: icount X.XX, multi-threaded Y.YY`.

Needs root, QEMU, the qemu images and the stock source Xen (`make test` builds them).
Usage: .venv/bin/python benchmarks/qemu_clock.py [--runs 3] [--loops 200000] [--modes 5,none]
(about 10 min on a 2-core machine)
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from schedlab import config  # noqa: E402
from schedlab.testbeds.qemu import QemuTestbed  # noqa: E402
from schedlab.workloads import netpair  # noqa: E402
from schedlab.workloads.xl import Domains  # noqa: E402

# a fixed amount of dom0 work, timed in guest time inside dom0
LOOP = 's=$(date +%s.%N); i=0; while [ $i -lt "$1" ]; do i=$((i+1)); done; e=$(date +%s.%N); echo "$s $e"'


def study(shift) -> dict:
    netpair = copy.deepcopy(config.study_of_kind("netperf-pair"))  # the network pair's study (S1's)
    q = netpair["testbeds"]["qemu"]
    q["options"] = {**(q.get("options") or {}), "smp": 2, "icount_shift": shift, "sched_trace": False}
    return netpair


def timed_loop(h, loops: int) -> float:
    out = h.run(["taskset", "-c", "0", "bash", "-c", LOOP, "_", str(loops)], timeout=3600).stdout.split()
    return float(out[1]) - float(out[0])


def one_mode(shift, runs: int, loops: int) -> dict[str, list[float]]:
    s = study(shift)
    tb = QemuTestbed(log=lambda m: print(m, file=sys.stderr, flush=True))
    label = "multi-threaded" if shift is None else f"icount shift={shift}"
    try:
        series, xen = tb._xen_for(s, "fixed")
        if xen is None:
            raise SystemExit(f"qemu_clock: Xen {series} is not built (make test builds it)")
        cfg = tb.config(s)
        vm = tb._ensure_vm(xen, tb.xen_cmdline(s, "fixed"), cfg)
        h, doms = vm.host, Domains(vm.host)
        h.run(["xl", "vcpu-pin", "Domain-0", "all", "0"], timeout=60)
        opts = {**cfg, "guest_pcpu": 1}
        doms.ensure("cpu", netpair.config_text("cpu", opts), opts["guest_timeout_s"])
        res: dict[str, list[float]] = {"idle": [], "busy": []}
        for cond in ("idle", "busy"):
            h.run(["xl", "pause" if cond == "idle" else "unpause", "cpu"], timeout=60)
            state = doms.list().get("cpu", "")
            if ("p" in state) != (cond == "idle"):
                raise SystemExit(
                    f"qemu_clock: the CPU guest is {state!r}, wanted {'paused' if cond == 'idle' else 'running'}"
                )
            for i in range(runs):
                t0 = time.monotonic()
                v = timed_loop(h, loops)
                res[cond].append(v)
                print(
                    f"{label:16s} pCPU1 {cond:4s} run {i + 1}: {v:8.3f} guest s "
                    f"(wall {time.monotonic() - t0:5.1f} s, load {os.getloadavg()[0]:.2f})",
                    flush=True,
                )
        return res
    finally:
        tb.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--loops", type=int, default=200000, help="iterations of dom0's shell loop")
    ap.add_argument("--modes", default="5,none", help="icount shifts and/or 'none' (multi-threaded TCG)")
    a = ap.parse_args()
    print(f"host cores: {os.cpu_count()}; dom0 loop of {a.loops} iterations on pCPU 0", flush=True)
    factors = {}
    for m in a.modes.split(","):
        shift = None if m == "none" else int(m)
        res = one_mode(shift, a.runs, a.loops)
        idle, busy = statistics.mean(res["idle"]), statistics.mean(res["busy"])
        cv = {k: 100 * statistics.stdev(v) / statistics.mean(v) if len(v) > 1 else float("nan") for k, v in res.items()}
        name = "multi-threaded" if shift is None else "icount"
        factors[name] = busy / idle
        print(
            f"{name}: pCPU1 idle {idle:.3f} s (CV {cv['idle']:.2f}%), busy {busy:.3f} s (CV {cv['busy']:.2f}%): "
            f"factor {busy / idle:.2f}",
            flush=True,
        )
    print("one-clock factor: " + ", ".join(f"{k} {v:.2f}" for k, v in factors.items()))


if __name__ == "__main__":
    main()
