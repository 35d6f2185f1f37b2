"""Error rates of the paper's default analysis (schedlab.stats.compare_table as the study tables
call it), by simulation with fixed seeds: the evidence behind docs/statistics.md's claims.

1. Runs that share a boot. Six runs per variant from b boots (b = 1, 2, 3, 6; 6/b runs each), a
   boot effect with intra-class correlation ICC (0 to 0.9), no true difference: how often a
   table rejects the null (type-I error at 95 %) when the runs are tested as independent, and
   when the analysis is at the unit (boot means, degrees of freedom in boots; one boot per
   variant is untestable, counted as no rejection).
2. Unequal variances (CV 1 % against 3 %) and lognormal noise (CV 15 % and 60 %), 5 and 10 runs:
   type-I error and the coverage of the log-ratio interval.
3. The ratio interval's method at 20 runs per arm: the log-ratio t interval against BCa.

Every line is `name: value` (rates with their Monte Carlo standard error); the last line is
`max type-I at the unit: X`. Usage: .venv/bin/python benchmarks/stats_error_rates.py [--reps 2000]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schedlab import stats  # noqa: E402


def _table(rng, reps: int, boots: int, per_boot: int, icc: float, cv=(0.02, 0.02), lognormal=False, effect=0.0):
    """`reps` simulated tables as the points of one long frame: variants a (baseline) and b."""
    rows_v, rows_b, rows_val, rows_pt = [], [], [], []
    total_sd = {"a": cv[0], "b": cv[1]}
    for v in ("a", "b"):
        sd = total_sd[v]
        sb, sw = sd * math.sqrt(icc), sd * math.sqrt(1 - icc)
        be = rng.normal(0, sb, (reps, boots, 1))
        we = rng.normal(0, sw, (reps, boots, per_boot))
        if lognormal:
            # lognormal runs with the CV asked for: log-scale sd from the CV
            s = math.sqrt(math.log1p(sd**2))
            x = 100 * np.exp(rng.normal(-s * s / 2, s, (reps, boots, per_boot)))
        else:
            x = 100 * (1 + (effect if v == "b" else 0.0)) * (1 + be + we)
        pts = np.repeat(np.arange(reps), boots * per_boot)
        bid = np.tile(np.repeat(np.arange(boots), per_boot), reps)
        rows_v += [v] * x.size
        rows_b += [f"{v}{b}" for b in bid]
        rows_val.append(x.ravel())
        rows_pt.append(pts)
    return pd.DataFrame(
        {"variant": rows_v, "boot": rows_b, "value": np.concatenate(rows_val), "pt": np.concatenate(rows_pt)}
    )


def _rate(flags) -> str:
    p = float(np.mean(flags))
    return f"{p:.3f} (+-{math.sqrt(p * (1 - p) / len(flags)):.3f})"


def boot_effect(reps: int) -> float:
    print("# 1. six runs per variant from b boots, boot effect ICC; no true difference; 95 %")
    worst = 0.0
    for icc in (0.0, 0.3, 0.5, 0.7, 0.9):
        for boots in (1, 2, 3, 6):
            rng = np.random.default_rng(1000 + int(icc * 10) * 10 + boots)
            df = _table(rng, reps, boots, 6 // boots, icc)
            runs = stats.compare_table(df, "value", "a", by=["pt"], holm=False)
            unit = stats.compare_table(df, "value", "a", by=["pt"], holm=False, unit_col="boot")
            rej_unit = unit["significant"].to_numpy(bool)
            worst = max(worst, float(rej_unit.mean()))
            untestable = float((unit["test"] == "untestable").mean())
            print(
                f"type-I icc={icc:.1f} boots={boots}: runs as independent {_rate(runs['significant'])}, "
                f"at the unit {_rate(rej_unit)}" + (f" (untestable {untestable:.2f})" if untestable else "")
            )
    return worst


def unequal_and_lognormal(reps: int) -> None:
    print("# 2. without a boot effect: unequal variances, lognormal noise; 95 %")
    for n in (5, 10):
        rng = np.random.default_rng(2000 + n)
        df = _table(rng, reps, n, 1, 0.0, cv=(0.01, 0.03))
        t = stats.compare_table(df, "value", "a", by=["pt"], holm=False)
        cover = (t["pct_low"] <= 0) & (t["pct_high"] >= 0)
        print(f"unequal CV 1 % / 3 %, n={n}: type-I {_rate(t['significant'])}, coverage {_rate(cover)}")
        for cv in (0.15, 0.60):
            rng = np.random.default_rng(3000 + n + int(cv * 100))
            df = _table(rng, reps, n, 1, 0.0, cv=(cv, cv), lognormal=True)
            t = stats.compare_table(df, "value", "a", by=["pt"], holm=False)
            cover = (t["pct_low"] <= 0) & (t["pct_high"] >= 0)
            print(f"lognormal CV {cv:.0%}, n={n}: type-I {_rate(t['significant'])}, coverage {_rate(cover)}")
    for n in (5, 10):
        rng = np.random.default_rng(4000 + n)
        df = _table(rng, reps, n, 1, 0.0, cv=(0.02, 0.02), effect=0.05)
        t = stats.compare_table(df, "value", "a", by=["pt"], holm=False)
        cover = (t["pct_low"] <= 5) & (t["pct_high"] >= 5)
        print(f"equal CV 2 %, true +5 %, n={n}: coverage {_rate(cover)}")


def ratio_methods(reps: int) -> None:
    print("# 3. the ratio interval at 20 runs per arm (lognormal CV 30 %, true ratio 1)")
    rng = np.random.default_rng(5000)
    s = math.sqrt(math.log1p(0.3**2))
    cover = {"log-t": [], "BCa": []}
    for _ in range(reps):
        a = 100 * np.exp(rng.normal(-s * s / 2, s, 20))
        b = 100 * np.exp(rng.normal(-s * s / 2, s, 20))
        for method in cover:
            r = stats.bootstrap_ratio_ci([[x] for x in a], [[x] for x in b], method=method, seed=0, n_boot=999)
            cover[method].append(r.low <= 1.0 <= r.high)
    for method, flags in cover.items():
        print(f"ratio interval coverage, n=20, {method}: {_rate(flags)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2000, help="simulated tables per setting (default 2000)")
    ap.add_argument("--ratio-reps", type=int, default=300, help="simulated pairs for the ratio methods")
    a = ap.parse_args()
    worst = boot_effect(a.reps)
    unequal_and_lognormal(a.reps)
    ratio_methods(a.ratio_reps)
    print(f"max type-I at the unit: {worst:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
