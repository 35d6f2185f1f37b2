"""Linux kernels built from Debian's linux-source-6.1, one per kernel config name.

    python -m schedlab.builds.kernel pvspin-y [--json]     # build (or find) and print the bzImage
    python -m schedlab.builds.kernel pvspin-y --no-build   # only look in the cache

Recipe (docs/kernel-builds.md):

  1. unpack /usr/src/linux-source-6.1.tar.xz (package linux-source-6.1)
  2. make ARCH=x86_64 tinyconfig
  3. scripts/kconfig/merge_config.sh -m .config config/kernel/base.config config/kernel/<name>.config
  4. make ARCH=x86_64 olddefconfig
  5. check that every option of the merged fragments has the value asked for in .config
     (an option Kconfig dropped, e.g. for an unmet dependency, fails the build, named)
  6. make ARCH=x86_64 -jN bzImage, with fixed KBUILD_BUILD_* (no host name or date in the
     kernel) and LOCALVERSION=-schedlab-<key8> (uname -r names the build)

Cache: $SCHEDLAB_CACHE/kernel/<key>/ (default ~/.cache/schedlab/kernel) holding bzImage,
.config, build.log and meta.json; <key> hashes the source package version, the tarball's
sha256, the merged fragments, and this recipe. The entry is built in a temporary directory
next to it and renamed into place (os.replace), so a killed build leaves no half entry
(its temporary directory is removed by the next build).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from schedlab.builds.steps import Log
from schedlab.builds.steps import stderr_log as _stderr
from schedlab.core import files
from schedlab.core.recipes import code_sha256
from schedlab.host import sha256_file

RECIPE_VERSION = 1
PACKAGE = "linux-source-6.1"
TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
ARCH = "x86_64"
REPO = Path(__file__).resolve().parents[2]
FRAGMENT_DIR = REPO / "config" / "kernel"
BASE_FRAGMENT = "base.config"
# Fixed build identity: the kernel names neither this machine nor the build date.
MAKE_VARS = {
    "KBUILD_BUILD_USER": "schedlab",
    "KBUILD_BUILD_HOST": "schedlab",
    "KBUILD_BUILD_TIMESTAMP": "Sat Nov 21 00:00:00 UTC 2026",
    "KBUILD_BUILD_VERSION": "1",
}
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


class KernelBuildError(Exception):
    """The kernel cannot be built: missing package, bad fragment, an option that did not stick."""


def cache_root() -> Path:
    """$SCHEDLAB_CACHE/kernel (default ~/.cache/schedlab/kernel)."""
    return files.cache_root() / "kernel"


# -- fragments ---------------------------------------------------------------------------------
_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set\s*$")


def parse_config(text: str) -> dict[str, str]:
    """Kconfig text (.config or a fragment) -> {CONFIG_X: value}; 'is not set' and =n give 'n'."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        m = _SET.match(line)
        if m:
            out[m.group(1)] = m.group(2)
            continue
        m = _UNSET.match(line)
        if m:
            out[m.group(1)] = "n"
    return out


def fragment_paths(name: str, fragment_dir: Path | None = None) -> list[Path]:
    """base.config then <name>.config; KernelBuildError if a name or file is bad."""
    d = Path(fragment_dir) if fragment_dir else FRAGMENT_DIR
    if not NAME_RE.match(name) or name == "base":
        raise KernelBuildError(
            f"kernel config name {name!r}: expected lower-case letters, digits, _ . - (and not 'base')"
        )
    paths = [d / BASE_FRAGMENT, d / f"{name}.config"]
    for p in paths:
        if not p.is_file():
            known = sorted(q.stem for q in d.glob("*.config") if q.name != BASE_FRAGMENT)
            raise KernelBuildError(f"kernel config {name!r}: no fragment {p} (known: {', '.join(known)})")
    return paths


def merged_fragments(paths: list[Path]) -> dict[str, str]:
    """What the fragments ask for, later fragments overriding earlier ones (like merge_config.sh).
    A line that is neither an option, a comment nor blank is an error (with file and line)."""
    want: dict[str, str] = {}
    for p in paths:
        for i, line in enumerate(Path(p).read_text().splitlines(), 1):
            s = line.strip()
            if not s or (s.startswith("#") and not _UNSET.match(s)):
                continue
            got = parse_config(s)
            if not got:
                raise KernelBuildError(f"{p}:{i}: not a Kconfig line: {line!r}")
            want.update(got)
    return want


def _norm(v: str | None) -> str:
    if v is None:
        return "n"
    return v


def check_config(want: dict[str, str], config_text: str) -> list[str]:
    """Options whose value in the final .config differs from what the fragments asked for.
    An option asked to be n may be absent (Kconfig omits invisible symbols)."""
    have = parse_config(config_text)
    problems = []
    for opt, v in sorted(want.items()):
        got = _norm(have.get(opt))
        if v == "n":
            if got not in ("n", ""):
                problems.append(f"{opt}: asked for n, .config has {got}")
        elif got != v:
            problems.append(
                f"{opt}: asked for {v}, .config has " + ("it unset" if opt not in have or got == "n" else got)
            )
    return problems


# -- source ------------------------------------------------------------------------------------
def source_version() -> str:
    """Version of the installed linux-source-6.1 package ('' if dpkg does not know it)."""
    try:
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", PACKAGE], capture_output=True, text=True)
    except OSError:
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def ensure_source(*, install: bool = True, log: Log | None = _stderr) -> Path:
    """The tarball; installs the package with apt-get when missing and we are root."""
    if TARBALL.is_file():
        return TARBALL
    if install and os.geteuid() == 0 and shutil.which("apt-get"):
        if log:
            log(f"kernel: {TARBALL} missing; apt-get install {PACKAGE}")
        r = subprocess.run(
            ["apt-get", "install", "-y", "--no-install-recommends", PACKAGE],
            capture_output=True,
            text=True,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        if r.returncode == 0 and TARBALL.is_file():
            return TARBALL
        raise KernelBuildError(f"apt-get install {PACKAGE} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    raise KernelBuildError(
        f"{TARBALL} not found: install the Debian package {PACKAGE} (apt-get install {PACKAGE}, as root)"
    )


_TARBALL_SHA: dict[tuple, str] = {}


def tarball_sha256(path: Path = TARBALL) -> str:
    st = path.stat()
    k = (str(path), st.st_size, st.st_mtime_ns)
    if k not in _TARBALL_SHA:
        _TARBALL_SHA[k] = sha256_file(path)
    return _TARBALL_SHA[k]


# -- the build ---------------------------------------------------------------------------------
def _recipe_code() -> str:
    """The code that turns the inputs into a kernel (editing docs or the CLI does not rebuild)."""
    return code_sha256(_build, make_argv, _configure, check_config, parse_config)


def build_key(name: str, *, fragment_dir: Path | None = None, tarball: Path = TARBALL) -> str:
    paths = fragment_paths(name, fragment_dir)
    blob = {
        "recipe": RECIPE_VERSION,
        "code": _recipe_code(),
        "package": PACKAGE,
        "version": source_version(),
        "tarball_sha256": tarball_sha256(tarball),
        "arch": ARCH,
        "fragments": [[p.name, hashlib.sha256(p.read_bytes()).hexdigest()] for p in paths],
        "merged": merged_fragments(paths),
        "make_vars": MAKE_VARS,
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def make_argv(src: Path, key: str, *targets: str, jobs: int | None = None) -> list[str]:
    argv = [
        "nice",
        "-n",
        "10",
        "make",
        "-C",
        str(src),
        f"ARCH={ARCH}",
        *[f"{k}={v}" for k, v in MAKE_VARS.items()],
        f"LOCALVERSION=-schedlab-{key[:8]}",
    ]
    if jobs:
        argv.append(f"-j{jobs}")
    return argv + list(targets)


def _run(argv, logf, cwd=None, env=None) -> None:
    logf.write(f"$ {' '.join(map(str, argv))}\n")
    logf.flush()
    r = subprocess.run(
        [str(a) for a in argv], cwd=cwd, stdout=logf, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL
    )
    if r.returncode != 0:
        raise KernelBuildError(f"command failed ({r.returncode}): {' '.join(map(str, argv))}")


def _configure(src: Path, key: str, paths: list[Path], logf) -> dict[str, str]:
    """tinyconfig + merge_config.sh -m (fragments) + olddefconfig, then the check."""
    env = {**os.environ, "ARCH": ARCH}
    _run(make_argv(src, key, "tinyconfig"), logf, env=env)
    _run(
        [
            "sh",
            str(src / "scripts/kconfig/merge_config.sh"),
            "-m",
            "-O",
            str(src),
            str(src / ".config"),
            *map(str, paths),
        ],
        logf,
        cwd=src,
        env=env,
    )
    _run(make_argv(src, key, "olddefconfig"), logf, env=env)
    want = merged_fragments(paths)
    problems = check_config(want, (src / ".config").read_text())
    if problems:
        raise KernelBuildError(
            "after olddefconfig these options are not what the fragments ask for "
            f"({', '.join(p.name for p in paths)}): " + "; ".join(problems)
        )
    return want


def _build(name: str, key: str, tmp: Path, paths: list[Path], tarball: Path, jobs: int, log: Log | None) -> dict:
    src = tmp / "src"
    src.mkdir()
    times = {}
    with open(tmp / "build.log", "w") as logf:
        t0 = time.monotonic()
        _run(["nice", "-n", "10", "tar", "-xJf", tarball, "-C", src, "--strip-components=1"], logf)
        times["unpack"] = round(time.monotonic() - t0, 1)
        t1 = time.monotonic()
        want = _configure(src, key, paths, logf)
        times["configure"] = round(time.monotonic() - t1, 1)
        if log:
            log(
                f"kernel {name}: configured ({len(want)} options checked); make -j{jobs} bzImage "
                f"(log: {tmp / 'build.log'})"
            )
        t2 = time.monotonic()
        argv = make_argv(src, key, "bzImage", jobs=jobs)
        _run(argv, logf)
        times["make"] = round(time.monotonic() - t2, 1)
        release = subprocess.run(
            make_argv(src, key, "-s", "kernelrelease"), capture_output=True, text=True, check=True
        ).stdout.strip()
    compile_h = (src / "include/generated/compile.h").read_text()
    uts = re.search(r'#define UTS_VERSION "(.*)"', compile_h)
    shutil.copy(src / "arch/x86/boot/bzImage", tmp / "bzImage")
    shutil.copy(src / ".config", tmp / ".config")
    shutil.rmtree(src)
    return {
        "want": want,
        "times": times,
        "release": release,
        "uts_version": uts.group(1) if uts else "",
        "make_argv": argv,
    }


def banner(bzimage: Path) -> str:
    """The kernel's linux_banner ("Linux version R (user@host) (compiler) #1 SMP ...") from a
    gzip-compressed bzImage ('' if it cannot be found)."""
    import zlib

    data = Path(bzimage).read_bytes()
    start = 0
    while True:
        i = data.find(b"\x1f\x8b\x08", start)
        if i < 0:
            return ""
        try:
            out = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[i:])
        except zlib.error:
            start = i + 1
            continue
        m = re.search(rb"Linux version [^\n]*\n", out)
        if m:
            return m.group(0).decode(errors="replace").strip()
        start = i + 1


def uts_version_of(bzimage: Path) -> str:
    """UTS_VERSION (what `uname -v` prints) from the banner: the part from the last ') #'."""
    b = banner(bzimage)
    i = b.rfind(") #")
    return b[i + 2 :] if i >= 0 else ""


def _complete_meta(d: Path) -> None:
    """Fill in what older recipe runs did not record (uts_version: 6.1 moved UTS_VERSION out of
    compile.h), from the cached bzImage; rewritten atomically."""
    meta = json.loads((d / "meta.json").read_text())
    changed = False
    if not meta.get("uts_version"):
        meta["uts_version"] = uts_version_of(d / "bzImage")
        changed = bool(meta["uts_version"])
    if "banner" not in meta:
        meta["banner"] = banner(d / "bzImage")
        changed = True
    if changed:
        tmp = d / ".meta.json.tmp"
        tmp.write_text(json.dumps(meta, indent=2) + "\n")
        os.replace(tmp, d / "meta.json")


@dataclass
class Kernel:
    name: str
    dir: Path

    @property
    def bzimage(self) -> Path:
        return self.dir / "bzImage"

    @property
    def config(self) -> Path:
        return self.dir / ".config"

    @property
    def meta(self) -> dict:
        return json.loads((self.dir / "meta.json").read_text())

    @property
    def key(self) -> str:
        return self.dir.name

    def pointer(self) -> dict:
        m = self.meta
        return {
            "config": self.name,
            "hash": self.key,
            "path": str(self.bzimage),
            "dir": str(self.dir),
            "bzimage_sha256": m["bzimage_sha256"],
            "config_sha256": m["config_sha256"],
            "kernelrelease": m["kernelrelease"],
            "uts_version": m["uts_version"],
            "build_seconds": m["build_seconds"],
        }


def _sweep_stale(parent: Path) -> None:
    """Remove temporary build directories of builds that are no longer running."""
    for d in parent.glob("tmp-*"):
        m = re.match(r"tmp-(\d+)-", d.name)
        if not m:
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:
            pass


def build_kernel(
    name: str,
    *,
    build: bool = True,
    jobs: int | None = None,
    fragment_dir: Path | None = None,
    log: Log | None = _stderr,
) -> Kernel:
    """The cached kernel for config `name`, built first if missing (and build is true).
    Raises FileNotFoundError when it is not cached and build is false."""
    paths = fragment_paths(name, fragment_dir)
    tarball = ensure_source(install=build, log=log)
    key = build_key(name, fragment_dir=fragment_dir, tarball=tarball)
    final = cache_root() / key
    if (final / "meta.json").exists():
        _complete_meta(final)
        return Kernel(name, final)
    if not build:
        raise FileNotFoundError(f"kernel {name!r} not built: {final}")
    for tool in ("make", "gcc", "flex", "bison", "bc", "xz", "perl"):
        if not shutil.which(tool):
            raise KernelBuildError(
                f"{tool} not found: apt-get install make gcc libc6-dev flex bison bc "
                "libelf-dev libssl-dev xz-utils perl"
            )
    final.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale(final.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f"tmp-{os.getpid()}-", dir=final.parent))
    jobs = jobs or os.cpu_count() or 2
    t0 = time.monotonic()
    try:
        if log:
            log(f"kernel {name}: building {key} from {tarball} in {tmp}")
        res = _build(name, key, tmp, paths, tarball, jobs, log)
    except BaseException:
        # keep the log next to the cache for diagnosis; no half entry
        try:
            failed = final.parent / f"failed-{name}.log"
            shutil.copy(tmp / "build.log", failed)
            if log:
                log(f"kernel {name}: build failed; log kept in {failed}")
        except OSError:
            pass
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    seconds = round(time.monotonic() - t0, 1)
    meta = {
        "config": name,
        "key": key,
        "recipe": RECIPE_VERSION,
        "package": PACKAGE,
        "version": source_version(),
        "tarball": str(tarball),
        "tarball_sha256": tarball_sha256(tarball),
        "arch": ARCH,
        "fragments": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths},
        "options_checked": res["want"],
        "kernelrelease": res["release"],
        "uts_version": res["uts_version"],
        "config_sha256": sha256_file(tmp / ".config"),
        "bzimage_sha256": sha256_file(tmp / "bzImage"),
        "bzimage_bytes": (tmp / "bzImage").stat().st_size,
        "make_argv": res["make_argv"],
        "jobs": jobs,
        "cpus": os.cpu_count(),
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "gcc": subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[0],
        "build_seconds": seconds,
        "step_seconds": res["times"],
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    _complete_meta(tmp)
    if final.exists():  # another builder won the race
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        os.replace(tmp, final)
    if log:
        log(f"kernel {name}: built in {seconds:.0f} s ({seconds / 60:.1f} min): {final / 'bzImage'}")
    return Kernel(name, final)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m schedlab.builds.kernel",
        description="Build (or find in the cache) the kernel for one config name.",
    )
    ap.add_argument("config", help="kernel config name: config/kernel/<config>.config over base.config")
    ap.add_argument("--json", action="store_true", help="print a JSON pointer (path, hash, build time)")
    ap.add_argument("--no-build", action="store_true", help="only look in the cache (exit 1 if absent)")
    ap.add_argument("-j", "--jobs", type=int, default=None, help="make -j (default: all CPUs)")
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    try:
        k = build_kernel(a.config, build=not a.no_build, jobs=a.jobs)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KernelBuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    took = time.monotonic() - t0
    print(
        f"kernel {a.config}: {k.dir} (build {k.meta['build_seconds']:.0f} s; this request {took:.1f} s)",
        file=sys.stderr,
    )
    if a.json:
        print(json.dumps({**k.pointer(), "request_seconds": round(took, 1)}, indent=2))
    else:
        print(k.bzimage)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
