"""Local stand-ins for lab hardware, for tests and for the qemu virtual host.

`IpmiSim`  a real IPMI-over-LAN endpoint: OpenIPMI's ipmi_sim, listening on
           127.0.0.1 with a generated lan.conf and emu file. Chassis power
           on/off/cycle start and stop a real process (ipmi_sim's `startcmd`):
           that process *is* the host as far as the BMC is concerned. For the
           qemu virtual host the start command is QEMU itself, which connects
           back with `-chardev socket,...,host=127.0.0.1,port=<vm_port>
           -device ipmi-bmc-extern,chardev=...,id=bmc0 -device isa-ipmi-kcs,bmc=bmc0`.

`SshdHost` a "host" that is a real OpenSSH sshd on a loopback port with its own
           generated host key and an authorised client key, run in its own PID
           and mount namespaces so that powering it off kills every process of
           it (as a power cut does) and each power-on gets a fresh
           /proc/sys/kernel/random/boot_id (as a reboot does). Its start
           command is what IpmiSim runs on power-on. (unshare ignores SIGTERM,
           so ipmi_sim's power-off ends in its SIGKILL after `kill_wait`: a
           hard power cut, all processes of the host at once.)

Both need root (namespaces, sshd). Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

SAFE_PATH = re.compile(r"^[A-Za-z0-9_./@+-]+$")


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _safe(p: Path) -> str:
    s = str(p)
    if not SAFE_PATH.match(s):
        raise ValueError(f"{s}: path must match {SAFE_PATH.pattern} (it goes into ipmi_sim's lan.conf)")
    return s


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _sigkill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    t0 = time.monotonic()
    while not _gone(pid) and time.monotonic() - t0 < 5:
        time.sleep(0.05)


def _kill(pid: int, timeout: float = 5, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM, then SIGKILL after `timeout`; a zombie counts as gone (reaped if it is ours)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if (proc is not None and proc.poll() is not None) or _gone(pid):
                break
            time.sleep(0.05)
        else:
            continue
        break
    if proc is not None:
        proc.wait(timeout=10)


class SshdHost:
    """A loopback sshd "host". `start_argv()` starts it in the foreground (what a
    BMC power-on runs); `stop()` kills a copy started by `start()`."""

    def __init__(self, workdir: Path, port: int | None = None, sshd: str = "/usr/sbin/sshd"):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.sshd = sshd
        self.host_key = self.dir / "ssh_host_ed25519_key"
        self.client_key = self.dir / "id_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        self.alias = "schedlab-test-host"
        self.log = self.dir / "sshd.log"
        self.proc: subprocess.Popen | None = None
        for key in (self.host_key, self.client_key):
            if not key.exists():
                subprocess.run(
                    ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "schedlab-test", "-f", str(key)],
                    check=True,
                    capture_output=True,
                )
        (self.dir / "authorized_keys").write_text(Path(f"{self.client_key}.pub").read_text())
        hostpub = Path(f"{self.host_key}.pub").read_text().split()
        self.known_hosts.write_text(f"{self.alias} {hostpub[0]} {hostpub[1]}\n")
        (self.dir / "sshd_config").write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key}",
                    "PidFile none",
                    f"AuthorizedKeysFile {self.dir / 'authorized_keys'}",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin prohibit-password",
                    "StrictModes no",
                    "UsePAM no",
                    "PrintMotd no",
                    "LogLevel INFO",
                    "MaxStartups 50",
                    "",
                ]
            )
        )
        # the power-on script: new PID + mount namespace, fresh boot_id, sshd in the foreground
        script = self.dir / "power-on.sh"
        script.write_text(
            "#!/bin/sh\n"
            f"cat /proc/sys/kernel/random/uuid > {_safe(self.dir)}/boot_id\n"
            f"exec unshare --pid --fork --kill-child --mount --propagation private sh -c "
            f"'mount --bind {_safe(self.dir)}/boot_id /proc/sys/kernel/random/boot_id && "
            f"exec {_safe(Path(self.sshd))} -D -e -f {_safe(self.dir)}/sshd_config' >> {_safe(self.log)} 2>&1\n"
        )
        script.chmod(0o755)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory

    def start_argv(self) -> list[str]:
        return [str(self.dir / "power-on.sh")]

    def start(self) -> None:
        self.proc = subprocess.Popen(self.start_argv(), start_new_session=True)
        self.wait_listening()

    def wait_listening(self, timeout: float = 10) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.settimeout(2)
                    if s.recv(64).startswith(b"SSH-"):
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError(
            f"sshd on 127.0.0.1:{self.port} not listening after {timeout}s; log:\n"
            + (self.log.read_text()[-2000:] if self.log.exists() else "")
        )

    def stop(self) -> None:
        if self.proc is not None:
            _kill(self.proc.pid, proc=self.proc)
            self.proc = None

    def boot_id(self) -> str:
        return (self.dir / "boot_id").read_text().strip()


class IpmiSim:
    """ipmi_sim serving IPMI v2.0 (RMCP+) on 127.0.0.1:<port>, one admin user,
    chassis power wired to `startcmd` (argv list, run on power-on)."""

    def __init__(
        self,
        workdir: Path,
        startcmd: list[str] | None = None,
        *,
        user: str = "schedlab",
        password: str | None = None,
        port: int | None = None,
        vm_port: int | None = None,
        startnow: bool = False,
        poweroff_wait: int = 1,
        kill_wait: int = 1,
    ):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port(socket.SOCK_DGRAM)
        self.vm_port = vm_port or free_port()  # the "VM" serial channel: QEMU's ipmi-bmc-extern connects here
        self.user = user
        self.password = password or secrets.token_hex(8)
        self.proc: subprocess.Popen | None = None
        state = self.dir / "state"
        state.mkdir(exist_ok=True)
        lines = [
            'name "schedlab"',
            "set_working_mc 0x20",
            "  startlan 1",
            f"    addr 127.0.0.1 {self.port}",
            "    priv_limit admin",
            "    allowed_auths_callback md5",
            "    allowed_auths_user md5",
            "    allowed_auths_operator md5",
            "    allowed_auths_admin md5",
            "    guid a123456789abcdefa123456789abcdef",
            "  endlan",
            # chassis power control acts on the VM channel; startcmd is the process it powers
            f"  serial 15 127.0.0.1 {self.vm_port} codec VM",
        ]
        if startcmd:
            lines.append('  startcmd "' + " ".join(_safe(Path(a)) if "/" in a else _arg(a) for a in startcmd) + '"')
            lines += [
                f"  startnow {'true' if startnow else 'false'}",
                f"  poweroff_wait {int(poweroff_wait)}",
                f"  kill_wait {int(kill_wait)}",
            ]
        lines.append(f'  user 2 true "{_arg(user)}" "{_arg(self.password)}" admin 10 md5')
        self.lan_conf = self.dir / "lan.conf"
        fd = os.open(self.lan_conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # holds the password
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.emu = self.dir / "bmc.emu"
        self.emu.write_text(
            "mc_setbmc 0x20\n"
            "mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\n"
            "sel_enable 0x20 1000 0x0a\n"
            "mc_enable 0x20\n"
        )
        self.log = self.dir / "ipmi_sim.log"

    def argv(self) -> list[str]:
        return ["ipmi_sim", "-c", str(self.lan_conf), "-f", str(self.emu), "-s", str(self.dir / "state"), "-n"]

    def start(self, timeout: float = 10) -> None:
        self.proc = subprocess.Popen(
            self.argv(),
            stdin=subprocess.DEVNULL,
            stdout=open(self.log, "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        env = {**os.environ, "IPMI_PASSWORD": self.password}
        t0 = time.monotonic()
        while True:
            r = subprocess.run(
                [
                    "ipmitool",
                    "-I",
                    "lanplus",
                    "-C",
                    "3",
                    "-H",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-U",
                    self.user,
                    "-E",
                    "-N",
                    "1",
                    "-R",
                    "1",
                    "mc",
                    "info",
                ],
                env=env,
                capture_output=True,
                text=True,
            )
            if r.returncode == 0:
                return
            if self.proc.poll() is not None or time.monotonic() - t0 > timeout:
                self.stop()
                raise RuntimeError(
                    f"ipmi_sim did not come up on 127.0.0.1:{self.port}: {r.stderr.strip()}\n"
                    + self.log.read_text()[-2000:]
                )
            time.sleep(0.2)

    def powered_pids(self) -> list[int]:
        """The processes ipmi_sim started for power-on (the 'host')."""
        return _children(self.proc.pid) if self.proc else []

    def stop(self) -> None:
        if self.proc is None:
            return
        host = self.powered_pids()
        _kill(self.proc.pid, timeout=1, proc=self.proc)
        for pid in host:  # a BMC going away must not leave its "host" running here: cut its power
            _sigkill(pid)
        self.proc = None


def _arg(s: str) -> str:
    if not re.match(r"^[A-Za-z0-9_.,=:@%+-]+$", s):
        raise ValueError(f"{s!r}: not allowed in lan.conf")
    return s


def main(argv: list[str] | None = None) -> int:
    """`python -m schedlab.testing.standins bmc --dir D --port 9623 [--vm-port 9624] -- START-COMMAND...`

    Runs an ipmi_sim BMC on 127.0.0.1 until interrupted (e.g. for the qemu virtual
    host: START-COMMAND starts QEMU). The password is read from the environment
    variable named by --password-env (default SCHEDLAB_BMC_PASSWORD), never argv."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m schedlab.testing.standins")
    sub = ap.add_subparsers(dest="what", required=True)
    b = sub.add_parser("bmc", help="an ipmi_sim BMC on 127.0.0.1")
    b.add_argument("--dir", required=True, type=Path)
    b.add_argument("--port", type=int, default=9623)
    b.add_argument("--vm-port", type=int, default=None)
    b.add_argument("--user", default="schedlab")
    b.add_argument("--password-env", default="SCHEDLAB_BMC_PASSWORD")
    b.add_argument(
        "--poweroff-wait",
        type=int,
        default=1,
        help="seconds ipmi_sim waits after asking the VM to power off before killing it",
    )
    b.add_argument("--kill-wait", type=int, default=1, help="seconds between SIGTERM and SIGKILL of the host")
    b.add_argument("startcmd", nargs="+")
    a = ap.parse_args(argv)
    pw = os.environ.get(a.password_env)
    if not pw:
        print(f"set {a.password_env} to the BMC password", file=sys.stderr)
        return 2
    sim = IpmiSim(
        a.dir,
        a.startcmd,
        user=a.user,
        password=pw,
        port=a.port,
        vm_port=a.vm_port,
        poweroff_wait=a.poweroff_wait,
        kill_wait=a.kill_wait,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop cleanly: the BMC and its "host"
    sim.start()
    print(
        f"ipmi_sim: IPMI over LAN on 127.0.0.1:{sim.port} (user {sim.user}); "
        f"VM channel (QEMU ipmi-bmc-extern) on 127.0.0.1:{sim.vm_port}",
        flush=True,
    )
    try:
        sim.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
