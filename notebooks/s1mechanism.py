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
# # S1 mechanism: the mistaken BOOST on one timeline (sim testbed)
# One short traced run of S1's co-run point (request/response scenario: the I/O VM and the CPU-bound VM pinned
# to one pCPU) per wake path.  The window is chosen from the `bug` variant's trace: the first kick-away whose
# chain completes -- the running CPU-bound vCPU marked for migration when the I/O vCPU wakes, switched out,
# migrated when its context is saved, re-woken, and BOOSTed by that re-wake.  The same window (same seed, same
# start) is shown for the `fixed` variant.

# %% tags=["parameters"]
study = ""  # the study it draws; empty: config/config.yaml's (figures: s1mechanism)
studies_dir = "config/studies"
out_dir = "paper/generated/s1mechanism"
seed = 1

# %%
import hashlib
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from schedlab import config
from schedlab.report.notebook import mechanism_setup
from schedlab.report.tables import count_phrase, latex_escape, of_n, write_macros
from schedlab.testbeds import sim

study, out = mechanism_setup(study, studies_dir, out_dir, figure="s1mechanism")
SCENARIO = "rr"  # S1's request/response scenario: one transaction in flight, so every wake waits on the wake path
DURATIONS_S = (0.3, 1.0, 3.0)  # the bug variant's run is lengthened until the trace holds a complete chain
LENGTH_MS, LEAD_MS = 40.0, 1.0  # window: from LEAD_MS before the chain's kick-away, LENGTH_MS long
ZOOM_LEAD_US, ZOOM_US = 10.0, 120.0  # the zoom on the chain itself
VARIANTS = ["bug", "fixed"]
for v in VARIANTS:
    if v not in study["variants"]:
        raise config.ConfigError(f"{study['_file']}: field variants: the S1 mechanism figure needs a variant {v!r}")


# %%
def run_variant(variant, duration_s, tmp):
    scs = dict(sim.SimTestbed().scenarios(study, variant, {"mode": "corun"}, seed))
    tf = Path(tmp) / f"{variant}.jsonl"
    sc = {k: v for k, v in scs[SCENARIO].items() if k != "warmup_s"}
    sc.update(duration_s=float(duration_s), trace={"file": str(tf), "limit": 5_000_000})
    res = sim.run_scenario(sc)
    events = sim.read_trace(tf)
    names = [d["name"] for d in sc["domains"]]
    return {
        "label": study["variants"][variant].get("label", variant),
        "scenario": sc,
        "result": res,
        "events": events,
        "sha256": hashlib.sha256(tf.read_bytes()).hexdigest(),
        "io": names.index("io"),
        "cpu": names.index("cpu"),
        "end_ns": int(sc["duration_s"] * 1e9),
    }


runs = {}
with tempfile.TemporaryDirectory() as tmp:
    for duration_s in DURATIONS_S:  # the window is chosen on the bug variant's trace
        runs["bug"] = run_variant("bug", duration_s, tmp)
        try:
            t0, t1, chain = sim.boost_chain_window(sim.boost_chains(runs["bug"]["events"]), LENGTH_MS, LEAD_MS)
            break
        except sim.RunFailed:
            if duration_s == DURATIONS_S[-1]:
                raise
    runs["fixed"] = run_variant("fixed", t1 / 1e9 + 0.001, tmp)
z0 = int(chain["kick"] - ZOOM_LEAD_US * 1e3)
z1 = int(z0 + ZOOM_US * 1e3)


def stats_of(r):
    ev, io = r["events"], r["io"]
    chains = [c for c in sim.boost_chains(ev) if t0 <= c["kick"] < t1]
    waits = [w for w in sim.wake_waits(ev, io, 0, r["end_ns"]) if t0 <= w["wake"] < t1]
    waited = [min(w["run"] if w["run"] is not None else t1, t1) - w["wake"] for w in waits]
    return {
        "chains": chains,
        "kickaways": len(chains),
        "migrations": sum(1 for c in chains if c["migrate"] is not None),
        "moved": sum(1 for c in chains if c["moved"]),
        "mboosts": sum(1 for c in chains if c["boost"] is not None),
        "boosts": sum(1 for e in ev if e["ev"] == "TRC_CSCHED_BOOST_START" and t0 <= e["t_ns"] < t1),
        "wakes": len(waits),
        "tickled": sum(1 for w in waits if w["tickled"]),
        "wait_ms": sum(waited) / 1e6,
        "maxwait_ms": max(waited, default=0) / 1e6,
        "meanwait_ms": sum(waited) / max(1, len(waited)) / 1e6,
        "switches": sum(1 for e in ev if e["ev"] == "TRC_SCHED_SWITCH" and t0 <= e["t_ns"] < t1),
        "waits": waits,
    }


stats = {k: stats_of(r) for k, r in runs.items()}
# the I/O vCPU's first wake after the chain's BOOST: it finds the kicked vCPU BOOSTed too and does not preempt it
after = next(w for w in stats["bug"]["waits"] if w["wake"] > chain["boost"])
after_wait_ms = (min(after["run"] or t1, t1) - after["wake"]) / 1e6
{
    k: {m: (round(v, 3) if isinstance(v, float) else v) for m, v in s.items() if m not in ("chains", "waits")}
    for k, s in stats.items()
}

# %% [markdown]
# Timeline: one panel per wake path, the chain zoomed on the left (microseconds), the whole window on the
# right (milliseconds).  Rows: what pCPU 0 executes (colour = VM); the I/O vCPU runnable but not running; each
# vCPU's BOOST (hatched: a BOOST given by a migration re-wake).  Markers on the pCPU row: the I/O vCPU's wakes
# (o), kick-aways (x), migrations (diamond), BOOSTs on a migration re-wake (^).

# %%
C_IO, C_CPU = "tab:blue", "tab:orange"
MARK = {
    "wake": ("o", "tab:blue"),
    "kick": ("X", "tab:red"),
    "migrate": ("D", "tab:purple"),
    "boost": ("^", "tab:green"),
}
MARK_Y = {"wake": -0.6, "kick": -0.85, "migrate": -1.1, "boost": -1.35}  # one lane per marker kind
ROWS = ["pCPU 0", "I/O vCPU waits", "BOOST: I/O vCPU", "BOOST: CPU vCPU"]
pcpu = chain["cpu"]


def segments(r):
    """(t0, t1, dom) runs of pCPU `pcpu` from TRC_SCHED_SWITCH."""
    out, cur, since = [], None, 0
    for e in r["events"]:
        if e["ev"] == "TRC_SCHED_SWITCH" and e["cpu"] == pcpu:
            if cur is not None and e["t_ns"] > since:
                out.append((since, e["t_ns"], cur))
            cur, since = (e["dom"] if e["dom"] >= 0 else None), e["t_ns"]
    if cur is not None:
        out.append((since, r["end_ns"], cur))
    return out


def draw(ax, r, st, a, b, scale):
    x = lambda t: (t - a) / scale  # noqa: E731
    clip = [(max(s, a), min(e, b), d) for s, e, d in segments(r) if e > a and s < b]
    for dom, c in ((r["io"], C_IO), (r["cpu"], C_CPU)):
        ax.broken_barh([(x(s), x(e) - x(s)) for s, e, d in clip if d == dom], (-0.4, 0.8), facecolors=c, linewidth=0)
    w = [(max(v["wake"], a), min(v["run"] if v["run"] is not None else b, b)) for v in st["waits"]]
    ax.broken_barh(
        [(x(s), x(e) - x(s)) for s, e in w if e > s and e > a and s < b], (0.65, 0.7), facecolors="tab:red", linewidth=0
    )
    for bi in sim.boost_intervals(r["events"], r["end_ns"]):
        if bi["t1"] <= a or bi["t0"] >= b:
            continue
        row = 2 if bi["dom"] == r["io"] else 3
        s, e = max(bi["t0"], a), min(bi["t1"], b)
        ax.broken_barh(
            [(x(s), x(e) - x(s))],
            (row - 0.3, 0.6),
            facecolors="white" if bi["migration"] else "0.6",
            edgecolors="0.3",
            hatch="////" if bi["migration"] else None,
            linewidth=0.5,
        )
    pts = {
        "wake": [v["wake"] for v in sim.wake_waits(r["events"], r["io"], 0)],
        "kick": [c["kick"] for c in st["chains"]],
        "migrate": [c["migrate"] for c in st["chains"] if c["migrate"] is not None],
        "boost": [c["boost"] for c in st["chains"] if c["boost"] is not None],
    }
    for k, ts in pts.items():
        ts = [t for t in ts if a <= t < b]
        if ts:
            ax.scatter(
                [x(t) for t in ts],
                [MARK_Y[k]] * len(ts),
                marker=MARK[k][0],
                color=MARK[k][1],
                s=10 if k == "wake" else 18,
                linewidths=0,
                zorder=3,
            )
    ax.set_xlim(0, x(b))
    ax.set_ylim(len(ROWS) - 0.5, -1.6)


fig, axes = plt.subplots(
    len(runs), 2, figsize=(7.5, 1.75 * len(runs) + 0.3), sharey=True, gridspec_kw={"width_ratios": [1, 2]}
)
for i, (key, r) in enumerate(runs.items()):
    st = stats[key]
    draw(axes[i][0], r, st, z0, z1, 1e3)
    draw(axes[i][1], r, st, t0, t1, 1e6)
    axes[i][1].axvspan((z0 - t0) / 1e6, (z1 - t0) / 1e6, color="0.85", zorder=0)
    axes[i][0].set_yticks([-0.975, *range(len(ROWS))], ["events", *ROWS], fontsize=7)
    axes[i][0].set_title(f"({chr(97 + i)}) {r['label']}: zoom", fontsize=8, loc="left")
    events = count_phrase(
        [(st["kickaways"], "kick-away", "kick-aways"), (st["mboosts"], "BOOST on re-wake", "BOOSTs on re-wake")]
    )
    axes[i][1].set_title(
        f"{events[0].upper()}{events[1:]}; {st['wakes']} I/O wakes, mean wait {st['meanwait_ms']:.2f} ms",
        fontsize=8,
        loc="left",
    )
    for ax in axes[i]:
        ax.tick_params(labelsize=7)
axes[-1][0].set_xlabel(f"µs since t = {z0 / 1e6:.3f} ms", fontsize=7)
axes[-1][1].set_xlabel(f"ms since t = {t0 / 1e6:.1f} ms (grey: the zoom)", fontsize=7)
handles = [
    Patch(color=C_IO, label="I/O VM runs"),
    Patch(color=C_CPU, label="CPU-bound VM runs"),
    Patch(color="tab:red", label="I/O vCPU runnable, waiting"),
    Patch(facecolor="0.6", label="BOOST"),
    Patch(facecolor="white", edgecolor="0.3", hatch="////", label="BOOST from a migration re-wake"),
]
handles += [
    Line2D(
        [],
        [],
        ls="",
        marker=m,
        color=c,
        label={"wake": "I/O vCPU wakes", "kick": "kick-away", "migrate": "migration", "boost": "BOOST on re-wake"}[k],
    )
    for k, (m, c) in MARK.items()
]
fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=7, frameon=False, bbox_to_anchor=(0.5, -0.09))
fig.tight_layout()
fig.savefig(out / "figure.pdf", bbox_inches="tight", metadata={"CreationDate": None, "ModDate": None})

# %%
us = lambda t: f"{(t - chain['kick']) / 1e3:.0f}"  # noqa: E731
macros = {
    "window/start-ms": f"{t0 / 1e6:.1f}",
    "window/length-ms": f"{LENGTH_MS:.0f}",
    "seed": str(seed),
    "zoom/length-us": f"{ZOOM_US:.0f}",
    "chain/kick-ms": f"{chain['kick'] / 1e6:.1f}",
    "chain/off-us": us(chain["off"]),
    "chain/migrate-us": us(chain["migrate"]),
    "chain/boost-us": us(chain["boost"]),
    "chain/next-wake-us": us(after["wake"]),
    "chain/next-wait-ms": f"{after_wait_ms:.1f}",
}
for key, st in stats.items():
    for k in ("kickaways", "migrations", "moved", "mboosts", "boosts", "wakes", "tickled", "switches"):
        macros[f"{key}/{k}"] = str(st[k])
    for k in ("wait_ms", "maxwait_ms", "meanwait_ms"):
        macros[f"{key}/{k.replace('_', '-')}"] = f"{st[k]:.2f}"
    # the window's events as words, the zeros gathered ("no kick-aways or BOOSTs on re-wake")
    macros[f"{key}/events"] = count_phrase(
        [
            (st["kickaways"], "kick-away", "kick-aways"),
            (st["migrations"], "migration", "migrations"),
            (st["mboosts"], "BOOST on a migration re-wake", "BOOSTs on a migration re-wake"),
        ]
    )
    macros[f"{key}/tickled-of-wakes"] = of_n(st["tickled"], st["wakes"])
write_macros(out / "macros.tex", "s1mechanism", macros)

trace_hash = hashlib.sha256("".join(f"{k} {r['sha256']}\n" for k, r in runs.items()).encode()).hexdigest()
sc0 = runs["bug"]["scenario"]
wl = study["sim_workload"]
ncpu = sc0["host"]["sockets"] * sc0["host"]["cores_per_socket"] * sc0["host"].get("threads_per_core", 1)
rl = sc0["xen"].get("ratelimit_us", 1000)
var_text = "; ".join(
    f"({chr(97 + i)}) {latex_escape(r['label'])}: "
    + count_phrase(
        [
            (stats[k]["kickaways"], "kick-away", "kick-aways"),
            (stats[k]["mboosts"], "BOOST on a migration re-wake", "BOOSTs on a migration re-wake"),
        ]
    )
    + f", {of_n(stats[k]['tickled'], stats[k]['wakes'])} wakes of the I/O vCPU tickle its pCPU at once, "
    f"{stats[k]['wait_ms']:.1f}\\,ms waiting in all (mean {stats[k]['meanwait_ms']:.2f}\\,ms, longest "
    f"{stats[k]['maxwait_ms']:.2f}\\,ms)"
    for i, (k, r) in enumerate(runs.items())
)
caption = (
    f"S1's mechanism, sim testbed (seed {seed}): the co-run point's request/response scenario, the I/O VM and "
    f"the CPU-bound VM (one vCPU each) pinned to pCPU {wl['pin_cpu']} of {ncpu} (credit1, ratelimit {rl}\\,us). "
    f"Window: {t0 / 1e6:.1f}--{t1 / 1e6:.1f}\\,ms, chosen automatically on the bug variant's trace as the first "
    f"kick-away whose chain completes (the running vCPU marked for migration when the I/O vCPU wakes, switched "
    f"out, migrated at context save, re-woken and BOOSTed by the re-wake), from {LEAD_MS:.0f}\\,ms before it for "
    f"{LENGTH_MS:.0f}\\,ms; left, the first {ZOOM_US:.0f}\\,\\textmu s from {ZOOM_LEAD_US:.0f}\\,\\textmu s "
    f"before the kick-away. Rows: what pCPU {pcpu} runs, the I/O vCPU runnable but waiting, and each vCPU's "
    f"BOOST (hatched: given by a migration re-wake); markers: the I/O vCPU's wakes, kick-aways, migrations and "
    f"BOOSTs on re-wake. Counts in the window, from the traces: {var_text}. One traced run per variant, so no "
    f"error bars. Regenerate: \\texttt{{snakemake -c2 paper/generated/s1mechanism/figure.pdf}}; traces "
    f"\\texttt{{sha256:{trace_hash[:16]}}}.\n"
)
(out / "caption.tex").write_text(caption)
print(caption)
