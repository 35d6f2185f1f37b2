"""The researcher's desk, as a researcher runs it: `make lab` serves the notebooks,
`make report` writes report.html with every figure and table. Both install or build what
they need (slow on a bare machine, seconds to a few minutes once built). The report is made
in the pipeline test's scratch checkout (fewer runs), where the paper is already built."""

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT

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
def test_report_shows_in_a_browser(report_html, tmp_path):
    """Debian's chromium draws it (the test installs nothing)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium): report.html checked as text only")
    shot = tmp_path / "report.png"
    r = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            "--window-size=1400,1000",
            "--virtual-time-budget=10000",
            report_html.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert shot.exists(), r.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as im:
        lo, hi = im.convert("L").getextrema()
        colors = len(im.convert("RGB").getcolors(maxcolors=1 << 20) or [])
    assert hi - lo > 100 and colors > 20, f"blank screenshot ({colors} colours)"
