"""End-to-end test of the qemu testbed: boot Xen + dom0 under QEMU, run one short S1 point.

Slow (boot under TCG ~2 min, guest starts ~1-2 min; budget 10 min). Runs only when
SCHEDLAB_QEMU_TESTS=1, or when the images are already cached (then no root is needed);
with SCHEDLAB_QEMU_TESTS=1 and no cache it builds them first (root, debootstrap, network).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from schedlab.host import Host
from schedlab.testbeds import qemu_images as qi

REPO = Path(__file__).resolve().parents[1]
FORCED = os.environ.get("SCHEDLAB_QEMU_TESTS") == "1"


def needs_qemu(f):
    f = pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None,
                           reason="qemu-system-x86_64 not installed")(f)
    f = pytest.mark.skipif(not (FORCED or qi.images_cached()),
                           reason="qemu testbed: set SCHEDLAB_QEMU_TESTS=1 or build the images first")(f)
    return pytest.mark.qemu(f)


@pytest.fixture(scope="module")
def s1():
    return yaml.safe_load((REPO / "config/studies/s1.yaml").read_text())


@pytest.fixture(scope="module")
def testbed():
    from schedlab.testbeds.qemu import QemuTestbed
    tb = QemuTestbed(build=FORCED, duration_s=3, reuse_vm=True)
    yield tb
    tb.close()


def test_host_argv_quoting():
    """Fast, always runs: remote commands are argument lists quoted with shlex.join."""
    h = Host("127.0.0.1", port=2222, known_hosts="/tmp/kh", host_key_alias="x")
    argv = h.ssh_argv(["sh", "-c", "echo $HOME; rm -rf /", "a b"])
    assert argv[0] == "ssh" and "StrictHostKeyChecking=yes" in argv and "BatchMode=yes" in argv
    assert argv[-1] == "sh -c 'echo $HOME; rm -rf /' 'a b'"
    with pytest.raises(TypeError):
        h.run("echo hi")


@needs_qemu
def test_s1_corun_end_to_end(testbed, s1):
    """Boot, check what booted (credit1), run S1 'corun' once: both metrics come back."""
    desc = testbed.describe()
    assert desc["xen_debian"]["package"] == "xen-hypervisor-4.17-amd64"
    r = testbed.run_once(s1, "fixed", {"mode": "corun"}, seed=1)
    assert testbed.describe()["booted"]["xen_scheduler"] == "credit"
    assert r.metrics["throughput_mbps"] > 0
    assert r.metrics["latency_us"] > 0
    assert r.counters["xen_scheduler"] == "credit"
    assert "cpu" in r.counters["domains"] and "io" in r.counters["domains"]


@needs_qemu
def test_unbuilt_patch_series_fails_cleanly(testbed, s1):
    from schedlab.testbeds.base import RunFailed
    try:
        qi.build_xen("boost-bug", build=False, log=None)
        pytest.skip("boost-bug series is built")
    except FileNotFoundError:
        pass
    with pytest.raises(RunFailed, match="not built"):
        testbed.run_once(s1, "bug", {"mode": "alone"}, seed=1)
    assert testbed.build_id(s1, "bug") != testbed.build_id(s1, "fixed")
