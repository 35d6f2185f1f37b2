"""The virtual lab host (schedlab.testing.vhost) and the lab builds (schedlab.builds.lab).

Fast tests: the GRUB configuration (checked by GRUB's own parser, grub-script-check),
the disk recipe's key, QEMU's command line and power-on script, build folders and
their build.json, the LabTestbed's options and workloads. No root, no QEMU.

The end-to-end test (marked qemu and slow; runs only with
SCHEDLAB_LAB_VHOST_TESTS=1, as root): an ipmi_sim BMC powers on QEMU, which
boots the disk through GRUB into Debian's Xen; `schedlab run` (the CLI) then installs
S1's `bug` build, arms it with grub-reboot, reboots the host (busybox reboot -> Xen
-> QEMU reset -> SeaBIOS -> GRUB -> the one-shot entry), checks `xl info` against the
build, runs the netperf-pair workload (warm-up + 1 run) and writes records; then the
`fixed` build, which takes another reboot. About 25-45 min on 2 busy cores under TCG.
"""

import gzip
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT, install_debs

from schedlab import config, store
from schedlab.builds import lab as lb
from schedlab.config import ConfigError
from schedlab.core.testbed import RunFailed
from schedlab.lab import driver as drv
from schedlab.lab.inventory import load_inventory
from schedlab.testbeds.lab import LabTestbed
from schedlab.testing import vhost

GRUB_SCRIPT_CHECK = shutil.which("grub-script-check")


# --- the disk's GRUB configuration -----------------------------------------------------------


def test_grub_cfg_default_entry_one_shot_and_hook():
    uid = vhost.fs_uuid("0123456789abcdef")
    cfg = vhost.grub_cfg(uuid_=uid, kernel="6.1.0-50-amd64")
    # grubenv's next_entry (what grub-reboot sets) is booted once and cleared, as in Debian's 00_header
    i = cfg.index('if [ "${next_entry}" ] ; then')
    once = cfg[i : cfg.index("fi", i)]
    assert 'set default="${next_entry}"' in once and "set next_entry=" in once and "save_env next_entry" in once
    assert f'set default="{vhost.DEFAULT_ENTRY}"' in cfg and f'set fallback="{vhost.DEFAULT_ENTRY}"' in cfg
    assert cfg.index("load_env") < i
    # the host's own entry: Debian's Xen (gzipped, multiboot2) + the dom0 kernel and initramfs
    entry = cfg[cfg.index("menuentry") : cfg.index("}\n", cfg.index("menuentry"))]
    assert f"--id {vhost.DEFAULT_ENTRY} {{" in entry and f"--fs-uuid --set=root {uid}" in entry
    assert f"multiboot2 /boot/xen-4.17-amd64.gz {vhost.DEFAULT_XEN_CMDLINE}" in entry and "insmod gzio" in entry
    assert f"module2 /boot/vmlinuz-6.1.0-50-amd64 {vhost.DEFAULT_DOM0_CMDLINE}" in entry
    assert "module2 --nounzip /boot/initrd.img-6.1.0-50-amd64.schedlab" in entry
    # the driver's menu entries are sourced (after the default entry: it stays entry 0)
    assert cfg.rstrip().endswith("source ${config_directory}/schedlab.cfg\nfi")
    assert "serial --unit=0 --speed=115200" in cfg and "terminal_output serial console" in cfg
    assert "/etc/grub.d" in cfg and "update-grub" in cfg  # says why there is neither
    assert vhost.load_cfg(uid) == f"search.fs_uuid {uid} root hd0,msdos1\nset prefix=($root)/boot/grub\n"


@pytest.mark.skipif(GRUB_SCRIPT_CHECK is None, reason="needs grub-script-check (Debian grub-common)")
def test_grub_cfg_and_driver_entries_parse(tmp_path):
    """GRUB's own parser accepts grub.cfg and the schedlab.cfg entries the driver writes."""
    cfg = tmp_path / "grub.cfg"
    cfg.write_text(vhost.grub_cfg(uuid_=vhost.fs_uuid("k"), kernel="6.1.0-50-amd64"))
    r = subprocess.run([GRUB_SCRIPT_CHECK, str(cfg)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    inv = load_inventory()
    d = drv.HostDriver(inv.hosts["vhost0"], tmp_path / "state")
    (tmp_path / "xen.gz").write_bytes(b"x")
    (tmp_path / "vmlinuz").write_bytes(b"k")
    (tmp_path / "initrd.img").write_bytes(b"i")
    b = lb.Build(
        files={n: tmp_path / n for n in ("xen.gz", "vmlinuz", "initrd.img")},
        xen_cmdline="sched=credit vcpu_migration_delay=250",
        dom0_cmdline="nopvspin",
    )
    entry = d.grub_entry(b)
    (tmp_path / "schedlab.cfg").write_text(entry)
    r = subprocess.run([GRUB_SCRIPT_CHECK, str(tmp_path / "schedlab.cfg")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "insmod gzio" in entry and f"--id schedlab-{b.build_id} {{" in entry
    assert (
        f"multiboot2 /boot/schedlab/{b.build_id}/xen.gz {vhost.DEFAULT_XEN_CMDLINE} "
        "sched=credit vcpu_migration_delay=250"
    ) in entry
    assert f"module2 /boot/schedlab/{b.build_id}/vmlinuz {vhost.DEFAULT_DOM0_CMDLINE} nopvspin" in entry


def _fake_inputs(root: Path, xen: bytes = b"xen") -> vhost.Inputs:
    (root / "dom0").mkdir(parents=True, exist_ok=True)
    (root / "xen").mkdir(parents=True, exist_ok=True)
    (root / "xen" / "xen").write_bytes(xen)
    (root / "xen" / "meta.json").write_text(json.dumps({"sha256": str(hash(xen)), "version": "4.17.5-1"}))
    return vhost.Inputs(dom0_dir=root / "dom0", xen_dir=root / "xen", kernel="6.1.0-50-amd64")


def test_image_key_follows_the_recipe(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLAB_CACHE", str(tmp_path / "cache"))
    keys = vhost.Keys(vhost.home("vhost0")).ensure()
    assert keys.client_key.exists() and keys.known_hosts.read_text().startswith(f"{vhost.HOST_KEY_ALIAS} ssh-ed25519 ")
    assert oct(keys.bmc_password.stat().st_mode & 0o777) == "0o600" and len(keys.bmc_password.read_text().strip()) <= 20
    a = vhost.image_key(_fake_inputs(tmp_path / "a"), keys)
    assert a == vhost.image_key(_fake_inputs(tmp_path / "a"), keys) and len(a) == 16
    assert vhost.image_key(_fake_inputs(tmp_path / "b", b"other xen"), keys) != a
    # the host's identity is part of the disk: a new host key means a new image
    keys.host_key.unlink()
    vhost.Keys(keys.dir).ensure()
    assert vhost.image_key(_fake_inputs(tmp_path / "a"), keys) != a
    assert vhost.fs_uuid(a) == vhost.fs_uuid(a) != vhost.fs_uuid(a + "x")


def test_qemu_command_and_power_on_script(tmp_path):
    vh = vhost.VHost("vhost0", state=tmp_path / "state", run_dir=tmp_path / "run")
    argv = vh.qemu_argv()
    joined = " ".join(argv)
    assert "-no-reboot" not in argv and "-kernel" not in argv  # a reboot resets into the firmware and GRUB
    assert argv[argv.index("-smp") + 1] == "2,sockets=1,cores=2,threads=1"  # the inventory's topology
    assert argv[argv.index("-m") + 1] == "2048" and argv[argv.index("-cpu") + 1] == "Haswell-noTSX"
    assert "tcg" in argv[argv.index("-accel") + 1]
    assert "hostfwd=tcp:127.0.0.1:10022-:22" in joined
    assert f"file={vh.disk},if=virtio,format=qcow2" in joined
    assert f"logfile={tmp_path / 'run' / 'vhost0-console.log'},logappend=on" in joined
    assert "port=9624" in joined and "ipmi-bmc-extern" in joined  # ipmi_sim's VM channel (BMC port + 1)
    script = vh.write_power_on()
    text = script.read_text()
    assert os.access(script, os.X_OK) and text.startswith("#!/bin/sh\n")
    assert text.rstrip().splitlines()[-1].startswith("exec nice -n 10 qemu-system-x86_64 -name vhost0 ")
    r = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # the inventory's console follows the file QEMU logs the serial port to
    spec = load_inventory().hosts["vhost0"]
    assert spec.console["argv"][-1] == str(vhost.RUN_DIR / "vhost0-console.log")
    assert spec.boot["reboot"] == ["busybox", "reboot"] and spec.boot["dom0_cmdline"] == vhost.DEFAULT_DOM0_CMDLINE
    assert spec.boot["xen_cmdline_extra"] == vhost.DEFAULT_XEN_CMDLINE


def test_bmc_password_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLAB_CACHE", str(tmp_path))
    spec = load_inventory().hosts["vhost0"]
    assert spec.public()["bmc"]["password"] == {"source": "cache"}
    with pytest.raises(ConfigError, match="cannot read the BMC password file"):
        spec.bmc.password.read()
    pw = tmp_path / "lab" / "vhost0" / "bmc.pass"
    pw.parent.mkdir(parents=True)
    pw.write_text("s3cret\n")
    pw.chmod(0o644)
    with pytest.raises(ConfigError, match="readable by others"):
        spec.bmc.password.read()
    pw.chmod(0o600)
    assert spec.bmc.password.read() == "s3cret"


# --- lab builds --------------------------------------------------------------------------------


def _fake_xen(extra: bytes, note: bytes) -> bytes:
    """Enough of a Xen image for xen_identity: the extraversion string and a GNU build-id note."""
    return (
        b"\x7fELF"
        + b"\x00" * 60
        + b"\x00"
        + extra
        + b"\x00"
        + b"\x00" * 16
        + b"\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00"
        + note
        + b"\x00" * 32
    )


@pytest.fixture
def fake_sources(tmp_path, monkeypatch):
    """schedlab.builds.lab reading a fake qemu cache: stock = Debian's, boost-bug = a source build."""
    xens = {
        "stock": _fake_xen(b".5", bytes(range(20))),
        "boost-bug": _fake_xen(b".5-schedlab-2f9d0c74", bytes(range(20, 40))),
    }
    for series, blob in xens.items():
        d = tmp_path / "qemu" / series
        d.mkdir(parents=True)
        (d / "xen").write_bytes(blob)
        (d / "meta.json").write_text(
            json.dumps(
                {
                    "source": "debian-source" if series != "stock" else "debian-package",
                    "version": "4.17.5+72-g01140da4e8-1",
                    "patches": [series],
                }
            )
        )
    k = tmp_path / "qemu" / "dom0"
    k.mkdir()
    (k / "vmlinuz").write_bytes(b"linux" * 100)
    (k / "initrd.img").write_bytes(b"initrd" * 100)

    def xen_source(series, stock="debian"):
        d = tmp_path / "qemu" / series
        if not d.exists():
            raise FileNotFoundError(f"Xen patch series {series!r} is not built")
        return d / "xen", json.loads((d / "meta.json").read_text())

    monkeypatch.setattr(lb, "xen_source", xen_source)
    monkeypatch.setattr(lb, "kernel_source", lambda c: (k / "vmlinuz", k / "initrd.img", {"kernel": "6.1.0-50-amd64"}))
    return xens


def test_builds_build_json_expect_and_idempotence(tmp_path, fake_sources):
    study = config.load_study("s1")
    out = tmp_path / "builds"
    folder, changed = lb.make_build(study, "bug", out)
    assert changed and folder == out / "xen-boost-bug_kernel-default"
    meta = json.loads((folder / "build.json").read_text())
    assert meta["files"] == {"xen.gz": "xen.gz", "vmlinuz": "vmlinuz", "initrd.img": "initrd.img"}
    assert meta["expect"] == {
        "xen_version": "4.17.5-schedlab-2f9",
        "build_id": bytes(range(20, 40)).hex(),
        "kernel_release": "6.1.0-50-amd64",
    }
    assert gzip.decompress((folder / "xen.gz").read_bytes()) == fake_sources["boost-bug"]
    assert meta["source"]["xen"]["patches"] == "boost-bug" and meta["made_by"] == "schedlab.builds.lab"
    assert "/root" not in json.dumps(meta) and str(tmp_path) not in json.dumps(meta["source"]["xen"]["cache"])
    b = lb.Build.from_dir(folder)
    assert b.expect == meta["expect"] and set(b.files) == {"xen.gz", "vmlinuz", "initrd.img"}
    # again: nothing changes (same folder, same build.json, same build id)
    before = (folder / "build.json").read_text()
    assert lb.make_build(study, "bug", out) == (folder, False) and (folder / "build.json").read_text() == before
    # Debian's Xen for `stock`: the plain version
    f2, _ = lb.make_build(study, "fixed", out)
    assert json.loads((f2 / "build.json").read_text())["expect"]["xen_version"] == "4.17.5"
    # what the driver installs: the variant's options and the scheduler on top, build ids differ by content
    tb = LabTestbed(host="vhost0", builds_dir=out)
    bug, fixed = tb.build(study, "bug"), tb.build(study, "fixed")
    assert bug.xen_cmdline == "sched=credit" and bug.expect["xen_scheduler"] == "credit"
    assert bug.expect["build_id"] == meta["expect"]["build_id"] and bug.build_id != fixed.build_id
    m = lb.manifest(out, study)
    assert m["builds"]["bug"]["build_id"] == bug.build_id == tb.build_id(study, "bug")
    # a rebuilt hypervisor is a new build
    fake_sources["boost-bug"] = _fake_xen(b".5-schedlab-2f9d0c74", bytes(range(40, 60)))
    (tmp_path / "qemu" / "boost-bug" / "xen").write_bytes(fake_sources["boost-bug"])
    assert lb.make_build(study, "bug", out)[1] and tb.build(study, "bug").build_id != bug.build_id


def test_builds_with_the_hosts_own_kernel(tmp_path, fake_sources):
    """A real host's dom0 kernel instead of the qemu testbed's (virtio-only) one."""
    study = config.load_study("s1")
    (tmp_path / "vmlinuz-6.1.0-28-amd64").write_bytes(b"server kernel")
    (tmp_path / "initrd.img-6.1.0-28-amd64").write_bytes(b"server initrd")
    folder, _ = lb.make_build(
        study,
        "fixed",
        tmp_path / "b",
        kernel=(tmp_path / "vmlinuz-6.1.0-28-amd64", tmp_path / "initrd.img-6.1.0-28-amd64", "6.1.0-28-amd64"),
    )
    meta = json.loads((folder / "build.json").read_text())
    assert meta["expect"]["kernel_release"] == "6.1.0-28-amd64" and meta["source"]["kernel"]["from"] == "given"
    assert (folder / "vmlinuz").read_bytes() == b"server kernel"
    assert (folder / "initrd.img").read_bytes() == b"server initrd"


def test_builds_cli_and_clear_errors(tmp_path):
    study = config.load_study("s1")
    with pytest.raises(ValueError, match="kernel config 'pvspin-n'"):
        lb.kernel_source("pvspin-n")
    with pytest.raises(ValueError, match="cannot tell its extraversion"):
        lb.xen_identity(_fake_xen(b".6", bytes(20)), "4.17.5-1")
    env = {**os.environ, "SCHEDLAB_LAB_BUILDS": str(tmp_path / "b"), "SCHEDLAB_CACHE": str(tmp_path / "cache")}
    r = subprocess.run(
        [str(Path(os.sys.executable)), "-m", "schedlab.builds.lab", "make", "--study", "s1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert r.returncode == 1 and "lab build of s1/" in r.stderr and "python -m schedlab.builds.images" in r.stderr
    assert study["study"] == "s1"


# --- LabTestbed options and workloads -----------------------------------------------------------


def test_lab_options_and_default_workloads(tmp_path):
    from schedlab import workloads

    study = config.load_study("s1")
    tb = LabTestbed(host="vhost0", builds_dir=tmp_path, duration_s=5)
    cfg = tb.config(study)
    assert cfg["duration_s"] == 5 and cfg["scheduler"] == "credit" and set(workloads.DEFAULTS) <= set(cfg)
    s = {**study, "testbeds": {**study["testbeds"], "lab": {"options": {"duration_s": 3, "weights": {"io": 512}}}}}
    cfg = tb.config(s)
    assert cfg["duration_s"] == 3 and cfg["weights"] == {"io": 512, "cpu": 256}
    bad = {**study, "testbeds": {**study["testbeds"], "lab": {"options": {"smp": 3}}}}
    with pytest.raises(ConfigError, match="testbeds.lab.options: unknown option"):
        tb.config(bad)
    with pytest.raises(ValueError, match="unknown lab testbed options"):
        LabTestbed(host="vhost0", nope=1)
    # the shared workloads are the default: a missing build is the first thing that stops a run
    with pytest.raises(RunFailed, match="build it first: python -m schedlab.builds.lab make --study s1"):
        tb.run_once(study, "bug", {"mode": "corun"}, 1)
    other = {**study, "workload": {"kind": "nope"}}
    tb._reserve = lambda: None
    tb.build = lambda st, v: None
    with pytest.raises(RunFailed, match="no workload for kind 'nope'.*netperf-pair"):
        tb._workload(other, {"mode": "corun"}, 1)


# --- end to end: GRUB, BMC, reboots, records ------------------------------------------------------

NEEDS = ("qemu-system-x86_64", "qemu-img", "ipmi_sim", "ipmitool", "ssh", "tail")


def _image_cached() -> bool:
    try:
        vhost.image_dir(build=False)
        return True
    except (FileNotFoundError, OSError):
        return False


def _free(kind=socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


e2e = pytest.mark.skipif(
    os.environ.get("SCHEDLAB_LAB_VHOST_TESTS") != "1",
    # ~35 min on 2 cores (two TCG boots through GRUB, an install, guests): far over the suite's
    # budget, so it runs only when asked for; asked for, it installs and builds what it boots
    reason="end to end on the virtual lab host (~35 min): set SCHEDLAB_LAB_VHOST_TESTS=1 (root)",
)
LAB_DEBS = (
    "qemu-system-x86",
    "qemu-utils",
    "openipmi",
    "ipmitool",
    "openssh-client",
    "grub2-common",
    "grub-pc-bin",
    "fdisk",
    "debootstrap",
    "e2fsprogs",
    "cpio",
    "dpkg-dev",
    "bison",
    "flex",
)


def _lab_prerequisites(study: dict) -> None:
    """What the end-to-end test boots: Debian packages, the qemu testbed's images (dom0
    kernel, Debian's Xen) and the source build of every variant's Xen series."""
    if os.geteuid() != 0:
        pytest.fail(
            "SCHEDLAB_LAB_VHOST_TESTS=1: the virtual lab host needs root (debootstrap, GRUB image)", pytrace=False
        )
    install_debs(*LAB_DEBS, why="SCHEDLAB_LAB_VHOST_TESTS=1: the virtual lab host's Debian packages")
    missing = [t for t in NEEDS if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]
    if missing:
        pytest.fail(f"packages installed but {', '.join(missing)} not found", pytrace=False)
    from schedlab.builds import images as qi

    qi.ensure_images(build=True)
    for v in study["variants"].values():
        series = (v.get("xen") or {}).get("patches", "stock")
        if series != "stock":  # lab builds boot Debian's prebuilt Xen for stock
            qi.build_xen(series, build=True)


@pytest.mark.qemu
@pytest.mark.slow
@e2e
def test_vhost_end_to_end_both_variants(tmp_path):
    t0 = time.monotonic()
    study = config.load_study("s1")
    _lab_prerequisites(study)
    image = vhost.image_dir(build=True)
    builds = tmp_path / "builds"
    for v in study["variants"]:
        lb.make_build(study, v, builds)
    # the virtual host on its own ports, disk and console (a human's vhost0 may be up)
    vh = vhost.VHost(
        "vhost0",
        state=tmp_path / "state",
        run_dir=tmp_path / "run",
        ssh_port=_free(),
        bmc_port=_free(socket.SOCK_DGRAM),
        vm_port=_free(),
    )
    vh.prepare()
    text = (ROOT / "config" / "lab.yaml").read_text()
    text = (
        text.replace("port: 10022", f"port: {vh.ssh_port}")
        .replace("port: 9623", f"port: {vh.bmc_port}")
        .replace(str(vhost.RUN_DIR / "vhost0-console.log"), str(vh.console_log))
        .replace("state_dir: lab", f"state_dir: {tmp_path / 'labstate'}")
    )
    inv_path = tmp_path / "lab.yaml"
    inv_path.write_text(text)
    inv = load_inventory(inv_path)
    assert inv.hosts["vhost0"].port == vh.ssh_port and inv.hosts["vhost0"].bmc.port == vh.bmc_port
    sim = vh.ipmi_sim()
    sim.start()
    env = {
        **os.environ,
        "SCHEDLAB_LAB_INVENTORY": str(inv_path),
        "SCHEDLAB_LAB_BUILDS": str(builds),
        "SCHEDLAB_LAB_INVOCATION": f"test-{tmp_path.name}",
    }
    data = tmp_path / "data"
    times = {"setup": round(time.monotonic() - t0, 1)}
    try:
        for variant in ("bug", "fixed"):  # the host starts powered off; the second build takes a reboot
            t = time.monotonic()
            r = subprocess.run(
                [
                    str(Path(os.sys.executable).parent / "schedlab"),
                    "run",
                    "config/studies/s1.yaml",
                    "--testbed",
                    "lab",
                    "--host",
                    "vhost0",
                    "--variant",
                    variant,
                    "--point",
                    "mode=corun",
                    "--reps",
                    "1",
                    "--exploratory",
                    "--out",
                    str(data),
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=3 * 3600,
            )
            times[variant] = round(time.monotonic() - t, 1)
            assert r.returncode == 0, f"{variant}:\n{r.stdout[-5000:]}\n{r.stderr[-10000:]}"
        host = vh.host()
        env_list = host.run(["grub-editenv", "/boot/grub/grubenv", "list"], timeout=120).stdout
    finally:
        sim.stop()
    assert "next_entry=schedlab" not in env_list  # the host boots its default entry next time
    folder = store.raw_dir(data, "lab", "s1")
    recs = {p.name: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}
    ok = [r for r in recs.values() if r["status"] == "ok"]
    assert len(ok) == 4, sorted(recs)  # warm-up + 1 run, per variant
    boots = {}
    for rec in ok:
        p = folder / f"{rec['run_id']}.json"
        assert store.check_record(p, store.read_record(p)) == []
        v = rec["variant"]
        want = lb.variant_build(builds, study, v)
        tb = rec["provenance"]["testbed"]
        assert tb["reserved_host"] == "vhost0" and tb["host"]["name"] == "vhost0"
        assert tb["host"]["bmc"]["password"] == {"source": "cache"} and tb["builds"][v]["build_id"] == want.build_id
        assert rec["provenance"]["build_id"] == want.build_id
        lab = rec["counters"]["lab"]
        assert lab["host"] == "vhost0" and lab["build_id"] == want.build_id
        assert lab["booted"]["xen_version"] == want.expect["xen_version"]
        assert lab["booted"]["xen_scheduler"] == "credit" and lab["booted"]["release"] == want.expect["kernel_release"]
        assert rec["metrics"]["throughput_mbps"] > 0 and rec["metrics"]["latency_us"] > 0
        boots.setdefault(v, set()).add(lab["boot_id"])
    assert all(len(b) == 1 for b in boots.values()) and boots["bug"] != boots["fixed"]
    assert "schedlab" in ok[0]["counters"]["lab"]["booted"]["xen_version"] or any(
        "schedlab" in r["counters"]["lab"]["booted"]["xen_version"] for r in ok
    )
    # GRUB booted the one-shot entries: its echo is in the captured consoles
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "labstate" / "logs" / "vhost0").glob("console-*"))
    for v in ("bug", "fixed"):
        assert f"schedlab: Xen {lb.variant_build(builds, study, v).build_id}" in logs
    print(f"\nvirtual lab host end to end: {times} (image {image.name})")
