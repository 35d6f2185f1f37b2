"""The experimental unit and registration, enforced by the run stage (docs/workflow.md,
"Registration"): where the unit is the boot, run-study boots afresh as the study's boot plan
says, refuses a second replicate of one (variant, point) in one boot, refuses confirmatory
runs from a checkout whose design is not committed, and `dataset` uses only records made
under today's design (the others are kept and listed)."""

from __future__ import annotations

import copy
import itertools
import json
import os
import subprocess
import sys

import pytest

from schedlab import config, records, run, store
from schedlab.core.testbed import RunResult, Testbed

_BOOT_IDS = itertools.count(1)


class Boots(Testbed):
    """A stand-in host with boots (there is no hardware behind it; the real path is qemu's
    close/boot, tests/test_qemu_testbed.py): fresh_boot starts a new boot unless `honour` is
    off, and each run reports the boot it used, as qemu's counters.boot.run_dir does."""

    name = "qemu"

    def __init__(self, honour: bool = True):
        self.honour, self.boot, self.fresh = honour, 0, 0

    def describe(self):
        return {"testbed": "stand-in"}

    def build_id(self, study, variant):
        return "stand-in-build"

    def fresh_boot(self, study):
        self.fresh += 1
        if self.honour:
            self.boot = next(_BOOT_IDS)  # unique across stand-ins, like a boot's run directory

    def run_once(self, study, variant, point, seed):
        metrics = {m["name"]: 1.0 + seed % 97 for m in config.metrics_for(study, point, "qemu")}
        return RunResult(metrics=metrics, counters={"boot": {"run_dir": f"boot-{self.boot}"}})


def _study(**qemu) -> dict:
    st = copy.deepcopy(config.load_study("s1"))
    st["testbeds"]["qemu"] = {**st["testbeds"]["qemu"], "warmup": 0, **qemu}
    return st


@pytest.fixture
def committed(monkeypatch):
    """The design counts as committed and the checkout as clean (the checkout running the
    suite may have edits); the real check is test_confirmatory_runs_need_a_committed_design."""
    monkeypatch.setattr(run, "registration_problem", lambda study: None)
    monkeypatch.setattr(run, "repo_state", lambda fresh=False: {"repo_commit": "0" * 40, "repo_dirty": False})


def _quiet():
    return open(os.devnull, "w")


def test_round_plan_boots_afresh_each_round_and_records_the_boot(committed, tmp_path):
    st = _study(runs=3, boot_plan="round")
    tb = Boots()
    out = run.run_study(st, "qemu", tmp_path, 5, tb, log=_quiet())
    assert tb.fresh == 3  # one boot per round, the round's variants in it
    recs = [r for rs in out.values() for r in rs]
    assert all(
        r["registered"] and not r["exploratory"] and r["design_hash"] == config.design_hash(st, "qemu") for r in recs
    )
    per_cell = {}
    for r in recs:
        per_cell.setdefault((r["variant"], r["point_id"]), set()).add(r["boot_id"])
    assert all(len(b) == 3 for b in per_cell.values())  # three runs, three boots


def test_a_resumed_study_reuses_its_records_and_still_boots_per_round(committed, tmp_path):
    st = _study(runs=3, boot_plan="round")
    run.run_study(st, "qemu", tmp_path, 5, Boots(), log=_quiet())
    n = len(list(store.iter_records(tmp_path / "raw")))
    tb = Boots(honour=False)  # nothing is measured, so nothing can share a boot
    run.run_study(st, "qemu", tmp_path, 5, tb, log=_quiet())
    assert tb.fresh == 3 and len(list(store.iter_records(tmp_path / "raw"))) == n


def test_variant_round_plan_boots_each_variant_of_each_round(committed, tmp_path):
    st = _study(runs=2, boot_plan="variant-round")
    tb = Boots()
    run.run_study(st, "qemu", tmp_path, 5, tb, log=_quiet())
    assert tb.fresh == 2 * len(st["variants"])


def test_rounds_run_as_separate_jobs_make_the_records_of_the_whole_study(committed, tmp_path):
    """The workflow's run_round jobs (one per round, side by side): each boots for its round only,
    and together they write the records one run of the whole study writes (same keys)."""
    st = _study(runs=3, boot_plan="round")
    whole = run.run_study(st, "qemu", tmp_path / "whole", 5, Boots(), log=_quiet())
    jobs = []
    for r in (2, 0, 1):  # any order, as a scheduler starts them
        tb = Boots()
        jobs.append(run.run_study(st, "qemu", tmp_path / "jobs", 5, tb, log=_quiet(), rounds={r}))
        assert tb.fresh == 1  # one boot: its round
    assert all({rec["round"] for recs in out.values() for rec in recs} == {r} for out, r in zip(jobs, (2, 0, 1)))

    def keys(d):
        return sorted(p.name for p in (d / "raw").rglob("*.json"))

    assert keys(tmp_path / "jobs") == keys(tmp_path / "whole") and len(keys(tmp_path / "whole")) == sum(
        len(v) for v in whole.values()
    )


def test_a_round_past_the_plan_is_a_one_line_error(tmp_path):
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "schedlab",
            "run-study",
            "s1",
            "--testbed",
            "qemu",
            "--round",
            "99",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--round 99" in p.stderr, p.stderr


def test_a_second_replicate_in_one_boot_is_refused(committed, tmp_path):
    """A testbed that keeps its boot across rounds breaks the plan: the second round's run
    of the same (variant, point) is refused and not recorded."""
    st = _study(runs=3, boot_plan="round")
    with pytest.raises(run.Refused, match="already holds 1 measured run"):
        run.run_study(st, "qemu", tmp_path, 5, Boots(honour=False), log=_quiet())
    recs = [store.read_record(p) for p in store.iter_records(tmp_path / "raw")]
    per_cell = {}
    for r in recs:
        per_cell.setdefault((r["variant"], r["point_id"], r["boot_id"]), 0)
        per_cell[(r["variant"], r["point_id"], r["boot_id"])] += 1
    assert max(per_cell.values()) == 1


def test_runs_per_boot_allows_what_the_design_declares(committed, tmp_path):
    st = _study(runs=4, boot_plan="round", runs_per_boot=2)
    tb = Boots()
    out = run.run_study(st, "qemu", tmp_path, 5, tb, log=_quiet())
    assert tb.fresh == 2
    for rs in out.values():
        assert len({r["boot_id"] for r in rs}) == 2 and len(rs) == 4


def test_a_warmup_runs_in_each_boot_before_its_measured_runs(committed, tmp_path):
    st = _study(runs=2, warmup=1, boot_plan="round")
    out = run.run_study(st, "qemu", tmp_path, 5, Boots(), log=_quiet())
    for rs in out.values():
        by_boot = {}
        for r in sorted(rs, key=lambda r: r["repetition"]):
            by_boot.setdefault(r["boot_id"], []).append(r["warmup"])
        assert list(by_boot.values()) == [[True, False], [True, False]]


def test_point_runner_boots_afresh_between_its_rounds(committed, tmp_path):
    st = _study(runs=3, boot_plan="round")
    tb = Boots()
    recs = run.PointRunner(st, "qemu", "bug", {"mode": "alone"}, tmp_path, 5, testbed=tb, log=_quiet()).run()
    assert len({r["boot_id"] for r in recs}) == 3


def _git(cwd, *args):
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def scratch_repo(tmp_path, monkeypatch):
    """A git checkout with one committed study file; config.ROOT points there."""
    repo = tmp_path / "repo"
    (repo / "config" / "studies").mkdir(parents=True)
    src = config.STUDIES_DIR / "s1.yaml"
    (repo / "config" / "studies" / "s1.yaml").write_text(src.read_text())
    _git(repo.parent, "init", "-q", str(repo))
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "design")
    monkeypatch.setattr(config, "ROOT", repo)
    study = config.load_study(repo / "config" / "studies" / "s1.yaml")
    study["_file"] = "config/studies/s1.yaml"
    return repo, study


def test_confirmatory_runs_need_a_committed_design(scratch_repo, tmp_path):
    repo, study = scratch_repo
    assert run.registration_problem(study) is None
    f = repo / "config" / "studies" / "s1.yaml"
    f.write_text(f.read_text() + "\n# an edit after the commit\n")
    assert "uncommitted changes" in run.registration_problem(study)
    with pytest.raises(run.Refused, match="uncommitted changes"):
        run.run_study(study, "qemu", tmp_path / "data", 5, Boots(), log=_quiet())
    assert not (tmp_path / "data" / "raw").exists()
    # exploratory runs are allowed, never confirmatory
    out = run.run_study(study, "qemu", tmp_path / "data", 5, Boots(), log=_quiet(), exploratory=True)
    assert all(r["exploratory"] for rs in out.values() for r in rs)


def test_an_uncommitted_study_file_cannot_be_registered(scratch_repo):
    repo, study = scratch_repo
    (repo / "config" / "studies" / "s9.yaml").write_text("x")
    assert "not committed" in run.registration_problem({**study, "_file": "config/studies/s9.yaml"})


def test_dataset_uses_only_records_of_todays_design(committed, tmp_path):
    st = _study(runs=2, boot_plan="round")
    run.run_study(st, "qemu", tmp_path, 5, Boots(), log=_quiet())
    run.run_study(st, "qemu", tmp_path, 5, Boots(), log=_quiet(), exploratory=True)
    sel = records.select(st, "qemu", tmp_path, 5)
    assert sel["runs"] == 8 and not sel["missing"]
    assert {d["reason"] for d in sel["not_used"]} == {"exploratory"}
    # the design changes after the data: those records are superseded, kept on disk
    changed = _study(runs=3, boot_plan="round")
    sel = records.select(changed, "qemu", tmp_path, 5)
    assert sel["runs"] == 0
    assert any(d["reason"].startswith("superseded") for d in sel["not_used"])
    assert len(list(store.iter_records(tmp_path / "raw"))) == 16


def test_dataset_leaves_out_records_from_a_dirty_checkout(committed, tmp_path):
    st = _study(runs=2, boot_plan="round")
    run.run_study(st, "qemu", tmp_path, 5, Boots(), log=_quiet())
    folder = store.raw_dir(tmp_path, "qemu", "s1")
    path = next(store.iter_records(folder))
    rec = json.loads(path.read_text())
    rec["provenance"]["repo_dirty"] = True
    rec.pop("checksum")
    path.unlink()
    store.write_record(folder, rec)
    sel = records.select(st, "qemu", tmp_path, 5)
    assert sel["runs"] == 7
    assert [d["run_id"] for d in sel["not_used"]] == [rec["run_id"]]


def test_records_made_before_registration_are_not_used():
    """The shipped qemu records made before designs were registered carry no design hash."""
    st = config.load_study("s0")
    rec = {"provenance": {"repo_dirty": False}, "definition_hash": "x"}
    assert records.why_not_used(rec, st, "qemu", config.design_hash(st, "qemu")).startswith("made before")
    assert records.why_not_used(rec, st, "sim", config.design_hash(st, "sim")) is None


def test_run_study_refuses_from_the_command_line_in_a_dirty_clone(tmp_path):
    """`schedlab run-study` in a checkout with an edit refuses before it builds or boots."""
    import shutil

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(config.ROOT), str(clone)], check=True)
    # the code under test, committed there (this checkout may hold it uncommitted)
    for d in ("schedlab", "workflow", "config"):
        shutil.copytree(config.ROOT / d, clone / d, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    _git(clone, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-a", "--allow-empty", "-m", "code")
    assert not _git(clone, "status", "--porcelain", "--untracked-files=no")
    f = clone / "config" / "studies" / "s1.yaml"
    f.write_text(f.read_text() + "\n# an edit\n")
    env = {**os.environ, "PYTHONPATH": str(clone)}
    p = subprocess.run(
        [sys.executable, "-m", "schedlab", "run-study", "s1", "--testbed", "qemu", "--out", str(tmp_path / "d")],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 1, p.stderr
    assert "uncommitted changes" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "d" / "raw").exists()


def test_design_hash_covers_unit_plan_runs_options_and_claim():
    st = config.load_study("s0")
    h = config.design_hash(st, "qemu")
    for change in (
        lambda s: s["testbeds"]["qemu"].update(runs=s["testbeds"]["qemu"]["runs"] + 1),
        lambda s: s["testbeds"]["qemu"].update(boot_plan="round"),
        lambda s: s["testbeds"]["qemu"].update(runs_per_boot=2),
        lambda s: s["testbeds"]["qemu"]["options"].update(lock_ops=1),
        lambda s: s["testbeds"]["qemu"].update(analysis="paired"),
        lambda s: s["claim"]["parts"][0].update(direction="lower"),
    ):
        s = copy.deepcopy(st)
        change(s)
        assert config.design_hash(s, "qemu") != h
    s = copy.deepcopy(st)
    s["claim"]["text"] = "reworded"
    assert config.design_hash(s, "qemu") == h  # prose is not a decision


def test_the_design_is_what_registered_records_were_made_under():
    """A code change must not move a registered design: the fields config.design hashes are
    fixed here (a new one is a deliberate change, and may only appear where set, as
    claim.control does), and every registered qemu record shipped whose design was today's
    when its campaign began still matches it (the S1, S3, S4 campaign of 804b98b)."""
    want = {"unit", "boot_plan", "runs_per_boot", "runs", "warmup", "order", "analysis", "power"}
    want |= {"options", "axes", "variants", "claim"}
    for s in config.load_config()["studies"]:
        st = config.load_study(s)
        for tb in st["testbeds"]:
            d = config.design(st, tb)
            assert set(d) == want
            if d["claim"]:
                assert set(d["claim"]) <= {"parts", "untestable", "control"}
                assert ("control" in d["claim"]) == bool(st["claim"].get("control"))
    for s in ("s1", "s3", "s4"):
        st = config.load_study(s)
        found = {
            r["design_hash"]
            for p in store.iter_records(store.raw_dir(config.ROOT / "data", "qemu", s))
            if (r := json.loads(p.read_text())).get("registered")
            and r["provenance"]["repo_commit"].startswith("804b98b")
        }
        assert found <= {config.design_hash(st, "qemu")}, s
