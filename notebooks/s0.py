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
import seaborn as sns

from schedlab import config, stats
from schedlab.report.notebook import T_ERRORBARS, StudyContext, ratio_method_text, t_errorbar
from schedlab.report.tables import counted, of_n

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
# Aggregate throughput vs VMs, one line per variant (mean and its 95 % t-interval over runs,
# as in the table).

# %%
fig, ax = plt.subplots(figsize=(4.2, 2.8))
order = [v for v in ctx.study["variants"] if v in set(runs["variant"])]
palette = dict(zip(order, sns.color_palette(n_colors=len(order))))
sns.pointplot(
    data=runs,
    x="vms",
    y="throughput",
    hue="variant",
    hue_order=order,
    palette=palette,
    errorbar=t_errorbar(),
    dodge=0.3,
    markersize=3,
    linewidth=1,
    ax=ax,
)
vcpus = config.testbed_settings(ctx.study, testbed)["options"].get("guest_vcpus", ctx.study["workload"]["vcpus_per_vm"])
# The seed's curves, where the testbed runs its scale (the sim: 4-vCPU VMs on 4 cores);
# pointplot puts the VM counts at positions 0, 1, ... in sorted order.
xs = sorted(runs["vms"].unique())
published = (ctx.study.get("published") or {}).get("throughput") or {}
same_scale = testbed == "sim"
if same_scale:
    for v, by_vms in published.items():
        pts = [(xs.index(k), val) for k, val in sorted(by_vms.items()) if k in xs and v in palette]
        if pts:
            ax.plot(*zip(*pts), ls="--", lw=0.8, marker="x", ms=3, color=palette[v], label=f"{v} (seed)")
ax.set_xlabel(f"VMs ({vcpus} vCPUs each)")
ax.set_ylabel("aggregate throughput\n(builds / 100000 s)")
ax.legend(title=None, fontsize=6, ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.22))  # below: no overlap
ax.set_ylim(bottom=0)
seed_note = (
    "; dashed with crosses: the seed's published values"
    if same_scale and published
    else "; the seed's published values are not drawn: another scale and TCG speeds"
    if published
    else ""
)
ctx.save_figure(
    fig,
    f"Aggregate throughput (builds per 100\\,000\\,s, summed over VMs) against the number of "
    f"{vcpus}-vCPU VMs, per variant{seed_note}",
    T_ERRORBARS,
)

# %% [markdown]
# The ratio of aggregate throughputs (variant / base) at the largest point,
# with its 95 % interval (`bootstrap_ratio_ci`: the log-ratio t interval; `ratio/method`
# names it), over the experimental units (boots where the unit is the boot): the paper's
# headline number for S0.

# %%
top = max(runs["vms"])
macros, methods = {}, []
for v in ctx.study["variants"]:
    if v == "base":
        continue
    b = ctx.unit_values("base", {"vms": top}, "throughput")
    x = ctx.unit_values(v, {"vms": top}, "throughput")
    r = stats.bootstrap_ratio_ci([[y] for y in b], [[y] for y in x], seed=0)
    macros[f"ratio/{v}/top"] = f"{r.estimate:.2f}"
    macros[f"ratio/{v}/top/ci"] = f"[{r.low:.2f}, {r.high:.2f}]"
    if ctx.table.per_boot and min(len(b), len(x)) < config.MIN_BOOTS:  # descriptive only: no test
        macros[f"ratio/{v}/top/ci"] += f", over {counted(min(len(b), len(x)), 'boot')}, fewer than a test needs"
    methods.append(r.method)
macros["ratio/method"] = ratio_method_text(methods)
macros["topvms"] = str(top)
# The shape of the base curve (the seed's declines monotonically as VMs are added).
base_mean = runs[runs.variant == "base"].groupby("vms")["throughput"].mean()
monotonic = bool((base_mean.diff().dropna() < 0).all())
macros["base/shape"] = "declines monotonically" if monotonic else "does not decline monotonically"
macros["base/worst"] = str(int(base_mean.idxmin()))
macros

# %% [markdown]
# The seed's decision, tested directly (comparisons the table does not make, each one Holm
# family): is yield alone within a few per cent of pick+push+yield once there is more than one
# VM, and what does yield cost at one VM? Equivalence (TOST) against the seed's own bounds, as
# the study file's claim states them before measuring: yield's throughput was below
# pick+push+yield's "by less than 2 % in all cases", and its single-VM cost "less than 1 %".

# %%
margins = {p["check"]: p["equivalent_within_pct"] for p in ctx.study["claim"]["parts"] if p.get("check")}
first = config.points(ctx.study, testbed)[0]
ctx.claim_checks()
# the answers under names that do not depend on the testbed's points: `decision/ppy/...` at the
# largest point, `decision/ppy/neq` (equivalent at how many of the points compared), `decision/cost/...`
pid_top, pid_first = (config.point_id(p) for p in (config.points(ctx.study, testbed)[-1], first))
for name, key in (("ppy", f"yield-ppy/yield/{pid_top}"), ("cost", f"cost/yield/{pid_first}")):
    for part in ("d", "ci", "sig", "eq", "p", "eqp"):
        if f"check/{key}/throughput/{part}" in ctx.check_macros:
            macros[f"decision/{name}/{part}"] = ctx.check_macros[f"check/{key}/throughput/{part}"]
ppy_rows = [c for c in ctx.checks.values() if c["check"] == "yield-ppy"]
if ppy_rows:
    macros["decision/ppy/neq"] = of_n(sum(bool(c["equivalent"]) for c in ppy_rows), len(ppy_rows))
    macros["decision/ppy/range"] = (
        f"{min(c['value'] for c in ppy_rows):.1f} to {max(c['value'] for c in ppy_rows):.1f}".replace("-", "$-$")
    )
macros["decision/margin-ppy"] = f"{margins['yield-ppy']:g}"
macros["decision/margin-cost"] = f"{margins['cost']:g}"
ctx.check_macros

# %%
_ = ctx.finish(macros)  # the sidecar, not displayed
