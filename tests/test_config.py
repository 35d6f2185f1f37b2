"""Bad configuration stops before any run, naming the file and the field."""

import subprocess

import pytest
import yaml
from conftest import BIN, ROOT, copy_workdir, schedlab

from schedlab import config


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


@pytest.mark.parametrize(
    "old, new, want",
    [
        ("runs: 10", "runs: 10\nruns: 3", r"s1\.yaml:15: not valid YAML: duplicate key 'runs' \(first on line 14\)"),
        ("  bug:   {label", '  fixed: {label: "again"}\n  bug:   {label', r"s1\.yaml:13: .*duplicate key 'fixed'"),
        ("mode: [alone, corun]", "mode: [alone, .nan]", r"s1\.yaml:9: .*'\.nan' is not a finite number"),
    ],
)
def test_duplicate_keys_and_non_finite_numbers(tmp_path, old, new, want):
    path = altered_study(tmp_path, text_edit=lambda s: s.replace(old, new))
    with pytest.raises(config.ConfigError, match=want):
        config.load_study(path)


def test_trailing_newline_is_not_a_name(tmp_path):
    """JSON Schema's `$` ends the value; Python's would also match before a final newline."""
    path = altered_study(tmp_path, text_edit=lambda s: s.replace("baseline: fixed", 'baseline: "fixed\\n"'))
    with pytest.raises(config.ConfigError, match=r"s1\.yaml:10: field baseline: 'fixed\\n' is not allowed"):
        config.load_study(path)


def test_non_utf8_study_names_file_and_line(tmp_path):
    path = tmp_path / "s1.yaml"
    path.write_bytes((ROOT / "config" / "studies" / "s1.yaml").read_bytes().replace(b"runs: 10", b"runs: 10 # \xff"))
    with pytest.raises(config.ConfigError, match=r"s1\.yaml:14: not UTF-8 text"):
        config.load_study(path)


def test_one_loader_for_every_yaml_file(tmp_path):
    """Study files, config.yaml and the lab inventory all load through config.Loader."""
    from schedlab.lab.inventory import load_inventory

    bad = tmp_path / "x.yaml"
    bad.write_text("version: 1\nversion: 1\nhosts: {}\n")
    for load in (config.load_config, load_inventory, config.load_study):
        with pytest.raises(config.ConfigError, match=r"x\.yaml:2: .*duplicate key 'version'"):
            load(bad)


def test_validate_checks_the_lab_inventory(tmp_path):
    lab = tmp_path / "lab.yaml"
    lab.write_text((ROOT / "config" / "lab.yaml").read_text().replace("version: 1", "version: 2"))
    r = schedlab("validate", "--lab", lab)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and f"{lab}:13: field version" in r.stderr, r.stderr
    r = schedlab("validate")
    assert r.returncode == 0 and "config/lab.yaml" in r.stdout, r.stderr
