"""Speed of the credit1 simulator on the lock workload's 4-VM point (the study of workload kind
ddk-build, S0's; variant base).

Prints simulated events per second of CPU time and simulated seconds per wall second; the last
line is `events/s: N`.  Usage: .venv/bin/python benchmarks/sim_speed.py [--variant base] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from schedlab import config  # noqa: E402
from schedlab.testbeds.sim import SimTestbed, ensure_binary  # noqa: E402


def _one(job):
    sid, variant, point, seed = job
    study = config.load_study(sid)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    SimTestbed().run_once(study, variant, point, seed)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return sid, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def sweep(workers: int) -> None:
    """The whole sim sweep: every study of the study list the sim runs, variant, point, runs +
    warm-up, on `workers` processes."""
    import itertools
    from concurrent.futures import ProcessPoolExecutor

    jobs = []
    for sid in config.load_config()["studies"]:
        st = config.load_study(sid)
        if "sim" not in st["testbeds"] or not st.get("sim_workload"):
            continue
        keys = list(st["axes"])
        n = int(st.get("runs", 1)) + int(st.get("warmup", 0))
        for v in st["variants"]:
            for vals in itertools.product(*[st["axes"][k] for k in keys]):
                for i in range(n):
                    jobs.append((sid, v, dict(zip(keys, vals)), 1000 + i))
    t0 = time.perf_counter()
    per = {}
    with ProcessPoolExecutor(workers) as ex:
        for sid, cpu in ex.map(_one, jobs):
            per[sid] = per.get(sid, 0.0) + cpu
    wall = time.perf_counter() - t0
    for sid, cpu in per.items():
        print(f"sweep {sid}: {cpu:.1f} cpu-s")
    print(f"sweep: {len(jobs)} runs, {sum(per.values()):.1f} simulator cpu-s, wall {wall:.1f} s on {workers} workers")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", default="base")
    ap.add_argument("--vms", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sweep", action="store_true", help="also time the whole sweep of all studies")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    if a.sweep:
        sweep(a.workers)
    binary = ensure_binary()
    study = config.study_of_kind("ddk-build")
    best = None
    for i in range(a.repeat):
        ((_, sc),) = SimTestbed().scenarios(study, a.variant, {"vms": a.vms}, 1000 + i)
        text = json.dumps(sc)
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        res = json.loads(p.stdout)
        ev, simt = res["events"], res["sim_time_s"]
        print(
            f"run {i}: {ev} events, {simt:.1f} simulated s, wall {wall:.3f} s, cpu {cpu:.3f} s, "
            f"{ev / max(cpu, 1e-9) / 1e6:.1f} M events/cpu-s, {simt / wall:.0f} simulated s per wall s"
        )
        rate = ev / max(cpu, 1e-9)
        if best is None or rate > best[0]:
            best = (rate, simt / wall, simt / max(cpu, 1e-9))
    print(
        f"simulated s per wall s: {best[1]:.0f} (per cpu s: {best[2]:.0f}; the S0 build is simulated at "
        f"sim_workload.job_fraction of its length)"
    )
    print(f"events/s: {best[0]:.0f}")


if __name__ == "__main__":
    main()
