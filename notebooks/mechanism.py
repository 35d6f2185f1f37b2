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
# # Mechanism: a preempted lock owner and its spinning waiters (sim testbed)
# One short traced run of S0's guest workload (2 VMs x 4 vCPUs on 4 pCPUs, queued spinlocks) under three
# guest/hypervisor variants, drawn as one timeline per variant (one row per pCPU).  The window is chosen
# from the first variant's trace: the first time a lock's owner -- its holder, or a waiter a FIFO lock was
# handed to -- is off-CPU for at least 1 ms while a sibling vCPU spins.  The same window is shown for all
# variants (same seed, same start).

# %% tags=["parameters"]
study = ""  # the study it draws; empty: config/config.yaml's (figures: mechanism)
studies_dir = "config/studies"
out_dir = "paper/generated/mechanism"
seed = 1

# %%
import hashlib
import tempfile
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from schedlab.report.notebook import mechanism_setup
from schedlab.report.tables import count_phrase, latex_escape, write_macros
from schedlab.testbeds import sim

study, out = mechanism_setup(study, studies_dir, out_dir, figure="mechanism")
VMS, DURATIONS_S = 2, (0.3, 1.0, 3.0)
# (key, label, variants.*.sim): the study's base and yield variants, and PV spinlocks (spin, poll, kick)
VARIANTS = [
    ("noop", "spin, then yield (no-op yield: Xen < 4.1)", dict(study["variants"]["base"]["sim"])),
    ("yield", "spin, then yield (credit1 yield)", dict(study["variants"]["yield"]["sim"])),
    ("pv", "PV spinlock (spin, then poll; unlocker kicks)", dict(study["variants"]["yield"]["sim"], lock="pv-ticket")),
]


# %%
def run_variant(key, label, vsim, duration_s, tmp):
    tf = Path(tmp) / f"{key}.jsonl"
    sc = sim.mechanism_scenario(study, vsim, seed, tf, duration_s, vms=VMS)
    res = sim.run_scenario(sc)
    events = sim.read_trace(tf)
    return {
        "label": label,
        "scenario": sc,
        "result": res,
        "events": events,
        "sha256": hashlib.sha256(tf.read_bytes()).hexdigest(),
        "timeline": sim.trace_timeline(events, int(sc["duration_s"] * 1e9)),
    }


runs = {}
with tempfile.TemporaryDirectory() as tmp:
    key, label, vsim = VARIANTS[0]
    for duration_s in DURATIONS_S:  # the window is chosen on the first variant's trace
        runs[key] = run_variant(key, label, vsim, duration_s, tmp)
        try:
            t0, t1, gap = sim.mechanism_window(runs[key]["timeline"])
            break
        except sim.RunFailed:
            if duration_s == DURATIONS_S[-1]:
                raise
    for key, label, vsim in VARIANTS[1:]:  # the others only up to the end of the window
        runs[key] = run_variant(key, label, vsim, t1 / 1e9 + 0.001, tmp)
stats = {k: sim.window_stats(r["timeline"], r["events"], t0, t1) for k, r in runs.items()}
{k: {m: round(v, 2) for m, v in s.items()} for k, s in stats.items()}

# %% [markdown]
# Timeline: bars are what each pCPU executes (colour = domain, shade = vCPU); hatched = spinning on a
# lock; a black strip at the foot of a bar = inside a critical section.  The bottom row of each panel shows when a lock's owner is
# off-CPU (per domain).  Markers: yield (v), poll (o), kick (*), BOOST (^).

# %%
sc0 = runs["noop"]["scenario"]
ncpu = sc0["host"]["sockets"] * sc0["host"]["cores_per_socket"] * sc0["host"].get("threads_per_core", 1)
ndom = len(sc0["domains"])
cmaps = [matplotlib.colormaps[n] for n in ("Blues", "Oranges", "Greens", "Purples")]
nv = sc0["domains"][0]["vcpus"]


def colour(dom, vcpu):
    return cmaps[dom % len(cmaps)](0.45 + 0.4 * vcpu / max(1, nv - 1))


MARK = {"yield": ("v", "black"), "poll": ("o", "tab:red"), "kick": ("*", "tab:red"), "boost": ("^", "tab:green")}
ms = lambda t: (t - t0) / 1e6
fig, axes = plt.subplots(len(runs), 1, figsize=(7.5, 1.45 * len(runs) * (ncpu + 1) / 4), sharex=True)
for ax, (key, r) in zip(axes, runs.items()):
    tl = r["timeline"]
    groups = {}  # one broken_barh per (row, style): fast for thousands of bars
    for s in tl["segments"]:
        if s["t1"] <= t0 or s["t0"] >= t1:
            continue
        a, b = max(s["t0"], t0), min(s["t1"], t1)
        xr = groups.setdefault((s["cpu"], s["dom"], s["vcpu"], s["mode"] == "spin"), [])
        if xr and abs(xr[-1][0] + xr[-1][1] - ms(a)) < 1e-9:  # merge work/critical-section runs of one vCPU
            xr[-1] = (xr[-1][0], ms(b) - xr[-1][0])
        else:
            xr.append((ms(a), ms(b) - ms(a)))
        if s["mode"] == "hold":  # critical section: a black strip at the foot of the bar
            groups.setdefault((s["cpu"], -1, 0, False), []).append((ms(a), ms(b) - ms(a)))
    for (cpu, dom, vcpu, spin), xr in groups.items():
        if dom < 0:
            ax.broken_barh(xr, (cpu + 0.25, 0.15), facecolors="black", linewidth=0)
        elif spin:
            ax.broken_barh(
                xr, (cpu - 0.4, 0.8), facecolors="white", edgecolors=colour(dom, vcpu), hatch="////", linewidth=0.6
            )
        else:
            ax.broken_barh(xr, (cpu - 0.4, 0.8), facecolors=colour(dom, vcpu), linewidth=0)
    for d in range(ndom):
        xr = [
            (ms(max(g["t0"], t0)), ms(min(g["t1"], t1)) - ms(max(g["t0"], t0)))
            for g in tl["owner_gaps"]
            if g["dom"] == d and g["t1"] > t0 and g["t0"] < t1
        ]
        ax.broken_barh(
            xr,
            (ncpu - 0.15 + 0.3 * d / max(1, ndom - 1) - 0.1, 0.2),
            facecolors=cmaps[d % len(cmaps)](0.8),
            linewidth=0,
        )
    for kind, (sym, c) in MARK.items():
        xs = [(ms(m["t"]), m["cpu"] - 0.5) for m in tl["marks"] if m["kind"] == kind and t0 <= m["t"] < t1]
        if xs:
            ax.scatter(
                [x for x, _ in xs],
                [y for _, y in xs],
                marker=sym,
                color=c,
                s=6 if kind == "yield" else 14,
                linewidths=0,
                alpha=0.6 if kind == "yield" else 1,
                zorder=3,
            )
    st = stats[key]
    ax.set_title(
        f"{r['label']}: spinning {st['spin_ms']:.1f} ms of {ncpu * (t1 - t0) / 1e6:.0f} pCPU-ms", fontsize=8, loc="left"
    )
    ax.set_yticks(list(range(ncpu)) + [ncpu], [f"pCPU {c}" for c in range(ncpu)] + ["owner off"], fontsize=7)
    ax.set_ylim(ncpu + 0.6, -0.6)
    ax.set_xlim(0, ms(t1))
axes[-1].set_xlabel(f"time since t = {t0 / 1e6:.1f} ms (ms)")
handles = [Patch(color=colour(d, 1), label=sc0["domains"][d]["name"]) for d in range(ndom)]
handles += [
    Patch(facecolor="white", edgecolor="grey", hatch="////", label="spinning"),
    Patch(facecolor="black", label="critical section (strip)"),
]
handles += [
    Line2D([], [], ls="", marker=MARK[k][0], color=MARK[k][1], label=k) for k in ("yield", "poll", "kick", "boost")
]
fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=7, frameon=False, bbox_to_anchor=(0.5, -0.06))
fig.tight_layout()
fig.savefig(out / "figure.pdf", bbox_inches="tight", metadata={"CreationDate": None, "ModDate": None})

# %%
macros = {
    "window/start-ms": f"{t0 / 1e6:.1f}",
    "window/length-ms": f"{(t1 - t0) / 1e6:.0f}",
    "window/gap-ms": f"{(gap['t1'] - gap['t0']) / 1e6:.1f}",
    "seed": str(seed),
    "vms": str(VMS),
}
for key, st in stats.items():
    macros[f"{key}/spin-ms"] = f"{st['spin_ms']:.1f}"
    macros[f"{key}/spin-pct"] = f"{100 * st['spin_ms'] / (ncpu * (t1 - t0) / 1e6):.0f}"
    macros[f"{key}/owner-off-ms"] = f"{st['owner_off_ms']:.1f}"
    macros[f"{key}/acquired"] = str(st["acquired"])
    for k in ("yield", "poll", "kick", "boost", "switch"):
        macros[f"{key}/{k}s"] = str(st[k])
write_macros(out / "macros.tex", "mechanism", macros)

wl = study["sim_workload"]
lock = wl["lock"]
trace_hash = hashlib.sha256("".join(f"{k} {r['sha256']}\n" for k, r in runs.items()).encode()).hexdigest()
rl = sc0["xen"].get("ratelimit_us", 1000)
rl_text = "ratelimit off" if not rl else f"ratelimit {rl}\\,us"
lock_text = {
    "queued-yield": "queued (FIFO)",
    "spin-yield": "test-and-set",
    "ticket": "ticket",
    "pv-ticket": "PV ticket",
    "tas": "test-and-set",
}.get(lock["type"], latex_escape(lock["type"]))
why = {"grantee": "a waiter the FIFO lock was handed to", "holder": "the lock holder"}[gap["why"]]
var_text = "; ".join(
    f"({chr(97 + i)}) {latex_escape(r['label'])}: {stats[k]['spin_ms']:.1f} ms spinning, "
    + count_phrase(
        [
            (stats[k]["yield"], "yield", "yields"),
            (stats[k]["poll"], "poll", "polls"),
            (stats[k]["kick"], "kick", "kicks"),
        ]
    )
    for i, (k, r) in enumerate(runs.items())
)
caption = (
    f"Mechanism, sim testbed (seed {seed}). S0's guest workload: {VMS} VMs $\\times$ {wl['vcpus_per_vm']} vCPUs on "
    f"{ncpu} pCPUs (credit1, {rl_text}), each vCPU computing exp({wl['job']['compute_us']['mean']}\\,us) quanta "
    f"between critical sections (exp({lock['hold_us']['mean']}\\,us)) under one of {lock['nlocks']} {lock_text} "
    f"spinlocks per VM, spin threshold {lock['spin_threshold_us']}\\,us. Window: "
    f"{t0 / 1e6:.1f}--{t1 / 1e6:.1f}\\,ms, chosen automatically as the first time (after 50\\,ms) that a lock's owner "
    f"-- here {why} (vm{gap['dom']} vCPU {gap['vcpu']}) -- is off-CPU for at least 1\\,ms while a sibling spins "
    f"(it stays off for {(gap['t1'] - gap['t0']) / 1e6:.1f}\\,ms in the first variant). "
    f"Rows are pCPUs; bar colour is the domain, shade the vCPU; hatched bars are spinning, black strips critical "
    f"sections; markers above the bars are yields, polls, kicks and BOOSTs; the bottom row marks a lock owner off-CPU. Variants: {var_text}. "
    f"One traced run per variant, so no error bars. Regenerate: \\texttt{{snakemake -c2 paper/generated/mechanism/figure.pdf}}; "
    f"traces \\texttt{{sha256:{trace_hash[:16]}}}.\n"
)
(out / "caption.tex").write_text(caption)
print(caption)
