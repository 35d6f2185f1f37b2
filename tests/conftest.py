import os
import re
import shutil
import subprocess
import sys
import time
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
    for name in ("environment.yml", "workflow", "config", "notebooks", "paper", "sim", "schedlab"):
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


def smk(work, *args, env, timeout=1800):
    return subprocess.run(
        [str(BIN / "snakemake"), "-c2", "--rerun-incomplete", *args],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


PIPELINE_RUNS = 3


@pytest.fixture(scope="session")
def built(tmp_path_factory, sim_binary):
    """The whole pipeline in a scratch checkout with fewer runs, from a data dir holding only
    the qemu records the repository ships: (work, env, seconds). test_pipeline checks the
    paper it builds; test_desk runs `make report` in it (so the suite builds the pipeline
    once, not a second time at full size in the repository)."""
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    work = copy_workdir(tmp_path_factory.mktemp("pipeline") / "w")
    for p in (work / "config" / "studies").glob("*.yaml"):
        text = re.sub(r"(?m)^runs: \d+", f"runs: {PIPELINE_RUNS}", p.read_text())
        # S0's sim builds at 1/20 instead of 1/4 (its sensitivity sweep took ~250 s of the ~6 min)
        text = re.sub(r"(?m)^  job_fraction: [0-9.]+", "  job_fraction: 0.05", text)
        p.write_text(text)
    # the sensitivity sweep at its smallest useful size: what is tested is the pipeline
    sens = work / "config" / "sensitivity.yaml"
    text = re.sub(r"(?m)^seeds: \d+", "seeds: 2", sens.read_text())
    sens.write_text(re.sub(r"(?m)^joint: \{points: \d+", "joint: {points: 4", text))
    # the validation's mirrors with the fewest seeds an interval needs (2 of 5: ~40 s less)
    val = work / "config" / "validation.yaml"
    val.write_text(re.sub(r"(?m)^seeds: \[[^]]*\]", "seeds: [1, 2]", val.read_text()))
    # a checkout: the shipped qemu records (their tables are re-derived), and what `make` needs
    shutil.copytree(ROOT / "data" / "raw" / "qemu", work / "data" / "raw" / "qemu")
    # and the testbed benchmarks' committed outputs the paper quotes (schedlab/report/measured.py)
    shutil.copytree(ROOT / "data" / "measured", work / "data" / "measured")
    for name in ("Makefile", "requirements.lock", "requirements-lab.lock", "pyproject.toml"):
        shutil.copy2(ROOT / name, work / name)
    (work / ".venv").symlink_to(ROOT / ".venv")
    t0 = time.monotonic()
    r = smk(work, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    return work, env, time.monotonic() - t0


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


def pytest_terminal_summary(terminalreporter):
    """The bad-input table's outcomes (tests/test_bad_input.py), counted: all cases, and
    those of issue 34 apart."""
    from collections import Counter

    props = sys.modules.get("test_hostile_properties")
    if props is not None and props.EXAMPLES:
        terminalreporter.write_line(
            f"hostile properties: {sum(props.EXAMPLES.values())} hypothesis examples in "
            f"{sum(props.SECONDS.values()):.0f} s ("
            + ", ".join(
                f"{k} {n} in {props.SECONDS[k]:.0f} s, {props.ACCEPTED.get(k, 0)} accepted"
                for k, n in props.EXAMPLES.items()
            )
            + ")"
        )
    outcomes = getattr(sys.modules.get("test_bad_input"), "OUTCOMES", None)
    if not outcomes:
        return
    for label, rows in (("bad-input table", outcomes), ("  of which issue 34's", [o for o in outcomes if o[1] == 34])):
        counts = Counter(o[2] for o in rows)
        terminalreporter.write_line(
            f"{label}: {len(rows)} case(s): " + ", ".join(f"{n} {k}" for k, n in counts.most_common())
        )
    if terminalreporter.config.getoption("verbose") > 0 or os.environ.get("SCHEDLAB_BAD_INPUT_LIST"):
        for cid, _issue, outcome in outcomes:
            if outcome not in ("one-line error", "accepted"):
                terminalreporter.write_line(f"  {outcome}: {cid}")
