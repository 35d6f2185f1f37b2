"""Bad configuration stops before any run, naming the file and the field."""
import shutil
import subprocess

import pytest
import yaml

from schedlab import config
from conftest import BIN, ROOT, copy_workdir, schedlab


def altered_study(tmp_path, name="s1", edit=None, text_edit=None):
    src = (ROOT / "config" / "studies" / f"{name}.yaml").read_text()
    if text_edit:
        src = text_edit(src)
    if edit:
        data = yaml.safe_load(src)
        edit(data)
        src = yaml.safe_dump(data, sort_keys=False)
    path = tmp_path / f"{name}.yaml"
    path.write_text(src)
    return path


def test_all_committed_files_validate():
    r = schedlab("validate")
    assert r.returncode == 0, r.stderr
    for s in ("s0", "s1", "s2", "s3", "s4"):
        assert config.points(config.load_study(s), "sim")


def test_unknown_variant_names_file_and_field(tmp_path):
    r = schedlab("run", "s1", "--variant", "nosuch", "--point", "mode=alone", "--out", tmp_path)
    assert r.returncode == 2
    assert "config/studies/s1.yaml" in r.stderr and "field variants" in r.stderr and "nosuch" in r.stderr
    assert not (tmp_path / "raw").exists()


def test_negative_reps_is_refused_before_any_run(tmp_path):
    r = schedlab("run", "s1", "--variant", "bug", "--point", "mode=alone", "--reps", "-1", "--out", tmp_path)
    assert r.returncode != 0 and "--reps" in r.stderr
    assert not (tmp_path / "raw").exists()


def test_negative_runs_in_study_file(tmp_path):
    path = altered_study(tmp_path, text_edit=lambda s: s.replace("runs: 10", "runs: -3"))
    with pytest.raises(config.ConfigError) as e:
        config.load_study(path)
    assert f"{path}:" in str(e.value) and "field runs" in str(e.value)
    line = int(str(e.value).split(":")[1])
    assert path.read_text().splitlines()[line - 1].startswith("runs:")


def test_missing_field(tmp_path):
    path = altered_study(tmp_path, edit=lambda d: d.pop("metrics"))
    with pytest.raises(config.ConfigError, match=r"s1\.yaml.*field \(top level\): 'metrics' is a required property"):
        config.load_study(path)


@pytest.mark.parametrize("bad", ["bug;rm -rf ~", "$(reboot)", "a b", "x`id`"])
def test_shell_metacharacters_in_names(tmp_path, bad):
    def edit(d):
        d["variants"][bad] = d["variants"].pop("bug")
    path = altered_study(tmp_path, edit=edit)
    with pytest.raises(config.ConfigError) as e:
        config.load_study(path)
    msg = str(e.value)
    assert str(path) in msg and "field variants" in msg and "not allowed" in msg


def test_shell_metacharacters_in_boot_options(tmp_path):
    def edit(d):
        d["variants"]["bug"]["xen"]["boot"] = {"sched": "credit; reboot"}
    path = altered_study(tmp_path, edit=edit)
    with pytest.raises(config.ConfigError, match=r"field variants\.bug\.xen\.boot\.sched"):
        config.load_study(path)


def test_baseline_must_be_a_variant(tmp_path):
    path = altered_study(tmp_path, edit=lambda d: d.update(baseline="nope"))
    with pytest.raises(config.ConfigError, match=r"field baseline: unknown variant 'nope'"):
        config.load_study(path)


def test_unknown_point_value():
    with pytest.raises(config.ConfigError, match="not a value of axis mode"):
        config.parse_point_args(config.load_study("s1"), "sim", ["mode=sometimes"])


def test_snakemake_stops_on_a_bad_study_before_running(tmp_path, env_path):
    work = copy_workdir(tmp_path / "w")
    p = work / "config" / "studies" / "s2.yaml"
    p.write_text(p.read_text().replace("runs: 10", "runs: 0"))
    r = subprocess.run([str(BIN / "snakemake"), "-n", "-c1"], cwd=work, capture_output=True, text=True, env=env_path)
    assert r.returncode != 0
    assert "s2.yaml" in r.stderr + r.stdout and "field runs" in r.stderr + r.stdout
    assert not (work / "data").exists()
