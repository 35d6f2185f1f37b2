"""Targets: where a benchmark pack's commands run.

A target has one small protocol, which the SSH `Host` (schedlab/host.py)
implements too, so a pack runs the same on this machine, in dom0, in a Xen
guest or on a natively booted lab kernel:

    name                                   a short label for logs and records
    run(argv, timeout, input=None, check=True) -> subprocess.CompletedProcess
                                           text mode, stdout/stderr captured;
                                           argv is always a list, never a shell
                                           string (pipelines/redirects go through
                                           ["sh", "-c", SCRIPT, "sh", ARG...] with
                                           every variable part a positional arg)
    put(local_path, remote_path)           copy a file onto the target
    get(remote_path, local_path)           copy a file from the target
    tmpdir() -> str                        a new scratch directory on the target
                                           (tmpfs when there is one); the caller
                                           removes it

Packs use nothing else (no Python on the target, no local paths).
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable


class TargetError(Exception):
    """A command on a target failed (non-zero exit with check=True)."""

    def __init__(self, message: str, result: subprocess.CompletedProcess | None = None):
        super().__init__(message)
        self.result = result


class TargetTimeout(TargetError):
    """A command on a target ran longer than its timeout (it was killed)."""


@runtime_checkable
class Target(Protocol):
    name: str

    def run(
        self, argv: Sequence[str], timeout: float, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess: ...

    def put(self, local_path, remote_path) -> None: ...

    def get(self, remote_path, local_path) -> None: ...

    def tmpdir(self) -> str: ...


def _tmp_root() -> str | None:
    """Where LocalTarget scratch dirs go: $SCHEDLAB_TMPDIR, else /dev/shm (tmpfs), else the default."""
    env = os.environ.get("SCHEDLAB_TMPDIR")
    if env:
        return env
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        return str(shm)
    return None


class LocalTarget:
    """This machine. Commands run as child processes (no shell)."""

    def __init__(self, name: str | None = None, tmp_root: str | Path | None = None):
        self.name = name or f"local:{platform.node()}"
        self.tmp_root = str(tmp_root) if tmp_root else _tmp_root()

    def __repr__(self) -> str:
        return f"LocalTarget({self.name!r})"

    def run(
        self, argv: Sequence[str], timeout: float = 60, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess:
        if isinstance(argv, (str, bytes)):
            raise TypeError("Target.run takes an argument list, not a string")
        argv = [str(a) for a in argv]
        try:
            # start_new_session: on timeout the whole process group is killed
            # (a make -j or a pg_ctl child must not outlive its run)
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        except OSError as e:
            raise TargetError(f"{self.name}: cannot run {shlex.join(argv)}: {e.strerror}") from None
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill(proc)
            out, err = proc.communicate()
            raise TargetTimeout(
                f"{self.name}: timed out after {timeout:g}s: {shlex.join(argv)}",
                subprocess.CompletedProcess(argv, -9, out, err),
            ) from None
        except BaseException:
            # e.g. Ctrl-C: the child is in its own session and did not get it
            self._kill(proc)
            proc.wait()
            raise
        res = subprocess.CompletedProcess(argv, proc.returncode, out, err)
        if check and res.returncode != 0:
            raise TargetError(
                f"{self.name}: exit {res.returncode}: {shlex.join(argv)}\n{(err or out or '').strip()[-2000:]}", res
            )
        return res

    @staticmethod
    def _kill(proc) -> None:
        try:
            os.killpg(proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass

    def put(self, local_path, remote_path) -> None:
        shutil.copyfile(local_path, remote_path)

    def get(self, remote_path, local_path) -> None:
        shutil.copyfile(remote_path, local_path)

    def tmpdir(self) -> str:
        return tempfile.mkdtemp(prefix="schedlab-pack-", dir=self.tmp_root)
