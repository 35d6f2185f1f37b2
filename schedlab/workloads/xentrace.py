"""Where the guests' vCPUs ran, from Xen's own trace buffers (xentrace in dom0).

S3 counts vCPU migrations and S4 the share of a vCPU's run time on its home node; both
are the hypervisor's decisions, so they are read from Xen rather than guessed from
`xl vcpu-list` samples. During a run, dom0 runs

    xentrace -D -e 0x00021000 -S <pages> <file>

(Debian's xen-utils): `-e 0x00021000` selects the TRC_SCHED_MIN subclass only, i.e. the
runstate changes (xen/common/sched/core.c: trace_runstate_change(), called from
vcpu_runstate_change()), the cheapest scheduler trace there is. Each record carries the
TSC, `(domain << 16) | vcpu` and, in the event number, the old and new runstate
(running 0, runnable 1, blocked 2, offline 3). Xen writes a record into the trace buffer
of the pCPU that makes the change, so a "-> running" record says on which pCPU the vCPU
starts running.

File format (tools/xentrace/xentrace.c, xen/include/public/trace.h): a sequence of
windows, each a cpu-change record (header TRC_TRACE_CPU_CHANGE with 2 extra words: cpu,
window size in bytes) followed by that many bytes of that pCPU's `struct t_rec`s: a
32-bit header (event:28, extra_u32:3, cycles_included:1), the 64-bit TSC if included,
then extra_u32 words.

Definitions (the sim's, schedlab/testbeds/sim.py and sim/src/credit.c):
    migration     a vCPU starts running on a pCPU other than the one it last ran on
    run time      from its "-> running" record to its "running ->" record, per pCPU
"""

from __future__ import annotations

import contextlib
import struct
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from schedlab.core.testbed import RunFailed

from ..host import Host, HostError

TRC_LOST_RECORDS = 0x0001F001
TRC_TRACE_CPU_CHANGE = 0x0001F003
TRC_SCHED_RUNSTATE_CHANGE = 0x00021001  # | old << 8 | new << 4
RUNSTATE_BITS = 0x3F0
RUNNING = 0
IDLE_DOMID = 0x7FFF
SCHED_MIN_MASK = 0x00021000  # xentrace -e: class TRC_SCHED, subclass MIN
SCHED_ALL_MASK = 0x0002F000  # every TRC_SCHED subclass: MIN, CLASS (credit1's own), VERBOSE

# The scheduler's decisions, by trace event (xen/include/public/trace.h: TRC_SCHED_VERBOSE
# 0x28000 + n; credit1's TRC_SCHED_CLASS_EVT(CSCHED, n) = 0x22000 + n, defined at the top of
# xen/common/sched/credit.c) -> (name, index of the word holding the domain id or None).
SCHED_EVENTS: dict[int, tuple[str, int | None]] = {
    0x00028004: ("wake", 0),  # vcpu_wake(): domain, vcpu
    0x00028005: ("yield", 0),  # vcpu_yield() (SCHEDOP_yield): domain, vcpu
    0x00028006: ("block", 0),  # vcpu_block(): domain, vcpu
    0x0002800A: ("switch", None),  # sched_context_switch(): prev and next
    0x00022004: ("steal", 1),  # csched_runq_steal(): peer pCPU, domain, vcpu
    0x00022005: ("pick", 0),  # csched_res_pick() / _csched_cpu_pick(): domain, vcpu, pCPU
    0x00022006: ("tickle", None),  # __runq_tickle(): one record per pCPU tickled
    0x00022007: ("boost", 0),  # csched_unit_wake(): UNDER -> BOOST: domain, vcpu
    0x0002200A: ("ratelimit", None),  # csched_schedule() kept the current vCPU (ratelimit)
}


class TraceError(RunFailed):
    pass


def records(data: bytes) -> Iterator[tuple[int, int | None, int, tuple[int, ...]]]:
    """(pcpu, tsc or None, event, extra words) of every record, in file order. Raises
    TraceError naming the byte offset of anything that does not parse."""
    off, n = 0, len(data)
    while off < n:
        if off + 12 > n:
            raise TraceError(f"xentrace file: {n - off} stray bytes at offset {off}")
        hdr, cpu, size = struct.unpack_from("<IiI", data, off)
        if hdr & 0x0FFFFFFF != TRC_TRACE_CPU_CHANGE or (hdr >> 28) & 7 != 2:
            raise TraceError(f"xentrace file: no cpu-change record at offset {off} (header {hdr:#010x})")
        off += 12
        end = off + size
        if end > n:
            raise TraceError(
                f"xentrace file: window of cpu {cpu} at offset {off - 12} runs past the end "
                f"({size} bytes announced, {n - off} left)"
            )
        while off < end:
            if off + 4 > end:
                raise TraceError(f"xentrace file: truncated record at offset {off}")
            (hdr,) = struct.unpack_from("<I", data, off)
            extra, cyc = (hdr >> 28) & 7, hdr >> 31
            rlen = 4 + 8 * cyc + 4 * extra
            if off + rlen > end:
                raise TraceError(f"xentrace file: record at offset {off} (header {hdr:#010x}) runs past its window")
            tsc = struct.unpack_from("<Q", data, off + 4)[0] if cyc else None
            words = struct.unpack_from(f"<{extra}I", data, off + 4 + 8 * cyc)
            yield cpu, tsc, hdr & 0x0FFFFFFF, words
            off += rlen


def placement(data: bytes, domids: dict[int, str] | None = None) -> dict[str, Any]:
    """Migrations and run time per pCPU of every guest vCPU in a trace (dom0 and the idle
    domain left out; with `domids`, only those domains, named by it).

    Returns {"migrations": total, "per_vcpu": {"name/v": {"migrations": n,
    "run_ticks_by_pcpu": {"pcpu": ticks}}}, "records": n, "lost_records": n,
    "pcpus": [...], "tsc_span": ticks}. Run time is in TSC ticks (shares need no clock rate)."""
    events: list[tuple[int, int, int, int, int]] = []  # tsc, order, pcpu, event, word
    lost = nrec = 0
    tmin = tmax = None
    pcpus: set[int] = set()
    for i, (cpu, tsc, ev, words) in enumerate(records(data)):
        nrec += 1
        pcpus.add(cpu)
        if tsc is not None:
            tmin = tsc if tmin is None else min(tmin, tsc)
            tmax = tsc if tmax is None else max(tmax, tsc)
        if ev == TRC_LOST_RECORDS:
            lost += words[0] if words else 1
        elif ev & ~RUNSTATE_BITS == TRC_SCHED_RUNSTATE_CHANGE and words and tsc is not None:
            events.append((tsc, i, cpu, ev, words[0]))
    events.sort()
    last_cpu: dict[tuple[int, int], int] = {}
    since: dict[tuple[int, int], tuple[int, int]] = {}
    migr: dict[tuple[int, int], int] = {}
    run: dict[tuple[int, int], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for tsc, _, cpu, ev, word in events:
        dom, vcpu = word >> 16, word & 0xFFFF
        if dom in (0, IDLE_DOMID) or (domids is not None and dom not in domids):
            continue
        old, new = (ev >> 8) & 3, (ev >> 4) & 3
        key = (dom, vcpu)
        if new == RUNNING:
            if key in last_cpu and last_cpu[key] != cpu:
                migr[key] = migr.get(key, 0) + 1
            last_cpu[key] = cpu
            since[key] = (cpu, tsc)
            run[key]  # the vCPU ran, even if the trace ends before it stops
        elif old == RUNNING and key in since:
            c, t0 = since.pop(key)
            run[key][c] += tsc - t0
    # Still running when the trace stopped: count up to the last record.
    for key, (c, t0) in since.items():
        run[key][c] += (tmax or t0) - t0
    name = (lambda d: domids[d]) if domids is not None else (lambda d: f"d{d}")
    per_vcpu = {
        f"{name(d)}/{v}": {
            "migrations": migr.get((d, v), 0),
            "run_ticks_by_pcpu": {str(c): t for c, t in sorted(run[(d, v)].items())},
        }
        for d, v in sorted(run)
    }  # a migrated vCPU ran, so run has every key
    return {
        "migrations": sum(migr.values()),
        "per_vcpu": per_vcpu,
        "records": nrec,
        "lost_records": lost,
        "pcpus": sorted(pcpus),
        "tsc_span": (tmax - tmin) if tmin is not None else 0,
    }


def sched_events(
    data: bytes,
    domids: dict[int, str] | None = None,
    where: dict[str, Any] | None = None,
    others: dict[int, str] | None = None,
) -> dict[str, Any]:
    """Counts of the scheduler's decisions in a trace taken with SCHED_ALL_MASK: per event
    name in SCHED_EVENTS the total ("total"), and, for events that name a domain, per guest
    ("by_vm", named by `domids`; dom0 and the idle domain under "dom0"/"idle" in totals
    only), plus "migrations" from the runstate records (placement(), or `where`: its result
    for the same trace and guests, so a caller that has it does not parse the trace again).
    `others`: guests booted but not in the measurement (S0's and S4's unused VMs), counted
    apart under "by_other_vm", so their idle wakes can be told from dom0's in the totals.
    "dom0": dom0's own counts and its run intervals (dom0_runs()), so the model's dom0 can be
    sized from what dom0 did in the measurement rather than guessed.
    "tsc_span" (placement's): TSC ticks from the earliest timed record to the latest, which
    against the guest time the trace spanned (guest_span) gives the trace's tick rate.
    Lost records are reported, not hidden: "lost_records"."""
    total = dict.fromkeys((n for n, _ in SCHED_EVENTS.values()), 0)
    by_vm: dict[str, dict[str, int]] = {}
    by_other: dict[str, dict[str, int]] = {}
    dom0 = dict.fromkeys(total, 0)
    dom0_states: list[tuple[int, int, int, int]] = []  # tsc, order, event, word
    lost = 0
    for i, (_cpu, tsc, ev, words) in enumerate(records(data)):
        if ev == TRC_LOST_RECORDS:
            lost += words[0] if words else 1
            continue
        if ev & ~RUNSTATE_BITS == TRC_SCHED_RUNSTATE_CHANGE:
            if words and tsc is not None and words[0] >> 16 == 0:
                dom0_states.append((tsc, i, ev, words[0]))
            continue
        hit = SCHED_EVENTS.get(ev)
        if hit is None:
            continue
        name, at = hit
        total[name] += 1
        if at is None or len(words) <= at:
            continue
        if words[at] == 0:
            dom0[name] += 1
        elif domids is not None and words[at] in domids:
            by_vm.setdefault(domids[words[at]], dict.fromkeys(total, 0))[name] += 1
        elif others is not None and words[at] in others:
            by_other.setdefault(others[words[at]], dict.fromkeys(total, 0))[name] += 1
    where = where if where is not None else placement(data, domids)
    out = {
        "total": total,
        "by_vm": by_vm,
        "migrations": where["migrations"],
        "lost_records": lost,
        "dom0": {"events": dom0, **dom0_runs(dom0_states)},
        "tsc_span": where["tsc_span"],
    }
    if others is not None:
        out["by_other_vm"] = by_other
    return out


RUNNABLE = 1


def coschedule(data: bytes, domids: dict[int, str]) -> dict[str, Any]:
    """How a guest's vCPUs were scheduled together over a trace, from the runstate records:
    per guest named in `domids`, the TSC ticks during which 0, 1, 2, ... of its vCPUs were
    running ("running_ticks": {"k": ticks}) and, per vCPU, the ticks it was runnable but not
    running ("runnable_ticks": Xen had it waiting for a pCPU, e.g. preempted). "awake": the
    same over the longest stretch in which none of its vCPUs was blocked or offline
    ("ticks": its length): for a guest whose threads keep every vCPU busy while they run
    (S0's lock threads), that stretch is the run, without the guest's start and end. A vCPU's
    state before its first record is that record's old state; the span runs from the first
    to the last timed record of the trace. A lock holder descheduled by Xen is runnable, so
    the runnable ticks bound the lock wait Xen's own scheduling can explain
    (benchmarks/qemu_lock_hazard.py)."""
    events: list[tuple[int, int, int, int]] = []
    tmin = tmax = None
    for i, (_cpu, tsc, ev, words) in enumerate(records(data)):
        if tsc is None:
            continue
        tmin = tsc if tmin is None else min(tmin, tsc)
        tmax = tsc if tmax is None else max(tmax, tsc)
        if ev & ~RUNSTATE_BITS == TRC_SCHED_RUNSTATE_CHANGE and words and (words[0] >> 16) in domids:
            events.append((tsc, i, ev, words[0]))
    events.sort()
    state: dict[tuple[int, int], int] = {}
    for _, _, ev, word in events:  # the state before the first record: its old state
        state.setdefault((word >> 16, word & 0xFFFF), (ev >> 8) & 3)
    present = {d: name for d, name in domids.items() if any(k[0] == d for k in state)}
    # the trace as segments of constant state: (start, end, {vcpu key: state})
    segments: list[tuple[int, int, dict]] = []
    last = tmin
    for tsc, _, ev, word in events:
        if tsc > last:
            segments.append((last, tsc, dict(state)))
            last = tsc
        state[(word >> 16, word & 0xFFFF)] = (ev >> 4) & 3
    if tmax is not None and tmax > last:
        segments.append((last, tmax, dict(state)))

    def tally(segs, d) -> dict[str, Any]:
        running: dict[str, int] = {}
        runnable: dict[str, int] = {}
        for a, b, st in segs:
            mine = [(k, s) for k, s in st.items() if k[0] == d]
            k = str(sum(s == RUNNING for _, s in mine))
            running[k] = running.get(k, 0) + (b - a)
            for (_, v), s in mine:
                if s == RUNNABLE:
                    runnable[str(v)] = runnable.get(str(v), 0) + (b - a)
        return {"running_ticks": dict(sorted(running.items())), "runnable_ticks": dict(sorted(runnable.items()))}

    out = {}
    for d, name in present.items():
        # the longest stretch of consecutive segments with every vCPU running or runnable
        best: list = []
        cur: list = []
        for seg in segments:
            if all(s in (RUNNING, RUNNABLE) for k, s in seg[2].items() if k[0] == d):
                cur.append(seg)
                if cur[-1][1] - cur[0][0] > (best[-1][1] - best[0][0] if best else 0):
                    best = list(cur)
            else:
                cur = []
        awake = tally(best, d)
        awake["ticks"] = best[-1][1] - best[0][0] if best else 0
        out[name] = {**tally(segments, d), "awake": awake}
    return out


def dom0_runs(states: list[tuple[int, int, int, int]]) -> dict[str, Any]:
    """dom0's run intervals from its runstate records (tsc, order, event, word): how many
    ("runs"), their total ("run_ticks", TSC ticks) and their lengths as a histogram of
    powers of two ("run_ticks_log2": {k: intervals of 2^k to 2^(k+1) - 1 ticks}), which adds
    up over traces. An interval cut by the trace's start or end is not counted."""
    since: dict[int, int] = {}
    runs = ticks = 0
    hist: dict[str, int] = {}
    for tsc, _, ev, word in sorted(states):
        vcpu, old, new = word & 0xFFFF, (ev >> 8) & 3, (ev >> 4) & 3
        if new == RUNNING:
            since[vcpu] = tsc
        elif old == RUNNING and vcpu in since:
            span = tsc - since.pop(vcpu)
            runs += 1
            ticks += span
            k = str(max(span, 1).bit_length() - 1)
            hist[k] = hist.get(k, 0) + 1
    return {"runs": runs, "run_ticks": ticks, "run_ticks_log2": dict(sorted(hist.items(), key=lambda kv: int(kv[0])))}


class Trace:
    """xentrace in dom0 around a measurement: `with Trace(host) as t: ...`, then t.data.
    `mask`: the events (xentrace -e), runstate changes only by default."""

    def __init__(
        self, host: Host, *, pages: int = 256, path: str = "/run/schedlab-xentrace.bin", mask: int = SCHED_MIN_MASK
    ):
        self.host, self.pages, self.path, self.mask = host, int(pages), path, int(mask)
        self.pid: int | None = None
        self.data = b""

    def start(self) -> None:
        p = self.path
        # `-D`: drop what the buffers still hold from before; `-S`: pages per pCPU buffer
        # (only takes effect when the buffers are first allocated in a boot).
        r = self.host.run(
            [
                "sh",
                "-c",
                f"rm -f {p} {p}.log; xentrace -D -e {self.mask:#010x} -S {self.pages} "
                f"{p} >{p}.log 2>&1 & echo $!; sleep 0.3; cat {p}.log",
            ],
            timeout=60,
        )
        out = r.stdout.split()
        try:
            self.pid = int(out[0])
        except (IndexError, ValueError):
            raise TraceError(f"xentrace did not start: {r.stdout.strip()[:300]}") from None
        ok = self.host.run(["kill", "-0", str(self.pid)], timeout=30, check=False)
        if ok.returncode != 0:
            raise TraceError(f"xentrace exited at once: {' '.join(out[1:])[:500]}")

    def stop(self) -> bytes:
        if self.pid is None:
            return self.data
        pid, p, self.pid = self.pid, self.path, None
        # SIGINT: xentrace flushes what the buffers hold, disables tracing and exits.
        r = self.host.run(
            [
                "sh",
                "-c",
                f"kill -INT {pid}; i=0; while kill -0 {pid} 2>/dev/null; do "
                f"i=$((i+1)); [ $i -gt 200 ] && exit 3; sleep 0.1; done",
            ],
            timeout=60,
            check=False,
        )
        if r.returncode == 3:
            raise TraceError(f"xentrace (pid {pid}) did not exit within 20 s of SIGINT")
        self.data = self.host.get_bytes(p, timeout=120)
        self.host.run(["rm", "-f", p, f"{p}.log"], timeout=30, check=False)
        return self.data

    def __enter__(self) -> Trace:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        except (HostError, TraceError):
            if exc[0] is None:
                raise


def traced_events(
    trace: Trace, doms, names: list[str], what: str, opts: dict, where: dict[str, Any] | None = None
) -> dict[str, Any]:
    """counters.sched_events of a run traced with SCHED_ALL_MASK (xentrace.sched_events, the
    guests named; `where`: placement() of this trace for these guests, if the caller has it);
    a lost record fails the run (the counts would be short), naming `what` (the workload kind)."""
    all_ids = doms.ids()
    ids = {i: n for i, n in all_ids.items() if n in names}
    others = {i: n for i, n in all_ids.items() if n not in names and i != 0}  # domid 0: dom0
    ev = no_lost(sched_events(trace.data, ids, where, others), what, opts)
    ev["bytes"] = len(trace.data)
    ev["coschedule"] = coschedule(trace.data, ids)
    return ev


def sum_events(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """sched_events of several traces of one run (S4's phases) added up: totals, per guest
    (measured ones, and the others where counted), dom0's counts and run intervals where
    counted, migrations, lost records, bytes and the ticks the traces span."""
    out: dict[str, Any] = {"total": {}, "by_vm": {}, "migrations": 0, "lost_records": 0, "bytes": 0, "tsc_span": 0}
    if any("by_other_vm" in p for p in parts):
        out["by_other_vm"] = {}
    if any("dom0" in p for p in parts):
        out["dom0"] = {"events": {}, "runs": 0, "run_ticks": 0, "run_ticks_log2": {}}
    for p in parts:
        _add(out["total"], p["total"])
        for key in ("by_vm", "by_other_vm"):
            for vm, ev in p.get(key, {}).items():
                _add(out[key].setdefault(vm, {}), ev)
        if "dom0" in p:
            d, mine = p["dom0"], out["dom0"]
            _add(mine["events"], d.get("events", {}))
            _add(mine["run_ticks_log2"], d.get("run_ticks_log2", {}))
            _add(mine, {k: int(d.get(k, 0)) for k in ("runs", "run_ticks")})
        _add(out, {k: int(p.get(k, 0)) for k in ("migrations", "lost_records", "bytes", "tsc_span")})
    return out


def _add(into: dict[str, int], counts: dict[str, int]) -> None:
    """Add counts into a dict of counts, key by key."""
    for k, n in counts.items():
        into[k] = into.get(k, 0) + n


def no_lost(result: dict[str, Any], what: str, opts: dict) -> dict[str, Any]:
    """`result` (of placement or sched_events) unless the trace lost records: then RunFailed
    naming `what` and the trace_pages option to raise (counts from a lossy trace are short)."""
    if result["lost_records"]:
        raise RunFailed(
            f"{what}: xentrace lost {result['lost_records']} records (raise trace_pages, now {opts['trace_pages']})"
        )
    return result


def guest_clock(h: Host) -> float | None:
    """dom0's wall clock in seconds (guest time), or None if it cannot be read."""
    try:
        return float(h.run(["date", "+%s.%N"], timeout=60).stdout.strip())
    except ValueError:
        return None


@contextlib.contextmanager
def guest_span(h: Host, counters: dict) -> Iterator[None]:
    """Time the block by dom0's clock: under icount the guest time a trace spans, which
    per-period rates need (the host's wall time would mislead); `trace_window_guest_s`."""
    g0 = guest_clock(h)
    yield
    g1 = guest_clock(h)
    if g0 is not None and g1 is not None:
        counters["trace_window_guest_s"] = round(g1 - g0, 3)
