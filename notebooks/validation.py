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
# # The simulator against real credit1, event by event
# Scenarios of `config/validation.yaml` run on the simulator (several seeds) beside the
# qemu records of the same studies that carry an xentrace of every scheduler event
# (`counters.sched_events`). Rates per scheduler event and per 30 ms accounting period of
# guest time, and the guests' run-time shares, each side with its t-interval; a row agrees
# when its interval overlaps the acceptance band fixed in the file (docs/validation.md).
# Writes `paper/generated/validation/`: table.tex (the paper's: one row per case, a few
# quantities), table-full.tex and table.csv (every quantity), cells.json (the sidecar: every
# cell with its qemu runs, and where the paper's table shows it), macros.tex (the section's
# numbers), figure.pdf and figure.png.

# %% tags=["parameters"]
config_file = "config/validation.yaml"
data_dir = "data"
out_dir = "paper/generated/validation"
scenario = ""       # one scenario by name; empty: all

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
df = validation.build(cfg, root / data_dir, config.load_config()["seed"], scenario or None)
paths = validation.write_outputs(df, root / out_dir, cfg)
print("\n".join(validation.summary(df)))
df

# %% [markdown]
# The paper's table: one row per scenario x variant x point, the sim/qemu ratio (or the
# share difference in points) of the most telling quantities with its interval and an
# agree / miss mark, the cases without traced qemu runs in one line per scenario. The
# section's numbers (macros.tex): the counts per verdict, the band, every compared row's
# means, ratio, interval and verdict, and each scenario's effect of its second variant.

# %%
print(paths["tex"].read_text())
text_macros = validation.macros(df, cfg)
{k: v for k, v in text_macros.items() if "/" not in k or k.count("/") == 1}

# %% [markdown]
# Every rate both sides measured: the simulator's mean against qemu's, each with its
# interval, on log axes. The shaded wedge is the acceptance band (sim/qemu within
# [0.5, 2]); a zero is drawn at the floor of the axes.

# %%
rates = df[(df["kind"] == "rate") & (df["verdict"] != validation.NOT_MEASURED)].copy()
pos = [v for c in ("qemu_mean", "sim_mean", "qemu_low", "sim_low") for v in rates[c] if v > 0 and math.isfinite(v)]
floor = min(pos) / 3 if pos else 1e-3
top = max([v for c in ("qemu_high", "sim_high", "qemu_mean", "sim_mean") for v in rates[c]
           if math.isfinite(v)] + [1.0]) * 3  # fmt: skip
lo_b, hi_b = cfg["band"]["ratio"]
sns.set_theme(style="whitegrid", context="paper")
fig, ax = plt.subplots(figsize=(6.4, 5.2))
xs = [floor, top]
ax.fill_between(xs, [x * lo_b for x in xs], [x * hi_b for x in xs], color="tab:green", alpha=0.15,
                label=f"band: sim/qemu in [{lo_b:g}, {hi_b:g}]")  # fmt: skip
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
    ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt=markers[r.verdict], color=palette[r.quantity], ms=5,
                elinewidth=0.8, capsize=2)  # fmt: skip
for q, c in palette.items():
    ax.plot([], [], "s", color=c, label=q)
ax.plot([], [], "o", color="grey", label="agree")
ax.plot([], [], "X", color="grey", label="miss")
ax.set(xscale="log", yscale="log", xlim=(floor, top), ylim=(floor, top),
       xlabel="qemu (real credit1): mean rate, 95 % interval", ylabel="sim: mean rate, 95 % interval",
       title="Rates per scheduler event and per 30 ms period")  # fmt: skip
ax.legend(fontsize=6, loc="upper left", ncol=2)
fig.tight_layout()
(root / out_dir).mkdir(parents=True, exist_ok=True)
fig.savefig(root / out_dir / "figure.pdf")
fig.savefig(root / out_dir / "figure.png", dpi=150)
rates[["scenario", "variant", "point", "quantity", "qemu_mean", "sim_mean", "ratio", "verdict", "reason"]]
