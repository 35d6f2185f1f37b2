"""What every study notebook does first and last, so the notebooks themselves
hold only their study's choices (which comparison, which figure)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from schedlab import config
from schedlab.core.files import atomic_write
from schedlab.report import data as rdata
from schedlab.report.tables import (
    StudyTable,
    axes_text,
    count_of,
    count_word,
    fmt_bracket,
    fmt_delta,
    fmt_signed_ci,
    latex_escape,
    metric_text,
    runs_text,
)

# why a comparison has no test, as the text says it (config.MIN_BOOTS: the paper's floor of units)
TOO_FEW_UNITS = f"fewer than {count_word(config.MIN_BOOTS)} boots in a variant"


def too_few(cmp: pd.DataFrame) -> str:
    """Why `cmp`'s untestable comparisons have no test, from their own reason (stats.compare_table:
    "3 boots in a variant, fewer than the 5 a test needs"): the unit and floor of this testbed."""
    for reason in cmp.get("reason", pd.Series(dtype=object)).dropna():
        m = re.match(r"\d+ (\w+?)s? in a variant, fewer than the (\d+)", str(reason))
        if m:
            return f"fewer than {count_word(int(m.group(2)))} {m.group(1)}s in a variant"
    return TOO_FEW_UNITS


# stats.bootstrap_ratio_ci's `method`, as the text names it
RATIO_METHODS = {
    "log-t": "log-ratio $t$",
    "BCa": "BCa bootstrap",
    "fieller": "Fieller",
    "percentile": "percentile bootstrap",
}


def significance_phrase(cmp: pd.DataFrame, one: str = "comparison", many: str = "comparisons", owner="the table's"):
    """How many of the comparisons `cmp` (compare_study's rows) are significant, as running text:
    "none of the table's twelve comparisons is significant"; only comparisons with enough units
    are tested, so an untestable one is counted apart, never as "not significant"."""
    tested = int((cmp["test"] != "untestable").sum())
    untested = len(cmp) - tested
    why = too_few(cmp[cmp["test"] == "untestable"])
    if tested == 0:
        every = f"all {'' if owner == 'the' else owner + ' '}{count_word(len(cmp))} {many} are"
        who = f"{owner} only {one} is" if len(cmp) == 1 else every
        return f"{who} untestable ({why})"
    more = ""
    if untested:
        one, many = f"tested {one}", f"tested {many}"
        more = f", and {count_word(untested)} more {'is' if untested == 1 else 'are'} untestable ({why})"
    nsig = int(cmp["significant"].sum())
    return count_of(nsig, tested, one, many, ("is significant", "are significant"), owner) + more


def ratio_method_text(methods) -> str:
    """The interval method(s) of bootstrap_ratio_ci results, for a caption or the text."""
    names = [RATIO_METHODS.get(m, m) for m in dict.fromkeys(methods)]
    return " / ".join(names)


def plot_limits(*arrays, pad: float = 0.08) -> tuple[float, float]:
    """A y range holding every finite value given, with a margin (unbounded interval
    ends are drawn to its edge)."""
    v = np.concatenate([np.asarray(a, float).ravel() for a in arrays])
    v = v[np.isfinite(v)]
    if not len(v):
        return -1.0, 1.0
    lo, hi = float(v.min()), float(v.max())
    m = pad * ((hi - lo) or max(abs(hi), 1.0))
    return lo - m, hi + m


def interval_yerr(pct, low, high, limits: tuple[float, float]):
    """errorbar's yerr (2 x n) for the intervals [low, high] around pct, an unbounded
    end clipped to `limits`; and the masks of the clipped low and high ends, to mark."""
    pct, low, high = (np.asarray(x, float) for x in (pct, low, high))
    lo_open, hi_open = np.isinf(low), np.isinf(high)  # NaN: no point there, not open
    lo = np.where(lo_open, limits[0], low)
    hi = np.where(hi_open, limits[1], high)
    return np.vstack([np.maximum(pct - lo, 0), np.maximum(hi - pct, 0)]), lo_open, hi_open


def t_errorbar(confidence: float = 95.0):
    """seaborn's `errorbar=` for the tables' means: the mean's t-interval over runs
    (deterministic, unlike seaborn's bootstrap "ci"); a single run: no bar."""
    from schedlab.report.tables import mean_ci

    def interval(values):
        m, h = mean_ci(np.asarray(values, float), confidence)
        return (m - h, m + h) if np.isfinite(h) else (m, m)

    return interval


T_ERRORBARS = "mean and its 95\\,\\% $t$-interval over runs, as in the table"


T_PAIRED = (
    "the table's interval of the difference: the paired $t$ over boots, each boot's difference of "
    "the two variants run in it, at the row's Holm-adjusted level, so it excludes 0 exactly where the "
    "table stars it"
)


def plot_differences(
    cmp: pd.DataFrame, metrics: list[dict], x, xlabel: str, base_label: str, labels=None, base_x: float | None = None
):
    """Per metric a panel of each variant's difference from its baseline (in % of the
    baseline's mean) with the table's interval: the figure of a paired design, whose interval is
    that of the per-boot paired differences (two per-variant bars would overlap where the paired
    test finds a difference). The x axis is numeric and spaced by value (`x`:
    an axis column of `cmp`, or a function of a comparison row); the y axis holds 0, drawn as a
    line, and every interval (an unbounded end drawn to the edge and marked by a triangle).
    Variants sharing an x are set apart by a small offset; `labels`: {variant: legend label}.
    `base_x`: where x is a variant's own value (a function), the baseline's, drawn as a hollow
    marker at 0 (its difference from itself) so the axis starts where the comparison does."""
    import matplotlib.pyplot as plt

    metrics = [m for m in metrics if (cmp["metric"] == m["name"]).any()]
    fig, axes = plt.subplots(1, len(metrics), figsize=(min(3.0 * len(metrics), 7.5), 2.4), squeeze=False)
    variants = list(dict.fromkeys(cmp["variant"]))
    xs_all = np.asarray(
        [float(x(r)) if callable(x) else float(r[x]) for _, r in cmp.iterrows()]
        + ([base_x] if base_x is not None else [])
    )
    span = float(np.ptp(xs_all)) if len(xs_all) else 0.0
    step = 0.025 * (span or 1.0)
    for ax, m in zip(axes[0], metrics):
        c = cmp[(cmp["metric"] == m["name"]) & np.isfinite(cmp["pct"].to_numpy(float))]
        limits = plot_limits(c["pct"], c["pct_low"], c["pct_high"], [0.0])
        for i, v in enumerate(variants):
            cv = c[c["variant"] == v]
            if not len(cv):
                continue
            xv = np.asarray([float(x(r)) if callable(x) else float(r[x]) for _, r in cv.iterrows()])
            xv = xv + (i - (len(variants) - 1) / 2) * step if len(variants) > 1 and not callable(x) else xv
            yerr, lo_open, hi_open = interval_yerr(cv["pct"], cv["pct_low"], cv["pct_high"], limits)
            color = "C0" if callable(x) else f"C{i}"  # x names the variant: one colour
            ax.errorbar(xv, cv["pct"], yerr=yerr, fmt="o", capsize=3, color=color, label=(labels or {}).get(v, v))
            ax.plot(xv[hi_open], [limits[1]] * int(hi_open.sum()), "^", color=color)
            ax.plot(xv[lo_open], [limits[0]] * int(lo_open.sum()), "v", color=color)
        if base_x is not None:
            ax.plot([base_x], [0.0], "o", mfc="white", color="C0")
        ax.set_ylim(*limits)
        ax.axhline(0, color="grey", lw=0.8)
        ticks = sorted(set(xs_all.tolist()))
        # a tick at every value; its label only where it clears the last one (a numeric axis reads
        # the unlabelled tick from its neighbours: 250 between 0 and 500)
        shown, last = [], None
        for t in ticks:
            keep = last is None or t - last >= 0.15 * (span or 1.0)
            shown.append(f"{t:g}" if keep else "")
            last = t if keep else last
        ax.set_xticks(ticks, shown)
        ax.tick_params(labelsize=7)
        pad = 0.12 * (span or 1.0)
        ax.set_xlim(min(ticks) - pad, max(ticks) + pad)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"Δ % {m.get('label', m['name']).split(' (')[0]}\n(vs {base_label})", fontsize=7)
    if len(variants) > 1 and not callable(x):
        handles, names = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, names, loc="lower center", ncols=len(names), fontsize=7, frameon=False)
        fig.tight_layout(rect=(0, 0.1, 1, 1))
    else:
        fig.tight_layout()
    return fig


class CalibrationError(ValueError):
    pass


def calibration_points(study: dict, text: str, testbed: str = "sim") -> set[tuple[str, str]]:
    """The (variant, point id) the sim's model was calibrated on, from the study file's text.

    The study files mark fitted parameters with a `CALIBRATED` comment that names the one
    point they were fitted on (`base, vms=1`, `none@2`, `mode=alone`); that point of the
    baseline variant is the calibration point. No marker: none. A marker that names no point,
    or several: CalibrationError naming the file. Only the sim testbed's model is calibrated."""
    lines = [ln for ln in text.splitlines() if "CALIBRATED" in ln]
    if testbed != "sim" or not lines:
        return set()
    axes = config.testbed_settings(study, testbed)["axes"]
    named = set()
    for axis, values in axes.items():
        for v in values:
            sv = re.escape(str(v))
            forms = [rf"\b{re.escape(axis)}={sv}\b", rf"@{sv}\b"]
            if isinstance(v, str):
                forms.append(rf"\b{sv}\b")  # a named value: `alone`
            if any(re.search(f, ln) for f in forms for ln in lines):
                named.add((axis, v))
    if len(named) != 1 or len(axes) != 1:
        what = ", ".join(f"{a}={v}" for a, v in sorted(named, key=str)) or "none"
        raise CalibrationError(
            f"{study.get('_file', study['study'])}: CALIBRATED comments must name exactly one point "
            f"of a one-axis study (found: {what})"
        )
    ((axis, v),) = named
    return {(study["baseline"], config.point_id({axis: v}))}


def _range(values) -> str:
    """Axis values for the text: "1--4" for consecutive integers, else "2, 6, 10"."""
    vals = list(values)
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in vals)
    if ints and len(vals) > 2 and vals == list(range(vals[0], vals[0] + len(vals))):
        return f"{vals[0]}--{vals[-1]}"
    return ", ".join(latex_escape(str(v)) for v in vals)


def _version(v) -> str:
    """A version for the text, without its build suffix: 4.17.5-schedlab-2f9 -> 4.17.5."""
    return latex_escape(re.split(r"[-+~]", str(v))[0])


def repo_root(start: Path | None = None) -> Path:
    """The repository root, whether the kernel runs there (papermill --cwd .) or
    in notebooks/ (JupyterLab)."""
    p = (start or Path.cwd()).resolve()
    for cand in (p, *p.parents):
        if (cand / "workflow" / "Snakefile").exists() and (cand / "config" / "studies").is_dir():
            return cand
    return config.ROOT


class SharedRecords(dict):
    """Records by run id that pandas' `attrs` propagation shares instead of deep-copying
    (every filtered or computed frame would copy them all); nothing may change them."""

    def __deepcopy__(self, memo):
        return self


@dataclass
class StudyContext:
    study_name: str
    testbed: str
    data_dir: Path
    out_dir: Path
    studies_dir: str = "config/studies"
    confidence: float = 95.0
    margin_pct: float | None = None
    # compare_table's test for the whole table: "welch" (log ratio of means), "permutation"
    # (bimodal runs), "student" (ministat's), "paired" (by round; a study's
    # testbeds.<tb>.analysis: paired selects it).
    test: str = "welch"
    study: dict = field(init=False)
    runs: pd.DataFrame = field(init=False)
    table: StudyTable = field(init=False)

    def __post_init__(self):
        root = repo_root()
        self.data_dir = (root / self.data_dir).resolve()
        self.out_dir = (root / self.out_dir).resolve()
        # The study as this testbed sees it: only the metrics it reports (`testbeds:`).
        self.study = config.for_testbed(
            config.load_study(root / self.studies_dir / f"{self.study_name}.yaml"), self.testbed
        )
        if self.margin_pct is None:
            self.margin_pct = self.study.get("equivalence_margin_pct")
        # the analysis the study file declared for this testbed before measuring
        settings = config.testbed_settings(self.study, self.testbed)
        if settings["analysis"] == "paired":
            self.test = "paired"
        # every run the manifest names; where the unit is the boot, the statistics average the
        # runs of a boot and count boots (tables.compare_study)
        self.runs = rdata.load_runs(self.data_dir, self.testbed, self.study_name)
        self.excluded: list[dict] = []
        # pandas deep-copies `attrs` into every frame an operation returns; with the records
        # there that copying was most of a notebook's run time. They are only read: shared.
        self.runs.attrs["records"] = SharedRecords(self.runs.attrs.get("records") or {})
        self.axes = list(config.testbed_settings(self.study, self.testbed)["axes"])
        study_file = root / self.studies_dir / f"{self.study_name}.yaml"
        self.calibrated = calibration_points(self.study, study_file.read_text(), self.testbed)
        self.table = StudyTable(
            self.study,
            self.testbed,
            self.runs,
            self.out_dir,
            self.confidence,
            self.margin_pct,
            self.test,
            calibrated=self.calibrated,
        )
        self.checks: dict[str, dict] = {}
        self.check_macros: dict[str, str] = {}
        self.figure_caption: str | None = None

    @property
    def comparisons(self) -> pd.DataFrame:
        return self.table.cmp

    def metric(self, name: str) -> dict:
        return next(m for m in self.study["metrics"] if m["name"] == name)

    def unit_values(self, variant: str, point: dict, metric: str) -> np.ndarray:
        """A cell's values, one per experimental unit: per boot the mean of its runs where the
        unit is the boot, else the runs themselves."""
        sel = self.runs["variant"] == variant
        for a, v in point.items():
            sel &= self.runs[a] == v
        cell = self.runs[sel]
        if self.table.per_boot:
            return cell.groupby("boot")[metric].mean().to_numpy(float)
        return cell[metric].to_numpy(float)

    def label(self, variant: str) -> str:
        return self.study["variants"][variant]["label"]

    def save_figure(self, fig, what: str = "", errorbars: str = "") -> Path:
        """Save the figure; `what` it shows and what its `errorbars` are become its caption
        (macro `figure/caption`), with the command that regenerates it and the data's hash."""
        path = self.out_dir / f"{self.testbed}-figure.pdf"
        self.out_dir.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, bbox_inches="tight", metadata={"CreationDate": None, "ModDate": None})
        cmd = f"snakemake -c2 paper/generated/{self.study_name}/{self.testbed}-figure.pdf"
        self.figure_caption = (
            (f"{what.rstrip('.')} ({self.testbed} testbed). " if what else f"{self.testbed} testbed. ")
            + (f"Error bars: {errorbars.rstrip('.')}. " if errorbars else "")
            + rf"Regenerate: \texttt{{{latex_escape(cmd)}}}; raw data \texttt{{sha256:{self.table.hash[:16]}}}."
        )
        return path

    def check(
        self,
        name: str,
        baselines: dict[str, str],
        metrics: list[str] | None = None,
        where=None,
        margin_pct: float | None = None,
    ) -> pd.DataFrame:
        """Comparisons the table does not make (a variant against another variant, an
        equivalence test against a margin the notebook states): one Holm family per call,
        over every (variant, point, metric) it compares; kept in the sidecar under `checks`
        (with the runs behind each) and as macros `check/NAME/VARIANT/POINT/METRIC/{d,ci,sig,p}`
        (+ `eq`, `eqp` with a margin) and `check/NAME/{margin,n}`.

        baselines: {variant: the variant it is compared with}; where: a predicate on a point
        (dict) selecting the points, default all."""
        from schedlab.report.tables import compare_study

        variants = set(baselines) | set(baselines.values())
        study = dict(self.study)
        study["variants"] = {
            v: {**d, "baseline": baselines.get(v, v)} for v, d in self.study["variants"].items() if v in variants
        }
        if metrics is not None:
            study["metrics"] = [m for m in self.study["metrics"] if m["name"] in metrics]
        runs = self.runs[self.runs["variant"].isin(variants)]
        if where is not None:
            keep = runs[self.axes].apply(lambda r: bool(where(dict(r))), axis=1)
            runs = runs[keep.to_numpy(bool)]
        cmp = compare_study(runs, study, self.testbed, self.confidence, margin_pct, self.test)
        macros = self.check_macros
        macros[f"check/{name}/n"] = str(len(cmp))
        if margin_pct:
            macros[f"check/{name}/margin"] = f"{margin_pct:g}"
        for i, c in cmp.iterrows():
            point = {a: c[a] for a in self.axes}
            pid = config.point_id(point)
            ref = c["baseline"]
            key = f"{name}/{c['variant']}/{pid}/{c['metric']}"

            def runs_of(v, point=point):
                sel = runs["variant"] == v
                for a in self.axes:
                    sel &= runs[a] == point[a]
                return sorted(runs.loc[sel, "run_id"])

            eq = c.get("equivalent")
            eq = None if eq is None or (isinstance(eq, float) and np.isnan(eq)) else bool(eq)
            self.checks[key] = {
                "check": name,
                "variant": c["variant"],
                "reference": ref,
                "point": {a: (v.item() if hasattr(v, "item") else v) for a, v in point.items()},
                "metric": c["metric"],
                "text": fmt_delta(c["pct"], c["pct_low"], c["pct_high"], "*" if c["significant"] else ""),
                "value": float(c["pct"]),
                "pct_low": float(c["pct_low"]),
                "pct_high": float(c["pct_high"]),
                "ci_level": float(c["ci_level"]),
                "test": c["test"],
                "p_holm": float(c["p_holm"]),
                "significant": bool(c["significant"]),
                "equivalent": eq,
                "margin_pct": margin_pct,
                "eq_p_holm": None if pd.isna(c.get("eq_p_holm")) else float(c["eq_p_holm"]),
                "family_size": len(cmp),
                "stat": (
                    f"difference in % of the {ref} mean, {c['ci_level']:.4g}% interval (Holm-adjusted over the "
                    f"{len(cmp)} comparisons of check {name}), {c['test']} test"
                    + (f"; TOST within +-{margin_pct:g}%, Holm-adjusted" if margin_pct else "")
                ),
                "runs": runs_of(c["variant"]),
                "baseline_runs": runs_of(ref),
            }
            macros[f"check/{key}/d"] = fmt_signed_ci(c["pct"], c.get("pct_low"), c.get("pct_high"))
            untestable = c.get("test") == "untestable"  # too few units: no interval, no test
            macros[f"check/{key}/ci"] = (
                "untestable" if untestable else fmt_bracket(c["pct_low"], c["pct_high"], value=c["pct"])
            )
            macros[f"check/{key}/sig"] = (
                too_few(cmp.loc[[i]])
                if untestable
                else "significant"
                if c["significant"]
                else "no detectable difference"
            )
            macros[f"check/{key}/p"] = f"{c['p_holm']:.2g}"
            if margin_pct:
                macros[f"check/{key}/eq"] = (
                    too_few(cmp.loc[[i]])
                    if untestable
                    else f"equivalent within $\\pm${margin_pct:g}\\,\\%"
                    if eq
                    else f"not shown equivalent within $\\pm${margin_pct:g}\\,\\%"
                )
                macros[f"check/{key}/eqp"] = f"{c['eq_p_holm']:.2g}" if not pd.isna(c.get("eq_p_holm")) else "--"
        return cmp

    def claim_checks(self) -> None:
        """The comparisons the study file's claim names under `check:` (one Holm family each,
        at the part's points and metrics, with its equivalence margin), for the verdict table
        and the text (`check/NAME/...`); parts whose variants this testbed does not run are
        left out (the verdict says so)."""
        for part in (self.study.get("claim") or {}).get("parts") or []:
            if not part.get("check"):
                continue
            ref = part.get("reference") or self.study["variants"][part["variant"]].get(
                "baseline", self.study["baseline"]
            )
            if not {part["variant"], ref} <= set(self.study["variants"]):
                continue
            pts = config.claim_points(self.study, self.testbed, part.get("where", "all"))
            self.check(
                part["check"],
                {part["variant"]: ref},
                [m for m in part["metrics"] if any(x["name"] == m for x in self.study["metrics"])],
                where=lambda p, pts=pts: p in pts,
                margin_pct=part.get("equivalent_within_pct"),
            )

    def setup_macros(self) -> dict[str, str]:
        """The setup as run, for one readable sentence in the text (never typed there):
        `setup/points/AXIS` ("1--3"), `setup/runs`, `setup/warmup`, `setup/opt/KEY` (the
        testbed's scalar options), `setup/workload/KEY` (scalar workload fields),
        `setup/design/KEY` (the scalar fields of the testbed's power design),
        `setup/metric/NAME` (label [unit]), `setup/conf` (the confidence level, %), and from
        the records: `setup/smp` (emulated pCPUs), `setup/xen`, `setup/kernel` (versions booted)."""
        st = config.testbed_settings(self.study, self.testbed)
        out = {f"setup/points/{a}": _range(v) for a, v in st["axes"].items()}
        out["setup/runs"], out["setup/warmup"] = str(st["runs"]), str(st["warmup"])
        out["setup/runs-text"] = runs_text(st["runs"], st["warmup"], st)
        out["setup/conf"] = f"{self.confidence:g}"
        for k, v in st["options"].items():
            if isinstance(v, (int, float, str)) and not isinstance(v, bool):
                out[f"setup/opt/{k}"] = latex_escape(str(v))
        for k, v in (self.study.get("workload") or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[f"setup/workload/{k}"] = str(v)
        design = self.study["testbeds"][self.testbed].get("design") or {}  # stated before measuring
        for k, v in design.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[f"setup/design/{k}"] = f"{v:g}"
        for m in self.study["metrics"]:
            out[f"setup/metric/{m['name']}"] = metric_text(m)
        recs = list((self.runs.attrs.get("records") or {}).values())
        smp = {(r["provenance"].get("testbed") or {}).get("smp") for r in recs} - {None}
        if len(smp) == 1:
            out["setup/smp"] = str(smp.pop())
        xen = {((r.get("counters") or {}).get("xen") or {}).get("xen_version") for r in recs} - {None}
        xen |= {((r["provenance"].get("testbed") or {}).get("booted") or {}).get("xen_version") for r in recs} - {
            None,
            "",
        }
        if xen:
            out["setup/xen"] = ", ".join(sorted({_version(x) for x in xen}))
        kern = {((r.get("counters") or {}).get("kernel") or {}).get("kernelrelease") for r in recs} - {None}
        kern |= {((r["provenance"].get("testbed") or {}).get("booted") or {}).get("release") for r in recs} - {None}
        if not kern:  # older Xen records: the dom0 kernel, which the guests boot too
            kern = {((r["provenance"].get("testbed") or {}).get("dom0") or {}).get("kernel") for r in recs} - {None}
        if kern:
            out["setup/kernel"] = ", ".join(sorted({_version(k) for k in kern}))
        return out

    def setup_tex(self) -> str:
        """The study's setup as run, from the study file and the records' provenance."""
        s, tb = self.study, self.testbed
        st = config.testbed_settings(s, tb)
        prov = rdata.provenance_summary(self.data_dir, tb, self.study_name, self.runs)
        axes = axes_text(st["axes"])
        # "base: base (yield is a no-op)", not "base (base (yield is a no-op))": labels hold parentheses
        variants = "; ".join(
            f"\\texttt{{{latex_escape(v)}}}: {latex_escape(d['label'])}" for v, d in s["variants"].items()
        )
        tbd = prov["testbeds"][0] if prov["testbeds"] else {}
        if tbd.get("icount_shift") is not None and "accel" in tbd:
            # Records before 2026-11-25 name the accel option, which icount overrides: say
            # what QEMU ran, as the testbed derives it
            from schedlab.machine import MachineOptions

            tbd = {**tbd, "accel": MachineOptions.of(tbd).accel_ran}
        from schedlab.report.methods import _short

        # A natively booted kernel runs no Xen: older records of such studies still name
        # the Xen testbed's xen_build.
        skip = {"xen_build"} if (s.get("workload") or {}).get("where") == "native" else set()
        tb_text = ", ".join(
            f"{latex_escape(str(k))} \\texttt{{{latex_escape(_short(v))}}}"
            for k, v in sorted(tbd.items())
            if isinstance(v, (str, int, float)) and k not in skip
        )
        return (
            # \sloppy: long unbreakable \texttt values (QEMU's version) must not run into the margin
            f"\\paragraph{{Setup as run ({tb}).}} {{\\sloppy Points: {axes}. Variants: {variants}; "
            f"baseline \\texttt{{{latex_escape(s['baseline'])}}}. "
            f"{runs_text(st['runs'], st['warmup'], st)}, "
            f"{prov['n_runs']} runs in all, in a seeded interleaved order (plan seed {prov['plan_seed']}). "
            f"Testbed: {tb_text}. Code: commit {', '.join(latex_escape(c) for c in prov['repo_commits'])}.\\par}}\n"
        )

    def comparison_macros(self) -> dict[str, str]:
        """For the text, per comparison VARIANT/POINT/METRIC: `d/...` the difference in %
        (signed), `ci/...` its interval "[lo, hi]" in % at the row's Holm-adjusted level (as
        in the table; excludes 0 exactly when significant), `sig/...` "significant" or "not
        significant" (Holm-adjusted), `p/...` the adjusted p-value; `ncmp`, `nsig`: how many
        comparisons the table has and how many of them are significant; `sigof` the two as a
        phrase ("none of the table's twelve comparisons is significant")."""
        cmp = self.table.cmp
        out = {"ncmp": str(len(cmp)), "nsig": str(int(cmp["significant"].sum())) if len(cmp) else "0"}
        if len(cmp):  # the same counts as a phrase for running text: "none of the table's twelve ..."
            out["sigof"] = significance_phrase(cmp)
        for i, c in cmp.iterrows():
            pid = config.point_id({a: c[a] for a in self.axes})
            key = f"{c['variant']}/{pid}/{c['metric']}"
            out[f"d/{key}"] = fmt_signed_ci(c["pct"], c["pct_low"], c["pct_high"])
            out[f"ci/{key}"] = fmt_bracket(c["pct_low"], c["pct_high"], value=c["pct"])
            out[f"sig/{key}"] = (
                "exact: the runs do not vary"
                if c.get("test") == "exact"
                else f"untestable: {too_few(cmp.loc[[i]])}"
                if c.get("test") == "untestable"
                else "significant"
                if c["significant"]
                else "no detectable difference"
            )
            out[f"p/{key}"] = f"{c['p_holm']:.2g}"
        return out

    def finish(self, extra_macros: dict[str, str] | None = None) -> dict:
        macros = {**self.comparison_macros(), **self.setup_macros(), **self.check_macros}
        excluded = getattr(self, "excluded", [])  # set by __post_init__; contexts built around a table have none
        if excluded:  # only then: the text says so with \IfValue
            macros["excluded/sharedboot"] = str(len(excluded))
        if self.figure_caption:
            macros["figure/caption"] = self.figure_caption
        side = self.table.write({**macros, **(extra_macros or {})}, self.checks, excluded)
        atomic_write(self.out_dir / f"{self.testbed}-setup.tex", self.setup_tex())
        # the figure's caption as the paper prints it, for the report (workflow/report/study-figure.rst)
        from schedlab.report.table_model import tex_html

        caption = tex_html(self.figure_caption) if self.figure_caption else "(no figure caption)"
        atomic_write(self.out_dir / f"{self.testbed}-figure-caption.html", f'<p class="caption">{caption}</p>\n')
        return side


def mechanism_setup(study_name: str, studies_dir: str, out_dir: str, figure: str = "") -> tuple[dict, Path]:
    """The study file and the output folder (created) of a figure of its own (config/config.yaml,
    figures:), whose notebook runs the simulator itself instead of reading records as StudyContext
    does; an empty `study_name` is the study config/config.yaml names for `figure`. The notebook's
    `studies_dir` and `out_dir` parameters are relative to the repository root, wherever the kernel
    runs (repo_root)."""
    root = repo_root()
    if not study_name:
        figures = config.load_yaml(root / "config" / "config.yaml")[0].get("figures") or {}
        if figure not in figures:
            raise config.ConfigError(f"config/config.yaml: field figures: no study for figure {figure!r}")
        study_name = figures[figure]
    study = config.load_study(root / studies_dir / f"{study_name}.yaml")
    out = (root / out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    return study, out
