"""Testbeds: one file per testbed, all behind `schedlab.core.testbed.Testbed`."""

from __future__ import annotations

NAMES = ("sim", "qemu", "lab")


def get(name: str, **options):
    if name == "sim":
        from .sim import SimTestbed

        return SimTestbed(**options)
    if name == "qemu":
        from .qemu import QemuTestbed

        return QemuTestbed(**options)
    if name == "lab":
        from .lab import LabTestbed

        return LabTestbed(**options)
    raise ValueError(f"unknown testbed {name!r} (one of {', '.join(NAMES)})")
