"""Kernels booted natively under QEMU (no Xen), running benchmark packs: S2's native side.

`QemuTestbed.native()` (schedlab/testbeds/qemu.py) hands studies whose `workload.where` is
"native" to `NativeRunner`:

    runner.build_id(study, variant) -> str
    runner.run_once(study, variant, point, seed) -> RunResult
    runner.close()

A variant names a kernel config (`kernel: {config: pvspin-y, cmdline: nopvspin}`). run_once
boots that kernel (schedlab.builds.kernel, cached) with QEMU TCG directly (`-kernel bzImage`)
on a throw-away qcow2 overlay of the native image (schedlab.builds.native), or
reuses the running VM while kernel and command line stay the same; reaches it over ssh
through a loopback port forward (schedlab.host.Host, strict host-key checking); checks what
booted (uname -r / uname -v, /proc/cmdline, the sha256 of /proc/config.gz against the
build's .config, the CPU count); then runs ONE repetition of the point's pack through the
pack interface (schedlab.packs) with the Host as target.

A point is {bench, threads}: bench is the pack, threads its sweep parameter (pgbench
clients, pbzip2 threads, kernbench make -j). The other parameters come from the study's
`workload.packs.<bench>`. A pack is prepared (data set, initdb + server, kernel tree) once
per boot, on its first point, with a seed fixed per study and pack (so every kernel gets
the same data), and reused by the later repetitions of that boot. Its state lives in the
guest's tmpfs and dies with the VM, so no cleanup runs at a reboot.

Timeouts (testbed options, overridable in the study's testbeds.qemu.options): boot_timeout_s
(QEMU start -> ssh), run_timeout_s (one repetition; preparing a pack gets PREPARE_TIMEOUT_S).
On expiry or any error: serial log and failure.log kept in the run directory, QEMU killed,
RunFailed raised with the log (the run stage records a failed run and retries).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from schedlab import machine as qm
from schedlab import packs
from schedlab.builds import kernel as kb
from schedlab.builds import native as ni
from schedlab.core.testbed import RunFailed, RunResult
from schedlab.host import Host, HostError, HostTimeout
from schedlab.packs.base import Context, PackError, gather_facts
from schedlab.targets import TargetError
from schedlab.testbeds.qemu_host import DEFAULTS
from schedlab.testbeds.qemu_host import machine as machine_of

BASE_CMDLINE = f"root=/dev/vda rw console=ttyS0 net.ifnames=0 panic=-1 init={ni.INIT_IN_IMAGE}"
PREPARE_TIMEOUT_S = 1200
# which pack metric is the study metric of a bench (the study names it, with when: {bench: B})
PACK_METRIC = {"pgbench": "tps", "pbzip2": "elapsed_s", "kernbench": "elapsed_s"}
LOG_TAIL = 4000


def cmdline_for(extra: str = "") -> str:
    return f"{BASE_CMDLINE} {extra}".strip()


def machine(cfg: dict) -> dict:
    """The QEMU options that define a native boot (part of the build id and of each record);
    icount_shift only when set, so multi-threaded boots keep their build ids."""
    m = machine_of(cfg)
    out = {"accel": m.accel, "cpu": m.cpu, "smp": m.smp, "memory_mb": m.memory_mb}
    if m.counts_instructions:
        out["icount_shift"] = m.icount_shift
    return out


class NativeVM(qm.Machine):
    """One QEMU process booting a kernel natively on the native image; `host` is its ssh driver."""

    disk_name = "disk.qcow2"

    def __init__(
        self,
        kernel: kb.Kernel,
        image: ni.NativeImage,
        cmdline: str,
        cfg: dict,
        workdir: Path,
        loadvm: str | None = None,
    ):
        self.kernel, self.image, self.cmdline, self.cfg = kernel, image, cmdline, cfg
        port = qm.free_port()
        super().__init__(workdir, port, qm.loopback_host(port, image, ni.HOST_KEY_ALIAS))
        self.loadvm = loadvm  # resume this snapshot of disk.qcow2 instead of booting
        self.starts = len(list(self.workdir.glob("serial*.log")))
        self.serial_log = self.workdir / ("serial.log" if not self.starts else f"serial.{self.starts}.log")
        self.monitor = self.workdir / "monitor.sock"
        self.boot_seconds: float | None = None
        self.ready_seconds: float | None = None  # this QEMU start -> ssh (a boot or a resume)
        self.info: dict[str, Any] = {}

    def argv(self) -> list[str]:
        return [
            *qm.qemu_argv(
                machine_of(self.cfg),
                kernel=str(self.kernel.bzimage),
                append=self.cmdline,
                serial_log=self.serial_log,
                disk=self.workdir / self.disk_name,
                port=self.port,
            ),
            *["-device", "virtio-rng-pci", "-monitor", f"unix:{self.monitor},server=on,wait=off"],
            *(["-loadvm", self.loadvm] if self.loadvm else []),
        ]

    def start(self) -> None:
        if not self.loadvm:
            qm.overlay(self.image.disk, self.workdir / self.disk_name)
        super().start("qemu-argv.json" if not self.starts else f"qemu-argv.{self.starts}.json")

    def wait_ready(self, timeout: float) -> float:
        self.ready_seconds = self.wait_for_ssh(timeout)
        if not self.loadvm:
            self.boot_seconds = self.ready_seconds
        return self.ready_seconds

    def hmp(self, command: str, timeout: float = 600) -> str:
        """One human-monitor command over the monitor socket; returns its output."""
        import socket

        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(self.monitor))
            buf = b""
            while not buf.endswith(b"(qemu) "):
                chunk = sock.recv(65536)
                if not chunk:
                    raise RunFailed(f"qemu monitor closed before its prompt ({buf[-200:]!r})")
                buf += chunk
            sock.sendall(command.encode() + b"\n")
            buf = b""
            while not buf.endswith(b"(qemu) "):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
        text = buf.decode(errors="replace").replace("\r", "")
        return text.split("\n", 1)[1].rsplit("(qemu) ", 1)[0] if "\n" in text else ""

    def suspend(self, name: str = "schedlab", timeout: float = 600) -> float:
        """savevm into disk.qcow2 (RAM, devices, disk) and stop QEMU, keeping the overlay:
        a later NativeVM(..., loadvm=name) on the same workdir continues exactly here."""
        t0 = time.monotonic()
        try:
            self.host.close()
        except (OSError, subprocess.SubprocessError):
            pass
        out = self.hmp(f"savevm {name}", timeout=timeout)
        listing = self.hmp("info snapshots", timeout=60)
        if "rror" in out or name not in listing:
            raise RunFailed(f"qemu savevm {name} failed: {out.strip()[-500:]} / {listing.strip()[-500:]}")
        self.kill(keep_disk=True)
        self.loadvm_name = name
        return time.monotonic() - t0

    def check_booted(self) -> dict:
        """What booted must be the build and the command line we asked for."""
        script = (
            "uname -r; uname -v; cat /proc/cmdline; nproc; "
            'zcat /proc/config.gz | sha256sum | cut -d" " -f1; '
            'zcat /proc/config.gz | grep -E "^(# )?CONFIG_PARAVIRT_SPINLOCKS[= ]" || echo "(absent)"; '
            "cat /proc/uptime; "
            # CPUID's hypervisor bit: with it Linux keeps virt_spin_lock on (test-and-set
            # locks) even with PV spinlocks off, so "native" would not be native
            "grep -qw hypervisor /proc/cpuinfo && echo hypervisor=1 || echo hypervisor=0; "
            # the kernel's random id of this boot: records that share a boot say so
            "cat /proc/sys/kernel/random/boot_id"
        )
        out = self.host.run(["sh", "-c", script], timeout=60).stdout.splitlines()
        if len(out) < 9:
            raise RunFailed(f"native: unexpected answer to the boot check: {out!r}")
        meta = self.kernel.meta
        info = {
            "release": out[0].strip(),
            "version": out[1].strip(),
            "cmdline": out[2].strip(),
            "cpus": int(out[3]),
            "config_sha256": out[4].strip(),
            "paravirt_spinlocks": out[5].strip(),
            "uptime_s": float(out[6].split()[0]),
            "cpu_hypervisor_flag": out[7].strip() == "hypervisor=1",
            "boot_id": out[8].strip(),
        }
        problems = []
        if info["release"] != meta["kernelrelease"]:
            problems.append(f"uname -r is {info['release']!r}, the build is {meta['kernelrelease']!r}")
        if info["version"] != meta["uts_version"]:
            problems.append(f"uname -v is {info['version']!r}, the build is {meta['uts_version']!r}")
        if info["cmdline"] != self.cmdline:
            problems.append(f"/proc/cmdline is {info['cmdline']!r}, wanted {self.cmdline!r}")
        if info["config_sha256"] != meta["config_sha256"]:
            problems.append(
                f"/proc/config.gz has sha256 {info['config_sha256'][:16]}, the build's .config "
                f"{meta['config_sha256'][:16]}"
            )
        want_pv = meta["options_checked"].get("CONFIG_PARAVIRT_SPINLOCKS")
        has_pv = "y" if info["paravirt_spinlocks"] == "CONFIG_PARAVIRT_SPINLOCKS=y" else "n"
        if want_pv is not None and want_pv != has_pv:
            problems.append(
                f"booted kernel has {info['paravirt_spinlocks']!r}, the config asked for "
                f"CONFIG_PARAVIRT_SPINLOCKS={want_pv}"
            )
        hidden = "-hypervisor" in str(self.cfg["cpu"]).split(",")
        if hidden and info["cpu_hypervisor_flag"]:
            problems.append(f"/proc/cpuinfo has the hypervisor flag although QEMU was given -cpu {self.cfg['cpu']}")
        if info["cpus"] != int(self.cfg["smp"]):
            problems.append(f"nproc is {info['cpus']}, QEMU was given -smp {self.cfg['smp']}")
        self.info = info
        (self.workdir / "booted.json").write_text(json.dumps(info, indent=1))
        if problems:
            raise RunFailed("native: booted the wrong thing: " + "; ".join(problems))
        return info


def boot(
    kernel: kb.Kernel,
    image: ni.NativeImage,
    cmdline: str,
    cfg: dict,
    workdir: Path,
    log=None,
    resume: NativeVM | None = None,
) -> NativeVM:
    """Start QEMU, wait for ssh, check what booted. RunFailed (with the serial log) otherwise;
    the VM is killed then. resume: a suspended VM (NativeVM.suspend) to continue instead of
    booting: same kernel, command line and overlay, restored with -loadvm."""
    if resume is not None:
        wd = resume.workdir
        vm = NativeVM(kernel, image, cmdline, cfg, wd, loadvm=resume.loadvm_name)
        vm.boot_seconds = resume.boot_seconds
        if log:
            log(f"qemu-native: resuming {kernel.name} ({kernel.key}) from savevm in {wd}")
    else:
        workdir.mkdir(parents=True, exist_ok=True)
        wd = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%dT%H%M%S-native-"), dir=workdir))
        vm = NativeVM(kernel, image, cmdline, cfg, wd)
        if log:
            log(f"qemu-native: booting {kernel.name} ({kernel.key}) with {cmdline!r}; serial log {vm.serial_log}")
    vm.start()
    try:
        vm.wait_ready(cfg["boot_timeout_s"])
        vm.check_booted()
    except (HostError, RunFailed, ValueError) as e:
        text = failure_log(vm, e)
        vm.kill()
        if isinstance(e, HostTimeout):
            raise RunFailed(
                f"qemu-native: no ssh within {cfg['boot_timeout_s']}s (serial log kept in {wd})", text
            ) from e
        raise RunFailed(f"qemu-native: boot failed: {e} (serial log kept in {wd})", text) from e
    if log:
        log(
            f"qemu-native: {kernel.name} ssh-ready after {vm.ready_seconds:.1f}s"
            + (" (resumed)" if vm.loadvm else "")
            + f" ({vm.info['release']})"
        )
    return vm


def failure_log(vm: NativeVM, err: Exception) -> str:
    extra = ""
    if vm.alive():
        try:
            r = vm.host.run(["sh", "-c", "dmesg | tail -n 60; uptime; free -m; df -h /tmp"], timeout=20, check=False)
            extra = f"\n==> guest dmesg/uptime/free <==\n{r.stdout[-6000:]}{r.stderr[-1000:]}"
        except HostError:
            pass
    # Last 20000 characters kept in the record: the guest's view and the error go last.
    text = f"{vm.log_tail(8000)}\n{extra}\n{type(err).__name__}: {err}\n"
    try:
        (vm.workdir / "failure.log").write_text(text)
    except OSError:
        pass
    return text


class DeadlineTarget:
    """The Host, with every command's timeout capped by a deadline (a whole repetition or a
    pack's preparation must finish in time, whatever timeouts the pack asks for)."""

    def __init__(self, host: Host, name: str):
        self.host = host
        self.name = name
        self.deadline = float("inf")

    def _left(self, timeout: float) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise HostTimeout(f"{self.name}: deadline passed")
        return max(1.0, min(timeout, left))

    def run(self, argv, timeout: float = 60, input=None, check: bool = True):
        # ssh failing before the command started (refused, reset during the key exchange; seen
        # right after a -loadvm resume, while QEMU's user network settles) is retried
        for attempt in range(4):
            try:
                return self.host.run(argv, timeout=self._left(timeout), input=input, check=check)
            except HostTimeout:
                raise
            except HostError as e:
                r = e.result
                early = (
                    r is not None
                    and r.returncode == 255
                    and any(
                        m in (r.stderr or "")
                        for m in (
                            "Connection refused",
                            "kex_exchange_identification",
                        )
                    )
                )
                if not early or attempt == 3:
                    raise
                time.sleep(1 + attempt)

    def put(self, local, remote) -> None:
        self.host.put(local, remote, timeout=self._left(600))

    def get(self, remote, local) -> None:
        self.host.get(remote, local, timeout=self._left(600))

    def tmpdir(self) -> str:
        return self.host.run(["mktemp", "-d", "/tmp/schedlab.XXXXXXXX"], timeout=self._left(60)).stdout.strip()


class NativeRunner:
    """Runs S2-native points on kernels booted by QEMU; one VM at a time."""

    def __init__(self, testbed, suspend: bool = True):
        """suspend: when the next run needs another kernel, savevm the running VM (RAM, devices
        and its overlay disk, with the packs' prepared state: PostgreSQL running, data sets,
        kernel tree) and stop QEMU instead of killing it; when that kernel is needed again it
        is resumed (-loadvm) instead of booted and prepared again. Each variant is then booted
        and prepared once per study, and continues where it stopped in later rounds."""
        self.testbed = testbed
        self.suspend = suspend
        self._vm: NativeVM | None = None
        self._vm_key: tuple | None = None
        self._target: DeadlineTarget | None = None
        self._prepared: dict[str, dict] = {}  # bench -> {ctx, seconds, used, tool_version}
        self._suspended: dict[tuple, dict] = {}  # vm key -> {vm, prepared}
        self._image: ni.NativeImage | None = None

    # -- what a variant boots ----------------------------------------------------------------
    @staticmethod
    def kernel_spec(study: dict, variant: str) -> tuple[str, str]:
        try:
            v = study["variants"][variant]
        except KeyError:
            raise RunFailed(f"study {study.get('study')!r} has no variant {variant!r}") from None
        k = v.get("kernel") or {}
        if not k.get("config"):
            raise RunFailed(
                f"variant {variant!r}: no kernel.config (native runs boot a kernel built "
                "from config/kernel/<config>.config)"
            )
        return k["config"], k.get("cmdline", "")

    def image(self) -> ni.NativeImage:
        if self._image is None:
            try:
                self._image = ni.image(build=bool(self.testbed.build), log=self.testbed.log)
            except FileNotFoundError as e:
                raise RunFailed(
                    f"native image not built ({e}); build it with "
                    "`python -m schedlab.builds.native` or the qemu_native_image rule"
                ) from e
        return self._image

    def kernel(self, config: str, build: bool | None = None) -> kb.Kernel | None:
        try:
            return kb.build_kernel(
                config, build=bool(self.testbed.build) if build is None else build, log=self.testbed.log
            )
        except FileNotFoundError:
            return None
        except kb.KernelBuildError as e:
            raise RunFailed(f"kernel {config!r}: {e}") from e

    def build_id(self, study: dict, variant: str) -> str:
        config, extra = self.kernel_spec(study, variant)
        k = self.kernel(config, build=False)
        cfg = self.testbed.config(study)
        blob = {
            "kernel": k.meta["bzimage_sha256"] if k else f"unbuilt:{config}",
            "image": self.image().build_id(),
            "cmdline": cmdline_for(extra),
            "qemu": machine(cfg),
        }
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]

    # -- running -------------------------------------------------------------------------------
    def _ensure_vm(self, kernel: kb.Kernel, cmdline: str, cfg: dict) -> NativeVM:
        key = (
            kernel.meta["bzimage_sha256"],
            cmdline,
            json.dumps(machine(cfg), sort_keys=True),
        )
        if self._vm is not None and self._vm_key == key and self._vm.alive():
            return self._vm
        self._leave()
        saved = self._suspended.pop(key, None)
        vm = None
        if saved is not None:
            try:
                vm = boot(
                    kernel,
                    self.image(),
                    cmdline,
                    cfg,
                    Path(self.testbed.workdir),
                    log=self.testbed.log,
                    resume=saved["vm"],
                )
                self._prepared = saved["prepared"]
                # the packs' contexts hold this target: point it at the resumed VM's ssh
                saved["target"].host = vm.host
                vm.resumes = saved["vm"].__dict__.get("resumes", 0) + 1
            except RunFailed as e:
                self.testbed.log(f"qemu-native: resuming failed ({e}); booting afresh")
                _drop_disk(saved["vm"])
                vm = None
        if vm is None:
            vm = boot(kernel, self.image(), cmdline, cfg, Path(self.testbed.workdir), log=self.testbed.log)
            vm.resumes = 0
            self._prepared = {}
        self._vm, self._vm_key = vm, key
        if saved is not None and self._prepared is saved["prepared"]:
            self._target = saved["target"]
        else:
            self._target = DeadlineTarget(vm.host, f"qemu-native:{kernel.name}")
        return vm

    def _leave(self) -> None:
        """Stop using the current VM: suspend it for later (if enabled and it is healthy), else kill it."""
        vm, key, prepared, target = self._vm, self._vm_key, self._prepared, self._target
        self._vm, self._vm_key, self._target, self._prepared = None, None, None, {}
        if vm is None:
            return
        if self.suspend and vm.alive():
            try:
                took = vm.suspend()
                self._suspended[key] = {"vm": vm, "prepared": prepared, "target": target}
                self.testbed.log(
                    f"qemu-native: suspended {vm.kernel.name} ({vm.cmdline.split(' init=')[-1]}) in {took:.1f}s"
                )
                return
            except (RunFailed, OSError) as e:
                self.testbed.log(f"qemu-native: savevm failed ({e}); killing the VM")
        vm.kill()

    def _given(self, study: dict, bench: str, pack) -> dict:
        given = dict(((study.get("workload") or {}).get("packs") or {}).get(bench) or {})
        axes = self.testbed_axes(study)
        if pack.sweep:
            given[pack.sweep] = sorted({int(t) for t in axes.get("threads", [1])})
        return given

    @staticmethod
    def testbed_axes(study: dict) -> dict:
        from schedlab import config as sl_config

        try:
            return sl_config.testbed_settings(study, "qemu")["axes"]
        except (sl_config.ConfigError, KeyError):
            return dict(study.get("axes") or {})

    def _prepare(self, study: dict, bench: str, pack) -> dict:
        if bench in self._prepared:
            return self._prepared[bench]
        from schedlab.plan import derive_seed

        tgt = self._target
        tgt.deadline = time.monotonic() + PREPARE_TIMEOUT_S
        t0 = time.monotonic()
        missing = pack.missing_tools(tgt)
        if missing:
            raise RunFailed(
                f"pack {bench}: {', '.join(missing)} not in the native image (Debian packages: {' '.join(pack.debs)})"
            )
        facts = gather_facts(tgt)
        given = self._given(study, bench, pack)
        params = pack.resolve(given, facts)
        # the same data set on every kernel: the seed depends on the study and the pack only
        ctx = Context(
            target=tgt,
            workdir=tgt.tmpdir(),
            params=params,
            facts=facts,
            seed=derive_seed(study["study"], bench, "prepare"),
        )
        pack.prepare(ctx)
        entry = {
            "ctx": ctx,
            "seconds": round(time.monotonic() - t0, 1),
            "used": 0,
            "tool_version": pack.tool_version(tgt),
        }
        self._prepared[bench] = entry
        self.testbed.log(f"qemu-native: prepared {bench} in {entry['seconds']:.1f}s")
        return entry

    def run_once(self, study: dict, variant: str, point: dict, seed: int) -> RunResult:
        config, extra = self.kernel_spec(study, variant)
        bench = point.get("bench")
        if bench not in PACK_METRIC:
            raise RunFailed(f"native: unknown bench {bench!r} (known: {', '.join(PACK_METRIC)})")
        threads = int(point.get("threads", 1))
        from schedlab import config as sl_config

        wanted = [m["name"] for m in sl_config.metrics_for(study, point, "qemu")]
        if len(wanted) != 1:
            raise RunFailed(
                f"study {study['study']}: point {point} needs metric(s) {wanted}; the native "
                f"runner reports one per bench (a metric with when: {{bench: {bench}}})"
            )
        metric = wanted[0]
        kernel = self.kernel(config)
        if kernel is None:
            raise RunFailed(f"kernel config {config!r} not built yet (python -m schedlab.builds.kernel {config})")
        cfg = self.testbed.config(study)
        self.suspend = bool(cfg["native_resume"])  # the study's choice: resume kernels or boot each round
        cmdline = cmdline_for(extra)
        vm = self._ensure_vm(kernel, cmdline, cfg)
        pack = packs.get(bench)
        run_id = f"{variant}_{bench}-{threads}_seed{seed}"
        try:
            prep = self._prepare(study, bench, pack)
            ctx = prep["ctx"]
            pt = {**ctx.params, pack.sweep: threads} if pack.sweep else dict(ctx.params)
            self._target.deadline = time.monotonic() + float(cfg["run_timeout_s"])
            t0, ticks0 = time.monotonic(), qm.host_cpu_ticks()
            output = pack.run_once(ctx, pt, seed, run_id)
            wall, ticks1 = time.monotonic() - t0, qm.host_cpu_ticks()
            values = pack.check_metrics(pack.parse(output, run_id), output, run_id)
            prep["used"] += 1
        except (HostError, PackError, TargetError, RunFailed, ValueError, KeyError) as e:
            text = failure_log(vm, e)
            vm.kill()  # this VM only; the suspended ones stay usable
            self._vm, self._vm_key, self._target, self._prepared = None, None, None, {}
            if isinstance(e, HostTimeout):
                raise RunFailed(f"qemu-native: {bench} timed out ({e}); serial log kept in {vm.workdir}", text) from e
            raise RunFailed(f"qemu-native: {bench} run failed: {e} (serial log kept in {vm.workdir})", text) from e
        m = kernel.meta
        counters = {
            "bench": bench,
            "pack": pack.name,
            "pack_version": pack.version,
            "pack_metrics": values,
            "params": pt,
            "output_tail": output[-LOG_TAIL:],
            "boot_seconds": round(vm.boot_seconds or 0, 1),
            "resumed": bool(vm.loadvm),
            "resumes": vm.__dict__.get("resumes", 0),
            "ready_seconds": round(vm.ready_seconds or 0, 1),
            "prepare_seconds": prep["seconds"],
            "prepared_runs_before": prep["used"] - 1,
            "run_wall_seconds": round(wall, 2),
            "tool_version": prep["tool_version"],
            "prepared": {k: v for k, v in ctx.state.items() if isinstance(v, (str, int, float, bool))},
            "kernel": {
                "config": config,
                "hash": kernel.key,
                "bzimage_sha256": m["bzimage_sha256"],
                "config_sha256": m["config_sha256"],
                "kernelrelease": m["kernelrelease"],
                "source": f"{m['package']} {m['version']}",
            },
            "uname": {"release": vm.info.get("release"), "version": vm.info.get("version")},
            "cmdline": vm.info.get("cmdline"),
            "paravirt_spinlocks": vm.info.get("paravirt_spinlocks"),
            "guest_cpu_hypervisor_flag": vm.info.get("cpu_hypervisor_flag"),
            "guest_boot_id": vm.info.get("boot_id"),
            "native_image": self.image().build_id(),
            # what QEMU ran: icount forces one TCG thread whatever `accel` says
            "qemu": {
                **machine(cfg),
                "accel": machine_of(cfg).accel_ran,
                "argv": qm.recorded_argv(vm.argv(), vm.workdir),
            },
            "host_loadavg": os.getloadavg(),
            # this machine's CPU ticks over the run (steal: a neighbour of this VM slowed TCG)
            **({"host_cpu_ticks": ticks} if (ticks := qm.ticks_between(ticks0, ticks1)) is not None else {}),
        }
        return RunResult(metrics={metric: values[PACK_METRIC[bench]]}, counters=counters)

    def close(self) -> None:
        """Kill the VM and drop the suspended ones (the packs' state is in their tmpfs and
        goes with them)."""
        if self._vm is not None:
            self._vm.kill()
        self._vm, self._vm_key, self._target = None, None, None
        self._prepared = {}
        for saved in self._suspended.values():
            _drop_disk(saved["vm"])
        self._suspended = {}


def _drop_disk(vm: NativeVM) -> None:
    vm.kill()
    try:
        (vm.workdir / "disk.qcow2").unlink()
    except OSError:
        pass


# -- a booted native guest as a pack target (schedlab pack run ... --target qemu-native:CONFIG)
class NativeTarget:
    """Boots kernel `config` (with optional extra command line) and is the schedlab.targets
    protocol over ssh to it; close() kills QEMU. Records of pack runs on it go to testbed 'qemu'."""

    testbed = "qemu"

    def __init__(
        self,
        config: str,
        extra_cmdline: str = "",
        *,
        build: bool = False,
        workdir: Path | None = None,
        log=None,
        **options,
    ):
        from schedlab.builds import images as qi

        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown qemu testbed options: {sorted(unknown)}")
        cfg = {**DEFAULTS, **options}
        k = kb.build_kernel(config, build=build, log=log)
        im = ni.image(build=build, log=log)
        self.vm = boot(
            k, im, cmdline_for(extra_cmdline), cfg, Path(workdir) if workdir else qi.cache_root() / "runs", log=log
        )
        self.name = f"qemu-native:{config}" + (f":{extra_cmdline}" if extra_cmdline else "")

    def run(self, argv, timeout: float = 60, input=None, check: bool = True):
        return self.vm.host.run(argv, timeout=timeout, input=input, check=check)

    def put(self, local, remote) -> None:
        self.vm.host.put(local, remote, timeout=600)

    def get(self, remote, local) -> None:
        self.vm.host.get(remote, local, timeout=600)

    def tmpdir(self) -> str:
        return self.vm.host.tmpdir()

    def close(self) -> None:
        self.vm.kill()
