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
# # S1. Mistaken BOOST on wake
# netperf-like throughput and latency of the I/O VM, alone and co-run with a
# CPU-bound VM on the same pCPU; the pre-4.7 wake path (`bug`) against the
# fixed one. Writes the S1 table, figure, macros and sidecar under `out_dir`.

# %% tags=["parameters"]
study = "s1"
testbed = "sim"
data_dir = "data"
studies_dir = "config/studies"
out_dir = "paper/generated/s1"

# %%
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from schedlab.report.notebook import T_ERRORBARS, StudyContext, t_errorbar

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
# Throughput and latency bars per mode and variant (latency on a log scale:
# the bug costs orders of magnitude); error bars: the mean's 95 % t-interval, as in the table.

# %%
fig, axes = plt.subplots(1, 2, figsize=(6, 2.4))
sns.barplot(data=runs, x="mode", y="throughput_mbps", hue="variant", errorbar=t_errorbar(), ax=axes[0])
axes[0].set_ylabel("throughput (Mbit/s)")
sns.barplot(data=runs, x="mode", y="latency_us", hue="variant", errorbar=t_errorbar(), ax=axes[1])
axes[1].set_yscale("log")
axes[1].set_ylabel("latency (µs, log)")
for a in axes:
    a.set_xlabel("")
    a.get_legend().remove()
# one legend below the panels, clear of the bars
fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncols=2, fontsize=7, frameon=False)
fig.tight_layout(rect=(0, 0.1, 1, 1))
ctx.save_figure(
    fig,
    "The I/O VM's throughput and latency, alone and co-run with a CPU-bound VM on its pCPU, "
    "with the pre-4.7 (bug) and the fixed wake path; latency on a log scale",
    T_ERRORBARS,
)


# %%
def mean(v, mode, m):
    return runs[(runs.variant == v) & (runs["mode"] == mode)][m].mean()


macros = {}
for v in ctx.study["variants"]:
    for mode in ctx.runs["mode"].unique():
        macros[f"tput/{v}/{mode}"] = f"{mean(v, mode, 'throughput_mbps'):.3g}"  # qemu: a few Mbit/s
        macros[f"lat/{v}/{mode}"] = f"{mean(v, mode, 'latency_us'):.0f}"
    macros[f"collapse/{v}"] = f"{mean(v, 'alone', 'throughput_mbps') / mean(v, 'corun', 'throughput_mbps'):.1f}"
    # what co-running does to the throughput, in words: "divides it by 10.9 (941 against 86 Mbit/s)";
    ratio = mean(v, "alone", "throughput_mbps") / mean(v, "corun", "throughput_mbps")
    pair = f"{macros[f'tput/{v}/alone']} alone against {macros[f'tput/{v}/corun']}\\,Mbit/s co-run"
    macros[f"corun-effect/{v}"] = (
        # a ratio that rounds to 1.0 claims no change it has not tested: the means only
        f"gives {pair}" if round(ratio, 1) == 1.0 else f"divides it by {ratio:.1f} ({pair})"
    )
    for mode in ctx.runs["mode"].unique():
        for m in ("throughput_mbps", "latency_us"):
            x = runs[(runs.variant == v) & (runs["mode"] == mode)][m]
            macros[f"cv/{v}/{mode}/{m}"] = f"{100 * x.std() / x.mean():.0f}"  # run-to-run CV, %
# The stream's data during one co-run wait of the bug (its alone rate times the bug's co-run
# request/response latency): a wait cuts throughput only where this exceeds the TCP window.
# The same product at the seed's 1 GbE from its published numbers, for comparison.
inflight_kb = mean("bug", "alone", "throughput_mbps") / 8 * mean("bug", "corun", "latency_us") / 1e3
macros["inflight/bug/kb"] = f"{inflight_kb:.0f}"
pub = ctx.study.get("published") or {}
if "throughput_mbps" in pub and "latency_us" in pub:
    seed_kb = pub["throughput_mbps"]["bug"]["alone"] / 8 * pub["latency_us"]["bug"]["corun"] / 1e3
    macros["inflight/seed/mb"] = f"{seed_kb / 1e3:.0f}"
# The stream's window as the records give it (iperf3 -w and the socket buffers the kernel set);
# one value per study definition, so a mix is an error, not a footnote.
recs = list((runs.attrs.get("records") or {}).values())
windows = {(r.get("counters") or {}).get("stream_window") for r in recs}
if windows - {None}:
    if len(windows) != 1:
        raise ValueError(f"{study}: records with different stream windows: {sorted(map(str, windows))}")
    macros["setup/window"] = windows.pop()
    bufs = {(r["counters"].get("stream_sock_bufsize") or {}).get("rcvbuf_actual") for r in recs}
    if len(bufs) == 1 and None not in bufs:
        rcvbuf = bufs.pop()
        macros["setup/rcvbuf-kb"] = f"{rcvbuf / 1024:.0f}"
        # Linux advertises half the receive buffer as window (tcp_adv_win_scale 1)
        macros["setup/window-kb"] = f"{rcvbuf / 2 / 1024:.0f}"
        macros["inflight/bug/vs-window"] = "more than" if inflight_kb * 1024 > rcvbuf / 2 else "less than"
# The I/O VM's CPU time in the stream phase over the stream's length (an upper bound of its
# busy share: the phase also holds iperf3's connection setup): above half a pCPU it is short
# of CPU co-run under either wake path, since credit1 gives each of the two VMs half.
from schedlab import config
from schedlab.workloads.netpair import DEFAULTS as NETPAIR

stream_s = float(config.testbed_settings(ctx.study, testbed)["options"].get("duration_s", NETPAIR["duration_s"]))
for v in ctx.study["variants"]:
    busy = [
        r["counters"]["cpu_seconds_by_phase"]["stream"].get("io")
        for r in recs
        if r["variant"] == v and r["point"]["mode"] == "alone" and "cpu_seconds_by_phase" in r["counters"]
    ]
    if busy and None not in busy:
        macros[f"stream-busy/{v}/alone"] = f"{100 * np.mean(busy) / stream_s:.0f}"
macros

# %% [markdown]
# On real Xen (qemu, `sched_trace`), Xen's own trace counted every scheduler
# event in each run's measurement window: per run, the mean count per variant
# and mode, by domain (`io`, `cpu`) and in total. The bug's chain leaves a
# mark the fix cannot: the CPU-bound vCPU never sleeps, so it is BOOSTed only
# when the kick-away's migration re-wakes it.

# %%
traced = [r for r in recs if (r.get("counters") or {}).get("sched_events")]
if traced:
    import pandas as pd
    from IPython.display import display

    from schedlab.report.tables import counted, times_word

    rows = []
    for r in traced:
        se = r["counters"]["sched_events"]
        row = {"variant": r["variant"], "mode": r["point"]["mode"], "migrations": se.get("migrations", 0)}
        row.update({f"all-{k}": v for k, v in se["total"].items()})
        for vm, counts in (se.get("by_vm") or {}).items():
            row.update({f"{vm}-{k}": v for k, v in counts.items()})
        rows.append(row)
    xen_events = pd.DataFrame(rows).fillna(0).groupby(["variant", "mode"]).mean()
    for (v, mode), row in xen_events.iterrows():
        for k, val in row.items():
            macros[f"xen/{v}/{mode}/{k}"] = f"{val:.0f}"
            # for the text: "never", "once", "1546 times"; "no changes of pCPU"
            macros[f"xen/{v}/{mode}/{k}/times"] = times_word(round(val))
        macros[f"xen/{v}/{mode}/migrations/changes"] = counted(
            round(row.get("migrations", 0)), "change of pCPU", "changes of pCPU"
        )
    display(xen_events.T)

# %%
_ = ctx.finish(macros)  # the sidecar, not displayed
