"""The QEMU process of the qemu testbed: its options, its NUMA layout, this machine's CPU
ticks around it, and how it is stopped. Shared by Xen boots (schedlab.testbeds.qemu) and
native boots (schedlab.testbeds.qemu_native)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from typing import Any

from schedlab import workloads
from schedlab.core.testbed import RunFailed
from schedlab.host import Host

DEFAULTS: dict[str, Any] = {
    "accel": "tcg,thread=multi",
    # icount_shift N: QEMU's instruction counting (-icount shift=N,sleep=off): one TCG thread,
    # each guest instruction advances virtual time by 2^N ns, so guest time no longer depends
    # on the host's load (accel becomes tcg,thread=single). One clock for all vCPUs: two busy
    # pCPUs each run at half the speed of one (docs/qemu-testbed.md). N <= 5: at 7 Xen's
    # platform timer wraps. None: multi-threaded TCG, guest time follows the host's speed.
    "icount_shift": None,
    "cpu": "Haswell-noTSX",  # -cpu max crashes dom0 early; KVM: nested Xen stalls
    "smp": 2,
    "memory_mb": 2048,
    "numa_nodes": 1,  # >1: QEMU -numa, the pCPUs and memory split evenly (S4's 2-node host);
    # Xen reads the nodes from the ACPI SRAT QEMU builds, checked at boot
    "dom0_memory_mb": 1024,
    "scheduler": "credit",  # Xen 4.17 defaults to credit2; the studies are about credit1
    "xen_cmdline_extra": "",
    "boot_timeout_s": 420,  # QEMU start -> ssh into dom0
    "xen_build": "debian",  # "debian": patches=stock boots Debian's prebuilt hypervisor;
    # "source": every series (stock too) boots qi.build_xen(series)
    "reuse_vm": True,  # keep the booted host between runs of the same build
    # a fresh boot at every round of the plan (run_study): variants that share a boot (run-time
    # settings, e.g. xen.sched_credit) are then interleaved within it, and the round, one
    # boot, is the replicate of a paired analysis (testbeds.qemu.analysis: paired)
    "boot_per_round": False,
    # native studies: keep each kernel's VM between rounds (savevm, then -loadvm) instead of
    # booting and preparing it again; False makes every round a fresh boot (under icount the
    # boot, not the run, is then the replicate: docs/kernel-builds.md)
    "native_resume": True,
    **workloads.DEFAULTS,  # what runs in the guests (schedlab/workloads/)
}


def _die_with_parent() -> None:
    """In the QEMU child: get SIGKILL if the Python process dies (even by SIGKILL), so no
    QEMU outlives its driver. Linux only; harmless elsewhere."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


HOST_TICKS = workloads.lockwork.GUEST_TICKS  # /proc/stat's first eight fields, as in the guests


def host_cpu_ticks() -> list[int]:
    """This machine's aggregate CPU ticks from /proc/stat (HOST_TICKS order); [] elsewhere.
    Steal matters: when this machine is itself a VM, a neighbour slows TCG down."""
    try:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1 : 1 + len(HOST_TICKS)]]
    except (OSError, ValueError):
        return []


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loopback_host(port: int, image, host_key_alias: str):
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


ICOUNT_SHIFTS = range(0, 6)


def accel_argv(c: dict) -> list[str]:
    """-accel (and -icount) from the options: multi-threaded TCG by default; with
    icount_shift set, single-threaded TCG with deterministic virtual time (sleep=off: an
    idle guest's virtual clock jumps to its next timer instead of waiting in real time)."""
    shift = c.get("icount_shift")
    if shift is None:
        return ["-accel", c["accel"]]
    if isinstance(shift, bool) or not isinstance(shift, int) or shift not in ICOUNT_SHIFTS:
        raise RunFailed(f"icount_shift {shift!r}: want an integer 0..5 (Xen's platform timer wraps above)")
    return ["-accel", "tcg,thread=single", "-icount", f"shift={shift},sleep=off"]


def qemu_argv(c: dict, *, kernel: str, append: str, serial_log, disk, port: int) -> list[str]:
    """What every QEMU of the testbed starts with (niced: the host's own work comes first):
    the machine from the options `c`, one kernel and command line, the serial console in a
    file, a virtio disk, user networking with ssh forwarded to `port` on loopback. The
    caller adds its own devices (initrd, monitor, snapshots)."""
    return [
        *["nice", "-n", "10", "qemu-system-x86_64", *accel_argv(c), "-cpu", c["cpu"]],
        *["-smp", str(c["smp"]), "-m", str(c["memory_mb"])],
        *numa_argv(int(c.get("numa_nodes", 1)), int(c["smp"]), int(c["memory_mb"])),
        *["-nodefaults", "-display", "none", "-no-reboot", "-kernel", kernel, "-append", append],
        *["-serial", f"file:{serial_log}", "-drive", f"file={disk},if=virtio,format=qcow2,cache=unsafe"],
        *["-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:22", "-device", "virtio-net-pci,netdev=n0"],
    ]


def recorded_argv(argv: list[str], workdir) -> list[str]:
    """A QEMU command line as a record keeps it: the boot's folder as $RUN_DIR and the image
    cache as $SCHEDLAB_CACHE (records name no path of the machine that made them); every
    other argument exactly as QEMU got it."""
    from schedlab.builds.images import cache_root

    subs = [(str(workdir), "$RUN_DIR"), (str(cache_root().parent), "$SCHEDLAB_CACHE")]
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
