"""Agreement between testbeds and with the published figures.

Published numbers enter only here, and only as the column they are compared
with: for every (study, metric, variant, point) where the study file quotes
the variant and its baseline, the published difference in % is set beside each
testbed's difference and its interval (the table's, at the row's Holm-adjusted
level). Where only one variant is quoted at several points (S1), the ratio of
each point to the first is compared.

A published value inside our interval is only "not contradicted": claiming
agreement would take an equivalence test, so the verdict says "inside the
interval", never "agrees"."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from schedlab import config

# testbeds whose magnitudes are an emulated machine's (TCG under QEMU): never set beside the
# published hardware figures (the paper's rule: emulated magnitudes are not hardware magnitudes)
EMULATED = frozenset({"qemu"})


def _pub(published: dict, metric: str, variant: str, value):
    v = published.get(metric, {}).get(variant, {})
    return v.get(value, v.get(str(value)))


def rows(study: dict, sidecars: dict[str, dict]) -> list[dict]:
    """sidecars: {testbed: sidecar of this study's table on that testbed}."""
    pub = study.get("published", {})
    axis = next(iter(study["axes"]))
    out = []
    for m in study["metrics"]:
        name = m["name"]
        for v, vdef in study["variants"].items():
            base = vdef.get("baseline", study["baseline"])
            gain = pub.get(f"{name}_gain_pct", {}).get(v)
            for value in study["axes"][axis]:
                pv, pb = _pub(pub, name, v, value), _pub(pub, name, base, value)
                if v != base and pv is not None and pb is not None:
                    pub_pct, kind = 100.0 * (pv - pb) / pb, f"vs {base}"
                elif v != base and gain is not None:
                    pub_pct, kind = float(gain), f"vs {base}"
                else:
                    continue
                pid = config.point_id({axis: value})
                row = {
                    "study": study["study"],
                    "metric": name,
                    "variant": v,
                    "point": f"{axis}={value}",
                    "kind": kind,
                    "published": pub_pct,
                }
                for tb, side in sidecars.items():
                    c = side["cells"].get(f"{v}/{pid}/{name}/delta")
                    if c:
                        row[tb] = c["value"]
                        row[f"{tb}_low"], row[f"{tb}_high"] = _interval(c)
                        row[f"{tb}_runs"] = c["runs"] + c.get("baseline_runs", [])
                out.append(row)
        # one variant quoted at several points and its baseline not at all: ratios
        for v in study["variants"]:
            quoted = [x for x in study["axes"][axis] if _pub(pub, name, v, x) is not None]
            base = study["variants"][v].get("baseline", study["baseline"])
            if len(quoted) < 2 or any(_pub(pub, name, base, x) is not None for x in quoted):
                continue
            first = quoted[0]
            for value in quoted[1:]:
                row = {
                    "study": study["study"],
                    "metric": name,
                    "variant": v,
                    "point": f"{axis}={value}",
                    "kind": f"{value} / {first}",
                    "published": _pub(pub, name, v, value) / _pub(pub, name, v, first),
                }
                for tb, side in sidecars.items():
                    a = side["cells"].get(f"{v}/{config.point_id({axis: value})}/{name}/mean")
                    b = side["cells"].get(f"{v}/{config.point_id({axis: first})}/{name}/mean")
                    if a and b and b["value"]:
                        row[tb] = a["value"] / b["value"]  # no interval (NaN bounds)
                        row[f"{tb}_low"] = row[f"{tb}_high"] = float("nan")
                        row[f"{tb}_runs"] = a["runs"] + b["runs"]
                out.append(row)
    return out


def _interval(cell: dict) -> tuple[float, float]:
    """A delta cell's interval; an unbounded end (null in the sidecar) is infinite."""
    lo, hi = cell.get("pct_low", math.nan), cell.get("pct_high", math.nan)
    return (-math.inf if lo is None else float(lo)), (math.inf if hi is None else float(hi))


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


INSIDE = "inside the interval"
# outside the interval, but the interval holds 0: our runs show no detectable difference, so the
# published value is ruled out without a direction of ours to set beside it
NO_DIFFERENCE = "outside, no detectable difference"
VERDICTS = (INSIDE, "same direction", "opposite", NO_DIFFERENCE)


def verdict(pub: float, ours: float, low, high, ratio: bool) -> str:
    """INSIDE when the published value lies in [low, high] (None or an infinite end:
    unbounded; NaN: no interval); outside it, NO_DIFFERENCE where the interval holds 0 (a
    non-significant difference has no direction), else whether the direction is the same.
    An exact difference (low == high == ours) has a direction unless it is 0."""
    if _nan(ours):
        return "--"
    centre = 1.0 if ratio else 0.0
    lo = -math.inf if low is None else float(low)
    hi = math.inf if high is None else float(high)
    if not ratio and not (math.isnan(lo) or math.isnan(hi)):
        if lo <= pub <= hi:
            return INSIDE
        if lo <= centre <= hi:
            return NO_DIFFERENCE
    if ours == centre and pub != centre:
        return NO_DIFFERENCE  # an exact no-difference has no direction to set beside the published one
    same_sign = (pub - centre) * (ours - centre) > 0 or pub == ours == centre
    return "same direction" if same_sign else "opposite"


def build(studies: dict[str, dict], testbeds: list[str], paper_dir: Path) -> pd.DataFrame:
    allrows = []
    for s, st in studies.items():
        sides = {}
        for tb in testbeds:
            p = paper_dir / "generated" / s / f"{tb}-cells.json"
            if p.exists():
                sides[tb] = json.loads(p.read_text())
        allrows += rows(st, sides)
    df = pd.DataFrame(allrows)
    for tb in testbeds:
        if tb in df:
            df[f"{tb}_verdict"] = [
                verdict(p, o, lo, hi, "/" in k)
                for p, o, lo, hi, k in zip(df["published"], df[tb], df[f"{tb}_low"], df[f"{tb}_high"], df["kind"])
            ]
    return df


CROSS_VERDICTS = ("same direction", "one testbed only", "neither significant", "opposite", "untestable")


def cross_verdict(a: dict, b: dict) -> str:
    """Two testbeds' comparison cells for the same (study, metric, variant, point): whether
    both are significant and in which directions (not agreement in size: that would take
    an equivalence test)."""
    if _nan(a.get("value")) or _nan(b.get("value")):
        return "untestable"  # a row with too few units on one side has no difference to set beside
    # an exact difference (a deterministic model's: no test) has a direction unless it is 0
    sa, sb = (x.get("significant") or (x.get("test") == "exact" and x.get("value") != 0) for x in (a, b))
    if sa and sb:
        return "same direction" if (a["value"] > 0) == (b["value"] > 0) else "opposite"
    if sa or sb:
        return "one testbed only"
    return "neither significant"


def cross(
    studies: dict[str, dict], pairs: list[tuple[str, str]], paper_dir: Path, reference: str = "sim"
) -> pd.DataFrame:
    """Every comparison that `reference` and another reported testbed both make
    (same study, metric, variant and point id; the other testbed's points are the
    study's scaled-down axes, so only the common points are compared)."""
    out = []
    reported = {}
    for s, tb in pairs:
        p = paper_dir / "generated" / s / f"{tb}-cells.json"
        if p.exists():
            reported.setdefault(s, {})[tb] = json.loads(p.read_text())["cells"]
    for s, by_tb in reported.items():
        if reference not in by_tb:
            continue
        for tb, cells in by_tb.items():
            if tb == reference:
                continue
            for key, c in sorted(cells.items()):
                if not key.endswith("/delta") or key not in by_tb[reference]:
                    continue
                r = by_tb[reference][key]
                variant, pid, metric, _ = key.split("/")
                (rlo, rhi), (lo, hi) = _interval(r), _interval(c)
                out.append(
                    {
                        "study": s,
                        "testbed": tb,
                        "metric": metric,
                        "variant": variant,
                        "point": pid,
                        "base_value": r["value"],
                        "base_low": rlo,
                        "base_high": rhi,
                        "base_exact": r.get("test") == "exact",  # no spread in either variant: no interval
                        "value": c["value"],
                        "low": lo,
                        "high": hi,
                        "verdict": cross_verdict(r, c),
                        "runs": r["runs"] + r.get("baseline_runs", []) + c["runs"] + c.get("baseline_runs", []),
                    }
                )
    return pd.DataFrame(out)
