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
# # S3. Migration delay
# Throughput and vCPU migrations per second as `vcpu_migration_delay` grows
# from 0 to 2000 µs, every delay against delay 0.

# %% tags=["parameters"]
study = "s3"
testbed = "sim"
data_dir = "data"
studies_dir = "config/studies"
out_dir = "paper/generated/s3"

# %%
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from schedlab import stats
from schedlab.report.notebook import T_ERRORBARS, StudyContext, ratio_method_text, t_errorbar
from schedlab.report.tables import fmt_signed

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

# %%
# the delay is the variant's credit1 pool parameter (set at run time), the same on every testbed
runs["delay_us"] = runs["variant"].map(
    lambda v: ctx.study["variants"][v]["xen"]["sched_credit"]["migration_delay_us"]
)
fig, axes = plt.subplots(1, 2, figsize=(6, 2.4))
sns.pointplot(data=runs, x="delay_us", y="throughput", errorbar=t_errorbar(), ax=axes[0], markersize=3, linewidth=1)
axes[0].set_ylabel("throughput (1/s)")
sns.pointplot(data=runs, x="delay_us", y="migrations", errorbar=t_errorbar(), ax=axes[1], markersize=3, linewidth=1)
axes[1].set_ylabel("migrations (1/s)")
for a in axes:
    a.set_xlabel("vcpu_migration_delay (µs)")
fig.tight_layout()
ctx.save_figure(fig, "Throughput and vCPU migrations per second against \\texttt{vcpu\\_migration\\_delay}", T_ERRORBARS)

# %%
cmp = ctx.comparisons
macros = {f"pct/{c['metric']}/{c['variant']}": fmt_signed(c["pct"]) for _, c in cmp.iterrows()}
# Migrations per unit of work: on qemu TCG's speed follows the development machine's,
# and a slower machine makes fewer of everything per second; per 1000 work units that
# cancels. Ratio of the means against the baseline at the (last) point, 95 % interval
# (bootstrap_ratio_ci: log-ratio t below stats.BCA_MIN_RUNS runs, BCa from there; `perwork/method`).
runs["per_kunit"] = 1000 * runs["migrations"] / runs["throughput"]
base = ctx.study["baseline"]
point = runs[ctx.axes].drop_duplicates().iloc[-1]
at = runs[(runs[ctx.axes] == point).all(axis=1)]
b = at[at.variant == base]["per_kunit"].to_numpy()
methods = []
for v in ctx.study["variants"]:
    if v == base:
        continue
    x = at[at.variant == v]["per_kunit"].to_numpy()
    r = stats.bootstrap_ratio_ci([[y] for y in b], [[y] for y in x], seed=0)
    macros[f"perwork/{v}"] = f"{100 * (r.estimate - 1):+.1f}".replace("-", "$-$")
    macros[f"perwork/{v}/ci"] = f"[{100 * (r.low - 1):+.1f}, {100 * (r.high - 1):+.1f}]".replace("-", "$-$")
    methods.append(r.method)
macros["perwork/method"] = ratio_method_text(methods)
macros

# %%
ctx.finish(macros);
