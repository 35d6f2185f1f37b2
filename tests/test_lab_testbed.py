"""LabTestbed without hosts: describe(), build ids, clear failures (no ssh, no BMC needed)."""

import json

import pytest
from conftest import schedlab

from schedlab import config, testbeds
from schedlab.config import ConfigError
from schedlab.core.testbed import RunFailed
from schedlab.testbeds.lab import LabTestbed


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A private $SCHEDLAB_CACHE: lab state (locks) and builds of config/lab.yaml's vhost0
    not shared with a virtual host someone is running."""
    monkeypatch.setenv("SCHEDLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SCHEDLAB_LAB_BUILDS", raising=False)
    monkeypatch.delenv("SCHEDLAB_LAB_INVENTORY", raising=False)
    return tmp_path / "cache"


def test_describe_has_inventory_entry_without_secrets(own_cache, tmp_path):
    pw = own_cache / "lab" / "vhost0" / "bmc.pass"
    pw.parent.mkdir(parents=True)
    pw.write_text("never-in-a-record\n")
    pw.chmod(0o600)
    tb = testbeds.get("lab", host="virtual")
    d = tb.describe()
    assert d["testbed"] == "lab" and d["inventory"] == "config/lab.yaml" and d["selector"] == "virtual"
    (h,) = d["hosts"]
    assert h["name"] == "vhost0" and h["topology"]["cores_per_socket"] == 2
    assert h["bmc"]["password"] == {"source": "cache"}
    assert "reserved_host" not in d
    # for a study: its options, its builds, and the host reserved for the runs that follow
    study = config.load_study("s1")
    d = tb.describe(study)
    assert d["reserved_host"] == "vhost0" and d["host"]["name"] == "vhost0" and d["options"]["scheduler"] == "credit"
    assert set(d["builds"]) == set(study["variants"]) and d["builds"]["bug"]["build_id"] is None
    assert d["builds_dir"] == "$SCHEDLAB_CACHE/builds/lab"
    tb.close()
    text = json.dumps(d)
    assert "never-in-a-record" not in text and "bmc.pass" not in text and str(tmp_path) not in text


def test_unknown_host_or_pool_is_refused_early():
    with pytest.raises(ConfigError, match="no host or pool named 'nope'.*hosts: vhost0; pools: virtual"):
        LabTestbed(host="nope")


def test_builds_and_workloads_missing_are_clear_failures(tmp_path, own_cache):
    study = config.load_study("s1")
    tb = LabTestbed(host="vhost0", builds_dir=tmp_path)
    v = study["baseline"]
    assert tb.build_id(study, v) == f"unbuilt:{LabTestbed.build_name(study, v)}"
    with pytest.raises(RunFailed, match=r"lab build xen-.* not found .*build.json\); build it first"):
        tb.run_once(study, v, config.points(study, "lab")[0], 1)
    other = {**study, "workload": {"kind": "no-such-kind"}}
    with pytest.raises(RunFailed, match="no workload for kind 'no-such-kind'"):
        tb._workload(other, config.points(study, "lab")[0], 1)


def test_build_id_is_content_addressed(tmp_path, own_cache):
    study = config.load_study("s1")
    v = study["baseline"]
    d = tmp_path / LabTestbed.build_name(study, v)
    d.mkdir()
    (d / "xen.gz").write_bytes(b"xen")
    (d / "vmlinuz").write_bytes(b"linux")
    (d / "build.json").write_text(json.dumps({"files": {"xen.gz": "xen.gz", "vmlinuz": "vmlinuz"}}))
    tb = LabTestbed(host="vhost0", builds_dir=tmp_path)
    a = tb.build_id(study, v)
    assert len(a) == 16 and a == tb.build_id(study, v)
    b = tb.build(study, v)
    assert "sched=credit" in b.xen_cmdline and b.expect["xen_scheduler"] == "credit"
    (d / "xen.gz").write_bytes(b"xen, patched")
    assert tb.build_id(study, v) != a


def test_cli_lab_run_fails_clearly_without_builds(tmp_path, own_cache):
    r = schedlab(
        "run",
        "s1",
        "--testbed",
        "lab",
        "--host",
        "virtual",
        "--variant",
        "fixed",
        "--point",
        "mode=alone",
        "--reps",
        "1",
        "--exploratory",
        "--out",
        tmp_path,
        timeout=120,
    )
    assert r.returncode != 0
    assert "build it first: python -m schedlab.builds.lab make --study s1" in r.stdout + r.stderr
