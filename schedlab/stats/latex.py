"""LaTeX rendering of comparison tables: a booktabs + siunitx tabular (S columns
for numbers, "mean \\pm CI" and "Delta % \\pm err" parsed by siunitx as value and
uncertainty) and, alongside, a JSON-able dict with the numbers of every cell
(the notebooks write it as a sidecar).

Marks (defined with \\providecommand in the preamble this module returns, so the
paper may redefine them): \\sigmark after a significant difference, \\eqmark
after an equivalent one (TOST).  The paper needs \\usepackage{booktabs,siunitx}
and \\sisetup{separate-uncertainty=true}."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

PREAMBLE = (r"\providecommand{\sigmark}{\textsuperscript{*}}" "\n"
            r"\providecommand{\eqmark}{\textsuperscript{$\approx$}}" "\n")

_ESC = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}


def latex_escape(s: Any) -> str:
    """Text-mode escaping of every LaTeX special character."""
    return "".join(_ESC.get(ch, ch) for ch in str(s))


@dataclass(frozen=True)
class ColumnSpec:
    """One column.  kind: "mean_ci" (cell: (mean, ci) or {"mean", "ci"}),
    "delta" (cell: a compare_table row / dict with pct, pct_err, significant,
    equivalent; None or "baseline" prints "baseline"), "number" (a float) or
    "text" (a string, escaped).  decimals=None: from the error, 2 significant
    digits of it (the value gets as many decimals)."""
    key: str
    header: str
    kind: str = "number"
    decimals: int | None = None
    unit: str | None = None
    raw_header: bool = False     # header is LaTeX already (not escaped)

    def __post_init__(self):
        if self.kind not in ("mean_ci", "delta", "number", "text"):
            raise ValueError(f"ColumnSpec {self.key!r}: unknown kind {self.kind!r}")


def _decimals(err: float, sig: int = 2) -> int:
    if err is None or not math.isfinite(err) or err <= 0:
        return 2
    return max(0, sig - 1 - int(math.floor(math.log10(abs(err)))))


def _num(x: float, d: int) -> str:
    return f"{x:.{d}f}"


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def _get(cell, name, default=None):
    if isinstance(cell, dict):
        return cell.get(name, default)
    return getattr(cell, name, cell[name] if hasattr(cell, "__getitem__") and name in cell else default)


def _ndig(x: float) -> int:
    return len(str(int(abs(x)))) if math.isfinite(x) else 1


def _cell(spec: ColumnSpec, cell) -> tuple[str, dict | None, tuple[int, int, int]]:
    """(LaTeX, JSON numbers, (integer digits, decimals, error's integer digits or 0))."""
    if cell is None and spec.kind != "delta":
        return "{--}", None, (1, 0, 0)
    if spec.kind == "text":
        return "{" + latex_escape(cell) + "}", {"text": str(cell)}, (1, 0, 0)
    if spec.kind == "number":
        x = float(cell)
        if not math.isfinite(x):
            return "{--}", {"value": None}, (1, 0, 0)
        d = 2 if spec.decimals is None else spec.decimals
        return _num(x, d), {"value": x}, (_ndig(x), d, 0)
    if spec.kind == "mean_ci":
        mean, ci = (cell if isinstance(cell, (tuple, list)) else (_get(cell, "mean"), _get(cell, "ci")))
        mean, ci = float(mean), (float(ci) if ci is not None else float("nan"))
        d = _decimals(ci) if spec.decimals is None else spec.decimals
        js = {"mean": mean, "ci": ci if math.isfinite(ci) else None}
        if not math.isfinite(mean):
            return "{--}", js, (1, 0, 0)
        if not math.isfinite(ci) or ci <= 0:
            return _num(mean, d), js, (_ndig(mean), d, 0)
        return f"{_num(mean, d)} \\pm {_num(ci, d)}", js, (_ndig(mean), d, _ndig(ci))
    # delta
    if cell is None or (isinstance(cell, str) and cell == "baseline"):
        return "{baseline}", {"baseline": True}, (1, 0, 0)
    pct, err = float(_get(cell, "pct")), float(_get(cell, "pct_err"))
    sig = bool(_get(cell, "significant", False))
    eq = _get(cell, "equivalent")
    eq = None if eq is None or (isinstance(eq, float) and math.isnan(eq)) else bool(eq)
    js = {"pct": pct, "pct_err": err if math.isfinite(err) else None, "significant": sig, "equivalent": eq}
    for extra in ("p", "p_holm", "test"):
        v = _get(cell, extra)
        if v is not None:
            js[extra] = v if isinstance(v, str) else float(v)
    if not math.isfinite(pct):
        return "{--}", js, (1, 0, 0)
    d = _decimals(err) if spec.decimals is None else spec.decimals
    mark = r" {\sigmark}" if sig else (r" {\eqmark}" if eq else "")
    body = f"{_num(pct, d)} \\pm {_num(err, d)}" if math.isfinite(err) and err > 0 else _num(pct, d)
    return body + mark, js, (_ndig(pct), d, _ndig(err) if math.isfinite(err) and err > 0 else 0)


def render_tabular(rows: Sequence[tuple[Sequence[Any], dict]], columns: Sequence[ColumnSpec],
                   label_headers: Sequence[str] = ("",)) -> tuple[str, dict]:
    """LaTeX tabular (\\begin{tabular} ... \\end{tabular}, booktabs rules) and the
    sidecar dict {"columns": [...], "cells": {"<row>/<col key>": {...}}}.

    rows: (labels, cells) pairs; labels are the row's leading text columns (one
    per `label_headers` entry, escaped), cells map ColumnSpec.key to the value."""
    nlab = len(label_headers)
    rendered, fmt = [], {c.key: [1, 0, 0] for c in columns}
    sidecar: dict = {"columns": [{"key": c.key, "header": c.header, "kind": c.kind, "unit": c.unit}
                                 for c in columns], "label_headers": list(label_headers), "cells": {}}
    for r, (labels, cells) in enumerate(rows):
        labels = list(labels)
        if len(labels) != nlab:
            raise ValueError(f"row {r}: {len(labels)} labels for {nlab} label columns")
        out = [latex_escape(x) for x in labels]
        for c in columns:
            tex, js, (ip, dp, err) = _cell(c, cells.get(c.key))
            f = fmt[c.key]
            f[0], f[1], f[2] = max(f[0], ip), max(f[1], dp), max(f[2], err)
            out.append(tex)
            if js is not None:
                sidecar["cells"][f"{r}/{c.key}"] = {"row": r, "labels": [str(x) for x in labels],
                                                     "column": c.key, "text": tex, **js}
        rendered.append(" & ".join(out) + r" \\")
    specs = ["l"] * nlab
    for c in columns:
        if c.kind == "text":
            specs.append("l")
            continue
        ip, dp, err = fmt[c.key]
        sign = "-" if c.kind == "delta" else ""
        tf = f"{sign}{ip}.{dp}" + (f" \\pm {err}.{dp}" if err else "")
        specs.append(f"S[table-format={tf}]")
    head = [latex_escape(h) for h in label_headers]
    for c in columns:
        unit = f" [{latex_escape(c.unit)}]" if c.unit else ""
        head.append("{" + (c.header if c.raw_header else latex_escape(c.header)) + unit + "}")
    lines = [r"\begin{tabular}{" + " ".join(specs) + "}", r"\toprule", " & ".join(head) + r" \\",
             r"\midrule", *rendered, r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n", sidecar


def comparison_latex(df, table, metric: str, baseline: str, by=(), variant_col: str = "variant",
                     value_col: str = "value", confidence: float = 95.0, unit: str | None = None,
                     label_headers: Sequence[str] | None = None) -> tuple[str, dict]:
    """Convenience: one row per (point, variant) with the variant's mean +- t-CI
    (from the long runs table `df`) and its Delta % +- err against `baseline`
    (from `table`, a compare_table() result); the baseline row says "baseline"."""
    import numpy as np
    from scipy import stats as st
    by = [by] if isinstance(by, str) else list(by)
    col = metric if metric in df.columns else value_col
    sub = df if metric in df.columns else df[df["metric"] == metric]
    cmp = {tuple(r[b] for b in by) + (r["variant"],): r for r in table.to_dict("records")}
    rows = []
    groups = sub.groupby(by, sort=True) if by else [((), sub)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        variants = [baseline] + [v for v in dict.fromkeys(g[variant_col]) if v != baseline]
        for i, v in enumerate(variants):
            vals = g.loc[g[variant_col] == v, col].to_numpy(float)
            if len(vals) == 0:
                continue
            mean = float(np.mean(vals))
            ci = (float(st.t.ppf(0.5 + confidence / 200, len(vals) - 1) * np.std(vals, ddof=1)
                        / math.sqrt(len(vals))) if len(vals) > 1 else float("nan"))
            delta = None if v == baseline else cmp.get(key + (v,))
            labels = [str(k) if i == 0 else "" for k in key] + [str(v)]
            rows.append((labels, {"mean": (mean, ci), "delta": delta}))
    cols = [ColumnSpec("mean", rf"mean $\pm$ {confidence:g}\,\% CI", "mean_ci", unit=unit, raw_header=True),
            ColumnSpec("delta", r"$\Delta$\,\% $\pm$ err", "delta", raw_header=True)]
    return render_tabular(rows, cols, label_headers or [*by, "variant"])
