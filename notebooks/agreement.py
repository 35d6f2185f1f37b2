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

import numpy as np

from schedlab import config
from schedlab.report import agreement
from schedlab.report.notebook import repo_root
from schedlab.report.table_model import Table
from schedlab.report.tables import count_clauses, count_word, fmt_exact, fmt_value_bracket, write_macros, write_sidecar
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


def num(x, lo=math.nan, hi=math.nan, ratio=False, stacked=True):
    """x and below it [lo, hi]: a difference in % (or a ratio) and its interval, if it has one,
    both to the precision the interval allows."""
    if missing(x):
        return "--"
    if ratio:  # a ratio of two published values: three significant digits ("1400", "0.0903")
        return np.format_float_positional(float(x), precision=3, unique=False, fractional=False, trim="-")
    return fmt_value_bracket(x, lo, hi, stacked=stacked)  # NaN ends: no interval; infinite: unbounded


# one row per difference and testbed (a testbed's row only where it has the difference), blocks
# per study, the study and metric named once: at the body's size within the line
RAG = r">{\raggedright\arraybackslash}"
# published figures are hardware magnitudes: an emulated testbed's are not set beside them (its
# verdicts rest on directions); the simulator at the published scale and real hosts are
pub_tbs = [tb for tb in tbs if tb not in agreement.EMULATED]
multi = len(pub_tbs) > 1


# one line a row (the table's 40-odd rows fit a page): the verdicts in short words, which the
# caption defines
SHORT = {
    agreement.INSIDE: "inside",
    "same direction": "same sign",
    "opposite": "opposite",
    agreement.NO_DIFFERENCE: "none detected",
}
columns = [("study", "l"), ("metric", RAG + "p{2.1cm}"), ("variant", "l"), ("point", "l"), ("published", "r")]
columns += [("testbed", "l")] if multi else []
columns += [(r"$\Delta$\,\% [interval]", "l"), ("verdict", "l")]
rows, cells, prev = [], {}, (None, None)
for _, r in df.iterrows():
    ratio = "/" in r["kind"]
    for tb in pub_tbs:
        if tb != pub_tbs[0] and missing(r.get(tb)):
            continue
        if prev[0] is not None and r["study"] != prev[0]:
            rows.append(None)
        row = [
            r["study"].upper() if r["study"] != prev[0] else "",
            metric_name(r["study"], r["metric"]).replace("/", r"/\allowbreak{}")
            if (r["study"], r["metric"]) != prev
            else "",
            esc(r["variant"]),
            esc(r["kind"]) if ratio else esc(r["point"]),
            num(r["published"], ratio=ratio),
        ]
        row += [esc(tb)] if multi else []
        verdict = str(r.get(f"{tb}_verdict", "--"))
        row += [
            num(r.get(tb), r.get(f"{tb}_low"), r.get(f"{tb}_high"), ratio, stacked=False),
            esc(SHORT.get(verdict, verdict)),
        ]
        prev = (r["study"], r["metric"])
        runs = r.get(f"{tb}_runs")
        cells[f"{r['study']}/{r['variant']}/{r['point']}/{r['metric']}/{tb}"] = {
            "row": sum(x is not None for x in rows),
            "col": len(row) - 2,
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
    r"Published differences (\%, or ratios where only one variant was quoted, as point / first point) "
    r"beside ours, each variant against its study's baseline ("
    + esc(
        ", ".join(
            f"{st.upper()}: {base}"
            for st, base in dict.fromkeys(
                (r["study"], r["kind"][3:]) for _, r in df.iterrows() if r["kind"].startswith("vs ")
            )
        )
    )
    + r"), with our interval at the row's Holm-adjusted level (the study table's)"
    + (r"; a testbed's row only where it measured the difference" if multi else "")
    + r". ``inside'': the "
    r"published value lies inside it, so our runs do not contradict it (agreement would take an "
    r"equivalence test); ``same sign'': outside it, significant, in the same direction; ``opposite'': "
    r"outside, significant, in the other direction; ``none detected'': outside it, and the interval holds "
    r"0 (no detectable difference). Regenerate: \texttt{snakemake -c2 paper/generated/agreement/table.tex}."
)
(root / out_dir).mkdir(parents=True, exist_ok=True)
side = write_sidecar(root / out_dir / "cells.json", {"table": "agreement", "cells": cells})
Table.from_rows(columns, rows, None, caption, "tab:agreement", preamble=r"\setlength{\tabcolsep}{3pt}").write(
    root / out_dir / "table.tex", sidecar=side, title="Agreement with the published figures"
)
macros = {"rows": str(len(df))}
for tb in pub_tbs:
    v = df.get(f"{tb}_verdict")
    if v is not None:
        macros[f"{tb}/inside"] = str(int((v == agreement.INSIDE).sum()))
        macros[f"{tb}/same"] = str(int((v == "same direction").sum()))
        macros[f"{tb}/opposite"] = str(int((v == "opposite").sum()))
        macros[f"{tb}/nodiff"] = str(int((v == agreement.NO_DIFFERENCE).sum()))
        macros[f"{tb}/compared"] = str(int(v.isin(agreement.VERDICTS).sum()))
        # the counts as a clause list for the text, without the verdicts nothing fell under
        macros[f"{tb}/summary"] = (
            count_clauses(
                [
                    ((v == agreement.INSIDE).sum(), "{is_} inside our interval"),
                    ((v == "same direction").sum(), "{is_} outside our interval in the same direction"),
                    ((v == "opposite").sum(), "{is_} outside our interval in the opposite direction"),
                    ((v == agreement.NO_DIFFERENCE).sum(), "{is_} outside an interval of ours that holds 0"),
                ],
                total=int(v.isin(agreement.VERDICTS).sum()),
            )
            or "none can be compared yet"
        )
        n_cmp = int(v.isin(agreement.VERDICTS).sum())
        macros[f"{tb}/sentence"] = (
            f"Of the {count_word(n_cmp)} differences the {tb} testbed measured, {macros[f'{tb}/summary']}"
            if n_cmp
            else f"The {tb} testbed measured none of them"
        )
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
others = sorted(set(xdf["testbed"])) if len(xdf) else []
one_other = len(others) == 1  # one other testbed: named in the header, not in a column
xcolumns = [
    ("study", "l"),
    ("metric", RAG + "p{2.6cm}"),
    ("variant, point", "l"),
    (r"sim $\Delta$\,\% [interval]", "l"),
]
xcolumns += [] if one_other else [("testbed", "l")]
xcolumns += [
    ((esc(others[0]) + " " if one_other else "") + r"$\Delta$\,\% [interval]", "l"),
    ("verdict", RAG + "p{2.3cm}"),
]
prev = (None, None)
for _, r in xdf.iterrows():
    if prev[0] is not None and r["study"] != prev[0]:
        xrows.append(None)
    row = [
        r["study"].upper() if r["study"] != prev[0] else "",
        metric_name(r["study"], r["metric"]) if (r["study"], r["metric"]) != prev else "",
        f"{esc(r['variant'])}, {esc(r['point'])}",
        # an exact difference (the model gives the same value in every run) as the study table shows it
        fmt_exact(r["base_value"], 4) + "$^{=}$"
        if r.get("base_exact") and not missing(r["base_value"])
        else num(r["base_value"], r["base_low"], r["base_high"], stacked=False),
    ]
    row += [] if one_other else [esc(r["testbed"])]
    row += [num(r["value"], r["low"], r["high"], stacked=False), esc(r["verdict"])]
    prev = (r["study"], r["metric"])
    xcells[f"{r['study']}/{r['testbed']}/{r['variant']}/{r['point']}/{r['metric']}"] = {
        "row": sum(x is not None for x in xrows),
        "col": len(row) - 2,
        "text": row[-2],
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
    r"testbed's table"
    + (r"; $^{=}$: exact, the model's runs do not vary" if len(xdf) and xdf["base_exact"].any() else "")
    + r"). Regenerate: \texttt{snakemake -c2 paper/generated/agreement/testbeds.tex}."
)
xside = write_sidecar(root / out_dir / "testbeds-cells.json", {"table": "agreement-testbeds", "cells": xcells})
Table.from_rows(
    xcolumns, xrows, None, xcaption, "tab:agreement-testbeds", preamble=r"\setlength{\tabcolsep}{4pt}"
).write(root / out_dir / "testbeds.tex", sidecar=xside, title="Agreement between testbeds")
xmacros["rows"] = str(len(xdf))
xmacros["rows/words"] = count_word(len(xdf))  # "Of these eight comparisons"
for v in agreement.CROSS_VERDICTS:
    xmacros[v.replace(" ", "-")] = str(int((xdf["verdict"] == v).sum())) if len(xdf) else "0"
for (s, tb), g in xdf.groupby(["study", "testbed"]) if len(xdf) else []:
    for v in agreement.CROSS_VERDICTS:
        xmacros[f"{s}/{tb}/{v.replace(' ', '-')}"] = str(int((g["verdict"] == v).sum()))
    xmacros[f"{s}/{tb}/rows"] = str(len(g))
# the counts as clauses for the text, without the verdicts nothing fell under
counts = dict(xdf["verdict"].value_counts()) if len(xdf) else {}
xmacros["summary"] = (
    count_clauses(
        [
            (counts.get("same direction", 0), "{is_} significant on both testbeds in the same direction"),
            (counts.get("one testbed only", 0), "{is_} significant on one testbed only"),
            (counts.get("neither significant", 0), "{is_} significant on neither"),
            (counts.get("opposite", 0), "{is_} significant in opposite directions"),
            (counts.get("untestable", 0), "{is_} untestable (too few boots a side on the other testbed)"),
        ],
        total=len(xdf),
    )
    or "none can be compared yet"
)
write_macros(root / out_dir / "testbeds-macros.tex", "agreement-testbeds", xmacros)
xmacros
