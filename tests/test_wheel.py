"""The package as a wheel: built (`pip wheel`), installed (not editable) into a fresh venv,
and run in a project folder and outside one. Nothing is downloaded: the wheel is built
without isolation and installed without its dependencies, which the fresh venv reads from the
project's .venv (a .pth line), so what runs is the wheel's schedlab, not this checkout's."""

import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

from conftest import ROOT

from schedlab import __version__


def test_the_wheel_lists_every_package():
    """pyproject.toml lists the packages (mapped folders cannot be found): none missing."""
    from setuptools import find_namespace_packages

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {p for p in find_namespace_packages(str(ROOT), include=["schedlab*"]) if "__pycache__" not in p}
    assert found - {p for p in found if p.startswith("schedlab._project")} <= listed, found - listed


def _run(*args, cwd, timeout=300):
    r = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, args))}: {r.stdout[-2000:]}{r.stderr[-3000:]}"
    return r


def test_wheel_installed_in_a_fresh_venv_works_in_a_project_folder(tmp_path):
    # the wheel, from a copy of what it is built from (setuptools writes build/ beside it)
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    for name in ("schedlab", "workflow/schemas", "config"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    wheels = tmp_path / "wheels"
    _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", wheels, src, cwd=tmp_path
    )
    (wheel,) = wheels.glob("schedlab-*.whl")
    assert wheel.name.startswith(f"schedlab-{__version__}-")
    # a fresh venv (ensurepip's own pip, no download), the dependencies read from .venv
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    site = Path(
        _run(
            venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path
        ).stdout.strip()
    )
    (site / "_schedlab_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(venv / "bin" / "python", "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel, cwd=tmp_path)
    where = _run(venv / "bin" / "python", "-c", "import schedlab; print(schedlab.__file__)", cwd=tmp_path).stdout
    assert where.startswith(str(site)), where
    exe = venv / "bin" / "schedlab"
    assert _run(exe, "--version", cwd=tmp_path).stdout.strip() == f"schedlab {__version__}"
    # a project folder: its own study files (a copy of config/, one study changed)
    project = tmp_path / "project"
    shutil.copytree(ROOT / "config", project / "config")
    s1 = project / "config" / "studies" / "s1.yaml"
    s1.write_text(s1.read_text().replace("\nruns: ", "\nruns: 4\nx_runs_was: ", 1).replace("x_runs_was: ", "# ", 1))
    out = _run(exe, "validate", cwd=project).stdout
    assert out.startswith("ok: config/config.yaml") and "6 study file(s)" in out, out
    plan = _run(exe, "plan", "s1", "--seed", "1", cwd=project).stdout.splitlines()
    assert plan[0].split() == ["#", "variant", "point", "rep", "warm-up"] and len(plan) > 4
    # a bad study file in the project folder: the installed schema finds it
    s1.write_text(s1.read_text().replace("runs: 4", "runs: -1"))
    r = subprocess.run([exe, "validate"], cwd=project, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "s1.yaml" in r.stderr and "runs" in r.stderr, r.stderr
    # outside any project folder: the study files the wheel carries
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert _run(exe, "validate", cwd=elsewhere).stdout.startswith("ok: ")
    assert "mode-corun" in _run(exe, "plan", "s1", cwd=elsewhere).stdout
