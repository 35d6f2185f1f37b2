"""Power control of a lab host through its BMC: IPMI v2.0 over LAN with ipmitool.

    ipmitool -I lanplus -H ADDR -p PORT -U USER -E -L PRIV -C SUITE -N SECS -R TRIES chassis power status

The password goes to ipmitool through the IPMI_PASSWORD variable of the child
process's environment only (that is what `-E` reads): it is never on a command
line (which any local user can read in /proc), never in a log line or an error
message, never in a record. It is read from its source (an environment variable
or a mode-600 file named in the inventory) at each call and not kept.

Every call has a timeout (ipmitool's own -N/-R per request, and a hard limit on
the whole process); failures raise BmcError naming the BMC and the command.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Callable

from .inventory import BmcSpec

IPMITOOL = "ipmitool"
DEFAULT_CIPHER_SUITE = 3  # RMCP+ HMAC-SHA1/AES-CBC-128: every IPMI 2.0 BMC has it; skips slow auto-detection


class BmcError(Exception):
    """A BMC command failed (unreachable BMC, bad credentials, unsupported command)."""


class BmcTimeout(BmcError):
    """The BMC did not answer, or the power state did not change, in time."""


class BMC:
    def __init__(self, spec: BmcSpec, *, log: Callable[[str], None] | None = None, ipmitool: str = IPMITOOL):
        if spec.type != "ipmi-lan":
            raise BmcError(f"unsupported BMC type {spec.type!r}")
        self.spec = spec
        self.log = log or (lambda msg: None)
        self.ipmitool = ipmitool

    def __str__(self) -> str:
        s = self.spec
        return f"BMC {s.user}@{s.address}:{s.port}"

    # -- the command line (no secret in it) ------------------------------------------
    def argv(self, *command: str) -> list[str]:
        s = self.spec
        per_try = max(1, int(s.timeout_s / (s.retries + 1)))
        return [
            self.ipmitool,
            "-I",
            "lanplus",
            "-H",
            s.address,
            "-p",
            str(s.port),
            "-U",
            s.user,
            "-E",
            "-L",
            s.privilege,
            "-C",
            str(s.cipher_suite if s.cipher_suite is not None else DEFAULT_CIPHER_SUITE),
            "-N",
            str(per_try),
            "-R",
            str(s.retries + 1),
            *command,
        ]

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "IPMI_PASSWORD"}
        env["IPMI_PASSWORD"] = self.spec.password.read()
        return env

    def run(self, *command: str, timeout: float | None = None) -> str:
        """Run one ipmitool command against the BMC; return its standard output."""
        argv = self.argv(*command)
        what = shlex.join(command)
        env = self._env()
        secret = env["IPMI_PASSWORD"]
        limit = timeout if timeout is not None else self.spec.timeout_s * 2 + 5
        try:
            res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=limit, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise BmcError(f"{self}: {self.ipmitool} not found (Debian package ipmitool)") from None
        except subprocess.TimeoutExpired:
            raise BmcTimeout(f"{self}: no answer to `{what}` within {limit:g}s") from None
        finally:
            del env
        out = _scrub(res.stdout, secret)
        if res.returncode != 0:
            err = _scrub((res.stderr or res.stdout).strip(), secret)
            hint = ""
            if "Unable to establish IPMI v2 / RMCP+ session" in err:
                hint = (
                    " (BMC unreachable, wrong user/password or cipher suite, or IPMI over LAN disabled"
                    f"; the password came from {self.spec.password.where})"
                )
            elif "Invalid data field in request" in err:
                hint = " (this BMC does not support that command)"
            raise BmcError(f"{self}: `{what}` failed (exit {res.returncode}): {err[-1500:]}{hint}")
        return out

    # -- power ------------------------------------------------------------------------------
    def status(self) -> str:
        """'on' or 'off'."""
        out = self.run("chassis", "power", "status").strip()
        low = out.lower()
        if low.endswith(" is on"):
            return "on"
        if low.endswith(" is off"):
            return "off"
        raise BmcError(f"{self}: cannot parse power status {out!r}")

    def wait_for(self, state: str, timeout: float, interval: float = 0.5) -> float:
        """Poll until the power state is `state`; return the seconds waited."""
        t0 = time.monotonic()
        while True:
            now = self.status()
            if now == state:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise BmcTimeout(f"{self}: power still {now} {timeout:g}s after asking for {state}")
            time.sleep(interval)

    def on(self, *, wait: float | None = 30) -> None:
        self.log(f"{self}: power on")
        self.run("chassis", "power", "on")
        if wait:
            self.wait_for("on", wait)

    def off(self, *, wait: float | None = 60) -> None:
        """Hard power off (no graceful shutdown)."""
        self.log(f"{self}: power off")
        self.run("chassis", "power", "off")
        if wait:
            self.wait_for("off", wait)

    def cycle(self, *, wait: float | None = 60, via: str = "off-on") -> None:
        """Power the host off, then on. via="off-on" (default) does it as two
        commands, waiting for each state, so the host has certainly lost power
        when this returns; via="ipmi" sends `chassis power cycle` (the BMC picks
        the off time) and only waits for power to be on. A host that is off is
        just powered on (IPMI leaves a cycle of an off chassis undefined)."""
        if self.status() == "off":
            self.on(wait=wait)
            return
        if via == "off-on":
            self.off(wait=wait or 60)
            self.on(wait=wait)
            return
        self.log(f"{self}: power cycle")
        self.run("chassis", "power", "cycle")
        if wait:
            self.wait_for("on", wait)

    def reset(self) -> None:
        """Hard reset (warm): not every BMC supports it; use cycle() when it doesn't."""
        self.log(f"{self}: power reset")
        self.run("chassis", "power", "reset")


def _scrub(text: str, secret: str) -> str:
    return text.replace(secret, "********") if secret else text
