"""The `--target` names of `python -m schedlab.packs` (local, ssh:..., qemu-native:...),
each made into a schedlab.targets.Target. Above the testbeds: qemu-native boots one."""

from __future__ import annotations

import re

from schedlab.targets import LocalTarget

TARGET_SPECS = ("local", "ssh:[USER@]HOST[:PORT]", "qemu-native:CONFIG[:CMDLINE]")


def target_from_name(
    spec: str,
    *,
    identity: str | None = None,
    known_hosts: str | None = None,
    host_key_alias: str | None = None,
    build: bool = False,
    log=None,
):
    """A target from its command-line name:

    local                          this machine (LocalTarget)
    ssh:[USER@]HOST[:PORT]         a machine over ssh (schedlab.host.Host: BatchMode, strict host
                                   keys; identity/known_hosts/host_key_alias as given, else ssh's
                                   defaults); records go to testbed "lab"
    qemu-native:CONFIG[:CMDLINE]   boots the kernel built from config/kernel/CONFIG.config
                                   (schedlab.builds.kernel, cached) natively under QEMU on the native
                                   image (schedlab.builds.native) with CMDLINE appended
                                   (e.g. nopvspin); records go to testbed "qemu". build=True builds
                                   a missing kernel or image first. The caller must close() it
                                   (kills QEMU).

    Targets that hold something (a VM, an ssh master) have close()."""
    if spec == "local":
        return LocalTarget()
    kind, sep, rest = spec.partition(":")
    if kind == "ssh" and sep and rest:
        from schedlab.config import ConfigError
        from schedlab.host import Host
        from schedlab.lab.inventory import check_destination

        user, at, hostport = rest.rpartition("@")
        host, colon, port = hostport.partition(":")
        if not host or (colon and not re.fullmatch(r"[0-9]{1,5}", port)):
            raise ValueError(f"--target {spec!r}: expected ssh:[USER@]HOST[:PORT]")
        user, port = (user if at else "root"), (int(port) if colon else 22)
        try:  # the inventory's rules: no '-option' or shell word can reach ssh
            check_destination(user, host, port, f"--target {spec!r}")
        except ConfigError as e:
            raise ValueError(str(e)) from None
        h = Host(
            host,
            user=user,
            port=port,
            identity=identity,
            known_hosts=known_hosts,
            host_key_alias=host_key_alias,
            multiplex=True,
        )
        h.testbed = "lab"
        return h
    if kind == "qemu-native" and sep and rest:
        from schedlab.testbeds.qemu_native import NativeTarget

        config, _, cmdline = rest.partition(":")
        return NativeTarget(config, cmdline, build=build, log=log)
    raise ValueError(f"--target {spec!r}: unknown target (known: {', '.join(TARGET_SPECS)})")
