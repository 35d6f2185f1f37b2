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
# # S0. Concurrency hazard: pick, push and yield
# Completion time and aggregate throughput (builds per 100 000 s, summed over
# VMs) as VMs are added to a 4-pCPU host; every variant against `base`.
# Writes the S0 table, figure, macros and sidecar under `out_dir`.

# %% tags=["parameters"]
study = "s0"
testbed = "sim"
data_dir = "data"
studies_dir = "config/studies"
out_dir = "paper/generated/s0"

# %%
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from scipy.stats import binomtest

from schedlab import config, stats
from schedlab.report.notebook import StudyContext, ratio_method_text

sns.set_theme(style="whitegrid", context="paper")
ctx = StudyContext(study, testbed, data_dir, out_dir, studies_dir)
runs = ctx.runs
runs.groupby(["variant", *ctx.axes]).size().rename("runs").to_frame()

# %% [markdown]
# Every variant against its baseline at every point, for every metric
# (Welch's t on the log ratio of the means; Holm-adjusted across the whole
# table, intervals at each row's Holm-adjusted level).

# %%
ctx.comparisons

# %% [markdown]
# Aggregate throughput vs VMs, one line per variant (mean and 95 % CI over runs).

# %%
fig, ax = plt.subplots(figsize=(4.2, 2.8))
sns.pointplot(data=runs, x="vms", y="throughput", hue="variant", errorbar=("ci", 95),
              dodge=0.3, markersize=3, linewidth=1, ax=ax)
vcpus = config.testbed_settings(ctx.study, testbed)["options"].get(
    "guest_vcpus", ctx.study["workload"]["vcpus_per_vm"])
ax.set_xlabel(f"VMs ({vcpus} vCPUs each)")
ax.set_ylabel("aggregate throughput\n(builds / 100000 s)")
ax.legend(title=None, fontsize=7, ncols=3)
ax.set_ylim(bottom=0)
ctx.save_figure(fig)

# %% [markdown]
# The ratio of aggregate throughputs (variant / base) at the largest point,
# with its 95 % interval (`bootstrap_ratio_ci`: the log-ratio t interval below
# `stats.BCA_MIN_RUNS` runs per arm, BCa from there; `ratio/method` names it):
# the paper's headline number for S0.

# %%
top = max(runs["vms"])
macros, methods = {}, []
for v in ctx.study["variants"]:
    if v == "base":
        continue
    b = runs[(runs.variant == "base") & (runs.vms == top)]["throughput"].to_numpy()
    x = runs[(runs.variant == v) & (runs.vms == top)]["throughput"].to_numpy()
    r = stats.bootstrap_ratio_ci([[y] for y in b], [[y] for y in x], seed=0)
    macros[f"ratio/{v}/top"] = f"{r.estimate:.2f}"
    macros[f"ratio/{v}/top/ci"] = f"[{r.low:.2f}, {r.high:.2f}]"
    methods.append(r.method)
macros["ratio/method"] = ratio_method_text(methods)
macros["topvms"] = str(top)
# Speed per round: on qemu TCG runs as fast as the development machine lets it, so a
# change of the host's speed shows as a change of every variant's throughput together.
by_round = runs.groupby("repetition")["throughput"].mean()
macros["rounds/spread"] = f"{by_round.max() / by_round.min():.1f}"
# Paired by round (each round runs every variant once, one after another), which removes a
# speed change between rounds: in how many rounds a variant beats the base at the top
# point, with an exact two-sided sign test over the rounds.
at_top = runs[runs.vms == top].groupby(["repetition", "variant"])["throughput"].mean().unstack()
for v in at_top.columns.drop("base"):
    pair = at_top[[v, "base"]].dropna()
    above = int((pair[v] > pair["base"]).sum())
    macros[f"paired/{v}/above"] = f"{above} of {len(pair)}"
    macros[f"paired/{v}/p"] = f"{binomtest(above, len(pair)).pvalue:.2g}"
macros

# %%
ctx.finish(macros);
