"""The credit1 simulator's scenario format (sim/README.md), the pieces every workload's
simulator scenario is made of: a run's sub-seeds, the variant's scheduler switches, dom0 (S1's
netback, S4's housekeeping, the validation's mirrors), NUMA nodes and VM placement. Each workload
module (one per `workload.kind`) builds its scenarios from these (`sim_scenarios`) and reads its
metrics from the simulator's result (`sim_metrics`); schedlab.testbeds.sim runs the binary."""

from __future__ import annotations

import hashlib

from schedlab.config import ConfigError


def sub_seed(seed: int, tag: str) -> int:
    """A sub-seed per scenario of one run (S1 and S4 run several scenarios per run)."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{tag}".encode()).digest()[:6], "big")


def need(d: dict, key: str, where: str):
    if key not in d:
        raise ConfigError(f"study file: missing `{where}.{key}`")
    return d[key]


def xen_options(sim: dict, base: dict | None = None) -> dict:
    """Scheduler options of a variant's `sim:` dict -> scenario `xen` object."""
    x = dict(base or {})
    m = {
        "version": "version",
        "yield": "yield",
        "pick": "pick",
        "push": "push",
        "migration_delay_us": "migration_delay_us",
        "ratelimit_us": "ratelimit_us",
        "tslice_ms": "tslice_ms",
        "push_period_ms": "push_period_ms",
        "ipi_latency_us": "ipi_latency_us",
        "ctxsw_us": "ctxsw_us",
        # model switches (docs/credit1-model.md section 17)
        "cachehot_rule": "cachehot_rule",
        "switch_cost_us": "switch_cost_us",
        "yield_cost_us": "yield_cost_us",
        "tickle_one_idle": "tickle_one_idle",
    }
    for k, v in sim.items():
        if k in m:
            x[m[k]] = str(v) if k == "version" else v
    return x


def dom0(opt: dict, vcpus: int, **rest) -> dict:
    """dom0 as a scenario domain, shared by its two models (S1's netback, S4's housekeeping): weight from the
    option's `weight` (default 256, Xen's default); `rest` (affinity, home node, workload) follows in order."""
    return {"name": "dom0", "vcpus": vcpus, "weight": int(opt.get("weight", 256)), **rest}


def ncpus(host: dict) -> int:
    return int(host["sockets"]) * int(host["cores_per_socket"]) * int(host.get("threads_per_core", 1))


def node_cpus(node: int, per: int) -> list[int]:
    """The pCPUs of NUMA node `node`, `per` to a node (numbered node by node)."""
    return list(range(node * per, (node + 1) * per))


NETBACK_KEYS = ("rx_us", "rx_per_kb_us", "tx_us")


def netback_domain(wl: dict, host: dict) -> dict | None:
    """dom0's netback as a domain of kind `netback` (docs/credit1-model.md section 17.6): one vCPU pinned to the
    host's `irq_cpu`, doing `rx_us` + `rx_per_kb_us`/KB of CPU work per packet into the guest and `tx_us` per
    packet out of it.  None when `sim_workload.netback` is absent or false (the earlier model: no dom0 CPU)."""
    nb = wl.get("netback")
    if nb in (None, False):
        return None
    if not isinstance(nb, dict):
        raise ConfigError(
            "study file: `sim_workload.netback` must be a mapping of rx_us, rx_per_kb_us, tx_us (or false)"
        )
    bad = sorted(set(nb) - set(NETBACK_KEYS) - {"weight"})
    if bad:
        raise ConfigError(
            f"study file: unknown key(s) {bad} in `sim_workload.netback` (allowed: {list(NETBACK_KEYS)}, weight)"
        )
    if "irq_cpu" not in host:
        raise ConfigError("study file: `sim_workload.netback` needs `sim_workload.host.irq_cpu` (dom0's pCPU)")
    w = {"kind": "netback"}
    w.update({k: nb[k] for k in NETBACK_KEYS if k in nb})
    return dom0(nb, 1, hard_affinity=[host["irq_cpu"]], workload=w)


def placement_map(wl: dict, n: int, nodes: int) -> list[int]:
    """Home node of each of `n` VMs (docs/credit1-model.md section 17.7).  `sim_workload.placement_map` absent or
    "alternate": VM i on node i % nodes (libxl's automatic placement of equal VMs, which alternates them); a list:
    VM i on list[i % len(list)] (an explicit, possibly asymmetric, placement)."""
    pm = wl.get("placement_map", "alternate")
    if pm == "alternate":
        return [i % nodes for i in range(n)]
    if not isinstance(pm, list) or not pm or not all(isinstance(x, int) and not isinstance(x, bool) for x in pm):
        raise ConfigError(
            f'study file: `sim_workload.placement_map` must be "alternate" or a non-empty list of node numbers, got {pm!r}'
        )
    bad = [x for x in pm if not 0 <= x < nodes]
    if bad:
        raise ConfigError(
            f"study file: `sim_workload.placement_map` names node(s) {bad}; the host has nodes 0..{nodes - 1}"
        )
    return [pm[i % len(pm)] for i in range(n)]


DOM0_KEYS = ("vcpus", "node", "pinned", "weight", "compute_us", "io")


def dom0_domain(wl: dict, nodes: int, per: int) -> dict | None:
    """dom0 as a domain (docs/credit1-model.md section 17.7): `vcpus` vCPUs with memory on `node` (default 0),
    hard affinity to that node's pCPUs when `pinned` (default true), running a `loop` of `compute_us` bursts each
    followed by a wait of `io.latency_us` (its housekeeping load).  None when `sim_workload.dom0` is absent/false."""
    d0 = wl.get("dom0")
    if d0 in (None, False):
        return None
    if not isinstance(d0, dict):
        raise ConfigError(
            "study file: `sim_workload.dom0` must be a mapping (vcpus, node, pinned, weight, compute_us, io) or false"
        )
    bad = sorted(set(d0) - set(DOM0_KEYS))
    if bad:
        raise ConfigError(f"study file: unknown key(s) {bad} in `sim_workload.dom0` (allowed: {list(DOM0_KEYS)})")
    for k in ("vcpus", "compute_us", "io"):
        if k not in d0:
            raise ConfigError(f"study file: missing `sim_workload.dom0.{k}`")
    node = d0.get("node", 0)
    if not isinstance(node, int) or not 0 <= node < nodes:
        raise ConfigError(f"study file: `sim_workload.dom0.node` must be a node number 0..{nodes - 1}, got {node!r}")
    io = d0["io"]
    if not isinstance(io, dict) or float(io.get("p", 0)) <= 0:
        raise ConfigError("study file: `sim_workload.dom0.io` must give p > 0 (dom0 waits between its bursts)")
    d = dom0(d0, int(d0["vcpus"]), home_node=node, workload={"kind": "loop", "compute_us": d0["compute_us"], "io": io})
    if d0.get("pinned", True):
        d["hard_affinity"] = node_cpus(node, per)
    return d
