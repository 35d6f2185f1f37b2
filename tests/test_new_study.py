"""Adding a study: `schedlab new-study NAME --like STUDY` in a scratch checkout touches at most
three files (the study file, the study list, optionally its section text), and the pipeline then
builds the new study's sim table (with the generic notebook), its row of the verdict table and
its section in the paper (from the template), with no other file edited."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from conftest import BIN, ROOT, copy_workdir, schedlab, smk


def _git(work, *args):
    return subprocess.run(["git", *args], cwd=work, capture_output=True, text=True, check=True).stdout


def test_new_study_touches_at_most_three_files_and_builds(tmp_path, sim_binary):
    work = copy_workdir(tmp_path / "w")
    shutil.copy2(ROOT / ".gitignore", work / ".gitignore")  # what the pipeline derives is not a change
    _git(work, "init", "-q")
    _git(work, "add", "-A")
    _git(work, "-c", "user.email=test@schedlab", "-c", "user.name=test", "commit", "-qm", "scratch")

    r = schedlab("new-study", "s5", "--like", "s3", cwd=work)
    assert r.returncode == 0, r.stderr
    touched = sorted(line[3:] for line in _git(work, "status", "--porcelain", "--untracked-files=all").splitlines())
    print(f"new-study s5 --like s3 touched: {touched}")
    assert touched == ["config/config.yaml", "config/studies/s5.yaml"] and len(touched) <= 3
    text = (work / "config" / "studies" / "s5.yaml").read_text()
    assert "study: s5\n" in text and 'title: "TODO: ' in text
    # the rest is s3's, line for line, but for its id, its titles and its first comment
    s3 = (work / "config" / "studies" / "s3.yaml").read_text().splitlines()
    differ = [a for a, b in zip(s3, text.splitlines()) if a != b]
    assert len(differ) == 4 and len(s3) == len(text.splitlines())
    # a name that exists, or a model that does not, is refused in one line; nothing is written
    for args in (("s5", "--like", "s3"), ("s6", "--like", "nope"), ("S6", "--like", "s3")):
        r = schedlab("new-study", *args, cwd=work)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert sorted(line[3:] for line in _git(work, "status", "--porcelain").splitlines()) == touched

    # The build: s5's sim table, its verdict row and its section. Only s5 on the sim (the other
    # studies' tables are the pipeline test's; their runs would only make this one slower).
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    targets = ["paper/generated/s5/sim-table.tex", "paper/generated/verdicts/table.tex", "paper/generated/sections.tex"]
    r = smk(work, *targets, "--config", "studies=[s5]", "testbeds=[sim]", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    gen = work / "paper" / "generated"
    # the generic notebook drew it (s5 has none of its own), from s5's own records
    executed = json.loads((work / "data" / "derived" / "notebooks" / "s5-sim.ipynb").read_text())
    assert "Any study" in "".join(executed["cells"][0]["source"])
    side = json.loads((gen / "s5" / "sim-cells.json").read_text())
    assert side["table"] == "s5-sim" and side["cells"]
    assert (gen / "s5" / "sim-figure.pdf").stat().st_size > 1000
    # its row of the verdict table: the claim copied from s3, decided on s5's own cells
    verdicts = json.loads((gen / "verdicts" / "cells.json").read_text())
    assert "s5/sim" in verdicts["cells"]
    assert "TODO: s5" in (gen / "verdicts" / "table.tex").read_text()
    # its section from the template, placed by the study list
    assert "\\input{generated/s5/section.tex}" in (gen / "sections.tex").read_text()
    section = (gen / "s5" / "section.tex").read_text()
    assert "\\label{sec:s5}" in section and "\\testbedresults{s5}{sim}" in section and "@@" not in section
    # and still no other file of the checkout edited
    assert sorted(line[3:] for line in _git(work, "status", "--porcelain").splitlines()) == touched
