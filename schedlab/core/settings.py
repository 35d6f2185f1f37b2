"""A study's testbed options and simulator settings, checked before anything runs.

The study schema leaves `testbeds.<tb>.options`, `variants.<v>.sim` and `sim_workload`
open (each testbed owns its part); workflow/schemas/settings.schema.json closes them: the
keys each testbed reads (qemu_host.DEFAULTS, lab.DEFAULTS, the workloads' DEFAULTS, the
sim's scenario builders and sim/src/engine.c) with their types and ranges. What a schema
cannot say (a pCPU of the host the settings describe) is checked here. Without it a bad
value passed `validate`, the run failed three times, wrote three failure records, and the
error named no field. schedlab.config.load_study validates the schema and raises the first
of `problems` as a ConfigError naming the file, line and field."""

from __future__ import annotations


def _cpus(host: dict) -> int:
    return host.get("sockets", 1) * host.get("cores_per_socket", 1) * host.get("threads_per_core", 1)


def defaults(testbed: str, schema: dict) -> dict:
    """A testbed's options with their defaults, as the settings schema states them (the
    testbeds' DEFAULTS: tests/test_settings.py holds them equal)."""
    if testbed == "sim":
        return {}
    defs = schema["$defs"]
    props = {**defs["workload_options"]["properties"], **defs[f"{testbed}_options"]["properties"]}
    return {k: v.get("default") for k, v in props.items()}


def problems(study: dict, schema: dict) -> list[tuple[list, str]]:
    """(field path, what is wrong) of the values the settings schema cannot judge (a study
    that passed it): pCPUs and nodes of the host the settings describe, a warm-up shorter
    than the run, the virtual host's memory."""
    out: list[tuple[list, str]] = []
    wl = study.get("sim_workload")
    if isinstance(wl, dict) and isinstance(wl.get("host"), dict):
        host = wl["host"]
        ncpu, nodes = _cpus(host), host.get("nodes", 1)
        if ncpu % nodes:
            out.append(
                (["sim_workload", "host", "nodes"], f"{nodes} node(s) do not split the host's {ncpu} pCPUs evenly")
            )
        for where, value in ((["pin_cpu"], wl.get("pin_cpu")), (["host", "irq_cpu"], host.get("irq_cpu"))):
            if value is not None and value >= ncpu:
                out.append((["sim_workload", *where], f"{value} is not a pCPU of sim_workload.host (0..{ncpu - 1})"))
        if isinstance(wl.get("dom0"), dict) and wl["dom0"].get("node", 0) >= nodes:
            out.append(
                (["sim_workload", "dom0", "node"], f"{wl['dom0']['node']} is not a node of the host (0..{nodes - 1})")
            )
        for i, n in enumerate(wl.get("placement_map") if isinstance(wl.get("placement_map"), list) else []):
            if n >= nodes:
                out.append((["sim_workload", "placement_map", i], f"{n} is not a node of the host (0..{nodes - 1})"))
        if wl.get("idle_tick_vcpus", 0) > wl.get("vcpus_per_vm", 512):
            out.append((["sim_workload", "idle_tick_vcpus"], f"{wl['idle_tick_vcpus']} is more than vcpus_per_vm"))
        if wl.get("warmup_s", 0) >= wl.get("duration_s", float("inf")):
            out.append(
                (["sim_workload", "warmup_s"], f"{wl['warmup_s']} is not shorter than duration_s ({wl['duration_s']})")
            )
    opts = ((study.get("testbeds") or {}).get("qemu") or {}).get("options") or {}
    if opts:
        o = {**defaults("qemu", schema), **opts}
        at = ["testbeds", "qemu", "options"]
        for k in ("guest_pcpu", "dom0_pcpu"):
            if k in opts and opts[k] >= o["smp"]:
                out.append(
                    ([*at, k], f"{opts[k]} is not a pCPU of the virtual host (smp {o['smp']}: 0..{o['smp'] - 1})")
                )
        if "numa_nodes" in opts and (o["smp"] % o["numa_nodes"] or o["memory_mb"] % o["numa_nodes"]):
            out.append(
                (
                    [*at, "numa_nodes"],
                    f"{o['numa_nodes']} must divide smp ({o['smp']}) and memory_mb ({o['memory_mb']})",
                )
            )
        if o["dom0_memory_mb"] >= o["memory_mb"] and {"dom0_memory_mb", "memory_mb"} & set(opts):
            out.append(
                ([*at, "dom0_memory_mb"], f"{o['dom0_memory_mb']} leaves no memory of memory_mb ({o['memory_mb']})")
            )
    return out
