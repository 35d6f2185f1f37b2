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
# of the baseline mean, with its interval from the study table: at the row's
# Holm-adjusted level). Reads the study tables' sidecars; writes
# `paper/generated/agreement/`.

# %% tags=["parameters"]
testbeds = "sim"
pairs = ""  # reported (study, testbed) results, "STUDY:TESTBED,..."; empty: every study on every testbed
studies_dir = "config/studies"
paper_dir = "paper"
out_dir = "paper/generated/agreement"

# %%
import math

from schedlab import config
from schedlab.report import agreement
from schedlab.report.notebook import repo_root
from schedlab.report.table_model import Table
from schedlab.report.tables import fmt_bracket, fmt_signed, write_macros, write_sidecar
from schedlab.report.tables import latex_escape as esc

root = repo_root()
tbs = testbeds.split(",")
studies = {p.stem: config.load_study(p) for p in sorted((root / studies_dir).glob("*.yaml"))}
df = agreement.build(studies, tbs, root / paper_dir)
df

# %% [markdown]
# The table for the paper, and one macro per testbed and verdict. A published
# value inside our interval is not contradicted by it, which is not agreement:
# that would take an equivalence test.


# %%
def metric_name(study, metric):
    """A metric as the tables name it: its label from the study file (no parenthesis), not its identifier."""
    m = next(x for x in studies[study]["metrics"] if x["name"] == metric)
    return esc(m.get("label", metric).split(" (")[0])


def missing(x):
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x, lo=None, hi=None, ratio=False):
    """x [lo, hi]: a difference in % (or a ratio) and its interval, if it has one."""
    if missing(x):
        return "--"
    s = f"{x:.2f}" if ratio else fmt_signed(x)
    if not (missing(lo) or missing(hi)):
        s += " " + fmt_bracket(lo, hi)
    return s


columns = [("study", "l"), ("metric", "l"), ("variant", "l"), ("point", "l"), ("published", "l")]
groups = [("", 1)] * len(columns)
for tb in tbs:
    columns += [(r"$\Delta$\,\% [interval]", "l"), ("verdict", "l")]
    groups.append((esc(tb), 2))
rows, cells = [], {}
for i, r in df.iterrows():
    ratio = "/" in r["kind"]
    row = [
        r["study"].upper(),
        metric_name(r["study"], r["metric"]),
        esc(r["variant"]) + ("" if ratio else f" vs {esc(r['kind'][3:])}"),
        esc(r["point"]) + (f" ({esc(r['kind'])})" if ratio else ""),
        num(r["published"], ratio=ratio),
    ]
    for tb in tbs:
        row += [num(r.get(tb), r.get(f"{tb}_low"), r.get(f"{tb}_high"), ratio), esc(str(r.get(f"{tb}_verdict", "--")))]
        runs = r.get(f"{tb}_runs")
        cells[f"{r['study']}/{r['variant']}/{r['point']}/{r['metric']}/{tb}"] = {
            "row": int(i),
            "col": 5 + 2 * tbs.index(tb),
            "text": row[-2],
            "value": None if missing(r.get(tb)) else float(r[tb]),
            "low": r.get(f"{tb}_low"),
            "high": r.get(f"{tb}_high"),
            "stat": (
                "ratio of means"
                if ratio
                else "difference in % of the baseline mean, interval at the row's Holm-adjusted level"
            ),
            "runs": runs if isinstance(runs, list) else [],
        }
    rows.append(row)
caption = (
    r"Published differences (\%, or ratios where only one variant was quoted) beside ours, with our "
    r"interval at the row's Holm-adjusted level (the study table's). ``inside the interval'': the "
    r"published value lies inside it, so our runs do not contradict it (agreement would take an "
    r"equivalence test); ``same direction'': outside it, significant, with the same sign; ``opposite'': "
    r"outside, significant, with the other sign; ``outside, no detectable difference'': outside it, and "
    r"the interval holds 0. Regenerate: \texttt{snakemake -c2 paper/generated/agreement/table.tex}."
)
(root / out_dir).mkdir(parents=True, exist_ok=True)
side = write_sidecar(root / out_dir / "cells.json", {"table": "agreement", "cells": cells})
Table.from_rows(columns, rows, groups, caption, "tab:agreement").write(
    root / out_dir / "table.tex", sidecar=side, title="Agreement with the published figures"
)
macros = {"rows": str(len(df))}
for tb in tbs:
    v = df.get(f"{tb}_verdict")
    if v is not None:
        macros[f"{tb}/inside"] = str(int((v == agreement.INSIDE).sum()))
        macros[f"{tb}/same"] = str(int((v == "same direction").sum()))
        macros[f"{tb}/opposite"] = str(int((v == "opposite").sum()))
        macros[f"{tb}/nodiff"] = str(int((v == agreement.NO_DIFFERENCE).sum()))
        macros[f"{tb}/compared"] = str(int(v.isin(agreement.VERDICTS).sum()))
write_macros(root / out_dir / "macros.tex", "agreement", macros)
macros

# %% [markdown]
# Between testbeds: every comparison the simulator and another testbed both
# make (same study, metric, variant and point), side by side. "same
# direction": significant on both, same sign; "one testbed only": only one of
# them is significant; "neither significant"; "opposite": significant on both,
# opposite signs. Significance is each table's, Holm-adjusted.

# %%
pair_list = [tuple(p.split(":", 1)) for p in pairs.split(",") if p] or [
    (s, tb) for s, st in studies.items() for tb in tbs if tb in st["testbeds"]
]
xdf = agreement.cross(studies, pair_list, root / paper_dir)
xcells, xmacros, xrows = {}, {}, []
xcolumns = [
    ("study", "l"),
    ("metric", "l"),
    ("variant", "l"),
    ("point", "l"),
    (r"sim $\Delta$\,\% [interval]", "l"),
    ("testbed", "l"),
    (r"$\Delta$\,\% [interval]", "l"),
    ("verdict", "l"),
]
for i, r in xdf.iterrows():
    row = [
        r["study"].upper(),
        metric_name(r["study"], r["metric"]),
        esc(r["variant"]),
        esc(r["point"]),
        num(r["base_value"], r["base_low"], r["base_high"]),
        esc(r["testbed"]),
        num(r["value"], r["low"], r["high"]),
        esc(r["verdict"]),
    ]
    xcells[f"{r['study']}/{r['testbed']}/{r['variant']}/{r['point']}/{r['metric']}"] = {
        "row": int(i),
        "col": 6,
        "text": row[6],
        "value": None if missing(r["value"]) else float(r["value"]),
        "low": r["low"],
        "high": r["high"],
        "stat": "difference in % of the baseline mean on this testbed, beside the simulator's",
        "runs": list(r["runs"]),
    }
    xrows.append(row)
xcaption = (
    r"The simulator's differences beside the other testbeds' at the points both ran (\%, with each "
    r"table's interval at the row's Holm-adjusted level; significance Holm-adjusted within each "
    r"testbed's table). Regenerate: \texttt{snakemake -c2 paper/generated/agreement/testbeds.tex}."
)
xside = write_sidecar(root / out_dir / "testbeds-cells.json", {"table": "agreement-testbeds", "cells": xcells})
Table.from_rows(xcolumns, xrows, None, xcaption, "tab:agreement-testbeds").write(
    root / out_dir / "testbeds.tex", sidecar=xside, title="Agreement between testbeds"
)
xmacros["rows"] = str(len(xdf))
for v in agreement.CROSS_VERDICTS:
    xmacros[v.replace(" ", "-")] = str(int((xdf["verdict"] == v).sum())) if len(xdf) else "0"
for (s, tb), g in xdf.groupby(["study", "testbed"]) if len(xdf) else []:
    for v in agreement.CROSS_VERDICTS:
        xmacros[f"{s}/{tb}/{v.replace(' ', '-')}"] = str(int((g["verdict"] == v).sum()))
    xmacros[f"{s}/{tb}/rows"] = str(len(g))
write_macros(root / out_dir / "testbeds-macros.tex", "agreement-testbeds", xmacros)
xmacros
