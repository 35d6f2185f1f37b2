"""Images for the qemu testbed, built from Debian packages and cached by content hash.

What is built (all under $SCHEDLAB_CACHE/qemu, default ~/.cache/schedlab/qemu; nothing
goes into the git tree):

  xen/<key>/xen           Xen hypervisor, Debian's xen-hypervisor-4.17-amd64 (gunzipped,
                          a multiboot ELF32 QEMU can boot with -kernel).
  dom0/<key>/             dom0 made with debootstrap (bookworm, minbase + xen-utils-4.17,
                          openssh-server, busybox, iperf3, sockperf, linux-image-amd64):
      disk.img            its root filesystem, ext4 made with `mkfs.ext4 -d` (no loop mounts)
      vmlinuz, initrd.img the dom0 kernel and its initramfs (from the same rootfs)
      guest-vmlinuz, guest-initrd.img
                          the PV guest: same Debian kernel + a busybox initramfs with
                          iperf3/sockperf servers, a CPU loop and the lock benchmark
                          module lockmod.ko (guest/guest-init.sh, guest/lockmod/)
      id_ed25519[.pub]    the client key authorised for root in dom0
      known_hosts         dom0's host key (generated at build time), as "schedlab-dom0"
      meta.json           package versions, sizes, build times
  xen-src/<key>/xen       (build_xen) Xen built from Debian's source package + patches
  kheaders/<key>/root/    Debian's linux-headers of the guest kernel (exact version of the
                          dom0 tree's linux-image), unpacked from the .debs (no root)
  lockmod/<key>/lockmod.ko  guest/lockmod/ built against those headers (stripped)

Each <key> is a hash of the recipe (package names, suite, the guest/ scripts, patch
contents); the testbed's build_id is a hash of the built artifacts themselves.
Building dom0 needs root (debootstrap chroots); the rest does not.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from schedlab.builds import rootfs

# the shared build steps under the names this module's recipes spell (builds.steps says why)
from schedlab.builds.steps import Log
from schedlab.builds.steps import dir_size as _dir_size
from schedlab.builds.steps import finish as _finish
from schedlab.builds.steps import niced as _nice
from schedlab.builds.steps import recipe_key as _key
from schedlab.builds.steps import run as _run
from schedlab.builds.steps import stderr_log as _stderr
from schedlab.core import files
from schedlab.core.recipes import code_sha256
from schedlab.host import sha256_file  # re-exported: qemu.py uses qi.sha256_file

RECIPE_VERSION = 1
SUITE = "bookworm"
MIRROR = os.environ.get("SCHEDLAB_DEBIAN_MIRROR", "http://deb.debian.org/debian")
XEN_PACKAGE = "xen-hypervisor-4.17-amd64"
XEN_SOURCE_PACKAGE = "xen"
DOM0_PACKAGES = [
    "xen-utils-4.17",
    "xen-utils-common",
    "openssh-server",
    "busybox",
    "iperf3",
    "sockperf",
    "iproute2",
    "bridge-utils",
    "kmod",
    "procps",
    "linux-image-amd64",
    "initramfs-tools",
    "udev",
    "sysbench",  # S4's memory benchmark, copied into the guest initramfs
]
# Kernel modules the PV guest needs (the Debian kernel has them as modules), in load order.
GUEST_MODULES = ["drivers/net/xen-netfront.ko"]
REPO = Path(__file__).resolve().parents[2]
GUEST_DIR = REPO / "guest"
# Binaries copied (with their shared libraries) from the dom0 rootfs into the guest initramfs.
GUEST_BINARIES = ["/usr/bin/busybox", "/usr/bin/iperf3", "/usr/bin/sockperf", "/usr/bin/sysbench"]
# S4's fork/exec latency benchmark (schedlab/packs/forkexec.c), static, in the guest's /bin.
FORKEXEC_SOURCE = REPO / "schedlab" / "packs" / "forkexec.c"
GUEST_FORKEXEC = "bin/forkexec"
# The lock benchmark (S0, S2): an out-of-tree module built from guest/lockmod/ against Debian's
# headers of the guest kernel; in the guest initramfs outside lib/modules (guest-init.sh loads
# everything in lib/modules at boot, this one only when dom0 starts a run).
LOCKMOD_SOURCES = ["lockmod.c", "Kbuild", "Makefile"]
GUEST_LOCKMOD = "lib/lockmod/lockmod.ko"
HOST_KEY_ALIAS = "schedlab-dom0"


def cache_root() -> Path:
    """$SCHEDLAB_CACHE/qemu: the qemu testbed's images."""
    return files.cache_root() / "qemu"


def _apt_download(pkg: str, dest: Path, log: Log | None) -> tuple[Path, str]:
    dest.mkdir(parents=True, exist_ok=True)
    _run(["apt-get", "download", pkg], log, cwd=dest)
    debs = sorted(dest.glob(f"{pkg.split('=')[0]}_*.deb"))
    if not debs:
        raise RuntimeError(f"apt-get download {pkg}: no .deb")
    version = _run(["dpkg-deb", "-f", debs[-1], "Version"]).stdout.strip()
    return debs[-1], version


# -- Debian source packages, through a private apt state ------------------------------------------
# A bare Debian has no deb-src entry, and the system's apt configuration is not ours to edit:
# `apt-get source` reads a sources list and package lists kept in the cache instead.
SECURITY_MIRROR = os.environ.get("SCHEDLAB_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security")
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def _src_sources() -> str:
    return (
        f"deb-src [signed-by={DEBIAN_KEYRING}] {MIRROR} {SUITE} main\n"
        f"deb-src [signed-by={DEBIAN_KEYRING}] {MIRROR} {SUITE}-updates main\n"
        f"deb-src [signed-by={DEBIAN_KEYRING}] {SECURITY_MIRROR} {SUITE}-security main\n"
    )


def apt_src_options(*, refresh: bool = False, log: Log | None = None) -> list[str]:
    """`-o` options that point apt-get/apt-cache at deb-src lists of our own (in the cache),
    leaving /etc/apt and /var/lib/apt alone. Fetches the lists on first use (or `refresh`)."""
    state = cache_root() / "apt-src" / _key({"sources": _src_sources()})
    opts = [
        "-o",
        f"Dir::Etc::SourceList={state / 'sources.list'}",
        "-o",
        f"Dir::Etc::SourceParts={state / 'sources.list.d'}",
        "-o",
        f"Dir::State::Lists={state / 'lists'}",
        "-o",
        f"Dir::Cache={state / 'cache'}",
        "-o",
        "Dir::State::Status=/var/lib/dpkg/status",
        # the cache may be private to its owner, where apt's _apt download user can't write
        "-o",
        "APT::Sandbox::User=" + pwd.getpwuid(os.geteuid()).pw_name,
    ]
    if refresh or not (state / "updated").exists():
        if not Path(DEBIAN_KEYRING).exists():
            raise RuntimeError(f"{DEBIAN_KEYRING} missing (apt-get install debian-archive-keyring)")
        for d in ("lists/partial", "cache/archives/partial", "sources.list.d"):
            (state / d).mkdir(parents=True, exist_ok=True)
        (state / "sources.list").write_text(_src_sources())
        _run(["apt-get", *opts, "-o", "Debug::NoLocking=true", "-qq", "update"], log)
        (state / "updated").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
    return opts


def debian_source_version(package: str, *, log: Log | None = None) -> str:
    """The newest version of a source package in our deb-src lists."""
    out = _run(["apt-cache", *apt_src_options(log=log), "showsrc", "--only-source", package]).stdout
    versions = [l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Version:")]
    if not versions:
        raise RuntimeError(f"no source package {package!r} in {SUITE}'s deb-src lists")
    cmp = lambda a, b: subprocess.run(["dpkg", "--compare-versions", a, "gt", b]).returncode == 0
    best = versions[0]
    for v in versions[1:]:
        best = v if cmp(v, best) else best
    return best


def apt_source(package: str, version: str, cwd: Path, *, log: Log | None = None) -> None:
    """`apt-get source package=version` into cwd, from our deb-src lists (refreshed once if
    the version has left them, e.g. after a point release)."""
    argv = ["source", "--only-source", f"{package}={version}"]
    try:
        _run(["apt-get", *apt_src_options(log=log), "-qq", *argv], log, cwd=cwd)
    except RuntimeError:
        _run(["apt-get", *apt_src_options(refresh=True, log=log), "-qq", *argv], log, cwd=cwd)


# -- Xen (prebuilt Debian package) ------------------------------------------------------------
def xen_stock_key(version: str | None) -> str:
    return _key({"recipe": RECIPE_VERSION, "what": "xen-deb", "pkg": XEN_PACKAGE, "version": version})


def rootfs_xen_version(rootfs_dir: Path) -> str:
    """Version of xen-utils-4.17 inside the dom0 tree: the hypervisor must match the tools."""
    out = _run(
        ["dpkg-query", "--admindir", rootfs_dir / "rootfs/var/lib/dpkg", "-W", "-f", "${Version}", "xen-utils-4.17"]
    ).stdout.strip()
    if not out:
        raise RuntimeError("xen-utils-4.17 not installed in the dom0 tree")
    return out


def ensure_xen_stock(version: str | None = None, *, build: bool = True, log: Log | None = _stderr) -> Path:
    """Directory holding `xen` (Debian's prebuilt hypervisor, `version` or apt's candidate)
    and meta.json."""
    final = cache_root() / "xen" / xen_stock_key(version)
    if (final / "meta.json").exists():
        return final
    if not build:
        raise FileNotFoundError(f"Xen image not built: {final}")
    t0 = time.monotonic()
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=final.parent))
    deb, version = _apt_download(XEN_PACKAGE + (f"={version}" if version else ""), tmp / "deb", log)
    _run(["dpkg-deb", "-x", deb, tmp / "x"], log)
    gz = next((tmp / "x" / "boot").glob("xen-*-amd64.gz"))
    with gzip.open(gz) as src, open(tmp / "xen", "wb") as dst:
        shutil.copyfileobj(src, dst)
    cfg = next((tmp / "x" / "boot").glob("xen-*-amd64.config"), None)
    if cfg:
        shutil.copy(cfg, tmp / "xen.config")
    meta = {
        "source": "debian-package",
        "package": XEN_PACKAGE,
        "version": version,
        "deb_sha256": sha256_file(deb),
        "sha256": sha256_file(tmp / "xen"),
        "size_bytes": (tmp / "xen").stat().st_size,
        "build_seconds": round(time.monotonic() - t0, 1),
    }
    shutil.rmtree(tmp / "x")
    shutil.rmtree(tmp / "deb")
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return _finish(tmp, final)


# -- dom0 root filesystem + PV guest -----------------------------------------------------------
def rootfs_key() -> str:
    return _key({"recipe": RECIPE_VERSION, "what": "rootfs", "suite": SUITE, "packages": DOM0_PACKAGES})


def dom0_key() -> str:
    scripts = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(GUEST_DIR.glob("*.sh"))}
    # The code that turns the tree into the images (not the whole module: editing build_xen
    # must not rebuild dom0).

    scripts["code"] = code_sha256(
        *(
            ensure_dom0,
            rootfs.configure_image,
            rootfs.make_disk,
            _build_guest_initrd,
            _build_dom0_initrd,
            _module_order,
            _module_bytes,
            _cpio_gz,
            _copy_into,
            _chroot_libs,
        )
    )
    scripts["initrd_modules"] = DOM0_INITRD_MODULES
    # The guest's lock module: a changed source (or recipe) means a new image.
    scripts["lockmod"] = lockmod_key("*", "*")
    scripts["forkexec"] = forkexec_key()
    return _key(
        {
            "recipe": RECIPE_VERSION,
            "what": "dom0",
            "rootfs": rootfs_key(),
            "guest_modules": GUEST_MODULES,
            "guest_binaries": GUEST_BINARIES,
            "scripts": scripts,
        }
    )


def ensure_rootfs(*, build: bool = True, log: Log | None = _stderr) -> Path:
    """The pristine debootstrap tree (cached separately so that changing the guest/ scripts
    only re-runs the cheap configure + mkfs steps). Returns the directory holding rootfs/."""
    final = cache_root() / "rootfs" / rootfs_key()
    if (final / "meta.json").exists():
        return final
    if not build:
        raise FileNotFoundError(f"dom0 rootfs not built: {final}")
    if os.geteuid() != 0:
        raise PermissionError("building the dom0 image needs root (debootstrap)")
    for tool in ("debootstrap", "mkfs.ext4", "cpio", "ssh-keygen"):
        if not shutil.which(tool):
            raise RuntimeError(f"{tool} not found (apt-get install debootstrap e2fsprogs cpio openssh-client)")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=final.parent))
    t0 = time.monotonic()
    _run(
        _nice(
            ["debootstrap", "--variant=minbase", "--include=" + ",".join(DOM0_PACKAGES), SUITE, tmp / "rootfs", MIRROR]
        ),
        log,
    )
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for p in (tmp / "rootfs" / junk).glob("*"):
            if p.is_file():
                p.unlink()
    meta = {
        "suite": SUITE,
        "mirror": MIRROR,
        "packages": DOM0_PACKAGES,
        "build_seconds": {"debootstrap": round(time.monotonic() - t0, 1)},
        "size_bytes": _dir_size(tmp / "rootfs"),
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return _finish(tmp, final)


def _chroot_libs(root: Path, binary: str) -> list[str]:
    """Shared libraries (paths inside root) that `binary` needs, via ldd in the chroot."""
    out = _run(["chroot", root, "ldd", binary]).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts:
            i = parts.index("=>")
            if i + 1 < len(parts) and parts[i + 1].startswith("/"):
                libs.append(parts[i + 1])
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])  # the dynamic loader
    return libs


def _copy_into(root: Path, path: str, dest_root: Path) -> None:
    src = root / path.lstrip("/")
    dst = dest_root / path.lstrip("/")
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src.resolve(), dst)  # resolve symlinks: copy the real file under this name


def _cpio_gz(src_dir: Path, out: Path, compress: bool = False) -> None:
    """newc cpio of src_dir (sorted, owner 0, reproducible). Uncompressed by default:
    under TCG the kernel's gunzip of a few MB costs more time than copying them."""
    files = subprocess.run(["find", ".", "-mindepth", "1"], cwd=src_dir, capture_output=True, check=True).stdout
    files = b"\n".join(sorted(files.splitlines())) + b"\n"
    cpio = subprocess.run(
        ["cpio", "--quiet", "-o", "-H", "newc", "--reproducible", "-R", "0:0"],
        cwd=src_dir,
        input=files,
        capture_output=True,
        check=True,
    ).stdout
    with open(out, "wb") as f:
        f.write(gzip.compress(cpio, compresslevel=6, mtime=0) if compress else cpio)


# -- the guest's lock benchmark module (guest/lockmod/) ------------------------------------------
def kheaders_packages(kver: str) -> list[str]:
    """Debian's packages holding the headers to build modules for kernel `kver`
    (e.g. 6.1.0-50-amd64 -> linux-headers-6.1.0-50-amd64, linux-headers-6.1.0-50-common,
    linux-kbuild-6.1)."""
    abi = kver.rsplit("-", 1)[0]
    series = ".".join(kver.split(".")[:2])
    return [f"linux-headers-{kver}", f"linux-headers-{abi}-common", f"linux-kbuild-{series}"]


def ensure_kheaders(kver: str, version: str, *, build: bool = True, log: Log | None = _stderr) -> Path:
    """Debian's headers for `kver` at exactly `version` (the dom0 tree's linux-image version,
    not apt's candidate: linux-kbuild-6.1 has newer versions in bookworm-security),
    `apt-get download`ed and unpacked into the cache (no root, nothing installed on the
    host). Returns the kbuild directory (…/usr/src/linux-headers-<kver>)."""
    final = (
        cache_root()
        / "kheaders"
        / _key({"recipe": RECIPE_VERSION, "what": "kheaders", "kver": kver, "version": version})
    )
    kdir = final / "root/usr/src" / f"linux-headers-{kver}"
    if (final / "meta.json").exists():
        return kdir
    if not build:
        raise FileNotFoundError(f"kernel headers not unpacked: {final}")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=final.parent))
    t0 = time.monotonic()
    debs = {}
    for pkg in kheaders_packages(kver):
        deb, v = _apt_download(f"{pkg}={version}", tmp / "deb", log)
        _run(["dpkg-deb", "-x", deb, tmp / "root"], log)
        debs[pkg] = {"version": v, "sha256": sha256_file(deb)}
    # The flavour's Makefile includes the common one by absolute path (/usr/src/...): make it
    # relative to itself, so the unpacked tree works wherever the cache is.
    mk = tmp / "root/usr/src" / f"linux-headers-{kver}" / "Makefile"
    text = mk.read_text()
    fixed = text.replace("include /usr/src/", "include $(dir $(realpath $(lastword $(MAKEFILE_LIST))))../")
    if fixed == text:
        raise RuntimeError(f"{mk}: no 'include /usr/src/' line to rewrite:\n{text[:500]}")
    mk.write_text(fixed)
    shutil.rmtree(tmp / "deb")
    (tmp / "meta.json").write_text(
        json.dumps(
            {"kver": kver, "version": version, "packages": debs, "build_seconds": round(time.monotonic() - t0, 1)},
            indent=2,
        )
        + "\n"
    )
    _finish(tmp, final)
    return kdir


def lockmod_key(kver: str, version: str) -> str:
    src = {n: hashlib.sha256((GUEST_DIR / "lockmod" / n).read_bytes()).hexdigest() for n in LOCKMOD_SOURCES}

    code = code_sha256(build_lockmod)
    return _key(
        {"recipe": RECIPE_VERSION, "what": "lockmod", "kver": kver, "version": version, "sources": src, "code": code}
    )


def build_lockmod(kver: str, version: str, *, build: bool = True, log: Log | None = _stderr) -> Path:
    """guest/lockmod/lockmod.ko built against Debian's headers of `kver` (`version`) with the
    host's gcc-12 (Debian's kernels are built with it; needs gcc-12, make, libelf1), debug
    info and build-id stripped (so it does not depend on the build path). Cached by source
    hash; returns the .ko."""
    final = cache_root() / "lockmod" / lockmod_key(kver, version)
    if (final / "meta.json").exists():
        return final / "lockmod.ko"
    if not build:
        raise FileNotFoundError(f"lockmod.ko not built: {final}")
    kdir = ensure_kheaders(kver, version, log=log)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=final.parent))
    t0 = time.monotonic()
    src = tmp / "src"
    src.mkdir()
    for n in LOCKMOD_SOURCES:
        shutil.copy(GUEST_DIR / "lockmod" / n, src / n)
    res = _run(_nice(["make", "-C", kdir, f"M={src}", "modules"]), log)
    warnings = [l for l in (res.stdout + res.stderr).splitlines() if "warning:" in l]
    shutil.copy(src / "lockmod.ko", tmp / "lockmod.ko")
    # Without debug info and the build-id note (both depend on the build directory) the .ko is
    # the same bytes wherever it is built.
    _run(["strip", "--strip-debug", "--remove-section=.note.gnu.build-id", tmp / "lockmod.ko"], log)
    shutil.rmtree(src)
    (tmp / "meta.json").write_text(
        json.dumps(
            {
                "kver": kver,
                "version": version,
                "headers": str(kdir.relative_to(cache_root())),
                "sha256": sha256_file(tmp / "lockmod.ko"),
                "size_bytes": (tmp / "lockmod.ko").stat().st_size,
                "warnings": warnings,
                "build_seconds": round(time.monotonic() - t0, 1),
            },
            indent=2,
        )
        + "\n"
    )
    return _finish(tmp, final) / "lockmod.ko"


def forkexec_key() -> str:

    return _key(
        {
            "recipe": RECIPE_VERSION,
            "what": "forkexec",
            "source": hashlib.sha256(FORKEXEC_SOURCE.read_bytes()).hexdigest(),
            "code": code_sha256(build_forkexec),
        }
    )


def build_forkexec(*, build: bool = True, log: Log | None = _stderr) -> Path:
    """schedlab/packs/forkexec.c as a static binary for the PV guest (whose initramfs has no
    compiler), built with this machine's cc (Debian's gcc-12 and glibc, the dom0 suite's),
    symbols and build-id stripped. Static, so the exec'd helper is the same binary without a
    dynamic loader (LMBench's lat_proc exec runs a small helper too). Cached by source hash."""
    final = cache_root() / "forkexec" / forkexec_key()
    if (final / "meta.json").exists():
        return final / "forkexec"
    if not build:
        raise FileNotFoundError(f"forkexec not built: {final}")
    cc = shutil.which("cc")
    if not cc:
        raise RuntimeError("cc not found (apt-get install gcc libc6-dev): needed for the guest's forkexec")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=final.parent))
    out = tmp / "forkexec"
    _run([cc, "-O2", "-static", "-o", out, FORKEXEC_SOURCE], log)
    _run(["strip", "--strip-all", "--remove-section=.note.gnu.build-id", out], log)
    version = _run([cc, "--version"]).stdout.splitlines()[0]
    (tmp / "meta.json").write_text(
        json.dumps(
            {"cc": version, "flags": "-O2 -static", "sha256": sha256_file(out), "size_bytes": out.stat().st_size},
            indent=2,
        )
        + "\n"
    )
    return _finish(tmp, final) / "forkexec"


def _build_guest_initrd(
    root: Path, kver: str, out: Path, log: Log | None, lockmod: Path | None = None, forkexec: Path | None = None
) -> None:
    with tempfile.TemporaryDirectory(dir=out.parent) as d:
        stage = Path(d)
        for sub in ("bin", "sbin", "proc", "sys", "dev", "tmp", "lib/modules", "etc"):
            (stage / sub).mkdir(parents=True, exist_ok=True)
        for binary in GUEST_BINARIES:
            _copy_into(root, binary, stage)
            for lib in _chroot_libs(root, binary):
                _copy_into(root, lib, stage)
        busybox = stage / "usr/bin/busybox"
        shutil.move(busybox, stage / "bin/busybox")
        os.symlink("busybox", stage / "bin/sh")
        for mod in GUEST_MODULES:
            src = root / "lib/modules" / kver / "kernel" / mod
            cand = [src] + [src.with_name(src.name + ext) for ext in (".xz", ".zst", ".gz")]
            found = next((c for c in cand if c.exists()), None)
            if found is None:
                raise RuntimeError(f"guest module {mod} not found for kernel {kver}")
            if found.suffix == ".xz":
                data = subprocess.run(["xz", "-dc", found], capture_output=True, check=True).stdout
            elif found.suffix == ".zst":
                data = subprocess.run(["zstd", "-dc", found], capture_output=True, check=True).stdout
            elif found.suffix == ".gz":
                data = gzip.decompress(found.read_bytes())
            else:
                data = found.read_bytes()
            (stage / "lib/modules" / Path(mod).name.split(".ko")[0]).with_suffix(".ko").write_bytes(data)
        if lockmod is not None:
            (stage / GUEST_LOCKMOD).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(lockmod, stage / GUEST_LOCKMOD)
        if forkexec is not None:
            shutil.copy(forkexec, stage / GUEST_FORKEXEC)
            os.chmod(stage / GUEST_FORKEXEC, 0o755)
        shutil.copy(GUEST_DIR / "guest-init.sh", stage / "init")
        os.chmod(stage / "init", 0o755)
        (stage / "etc/passwd").write_text("root:x:0:0:root:/:/bin/sh\n")
        (stage / "etc/group").write_text("root:x:0:\n")
        _cpio_gz(stage, out)


def _module_order(root: Path, kver: str, names: list[str]) -> list[str]:
    """Module files (relative to lib/modules/<kver>) for `names` and their dependencies,
    dependencies first, from modules.dep."""
    deps: dict[str, list[str]] = {}
    for line in (root / "lib/modules" / kver / "modules.dep").read_text().splitlines():
        mod, _, rest = line.partition(":")
        deps[mod] = rest.split()
    byname = {Path(m).name.split(".ko")[0].replace("-", "_"): m for m in deps}
    order: list[str] = []

    def visit(m: str) -> None:
        if m in order:
            return
        for d in deps.get(m, []):
            visit(d)
        order.append(m)

    for n in names:
        key = n.replace("-", "_")
        if key not in byname:
            raise RuntimeError(f"module {n} not in modules.dep of {kver}")
        visit(byname[key])
    return order


def _module_bytes(path: Path) -> bytes:
    if path.suffix == ".xz":
        return subprocess.run(["xz", "-dc", path], capture_output=True, check=True).stdout
    if path.suffix == ".zst":
        return subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
    return path.read_bytes()


DOM0_INITRD_MODULES = ["virtio_pci", "virtio_blk", "crc32c_generic", "crc32c_intel", "libcrc32c", "ext4"]


def _build_dom0_initrd(root: Path, kver: str, out: Path) -> None:
    with tempfile.TemporaryDirectory(dir=out.parent) as d:
        stage = Path(d)
        for sub in ("bin", "proc", "sys", "dev", "newroot", "lib/modules"):
            (stage / sub).mkdir(parents=True, exist_ok=True)
        _copy_into(root, "/usr/bin/busybox", stage)
        for lib in _chroot_libs(root, "/usr/bin/busybox"):
            _copy_into(root, lib, stage)
        shutil.move(stage / "usr/bin/busybox", stage / "bin/busybox")
        os.symlink("busybox", stage / "bin/sh")
        order = _module_order(root, kver, DOM0_INITRD_MODULES)
        names = []
        for m in order:
            name = Path(m).name.split(".ko")[0] + ".ko"
            (stage / "lib/modules" / name).write_bytes(_module_bytes(root / "lib/modules" / kver / m))
            names.append(name)
        (stage / "lib/modules/order").write_text("\n".join(names) + "\n")
        shutil.copy(GUEST_DIR / "dom0-initramfs-init.sh", stage / "init")
        os.chmod(stage / "init", 0o755)
        _cpio_gz(stage, out)


def ensure_dom0(*, build: bool = True, log: Log | None = _stderr, keep_rootfs: bool = False) -> Path:
    """Directory with disk.img, vmlinuz, initrd.img, guest-vmlinuz, guest-initrd.img, keys, meta.json."""
    final = cache_root() / "dom0" / dom0_key()
    if (final / "meta.json").exists():
        return final
    if not build:
        raise FileNotFoundError(f"dom0 image not built: {final}")
    base = ensure_rootfs(build=build, log=log)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=final.parent))
    root = tmp / "rootfs"
    times = dict(json.loads((base / "meta.json").read_text())["build_seconds"])
    t0 = time.monotonic()
    _run(["cp", "-a", "--reflink=auto", base / "rootfs", root], log)
    times["copy-tree"] = round(time.monotonic() - t0, 1)

    t1 = time.monotonic()
    kvers = sorted(p.name for p in (root / "lib/modules").iterdir())
    kver = kvers[-1]
    for name, src in (("vmlinuz", f"boot/vmlinuz-{kver}"), ("initrd.img", f"boot/initrd.img-{kver}")):
        shutil.copy(root / src, tmp / name)
    # ssh keys, sshd, init (guest/dom0-init.sh + init-common.sh), identity
    rootfs.configure_image(
        root, tmp, name=HOST_KEY_ALIAS, init_script=GUEST_DIR / "dom0-init.sh", init_path="/sbin/schedlab-init"
    )
    xlconf = root / "etc/xen/xl.conf"
    xlconf.parent.mkdir(parents=True, exist_ok=True)
    with open(xlconf, "a") as f:
        f.write('\n# schedlab: dom0 memory is fixed on the Xen command line\nautoballoon="off"\n')
    # dom0's initramfs: busybox + the modules for mounting /dev/vda (guest/dom0-initramfs-init.sh).
    _build_dom0_initrd(root, kver, tmp / "initrd.img")
    # The PV guest: same kernel, busybox initramfs (+ lockmod.ko, built against the headers of
    # exactly this kernel package version).
    shutil.copy(tmp / "vmlinuz", tmp / "guest-vmlinuz")
    kpkg_version = _run(
        ["dpkg-query", "--admindir", root / "var/lib/dpkg", "-W", "-f", "${Version}", f"linux-image-{kver}"]
    ).stdout.strip()
    t_mod = time.monotonic()
    lockmod = build_lockmod(kver, kpkg_version, log=log)
    times["lockmod"] = round(time.monotonic() - t_mod, 1)
    forkexec = build_forkexec(log=log)
    _build_guest_initrd(root, kver, tmp / "guest-initrd.img", log, lockmod, forkexec)
    gdir = root / "var/lib/schedlab/guest"
    gdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(tmp / "guest-vmlinuz", gdir / "vmlinuz")
    shutil.copy(tmp / "guest-initrd.img", gdir / "initrd.img")
    # Package manifest (what is in dom0), then slim the tree.
    manifest = _run(["chroot", root, "dpkg-query", "-W", "-f", "${Package} ${Version}\n"]).stdout
    (tmp / "packages.txt").write_text(manifest)
    times["configure+guest"] = round(time.monotonic() - t1, 1)

    t2 = time.monotonic()
    img = tmp / "disk.img"
    used = rootfs.make_disk(root, img, label="schedlab-dom0", extra_mb=512, slack=1.3)
    times["mkfs.ext4"] = round(time.monotonic() - t2, 1)

    pkgs = dict(line.split(" ", 1) for line in manifest.splitlines() if " " in line)
    meta = {
        "suite": SUITE,
        "mirror": MIRROR,
        "kernel": kver,
        "versions": {
            p: pkgs.get(p)
            for p in [
                "xen-utils-4.17",
                "linux-image-" + kver,
                "openssh-server",
                "busybox",
                "iperf3",
                "sockperf",
                "sysbench",
            ]
        },
        "sha256": {
            n: sha256_file(tmp / n)
            for n in ("vmlinuz", "initrd.img", "guest-vmlinuz", "guest-initrd.img", "packages.txt")
        },
        "lockmod": json.loads((lockmod.parent / "meta.json").read_text()),
        "forkexec": json.loads((forkexec.parent / "meta.json").read_text()),
        "sizes_bytes": {
            "rootfs_tree": used,
            "disk.img": img.stat().st_size,
            "disk.img_allocated": img.stat().st_blocks * 512,
            **{n: (tmp / n).stat().st_size for n in ("vmlinuz", "initrd.img", "guest-initrd.img")},
        },
        "build_seconds": times,
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    if not keep_rootfs:
        shutil.rmtree(root)
    return _finish(tmp, final)


# -- Xen from source (patched variants) --------------------------------------------------------
PATCH_DIR = REPO / "xen-patches"


def series_patches(series: str) -> list[Path]:
    """The patch files of a series name: xen-patches/<series>/*.patch in name order; a name
    "a+b" is series a's patches then series b's (e.g. S0's "yield-noop+pick": pick without
    a working yield), so no patch file is copied between series. Raises FileNotFoundError
    naming the directory of a part with no patches."""
    out: list[Path] = []
    for part in series.split("+"):
        d = PATCH_DIR / part
        found = sorted(d.glob("*.patch")) if part else []
        if not found:
            raise FileNotFoundError(f"patch series {series!r}: no patches in {d}")
        out += found
    return out


# Build identity strings compiled into Xen: fixed, so the binary doesn't name this machine.
XEN_MAKE_VARS = {
    "XEN_WHOAMI": "schedlab",
    "XEN_DOMAIN": "schedlab",
    "XEN_BUILD_HOST": "schedlab",
    "XEN_BUILD_DATE": "schedlab",
    "XEN_BUILD_TIME": "00:00:00",
}


def build_xen(
    variant_patches: list[Path] | str | None = None,
    *,
    version: str | None = None,
    build: bool = True,
    log: Log | None = _stderr,
) -> Path:
    """Build the hypervisor from Debian's xen source package plus `variant_patches`.

    variant_patches: a list of patch files, or a series name (directory under xen-patches/
    holding *.patch, applied in name order; "a+b" applies series a then b, see
    series_patches), or None/"stock" for no patches. The cache key is
    the hash of the source package version and the patch contents. Returns the path of the
    multiboot `xen` binary. Needs deb-src for bookworm and the build deps (gcc, make, python3,
    bison, flex); CONFIG_XEN_SHSTK/IBT are switched off so it boots under TCG.
    """
    if variant_patches in (None, "stock"):
        patches: list[Path] = []
    elif isinstance(variant_patches, str):
        patches = series_patches(variant_patches)
    else:
        patches = [Path(p) for p in variant_patches]
    if version is None:  # the version dom0's tools come from, so hypervisor and tools match
        try:
            version = rootfs_xen_version(ensure_rootfs(build=False, log=None))
        except FileNotFoundError:
            version = debian_source_version(XEN_SOURCE_PACKAGE, log=log)
    deb_cfg = cache_root() / "xen" / xen_stock_key(version) / "xen.config"
    key = _key(
        {
            "recipe": RECIPE_VERSION,
            "what": "xen-src",
            "version": version,
            "patches": [hashlib.sha256(p.read_bytes()).hexdigest() for p in patches],
            "base_config": hashlib.sha256(deb_cfg.read_bytes()).hexdigest() if deb_cfg.exists() else "defconfig",
            "config": {"XEN_SHSTK": "n", "XEN_IBT": "n"},
            "make": XEN_MAKE_VARS,
        }
    )
    final = cache_root() / "xen-src" / key
    if (final / "meta.json").exists():
        return final / "xen"
    if not build:
        raise FileNotFoundError(f"Xen source build not cached: {final}")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=final.parent))
    t0 = time.monotonic()
    apt_source(XEN_SOURCE_PACKAGE, version, tmp, log=log)
    src = next(p for p in tmp.iterdir() if p.is_dir() and p.name.startswith("xen-"))
    for p in patches:
        _run(["patch", "-p1", "--forward", "-i", p.resolve()], log, cwd=src)
    # Debian's own config (from the binary package of the same version) as the base, minus
    # shadow stacks/IBT; Xen's defconfig if that isn't available.
    cfg = src / "xen" / ".config"
    if deb_cfg.exists():
        shutil.copy(deb_cfg, cfg)
    else:
        _run(["make", "-C", "xen", "defconfig"], log, cwd=src)
    text = cfg.read_text().replace("CONFIG_XEN_SHSTK=y", "# CONFIG_XEN_SHSTK is not set")
    text = text.replace("CONFIG_XEN_IBT=y", "# CONFIG_XEN_IBT is not set")
    cfg.write_text(text)
    _run(["make", "-C", "xen", "olddefconfig"], log, cwd=src)
    _run(
        _nice(
            [
                "make",
                "-C",
                "xen",
                f"-j{os.cpu_count() or 2}",
                *[f"{k}={v}" for k, v in XEN_MAKE_VARS.items()],
                f"XEN_VENDORVERSION=-schedlab-{key[:8]}",
            ]
        ),
        log,
        cwd=src,
    )
    shutil.copy(src / "xen" / "xen", tmp / "xen")
    shutil.copy(cfg, tmp / "xen.config")
    meta = {
        "source": "debian-source",
        "package": XEN_SOURCE_PACKAGE,
        "version": version,
        "patches": [p.name for p in patches],
        "base_config": "debian" if deb_cfg.exists() else "defconfig",
        "sha256": sha256_file(tmp / "xen"),
        "build_seconds": round(time.monotonic() - t0, 1),
    }
    shutil.rmtree(src)
    for p in tmp.glob("xen_*"):
        p.unlink()
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return _finish(tmp, final) / "xen"


def xen_build_id(blob: bytes) -> str | None:
    """The GNU build-id note (hex) of a Xen ELF image, as `xl info` reports it."""
    m = re.search(rb"\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00(.{20})", blob, re.S)
    return m.group(1).hex() if m else None


# -- all together ------------------------------------------------------------------------------
@dataclass
class Images:
    xen_dir: Path
    dom0_dir: Path

    @property
    def xen(self) -> Path:
        return self.xen_dir / "xen"

    @property
    def kernel(self) -> Path:
        return self.dom0_dir / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.dom0_dir / "initrd.img"

    @property
    def disk(self) -> Path:
        return self.dom0_dir / "disk.img"

    @property
    def identity(self) -> Path:
        return self.dom0_dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.dom0_dir / "known_hosts"

    @property
    def xen_meta(self) -> dict:
        return json.loads((self.xen_dir / "meta.json").read_text())

    @property
    def dom0_meta(self) -> dict:
        return json.loads((self.dom0_dir / "meta.json").read_text())

    def build_id(self) -> str:
        """Hash of what actually runs: Xen binary, kernels, initramfses, dom0 package list.
        (Not disk.img itself: mkfs output carries UUIDs/timestamps.)"""
        d = self.dom0_meta["sha256"]
        return _key({"xen": self.xen_meta["sha256"], **d})


def ensure_images(*, build: bool = True, log: Log | None = _stderr, xen_dir: Path | None = None) -> Images:
    """Xen (same Debian version as dom0's xen-utils) + dom0/guest images; builds what's missing."""
    dom0 = ensure_dom0(build=build, log=log)
    version = rootfs_xen_version(ensure_rootfs(build=False, log=log))
    return Images(xen_dir or ensure_xen_stock(version, build=build, log=log), dom0)


def images_cached() -> bool:
    try:
        ensure_images(build=False, log=None)
        return True
    except FileNotFoundError:
        return False


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="Build (or locate) the qemu testbed's cached images.")
    ap.add_argument(
        "what", nargs="?", default="all", choices=["all", "xen", "rootfs", "dom0", "xen-src", "lockmod", "paths"]
    )
    ap.add_argument("--patches", default="stock", help="patch series for xen-src")
    a = ap.parse_args(argv)
    if a.what == "xen":
        print(ensure_xen_stock(rootfs_xen_version(ensure_rootfs())))
    elif a.what == "rootfs":
        print(ensure_rootfs())
    elif a.what == "dom0":
        print(ensure_dom0())
    elif a.what == "xen-src":
        print(build_xen(a.patches))
    elif a.what == "lockmod":
        base = ensure_rootfs()
        kver = sorted(p.name for p in (base / "rootfs/lib/modules").iterdir())[-1]
        version = _run(
            ["dpkg-query", "--admindir", base / "rootfs/var/lib/dpkg", "-W", "-f", "${Version}", f"linux-image-{kver}"]
        ).stdout.strip()
        print(build_lockmod(kver, version))
    elif a.what == "paths":
        print(
            json.dumps(
                {
                    "xen": str(cache_root() / "xen" / "<key of version>"),
                    "rootfs": str(cache_root() / "rootfs" / rootfs_key()),
                    "dom0": str(cache_root() / "dom0" / dom0_key()),
                },
                indent=2,
            )
        )
    else:
        im = ensure_images()
        print(json.dumps({"xen": str(im.xen), "dom0": str(im.dom0_dir), "build_id": im.build_id()}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
