import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def schedlab(*args, cwd=None, check=False, timeout=600):
    """Run the installed `schedlab` CLI like a person would."""
    return subprocess.run(
        [str(BIN / "schedlab"), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=check
    )


@pytest.fixture(scope="session")
def sim_binary():
    """The simulator, built by its own Makefile (the build stage)."""
    r = subprocess.run(["make", "-C", str(ROOT / "sim")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return ROOT / "sim" / "build" / "credit1sim"


def copy_workdir(dest: Path) -> Path:
    """A scratch copy of the pipeline (no data), to run Snakemake on altered inputs."""
    dest.mkdir(parents=True, exist_ok=True)
    # schedlab/ too: rules name package files as inputs (code a derived file depends on)
    for name in ("Snakefile", "environment.yml", "workflow", "config", "notebooks", "paper", "sim", "schedlab"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(
                src,
                dest / name,
                ignore=shutil.ignore_patterns(
                    "build", "generated", "*.pdf", "__pycache__", "*.aux", "*.log", "*.fls", "*.fdb_latexmk"
                ),
            )
        else:
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture
def env_path():
    env = dict(os.environ)
    env["PATH"] = f"{BIN}:{env['PATH']}"
    return env


def install_debs(*packages: str, why: str) -> None:
    """An opted-in suite installs the Debian packages it needs (as root; otherwise it fails
    naming them): a researcher who asked for it learns something, never a silent skip."""
    r = subprocess.run([str(ROOT / "workflow" / "scripts" / "ensure-debs"), *packages], capture_output=True, text=True)
    if r.returncode != 0:
        lines = [l.strip() for l in r.stderr.splitlines() if l.strip()]
        pytest.fail(f"{why}: {' '.join(lines[-3:]) or 'ensure-debs failed'}", pytrace=False)
