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
import seaborn as sns

from schedlab.report.notebook import T_ERRORBARS, T_PAIRED, StudyContext, plot_differences, t_errorbar
from schedlab.report.tables import fmt_signed_ci

sns.set_theme(style="whitegrid", context="paper")
ctx = StudyContext(study, testbed, data_dir, out_dir, studies_dir)
runs = ctx.runs
runs.groupby(["variant", *ctx.axes]).size().rename("runs").to_frame()

# %% [markdown]
# Every variant against its baseline at every point, for every metric
# (Welch's t on the log ratio of the means, or the paired t on the per-round
# log ratios where the study file declares `analysis: paired`; Holm-adjusted
# across the whole table, intervals at each row's Holm-adjusted level).

# %%
ctx.comparisons

# %%
# the delay is the variant's credit1 pool parameter (set at run time), the same on every testbed
runs["delay_us"] = runs["variant"].map(lambda v: ctx.study["variants"][v]["xen"]["sched_credit"]["migration_delay_us"])
# per executed work where the testbed reports it (qemu: icount's one clock distorts the per-second rates)
panels = [("throughput", "throughput (1/s)"), ("migrations", "migrations (1/s)")]
if "migrations_per_kunit" in runs and runs["migrations_per_kunit"].notna().any():
    panels.append(("migrations_per_kunit", "migrations per 1000 units"))
what = ", ".join(label for _, label in panels)
if ctx.test == "paired":
    # a paired design (qemu: the delays interleaved within each round's boot): the difference from
    # the baseline delay with the paired interval, at the delay's true value
    delay = {v: d["xen"]["sched_credit"]["migration_delay_us"] for v, d in ctx.study["variants"].items()}
    base = ctx.study["baseline"]
    fig = plot_differences(
        ctx.comparisons,
        ctx.study["metrics"],
        lambda r: delay[r["variant"]],
        "migration delay (µs)",
        f"{delay[base]:g} µs",
        base_x=delay[base],
    )
    ctx.save_figure(
        fig,
        "S3: the difference of each migration delay from the baseline delay, in \\% of the "
        "baseline's mean, at the delay's value (hollow: the baseline)",
        T_PAIRED,
    )
else:
    fig, axes = plt.subplots(1, len(panels), figsize=(3 * len(panels), 2.4))
    for a, (col, label) in zip(axes, panels):
        # the delay on a true scale (its values are not evenly spaced), the rates from zero
        sns.pointplot(
            data=runs, x="delay_us", y=col, errorbar=t_errorbar(), ax=a, markersize=3, linewidth=1, native_scale=True
        )
        a.set_ylim(bottom=0)
        a.set_ylabel(label)
        a.set_xlabel("migration delay (µs)")
    fig.tight_layout()
    ctx.save_figure(fig, f"S3: {what} against the migration delay", T_ERRORBARS)

# %%
cmp = ctx.comparisons
macros = {
    f"pct/{c['metric']}/{c['variant']}": fmt_signed_ci(c["pct"], c["pct_low"], c["pct_high"]) for _, c in cmp.iterrows()
}
macros

# %%
_ = ctx.finish(macros)  # the sidecar, not displayed
