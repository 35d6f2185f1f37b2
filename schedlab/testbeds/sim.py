"""The sim testbed: runs sim/build/credit1sim (a C discrete-event model of Xen credit1, see
sim/README.md) at full published scale.

Each study's workload parameters live in the study file under `sim_workload:` and each variant's
scheduler switches under `variants.<name>.sim`.  The scenario of a run is its workload kind's
(`workload.kind`): the workload's module (schedlab/workloads/, one per kind, which also holds the kind's
run on real Xen) builds the scenario JSON and reads the study's metrics from the result
(`workloads.sim_model`).  This module runs the binary.  It never reads the study's `published:` key.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

from schedlab import workloads
from schedlab.core.recipes import code_sha256
from schedlab.core.testbed import RunFailed, RunResult, Testbed
from schedlab.workloads import scenario

from ..config import ConfigError

REPO = Path(__file__).resolve().parents[2]
SIM_DIR = REPO / "sim"
BINARY = SIM_DIR / "build" / "credit1sim"

_build_lock = threading.Lock()

# The sim testbed reads no testbeds.sim.options (workflow/schemas/settings.schema.json allows none)
DEFAULTS: dict[str, Any] = {}


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source_files() -> list[Path]:
    files = sorted((SIM_DIR / "src").glob("*.[ch]"))
    return files + [SIM_DIR / "Makefile"]


def sources_hash() -> str:
    h = hashlib.sha256()
    for f in source_files():
        h.update(f.relative_to(SIM_DIR).as_posix().encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


def ensure_binary(binary: Path = BINARY, build: bool = True) -> Path:
    """Build sim/build/credit1sim with `make -C sim` if it is absent or older than its sources."""

    def stale() -> bool:
        return not binary.exists() or any(f.stat().st_mtime > binary.stat().st_mtime for f in source_files())

    if binary != BINARY:  # a binary given by the caller is used as is
        if not binary.exists():
            raise RunFailed(f"simulator binary {binary} does not exist")
        return binary
    if not stale():
        return binary
    if not build:
        raise RunFailed(f"simulator binary {binary} missing or stale; run `make -C sim`")
    import fcntl

    with _build_lock:
        binary.parent.mkdir(parents=True, exist_ok=True)
        with open(binary.parent / ".build.lock", "w") as lk:  # several run processes may start at once
            fcntl.flock(lk, fcntl.LOCK_EX)
            if stale():
                p = subprocess.run(["make", "-C", str(SIM_DIR)], capture_output=True, text=True)
                if p.returncode != 0 or not binary.exists():
                    raise RunFailed("`make -C sim` failed", log=p.stdout + p.stderr)
    return binary


def run_scenario(scenario: dict, binary: Path | None = None, timeout: float = 900) -> dict:
    """Run one scenario dict through the simulator and return its parsed result."""
    binary = ensure_binary(Path(binary) if binary else BINARY)
    text = json.dumps(scenario, sort_keys=True)
    try:
        p = subprocess.run([str(binary)], input=text, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise RunFailed(f"simulator timed out after {timeout} s", log=text) from e
    if p.returncode != 0:
        raise RunFailed(f"simulator exit {p.returncode}: {p.stderr.strip()}", log=p.stderr + "\n" + text)
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as e:
        raise RunFailed(f"simulator printed invalid JSON: {e}", log=p.stdout[-2000:]) from e


def model_of(study: dict):
    """(sim_scenarios, sim_metrics) of the study's workload kind (schedlab.workloads.sim_model);
    a ConfigError naming the study and its kind where the simulator has no model of it."""
    kind = (study.get("workload") or {}).get("kind")
    model = workloads.sim_model(kind)
    if model is None:
        raise ConfigError(
            f"study {study.get('study')}: the sim testbed has no model for workload kind {kind!r} "
            f"(workload.kind; models: {', '.join(k for k in workloads.KINDS if workloads.sim_model(k))})"
        )
    return model


def build_id_of(sources_sha256: str, study: dict, variant: str) -> str:
    """What a sim run runs on: the simulator's sources, this module, the scenario's code (its
    workload kind's builder and metrics, and the scenario format's pieces), the variant's
    switches and the study's sim_workload. A change to any of them is a new build."""
    sim = (study.get("variants", {}).get(variant) or {}).get("sim", {}) or {}
    h = hashlib.sha256()
    h.update(sources_sha256.encode())
    h.update(_sha256_file(Path(__file__)).encode())
    h.update(code_sha256(*model_of(study)).encode())
    h.update(_sha256_file(Path(scenario.__file__)).encode())
    h.update(json.dumps(sim, sort_keys=True, default=str).encode())
    h.update(json.dumps(study.get("sim_workload", {}), sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


_COUNTER_KEYS = (
    "context_switches",
    "migrations",
    "steals",
    "boosts",
    "boosts_on_migration",
    "yields",
    "yields_changed",
    "tickles",
    "kickaways",
    "ratelimited",
    "push_moves",
    "tick_migrations",
    "parks",
    "cachehot_skips",
    "pick_avoids",
    "spin_s",
    "runnable_wait_s",
)


class SimTestbed(Testbed):
    name = "sim"

    def __init__(
        self,
        binary: str | os.PathLike | None = None,
        build: bool = True,
        timeout: float = 900,
        trace_dir: str | os.PathLike | None = None,
    ):
        self.binary = Path(binary) if binary else BINARY
        self.build = build
        self.timeout = timeout
        self.trace_dir = Path(trace_dir) if trace_dir else None

    # -- provenance
    def describe(self) -> dict[str, Any]:
        b = ensure_binary(self.binary, self.build)
        version = subprocess.run([str(b), "--version"], capture_output=True, text=True).stdout.strip()
        try:
            cc = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        except (OSError, IndexError):
            cc = "unknown"
        return {
            "testbed": "sim",
            "simulator": version,
            "binary": str(b.relative_to(REPO)) if b.is_relative_to(REPO) else str(b),
            "binary_sha256": _sha256_file(b),
            "sources_sha256": sources_hash(),
            "sources": {f.relative_to(SIM_DIR).as_posix(): _sha256_file(f) for f in source_files()},
            "compiler": cc,
            "cflags": "-O2 -std=c11",
        }

    def build_id(self, study: dict, variant: str) -> str:
        return build_id_of(sources_hash(), study, variant)

    def scenarios(self, study: dict, variant: str, point: dict, seed: int) -> list[tuple[str, dict]]:
        sid = study.get("study")
        build = model_of(study)[0]
        if variant not in study.get("variants", {}):
            raise ConfigError(f"study {sid}: unknown variant {variant!r}")
        wl = study.get("sim_workload")
        if not wl:
            raise ConfigError(f"study {sid}: no `sim_workload` section")
        sim = (study["variants"][variant] or {}).get("sim", {}) or {}
        try:
            return build(study, variant, sim, wl, point, int(seed))
        except KeyError as e:
            raise ConfigError(f"study {sid}: missing key {e} in sim_workload or point") from e

    def run_once(self, study: dict, variant: str, point: dict, seed: int) -> RunResult:
        sid = study.get("study")
        scs = self.scenarios(study, variant, point, seed)
        res = {}
        for tag, sc in scs:
            if self.trace_dir:
                self.trace_dir.mkdir(parents=True, exist_ok=True)
                pt = "_".join(f"{k}{v}" for k, v in sorted(point.items()))
                sc = dict(sc, trace={"file": str(self.trace_dir / f"{sid}_{variant}_{pt}_{seed}_{tag}.jsonl")})
            res[tag] = run_scenario(sc, ensure_binary(self.binary, self.build), self.timeout)
        wl = study["sim_workload"]
        metrics, samples = model_of(study)[1](study, res, point, wl)
        names = [m["name"] for m in study.get("metrics", []) if "sim" in (m.get("testbeds") or ["sim"])]
        if set(metrics) != set(names):
            raise ConfigError(f"study {sid}: sim metrics {sorted(metrics)} do not match the study's {sorted(names)}")
        counters: dict[str, Any] = {}
        for tag, r in res.items():
            pre = "" if len(res) == 1 else f"{tag}."
            for k in _COUNTER_KEYS:
                counters[pre + k] = r["counters"][k]
            counters[pre + "events"] = r["events"]
            counters[pre + "sim_time_s"] = r["sim_time_s"]
            counters[pre + "boosts_by_domain"] = {d["name"]: d["boosts"] for d in r["domains"]}
            counters[pre + "spin_s_by_domain"] = {d["name"]: d["spin_s"] for d in r["domains"]}
        return RunResult(
            metrics={k: float(metrics[k]) for k in names},
            counters=counters,
            samples={k: [float(x) for x in v] for k, v in samples.items()},
        )


# ---------------------------------------------------------------- traces: timelines for figures and checks


def read_trace(path: str | os.PathLike) -> list[dict]:
    """The JSON-lines trace written by a scenario with `trace` (sim/README.md, "Trace")."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def trace_timeline(events: list[dict], end_ns: int | None = None) -> dict:
    """Reconstruct, from TRC_SCHED_SWITCH and the GUEST_* records, what every pCPU executed.

    Returns {"segments": [...], "marks": [...], "owner_gaps": [...], "end_ns": t}:
    - segments: dicts (cpu, dom, vcpu, t0, t1, mode) with mode "work" (computing), "hold" (in a critical section)
      or "spin" (spinning on a lock, `lock` = its id); a pCPU with no segment is idle.
    - marks: dicts (t, cpu, dom, vcpu, kind) with kind yield | poll | kick | boost | preempt_holder.
    - owner_gaps: intervals (dom, lock, owner vcpu, t0, t1, why) during which a lock's owner is not running:
      why "holder" (preempted inside the critical section) or "grantee" (a FIFO lock handed to a preempted waiter).
    Open intervals are closed at `end_ns` (the scenario's duration; default: the last event).
    """
    run: dict[int, tuple | None] = {}  # cpu -> (dom, vcpu)
    where: dict[tuple, int] = {}  # (dom, vcpu) -> cpu while running
    gstate: dict[tuple, tuple] = {}  # (dom, vcpu) -> ("work"|"hold"|"spin", lock)
    owner: dict[tuple, tuple] = {}  # (dom, lock) -> (vcpu, "holder"|"grantee")
    open_seg: dict[int, dict] = {}
    open_gap: dict[tuple, dict] = {}
    segs, marks, gaps = [], [], []
    t = 0

    def switch(open_map, key, new, done):
        """Close the open interval at `key` (kept if non-empty) and open `new` there."""
        cur = open_map.pop(key, None)
        if cur is not None:
            cur["t1"] = t
            if cur["t1"] > cur["t0"]:
                done.append(cur)
        if new is not None:
            open_map[key] = new

    def mode_of(dv):
        return gstate.get(dv, ("work", -1))

    def refresh(cpu):
        cur = run.get(cpu)
        want = None if cur is None else (cur, *mode_of(cur))
        s = open_seg.get(cpu)
        have = None if s is None else ((s["dom"], s["vcpu"]), s["mode"], s["lock"])
        if want != have:
            new = None
            if want is not None:
                (d, v), m, lk = want
                new = {"cpu": cpu, "dom": d, "vcpu": v, "t0": t, "t1": None, "mode": m, "lock": lk}
            switch(open_seg, cpu, new, segs)

    def refresh_gap(d, lk):
        o = owner.get((d, lk))
        key = (d, lk)
        g = open_gap.get(key)
        want = None
        if o is not None and (d, o[0]) not in where:
            want = (o[0], o[1])
        have = None if g is None else (g["vcpu"], g["why"])
        if want != have:
            new = None if want is None else {"dom": d, "lock": lk, "vcpu": want[0], "why": want[1], "t0": t, "t1": None}
            switch(open_gap, key, new, gaps)

    for e in events:
        t = e["t_ns"]
        ev, cpu, dv = e["ev"], e["cpu"], (e["dom"], e["vcpu"])
        if ev == "TRC_SCHED_SWITCH":
            prev = run.get(cpu)
            if prev is not None:
                where.pop(prev, None)
            run[cpu] = None if e["dom"] < 0 else dv
            if e["dom"] >= 0:
                where[dv] = cpu
            refresh(cpu)
            for d, lk in list(owner):
                if (prev and d == prev[0]) or d == e["dom"]:
                    refresh_gap(d, lk)
            if prev is not None and mode_of(prev)[0] == "hold" and run[cpu] != prev:
                marks.append({"t": t, "cpu": cpu, "dom": prev[0], "vcpu": prev[1], "kind": "preempt_holder"})
            continue
        if ev == "GUEST_LOCK_SPIN":
            gstate[dv] = ("spin", e["a"])
        elif ev == "GUEST_LOCK_ACQUIRED":
            gstate[dv] = ("hold", e["a"])
            owner[(dv[0], e["a"])] = (dv[1], "holder")
            refresh_gap(dv[0], e["a"])
        elif ev == "GUEST_LOCK_RELEASE":
            gstate[dv] = ("work", -1)
            if e["b"] >= 0:
                owner[(dv[0], e["a"])] = (e["b"], "grantee")
            else:
                owner.pop((dv[0], e["a"]), None)
            refresh_gap(dv[0], e["a"])
        elif ev == "GUEST_LOCK_POLL":
            gstate[dv] = ("work", -1)
            marks.append({"t": t, "cpu": cpu, "dom": dv[0], "vcpu": dv[1], "kind": "poll"})
        elif ev == "GUEST_LOCK_KICK":
            marks.append({"t": t, "cpu": cpu, "dom": dv[0], "vcpu": dv[1], "kind": "kick"})
        elif ev == "GUEST_YIELD":
            marks.append({"t": t, "cpu": cpu, "dom": dv[0], "vcpu": dv[1], "kind": "yield"})
        elif ev == "TRC_CSCHED_BOOST_START":
            marks.append({"t": t, "cpu": cpu, "dom": dv[0], "vcpu": dv[1], "kind": "boost"})
        else:
            continue
        if dv in where:
            refresh(where[dv])
    if end_ns is not None:
        t = max(t, int(end_ns))
    for cpu in list(open_seg):
        run[cpu] = None
        refresh(cpu)
    for key in list(open_gap):
        g = open_gap.pop(key)
        g["t1"] = t
        if g["t1"] > g["t0"]:
            gaps.append(g)
    return {"segments": segs, "marks": marks, "owner_gaps": gaps, "end_ns": t}


# ---------------------------------------------------------------- mechanism figure (notebooks/mechanism.ipynb)

# the lock workloads: a build of fixed size (S0's) and a storm of fixed length (S2's)
MECHANISM_KINDS = ("ddk-build", "lock-storm")


def mechanism_scenario(
    study: dict, variant_sim: dict, seed: int, trace_file: str | os.PathLike, duration_s: float = 0.5, vms: int = 2
) -> dict:
    """A short traced scenario from the `sim_workload` of a study of a lock workload (MECHANISM_KINDS) at
    `vms` VMs (the build) / overcommit `vms` (the storm): lock holders and waiters preempted, the rest
    spinning.  `variant_sim` is a `variants.*.sim` dict (e.g. {"yield": "noop"}, {"yield": "credit1"},
    {"lock": "pv-ticket"}).  Same seed -> same scenario."""
    kind = (study.get("workload") or {}).get("kind")
    wl = study.get("sim_workload")
    if kind not in MECHANISM_KINDS or not wl:
        raise RunFailed(
            f"mechanism_scenario: needs a study of a lock workload ({', '.join(MECHANISM_KINDS)}) with a "
            f"sim_workload (got {study.get('study')!r}, kind {kind!r})"
        )
    sim = dict(variant_sim)
    build = model_of(study)[0]
    if kind == "ddk-build":
        ((_, sc),) = build(study, "mechanism", sim, wl, {"vms": vms}, int(seed))
        for d in sc["domains"]:
            if d["workload"].get("kind") == "loop":  # a window of the build, not the whole build
                d["workload"] = {k: v for k, v in d["workload"].items() if k != "job_work_s"}
        sc = {k: v for k, v in sc.items() if k != "stop_when_done"}
        # idle VMs only take timer ticks (sim_workload.idle_tick_ms): left out, so the figure shows the lock alone
        sc["domains"] = [d for d in sc["domains"] if d["workload"].get("kind") != "idle"]
    else:
        sim.setdefault("lock", "ticket")
        ((_, sc),) = build(study, "mechanism", sim, wl, {"overcommit": vms}, int(seed))
        sc = {k: v for k, v in sc.items() if k != "warmup_s"}
    sc["duration_s"] = float(duration_s)
    sc["trace"] = {"file": str(trace_file), "limit": 5_000_000}
    return sc


def mechanism_window(
    timeline: dict, length_ms: float = 40.0, min_gap_ms: float = 1.0, after_ms: float = 50.0, lead_ms: float = 5.0
) -> tuple[int, int, dict]:
    """The first time (after `after_ms`) a lock's owner -- its holder, or a waiter a FIFO lock was handed to --
    is off-CPU for at least `min_gap_ms` while another vCPU of its domain spins on a pCPU.  Returns the window
    (t0_ns, t1_ns) = gap start - lead_ms .. + length_ms, and the gap."""
    spins = sorted((s["t0"], s["t1"], s["dom"]) for s in timeline["segments"] if s["mode"] == "spin")
    for g in sorted(timeline["owner_gaps"], key=lambda g: g["t0"]):
        if g["t0"] < after_ms * 1e6 or g["t1"] - g["t0"] < min_gap_ms * 1e6:
            continue
        if any(d == g["dom"] and a < g["t1"] and b > g["t0"] for a, b, d in spins):
            t0 = int(max(0, g["t0"] - lead_ms * 1e6))
            return t0, int(t0 + length_ms * 1e6), g
    raise RunFailed("mechanism_window: no descheduled lock owner with spinning waiters in the trace")


def window_stats(timeline: dict, events: list[dict], t0: int, t1: int) -> dict:
    """Per-window numbers: ms spinning / working / holding (summed over pCPUs), ms with a lock owner off-CPU,
    and counts of yields, polls, kicks, BOOSTs and context switches."""

    def clip(a, b):
        return max(0, min(b, t1) - max(a, t0))

    out = {
        m: sum(clip(s["t0"], s["t1"]) for s in timeline["segments"] if s["mode"] == m) / 1e6
        for m in ("spin", "work", "hold")
    }
    out["owner_off_ms"] = sum(clip(g["t0"], g["t1"]) for g in timeline["owner_gaps"]) / 1e6
    names = {
        "yield": "GUEST_YIELD",
        "poll": "GUEST_LOCK_POLL",
        "kick": "GUEST_LOCK_KICK",
        "boost": "TRC_CSCHED_BOOST_START",
        "switch": "TRC_SCHED_SWITCH",
        "acquired": "GUEST_LOCK_ACQUIRED",
    }
    for k, ev in names.items():
        out[k] = sum(1 for e in events if e["ev"] == ev and t0 <= e["t_ns"] < t1)
    out["spin_ms"], out["work_ms"], out["hold_ms"] = out.pop("spin"), out.pop("work"), out.pop("hold")
    return out


# ---------------------------------------------------------------- S1's mistaken BOOST (notebooks/s1mechanism.ipynb)


def boost_chains(events: list[dict]) -> list[dict]:
    """The kick-away chains in a trace: a running vCPU marked for migration when another vCPU wakes on its pCPU
    (TRC_CSCHED_KICKAWAY), switched out, migrated when its context is saved (the pick, TRC_CSCHED_PICKED_CPU
    with a=1, and TRC_SCHED_MIGRATE if it lands elsewhere), re-woken (TRC_SCHED_WAKE) and, if it was UNDER,
    BOOSTed by that re-wake (TRC_CSCHED_BOOST_START with a=1).

    Returns one dict per kick-away, in order: cpu, dom, vcpu (the kicked vCPU), waker (dom, vcpu) or None,
    kick, off, migrate, rewake, boost (ns or None where a step did not happen), to_cpu, moved (bool).
    A chain ends at the kicked vCPU's BOOST on re-wake, its next switch-in, or its next kick-away."""
    chains: list[dict] = []
    open_: dict[tuple, dict] = {}
    last_wake: tuple | None = None  # (t, cpu, dv) of the latest TRC_SCHED_WAKE
    for e in events:
        t, ev, dv = e["t_ns"], e["ev"], (e["dom"], e["vcpu"])
        if ev == "TRC_SCHED_WAKE":
            c = open_.get(dv)
            if c is not None and c["migrate"] is not None and c["rewake"] is None:
                c["rewake"] = t
            last_wake = (t, e["cpu"], dv)
        elif ev == "TRC_CSCHED_KICKAWAY":
            open_.pop(dv, None)
            waker = last_wake[2] if last_wake and last_wake[0] == t and last_wake[1] == e["cpu"] else None
            c = {
                "cpu": e["cpu"],
                "dom": dv[0],
                "vcpu": dv[1],
                "waker": waker,
                "kick": t,
                "off": None,
                "migrate": None,
                "rewake": None,
                "boost": None,
                "to_cpu": None,
                "moved": False,
            }
            chains.append(c)
            open_[dv] = c
        elif ev == "TRC_SCHED_SWITCH":
            prev, nxt = (e["a"], e["b"]), dv
            c = open_.get(prev)
            if c is not None and c["off"] is None and prev != nxt:
                c["off"] = t
            if nxt in open_ and open_[nxt]["off"] is not None:  # runs again: the chain is over
                open_.pop(nxt)
        elif ev == "TRC_CSCHED_PICKED_CPU" and e["a"] == 1:
            c = open_.get(dv)
            if c is not None and c["off"] is not None and c["migrate"] is None:
                c["migrate"], c["to_cpu"] = t, e["cpu"]
        elif ev == "TRC_SCHED_MIGRATE":
            c = open_.get(dv)
            if c is not None and c["migrate"] is not None:
                c["to_cpu"], c["moved"] = e["cpu"], True
        elif ev == "TRC_CSCHED_BOOST_START" and e["a"] == 1:
            c = open_.pop(dv, None)
            if c is not None:
                c["boost"] = t
    return chains


def wake_waits(events: list[dict], dom: int, vcpu: int, end_ns: int | None = None) -> list[dict]:
    """Every wake of one vCPU: {wake, run, tickled, boosted}: when it woke, when a pCPU next switched to it
    (None if not before the trace's end / `end_ns`), whether its wake tickled a pCPU (TRC_CSCHED_TICKLE for it
    at the wake's instant) and whether that wake BOOSTed it."""
    out: list[dict] = []
    cur: dict | None = None
    for e in events:
        if (e["dom"], e["vcpu"]) != (dom, vcpu):
            continue
        t, ev = e["t_ns"], e["ev"]
        if ev == "TRC_SCHED_WAKE":
            cur = {"wake": t, "run": None, "tickled": False, "boosted": False}
            out.append(cur)
        elif cur is not None and t == cur["wake"] and ev == "TRC_CSCHED_TICKLE":
            cur["tickled"] = True
        elif cur is not None and t == cur["wake"] and ev == "TRC_CSCHED_BOOST_START":
            cur["boosted"] = True
        elif cur is not None and ev == "TRC_SCHED_SWITCH":
            cur["run"] = t if end_ns is None or t <= end_ns else None
            cur = None
    return out


def boost_intervals(events: list[dict], end_ns: int) -> list[dict]:
    """BOOST periods per vCPU, {dom, vcpu, t0, t1, migration}: from TRC_CSCHED_BOOST_START to the vCPU's
    TRC_CSCHED_BOOST_END (or `end_ns`); `migration` = the BOOST came from a migration re-wake (a=1)."""
    open_: dict[tuple, dict] = {}
    out: list[dict] = []
    for e in events:
        dv = (e["dom"], e["vcpu"])
        if e["ev"] == "TRC_CSCHED_BOOST_START" and dv not in open_:
            open_[dv] = {"dom": dv[0], "vcpu": dv[1], "t0": e["t_ns"], "t1": None, "migration": e["a"] == 1}
        elif e["ev"] == "TRC_CSCHED_BOOST_END" and dv in open_:
            b = open_.pop(dv)
            b["t1"] = e["t_ns"]
            out.append(b)
    for b in open_.values():
        b["t1"] = max(b["t0"], int(end_ns))
        out.append(b)
    return sorted(out, key=lambda b: b["t0"])


def boost_chain_window(
    chains: list[dict], length_ms: float = 40.0, lead_ms: float = 1.0, after_ms: float = 0.0
) -> tuple[int, int, dict]:
    """The first complete chain (kick-away, migration, re-wake with BOOST) starting at or after `after_ms`:
    the window (t0_ns, t1_ns) = kick - lead_ms .. + length_ms, and the chain."""
    for c in chains:
        if c["kick"] >= after_ms * 1e6 and None not in (c["off"], c["migrate"], c["rewake"], c["boost"]):
            t0 = int(max(0, c["kick"] - lead_ms * 1e6))
            return t0, int(t0 + length_ms * 1e6), c
    raise RunFailed("boost_chain_window: no kick-away followed by a migration and a BOOST on re-wake in the trace")
