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
# # The simulator against real credit1, event by event and effect by effect
# Scenarios of `config/validation.yaml` run on the simulator (several seeds; the run stage's
# records, listed in `runs`: this notebook reads them, it never runs the simulator) beside the
# qemu records of the same studies that carry an xentrace of every scheduler event
# (`counters.sched_events`). The real side's unit is the boot: a run enters as its boot's
# mean, and every interval counts boots. Rates per scheduler event and per 30 ms accounting
# period of guest time, and the guests' run-time shares: a row agrees when the interval of
# sim/qemu lies inside the quantity's band, real Xen's own spread across boots. Effects: each
# study's own comparison on both sides. A scenario is validated by the rule in the file
# (docs/validation.md). Writes `paper/generated/validation/`: table.tex (the paper's: one row
# per case, a few quantities), table-full.tex and table.csv (every quantity), cells.json (the
# sidecar), macros.tex (the section's numbers), effects.tex and effects.csv (the effect
# table), scenarios.csv (the verdicts of the model and of each scenario's variants swapped:
# the kill matrix's first rows), effects.pdf/png (the central figure) and figure.pdf/png
# (every rate).

# %% tags=["parameters"]
config_file = "config/validation.yaml"
data_dir = "data"
runs = "data/runs/validation/model.json"  # the mirror's runs (python -m schedlab.mirror run)
out_dir = "paper/generated/validation"
scenario = ""  # one scenario by name; empty: all

# %%
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import seaborn as sns

from schedlab import config
from schedlab.report import validation
from schedlab.report.notebook import repo_root

root = repo_root()
cfg = validation.load(root / config_file)
res = validation.build(cfg, root / data_dir, config.load_config()["seed"], scenario or None, runs=root / runs)
paths = validation.write_outputs(res, root / out_dir, cfg)
print("\n".join(validation.summary(res)))
res["scenarios"]

# %% [markdown]
# The paper's table: one row per scenario x variant x point, the sim/qemu ratio (or the
# share difference in points) of the most telling quantities with its interval and a mark
# (agree, miss, calibration point, not counted), the cases without traced qemu runs in one
# line per scenario. The section's numbers (macros.tex): the counts per verdict, the rule,
# the scenario verdicts, every compared row and every effect.

# %%
print(paths["tex"].read_text())
text_macros = validation.macros(res, cfg)
{k: v for k, v in text_macros.items() if "/" not in k or k.count("/") == 1}

# %% [markdown]
# The central figure: each study's own comparison, b over a as a % change of its metric, on
# real Xen (over boots) and on the mirror (over seeds), each with its 95 % interval.
# Reproduced: Xen's interval excludes no change and the mirror's excludes it on the same
# side. A real effect with fewer than five boots a side is untestable: drawn as a point, no interval.

# %%
eff = res["effects"]
scs = {s["name"]: s for s in cfg["scenarios"]}


def fin(x):
    return x if x is not None and math.isfinite(x) and x > 0 else math.nan


labels = [f"{scs[r.scenario]['qemu']['study'].upper()} {r.b} vs {r.a}\n{r.metric}, {r.point}" for r in eff.itertuples()]
sns.set_theme(style="whitegrid", context="paper")
fig, ax = plt.subplots(figsize=(6.4, 0.45 * max(len(eff), 1) + 1.2))
for i, r in enumerate(eff.itertuples()):
    for side, off, color in (("xen", -0.15, "tab:blue"), ("sim", 0.15, "tab:orange")):
        x, lo, hi = fin(getattr(r, side)), fin(getattr(r, f"{side}_low")), fin(getattr(r, f"{side}_high"))
        if not math.isfinite(x):
            continue
        if side == "xen" and r.verdict == "untestable":
            lo = hi = math.nan  # too few boots for a test: the paper shows no interval for it
        err = [[x - lo], [hi - x]] if math.isfinite(lo) and math.isfinite(hi) else None
        ax.errorbar(x, i + off, xerr=err, fmt="o" if err else "D", color=color, ms=5, capsize=2, elinewidth=1)
    mark = {"reproduced": "reproduced", "not reproduced": "NOT reproduced"}.get(r.verdict, r.verdict)
    ax.annotate(mark, (1.01, i), xycoords=("axes fraction", "data"), va="center", fontsize=7)
ax.axvline(1, color="grey", lw=0.8)
ax.set_xscale("log")  # ratios: -50 % and +100 % equally far from no change
ticks = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
ax.set_xticks(ticks, [f"{(t - 1) * 100:+.0f} %" if t != 1 else "0" for t in ticks])
ax.minorticks_off()
ax.set_yticks(range(len(eff)), labels, fontsize=7)
ax.invert_yaxis()
ax.set_xlabel("effect: change of the metric, b over a, log scale (95 % interval)")
# both series in the legend, whichever rows have them (the first row may have no real side)
for color, name in (("tab:blue", "real Xen (boots)"), ("tab:orange", "simulator (seeds)")):
    ax.errorbar([], [], xerr=[[], []], fmt="o", color=color, ms=5, capsize=2, elinewidth=1, label=name)
ax.legend(fontsize=7, loc="upper left")  # the first rows' points sit near no change, clear of it
fig.tight_layout()
(root / out_dir).mkdir(parents=True, exist_ok=True)
fig.savefig(root / out_dir / "effects.pdf")
fig.savefig(root / out_dir / "effects.png", dpi=150)
eff

# %% [markdown]
# Every rate both sides measured: the simulator's mean against qemu's, each with its
# interval, on log axes, the diagonal where they are equal. Filled: agree (the interval of
# sim/qemu inside the band); crosses: miss; hollow: not counted (a calibration point, one
# boot, no band). A zero is drawn on the axes' floor, whose tick is labelled 0.

# %%
df = res["rows"]
rates = df[(df["kind"] == "rate") & (df["verdict"] != validation.NOT_MEASURED)].copy()
pos = [v for c in ("qemu_mean", "sim_mean", "qemu_low", "sim_low") for v in rates[c] if v > 0 and math.isfinite(v)]
floor = min(pos) / 3 if pos else 1e-3
top = max([v for c in ("qemu_high", "sim_high", "qemu_mean", "sim_mean") for v in rates[c]
           if math.isfinite(v)] + [1.0]) * 3  # fmt: skip
fig, ax = plt.subplots(figsize=(6.4, 5.2))
xs = [floor, top]
ax.plot(xs, xs, color="tab:green", lw=0.8)
qs = sorted(set(rates["quantity"]))
palette = dict(zip(qs, sns.color_palette("husl", max(len(qs), 1))))
markers = {validation.AGREE: "o", validation.MISS: "X"}


def clip(v):
    return v if math.isfinite(v) and v > floor else floor


for r in rates.itertuples():
    x, y = clip(r.qemu_mean), clip(r.sim_mean)
    xerr = [[x - clip(r.qemu_low)], [clip(r.qemu_high) - x]] if math.isfinite(r.qemu_low) else None
    yerr = [[y - clip(r.sim_low)], [clip(r.sim_high) - y]] if math.isfinite(r.sim_low) else None
    counted = r.verdict in markers
    ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt=markers.get(r.verdict, "o"), color=palette[r.quantity], ms=5,
                mfc=palette[r.quantity] if counted else "none", elinewidth=0.8, capsize=2)  # fmt: skip
for q, c in palette.items():
    ax.plot([], [], "s", color=c, label=q)
ax.plot([], [], "o", color="grey", label="agree")
ax.plot([], [], "X", color="grey", label="miss")
ax.plot([], [], "o", color="grey", mfc="none", label="not counted")
# a zero has no place on a log axis: it is drawn on the axes' floor, which is labelled 0 (a tick,
# with a dotted line), half a decade inside the frame so its markers show whole
low = floor / 2
ax.axvline(floor, color="grey", lw=0.6, ls=":")
ax.axhline(floor, color="grey", lw=0.6, ls=":")
ax.set(xscale="log", yscale="log", xlim=(low, top), ylim=(low, top),
       xlabel="qemu (real credit1): mean rate over boots, interval", ylabel="sim: mean rate over seeds, interval",
       title="Rates per scheduler event and per 30 ms period")  # fmt: skip
decades = [10.0**k for k in range(math.ceil(math.log10(floor * 3)), math.floor(math.log10(top)) + 1)]
for set_ticks in (ax.set_xticks, ax.set_yticks):
    set_ticks([floor, *decades], ["0", *[f"$10^{{{round(math.log10(t))}}}$" for t in decades]])
ax.minorticks_off()
# the legend beside the axes, clear of the data
ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, frameon=False)
fig.set_size_inches(8.4, 5.2)
fig.tight_layout()
fig.savefig(root / out_dir / "figure.pdf")
fig.savefig(root / out_dir / "figure.png", dpi=150)
rates[["scenario", "variant", "point", "quantity", "qemu_n", "qemu_mean", "sim_mean", "ratio", "verdict", "reason"]]
