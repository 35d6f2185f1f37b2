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
# # S2. PV ticketlocks under vCPU overcommit
# The ticketlock storm: lock operations per second and the 99th percentile
# lock wait as vCPUs per pCPU grow, plain ticket locks (PV off) against PV
# ticketlocks (spin, then poll; the unlocker kicks the next waiter).

# %% tags=["parameters"]
study = "s2"
testbed = "sim"
data_dir = "data"
studies_dir = "config/studies"
out_dir = "paper/generated/s2"

# %%
import numpy as np
import seaborn as sns

from schedlab.report.notebook import T_PAIRED, StudyContext, plot_differences
from schedlab.report.tables import fmt_signed_ci

sns.set_theme(style="whitegrid", context="paper")
ctx = StudyContext(study, testbed, data_dir, out_dir, studies_dir)
runs = ctx.runs
runs.groupby(["variant", *ctx.axes]).size().rename("runs").to_frame()

# %% [markdown]
# Every variant against its baseline at every point, for every metric
# (on the log ratio of the means; Holm-adjusted across the whole table,
# intervals at each row's Holm-adjusted level). The test is the one the study
# file declares for the testbed before measuring: Welch's t on the sim, whose
# storms are bimodal across seeds (which strains the t-test; no study file asks
# for the permutation test, `StudyContext(..., test="permutation")`), and the
# paired t-test over rounds on qemu, whose two variants share each round's boot.

# %%
ctx.comparisons

# %% [markdown]
# Δ % of PV against plain ticket locks per overcommit level, with its interval
# (the table's, at the row's Holm-adjusted level) as error bars, for each
# metric. An unbounded end is drawn to the panel's edge and marked ▲/▼.

# %%
cmp = ctx.comparisons
# on a paired design (qemu: both variants in each round's boot) the interval is the paired one
fig = plot_differences(cmp, ctx.study["metrics"], ctx.axes[0], "vCPUs per pCPU", "ticket")
ctx.save_figure(
    fig,
    "Difference of PV ticketlocks from plain ticket locks, in \\% of the ticket-lock mean, per "
    "vCPUs per pCPU; an unbounded interval end is drawn to the panel's edge and marked by a triangle",
    T_PAIRED if ctx.test == "paired" else "the table's interval of the difference, at the row's Holm-adjusted level",
)

# %%
macros = {}
for _, c in cmp.iterrows():
    macros[f"pct/{c['metric']}/{ctx.axes[0]}-{c[ctx.axes[0]]}"] = fmt_signed_ci(c["pct"], c["pct_low"], c["pct_high"])
macros

# %% [markdown]
# On qemu under icount one instruction clock serves both pCPUs, so a pCPU left
# idle gives the other more guest time (the study file's `time_mode_why`). The
# guests' own tick counters say how idle their vCPUs were during the storm: the
# idle share of all their ticks, per variant and point, mean over runs. And, from
# Xen's trace (`sched_trace`), what the waiters did per second of guest time:
# blocks (a PV waiter polling), yields and wakes of the lock guests.

# %%
recs = [r for r in (runs.attrs.get("records") or {}).values() if not r.get("warmup")]
per_vm = [r for r in recs if (r.get("counters") or {}).get("per_vm")]
if testbed != "sim" and per_vm:
    import pandas as pd
    from IPython.display import display

    rows = []
    for r in per_vm:
        vms = r["counters"]["per_vm"].values()
        ticks = [vm.get("guest_ticks") or {} for vm in vms]
        total = sum(sum(t.values()) for t in ticks)
        row = {"variant": r["variant"], ctx.axes[0]: r["point"][ctx.axes[0]]}
        row["idle %"] = 100 * sum(t.get("idle", 0) for t in ticks) / total if total else np.nan
        se = r["counters"].get("sched_events")
        guest_s = max(float(vm["elapsed_ns"]) / 1e9 for vm in vms)
        if se:
            for k in ("block", "yield", "wake"):
                row[f"{k}/s"] = sum(v.get(k, 0) for v in se["by_vm"].values()) / guest_s
        rows.append(row)
    guests = pd.DataFrame(rows).groupby(["variant", ctx.axes[0]]).mean()
    for (v, k), row in guests.iterrows():
        for col, val in row.items():
            if not np.isnan(val):
                name = col.replace(" %", "").replace("/s", "-per-s")
                macros[f"guests/{v}/{ctx.axes[0]}-{k}/{name}"] = f"{val:.1f}" if " %" in col else f"{val:.0f}"
    display(guests)

# %%
_ = ctx.finish(macros)  # the sidecar, not displayed
