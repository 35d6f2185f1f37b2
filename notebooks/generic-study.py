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
# # Any study: its table, its figure, its claim's checks
# The notebook of a study without one of its own (a study keeps its own notebook,
# notebooks/STUDY.ipynb, only for a figure of its own). Every variant against its baseline at
# every point, for every metric the testbed reports (the table); each metric's mean per
# variant against the study's first axis (the figure); the comparisons the study file's claim
# names (`claim.parts[].check`). Writes the table, figure, macros and sidecar under `out_dir`.

# %% tags=["parameters"]
study = ""
testbed = "sim"
data_dir = "data"
studies_dir = "config/studies"
out_dir = ""

# %%
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from schedlab.report.notebook import T_ERRORBARS, StudyContext, t_errorbar

sns.set_theme(style="whitegrid", context="paper")
ctx = StudyContext(study, testbed, data_dir, out_dir or f"paper/generated/{study}", studies_dir)
runs = ctx.runs
runs.groupby(["variant", *ctx.axes]).size().rename("runs").to_frame()

# %% [markdown]
# Every variant against its baseline at every point, for every metric (Welch's t on the log
# ratio of the means, or the paired t on the per-round log ratios where the study file declares
# `analysis: paired`; Holm-adjusted across the whole table, intervals at each row's
# Holm-adjusted level).

# %%
ctx.comparisons

# %% [markdown]
# One panel per metric: the mean per variant (the mean's 95 % t-interval over runs, as in the
# table) against the study's first axis on this testbed.

# %%
metrics = [m for m in ctx.study["metrics"] if m["name"] in runs and runs[m["name"]].notna().any()]
axis = ctx.axes[0]
order = [v for v in ctx.study["variants"] if v in set(runs["variant"])]
fig, axes = plt.subplots(1, len(metrics), figsize=(3 * len(metrics), 2.6), squeeze=False)
for ax, m in zip(axes[0], metrics):
    sns.pointplot(
        data=runs,
        x=axis,
        y=m["name"],
        hue="variant",
        hue_order=order,
        errorbar=t_errorbar(),
        dodge=0.3,
        markersize=3,
        linewidth=1,
        ax=ax,
    )
    ax.set_xlabel(axis)
    ax.set_ylabel(f"{m['label'].split(' (')[0]}" + (f" ({m['unit']})" if m.get("unit") else ""), fontsize=7)
    ax.legend(title=None, fontsize=6)
fig.tight_layout()
what = ", ".join(m["label"].split(" (")[0] for m in metrics)
ctx.save_figure(fig, f"{ctx.study['title']}: {what}, per variant, against {axis}", T_ERRORBARS)

# %% [markdown]
# The comparisons the study file's claim names (one Holm family each), for the verdict table.

# %%
ctx.claim_checks()
ctx.check_macros

# %%
macros = {
    "nmetrics": str(len(metrics)),
    "nvariants": str(len(order)),
    "npoints": str(int(np.prod([len(set(runs[a])) for a in ctx.axes]))),
}
_ = ctx.finish(macros)  # the sidecar, not displayed
