# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Agreement: testbeds and published figures
# For every number the original write-ups quote for a variant and its
# baseline, the published difference beside each testbed's difference (in %
# of the baseline mean, with ministat's error). Reads the study tables'
# sidecars; writes `paper/generated/agreement/`.

# %% tags=["parameters"]
testbeds = "sim"
pairs = ""          # reported (study, testbed) results, "s0:sim,s1:qemu"; empty: every study on every testbed
studies_dir = "config/studies"
paper_dir = "paper"
out_dir = "paper/generated/agreement"

# %%
import json
import math

from schedlab import config
from schedlab.report import agreement
from schedlab.report.notebook import repo_root
from schedlab.report.tables import _atomic_write, _latex_escape as esc, write_macros

root = repo_root()
tbs = testbeds.split(",")
studies = {p.stem: config.load_study(p) for p in sorted((root / studies_dir).glob("*.yaml"))}
df = agreement.build(studies, tbs, root / paper_dir)
df

# %% [markdown]
# The table for the paper, and one macro per testbed counting agreements.

# %%
def num(x, err=None, ratio=False):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "--"
    s = f"{x:.2f}" if ratio else f"{x:+.1f}"
    if err is not None and not (isinstance(err, float) and math.isnan(err)):
        s += f"\\,$\\pm$\\,{err:.1f}"
    return s.replace("-", "$-$")  # a real minus sign

cols = "lllll" + "ll" * len(tbs)
head = ["study", "metric", "variant", "point", "published"] + [h for tb in tbs for h in (tb, "")]
lines = [f"\\begin{{tabular}}{{{cols}}}", "\\toprule", " & ".join(head) + " \\\\", "\\midrule"]
cells = {}
for i, r in df.iterrows():
    ratio = "/" in r["kind"]
    row = [r["study"].upper(), esc(r["metric"]), esc(r["variant"]) + ("" if ratio else f" vs {esc(r['kind'][3:])}"),
           esc(r["point"]) + (f" ({esc(r['kind'])})" if ratio else ""), num(r["published"], ratio=ratio)]
    for tb in tbs:
        row += [num(r.get(tb), r.get(f"{tb}_err"), ratio), esc(str(r.get(f"{tb}_verdict", "--")))]
        key = f"{r['study']}/{r['variant']}/{r['point']}/{r['metric']}/{tb}"
        runs = r.get(f"{tb}_runs")
        cells[key] = {"row": int(i), "col": 5 + 2 * tbs.index(tb), "text": row[-2],
                      "value": None if r.get(tb) is None or (isinstance(r.get(tb), float) and math.isnan(r.get(tb))) else float(r[tb]),
                      "stat": "difference in % of the baseline mean" if not ratio else "ratio of means",
                      "runs": runs if isinstance(runs, list) else []}
    lines.append(" & ".join(row) + " \\\\")
lines += ["\\bottomrule", "\\end{tabular}"]
tex = ("\\begin{table}[tbp]\\centering\\small\n\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%\n"
       + "\n".join(lines) + "}\n\\caption{Published differences (\\%, or ratios where only one variant was quoted) "
       "beside ours. ``within error'': the published value lies inside our difference $\\pm$ ministat's error; "
       "``same direction'': it does not, but the sign agrees. Regenerate: "
       "\\texttt{snakemake -c2 paper/generated/agreement/table.tex}.}\n\\label{tab:agreement}\n\\end{table}\n")
(root / out_dir).mkdir(parents=True, exist_ok=True)
_atomic_write(root / out_dir / "table.tex", tex)
_atomic_write(root / out_dir / "cells.json", json.dumps({"table": "agreement", "cells": cells}, indent=1) + "\n")
macros = {"rows": str(len(df))}
for tb in tbs:
    v = df.get(f"{tb}_verdict")
    if v is not None:
        macros[f"{tb}/within"] = str(int((v == "within error").sum()))
        macros[f"{tb}/same"] = str(int((v == "same direction").sum()))
        macros[f"{tb}/opposite"] = str(int((v == "opposite").sum()))
write_macros(root / out_dir / "macros.tex", "agreement", macros)
macros

# %% [markdown]
# Agreement between testbeds: every comparison the simulator and another
# testbed both make (same study, metric, variant and point), side by side.
# "agree": both significant in the same direction; "one testbed only": only one
# of them is significant; "neither significant"; "disagree": both significant,
# opposite directions.

# %%
pair_list = [tuple(p.split(":", 1)) for p in pairs.split(",") if p] or [
    (s, tb) for s, st in studies.items() for tb in tbs if tb in st["testbeds"]]
xdf = agreement.cross(studies, pair_list, root / paper_dir)
xcells, xmacros = {}, {}
xlines = ["\\begin{tabular}{llllllll}", "\\toprule",
          "study & metric & variant & point & sim $\\Delta$\\,\\% & testbed & $\\Delta$\\,\\% & verdict \\\\",
          "\\midrule"]
for i, r in xdf.iterrows():
    row = [r["study"].upper(), esc(r["metric"]), esc(r["variant"]), esc(r["point"]),
           num(r["base_value"], r["base_err"]), r["testbed"], num(r["value"], r["err"]), r["verdict"]]
    xcells[f"{r['study']}/{r['testbed']}/{r['variant']}/{r['point']}/{r['metric']}"] = {
        "row": int(i), "col": 6, "text": row[6], "value": float(r["value"]),
        "stat": "difference in % of the baseline mean on this testbed, beside the simulator's",
        "runs": list(r["runs"])}
    xlines.append(" & ".join(row) + " \\\\")
xlines += ["\\bottomrule", "\\end{tabular}"]
xtex = ("\\begin{table}[tbp]\\centering\\small\n\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%\n"
        + "\n".join(xlines) + "}\n\\caption{The simulator's differences beside the other testbeds' at the points "
        "both ran (\\%, ministat's error; significance Holm-adjusted within each testbed's table). "
        "Regenerate: \\texttt{snakemake -c2 paper/generated/agreement/testbeds.tex}.}\n"
        "\\label{tab:agreement-testbeds}\n\\end{table}\n")
_atomic_write(root / out_dir / "testbeds.tex", xtex)
_atomic_write(root / out_dir / "testbeds-cells.json",
              json.dumps({"table": "agreement-testbeds", "cells": xcells}, indent=1) + "\n")
xmacros["rows"] = str(len(xdf))
for v in ("agree", "one testbed only", "neither significant", "disagree"):
    xmacros[v.replace(" ", "-")] = str(int((xdf["verdict"] == v).sum())) if len(xdf) else "0"
for (s, tb), g in (xdf.groupby(["study", "testbed"]) if len(xdf) else []):
    for v in ("agree", "one testbed only", "neither significant", "disagree"):
        xmacros[f"{s}/{tb}/{v.replace(' ', '-')}"] = str(int((g["verdict"] == v).sum()))
    xmacros[f"{s}/{tb}/rows"] = str(len(g))
write_macros(root / out_dir / "testbeds-macros.tex", "agreement-testbeds", xmacros)
xmacros
