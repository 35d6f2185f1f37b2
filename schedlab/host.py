"""An SSH driver for one host: the qemu testbed's dom0, and later real lab machines.

Every remote command is an argument list; it is quoted for the remote shell with
`shlex.join`, so nothing is ever interpolated into a command string. Host keys
are checked strictly against a known_hosts file that *we* write (the qemu
testbed generates dom0's host key when it builds the image), and ssh runs in
BatchMode, so it can never stop to ask a question.

File copies go through `ssh ... cat` / `dd` instead of scp/sftp, so a host only
needs sshd and coreutils.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

# The first eight fields of /proc/stat's cpu lines, in order: what a host's or a guest's CPU
# ticks are recorded as (steal: runnable, but another tenant ran)
PROC_STAT_TICKS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


class HostError(Exception):
    """A remote command failed (non-zero exit) or ssh itself failed."""

    def __init__(self, message: str, result: subprocess.CompletedProcess | None = None):
        super().__init__(message)
        self.result = result


class HostTimeout(HostError):
    """A remote command (or waiting for ssh) took longer than its timeout."""


class Host:
    """One machine reachable over ssh.

    hostname/port: where to connect (e.g. 127.0.0.1 and a QEMU hostfwd port).
    identity: private key file. known_hosts: file holding the host's public key.
    host_key_alias: name under which the host key is listed in known_hosts (lets
    the entry stay valid whatever port a run forwards).
    """

    def __init__(
        self,
        hostname: str,
        *,
        user: str = "root",
        port: int = 22,
        identity: str | Path | None = None,
        known_hosts: str | Path | None = None,
        host_key_alias: str | None = None,
        connect_timeout: int = 10,
        multiplex: bool = False,
        extra_options: Sequence[str] = (),
    ):
        self.hostname = hostname
        self.user = user
        self.port = int(port)
        self.identity = Path(identity) if identity else None
        self.known_hosts = Path(known_hosts) if known_hosts else None
        self.host_key_alias = host_key_alias
        self.connect_timeout = int(connect_timeout)
        self.extra_options = list(extra_options)
        # Connection sharing: one ssh handshake for many commands (a handshake costs seconds
        # on a slow host such as dom0 under TCG). The master exits after 60 s idle or close().
        self._control_dir = tempfile.mkdtemp(prefix="schedlab-ssh-") if multiplex else None

    # -- argv building -------------------------------------------------------------
    def ssh_options(self) -> list[str]:
        opts = {
            "BatchMode": "yes",
            "StrictHostKeyChecking": "yes",
            "ConnectTimeout": str(self.connect_timeout),
            "ServerAliveInterval": "5",
            "ServerAliveCountMax": "6",
            "LogLevel": "ERROR",
            "IdentitiesOnly": "yes" if self.identity else "no",
            # Don't read the user's ~/.ssh/config: the run must not depend on it.
        }
        if self.known_hosts:
            opts["UserKnownHostsFile"] = str(self.known_hosts)
            opts["GlobalKnownHostsFile"] = "/dev/null"
        if self.host_key_alias:
            opts["HostKeyAlias"] = self.host_key_alias
        if self._control_dir:
            opts.update(ControlMaster="auto", ControlPath=os.path.join(self._control_dir, "%C"), ControlPersist="60")
        argv = ["-F", "/dev/null"]
        for k, v in opts.items():
            argv += ["-o", f"{k}={v}"]
        if self.identity:
            argv += ["-i", str(self.identity)]
        argv += ["-p", str(self.port)]
        return argv + list(self.extra_options)

    def ssh_argv(self, argv: Sequence[str]) -> list[str]:
        if isinstance(argv, (str, bytes)):
            raise TypeError("Host.run takes an argument list, not a string")
        remote = shlex.join([str(a) for a in argv])
        # `--` before the destination: a host or user starting with '-' is never an ssh option
        return ["ssh", *self.ssh_options(), "--", f"{self.user}@{self.hostname}", remote]

    # -- running ---------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        timeout: float = 60,
        input: bytes | str | None = None,
        check: bool = True,
        *,
        text: bool = True,
    ) -> subprocess.CompletedProcess:
        """Run argv on the host; return the CompletedProcess (stdout/stderr captured).

        Raises HostTimeout after `timeout` seconds (the local ssh is killed), and
        HostError on a non-zero exit when check is true (255 = ssh itself failed)."""
        cmd = self.ssh_argv(argv)
        if isinstance(input, str) and not text:
            input = input.encode()
        try:
            res = subprocess.run(
                cmd,
                input=input,
                capture_output=True,
                timeout=timeout,
                text=text,
                stdin=None if input is not None else subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as e:
            raise HostTimeout(f"{self}: timed out after {timeout:g}s: {shlex.join(map(str, argv))}") from e
        if check and res.returncode != 0:
            err = res.stderr if text else res.stderr.decode(errors="replace")
            what = "ssh failed" if res.returncode == 255 else f"exit {res.returncode}"
            raise HostError(f"{self}: {what}: {shlex.join(map(str, argv))}\n{err.strip()[-2000:]}", res)
        return res

    def put(self, local: str | Path, remote: str, *, timeout: float = 120, mode: str | None = None) -> None:
        """Copy a local file to `remote` (a path on the host)."""
        data = Path(local).read_bytes()
        self.put_bytes(data, remote, timeout=timeout, mode=mode)

    def put_bytes(self, data: bytes, remote: str, *, timeout: float = 120, mode: str | None = None) -> None:
        self.run(["dd", f"of={remote}", "bs=64k", "status=none"], input=data, text=False, timeout=timeout)
        if mode:
            self.run(["chmod", mode, remote], timeout=timeout)

    def get(self, remote: str, local: str | Path, *, timeout: float = 120) -> None:
        """Copy the host's file `remote` to `local`."""
        Path(local).write_bytes(self.get_bytes(remote, timeout=timeout))

    def get_bytes(self, remote: str, *, timeout: float = 120) -> bytes:
        return self.run(["cat", "--", remote], text=False, timeout=timeout).stdout

    def wait_for_ssh(self, timeout: float, *, interval: float = 2.0, alive: Callable[[], bool] | None = None) -> float:
        """Poll until `true` runs over ssh; return the seconds waited.

        `alive` (optional) is asked between attempts; if it returns False (e.g. the
        VM died) waiting stops at once with HostError. Raises HostTimeout on expiry."""
        t0 = time.monotonic()
        last = ""
        while True:
            if alive is not None and not alive():
                raise HostError(f"{self}: host went away while waiting for ssh ({last})")
            left = timeout - (time.monotonic() - t0)
            if left <= 0:
                raise HostTimeout(f"{self}: no ssh after {timeout:g}s (last error: {last})")
            try:
                self.run(["true"], timeout=max(5.0, min(left, 30.0)))
                return time.monotonic() - t0
            except HostTimeout as e:
                last = str(e)
            except HostError as e:
                last = str(e).strip().splitlines()[-1] if str(e).strip() else repr(e)
                if "Host key verification failed" in str(e) or "REMOTE HOST IDENTIFICATION" in str(e):
                    raise HostError(f"{self}: host key mismatch (not the host we built?): {last}") from e
            time.sleep(min(interval, max(0.0, timeout - (time.monotonic() - t0))))

    @property
    def name(self) -> str:
        """Short label for logs and records (schedlab.targets protocol)."""
        return self.host_key_alias or self.hostname

    def tmpdir(self) -> str:
        """A new scratch directory on the host (under /tmp, a tmpfs in our dom0); the caller
        removes it (schedlab.targets protocol)."""
        return self.run(["mktemp", "-d", "/tmp/schedlab.XXXXXXXX"], timeout=60).stdout.strip()

    def close(self) -> None:
        """Stop the shared connection (if multiplexing) and remove its socket directory."""
        if self._control_dir:
            subprocess.run(
                ["ssh", *self.ssh_options(), "-O", "exit", "--", f"{self.user}@{self.hostname}"],
                capture_output=True,
                timeout=15,
                stdin=subprocess.DEVNULL,
            )
            shutil.rmtree(self._control_dir, ignore_errors=True)
            self._control_dir = None

    def __str__(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"

    __repr__ = __str__


def parse_kv(text: str) -> dict[str, str]:
    """`key : value` lines (as `xl info` prints them) -> {key: value}; the boot checks
    of the qemu and lab testbeds both read it."""
    out = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
    return out


def sha256_file(path) -> str:
    """Streaming sha256 of a (possibly large) build artifact: kernels, images."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
