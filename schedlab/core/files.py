"""Derived files (manifests, tables, build descriptions, host state) are replaced atomically:
a reader sees the old file or the new one, never half of one. Raw records have their own,
stricter writer (schedlab.store: never replaced at all). Built artifacts live outside the
repository, under one cache root ($SCHEDLAB_CACHE)."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from schedlab.core.inputs import InputError, read_input


def cache_root() -> Path:
    """$SCHEDLAB_CACHE, default ~/.cache/schedlab: the one root of what is built and cached
    outside the repository (qemu/ images, kernel/ builds, builds/lab/, lab/ host state)."""
    base = os.environ.get("SCHEDLAB_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "schedlab")
    return Path(base)


def cache_relative(p: Path | str) -> str | None:
    """A path under the cache root as `$SCHEDLAB_CACHE/...` (what records and build
    descriptions keep: no path of this machine), or None for a path outside it."""
    try:
        return "$SCHEDLAB_CACHE/" + str(Path(p).resolve().relative_to(cache_root().resolve()))
    except ValueError:
        return None


def atomic_write(path: Path | str, data: str | bytes) -> Path:
    """Write `data` to `path` through a temporary file in the same folder and a rename.
    Only a regular file is replaced: never a folder, a device, a FIFO or a symbolic link."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise FileExistsError(17, "exists and is not a regular file; not replaced", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_output(
    name: str,
    option: str,
    never_under: Iterable[Path | str] = (),
    is_own: Callable[[bytes], bool] | None = None,
) -> Path:
    """A file the user named for an output (`option`, e.g. --manifest): a new path, or this
    command's own earlier output (a regular file, not a link, that `is_own` recognises from
    its bytes). Never a place under `never_under` (raw data), never a folder, device or FIFO,
    never an unrelated file. InputError (one line) otherwise."""
    if not name:
        raise InputError(f"{option}: empty path (name the file to write)")
    path = Path(name)
    real = Path(os.path.realpath(path))
    for folder in never_under:
        top = Path(os.path.realpath(folder))
        if real == top or top in real.parents:
            raise InputError(f"{option} {name}: inside {folder}, which only raw records are written to")
    for q in path.parents:
        if q.exists():
            if not q.is_dir():
                raise InputError(f"{option} {name}: {q} is not a directory")
            break
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as e:
        raise InputError(f"{option} {name}: {e.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise InputError(f"{option} {name}: a symbolic link; not replaced (name a new path)")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{option} {name}: exists and is not a regular file; not replaced")
    try:
        ours = is_own is not None and is_own(read_input(path, 64 << 20, folder=path.parent))
    except InputError:
        ours = False
    if not ours:
        raise InputError(f"{option} {name}: exists and is not an earlier output of this command; not replaced")
    return path
