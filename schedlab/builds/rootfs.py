"""What every booted image shares (the qemu testbed's dom0, the native image): a fresh ssh
host key and our client key, a locked-down sshd, our PID-1 init with the shared init
functions (guest/init-common.sh), busybox init's inittab, the machine's identity."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

GUEST_DIR = Path(__file__).resolve().parents[2] / "guest"
INIT_COMMON = GUEST_DIR / "init-common.sh"
INIT_COMMON_IN_IMAGE = "usr/lib/schedlab/init-common.sh"
SSHD_CONFIG = (
    "HostKey /etc/ssh/ssh_host_ed25519_key\nPermitRootLogin prohibit-password\n"
    "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUseDNS no\nUsePAM no\n"
)


def _keygen(comment: str, path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True, capture_output=True
    )


def init_sha256(init_script: Path) -> str:
    """What the image's init is: its own script and the shared functions it sources."""
    return hashlib.sha256(init_script.read_bytes() + INIT_COMMON.read_bytes()).hexdigest()


def configure_image(
    root: Path, out: Path, *, name: str, init_script: Path, init_path: str, sshd_extra: str = ""
) -> None:
    """Configure the tree `root` as the booted machine `name`. Writes into `out` the client
    key (id_ed25519[.pub]) authorised for root and `known_hosts` naming the new host key
    under the alias `name`."""
    for old in (root / "etc/ssh").glob("ssh_host_*"):
        old.unlink()
    _keygen(name, root / "etc/ssh/ssh_host_ed25519_key")
    _keygen("schedlab-client", out / "id_ed25519")
    hostpub = (root / "etc/ssh/ssh_host_ed25519_key.pub").read_text().split()
    (out / "known_hosts").write_text(f"{name} {hostpub[0]} {hostpub[1]}\n")
    sshdir = root / "root/.ssh"
    sshdir.mkdir(mode=0o700, exist_ok=True)
    shutil.copy(out / "id_ed25519.pub", sshdir / "authorized_keys")
    os.chmod(sshdir / "authorized_keys", 0o600)
    (root / "etc/ssh/sshd_config.d").mkdir(exist_ok=True)
    (root / "etc/ssh/sshd_config.d/schedlab.conf").write_text(SSHD_CONFIG + sshd_extra)
    (root / INIT_COMMON_IN_IMAGE).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(INIT_COMMON, root / INIT_COMMON_IN_IMAGE)
    shutil.copy(init_script, root / init_path.lstrip("/"))
    os.chmod(root / init_path.lstrip("/"), 0o755)
    (root / "etc/inittab").write_text("::sysinit:/bin/true\n::ctrlaltdel:/sbin/reboot\n::shutdown:/bin/sync\n")
    (root / "etc/hostname").write_text(f"{name}\n")
    (root / "etc/hosts").write_text(f"127.0.0.1 localhost\n127.0.1.1 {name}\n")
    (root / "etc/fstab").write_text("/dev/vda / ext4 rw,noatime 0 1\n")
    # busybox init wants /bin/busybox (bookworm's merged /usr puts it in /usr/bin; make sure
    # either way)
    if not (root / "bin/busybox").exists():
        os.symlink("/usr/bin/busybox", root / "bin/busybox")


def make_disk(root: Path, img: Path, *, label: str, extra_mb: int, slack: float) -> int:
    """An ext4 image of the tree `root` made with `mkfs.ext4 -d` (no loop mounts, no root
    needed for the image itself), sized to the tree times `slack` plus `extra_mb`; fixed
    timestamps. Returns the tree's size in bytes."""
    used = int(
        subprocess.run(
            ["du", "-sb", "--apparent-size", str(root)], capture_output=True, text=True, check=True
        ).stdout.split()[0]
    )
    size_mb = int(used * slack / 2**20) + extra_mb
    res = subprocess.run(
        ["mkfs.ext4", "-q", "-F", "-L", label, "-d", str(root), "-E", "root_owner=0:0", str(img), f"{size_mb}M"],
        capture_output=True,
        text=True,
        env={**os.environ, "E2FSPROGS_FAKE_TIME": "0"},
    )
    if res.returncode != 0:
        raise RuntimeError(f"mkfs.ext4 of {root} failed ({res.returncode}): {res.stderr[-2000:]}")
    return used
