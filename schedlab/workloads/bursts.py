"""S3's workload ("specjbb-like"): CPU bursts and short waits in every VM, with the
hypervisor's vCPU migrations counted from its own trace.

Point `vms` = how many VMs of `guest_vcpus` (2) vCPUs run at once. Each runs
guest/lockmod/lockmod.ko with flavour `none` for `burst_duration_s`: one kernel thread
per vCPU loops over a compute burst (`burst_compute_loops` busy-loop iterations, ~1 ms
under TCG; the sim's exp mean 1000 us) and then, with probability
`burst_sleep_permille`/1000 (the sim's io p = 0.5), sleeps for a time uniform in
[0.5, 1.5] x `burst_sleep_us` (the sim's exp mean 1000 us). A sleeping vCPU blocks in
Xen; when its timer wakes it, credit1 decides where it runs, and whether a pCPU with
nothing better to do may steal it from another's runqueue is what
`vcpu_migration_delay` changes (csched_runq_steal -> __csched_vcpu_is_migrateable ->
__csched_vcpu_is_cache_hot in xen/common/sched/credit.c).

With 2 VMs on 2 pCPUs the demand is 4 vCPUs x ~2/3 busy = ~2.7 pCPUs: overloaded by a
third, like the sim's 24 VMs (48 vCPUs, 2/3 busy) on 24 pCPUs.

Metrics (the sim's):
    throughput   work units (bursts) per second, summed over the VMs
    migrations   guest vCPU migrations per second of the run: starts on a pCPU other
                 than the vCPU's previous one, from Xen's runstate trace (xentrace in
                 dom0 from just before the trigger until every result is in), divided by
                 the run's duration (the mean of the VMs' measured times)
    migrations_per_kunit  the same migrations per 1000 bursts done (under icount the
                 per-second rates move with how many pCPUs idle; this one does not)

TCG has no caches to refill, so the throughput cost of a migration (the reason for the
delay) does not exist here; what the qemu testbed can show is the scheduler's side, the
migration rate, and that the throughput does not depend on it without caches.
"""

from __future__ import annotations

from typing import Any

from schedlab.core.testbed import RunFailed, RunResult

from ..host import Host
from .lockwork import guests_to_boot, module_params, point_vms, run_lock_vms, vm_names
from .scenario import dom0_domain, ncpus, sub_seed, xen_options
from .xentrace import SCHED_ALL_MASK, Trace, no_lost, placement, traced_events
from .xl import Domains, parse_sched_credit

# the study files' workload.kind this module runs (workloads.KINDS); its errors name it
KIND = "specjbb-like"

DEFAULTS: dict[str, Any] = {
    "burst_duration_s": 10,  # fixed duration of one measurement
    "burst_compute_loops": 1000000,  # ~1 ms of busy work at ~1 loop/ns (TCG, idle host)
    "burst_sleep_us": 1000,  # mean short wait
    "burst_sleep_permille": 500,  # probability of a wait after a burst
    "trace_pages": 256,  # xentrace buffer per pCPU (4 KiB pages); a lost record fails the run
}


def run(h: Host, doms: Domains, opts: dict, point: dict, seed: int, booted: dict) -> RunResult:
    vms = point_vms(point, KIND)
    dur = float(opts["burst_duration_s"])
    params = module_params(
        opts,
        "none",
        duration_ms=int(dur * 1000),
        compute_loops=opts["burst_compute_loops"],
        hold_loops=1,
        sleep_us=int(opts["burst_sleep_us"]),
        sleep_permille=int(opts["burst_sleep_permille"]),
    )
    names = vm_names(vms)
    booted_names = guests_to_boot(doms, opts, vms)
    counters: dict[str, Any] = {
        "seed": seed,
        "xen_scheduler": booted.get("xen_scheduler"),
        "xen_commandline": booted.get("xen_commandline"),
        "module_params": params,
        "vms_booted": len(booted_names),
        "guest_vcpus": int(opts["guest_vcpus"]),
    }
    # sched_trace: every scheduler event (one trace: the runstate changes are part of it)
    trace = Trace(h, pages=int(opts["trace_pages"]), **({"mask": SCHED_ALL_MASK} if opts["sched_trace"] else {}))
    results = run_lock_vms(h, doms, opts, booted_names, names, params, "", seed, counters, during=lambda: trace)
    ids = {i: n for i, n in doms.ids().items() if n in names}
    where = no_lost(placement(trace.data, ids), KIND, opts)
    if opts["sched_trace"]:
        counters["sched_events"] = traced_events(trace, doms, names, KIND, opts, where)
    if not where["per_vcpu"]:
        raise RunFailed(
            f"{KIND}: the trace ({len(trace.data)} bytes, {where['records']} records) has no "
            f"runstate change of {', '.join(names)}"
        )
    secs = sum(r["elapsed_ns"] for r in results.values()) / len(results) / 1e9
    # What credit1 says it uses (xl sched-credit: "Cpupool Pool-0: tslice=30ms ratelimit=1000us
    # migration-delay=1000us"), beside the boot option the testbed checked.
    pools = list(parse_sched_credit(counters.get("sched_credit") or "").values())
    counters["migration_delay_us"] = pools[0]["migration_delay_us"] if pools else None
    counters["trace"] = {k: where[k] for k in ("records", "lost_records", "pcpus", "tsc_span")}
    counters["trace"]["bytes"] = len(trace.data)
    counters["per_vcpu"] = where["per_vcpu"]
    counters["migrations_total"] = where["migrations"]
    counters["run_seconds"] = round(secs, 4)
    counters["sleeps"] = {n: r.get("sleeps") for n, r in results.items()}
    counters["steal_ticks"] = {n: (r.get("guest_ticks") or {}).get("steal") for n, r in results.items()}
    rates = {n: r["ops"] / (r["elapsed_ns"] / 1e9) for n, r in results.items()}
    return RunResult(
        metrics={
            "throughput": round(sum(rates.values()), 3),
            "migrations": round(where["migrations"] / secs, 3),
            # per executed work: what icount's one clock does not distort (docs/qemu-testbed.md)
            "migrations_per_kunit": round(1000 * where["migrations"] / sum(r["ops"] for r in results.values()), 4),
        },
        counters=counters,
        samples={"throughput": [round(rates[n], 3) for n in names]},
    )


# ---------------------------------------------------------------- the simulator's scenario of this workload

# the tag of the scenario's sub-seed, as every run of this model since the first has had it
# (the name of the study that first had this workload): another tag would change every run
SIM_SEED_TAG = "s3"


def sim_scenarios(study, variant, sim, wl, point, seed):
    """The simulator's scenarios of a run of this workload (specjbb-like): [(tag, scenario)]."""
    n = int(point["vms"])
    w = dict(wl["workload"], kind="loop")
    doms = [{"name": f"vm{i}", "vcpus": int(wl["vcpus_per_vm"]), "workload": w} for i in range(n)]
    dom0 = dom0_domain(wl, 1, ncpus(wl["host"]))  # off unless sim_workload.dom0 (the validation's mirrors)
    if dom0 is not None:
        doms.append(dom0)
    return [
        (
            "jbb",
            {
                "seed": sub_seed(seed, SIM_SEED_TAG),
                "duration_s": float(wl["duration_s"]),
                "warmup_s": float(wl["warmup_s"]),
                "host": wl["host"],
                "cache": wl["cache"],
                "xen": xen_options(sim, wl.get("xen")),
                "domains": doms,
            },
        )
    ]


def sim_metrics(study, res, point, wl):
    """The study's metrics (and the per-VM samples behind them) from the simulator's results."""
    r = res["jbb"]
    scale = float(wl.get("ops_scale", 1.0))
    vms = [d for d in r["domains"] if d["name"] != "dom0"]
    return (
        {
            "throughput": scale * sum(d["ops_per_s"] for d in vms),
            "migrations": sum(d["migrations"] for d in vms) / r["measured_s"],
        },
        {"throughput": [scale * d["ops_per_s"] for d in vms]},
    )
