"""S0's workload ("ddk-build", virtualised): VMs contending on a guest kernel lock, each
doing the same fixed amount of work; completion time and aggregate throughput.

Each VM is a PV guest with `guest_vcpus` vCPUs (not pinned: placing them is the
scheduler's job, which is what pick/push change) running guest/lockmod/lockmod.ko: one
kernel thread per vCPU, each loops compute (lock_compute_loops iterations of a busy loop)
-> lock -> hold (lock_hold_loops) -> unlock on one lock of the module, until the VM's threads have made
`lock_ops` acquisitions together. The lock is the variant's `guest.lock` (S0: spin-yield,
a ticket lock whose waiters call SCHEDOP_yield every `lock_spin_threshold` spins, the
seed's guest patch), unless `lock_flavour` overrides it. One "build" = `lock_ops`
acquisitions; the seed's metrics:

    time_s      mean over the VMs of their completion times (the module's elapsed time,
                from its threads' start to the last one finishing)
    throughput  sum over the VMs of 100000 / completion time: builds per 100000 s

Point `vms` = how many VMs run the build at once. Guests are booted once per boot and
reused; a VM not needed at a point stays idle (blocked on its console, as the seed's
"8 booted, the rest idle"). With `lock_vms_booted` = N the first run of a boot boots N
guests concurrently (cheaper under TCG than one at a time as points need them).

How a run starts and ends (guest/guest-init.sh, role=lock): the module's parameters are
on the guest kernel command line (xl `extra=`, `lockmod.<param>=<value>`), so a changed
parameter means a new guest. dom0 writes `run <token>` into the consoles of the point's
VMs in one shell loop (all start within milliseconds), each guest prints
`SCHEDLAB-LOCK-START token=...`, loads the module (which runs and returns), and prints
`SCHEDLAB-LOCK-RESULT token=<token> vm=<name> lockmod v=1 ...` (one line, key=value) on
its console. We follow the console logs with `tail -F` over one ssh session, started
before the trigger (dom0 blocks in inotify meanwhile instead of polling).

Everything goes through dom0 over ssh (xl, xenstore-read, the console logs), so the lab
testbed can run it unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from schedlab.core.testbed import RunFailed, RunResult

from ..host import PROC_STAT_TICKS, Host
from .scenario import dom0_domain, ncpus, need, sub_seed, xen_options
from .xentrace import SCHED_ALL_MASK, Trace, guest_span, traced_events
from .xl import Domains, guest_cfg

# the study files' workload.kind this module runs (workloads.KINDS); its errors name it
KIND = "ddk-build"

FLAVOURS = ("ticket", "spin-yield", "kernel", "none")

# Options shared by lockwork (S0) and lockstorm (S2); each module sets its own defaults
# for the ones whose values differ (lockstorm's are prefixed storm_).
DEFAULTS: dict[str, Any] = {
    "guest_vcpus": 2,  # vCPUs per VM (the seed: 4 on a 4-core host; here 2 on 2 pCPUs)
    "lock_memory_mb": 160,  # per lock guest (3 x 160 + dom0's 1024 fit in QEMU's 2048)
    "lock_ops": 20000,  # S0: one "build" = this many lock acquisitions per VM
    # Busy work as loop counts, the same in every VM, run and variant (a "build" of fixed
    # size). ~1 loop/ns under TCG on an idle host (the module's loops_per_ms, reported with
    # every result, measures it), so 300000 ~ 300 us there: sim compute exp mean 300 us.
    "lock_compute_loops": 300000,
    "lock_hold_loops": 30000,  # sim: hold exp mean 30 us
    "lock_spin_threshold": 4096,  # spin-yield: spins before each SCHEDOP_yield (sim: ~4095)
    "lock_flavour": None,  # None: the variant's guest.lock
    # the lock guests' hard affinity (xl cpus=): "all" lets Xen place them (S0's question);
    # "1" keeps every lock vCPU on pCPU 1, so only Xen's own scheduling can deschedule a lock
    # holder while a sibling spins (benchmarks/qemu_lock_hazard.py)
    "lock_cpus": "all",
    "lock_vms_booted": 0,  # boot this many lock guests at the first run of a boot
    # (0: as many as the point needs; extra ones stay idle)
    "lock_timeout_s": 600,  # trigger -> every VM's result line
    # xentrace every scheduler event (SCHED_ALL_MASK) from the trigger to the last result:
    # counters.sched_events (boosts, tickles, yields, steals, picks, switches, migrations);
    # its buffer is trace_pages per pCPU; a lost record fails the run
    "sched_trace": False,
}

RESULT = "SCHEDLAB-LOCK-RESULT"
GUEST_TICKS = PROC_STAT_TICKS  # a guest's /proc/stat ticks, as the host's
START = "SCHEDLAB-LOCK-START"


def parse_result(line: str) -> dict[str, Any]:
    """The guest's result line (`... lockmod v=1 key=value ...`, see guest/lockmod/lockmod.c)
    -> dict: integers as int, ops_per_s as float, thread_ops as a list of int, hist as
    {bucket index: count}. A line with `error=...` raises RunFailed."""
    i = line.find("lockmod v=")
    head = line[:i] if i >= 0 else line
    m = re.search(r"\berror=(\S+)", line)
    if m:
        raise RunFailed(f"lock benchmark failed in the guest: {line.strip()[:500]}")
    if i < 0:
        raise RunFailed(f"not a lockmod result line: {line.strip()[:300]}")
    out: dict[str, Any] = {}
    for tok in head.split() + line[i + len("lockmod ") :].split():
        k, sep, v = tok.partition("=")
        if not sep:
            continue
        if k == "guest_ticks":  # guest-init.sh: /proc/stat deltas over the run
            vals = [int(x) for x in v.split(",")]
            out[k] = dict(zip(GUEST_TICKS, vals))
        elif k == "thread_ops":
            out[k] = [int(x) for x in v.split(",") if x]
        elif k == "hist":
            out[k] = {int(a): int(b) for a, b in (x.split(":") for x in v.split(",") if x)}
        elif k == "ops_per_s":
            out[k] = float(v)
        elif re.fullmatch(r"-?\d+", v):
            out[k] = int(v)
        else:
            out[k] = v
    for k in ("v", "ops", "elapsed_ns", "ops_per_s", "wait_p99_ns", "wait_max_ns", "hist"):
        if k not in out:
            raise RunFailed(f"lockmod result line without {k}: {line.strip()[:300]}")
    if out["v"] != 1:
        raise RunFailed(f"lockmod result format v={out['v']}, this parser knows v=1")
    if out["elapsed_ns"] <= 0:
        raise RunFailed(f"lockmod result with elapsed_ns={out['elapsed_ns']}")
    return out


# The module's histogram: values < 8 exact, then 8 sub-buckets per power of two.
SUB_BITS = 3
SUB = 1 << SUB_BITS


def bucket_upper(i: int) -> int:
    """Largest value (ns) in bucket i (mirrors bucket_upper() in lockmod.c)."""
    if i < SUB:
        return i
    e = i // SUB + SUB_BITS - 1
    sub = i % SUB
    return ((SUB + sub) << (e - SUB_BITS)) + (1 << (e - SUB_BITS)) - 1


def bucket_of(v: int) -> int:
    if v < SUB:
        return v
    e = v.bit_length() - 1
    return (e - SUB_BITS + 1) * SUB + ((v >> (e - SUB_BITS)) & (SUB - 1))


def hist_percentile(hist: dict[int, int], q: float, max_value: int | None = None) -> int:
    """Nearest-rank percentile q (0-1) of a merged histogram: the upper edge of the bucket
    holding it (as the module reports it), capped at max_value."""
    n = sum(hist.values())
    if n == 0:
        return 0
    rank = max(1, math.ceil(n * q - 1e-9))
    c = 0
    for i in sorted(hist):
        c += hist[i]
        if c >= rank:
            v = bucket_upper(i)
            return min(v, max_value) if max_value is not None else v
    return max_value or 0


def merge_hists(results: list[dict]) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in results:
        for i, c in r["hist"].items():
            out[i] = out.get(i, 0) + c
    return out


# -- running the module in several VMs at once ----------------------------------------------------
def lock_cfg(name: str, opts: dict, modparams: dict[str, Any], boot: str = "", cpus_soft: str | None = None) -> str:
    """xl config of one lock guest: role=lock, the module's parameters on its command line.
    Hard affinity `lock_cpus` ("all": not pinned, and no libxl automatic NUMA placement). `cpus_soft`:
    soft affinity at creation; S4 gives "node:N" so that the guest's memory comes from node N
    (libxl derives the domain's node affinity from it; a hard `cpus="node:N"` does not place
    memory in Xen 4.17, measured with xl debug-keys u)."""
    params = " ".join(f"lockmod.{k}={v}" for k, v in modparams.items())
    for k, v in modparams.items():
        if not re.fullmatch(r"[a-z_]+", k) or not re.fullmatch(r"[A-Za-z0-9_.-]+", str(v)):
            raise RunFailed(f"bad module parameter {k}={v!r}")
    if boot and not re.fullmatch(r"[A-Za-z0-9_.,=\- ]+", boot):
        raise RunFailed(f"bad guest boot option {boot!r}")
    cpus = str(opts.get("lock_cpus", "all"))
    if not re.fullmatch(r"all|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*", cpus):
        raise RunFailed(f"lock_cpus {cpus!r}: all, or pCPU numbers and ranges (0,2-3)")
    extra = f"console=hvc0 quiet schedlab.role=lock schedlab.name={name} {params}"
    if boot:
        extra += f" {boot}"
    return guest_cfg(
        name,
        extra=extra,
        memory_mb=opts["lock_memory_mb"],
        vcpus=int(opts["guest_vcpus"]),
        cpus=cpus,
        cpus_soft=cpus_soft,
        weight=256,
    )


def ensure_lock_vms(
    h: Host,
    doms: Domains,
    opts: dict,
    names_booted: list[str],
    names_run: list[str],
    modparams: dict[str, Any],
    boot: str,
    counters: dict,
    cpus_soft: dict[str, str] | None = None,
) -> None:
    """Make sure the guests `names_booted` run with the given module parameters, boot
    options and creation soft affinity (`cpus_soft`: name -> xl cpus_soft); reused when
    unchanged. Fills `counters`."""
    # Guests boot concurrently, sharing 2 pCPUs with each other and dom0 (under load: ~2-3 min).
    timeout = float(opts["guest_timeout_s"]) * max(1, len(names_booted))
    h.run(["xl", "vcpu-pin", "Domain-0", "all", "all"], timeout=60)
    # Guests of other workloads (S1's io/cpu, ...) would compete for the pCPUs: destroy them.
    doms.destroy_all(keep=tuple(names_booted) + tuple(n for n in doms.created if n.startswith("lock")))
    starts = doms.ensure_many(
        {n: lock_cfg(n, opts, modparams, boot, (cpus_soft or {}).get(n)) for n in names_booted}, timeout
    )
    counters["guest_start_seconds"] = {n: round(s, 1) for n, s in starts.items()}
    state = doms.list()
    counters["domains"] = state
    for n in names_run:
        if n not in state or set("csd") & set(state[n]):
            raise RunFailed(f"lock guest {n} is not running ({state.get(n)})")
    counters["xl_create_seconds"] = dict(getattr(doms, "create_seconds", {}) or {}) if any(starts.values()) else {}


def trigger(
    doms: Domains,
    names: list[str],
    command: str,
    seed: int,
    timeout: float,
    counters: dict,
    result: str = RESULT,
    start: str = START,
    during: Callable[[], AbstractContextManager] | None = None,
) -> dict[str, str]:
    """Write `<command> <token>[ <args>]` (command: "run", or "bench PROGRAM ARGS...") into the
    consoles of `names` at once and wait for each one's `result` line. Returns {name: line};
    fills `counters` (timings, the token, the raw lines). `during`: a context entered just
    before the trigger and left when every result is in (e.g. a xentrace)."""
    word, _, args = command.partition(" ")
    token = f"{seed:08x}{hashlib.sha256(str(time.time_ns()).encode()).hexdigest()[:6]}"
    line = f"{word} {token}" + (f" {args}" if args else "")
    ttys = doms.console_ttys(names)
    with (
        doms.follow_consoles(names) as follow,
        during() if during else contextlib.nullcontext(),
        # dom0's clock (Xen's system time: guest time under icount) around the window of
        # cpu_seconds, the denominator of a CPU share; window_seconds is the host's wall time
        guest_span(doms.host, counters),
    ):
        t_cpu0, w0 = doms.cpu_times(), time.monotonic()
        doms.console_send(ttys, line)
        w1 = time.monotonic()
        lines = follow.wait(
            f"{result} token={token} ",
            timeout,
            started=f"{start} token={token} ",
            nudge=lambda late: doms.console_send({n: ttys[n] for n in late}, line),
        )
        w2 = time.monotonic()
        counters["trigger_resent"] = dict(getattr(follow, "nudges", {}) or {})
    window = time.monotonic() - w0
    t_cpu1 = doms.cpu_times()
    counters["trigger_seconds"] = round(w1 - w0, 2)  # the ssh + printf into the consoles
    counters["wait_seconds"] = round(w2 - w1, 2)  # trigger sent -> all result lines seen
    counters["window_seconds"] = round(window, 2)  # host wall time: not a denominator of cpu_seconds
    counters["cpu_seconds"] = {k: round(t_cpu1.get(k, 0) - v, 2) for k, v in t_cpu0.items()}
    counters["token"] = token
    counters["raw_lines"] = {n: lines[n] for n in names}
    return lines


def run_lock_vms(
    h: Host,
    doms: Domains,
    opts: dict,
    names_booted: list[str],
    names_run: list[str],
    modparams: dict[str, Any],
    boot: str,
    seed: int,
    counters: dict,
    during: Callable[[], AbstractContextManager] | None = None,
) -> dict[str, dict]:
    """Make sure the guests `names_booted` run with the given module parameters and boot
    options (reused when unchanged), start the benchmark in `names_run` at once, wait for
    their results. Returns {name: parsed result}; fills `counters`."""
    ensure_lock_vms(h, doms, opts, names_booted, names_run, modparams, boot, counters)
    lines = trigger(doms, names_run, "run", seed, float(opts["lock_timeout_s"]), counters, during=during)
    counters["vcpu_list"] = h.run(["xl", "vcpu-list"], timeout=60).stdout.strip()
    counters["sched_credit"] = h.run(["xl", "sched-credit"], timeout=60).stdout.strip()
    results = {n: parse_result(lines[n]) for n in names_run}
    counters["per_vm"] = {n: {k: v for k, v in r.items() if k != "hist"} for n, r in results.items()}
    return results


def point_vms(point: dict, what: str) -> int:
    """The point's `vms` (how many lock guests run the benchmark), at least 1; `what` (the
    workload kind) names the error."""
    vms = int(point.get("vms", 1))
    if vms < 1:
        raise RunFailed(f"{what}: vms={vms}")
    return vms


def vm_names(n: int) -> list[str]:
    return [f"lock{i}" for i in range(1, n + 1)]


def guests_to_boot(doms: Domains, opts: dict, n: int) -> list[str]:
    """The lock guests a point that runs `n` VMs keeps booted: at least `lock_vms_booted`,
    and every lock guest this boot already made (idle, so a later point can reuse it)."""
    have = [int(x[4:]) for x in doms.created if re.fullmatch(r"lock\d+", x)]
    return vm_names(max(n, int(opts["lock_vms_booted"] or 0), *have))


def module_params(
    opts: dict,
    flavour: str,
    *,
    ops: int = 0,
    duration_ms: int = 0,
    compute_loops: int,
    hold_loops: int,
    sleep_us: int = 0,
    sleep_permille: int = 0,
) -> dict[str, Any]:
    """lockmod.ko's parameters (guest/lockmod/lockmod.c). Work is given as loop counts, so
    it is the same in every VM whatever the module's calibration says. The sleep
    parameters appear only when set, so S0's and S2's guest command lines stay as they were."""
    if flavour not in FLAVOURS:
        raise RunFailed(f"lock flavour {flavour!r} is not one of {', '.join(FLAVOURS)}")
    if int(compute_loops) < 1 or int(hold_loops) < 1:
        raise RunFailed("compute and hold loop counts must be at least 1")
    p: dict[str, Any] = {
        "flavour": flavour,
        "ops": int(ops),
        "duration_ms": int(duration_ms),
        "compute_loops": int(compute_loops),
        "hold_loops": int(hold_loops),
        "spin_threshold": int(opts["lock_spin_threshold"]),
    }
    if int(sleep_us) < 0 or not 0 <= int(sleep_permille) <= 1000:
        raise RunFailed(f"sleep_us={sleep_us} must be >= 0 and sleep_permille={sleep_permille} in 0-1000")
    if int(sleep_us) and int(sleep_permille):
        p.update(sleep_us=int(sleep_us), sleep_permille=int(sleep_permille))
    return p


def run(h: Host, doms: Domains, opts: dict, point: dict, seed: int, booted: dict) -> RunResult:
    vms = point_vms(point, KIND)
    guest = opts.get("variant_guest") or {}
    flavour = opts["lock_flavour"] or guest.get("lock") or "spin-yield"
    boot = str(guest.get("boot") or "")
    params = module_params(
        opts,
        flavour,
        ops=int(opts["lock_ops"]),
        compute_loops=opts["lock_compute_loops"],
        hold_loops=opts["lock_hold_loops"],
    )
    booted_names = guests_to_boot(doms, opts, vms)
    counters: dict[str, Any] = {
        "seed": seed,
        "xen_scheduler": booted.get("xen_scheduler"),
        "flavour": flavour,
        "guest_boot": boot,
        "module_params": params,
        "vms_booted": len(booted_names),
        "guest_vcpus": int(opts["guest_vcpus"]),
    }
    trace = Trace(h, pages=int(opts["trace_pages"]), mask=SCHED_ALL_MASK) if opts["sched_trace"] else None
    results = run_lock_vms(
        h, doms, opts, booted_names, vm_names(vms), params, boot, seed, counters, during=trace and (lambda: trace)
    )
    if trace is not None:
        counters["sched_events"] = traced_events(trace, doms, vm_names(vms), KIND, opts)
    times = [results[n]["elapsed_ns"] / 1e9 for n in vm_names(vms)]
    for n in vm_names(vms):
        if results[n]["ops"] != int(opts["lock_ops"]):
            raise RunFailed(f"{KIND}: {n} did {results[n]['ops']} ops, wanted {opts['lock_ops']}")
    pooled = merge_hists(list(results.values()))
    counters["wait_p99_us_pooled"] = round(
        hist_percentile(pooled, 0.99, max(r["wait_max_ns"] for r in results.values())) / 1000, 3
    )
    counters["yields"] = sum(r.get("yields", 0) for r in results.values())
    counters["steal_ticks"] = {n: (r.get("guest_ticks") or {}).get("steal") for n, r in results.items()}
    return RunResult(
        metrics={"time_s": round(sum(times) / len(times), 4), "throughput": round(sum(100000.0 / t for t in times), 3)},
        counters=counters,
        samples={"time_s": [round(t, 4) for t in times]},
    )


# ---------------------------------------------------------------- the simulator's scenario of this workload

# the tag of the scenario's sub-seed, as every run of this model since the first has had it
# (the name of the study that first had this workload): another tag would change every run
SIM_SEED_TAG = "s0"


def sim_scenarios(study, variant, sim, wl, point, seed):
    """The simulator's scenarios of a run of this workload (ddk-build): [(tag, scenario)]."""
    n = int(point["vms"])
    job = wl["job"]
    frac = float(wl.get("job_fraction", 1.0))
    lock = dict(need(wl, "lock", "sim_workload"))
    lock["type"] = sim.get("lock", lock.get("type", "spin-yield"))
    w = {
        "kind": "loop",
        "compute_us": job["compute_us"],
        "lock": lock,
        "io": job["io"],
        "job_work_s": float(job["work_cpu_s"]) * frac,
    }
    doms = [{"name": f"vm{i}", "vcpus": int(wl["vcpus_per_vm"]), "workload": w} for i in range(n)]
    idle = int(wl.get("idle_vms", 0)) - n
    iw = {"kind": "idle"}
    # timer interrupts of the idle guests (docs/credit1-model.md section 17): off unless sim_workload sets them
    for k in ("idle_tick_ms", "idle_tick_vcpus", "idle_tick_work_us"):
        if k in wl:
            iw[k] = wl[k]
    for i in range(max(0, idle)):
        doms.append({"name": f"idle{i}", "vcpus": int(wl["vcpus_per_vm"]), "workload": dict(iw)})
    dom0 = dom0_domain(wl, 1, ncpus(wl["host"]))  # off unless sim_workload.dom0 (the validation's mirrors)
    if dom0 is not None:
        doms.append(dom0)
    sc = {
        "seed": sub_seed(seed, SIM_SEED_TAG),
        "duration_s": float(wl.get("max_sim_s", 20000)) * frac,
        "stop_when_done": True,
        "host": wl["host"],
        "xen": xen_options(sim, wl.get("xen")),
        "domains": doms,
    }
    return [("build", sc)]


def sim_metrics(study, res, point, wl):
    """The study's metrics (and the per-VM samples behind them) from the simulator's results."""
    r = res["build"]
    frac = float(wl.get("job_fraction", 1.0))
    vms = [d for d in r["domains"] if d["name"].startswith("vm")]
    if not all(d["done"] for d in vms):
        raise RunFailed(f"{KIND}: a build did not finish within max_sim_s")
    times = [d["done_s"] / frac for d in vms]
    return ({"time_s": sum(times) / len(times), "throughput": sum(100000.0 / t for t in times)}, {"time_s": times})
