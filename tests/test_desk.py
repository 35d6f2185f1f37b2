"""The researcher's desk, as a researcher runs it: `make lab` serves the notebooks,
`make report` writes report.html with every figure and table. Both install or build what
they need (slow on a bare machine, seconds to a few minutes once built). The report is made
in the pipeline test's scratch checkout (fewer runs), where the paper is already built."""

import base64
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import ROOT, install_debs

TOKEN = "t"


def _free_port(preferred: int = 18871) -> int:
    for port in (preferred, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free port on 127.0.0.1")


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _make(*args, timeout):
    return subprocess.run(["make", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_make_lab_serves_notebooks():
    # the lab venv first (a bare machine: ~1 min; then nothing), so the server's start is timed alone
    r = _make(".venv-lab/.installed", timeout=1800)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    port = _free_port()
    flags = f"--no-browser --ServerApp.ip=127.0.0.1 --port={port} --IdentityProvider.token={TOKEN}"
    t0 = time.monotonic()
    proc = subprocess.Popen(
        ["make", "lab", f"LAB_FLAGS={flags}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}/api"
    try:
        listing = None
        while time.monotonic() - t0 < 120 and proc.poll() is None:
            try:
                listing = _get(f"{base}/contents/?token={TOKEN}")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        served = time.monotonic() - t0
        if listing is None:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            out = proc.communicate(timeout=30)[0]
            pytest.fail(f"make lab did not serve within 120 s (exit {proc.returncode}):\n{out[-3000:]}")
        print(f"make lab: contents API answered after {served:.1f} s")
        names = {c["name"] for c in listing["content"]}
        want = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
        assert want and want <= names, names
        assert {p.with_suffix(".py").name for p in (ROOT / "notebooks").glob("*.ipynb")} <= names
        # the only Python kernel is the project's, under the name the notebooks ask for (python3)
        specs = _get(f"{base}/kernelspecs?token={TOKEN}")
        assert specs["default"] == "python3"
        assert [n for n, s in specs["kernelspecs"].items() if s["spec"]["language"] == "python"] == ["python3"]
        spec = specs["kernelspecs"]["python3"]["spec"]
        assert spec["display_name"] == "schedlab (.venv)"
        # ... and runs the project's venv (VENV: .venv, or the container's), not the lab's
        argv0 = spec["argv"][0]
        assert ".venv-lab" not in argv0
        r = subprocess.run(
            [argv0, "-c", "import pandas, papermill, schedlab"], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0, r.stderr[-2000:]
        # jupytext in the lab's server pairs the notebooks (their .py opens as a notebook)
        nb = _get(f"{base}/contents/s1.py?token={TOKEN}")
        assert nb["type"] == "notebook", nb["type"]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _report_entries(work: Path) -> list[str]:
    """What report.html must show: every study figure and table the paper reports, the
    agreement tables and the mechanism figure."""
    out = ["agreement/table.html", "agreement/testbeds.html", "mechanism/figure.png", "mechanism/figure.pdf"]
    for cells in sorted((work / "paper" / "generated").glob("*/*-cells.json")):
        if cells.parent.name == "agreement":
            continue
        tb = cells.name.removesuffix("-cells.json")
        out += [
            f"{cells.parent.name}/{tb}-figure.png",
            f"{cells.parent.name}/{tb}-figure.pdf",
            f"{cells.parent.name}/{tb}-table.html",
        ]
    return out


@pytest.fixture(scope="module")
def report_html(built) -> Path:
    """`make report` in the pipeline's scratch checkout (tests/conftest.py: fewer runs,
    the shipped qemu records), where the paper is already built: what it adds is the
    report's own items and report.html."""
    work, env, _ = built
    t0 = time.monotonic()
    # the scratch checkout's .venv is the repository's (a symlink): `-o` keeps make from
    # reinstalling it there (the copy's lock files can be newer than .installed), which would repoint the
    # repository's editable install and scripts at the scratch copy
    r = subprocess.run(
        ["make", "-o", ".venv/.installed", "report"], cwd=work, env=env, capture_output=True, text=True, timeout=3600
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert "pip install" not in r.stdout, r.stdout[-2000:]
    print(f"make report: {time.monotonic() - t0:.0f} s")
    return work / "report.html"


@pytest.mark.slow
def test_report_renders(report_html):
    html = report_html.read_text()
    # the report's data: `var results = {path: {name, labels, caption, data_uri, ...}, ...}`
    i = html.index("var results = {") + len("var results = ")
    results = json.JSONDecoder().raw_decode(html, i)[0]
    entries = _report_entries(report_html.parent)
    assert len(entries) > 10
    for e in entries:
        r = results.get(f"paper/generated/{e}")
        assert r is not None, f"report.html lacks {e}"
        assert r["caption"].strip() and r["labels"], e
    assert "Agreement with the published figures" in results["paper/generated/agreement/table.html"]["caption"]


@pytest.mark.slow
def test_the_notebooks_hint_then_make_report_warns_nothing(report_html, built, tmp_path):
    """With no data the notebooks name the command that works (run-study with --manifest); the
    manifests it writes, which Snakemake did not make, join Snakemake's records at the next
    `make report` instead of a "Missing metadata" warning each."""
    from schedlab.report import data

    with pytest.raises(data.DataError) as e:
        data.load_runs(tmp_path / "data", "sim", "s1")
    hint = str(e.value)
    assert f"schedlab run-study s1 --testbed sim --out {tmp_path / 'data'} --manifest " in hint, hint
    assert "data/runs/sim/s1/all.json" in hint
    work, env, _ = built
    # the study's manifests as run-study writes them: files Snakemake has no record of
    manifests = [str(p.relative_to(work)) for p in (work / "data" / "runs" / "sim" / "s1").rglob("*.json")]
    assert len(manifests) > 1
    r = subprocess.run(
        [str(Path(env["PATH"].split(":")[0]) / "snakemake"), "--cleanup-metadata", *manifests],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run(["make", "-o", ".venv/.installed", "report"], cwd=work, env=env, capture_output=True, text=True)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert f"adopt-manifests: {len(manifests)} run manifest(s)" in out, out[-3000:]
    assert "Missing metadata" not in out, [l for l in out.splitlines() if "Missing metadata" in l]


def _report_results(html: str) -> dict:
    """The report's data: `var results = {path: {name, labels, caption, data_uri, ...}, ...}`."""
    i = html.index("var results = {") + len("var results = ")
    return json.JSONDecoder().raw_decode(html, i)[0]


class _Rows(HTMLParser):
    """Rows of the body of each <table> of a page."""

    def __init__(self):
        super().__init__()
        self.tables, self.depth, self.in_body = [], 0, False

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append(0)
        elif tag == "tbody":
            self.in_body = True
        elif tag == "tr" and self.in_body:
            self.tables[-1] += 1

    def handle_endtag(self, tag):
        if tag == "tbody":
            self.in_body = False


def table_rows(results: dict) -> dict[str, int]:
    """{report item (a table's page): rows of its table}, from the report's embedded pages."""
    out = {}
    for path, r in results.items():
        if not path.endswith(".html"):
            continue
        page = base64.b64decode(r["data_uri"].split("base64,", 1)[1]).decode()
        p = _Rows()
        p.feed(page)
        assert len(p.tables) == 1, f"{path}: {len(p.tables)} tables"
        assert "\\" not in page.split("<details>")[0], f"{path}: LaTeX left in the page"
        out[path.removeprefix("paper/generated/")] = p.tables[0]
    return out


@pytest.mark.slow
def test_report_tables_have_rows(report_html):
    """Every table of report.html, parsed from its embedded page: rows in its body (the S0-S4
    tables lost theirs to the regex view), the verdict table one row per seed's claim, the
    validation's tables, and a kill matrix of the validation when the build made one."""
    work = report_html.parent
    rows = table_rows(_report_results(report_html.read_text()))
    print("rows per table: " + ", ".join(f"{k} {v}" for k, v in sorted(rows.items())))
    assert all(n > 0 for n in rows.values()), rows
    studies = json.loads((work / "paper" / "generated" / "verdicts" / "cells.json").read_text())
    assert rows["verdicts/table.html"] == len({k.split("/")[0] for k in studies["cells"]}) > 0
    assert {"verdicts/coverage.html", "validation/table.html", "validation/table-full.html"} <= set(rows)
    assert {"sensitivity/table.html", "agreement/table.html", "agreement/testbeds.html"} <= set(rows)
    for cells in (work / "paper" / "generated").glob("s*/*-cells.json"):
        key = f"{cells.parent.name}/{cells.name.removesuffix('-cells.json')}-table.html"
        n = len({(c["row"]) for c in json.loads(cells.read_text())["cells"].values()})
        assert rows[key] == n, (key, rows[key], n)
    for kill in (work / "paper" / "generated" / "validation").glob("kill*.tex"):
        if kill.stem.endswith("-macros"):  # the kill matrix's macros for the text: no table
            continue
        assert rows.get(f"validation/{kill.stem}.html", 0) > 0, kill.name
    assert "validation/kill-macros.html" not in rows


SCREENSHOTS = "SCHEDLAB_SCREENSHOTS"  # a folder to keep the browser test's screenshots in


def _show(b, category: str, sub: str, toggles=(), labels=()) -> None:
    """In the report's menu, as a person clicks: Results, the category, the subcategory, the
    label toggles, then the eye of the first entry (with `labels`: of the entry whose row
    shows them)."""
    b.click(b.find_text("Results"))
    b.wait_for(f"return document.body.innerText.includes({json.dumps(category)})")
    b.click(b.find_text(category))
    b.wait_for(f"return document.querySelector('nav').innerText.includes({json.dumps(sub)})")
    b.click(b.find_text(sub))
    b.wait_for("return document.querySelectorAll('nav a[iconname=eye]').length")
    for t in toggles:
        b.click(b.find_text(t))
    row = "".join(f"[td[normalize-space()='{x}']]" for x in labels)
    b.click(b.find_xpath(f"(//nav//tbody/tr{row})[1]//a[@iconname='eye']"))


@pytest.mark.slow
def test_report_shows_in_a_browser(report_html, tmp_path):
    """Debian's Chromium draws report.html as a person clicks through it: a study table and
    the verdict table with their rows (screenshots kept where SCHEDLAB_SCREENSHOTS says), a
    figure drawn with the paper's caption. `make test` installs Chromium (DEBS_TEST); here,
    as root, too: never a skip."""
    from browser import Browser, executables
    from PIL import Image

    if None in executables():
        install_debs("chromium", "chromium-driver", why="the report's browser test")
    keep = Path(os.environ.get(SCREENSHOTS) or tmp_path)
    keep.mkdir(parents=True, exist_ok=True)
    with Browser(tmp_path / "profile") as b:
        b.open(report_html.as_uri())
        assert b.wait_for("return document.body.innerText.includes('Tables')"), "the report did not render"
        seen = {}
        for name, (sub, toggles) in {"study-table": ("s1", ("sim",)), "verdict-table": ("verdicts", ())}.items():
            _show(b, "Tables", sub, toggles)
            assert b.wait_for("return document.querySelector('iframe') !== null"), name
            b.frame(b.find("iframe"))
            n = b.wait_for("return document.querySelectorAll('tbody tr').length")
            heads = b.run("return [...document.querySelectorAll('thead th')].map(h => h.innerText).join(' | ')")
            visible = b.run(
                "const r = document.querySelector('table').getBoundingClientRect(); return r.width * r.height"
            )
            b.frame(None)
            shot = b.screenshot(keep / f"report-{name}.png")
            seen[name] = (n, heads)
            assert n and visible > 10000, (name, n, visible)
            with Image.open(shot) as im:
                lo, hi = im.convert("L").getextrema()
                assert hi - lo > 100, f"{name}: blank screenshot"
        assert "µs" in seen["study-table"][1] and "↑" in seen["study-table"][1] and "↓" in seen["study-table"][1]
        assert "verdict" in seen["verdict-table"][1]
        # a figure: the PNG drawn (decoded, on screen), its caption the paper's
        _show(b, "Figures", "s1", labels=("sim", "PNG"))
        assert b.wait_for(
            "const i = document.querySelector('img[src^=\"data:image/png\"]');"
            "return i && i.complete && i.naturalWidth > 100 && i.getBoundingClientRect().width > 100"
        ), "the figure is not drawn"
        b.screenshot(keep / "report-figure.png")
        b.click(
            b.find_xpath(
                "(//nav//tbody/tr[td[normalize-space()='sim']][td[normalize-space()='PNG']])[1]//a[@iconname='information-circle']"
            )
        )
        caption = b.wait_for("return document.querySelector('nav').innerText.includes('Error bars') && 'ok'")
        assert caption, b.run("return document.querySelector('nav').innerText")
    print(f"browser: {seen}; screenshots in {keep}")
