"""Every text of a study file that reaches LaTeX goes through the one escaper
(schedlab.report.tables.latex_escape): a study whose title, variant labels, metric labels
and units, design basis and time-mode reason hold every TeX special and `\\input{pwn}` is
carried through the generators of every file the paper includes from it -- the study
notebook (table, setup paragraph, macros with the figure caption, from the shipped qemu
records), the S1 mechanism notebook (caption.tex), the methods and provenance text, the
verdicts' setups and macros -- and the files are compiled by pdflatex, where an unescaped
`\\input{pwn}` would stop the run with INJECTED."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import BIN, ROOT

from schedlab import config
from schedlab.core.files import atomic_write
from schedlab.report import methods, verdicts
from schedlab.report.tables import latex_escape, write_macros

SPECIALS = "\\&%$#_^~{}<>|"
HOSTILE = r"ZZ\input{pwn}\\&%$#_^~{}<>|ZZ"  # every TeX special; its \input{pwn} stops LaTeX when not escaped
SEED = 20261121


def test_latex_escape_escapes_every_special():
    out = latex_escape(SPECIALS)
    assert not re.search(r"(?<!\\)[&%$#_{}~^]", out.replace(r"\textbackslash{}", "").replace("{}", ""))
    assert latex_escape(HOSTILE).count(r"\textbackslash{}") == 3


def _hostile_study(path):
    text = (ROOT / "config" / "studies" / "s1.yaml").read_text()
    q = f"'{HOSTILE}'"
    for field, pattern in (
        ("title", r'(?m)^title: ".*"$'),
        ("label", r'label: "[^"]*"'),
        ("unit", r'unit: "[^"]*"'),
        ("time_mode_why", r'time_mode_why: ".*"(?=,$)'),
        # not the power analysis's `basis`: it reaches no TeX, and it is part of the registered
        # design, so a changed one would leave this copy of S1 without records of its design
    ):
        text = re.sub(pattern, lambda m, f=field: f"{f}: {q}", text, flags=re.M)
    assert text.count(HOSTILE) >= 7
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return config.load_study(path)


def _papermill(notebook, tmp, **params):
    args = [str(BIN / "papermill"), "--no-progress-bar", "--cwd", str(ROOT), str(ROOT / "notebooks" / notebook)]
    args.append(str(tmp / f"executed-{notebook}"))
    for k, v in params.items():
        args += ["-p", k, str(v)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("latex")
    studies, data, paper = tmp / "studies", tmp / "data", tmp / "paper"
    study = _hostile_study(studies / "s1.yaml")
    (data).mkdir()
    (data / "raw").symlink_to(ROOT / "data" / "raw")  # the shipped qemu records, read only
    gen = paper / "generated"
    manifest = data / "runs" / "qemu" / "s1" / "all.json"
    r = subprocess.run(
        [str(BIN / "schedlab"), "dataset", str(studies / "s1.yaml"), "--testbed", "qemu", "--out", str(data)]
        + ["--manifest", str(manifest), "--seed", str(SEED)],
        capture_output=True,
        text=True,
        cwd=tmp,
    )
    assert r.returncode == 0, r.stderr
    common = {"studies_dir": studies}
    _papermill("s1.ipynb", tmp, study="s1", testbed="qemu", data_dir=data, out_dir=gen / "s1", **common)
    _papermill("s1mechanism.ipynb", tmp, out_dir=gen / "s1mechanism", **common)
    methods.generate(data, paper, [("s1", "qemu")], studies, ["s1"], SEED, measured=[])
    studies_d = {"s1": study}
    (gen / "verdicts").mkdir(parents=True, exist_ok=True)
    atomic_write(gen / "verdicts" / "setups.tex", verdicts.setups_tex(studies_d, [("s1", "qemu")]))
    write_macros(gen / "verdicts" / "seeds.tex", "verdicts", verdicts.seed_macros(studies_d))
    return gen


def test_no_file_holds_the_text_unescaped(generated):
    files = sorted(generated.rglob("*.tex"))
    escaped = latex_escape(HOSTILE)
    carrying = []
    for f in files:
        text = f.read_text()
        assert r"\input{pwn}" not in text, f"{f.relative_to(generated)} holds the study's text unescaped"
        if escaped in text:
            carrying.append(f.relative_to(generated).as_posix())
    # the text reaches the table, the setup paragraph, the captions, methods and the verdicts' files
    for want in ("s1/qemu-table.tex", "s1/qemu-setup.tex", "s1/qemu-macros.tex", "s1mechanism/caption.tex"):
        assert want in carrying, (want, carrying)
    assert any(c.startswith("verdicts/") for c in carrying) and "provenance.tex" in carrying, carrying


def test_pdflatex_sets_the_text_and_inputs_nothing(generated):
    paper = generated.parent
    (paper / "pwn.tex").write_text("\\errmessage{INJECTED}\n")
    head = (ROOT / "paper" / "main.tex").read_text().split("\\input{generated/testbeds.tex}")[0]
    macros = sorted(p.relative_to(paper).as_posix() for p in generated.rglob("*macros*.tex"))
    macros += ["generated/verdicts/seeds.tex"]
    keys = sorted(k for m in macros for k in re.findall(r"\\csname sv@([^\\]+)\\endcsname", (paper / m).read_text()))
    body = [f"\\input{{{m}}}" for m in macros]
    body += ["\\begin{document}", "\\input{generated/s1/qemu-table.tex}", "\\input{generated/s1/qemu-setup.tex}"]
    body += ["\\input{generated/verdicts/setups.tex}", "\\input{generated/methods.tex}"]
    body += ["\\begin{figure}\\caption[S1 mechanism]{\\input{generated/s1mechanism/caption.tex}}\\end{figure}"]
    body += [f"\\sv{{{k}}}\\par" for k in keys if "caption" in k or k.startswith(("study/", "s1-qemu/setup"))]
    body += ["\\end{document}"]
    (paper / "check.tex").write_text(head + "\n".join(body) + "\n")
    env = {**os.environ, "openin_any": "p", "shell_escape": "f"}
    r = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "check.tex"],
        capture_output=True,
        text=True,
        cwd=paper,
        env=env,
        timeout=300,
    )
    log = (paper / "check.log").read_text(errors="replace")
    assert "INJECTED" not in log
    assert r.returncode == 0, "\n".join(l for l in log.splitlines() if l.startswith("!"))[:3000] or r.stdout[-3000:]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
