"""The root filesystem for kernels booted natively under QEMU (no Xen): S2's native side.

    python -m schedlab.builds.native          # build (root: debootstrap) or find; prints JSON
    python -m schedlab.builds.native paths    # where it would be

What is built (under $SCHEDLAB_CACHE/qemu, default ~/.cache/schedlab/qemu; nothing in git):

  native-rootfs/<key>/rootfs  debootstrap --variant=minbase bookworm + openssh-server, busybox,
                              iproute2, procps and the Debian packages the packs need
                              (schedlab.packs.debs(PACKS)); cached separately so that editing
                              guest/native-init.sh only redoes the cheap steps below
  native/<key>/
      disk.img                that tree + our configuration, ext4 via `mkfs.ext4 -d` (no loop
                              mounts); each boot uses a throw-away qcow2 overlay on it
      id_ed25519[.pub]        the client key authorised for root
      known_hosts             the image's host key (generated at build time) as "schedlab-native"
      packages.txt            dpkg-query of the tree
      meta.json               versions, sizes, build times, sha256 of what matters

The image boots with any of our kernels (schedlab.builds.kernel: everything built in, so the
image carries no modules): `-kernel bzImage -append "root=/dev/vda rw console=ttyS0
init=/sbin/schedlab-native-init"`. guest/native-init.sh mounts, configures QEMU's user
network, starts sshd and becomes busybox init (no systemd/udev: slow under TCG).

kernbench under TCG: unpacking the 138 MB linux-source tarball and building kconfig inside
the guest would take minutes per boot, so the image also carries KERNBENCH_TARBALL, made
here at image-build time in the chroot (native speed): the tree of Debian's linux-source-6.1
with the directories that a build of the host tools and the core kernel (kernel/, mm/, lib/,
init/, arch/x86, include/, scripts/) does not read reduced to their Kconfig files and one
empty Makefile (so kconfig works unchanged, and make and `make clean` do not walk thousands
of driver Makefiles, which takes minutes under TCG), with `make tinyconfig` already run, so
its kconfig and fixdep host tools are built. The kernbench pack unpacks it like the full tarball
(`--param tarball=...`); its `make tinyconfig` then only re-runs conf.

Building needs root (debootstrap chroots) and the Debian mirror, like schedlab.builds.images.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from schedlab import packs
from schedlab.builds import images as qi
from schedlab.builds import rootfs

# the shared build steps under the names this module's recipes spell (builds.steps says why)
from schedlab.builds.steps import Log
from schedlab.builds.steps import dir_size as _dir_size
from schedlab.builds.steps import finish as _finish
from schedlab.builds.steps import niced as _nice
from schedlab.builds.steps import recipe_key as _key
from schedlab.builds.steps import run as _run
from schedlab.builds.steps import stderr_log as _stderr
from schedlab.core.recipes import code_sha256
from schedlab.host import sha256_file

RECIPE_VERSION = 1
PACKS = ("pgbench", "pbzip2", "kernbench")
BASE_PACKAGES = ["openssh-server", "busybox", "iproute2", "procps", "gzip"]
HOST_KEY_ALIAS = "schedlab-native"
INIT_SCRIPT = qi.GUEST_DIR / "native-init.sh"
INIT_IN_IMAGE = "/sbin/schedlab-native-init"
KERNBENCH_TARBALL = "/opt/schedlab/linux-kernbench.tar.xz"
# Top-level directories of the kernel tree reduced to their Kconfig files (kconfig sources them)
# and an empty Makefile; KERNBENCH_KEEP stays whole.
KERNBENCH_PRUNE = [
    "Documentation",
    "drivers",
    "sound",
    "net",
    "samples",
    "firmware",
    "crypto",
    "security",
    "certs",
    "io_uring",
    "rust",
    "LICENSES",
    "usr",
    "block",
    "ipc",
    "fs",
    "tools",
    "arch",
]
KERNBENCH_KEEP = [
    "arch/x86",
    "arch/Kconfig",
    "tools/include",
    "tools/arch/x86",
    "tools/scripts",
    "tools/objtool",
    "tools/lib",
    "tools/build",
    "tools/Makefile",
]


def packages() -> list[str]:
    return sorted(set(BASE_PACKAGES) | set(packs.debs(list(PACKS))))


def rootfs_key() -> str:
    return _key({"recipe": RECIPE_VERSION, "what": "native-rootfs", "suite": qi.SUITE, "packages": packages()})


def image_key() -> str:
    code = code_sha256(ensure_image, _configure_tree, rootfs.configure_image, rootfs.make_disk, _kernbench_tarball)
    return _key(
        {
            "recipe": RECIPE_VERSION,
            "what": "native",
            "rootfs": rootfs_key(),
            "init": rootfs.init_sha256(INIT_SCRIPT),
            "code": code,
            "kernbench": [KERNBENCH_TARBALL, KERNBENCH_PRUNE, KERNBENCH_KEEP],
        }
    )


def ensure_rootfs(*, build: bool = True, log: Log | None = _stderr) -> Path:
    """The pristine debootstrap tree (directory holding rootfs/ and meta.json)."""
    final = qi.cache_root() / "native-rootfs" / rootfs_key()
    if (final / "meta.json").exists():
        return final
    if not build:
        raise FileNotFoundError(f"native rootfs not built: {final}")
    if os.geteuid() != 0:
        raise PermissionError("building the native image needs root (debootstrap)")
    for tool in ("debootstrap", "mkfs.ext4", "ssh-keygen"):
        if not shutil.which(tool):
            raise RuntimeError(f"{tool} not found (apt-get install debootstrap e2fsprogs openssh-client)")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=final.parent))
    t0 = time.monotonic()
    try:
        _run(
            _nice(
                [
                    "debootstrap",
                    "--variant=minbase",
                    "--include=" + ",".join(packages()),
                    qi.SUITE,
                    tmp / "rootfs",
                    qi.MIRROR,
                ]
            ),
            log,
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for p in (tmp / "rootfs" / junk).glob("*"):
            if p.is_file():
                p.unlink()
    meta = {
        "suite": qi.SUITE,
        "mirror": qi.MIRROR,
        "packages": packages(),
        "build_seconds": {"debootstrap": round(time.monotonic() - t0, 1)},
        "size_bytes": _dir_size(tmp / "rootfs"),
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return _finish(tmp, final)


def _configure_tree(root: Path, tmp: Path) -> None:
    """ssh keys, sshd config, init, identity of the native image."""
    rootfs.configure_image(
        root,
        tmp,
        name=HOST_KEY_ALIAS,
        init_script=INIT_SCRIPT,
        init_path=INIT_IN_IMAGE,
        sshd_extra="MaxSessions 64\nMaxStartups 64\n",
    )


def _kernbench_tarball(root: Path, log: Log | None) -> dict:
    """KERNBENCH_TARBALL inside the tree, made in the chroot at native speed (see module doc)."""
    work = "/opt/schedlab/kb"
    script = r"""set -e
work=$1; out=$2; shift 2
rm -rf "$work"; mkdir -p "$work/linux-source-6.1"
tar -xJf /usr/src/linux-source-6.1.tar.xz -C "$work/linux-source-6.1" --strip-components=1
cd "$work/linux-source-6.1"
keep=""
for k in KEEP_LIST; do keep="$keep -path ./$k -prune -o"; done
# pruned directories keep only their Kconfig files (kconfig sources them); their Makefiles are
# replaced by one empty Makefile at the top, so make (and `make clean`) does not descend into them
for d in PRUNE_LIST; do
    [ -e "$d" ] || continue
    find "./$d" $keep -type f ! -name 'Kconfig*' -print0 | xargs -0 rm -f
    # no empty directories: the top Makefile skips e.g. tools/bpf/resolve_btfids's clean
    # when that directory does not exist
    find "./$d" -mindepth 1 -depth $keep -type d -empty -print0 | xargs -0 -r rmdir
    [ -e "$d/Makefile" ] || : > "$d/Makefile"
done
make -s ARCH=x86_64 tinyconfig >/dev/null
cd "$work"
tar -cf - linux-source-6.1 | xz -T2 -3 > "$out.tmp"
mv "$out.tmp" "$out"
du -sb linux-source-6.1 | cut -f1
rm -rf "$work"
"""
    script = script.replace("KEEP_LIST", " ".join(KERNBENCH_KEEP)).replace("PRUNE_LIST", " ".join(KERNBENCH_PRUNE))
    (root / "opt/schedlab").mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    res = _run(
        _nice(["chroot", root, "bash", "-c", script, "kb", work, KERNBENCH_TARBALL]),
        log,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LC_ALL": "C"},
    )
    tree_bytes = int(res.stdout.split()[-1])
    tb = root / KERNBENCH_TARBALL.lstrip("/")
    return {
        "path": KERNBENCH_TARBALL,
        "sha256": sha256_file(tb),
        "bytes": tb.stat().st_size,
        "tree_bytes": tree_bytes,
        "seconds": round(time.monotonic() - t0, 1),
        "pruned": KERNBENCH_PRUNE,
        "kept": KERNBENCH_KEEP,
    }


def ensure_image(*, build: bool = True, log: Log | None = _stderr) -> Path:
    """Directory with disk.img, id_ed25519, known_hosts, packages.txt, meta.json."""
    final = qi.cache_root() / "native" / image_key()
    if (final / "meta.json").exists():
        return final
    if not build:
        raise FileNotFoundError(f"native image not built: {final}")
    base = ensure_rootfs(build=build, log=log)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=final.parent))
    try:
        root = tmp / "rootfs"
        times = dict(json.loads((base / "meta.json").read_text())["build_seconds"])
        t0 = time.monotonic()
        _run(["cp", "-a", "--reflink=auto", base / "rootfs", root], log)
        times["copy-tree"] = round(time.monotonic() - t0, 1)
        t1 = time.monotonic()
        _configure_tree(root, tmp)
        times["configure"] = round(time.monotonic() - t1, 1)
        kb = _kernbench_tarball(root, log)
        times["kernbench-tarball"] = kb["seconds"]
        manifest = _run(["chroot", root, "dpkg-query", "-W", "-f", "${Package} ${Version}\n"]).stdout
        (tmp / "packages.txt").write_text(manifest)
        t2 = time.monotonic()
        img = tmp / "disk.img"
        # room for the runs' files on the overlay
        used = rootfs.make_disk(root, img, label="schedlab-native", extra_mb=1024, slack=1.2)
        times["mkfs.ext4"] = round(time.monotonic() - t2, 1)
        pkgs = dict(line.split(" ", 1) for line in manifest.splitlines() if " " in line)
        meta = {
            "suite": qi.SUITE,
            "mirror": qi.MIRROR,
            "key": final.name,
            "versions": {p: pkgs.get(p) for p in packages()},
            "init": INIT_IN_IMAGE,
            "init_sha256": rootfs.init_sha256(INIT_SCRIPT),
            "kernbench_tarball": kb,
            "sha256": {
                "packages.txt": sha256_file(tmp / "packages.txt"),
                "known_hosts": sha256_file(tmp / "known_hosts"),
            },
            "sizes_bytes": {
                "rootfs_tree": used,
                "disk.img": img.stat().st_size,
                "disk.img_allocated": img.stat().st_blocks * 512,
            },
            "build_seconds": times,
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        shutil.rmtree(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _finish(tmp, final)


@dataclass
class NativeImage:
    dir: Path

    @property
    def disk(self) -> Path:
        return self.dir / "disk.img"

    @property
    def identity(self) -> Path:
        return self.dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def meta(self) -> dict:
        return json.loads((self.dir / "meta.json").read_text())

    def build_id(self) -> str:
        """Hash of what runs in the image: the package list, the init script, the kernbench tree,
        the host key (not disk.img itself: mkfs output carries UUIDs)."""
        m = self.meta
        return _key(
            {
                "packages": m["sha256"]["packages.txt"],
                "init": m["init_sha256"],
                "kernbench": m["kernbench_tarball"]["sha256"],
                "known_hosts": m["sha256"]["known_hosts"],
            }
        )


def image(*, build: bool = True, log: Log | None = _stderr) -> NativeImage:
    return NativeImage(ensure_image(build=build, log=log))


def image_cached() -> bool:
    try:
        ensure_image(build=False, log=None)
        return True
    except FileNotFoundError:
        return False


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m schedlab.builds.native",
        description="Build (or locate) the native image for kernels booted without Xen.",
    )
    ap.add_argument("what", nargs="?", default="image", choices=["image", "rootfs", "paths"])
    a = ap.parse_args(argv)
    if a.what == "paths":
        print(
            json.dumps(
                {
                    "rootfs": str(qi.cache_root() / "native-rootfs" / rootfs_key()),
                    "image": str(qi.cache_root() / "native" / image_key()),
                },
                indent=2,
            )
        )
    elif a.what == "rootfs":
        print(ensure_rootfs())
    else:
        t0 = time.monotonic()
        im = image()
        print(
            json.dumps(
                {
                    "dir": str(im.dir),
                    "disk": str(im.disk),
                    "build_id": im.build_id(),
                    "request_seconds": round(time.monotonic() - t0, 1),
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
