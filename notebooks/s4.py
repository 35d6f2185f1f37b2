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
# # S4. NUMA-aware scheduling
# Three placement policies (no affinity, static pinning, NUMA-aware soft
# affinity) on a 2-node host with 2, 6 and 10 VMs of 2 vCPUs; SpecJBB-like
# throughput, sysbench memory throughput and LMBench proc latency, and, where
# the testbed traces the hypervisor, the share of run time on the home node.

# %% tags=["parameters"]
study = "s4"
testbed = "sim"
data_dir = "data"
studies_dir = "config/studies"
out_dir = "paper/generated/s4"

# %%
import matplotlib.pyplot as plt
import seaborn as sns

from schedlab.report.notebook import (
    T_ERRORBARS,
    T_PAIRED,
    StudyContext,
    plot_differences,
    significance_phrase,
    t_errorbar,
)
from schedlab.report.tables import fmt_signed_ci

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
# Grouped bars per policy and VM count, one panel per benchmark; on a paired design each
# policy's paired difference from none instead.

# %%
if ctx.test == "paired":
    # a paired design (qemu: the three policies in each round's boot): each policy's difference
    # from none with the paired interval, per number of VMs on a true scale
    fig = plot_differences(ctx.comparisons, ctx.study["metrics"], "vms", "VMs", ctx.study["baseline"])
    ctx.save_figure(
        fig, "Each policy's difference from none, in \\% of none's mean, per benchmark and number of VMs", T_PAIRED
    )
else:
    metrics = [m["name"] for m in ctx.study["metrics"]]
    fig, axes = plt.subplots(1, len(metrics), figsize=(7, 2.4))
    for ax, m in zip(axes, metrics):
        sns.barplot(data=runs, x="vms", y=m, hue="variant", errorbar=t_errorbar(), ax=ax)
        ax.set_xlabel("VMs")
        label = ctx.metric(m)["label"].split(" (")[0]
        ax.set_ylabel(f"{label} ({ctx.metric(m).get('unit', '')})", fontsize=7)
        ax.get_legend().remove()
    # one legend below the panels, clear of the bars
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncols=3, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    ctx.save_figure(fig, "Each benchmark per placement policy and number of VMs", T_ERRORBARS)

# %%
cmp = ctx.comparisons
macros = {
    f"pct/{c['metric']}/{c['variant']}/vms-{c['vms']}": fmt_signed_ci(c["pct"], c["pct_low"], c["pct_high"])
    for _, c in cmp.iterrows()
}
# Where the vCPUs ran (testbeds that trace the hypervisor): mean share of run time on the
# home node per variant and point, the number the text quotes beside the comparisons.
if "home_share" in runs:
    for (v, n), g in runs.groupby(["variant", "vms"]):
        macros[f"share/{v}/vms-{n}"] = f"{g['home_share'].mean():.1f}"
        macros[f"share/{v}/vms-{n}/range"] = f"{g['home_share'].min():.1f}--{g['home_share'].max():.1f}"
    # does soft affinity keep more of the run time at home on the most loaded point than on the least?
    numa_share = runs[runs.variant == "numa"].groupby("vms")["home_share"].mean()
    if len(numa_share) > 1:
        macros["share/numa/trend"] = "more" if numa_share.iloc[-1] > numa_share.iloc[0] else "less"
    # the benchmarks' comparisons apart from where the vCPUs ran
    bench = cmp[cmp["metric"] != "home_share"]
    macros["bench/ncmp"] = str(len(bench))
    macros["bench/nsig"] = str(int(bench["significant"].sum()))
    macros["bench/sigof"] = significance_phrase(bench, "benchmark comparison", "benchmark comparisons", "the")
macros

# %% [markdown]
# The seed's second comparison, which the table (every policy against no affinity) does not
# make: NUMA-aware placement against static pinning, as the study file's claim names it.

# %%
ctx.claim_checks()
ctx.check_macros

# %%
_ = ctx.finish(macros)  # the sidecar, not displayed
