"""The steps every image build shares (the qemu testbed's images, the native image, the
virtual lab host's disk): run a command, logged, failing with its output; run it niced; a
recipe's key; finish a cached folder by a rename; a tree's size; a log to stderr.

The builds keep the names their recipes spell (`_run`, `_key`, ...) as local aliases of
these: a build's cache key hashes its code's syntax tree (schedlab.core.recipes), so a
renamed call would rebuild every image and give every record a new build id."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

Log = Callable[[str], None]


def stderr_log(msg: str) -> None:
    """The builds' default log: one line to stderr, flushed."""
    print(msg, file=sys.stderr, flush=True)


def recipe_key(obj) -> str:
    """A cache folder's name: 16 hex digits of the sha256 of its recipe (JSON, keys sorted)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def run(argv, log: Log | None = None, **kw) -> subprocess.CompletedProcess:
    """Run a command (an argument list, never a shell string) with its output captured; a
    non-zero exit raises RuntimeError with the command and the tails of its output."""
    if log:
        log("$ " + shlex.join(map(str, argv)))
    res = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kw)
    if res.returncode != 0:
        raise RuntimeError(
            f"command failed ({res.returncode}): {shlex.join(map(str, argv))}\n"
            f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        )
    return res


def niced(argv: list) -> list:
    """The command under `nice -n 10`: a build leaves the machine to the measurements."""
    return ["nice", "-n", "10", *argv]


def finish(tmp: Path, final: Path) -> Path:
    """Move a folder built in `tmp` to its cache place `final` by one rename; where another
    builder got there first, its folder stands and `tmp` is removed."""
    if final.exists():
        shutil.rmtree(tmp, ignore_errors=True)
        return final
    os.replace(tmp, final)
    return final


def dir_size(path: Path) -> int:
    """The apparent size of a tree in bytes (du -sb)."""
    return int(run(["du", "-sb", "--apparent-size", path]).stdout.split()[0])
