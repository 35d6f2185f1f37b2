"""The qemu testbed: a real Xen hypervisor, real Linux dom0 and PV guests, under QEMU (TCG).

One virtual host = QEMU booting Xen (multiboot) with dom0 on a virtio disk, reached over
ssh through a loopback port forward. `QemuTestbed.run_once` drives it exactly like a lab
machine (schedlab.host.Host): checks what booted (`xl info`), creates the study's guests
with `xl create`, pins them, measures from dom0, destroys them.

Images come from schedlab.testbeds.qemu_images (Debian packages, cached by hash).
Only S1 (workload kind "netperf-pair") is implemented so far.

TCG runs every instruction through QEMU's translator: scheduling decisions (who runs
when, boosts, preemption, time slices) are real Xen code, but absolute speeds are not
those of hardware and caches/TLBs/memory latency are not modelled. See docs/qemu-testbed.md.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import platform
import re
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ..host import Host, HostError, HostTimeout, parse_kv
from . import qemu_images as qi
from .base import RunFailed, RunResult, Testbed

DEFAULTS: dict[str, Any] = {
    "accel": "tcg,thread=multi",
    "cpu": "Haswell-noTSX",       # -cpu max crashes dom0 early; KVM: nested Xen stalls
    "smp": 2,
    "memory_mb": 2048,
    "dom0_memory_mb": 1024,
    "guest_memory_mb": 256,
    "scheduler": "credit",        # Xen 4.17 defaults to credit2; the studies are about credit1
    "xen_cmdline_extra": "",
    "boot_timeout_s": 420,        # QEMU start -> ssh into dom0
    "guest_timeout_s": 180,       # xl create -> guest servers reachable
    "run_timeout_s": 300,         # one measurement command
    "duration_s": 10,             # each of: throughput run, latency run
    "weights": {"io": 256, "cpu": 256},
    "guest_pcpu": 0,              # VM-I/O and VM-CPU pinned here
    "dom0_pcpu": 1,               # dom0 (netback + the client) pinned here
    "xen_build": "debian",        # "debian": patches=stock boots Debian's prebuilt hypervisor;
                                  # "source": every series (stock too) boots qi.build_xen(series)
    "reuse_vm": True,             # keep the booted host between runs of the same build
    "fresh_guests": False,        # True: xl create/destroy the guests in every run; False: create
                                  # once per boot, "alone" = the CPU guest paused (`xl pause`)
}
GUEST_DIR_IN_DOM0 = "/var/lib/schedlab/guest"
IO_IP, CPU_IP, DOM0_BR_IP = "10.10.0.2", "10.10.0.3", "10.10.0.1"
IPERF_PORT, SOCKPERF_PORT = 5201, 11111


def _die_with_parent() -> None:
    """In the QEMU child: get SIGKILL if the Python process dies (even by SIGKILL), so no
    QEMU outlives its driver. Linux only; harmless elsewhere."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except OSError:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class QemuVM:
    """One QEMU process running Xen + dom0; `host` is the ssh driver for dom0."""

    def __init__(self, images: qi.Images, xen: Path, xen_cmdline: str, cfg: dict, workdir: Path):
        self.images, self.xen, self.xen_cmdline, self.cfg = images, xen, xen_cmdline, cfg
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.serial_log = workdir / "serial.log"
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        self.boot_seconds: float | None = None
        self.info: dict[str, str] = {}
        self.host = Host("127.0.0.1", port=self.port, identity=images.identity,
                         known_hosts=images.known_hosts, host_key_alias=qi.HOST_KEY_ALIAS,
                         multiplex=True)

    @property
    def dom0_cmdline(self) -> str:
        return "root=/dev/vda rw console=hvc0 earlyprintk=xen net.ifnames=0 init=/sbin/schedlab-init"

    def argv(self) -> list[str]:
        c = self.cfg
        for p in (self.images.kernel, self.images.initrd):
            if "," in str(p) or " " in str(p):
                raise RunFailed(f"image path {p} contains ',' or ' ' (QEMU multiboot module syntax)")
        modules = f"{self.images.kernel} {self.dom0_cmdline},{self.images.initrd}"
        return ["nice", "-n", "10", "qemu-system-x86_64",
                "-accel", c["accel"], "-cpu", c["cpu"], "-smp", str(c["smp"]), "-m", str(c["memory_mb"]),
                "-nodefaults", "-display", "none", "-no-reboot", "-monitor", "none",
                "-kernel", str(self.xen), "-append", self.xen_cmdline, "-initrd", modules,
                "-serial", f"file:{self.serial_log}",
                "-drive", f"file={self.workdir / 'dom0.qcow2'},if=virtio,format=qcow2,cache=unsafe",
                "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{self.port}-:22",
                "-device", "virtio-net-pci,netdev=n0"]

    def start(self) -> None:
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b",
                        str(self.images.disk), str(self.workdir / "dom0.qcow2")], check=True,
                       capture_output=True)
        argv = self.argv()
        (self.workdir / "qemu-argv.json").write_text(json.dumps(argv, indent=1))
        self.t_start = time.monotonic()
        with open(self.workdir / "qemu.out", "wb") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        _LIVE.add(self)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout: float) -> float:
        self.host.wait_for_ssh(timeout, interval=3, alive=self.alive)
        self.boot_seconds = time.monotonic() - self.t_start
        return self.boot_seconds

    def log_tail(self, nbytes: int = 20000) -> str:
        parts = []
        for f in (self.serial_log, self.workdir / "qemu.out"):
            try:
                data = f.read_bytes()[-nbytes:].decode(errors="replace")
                parts.append(f"==> {f.name} <==\n{data}")
            except OSError:
                pass
        return "\n".join(parts)

    def kill(self) -> None:
        try:
            self.host.close()
        except (OSError, subprocess.SubprocessError):
            pass
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        _LIVE.discard(self)
        try:
            (self.workdir / "dom0.qcow2").unlink()
        except OSError:
            pass


_LIVE: set[QemuVM] = set()


@atexit.register
def _kill_all() -> None:
    for vm in list(_LIVE):
        vm.kill()


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
        self._vm: QemuVM | None = None
        self._vm_key: tuple | None = None
        self._guests: dict[str, str] = {}     # guest name -> hash of its xl config, in this VM

    # -- configuration ---------------------------------------------------------------------
    def images(self) -> qi.Images:
        if self._images is None:
            try:
                self._images = qi.ensure_images(build=self.build, log=self.log)
            except FileNotFoundError as e:
                raise RunFailed(f"qemu images not built ({e}); build them with "
                                "`python -m schedlab.testbeds.qemu_images` or the qemu_images rule") from e
        return self._images

    def config(self, study: dict) -> dict:
        cfg = dict(self.options)
        over = ((study.get("testbeds") or {}).get("qemu") or {})
        for k, v in over.items():
            if k in DEFAULTS:
                cfg[k] = {**cfg[k], **v} if isinstance(cfg[k], dict) and isinstance(v, dict) else v
        wl = study.get("workload") or {}
        if isinstance(wl.get("weights"), dict) and "weights" not in over:
            cfg["weights"] = {**cfg["weights"], **wl["weights"]}
        return cfg

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
        cache by patch content. The testbed never builds Xen itself (~4-10 min): use
        `python -m schedlab.testbeds.qemu_images xen-src --patches <series>`."""
        xen = (self._variant(study, variant).get("xen") or {})
        series = xen.get("patches", "stock")
        if series == "stock" and self.config(study)["xen_build"] == "debian":
            return series, self.images().xen
        try:
            return series, qi.build_xen(series, build=False, log=None)
        except FileNotFoundError:
            return series, None

    @staticmethod
    def _unbuilt(series: str) -> RunFailed:
        if series != "stock" and not sorted((qi.PATCH_DIR / series).glob("*.patch")):
            return RunFailed(f"patch series {series!r} not built yet: no patches in {qi.PATCH_DIR / series}")
        return RunFailed(f"patch series {series!r} not built yet "
                         f"(python -m schedlab.testbeds.qemu_images xen-src --patches {series})")

    def xen_cmdline(self, study: dict, variant: str) -> str:
        cfg = self.config(study)
        boot = (self._variant(study, variant).get("xen") or {}).get("boot") or {}
        parts = ["console=com1", "com1=115200,8n1", f"sched={cfg['scheduler']}",
                 f"dom0_mem={cfg['dom0_memory_mb']}M,max:{cfg['dom0_memory_mb']}M", "dom0_max_vcpus=1",
                 "loglvl=all", "guest_loglvl=all"]
        parts += [f"{k}={v}" for k, v in sorted(boot.items())]
        if cfg["xen_cmdline_extra"]:
            parts.append(cfg["xen_cmdline_extra"])
        return " ".join(parts)

    # -- Testbed interface -------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        im = self.images()
        qv = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True)
        o = self.options
        d = {
            "testbed": "qemu",
            "qemu": qv.stdout.splitlines()[0] if qv.returncode == 0 else "missing",
            "accel": o["accel"], "cpu": o["cpu"], "smp": o["smp"], "memory_mb": o["memory_mb"],
            "xen": im.xen_meta,   # Debian's prebuilt one; each run's counters.xen has what it booted
            "dom0": {k: im.dom0_meta[k] for k in ("suite", "kernel", "versions", "sha256")},
            "images_build_id": im.build_id(),
            "host": {"machine": platform.machine(), "python": platform.python_version(),
                     "cpus": os.cpu_count()},
        }
        if self._vm is not None and self._vm.info:
            d["booted"] = {k: self._vm.info.get(k) for k in
                           ("xen_version", "xen_changeset", "xen_commandline", "xen_scheduler", "release")}
        return d

    def build_id(self, study: dict, variant: str) -> str:
        series, xen = self._xen_for(study, variant)
        xen_hash = qi.sha256_file(xen) if xen else f"unbuilt:{series}"
        blob = {"images": self.images().build_id(), "xen": xen_hash,
                "xen_cmdline": self.xen_cmdline(study, variant),
                "guest_init": hashlib.sha256((qi.GUEST_DIR / "guest-init.sh").read_bytes()).hexdigest()}
        return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]

    def run_once(self, study: dict, variant: str, point: dict, seed: int) -> RunResult:
        kind = (study.get("workload") or {}).get("kind")
        if kind != "netperf-pair":
            raise RunFailed(f"qemu testbed: workload {kind!r} not implemented yet (only netperf-pair/S1)")
        series, xen = self._xen_for(study, variant)
        if xen is None:
            raise self._unbuilt(series)
        cfg = self.config(study)
        vm = self._ensure_vm(xen, self.xen_cmdline(study, variant), cfg)
        try:
            res = self._s1(vm, cfg, point, seed)
            # The hypervisor this run booted (describe() only knows Debian's prebuilt one).
            meta = json.loads((xen.parent / "meta.json").read_text()) if (xen.parent / "meta.json").exists() else {}
            res.counters["xen"] = {"patches": series, "sha256": qi.sha256_file(xen),
                                   "source": meta.get("source"), "version": meta.get("version"),
                                   "patch_files": meta.get("patches", []),
                                   "xen_version": vm.info.get("xen_version"),
                                   "build_id": vm.info.get("build_id")}
            return res
        except (HostError, RunFailed, ValueError, KeyError, json.JSONDecodeError) as e:
            log = self._fail_log(vm, e)
            self.close()
            if isinstance(e, RunFailed):
                raise RunFailed(str(e), log) from e
            raise RunFailed(f"qemu S1 run failed: {e}", log) from e
        finally:
            if not cfg["reuse_vm"]:
                self.close()

    def boot_check(self, study: dict, variant: str) -> dict[str, str]:
        """Boot (or reuse) the virtual host for this variant, run the `xl info` checks, and
        return `xl info` (plus dom0's `release`). Raises RunFailed like run_once."""
        series, xen = self._xen_for(study, variant)
        if xen is None:
            raise self._unbuilt(series)
        cfg = self.config(study)
        return dict(self._ensure_vm(xen, self.xen_cmdline(study, variant), cfg).info)

    def close(self) -> None:
        """Kill the virtual host (if any)."""
        if self._vm is not None:
            self._vm.kill()
        self._vm, self._vm_key = None, None
        self._guests = {}

    # -- booting -------------------------------------------------------------------------------
    def _ensure_vm(self, xen: Path, cmdline: str, cfg: dict) -> QemuVM:
        key = (str(xen), qi.sha256_file(xen), cmdline, json.dumps(
            {k: cfg[k] for k in ("accel", "cpu", "smp", "memory_mb")}, sort_keys=True))
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
                raise RunFailed(f"qemu: dom0 not reachable over ssh within {cfg['boot_timeout_s']}s "
                                f"(serial log kept in {vm.workdir})", log) from e
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
        want_id = xen_build_id(blob)
        if want_id and info.get("build_id") != want_id:
            problems.append(f"build_id is {info.get('build_id')!r}, {xen.name} has {want_id!r}")
        for k in ("xen_changeset", "cc_compile_date"):
            v = info.get(k, "")
            if v and v.encode() not in blob:
                problems.append(f"{k} {v!r} is not in {xen.name} (sha256 {qi.sha256_file(xen)[:12]})")
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
            for argv in (["xl", "list"], ["xl", "dmesg"], ["sh", "-c", "tail -n 50 /var/log/xen/console/*.log "
                                                                     "/var/log/xen/*.log 2>/dev/null"]):
                try:
                    r = vm.host.run(argv, timeout=20, check=False)
                    extra += f"\n==> {' '.join(argv)} <==\n{r.stdout[-6000:]}{r.stderr[-2000:]}"
                except HostError:
                    break
        log = f"{type(err).__name__}: {err}\n{extra}\n{vm.log_tail()}"
        try:
            (vm.workdir / "failure.log").write_text(log)
        except OSError:
            pass
        return log

    # -- S1: netperf-like pair -----------------------------------------------------------------
    def _guest_cfg(self, name: str, role: str, ip: str, mac: str, cfg: dict) -> str:
        return "\n".join([
            f'name = "{name}"', 'type = "pv"',
            f'kernel = "{GUEST_DIR_IN_DOM0}/vmlinuz"', f'ramdisk = "{GUEST_DIR_IN_DOM0}/initrd.img"',
            f'extra = "console=hvc0 quiet schedlab.role={role} schedlab.ip={ip}"',
            f"memory = {int(cfg['guest_memory_mb'])}", "vcpus = 1", f'cpus = "{int(cfg["guest_pcpu"])}"',
            f"cpu_weight = {int(cfg['weights'][role])}",
            f'vif = [ "bridge=xenbr0,mac={mac}" ]', 'on_crash = "preserve"', ""])

    def _create_guest(self, vm: QemuVM, name: str, role: str, ip: str, mac: str, cfg: dict) -> float:
        h = vm.host
        h.put_bytes(self._guest_cfg(name, role, ip, mac, cfg).encode(), f"/tmp/{name}.cfg")
        t0 = time.monotonic()
        h.run(["xl", "create", f"/tmp/{name}.cfg"], timeout=cfg["guest_timeout_s"])
        # Wait (inside dom0, one ssh round trip) for the guest's READY line on its console.
        h.run(["timeout", str(int(cfg["guest_timeout_s"])), "sh", "-c",
               'until grep -q SCHEDLAB-GUEST-READY "$1" 2>/dev/null; do sleep 0.5; done',
               "_", f"/var/log/xen/console/guest-{name}.log"], timeout=cfg["guest_timeout_s"] + 30)
        if role == "io":
            h.run(["timeout", str(int(cfg["guest_timeout_s"])), "bash", "-c",
                   'until (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && (exec 3<>"/dev/tcp/$1/$3") 2>/dev/null;'
                   ' do sleep 0.5; done', "_", ip, str(IPERF_PORT), str(SOCKPERF_PORT)],
                  timeout=cfg["guest_timeout_s"] + 30)
        return time.monotonic() - t0

    def _destroy_guests(self, vm: QemuVM, keep: tuple[str, ...] = ()) -> None:
        for name in self._domains(vm):
            if name != "Domain-0" and name not in keep:
                vm.host.run(["xl", "destroy", name], timeout=60, check=False)
                self._guests.pop(name, None)

    def _domains(self, vm: QemuVM) -> dict[str, str]:
        """name -> state flags (e.g. 'r-----', '--p---') from `xl list`."""
        out = vm.host.run(["xl", "list"], timeout=60).stdout.splitlines()[1:]
        return {l.split()[0]: l.split()[4] for l in out if len(l.split()) >= 6}

    def _ensure_guest(self, vm: QemuVM, name: str, role: str, ip: str, mac: str, cfg: dict,
                      counters: dict) -> None:
        text = self._guest_cfg(name, role, ip, mac, cfg)
        want = hashlib.sha256(text.encode()).hexdigest()
        doms = self._domains(vm)
        if name in doms and self._guests.get(name) == want and "c" not in doms[name] \
                and "s" not in doms[name] and "d" not in doms[name]:
            if "p" in doms[name]:
                vm.host.run(["xl", "unpause", name], timeout=60)
            counters[f"{name}_start_seconds"] = 0.0      # reused
            return
        if name in doms:
            vm.host.run(["xl", "destroy", name], timeout=60, check=False)
        self._guests.pop(name, None)
        counters[f"{name}_start_seconds"] = round(self._create_guest(vm, name, role, ip, mac, cfg), 1)
        self._guests[name] = want

    def _cpu_times(self, vm: QemuVM) -> dict[str, float]:
        out = vm.host.run(["xl", "list"], timeout=60).stdout.splitlines()[1:]
        return {l.split()[0]: float(l.split()[-1]) for l in out if l.split()}

    def _s1(self, vm: QemuVM, cfg: dict, point: dict, seed: int) -> RunResult:
        mode = point.get("mode", "alone")
        if mode not in ("alone", "corun"):
            raise RunFailed(f"S1: unknown mode {mode!r}")
        h, dur = vm.host, int(cfg["duration_s"])
        counters: dict[str, Any] = {"boot_seconds": round(vm.boot_seconds or 0, 1), "seed": seed,
                                    "xen_scheduler": vm.info.get("xen_scheduler")}
        if cfg["fresh_guests"]:
            self._destroy_guests(vm)
        else:
            self._destroy_guests(vm, keep=("io", "cpu"))
        h.run(["xl", "vcpu-pin", "Domain-0", "all", str(cfg["dom0_pcpu"])], timeout=60)
        self._ensure_guest(vm, "io", "io", IO_IP, "00:16:3e:5c:00:02", cfg, counters)
        if mode == "corun":
            self._ensure_guest(vm, "cpu", "cpu", CPU_IP, "00:16:3e:5c:00:03", cfg, counters)
        elif "cpu" in self._domains(vm):
            h.run(["xl", "pause", "cpu"], timeout=60)
        doms = self._domains(vm)
        counters["domains"] = doms
        if mode == "alone" and "cpu" in doms and "p" not in doms["cpu"]:
            raise RunFailed(f"S1 alone: the CPU guest is not paused ({doms['cpu']})")
        sched = h.run(["xl", "sched-credit"], timeout=60).stdout
        counters["sched_credit"] = sched.strip()
        vcpus = h.run(["xl", "vcpu-list"], timeout=60).stdout
        counters["vcpu_list"] = vcpus.strip()
        for name, role in (("io", "io"), ("cpu", "cpu")):
            if name == "cpu" and mode != "corun":
                continue
            m = re.search(rf"^{name}\s+\d+\s+(\d+)", sched, re.M)
            if not m or int(m.group(1)) != int(cfg["weights"][role]):
                raise RunFailed(f"S1: weight of {name} is {m.group(1) if m else '?'}, wanted {cfg['weights'][role]}")

        t_cpu0, w0 = self._cpu_times(vm), time.monotonic()
        tp = h.run(["taskset", "-c", "0", "iperf3", "-c", IO_IP, "-p", str(IPERF_PORT), "-t", str(dur),
                    "-J"], timeout=min(cfg["run_timeout_s"], dur + 120))
        tpj = json.loads(tp.stdout)
        if "error" in tpj:
            raise RunFailed(f"iperf3: {tpj['error']}")
        recv = tpj["end"]["sum_received"]["bits_per_second"] / 1e6
        lat = h.run(["taskset", "-c", "0", "sockperf", "ping-pong", "--tcp", "-i", IO_IP, "-p", str(SOCKPERF_PORT),
                     "-t", str(dur), "--mps=max", "--full-rtt"], timeout=min(cfg["run_timeout_s"], dur + 120))
        lat_us, pct = _parse_sockperf(lat.stdout + lat.stderr)
        t_cpu1 = self._cpu_times(vm)
        counters["window_seconds"] = round(time.monotonic() - w0, 1)   # host wall time of cpu_seconds
        counters["cpu_seconds"] = {k: round(t_cpu1.get(k, 0) - v, 2) for k, v in t_cpu0.items()}
        counters["latency_percentiles_us"] = pct
        counters["throughput_sent_mbps"] = round(tpj["end"]["sum_sent"]["bits_per_second"] / 1e6, 2)
        counters["retransmits"] = tpj["end"]["sum_sent"].get("retransmits")
        if cfg["fresh_guests"]:
            self._destroy_guests(vm)
        return RunResult(metrics={"throughput_mbps": round(recv, 2), "latency_us": round(lat_us, 1)},
                         counters=counters)


def xen_build_id(blob: bytes) -> str | None:
    """The GNU build-id note (hex) of a Xen ELF image, as `xl info` reports it."""
    m = re.search(rb"\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00(.{20})", blob, re.S)
    return m.group(1).hex() if m else None


def _parse_sockperf(text: str) -> tuple[float, dict[str, float]]:
    """Average round-trip time (us) and percentiles from `sockperf ping-pong --full-rtt`."""
    m = re.search(r"avg-rtt=([\d.]+)", text) or re.search(r"avg-lat(?:ency)?=([\d.]+)", text)
    if not m:
        raise RunFailed("sockperf: no average latency in output:\n" + text[-2000:])
    pct = {}
    for p, v in re.findall(r"--->\s+percentile\s+([\d.]+)\s+=\s+([\d.]+)", text):
        pct[p] = float(v)
    for name, v in re.findall(r"--->\s+<(MAX|MIN)> observation\s+=\s+([\d.]+)", text):
        pct[name.lower()] = float(v)
    return float(m.group(1)), pct
