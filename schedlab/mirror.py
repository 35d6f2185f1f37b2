"""The validation's simulator runs: the run stage of `schedlab validate-sim` (docs/validation.md).

    python -m schedlab.mirror run --out MANIFEST [--sim PATH [--mutant NAME]] [--jobs N]

A scenario of config/validation.yaml mirrors a qemu geometry on the simulator (its study's
scenarios with the scenario's overrides, `sim:`); each case (variant, point) of it runs at
each of the file's `seeds`, and each run is reduced to the guests' event counts, run times and
effect metrics the way the qemu side is (guest_events). Every such run is a raw record written
by the run stage's one record writer (schedlab.run.PointRunner, purpose "validation") in
DATA/raw/validation/STUDY/: its definition is the study's sim definition with the scenario's
mirror (so no run key equals one of the study's own), its build the simulator binary's sha256
with the scenario code, so the model and each mutant have runs of their own, reused on a rerun.
The manifest lists the runs of each case; schedlab.report.validation reads only those records.

The scenario file is loaded here (the run stage needs its cases and seeds; the report reads
it through this module), with the qemu side's reduction of a record (qemu_side), which the
mirror needs for the span of a trace window (`sim.tail`).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import io
import json
import math
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

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

MODEL = "model"  # the kill matrix's row of the simulator as it is


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


def _point_of(p, axes, path, field) -> str:
    if not isinstance(p, dict) or set(p) != set(axes):
        raise _bad(path, field, f"must give the axes {sorted(axes)}, got {p!r}")
    return config.point_id(p)


def _variant_pair(v, variants, path, field) -> tuple[str, str]:
    if not isinstance(v, list) or len(v) != 2 or v[0] == v[1] or not all(x in variants for x in v):
        raise _bad(path, field, f"must be two of the scenario's variants {variants}, got {v!r}")
    return v[0], v[1]


def _load_band(doc: dict, path, names: dict) -> dict:
    band = _need(doc, "band", dict, path, "")
    unknown = sorted(set(band) - {"confidence", "effect_confidence", "z", "margins"})
    if unknown:
        raise _bad(path, f"band.{unknown[0]}", "unknown field")
    out = {}
    for k in ("confidence", "effect_confidence"):
        v = _need(band, k, (int, float), path, "band")
        if not 50 <= v < 100:
            raise _bad(path, f"band.{k}", f"must be in [50, 100), got {v!r}")
        out[k] = float(v)
    z = _need(band, "z", (int, float), path, "band")
    if not 0 < z < 10:
        raise _bad(path, "band.z", f"must be in (0, 10), got {z!r}")
    out["z"] = float(z)
    margins = band.get("margins") or {}
    if not isinstance(margins, dict):
        raise _bad(path, "band.margins", "must map scenario names to {point: {quantity: margin}}")
    out["margins"] = {}
    for name, by_point in margins.items():
        if name not in names:
            raise _bad(path, f"band.margins.{name}", "not a scenario of the file")
        if not isinstance(by_point, dict):
            raise _bad(path, f"band.margins.{name}", "must map point ids to {quantity: margin}")
        out["margins"][name] = {}
        for pid, m in by_point.items():
            f = f"band.margins.{name}.{pid}"
            if pid not in names[name]["points"]:
                raise _bad(path, f, f"not a point of the scenario ({', '.join(names[name]['points'])})")
            if not isinstance(m, dict):
                raise _bad(path, f, "must map quantities to margins")
            for q, v in m.items():
                if q != "share" and q not in names[name]["rates"]:
                    raise _bad(path, f"{f}.{q}", "not one of the scenario's rates (or 'share')")
                if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or (q != "share" and v < 1):
                    raise _bad(path, f"{f}.{q}", f"must be a factor >= 1 (rates) or points >= 0 (share), got {v!r}")
            out["margins"][name][pid] = {q: float(v) for q, v in m.items()}
    return out


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
    unknown = sorted(set(doc) - {"band", "verdict", "period_ms", "seeds", "mutants", "scenarios"})
    if unknown:
        raise _bad(path, unknown[0], "unknown field")
    verdict = _need(doc, "verdict", dict, path, "")
    if set(verdict) != {"rows_agree_above"}:
        raise _bad(path, "verdict", "must be {rows_agree_above: fraction}")
    frac = verdict["rows_agree_above"]
    if not isinstance(frac, (int, float)) or isinstance(frac, bool) or not 0 <= frac < 1:
        raise _bad(path, "verdict.rows_agree_above", f"must be a fraction in [0, 1), got {frac!r}")
    period = _need(doc, "period_ms", (int, float), path, "")
    if period <= 0:
        raise _bad(path, "period_ms", f"must be > 0, got {period!r}")
    seeds = _need(doc, "seeds", list, path, "")
    if len(seeds) < 2 or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise _bad(path, "seeds", "must be a list of at least 2 non-negative integers (an interval needs 2)")
    scs = _need(doc, "scenarios", list, path, "")
    if not scs:
        raise _bad(path, "scenarios", "empty")
    names: dict[str, list] = {}
    out = []
    for i, sc in enumerate(scs):
        w = f"scenarios[{i}]"
        if not isinstance(sc, dict):
            raise _bad(path, w, "must be a mapping")
        unknown = sorted(
            set(sc)
            - {"name", "description", "qemu", "domains", "sim", "rates", "shares", "known", "calibration", "swap",
               "effects", "calibrated"}
        )  # fmt: skip
        if unknown:
            raise _bad(path, f"{w}.{unknown[0]}", "unknown field")
        name = _need(sc, "name", str, path, w)
        if name in names:
            raise _bad(path, f"{w}.name", f"duplicate scenario name {name!r}")
        _need(sc, "description", str, path, w)
        q = _need(sc, "qemu", dict, path, w)
        study = _need(q, "study", str, path, f"{w}.qemu")
        st = _study(study, path, f"{w}.qemu.study")
        variants = _need(q, "variants", list, path, f"{w}.qemu")
        for v in variants:
            if v not in st["variants"]:
                raise _bad(path, f"{w}.qemu.variants", f"study {study} has no variant {v!r}")
        pts = _need(q, "points", list, path, f"{w}.qemu")
        axes = config.testbed_settings(st, "qemu")["axes"]
        pids = [_point_of(p, axes, path, f"{w}.qemu.points[{j}]") for j, p in enumerate(pts)]
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
            raise _bad(path, f"{w}.known", "must map quantities to {below/above: reason, tried: model change}")
        for k, v in known.items():
            ok = (
                isinstance(v, dict)
                and isinstance(v.get("tried"), str)
                and v["tried"].strip()
                and set(v) - {"tried"}
                and set(v) <= {"below", "above", "tried"}
                and all(isinstance(x, str) for x in v.values())
            )
            if not ok:
                # a reason excuses a miss only with the model change that adds the missing mechanism,
                # tried and closing the gap (docs/validation.md, "Criterion")
                raise _bad(
                    path,
                    f"{w}.known.{k}",
                    "must be {below: reason and/or above: reason, tried: the model change that closed the gap}",
                )
            if k not in rates and k != "share":
                raise _bad(path, f"{w}.known.{k}", "not one of the scenario's rates (or 'share')")
        calib = sc.get("calibration") or []
        if not isinstance(calib, list):
            raise _bad(path, f"{w}.calibration", "must be a list of {variant, point}")
        cal = set()
        for j, c in enumerate(calib):
            f = f"{w}.calibration[{j}]"
            if not isinstance(c, dict) or set(c) != {"variant", "point"} or c["variant"] not in variants:
                raise _bad(path, f, f"must be {{variant: one of {variants}, point: a point of qemu.points}}")
            pid = _point_of(c["point"], axes, path, f"{f}.point")
            if pid not in pids:
                raise _bad(path, f"{f}.point", "not one of qemu.points")
            cal.add((c["variant"], pid))
        swap = _variant_pair(sc["swap"], variants, path, f"{w}.swap") if "swap" in sc else None
        effects = []
        for j, e in enumerate(sc.get("effects") or []):
            f = f"{w}.effects[{j}]"
            if not isinstance(e, dict) or set(e) != {"metric", "variants", "points"}:
                raise _bad(path, f, "must be {metric, variants: [a, b], points: [...]}")
            metrics = {m["name"] for m in st.get("metrics", [])}
            if e["metric"] not in metrics:
                raise _bad(path, f"{f}.metric", f"study {study} has no metric {e['metric']!r}")
            a, b = _variant_pair(e["variants"], variants, path, f"{f}.variants")
            if not isinstance(e["points"], list) or not e["points"]:
                raise _bad(path, f"{f}.points", "must be a non-empty list of points")
            for k, p in enumerate(e["points"]):
                if _point_of(p, axes, path, f"{f}.points[{k}]") not in pids:
                    raise _bad(path, f"{f}.points[{k}]", "not one of qemu.points")
            effects.append({"metric": e["metric"], "variants": (a, b), "points": list(e["points"])})
        names[name] = {"rates": list(rates), "points": pids}
        item = dict(sc, shares=bool(sc.get("shares", False)), known=known, _study=st, calibration=cal, swap=swap,
                    effects=effects)  # fmt: skip
        item["calibrated"] = _load_calibrated(sc.get("calibrated") or [], item, path, f"{w}.calibrated")
        out.append(item)
    band = _load_band(doc, path, names)
    mutants = _load_mutants(doc.get("mutants") or [], path, names)
    return {
        "band": band,
        "verdict": {"rows_agree_above": float(frac)},
        "period_s": float(period) / 1000,
        "seeds": [int(s) for s in seeds],
        "mutants": mutants,
        "scenarios": out,
        "_file": str(path),
    }


def _load_calibrated(items, sc: dict, path, field: str) -> list[dict]:
    """The scenario's calibrated values (`calibrated:`): each a dotted path into the mirror's
    sim_workload (its value, or a distribution's mean, is read from there, so the list cannot
    drift from what runs), what it is, and where it was measured (default: the calibration
    points)."""
    if not isinstance(items, list):
        raise _bad(path, field, "must be a list of {path, what[, unit, measured_at]}")
    wl = sim_study(sc)["sim_workload"]
    out = []
    for j, it in enumerate(items):
        f = f"{field}[{j}]"
        if (
            not isinstance(it, dict)
            or not {"path", "what"} <= set(it)
            or set(it) - {"path", "what", "unit", "measured_at"}
        ):
            raise _bad(path, f, "must be {path, what[, unit, measured_at]}")
        v: Any = wl
        for k in str(it["path"]).split("."):
            if not isinstance(v, dict) or k not in v:
                raise _bad(path, f"{f}.path", f"{it['path']!r} is not in the mirror's sim_workload")
            v = v[k]
        if isinstance(v, dict):
            v = v.get("mean")
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise _bad(path, f"{f}.path", f"{it['path']!r} is not a number or a distribution with a mean")
        out.append({"path": it["path"], "what": str(it["what"]), "unit": str(it.get("unit", "")), "value": float(v),
                    "measured_at": it.get("measured_at")})  # fmt: skip
    return out


MUTANT_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _load_mutants(ms, path, names: dict) -> list[dict]:
    if not isinstance(ms, list):
        raise _bad(path, "mutants", "must be a list")
    out, seen = [], set()
    for j, m in enumerate(ms):
        f = f"mutants[{j}]"
        if not isinstance(m, dict) or set(m) - {"name", "mechanism", "xen", "exercised_by", "why"}:
            raise _bad(path, f, "must be {name, mechanism, xen, exercised_by[, why]}")
        for k in ("name", "mechanism", "xen"):
            _need(m, k, str, path, f)
        if not MUTANT_NAME.fullmatch(m["name"]) or m["name"] in seen or m["name"] == MODEL:
            raise _bad(
                path, f"{f}.name", f"must be a new lower-case C identifier (KO_ + it in capitals), got {m['name']!r}"
            )
        seen.add(m["name"])
        ex = m.get("exercised_by")
        if ex is not None and ex not in names:  # names: the scenarios
            raise _bad(path, f"{f}.exercised_by", f"not a scenario of the file: {ex!r}")
        if ex is None and not isinstance(m.get("why"), str):
            raise _bad(path, f"{f}.why", "a mutant that no scenario exercises says why")
        out.append(dict(m, exercised_by=ex))
    return out


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


def _empty_case() -> dict:
    return {"counts": [], "runs": [], "boots": [], "metrics": [], "without_events": 0, "warmups": 0}


def qemu_side(sc: dict, data_dir: Path, base_seed: int, any_design: bool = False) -> dict[tuple[str, str], dict]:
    """Per (variant, point id): the measured runs of the study's current definition (the
    selection `schedlab dataset` makes for the notebooks), warm-ups and failed runs left out,
    as {"counts": [...], "runs": [run ids], "boots": [the boot of each run], "metrics": [each
    run's metrics], "without_events": n, "warmups": n}. A run's boot is `records.boot_of`;
    a record that names none is its own boot."""
    study = sc["_study"]
    # the records of the study's registered design (any_design: every record of its definition,
    # for exploratory uses only, e.g. the tests of the validation's power)
    man = records.select(study, "qemu", Path(data_dir), base_seed, any_design=any_design)
    want = {(v, config.point_id(p)) for v, p in cases(sc)}
    out: dict[tuple[str, str], dict] = {k: _empty_case() for k in want}
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
            out[key]["boots"].append(records.boot_of(rec) or f"run:{rec['run_id']}")
            out[key]["metrics"].append({k: float(v) for k, v in (rec.get("metrics") or {}).items()})
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


def _metric_migrations_per_kunit(res: dict[str, dict], guests: dict[str, list[int]]) -> float:
    """Migrations per 1000 work units of the guests (S3's qemu metric: xentrace migrations
    over the work the guests executed)."""
    mig = sum(res[t]["xentrace"]["by_domain"][i]["migration"] for t in res for i in guests[t])
    ops = sum(res[t]["domains"][i]["ops"] for t in res for i in guests[t])
    return 1000.0 * mig / ops if ops else math.nan


def _metric_home_share(res: dict[str, dict], guests: dict[str, list[int]]) -> float:
    """% of the guests' run time on a pCPU of their home node, over every phase (numamix's
    home_share)."""
    home = sum(res[t]["domains"][i]["home_running_s"] for t in res for i in guests[t])
    run = sum(res[t]["domains"][i]["running_s"] for t in res for i in guests[t])
    return 100.0 * home / run if run > 0 else math.nan


# metrics of the real side that the study's sim metrics do not compute, from the mirror's results
SIM_METRICS = {"migrations_per_kunit": _metric_migrations_per_kunit, "home_share": _metric_home_share}


def _sim_metrics(sc: dict, study: dict, point: dict, res: dict[str, dict], guests: dict[str, list[int]]) -> dict:
    """The effect metrics of the scenario on the mirror: the study's own sim metrics where they
    compute it (S0's build time, S1's latency, S2's ops), else SIM_METRICS. NaN where the mirror
    cannot give it (a build that never ends on a mutant)."""
    from schedlab.core.testbed import RunFailed
    from schedlab.testbeds.sim import model_of

    want = {e["metric"] for e in sc["effects"]}
    out = {}
    own: dict = {}
    if want - set(SIM_METRICS):
        try:
            own = model_of(study)[1](study, res, point, study["sim_workload"])[0]
        except (RunFailed, ZeroDivisionError, KeyError, StopIteration):
            own = {}
    for m in want:
        out[m] = float(SIM_METRICS[m](res, guests)) if m in SIM_METRICS else float(own.get(m, math.nan))
    return out


def run_sim_case(sc: dict, variant: str, point: dict, seed: int, binary: str | os.PathLike | None = None) -> dict:
    """One sim run of a case: the study's scenarios (SimTestbed.scenarios) with the scenario's
    overrides, each counted as the qemu side is (the simulator's own xentrace counts, equal to
    its trace's), plus the effect metrics. Deterministic: the same seed gives the same counts."""
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
    results: dict[str, dict] = {}
    guests_of: dict[str, list[int]] = {}

    def run_phase(tag: str, scen: dict) -> float:
        """Run one scenario, add its counts and run times; its measured guest time."""
        scen["domains"] = [d for d in scen["domains"] if (d.get("workload") or {}).get("kind") != "idle"]
        # the guests: the sim domains the scenario maps qemu guests to (not S1's netback dom0)
        guests = [i for i, d in enumerate(scen["domains"]) if d.get("name") in names]
        res = run_scenario(scen, exe, tb.timeout)
        events.update(xentrace_counts(res, guests))
        for d in res["domains"]:
            run_s[d["name"]] = run_s.get(d["name"], 0.0) + float(d["running_s"])
        if tag != "tail":
            results[tag], guests_of[tag] = res, guests
        return float(res["measured_s"])

    for tag, scen in phases:
        guest_s += run_phase(tag, scen)
    tail = _tail(sc, variant, point, phases[-1][1], guest_s)
    if tail is not None:  # with nothing running on in it (S1 alone) only its time counts
        guest_s += run_phase("tail", tail) if tail["domains"] else float(tail["duration_s"])
    metrics = _sim_metrics(sc, study, point, results, guests_of) if sc.get("effects") else {}
    return {
        "events": {e: int(events.get(e, 0)) for e in EVENTS},
        "cpu_s": run_s,
        "guest_s": guest_s,
        "metrics": metrics,
    }


def _tail(sc: dict, variant: str, point: dict, last: dict, guest_s: float) -> dict | None:
    """The remainder of the real trace's span after the mirror's measured phases (`sim.tail`):
    the case's mean trace_window_guest_s (`_span_s`, set by `run`: spans) less the phases' guest time,
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


# ---------------------------------------------------------------- the simulator binary


def check_binary(binary: Path | None, mutant: str | None = None) -> str:
    """The simulator's --version; with `mutant`, it must name KO_<MUTANT> (a mistyped switch
    builds the model itself, which would then pass for a mutant)."""
    import subprocess

    from schedlab.testbeds.sim import BINARY, ensure_binary

    exe = ensure_binary(Path(binary)) if binary else ensure_binary(BINARY)
    try:
        v = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ValidationError(f"{exe}: not a runnable simulator ({e})") from None
    if not v.startswith("credit1sim"):
        raise ValidationError(f"{exe}: not the credit1 simulator (--version says {v[:80]!r})")
    if mutant is not None and not v.endswith(f"mutant KO_{mutant.upper()}"):
        raise ValidationError(f"{exe}: --version says {v!r}, not mutant KO_{mutant.upper()}")
    return v


def mutant_binary(name: str) -> Path:
    """Where `make -C sim build/mutants/credit1sim-NAME` puts the mutant (sim/Makefile)."""
    from schedlab.testbeds.sim import SIM_DIR

    return SIM_DIR / "build" / "mutants" / f"credit1sim-{name}"


# ---------------------------------------------------------------- the mirror's runs, as records

PURPOSE = "validation"  # raw/validation/STUDY/; the runs' definitions and provenance say so
GUEST_S = "mirror_guest_s"  # a mirror run's metric: its guest time (no study metric has the name)


def spans(qemu: dict) -> dict[tuple[str, str], float]:
    """Per case, the span the mirror fills (`sim.tail`): the mean guest time of the real traces."""
    got = {k: [c["guest_s"] for c in v["counts"] if c["guest_s"]] for k, v in qemu.items()}
    return {k: sum(v) / len(v) for k, v in got.items() if v}


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class MirrorTestbed:
    """The simulator as the validation runs it: one scenario's mirror of a qemu geometry
    (run_sim_case) behind the testbed interface that run.PointRunner drives. Its build is the
    binary's identity (sha256) with the scenario code of the study's kind and this module's,
    so each binary (the model's, a mutant's, a --sim PATH) has records of its own."""

    name = "sim"

    def __init__(self, sc: dict, binary: str | os.PathLike | None = None):
        self.sc = sc
        self.binary = Path(binary) if binary else None
        self._sha: str | None = None

    def exe(self) -> Path:
        from schedlab.testbeds.sim import BINARY, ensure_binary

        return ensure_binary(self.binary) if self.binary else ensure_binary(BINARY)

    def binary_sha256(self) -> str:
        if self._sha is None:
            self._sha = _sha256_file(self.exe())
        return self._sha

    def describe(self) -> dict[str, Any]:
        import subprocess

        exe = self.exe()
        version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        return {
            "testbed": "sim",
            "simulator": version,
            "binary": _rel(exe),
            "binary_sha256": self.binary_sha256(),
            "mirror": f"schedlab.mirror, scenario {self.sc['name']}",
        }

    def build_id(self, study: dict, variant: str) -> str:
        from schedlab.testbeds.sim import build_id_of

        return build_id_of(f"{self.binary_sha256()}:{_sha256_file(Path(__file__))}", study, variant)

    def run_once(self, study: dict, variant: str, point: dict, seed: int):
        from schedlab.core.testbed import RunResult

        c = run_sim_case(self.sc, variant, point, seed, self.binary)
        # the guest time (the per-period rates' denominator) is the metric every run gives; records
        # are strict JSON: an effect metric the mirror cannot give (NaN) is left out, read back as NaN
        effects = {k: v for k, v in c["metrics"].items() if math.isfinite(v)}
        return RunResult(
            metrics={GUEST_S: c["guest_s"], **effects},
            counters={"events": c["events"], "cpu_s": c["cpu_s"]},
        )


def mirror_definition(sc: dict, span: float | None) -> dict:
    """What a mirror run measures beyond the study's sim definition (part of its run key)."""
    return {
        "scenario": sc["name"],
        "domains": sc["domains"],
        "sim": sc["sim"],
        "effects": sorted({e["metric"] for e in sc["effects"]}),
        "span_s": span,
    }


def run(
    cfg: dict,
    data_dir: Path,
    base_seed: int,
    scenario: str | None = None,
    binary: str | os.PathLike | None = None,
    jobs: int = 1,
    any_design: bool = False,
    progress=None,
    log=None,
) -> dict:
    """Every case of the chosen scenarios on the simulator (`binary`, default the model's), one
    run per seed of the file, `jobs` at a time; each a raw record through run.PointRunner,
    reused where it is on disk. `progress(line)` once per scenario; `log` takes the runner's
    lines (default: none). Returns the manifest: {"config", "config_sha256", "seeds",
    "simulator": {version, binary_sha256}, "scenarios": {name: {"study", "cases": [{"variant",
    "point_id", "runs": [{"run_id", "path", "checksum", "seed", "repetition"}]}]}}}."""
    from concurrent.futures import ThreadPoolExecutor

    from schedlab.core.progress import Progress
    from schedlab.plan import derive_seed
    from schedlab.run import PointRunner

    data_dir = Path(data_dir)
    seeds = list(cfg["seeds"])
    chosen = select(cfg, scenario)
    log = log if log is not None else io.StringIO()
    # the simulator's runs are the validation's long step: a bar on a terminal, else a line every 15 s
    bar = Progress(sum(len(cases(sc)) for sc in chosen) * len(seeds), sys.stderr, "validation", "sim run", every_s=15)
    out: dict[str, Any] = {
        "config": _rel(cfg["_file"]),
        "config_sha256": _sha256_file(Path(cfg["_file"])),
        "seeds": seeds,
        "scenarios": {},
    }
    described = None
    try:
        for sc in chosen:
            q = qemu_side(sc, data_dir, base_seed, any_design)
            if "tail" in sc["sim"]:
                sc = dict(sc, _span_s=spans(q))
            if progress:
                progress(f"{sc['name']}: sim {len(cases(sc))} case(s) x {len(seeds)} seed(s)")
            tb = MirrorTestbed(sc, binary)
            if described is None:
                described = tb.describe()
            study = sim_study(sc)
            plan_seed = derive_seed(base_seed, "plan", PURPOSE, study["study"])
            todo = []
            for i, (v, p) in enumerate(cases(sc)):
                pid = config.point_id(p)
                span = (sc.get("_span_s") or {}).get((v, pid))
                order = {
                    (v, pid, rep): {"index": i * len(seeds) + rep, "plan_size": len(cases(sc)) * len(seeds),
                                    "plan_seed": plan_seed}
                    for rep in range(len(seeds))
                }  # fmt: skip
                runner = PointRunner(
                    study,
                    "sim",
                    v,
                    p,
                    data_dir,
                    base_seed,
                    runs=len(seeds),
                    testbed=tb,
                    log=log,
                    order=order,
                    purpose={
                        "name": PURPOSE,
                        "provenance": {"config": out["config"], "scenario": sc["name"], "seeds": seeds},
                        "definition": {PURPOSE: mirror_definition(sc, span)},
                        "seeds": seeds,  # the file's seeds, not derived ones: the mirror is compared seed by seed
                        "metrics": [],  # a mutant's mirror may give no value of an effect metric (NaN)
                        "warmup": 0,
                        "retries": 0,
                    },
                    described=described,
                )
                todo += [(v, pid, runner, rep) for rep in range(len(seeds))]

            def one(t, bar=bar):
                rec = t[2].run_rep(t[3], executed_as=PURPOSE)
                bar.step(measured=False)
                return rec

            if jobs > 1:
                with ThreadPoolExecutor(jobs) as ex:  # the simulator is a process: threads only wait for it
                    got = list(ex.map(one, todo))
            else:
                got = [one(t) for t in todo]
            by_case: dict[tuple[str, str], list] = {}
            for (v, pid, _, _), rec in zip(todo, got):
                by_case.setdefault((v, pid), []).append(
                    {
                        "run_id": rec["run_id"],
                        "path": str(Path("raw") / PURPOSE / rec["study"] / f"{rec['run_id']}.json"),
                        "checksum": rec["checksum"],
                        "seed": rec["seed"],
                        "repetition": rec["repetition"],
                    }
                )
            out["scenarios"][sc["name"]] = {
                "study": study["study"],
                "cases": [{"variant": v, "point_id": pid, "runs": rs} for (v, pid), rs in by_case.items()],
            }
    finally:
        bar.close()
    out["simulator"] = {k: (described or {}).get(k) for k in ("simulator", "binary_sha256")}
    return out


def write_manifest(manifest: dict, path: Path) -> Path:
    from schedlab.core.files import atomic_write

    atomic_write(Path(path), json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return Path(path)


def main(argv=None) -> int:
    """`python -m schedlab.mirror run`: the mirror's runs of every scenario (the pipeline's
    run-stage rules validation_runs and validation_runs_mutant), their manifest in --out."""
    ap = argparse.ArgumentParser(prog="python -m schedlab.mirror", description="The validation's simulator runs.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run what is missing of the mirror's runs, write their manifest")
    r.add_argument("--config", default=str(DEFAULT_PATH), help="the scenarios (default config/validation.yaml)")
    r.add_argument("--data", default="data", help="data directory: qemu records read, raw/validation written")
    r.add_argument("--seed", type=int, default=None, help="base seed (default: config/config.yaml's)")
    r.add_argument("--sim", metavar="PATH", help="this simulator binary (default: the model, sim/build/credit1sim)")
    r.add_argument("--mutant", metavar="NAME", help="--sim is the mutant NAME (its --version must say so)")
    r.add_argument("--jobs", type=int, default=1, help="simulator runs at once (default 1)")
    r.add_argument("--out", required=True, help="the manifest (JSON)")
    a = ap.parse_args(argv)
    try:
        cfg = load(a.config)
        check_mutant(cfg, a.sim, a.mutant)
        version = check_binary(Path(a.sim) if a.sim else None, a.mutant)
        print(f"simulator: {version}", file=sys.stderr)
        base_seed = a.seed if a.seed is not None else config.load_config()["seed"]
        man = run(cfg, Path(a.data), base_seed, binary=a.sim, jobs=max(1, a.jobs), log=sys.stdout,
                  progress=lambda s: print(s, file=sys.stderr, flush=True))  # fmt: skip
        print(f"mirror: {sum(len(c['runs']) for s in man['scenarios'].values() for c in s['cases'])} runs; "
              f"{write_manifest(man, Path(a.out))}")  # fmt: skip
    except (ConfigError, store.RecordError, OSError) as e:
        print(f"mirror: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a run that failed: one line (its failure record is on disk)
        from schedlab.core.testbed import RunFailed

        if isinstance(e, RunFailed):
            print(f"mirror: {e}", file=sys.stderr)
            return 1
        raise
    return 0


def check_mutant(cfg: dict, sim, mutant: str | None) -> None:
    """--mutant NAME is a mutant of the file and comes with --sim PATH, which exists."""
    if mutant is not None and mutant not in {m["name"] for m in cfg["mutants"]}:
        raise ValidationError(
            f"{_rel(cfg['_file'])}: no mutant {mutant!r} (known: {', '.join(m['name'] for m in cfg['mutants'])})"
        )
    if sim is not None and not Path(sim).is_file():
        raise ValidationError(f"--sim {sim}: no such file")


if __name__ == "__main__":
    raise SystemExit(main())
