"""What every study notebook does first and last, so the notebooks themselves
hold only their study's choices (which comparison, which figure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from schedlab import config
from schedlab.core.files import atomic_write
from schedlab.report import data as rdata
from schedlab.report.tables import StudyTable, fmt_bracket, fmt_signed, latex_escape

# stats.bootstrap_ratio_ci's `method`, as the text names it
RATIO_METHODS = {
    "log-t": "log-ratio $t$",
    "BCa": "BCa bootstrap",
    "fieller": "Fieller",
    "percentile": "percentile bootstrap",
}


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


def repo_root(start: Path | None = None) -> Path:
    """The repository root, whether the kernel runs there (papermill --cwd .) or
    in notebooks/ (JupyterLab)."""
    p = (start or Path.cwd()).resolve()
    for cand in (p, *p.parents):
        if (cand / "Snakefile").exists() and (cand / "config" / "studies").is_dir():
            return cand
    return config.ROOT


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
    # (bimodal runs), "student" (ministat's). No study file chooses one yet: all use Welch.
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
        self.runs = rdata.load_runs(self.data_dir, self.testbed, self.study_name)
        self.axes = list(config.testbed_settings(self.study, self.testbed)["axes"])
        self.table = StudyTable(
            self.study, self.testbed, self.runs, self.out_dir, self.confidence, self.margin_pct, self.test
        )

    @property
    def comparisons(self) -> pd.DataFrame:
        return self.table.cmp

    def metric(self, name: str) -> dict:
        return next(m for m in self.study["metrics"] if m["name"] == name)

    def label(self, variant: str) -> str:
        return self.study["variants"][variant]["label"]

    def save_figure(self, fig) -> Path:
        path = self.out_dir / f"{self.testbed}-figure.pdf"
        self.out_dir.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, bbox_inches="tight", metadata={"CreationDate": None, "ModDate": None})
        return path

    def setup_tex(self) -> str:
        """The study's setup as run, from the study file and the records' provenance."""
        s, tb = self.study, self.testbed
        st = config.testbed_settings(s, tb)
        prov = rdata.provenance_summary(self.data_dir, tb, self.study_name, self.runs)
        axes = "; ".join(
            f"{latex_escape(a)} $\\in$ \\{{{', '.join(latex_escape(str(v)) for v in vals)}\\}}"
            for a, vals in st["axes"].items()
        )
        variants = "; ".join(
            f"\\texttt{{{latex_escape(v)}}} ({latex_escape(d['label'])})" for v, d in s["variants"].items()
        )
        tbd = prov["testbeds"][0] if prov["testbeds"] else {}
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
            f"\\paragraph{{Setup as run ({tb}).}} Points: {axes}. Variants: {variants}; "
            f"baseline \\texttt{{{latex_escape(s['baseline'])}}}. "
            f"{st['runs']} measured runs per point after {st['warmup']} discarded warm-up run(s), "
            f"{prov['n_runs']} runs in all, in a seeded interleaved order (plan seed {prov['plan_seed']}). "
            f"Testbed: {tb_text}. Code: commit {', '.join(latex_escape(c) for c in prov['repo_commits'])}.\n"
        )

    def comparison_macros(self) -> dict[str, str]:
        """For the text, per comparison VARIANT/POINT/METRIC: `d/...` the difference in %
        (signed), `ci/...` its interval "[lo, hi]" in % at the row's Holm-adjusted level (as
        in the table; excludes 0 exactly when significant), `sig/...` "significant" or "not
        significant" (Holm-adjusted), `p/...` the adjusted p-value; `ncmp`, `nsig`: how many
        comparisons the table has and how many of them are significant."""
        cmp = self.table.cmp
        out = {"ncmp": str(len(cmp)), "nsig": str(int(cmp["significant"].sum())) if len(cmp) else "0"}
        for _, c in cmp.iterrows():
            pid = config.point_id({a: c[a] for a in self.axes})
            key = f"{c['variant']}/{pid}/{c['metric']}"
            out[f"d/{key}"] = fmt_signed(c["pct"])
            out[f"ci/{key}"] = fmt_bracket(c["pct_low"], c["pct_high"])
            out[f"sig/{key}"] = "significant" if c["significant"] else "not significant"
            out[f"p/{key}"] = f"{c['p_holm']:.2g}"
        return out

    def finish(self, extra_macros: dict[str, str] | None = None) -> dict:
        side = self.table.write({**self.comparison_macros(), **(extra_macros or {})})
        atomic_write(self.out_dir / f"{self.testbed}-setup.tex", self.setup_tex())
        return side
