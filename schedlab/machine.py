"""One QEMU machine: the project's one way to describe, start, watch, wait for and stop a QEMU.

Three kinds of machine boot under QEMU: the qemu testbed's Xen host
(schedlab.testbeds.qemu.QemuVM), a kernel booted natively (schedlab.testbeds.qemu_native:
NativeVM), and the virtual lab host (schedlab.testing.vhost, started by its BMC). They share:

    MachineOptions  the emulated machine as a typed object (accel, icount shift, cpu, smp,
                    memory, NUMA nodes) read from a testbed's options: its -accel/-icount
                    arguments, what QEMU ran, and the same fields every record has kept
    qemu_argv       the command line every QEMU starts with (the machine, one kernel, a
                    serial log, a virtio disk, ssh forwarded on loopback)
    Machine         one QEMU process: start (niced, in its own session, killed with its
                    parent), alive, wait until its ssh answers, the tail of its logs, kill
    overlay, recorded_argv, host_cpu_ticks, free_port, loopback_host, stop_process_group

Nothing here knows Xen, a kernel build or a benchmark: the testbeds above say what boots.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedlab.core.files import cache_root
from schedlab.core.testbed import RunFailed
from schedlab.host import PROC_STAT_TICKS, Host

# Shifts QEMU's icount takes here: at 7 Xen's platform timer wraps (docs/qemu-testbed.md)
ICOUNT_SHIFTS = range(0, 6)
# This machine's /proc/stat ticks, in the order the records keep them (as the guests')
HOST_TICKS = PROC_STAT_TICKS


@dataclass(frozen=True)
class MachineOptions:
    """The emulated machine, as a testbed's options (or a record's description of them) give
    it. icount_shift None: multi-threaded TCG (guest time follows the host's speed); N:
    single-threaded TCG counting instructions (each advances one virtual clock by 2^N ns)."""

    accel: str
    icount_shift: int | None
    cpu: str
    smp: int
    memory_mb: int
    numa_nodes: int = 1

    FIELDS = ("accel", "icount_shift", "cpu", "smp", "memory_mb", "numa_nodes")

    @classmethod
    def of(cls, options: dict[str, Any]) -> MachineOptions:
        """From a testbed's merged options (schedlab.testbeds.qemu_host.DEFAULTS under the
        study's), or a record's description of what ran, where a key it lacks is unknown (no
        icount, one NUMA node)."""
        return cls(
            accel=options.get("accel", ""),
            icount_shift=options.get("icount_shift"),
            cpu=options.get("cpu", ""),
            smp=int(options.get("smp", 0)),
            memory_mb=int(options.get("memory_mb", 0)),
            numa_nodes=int(options.get("numa_nodes", 1)),
        )

    @property
    def counts_instructions(self) -> bool:
        return self.icount_shift is not None

    def accel_argv(self) -> list[str]:
        """-accel (and -icount): multi-threaded TCG by default; with icount_shift set,
        single-threaded TCG with deterministic virtual time (sleep=off: an idle guest's
        virtual clock jumps to its next timer instead of waiting in real time)."""
        shift = self.icount_shift
        if shift is None:
            return ["-accel", self.accel]
        if isinstance(shift, bool) or not isinstance(shift, int) or shift not in ICOUNT_SHIFTS:
            raise RunFailed(f"icount_shift {shift!r}: want an integer 0..5 (Xen's platform timer wraps above)")
        return ["-accel", "tcg,thread=single", "-icount", f"shift={shift},sleep=off"]

    @property
    def accel_ran(self) -> str:
        """What QEMU ran: icount forces one TCG thread, whatever `accel` says."""
        return self.accel_argv()[1]

    def fields(self) -> dict[str, Any]:
        """accel, icount_shift, cpu, smp, memory_mb, numa_nodes as the options give them."""
        return {k: getattr(self, k) for k in self.FIELDS}

    def described(self) -> dict[str, Any]:
        """The machine in a testbed's description: what QEMU ran, the icount shift only where
        set, the NUMA nodes only where more than one."""
        return {
            "accel": self.accel_ran,
            **({"icount_shift": self.icount_shift} if self.counts_instructions else {}),
            "cpu": self.cpu,
            "smp": self.smp,
            "memory_mb": self.memory_mb,
            **({"numa_nodes": self.numa_nodes} if self.numa_nodes != 1 else {}),
        }

    def reuse_key(self) -> str:
        """What a booted machine must share with the next run's to be reused."""
        return json.dumps(self.fields(), sort_keys=True)

    def numa_argv(self) -> list[str]:
        return numa_argv(self.numa_nodes, self.smp, self.memory_mb)


def numa_argv(nodes: int, smp: int, memory_mb: int) -> list[str]:
    """QEMU arguments for an emulated host of `nodes` NUMA nodes, each with an equal share of
    the vCPUs (Xen's pCPUs) and of the memory; nothing for one node."""
    if nodes <= 1:
        return []
    if smp % nodes or memory_mb % nodes:
        raise RunFailed(f"numa_nodes={nodes} must divide smp={smp} and memory_mb={memory_mb}")
    per_cpu, per_mb = smp // nodes, memory_mb // nodes
    out: list[str] = []
    for i in range(nodes):
        cpus = f"{i * per_cpu}" if per_cpu == 1 else f"{i * per_cpu}-{(i + 1) * per_cpu - 1}"
        out += [
            "-object",
            f"memory-backend-ram,id=mem{i},size={per_mb}M",
            "-numa",
            f"node,nodeid={i},cpus={cpus},memdev=mem{i}",
        ]
    return out


def base_argv(m: MachineOptions, *, name: str | None = None, smp: str | None = None) -> list[str]:
    """QEMU niced (the host's own work comes first), its `name` if given, the accelerator,
    the CPU model, the vCPUs (`smp`: a topology string in place of the count) and the memory."""
    return [
        *["nice", "-n", "10", "qemu-system-x86_64", *(["-name", name] if name else [])],
        *[*m.accel_argv(), "-cpu", m.cpu, "-smp", smp or str(m.smp), "-m", str(m.memory_mb)],
    ]


def ssh_net_argv(port: int) -> list[str]:
    """User networking with the guest's ssh forwarded to `port` on loopback."""
    return ["-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:22", "-device", "virtio-net-pci,netdev=n0"]


def qemu_argv(m: MachineOptions, *, kernel: str, append: str, serial_log, disk, port: int) -> list[str]:
    """What every QEMU of the qemu testbed starts with: the machine `m`, one kernel and
    command line, the serial console in a file, a virtio disk, ssh forwarded to `port` on
    loopback. The caller adds its own devices (initrd, monitor, snapshots)."""
    return [
        *base_argv(m),
        *m.numa_argv(),
        *["-nodefaults", "-display", "none", "-no-reboot", "-kernel", kernel, "-append", append],
        *["-serial", f"file:{serial_log}", "-drive", f"file={disk},if=virtio,format=qcow2,cache=unsafe"],
        *ssh_net_argv(port),
    ]


def recorded_argv(argv: list[str], workdir) -> list[str]:
    """A QEMU command line as a record keeps it: the boot's folder as $RUN_DIR and the cache
    as $SCHEDLAB_CACHE (records name no path of the machine that made them); every other
    argument exactly as QEMU got it."""
    subs = [(str(workdir), "$RUN_DIR"), (str(cache_root()), "$SCHEDLAB_CACHE")]
    out = []
    for a in argv:
        a = str(a)
        for path, name in subs:
            a = a.replace(path, name)
        out.append(a)
    return out


def overlay(base, path) -> None:
    """A throw-away qcow2 overlay at `path` on the raw image `base`: a boot never writes
    to the cached image."""
    subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(base), str(path)],
        check=True,
        capture_output=True,
    )


def host_cpu_ticks() -> list[int]:
    """This machine's aggregate CPU ticks from /proc/stat (HOST_TICKS order); [] elsewhere.
    Steal matters: when this machine is itself a VM, a neighbour slows TCG down."""
    try:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1 : 1 + len(HOST_TICKS)]]
    except (OSError, ValueError):
        return []


def ticks_between(before: list[int], after: list[int]) -> dict[str, int] | None:
    """This machine's CPU ticks over a run, by name (None where /proc/stat was not read)."""
    if before and len(after) == len(before):
        return dict(zip(HOST_TICKS, (b - a for a, b in zip(before, after))))
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loopback_host(port: int, image, host_key_alias: str) -> Host:
    """The ssh driver for a QEMU's guest behind its loopback port forward: the image's key
    and known_hosts, strict host-key checking under the image's alias, one shared connection."""
    return Host(
        "127.0.0.1",
        port=port,
        identity=image.identity,
        known_hosts=image.known_hosts,
        host_key_alias=host_key_alias,
        multiplex=True,
    )


def die_with_parent() -> None:
    """In the QEMU child: get SIGKILL if the Python process dies (even by SIGKILL), so no
    QEMU outlives its driver. Linux only; harmless elsewhere."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def stop_process_group(proc: subprocess.Popen | None, grace: float = 10) -> None:
    """SIGTERM a QEMU's process group (started with start_new_session), SIGKILL it after
    `grace` seconds; a process that already exited is left alone."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=grace)


class Machine:
    """One QEMU process booting in `workdir`, reached over ssh through `host` (a loopback port
    forward). A kind of machine says what it boots (`argv`) and which disk it throws away.
    Every machine started is killed at the latest when the interpreter exits (`kill_all`)."""

    disk_name = "disk.qcow2"
    ssh_interval = 2.0

    def __init__(self, workdir: Path, port: int, host: Host):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port, self.host = port, host
        self.serial_log = self.workdir / "serial.log"
        self.proc: subprocess.Popen | None = None
        self.t_start = 0.0

    def argv(self) -> list[str]:
        raise NotImplementedError

    def start(self, argv_file: str = "qemu-argv.json") -> None:
        """Start QEMU with `argv()` (saved as `argv_file` in the boot's folder), its output
        in qemu.out, in a session of its own that dies with this process."""
        argv = self.argv()
        (self.workdir / argv_file).write_text(json.dumps(argv, indent=1))
        self.t_start = time.monotonic()
        with open(self.workdir / "qemu.out", "wb") as out:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        LIVE.add(self)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_for_ssh(self, timeout: float) -> float:
        """Wait until ssh answers (HostTimeout after `timeout` s, HostError at once if QEMU
        exits meanwhile); the seconds from start."""
        self.host.wait_for_ssh(timeout, interval=self.ssh_interval, alive=self.alive)
        return time.monotonic() - self.t_start

    def log_tail(self, nbytes: int = 20000) -> str:
        """The tails of the serial console and of QEMU's own output."""
        parts = []
        for f in (self.serial_log, self.workdir / "qemu.out"):
            try:
                parts.append(f"==> {f.name} <==\n{f.read_bytes()[-nbytes:].decode(errors='replace')}")
            except OSError:
                pass
        return "\n".join(parts)

    def kill(self, keep_disk: bool = False) -> None:
        """Close ssh, stop QEMU, and drop the boot's throw-away disk (unless `keep_disk`)."""
        try:
            self.host.close()
        except (OSError, subprocess.SubprocessError):
            pass
        stop_process_group(self.proc)
        LIVE.discard(self)
        if not keep_disk:
            try:
                (self.workdir / self.disk_name).unlink()
            except OSError:
                pass


LIVE: set[Machine] = set()


@atexit.register
def kill_all() -> None:
    """Kill every machine still running: no QEMU outlives the process that started it."""
    for m in list(LIVE):
        m.kill()
