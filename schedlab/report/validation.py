"""The simulator validated against real credit1 at the scheduler-event level
(`schedlab validate-sim`, notebooks/validation.ipynb, docs/validation.md).

A scenario (config/validation.yaml) pairs records of a study on the qemu testbed that carry
`counters.sched_events` (an xentrace of every scheduler event, schedlab/workloads/xentrace.py)
with a sim scenario mirroring the qemu geometry. Both sides are reduced to the same event
counts of the guest VMs; the table compares dimensionless rates (events per event, events per
30 ms accounting period of guest time) and the guests' run-time shares, each side with a
t-interval over its runs (qemu) or seeds (sim), and marks each row agree / miss against an
acceptance band fixed in the file.
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from schedlab import config, records, store
from schedlab.config import ConfigError

DEFAULT_PATH = config.ROOT / "config" / "validation.yaml"

EVENTS = ("wake", "yield", "block", "switch", "steal", "pick", "tickle", "boost", "ratelimit", "migration")
# events xentrace attributes to a domain (counters.sched_events.by_vm); the others are totals
DOMAIN_EVENTS = ("wake", "yield", "block", "steal", "pick", "boost")
# the simulator's trace records (sim/README.md, "Trace") -> the xentrace event names
SIM_TRACE = {
    "TRC_SCHED_WAKE": "wake",
    "TRC_SCHED_YIELD": "yield",
    "TRC_SCHED_BLOCK": "block",
    "TRC_SCHED_SWITCH": "switch",
    "TRC_CSCHED_STOLEN_VCPU": "steal",
    "TRC_CSCHED_PICKED_CPU": "pick",
    "TRC_CSCHED_TICKLE": "tickle",
    "TRC_CSCHED_BOOST_START": "boost",
    "TRC_CSCHED_RATELIMIT": "ratelimit",
}
AGREE, MISS = "agree", "miss"
NOT_MEASURED = "not measured on qemu"


class ValidationError(ConfigError):
    """Bad validation file: one line naming the file and the field."""


# ---------------------------------------------------------------- the scenario file


def _bad(path, field: str, why: str) -> ValidationError:
    return ValidationError(f"{_rel(path)}: field {field}: {why}")


def _rel(path) -> str:
    p = Path(path).resolve()
    return str(p.relative_to(config.ROOT)) if p.is_relative_to(config.ROOT) else str(path)


def _need(d: dict, key: str, typ, path, where: str):
    if not isinstance(d, dict) or key not in d:
        raise _bad(path, f"{where}.{key}" if where else key, "missing")
    v = d[key]
    if typ is not None and not isinstance(v, typ):
        name = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise _bad(path, f"{where}.{key}" if where else key, f"must be a {name}, got {type(v).__name__}")
    return v


def parse_quantity(text: str, path, field: str) -> tuple[str, str]:
    """'A/B' -> (A, B): events A per event B, or per accounting period when B is 'period'."""
    if not isinstance(text, str) or text.count("/") != 1:
        raise _bad(path, field, f"{text!r} is not 'EVENT/EVENT' or 'EVENT/period'")
    a, b = text.split("/")
    if a not in EVENTS:
        raise _bad(path, field, f"unknown event {a!r} (known: {', '.join(EVENTS)})")
    if b not in EVENTS and b != "period":
        raise _bad(path, field, f"unknown event {b!r} (known: {', '.join(EVENTS)}, period)")
    if a == b:
        raise _bad(path, field, f"{text!r} is always 1")
    return a, b


def load(path: str | os.PathLike = DEFAULT_PATH) -> dict:
    """The validation file, checked: every problem is a ValidationError naming the file and field."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ValidationError(f"{_rel(path)}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ValidationError(f"{_rel(path)}:{where} not valid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(doc, dict):
        raise _bad(path, "(top level)", "must be a mapping")
    unknown = sorted(set(doc) - {"band", "period_ms", "seeds", "scenarios"})
    if unknown:
        raise _bad(path, unknown[0], "unknown field")
    band = _need(doc, "band", dict, path, "")
    ratio = _need(band, "ratio", list, path, "band")
    if len(ratio) != 2 or not all(isinstance(x, (int, float)) for x in ratio) or not 0 < ratio[0] < 1 < ratio[1]:
        raise _bad(path, "band.ratio", f"must be [low, high] with 0 < low < 1 < high, got {ratio!r}")
    share = _need(band, "share_pp", (int, float), path, "band")
    if not 0 < share < 100:
        raise _bad(path, "band.share_pp", f"must be in (0, 100), got {share!r}")
    conf = _need(band, "confidence", (int, float), path, "band")
    if not 50 <= conf < 100:
        raise _bad(path, "band.confidence", f"must be in [50, 100), got {conf!r}")
    period = _need(doc, "period_ms", (int, float), path, "")
    if period <= 0:
        raise _bad(path, "period_ms", f"must be > 0, got {period!r}")
    seeds = _need(doc, "seeds", list, path, "")
    if len(seeds) < 2 or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise _bad(path, "seeds", "must be a list of at least 2 non-negative integers (an interval needs 2)")
    scs = _need(doc, "scenarios", list, path, "")
    if not scs:
        raise _bad(path, "scenarios", "empty")
    names: set[str] = set()
    out = []
    for i, sc in enumerate(scs):
        w = f"scenarios[{i}]"
        if not isinstance(sc, dict):
            raise _bad(path, w, "must be a mapping")
        unknown = sorted(set(sc) - {"name", "description", "qemu", "domains", "sim", "rates", "shares", "known"})
        if unknown:
            raise _bad(path, f"{w}.{unknown[0]}", "unknown field")
        name = _need(sc, "name", str, path, w)
        if name in names:
            raise _bad(path, f"{w}.name", f"duplicate scenario name {name!r}")
        names.add(name)
        _need(sc, "description", str, path, w)
        q = _need(sc, "qemu", dict, path, w)
        study = _need(q, "study", str, path, f"{w}.qemu")
        st = _study(study, path, f"{w}.qemu.study")
        for v in _need(q, "variants", list, path, f"{w}.qemu"):
            if v not in st["variants"]:
                raise _bad(path, f"{w}.qemu.variants", f"study {study} has no variant {v!r}")
        pts = _need(q, "points", list, path, f"{w}.qemu")
        axes = config.testbed_settings(st, "qemu")["axes"]
        for j, p in enumerate(pts):
            if not isinstance(p, dict) or set(p) != set(axes):
                raise _bad(path, f"{w}.qemu.points[{j}]", f"must give the axes {sorted(axes)} of {study}, got {p!r}")
        if q.get("guest_time") not in (None, "lockmod_elapsed", "trace_window"):
            raise _bad(
                path,
                f"{w}.qemu.guest_time",
                f"must be lockmod_elapsed, trace_window or null, got {q.get('guest_time')!r}",
            )
        doms = _need(sc, "domains", dict, path, w)
        if not doms or not all(isinstance(k, str) and isinstance(v, str) for k, v in doms.items()):
            raise _bad(path, f"{w}.domains", "must map qemu guest names to sim domain names")
        sim = _need(sc, "sim", dict, path, w)
        sstudy = _need(sim, "study", str, path, f"{w}.sim")
        _study(sstudy, path, f"{w}.sim.study")
        if sstudy != study:
            raise _bad(path, f"{w}.sim.study", f"must be the qemu side's study {study!r}, got {sstudy!r}")
        for k in ("workload", "scenario"):
            if not isinstance(sim.get(k) or {}, dict):
                raise _bad(path, f"{w}.sim.{k}", "must be a mapping")
        unknown = sorted(set(sim) - {"study", "workload", "scenario", "tail"})
        if unknown:
            raise _bad(path, f"{w}.sim.{unknown[0]}", "unknown field")
        if "tail" in sim:
            tail = sim["tail"]
            if not isinstance(tail, dict) or set(tail) != {"running"} or not isinstance(tail["running"], list):
                raise _bad(path, f"{w}.sim.tail", "must be {running: [sim domains that run on in it]}")
            if q.get("guest_time") != "trace_window":
                raise _bad(
                    path, f"{w}.sim.tail", "needs qemu.guest_time: trace_window (the tail fills the trace's span)"
                )
            for d in tail["running"]:
                if d not in doms.values():
                    raise _bad(path, f"{w}.sim.tail.running", f"{d!r} is not one of the scenario's sim domains")
        rates = _need(sc, "rates", list, path, w)
        parsed = [parse_quantity(r, path, f"{w}.rates[{j}]") for j, r in enumerate(rates)]
        if any(b == "period" for _, b in parsed) and q.get("guest_time") is None:
            raise _bad(path, f"{w}.rates", "per-period rates need qemu.guest_time")
        if not isinstance(sc.get("shares", False), bool):
            raise _bad(path, f"{w}.shares", "must be true or false")
        known = sc.get("known") or {}
        if not isinstance(known, dict):
            raise _bad(path, f"{w}.known", "must map quantities to reasons")
        for k, v in known.items():
            ok = isinstance(v, str) or (
                isinstance(v, dict)
                and v
                and set(v) <= {"below", "above"}
                and all(isinstance(x, str) for x in v.values())
            )
            if not ok:
                raise _bad(path, f"{w}.known.{k}", "must be a reason (text) or {below: text, above: text}")
        for k in known:
            if k not in rates and k != "share":
                raise _bad(path, f"{w}.known.{k}", "not one of the scenario's rates (or 'share')")
        out.append(dict(sc, shares=bool(sc.get("shares", False)), known=known, _study=st))
    return {
        "band": {"ratio": (float(ratio[0]), float(ratio[1])), "share_pp": float(share), "confidence": float(conf)},
        "period_s": float(period) / 1000,
        "seeds": [int(s) for s in seeds],
        "scenarios": out,
        "_file": str(path),
    }


def _study(name: str, path, field: str) -> dict:
    f = config.STUDIES_DIR / f"{name}.yaml"
    if not f.exists():
        raise _bad(path, field, f"no study {name!r} ({_rel(f)} does not exist)")
    return config.load_study(f)


def select(cfg: dict, name: str | None) -> list[dict]:
    if name is None:
        return cfg["scenarios"]
    hit = [s for s in cfg["scenarios"] if s["name"] == name]
    if not hit:
        known = ", ".join(s["name"] for s in cfg["scenarios"])
        raise ValidationError(f"{_rel(cfg['_file'])}: no scenario {name!r} (known: {known})")
    return hit


def cases(sc: dict) -> list[tuple[str, dict]]:
    return [(v, p) for v in sc["qemu"]["variants"] for p in sc["qemu"]["points"]]


# ---------------------------------------------------------------- counts: qemu


def guest_events(by_guest, total: dict, migrations: int) -> dict:
    """The guests' event counts, one rule for both sides (qemu_counts, count_trace): events a
    trace attributes to a domain are summed over the guests (`by_guest`: one count dict per
    guest); switches and tickles carry no domain, so each wake of a domain that is not a guest
    (dom0, S1's netback domain in the sim, idle guests) takes 2 switches (in and out) and 1
    tickle off the totals."""
    out = {e: sum(int(v.get(e, 0)) for v in by_guest) for e in DOMAIN_EVENTS}
    other_wakes = max(0, int(total.get("wake", 0)) - out["wake"])
    out["switch"] = max(0, int(total.get("switch", 0)) - 2 * other_wakes)
    out["tickle"] = max(0, int(total.get("tickle", 0)) - other_wakes)
    out["ratelimit"] = int(total.get("ratelimit", 0))
    out["migration"] = int(migrations)
    return out


def qemu_counts(rec: dict, sc: dict) -> dict | None:
    """A qemu record reduced to the guests' event counts: {"events": {...}, "cpu_s": {sim dom: s},
    "guest_s": s or None}; None if the record has no sched_events.

    Events xentrace attributes to a domain are summed over the scenario's guests. Switches and
    tickles are recorded without a domain; the activity of dom0 and of idle guests is taken
    out as 2 switches (in and out) and one tickle per wake of a domain that is not a guest."""
    c = rec.get("counters") or {}
    ev = c.get("sched_events")
    if not ev:
        return None
    doms = sc["domains"]
    by_vm = {k: v for k, v in (ev.get("by_vm") or {}).items() if k in doms}
    out = guest_events(by_vm.values(), ev.get("total") or {}, int(ev.get("migrations", 0)))
    cpu = {doms[k]: float(v) for k, v in (c.get("cpu_seconds") or {}).items() if k in by_vm}
    guest_s = None
    if sc["qemu"].get("guest_time") == "lockmod_elapsed":
        el = [float(v["elapsed_ns"]) / 1e9 for k, v in (c.get("per_vm") or {}).items() if k in by_vm]
        guest_s = max(el) if el else None
    elif sc["qemu"].get("guest_time") == "trace_window":
        # dom0's clock around the traced measurement (records from 2026-11-24 on)
        g = c.get("trace_window_guest_s")
        guest_s = float(g) if g else None
    return {"events": out, "cpu_s": cpu, "guest_s": guest_s}


def qemu_side(sc: dict, data_dir: Path, base_seed: int) -> dict[tuple[str, str], dict]:
    """Per (variant, point id): the measured runs of the study's current definition (the
    selection `schedlab dataset` makes for the notebooks), warm-ups and failed runs left out,
    as {"counts": [...], "runs": [run ids], "without_events": n, "warmups": n}."""
    study = sc["_study"]
    man = records.select(study, "qemu", Path(data_dir), base_seed)
    want = {(v, config.point_id(p)) for v, p in cases(sc)}
    out: dict[tuple[str, str], dict] = {k: {"counts": [], "runs": [], "without_events": 0, "warmups": 0} for k in want}
    for entry in man["points"]:
        key = (entry["variant"], entry["point_id"])
        if key not in want:
            continue
        for r in entry["runs"]:
            if r["warmup"]:
                out[key]["warmups"] += 1
                continue
            rec = store.read_record(Path(data_dir) / r["path"])
            cnt = qemu_counts(rec, sc)
            if cnt is None:
                out[key]["without_events"] += 1
                continue
            out[key]["counts"].append(cnt)
            out[key]["runs"].append(rec["run_id"])
    return out


# ---------------------------------------------------------------- counts: sim


def merge(base: Any, over: Any) -> Any:
    """`over` merged into `base`: dicts merge key by key, anything else replaces."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = merge(base.get(k), v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def sim_study(sc: dict) -> dict:
    st = copy.deepcopy(sc["_study"])
    st["sim_workload"] = merge(st.get("sim_workload") or {}, sc["sim"].get("workload") or {})
    return st


def count_trace(stream, warmup_ns: int, guests=None) -> dict:
    """Events per xentrace name after `warmup_ns` from a simulator trace (JSON lines), the
    migrations (a vCPU switched in on another pCPU than the one it last ran on: xentrace's
    definition) and the number of records. `guests` (the trace's domain indices of the
    scenario's guests; None: every domain counts as a guest) reduces the counts to the guests'
    by the rule the qemu side uses (guest_events; migrations: the guests' vCPUs', as xentrace's
    placement counts them): without it, the wakes and boosts of a sim domain that stands for
    dom0 (S1's netback) would enter the sim's per-wake rates, while the qemu side counts the
    guests only. The simulator counts the same itself (its result's "xentrace", xentrace_counts)."""
    n = 0
    cnt: Counter = Counter()
    by_dom: dict[int, Counter] = {}
    last: dict[tuple[str, str], str] = {}
    migr = 0
    mine = None if guests is None else {f'"dom":{d}' for d in guests}  # whose migrations count (qemu: guests only)
    for line in stream:
        n += 1
        # {"t_ns":T,"ev":"E","cpu":C,"dom":D,"vcpu":V,...}: the fixed order of the writer
        parts = line.split(",", 5)
        if len(parts) < 6:
            continue
        ev = parts[1][6:-1]
        name = SIM_TRACE.get(ev)
        if name is None:
            continue
        t = int(parts[0][8:])
        if name == "switch":
            dv = (parts[3], parts[4])
            if dv[0] != '"dom":-1':
                cpu = parts[2]
                prev = last.get(dv)
                if prev is not None and prev != cpu and t >= warmup_ns and (mine is None or dv[0] in mine):
                    migr += 1
                last[dv] = cpu
        if t >= warmup_ns:
            cnt[name] += 1
            if guests is not None and name in DOMAIN_EVENTS:
                by_dom.setdefault(int(parts[3][6:]), Counter())[name] += 1
    if guests is not None:
        out = guest_events([by_dom.get(d, {}) for d in set(guests)], cnt, migr)
        return {"events": {e: int(out.get(e, 0)) for e in EVENTS}, "records": n}
    out = {e: int(cnt.get(e, 0)) for e in EVENTS if e != "migration"}
    out["migration"] = migr
    return {"events": out, "records": n}


def xentrace_counts(res: dict, guests: list[int]) -> dict:
    """The simulator's own counts of the xentrace records (its result's "xentrace", counted
    after warm-up as count_trace counts a trace, tests/test_validation.py) reduced to the
    guests by the qemu side's rule (guest_events); migrations are the guests'."""
    xt = res["xentrace"]
    by = [xt["by_domain"][i] for i in sorted(set(guests))]
    out = guest_events(by, xt["total"], sum(int(d.get("migration", 0)) for d in by))
    return {e: int(out.get(e, 0)) for e in EVENTS}


def run_sim_case(sc: dict, variant: str, point: dict, seed: int, binary: str | os.PathLike | None = None) -> dict:
    """One sim run of a case: the study's scenarios (SimTestbed.scenarios) with the scenario's
    overrides, each counted as the qemu side is (the simulator's own xentrace counts, which
    equal its trace's). Deterministic: the same seed gives the same counts."""
    from schedlab.testbeds.sim import SimTestbed, ensure_binary, run_scenario

    tb = SimTestbed(binary=binary)
    study = sim_study(sc)
    exe = ensure_binary(tb.binary, tb.build)
    events: Counter = Counter()
    run_s: dict[str, float] = {}
    guest_s = 0.0
    over = sc["sim"].get("scenario") or {}
    phases = [(tag, merge(scen, over)) for tag, scen in tb.scenarios(study, variant, dict(point), seed)]
    names = set(sc["domains"].values())

    def run_phase(scen: dict) -> float:
        """Run one scenario, add its counts and run times; its measured guest time."""
        scen["domains"] = [d for d in scen["domains"] if (d.get("workload") or {}).get("kind") != "idle"]
        # the guests: the sim domains the scenario maps qemu guests to (not S1's netback dom0)
        guests = [i for i, d in enumerate(scen["domains"]) if d.get("name") in names]
        res = run_scenario(scen, exe, tb.timeout)
        events.update(xentrace_counts(res, guests))
        for d in res["domains"]:
            run_s[d["name"]] = run_s.get(d["name"], 0.0) + float(d["running_s"])
        return float(res["measured_s"])

    for _, scen in phases:
        guest_s += run_phase(scen)
    tail = _tail(sc, variant, point, phases[-1][1], guest_s)
    if tail is not None:  # with nothing running on in it (S1 alone) only its time counts
        guest_s += run_phase(tail) if tail["domains"] else float(tail["duration_s"])
    return {"events": {e: int(events.get(e, 0)) for e in EVENTS}, "cpu_s": run_s, "guest_s": guest_s}


def _tail(sc: dict, variant: str, point: dict, last: dict, guest_s: float) -> dict | None:
    """The remainder of the real trace's span after the mirror's measured phases (`sim.tail`):
    the case's mean trace_window_guest_s (`_span_s`, set by build) less the phases' guest time,
    a scenario in which only the `running` domains run on (S1's hog, while dom0's ssh and xl
    calls around the measurement leave the I/O VM idle). None without a tail or a span."""
    if "tail" not in sc["sim"]:
        return None
    span = (sc.get("_span_s") or {}).get((variant, config.point_id(point)))
    if not span or span <= guest_s:
        return None
    keep = set(sc["sim"]["tail"]["running"])
    return dict(
        last, duration_s=span - guest_s, warmup_s=0.0, domains=[d for d in last["domains"] if d.get("name") in keep]
    )


def sim_side(sc: dict, seeds: list[int], binary=None) -> dict[tuple[str, str], dict]:
    out = {}
    for v, p in cases(sc):
        out[(v, config.point_id(p))] = {"counts": [run_sim_case(sc, v, p, s, binary) for s in seeds], "seeds": seeds}
    return out


# ---------------------------------------------------------------- rates, intervals, verdicts


def rate(counts: dict, a: str, b: str, period_s: float) -> float:
    """Events `a` per event `b` (per accounting period when b == "period") of one run; NaN when
    the denominator is 0 or unknown."""
    num = float(counts["events"][a])
    if b == "period":
        g = counts.get("guest_s")
        den = g / period_s if g else 0.0
    else:
        den = float(counts["events"][b])
    return num / den if den > 0 else float("nan")


def shares(counts: dict, doms: list[str]) -> dict[str, float]:
    """Each domain's share (%) of the run time of `doms` in one run."""
    tot = sum(counts["cpu_s"].get(d, 0.0) for d in doms)
    return {d: (100.0 * counts["cpu_s"].get(d, 0.0) / tot if tot > 0 else float("nan")) for d in doms}


def t_interval(values, confidence: float) -> tuple[float, float, float, float, int]:
    """(mean, sd, low, high, n) of the finite values: a Student t-interval of the mean
    (NaN ends with fewer than 2 values)."""
    from scipy import stats as st

    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = len(x)
    if n == 0:
        return (math.nan,) * 4 + (0,)
    m = float(x.mean())
    if n < 2:
        return m, math.nan, math.nan, math.nan, 1
    sd = float(x.std(ddof=1))
    h = float(st.t.ppf(0.5 + confidence / 200, n - 1)) * sd / math.sqrt(n)
    return m, sd, m - h, m + h, n


def ratio_interval(sim: list[float], qemu: list[float], confidence: float) -> tuple[float, float, float]:
    """sim/qemu ratio of means with a Welch interval on the log scale (delta method):
    log(ms/mq) +- t * sqrt(ss^2/(ns ms^2) + sq^2/(nq mq^2)), Welch-Satterthwaite df. With both
    means 0 the ratio is 1 (nothing on either side); with one of them 0 it is 0 or inf and the
    interval is that point. Needs 2 values on each side, else NaN ends."""
    from scipy import stats as st

    ms, ss, _, _, ns = t_interval(sim, confidence)
    mq, sq, _, _, nq = t_interval(qemu, confidence)
    if ns == 0 or nq == 0:
        return math.nan, math.nan, math.nan
    if ms == 0 and mq == 0:
        return 1.0, 1.0, 1.0
    if ms == 0 or mq == 0:
        r = 0.0 if ms == 0 else math.inf
        return r, r, r
    r = ms / mq
    if ns < 2 or nq < 2:
        return r, math.nan, math.nan
    vs, vq = ss**2 / (ns * ms**2), sq**2 / (nq * mq**2)
    se = math.sqrt(vs + vq)
    if se == 0:
        return r, r, r
    df = (vs + vq) ** 2 / ((vs**2 / (ns - 1) if ns > 1 else 0) + (vq**2 / (nq - 1) if nq > 1 else 0))
    h = float(st.t.ppf(0.5 + confidence / 200, df)) * se
    return r, r * math.exp(-h), r * math.exp(h)


def diff_interval(sim: list[float], qemu: list[float], confidence: float) -> tuple[float, float, float]:
    """sim - qemu difference of means with a Welch t-interval (NaN ends with < 2 values a side)."""
    from scipy import stats as st

    ms, ss, _, _, ns = t_interval(sim, confidence)
    mq, sq, _, _, nq = t_interval(qemu, confidence)
    d = ms - mq
    if ns < 2 or nq < 2:
        return d, math.nan, math.nan
    vs, vq = ss**2 / ns, sq**2 / nq
    se = math.sqrt(vs + vq)
    if se == 0:
        return d, d, d
    df = (vs + vq) ** 2 / (vs**2 / (ns - 1) + vq**2 / (nq - 1))
    h = float(st.t.ppf(0.5 + confidence / 200, df)) * se
    return d, d - h, d + h


def overlaps(low: float, high: float, band: tuple[float, float]) -> bool:
    return not (math.isnan(low) or math.isnan(high)) and low <= band[1] and high >= band[0]


def verdict_ratio(r: float, low: float, high: float, band: tuple[float, float]) -> str:
    if math.isnan(r):
        return MISS
    if math.isnan(low) or math.isnan(high):
        low = high = r
    return AGREE if overlaps(low, high, band) else MISS


def verdict_share(d: float, low: float, high: float, pp: float) -> str:
    if math.isnan(d):
        return MISS
    if math.isnan(low) or math.isnan(high):
        low = high = d
    return AGREE if overlaps(low, high, (-pp, pp)) else MISS


COLUMNS = [
    "scenario",
    "variant",
    "point",
    "quantity",
    "kind",
    "qemu_n",
    "qemu_mean",
    "qemu_low",
    "qemu_high",
    "sim_n",
    "sim_mean",
    "sim_low",
    "sim_high",
    "ratio",
    "ratio_low",
    "ratio_high",
    "diff_pp",
    "diff_low",
    "diff_high",
    "verdict",
    "reason",
    "qemu_runs",
]


def compare(sc: dict, qemu: dict, sim: dict, cfg: dict) -> pd.DataFrame:
    """The comparison rows of one scenario: one per (variant, point, quantity)."""
    band, conf, period = cfg["band"], cfg["band"]["confidence"], cfg["period_s"]
    rows = []
    for v, p in cases(sc):
        pid = config.point_id(p)
        q = qemu.get((v, pid)) or {"counts": [], "runs": [], "without_events": 0, "warmups": 0}
        s = (sim or {}).get((v, pid)) or {"counts": []}
        qc, scn = q["counts"], s["counts"]
        why = f"{NOT_MEASURED} ({_why_none(q)})"
        quantities = [("rate", r) for r in sc["rates"]]
        if sc["shares"]:
            doms = _share_doms(sc, qc, scn)
            quantities += [("share", d) for d in doms] if len(doms) > 1 else []
        for kind, qty in quantities:
            base = {"scenario": sc["name"], "variant": v, "point": pid, "quantity": qty, "kind": kind}
            if kind == "rate":
                a, b = qty.split("/")
                qv = [rate(c, a, b, period) for c in qc]
                sv = [rate(c, a, b, period) for c in scn]
            else:
                doms = _share_doms(sc, qc, scn)
                base["quantity"] = f"share {qty}"
                qv = [shares(c, doms)[qty] for c in qc]
                sv = [shares(c, doms)[qty] for c in scn]
            qm, _, ql, qh, qn = t_interval(qv, conf)
            sm, _, sl, sh, sn = t_interval(sv, conf)
            row = dict(
                base,
                qemu_n=qn,
                qemu_mean=qm,
                qemu_low=ql,
                qemu_high=qh,
                sim_n=sn,
                sim_mean=sm,
                sim_low=sl,
                sim_high=sh,
                ratio=math.nan,
                ratio_low=math.nan,
                ratio_high=math.nan,
                diff_pp=math.nan,
                diff_low=math.nan,
                diff_high=math.nan,
                qemu_runs=list(q["runs"]),
            )
            if not qc:
                row.update(verdict=NOT_MEASURED, reason=why)
            elif qn == 0 or sn == 0:
                side = "qemu" if qn == 0 else "sim"
                row.update(verdict=MISS, reason=f"undefined on {side} (no {qty.split('/')[-1]} events)")
            elif kind == "rate":
                r, lo, hi = ratio_interval(sv, qv, conf)
                vd = verdict_ratio(r, lo, hi, band["ratio"])
                row.update(ratio=r, ratio_low=lo, ratio_high=hi, verdict=vd)
                row["reason"] = "" if vd == AGREE else known_reason(sc["known"].get(qty), r < 1)
                if qn < 2:
                    row["reason"] = (row["reason"] + "; " if row["reason"] else "") + "one qemu run: no interval"
            else:
                d, lo, hi = diff_interval(sv, qv, conf)
                vd = verdict_share(d, lo, hi, band["share_pp"])
                row.update(diff_pp=d, diff_low=lo, diff_high=hi, verdict=vd)
                row["reason"] = "" if vd == AGREE else known_reason(sc["known"].get("share"), d < 0)
                if qn < 2:
                    row["reason"] = (row["reason"] + "; " if row["reason"] else "") + "one qemu run: no interval"
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def known_reason(entry, below: bool) -> str:
    """The documented reason of a miss: a text (either direction) or {below: ..., above: ...}
    (sim below / above qemu); "unexplained" when none applies."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict):
        return entry.get("below" if below else "above") or "unexplained"
    return "unexplained"


def _why_none(q: dict) -> str:
    if q["without_events"]:
        return f"{q['without_events']} measured run(s) without sched_events"
    if q["warmups"]:
        return f"no measured run yet; {q['warmups']} warm-up(s)"
    return "no records of the current definition"


def _share_doms(sc: dict, qc: list[dict], scn: list[dict]) -> list[str]:
    """The sim names of the guests present on both sides (on one side if the other has no runs)."""
    order = list(sc["domains"].values())
    have_q = {d for c in qc for d in c["cpu_s"]}
    have_s = {d for c in scn for d in c["cpu_s"]}
    both = (have_q & have_s) if qc and scn else (have_q | have_s)
    return [d for d in order if d in both]


def build(
    cfg: dict,
    data_dir: Path,
    base_seed: int,
    scenario: str | None = None,
    binary=None,
    sim_runner=None,
    progress=None,
) -> pd.DataFrame:
    """The whole comparison table: the sim side (every seed of every case) and the qemu side."""
    frames = []
    for sc in select(cfg, scenario):
        q = qemu_side(sc, data_dir, base_seed)
        if "tail" in sc["sim"]:
            # the span the mirror fills per case: the mean guest time of the real traces
            spans = {k: [c["guest_s"] for c in v["counts"] if c["guest_s"]] for k, v in q.items()}
            sc = dict(sc, _span_s={k: sum(v) / len(v) for k, v in spans.items() if v})
        if progress:
            progress(f"{sc['name']}: sim {len(cases(sc))} case(s) x {len(cfg['seeds'])} seed(s)")
        s = (sim_runner or sim_side)(sc, cfg["seeds"], binary)
        frames.append(compare(sc, q, s, cfg))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


# ---------------------------------------------------------------- output


def _sig(x: float, digits: int = 2) -> str:
    """x to `digits` significant digits, never in exponent form (175 -> "180", 0.0058 -> "0.0058")."""
    if x == 0:
        return "0"
    mag = int(math.floor(math.log10(abs(x))))
    s = f"{round(x, digits - 1 - mag):.{max(0, digits - 1 - mag)}f}"
    return s.lstrip("-") if float(s) == 0 else s


def _num(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "--"
    if math.isinf(x):
        return r"$\infty$"
    return _sig(x, digits)


def _br(lo: float, hi: float, digits: int = 2) -> str:
    if math.isnan(lo) or math.isnan(hi):
        return ""
    return f" [{_num(lo, digits)}, {_num(hi, digits)}]"


def table_rows(df: pd.DataFrame) -> tuple[list, list, dict]:
    """LaTeX columns, rows and the sidecar cells of the full table (one row per quantity)."""
    from schedlab.report.tables import latex_escape as esc

    columns = [
        ("scenario", "l"),
        ("variant", "l"),
        ("point", "l"),
        ("quantity", "l"),
        ("qemu [interval]", "l"),
        ("sim [interval]", "l"),
        (r"sim/qemu or $\Delta$ pp [interval]", "l"),
        ("verdict", "l"),
        ("reason", "p{5cm}"),
    ]
    rows, cells = [], {}
    prev = None
    for i, r in df.iterrows():
        key = (r["scenario"], r["variant"], r["point"])
        if prev is not None and key[0] != prev[0]:
            rows.append(None)
        prev = key
        if r["kind"] == "share":
            cmp_text = (_num(r["diff_pp"], 2) + _br(r["diff_low"], r["diff_high"])) if r["qemu_n"] else "--"
        else:
            cmp_text = (_num(r["ratio"]) + _br(r["ratio_low"], r["ratio_high"])) if r["qemu_n"] else "--"
        row = [
            esc(r["scenario"]),
            esc(r["variant"]),
            esc(r["point"]),
            esc(r["quantity"]),
            _num(r["qemu_mean"]) + _br(r["qemu_low"], r["qemu_high"]),
            _num(r["sim_mean"]) + _br(r["sim_low"], r["sim_high"]),
            cmp_text,
            esc(r["verdict"]),
            esc(r["reason"]),
        ]
        rows.append(row)
        share = r["kind"] == "share"
        cells[cell_id(r)] = {
            "row": int(i),
            "col": 6,
            "text": cmp_text,
            "value": r["diff_pp"] if share else r["ratio"],
            "low": r["diff_low"] if share else r["ratio_low"],
            "high": r["diff_high"] if share else r["ratio_high"],
            "stat": (
                "sim - qemu difference of the guests' run-time share in percentage points, Welch t-interval"
                if share
                else "sim/qemu ratio of mean rates, Welch interval on the log scale"
            ),
            "verdict": r["verdict"],
            "reason": r["reason"],
            "runs": list(r["qemu_runs"]),
        }
    return columns, rows, cells


def cell_id(r) -> str:
    """A row's id in the sidecar and the macros: scenario/variant/point/quantity, '/' in the
    quantity and spaces as '-' (boost/wake -> boost-wake, share io -> share-io)."""
    q = str(r["quantity"]).replace("/", "-").replace(" ", "-")
    return f"{r['scenario']}/{r['variant']}/{r['point']}/{q}"


CAPTION = (
    r"The simulator against real credit1 (Xen 4.17 under QEMU, xentrace of every scheduler event) in "
    r"scenarios that mirror the qemu geometry: rates per scheduler event and per 30\,ms accounting period "
    r"of guest time, and the guests' run-time shares; each side's mean with its 95\,\% t-interval (qemu: "
    r"runs, sim: seeds). A rate agrees when the interval of sim/qemu overlaps [0.5, 2], a share when the "
    r"interval of the difference overlaps $\pm$10 points. Regenerate: "
    r"\texttt{schedlab validate-sim} or \texttt{snakemake -c1 paper/generated/validation/table.tex}."
)

# The paper's table (table.tex): one row per scenario x variant x point, the most telling
# quantities as columns; the full table (table-full.tex, table.csv) has every quantity.
PAPER_COLUMNS = [
    ("switch/period", "switch/period"),
    ("yield/switch", "yield/switch"),
    ("migration/switch", "migration/switch"),
    ("boost/wake", "BOOST/wake"),
    ("tickle/wake", "tickle/wake"),
    ("share", r"share, $\Delta$\,pp"),
]
EXTRA = "@@not-measured@@"
AGREE_MARK, MISS_MARK, KNOWN_MARK = r"$\checkmark$", r"$\times$", r"$\times^{\dagger}$"

PAPER_CAPTION = (
    r"The simulator against real credit1 (Xen 4.17 under QEMU, with an xentrace of every scheduler "
    r"event), one row per case: the sim/qemu ratio of each mean rate, per scheduler event or per "
    r"{period}\,ms accounting period of guest time, with its {conf}\,\% interval (Welch, log scale; "
    r"none with one qemu run), and for the guests' run-time shares the difference sim $-$ qemu in "
    r"points: for S1 the I/O VM's, otherwise the guest furthest from its qemu share. {agree}: the "
    r"interval overlaps the band fixed beforehand, [{lo}, {hi}] for ratios and $\pm${pp} points for "
    r"shares; {miss}: it does not; {known}: a miss with a reason documented in the model (dom0 is not "
    r"modelled; in S0 also the testbed's PAUSE: a real waiter reaches its spin count only beside a spinning or idle pCPU). ``both 0'': neither side has the event. Blank: not compared in that scenario. "
    r"``agree'': of all the case's compared quantities (steals, per-period yields and migrations, every "
    r"guest's share included), how many agree. runs: measured qemu runs with the trace; the sim side "
    r"has {seeds} seeds per case. Every quantity of every case is in \texttt{{table.csv}} and "
    r"\texttt{{table-full.tex}} beside this table. Regenerate: \texttt{{schedlab validate-sim}} or "
    r"\texttt{{snakemake -c1 paper/generated/validation/table.tex}}."
)


def _point_text(point_id: str, sc: dict) -> str:
    for _, p in cases(sc):
        if config.point_id(p) == point_id:
            return ", ".join(f"{k}={v}" for k, v in p.items())
    return point_id


def documented(reason: str) -> bool:
    """A miss's reason is one the model documents (not "unexplained", not an undefined rate)."""
    first = str(reason).split(";")[0].strip()
    return first not in ("", "unexplained", "one qemu run: no interval") and not first.startswith("undefined")


def _mark(r) -> str:
    if r["verdict"] == AGREE:
        return AGREE_MARK
    return KNOWN_MARK if documented(r["reason"]) else MISS_MARK


def _fin(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def paper_cell(r) -> str:
    """One compact cell: sim/qemu (or the share difference) and the agree / miss mark, its
    interval below in small type."""
    from schedlab.report.tables import fmt_bracket, fmt_signed

    below = ""
    if r["kind"] == "share":
        text = fmt_signed(r["diff_pp"])
        if _fin(r["diff_low"]) and _fin(r["diff_high"]):
            below = fmt_bracket(r["diff_low"], r["diff_high"], 1)
    elif r["qemu_mean"] == 0 and r["sim_mean"] == 0:
        text = "both 0"
    else:
        text = _num(r["ratio"], 2)
        if _fin(r["ratio_low"]) and _fin(r["ratio_high"]) and r["ratio_low"] != r["ratio_high"]:
            below = _br(r["ratio_low"], r["ratio_high"]).strip()
    text = f"{text} {_mark(r)}"
    if not below:
        return text
    return rf"\begin{{tabular}}[t]{{@{{}}l@{{}}}}{text}\\[-2pt]{{\scriptsize {below}}}\end{{tabular}}"


def _share_row(g: pd.DataFrame):
    """The share shown for a case: the I/O VM's if the scenario has one, else the guest whose
    share is furthest from qemu's; a miss of any guest's share is shown (it is the furthest)."""
    sh = g[(g["kind"] == "share") & (g["verdict"] != NOT_MEASURED)]
    if sh.empty:
        return None
    io = sh[sh["quantity"] == "share io"]
    if not io.empty:
        return io.iloc[0]
    return sh.loc[sh["diff_pp"].abs().idxmax()]


def _unmeasured_line(label: str, g: pd.DataFrame, sc: dict | None, every: bool) -> str:
    """The one line of a scenario's cases without qemu records that carry the trace (`every`:
    all of the scenario's cases, which the line then does not list)."""
    from schedlab.report.tables import latex_escape as esc

    keys = list(dict.fromkeys(zip(g["variant"], g["point"])))
    what = "; ".join(f"{esc(v)} at {esc(_point_text(p, sc) if sc else p)}" for v, p in keys)
    reasons = list(g.drop_duplicates(["variant", "point"])["reason"])
    runs = [re.search(r"\((\d+) measured run\(s\) without sched_events\)", x) for x in reasons]
    if all(runs):
        why = f"none of its {sum(int(m.group(1)) for m in runs)} measured runs carries the trace"
    else:
        why = "; ".join(dict.fromkeys(x.removeprefix(NOT_MEASURED).strip(" ()") for x in reasons))
    span = len(PAPER_COLUMNS) + 4
    what = "" if every else f" ({what})"
    return rf"{label} & \multicolumn{{{span}}}{{l}}{{not measured on qemu with Xen's trace{what}: {esc(why)}}} \\"


def paper_table(df: pd.DataFrame, cfg: dict) -> tuple[str, dict]:
    """The paper's compact table (table.tex) and its sidecar cells: one row per measured case,
    PAPER_COLUMNS as cells, one line per scenario for the cases not measured on qemu."""
    from schedlab.report.tables import latex_escape as esc
    from schedlab.report.tables import latex_table, render_tabular

    scs = {s["name"]: s for s in cfg["scenarios"]}
    columns = [("", "l"), ("variant", "l"), ("point", "l"), ("runs", "r")]
    columns += [(h, "l") for _, h in PAPER_COLUMNS] + [("agree", "r")]
    rows: list = []
    cells: dict = {}
    extra: list[str] = []  # the not-measured lines, in order: multicolumn rows render_tabular cannot make
    for name, g in df.groupby("scenario", sort=False):
        sc = scs.get(name)
        label = esc(sc["qemu"]["study"].upper()) if sc else esc(name)
        if rows:
            rows.append(None)
        first = True
        for (v, p), cg in g.groupby(["variant", "point"], sort=False):
            meas = cg[cg["verdict"] != NOT_MEASURED]
            if meas.empty:
                continue
            row = [label if first else "", esc(v), esc(_point_text(p, sc) if sc else p)]
            row.append(str(max(len(x) for x in cg["qemu_runs"])))
            for col, (q, _) in enumerate(PAPER_COLUMNS, start=4):
                r = _share_row(cg) if q == "share" else next(
                    (x for _, x in meas[meas["quantity"] == q].iterrows()), None)  # fmt: skip
                if r is None:
                    row.append("")
                    continue
                row.append(paper_cell(r))
                cells[cell_id(r)] = {"row": len([x for x in rows if x is not None]), "col": col,
                                     "text": row[-1], "verdict": r["verdict"]}  # fmt: skip
            n_ok = int((meas["verdict"] == AGREE).sum())
            row.append(f"{n_ok}/{len(meas)}")
            rows.append(row)
            first = False
        rest = g[g["verdict"] == NOT_MEASURED]
        if len(rest):
            extra.append(_unmeasured_line("" if not first else label, rest, sc, first))
            rows.append([EXTRA] + [""] * (len(columns) - 1))
    while rows and rows[-1] is None:
        rows.pop()
    lines = render_tabular(columns, rows).split("\n")
    tab = "\n".join(extra.pop(0) if ln.startswith(EXTRA) else ln for ln in lines)
    b = cfg["band"]
    caption = PAPER_CAPTION.format(
        period=f"{cfg['period_s'] * 1000:g}", conf=f"{b['confidence']:g}", lo=f"{b['ratio'][0]:g}",
        hi=f"{b['ratio'][1]:g}", pp=f"{b['share_pp']:g}", seeds=len(cfg["seeds"]), agree=AGREE_MARK,
        miss=MISS_MARK, known=KNOWN_MARK)  # fmt: skip
    return latex_table(tab, caption, "tab:validation"), cells


def write_outputs(df: pd.DataFrame, out_dir: Path, cfg: dict) -> dict[str, Path]:
    """table.tex (the paper's compact table), table-full.tex and table.csv (every quantity),
    cells.json (the sidecar: every cell of the full table with its qemu runs, and where the
    paper's table shows it) and macros.tex in out_dir."""
    from schedlab.core.files import atomic_write
    from schedlab.report.tables import latex_table, render_tabular, write_macros, write_sidecar

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv = df.drop(columns=["qemu_runs"]).assign(qemu_runs=[" ".join(x) for x in df["qemu_runs"]])
    atomic_write(out_dir / "table.csv", csv.to_csv(index=False))
    columns, rows, cells = table_rows(df)
    caption = CAPTION.replace("[0.5, 2]", f"[{cfg['band']['ratio'][0]:g}, {cfg['band']['ratio'][1]:g}]")
    caption = caption.replace(r"$\pm$10", rf"$\pm${cfg['band']['share_pp']:g}")
    caption = caption.replace("validation/table.tex", "validation/table-full.tex")
    full = latex_table(render_tabular(columns, rows), caption, "tab:validation-full")
    atomic_write(out_dir / "table-full.tex", full)
    tex, paper_cells = paper_table(df, cfg)
    atomic_write(out_dir / "table.tex", tex)
    for k, c in paper_cells.items():
        cells[k]["paper"] = {"row": c["row"], "col": c["col"], "text": c["text"]}
    write_sidecar(
        out_dir / "cells.json",
        {"table": "validation", "file": "table-full.tex", "paper_file": "table.tex", "cells": cells},
    )
    write_macros(out_dir / "macros.tex", "validation", macros(df, cfg))
    return {
        k: out_dir / f
        for k, f in (("csv", "table.csv"), ("tex", "table.tex"), ("full", "table-full.tex"), ("cells", "cells.json"))
    }


def macros(df: pd.DataFrame, cfg: dict | None = None) -> dict[str, str]:
    """The section's numbers: counts per verdict (all, per scenario), the band, and per compared
    row (ID = cell_id): ID/qemu, ID/sim (means), ID/ratio or ID/diff, ID/interval, ID/verdict
    ("agrees" / "misses") and ID/miss (only when it misses: for \\ifcsname); per scenario the
    counts, SCENARIO/unexplained/list (the misses without a documented reason, as text) and the
    flags SCENARIO/none-miss, SCENARIO/unmeasured-all and SCENARIO/single-run (a case with one
    qemu run). For scenarios of two variants, SCENARIO/POINT/QUANTITY/effect/{qemu,sim}: the
    second variant's mean over the first's on each side, and .../effect/same: defined when both
    move the same way."""
    from schedlab.report.tables import fmt_bracket, fmt_signed
    from schedlab.report.tables import latex_escape as esc

    m = {
        "rows": str(len(df)),
        "agree": str(int((df["verdict"] == AGREE).sum())),
        "miss": str(int((df["verdict"] == MISS).sum())),
        "unmeasured": str(int((df["verdict"] == NOT_MEASURED).sum())),
    }
    m["compared"] = str(int((df["verdict"] != NOT_MEASURED).sum()))
    scs = {s["name"]: s for s in (cfg or {}).get("scenarios", [])}
    if cfg:
        b = cfg["band"]
        m["band/low"], m["band/high"] = f"{b['ratio'][0]:g}", f"{b['ratio'][1]:g}"
        m["band/pp"], m["band/confidence"] = f"{b['share_pp']:g}", f"{b['confidence']:g}"
        m["period-ms"], m["seeds"] = f"{cfg['period_s'] * 1000:g}", str(len(cfg["seeds"]))
        m["scenarios"] = str(len(cfg["scenarios"]))
    for name, g in df.groupby("scenario"):
        meas = g[g["verdict"] != NOT_MEASURED]
        miss = meas[meas["verdict"] == MISS]
        unexpl = miss[~miss["reason"].map(documented).astype(bool)]
        m[f"{name}/agree"] = str(int((g["verdict"] == AGREE).sum()))
        m[f"{name}/miss"] = str(len(miss))
        m[f"{name}/compared"] = str(len(meas))
        m[f"{name}/unexplained"] = str(len(unexpl))
        m[f"{name}/documented"] = str(len(miss) - len(unexpl))
        m[f"{name}/cases"] = str(len(meas.drop_duplicates(["variant", "point"])))
        n_runs = [len(x) for x in meas["qemu_runs"]]
        m[f"{name}/runs-min"] = str(min(n_runs)) if n_runs else "0"
        m[f"{name}/runs-max"] = str(max(n_runs)) if n_runs else "0"
        if 1 in n_runs:
            m[f"{name}/single-run"] = "1"
        parts = []
        for (v, p), cg in unexpl.groupby(["variant", "point"], sort=False):
            pt = _point_text(p, scs[name]) if name in scs else p
            parts.append(f"{esc(v)} at {esc(pt)} ({', '.join(esc(q) for q in cg['quantity'])})")
        m[f"{name}/unexplained/list"] = "; ".join(parts) if parts else "none"
        if parts:  # the paper's text branches on it: "N misses are unexplained: ..." or "none is"
            m[f"{name}/unexplained/any"] = "1"
        if len(miss) == 0:
            m[f"{name}/none-miss"] = "1"
        if meas.empty:
            m[f"{name}/unmeasured-all"] = "1"
        for kind in ("rate", "share"):
            k = meas[meas["kind"] == kind]
            m[f"{name}/{kind}/agree"], m[f"{name}/{kind}/compared"] = (
                str(int((k["verdict"] == AGREE).sum())),
                str(len(k)),
            )
    for _, r in df[df["verdict"] != NOT_MEASURED].iterrows():
        k = cell_id(r)
        m[f"{k}/qemu"], m[f"{k}/sim"] = _num(r["qemu_mean"], 2), _num(r["sim_mean"], 2)
        if r["kind"] == "share":
            m[f"{k}/diff"] = fmt_signed(r["diff_pp"])
            m[f"{k}/interval"] = fmt_bracket(r["diff_low"], r["diff_high"], 1)
        else:
            m[f"{k}/ratio"] = _num(r["ratio"], 2)
            ok = _fin(r["ratio_low"]) and _fin(r["ratio_high"])
            m[f"{k}/interval"] = f"[{_num(r['ratio_low'], 2)}, {_num(r['ratio_high'], 2)}]" if ok else "--"
        m[f"{k}/verdict"] = "agrees" if r["verdict"] == AGREE else "misses"
        if r["verdict"] == MISS:
            m[f"{k}/miss"] = "1"
    m.update(_effects(df))
    return m


def _effects(df: pd.DataFrame) -> dict[str, str]:
    """Second variant / first variant, per scenario, point and rate, on each side."""
    out = {}
    rates = df[(df["kind"] == "rate") & (df["verdict"] != NOT_MEASURED)]
    for name, g in rates.groupby("scenario", sort=False):
        variants = list(dict.fromkeys(df[df["scenario"] == name]["variant"]))
        if len(variants) != 2:
            continue
        a, b = variants
        for (p, q), cg in g.groupby(["point", "quantity"], sort=False):
            by = {r["variant"]: r for _, r in cg.iterrows()}
            if a not in by or b not in by:
                continue
            key = f"{name}/{p}/{q.replace('/', '-')}/effect"
            same = []
            for side in ("qemu", "sim"):
                x, y = by[a][f"{side}_mean"], by[b][f"{side}_mean"]
                if _fin(x) and _fin(y) and x > 0:
                    out[f"{key}/{side}"] = _num(y / x, 2)
                    same.append(0 if y == x else (1 if y > x else -1))
            if len(same) == 2 and same[0] == same[1] != 0:
                out[f"{key}/same"] = "1"
    return out


def summary(df: pd.DataFrame) -> list[str]:
    lines = []
    for name, g in df.groupby("scenario", sort=False):
        n_meas = int((g["verdict"] != NOT_MEASURED).sum())
        if n_meas == 0:
            lines.append(f"{name}: {g['reason'].iloc[0]}")
            continue
        agree = int((g["verdict"] == AGREE).sum())
        line = f"{name}: {agree} of {n_meas} compared rows agree"
        unmeasured = len(g) - n_meas
        if unmeasured:
            line += f" ({unmeasured} rows {NOT_MEASURED})"
        misses = g[g["verdict"] == MISS]
        if len(misses):
            line += "; misses: " + ", ".join(
                f"{r.variant}/{r.point} {r.quantity}" + (" (unexplained)" if r.reason == "unexplained" else "")
                for r in misses.itertuples()
            )
        lines.append(line)
    return lines


def main(scenario: str | None, out: str | os.PathLike, config_file=None, data_dir="data") -> int:
    """`schedlab validate-sim`: the table (CSV, LaTeX, sidecar, macros) and a short summary."""
    import sys

    cfg = load(config_file or DEFAULT_PATH)
    base_seed = config.load_config()["seed"]
    df = build(cfg, Path(data_dir), base_seed, scenario, progress=lambda s: print(s, file=sys.stderr, flush=True))
    paths = write_outputs(df, Path(out), cfg)
    for line in summary(df):
        print(line)
    print(f"tables: {paths['tex']} (the paper's), {paths['full']} and {paths['csv']} (every quantity)")
    return 0
