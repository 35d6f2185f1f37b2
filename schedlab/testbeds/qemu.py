"""The qemu testbed: a real Xen hypervisor, real Linux dom0 and PV guests, under QEMU (TCG).

One virtual host = QEMU booting Xen (multiboot) with dom0 on a virtio disk, reached over
ssh through a loopback port forward. `QemuTestbed.run_once` drives it exactly like a lab
machine (schedlab.host.Host): checks what booted (`xl info`), creates the study's guests
with `xl create`, pins them, measures from dom0, destroys them.

Images come from schedlab.builds.images (Debian packages, cached by hash).
The workloads that run in the guests are in schedlab/workloads/ (shared with the lab testbed).

TCG runs every instruction through QEMU's translator: scheduling decisions (who runs
when, boosts, preemption, time slices) are real Xen code, but absolute speeds are not
those of hardware and caches/TLBs/memory latency are not modelled. See docs/qemu-testbed.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from schedlab import machine as qm
from schedlab.builds import images as qi
from schedlab.core.testbed import RunFailed, RunResult, Testbed
from schedlab.testbeds.qemu_host import DEFAULTS, machine

from .. import workloads
from ..host import HostError, HostTimeout, parse_kv
from ..workloads.xl import Domains


class QemuVM(qm.Machine):
    """One QEMU process running Xen + dom0; `host` is the ssh driver for dom0."""

    disk_name = "dom0.qcow2"
    ssh_interval = 3.0

    def __init__(self, images: qi.Images, xen: Path, xen_cmdline: str, cfg: dict, workdir: Path):
        self.images, self.xen, self.xen_cmdline, self.cfg = images, xen, xen_cmdline, cfg
        self.machine = machine(cfg)
        port = qm.free_port()
        super().__init__(workdir, port, qm.loopback_host(port, images, qi.HOST_KEY_ALIAS))
        self.boot_seconds: float | None = None
        self.runs = 0  # runs done in this boot
        self.info: dict[str, str] = {}

    @property
    def dom0_cmdline(self) -> str:
        line = "root=/dev/vda rw console=hvc0 earlyprintk=xen net.ifnames=0 init=/sbin/schedlab-init"
        if self.machine.counts_instructions:
            # Under icount dom0 miscalibrates the TSC (~20 GHz at shift 5) and may switch
            # to it; Xen's PV clock follows Xen's system time, the clock the guests use.
            line += " clocksource=xen"
        return line

    def argv(self) -> list[str]:
        for p in (self.images.kernel, self.images.initrd):
            if "," in str(p) or " " in str(p):
                raise RunFailed(f"image path {p} contains ',' or ' ' (QEMU multiboot module syntax)")
        modules = f"{self.images.kernel} {self.dom0_cmdline},{self.images.initrd}"
        return [
            *qm.qemu_argv(
                self.machine,
                kernel=str(self.xen),
                append=self.xen_cmdline,
                serial_log=self.serial_log,
                disk=self.workdir / self.disk_name,
                port=self.port,
            ),
            *["-monitor", "none", "-initrd", modules],
        ]

    def start(self) -> None:
        qm.overlay(self.images.disk, self.workdir / self.disk_name)
        super().start()

    def wait_ready(self, timeout: float) -> float:
        self.boot_seconds = self.wait_for_ssh(timeout)
        return self.boot_seconds


class QemuTestbed(Testbed):
    name = "qemu"

    def __init__(self, *, build: bool = False, workdir: str | Path | None = None, log=None, **overrides):
        """build: build missing images (debootstrap etc., needs root) instead of failing.
        workdir: where serial logs of runs go (default $SCHEDLAB_CACHE/qemu/runs).
        overrides: any DEFAULTS key (the study's testbeds.qemu block overrides these again)."""
        unknown = set(overrides) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown qemu testbed options: {sorted(unknown)}")
        self.options = {**DEFAULTS, **overrides}
        self.build = build
        self.workdir = Path(workdir) if workdir else qi.cache_root() / "runs"
        self.log = log or (lambda msg: None)
        self._images: qi.Images | None = None
        self._guest_init_sha = ""
        self._vm: QemuVM | None = None
        self._vm_key: tuple | None = None
        self._domains: Domains | None = None  # the guests of the booted VM
        self._native = None  # qemu_native.NativeRunner: kernels booted without Xen

    @staticmethod
    def _is_native(study: dict) -> bool:
        """Studies whose workload runs on a natively booted kernel (no Xen), e.g. S2 native."""
        return (study.get("workload") or {}).get("where") == "native"

    def native(self):
        if self._native is None:
            from .qemu_native import NativeRunner

            self._native = NativeRunner(self)
        return self._native

    # -- configuration ---------------------------------------------------------------------
    def images(self) -> qi.Images:
        if self._images is None:
            # Hash of the guest init the images were made from (read once, with them).
            self._guest_init_sha = hashlib.sha256((qi.GUEST_DIR / "guest-init.sh").read_bytes()).hexdigest()
            try:
                self._images = qi.ensure_images(build=self.build, log=self.log)
            except FileNotFoundError as e:
                raise RunFailed(
                    f"qemu images not built ({e}); build them with "
                    "`python -m schedlab.builds.images` or the qemu_images rule"
                ) from e
        return self._images

    def config(self, study: dict) -> dict:
        return workloads.study_options("qemu", self.options, DEFAULTS, study)

    @staticmethod
    def _variant(study: dict, variant: str) -> dict:
        try:
            return study["variants"][variant]
        except KeyError:
            raise RunFailed(f"study {study.get('study')!r} has no variant {variant!r}") from None

    def _xen_for(self, study: dict, variant: str) -> tuple[str, Path | None]:
        """(patch series name, hypervisor binary or None if that series isn't built).

        The variant's `xen: {patches: <series>}` selects the hypervisor: `stock` is Debian's
        prebuilt binary (or, with xen_build: source, an unpatched source build); any other
        series always boots the source build of xen-patches/<series>/*.patch, found in the
        cache by patch content. Only a testbed made with build=True builds a missing series
        (~4-10 min); otherwise use `python -m schedlab.builds.images xen-src --patches
        <series>`."""
        xen = self._variant(study, variant).get("xen") or {}
        series = xen.get("patches", "stock")
        if series == "stock" and self.config(study)["xen_build"] == "debian":
            return series, self.images().xen
        try:
            return series, qi.build_xen(series, build=False, log=None)
        except FileNotFoundError:
            if not self.build or (series != "stock" and not self._has_patches(series)):
                return series, None
        self.images()  # the source build takes the version of dom0's tools
        try:
            return series, qi.build_xen(series, build=True, log=self.log)
        except (RuntimeError, OSError) as e:
            raise RunFailed(f"patch series {series!r}: Xen build failed: {str(e).splitlines()[0]}") from e

    @staticmethod
    def _has_patches(series: str) -> bool:
        try:
            return bool(qi.series_patches(series))
        except FileNotFoundError:
            return False

    @classmethod
    def _unbuilt(cls, series: str) -> RunFailed:
        if series != "stock" and not cls._has_patches(series):
            try:
                qi.series_patches(series)
            except FileNotFoundError as e:
                return RunFailed(f"patch series {series!r} not built yet: {e}")
        return RunFailed(
            f"patch series {series!r} not built yet (python -m schedlab.builds.images xen-src --patches {series})"
        )

    def xen_cmdline(self, study: dict, variant: str) -> str:
        cfg = self.config(study)
        boot = (self._variant(study, variant).get("xen") or {}).get("boot") or {}
        parts = [
            "console=com1",
            "com1=115200,8n1",
            f"sched={cfg['scheduler']}",
            f"dom0_mem={cfg['dom0_memory_mb']}M,max:{cfg['dom0_memory_mb']}M",
            "dom0_max_vcpus=1",
            "loglvl=all",
            "guest_loglvl=all",
        ]
        parts += [f"{k}={v}" for k, v in sorted(boot.items())]
        if cfg["xen_cmdline_extra"]:
            parts.append(cfg["xen_cmdline_extra"])
        return " ".join(parts)

    # -- Testbed interface -------------------------------------------------------------------
    def describe(self, study: dict | None = None) -> dict[str, Any]:
        """The testbed as a study runs it (its testbeds.qemu.options applied)."""
        im = self.images()
        qv = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True)
        o = self.config(study) if study is not None else self.options
        d = {
            "testbed": "qemu",
            "qemu": qv.stdout.splitlines()[0] if qv.returncode == 0 else "missing",
            **machine(o).described(),  # accel: what QEMU runs (icount forces one TCG thread)
            "xen_build": o["xen_build"],
            "xen_debian": im.xen_meta,  # Debian's prebuilt one; each run's counters.xen has what it booted
            "dom0": {k: im.dom0_meta[k] for k in ("suite", "kernel", "versions", "sha256")},
            "images_build_id": im.build_id(),
            "host": {"machine": platform.machine(), "python": platform.python_version(), "cpus": os.cpu_count()},
        }
        if study is not None and self._is_native(study):
            del d["xen_build"]  # no Xen under a natively booted kernel
        # What booted is per run (counters.booted): a study boots one build per variant, and
        # the runner describes the testbed once per process.
        return d

    def build_id(self, study: dict, variant: str) -> str:
        if self._is_native(study):
            return self.native().build_id(study, variant)
        series, xen = self._xen_for(study, variant)
        xen_hash = qi.sha256_file(xen) if xen else f"unbuilt:{series}"
        images_id = self.images().build_id()
        blob = {
            "images": images_id,
            "xen": xen_hash,
            "xen_cmdline": self.xen_cmdline(study, variant),
            "guest_init": self._guest_init_sha,
        }
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]

    def run_once(self, study: dict, variant: str, point: dict, seed: int) -> RunResult:
        if self._is_native(study):
            self.close_xen()  # one QEMU at a time
            return self.native().run_once(study, variant, point, seed)
        if self._native is not None:
            self._native.close()
        workload = workloads.get((study.get("workload") or {}).get("kind"))
        series, xen = self._xen_for(study, variant)
        if xen is None:
            raise self._unbuilt(series)
        cfg = self.config(study)
        vm = self._ensure_vm(xen, self.xen_cmdline(study, variant), cfg)
        try:
            if self._domains is None or self._domains.host is not vm.host:
                self._domains = Domains(vm.host)
            ticks0 = qm.host_cpu_ticks()
            # dom0 shares the pCPUs with the guests: its CPU time over the whole run, in every record
            dom0_cpu0 = self._domains.cpu_times().get("Domain-0")
            res = workload(
                vm.host, self._domains, {**cfg, **workloads.variant_options(study, variant)}, point, seed, vm.info
            )
            dom0_cpu1 = self._domains.cpu_times().get("Domain-0")
            if dom0_cpu0 is not None and dom0_cpu1 is not None:
                res.counters["dom0_cpu_seconds"] = round(dom0_cpu1 - dom0_cpu0, 2)
            res.counters["boot_seconds"] = round(vm.boot_seconds or 0, 1)
            # Which boot this run used (a new run directory = a new QEMU, e.g. after a crash).
            res.counters["boot"] = {"run_dir": vm.workdir.name, "runs_in_boot": vm.runs + 1}
            vm.runs += 1
            # The hypervisor this run booted (describe() only knows Debian's prebuilt one).
            meta = json.loads((xen.parent / "meta.json").read_text()) if (xen.parent / "meta.json").exists() else {}
            res.counters["xen"] = {
                "patches": series,
                "sha256": qi.sha256_file(xen),
                "source": meta.get("source"),
                "version": meta.get("version"),
                "patch_files": meta.get("patches", []),
                "xen_version": vm.info.get("xen_version"),
                "build_id": vm.info.get("build_id"),
            }
            # cpu_mhz: Xen's calibrated TSC rate; under icount the trace's ticks run ~5 % off it,
            # so sched_events.tsc_span over trace_window_guest_s converts them (docs/qemu-measurements.md)
            res.counters["booted"] = {
                k: vm.info.get(k)
                for k in ("xen_version", "xen_changeset", "xen_commandline", "xen_scheduler", "release", "cpu_mhz")
            }
            m = machine(cfg)
            res.counters["qemu"] = {
                **m.fields(),
                "accel": m.accel_ran,  # what QEMU ran: icount forces one TCG thread
                "xen_build": cfg["xen_build"],
                "argv": qm.recorded_argv(vm.argv(), vm.workdir),  # exactly what ran
            }
            res.counters["host_loadavg"] = os.getloadavg()  # this machine's load: TCG speed depends on it
            ticks = qm.ticks_between(ticks0, qm.host_cpu_ticks())
            if ticks is not None:
                res.counters["host_cpu_ticks"] = ticks
            return res
        except (
            HostError,
            RunFailed,
            ValueError,
            KeyError,
            json.JSONDecodeError,
            OSError,
            subprocess.SubprocessError,
        ) as e:
            died = "" if vm.alive() else f"QEMU exited (status {vm.proc.returncode}) during the run; "
            log = self._fail_log(vm, e)
            self.close()
            if isinstance(e, RunFailed):
                raise RunFailed(f"{died}{e}", log) from e
            raise RunFailed(f"{died}qemu run failed: {e}", log) from e
        finally:
            if not cfg["reuse_vm"]:
                self.close()

    def fresh_boot(self, study: dict) -> None:
        """The next run boots afresh (run_study, where the study's boot plan starts a boot):
        the Xen host is killed, and so are a native kernel's VM and its saved snapshots, so no
        two boots of the plan share one, also where a round ends and the next begins with the
        same variant."""
        if self._is_native(study):
            if self._native is not None:
                self._native.close()
        else:
            self.close_xen()

    def boot_check(self, study: dict, variant: str) -> dict[str, str]:
        """Boot (or reuse) the virtual host for this variant, run the `xl info` checks, and
        return `xl info` (plus dom0's `release`). Raises RunFailed like run_once."""
        series, xen = self._xen_for(study, variant)
        if xen is None:
            raise self._unbuilt(series)
        cfg = self.config(study)
        return dict(self._ensure_vm(xen, self.xen_cmdline(study, variant), cfg).info)

    def close(self) -> None:
        """Kill the virtual host(s) (if any)."""
        if self._native is not None:
            self._native.close()
        self.close_xen()

    def close_xen(self) -> None:
        """Kill the Xen virtual host (if any)."""
        if self._vm is not None:
            self._vm.kill()
        self._vm, self._vm_key = None, None
        self._domains = None

    # -- booting -------------------------------------------------------------------------------
    def _ensure_vm(self, xen: Path, cmdline: str, cfg: dict) -> QemuVM:
        key = (str(xen), qi.sha256_file(xen), cmdline, machine(cfg).reuse_key())
        if self._vm is not None and self._vm_key == key and self._vm.alive():
            return self._vm
        self.close()
        self.workdir.mkdir(parents=True, exist_ok=True)
        wd = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%dT%H%M%S-"), dir=self.workdir))
        vm = QemuVM(self.images(), xen, cmdline, cfg, wd)
        self.log(f"qemu: booting {xen} ({cmdline}); serial log {vm.serial_log}")
        vm.start()
        try:
            vm.wait_ready(cfg["boot_timeout_s"])
            self.log(f"qemu: dom0 ssh-ready after {vm.boot_seconds:.1f}s")
            self._check_booted(vm, xen, cmdline, cfg)
        except (HostError, RunFailed) as e:
            log = self._fail_log(vm, e)
            vm.kill()
            if isinstance(e, HostTimeout):
                raise RunFailed(
                    f"qemu: dom0 not reachable over ssh within {cfg['boot_timeout_s']}s "
                    f"(serial log kept in {vm.workdir})",
                    log,
                ) from e
            raise RunFailed(f"qemu: boot failed: {e} (serial log kept in {vm.workdir})", log) from e
        self._vm, self._vm_key = vm, key
        return vm

    def _check_booted(self, vm: QemuVM, xen: Path, cmdline: str, cfg: dict) -> None:
        info = parse_kv(vm.host.run(["xl", "info"], timeout=60).stdout)
        info["release"] = vm.host.run(["uname", "-r"], timeout=30).stdout.strip()
        vm.info = info
        (vm.workdir / "xl-info.json").write_text(json.dumps(info, indent=1))
        problems = []
        if info.get("xen_scheduler") != cfg["scheduler"]:
            problems.append(f"xen_scheduler is {info.get('xen_scheduler')!r}, wanted {cfg['scheduler']!r}")
        if info.get("xen_commandline") != cmdline:
            problems.append(f"xen_commandline is {info.get('xen_commandline')!r}, wanted {cmdline!r}")
        blob = xen.read_bytes()
        # The GNU build-id of the binary QEMU booted must be the one Xen reports; version,
        # changeset (empty in Debian's builds) and compile date are strings inside it.
        want_id = qi.xen_build_id(blob)
        if want_id and info.get("build_id") != want_id:
            problems.append(f"build_id is {info.get('build_id')!r}, {xen.name} has {want_id!r}")
        for k in ("xen_changeset", "cc_compile_date"):
            v = info.get(k, "")
            if v and v.encode() not in blob:
                problems.append(f"{k} {v!r} is not in {xen.name} (sha256 {qi.sha256_file(xen)[:12]})")
        if str(info.get("nr_nodes", "1")) != str(cfg["numa_nodes"]):
            problems.append(f"nr_nodes is {info.get('nr_nodes')!r}, wanted {cfg['numa_nodes']} (numa_nodes)")
        ver = info.get("xen_version", "")
        if not ver or f"{info.get('xen_major')}.{info.get('xen_minor')}{info.get('xen_extra')}" != ver:
            problems.append(f"xen_version {ver!r} inconsistent with major/minor/extra")
        kver = vm.images.dom0_meta["kernel"]
        if info["release"] != kver:
            problems.append(f"dom0 kernel is {info['release']!r}, wanted {kver!r}")
        if problems:
            raise RunFailed("qemu: booted the wrong thing: " + "; ".join(problems))

    def _fail_log(self, vm: QemuVM, err: Exception) -> str:
        extra = ""
        if vm.alive():
            for argv in (
                ["xl", "list"],
                ["xl", "dmesg"],
                ["sh", "-c", "tail -n 50 /var/log/xen/console/*.log /var/log/xen/*.log 2>/dev/null"],
            ):
                try:
                    r = vm.host.run(argv, timeout=20, check=False)
                    extra += f"\n==> {' '.join(argv)} <==\n{r.stdout[-6000:]}{r.stderr[-2000:]}"
                except HostError:
                    break
        # Records keep a log's last 20000 characters (schedlab.run): dom0's view of the guests
        # and the error go last, after the serial console's tail, so they are never cut.
        log = f"{vm.log_tail(8000)}\n{extra}\n{type(err).__name__}: {err}\n"
        try:
            (vm.workdir / "failure.log").write_text(log)
        except OSError:
            pass
        return log
