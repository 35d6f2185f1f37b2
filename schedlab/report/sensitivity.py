"""Sensitivity of the sim's conclusions to its uncalibrated workload parameters: the analysis of
the sweep's records (the sweep itself is the run stage's: schedlab.sweep; this module only reads).

A conclusion at one setting (`effects`): the difference of the variant from its reference in %
of the reference mean; for a `higher`/`lower` claim Welch's t, for an `equivalent` claim TOST
against the margin; the p-values of a study's conclusions at one setting are one Holm family.
Its outcome is `higher`/`lower` (significant) or `n.s.`; `equivalent`, `beyond` (the interval
outside the margin) or `unresolved`. A conclusion is robust when every setting (OAT and joint)
gives the shipped setting's outcome (`robustness`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from schedlab import config
from schedlab.sweep import (  # noqa: F401  (the sweep's plan and errors, as the notebook reads them)
    SensitivityError,
    StudyPlan,
    Sweep,
    _rel,
    apply,
    definition,
    load,
    manifest_path,
    settings,
)

# --- analysis (no simulator) ---------------------------------------------------------------------------


def read_runs(sw: Sweep, study: str, data_dir: Path):
    """One row per run of the study's manifest (setting, kind, param, side, variant, point_id,
    repetition, run_id and the metrics); each record checked against the manifest's checksum.
    Settings of the current plan only: a manifest of another configuration is an error."""
    import pandas as pd

    from schedlab import store

    mpath = manifest_path(data_dir, study)
    if not mpath.exists():
        raise SensitivityError(f"{mpath}: no manifest (run `python -m schedlab.sweep run --study {study}` first)")
    man = json.loads(mpath.read_text())
    want = [s.id for s in settings(sw.studies[study], sw.joint_points, sw.joint_seed)]
    have = {e["id"]: e for e in man["settings"]}
    if man.get("config_sha256") != sw.sha256 or [e["id"] for e in man["settings"]] != want:
        raise SensitivityError(
            f"{mpath}: written for another {_rel(sw.path)} (rerun the sweep, or `select` to re-read the records)"
        )
    plan = sw.studies[study]
    rows = []
    for s in settings(plan, sw.joint_points, sw.joint_seed):
        e = have[s.id]
        st = apply(plan.study, s.values)
        current = {(v, config.point_id(p)): config.sha256(definition(st, v, p)) for v, p in plan.runs()}
        for r in e["runs"]:
            rpath = Path(data_dir) / r["path"]
            rec = store.read_record(rpath)
            if rec.get("checksum") != r["checksum"]:
                raise SensitivityError(f"{rpath}: checksum differs from the manifest's")
            if current.get((rec["variant"], rec["point_id"])) != rec.get("definition_hash"):
                raise SensitivityError(
                    f"{rpath}: field definition_hash: not the current definition of setting {s.id} "
                    f"({plan.study['_file']} changed since the sweep; run it again)"
                )
            rows.append(
                {
                    "setting": s.id,
                    "kind": e["kind"],
                    "param": e["param"],
                    "side": e["side"],
                    "variant": rec["variant"],
                    "point_id": rec["point_id"],
                    "repetition": rec["repetition"],
                    "run_id": rec["run_id"],
                    "binary_sha256": rec["provenance"]["testbed"].get("binary_sha256", ""),
                    **rec["metrics"],
                }
            )
    return pd.DataFrame(rows)


def outcome(claim: str, effect: float, p_adj: float, ci: tuple[float, float], margin: float | None, alpha: float):
    """The outcome of one comparison at one setting (see the module's docstring)."""
    if not math.isfinite(effect) or not math.isfinite(p_adj):
        return "no result"
    if claim == "equivalent":
        if p_adj < alpha:
            return "equivalent"
        if ci[0] > margin or ci[1] < -margin:
            return "beyond"
        return "unresolved"
    if p_adj < alpha:
        return "higher" if effect > 0 else "lower"
    return "n.s."


def effects(runs, plan: StudyPlan, confidence: float = 95.0):
    """One row per (setting, conclusion): effect_pct (variant vs reference, in % of the
    reference mean), n, p, p_holm (one Holm family per setting), the interval (the (1-2 alpha)
    TOST interval for an equivalence, else the Welch interval at `confidence`) and outcome."""
    import numpy as np
    import pandas as pd

    from schedlab.stats import compare, holm, tost

    alpha = 1 - confidence / 100
    out = []
    for sid, g in runs.groupby("setting", sort=False):
        rows = []
        for c in plan.conclusions:
            sel = g[g.point_id == c.point_id]
            b = sel[sel.variant == c.reference][c.metric].dropna().to_numpy(float)
            v = sel[sel.variant == c.variant][c.metric].dropna().to_numpy(float)
            row = {
                "setting": sid,
                "kind": g["kind"].iloc[0],
                "param": g["param"].iloc[0],
                "side": g["side"].iloc[0],
                "conclusion": c.id,
                "claim": c.claim,
                "n": int(min(len(b), len(v))),
                "reference_mean": float(b.mean()) if len(b) else math.nan,
                "variant_mean": float(v.mean()) if len(v) else math.nan,
                "effect_pct": math.nan,
                "low": math.nan,
                "high": math.nan,
                "p": math.nan,
                "runs": sel[sel.variant.isin([c.variant, c.reference])]["run_id"].tolist(),
            }
            try:
                if c.claim == "equivalent":
                    e = tost(b, v, margin_pct=c.margin_pct, alpha=alpha)
                    row.update(effect_pct=e.pct, low=e.ci_low_pct, high=e.ci_high_pct, p=e.p)
                else:
                    r = compare(b, v, confidence=confidence, welch=True)
                    row.update(effect_pct=r.pct, low=r.pct - r.pct_err, high=r.pct + r.pct_err, p=r.p)
            except ValueError:
                pass  # fewer than two runs, or a zero reference mean: no result
            rows.append(row)
        ps = np.array([r["p"] for r in rows], float)
        ok = np.isfinite(ps)
        adj = np.full(len(ps), math.nan)
        if ok.any():
            adj[ok] = holm(ps[ok])
        for r, pa, c in zip(rows, adj, plan.conclusions):
            r["p_holm"] = float(pa)
            r["outcome"] = outcome(c.claim, r["effect_pct"], pa, (r["low"], r["high"]), c.margin_pct, alpha)
        out += rows
    return pd.DataFrame(out)


def robustness(eff, plan: StudyPlan):
    """One row per conclusion: the shipped effect and outcome, the range of the effect over
    the OAT settings (shipped included) and over the joint points, robust (every setting gives
    the shipped outcome), what breaks it (`param low/high`, `joint k/N`), and whether the effect
    keeps the shipped effect's sign everywhere (sign_kept: weaker than robust)."""
    import numpy as np
    import pandas as pd

    rows = []
    for c in plan.conclusions:
        e = eff[eff.conclusion == c.id]
        ship = e[e.kind == "shipped"].iloc[0]
        oat = e[e.kind.isin(["shipped", "oat"])]
        joint = e[e.kind == "joint"]
        breaks = []
        for _, r in e[e.kind == "oat"].iterrows():
            if r["outcome"] != ship["outcome"]:
                breaks.append(f"{r['param']} {r['side']}")
        nj = int((joint["outcome"] != ship["outcome"]).sum())
        if nj:
            breaks.append(f"joint {nj}/{len(joint)}")
        supports = ship["outcome"] == c.claim
        signs = np.sign(e["effect_pct"].dropna().to_numpy(float))
        sign_kept = bool(len(signs)) and bool((signs == np.sign(ship["effect_pct"])).all())
        rows.append(
            {
                "conclusion": c.id,
                "label": c.label,
                "claim": c.claim,
                "margin_pct": c.margin_pct,
                "shipped_pct": float(ship["effect_pct"]),
                "shipped_outcome": ship["outcome"],
                "supports_claim": bool(supports),
                "oat_min": float(oat["effect_pct"].min()),
                "oat_max": float(oat["effect_pct"].max()),
                "joint_min": float(joint["effect_pct"].min()) if len(joint) else math.nan,
                "joint_max": float(joint["effect_pct"].max()) if len(joint) else math.nan,
                "joint_n": int(len(joint)),
                "joint_broken": nj,
                "robust": not breaks and ship["outcome"] != "no result",
                "sign_kept": sign_kept,
                "breaks": breaks,
                "runs": sorted({r for rs in e["runs"] for r in rs}),
            }
        )
    return pd.DataFrame(rows)
