"""Lab builds: what the lab driver installs on a host, one folder per variant build.

    python -m schedlab.builds.lab make --study STUDY [--variant V] [--out DIR] [--stock debian|source]
                                       [--manifest build/lab/STUDY.json]
    python -m schedlab.builds.lab show --study STUDY

A build folder is <builds dir>/<build name>/ (build name: LabTestbed.build_name,
`xen-<patch series>_kernel-<kernel config>`; builds dir: $SCHEDLAB_LAB_BUILDS, default
$SCHEDLAB_CACHE/builds/lab):

    xen.gz       the hypervisor, gzip -9n of the multiboot image
    vmlinuz      the dom0 kernel
    initrd.img   the dom0 initramfs
    build.json   {"files": {...}, "xen_cmdline": "", "dom0_cmdline": "", "expect": {...}, "source": {...}}

They are made from what the qemu testbed built and cached (schedlab.builds.images):
`patches: stock` is Debian's prebuilt xen-hypervisor-4.17-amd64 at the version of dom0's
xen-utils (`--stock source`: the unpatched source build instead), any other series is
the source build of xen-patches/<series>/ (`python -m schedlab.builds.images
xen-src --patches <series>`, or the Snakemake rule qemu_xen_src); kernel config `default`
is the dom0 kernel and initramfs of the qemu testbed's dom0 image.

`expect` is what the driver's verify step requires of the booted host (`xl info`,
`uname -r`): xen_version (major.minor + the extraversion string compiled into that
binary, as `xl info` truncates it), build_id (the GNU build-id note of that binary,
which Xen reports) and kernel_release. The build id the driver uses is a hash of the
files and command lines (schedlab.lab.driver.Build), so a rebuilt binary is a new build.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedlab.core.files import atomic_write, cache_relative, cache_root
from schedlab.host import sha256_file

BUILD_ID = re.compile(r"^[0-9a-f]{16,64}$")


@dataclass
class Build:
    """A Xen + dom0 kernel build as the pipeline made it.

    files:   name on the host -> local path ('xen.gz', 'vmlinuz', optional 'initrd.img')
    xen_cmdline / dom0_cmdline: the variant's options (the host's own are added)
    expect:  what `xl info` / `uname -r` must say once it booted: xen_version,
             xen_changeset, build_id (Xen's GNU build-id), kernel_release,
             xen_scheduler (any subset)
    """

    files: dict[str, Path]
    xen_cmdline: str = ""
    dom0_cmdline: str = ""
    expect: dict[str, str] = field(default_factory=dict)
    build_id: str = ""

    def __post_init__(self):
        self.files = {k: Path(v) for k, v in self.files.items()}
        for need in ("xen.gz", "vmlinuz"):
            if need not in self.files:
                raise ValueError(f"build has no {need}")
        for name in self.files:
            if not re.match(r"^[A-Za-z0-9_.+-]{1,64}$", name):
                raise ValueError(f"build file name {name!r} not allowed")
        for what, line in (("xen_cmdline", self.xen_cmdline), ("dom0_cmdline", self.dom0_cmdline)):
            if not re.match(r"^[A-Za-z0-9_.,=:/@%+ -]*$", line):
                raise ValueError(f"{what} {line!r}: only letters, digits, spaces and _ . , = : / @ % + -")
        self.sha256 = {k: sha256_file(p) for k, p in sorted(self.files.items())}
        computed = hashlib.sha256(
            json.dumps(
                {"files": self.sha256, "xen_cmdline": self.xen_cmdline, "dom0_cmdline": self.dom0_cmdline},
                sort_keys=True,
            ).encode()
        ).hexdigest()[:16]
        if not self.build_id:
            self.build_id = computed
        if not BUILD_ID.match(self.build_id):
            raise ValueError(f"build id {self.build_id!r}: 16-64 lower-case hex digits")

    @classmethod
    def from_dir(cls, path: Path) -> Build:
        """A build folder with build.json: {"files": {"xen.gz": "xen.gz", ...},
        "xen_cmdline": ..., "dom0_cmdline": ..., "expect": {...}} (paths relative to it)."""
        path = Path(path)
        meta = json.loads((path / "build.json").read_text())
        return cls(
            files={k: path / v for k, v in meta["files"].items()},
            xen_cmdline=meta.get("xen_cmdline", ""),
            dom0_cmdline=meta.get("dom0_cmdline", ""),
            expect=meta.get("expect", {}),
            build_id=meta.get("build_id", ""),
        )

    def describe(self) -> dict:
        return {
            "build_id": self.build_id,
            "sha256": self.sha256,
            "xen_cmdline": self.xen_cmdline,
            "dom0_cmdline": self.dom0_cmdline,
            "expect": self.expect,
        }


MADE_BY = "schedlab.builds.lab"
BUILD_FORMAT = 1


def default_builds_dir() -> Path:
    return Path(os.environ.get("SCHEDLAB_LAB_BUILDS") or cache_root() / "builds" / "lab")


def build_name(study: dict, variant: str) -> str:
    """xen-<patches>_kernel-<config> (the variant's xen.patches, kernel.config)."""
    v = study["variants"].get(variant)
    if v is None:
        raise KeyError(f"study {study.get('study')!r} has no variant {variant!r}")
    return (
        f"xen-{(v.get('xen') or {}).get('patches', 'stock')}_kernel-{(v.get('kernel') or {}).get('config', 'default')}"
    )


# --- what the booted host must report ------------------------------------------------------------


def xen_identity(xen: bytes, version: str) -> dict[str, str]:
    """xen_version and build_id as `xl info` reports them for this hypervisor binary.

    version: the Debian version it was built from (e.g. 4.17.5+72-g01140da4e8-1); the
    extraversion (".5", ".5-schedlab-2f9d0c74") is found in the binary: exactly one
    string there starts with the patch level."""
    from schedlab.builds.images import xen_build_id

    m = re.match(r"^(?:\d+:)?(\d+)\.(\d+)\.(\d+)", version)
    if not m:
        raise ValueError(f"cannot read the Xen version from {version!r}")
    major, minor, patch = m.groups()
    cands = sorted(
        {c.decode() for c in re.findall(rb"\x00(\." + patch.encode() + rb"(?:[-+~][A-Za-z0-9_.+~-]*)?)\x00", xen)}
    )
    if len(cands) != 1:
        raise ValueError(f"Xen {version}: cannot tell its extraversion (candidates in the binary: {cands})")
    bid = xen_build_id(xen)
    if not bid:
        raise ValueError(f"Xen {version}: no GNU build-id note in the binary")
    # XENVER_extraversion is a char[16]: `xl info` shows at most 15 characters of it
    return {"xen_version": f"{major}.{minor}{cands[0][:15]}", "build_id": bid}


# --- where the pieces come from --------------------------------------------------------------------


def xen_source(series: str, stock: str = "debian") -> tuple[Path, dict]:
    """(hypervisor binary, its meta.json) for a patch series, from the qemu testbed's cache."""
    from schedlab.builds import images as qi

    if series == "stock" and stock == "debian":
        try:
            xen_dir = qi.ensure_images(build=False, log=None).xen_dir
        except FileNotFoundError as e:
            raise FileNotFoundError(
                f"Debian's Xen / the dom0 image are not built ({e}); python -m schedlab.builds.images"
            ) from e
        return xen_dir / "xen", json.loads((xen_dir / "meta.json").read_text())
    if stock not in ("debian", "source"):
        raise ValueError(f"--stock {stock!r}: debian or source")
    try:
        xen = qi.build_xen(series, build=False, log=None)
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"Xen patch series {series!r} is not built ({e}); "
            f"python -m schedlab.builds.images xen-src --patches {series}"
        ) from e
    return xen, json.loads((xen.parent / "meta.json").read_text())


def kernel_source(config: str) -> tuple[Path, Path, dict]:
    """(vmlinuz, initrd.img, meta) of a dom0 kernel configuration."""
    from schedlab.builds import images as qi

    if config != "default":
        raise ValueError(
            f"kernel config {config!r}: lab builds exist for `default` (the qemu testbed's dom0 kernel) only"
        )
    try:
        d = qi.ensure_dom0(build=False, log=None)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"the dom0 image is not built ({e}); python -m schedlab.builds.images") from e
    return d / "vmlinuz", d / "initrd.img", json.loads((d / "meta.json").read_text())


def _cache_rel(p: Path) -> str:
    """A cache path as $SCHEDLAB_CACHE/...: build.json names no absolute path of this machine."""
    return cache_relative(p) or Path(p).name


# --- making one build --------------------------------------------------------------------------


def make_build(
    study: dict,
    variant: str,
    out: Path | None = None,
    *,
    stock: str = "debian",
    kernel: tuple[Path, Path, str] | None = None,
    log=None,
) -> tuple[Path, bool]:
    """Write <out>/<build name>/ for the variant (atomically). Returns (folder, changed):
    an existing folder with the same content is left alone.

    kernel: (vmlinuz, initrd.img, release) of the hosts' own dom0 kernel instead of the
    qemu testbed's (whose busybox initramfs only knows virtio disks: it boots the
    virtual host, not a server)."""
    out = Path(out or default_builds_dir())
    v = study["variants"][variant]
    series = (v.get("xen") or {}).get("patches", "stock")
    kconfig = (v.get("kernel") or {}).get("config", "default")
    name = build_name(study, variant)
    xen, xmeta = xen_source(series, stock)
    if kernel is not None:
        vmlinuz, initrd, release = Path(kernel[0]), Path(kernel[1]), kernel[2]
        kmeta = {
            "kernel": release,
            "sha256": {"vmlinuz": sha256_file(vmlinuz), "initrd.img": sha256_file(initrd)},
            "from": "given",
        }
    else:
        vmlinuz, initrd, kmeta = kernel_source(kconfig)
    blob = xen.read_bytes()
    expect = {**xen_identity(blob, xmeta["version"]), "kernel_release": kmeta["kernel"]}
    xen_gz = gzip.compress(blob, compresslevel=9, mtime=0)
    meta: dict[str, Any] = {
        "format": BUILD_FORMAT,
        "name": name,
        "made_by": MADE_BY,
        "files": {"xen.gz": "xen.gz", "vmlinuz": "vmlinuz", "initrd.img": "initrd.img"},
        "xen_cmdline": "",
        "dom0_cmdline": "",
        "expect": expect,
        "source": {
            "xen": {
                "patches": series,
                "from": xmeta.get("source"),
                "package": xmeta.get("package"),
                "version": xmeta.get("version"),
                "patch_files": xmeta.get("patches", []),
                "sha256": xmeta.get("sha256"),
                "cache": _cache_rel(xen.parent),
            },
            "kernel": {
                "config": kconfig,
                "release": kmeta["kernel"],
                "from": kmeta.get("from", "qemu-dom0"),
                "cache": _cache_rel(vmlinuz.parent),
                "sha256": {k: kmeta.get("sha256", {}).get(k) for k in ("vmlinuz", "initrd.img")},
            },
        },
    }
    if xmeta.get("sha256") and xmeta["sha256"] != sha256_file(xen):
        raise RuntimeError(f"{xen}: sha256 differs from its meta.json: the cache is damaged")
    final = out / name
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=out))
    os.chmod(tmp, 0o755)
    try:
        (tmp / "xen.gz").write_bytes(xen_gz)
        shutil.copyfile(vmlinuz, tmp / "vmlinuz")
        shutil.copyfile(initrd, tmp / "initrd.img")
        meta["sha256"] = {n: sha256_file(tmp / n) for n in sorted(meta["files"])}
        if (final / "build.json").exists():
            old = json.loads((final / "build.json").read_text())
            same = {k: v for k, v in old.items() if k != "made"} == meta and all(
                (final / n).exists() and sha256_file(final / n) == h for n, h in meta["sha256"].items()
            )
            if same:
                shutil.rmtree(tmp)
                return final, False
        meta["made"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        (tmp / "build.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        if final.exists():
            old = out / f".old-{name}-{os.getpid()}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if log:
        log(
            f"lab build {name}: {final} (xen {expect['xen_version']} build-id {expect['build_id'][:12]}, "
            f"kernel {expect['kernel_release']})"
        )
    return final, True


def variant_build(builds_dir: Path, study: dict, variant: str, scheduler: str = "credit"):
    """The driver's Build for a variant: the build folder plus the variant's Xen boot
    options (`xen.boot`), `sched=<scheduler>`, and the variant's dom0 `kernel.cmdline`."""
    folder = Path(builds_dir) / build_name(study, variant)
    if not (folder / "build.json").exists():
        raise FileNotFoundError(folder)
    b = Build.from_dir(folder)
    v = study["variants"][variant]
    boot = (v.get("xen") or {}).get("boot") or {}
    xen = " ".join(
        p for p in (b.xen_cmdline, f"sched={scheduler}", *(f"{k}={val}" for k, val in sorted(boot.items()))) if p
    )
    dom0 = " ".join(p for p in (b.dom0_cmdline, (v.get("kernel") or {}).get("cmdline", "")) if p)
    expect = {**b.expect, "xen_scheduler": scheduler}
    return Build(files=b.files, xen_cmdline=xen, dom0_cmdline=dom0, expect=expect)


def manifest(builds_dir: Path, study: dict, scheduler: str = "credit") -> dict:
    """{variant: {name, build_id, expect, source}} of a study's builds (for build/lab/<study>.json)."""
    out = {}
    for variant in study["variants"]:
        folder = Path(builds_dir) / build_name(study, variant)
        meta = json.loads((folder / "build.json").read_text())
        b = variant_build(builds_dir, study, variant, scheduler)
        out[variant] = {
            "name": folder.name,
            "build_id": b.build_id,
            "expect": b.expect,
            "xen_cmdline": b.xen_cmdline,
            "dom0_cmdline": b.dom0_cmdline,
            "sha256": meta["sha256"],
            "source": meta["source"],
        }
    return {"study": study["study"], "builds": out}


def main(argv: list[str] | None = None) -> int:
    from schedlab import config

    ap = argparse.ArgumentParser(prog="python -m schedlab.builds.lab", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make", help="make the lab builds of a study's variants")
    sh = sub.add_parser("show", help="print the builds of a study (build ids as the driver installs them)")
    for p in (mk, sh):
        p.add_argument("--study", required=True, help="study name or file (NAME, config/studies/NAME.yaml)")
        p.add_argument(
            "--out",
            type=Path,
            default=None,
            help="builds dir (default $SCHEDLAB_LAB_BUILDS or $SCHEDLAB_CACHE/builds/lab)",
        )
        p.add_argument("--scheduler", default="credit")
    mk.add_argument("--variant", action="append", help="only this variant (repeatable)")
    mk.add_argument(
        "--stock",
        choices=["debian", "source"],
        default="debian",
        help="patches: stock from Debian's prebuilt package (default) or the unpatched source build",
    )
    mk.add_argument("--manifest", type=Path, help="also write the study's build manifest (JSON) here")
    mk.add_argument(
        "--vmlinuz",
        type=Path,
        help="the hosts' own dom0 kernel (with --initrd, --kernel-release) instead of the qemu testbed's",
    )
    mk.add_argument("--initrd", type=Path)
    mk.add_argument("--kernel-release", help="what `uname -r` says when that kernel runs")
    a = ap.parse_args(argv)
    study = config.load_study(a.study)
    out = a.out or default_builds_dir()
    if a.cmd == "make":
        kernel = None
        if a.vmlinuz or a.initrd or a.kernel_release:
            if not (a.vmlinuz and a.initrd and a.kernel_release):
                ap.error("--vmlinuz, --initrd and --kernel-release go together")
            kernel = (a.vmlinuz, a.initrd, a.kernel_release)
        for v in a.variant or list(study["variants"]):
            try:
                folder, changed = make_build(study, v, out, stock=a.stock, kernel=kernel)
            except (FileNotFoundError, ValueError) as e:
                print(f"lab build of {study['study']}/{v}: {e}", file=sys.stderr)
                return 1
            print(f"{v}: {folder} ({'made' if changed else 'up to date'})", file=sys.stderr)
    m = manifest(out, study, a.scheduler) if a.cmd == "show" or a.manifest else None
    if a.cmd == "show":
        print(json.dumps(m, indent=1))
    if a.cmd == "make" and a.manifest:
        atomic_write(a.manifest, json.dumps(m, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
