"""The qemu testbed's options and their defaults, shared by Xen boots (schedlab.testbeds.qemu)
and native boots (schedlab.testbeds.qemu_native); a study overrides them under
testbeds.qemu.options (workflow/schemas/settings.schema.json states the same defaults). The
machine they describe is read through one typed object, schedlab.machine.MachineOptions
(`machine(options)`); the QEMU process itself is schedlab.machine's."""

from __future__ import annotations

from typing import Any

from schedlab import workloads
from schedlab.machine import MachineOptions

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


def machine(options: dict[str, Any]) -> MachineOptions:
    """The emulated machine of a study's merged qemu options."""
    return MachineOptions.of(options)
