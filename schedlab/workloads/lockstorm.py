"""S2's workload, virtualised ("lock-storm"): the ticketlock storm under vCPU overcommit,
PV spinlocks off vs on.

Point `overcommit` k = k VMs of `guest_vcpus` (2) vCPUs each on the host's 2 pCPUs (k
vCPUs per pCPU), all running guest/lockmod/lockmod.ko at the same time for
`storm_duration_s`: one kernel thread per vCPU, compute (storm_compute_loops) -> lock ->
hold (storm_hold_loops) -> unlock on a spinlock_t (`storm_flavour: kernel`), i.e. the
guest kernel's qspinlock. The variant's `guest.boot` goes on the guest kernel command
line: `xen_nopvspin` gives the native queued lock (a waiter spins however long the
holder or an earlier waiter is descheduled), without it the PV qspinlock (spin, then
block in SCHEDOP_poll until the unlocker kicks the event channel). Each guest reports
whether PV spinlocks were on (`pvspin=` in its result line; checked against the boot
option).

Metrics:
    ops_per_s     lock acquisitions per second, summed over the VMs
    wait_p99_us   99th percentile of the lock wait over all acquisitions of all VMs (the
                  VMs' histograms merged; upper bucket edge, within 12.5 %)

The mechanics (guest start and reuse, console trigger, result lines) are those of
lockwork (S0); see schedlab/workloads/lockwork.py.
"""

from __future__ import annotations

from typing import Any

from schedlab.core.testbed import RunFailed, RunResult

from ..host import Host
from .lockwork import guests_to_boot, hist_percentile, merge_hists, module_params, run_lock_vms, vm_names
from .scenario import dom0_domain, need, sub_seed, xen_options
from .xentrace import SCHED_ALL_MASK, Trace, traced_events
from .xl import Domains

# the study files' workload.kind this module runs (workloads.KINDS); its errors name it
KIND = "lock-storm"

DEFAULTS: dict[str, Any] = {
    "storm_duration_s": 12,  # fixed duration of one measurement
    # Busy work in loop iterations (~1 ns each under TCG on an idle host; see lockwork).
    "storm_compute_loops": 20000,  # sim: exp, mean 20 us between acquisitions of the hot lock
    "storm_hold_loops": 2000,  # sim: exp, mean 2 us
    "storm_flavour": "kernel",  # the guest kernel's spinlock_t; "ticket" = the module's own
}


def run(h: Host, doms: Domains, opts: dict, point: dict, seed: int, booted: dict) -> RunResult:
    k = int(point.get("overcommit", 1))
    if k < 1:
        raise RunFailed(f"{KIND}: overcommit={k}")
    guest = opts.get("variant_guest") or {}
    boot = str(guest.get("boot") or "")
    flavour = opts["storm_flavour"]
    dur = float(opts["storm_duration_s"])
    params = module_params(
        opts,
        flavour,
        duration_ms=int(dur * 1000),
        compute_loops=opts["storm_compute_loops"],
        hold_loops=opts["storm_hold_loops"],
    )
    names = vm_names(k)
    booted_names = guests_to_boot(doms, opts, k)
    counters: dict[str, Any] = {
        "seed": seed,
        "xen_scheduler": booted.get("xen_scheduler"),
        "flavour": flavour,
        "guest_boot": boot,
        "variant_guest_lock": guest.get("lock"),
        "module_params": params,
        "vms_booted": len(booted_names),
        "guest_vcpus": int(opts["guest_vcpus"]),
        "vcpus_per_pcpu": k,
    }
    # sched_trace: every scheduler event of the storm, as S0's (counters.sched_events)
    trace = Trace(h, pages=int(opts["trace_pages"]), mask=SCHED_ALL_MASK) if opts["sched_trace"] else None
    results = run_lock_vms(
        h, doms, opts, booted_names, names, params, boot, seed, counters, during=trace and (lambda: trace)
    )
    if trace is not None:
        counters["sched_events"] = traced_events(trace, doms, names, KIND, opts)
    want_pv = 0 if "xen_nopvspin" in boot.split() else 1
    for n, r in results.items():
        if flavour == "kernel" and r.get("pvspin") not in (want_pv, -1):
            raise RunFailed(f"{KIND}: {n} reports pvspin={r.get('pvspin')}, but boot options {boot!r} want {want_pv}")
    pooled = merge_hists(list(results.values()))
    wmax = max(r["wait_max_ns"] for r in results.values())
    p99 = hist_percentile(pooled, 0.99, wmax)
    counters["wait_pooled_ns"] = {
        "p50": hist_percentile(pooled, 0.5, wmax),
        "p90": hist_percentile(pooled, 0.9, wmax),
        "p99": p99,
        "max": wmax,
        "n": sum(pooled.values()),
    }
    counters["steal_ticks"] = {n: (r.get("guest_ticks") or {}).get("steal") for n, r in results.items()}
    ops_per_s = sum(r["ops"] / (r["elapsed_ns"] / 1e9) for r in results.values())
    return RunResult(
        metrics={"ops_per_s": round(ops_per_s, 2), "wait_p99_us": round(p99 / 1000, 3)},
        counters=counters,
        samples={
            "ops_per_s": [round(r["ops"] / (r["elapsed_ns"] / 1e9), 2) for r in results.values()],
            "wait_p99_us": [round(r["wait_p99_ns"] / 1000, 3) for r in results.values()],
        },
    )


# ---------------------------------------------------------------- the simulator's scenario of this workload

# the tag of the scenario's sub-seed, as every run of this model since the first has had it
# (the name of the study that first had this workload): another tag would change every run
SIM_SEED_TAG = "s2"


def sim_scenarios(study, variant, sim, wl, point, seed):
    """The simulator's scenarios of a run of this workload (lock-storm): [(tag, scenario)]."""
    k = int(point["overcommit"])
    lock = dict(wl["lock"])
    lock["type"] = need(sim, "lock", f"variants.{variant}.sim")
    w = {"kind": "loop", "compute_us": wl["compute_us"], "lock": lock, "io": wl["io"]}
    vpv = int(wl["vcpus_per_vm"])
    ncpu = wl["host"]["sockets"] * wl["host"]["cores_per_socket"] * wl["host"].get("threads_per_core", 1)
    nvm = max(1, (k * ncpu) // vpv)
    doms = [{"name": f"vm{i}", "vcpus": vpv, "workload": w} for i in range(nvm)]
    dom0 = dom0_domain(wl, 1, ncpu)  # off unless sim_workload.dom0 (the validation's mirrors)
    if dom0 is not None:
        doms.append(dom0)
    return [
        (
            "storm",
            {
                "seed": sub_seed(seed, SIM_SEED_TAG),
                "duration_s": float(wl["duration_s"]),
                "warmup_s": float(wl["warmup_s"]),
                "host": wl["host"],
                "xen": xen_options(sim, wl.get("xen")),
                "domains": doms,
            },
        )
    ]


def sim_metrics(study, res, point, wl):
    """The study's metrics (and the per-VM samples behind them) from the simulator's results."""
    r = res["storm"]
    vms = [d for d in r["domains"] if d["name"] != "dom0"]
    return (
        {"ops_per_s": sum(d["ops_per_s"] for d in vms), "wait_p99_us": r["lock_wait"]["p99_us"]},
        {"ops_per_s": [d["ops_per_s"] for d in vms]},
    )
