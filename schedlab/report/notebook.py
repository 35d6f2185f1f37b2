"""What every study notebook does first and last, so the notebooks themselves
hold only their study's choices (which comparison, which figure)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from schedlab import config
from schedlab.report import data as rdata
from schedlab.core.files import atomic_write
from schedlab.report.tables import StudyTable, _latex_escape


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
    study: dict = field(init=False)
    runs: pd.DataFrame = field(init=False)
    table: StudyTable = field(init=False)

    def __post_init__(self):
        root = repo_root()
        self.data_dir = (root / self.data_dir).resolve()
        self.out_dir = (root / self.out_dir).resolve()
        # The study as this testbed sees it: only the metrics it reports (`testbeds:`).
        self.study = config.for_testbed(config.load_study(root / self.studies_dir / f"{self.study_name}.yaml"),
                                        self.testbed)
        if self.margin_pct is None:
            self.margin_pct = self.study.get("equivalence_margin_pct")
        self.runs = rdata.load_runs(self.data_dir, self.testbed, self.study_name)
        self.axes = list(config.testbed_settings(self.study, self.testbed)["axes"])
        self.table = StudyTable(self.study, self.testbed, self.runs, self.out_dir,
                                self.confidence, self.margin_pct)

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
        axes = "; ".join(f"{_latex_escape(a)} $\\in$ \\{{{', '.join(_latex_escape(str(v)) for v in vals)}\\}}"
                         for a, vals in st["axes"].items())
        variants = "; ".join(f"\\texttt{{{_latex_escape(v)}}} ({_latex_escape(d['label'])})"
                             for v, d in s["variants"].items())
        tbd = prov["testbeds"][0] if prov["testbeds"] else {}
        from schedlab.report.methods import _short
        # A natively booted kernel runs no Xen: older records of such studies still name
        # the Xen testbed's xen_build.
        skip = {"xen_build"} if (s.get("workload") or {}).get("where") == "native" else set()
        tb_text = ", ".join(f"{_latex_escape(str(k))} \\texttt{{{_latex_escape(_short(v))}}}"
                            for k, v in sorted(tbd.items()) if isinstance(v, (str, int, float)) and k not in skip)
        return (f"\\paragraph{{Setup as run ({tb}).}} Points: {axes}. Variants: {variants}; "
                f"baseline \\texttt{{{_latex_escape(s['baseline'])}}}. "
                f"{st['runs']} measured runs per point after {st['warmup']} discarded warm-up run(s), "
                f"{prov['n_runs']} runs in all, in a seeded interleaved order (plan seed {prov['plan_seed']}). "
                f"Testbed: {tb_text}. Code: commit {', '.join(_latex_escape(c) for c in prov['repo_commits'])}.\n")

    def comparison_macros(self) -> dict[str, str]:
        """For the text, per comparison VARIANT/POINT/METRIC: `d/...` the difference in %
        (signed), `e/...` ministat's error, `sig/...` "significant" or "not significant"
        (Holm-adjusted, as in the table), `p/...` the adjusted p-value; `ncmp`, `nsig`: how many
        comparisons the table has and how many of them are significant."""
        cmp = self.table.cmp
        out = {"ncmp": str(len(cmp)), "nsig": str(int(cmp["significant"].sum())) if len(cmp) else "0"}
        for _, c in cmp.iterrows():
            pid = config.point_id({a: c[a] for a in self.axes})
            key = f"{c['variant']}/{pid}/{c['metric']}"
            out[f"d/{key}"] = f"{c['pct']:+.1f}".replace("-", "$-$")
            out[f"e/{key}"] = f"{c['pct_err']:.1f}"
            out[f"sig/{key}"] = "significant" if c["significant"] else "not significant"
            out[f"p/{key}"] = f"{c['p_holm']:.2g}"
        return out

    def finish(self, extra_macros: dict[str, str] | None = None) -> dict:
        side = self.table.write({**self.comparison_macros(), **(extra_macros or {})})
        atomic_write(self.out_dir / f"{self.testbed}-setup.tex", self.setup_tex())
        return side
