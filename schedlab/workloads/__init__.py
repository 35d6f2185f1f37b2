"""What runs for each workload kind: inside a booted Xen host, driven from dom0 over ssh, and,
as a scenario of the credit1 simulator, on the sim testbed (one module holds both).

The qemu testbed's virtual host and the lab testbed's machines run the same code:
a workload gets a `schedlab.host.Host` for dom0, a `Domains` tracker for the guests
it created in this boot, the merged workload options, and the point; it returns a
RunResult. One module per workload kind (the study file's `workload.kind`):

    netpair    S1: VM-I/O (iperf3 + sockperf servers) and VM-CPU pinned to one pCPU,
               the client in dom0 on another pCPU
    lockwork   S0: 1-3 VMs each doing a fixed amount of lock-heavy work in a guest kernel
               module (guest/lockmod/), spin-then-yield lock; completion time, throughput
    lockstorm  S2: k VMs of 2 vCPUs on 2 pCPUs hammering the guest kernel's spinlock for a
               fixed time, PV spinlocks on/off; lock ops/s and p99 lock wait
    bursts     S3: VMs of 2 vCPUs doing CPU bursts and short sleeps (guest/lockmod/, no lock);
               throughput, and vCPU migrations/s from Xen's runstate trace (xentrace.py)
    numamix    S4: VMs with their memory on one node of a 2-node host, no affinity / pinned /
               soft affinity; bursts, sysbench memory, fork+exec latency, and the share of
               run time on the home node from Xen's trace

Besides the testbed options, the options a workload gets carry the variant's guest
settings (`variant_options`): `variant_guest` = the variant's `guest:` block of the study
(e.g. {lock: spin-yield} or {boot: xen_nopvspin}), `variant` = its name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schedlab.core.testbed import RunFailed, RunResult

from . import bursts, lockstorm, lockwork, netpair, numamix, xl

# kind -> the module that holds it (each names its kind, KIND): its Xen run (`run(host, domains,
# options, point, seed, booted) -> RunResult`) and its simulator scenario (`sim_scenarios`, `sim_metrics`)
KINDS = {m.KIND: m for m in (netpair, lockwork, lockstorm, bursts, numamix)}
WORKLOADS: dict[str, Callable[..., RunResult]] = {kind: m.run for kind, m in KINDS.items()}

# Options every workload understands, with defaults; testbeds merge the study's
# testbeds.<tb>.options over these.
DEFAULTS: dict[str, Any] = {
    **netpair.DEFAULTS,
    **lockwork.DEFAULTS,
    **lockstorm.DEFAULTS,
    **bursts.DEFAULTS,
    **numamix.DEFAULTS,
}


def study_options(testbed: str, base: dict[str, Any], known: dict[str, Any], study: dict) -> dict[str, Any]:
    """A testbed's options for a study: `base` (its defaults and constructor arguments)
    overridden by the study's testbeds.<testbed>.options (only keys of `known`; dicts
    merged), and the study's workload.weights unless the options set weights."""
    from ..config import ConfigError

    cfg = dict(base)
    over = ((study.get("testbeds") or {}).get(testbed) or {}).get("options") or {}
    unknown = sorted(set(over) - set(known))
    if unknown:
        raise ConfigError(
            f"{study.get('_file', study.get('study'))}: field testbeds.{testbed}.options: "
            f"unknown option(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    for k, v in over.items():
        cfg[k] = {**cfg[k], **v} if isinstance(cfg.get(k), dict) and isinstance(v, dict) else v
    wl = study.get("workload") or {}
    if isinstance(wl.get("weights"), dict) and "weights" not in over:
        cfg["weights"] = {**cfg["weights"], **wl["weights"]}
    return cfg


def variant_options(study: dict, variant: str) -> dict[str, Any]:
    """The per-variant part of a workload's options (not testbed options: a study cannot
    set them under testbeds.<tb>.options)."""
    v = (study.get("variants") or {}).get(variant) or {}
    return {
        "variant": variant,
        "variant_guest": dict(v.get("guest") or {}),
        # credit1 parameters set at run time, before the workload (`run_variant`)
        "variant_sched_credit": dict((v.get("xen") or {}).get("sched_credit") or {}),
    }


def sim_model(kind: str | None):
    """The simulator's model of a workload kind: (sim_scenarios, sim_metrics) of its module,
    sim_scenarios(study, variant, sim, wl, point, seed) -> [(tag, scenario)] and
    sim_metrics(study, results, point, wl) -> (metrics, samples). None for a kind the sim does
    not model."""
    m = KINDS.get(kind)
    return (m.sim_scenarios, m.sim_metrics) if m is not None and hasattr(m, "sim_scenarios") else None


def get(kind: str | None) -> Callable[..., RunResult]:
    """The workload of a study kind, preceded by the variant's run-time Xen settings."""
    try:
        work = WORKLOADS[kind]
    except KeyError:
        raise RunFailed(
            f"no workload for kind {kind!r} on Xen hosts (available: {', '.join(sorted(WORKLOADS))})"
        ) from None

    def run_variant(h, doms, opts: dict[str, Any], point: dict, seed: int, booted: dict) -> RunResult:
        params = opts.get("variant_sched_credit") or {}
        took = xl.set_sched_credit(h, params) if params else None
        res = work(h, doms, opts, point, seed, booted)
        if took is not None:
            res.counters["sched_credit_set"] = took  # what credit1 ran with, read back before the run
        return res

    return run_variant
