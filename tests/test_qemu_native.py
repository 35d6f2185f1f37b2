"""Kernels booted natively under QEMU (S2 native side): schedlab/testbeds/qemu_native.py,
schedlab/builds/native.py, and packs run over ssh in such a guest (--target qemu-native:CONFIG).

The fast tests need nothing. The boot tests (marked qemu) run when the pvspin-y kernel and
the native image are cached, or with SCHEDLAB_QEMU_TESTS=1 (then a missing image is built;
a missing kernel is not: building one takes 10-25 min, so the tests skip and say how).
Budget: one boot (~30-60 s under TCG) and two short pbzip2 repetitions, ~2-4 min.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from schedlab import packrun, store
from schedlab.builds import kernel as kb
from schedlab.builds import native as ni
from schedlab.core.testbed import RunFailed
from schedlab.host import Host, HostError
from schedlab.packs import PackOutputError
from schedlab.testbeds import qemu_native as qn

REPO = Path(__file__).resolve().parents[1]
FORCED = os.environ.get("SCHEDLAB_QEMU_TESTS") in ("1", "all")
CONFIG = "pvspin-y"


def _kernel():
    try:
        return kb.build_kernel(CONFIG, build=False, log=None)
    except (FileNotFoundError, kb.KernelBuildError):
        return None


def needs_native(f):
    # a native boot plus pack runs (minutes under TCG): with the long qemu tests, which build
    # what they boot (the kernel: 10-25 min once)
    f = pytest.mark.skipif(
        os.environ.get("SCHEDLAB_QEMU_TESTS") != "all", reason="native boot test: set SCHEDLAB_QEMU_TESTS=all"
    )(f)
    return pytest.mark.qemu(pytest.mark.usefixtures("native_prerequisites")(f))


@pytest.fixture(scope="session")
def native_prerequisites():
    if shutil.which("qemu-system-x86_64") is None:
        pytest.fail(
            "SCHEDLAB_QEMU_TESTS=all: qemu-system-x86_64 not installed (make deps-test installs it)", pytrace=False
        )
    if not ni.image_cached() and os.geteuid() != 0:
        pytest.fail("SCHEDLAB_QEMU_TESTS=all: building the native image needs root (debootstrap)", pytrace=False)
    try:
        kb.build_kernel(CONFIG, build=True)
        ni.image(build=True)
    except (kb.KernelBuildError, RuntimeError, OSError) as e:
        pytest.fail(
            f"SCHEDLAB_QEMU_TESTS=all: building kernel {CONFIG} / the native image failed: {str(e).splitlines()[0]}",
            pytrace=False,
        )


@pytest.fixture(scope="module")
def s2native():
    return yaml.safe_load((REPO / "config/studies/s2native.yaml").read_text())


# -- fast ------------------------------------------------------------------------------------------
def test_cmdline_and_kernel_spec(s2native):
    assert qn.cmdline_for("") == qn.BASE_CMDLINE
    assert qn.cmdline_for("nopvspin").endswith(" nopvspin") and "root=/dev/vda" in qn.BASE_CMDLINE
    assert "console=ttyS0" in qn.BASE_CMDLINE and ni.INIT_IN_IMAGE in qn.BASE_CMDLINE
    specs = {qn.NativeRunner.kernel_spec(s2native, v) for v in s2native["variants"]}
    # 2 kernels x booted with/without nopvspin
    assert specs == {("pvspin-y", ""), ("pvspin-y", "nopvspin"), ("pvspin-n", ""), ("pvspin-n", "nopvspin")}
    with pytest.raises(RunFailed, match="no variant"):
        qn.NativeRunner.kernel_spec(s2native, "nope")
    with pytest.raises(RunFailed, match="no kernel.config"):
        qn.NativeRunner.kernel_spec({"study": "x", "variants": {"a": {"label": "a"}}}, "a")


def test_every_study_variant_names_a_kernel_fragment(s2native):
    for name, v in s2native["variants"].items():
        assert (REPO / "config/kernel" / f"{v['kernel']['config']}.config").is_file(), name
    # one pack per bench, each study metric maps onto a pack metric
    for m in s2native["metrics"]:
        bench = m["when"]["bench"]
        assert bench in qn.PACK_METRIC and bench in s2native["workload"]["packs"]


def test_qemu_argv(tmp_path):
    class K:
        name, key, bzimage = "pvspin-y", "k" * 16, tmp_path / "bzImage"

    class Img:
        disk, identity, known_hosts = tmp_path / "disk.img", tmp_path / "id", tmp_path / "kh"

    cfg = {"accel": "tcg,thread=multi", "cpu": "Haswell-noTSX", "smp": 2, "memory_mb": 2048}
    vm = qn.NativeVM(K, Img, qn.cmdline_for("nopvspin"), cfg, tmp_path / "run")
    argv = vm.argv()
    assert argv[:3] == ["nice", "-n", "10"]
    for a, b in (
        ("-cpu", "Haswell-noTSX"),
        ("-smp", "2"),
        ("-m", "2048"),
        ("-kernel", str(K.bzimage)),
        ("-append", qn.cmdline_for("nopvspin")),
    ):
        assert argv[argv.index(a) + 1] == b
    assert any(x.startswith("user,id=n0,hostfwd=tcp:127.0.0.1:") for x in argv)
    assert vm.host.host_key_alias == ni.HOST_KEY_ALIAS and vm.host.known_hosts == Img.known_hosts


def test_target_specs():
    h = packrun.target_from_name("ssh:bench@example.org:2222")
    assert isinstance(h, Host) and (h.user, h.hostname, h.port) == ("bench", "example.org", 2222)
    assert h.testbed == "lab"
    h.close()
    assert packrun.target_from_name("ssh:example.org").user == "root"
    for bad in ("ssh:", "ssh:host:port", "dom0", "qemu-native:"):
        with pytest.raises(ValueError):
            packrun.target_from_name(bad)


def test_cli_reports_ssh_failure_clearly(tmp_path, capsys):
    # nothing listens on port 1: ssh fails; the CLI says so and exits 1 (no traceback)
    rc = packrun.main(
        ["run", "pbzip2", "--target", "ssh:root@127.0.0.1:1", "--reps", "1", "--warmup", "0", "--out", str(tmp_path)]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "error: on target ssh:root@127.0.0.1:1" in err and "ssh failed" in err
    assert not list(tmp_path.rglob("*.json"))


def test_cli_unknown_kernel_config(tmp_path, capsys):
    rc = packrun.main(["run", "pbzip2", "--target", "qemu-native:no-such-kernel", "--out", str(tmp_path)])
    assert rc == 2 and "no fragment" in capsys.readouterr().err


def test_deadline_target_caps_timeouts():
    class H:
        def run(self, argv, timeout=60, input=None, check=True):
            return timeout

    t = qn.DeadlineTarget(H(), "x")
    assert t.run(["true"], timeout=50) == 50
    import time

    t.deadline = time.monotonic() + 5
    assert t.run(["true"], timeout=7200) <= 5
    t.deadline = time.monotonic() - 1
    with pytest.raises(HostError):
        t.run(["true"], timeout=10)


def test_deadline_target_retries_ssh_that_never_started():
    class H:
        calls = 0

        def run(self, argv, timeout=60, input=None, check=True):
            H.calls += 1
            if H.calls < 3:
                raise HostError(
                    "ssh failed",
                    subprocess.CompletedProcess(
                        argv, 255, "", "ssh: connect to host 127.0.0.1 port 1: Connection refused"
                    ),
                )
            return "ok"

    assert qn.DeadlineTarget(H(), "x").run(["true"]) == "ok" and H.calls == 3

    class Started:
        def run(self, argv, timeout=60, input=None, check=True):
            raise HostError("exit 2", subprocess.CompletedProcess(argv, 2, "", "make: *** Error 2"))

    with pytest.raises(HostError, match="exit 2"):  # a command that ran and failed is not retried
        qn.DeadlineTarget(Started(), "x").run(["make"])


def test_native_image_recipe():
    pk = ni.packages()
    for p in ("openssh-server", "busybox", "postgresql-15", "pbzip2", "gcc", "make", "linux-source-6.1"):
        assert p in pk
    assert ni.image_key() == ni.image_key() and ni.rootfs_key() != ni.image_key()
    assert ni.INIT_SCRIPT.is_file() and os.access(ni.INIT_SCRIPT, os.X_OK)


# -- boots -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def native_target():
    t = qn.NativeTarget(CONFIG, build=FORCED, log=print)
    yield t
    t.close()


class Garbled:
    """The native target, but pbzip2's timed output comes back garbled (a broken tool)."""

    def __init__(self, target):
        self.target, self.name, self.testbed = target, target.name, target.testbed

    def run(self, argv, timeout=60, input=None, check=True):
        res = self.target.run(argv, timeout=timeout, input=input, check=check)
        # the timed pbzip2 run only (timed_argv: sh -c WRAPPER sh CWD OUT ERR pbzip2 ...), not the
        # pack's tool check (sh -c 'command -v ...' sh pbzip2)
        if argv[:2] == ["sh", "-c"] and "pbzip2" in argv[7:8]:
            return subprocess.CompletedProcess(argv, 0, "pbzip2: *** stack smashing detected ***\n", "")
        return res

    def put(self, local, remote):
        self.target.put(local, remote)

    def get(self, remote, local):
        self.target.get(remote, local)

    def tmpdir(self):
        return self.target.tmpdir()


@needs_native
def test_native_boot_checks_what_booted(native_target):
    info = native_target.vm.info
    meta = _kernel().meta
    assert info["release"] == meta["kernelrelease"] and info["version"] == meta["uts_version"]
    assert info["config_sha256"] == meta["config_sha256"]
    assert info["paravirt_spinlocks"] == "CONFIG_PARAVIRT_SPINLOCKS=y"
    assert info["cmdline"] == qn.cmdline_for("") and info["cpus"] == 2
    assert native_target.vm.boot_seconds < 300


@needs_native
def test_pack_over_native_target_writes_a_valid_record(native_target, tmp_path):
    pytest.importorskip("jsonschema")
    paths = packrun.run_pack(
        "pbzip2",
        {"threads": "2", "size_mb": "1"},
        native_target,
        reps=1,
        warmup=0,
        out_dir=tmp_path,
        seed=3,
        variant=CONFIG,
        log=open(os.devnull, "w"),
    )
    assert len(paths) == 1 and paths[0].parent == tmp_path / "raw" / "qemu" / "pack-pbzip2"
    assert store.verify(tmp_path) == {}
    rec = json.loads(paths[0].read_text())
    assert rec["testbed"] == "qemu" and rec["metrics"]["elapsed_s"] > 0 and rec["variant"] == CONFIG
    assert rec["provenance"]["testbed"]["target"] == f"qemu-native:{CONFIG}"
    assert rec["provenance"]["testbed"]["facts"]["kernel"] == _kernel().meta["kernelrelease"]
    # the scratch directory in the guest is gone
    assert (
        native_target.run(["sh", "-c", "ls -d /tmp/schedlab.* 2>/dev/null | wc -l"], timeout=30).stdout.strip() == "0"
    )


@needs_native
def test_malformed_output_over_native_target_names_the_run_and_writes_no_record(native_target, tmp_path):
    with pytest.raises(PackOutputError) as e:
        packrun.run_pack(
            "pbzip2",
            {"threads": "1", "size_mb": "1"},
            Garbled(native_target),
            reps=1,
            warmup=0,
            out_dir=tmp_path,
            seed=4,
            variant=CONFIG,
            log=open(os.devnull, "w"),
        )
    assert e.value.run_id.startswith(f"{CONFIG}_threads-1_r00_") and e.value.run_id in str(e.value)
    assert "stack smashing" in e.value.offending_text
    assert not list(tmp_path.rglob("*.json"))


def test_icount_mode_argv():
    """icount_shift: single-threaded TCG with deterministic virtual time; out-of-range shifts
    are refused with the reason."""
    from schedlab.core.testbed import RunFailed
    from schedlab.machine import MachineOptions

    def accel_argv(options):
        return MachineOptions.of(options).accel_argv()

    assert accel_argv({"accel": "tcg,thread=multi", "icount_shift": None}) == ["-accel", "tcg,thread=multi"]
    assert accel_argv({"accel": "tcg,thread=multi", "icount_shift": 3}) == [
        "-accel",
        "tcg,thread=single",
        "-icount",
        "shift=3,sleep=off",
    ]
    for bad in (7, -1, "auto", True, 2.5):
        with pytest.raises(RunFailed, match="icount_shift"):
            accel_argv({"accel": "tcg", "icount_shift": bad})


def test_joined_patch_series(tmp_path, monkeypatch):
    from schedlab.builds import images as qi

    """'a+b' is series a's patches then b's; a part without patches is named."""
    for name, files in (("a", ["2.patch", "1.patch"]), ("b", ["1.patch"])):
        (tmp_path / name).mkdir()
        for f in files:
            (tmp_path / name / f).write_text(name)
    monkeypatch.setattr(qi, "PATCH_DIR", tmp_path)
    got = qi.series_patches("a+b")
    assert [(p.parent.name, p.name) for p in got] == [("a", "1.patch"), ("a", "2.patch"), ("b", "1.patch")]
    with pytest.raises(FileNotFoundError, match="no patches in .*/c"):
        qi.series_patches("a+c")


def test_native_resume_option_decides_suspend_or_fresh_boot():
    """native_resume (default true) keeps a kernel's VM for later rounds; false kills it, so
    the next round of that kernel boots afresh (under icount the boot is the replicate)."""
    from schedlab.testbeds.qemu import QemuTestbed

    tb = QemuTestbed(build=False)
    study = yaml.safe_load((REPO / "config/studies/s2native.yaml").read_text())
    assert tb.config(study)["native_resume"] is False  # S2 native's design: the boot is the replicate
    del study["testbeds"]["qemu"]["options"]["native_resume"]
    assert tb.config(study)["native_resume"] is True  # the testbed's default

    class VM:
        killed = suspended = False

        def alive(self):
            return True

        def suspend(self):
            VM.suspended = True
            return 0.1

        def kill(self):
            VM.killed = True

    for resume in (True, False):
        VM.killed = VM.suspended = False
        runner = qn.NativeRunner(tb, suspend=resume)
        runner._vm, runner._vm_key = VM(), ("k",)
        runner._vm.kernel, runner._vm.cmdline = type("K", (), {"name": "pvspin-n"})(), "x init=/sbin/init"
        runner._leave()
        assert (VM.suspended, VM.killed) == (resume, not resume)
        assert ("k",) in runner._suspended if resume else not runner._suspended


def test_a_fresh_boot_closes_native_kernels_whatever_native_resume_says():
    """The unit is the boot: where the plan starts a boot, fresh_boot closes the native VM and
    its saved snapshots, also for a study that would resume kernels between rounds."""
    from schedlab.testbeds.qemu import QemuTestbed

    study = yaml.safe_load((REPO / "config/studies/s2native.yaml").read_text())
    tb = QemuTestbed(build=False)

    class Native:
        closed = 0

        def close(self):
            Native.closed += 1

    tb._native = Native()
    tb.fresh_boot(study)
    assert Native.closed == 1
    study["testbeds"]["qemu"]["options"]["native_resume"] = True
    tb.fresh_boot(study)
    assert Native.closed == 2
