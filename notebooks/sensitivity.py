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
# # Sensitivity of the sim's conclusions to its uncalibrated workload parameters
# For every conclusion the verdicts draw from the sim (`config/sensitivity.yaml`), its effect
# (variant against reference, in % of the reference mean) at the shipped setting, with each
# swept parameter at its low and its high end (one at a time) and at the joint Latin-hypercube
# points; and whether its outcome (significant direction, or equivalence within the margin)
# holds over the whole range. Reads the sweep's records through `data/runs/sensitivity/STUDY.json`
# (written by the run stage's sweep, `python -m schedlab.sweep run`); never runs the simulator. Writes
# `paper/generated/sensitivity/`: a tornado chart per study, `table.tex`, `cells.json`,
# `macros.tex`.

# %% tags=["parameters"]
config_path = "config/sensitivity.yaml"
studies_dir = "config/studies"
data_dir = "data"
out_dir = "paper/generated/sensitivity"
studies = ""  # comma-separated; empty: every study of the configuration

# %%
import hashlib
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from schedlab.report import sensitivity as sens
from schedlab.report.notebook import repo_root
from schedlab.report.table_model import Table
from schedlab.report.tables import fmt_signed, write_macros, write_sidecar
from schedlab.report.tables import latex_escape as esc

sns.set_theme(style="whitegrid", context="paper")
root = repo_root()
sw = sens.load(root / config_path, root / studies_dir, [s for s in studies.split(",") if s] or None)
names = list(sw.studies)
out = root / out_dir
out.mkdir(parents=True, exist_ok=True)
runs, eff, rob = {}, {}, {}
for s in names:
    runs[s] = sens.read_runs(sw, s, root / data_dir)
    eff[s] = sens.effects(runs[s], sw.studies[s], sw.confidence)
    rob[s] = sens.robustness(eff[s], sw.studies[s])
pd.concat([r.assign(study=s) for s, r in rob.items()])[
    [
        "study",
        "conclusion",
        "claim",
        "shipped_pct",
        "shipped_outcome",
        "oat_min",
        "oat_max",
        "joint_min",
        "joint_max",
        "sign_kept",
        "robust",
        "breaks",
    ]
]

# %% [markdown]
# The simulator binaries behind the records (each record's provenance): one sha256 per study
# means every setting of that study ran on the same build.

# %%
binaries = {s: sorted(set(r["binary_sha256"])) for s, r in runs.items()}
for s, b in binaries.items():
    print(s, len(runs[s]), "runs;", ", ".join(x[:16] for x in b))

# %% [markdown]
# One tornado chart per study: a panel per conclusion, a row per swept parameter (largest
# swing first): the bars run from the shipped effect (black line) to the effect with the
# parameter at its low (blue) and high (orange) end; a cross marks an end whose outcome differs
# from the shipped one. Parameters that leave the effect and outcome exactly as shipped (e.g.
# another benchmark's) share one row. The last row is the joint sweep: its points (grey, a
# cross where the outcome differs) and their range. Equivalence claims: the margin shaded. The
# axis is symmetric-log where effects span more than ±200 %.
#
# Sized for the paper: the figure is as wide as the text (`FIG_WIDTH`, included at
# `\linewidth`, a single panel at its natural size), panels in two columns, the height from the
# number of rows, so the text prints at `FONT` pt (titles `TITLE` pt) without scaling.

# %%
LOW, HIGH, JOINT = sns.color_palette()[0], sns.color_palette()[1], "0.45"
FIG_WIDTH = 6.5  # in: the paper's text width (A4, 2.2 cm margins: 6.53 in)
FONT, TITLE = 7, 8  # pt, as printed
ROW = 0.16  # in per bar row (less, down to ROW_MIN, to keep within HEIGHT)
ROW_MIN = 0.14
PANEL_EXTRA = 0.75  # in per row of panels: its title (two lines), tick labels, axis label
FIG_EXTRA = 0.55  # in: the figure's title and the legend
HEIGHT = 7.3  # in: the most that leaves room for the caption on the page (text height 9.9 in)


def short(path):
    """A parameter's label: its path in the study's sim_workload without `kinds.` (S4's
    benchmarks) and a closing `.mean` (a distribution's mean; its other fields keep theirs)."""
    path = path.removeprefix("kinds.")
    return path.removesuffix(".mean")


def panel_rows(plan, ec, x0, out0):
    """A panel's rows, largest swing first: (label, low row, high row); then one row for the
    parameters that change nothing (label, None, None)."""
    rows, still = [], []
    for p in plan.parameters:
        lo = ec[(ec.param == p.path) & (ec.side == "low")].iloc[0]
        hi = ec[(ec.param == p.path) & (ec.side == "high")].iloc[0]
        ends = [lo, hi]
        if all(r["effect_pct"] == x0 and r["outcome"] == out0 for r in ends):
            still.append(p.path)
            continue
        swing = np.nanmax([abs(r["effect_pct"] - x0) for r in ends] + [0])
        rows.append((swing, p.path, lo, hi))
    rows.sort(key=lambda r: -r[0])
    out = [(short(path), lo, hi) for _, path, lo, hi in rows]
    if still:
        out.append((f"{len(still)} other{'s' if len(still) > 1 else ''}: no change", None, None))
    return out


def decade_label(t, _pos=None):
    """A decade as plain text at the tick labels' size (10, 100, 1k, 10k): a superscript
    exponent would print smaller."""
    a = abs(t)
    text = f"{a / 1000:g}k" if a >= 1000 else f"{a:g}"
    return ("\u2212" if t < 0 else "") + text


def decades(ax, most=6):
    """A symmetric-log axis's ticks: 0 and the decades in view, every other one when more than
    `most` (their labels would collide at this size), labelled by decade_label."""
    lo, hi = ax.get_xlim()
    ks = range(1, int(math.log10(max(abs(lo), abs(hi), 10))) + 1)
    ticks = sorted([-(10.0**k) for k in ks if -(10.0**k) >= lo] + [0.0] + [10.0**k for k in ks if 10.0**k <= hi])
    if len(ticks) > most:
        ticks = [t for t in ticks if t == 0 or round(math.log10(abs(t))) % 2 == 0]
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(decade_label)
    ax.xaxis.set_minor_locator(plt.NullLocator())


def tornado(study):
    plan, e = sw.studies[study], eff[study]
    n = len(plan.conclusions)
    ncols = 1 if n == 1 else 2
    nrows = math.ceil(n / ncols)
    panels = []
    for c in plan.conclusions:
        ec = e[e.conclusion == c.id]
        ship = ec[ec.kind == "shipped"].iloc[0]
        panels.append((c, ec, ship["effect_pct"], ship["outcome"]))
    rows = [panel_rows(plan, ec, x0, out0) for _, ec, x0, out0 in panels]
    # each row of panels as tall as its longest panel (+1: the joint row); the bars equally thick
    tall = [max(len(r) + 1 for r in rows[i * ncols : (i + 1) * ncols]) for i in range(nrows)]
    width = FIG_WIDTH if ncols > 1 else FIG_WIDTH / 2 + 0.4
    row = max(ROW_MIN, min(ROW, (HEIGHT - FIG_EXTRA - PANEL_EXTRA * nrows) / sum(tall)))
    heights = [row * t + PANEL_EXTRA for t in tall]
    fig = plt.figure(figsize=(width, sum(heights) + FIG_EXTRA), layout="constrained")
    # a subfigure per panel: its title centred over the panel, labels included
    sub = fig.subfigures(nrows, ncols, height_ratios=heights, squeeze=False, wspace=0.02, hspace=0.02).flat
    for i, ((c, ec, x0, out0), prow, sf) in enumerate(zip(panels, rows, sub)):
        ax = sf.add_subplot()
        t = tall[i // ncols]
        labels = [r[0] for r in prow] + [f"joint ({int((ec.kind == 'joint').sum())} points)"]
        y = t - 1 - np.arange(len(labels))  # from the top; a shorter panel leaves space below
        for yi, (_, lo, hi) in zip(y, prow):
            for r, col in ((lo, LOW), (hi, HIGH)):
                if r is not None and np.isfinite(r["effect_pct"]):
                    ax.barh(yi, r["effect_pct"] - x0, left=x0, height=0.7, color=col, lw=0)
                    if r["outcome"] != out0:
                        ax.plot(r["effect_pct"], yi, "x", color="k", ms=4, mew=1)
        j = ec[ec.kind == "joint"]
        if len(j):
            ax.plot([j["effect_pct"].min(), j["effect_pct"].max()], [y[-1]] * 2, color=JOINT, lw=1)
            same = j["outcome"] == out0
            ax.plot(j.loc[same, "effect_pct"], [y[-1]] * int(same.sum()), "o", color=JOINT, ms=2.5)
            ax.plot(j.loc[~same, "effect_pct"], [y[-1]] * int((~same).sum()), "x", color="k", ms=4, mew=1)
        ax.axvline(x0, color="k", lw=1)
        ax.axvline(0, color="0.5", lw=0.6, ls="--")
        if c.claim == "equivalent":
            ax.axvspan(-c.margin_pct, c.margin_pct, color="0.85", zorder=0)
        vals = ec["effect_pct"].to_numpy(float)
        vals = vals[np.isfinite(vals)]
        ax.margins(x=0.06)
        if len(vals) and np.abs(vals).max() > 200:
            ax.set_xscale("symlog", linthresh=10)
            decades(ax)
        ax.set_ylim(-0.6, t - 0.4)
        ax.set_yticks(y, labels, fontsize=FONT)
        if prow and prow[-1][1] is None:  # the parameters that change nothing
            ax.get_yticklabels()[len(prow) - 1].set_color("0.4")
        ax.tick_params(axis="x", labelsize=FONT)
        ax.tick_params(axis="both", pad=1.5)
        robust = rob[study].set_index("conclusion").loc[c.id, "robust"]
        sf.suptitle(f"{c.label}\n{'robust' if robust else 'not robust'} (shipped: {out0})", fontsize=TITLE)
        ax.set_xlabel("effect, % of the reference", fontsize=FONT)
        ax.grid(axis="y", visible=False)
    handles = [
        Patch(color=LOW, label="low end"),
        Patch(color=HIGH, label="high end"),
        Line2D([], [], color=JOINT, marker="o", ms=2.5, lw=1, label="joint points, their range"),
        Line2D([], [], color="k", marker="x", lw=0, label="outcome differs from shipped"),
    ]
    if n % ncols:  # the empty slot holds the legend
        lax = fig.subfigs[-1].add_subplot()
        lax.axis("off")
        lax.legend(handles=handles, loc="center", fontsize=FONT, frameon=False)
    else:
        fig.legend(
            handles=handles, loc="outside lower center", ncols=2 if ncols == 1 else 4, fontsize=FONT, frameon=False
        )
    fig.suptitle(f"{study.upper()}: {sw.studies[study].study['title']}", fontsize=TITLE + 1)
    # saved at its size (no tight bounding box): the paper prints it at scale 1
    fig.savefig(out / f"{study}-tornado.pdf", metadata={"CreationDate": None, "ModDate": None})
    fig.savefig(out / f"{study}-tornado.png", dpi=150, metadata={"Software": None})
    return fig


for s in names:
    tornado(s)
    plt.show()

# %% [markdown]
# The table: per conclusion the shipped effect and outcome, the effect's range over the
# one-at-a-time settings (the shipped one included) and over the joint points, whether the
# outcome holds everywhere, and what changes it. With the sidecar (every cell; the runs behind
# the shipped cells, the manifest behind the others; each setting's effect and outcome) and
# the macros for the text.


# %%
def pct(x):
    return fmt_signed(x, 0 if abs(x) >= 100 else 1) if np.isfinite(x) else "--"


def span(a, b):
    return f"{pct(a)} to {pct(b)}" if np.isfinite(a) and np.isfinite(b) else "--"


def claim_text(c):
    return f"within $\\pm${c.margin_pct:g}\\,\\%" if c.claim == "equivalent" else c.claim


# outcomes as words for the text's sentences (\sv{sensitivity/STUDY/ID/outcome-text}, .../survives)
OUTCOME_TEXT = {
    "higher": "significantly higher",
    "lower": "significantly lower",
    "n.s.": "no detectable difference",
    "equivalent": "equivalent within the margin",
    "beyond": "beyond the margin",
    "unresolved": "unresolved",
    "no result": "without a result",
}


def words(items, conj="and"):
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {conj} " + items[-1]


def path_tex(path):
    """A parameter's dotted path in the text's type, free to break after a dot (no overfull line)."""
    return r"\texttt{" + esc(path).replace(".", r".\allowbreak ") + "}"


def survives(plan, c, r, e):
    """The conclusion over the whole range, as a phrase the text can follow its subject with:
    whether the shipped outcome holds at every setting; if not, what it becomes, with which
    parameter ends (named when at most three parameters; counted otherwise) and how many joint
    points change it, and whether the effect keeps its sign."""
    if r["robust"]:
        return "holds at every setting of the sweep"
    ec = e[(e.conclusion == c.id) & (e.kind != "shipped") & (e.outcome != r["shipped_outcome"])]
    to = words((OUTCOME_TEXT.get(o, esc(o)) for o in sorted(set(ec["outcome"]))), "or")
    ends = {}
    for _, x in ec[ec.kind == "oat"].iterrows():
        ends.setdefault(x["param"], set()).add(x["side"])
    params = [p.path for p in plan.parameters if p.path in ends]
    n_par = len(plan.parameters)
    if not params:
        who = ""
    elif len(params) <= 3:
        at = {p: "either end" if len(ends[p]) == 2 else f"its {next(iter(ends[p]))} end" for p in params}
        who = words(f"{path_tex(p)} at {at[p]}" for p in params)
    elif len(params) == n_par:
        who = f"each of the {n_par} swept parameters alone at one end or both"
    else:
        who = f"{len(params)} of the {n_par} swept parameters, each alone at one end or both"
    joint = f"{r['joint_broken']} of the {r['joint_n']} joint points" if r["joint_broken"] else ""
    if not to:
        return "does not hold: the shipped setting gives no result"
    if who and joint:
        by = f"with {who}, and at {joint}"
    elif who:
        by = f"with {who}"
    else:
        by = f"at {joint} (no parameter alone changes it)"
    sign = "its effect keeping its sign throughout" if r["sign_kept"] else "its effect changing sign within the ranges"
    return f"does not hold over the whole range: it becomes {to} {by}, {sign}"


rag = r">{\raggedright\arraybackslash}"
# at the body's size: the claim and the sign are in the conclusion's label and the ranges
columns = [
    ("conclusion", rag + "p{3.4cm}"),
    (r"as shipped, \%", rag + "p{1.6cm}"),
    (r"one at a time, \%", "l"),
    (r"joint, \%", "l"),
    ("holds at", "l"),
    ("changed by", rag + "p{3.2cm}"),
]
table_rows, cells, macros, effects_side = [], {}, {}, {}
row_i = 0
for s in names:
    plan = sw.studies[s]
    for c, (_, r) in zip(plan.conclusions, rob[s].iterrows()):
        # a parameter's path may break after a dot: the column is narrow; more than two parameter ends
        # are counted (the sidecar names each), so the table fits a page at the body's size
        ends = [b for b in r["breaks"] if not b.startswith("joint ")]
        joints = [esc(b) for b in r["breaks"] if b.startswith("joint ")]
        named = (
            [path_tex(b.rsplit(" ", 1)[0]) + " " + esc(b.rsplit(" ", 1)[1]) for b in ends]
            if len(ends) <= 2
            else [f"{len(ends)} parameter ends"]
        )
        breaks = ", ".join(named + joints) or "--"
        ec = eff[s][eff[s].conclusion == c.id]
        n_hold, n_set = int((ec["outcome"] == r["shipped_outcome"]).sum()), len(ec)
        text = [
            f"{s.upper()}: {esc(c.label)} ({claim_text(c)})",
            f"{pct(r['shipped_pct'])} ({esc(r['shipped_outcome'])})",
            span(r["oat_min"], r["oat_max"]),
            span(r["joint_min"], r["joint_max"]),
            "all" if r["robust"] else f"{n_hold} of {n_set}",
            breaks,
        ]
        table_rows.append(text)
        values = {
            "shipped": r["shipped_pct"],
            "outcome": r["shipped_outcome"],
            "oat": [r["oat_min"], r["oat_max"]],
            "joint": [r["joint_min"], r["joint_max"]],
            "sign_kept": bool(r["sign_kept"]),
            "robust": bool(r["robust"]),
            "breaks": r["breaks"],
        }
        stats_of = {
            "shipped": "difference in % of the reference mean at the shipped setting",
            "outcome": "Welch (higher/lower) or TOST (equivalent), Holm across the study's conclusions",
            "oat": "min and max of the difference over the one-at-a-time settings (shipped included)",
            "joint": "min and max of the difference over the joint Latin-hypercube points",
            "sign_kept": "every setting's difference has the shipped difference's sign",
            "robust": "every setting gives the shipped outcome",
            "breaks": "the settings whose outcome differs from the shipped one",
        }
        shipped_runs = eff[s].query("kind == 'shipped' and conclusion == @c.id")["runs"].iloc[0]
        for col, key in ((1, "shipped"), (1, "outcome"), (2, "oat"), (3, "joint"), (4, "robust"), (5, "breaks")):
            # the shipped cells: their runs; the others rest on every setting's runs (the manifest's)
            cells[f"{s}/{c.id}/{key}"] = {
                "row": row_i,
                "col": col,
                "text": text[col],
                "value": values[key],
                "stat": stats_of[key],
                "runs": shipped_runs if key in ("shipped", "outcome") else [],
                "manifest": f"{data_dir}/runs/sensitivity/{s}.json",
                "settings": int(eff[s].query("conclusion == @c.id").shape[0]),
            }
        m = f"{s}/{c.id}"
        macros[f"{m}/shipped"] = pct(r["shipped_pct"])
        macros[f"{m}/outcome"] = esc(r["shipped_outcome"])
        macros[f"{m}/oat"] = span(r["oat_min"], r["oat_max"])
        macros[f"{m}/joint"] = span(r["joint_min"], r["joint_max"])
        macros[f"{m}/robust"] = "yes" if r["robust"] else "no"
        macros[f"{m}/sign-kept"] = "yes" if r["sign_kept"] else "no"
        macros[f"{m}/breaks"] = breaks
        macros[f"{m}/label"] = esc(c.label)
        macros[f"{m}/outcome-text"] = OUTCOME_TEXT.get(r["shipped_outcome"], esc(r["shipped_outcome"]))
        macros[f"{m}/supports"] = "yes" if r["supports_claim"] else "no"
        macros[f"{m}/holds"] = "holds" if r["robust"] else "does not hold"
        macros[f"{m}/survives"] = survives(plan, c, r, eff[s])
        row_i += 1
    effects_side[s] = eff[s][["setting", "conclusion", "effect_pct", "low", "high", "p_holm", "outcome"]].to_dict(
        "records"
    )
    table_rows.append(None)
all_rob = pd.concat(rob.values())
n_runs = sum(len(r) for r in runs.values())
data_hash = hashlib.sha256("".join(sorted(runs[s]["run_id"].str.cat(sep="\n") for s in names)).encode()).hexdigest()
caption = (
    r"Sensitivity of the simulator's conclusions to its uncalibrated workload parameters (the settings, "
    r"outcomes and Holm families as Appendix~\ref{app:sensitivity} describes; "
    rf"{sw.seeds} seeds per variant and point, {sw.joint_points} joint points): the effect in \% of the "
    r"reference and its outcome at the shipped setting, the effect's range one at a time and jointly, the "
    r"settings that give the shipped outcome (``all'': robust) and what changes it. "
    r"Regenerate: \texttt{snakemake -c1 paper/generated/sensitivity/table.tex}; "
    rf"{n_runs} runs, \texttt{{sha256:{data_hash[:16]}}}."
)
side = write_sidecar(
    out / "cells.json",
    {
        "table": "sensitivity",
        "data_hash": data_hash,
        "seeds": sw.seeds,
        "joint_points": sw.joint_points,
        "binaries": binaries,
        "cells": cells,
        "effects": effects_side,
    },
)
Table.from_rows(columns, table_rows, None, caption, "tab:sensitivity", preamble=r"\setlength{\tabcolsep}{3pt}").write(
    out / "table.tex", sidecar=side, title="Robustness of the simulator's conclusions"
)
macros["n"] = str(len(all_rob))
macros["robust/n"] = str(int(all_rob["robust"].sum()))
macros["sign-kept/n"] = str(int(all_rob["sign_kept"].sum()))
macros["supports/n"] = str(int(all_rob["supports_claim"].sum()))
macros["seeds"] = str(sw.seeds)
macros["joint"] = str(sw.joint_points)
macros["runs"] = str(n_runs)
for s in names:
    macros[f"{s}/parameters"] = str(len(sw.studies[s].parameters))
    macros[f"{s}/robust/n"] = str(int(rob[s]["robust"].sum()))
    macros[f"{s}/n"] = str(len(rob[s]))
write_macros(out / "macros.tex", "sensitivity", macros)
macros
