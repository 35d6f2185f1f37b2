"""One study's comparison table: numbers from `schedlab.stats`, layout in
LaTeX (booktabs + siunitx), and a sidecar mapping every cell to its runs."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from schedlab import config
from schedlab.report.data import data_hash
from schedlab.core.files import atomic_write


def _latex_escape(s: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"),
                 ("_", r"\_"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}"), ("^", r"\^{}")):
        s = s.replace(a, b)
    return s


def _decimals(err: float, sig: int = 2) -> int:
    """Decimal places that show `err` to `sig` significant digits (the value follows)."""
    if not math.isfinite(err) or err <= 0:
        return 2
    return max(0, sig - 1 - int(math.floor(math.log10(abs(err)))))


def fmt_pm(value: float, err: float) -> str:
    d = _decimals(err)
    if not math.isfinite(err) or err <= 0:
        return rf"\num{{{value:.{d}f}}}"
    return rf"\num{{{value:.{d}f}}}\,$\pm$\,\num{{{err:.{d}f}}}"


def mean_ci(values: np.ndarray, confidence: float = 95.0) -> tuple[float, float]:
    from scipy import stats as st
    n = len(values)
    mean = float(np.mean(values))
    if n < 2:
        return mean, float("nan")
    sd = float(np.std(values, ddof=1))
    return mean, float(st.t.ppf(0.5 + confidence / 200, n - 1) * sd / math.sqrt(n))


def compare_study(runs: pd.DataFrame, study: dict, testbed: str, confidence: float = 95.0,
                  margin_pct: float | None = None) -> pd.DataFrame:
    """Every variant against its baseline at every point, for every metric: one
    family for Holm's adjustment (the whole table)."""
    from schedlab.stats import compare_table
    axes = list(config.testbed_settings(study, testbed)["axes"])
    metrics = [m["name"] for m in study["metrics"]]
    long = runs.melt(id_vars=["run_id", "variant", *axes], value_vars=[m for m in metrics if m in runs],
                     var_name="metric", value_name="value")
    # metrics with `when:` exist only at some points (their other rows are NaN)
    long = long.dropna(subset=["value"])
    out = []
    baselines = {v: d.get("baseline", study["baseline"]) for v, d in study["variants"].items()}
    for base in sorted(set(baselines.values())):
        members = [v for v, b in baselines.items() if b == base and v != base]
        sub = long[long["variant"].isin([base, *members])]
        if members:
            out.append(compare_table(sub, metric="value", baseline=base, by=["metric", *axes],
                                     confidence=confidence, margin_pct=margin_pct, holm=False))
    table = pd.concat(out, ignore_index=True)
    from schedlab.stats import holm
    table["p_holm"] = holm(table["p"].to_numpy())
    table["significant"] = table["p_holm"] < (1 - confidence / 100)
    return table


class StudyTable:
    """Builds the LaTeX table and its sidecar for one study on one testbed."""

    def __init__(self, study: dict, testbed: str, runs: pd.DataFrame, out_dir: Path,
                 confidence: float = 95.0, margin_pct: float | None = None):
        self.study, self.testbed, self.runs = study, testbed, runs
        self.out_dir = Path(out_dir)
        self.confidence, self.margin_pct = confidence, margin_pct
        self.axes = list(config.testbed_settings(study, testbed)["axes"])
        self.metrics = study["metrics"]
        self.table_id = f"{study['study']}-{testbed}"
        self.hash = data_hash(runs)
        self.cmp = compare_study(runs, study, testbed, confidence, margin_pct)
        self.cells: dict[str, dict] = {}
        self.macros: dict[str, str] = {}

    # --- cell bookkeeping -------------------------------------------------
    def _runs_of(self, variant: str, point: dict) -> list[str]:
        sel = self.runs["variant"] == variant
        for a in self.axes:
            sel &= self.runs[a] == point[a]
        return sorted(self.runs.loc[sel, "run_id"])

    def _cell(self, key: str, row: int, col: int, text: str, value, stat: str, runs: list[str],
              baseline_runs: list[str] | None = None, **extra) -> str:
        self.cells[key] = {"row": row, "col": col, "text": text, "value": value, "stat": stat,
                           "runs": runs, **({"baseline_runs": baseline_runs} if baseline_runs else {}), **extra}
        self.macros[key] = text
        return text

    # --- the table --------------------------------------------------------
    def _merged(self) -> bool:
        """One metric per point (each metric has a `when:`): one value column group,
        with the metric named in its own column, instead of mostly empty columns."""
        pts = config.points(self.study, self.testbed)
        return len(self.metrics) > 1 and all(len(config.metrics_for(self.study, p)) == 1 for p in pts)

    def latex(self, published: bool = True) -> str:
        if self._merged():
            return self._latex_merged()
        st = self.study
        pub = st.get("published", {}) if published else {}
        has_pub = {m["name"]: m["name"] in pub for m in self.metrics}
        cols = ["l"] * (len(self.axes) + 1)
        head1 = [_latex_escape(a) for a in self.axes] + ["variant"]
        for m in self.metrics:
            unit = f" [{_latex_escape(m['unit'])}]" if m.get("unit") else ""
            arrow = r"$\uparrow$" if m["better"] == "higher" else r"$\downarrow$"
            span = 3 if has_pub[m["name"]] else 2
            head1.append(rf"\multicolumn{{{span}}}{{c}}{{{_latex_escape(m['name'])}{unit} {arrow}}}")
            cols += ["r", "r"] + (["r"] if has_pub[m["name"]] else [])
        head2 = [""] * (len(self.axes) + 1)
        rules, c0 = [], len(self.axes) + 2
        for m in self.metrics:
            head2 += ["mean $\\pm$ CI", r"$\Delta$\,\% $\pm$ err"] + (["published"] if has_pub[m["name"]] else [])
            span = 3 if has_pub[m["name"]] else 2
            rules.append(rf"\cmidrule(lr){{{c0}-{c0 + span - 1}}}")
            c0 += span
        lines = [rf"\begin{{tabular}}{{{''.join(cols)}}}", r"\toprule",
                 " & ".join(head1) + r" \\", "".join(rules), " & ".join(head2) + r" \\", r"\midrule"]
        variants = list(st["variants"])
        points = config.points(st, self.testbed)
        row = 0
        for pi, point in enumerate(points):
            pid = config.point_id(point)
            for vi, v in enumerate(variants):
                runs_v = self._runs_of(v, point)
                if not runs_v:
                    continue
                cells = [(_latex_escape(str(point[a])) if vi == 0 else "") for a in self.axes]
                cells.append(_latex_escape(v))
                col = len(cells)
                for m in self.metrics:
                    name = m["name"]
                    if not config.metric_applies(m, point):
                        cells += [""] * (3 if has_pub[name] else 2)
                        col += 3 if has_pub[name] else 2
                        continue
                    cells += self._value_cells(v, point, name, row, col)
                    col += 2
                    if has_pub[name]:
                        pv = pub[name].get(v, {}).get(str(point[self.axes[0]]),
                                                      pub[name].get(v, {}).get(point[self.axes[0]]))
                        cells.append(rf"\num{{{pv}}}" if pv is not None else "--")
                        col += 1
                lines.append(" & ".join(cells) + r" \\")
                row += 1
            if pi < len(points) - 1:
                lines.append(r"\addlinespace")
        lines += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(lines) + "\n"

    def _value_cells(self, v: str, point: dict, name: str, row: int, col: int) -> list[str]:
        """mean +- CI and the Delta % cell of one variant, point and metric."""
        st, pid = self.study, config.point_id(point)
        runs_v = self._runs_of(v, point)
        base = st["variants"][v].get("baseline", st["baseline"])
        vals = self.runs.loc[self.runs["run_id"].isin(runs_v), name].to_numpy(float)
        mean, ci = mean_ci(vals, self.confidence)
        out = [self._cell(f"{v}/{pid}/{name}/mean", row, col, fmt_pm(mean, ci), mean,
                          f"mean and {self.confidence:g}% t-interval over {len(vals)} runs",
                          runs_v, ci=ci, n=len(vals))]
        if v == base:
            out.append(r"\multicolumn{1}{c}{baseline}")
            return out
        sel = (self.cmp["variant"] == v) & (self.cmp["metric"] == name)
        for a in self.axes:
            sel &= self.cmp[a] == point[a]
        c = self.cmp[sel].iloc[0]
        eq = c.get("equivalent")
        eq = None if eq is None or (isinstance(eq, float) and math.isnan(eq)) else bool(eq)
        mark = r"$^{*}$" if c["significant"] else (r"$^{\approx}$" if eq is True else "")
        if c["test"] == "welch":
            mark += r"$^{\dagger}$"
        out.append(self._cell(
            f"{v}/{pid}/{name}/delta", row, col + 1, fmt_pm(c["pct"], c["pct_err"]) + mark, float(c["pct"]),
            f"difference in % of the {base} mean, {self.confidence:g}% ministat error, "
            f"{c['test']} t-test, Holm-adjusted p={c['p_holm']:.3g}",
            runs_v, self._runs_of(base, point), pct_err=float(c["pct_err"]),
            p=float(c["p"]), p_holm=float(c["p_holm"]), significant=bool(c["significant"]), equivalent=eq))
        return out

    def _latex_merged(self) -> str:
        st = self.study
        head = [_latex_escape(a) for a in self.axes] + ["metric", "variant", "mean $\\pm$ CI",
                                                         r"$\Delta$\,\% $\pm$ err"]
        lines = [rf"\begin{{tabular}}{{{'l' * (len(self.axes) + 2)}rr}}", r"\toprule",
                 " & ".join(head) + r" \\", r"\midrule"]
        points = config.points(st, self.testbed)
        row = 0
        for pi, point in enumerate(points):
            (m,) = config.metrics_for(st, point)
            unit = f" [{_latex_escape(m['unit'])}]" if m.get("unit") else ""
            arrow = r"$\uparrow$" if m["better"] == "higher" else r"$\downarrow$"
            first = True
            for v in st["variants"]:
                if not self._runs_of(v, point):
                    continue
                cells = [(_latex_escape(str(point[a])) if first else "") for a in self.axes]
                cells.append(f"{_latex_escape(m.get('label', m['name']))}{unit} {arrow}" if first else "")
                cells.append(_latex_escape(v))
                cells += self._value_cells(v, point, m["name"], row, len(cells))
                lines.append(" & ".join(cells) + r" \\")
                first = False
                row += 1
            if pi < len(points) - 1:
                lines.append(r"\addlinespace")
        lines += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(lines) + "\n"

    def caption(self) -> str:
        n_cmp = len(self.cmp)
        fam = (f"Holm--Bonferroni over the {n_cmp} comparisons of this table; "
               rf"$^{{*}}$: significant at {self.confidence:g}\,\%")
        if self.margin_pct:
            fam += rf"; $^{{\approx}}$: equivalent within $\pm${self.margin_pct:g}\,\% (TOST)"
        if (self.cmp["test"] == "welch").any():
            fam += r"; $^{\dagger}$: Welch's test (variances differ)"
        cmd = f"snakemake -c2 paper/generated/{self.study['study']}/{self.testbed}-table.tex"
        return (rf"{_latex_escape(self.study['title'])}, {self.testbed} testbed. "
                rf"$\Delta$\,\%: difference from the baseline variant in \% of its mean, with ministat's error. "
                rf"{fam}. Regenerate: \texttt{{{_latex_escape(cmd)}}}; raw data "
                rf"\texttt{{sha256:{self.hash[:16]}}}.")

    def write(self, extra_macros: dict[str, str] | None = None) -> dict:
        """Write <testbed>-table.tex, <testbed>-cells.json and <testbed>-macros.tex."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        body = self.latex()
        label = f"tab:{self.table_id}"
        tex = (r"\begin{table}[tbp]" "\n" r"\centering\small" "\n" r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%" "\n"
               + body + "}\n" + rf"\caption{{{self.caption()}}}" + "\n" + rf"\label{{{label}}}" + "\n"
               + r"\end{table}" + "\n")
        macros = {**self.macros, **(extra_macros or {})}
        macros["datahash"] = self.hash[:16]
        macros["nruns"] = str(len(self.runs))
        sidecar = {"table": self.table_id, "study": self.study["study"], "testbed": self.testbed,
                   "label": label, "data_hash": self.hash, "confidence": self.confidence,
                   "margin_pct": self.margin_pct, "family_size": len(self.cmp),
                   "command": f"snakemake -c2 paper/generated/{self.study['study']}/{self.testbed}-table.tex",
                   "cells": self.cells}
        atomic_write(self.out_dir / f"{self.testbed}-table.tex", tex)
        atomic_write(self.out_dir / f"{self.testbed}-cells.json", json.dumps(sidecar, indent=1, sort_keys=True, default=_json_default) + "\n")
        write_macros(self.out_dir / f"{self.testbed}-macros.tex", self.table_id, macros)
        return sidecar


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, (np.bool_,)):
        return bool(o)
    raise TypeError(type(o))


def write_macros(path: Path, prefix: str, macros: dict[str, str]) -> None:
    """Numbers for the text: `\\sv{s0-sim/ppy/vms-4/throughput/delta}` in the paper."""
    lines = [f"% generated by the {prefix} notebook; do not edit"]
    for k, v in sorted(macros.items()):
        lines.append(rf"\expandafter\def\csname sv@{prefix}/{k}\endcsname{{{v}}}")
    atomic_write(Path(path), "\n".join(lines) + "\n")
