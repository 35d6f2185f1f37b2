"""The lab host driver against a real sshd "host" and a real IPMI BMC (ipmi_sim),
no QEMU: the host is OpenSSH's sshd on a loopback port, with a generated host
key and client key, running in its own PID and mount namespaces so that a BMC
power-off kills all of it and every power-on is a new boot (new boot_id).

What is real: ssh (BatchMode, strict host key checking), sshd, ipmitool over
lanplus, ipmi_sim power control, grub-reboot / grub-editenv on a GRUB
environment block in a temporary boot folder, the lock and quarantine files,
schedlab.run's records. What is not: the host is not Xen, so these tests pass
the driver a stand-in verifier (`standin_verifier`, below) instead of `xl info`
- except test_not_xen_is_refused, which runs the real verifier and expects the
run to be refused.
"""

import json
import os
import shutil
import signal
import threading
from pathlib import Path

import pytest

from schedlab import config, store
from schedlab.builds.lab import Build
from schedlab.core.testbed import RunFailed, RunResult
from schedlab.host import Host
from schedlab.lab import driver as drv
from schedlab.lab.inventory import load_inventory
from schedlab.testing.standins import IpmiSim, SshdHost

NEEDS = {
    "ipmi_sim": "openipmi",
    "ipmitool": "ipmitool",
    "sshd": "openssh-server",
    "ssh": "openssh-client",
    "grub-reboot": "grub2-common",
    "grub-editenv": "grub-common",
    "unshare": "util-linux",
}
_missing = [t for t in NEEDS if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]
pytestmark = pytest.mark.skipif(
    bool(_missing) or os.geteuid() != 0,
    reason=f"needs root and Debian packages {', '.join(sorted(set(NEEDS.values())))} "
    f"(missing: {', '.join(_missing) or '-'})",
)

PW_ENV = "SCHEDLAB_TEST_BMC_PW"


class Lab:
    """A stand-in host + BMC + inventory under `root`."""

    def __init__(
        self,
        root: Path,
        monkeypatch,
        *,
        bmc=True,
        reboot=("bmc-cycle",),
        boot_s=20,
        attempts=2,
        quarantine_after=2,
        powered=False,
    ):
        self.root = root
        self.host = SshdHost(root / "host")
        if not bmc and reboot == ("bmc-cycle",):
            reboot = ("kill", "-TERM", "1")
        self.sim = IpmiSim(root / "bmc", self.host.start_argv()) if bmc else None
        (root / "boot" / "grub").mkdir(parents=True)
        # the one-time hook (docs/lab-testbed.md): grub.cfg sources schedlab.cfg
        (root / "boot" / "grub" / "grub.cfg").write_text(
            "if [ -f ${config_directory}/schedlab.cfg ]; then source ${config_directory}/schedlab.cfg; fi\n"
        )
        lines = [
            "version: 1",
            f"state_dir: {root}/state",
            "hosts:",
            "  t1:",
            f"    ssh: {{address: 127.0.0.1, port: {self.host.port}, user: root, key: {{path: {self.host.client_key}}},"
            f" known_hosts: {{path: {self.host.known_hosts}}}, host_key_alias: {self.host.alias}}}",
            "    topology: {sockets: 1, cores_per_socket: 1, threads_per_core: 1, numa_nodes: 1}",
            f'    console: {{argv: [tail, -n, "+1", -F, {self.host.log}]}}',
            f"    boot: {{dir: {root}/boot/schedlab, grub_dir: {root}/boot/grub,"
            f" grub_reboot: [grub-reboot, --boot-directory={root}/boot], reboot: [{', '.join(json.dumps(x) for x in reboot)}],"
            " dom0_cmdline: root=/dev/vda ro}",
            f"    timeouts: {{ssh_connect_s: 3, boot_s: {boot_s}, shutdown_s: 10, command_s: 60, install_s: 60}}",
            f"    policy: {{boot_attempts: {attempts}, quarantine_after: {quarantine_after}}}",
        ]
        if bmc:
            lines.insert(
                7,
                f"    bmc: {{address: 127.0.0.1, port: {self.sim.port}, user: {self.sim.user},"
                f" password: {{env: {PW_ENV}}}, timeout_s: 4, retries: 0}}",
            )
            monkeypatch.setenv(PW_ENV, self.sim.password)
        self.inventory_path = root / "lab.yaml"
        self.inventory_path.write_text("\n".join(lines) + "\n")
        self.inventory = load_inventory(self.inventory_path)
        self.spec = self.inventory.hosts["t1"]
        self.log: list[str] = []
        if self.sim:
            self.sim.start()
            if powered:
                self.power_on()

    def power_on(self):
        from schedlab.lab.power import BMC

        BMC(self.spec.bmc).on()
        self.host.wait_listening()

    def driver(self, **kw) -> drv.HostDriver:
        return drv.HostDriver(
            self.spec,
            self.inventory.state_dir,
            log=self.log.append,
            verifier=kw.pop("verifier", standin_verifier),
            **kw,
        )

    def build(self, name="a", size=1000) -> Build:
        d = self.root / "builds" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "xen.gz").write_bytes(name.encode() * size)
        (d / "vmlinuz").write_bytes(b"kernel-" + name.encode() * size)
        return Build(
            files={"xen.gz": d / "xen.gz", "vmlinuz": d / "vmlinuz"},
            xen_cmdline="sched=credit loglvl=all",
            expect={"kernel_release": os.uname().release},
        )

    def pid1(self) -> int:
        """sshd, pid 1 of the stand-in host's PID namespace."""
        (unshare,) = self.sim.powered_pids()
        (pid,) = Path(f"/proc/{unshare}/task/{unshare}/children").read_text().split()
        return int(pid)

    def close(self):
        if self.sim:
            self.sim.stop()
        self.host.stop()


@pytest.fixture
def lab(tmp_path, monkeypatch):
    labs = []

    def make(**kw):
        l = Lab(tmp_path / f"lab{len(labs)}", monkeypatch, **kw)
        labs.append(l)
        return l

    monkeypatch.setenv(drv.ENV_INVOCATION, f"test-{tmp_path.name}")
    yield make
    for l in labs:
        l.close()


def standin_verifier(host: Host, build: Build, d: drv.HostDriver) -> dict:
    """NOT `xl info`: the stand-in host is not Xen. Checks what it can prove: the
    kernel release the build expects, the build on the host byte for byte, and the
    one-shot GRUB entry armed for exactly this build."""
    rel = host.run(["uname", "-r"], timeout=30).stdout.strip()
    sums = host.run(["sha256sum", f"{d.build_dir(build)}/xen.gz", f"{d.build_dir(build)}/vmlinuz"]).stdout.split()
    env = host.run(["grub-editenv", f"{d.spec.boot['grub_dir']}/grubenv", "list"]).stdout
    problems = []
    if rel != build.expect["kernel_release"]:
        problems.append(f"release {rel}")
    if [sums[0], sums[2]] != [build.sha256["xen.gz"], build.sha256["vmlinuz"]]:
        problems.append("files differ")
    if f"next_entry={d.entry_id(build)}" not in env:
        problems.append(f"grubenv: {env!r}")
    if problems:
        raise drv.WrongBuild("stand-in verify: " + "; ".join(problems))
    return {"release": rel, "xen_version": "n/a (stand-in host, not Xen)", "grubenv": env.strip()}


def simple_workload(host: Host, build, info) -> RunResult:
    out = host.run(
        ["sh", "-c", 'echo "$1" > /tmp/schedlab-lab-test.out; cat /proc/loadavg', "_", build.build_id], timeout=30
    ).stdout
    return RunResult(metrics={"load1": float(out.split()[0])}, counters={"echo": build.build_id})


def steps(d):
    return [e["step"] for e in d.events]


# --- the happy path, and a host that was off ------------------------------------------------


def test_lifecycle_install_boot_verify_run_restore(lab):
    L = lab()  # the host starts powered off: the driver powers it on
    b1, b2 = L.build("a"), L.build("b")
    with L.driver() as d:
        r = d.run(b1, simple_workload)
        first_boot = d.boot_id
        ev = steps(d)
        assert ev[:4] == ["unreachable", "power-cycle", "up", "install"], ev
        assert {"grub-reboot", "reboot", "booted", "verified", "restored-default"} <= set(ev), ev
        lab_c = r.counters["lab"]
        assert lab_c["rebooted"] and lab_c["build_id"] == b1.build_id and lab_c["host"] == "t1"
        # content-addressed install and a GRUB entry per build
        inst = L.root / "boot" / "schedlab" / b1.build_id
        assert (inst / "xen.gz").read_bytes() == b1.files["xen.gz"].read_bytes()
        cfg = (L.root / "boot" / "grub" / "schedlab.cfg").read_text()
        assert f"--id schedlab-{b1.build_id} {{" in cfg and "multiboot2" in cfg and "sched=credit loglvl=all" in cfg
        # one-shot consumed/cleared: the host boots its default entry next time
        env = (L.root / "boot" / "grub" / "grubenv").read_text()
        assert "next_entry=schedlab" not in env
        # same build again: no reinstall, no reboot
        r2 = d.run(b1, simple_workload)
        assert not r2.counters["lab"]["rebooted"] and d.boot_id == first_boot
        # another build: installed next to the first, rebooted into
        r3 = d.run(b2, simple_workload)
        assert r3.counters["lab"]["rebooted"] and d.boot_id != first_boot
        cfg = (L.root / "boot" / "grub" / "schedlab.cfg").read_text()
        assert f"schedlab-{b1.build_id}" in cfg and f"schedlab-{b2.build_id}" in cfg
        # the console was captured during the boots
        consoles = list((L.inventory.state_dir / "logs" / "t1").glob("console-*.log"))
        assert len(consoles) == 2 and any("Server listening" in c.read_text() for c in consoles)
    assert not d.state.locked


def test_not_xen_is_refused(lab):
    """The real verifier (`xl info`) on a host that is not running Xen: the run fails, clearly."""
    L = lab(powered=True)
    d = L.driver(verifier=drv.xl_verifier)
    with d, pytest.raises(drv.WrongBuild, match=r"host t1: `xl info` cannot run: not running Xen\?"):
        d.run(L.build(), simple_workload)
    assert d.state.failures() == 1


def test_xl_info_checks():
    """What the verifier compares (on `xl info` text as Xen prints it)."""
    info = drv.parse_kv(
        "host                   : xen1\nxen_version            : 4.17.6-pre\n"
        "xen_changeset          : Tue Oct 1 12:00:00 2024 +0200 git:abc1234\n"
        "xen_commandline        : console=com1 sched=credit\nxen_scheduler          : credit\n"
        "nr_cpus                : 4\nnr_nodes               : 1\ncores_per_socket       : 2\n"
        "threads_per_core       : 2\n"
    )
    info["release"] = "6.1.0-schedlab"

    class Spec:
        topology = {"sockets": 1, "cores_per_socket": 2, "threads_per_core": 2, "numa_nodes": 1}

    class B:
        expect = {
            "xen_version": "4.17.6-pre",
            "xen_changeset": "Tue Oct 1 12:00:00 2024 +0200 git:abc1234",
            "xen_scheduler": "credit",
            "kernel_release": "6.1.0-schedlab",
        }

    assert drv.check_booted(info, B, Spec, "console=com1 sched=credit") == []
    B.expect = {**B.expect, "xen_changeset": "git:fff0000", "kernel_release": "6.1.0-other"}
    Spec.topology = {**Spec.topology, "numa_nodes": 2}
    probs = drv.check_booted(info, B, Spec, "console=com1 sched=credit2")
    assert len(probs) == 4 and any("nr_nodes is 1, the inventory says 2" in p for p in probs)
    assert any("xen_commandline" in p for p in probs) and any("dom0 kernel" in p for p in probs)


# --- faults -------------------------------------------------------------------------------------


def test_ssh_refused_without_bmc_fails_then_quarantines(lab):
    L = lab(bmc=False)  # nothing listening, nothing to power-cycle with
    b = L.build()
    d = L.driver()
    with d, pytest.raises(drv.BootFailed, match="not reachable over ssh.*no BMC to power-cycle it"):
        d.run(b, simple_workload)
    assert "no-bmc" in steps(d) and d.state.failures() == 1
    with d, pytest.raises(drv.HostQuarantined, match="failed 2 time.*quarantined for this invocation") as e:
        d.run(b, simple_workload)
    q = json.loads(d.state.quarantine_path.read_text())
    assert q["failures"] == 2 and "not reachable" in q["reason"]
    assert "events:" in e.value.log
    # out of the pool: the next reservation is refused, and says so
    with pytest.raises(drv.HostQuarantined, match="quarantined for this invocation"):
        L.driver().reserve()
    with pytest.raises(RunFailed, match="no usable host in t1: t1: quarantined"):
        drv.pick_host(L.inventory, "t1")


def test_wrong_host_key_is_refused_and_quarantined(lab, tmp_path):
    L = lab(powered=True)
    other = SshdHost(tmp_path / "impostor")  # someone else's host key under our alias
    L.host.known_hosts.write_text(other.known_hosts.read_text())
    d = L.driver()
    with d, pytest.raises(drv.HostQuarantined) as e:
        d.run(L.build(), simple_workload)
    msg = str(e.value)
    assert "refusing to connect: its ssh host key does not match" in msg and str(L.host.known_hosts) in msg
    assert "power-cycle" not in steps(d)  # a wrong key is not a hang: no recovery attempted
    assert d.state.quarantined() is not None


def test_hung_host_is_power_cycled(lab):
    L = lab(powered=True)
    b = L.build()
    with L.driver() as d:
        d.run(b, simple_workload)
        before = d.boot_id
        os.kill(L.pid1(), signal.SIGSTOP)  # the host hangs: TCP still accepts, ssh never answers
        r = d.run(b, simple_workload)
        ev = steps(d)
        assert ev[:3] == ["unreachable", "power-cycle", "up"], ev
        assert d.boot_id != before and r.counters["lab"]["rebooted"]  # new boot: booted into the build again
        assert d.state.failures() == 0


def test_reboot_that_never_comes_back_is_power_cycled(lab):
    # the reboot command kills the host (pid 1 of its namespace) and nothing brings it back
    L = lab(powered=True, reboot=("kill", "-TERM", "1"), boot_s=4)
    with L.driver() as d:
        r = d.run(L.build(), simple_workload)
    ev = steps(d)
    i = ev.index("reboot")
    assert ev[i + 1 : i + 4] == ["no-ssh", "power-cycle", "up"], ev
    assert r.counters["lab"]["rebooted"]


def test_host_dies_mid_run_no_record_lost(lab, tmp_path):
    """schedlab.run + LabTestbed: the host loses power during a run; that run is a
    failure record, the retry power-cycles the host and completes, and the records
    written before are untouched."""
    from schedlab.lab.power import BMC
    from schedlab.run import PointRunner
    from schedlab.testbeds.lab import LabTestbed

    L = lab(powered=True)
    builds = tmp_path / "builds"
    study = config.load_study("s1")
    for name in {LabTestbed.build_name(study, v) for v in study["variants"]}:
        (builds / name).mkdir(parents=True)
        (builds / name / "xen.gz").write_bytes(name.encode() * 100)
        (builds / name / "vmlinuz").write_bytes(b"k" * 100)
        (builds / name / "build.json").write_text(
            json.dumps(
                {
                    "files": {"xen.gz": "xen.gz", "vmlinuz": "vmlinuz"},
                    "xen_cmdline": "loglvl=all",
                    "expect": {"kernel_release": os.uname().release},
                }
            )
        )
    calls = []

    def netperf_pair(host, build, info, study, point, seed):
        calls.append(seed)
        if len(calls) == 2:  # the second run: the host dies 1 s into a long command
            threading.Timer(1.0, lambda: BMC(L.spec.bmc).off(wait=None)).start()
            host.run(["sleep", "20"], timeout=30)
        out = host.run(["cat", "/proc/uptime"], timeout=30).stdout.split()
        return RunResult(metrics={"throughput_mbps": float(out[0]), "latency_us": 1.0})

    tb = LabTestbed(
        host="t1",
        inventory=L.inventory_path,
        builds_dir=builds,
        verifier=standin_verifier,
        workloads={"netperf-pair": netperf_pair},
    )
    data = tmp_path / "data"
    log = []

    class Log:
        def write(self, s):
            log.append(s)

        def flush(self):
            pass

    variant = study["baseline"]
    point = config.points(study, "lab")[0]
    # exploratory: two runs instead of the design's (this is about faults, not registration);
    # the unit is the boot, so each run has its own boot, warmed by the study's warm-up run
    runner = PointRunner(
        study, "lab", variant, point, data, base_seed=7, runs=2, testbed=tb, log=Log(), exploratory=True
    )
    folder = store.raw_dir(data, "lab", "s1")
    entries = runner.run()
    tb.close()
    assert len(entries) == 4 and all(e["status"] == "ok" for e in entries)
    assert [e["warmup"] for e in entries] == [True, False, True, False]
    assert len({e["boot_id"] for e in entries}) == 3  # the retry's power cycle is a boot of its own
    failed = sorted(folder.glob("*.failed*.json"))
    assert len(failed) == 1
    frec = json.loads(failed[0].read_text())
    assert frec["status"] == "failed" and "host died during the run" in frec["error"]
    for p in folder.glob("*.json"):  # every record intact
        assert store.check_record(p, store.read_record(p)) == []
    rec = entries[1]
    assert rec["attempt"] == 2 and rec["counters"]["lab"]["rebooted"]
    assert rec["provenance"]["testbed"]["hosts"][0]["name"] == "t1"
    # the BMC password is nowhere in the data or logs
    for p in list(folder.glob("*.json")) + list(L.inventory.state_dir.rglob("*")):
        if p.is_file():
            assert L.sim.password.encode() not in p.read_bytes(), p
    assert L.sim.password not in "".join(log)


# --- reservation, pools, run order --------------------------------------------------------


def test_one_host_one_driver_and_pool_picks_a_free_host(lab, tmp_path):
    L = lab(bmc=False)
    text = L.inventory_path.read_text()
    t2 = "\n".join(l.replace("  t1:", "  t2:") for l in text.split("hosts:\n", 1)[1].splitlines())
    (tmp_path / "pool.yaml").write_text(text + t2 + "\npools:\n  rack: [t1, t2]\n")
    inv = load_inventory(tmp_path / "pool.yaml")
    a = drv.HostDriver(inv.hosts["t1"], inv.state_dir)
    a.reserve()
    with pytest.raises(drv.HostBusy, match=r"host t1 is being driven by another process \(pid \d+"):
        drv.HostDriver(inv.hosts["t1"], inv.state_dir).reserve()
    picked = drv.pick_host(inv, "rack")
    assert picked.spec.name == "t2"
    with pytest.raises(RunFailed, match="no usable host in rack: t1: busy; t2: busy"):
        drv.pick_host(inv, "rack")
    a.release()
    picked.release()
    assert drv.pick_host(inv, "rack").spec.name == "t1"


def test_interleaved_order_reboots_only_when_the_build_changes(lab, tmp_path):
    from schedlab.plan import plan

    study = config.load_study("s1")
    order = plan(study, "lab", 20261121)
    variants = [e["variant"] for e in order]
    rounds: dict[int, set] = {}
    for e in order:
        rounds.setdefault(e["round"], set()).add(e["variant"])
    assert all(v == set(study["variants"]) for v in rounds.values())  # every round has every variant
    assert variants != sorted(variants)
    L = lab(powered=True)
    builds = {"fixed": L.build("f"), "bug": L.build("g")}
    change = next(i for i in range(1, len(variants)) if variants[i] != variants[i - 1])
    first = order[: change + 1]  # one variant's runs, then the first change of build
    boots = []
    with L.driver() as d:
        for entry in first:
            d.run(builds[entry["variant"]], simple_workload)
            boots.append(d.boot_id)
    assert len(set(boots[:-1])) == 1 and boots[-1] != boots[0]  # a new boot exactly when the build changes
