"""S4's workload ("numa-mix"): VMs whose memory sits on one node of a 2-node host, under
three placement policies, running three benchmarks one after the other; where their
vCPUs ran, from Xen's trace.

The host is the qemu testbed with `numa_nodes: 2` (QEMU -numa: pCPUs and memory split
evenly; Xen reads the SRAT, `xl info -n` shows it). Point `vms` = how many VMs of
`guest_vcpus` (2) vCPUs run the benchmarks at once; `lock_vms_booted` of them are booted
(idle ones stay blocked on their console, as in S0).

Placement (the sim's model, `sim_scenarios` below): guest i's home node is
(i - 1) mod nodes. Every guest is created with `cpus_soft="node:<home>"`, so libxl gives
the domain that node affinity and Xen allocates all its memory there (checked per run from
`xl debug-keys u`, the memory of each domain per node; with a hard `cpus="node:<home>"`
Xen 4.17 spread the memory over both nodes or put it all on the other one). Memory placement is thus the same
for every variant; the variant (its `guest: {placement: ...}`) then sets the vCPUs'
affinity at run time, `xl vcpu-pin <vm> all <hard> <soft>`:

    none     all / all            no affinity: credit1 runs a vCPU anywhere
    pinned   node:<home> / all    static pinning to the home node's pCPUs
    soft     all / node:<home>    soft affinity (Xen >= 4.5's form of 4.3's node affinity):
                                  credit1's two-step balancing (csched_runq_steal's
                                  CSCHED_BALANCE_SOFT_AFFINITY step, then hard) prefers the
                                  home node but may run elsewhere

Because placement is applied to running guests, all variants share one boot of the
guests (and of Xen): the comparison is paired within a boot.

Benchmarks, each run in all the point's VMs at once (dom0 triggers them on the consoles,
guest/guest-init.sh), each with its own xentrace:

    bursts      specjbb-like: guest/lockmod/ flavour none, compute bursts of
                `numa_burst_loops` and a sleep of ~`numa_burst_sleep_us` after each, for
                `numa_phase_s`; work units/s per VM (mean over VMs)
    sysbench    `sysbench memory` (Debian's, copied into the guest initramfs) with
                `numa_sysbench_threads` threads for `numa_phase_s`, parsed by the
                sysbench_memory pack's parser; MiB/s per VM (mean over VMs)
    lmbench     `forkexec` (schedlab/packs/forkexec.c, static) with
                `numa_forkexec_iterations` iterations, parsed by the forkexec pack's
                parser; median fork+exec+exit+wait latency per VM, us (mean over VMs)
    home_share  % of the guests' vCPU run time (over the three traces) spent on a pCPU of
                the VM's home node (run time per pCPU from xentrace.placement; pCPU ->
                node from `xl info -n`)

The load per VM is about 2/3 pCPU (bursts: 2 vCPUs x 1/3 busy) or one pCPU (sysbench with
one thread, forkexec): 2 VMs about fill the 2 pCPUs, 6 overload them 2-3x, the sim's
"not overloaded" and "overloaded" cases. TCG emulates no remote-memory cost: a vCPU away
from its memory runs as fast as at home, so the throughput effects of locality are the
sim's and the lab's to show; what this testbed shows is where the scheduler ran the vCPUs.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from schedlab.core.testbed import RunFailed, RunResult

from ..config import ConfigError
from ..host import Host
from ..packs.base import PackError
from ..packs.forkexec import PACK as FORKEXEC
from ..packs.sysbench import MEMORY as SYSBENCH_MEMORY
from .lockwork import (
    GUEST_TICKS,
    ensure_lock_vms,
    guests_to_boot,
    module_params,
    parse_result,
    point_vms,
    trigger,
    vm_names,
)
from .scenario import dom0_domain, need, node_cpus, placement_map, sub_seed, xen_options
from .xentrace import SCHED_ALL_MASK, Trace, no_lost, placement, sum_events, traced_events
from .xl import Domains

# the study files' workload.kind this module runs (workloads.KINDS); its errors name it
KIND = "numa-mix"

DEFAULTS: dict[str, Any] = {
    "numa_phase_s": 10,  # bursts and sysbench: seconds each
    "numa_burst_loops": 1000000,  # ~1 ms of busy work per burst under TCG (sim: exp mean 1000 us)
    "numa_burst_sleep_us": 2000,  # then a sleep of 0.5-1.5x this: ~1/3 busy per vCPU
    "numa_sysbench_threads": 1,  # per VM: one busy vCPU (2 VMs fill the 2 pCPUs)
    "numa_sysbench_block": "1M",  # --memory-block-size
    "numa_forkexec_iterations": 100,  # timed iterations per VM (plus 20 untimed; ~80 ms each under TCG)
}

PLACEMENTS = ("none", "pinned", "soft")
BENCH_RESULT, BENCH_START = "SCHEDLAB-BENCH-RESULT", "SCHEDLAB-BENCH-START"


# -- what the host says --------------------------------------------------------------------------
def cpu_nodes(xl_info_n: str) -> dict[int, int]:
    """pCPU -> node from `xl info -n`'s cpu_topology table (`  0:  0  0  0`: cpu: core socket node)."""
    out: dict[int, int] = {}
    in_table = False
    for line in xl_info_n.splitlines():
        if line.startswith("cpu_topology"):
            in_table = True
            continue
        if in_table:
            m = re.fullmatch(r"\s*(\d+):\s+(\d+)\s+(\d+)\s+(\d+)\s*", line)
            if m:
                out[int(m.group(1))] = int(m.group(4))
            elif out or not line.strip().startswith("cpu:"):
                break
    if not out:
        raise RunFailed(f"xl info -n: no cpu_topology table:\n{xl_info_n[:1500]}")
    return out


def domain_memory(dmesg: str) -> dict[int, dict[int, int]]:
    """domid -> {node: pages} from the last 'u' debug-key dump in `xl dmesg` (Xen's
    dump_numa(): "Memory location of each domain:", then per domain "d1 (total: N):" or
    "Domain 1 (total: N):" and "    Node k: pages" lines)."""
    text = dmesg.split("Memory location of each domain:")
    if len(text) < 2:
        raise RunFailed(f"xl dmesg: no 'Memory location of each domain' after xl debug-keys u:\n{dmesg[-1500:]}")
    out: dict[int, dict[int, int]] = {}
    dom = None
    for line in text[-1].splitlines():
        line = re.sub(r"^\(XEN\) ?(\[[^\]]*\] ?)?", "", line)  # "(XEN) [timestamp] "
        m = re.match(r"\s*(?:Domain |d)(\d+) \(total: \d+\):", line)
        n = re.match(r"\s+Node (\d+): (\d+)\s*$", line)
        if m:
            dom = int(m.group(1))
            out[dom] = {}
        elif n and dom is not None:
            out[dom][int(n.group(1))] = int(n.group(2))
        else:
            dom = None  # anything else ends a domain's block (vNUMA lines follow in some versions)
    return out


def vcpu_affinity(vcpu_list: str, names: list[str]) -> dict[str, list[str]]:
    """name -> ["hard / soft", ...] per vCPU from `xl vcpu-list`."""
    out: dict[str, list[str]] = {n: [] for n in names}
    for line in vcpu_list.splitlines()[1:]:
        f = line.split(None, 6)
        if len(f) == 7 and f[0] in out:
            out[f[0]].append(" ".join(f[6].split()))
    return out


def decode_bench(line: str, vm: str) -> tuple[int, str, dict]:
    """A SCHEDLAB-BENCH-RESULT line -> (exit status, the program's output, guest ticks)."""
    m = re.search(r"\brc=(\d+)", line)
    if not m:
        raise RunFailed(f"{KIND}: {vm}: benchmark result line without rc=: {line.strip()[:300]}")
    e = re.search(r"\berror=(\S+)", line)
    if e:
        raise RunFailed(f"{KIND}: {vm}: benchmark failed in the guest ({e.group(1)}): {line.strip()[:300]}")
    o = re.search(r"\bout=(\S*)", line)
    try:
        out = base64.b64decode(o.group(1) if o else "", validate=True).decode(errors="replace")
    except ValueError as err:
        raise RunFailed(f"{KIND}: {vm}: benchmark output is not base64 ({err}): {line.strip()[:300]}") from None
    t = re.search(r"\bguest_ticks=([\d,]+)", line)
    ticks = dict(zip(GUEST_TICKS, (int(x) for x in t.group(1).split(",")))) if t else {}
    return int(m.group(1)), out, ticks


def bench_results(pack, lines: dict[str, str], phase: dict) -> dict[str, dict]:
    """Each VM's SCHEDLAB-BENCH-RESULT line -> the pack's metrics (its own parser). Keeps the
    outputs and guest ticks in `phase`; a failed program or output the parser does not know
    raises RunFailed naming the VM, the trigger token and the offending text."""
    out = {}
    for n, line in lines.items():
        rc, text, ticks = decode_bench(line, n)
        phase.setdefault("output", {})[n] = text
        phase.setdefault("guest_ticks", {})[n] = ticks
        if rc != 0:
            raise RunFailed(
                f"{KIND}: {n}: {pack.name} exited with status {rc} (token {phase.get('token')}):\n{text[-1500:]}"
            )
        try:
            out[n] = pack.parse(text, f"{n} token={phase.get('token')}")
        except PackError as e:
            raise RunFailed(f"{KIND}: {n}: {e}") from e
    return out


# -- the run -------------------------------------------------------------------------------------
def run(h: Host, doms: Domains, opts: dict, point: dict, seed: int, booted: dict) -> RunResult:
    vms = point_vms(point, KIND)
    guest = opts.get("variant_guest") or {}
    policy = guest.get("placement")
    if policy not in PLACEMENTS:
        raise RunFailed(
            f"{KIND}: variant {opts.get('variant')!r}: guest.placement {policy!r} is not one of {', '.join(PLACEMENTS)}"
        )
    info_n = h.run(["xl", "info", "-n"], timeout=60).stdout
    nodes_of = cpu_nodes(info_n)
    nodes = sorted(set(nodes_of.values()))
    if len(nodes) < 2:
        raise RunFailed(
            f"{KIND} needs a host with 2 or more NUMA nodes; xl info -n shows {len(nodes)} (qemu testbed option numa_nodes)"
        )
    names = vm_names(vms)
    booted_names = guests_to_boot(doms, opts, vms)
    home = {n: nodes[(i - 1) % len(nodes)] for i, n in enumerate(booted_names, start=1)}
    phase_s = float(opts["numa_phase_s"])
    params = module_params(
        opts,
        "none",
        duration_ms=int(phase_s * 1000),
        compute_loops=opts["numa_burst_loops"],
        hold_loops=1,
        sleep_us=int(opts["numa_burst_sleep_us"]),
        sleep_permille=1000,
    )
    counters: dict[str, Any] = {
        "seed": seed,
        "xen_scheduler": booted.get("xen_scheduler"),
        "xen_commandline": booted.get("xen_commandline"),
        "placement": policy,
        "module_params": params,
        "vms_booted": len(booted_names),
        "guest_vcpus": int(opts["guest_vcpus"]),
        "cpu_nodes": nodes_of,
        "home_node": {n: home[n] for n in names},
        "xl_info_topology": info_n[info_n.find("cpu_topology") :].strip(),
    }
    ensure_lock_vms(
        h, doms, opts, booted_names, names, params, "", counters, cpus_soft={n: f"node:{home[n]}" for n in booted_names}
    )

    # The variant's affinity, on every booted guest (idle ones too: they are the same host).
    for n in booted_names:
        hard, soft = {"none": ("all", "all"), "pinned": (f"node:{home[n]}", "all"), "soft": ("all", f"node:{home[n]}")}[
            policy
        ]
        h.run(["xl", "vcpu-pin", n, "all", hard, soft], timeout=60)
    vl = h.run(["xl", "vcpu-list"], timeout=60).stdout
    aff = vcpu_affinity(vl, booted_names)
    counters["affinity"] = {n: aff[n] for n in names}
    for n in names:
        got = aff[n]
        ok = got and all(
            (a == "all / all") == (policy == "none")
            and (a.startswith("all /") == (policy != "pinned"))
            and (a.endswith("/ all") == (policy != "soft"))
            for a in got
        )
        if not ok:
            raise RunFailed(
                f"{KIND}: {n}: affinity (hard / soft) {got} after xl vcpu-pin does not match placement {policy}:\n{vl}"
            )

    # Where each VM's memory is (Xen's dump_numa), and that it is on the home node.
    ids = {i: n for i, n in doms.ids().items() if n in booted_names}
    h.run(["xl", "debug-keys", "u"], timeout=60)
    mem = domain_memory(h.run(["xl", "dmesg"], timeout=60).stdout)
    counters["memory_pages_by_node"] = {n: mem.get(d, {}) for d, n in ids.items() if n in names}
    for n, pages in counters["memory_pages_by_node"].items():
        total = sum(pages.values())
        if not total or pages.get(home[n], 0) < 0.9 * total:
            raise RunFailed(f"{KIND}: {n}: memory by node {pages} is not (90 %) on its home node {home[n]}")

    by_name = {n: i for i, n in ids.items()}
    ticks = {n: {"home": 0, "away": 0} for n in names}
    phases: dict[str, Any] = {}

    def traced(phase: str, command: str, timeout: float) -> dict[str, str]:
        c: dict[str, Any] = {}
        # sched_trace: every scheduler event (the runstate changes placement needs are part of it)
        trace = Trace(h, pages=int(opts["trace_pages"]), **({"mask": SCHED_ALL_MASK} if opts["sched_trace"] else {}))
        marks = {"result": BENCH_RESULT, "start": BENCH_START} if command.startswith("bench ") else {}
        lines = trigger(doms, names, command, seed, timeout, c, during=lambda: trace, **marks)
        where = no_lost(placement(trace.data, {by_name[n]: n for n in names}), f"{KIND} {phase}", opts)
        if opts["sched_trace"]:
            c["sched_events"] = traced_events(trace, doms, names, f"{KIND} {phase}", opts, where)
        share = {}
        for key, v in where["per_vcpu"].items():
            n = key.split("/")[0]
            at_home = sum(t for cpu, t in v["run_ticks_by_pcpu"].items() if nodes_of.get(int(cpu)) == home[n])
            tot = sum(v["run_ticks_by_pcpu"].values())
            ticks[n]["home"] += at_home
            ticks[n]["away"] += tot - at_home
            share[key] = round(100 * at_home / tot, 2) if tot else None
        c["trace"] = {k: where[k] for k in ("records", "lost_records", "pcpus", "tsc_span", "migrations")}
        c["home_share_by_vcpu"] = share
        c["per_vcpu"] = where["per_vcpu"]
        phases[phase] = c
        return lines

    timeout = float(opts["lock_timeout_s"])
    results = {n: parse_result(l) for n, l in traced("bursts", "run", timeout).items()}
    sysargs = (
        f"sysbench memory --threads={int(opts['numa_sysbench_threads'])} --time={int(phase_s)} "
        f"--memory-block-size={opts['numa_sysbench_block']} --memory-total-size=1000T "
        f"--memory-oper=write --memory-access-mode=seq --rand-seed={seed % 2**31 or 1} run"
    )
    sysb = traced("sysbench", f"bench {sysargs}", timeout)
    fork = traced("lmbench", f"bench forkexec -n {int(opts['numa_forkexec_iterations'])} -w 20", timeout)

    mem_tp = bench_results(SYSBENCH_MEMORY, sysb, phases["sysbench"])
    lat = bench_results(FORKEXEC, fork, phases["lmbench"])
    counters["phases"] = phases
    if opts["sched_trace"]:
        # the run's events and traced guest time: its three phases' together
        counters["sched_events"] = sum_events([p["sched_events"] for p in phases.values()])
        spans = [p.get("trace_window_guest_s") for p in phases.values()]
        if all(spans):
            counters["trace_window_guest_s"] = round(sum(spans), 3)
    counters["per_vm"] = {
        n: {
            "bursts_per_s": results[n]["ops_per_s"],
            "sysbench_mib_per_s": mem_tp[n]["mib_per_s"],
            "forkexec_median_us": lat[n]["median_us"],
            "bursts": {k: v for k, v in results[n].items() if k != "hist"},
        }
        for n in names
    }
    counters["run_ticks_home_away"] = ticks
    counters["sched_credit"] = h.run(["xl", "sched-credit"], timeout=60).stdout.strip()
    home_t = sum(t["home"] for t in ticks.values())
    all_t = home_t + sum(t["away"] for t in ticks.values())
    if not all_t:
        raise RunFailed(f"{KIND}: the traces hold no run time of the guests' vCPUs")
    rates = [results[n]["ops"] / (results[n]["elapsed_ns"] / 1e9) for n in names]
    mibs = [mem_tp[n]["mib_per_s"] for n in names]
    lats = [lat[n]["median_us"] for n in names]
    return RunResult(
        metrics={
            "bursts": round(sum(rates) / len(rates), 3),
            "sysbench": round(sum(mibs) / len(mibs), 3),
            "lmbench": round(sum(lats) / len(lats), 3),
            "home_share": round(100 * home_t / all_t, 3),
        },
        counters=counters,
        samples={"bursts": [round(r, 3) for r in rates], "sysbench": mibs, "lmbench": lats},
    )


# ---------------------------------------------------------------- the simulator's scenario of this workload


def sim_scenarios(study, variant, sim, wl, point, seed):
    """The simulator's scenarios of a run of this workload (numa-mix): [(tag, scenario)]."""
    n = int(point["vms"])
    host = wl["host"]
    ncpu = host["sockets"] * host["cores_per_socket"] * host.get("threads_per_core", 1)
    nodes = int(host.get("nodes", 1))
    per = ncpu // nodes
    placement = need(sim, "placement", f"variants.{variant}.sim")
    homes = placement_map(wl, n, nodes)
    dom0 = dom0_domain(wl, nodes, per)
    out = []
    for kind in ("specjbb", "sysbench", "lmbench"):
        kw = dict(wl["kinds"][kind])
        kw.pop("scale", None)
        kw.pop("metric", None)
        kw["kind"] = "loop"
        doms = []
        for i in range(n):
            node = homes[i]  # default: libxl-style placement, VMs alternate between nodes
            cpus = node_cpus(node, per)
            d = {"name": f"vm{i}", "vcpus": int(wl["vcpus_per_vm"]), "home_node": node, "workload": kw}
            if placement == "pinned":
                d["hard_affinity"] = cpus
            elif placement == "soft":
                d["soft_affinity"] = cpus
            elif placement != "none":
                raise ConfigError(f"{KIND}: unknown placement {placement!r}")
            doms.append(d)
        if dom0 is not None:  # dom0 is not one of the measured VMs: appended last, left out of the metrics
            doms.append(dom0)
        out.append(
            (
                kind,
                {
                    "seed": sub_seed(seed, kind),
                    "duration_s": float(wl["duration_s"]),
                    "warmup_s": float(wl["warmup_s"]),
                    "host": host,
                    "memory": wl["memory"],
                    "cache": wl.get("cache", {}),
                    "xen": xen_options(sim, wl.get("xen")),
                    "domains": doms,
                },
            )
        )
    return out


def sim_metrics(study, res, point, wl):
    """The study's metrics (and the per-VM samples behind them) from the simulator's results."""
    m, samples = {}, {}
    for kind in ("specjbb", "sysbench", "lmbench"):
        r = res[kind]
        kw = wl["kinds"][kind]
        scale = float(kw.get("scale", 1.0))
        vms = [d for d in r["domains"] if d["name"] != "dom0"]
        if kw.get("metric", "throughput") == "latency":
            # time per operation seen by one vCPU (fork+exit+wait), in us
            nv = int(wl["vcpus_per_vm"])
            vals = [scale * (r["measured_s"] * nv / max(d["ops"], 1)) * 1e6 for d in vms]
        else:
            vals = [scale * d["ops_per_s"] for d in vms]
        m[kind] = sum(vals) / len(vals)
        samples[kind] = vals
    return m, samples
