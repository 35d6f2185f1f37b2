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
# # S2 (native). Do PV spinlocks cost anything natively?
# Four kernels booted without a hypervisor (on the qemu testbed: under QEMU, not bare metal): `CONFIG_PARAVIRT_SPINLOCKS` n/y, each
# booted with and without `nopvspin`. pgbench (transactions/s), pbzip2 and a
# kernbench-style build (seconds) at 1 and 2N threads. Every kernel against
# `CONFIG_PARAVIRT_SPINLOCKS=n`: Welch's t on the log ratio of the means,
# Holm-adjusted across the table (intervals at each row's Holm-adjusted
# level), and a TOST equivalence test with the margin the study file fixes in
# advance, Holm-adjusted too. The n/n+nopvspin pair changes nothing in the kernel: it shows
# the testbed's noise floor.

# %% tags=["parameters"]
study = "s2native"
testbed = "qemu"
data_dir = "data"
studies_dir = "config/studies"
out_dir = "paper/generated/s2native"

# %%
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from schedlab.report.notebook import StudyContext, interval_yerr, plot_limits

sns.set_theme(style="whitegrid", context="paper")
ctx = StudyContext(study, testbed, data_dir, out_dir, studies_dir)
runs = ctx.runs
runs.groupby(["variant", *ctx.axes]).size().rename("runs").to_frame()

# %% [markdown]
# Every kernel against the baseline at every (benchmark, threads) point.

# %%
cmp = ctx.comparisons
cmp

# %% [markdown]
# The figure: Δ % against the baseline with its interval (the table's, at the
# row's Holm-adjusted level) per benchmark and thread count, one marker per
# kernel, the equivalence margin shaded; an unbounded end is drawn to the
# panel's edge and marked ▲/▼. For the benchmarks measured in seconds a
# positive Δ is a slowdown; for pgbench a negative Δ is.

# %%
margin = ctx.margin_pct
benches = list(ctx.study["axes"]["bench"])
variants = [v for v in ctx.study["variants"] if v != ctx.study["baseline"]]
fig, axes = plt.subplots(1, len(benches), figsize=(7, 2.4), sharey=True)
limits = plot_limits(cmp["pct"], cmp["pct_low"], cmp["pct_high"], [-(margin or 0), margin or 0])
for ax, bench in zip(np.atleast_1d(axes), benches):
    c = cmp[cmp["bench"] == bench]
    threads = sorted(c["threads"].unique())
    for i, v in enumerate(variants):
        cv = c[c["variant"] == v].set_index("threads").reindex(threads)
        x = np.arange(len(threads)) + (i - (len(variants) - 1) / 2) * 0.2
        yerr, lo_open, hi_open = interval_yerr(cv["pct"], cv["pct_low"], cv["pct_high"], limits)
        bars = ax.errorbar(x, cv["pct"], yerr=yerr, fmt="os^"[i % 3], capsize=2, ms=4, label=v)
        colour = bars[0].get_color()
        ax.plot(x[hi_open], [limits[1]] * hi_open.sum(), "^", color=colour, ms=4)
        ax.plot(x[lo_open], [limits[0]] * lo_open.sum(), "v", color=colour, ms=4)
    if margin:
        ax.axhspan(-margin, margin, color="grey", alpha=0.15, lw=0)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_ylim(*limits)
    ax.set_xticks(range(len(threads)), [str(t) for t in threads])
    metric = next(m for m in ctx.study["metrics"] if m.get("when", {}).get("bench") == bench)
    ax.set_title(f"{bench} ({metric['unit']}, {metric['better']} is better)", fontsize=8)
    ax.set_xlabel("threads")
np.atleast_1d(axes)[0].set_ylabel(f"Δ % vs {ctx.study['baseline']}")
np.atleast_1d(axes)[-1].legend(fontsize=6, loc="best")
fig.tight_layout()
ctx.save_figure(
    fig,
    "Natively booted kernels: difference from \\texttt{CONFIG\\_PARAVIRT\\_SPINLOCKS=n} in \\% per "
    "benchmark and thread count; the shaded band is the equivalence margin; an unbounded interval end "
    "is drawn to the panel's edge and marked by a triangle",
    "the table's interval of the difference, at the row's Holm-adjusted level",
)

# %% [markdown]
# Numbers for the text: the verdict counts and the largest |Δ %|.

# %%
macros = {  # ncmp, nsig: StudyContext.comparison_macros
    "nequiv": str(int((cmp["equivalent"] == True).sum())),  # noqa: E712 (NaN-safe)
    "maxabs": f"{cmp['pct'].abs().max():.1f}",
    "margin": f"{margin:g}",
}
# the kernels with PV spinlocks compiled in: enabled (pv_y) and switched off at boot
# (pv_y_nopvspin); a testbed may run the A/A pair first (testbeds.<tb>.variants)
for key, variant in (("pvy", "pv_y"), ("pvynop", "pv_y_nopvspin")):
    pv = cmp[cmp["variant"] == variant]
    if len(pv):
        macros[f"{key}/nequiv"] = str(int((pv["equivalent"] == True).sum()))  # noqa: E712
        macros[f"{key}/n"] = str(len(pv))
        macros[f"{key}/maxabs"] = f"{pv['pct'].abs().max():.1f}"
        macros[f"{key}/nsig"] = str(int(pv["significant"].sum()))
# which benchmarks are equivalent at every thread count with every compiled-in kernel, and
# which are not (named in the text only where there are any)
pv = cmp[cmp["variant"].isin(["pv_y", "pv_y_nopvspin"])]
if len(pv):
    equiv = [b for b in benches if (pv[pv["bench"] == b]["equivalent"] == True).all()]  # noqa: E712
    still_open = [b for b in benches if b not in equiv]
    for key, names in (("pvin/equiv-benches", equiv), ("pvin/open-benches", still_open)):
        if names:
            macros[key] = ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + names[-1]
# the A/A pair (same kernel, nopvspin changes nothing with =n): the noise floor
aa = cmp[cmp["variant"] == "pv_n_nopvspin"]
macros["aa/maxabs"] = f"{aa['pct'].abs().max():.1f}"
# the farthest an A/A interval reaches from its estimate (Holm-adjusted level)
half = np.maximum(aa["pct"] - aa["pct_low"], aa["pct_high"] - aa["pct"]).max()
macros["aa/maxhalf"] = f"{half:.1f}" if np.isfinite(half) else r"$\infty$"
macros["aa/nsig"] = str(int(aa["significant"].sum()))
macros["aa/n"] = str(len(aa))
macros["aa/nequiv"] = str(int((aa["equivalent"] == True).sum()))  # noqa: E712
# boots per kernel and point (the replicate): the smallest count in the table
macros["aa/boots"] = str(int(runs.groupby(["variant", *ctx.axes]).size().min()))
macros

# %%
_ = ctx.finish(macros)  # the sidecar, not displayed
