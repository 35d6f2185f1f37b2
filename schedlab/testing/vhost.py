"""The virtual lab host: a QEMU machine that boots from its own disk through GRUB,
powered on and off by an IPMI BMC, so the whole lab path runs without a rack.

    python -m schedlab.testing.vhost build        # the disk image (root; cached by recipe hash)
    python -m schedlab.testing.vhost up           # start its BMC (ipmi_sim), `chassis power on`, wait for ssh
    python -m schedlab.testing.vhost status       # BMC, power, ssh, what booted, pending one-shot entry
    python -m schedlab.testing.vhost console      # attach to the serial console (GRUB menu, Xen, dom0)
    python -m schedlab.testing.vhost down         # `chassis power off`, stop the BMC
    python -m schedlab.testing.vhost reset-disk   # the host's disk back to the freshly built image

The machine (`config/lab.yaml`, host vhost0):

  disk      an MBR disk with one ext4 partition and GRUB for i386-pc in the MBR gap,
            like a BIOS server installed with Debian. Its root file system is the
            qemu testbed's dom0 (the debootstrap tree of schedlab.builds.images
            as configured for its disk image: busybox init /sbin/schedlab-init, xen-utils,
            sshd, the PV guest in /var/lib/schedlab/guest) plus what a lab host needs:
            grub-common/grub2-common (grub-editenv, grub-reboot), sshd with the host key
            and authorised client key of $SCHEDLAB_CACHE/lab/vhost0/, and in /boot:
            Debian's Xen 4.17 and the dom0 kernel, the GRUB modules, a grubenv and a
            static grub.cfg (no /etc/grub.d, no update-grub): its default entry boots
            that Xen + dom0 (multiboot2), it sources the driver's schedlab.cfg, and it
            consumes grubenv's next_entry, which is how `grub-reboot` works.
  power     ipmi_sim (schedlab.testing.standins.IpmiSim) on 127.0.0.1:<bmc port>; its
            `startcmd` is <state>/power-on.sh, which runs QEMU; power off kills QEMU.
  QEMU      TCG, -cpu Haswell-noTSX, -smp = the inventory topology, -m = its memory_mb,
            no -no-reboot (a reboot resets into the firmware and GRUB, like hardware),
            the disk as a persistent qcow2 overlay on the built image (builds installed
            on it survive reboots and power cycles), ssh forwarded from
            127.0.0.1:<ssh port>, serial console on a unix socket, also logged to
            /run/schedlab/<name>-console.log (the inventory's `console` follows that file).

Files: $SCHEDLAB_CACHE/lab/<name>/ holds the keys (id_ed25519, known_hosts, keys/),
the BMC password (bmc.pass, mode 600), the built images (images/<recipe key>/), and
the machine's state: disk.qcow2, power-on.sh, bmc/ (ipmi_sim's files), qemu.out.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from schedlab.builds import images as qi

# the shared build steps under the names this module's recipe spells (builds.steps says why)
from schedlab.builds.steps import Log
from schedlab.builds.steps import recipe_key as _key
from schedlab.builds.steps import run as _run
from schedlab.builds.steps import stderr_log as _stderr
from schedlab.core.files import cache_root
from schedlab.core.recipes import code_sha256
from schedlab.machine import MachineOptions, base_argv, ssh_net_argv

RECIPE_VERSION = 1
NAME = "vhost0"
HOST_KEY_ALIAS = qi.HOST_KEY_ALIAS  # the name known_hosts lists the host key under
GRUB_DIR = Path("/usr/lib/grub/i386-pc")  # Debian grub-pc-bin
# Installed into the tree with apt (chroot): what the lab driver runs on a host.
PACKAGES = ["grub-common", "grub2-common"]
# Embedded in core.img: enough to find the root partition by UUID and load the rest from /boot/grub.
CORE_MODULES = ["biosdisk", "part_msdos", "ext2", "search_fs_uuid"]
# Loaded by grub.cfg itself (the rest autoload from /boot/grub/i386-pc when a command needs them).
CFG_MODULES = ["serial", "terminal", "loadenv", "part_msdos", "ext2", "gzio", "multiboot2", "search"]
PART_OFFSET = 1 << 20  # the partition starts at 1 MiB (sector 2048)
DEFAULT_ENTRY = "vhost-default"
DEFAULT_XEN_CMDLINE = "console=com1 com1=115200,8n1 dom0_mem=1024M,max:1024M dom0_max_vcpus=1"
DEFAULT_DOM0_CMDLINE = "root=/dev/vda1 rw console=hvc0 earlyprintk=xen net.ifnames=0 init=/sbin/schedlab-init"
RUN_DIR = Path("/run/schedlab")  # serial socket + console log (short paths: unix sockets)


def home(name: str = NAME) -> Path:
    """$SCHEDLAB_CACHE/lab/<name>: keys, BMC password, images, machine state."""
    return cache_root() / "lab" / name


# --- keys: the host's identity outlives image rebuilds (like a reinstalled server's key backup) ---


@dataclass
class Keys:
    dir: Path

    @property
    def host_key(self) -> Path:
        return self.dir / "keys" / "ssh_host_ed25519_key"

    @property
    def client_key(self) -> Path:
        return self.dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def bmc_password(self) -> Path:
        return self.dir / "bmc.pass"

    def ensure(self) -> Keys:
        """Generate what is missing: the host key, the client key, known_hosts (host key as
        HOST_KEY_ALIAS), the BMC password (mode 600)."""
        (self.dir / "keys").mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir / "keys", 0o700)
        for key, comment in ((self.host_key, f"schedlab-{self.dir.name}"), (self.client_key, "schedlab-lab")):
            if not key.exists():
                _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", key])
        pub = Path(f"{self.host_key}.pub").read_text().split()
        line = f"{HOST_KEY_ALIAS} {pub[0]} {pub[1]}\n"
        if not self.known_hosts.exists() or self.known_hosts.read_text() != line:
            self.known_hosts.write_text(line)
        if not self.bmc_password.exists():
            fd = os.open(self.bmc_password, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(8) + "\n")  # IPMI 2.0: at most 20 bytes
        return self

    def fingerprint(self) -> dict:
        return {
            "host_key": hashlib.sha256(Path(f"{self.host_key}.pub").read_bytes()).hexdigest(),
            "client_key": hashlib.sha256(Path(f"{self.client_key}.pub").read_bytes()).hexdigest(),
        }


# --- the recipe ------------------------------------------------------------------------------------


@dataclass
class Inputs:
    """What the image is made of (all cached by schedlab.builds.images)."""

    dom0_dir: Path  # dom0/<key>/: disk.img (the configured dom0 tree), vmlinuz, initrd.img
    xen_dir: Path  # xen/<key>/: Debian's prebuilt hypervisor, the tools' version
    kernel: str  # dom0 kernel release

    @classmethod
    def find(cls, *, build: bool = False, log: Log | None = None) -> Inputs:
        im = qi.ensure_images(build=build, log=log)
        return cls(dom0_dir=im.dom0_dir, xen_dir=im.xen_dir, kernel=im.dom0_meta["kernel"])

    def xen_meta(self) -> dict:
        return json.loads((self.xen_dir / "meta.json").read_text())


def _recipe_code() -> str:
    fns = (build_image, grub_cfg, load_cfg, _copy_dom0_tree, _install_packages, _configure_tree, _assemble_disk)
    return code_sha256(*fns)


def recipe(inputs: Inputs, keys: Keys) -> dict:
    return {
        "recipe": RECIPE_VERSION,
        "what": "lab-vhost-disk",
        "dom0": inputs.dom0_dir.name,
        "xen_sha256": inputs.xen_meta()["sha256"],
        "kernel": inputs.kernel,
        "packages": PACKAGES,
        "core_modules": CORE_MODULES,
        "cfg_modules": CFG_MODULES,
        "default": {"xen": DEFAULT_XEN_CMDLINE, "dom0": DEFAULT_DOM0_CMDLINE},
        "keys": keys.fingerprint(),
        "code": _recipe_code(),
    }


def image_key(inputs: Inputs, keys: Keys) -> str:
    return _key(recipe(inputs, keys))


def fs_uuid(key: str) -> str:
    """The root file system's UUID, derived from the recipe (GRUB finds the partition by it)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"schedlab-lab-vhost:{key}"))


def grub_cfg(
    *, uuid_: str, kernel: str, xen_cmdline: str = DEFAULT_XEN_CMDLINE, dom0_cmdline: str = DEFAULT_DOM0_CMDLINE
) -> str:
    """The static /boot/grub/grub.cfg: serial console, grubenv's one-shot next_entry
    (what grub-reboot sets; consumed here, as Debian's 00_header does), the host's default
    entry (Debian's Xen 4.17 + the dom0 kernel, multiboot2), then the driver's schedlab.cfg."""
    mods = "\n".join(f"insmod {m}" for m in CFG_MODULES)
    return f"""\
# schedlab virtual lab host: static GRUB configuration (no /etc/grub.d, no update-grub).
# Written by schedlab.testing.vhost when the disk image was built. schedlab's lab driver
# writes schedlab.cfg next to this file (one menu entry per installed build, ids
# schedlab-<build id>) and arms a one-shot boot with `grub-reboot schedlab-<build id>`,
# which sets next_entry in grubenv: this file boots it once and clears it.
{mods}
serial --unit=0 --speed=115200 --word=8 --parity=no --stop=1
terminal_input serial console
terminal_output serial console
set timeout_style=menu
set timeout=1
if [ -s $prefix/grubenv ]; then
  load_env
fi
if [ "${{next_entry}}" ] ; then
  set default="${{next_entry}}"
  set next_entry=
  save_env next_entry
  set boot_once=true
else
  set default="{DEFAULT_ENTRY}"
fi
# an entry that cannot be loaded (missing file) falls back to the host's own
set fallback="{DEFAULT_ENTRY}"
echo "schedlab vhost GRUB: default=${{default}}"

menuentry 'Debian GNU/Linux, with Xen 4.17 and Linux {kernel} (host default)' --id {DEFAULT_ENTRY} {{
	insmod part_msdos
	insmod ext2
	insmod gzio
	search --no-floppy --fs-uuid --set=root {uuid_}
	echo 'Loading Xen 4.17 ...'
	multiboot2 /boot/xen-4.17-amd64.gz {xen_cmdline}
	echo 'Loading Linux {kernel} ...'
	module2 /boot/vmlinuz-{kernel} {dom0_cmdline}
	echo 'Loading initial ramdisk ...'
	module2 --nounzip /boot/initrd.img-{kernel}.schedlab
}}

if [ -f ${{config_directory}}/schedlab.cfg ]; then
  source ${{config_directory}}/schedlab.cfg
fi
"""


def load_cfg(uuid_: str) -> str:
    """core.img's embedded configuration (what grub-install writes): find /boot/grub."""
    return f"search.fs_uuid {uuid_} root hd0,msdos1\nset prefix=($root)/boot/grub\n"


# --- building ----------------------------------------------------------------------------------------


def image_dir(name: str = NAME, *, build: bool = False, log: Log | None = _stderr) -> Path:
    """images/<key>/ of the current recipe (built if `build`, else FileNotFoundError if missing)."""
    keys = Keys(home(name)).ensure()
    inputs = Inputs.find(build=False, log=None)
    final = home(name) / "images" / image_key(inputs, keys)
    if (final / "meta.json").exists():
        return final
    if not build:
        raise FileNotFoundError(f"virtual lab host image not built: {final} (python -m schedlab.testing.vhost build)")
    built = build_image(name, log=log)
    prune_images(name, keep=built, log=log)
    return built


def prune_images(name: str = NAME, *, keep: Path, log: Log | None = _stderr) -> list[Path]:
    """Remove images of older recipes, except the one the machine's disk is made from
    (<home>/disk.json). A disk made from a removed image is replaced at the next `up`."""
    root = home(name) / "images"
    marker = home(name) / "disk.json"
    used = json.loads(marker.read_text()).get("image") if marker.exists() else None
    gone = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if d.is_dir() and d != keep and d.name != used and (d / "meta.json").exists():
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
            if log:
                log(f"{name}: removed the image of an older recipe: {d}")
    return gone


def build_image(name: str = NAME, *, log: Log | None = _stderr) -> Path:
    """Build (or find) the disk image of the current recipe: images/<key>/{disk.img,meta.json,grub.cfg}.
    Needs root (loop mount of the dom0 image, chroot apt-get) and the Debian mirror."""
    keys = Keys(home(name)).ensure()
    inputs = Inputs.find(build=False, log=None)
    key = image_key(inputs, keys)
    final = home(name) / "images" / key
    if (final / "meta.json").exists():
        return final
    if os.geteuid() != 0:
        raise PermissionError("building the virtual lab host's disk needs root (loop mount, chroot)")
    for tool, pkg in (
        ("grub-mkimage", "grub-common"),
        ("sfdisk", "fdisk"),
        ("mkfs.ext4", "e2fsprogs"),
        ("grub-editenv", "grub-common"),
    ):
        if not shutil.which(tool):
            raise RuntimeError(f"{tool} not found (apt-get install {pkg})")
    if not (GRUB_DIR / "boot.img").exists():
        raise RuntimeError(f"{GRUB_DIR}/boot.img not found (apt-get install grub-pc-bin)")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=final.parent))
    times: dict[str, float] = {}
    try:
        root = tmp / "rootfs"
        t = time.monotonic()
        _copy_dom0_tree(inputs.dom0_dir / "disk.img", root, tmp / "mnt", log)
        times["copy-dom0-tree"] = round(time.monotonic() - t, 1)
        t = time.monotonic()
        versions = _install_packages(root, PACKAGES, log)
        times["apt-get"] = round(time.monotonic() - t, 1)
        t = time.monotonic()
        uid = fs_uuid(key)
        cfg = grub_cfg(uuid_=uid, kernel=inputs.kernel)
        _configure_tree(root, inputs, keys, cfg, key)
        times["configure"] = round(time.monotonic() - t, 1)
        t = time.monotonic()
        sizes = _assemble_disk(root, tmp / "disk.img", uid, tmp, log)
        times["mkfs+grub"] = round(time.monotonic() - t, 1)
        shutil.rmtree(root)
        (tmp / "grub.cfg").write_text(cfg)
        grub_version = _run(["dpkg-query", "-W", "-f", "${Version}", "grub-pc-bin"]).stdout.strip()
        meta = {
            "name": name,
            "key": key,
            "recipe": recipe(inputs, keys),
            "fs_uuid": uid,
            "kernel": inputs.kernel,
            "xen": {k: inputs.xen_meta().get(k) for k in ("package", "version", "sha256")},
            "packages": versions,
            "grub_pc_bin": grub_version,
            "default_entry": DEFAULT_ENTRY,
            "sizes_bytes": sizes,
            "build_seconds": times,
            "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    except BaseException:
        _umount_all(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.exists():
        shutil.rmtree(tmp, ignore_errors=True)
        return final
    os.replace(tmp, final)
    return final


def _umount_all(tmp: Path) -> None:
    for m in sorted(
        (p for p in Path("/proc/self/mounts").read_text().split("\n") if str(tmp) in p), key=len, reverse=True
    ):
        subprocess.run(["umount", "-l", m.split()[1]], capture_output=True)


def _copy_dom0_tree(disk: Path, root: Path, mnt: Path, log: Log | None) -> None:
    """The qemu testbed's configured dom0 tree, from its ext4 image (read-only loop mount)."""
    mnt.mkdir(parents=True)
    _run(["mount", "-o", "loop,ro,noload", disk, mnt], log)
    try:
        _run(["cp", "-a", f"{mnt}/.", root], log)
    finally:
        _run(["umount", mnt], log)
        mnt.rmdir()
    for need in (
        "sbin/schedlab-init",
        "var/lib/schedlab/guest/vmlinuz",
        "var/lib/schedlab/guest/initrd.img",
        "usr/sbin/sshd",
        "usr/sbin/xl",
    ):
        if not (root / need).exists():
            raise RuntimeError(f"the dom0 tree from {disk} has no /{need}")


def _install_packages(root: Path, packages: list[str], log: Log | None) -> dict[str, str]:
    """apt-get install in the tree (chroot; its own sources.list, the Debian mirror). Returns the
    versions of what was installed."""
    resolv = root / "etc/resolv.conf"
    saved = resolv.read_bytes() if resolv.exists() and not resolv.is_symlink() else None
    policy = root / "usr/sbin/policy-rc.d"
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C", "HOME": "/root"}
    before = set(_run(["chroot", root, "dpkg-query", "-W", "-f", "${Package}\n"]).stdout.split())
    try:
        if resolv.is_symlink():
            resolv.unlink()
        shutil.copy("/etc/resolv.conf", resolv)
        policy.write_text("#!/bin/sh\nexit 101\n")  # no service starts in a chroot
        policy.chmod(0o755)
        _run(["mount", "-t", "proc", "proc", root / "proc"], log)
        try:
            _run(["nice", "-n", "10", "chroot", root, "apt-get", "-q", "update"], log, env=env)
            _run(
                [
                    "nice",
                    "-n",
                    "10",
                    "chroot",
                    root,
                    "apt-get",
                    "-q",
                    "-y",
                    "--no-install-recommends",
                    "install",
                    *packages,
                ],
                log,
                env=env,
            )
            _run(["chroot", root, "apt-get", "clean"], log, env=env)
        finally:
            _run(["umount", root / "proc"], log)
    finally:
        policy.unlink(missing_ok=True)
        if saved is not None:
            resolv.write_bytes(saved)
    for p in (root / "var/lib/apt/lists").glob("*"):
        if p.is_file():
            p.unlink()
    out = _run(["chroot", root, "dpkg-query", "-W", "-f", "${Package} ${Version}\n"]).stdout
    allv = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    for p in packages:
        if p not in allv:
            raise RuntimeError(f"{p} is not installed in the tree after apt-get install")
    return {p: v for p, v in sorted(allv.items()) if p not in before}


def _configure_tree(root: Path, inputs: Inputs, keys: Keys, cfg: str, key: str) -> None:
    """What makes the dom0 tree a lab host: its ssh identity, /boot (Xen, kernel, GRUB),
    the root file system on the partition."""
    # ssh: the host key and authorised client key of the virtual host (kept across rebuilds)
    for old in (root / "etc/ssh").glob("ssh_host_*"):
        old.unlink()
    shutil.copy(keys.host_key, root / "etc/ssh/ssh_host_ed25519_key")
    shutil.copy(f"{keys.host_key}.pub", root / "etc/ssh/ssh_host_ed25519_key.pub")
    os.chmod(root / "etc/ssh/ssh_host_ed25519_key", 0o600)
    sshdir = root / "root/.ssh"
    sshdir.mkdir(mode=0o700, exist_ok=True)
    shutil.copy(f"{keys.client_key}.pub", sshdir / "authorized_keys")
    os.chmod(sshdir / "authorized_keys", 0o600)
    (root / "etc/fstab").write_text("/dev/vda1 / ext4 rw,noatime 0 1\n")
    # /boot: Debian's Xen 4.17 (gzipped, as the package installs it), the dom0 kernel and initramfs
    boot = root / "boot"
    with open(inputs.xen_dir / "xen", "rb") as src, open(boot / "xen-4.17-amd64.gz", "wb") as dst:
        dst.write(gzip.compress(src.read(), compresslevel=9, mtime=0))
    shutil.copy(inputs.dom0_dir / "vmlinuz", boot / f"vmlinuz-{inputs.kernel}")
    shutil.copy(inputs.dom0_dir / "initrd.img", boot / f"initrd.img-{inputs.kernel}.schedlab")
    (boot / "schedlab").mkdir(exist_ok=True)
    # GRUB: modules (what grub-install copies), grub.cfg, an empty environment block
    g = boot / "grub"
    (g / "i386-pc").mkdir(parents=True, exist_ok=True)
    for f in GRUB_DIR.iterdir():
        if f.suffix in (".mod", ".lst"):
            shutil.copy(f, g / "i386-pc" / f.name)
    (g / "grub.cfg").write_text(cfg)
    (g / "grubenv").unlink(missing_ok=True)
    _run(["grub-editenv", g / "grubenv", "create"])
    (root / "etc/schedlab-vhost.json").write_text(
        json.dumps({"image_key": key, "default_entry": DEFAULT_ENTRY}, indent=1) + "\n"
    )


def _assemble_disk(root: Path, disk: Path, uid: str, tmp: Path, log: Log | None) -> dict:
    """MBR disk: partition 1 (ext4 made from the tree, at 1 MiB) + GRUB: boot.img's code in
    the MBR, core.img (finds the partition by UUID, then /boot/grub) in the gap after it."""
    used = int(_run(["du", "-sb", "--apparent-size", root]).stdout.split()[0])
    fs_mb = int(used * 1.3 / 2**20) + 1536  # room for installed builds, logs, guest consoles
    fs = tmp / "rootfs.ext4"
    _run(
        [
            "nice",
            "-n",
            "10",
            "mkfs.ext4",
            "-q",
            "-F",
            "-L",
            "schedlab-vhost",
            "-U",
            uid,
            "-E",
            f"root_owner=0:0,hash_seed={uid}",
            "-d",
            root,
            fs,
            f"{fs_mb}M",
        ],
        log,
        env={**os.environ, "E2FSPROGS_FAKE_TIME": "0"},
    )
    size = PART_OFFSET + fs_mb * 2**20
    with open(disk, "wb") as f:
        f.truncate(size)
    _run(
        ["sfdisk", "--no-reread", "--no-tell-kernel", disk],
        log,
        input=f"label: dos\nlabel-id: 0x{uid[:8]}\nstart=2048, type=83, bootable\n",
    )
    _run(
        ["dd", f"if={fs}", f"of={disk}", "bs=1M", f"seek={PART_OFFSET >> 20}", "conv=sparse,notrunc", "status=none"],
        log,
    )
    fs.unlink()
    (tmp / "load.cfg").write_text(load_cfg(uid))
    core = tmp / "core.img"
    _run(
        [
            "grub-mkimage",
            "-O",
            "i386-pc",
            "-d",
            GRUB_DIR,
            "-c",
            tmp / "load.cfg",
            "-p",
            "/boot/grub",
            "-o",
            core,
            *CORE_MODULES,
        ],
        log,
    )
    core_bytes = core.read_bytes()
    if len(core_bytes) > PART_OFFSET - 512:
        raise RuntimeError(f"core.img is {len(core_bytes)} bytes: does not fit before the partition")
    boot_img = (GRUB_DIR / "boot.img").read_bytes()
    with open(disk, "r+b") as f:
        f.write(boot_img[:440])  # boot code only: keep the disk signature and partition table
        f.seek(512)
        f.write(core_bytes)  # boot.img loads sector 1; diskboot's blocklist the rest
    # GRUB itself must read the result: its ext2 driver through the partition table
    got = _run(["grub-fstest", disk, "cat", "(loop0,msdos1)/boot/grub/grub.cfg"]).stdout
    if got != (root / "boot/grub/grub.cfg").read_text():
        raise RuntimeError("grub-fstest: grub.cfg read through GRUB's ext2 driver differs")
    (tmp / "load.cfg").unlink()
    core.unlink()
    st = disk.stat()
    return {"tree": used, "disk": st.st_size, "disk_allocated": st.st_blocks * 512, "core.img": len(core_bytes)}


# --- the machine -------------------------------------------------------------------------------------


class VHost:
    """One virtual lab host: its disk, its QEMU command (the BMC's startcmd) and its BMC.

    Defaults come from the inventory entry `name` (ssh port, BMC port, topology, memory);
    the BMC's VM channel (QEMU's ipmi-bmc-extern) is on bmc_port + 1 unless given."""

    def __init__(
        self,
        name: str = NAME,
        *,
        inventory=None,
        state: Path | None = None,
        run_dir: Path | None = None,
        ssh_port: int | None = None,
        bmc_port: int | None = None,
        vm_port: int | None = None,
        smp: int | None = None,
        memory_mb: int | None = None,
        cpu: str = "Haswell-noTSX",
        accel: str = "tcg,thread=multi",
    ):
        from schedlab.lab.inventory import load_inventory

        self.name = name
        self.keys = Keys(home(name))
        inv = (
            inventory if inventory is not None and not isinstance(inventory, (str, Path)) else load_inventory(inventory)
        )
        self.spec = inv.hosts.get(name)
        t = self.spec.topology if self.spec else {"sockets": 1, "cores_per_socket": 2, "threads_per_core": 1}
        self.topology = (t["sockets"], t["cores_per_socket"], t["threads_per_core"])
        self.smp = smp or self.topology[0] * self.topology[1] * self.topology[2]
        self.memory_mb = memory_mb or (self.spec.topology.get("memory_mb") if self.spec else None) or 2048
        self.ssh_port = ssh_port or (self.spec.port if self.spec else 10022)
        self.bmc_port = bmc_port or (self.spec.bmc.port if self.spec and self.spec.bmc else 9623)
        self.vm_port = vm_port or self.bmc_port + 1
        self.cpu, self.accel = cpu, accel
        self.state = Path(state) if state else home(name)
        self.run_dir = Path(run_dir) if run_dir else RUN_DIR
        self.disk = self.state / "disk.qcow2"
        self.power_on_script = self.state / "power-on.sh"
        self.bmc_dir = self.state / "bmc"
        self.bmc_pidfile = self.state / "bmc.pid"
        self.qemu_out = self.state / "qemu.out"
        self.serial_sock = self.run_dir / f"{name}-serial.sock"
        self.console_log = self.run_dir / f"{name}-console.log"

    # -- the disk ------------------------------------------------------------------------------
    def ensure_disk(self, image: Path, *, reset: bool = False, log: Log | None = _stderr) -> Path:
        """The machine's persistent disk: a qcow2 overlay on image/disk.img. A new image (new
        recipe) means a reinstalled host: the old disk is replaced."""
        marker = self.state / "disk.json"
        want = {"image": image.name}
        have = json.loads(marker.read_text()) if marker.exists() else None
        if self.disk.exists() and not reset and have and have.get("image") == want["image"]:
            return self.disk
        if self.disk.exists() and log:
            log(
                f"{self.name}: {'resetting' if reset else 'reinstalling (new image ' + image.name + ')'}: "
                f"replacing {self.disk}"
            )
        self.state.mkdir(parents=True, exist_ok=True)
        tmp = self.disk.with_name(self.disk.name + ".tmp")
        tmp.unlink(missing_ok=True)
        _run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", image / "disk.img", tmp])
        os.replace(tmp, self.disk)
        marker.write_text(json.dumps({**want, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
        return self.disk

    # -- QEMU -------------------------------------------------------------------------------------
    def qemu_argv(self) -> list[str]:
        s, c, t = self.topology
        if self.smp != s * c * t:
            s, c, t = 1, self.smp, 1
        m = MachineOptions(self.accel, None, self.cpu, self.smp, self.memory_mb)
        return [
            *base_argv(m, name=self.name, smp=f"{self.smp},sockets={s},cores={c},threads={t}"),
            *["-nodefaults", "-display", "none", "-monitor", "none"],
            *["-drive", f"file={self.disk},if=virtio,format=qcow2,cache=writeback"],
            *ssh_net_argv(self.ssh_port),
            "-chardev",
            f"socket,id=ser0,path={self.serial_sock},server=on,wait=off,logfile={self.console_log},logappend=on",
            "-serial",
            "chardev:ser0",
            "-chardev",
            f"socket,id=ipmi0,host=127.0.0.1,port={self.vm_port},reconnect=10",
            "-device",
            "ipmi-bmc-extern,id=bmc0,chardev=ipmi0",
            "-device",
            "isa-ipmi-kcs,bmc=bmc0",
        ]

    def write_power_on(self) -> Path:
        """The BMC's startcmd: QEMU in the foreground (power off kills it)."""
        for p in (self.disk, self.serial_sock, self.console_log):
            if "," in str(p) or " " in str(p):
                raise ValueError(f"{p}: no ',' or spaces allowed (QEMU option syntax)")
        self.state.mkdir(parents=True, exist_ok=True)
        q = shlex.quote
        text = (
            "#!/bin/sh\n"
            f"# {self.name}'s power: its BMC (ipmi_sim) runs this on `chassis power on` and kills it on\n"
            "# `chassis power off`. Written by schedlab.testing.vhost (rewritten by `vhost up`).\n"
            f"mkdir -p {q(str(self.run_dir))}\n"
            f"log={q(str(self.console_log))}\n"
            '[ -f "$log" ] && [ "$(stat -c %s "$log")" -gt 67108864 ] && mv -f "$log" "$log.old"\n'
            f"exec >>{q(str(self.qemu_out))} 2>&1\n"
            'echo "power on $(date -u +%Y-%m-%dT%H:%M:%SZ)"\n'
            f"exec {shlex.join(self.qemu_argv())}\n"
        )
        self.power_on_script.write_text(text)
        self.power_on_script.chmod(0o755)
        return self.power_on_script

    def prepare(self, *, reset_disk: bool = False, build: bool = False, log: Log | None = _stderr) -> Path:
        """Disk + power-on script for the current image (built first if `build`, else it must exist)."""
        img = image_dir(self.name, build=build, log=log)
        self.ensure_disk(img, reset=reset_disk, log=log)
        if self.state == home(self.name):
            prune_images(self.name, keep=img, log=log)
        self.write_power_on()
        return img

    # -- the BMC -----------------------------------------------------------------------------------
    def password(self) -> str:
        return self.keys.ensure().bmc_password.read_text().strip()

    def ipmi_sim(self):
        """The BMC as an in-process object (tests): IpmiSim with this host's ports and startcmd."""
        from schedlab.testing.standins import IpmiSim

        return IpmiSim(
            self.bmc_dir,
            [str(self.power_on_script)],
            password=self.password(),
            port=self.bmc_port,
            vm_port=self.vm_port,
            poweroff_wait=5,
            kill_wait=10,
        )

    def bmc_spec(self):
        """A BmcSpec for this host's ipmi_sim (the inventory's, or one with this object's port)."""
        from schedlab.lab.inventory import BmcSpec, SecretRef, Where

        if self.spec and self.spec.bmc and self.spec.bmc.port == self.bmc_port:
            return self.spec.bmc
        return BmcSpec(
            address="127.0.0.1",
            port=self.bmc_port,
            user="schedlab",
            password=SecretRef("file", str(self.keys.bmc_password), Where(self.keys.dir, None, "bmc")),
            timeout_s=15,
            retries=1,
        )

    def bmc(self):
        from schedlab.lab.power import BMC

        return BMC(self.bmc_spec())

    def bmc_pid(self) -> int | None:
        try:
            pid = int(self.bmc_pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return pid if b"schedlab.testing.standins" in cmd else None

    def start_bmc(self, log: Log | None = _stderr) -> int:
        """ipmi_sim as a background process (python -m schedlab.testing.standins bmc ...)."""
        pid = self.bmc_pid()
        if pid:
            return pid
        self.bmc_dir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "SCHEDLAB_BMC_PASSWORD"}
        env["SCHEDLAB_VHOST_BMC_PASSWORD"] = self.password()  # the child's environment only
        argv = [
            sys.executable,
            "-m",
            "schedlab.testing.standins",
            "bmc",
            "--dir",
            str(self.bmc_dir),
            "--port",
            str(self.bmc_port),
            "--vm-port",
            str(self.vm_port),
            "--password-env",
            "SCHEDLAB_VHOST_BMC_PASSWORD",
            "--poweroff-wait",
            "5",
            "--kill-wait",
            "10",
            "--",
            str(self.power_on_script),
        ]
        with open(self.state / "bmc.log", "ab") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                cwd=str(Path(__file__).resolve().parents[2]),
            )
        self.bmc_pidfile.write_text(f"{proc.pid}\n")
        t0 = time.monotonic()
        while True:
            try:
                self.bmc().status()
                break
            except Exception as e:  # noqa: BLE001 - not up yet
                if proc.poll() is not None or time.monotonic() - t0 > 20:
                    raise RuntimeError(f"{self.name}: BMC did not start ({e}); see {self.state / 'bmc.log'}") from e
                time.sleep(0.5)
        if log:
            log(
                f"{self.name}: BMC (ipmi_sim, pid {proc.pid}) on 127.0.0.1:{self.bmc_port}, "
                f"VM channel 127.0.0.1:{self.vm_port}"
            )
        return proc.pid

    def stop_bmc(self) -> None:
        pid = self.bmc_pid()
        if pid:
            os.kill(pid, signal.SIGTERM)
            t0 = time.monotonic()
            while self.bmc_pid() and time.monotonic() - t0 < 15:
                time.sleep(0.2)
        self.bmc_pidfile.unlink(missing_ok=True)

    # -- ssh -----------------------------------------------------------------------------------------
    def host(self):
        from schedlab.host import Host

        return Host(
            "127.0.0.1",
            port=self.ssh_port,
            identity=self.keys.client_key,
            known_hosts=self.keys.known_hosts,
            host_key_alias=HOST_KEY_ALIAS,
            connect_timeout=30,
        )

    # -- for humans -----------------------------------------------------------------------------------
    def up(self, *, wait: float = 900, log: Log | None = _stderr) -> dict:
        """Power the host on through its BMC (starting the BMC if needed) and wait for ssh.
        As root, a missing image (a new recipe: e.g. the qemu testbed's dom0 changed) is built first."""
        self.prepare(build=os.geteuid() == 0, log=log)
        self.start_bmc(log=log)
        bmc = self.bmc()
        t0 = time.monotonic()
        if bmc.status() == "off":
            bmc.on()
            if log:
                log(f"{self.name}: power on (chassis power on); console: {self.console_log}")
        out = {"power": bmc.status()}
        if wait:
            secs = self.host().wait_for_ssh(wait, interval=3)
            out["ssh_after_s"] = round(time.monotonic() - t0, 1)
            if log:
                log(
                    f"{self.name}: ssh answers on 127.0.0.1:{self.ssh_port} after {out['ssh_after_s']} s "
                    f"(waited {secs:.0f} s)"
                )
        return out

    def down(self, log: Log | None = _stderr) -> None:
        if self.bmc_pid():
            bmc = self.bmc()
            if bmc.status() == "on":
                bmc.off()
                if log:
                    log(f"{self.name}: power off")
        self.stop_bmc()
        if log:
            log(f"{self.name}: BMC stopped")

    def status(self) -> dict:
        st: dict = {
            "name": self.name,
            "state": str(self.state),
            "disk": str(self.disk) if self.disk.exists() else None,
            "bmc": None,
            "power": None,
            "ssh": None,
        }
        try:
            st["image"] = str(image_dir(self.name, build=False))
        except FileNotFoundError as e:
            st["image"] = f"not built ({e})"
        pid = self.bmc_pid()
        if pid:
            st["bmc"] = {"pid": pid, "port": self.bmc_port}
            try:
                st["power"] = self.bmc().status()
            except Exception as e:  # noqa: BLE001
                st["power"] = f"unknown ({e})"
        h = self.host()
        script = (
            "cat /proc/sys/kernel/random/boot_id; uname -r; cut -d' ' -f1 /proc/uptime; echo @xl; "
            "xl info | grep -E '^(xen_version|xen_commandline|xen_scheduler|build_id|nr_cpus) '; "
            "echo @grubenv; grub-editenv /boot/grub/grubenv list"
        )
        try:
            out = h.run(["sh", "-c", script], timeout=90).stdout
            head, rest = out.split("@xl\n", 1)
            xl, env = rest.split("@grubenv\n", 1)
            boot_id, release, uptime = head.split()[:3]
            st["ssh"] = {
                "boot_id": boot_id,
                "release": release,
                "uptime_s": float(uptime),
                "xl_info": {k.strip(): v.strip() for k, _, v in (l.partition(":") for l in xl.splitlines())},
                "grubenv": [l for l in env.splitlines() if l.strip()],
            }
        except Exception as e:  # noqa: BLE001
            st["ssh"] = f"no answer ({str(e).splitlines()[-1] if str(e) else e!r})"
        return st


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m schedlab.testing.vhost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default=NAME, help="inventory host (default vhost0)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="build the disk image (root), print its folder")
    up = sub.add_parser("up", help="start the BMC, power on, wait for ssh")
    up.add_argument("--no-wait", action="store_true")
    up.add_argument("--timeout", type=float, default=900)
    sub.add_parser("down", help="power off, stop the BMC")
    sub.add_parser("status", help="BMC, power, ssh, what booted")
    sub.add_parser("console", help="attach to the serial console (socat; Ctrl-C leaves)")
    sub.add_parser("reset-disk", help="the host's disk back to the built image (powered off)")
    sub.add_parser("paths", help="where things are")
    a = ap.parse_args(argv)
    if a.cmd == "build":
        t0 = time.monotonic()
        d = build_image(a.name)
        prune_images(a.name, keep=d)
        print(d)
        _stderr(
            f"image: {d} ({time.monotonic() - t0:.0f} s; build_seconds {json.loads((d / 'meta.json').read_text())['build_seconds']})"
        )
        return 0
    vh = VHost(a.name)
    if a.cmd == "up":
        print(json.dumps(vh.up(wait=0 if a.no_wait else a.timeout), indent=1))
    elif a.cmd == "down":
        vh.down()
    elif a.cmd == "status":
        print(json.dumps(vh.status(), indent=1))
    elif a.cmd == "console":
        os.execvp("socat", ["socat", "-,raw,echo=0,escape=0x1d", f"UNIX-CONNECT:{vh.serial_sock}"])
    elif a.cmd == "reset-disk":
        if vh.bmc_pid() and vh.bmc().status() == "on":
            _stderr(f"{vh.name} is powered on: `python -m schedlab.testing.vhost down` first")
            return 1
        vh.prepare(reset_disk=True)
    elif a.cmd == "paths":
        print(
            json.dumps(
                {
                    "home": str(home(a.name)),
                    "disk": str(vh.disk),
                    "power_on": str(vh.power_on_script),
                    "console_log": str(vh.console_log),
                    "serial_socket": str(vh.serial_sock),
                    "client_key": str(vh.keys.client_key),
                    "known_hosts": str(vh.keys.known_hosts),
                    "bmc_password": str(vh.keys.bmc_password),
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
