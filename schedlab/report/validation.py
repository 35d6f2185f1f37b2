"""The simulator validated against real credit1 at the scheduler-event level
(`schedlab validate-sim`, notebooks/validation.ipynb, docs/validation.md).

A scenario (config/validation.yaml) pairs records of a study on the qemu testbed that carry
`counters.sched_events` (an xentrace of every scheduler event, schedlab/workloads/xentrace.py)
with a sim scenario mirroring the qemu geometry. Both sides are reduced to the same event
counts of the guest VMs; the table compares dimensionless rates (events per event, events per
30 ms accounting period of guest time) and the guests' run-time shares.

The experimental unit of the real side is the boot (`records.boot_of`): a run's value enters as
its boot's mean, and intervals count boots. A row agrees when the interval of sim/qemu (or of
sim - qemu for shares) lies inside a band whose width is real Xen's own spread across boots
(`derive_band`, written into the file before the validation runs); a scenario is validated by
the rule the file fixes (`scenario_verdict`): its counted rows (not at a calibration point, with
two boots or more) mostly agree, and every effect of the study's own comparison that real Xen
shows, the mirror shows the same way. Mutants of the simulator (`mutants:` in the file, the
KO_ switches of sim/src) and the scenarios' own variants swapped must fail it (kill_matrix).

The report stage reads, it does not measure: the mirror's runs are raw records the run stage
wrote (schedlab.mirror, through run.PointRunner), listed in its manifest; `build` reads them.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from schedlab import config, store
from schedlab.config import ConfigError
from schedlab.mirror import (  # noqa: F401  (the scenario file and the qemu side, as the notebook and tests read them)
    DEFAULT_PATH,
    EVENTS,
    GUEST_S,
    MODEL,
    ValidationError,
    _empty_case,
    _rel,
    cases,
    guest_events,
    load,
    parse_quantity,
    qemu_counts,
    qemu_side,
    select,
)
from schedlab.stats.core import TOO_FEW_UNITS_MARK

# row verdicts: only AGREE and MISS count; the others say why a row is left out of the count
AGREE, MISS = "agree", "miss"
CALIBRATION = "calibration point"
FEW_BOOTS = "too few boots"
NO_BAND = "no band"
EXCUSED = "excused"
NOT_MEASURED = "not measured on qemu"
COUNTED = (AGREE, MISS)
# scenario verdicts
VALIDATED, NOT_VALIDATED, UNTESTABLE = "validated", "not validated", "untestable"
# effect verdicts
REPRODUCED, NOT_REPRODUCED, NONE_ON_XEN, EFFECT_UNTESTABLE = "reproduced", "not reproduced", "none on Xen", "untestable"


def per_boot(values: list[float], boots: list[str]) -> list[float]:
    """One value per boot: the mean of the finite values of its runs (the boot is the
    replicate on qemu; runs inside one boot are not independent). Boots in first-seen order;
    a boot without a finite value is left out."""
    by: dict[str, list[float]] = {}
    for v, b in zip(values, boots):
        by.setdefault(b, [])
        if v is not None and math.isfinite(v):
            by[b].append(float(v))
    return [sum(x) / len(x) for x in by.values() if x]


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


def inside(low: float, high: float, band: tuple[float, float]) -> bool:
    """Containment: the whole interval lies in the band (an equivalence test, TOST at
    (100 - confidence)/2 % when the interval is the (1 - 2 alpha) one)."""
    return not (math.isnan(low) or math.isnan(high)) and band[0] <= low and high <= band[1]


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
    "band_low",
    "band_high",
    "inside",
    "verdict",
    "reason",
    "qemu_runs",
]


def band_of(cfg: dict, sc: dict, pid: str, kind: str, qty: str) -> tuple[float, float] | None:
    """The band of a quantity at a point: [1/f, f] for a rate, [-pp, pp] for a share; None
    without a margin."""
    m = cfg["band"]["margins"].get(sc["name"], {}).get(pid, {}).get("share" if kind == "share" else qty)
    if m is None:
        return None
    return (-m, m) if kind == "share" else (1.0 / m, m)


def _quantities(sc: dict, qc: list[dict], scn: list[dict]) -> list[tuple[str, str]]:
    out = [("rate", r) for r in sc["rates"]]
    if sc["shares"]:
        doms = _share_doms(sc, qc, scn)
        out += [("share", d) for d in doms] if len(doms) > 1 else []
    return out


def _values(kind: str, qty: str, counts: list[dict], sc: dict, qc: list[dict], scn: list[dict], period: float):
    if kind == "rate":
        a, b = qty.split("/")
        return [rate(c, a, b, period) for c in counts]
    doms = _share_doms(sc, qc, scn)
    return [shares(c, doms)[qty] for c in counts]


def compare(sc: dict, qemu: dict, sim: dict, cfg: dict) -> pd.DataFrame:
    """The comparison rows of one scenario: one per (variant, point, quantity). The real side's
    values are per boot (its runs' mean), so its n and the interval's degrees of freedom count
    boots. A row agrees when the interval of sim/qemu (shares: sim - qemu) lies inside its band;
    rows at a calibration point, with fewer boots than a test needs (config.MIN_BOOTS), without a
    band or excused are not counted."""
    conf, period = cfg["band"]["confidence"], cfg["period_s"]
    rows = []
    for v, p in cases(sc):
        pid = config.point_id(p)
        q = qemu.get((v, pid)) or _empty_case()
        s = (sim or {}).get((v, pid)) or {"counts": []}
        qc, scn = q["counts"], s["counts"]
        why = f"{NOT_MEASURED} ({_why_none(q)})"
        for kind, qty in _quantities(sc, qc, scn):
            base = {"scenario": sc["name"], "variant": v, "point": pid, "kind": kind}
            base["quantity"] = qty if kind == "rate" else f"share {qty}"
            qv = per_boot(_values(kind, qty, qc, sc, qc, scn, period), q["boots"])
            sv = _values(kind, qty, scn, sc, qc, scn, period)
            qm, _, ql, qh, qn = t_interval(qv, conf)
            sm, _, sl, sh, sn = t_interval(sv, conf)
            band = band_of(cfg, sc, pid, kind, qty)
            row = dict(base, qemu_n=qn, qemu_mean=qm, qemu_low=ql, qemu_high=qh, sim_n=sn, sim_mean=sm, sim_low=sl,
                       sim_high=sh, ratio=math.nan, ratio_low=math.nan, ratio_high=math.nan, diff_pp=math.nan,
                       diff_low=math.nan, diff_high=math.nan, band_low=band[0] if band else math.nan,
                       band_high=band[1] if band else math.nan, inside=None, reason="",
                       qemu_runs=list(q["runs"]))  # fmt: skip
            if not qc:
                row.update(verdict=NOT_MEASURED, reason=why)
                rows.append(row)
                continue
            below = None
            if qn > 0 and sn > 0:
                if kind == "rate":
                    r, lo, hi = ratio_interval(sv, qv, conf)
                    row.update(ratio=r, ratio_low=lo, ratio_high=hi)
                    below = r < 1
                else:
                    r, lo, hi = diff_interval(sv, qv, conf)
                    row.update(diff_pp=r, diff_low=lo, diff_high=hi)
                    below = r < 0
                if band is not None and qn >= 2:
                    row["inside"] = inside(lo, hi, band)
            # the rule (config/validation.yaml, verdict): only rows with two boots or more and a
            # band count; a band needs real Xen's spread, so a quantity real Xen never shows (all
            # 0, S1's migrations of pinned VMs) has none and is not evidence either way
            if (v, pid) in sc["calibration"]:
                row.update(verdict=CALIBRATION, reason="calibration point: left out of the count")
            elif qn < config.MIN_BOOTS:  # the paper's rule for every qemu result: five boots or untestable
                row.update(
                    verdict=FEW_BOOTS,
                    reason=f"{qn} boot{'' if qn == 1 else 's'} with the event on qemu, fewer than the "
                    f"{config.MIN_BOOTS} {TOO_FEW_UNITS_MARK}",
                )
            elif band is None:
                row.update(verdict=NO_BAND, reason="no band: real Xen shows no spread of it across boots")
            elif sn == 0:
                row.update(verdict=MISS, inside=False, reason=f"undefined on sim (no {qty.split('/')[-1]} events)")
            else:
                row["verdict"] = AGREE if row["inside"] else MISS
                k = sc["known"].get(qty if kind == "rate" else "share") if row["verdict"] == MISS else None
                if k and k.get("below" if below else "above"):
                    row.update(verdict=EXCUSED, reason=f"{k['below' if below else 'above']} (tried: {k['tried']})")
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def _why_none(q: dict) -> str:
    if q["without_events"]:
        return f"{q['without_events']} measured {'run' if q['without_events'] == 1 else 'runs'} without sched_events"
    if q["warmups"]:
        return f"no measured run yet; {q['warmups']} {'warm-up' if q['warmups'] == 1 else 'warm-ups'}"
    return "no records of the current definition"


def _share_doms(sc: dict, qc: list[dict], scn: list[dict]) -> list[str]:
    """The sim names of the guests present on both sides (on one side if the other has no runs)."""
    order = list(sc["domains"].values())
    have_q = {d for c in qc for d in c["cpu_s"]}
    have_s = {d for c in scn for d in c["cpu_s"]}
    both = (have_q & have_s) if qc and scn else (have_q | have_s)
    return [d for d in order if d in both]


# ---------------------------------------------------------------- effects: the studies' own comparisons

EFFECT_COLUMNS = [
    "scenario",
    "metric",
    "a",
    "b",
    "point",
    "xen_boots_a",
    "xen_boots_b",
    "paired",
    "xen",
    "xen_low",
    "xen_high",
    "sim_n",
    "sim",
    "sim_low",
    "sim_high",
    "verdict",
]


def _paired_ratio(a: dict[str, float], b: dict[str, float], confidence: float) -> tuple[float, float, float, int]:
    """b/a over the boots that ran both (a paired design): the geometric mean of the per-boot
    ratios with a t-interval over the boots."""
    common = [k for k in a if k in b and a[k] > 0 and b[k] > 0]
    logs = [math.log(b[k] / a[k]) for k in common]
    m, _, lo, hi, n = t_interval(logs, confidence)
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    return math.exp(m), math.exp(lo) if n > 1 else math.nan, math.exp(hi) if n > 1 else math.nan, n


def _boot_dict(values: list[float], boots: list[str]) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for v, bt in zip(values, boots):
        if v is not None and math.isfinite(v):
            by.setdefault(bt, []).append(v)
    return {k: sum(x) / len(x) for k, x in by.items()}


def effects(sc: dict, qemu: dict, sim: dict, cfg: dict) -> pd.DataFrame:
    """Each effect of the scenario (the study's own comparison, `effects:` in the file): the
    metric's b/a on real Xen (boots; paired by boot where the study's qemu design is paired and
    both variants ran in the same boots) and on the mirror (seeds), each with its interval at
    band.effect_confidence, and whether the mirror reproduces it: where Xen's interval excludes
    1, the mirror's must too, on the same side."""
    conf = cfg["band"]["effect_confidence"]
    paired_design = config.testbed_settings(sc["_study"], "qemu").get("analysis") == "paired"
    rows = []
    for e in sc["effects"]:
        a, b = e["variants"]
        for p in e["points"]:
            pid = config.point_id(p)
            qa, qb = (qemu.get((v, pid)) or _empty_case() for v in (a, b))
            xa = _boot_dict([m.get(e["metric"], math.nan) for m in qa["metrics"]], qa["boots"])
            xb = _boot_dict([m.get(e["metric"], math.nan) for m in qb["metrics"]], qb["boots"])
            paired = paired_design and len(set(xa) & set(xb)) >= 2
            if paired:
                x, xl, xh, _ = _paired_ratio(xa, xb, conf)
            elif xa and xb:
                x, xl, xh = ratio_interval(list(xb.values()), list(xa.values()), conf)
            else:
                x = xl = xh = math.nan
            sa, sb = ([c["metrics"].get(e["metric"], math.nan) for c in ((sim or {}).get((v, pid)) or {"counts": []})["counts"]]
                      for v in (a, b))  # fmt: skip
            sr, slo, shi = ratio_interval(sb, sa, conf)
            n_sim = min(sum(math.isfinite(v) for v in sa), sum(math.isfinite(v) for v in sb))
            if min(len(xa), len(xb)) < config.MIN_BOOTS or math.isnan(xl) or math.isnan(xh):
                vd = EFFECT_UNTESTABLE  # the paper's rule for every qemu result: five boots or untestable
            elif xl <= 1 <= xh:
                vd = NONE_ON_XEN
            else:
                up = xl > 1
                ok = n_sim >= 2 and math.isfinite(sr) and ((slo > 1) if up else (shi < 1)) and not math.isnan(slo)
                vd = REPRODUCED if ok else NOT_REPRODUCED
            rows.append({"scenario": sc["name"], "metric": e["metric"], "a": a, "b": b, "point": pid,
                         "xen_boots_a": len(xa), "xen_boots_b": len(xb), "paired": paired, "xen": x, "xen_low": xl,
                         "xen_high": xh, "sim_n": n_sim, "sim": sr, "sim_low": slo, "sim_high": shi,
                         "verdict": vd})  # fmt: skip
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


# ---------------------------------------------------------------- scenario verdicts

SCENARIO_COLUMNS = [
    "model",
    "scenario",
    "verdict",
    "rows_agree",
    "rows_counted",
    "effects_reproduced",
    "effects_required",
    "rows_calibration",
    "rows_one_boot",
    "rows_excused",
]


def scenario_verdict(rows: pd.DataFrame, eff: pd.DataFrame, cfg: dict, name: str, model: str = MODEL) -> dict:
    """The rule fixed in the file (verdict.rows_agree_above): a scenario is validated when more
    than that fraction of its counted rows agree (counted: not at a calibration point, two boots
    or more, a band, not excused) and every effect real Xen shows is reproduced; untestable
    when no row can be counted."""
    g = rows[rows["scenario"] == name]
    e = eff[eff["scenario"] == name] if len(eff) else eff
    counted = g[g["verdict"].isin(COUNTED)]
    k, n = int((counted["verdict"] == AGREE).sum()), len(counted)
    req = e[e["verdict"].isin((REPRODUCED, NOT_REPRODUCED))] if len(e) else e
    rep = int((req["verdict"] == REPRODUCED).sum()) if len(req) else 0
    if n == 0:
        vd = UNTESTABLE
    else:
        vd = VALIDATED if k / n > cfg["verdict"]["rows_agree_above"] and rep == len(req) else NOT_VALIDATED
    return {"model": model, "scenario": name, "verdict": vd, "rows_agree": k, "rows_counted": n,
            "effects_reproduced": rep, "effects_required": len(req),
            "rows_calibration": int((g["verdict"] == CALIBRATION).sum()),
            "rows_one_boot": int((g["verdict"] == FEW_BOOTS).sum()),
            "rows_excused": int((g["verdict"] == EXCUSED).sum())}  # fmt: skip


def swap_label(sc: dict) -> str:
    a, b = sc["swap"]
    return f"swap {a}<->{b}"


def swapped(sim: dict, pair: tuple[str, str]) -> dict:
    """The sim side with the scenario's two variants exchanged: each case of one is compared
    with the mirror's other (a validation that cannot tell them apart passes this)."""
    a, b = pair
    flip = {a: b, b: a}
    return {(flip.get(v, v), pid): val for (v, pid), val in sim.items()}


def read_runs(runs: dict | str | os.PathLike) -> tuple[dict, str]:
    """The mirror's manifest (schedlab.mirror.run's, or its file) and where it came from."""
    if isinstance(runs, dict):
        return runs, "the mirror's runs"
    try:
        man = json.loads(Path(runs).read_text())
    except OSError as e:
        raise ValidationError(
            f"{_rel(runs)}: {e.strerror or e} (the mirror's runs: python -m schedlab.mirror run)"
        ) from None
    except ValueError as e:
        raise ValidationError(f"{_rel(runs)}: not the mirror's manifest ({e})") from None
    if not isinstance(man, dict) or not isinstance(man.get("scenarios"), dict):
        raise ValidationError(f"{_rel(runs)}: not the mirror's manifest (no scenarios)")
    return man, _rel(runs)


def sim_counts(rec: dict) -> dict:
    """A mirror run's record as the comparison reads it: the guests' event counts, run times,
    guest time and effect metrics (one left out of the record, NaN, is read as missing)."""
    m = dict(rec["metrics"])
    guest_s = m.pop(GUEST_S)
    return {"events": rec["counters"]["events"], "cpu_s": rec["counters"]["cpu_s"], "guest_s": guest_s, "metrics": m}


def sim_side(sc: dict, runs: dict, where: str, data_dir: Path, seeds: list[int]) -> dict[tuple[str, str], dict]:
    """Per case, the mirror's runs of the scenario from their records (the manifest's), one per
    seed of the file in its order; a manifest that lacks a case or a seed is stale: an error."""
    got = runs["scenarios"].get(sc["name"])
    if got is None:
        raise ValidationError(f"{where}: no runs of scenario {sc['name']} (run the mirror again)")
    by = {(c["variant"], c["point_id"]): c["runs"] for c in got["cases"]}
    out: dict[tuple[str, str], dict] = {}
    for v, p in cases(sc):
        key = (v, config.point_id(p))
        entries = by.get(key)
        if entries is None or [e["seed"] for e in entries] != list(seeds):
            raise ValidationError(
                f"{where}: scenario {sc['name']} {v} {key[1]}: not one run per seed {seeds} (run the mirror again)"
            )
        counts = []
        for e in entries:
            path = Path(data_dir) / e["path"]
            rec = store.read_record(path)
            if rec.get("checksum") != e["checksum"]:
                raise ValidationError(f"{_rel(path)}: not the record the manifest {where} lists (checksum)")
            counts.append(sim_counts(rec))
        out[key] = {"counts": counts, "seeds": [e["seed"] for e in entries]}
    return out


def build(
    cfg: dict,
    data_dir: Path,
    base_seed: int,
    scenario: str | None = None,
    runs: dict | str | os.PathLike | None = None,
    swaps: bool = True,
    any_design: bool = False,
) -> dict[str, pd.DataFrame]:
    """The whole validation: {"rows": every comparison row, "effects": the effect table,
    "scenarios": the verdict of every scenario for the model, and for each scenario's own
    variants swapped (`swaps`)}. `runs`: the mirror's runs (schedlab.mirror.run's manifest or
    its file), read from their records: the simulator is never run here."""
    if runs is None:
        raise ValidationError("no mirror runs given (schedlab validate-sim, or python -m schedlab.mirror run)")
    man, where = read_runs(runs)
    frames, effs, verdicts = [], [], []
    for sc in select(cfg, scenario):
        q = qemu_side(sc, data_dir, base_seed, any_design)
        s = sim_side(sc, man, where, data_dir, cfg["seeds"])
        rows, eff = compare(sc, q, s, cfg), effects(sc, q, s, cfg)
        frames.append(rows)
        effs.append(eff)
        verdicts.append(scenario_verdict(rows, eff, cfg, sc["name"]))
        if swaps and sc["swap"]:
            s2 = swapped(s, sc["swap"])
            verdicts.append(scenario_verdict(compare(sc, q, s2, cfg), effects(sc, q, s2, cfg), cfg, sc["name"],
                                             swap_label(sc)))  # fmt: skip
    return {
        "rows": pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS),
        "effects": pd.concat(effs, ignore_index=True) if effs else pd.DataFrame(columns=EFFECT_COLUMNS),
        "scenarios": pd.DataFrame(verdicts, columns=SCENARIO_COLUMNS),
    }


# ---------------------------------------------------------------- the band: real Xen's spread across boots


def derive_band(
    cfg: dict, data_dir: Path, base_seed: int, any_design: bool = False
) -> dict[str, dict[str, dict[str, dict]]]:
    """Real Xen's own spread across boots, per scenario, point and quantity (`band.margins` in
    the file): over the point's cases (its variants) with two boots or more, each case's
    relative standard deviation of the per-boot rate (shares: standard deviation in points,
    every guest), pooled with the boots' degrees of freedom, is s; the margin is the range in
    which two boots of real Xen differ in 95 % of pairs (z = 1.96) at normal spread: a factor
    exp(z sqrt(2) s) for rates, z sqrt(2) s points for shares. Per point, since a rate's spread
    follows the geometry (yields are rare at 1 VM, many at 3). {scenario: {point: {quantity:
    {margin, s, df}}}}."""
    z, period = cfg["band"]["z"], cfg["period_s"]
    out: dict[str, dict[str, dict[str, dict]]] = {}
    for sc in cfg["scenarios"]:
        q = qemu_side(sc, data_dir, base_seed, any_design)
        acc: dict[str, dict[str, list[tuple[int, float]]]] = {}
        for (_, pid), case in sorted(q.items(), key=lambda kv: kv[0][1]):
            qc = case["counts"]
            for kind, qty in _quantities(sc, qc, []):
                vals = per_boot(_values(kind, qty, qc, sc, qc, [], period), case["boots"])
                if len(vals) < 2:
                    continue
                m, sd = float(np.mean(vals)), float(np.std(vals, ddof=1))
                if kind == "rate":
                    if m <= 0:
                        continue
                    acc.setdefault(pid, {}).setdefault(qty, []).append((len(vals) - 1, sd / m))
                else:
                    acc.setdefault(pid, {}).setdefault("share", []).append((len(vals) - 1, sd))
        res: dict[str, dict[str, dict]] = {}
        order = [config.point_id(p) for p in sc["qemu"]["points"]]
        for pid in sorted(acc, key=order.index):
            for qty, lst in acc[pid].items():
                df = sum(d for d, _ in lst)
                sd = math.sqrt(sum(d * x * x for d, x in lst) / df)
                w = z * math.sqrt(2) * sd
                res.setdefault(pid, {})[qty] = {"margin": w if qty == "share" else math.exp(w), "s": sd, "df": df}
        if res:
            out[sc["name"]] = res
    return out


def _round4(x: float) -> float:
    return float(f"{x:.4g}")


def band_yaml(derived: dict) -> str:
    """The `margins:` block of the band for config/validation.yaml (4 significant digits)."""
    lines = ["  margins:"]
    for name, by_point in derived.items():
        lines.append(f"    {name}:")
        for pid, qs in by_point.items():
            inner = ", ".join(f"{q}: {_round4(v['margin']):g}" for q, v in qs.items())
            lines.append(f"      {pid}: {{{inner}}}")
    return "\n".join(lines) + "\n"


def stale_band(cfg: dict, derived: dict) -> list[str]:
    """Where the file's margins differ from what the records give now (4 significant digits)."""
    have = cfg["band"]["margins"]
    out = []
    for name, by_point in derived.items():
        for pid, qs in by_point.items():
            for q, v in qs.items():
                got = have.get(name, {}).get(pid, {}).get(q)
                if got is None or _round4(got) != _round4(v["margin"]):
                    out.append(f"{name} {pid} {q}: file {got}, records {_round4(v['margin']):g}")
    for name, by_point in have.items():
        for pid, qs in by_point.items():
            for q in qs:
                if q not in derived.get(name, {}).get(pid, {}):
                    out.append(f"{name} {pid} {q}: file {qs[q]}, records none")
    return out


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
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return ""
    return f" [{_num(lo, digits)}, {_num(hi, digits)}]"


def _fin(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def _band_text(r) -> str:
    if not (_fin(r["band_low"]) and _fin(r["band_high"])):
        return "--"
    if r["kind"] == "share":
        return rf"$\pm${_num(r['band_high'], 2)} pp"
    return f"[{_num(r['band_low'], 2)}, {_num(r['band_high'], 2)}]"


def table_rows(df: pd.DataFrame) -> tuple[list, list, dict]:
    """LaTeX columns, rows and the sidecar cells of the full table (one row per quantity)."""
    from schedlab.report.tables import latex_escape as esc

    columns = [
        ("scenario", "l"),
        ("variant", "l"),
        ("point", "l"),
        ("quantity", "l"),
        ("qemu (boots) [interval]", "l"),
        ("sim [interval]", "l"),
        (r"sim/qemu or $\Delta$ pp [interval]", "l"),
        ("band", "l"),
        ("verdict", "l"),
        ("reason", "p{4.5cm}"),
    ]
    rows, cells = [], {}
    prev = None
    for i, r in df.iterrows():
        key = (r["scenario"], r["variant"], r["point"])
        if prev is not None and key[0] != prev[0]:
            rows.append(None)
        prev = key
        share = r["kind"] == "share"
        if share:
            cmp_text = (_num(r["diff_pp"], 2) + _br(r["diff_low"], r["diff_high"])) if r["qemu_n"] else "--"
        else:
            cmp_text = (_num(r["ratio"]) + _br(r["ratio_low"], r["ratio_high"])) if r["qemu_n"] else "--"
        row = [
            esc(r["scenario"]),
            esc(r["variant"]),
            esc(r["point"]),
            esc(r["quantity"]),
            f"{_num(r['qemu_mean'])} ({int(r['qemu_n']) if _fin(r['qemu_n']) else 0})"
            + _br(r["qemu_low"], r["qemu_high"]),
            _num(r["sim_mean"]) + _br(r["sim_low"], r["sim_high"]),
            cmp_text,
            _band_text(r),
            esc(r["verdict"]),
            esc(r["reason"]),
        ]
        rows.append(row)
        cells[cell_id(r)] = {
            "row": int(i),
            "col": 6,
            "text": cmp_text,
            "value": r["diff_pp"] if share else r["ratio"],
            "low": r["diff_low"] if share else r["ratio_low"],
            "high": r["diff_high"] if share else r["ratio_high"],
            "band": [r["band_low"], r["band_high"]],
            "stat": (
                "sim - qemu difference of the guests' run-time share in percentage points, Welch t-interval, "
                "qemu over its boots"
                if share
                else "sim/qemu ratio of mean rates, Welch interval on the log scale, qemu over its boots"
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
    r"The simulator against real credit1 (Xen 4.17 under QEMU, xentrace of every scheduler event), every "
    r"quantity of every case: each side's mean with its {conf}\,\% t-interval (qemu: over boots, the "
    r"runs of a boot averaged; sim: over seeds), sim/qemu (shares: sim $-$ qemu in points) with its "
    r"interval, the band (real Xen's own spread across boots, per quantity), and the verdict: agree when "
    r"the interval lies inside the band. Rows at a calibration point, with fewer than five boots, without a band, or "
    r"excused are not counted. Regenerate: \texttt{{schedlab validate-sim}}."
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
AGREE_MARK, MISS_MARK, KNOWN_MARK = r"$\checkmark$", r"$\times$", r"$\times^{\dagger}$"
CAL_MARK, ONE_MARK, NOBAND_MARK = r"$\circ$", r"$\cdot$", r"$\cdot$"
MARKS = {AGREE: AGREE_MARK, MISS: MISS_MARK, EXCUSED: KNOWN_MARK, CALIBRATION: CAL_MARK, FEW_BOOTS: ONE_MARK,
         NO_BAND: NOBAND_MARK}  # fmt: skip

PAPER_CAPTION = (
    r"The simulator against real credit1 (Xen 4.17 under QEMU, with an xentrace of every scheduler "
    r"event), one row per case (its variant above its point): the sim/qemu ratio of each mean rate, per scheduler event or per "
    r"{period}\,ms accounting period of guest time, with its {conf}\,\% interval (Welch, log scale; qemu "
    r"over boots), and for the guests' run-time shares the difference sim $-$ qemu in points: for S1 "
    r"the I/O VM's, otherwise the guest furthest from its qemu share. {agree}: the interval lies inside "
    r"the quantity's band, real Xen's own spread across boots (two boots differ by less in 95\,\% of "
    r"pairs); {miss}: it does not; {cal}: a calibration point (not counted); {one}: fewer than five boots on qemu or "
    r"no band (not counted). ``both 0'': neither side has the event. Blank: not compared in that "
    r"scenario. boots: qemu boots (runs). ``agree'': of the case's counted quantities, how many agree. "
    r"The sim side has {seeds} seeds per case. Every quantity is in \texttt{{table.csv}} and "
    r"\texttt{{table-full.tex}}. Regenerate: \texttt{{schedlab validate-sim}}."
)


def _point_text(point_id: str, sc: dict) -> str:
    for _, p in cases(sc):
        if config.point_id(p) == point_id:
            return ", ".join(f"{k}={v}" for k, v in p.items())
    return point_id


def paper_cell(r) -> str:
    """One compact cell: sim/qemu (or the share difference) and its mark, its interval below it
    (at the body's size, like every table's text)."""
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
    text = f"{text} {MARKS.get(r['verdict'], '')}".strip()
    if not below:
        return text
    return rf"\begin{{tabular}}[t]{{@{{}}l@{{}}}}{text}\\[-2pt]{below}\end{{tabular}}"


def _share_row(g: pd.DataFrame):
    """The share shown for a case: the I/O VM's if the scenario has one, else the guest whose
    share is furthest from qemu's."""
    sh = g[(g["kind"] == "share") & (g["verdict"] != NOT_MEASURED)]
    if sh.empty:
        return None
    io = sh[sh["quantity"] == "share io"]
    if not io.empty:
        return io.iloc[0]
    d = sh["diff_pp"].abs()
    return sh.loc[d.idxmax()] if d.notna().any() else sh.iloc[0]  # a mirror whose guests never ran: no difference


def _unmeasured_note(g: pd.DataFrame, sc: dict | None, every: bool) -> str:
    """The note of a scenario's cases without qemu records that carry the trace, one line in
    the table (`every`: all of the scenario's cases, which the note then does not list)."""
    from schedlab.report.tables import latex_escape as esc

    keys = list(dict.fromkeys(zip(g["variant"], g["point"])))
    what = "; ".join(f"{esc(v)} at {esc(_point_text(p, sc) if sc else p)}" for v, p in keys)
    reasons = list(g.drop_duplicates(["variant", "point"])["reason"])
    runs = [re.search(r"\((\d+) measured run\(s\) without sched_events\)", x) for x in reasons]
    if all(runs):
        why = f"none of its {sum(int(m.group(1)) for m in runs)} measured runs carries the trace"
    else:
        why = "; ".join(dict.fromkeys(x.removeprefix(NOT_MEASURED).strip(" ()") for x in reasons))
    what = "" if every else f" ({what})"
    return f"not measured on qemu with Xen's trace{what}: {esc(why)}"


def _two_lines(head: str) -> str:
    """A header set on two lines, broken after its "/" or ", " (a nested tabular)."""
    for sep in ("/", ", "):
        if sep in head:
            first, rest = head.split(sep, 1)
            return rf"\begin{{tabular}}[b]{{@{{}}l@{{}}}}{first}{sep.strip()}\\{rest}\end{{tabular}}"
    return head


def paper_table(df: pd.DataFrame, cfg: dict):
    """The paper's compact table (table.tex, a table_model.Table) and its sidecar cells: one row
    per measured case, PAPER_COLUMNS as cells, one line per scenario for the cases not measured
    on qemu (a row whose note spans the value columns)."""
    from schedlab.report.table_model import Table
    from schedlab.report.tables import latex_escape as esc

    scs = {s["name"]: s for s in cfg["scenarios"]}
    # the variant above its point in one column (each row has two lines already: a value above
    # its interval), so that the table fits the line at the body's size
    columns = [("", "l"), ("case", "l"), ("boots", "r")]
    # the quantities' headers on two lines: the table at the body's size within the line
    columns += [(_two_lines(h), "l") for _, h in PAPER_COLUMNS] + [("agree", "r")]
    rows: list = []
    cells: dict = {}
    spans: dict[int, int] = {}  # the not-measured lines: {row: the column their note starts at}
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
            case = esc(_point_text(p, sc) if sc else p)
            row = [label if first else "", rf"\begin{{tabular}}[t]{{@{{}}l@{{}}}}{esc(v)}\\[-2pt]{case}\end{{tabular}}"]
            row.append(f"{int(max(meas['qemu_n']))} ({max(len(x) for x in cg['qemu_runs'])})")
            for col, (q, _) in enumerate(PAPER_COLUMNS, start=3):
                r = _share_row(cg) if q == "share" else next(
                    (x for _, x in meas[meas["quantity"] == q].iterrows()), None)  # fmt: skip
                if r is None:
                    row.append("")
                    continue
                row.append(paper_cell(r))
                cells[cell_id(r)] = {"row": len([x for x in rows if x is not None]), "col": col,
                                     "text": row[-1], "verdict": r["verdict"]}  # fmt: skip
            counted = meas[meas["verdict"].isin(COUNTED)]
            if (v, p) in (sc or {}).get("calibration", set()):
                row.append(CAL_MARK)
            elif counted.empty:
                row.append("--")
            else:
                row.append(f"{int((counted['verdict'] == AGREE).sum())}/{len(counted)}")
            rows.append(row)
            first = False
        rest = g[g["verdict"] == NOT_MEASURED]
        if len(rest):
            spans[len([x for x in rows if x is not None])] = 1
            rows.append([label if first else "", _unmeasured_note(rest, sc, first)] + [""] * (len(columns) - 2))
    while rows and rows[-1] is None:
        rows.pop()
    table = Table.from_rows(columns, rows, label="tab:validation", preamble=r"\setlength{\tabcolsep}{3pt}")
    table.spans = spans
    table.caption = PAPER_CAPTION.format(
        period=f"{cfg['period_s'] * 1000:g}", conf=f"{cfg['band']['confidence']:g}", seeds=len(cfg["seeds"]),
        agree=AGREE_MARK, miss=MISS_MARK, cal=CAL_MARK, one=ONE_MARK)  # fmt: skip
    return table, cells


def _effect_text(x, lo, hi) -> str:
    """The % change and its interval below it (a nested tabular: the column stays narrow)."""
    if not _fin(x):
        return "--"
    pct = f"{(x - 1) * 100:+.0f}\\,\\%".replace("-", "$-$")
    if _fin(lo) and _fin(hi):
        return _stacked(pct, f"[{(lo - 1) * 100:+.0f}, {(hi - 1) * 100:+.0f}]".replace("-", "$-$"))
    return pct


def _stacked(*lines: str) -> str:
    """Cells on lines of their own in one table cell (a nested tabular, top-aligned)."""
    return r"\begin{tabular}[t]{@{}l@{}}" + r"\\[-2pt]".join(lines) + r"\end{tabular}"


EFFECT_MARKS = {REPRODUCED: r"$\checkmark$", NOT_REPRODUCED: r"$\times$", NONE_ON_XEN: "", EFFECT_UNTESTABLE: ""}


def effects_table(eff: pd.DataFrame, cfg: dict) -> str:
    """The effect table (effects.tex): per study comparison, real Xen's effect (boots) beside
    the mirror's (seeds), both as % change of b over a with the interval, and the verdict."""
    from schedlab.report.tables import count_word, latex_table, render_tabular
    from schedlab.report.tables import latex_escape as esc

    scs = {s["name"]: s for s in cfg["scenarios"]}
    # the comparison above its metric in one column, each value above its interval: the table at
    # the body's size within the line
    columns = [("study", "l"), ("comparison, metric", "l"), ("point", "l"), ("boots", "r"),
               ("real Xen", "l"), ("simulator", "l"), ("", r">{\raggedright\arraybackslash}p{2.1cm}")]  # fmt: skip
    rows: list = []
    prev = None
    for _, r in eff.iterrows():
        sc = scs.get(r["scenario"])
        if rows and r["scenario"] != prev:
            rows.append(None)  # space between the studies: each row has two lines
        prev = r["scenario"]
        rows.append([
            esc(sc["qemu"]["study"].upper() if sc else r["scenario"]),
            _stacked(esc(f"{r['b']} vs {r['a']}"), esc(r["metric"])),
            esc(_point_text(r["point"], sc) if sc else r["point"]),
            f"{r['xen_boots_b']}/{r['xen_boots_a']}" + ("p" if r["paired"] else ""),
            # too few boots for a test: the estimate without an interval, as every qemu result
            _effect_text(r["xen"], *((math.nan, math.nan) if r["verdict"] == EFFECT_UNTESTABLE else (r["xen_low"], r["xen_high"]))),
            _effect_text(r["sim"], r["sim_low"], r["sim_high"]),
            (EFFECT_MARKS.get(r["verdict"], "") + " " + esc(r["verdict"])).strip(),
        ])  # fmt: skip
    conf = f"{cfg['band']['effect_confidence']:g}"
    caption = (
        r"Effects, not only rates: each study's own comparison (b vs a), as the \% change of the metric, on "
        rf"real Xen under QEMU (over boots; p: paired by boot) and on the simulator's mirror (over "
        rf"{len(cfg['seeds'])} seeds), each with its unadjusted {conf}\,\% interval: each comparison is its "
        r"own family here, with no Holm adjustment over a study's comparisons as in the study tables, so "
        r"an interval here can exclude no change where the study table's wider Holm-adjusted one does not. "
        r"Reproduced: real Xen's interval "
        r"excludes no change and the mirror's excludes it on the same side; none on Xen: real Xen shows no "
        r"effect; untestable: fewer than "
        rf"{count_word(config.MIN_BOOTS)} boots a side (no interval shown). boots: b/a. Regenerate: "
        r"\texttt{schedlab validate-sim}."
    )
    return latex_table(
        r"\setlength{\tabcolsep}{4pt}" + "\n" + render_tabular(columns, rows), caption, "tab:validation-effects"
    )


def calibrated_table(cfg: dict) -> str:
    """Every calibrated value of every mirror (calibrated.tex): the value as it runs, what it is
    and where it was measured."""
    from schedlab.report.tables import latex_escape as esc
    from schedlab.report.tables import latex_table, render_tabular

    rows = []
    for sc in cfg["scenarios"]:
        points = "; ".join(f"{v} at {_point_text(p, sc)}" for v, p in sorted(sc["calibration"])) or "--"
        for c in sc["calibrated"]:
            val = f"{c['value']:g} {c['unit']}".strip()
            rows.append([esc(sc["qemu"]["study"].upper()), esc(c["what"]), esc(val), esc(c["measured_at"] or points)])
    caption = (
        r"Every calibrated value of the simulator's mirrors, as the validation runs it, and where it was measured: "
        r"at the scenario's calibration point (whose rows are marked and not counted), or, for dom0, on S2's "
        r"records, the only ones that trace dom0 apart. Everything else comes from the study's design or the qemu "
        r"options (\texttt{config/validation.yaml})."
    )
    return latex_table(render_tabular([("study", "l"), ("value", "p{6cm}"), ("", "r"), ("measured at", "p{4cm}")], rows),
                       caption, "tab:validation-calibrated")  # fmt: skip


def write_outputs(res: dict[str, pd.DataFrame], out_dir: Path, cfg: dict) -> dict[str, Path]:
    """table.tex (the paper's compact table), table-full.tex and table.csv (every quantity),
    cells.json (the sidecar), macros.tex, effects.csv and effects.tex (the effect table) and
    scenarios.csv (the scenario verdicts, the model's and its swapped variants') in out_dir."""
    from schedlab.core.files import atomic_write
    from schedlab.report.table_model import Table
    from schedlab.report.tables import write_macros, write_sidecar

    df, eff = res["rows"], res["effects"]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv = df.drop(columns=["qemu_runs"]).assign(qemu_runs=[" ".join(x) for x in df["qemu_runs"]])
    atomic_write(out_dir / "table.csv", csv.to_csv(index=False))
    atomic_write(out_dir / "effects.csv", eff.to_csv(index=False))
    atomic_write(out_dir / "scenarios.csv", res["scenarios"].to_csv(index=False))
    columns, rows, cells = table_rows(df)
    caption = CAPTION.format(conf=f"{cfg['band']['confidence']:g}")
    full = Table.from_rows(columns, rows, None, caption, "tab:validation-full")
    table, paper_cells = paper_table(df, cfg)
    atomic_write(out_dir / "effects.tex", effects_table(eff, cfg))
    atomic_write(out_dir / "calibrated.tex", calibrated_table(cfg))
    for k, c in paper_cells.items():
        cells[k]["paper"] = {"row": c["row"], "col": c["col"], "text": c["text"]}
    side = write_sidecar(
        out_dir / "cells.json",
        {"table": "validation", "file": "table-full.tex", "paper_file": "table.tex", "cells": cells},
    )
    # each as the paper's LaTeX and the report's HTML (beside it), from one table model
    full.write(out_dir / "table-full.tex", sidecar=side, title="The simulator against real credit1: every quantity")
    table.write(out_dir / "table.tex", sidecar=side, title="The simulator against real credit1: the paper's table")
    write_macros(out_dir / "macros.tex", "validation", macros(res, cfg))
    return {
        k: out_dir / f
        for k, f in (
            ("csv", "table.csv"),
            ("tex", "table.tex"),
            ("full", "table-full.tex"),
            ("cells", "cells.json"),
            ("effects", "effects.tex"),
            ("scenarios", "scenarios.csv"),
        )  # fmt: skip
    }


def _key(text: str) -> str:
    return str(text).replace("/", "-").replace(" ", "-")


def macros(res: dict[str, pd.DataFrame], cfg: dict | None = None) -> dict[str, str]:
    """The section's numbers: counts per verdict (all, per scenario), the rule, the scenario
    verdicts (model and swaps), every compared row (ID = cell_id: ID/qemu, ID/sim, ID/ratio or
    ID/diff, ID/interval, ID/band, ID/verdict, ID/miss only when it misses), every effect
    (effect/SCENARIO/METRIC/POINT/{xen,xen-interval,sim,sim-interval,verdict,boots}) and the
    band's margins (band/SCENARIO/QUANTITY)."""
    from schedlab.report.tables import count_clauses, count_word, fmt_bracket, fmt_signed
    from schedlab.report.tables import latex_escape as esc

    df, eff, scv = res["rows"], res["effects"], res["scenarios"]
    counted = df[df["verdict"].isin(COUNTED)]
    m = {
        "rows": str(len(df)),
        "counted": str(len(counted)),
        "agree": str(int((counted["verdict"] == AGREE).sum())),
        "miss": str(int((counted["verdict"] == MISS).sum())),
        "calibration": str(int((df["verdict"] == CALIBRATION).sum())),
        "one-boot": str(int((df["verdict"] == FEW_BOOTS).sum())),
        "no-band": str(int((df["verdict"] == NO_BAND).sum())),
        "excused": str(int((df["verdict"] == EXCUSED).sum())),
        "unmeasured": str(int((df["verdict"] == NOT_MEASURED).sum())),
    }
    # for the text: the rows not counted, by reason, the reasons no row has left out
    m["agree-words"] = count_word(int(m["agree"]), zero="none")
    uncounted = count_clauses(
        [
            (m["calibration"], "sit{v} at calibration points"),
            (m["one-boot"], "{has} fewer than five boots"),
            (m["no-band"], "{has} no band"),
        ]
    )
    m["uncounted"] = f"; {uncounted}" if uncounted else ""
    model = scv[scv["model"] == MODEL]
    m["validated"] = str(int((model["verdict"] == VALIDATED).sum()))
    m["scenarios"] = str(len(model))
    # in words for the text: "of the five scenarios it validates two"
    m["scenarios-sentence"] = (
        f"of the {count_word(len(model))} scenarios it validates {count_word(int(m['validated']), zero='none')}"
    )
    scs = {s["name"]: s for s in (cfg or {}).get("scenarios", [])}
    if cfg:
        b = cfg["band"]
        m["band/confidence"], m["band/effect-confidence"] = f"{b['confidence']:g}", f"{b['effect_confidence']:g}"
        m["band/z"] = f"{b['z']:g}"
        for name, by_point in b["margins"].items():
            for pid, qs in by_point.items():
                for q, v in qs.items():
                    m[f"band/{name}/{pid}/{_key(q)}"] = _num(v, 3)
        m["rule/rows-above-pct"] = f"{cfg['verdict']['rows_agree_above'] * 100:g}"
        m["period-ms"], m["seeds"] = f"{cfg['period_s'] * 1000:g}", str(len(cfg["seeds"]))
        m["calibrated"] = str(sum(len(s["calibrated"]) for s in cfg["scenarios"]))
    for _, r in scv.iterrows():
        who = "" if r["model"] == MODEL else "swap/"
        k = f"{r['scenario']}/{who}"
        m[f"{k}verdict"] = r["verdict"]
        m[f"{k}rows-agree"], m[f"{k}rows-counted"] = str(r["rows_agree"]), str(r["rows_counted"])
        m[f"{k}effects-reproduced"], m[f"{k}effects-required"] = (
            str(r["effects_reproduced"]),
            str(r["effects_required"]),
        )
        if r["verdict"] == VALIDATED:
            m[f"{k}validated"] = "1"
        if r["verdict"] == UNTESTABLE:
            m[f"{k}untestable"] = "1"
        if who:
            m[f"{k}label"] = esc(r["model"])
    frac = (cfg or {}).get("verdict", {}).get("rows_agree_above", 0.5)
    for name, g in df.groupby("scenario"):
        c = g[g["verdict"].isin(COUNTED)]
        # the two guests' shares of a case are one number (they sum to 100 %): counted once
        dup = c[(c["kind"] == "share")].groupby(["variant", "point"])["quantity"].transform("count") == 2
        first = ~c[(c["kind"] == "share")].duplicated(["variant", "point"])
        drop = dup[dup & ~first].index
        once = c.drop(index=drop)
        k1, n1 = int((once["verdict"] == AGREE).sum()), len(once)
        m[f"{name}/shares-once/agree"], m[f"{name}/shares-once/counted"] = str(k1), str(n1)
        v = scv[(scv["model"] == MODEL) & (scv["scenario"] == name)]
        if len(v) and v["verdict"].iloc[0] == VALIDATED and n1 and not k1 / n1 > frac:
            m[f"{name}/shares-once/flips"] = "1"
        m[f"{name}/agree"] = str(int((c["verdict"] == AGREE).sum()))
        m[f"{name}/miss"] = str(int((c["verdict"] == MISS).sum()))
        m[f"{name}/counted"] = str(len(c))
        m[f"{name}/calibration"] = str(int((g["verdict"] == CALIBRATION).sum()))
        m[f"{name}/one-boot"] = str(int((g["verdict"] == FEW_BOOTS).sum()))
        meas = g[g["verdict"] != NOT_MEASURED]
        n_boots = [int(x) for x in meas["qemu_n"] if _fin(x)]
        m[f"{name}/boots-min"] = str(min(n_boots)) if n_boots else "0"
        m[f"{name}/boots-max"] = str(max(n_boots)) if n_boots else "0"
        if meas.empty:
            m[f"{name}/unmeasured-all"] = "1"
        parts = []
        for (v, p), cg in c[c["verdict"] == MISS].groupby(["variant", "point"], sort=False):
            pt = _point_text(p, scs[name]) if name in scs else p
            parts.append(f"{esc(v)} at {esc(pt)} ({', '.join(esc(q) for q in cg['quantity'])})")
        m[f"{name}/miss/list"] = "; ".join(parts) if parts else "none"
        for kind in ("rate", "share"):
            k = c[c["kind"] == kind]
            m[f"{name}/{kind}/agree"], m[f"{name}/{kind}/counted"] = (
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
        m[f"{k}/band"] = _band_text(r)
        m[f"{k}/verdict"] = {AGREE: "agrees", MISS: "misses"}.get(r["verdict"], esc(r["verdict"]))
        if r["verdict"] == MISS:
            m[f"{k}/miss"] = "1"
    for _, r in eff.iterrows():
        k = f"effect/{r['scenario']}/{_key(r['metric'])}/{r['point']}"
        m[f"{k}/xen"], m[f"{k}/sim"] = _effect_pct(r["xen"]), _effect_pct(r["sim"])
        m[f"{k}/xen-interval"] = _effect_interval(r["xen_low"], r["xen_high"])
        m[f"{k}/sim-interval"] = _effect_interval(r["sim_low"], r["sim_high"])
        m[f"{k}/verdict"] = esc(r["verdict"])
        m[f"{k}/boots"] = f"{r['xen_boots_b']}/{r['xen_boots_a']}"
        if r["verdict"] == REPRODUCED:
            m[f"{k}/reproduced"] = "1"
    return m


def _effect_pct(x) -> str:
    from schedlab.report.tables import fmt_signed

    return fmt_signed((x - 1) * 100, 0) + r"\,\%" if _fin(x) else "--"


def _effect_interval(lo, hi) -> str:
    from schedlab.report.tables import fmt_bracket

    return fmt_bracket((lo - 1) * 100, (hi - 1) * 100, 0) if _fin(lo) and _fin(hi) else "--"


def summary(res: dict[str, pd.DataFrame]) -> list[str]:
    """One line per scenario (the model), one per swap, and last `validated: K of N scenarios`."""
    df, scv, eff = res["rows"], res["scenarios"], res["effects"]
    lines = []
    for _, v in scv.iterrows():
        name = v["scenario"]
        g = df[df["scenario"] == name]
        if v["model"] != MODEL:
            lines.append(f"{name} with its variants swapped ({v['model']}): {v['verdict']} "
                         f"({v['rows_agree']} of {v['rows_counted']} counted rows agree, "
                         f"{v['effects_reproduced']} of {v['effects_required']} effects reproduced)")  # fmt: skip
            continue
        if (g["verdict"] == NOT_MEASURED).all():
            lines.append(f"{name}: {g['reason'].iloc[0] if len(g) else NOT_MEASURED}: {v['verdict']}")
            continue
        left = {k: int((g["verdict"] == k).sum()) for k in (CALIBRATION, FEW_BOOTS, NO_BAND, EXCUSED, NOT_MEASURED)}
        out = ", ".join(f"{n} {k}" for k, n in left.items() if n)
        line = (f"{name}: {v['rows_agree']} of {v['rows_counted']} counted rows agree"
                + (f" (not counted: {out})" if out else "")
                + f"; effects {v['effects_reproduced']} of {v['effects_required']} reproduced: {v['verdict']}")  # fmt: skip
        e = eff[(eff["scenario"] == name) & (eff["verdict"] == NOT_REPRODUCED)]
        if len(e):
            line += "; not reproduced: " + ", ".join(f"{r.metric} {r.b} vs {r.a} at {r.point}" for r in e.itertuples())
        lines.append(line)
    model = scv[scv["model"] == MODEL]
    lines.append(f"validated: {int((model['verdict'] == VALIDATED).sum())} of {len(model)} scenarios")
    return lines


def main(
    scenario: str | None,
    out: str | os.PathLike,
    config_file=None,
    data_dir="data",
    runs: dict | str | os.PathLike | None = None,
    mutant: str | None = None,
) -> int:
    """The report of `schedlab validate-sim`: from the mirror's runs (`runs`, schedlab.mirror's
    manifest) and the qemu records, the tables (CSV, LaTeX, sidecar, macros), one line per
    scenario and last `validated: K of N scenarios`. `mutant`: the runs are that mutant's (no swaps)."""
    import sys

    cfg = load(config_file or DEFAULT_PATH)
    if mutant is not None and mutant not in {m["name"] for m in cfg["mutants"]}:
        raise ValidationError(
            f"{_rel(cfg['_file'])}: no mutant {mutant!r} (known: {', '.join(m['name'] for m in cfg['mutants'])})"
        )
    man, where = read_runs(runs) if runs is not None else (None, "")
    version = ((man or {}).get("simulator") or {}).get("simulator") or ""
    if mutant is not None and not version.endswith(f"mutant KO_{mutant.upper()}"):
        raise ValidationError(
            f"{where}: runs of {version or 'an unnamed simulator'!r}, not of mutant KO_{mutant.upper()}"
        )
    base_seed = config.load_config()["seed"]
    stale = stale_band(cfg, derive_band(cfg, Path(data_dir), base_seed))
    if stale:
        print(f"note: the band in {_rel(cfg['_file'])} differs from real Xen's spread in the records now "
              f"({stale[0]}{'; ...' if len(stale) > 1 else ''}): `schedlab validate-sim --derive-band`, "
              "commit, then validate", file=sys.stderr)  # fmt: skip
    res = build(cfg, Path(data_dir), base_seed, scenario, runs=man, swaps=mutant is None)
    paths = write_outputs(res, Path(out), cfg)
    print(f"tables: {paths['tex']} (the paper's), {paths['full']} and {paths['csv']} (every quantity), "
          f"{paths['effects']} (effects), {paths['scenarios']} (verdicts)")  # fmt: skip
    for line in summary(res):
        print(line)
    return 0


def main_derive_band(config_file=None, data_dir="data") -> int:
    """`schedlab validate-sim --derive-band`: real Xen's spread across boots per scenario and
    quantity, and the band's `margins:` block to put into the file (then commit, then validate)."""
    cfg = load(config_file or DEFAULT_PATH)
    derived = derive_band(cfg, Path(data_dir), config.load_config()["seed"])
    for name, by_point in derived.items():
        for pid, qs in by_point.items():
            for q, v in qs.items():
                unit = "pp" if q == "share" else "relative"
                print(f"# {name} {pid} {q}: s = {v['s']:.4g} ({unit}) over {v['df']} boot degrees of freedom")
    print(band_yaml(derived), end="")
    stale = stale_band(cfg, derived)
    print(f"# {_rel(cfg['_file'])}: " + ("differs: " + "; ".join(stale) if stale else "up to date"))
    return 0


# ---------------------------------------------------------------- mutants and the kill matrix


def kill_matrix(verdicts: pd.DataFrame, cfg: dict) -> pd.DataFrame:
    """Mutant x scenario: one row per simulator (the model, each scenario's own variants
    swapped, each mutant) with each scenario's verdict and its counted rows that agree
    ("k/n") and effects reproduced ("r/q"), the number validated, and whether the row is
    killed: a swap when its scenario is not validated; a mutant when it validates fewer
    scenarios than the model and not the scenario that exercises its mechanism."""
    names = [s["name"] for s in cfg["scenarios"]]
    mut = {m["name"]: m for m in cfg["mutants"]}
    order = [MODEL] + [x for x in dict.fromkeys(verdicts["model"]) if str(x).startswith("swap ")]
    order += [m for m in mut if m in set(verdicts["model"])]
    k_model = int(((verdicts["model"] == MODEL) & (verdicts["verdict"] == VALIDATED)).sum())
    rows = []
    for who in order:
        g = verdicts[verdicts["model"] == who].set_index("scenario")
        row: dict[str, Any] = {"model": who}
        for n in names:
            row[n] = g["verdict"].get(n, "")
            have = n in g.index and "rows_agree" in g.columns
            row[f"{n} rows"] = f"{g.loc[n, 'rows_agree']}/{g.loc[n, 'rows_counted']}" if have else ""
            row[f"{n} effects"] = f"{g.loc[n, 'effects_reproduced']}/{g.loc[n, 'effects_required']}" if have else ""
        k = int(sum(v == VALIDATED for v in g["verdict"]))
        row["validated"] = k
        row["of"] = len(g) if str(who).startswith("swap ") else len(names)
        if who == MODEL:
            row["killed"], row["exercised_by"] = "", ""
        elif str(who).startswith("swap "):
            vs = set(g["verdict"])
            row["killed"] = "untestable" if vs == {UNTESTABLE} else ("no" if VALIDATED in vs else "yes")
            row["exercised_by"] = ",".join(g.index)
        else:
            ex = mut[who]["exercised_by"]
            fails_own = ex is not None and g["verdict"].get(ex) != VALIDATED
            row["killed"] = "yes" if (k < k_model and fails_own) else "no"
            row["exercised_by"] = ex or ""
        rows.append(row)
    cols = ["model", *[c for n in names for c in (n, f"{n} rows", f"{n} effects")], "validated", "of"]
    return pd.DataFrame(rows, columns=[*cols, "exercised_by", "killed"])


KM_MARK = {VALIDATED: r"$\checkmark$", NOT_VALIDATED: r"$\times$", UNTESTABLE: "--", "": ""}


def kill_matrix_tex(km: pd.DataFrame, cfg: dict) -> str:
    from schedlab.report.tables import latex_escape as esc
    from schedlab.report.tables import latex_table, render_tabular

    mut = {m["name"]: m for m in cfg["mutants"]}
    names = [s["name"] for s in cfg["scenarios"]]
    label = {s["name"]: s["qemu"]["study"].upper() for s in cfg["scenarios"]}
    # the simulator and what it knocks out in one wrapping column, the switch's name breakable
    # after its underscores: the table at the body's size within the line
    columns = [("simulator: what it knocks out (Xen function)", r">{\raggedright\arraybackslash}p{5.2cm}")]
    columns += [(esc(label[n]), "l") for n in names] + [("validated", "r"), ("killed", "l")]
    rows = []
    for _, r in km.iterrows():
        who = str(r["model"])
        if who == MODEL:
            first, what = "the model", "nothing"
        elif who.startswith("swap "):
            first, what = (
                esc(who).replace("\\textless{}-\\textgreater{}", r" $\leftrightarrow$ "),
                "its scenario's variants",
            )
        else:
            first = r"\texttt{KO\_" + esc(who.upper()).replace(r"\_", r"\_\allowbreak{}") + "}"
            what = esc(f"{mut[who]['mechanism']} ({mut[who]['xen']})").replace(r"\_", r"\_\allowbreak{}")
        cells = []
        for n in names:
            mark = KM_MARK.get(r[n], esc(r[n]))
            if r[n] in (VALIDATED, NOT_VALIDATED) and r[f"{n} rows"]:
                mark += f" {r[f'{n} rows']}"
            if who in mut and mut[who]["exercised_by"] == n:
                mark = rf"\underline{{{mark}}}"
            cells.append(mark)
        rows.append([f"{first}: {what}", *cells, f"{r['validated']} of {r['of']}", esc(r["killed"])])
    caption = (
        r"The validation's power: the simulator as it is (the model), with each scenario's own variants swapped, "
        r"and with one credit1 mechanism knocked out at a time (a compile-time switch in \texttt{sim/src} named "
        rf"after the Xen function it disables), each validated by the same rule. {KM_MARK[VALIDATED]}: validated; "
        rf"{KM_MARK[NOT_VALIDATED]}: not; --: untestable (no counted row); k/n: counted rows that agree. Underlined: "
        r"the scenario that exercises the mutant's mechanism. Killed: a swap not validated; a mutant validating fewer "
        r"scenarios than the model and not its own. Regenerate: \texttt{schedlab validate-sim --mutants}."
    )
    return latex_table(render_tabular(columns, rows), caption, "tab:validation-kill")


def kill_matrix_text(km: pd.DataFrame) -> str:
    """The kill matrix as a plain text table (the command's output, docs/validation.md): per
    scenario its verdict with the counted rows that agree."""
    names = [c for c in km.columns if f"{c} rows" in km.columns]
    short = {VALIDATED: "yes", NOT_VALIDATED: "no", UNTESTABLE: "untestable", "": ""}
    cols = ["model", *names, "validated", "killed"]
    body = []
    for _, r in km.iterrows():
        cells = [str(r["model"])]
        for n in names:
            v = short.get(r[n], r[n])
            cells.append(f"{v} {r[f'{n} rows']}".strip() if r[n] in (VALIDATED, NOT_VALIDATED) else v)
        body.append([*cells, f"{r['validated']} of {r['of']}", str(r["killed"])])
    width = [max(len(c), *(len(b[i]) for b in body)) for i, c in enumerate(cols)]

    def line(xs):
        return "| " + " | ".join(x.ljust(w) for x, w in zip(xs, width)) + " |"

    return "\n".join([line(cols), "|" + "|".join("-" * (w + 2) for w in width) + "|", *map(line, body)])


def write_kill_matrix(verdict_files: list[Path], out_dir: Path, cfg: dict) -> pd.DataFrame:
    """kill-matrix.csv, kill-matrix.tex and kill-macros.tex in out_dir from the scenarios.csv of
    the model's validation and of each mutant's (the mutant's name is its folder's)."""
    from schedlab.core.files import atomic_write
    from schedlab.report.tables import count_of, count_word, write_macros

    frames = []
    for f in verdict_files:
        try:
            d = pd.read_csv(f, keep_default_na=False)
        except (OSError, pd.errors.ParserError) as e:
            raise ValidationError(f"{_rel(f)}: cannot read the scenario verdicts ({e})") from None
        if set(SCENARIO_COLUMNS) - set(d.columns):
            raise ValidationError(
                f"{_rel(f)}: not a scenarios.csv of schedlab validate-sim (columns {list(d.columns)})"
            )
        name = Path(f).parent.name  # a mutant's validation writes into a folder of its name
        if name in {m["name"] for m in cfg["mutants"]}:
            d = d[d["model"] == MODEL].assign(model=name)
        frames.append(d)
    verdicts = pd.concat(frames, ignore_index=True)
    km = kill_matrix(verdicts, cfg)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(out_dir / "kill-matrix.csv", km.to_csv(index=False))
    atomic_write(out_dir / "kill-matrix.tex", kill_matrix_tex(km, cfg))
    m = {}
    for _, r in km.iterrows():
        k = "model" if r["model"] == MODEL else _key(r["model"].replace("<->", "-"))
        m[f"{k}/validated"], m[f"{k}/of"], m[f"{k}/killed"] = str(r["validated"]), str(r["of"]), r["killed"]
    muts = km[~km["model"].isin([MODEL]) & ~km["model"].str.startswith("swap ")]
    swaps = km[km["model"].str.startswith("swap ")]
    m["mutants"], m["mutants-killed"] = str(len(muts)), str(int((muts["killed"] == "yes").sum()))
    m["swaps"], m["swaps-killed"] = str(len(swaps)), str(int((swaps["killed"] == "yes").sum()))
    killed = muts[muts["killed"] == "yes"]
    m["killed-max-validated"] = str(int(killed["validated"].max())) if len(killed) else "0"
    # for the text: how many scenarios the killed mutants still validate, "none" rather than "at most 0"
    most = int(killed["validated"].max()) if len(killed) else 0
    m["killed-validated"] = f"at most {count_word(most)} of them" if most else "none of them"
    m["mutants-survived"] = str(int((muts["killed"] == "no").sum()))
    m["swaps-testable"] = str(int((swaps["killed"] != "untestable").sum()))
    # the counts as sentences for the text (count_of: "all five ...", "none of the ...", agreement)
    testable = int(m["swaps-testable"])
    swaps_text = count_of(
        int(m["swaps-killed"]),
        testable,
        "swap of a testable scenario",
        "swaps of a testable scenario",
        ("is rejected", "are rejected"),
    )
    m["swaps-sentence"] = (swaps_text[0].upper() + swaps_text[1:] + ".") if testable else ""
    mut_text = count_of(int(m["mutants-killed"]), len(muts), "mutant", "mutants", ("is killed", "are killed"))
    m["mutants-sentence"] = mut_text[0].upper() + mut_text[1:] if len(muts) else ""
    m["mutants-survived-words"] = count_word(int(m["mutants-survived"]), zero="none")
    for _, r in muts[muts["killed"] == "no"].iterrows():
        m[f"{r['model']}/survives"] = "1"
    write_macros(out_dir / "kill-macros.tex", "validation-kill", m)
    return km


def _cli(argv: list[str] | None = None) -> int:
    """The pipeline's: `python -m schedlab.report.validation kill-matrix --out DIR SCENARIOS.csv...`;
    `... validate --runs MANIFEST --out DIR [--mutant NAME] [--data-dir D]` (a mutant's report)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m schedlab.report.validation")
    sub = ap.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("kill-matrix", help="the kill matrix from the model's and each mutant's scenarios.csv")
    k.add_argument("--out", required=True)
    k.add_argument("--config", default=str(DEFAULT_PATH))
    k.add_argument("files", nargs="+")
    v = sub.add_parser("validate", help="the validation's tables from the mirror's runs (never runs the simulator)")
    v.add_argument("--runs", required=True, help="the mirror's manifest (python -m schedlab.mirror run)")
    v.add_argument("--out", required=True)
    v.add_argument("--config", default=str(DEFAULT_PATH))
    v.add_argument("--data-dir", default="data")
    v.add_argument("--mutant", help="the runs are the mutant NAME's (no swaps)")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "validate":
            return main(None, Path(a.out), a.config, a.data_dir, runs=a.runs, mutant=a.mutant)
        km = write_kill_matrix([Path(f) for f in a.files], Path(a.out), load(a.config))
    except (ConfigError, store.RecordError) as e:
        print(f"{a.cmd}: {e}", file=__import__("sys").stderr)
        return 2
    print(kill_matrix_text(km))
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli())
