"""The workflow as Snakemake sees it: its profile, lints and format, the Conda route
(environment.yml from requirements.lock), the lab's lock, the notebooks' paired text
files, and the report's views of figures and tables."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import BIN, ROOT

PROFILE = ROOT / "workflow" / "profiles" / "default"


def pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, version = line.split("==")
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


def test_environment_yml_is_generated_from_the_lock():
    r = subprocess.run(
        [sys.executable, str(ROOT / "workflow" / "scripts" / "environment-yml")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert r.stdout == (ROOT / "environment.yml").read_text(), (
        "environment.yml is stale: workflow/scripts/environment-yml > environment.yml"
    )
    env = yaml.safe_load(r.stdout)
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    # --use-conda copies environment.yml alone: no -r/-e lines that point at other files
    assert not [p for p in pip if p.startswith("-")]
    assert len(pip) == len(pins(ROOT / "requirements.lock"))


def test_lab_lock_keeps_the_pipeline_pins():
    main, lab = pins(ROOT / "requirements.lock"), pins(ROOT / "requirements-lab.lock")
    assert {"jupyterlab", "jupytext", "ipykernel"} <= lab.keys()
    assert {k: (main[k], lab[k]) for k in main.keys() & lab.keys() if main[k] != lab[k]} == {}


def test_rules_need_no_installed_package():
    """Jobs run `python -m schedlab...` with PYTHONPATH set by the Snakefile (a conda env has
    no `pip install -e .`), never the `schedlab` console script."""
    assert "PYTHONPATH" in (ROOT / "workflow" / "Snakefile").read_text()
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        for m in re.finditer(r'"((?:[^"\\]|\\.)*)"', smk.read_text()):
            assert not re.match(r"\s*schedlab\s", m.group(1)), f"{smk.name}: {m.group(1)}"


def test_profile_holds_the_flags(env_path):
    prof = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert prof["cores"] == "all" and "testbed_host=1" in prof["resources"]
    assert prof["rerun-incomplete"] and prof["show-failed-logs"]
    makefile = (ROOT / "Makefile").read_text()
    # the profile beside the Snakefile (workflow/): Snakemake finds both by itself, unnamed
    assert "--resources" not in makefile and "--workflow-profile" not in makefile
    r = subprocess.run(
        [str(BIN / "snakemake"), "-n"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Using workflow specific profile workflow/profiles/default" in r.stderr


def test_snakemake_lint_and_snakefmt_are_clean(env_path):
    r = subprocess.run(
        [str(BIN / "snakemake"), "--lint"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env_path,
        timeout=300,
    )
    assert r.returncode == 0 and "Lints for" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-4000:]
    r = subprocess.run(
        [str(BIN / "snakefmt"), "--check", "."], cwd=ROOT, capture_output=True, text=True, env=env_path, timeout=300
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]


def test_notebooks_are_paired_with_percent_scripts():
    import jupytext

    nbs = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert nbs
    for nb_path in nbs:
        nb = json.loads(nb_path.read_text())
        assert nb["metadata"]["jupytext"]["formats"] == "ipynb,py:percent", nb_path.name
        py = nb_path.with_suffix(".py")
        assert py.exists(), f"{py.name} missing: jupytext --sync {nb_path.name}"
        assert jupytext.writes(jupytext.read(nb_path), fmt="py:percent") == py.read_text(), (
            f"{nb_path.name} and {py.name} differ: jupytext --sync notebooks/{nb_path.name}"
        )
        assert '# %% tags=["parameters"]' in py.read_text()  # papermill's cell survives the round trip


def test_report_marks_every_figure_and_table():
    text = (ROOT / "workflow" / "rules" / "report.smk").read_text()
    marked = re.findall(r'report\(\s*"([^"]+)",\s*caption="([^"]+)"', text)
    assert {Path(p).name for p, _ in marked} >= {
        "{testbed}-figure.png",
        "{testbed}-table.html",
        "figure.png",
        "table.html",
        "testbeds.html",
    }
    for _, caption in marked:
        assert (ROOT / "workflow" / "rules" / caption).resolve().is_file(), caption
    assert (ROOT / "workflow" / "report" / "workflow.rst").is_file()


def test_report_shows_the_validation_sensitivity_and_verdict_outputs():
    """The validation, sensitivity and verdict tables and figures are in the report as the
    study notebooks' are: marked with a caption, each table's HTML written with its LaTeX from
    one table model (no LaTeX-to-HTML step in the rule), and built by `make report`."""
    rules = {}
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        rules.update(_rules(smk))
    for rule, want in (
        ("validation", {"figure.pdf", "figure.png", "table.html", "table-full.html"}),
        ("sensitivity", {"{s}-tornado.{ext}", "table.html"}),
        ("verdicts", {"table.html", "coverage.html"}),
    ):
        text = rules[rule]
        marked = re.findall(r'report\(\s*f?"([^"]+)",\s*caption="([^"]+)"', text)
        assert {Path(p).name for p, _ in marked} >= want, rule
        for _, caption in marked:
            assert (ROOT / "workflow" / "rules" / caption).resolve().is_file(), caption
        assert "{input.view} table" not in text.split("    shell:", 1)[1], rule
    for rule in ("validation", "sensitivity", "verdicts"):
        assert f"rules.{rule}.output" in rules["report_items"]


VIEW = ROOT / "workflow" / "scripts" / "report-view"


def test_report_view_makes_a_png_of_a_pdf_figure(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1, 2], [2, 0, 1])
    fig.savefig(tmp_path / "f.pdf")
    subprocess.run(
        [sys.executable, str(VIEW), "figure", str(tmp_path / "f.pdf"), str(tmp_path / "f.png")], check=True, timeout=120
    )
    with Image.open(tmp_path / "f.png") as im:
        lo, hi = im.convert("L").getextrema()
        assert im.size[0] > 200 and hi - lo > 100


def test_report_view_reads_back_a_latex_table(tmp_path):
    """A table written as LaTeX only (render_tabular's format) reaches the report through the
    table model: its rows, header groups, units and arrows."""
    tex = tmp_path / "t.tex"
    tex.write_text(r"""\begin{table}[tbp]
\centering\small
\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%
\begin{tabular}{llr}
\toprule
 & \multicolumn{2}{c}{throughput [\textmu s] $\uparrow$} \\
\cmidrule(lr){2-3}
variant & mean & n \\
\midrule
fix & $-12.3 \pm 1.2$\,\%$^{*}$ & \textbf{5} \\
\addlinespace
bug & \num{-3.0}$^{+\num{1.0}}_{-\num{2.0}}$ & 4 \\
\bottomrule
\end{tabular}}
\caption{S1 \& friends, sim testbed.}
\label{tab:s1-sim}
\end{table}
""")
    side = tmp_path / "c.json"
    side.write_text(json.dumps({"table": "s1-sim", "data_hash": "ab" * 32, "cells": {"a": {}, "b": {}}}))
    out = tmp_path / "t.html"
    subprocess.run(
        [sys.executable, str(VIEW), "table", str(tex), str(out), "--sidecar", str(side)], check=True, timeout=60
    )
    html = out.read_text()
    assert re.search(r'<th [^>]*colspan="2"[^>]*>throughput \[µs\] ↑</th>', html), html
    assert ">−12.3 ± 1.2\u2009%<sup>*</sup></td>" in html
    assert '−3.0<span class="ends"><sup>+1.0</sup><sub>−2.0</sub></span>' in html
    assert len(re.findall(r"<tr>", html.split("<tbody>")[1])) == 2
    assert "S1 &amp; friends, sim testbed." in html and "tab:s1-sim" in html
    assert "2 cells" in html and "\\begin{tabular}" in html


@pytest.mark.parametrize("name", ["environment-yml", "report-view"])
def test_scripts_are_executable(name):
    assert (ROOT / "workflow" / "scripts" / name).stat().st_mode & 0o111


def _rules(smk: Path) -> dict[str, str]:
    """{rule name: its text} of a rule file."""
    parts = re.split(r"(?m)^rule (\w+):\n", smk.read_text())
    return dict(zip(parts[1::2], parts[2::2]))


def test_no_rule_spawns_a_second_snakemake():
    """Snakemake runs a `run:` block's job in a new Snakemake process that parses the whole
    workflow again (3 s a job, the gather jobs' whole cost): rules use shell or script."""
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        for name, text in _rules(smk).items():
            assert not re.search(r"(?m)^    run:", text), f"{smk.name}: rule {name} has a run: block"


def test_point_jobs_keep_their_runs_in_the_log():
    """The sim's point jobs print one line per run: those go to the job's log, the terminal
    shows Snakemake's progress (and a failed job's log, by show-failed-logs)."""
    rules = _rules(ROOT / "workflow" / "rules" / "run.smk")
    for name in ("run_point", "dataset_study"):
        shell = rules[name].split("    shell:", 1)[1]
        assert "> {log} 2>&1" in shell and "tee" not in shell, name
