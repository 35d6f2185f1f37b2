"""One run on one lab host, as steps with timeouts and retries.

    reserve   a per-host lock file (flock): two processes never drive one host
    install   the build's Xen, kernel and initrd under <boot.dir>/<build id>/
              (content-addressed: a build is uploaded once and checked by
              sha256), plus its GRUB menu entry `schedlab-<build id>`
    boot      `grub-reboot schedlab-<build id>` (one-shot: the next boot only),
              reboot; wait for ssh with a timeout; a host that does not come
              back is power-cycled through its BMC and waited for again; after
              `policy.boot_attempts` tries the boot has failed
    verify    `xl info` (xen_version, xen_changeset, xen_commandline,
              xen_scheduler, topology) and `uname -r` against the build; a
              mismatch fails the run
    run       the workload: a function given the Host, the build and what
              booted; it returns the run's RunResult and brings the raw data
              home
    release   the one-shot entry is gone (the host boots its default entry
              next time; `grub-editenv unset next_entry` if a boot failed
              before GRUB consumed it); the lock is released

A host that fails `policy.quarantine_after` times in a row (boots or runs) is
quarantined: it leaves its pool for the rest of this invocation
($SCHEDLAB_LAB_INVOCATION, e.g. one Snakemake run; default: this process), and
the quarantine file says why. Every remote command is an argument list
(schedlab.host.Host quotes it with shlex.join). Nothing here writes data
records: schedlab.run does, from the RunResult, so a failure never loses a
completed record.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from schedlab.builds.lab import Build
from schedlab.core.files import atomic_write
from schedlab.core.testbed import RunFailed, RunResult
from schedlab.host import Host, HostError, parse_kv

from .inventory import HostSpec, Inventory
from .power import BMC, BmcError

ENV_INVOCATION = "SCHEDLAB_LAB_INVOCATION"
_PROCESS_INVOCATION = f"pid{os.getpid()}-{uuid.uuid4().hex[:8]}"
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def invocation_id() -> str:
    return os.environ.get(ENV_INVOCATION) or _PROCESS_INVOCATION


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


# --- errors ---------------------------------------------------------------------------------


class HostBusy(RunFailed):
    """Another process holds the host's lock."""


class HostQuarantined(RunFailed):
    """The host is out of its pool for this invocation."""


class BootFailed(RunFailed):
    """The host did not come back over ssh after reboot and power cycles."""


class WrongBuild(RunFailed):
    """What booted is not the build that was installed."""


class HostKeyMismatch(RunFailed):
    """The host's ssh key is not the one in known_hosts: we refuse to talk to it."""


def _is_key_mismatch(e: Exception) -> bool:
    s = str(e)
    return (
        "host key mismatch" in s or "Host key verification failed" in s or "REMOTE HOST IDENTIFICATION HAS CHANGED" in s
    )


# Build (what is installed on a host) comes from the build stage below: schedlab.builds.lab.


# --- per-host state: lock, failures, quarantine ----------------------------------------------


class HostState:
    """Files under <state_dir>: locks/<host>.lock, hosts/<host>.json (failures in
    a row), quarantine/<host>.json, logs/<host>/..."""

    def __init__(self, state_dir: Path, host: str):
        self.dir = Path(state_dir)
        self.host = host
        for sub in ("locks", "hosts", "quarantine", "logs"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self.lock_path = self.dir / "locks" / f"{host}.lock"
        self.state_path = self.dir / "hosts" / f"{host}.json"
        self.quarantine_path = self.dir / "quarantine" / f"{host}.json"
        self.boot_path = self.dir / "hosts" / f"{host}.boot.json"
        self._lock_fd: int | None = None

    # lock ------------------------------------------------------------------
    def acquire(self, wait_s: float = 0) -> None:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        t0 = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                if time.monotonic() - t0 >= wait_s:
                    try:
                        holder = Path(self.lock_path).read_text().strip()
                    except OSError:
                        holder = "?"
                    os.close(fd)
                    raise HostBusy(
                        f"host {self.host} is being driven by another process ({holder or 'unknown'}; "
                        f"lock {self.lock_path})"
                    ) from None
                time.sleep(0.5)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {os.uname().nodename} since {_now()}\n".encode())
        self._lock_fd = fd

    def release(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._lock_fd, 0)
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    @property
    def locked(self) -> bool:
        return self._lock_fd is not None

    # failures / quarantine ------------------------------------------------
    def _read(self, p: Path) -> dict:
        try:
            return json.loads(p.read_text())
        except (OSError, ValueError):
            return {}

    def _write(self, p: Path, data: dict) -> None:
        atomic_write(p, json.dumps(data, indent=1, sort_keys=True) + "\n")

    def quarantined(self) -> dict | None:
        q = self._read(self.quarantine_path)
        return q if q and q.get("invocation") == invocation_id() else None

    def failures(self) -> int:
        s = self._read(self.state_path)
        return int(s.get("consecutive_failures", 0)) if s.get("invocation") == invocation_id() else 0

    def record_failure(self, reason: str, limit: int) -> bool:
        """Count a failure; quarantine at `limit` in a row. Returns True if quarantined now."""
        n = self.failures() + 1
        hist = self._read(self.state_path).get("history", [])[-19:]
        hist.append({"time": _now(), "ok": False, "reason": reason[:500]})
        self._write(self.state_path, {"invocation": invocation_id(), "consecutive_failures": n, "history": hist})
        if n >= limit:
            self._write(
                self.quarantine_path,
                {
                    "invocation": invocation_id(),
                    "host": self.host,
                    "since": _now(),
                    "failures": n,
                    "reason": reason[:2000],
                },
            )
            return True
        return False

    def last_verified(self) -> dict:
        """The boot in which a build was last verified (any process): {boot_id, build_id, info, time}."""
        return self._read(self.boot_path)

    def record_verified(self, boot_id: str | None, build_id: str, info: dict) -> None:
        self._write(self.boot_path, {"boot_id": boot_id, "build_id": build_id, "time": _now(), "info": info})

    def record_success(self) -> None:
        hist = self._read(self.state_path).get("history", [])[-19:]
        hist.append({"time": _now(), "ok": True})
        self._write(self.state_path, {"invocation": invocation_id(), "consecutive_failures": 0, "history": hist})


# --- the console ------------------------------------------------------------------------------


class Console:
    """Captures the host's serial console (inventory `console.argv`) to a file while open."""

    def __init__(self, spec: HostSpec, path: Path, bmc: BMC | None):
        self.spec, self.path, self.bmc = spec, path, bmc
        self.proc: subprocess.Popen | None = None

    def __enter__(self):
        c = self.spec.console
        if c:
            env = dict(os.environ)
            env.pop("IPMI_PASSWORD", None)
            if c.get("bmc_password") and self.bmc is not None:
                env["IPMI_PASSWORD"] = self.spec.bmc.password.read()
            try:
                self.proc = subprocess.Popen(
                    list(c["argv"]),
                    stdin=subprocess.DEVNULL,
                    stdout=open(self.path, "ab"),
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            except OSError as e:
                with open(self.path, "a") as f:
                    f.write(f"[schedlab] console capture {c['argv'][0]} failed: {e}\n")
        return self

    def __exit__(self, *exc):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        return False

    def tail(self, n: int = 8000) -> str:
        try:
            return self.path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""


# --- the driver -------------------------------------------------------------------------------


def _first_line(e) -> str:
    text = str(e).strip()
    lines = [l for l in text.splitlines() if l.strip()]
    return (lines[-1] if lines and "ssh failed" in lines[0] else (lines[0] if lines else repr(e)))[:300]


def check_booted(info: dict[str, str], build: Build, spec: HostSpec, xen_cmdline: str) -> list[str]:
    """Differences between what booted (`xl info` + release) and the build/inventory."""
    problems = []
    exp = build.expect
    for key in ("xen_version", "xen_changeset", "xen_scheduler", "build_id"):
        if key in exp and info.get(key) != exp[key]:
            problems.append(f"{key} is {info.get(key)!r}, the build says {exp[key]!r}")
    if "kernel_release" in exp and info.get("release") != exp["kernel_release"]:
        problems.append(f"dom0 kernel is {info.get('release')!r}, the build says {exp['kernel_release']!r}")
    if info.get("xen_commandline") != xen_cmdline:
        problems.append(f"xen_commandline is {info.get('xen_commandline')!r}, installed {xen_cmdline!r}")
    t = spec.topology
    want = {
        "nr_nodes": t["numa_nodes"],
        "cores_per_socket": t["cores_per_socket"],
        "threads_per_core": t["threads_per_core"],
        "nr_cpus": t["sockets"] * t["cores_per_socket"] * t["threads_per_core"],
    }
    for key, v in want.items():
        if key in info and str(info[key]) != str(v):
            problems.append(f"{key} is {info[key]}, the inventory says {v}")
    return problems


Workload = Callable[[Host, Build, dict], RunResult]
Verifier = Callable[[Host, Build, "HostDriver"], dict]


def xl_verifier(host: Host, build: Build, driver: HostDriver) -> dict[str, str]:
    """(d) What booted, from the host itself: `xl info` and `uname -r`, against
    the build's expectations, the installed command line and the inventory's topology."""
    try:
        info = parse_kv(host.run(["xl", "info"], timeout=120).stdout)
    except HostError as e:
        if e.result is not None and e.result.returncode in (126, 127):
            raise WrongBuild(
                f"host {driver.spec.name}: `xl info` cannot run: not running Xen? ({_first_line(e)})"
            ) from e
        raise
    info["release"] = host.run(["uname", "-r"], timeout=30).stdout.strip()
    problems = check_booted(info, build, driver.spec, driver.xen_cmdline(build))
    if problems:
        raise WrongBuild(f"host {driver.spec.name}: booted the wrong thing: " + "; ".join(problems))
    return info


class HostDriver:
    """Drives one inventory host. Use as a context manager (reserve/release)."""

    def __init__(
        self,
        spec: HostSpec,
        state_dir: Path,
        *,
        log: Callable[[str], None] | None = None,
        host: Host | None = None,
        verifier: Verifier | None = None,
    ):
        """verifier(host, build, driver) -> info: how what booted is checked; the
        default runs `xl info` and `uname -r` (xl_verifier). Tests against a
        stand-in host that is not Xen pass their own, and say so."""
        self.spec = spec
        self.verifier = verifier or xl_verifier
        self.state = HostState(state_dir, spec.name)
        self.log = log or (lambda msg: None)
        self._host = host
        self.bmc = BMC(spec.bmc, log=self.log) if spec.bmc else None
        self.events: list[dict] = []  # what happened, for the run's counters/log
        self.booted: dict[str, str] = {}
        self.booted_build: str | None = None  # the build verified in boot `verified_boot`
        self.verified_boot: str | None = None
        self.boot_id: str | None = None  # the host's current boot, as last seen

    # -- plumbing -------------------------------------------------------------------------------
    @property
    def host(self) -> Host:
        if self._host is None:
            self._host = self.spec.host()
        return self._host

    def event(self, step: str, **kw) -> None:
        e = {"time": _now(), "step": step, **kw}
        self.events.append(e)
        self.log(f"lab {self.spec.name}: {step}" + "".join(f" {k}={v}" for k, v in kw.items()))

    def logdir(self) -> Path:
        d = self.state.dir / "logs" / self.spec.name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def __enter__(self) -> HostDriver:
        self.reserve()
        return self

    def __exit__(self, *exc) -> bool:
        self.release()
        return False

    # -- (a) reserve ------------------------------------------------------------------------------
    def reserve(self) -> None:
        q = self.state.quarantined()
        if q:
            raise HostQuarantined(
                f"host {self.spec.name} is quarantined for this invocation since {q['since']} "
                f"after {q['failures']} failures in a row: {q['reason'][:300]} "
                f"(state: {self.state.quarantine_path})"
            )
        self.state.acquire(self.spec.timeouts["lock_s"])
        self.event("reserved", lock=str(self.state.lock_path))

    def release(self) -> None:
        if self._host is not None and self.spec.multiplex:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                self._host.close()  # the shared connection's master, if any
            self._host = None
        if self.state.locked:
            self.state.release()
            self.event("released")

    # -- (b) install ----------------------------------------------------------------------------------
    def build_dir(self, build: Build) -> str:
        return f"{self.spec.boot['dir']}/{build.build_id}"

    def entry_id(self, build: Build) -> str:
        return f"schedlab-{build.build_id}"

    def xen_cmdline(self, build: Build) -> str:
        return " ".join(p for p in (self.spec.boot["xen_cmdline_extra"], build.xen_cmdline) if p)

    def dom0_cmdline(self, build: Build) -> str:
        return " ".join(p for p in (self.spec.boot["dom0_cmdline"], build.dom0_cmdline) if p)

    def grub_entry(self, build: Build) -> str:
        gp = self.spec.boot.get("grub_path") or self.spec.boot["dir"]
        p = f"{gp}/{build.build_id}"
        lines = [
            f"menuentry 'schedlab {build.build_id}' --id {self.entry_id(build)} {{",
            "\tinsmod part_gpt",
            "\tinsmod part_msdos",
            "\tinsmod ext2",
            "\tinsmod gzio",
            f"\tsearch --no-floppy --file --set=root {p}/xen.gz",
            f"\techo 'schedlab: Xen {build.build_id}'",
            f"\tmultiboot2 {p}/xen.gz {self.xen_cmdline(build)}".rstrip(),
            f"\tmodule2 {p}/vmlinuz {self.dom0_cmdline(build)}".rstrip(),
        ]
        if "initrd.img" in build.files:
            lines.append(f"\tmodule2 --nounzip {p}/initrd.img")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def install(self, build: Build) -> None:
        """Upload the build (once: a complete install is kept, by content), write its
        GRUB entry and regenerate <grub_dir>/schedlab.cfg from every installed build."""
        h, t = self.host, self.spec.timeouts["install_s"]
        bdir = self.build_dir(build)
        manifest = json.dumps({"build_id": build.build_id, "sha256": build.sha256}, sort_keys=True)
        have = h.run(["cat", f"{bdir}/installed.json"], timeout=60, check=False)
        if have.returncode == 0 and have.stdout.strip() == manifest:
            self.event("install", build=build.build_id, uploaded=False)
        else:
            tmp = f"{bdir}.tmp-{os.getpid()}"
            h.run(["sh", "-c", 'rm -rf -- "$1" && mkdir -p -- "$1"', "schedlab-install", tmp], timeout=60)
            for name, local in sorted(build.files.items()):
                h.put(local, f"{tmp}/{name}", timeout=t)
            h.put_bytes(self.grub_entry(build).encode(), f"{tmp}/grub-entry.cfg", timeout=60)
            sums = h.run(["sha256sum", "--", *[f"{tmp}/{n}" for n in sorted(build.files)]], timeout=t).stdout
            got = {Path(line.split()[1]).name: line.split()[0] for line in sums.splitlines() if line.strip()}
            if got != build.sha256:
                raise RunFailed(
                    f"host {self.spec.name}: upload of build {build.build_id} corrupted "
                    f"(sha256 on host {got}, here {build.sha256})"
                )
            # the manifest marks a complete install; the folder appears under its final name at once
            h.put_bytes((manifest + "\n").encode(), f"{tmp}/installed.json", timeout=60)
            h.run(["sh", "-c", 'rm -rf -- "$2" && mv -T -- "$1" "$2"', "schedlab-install", tmp, bdir], timeout=60)
            self.event("install", build=build.build_id, uploaded=True)
        self._write_grub_cfg(build)

    def _write_grub_cfg(self, current: Build) -> None:
        b = self.spec.boot
        # one sh script, fixed text; paths are positional arguments, never interpolated.
        # Keeps the newest keep_builds builds (the current one counts as newest), concatenates their entries into
        # schedlab.cfg (atomically), and checks that grub.cfg sources it.
        script = (
            'set -e; d=$1; g=$2; keep=$3; touch -- "$d/$4"; tmp="$g/schedlab.cfg.tmp"; : > "$tmp"; '
            'ls -1t "$d" | grep -E "^[0-9a-f]{16,64}$" | tail -n +$((keep + 1)) | '
            'while read -r old; do rm -rf -- "$d/$old"; done; '
            'for f in "$d"/*/grub-entry.cfg; do [ -f "$f" ] && cat "$f" >> "$tmp"; done; '
            'mv -f "$tmp" "$g/schedlab.cfg"; '
            'grep -q schedlab.cfg "$g/grub.cfg" || { echo "no-hook" >&2; exit 3; }'
        )
        r = self.host.run(
            [
                "sh",
                "-c",
                script,
                "schedlab-grub",
                b["dir"],
                b["grub_dir"],
                str(int(b["keep_builds"])),
                current.build_id,
            ],
            timeout=60,
            check=False,
        )
        if r.returncode == 3 and "no-hook" in r.stderr:
            raise RunFailed(
                f"host {self.spec.name}: {b['grub_dir']}/grub.cfg does not source schedlab.cfg; "
                "install the GRUB hook once (docs/lab-testbed.md, 'Preparing a host') and run update-grub"
            )
        if r.returncode != 0:
            raise RunFailed(
                f"host {self.spec.name}: writing {b['grub_dir']}/schedlab.cfg failed "
                f"(exit {r.returncode}): {r.stderr.strip()[-500:]}"
            )

    # -- (c) boot -------------------------------------------------------------------------------------
    def read_boot_id(self, timeout: float = 30) -> str:
        return self.host.run(["cat", BOOT_ID], timeout=timeout).stdout.strip()

    def connect(self) -> None:
        """The host answers over ssh now; if not, power-cycle it through the BMC
        and wait (policy.boot_attempts times). Refuses a host whose key changed."""
        try:
            self.boot_id = self.read_boot_id(timeout=self.spec.timeouts["ssh_connect_s"] * 2 + 5)
            self.event("connected", boot_id=self.boot_id)
            return
        except HostError as e:
            if _is_key_mismatch(e):
                raise self._key_mismatch(e) from e
            self.event("unreachable", error=_first_line(e))
        self._wait_up(before=None, console=None, cycle_first=True)

    def _key_mismatch(self, e: Exception) -> HostKeyMismatch:
        return HostKeyMismatch(
            f"host {self.spec.name}: refusing to connect: its ssh host key does not match "
            f"{self.spec.known_hosts.describe()} ({self.spec.address}:{self.spec.port}"
            f"{', alias ' + self.spec.host_key_alias if self.spec.host_key_alias else ''}). "
            "A reinstalled host or someone else answering: check it, then update known_hosts deliberately.",
            str(e)[-4000:],
        )

    def boot(self, build: Build) -> float:
        """One-shot boot into the build; returns seconds until ssh answered again."""
        b = self.spec.boot
        before = self.read_boot_id()
        self.host.run([*b["grub_reboot"], self.entry_id(build)], timeout=60)
        self.event("grub-reboot", entry=self.entry_id(build))
        t0 = time.monotonic()
        log = self.logdir() / f"console-{time.strftime('%Y%m%dT%H%M%S')}-{build.build_id}.log"
        with Console(self.spec, log, self.bmc) as console:
            self._reboot(before)
            self._wait_up(before=before, console=console)
        secs = time.monotonic() - t0
        self.event("booted", build=build.build_id, seconds=round(secs, 1))
        return secs

    def _wait_up(self, *, before: str | None, console: Console | None, cycle_first: bool = False) -> None:
        """Wait for ssh (boot_s); power-cycle and wait again, up to policy.boot_attempts."""
        t, pol = self.spec.timeouts, self.spec.policy
        last: Exception | None = None
        tail = console.tail if console else (lambda: "")
        for attempt in range(1, pol["boot_attempts"] + 1):
            if cycle_first or attempt > 1:
                if self.bmc is None:
                    self.event("no-bmc", note="cannot power-cycle: the inventory has no bmc for this host")
                    break
                try:
                    self.bmc.cycle(wait=max(30, t["shutdown_s"]))
                    self.event("power-cycle", attempt=attempt)
                except BmcError as e:
                    last = e
                    self.event("power-cycle-failed", error=str(e)[:300])
                    break
            try:
                self.host.wait_for_ssh(t["boot_s"], interval=1.0)
                bid = self.read_boot_id()
                if before is not None and bid == before:
                    raise RunFailed(f"still the same boot ({bid}) after the reboot")
                self.boot_id = bid
                self.event("up", attempt=attempt, boot_id=bid)
                return
            except HostError as e:
                if _is_key_mismatch(e):
                    raise self._key_mismatch(e) from e
                last = e
            except RunFailed as e:
                last = e
            self.event("no-ssh", attempt=attempt, error=_first_line(last))
        raise BootFailed(
            f"host {self.spec.name}: not reachable over ssh after {pol['boot_attempts']} attempt(s) "
            f"(boot_s={t['boot_s']:g}{'' if self.bmc else ', no BMC to power-cycle it'}): "
            f"{_first_line(last)}",
            tail(),
        )

    def _reboot(self, before: str | None) -> None:
        b, t = self.spec.boot, self.spec.timeouts
        if b["reboot"] == ["bmc-cycle"]:
            self.bmc.cycle(wait=max(30, t["shutdown_s"]))
            self.event("reboot", via="bmc-cycle")
            return
        # the connection usually drops while the command runs: that is success
        with contextlib.suppress(HostError):
            self.host.run(list(b["reboot"]), timeout=30, check=False)
        self.event("reboot", via=b["reboot"][0])
        # wait until the old boot is gone (ssh stops answering or boot_id changes)
        t0 = time.monotonic()
        while time.monotonic() - t0 < t["shutdown_s"]:
            try:
                if before is None or self.read_boot_id(timeout=10) != before:
                    return
            except HostError:
                return
            time.sleep(1)
        self.event("reboot-ignored", note=f"still up {t['shutdown_s']}s after the reboot command")
        if self.bmc is not None:
            self.bmc.cycle(wait=max(30, t["shutdown_s"]))
            self.event("power-cycle", reason="reboot command ignored")

    # -- (d) verify --------------------------------------------------------------------------------------
    def verify(self, build: Build) -> dict[str, str]:
        try:
            info = self.verifier(self.host, build, self)
        except WrongBuild:
            self.booted_build = None
            raise
        self.booted = info
        self.booted_build = build.build_id
        self.verified_boot = self.boot_id
        self.state.record_verified(self.boot_id, build.build_id, {k: v for k, v in info.items() if isinstance(v, str)})
        self.event("verified", build=build.build_id, xen_version=info.get("xen_version"), release=info.get("release"))
        return info

    def adopt(self, build: Build) -> bool:
        """Is the host still in a boot where another process verified this build? Then
        check it again (`xl info`, no reboot) and use it. A host that rebooted since has
        a new boot id and is booted into the build again."""
        prev = self.state.last_verified()
        if not prev or prev.get("boot_id") != self.boot_id or prev.get("build_id") != build.build_id:
            return False
        try:
            self.verify(build)
        except WrongBuild as e:
            self.event("adopt-refused", error=str(e)[:300])
            return False
        self.event("adopted-boot", boot_id=self.boot_id, since=prev.get("time"))
        return True

    # -- (e) run ------------------------------------------------------------------------------------------
    def measure(self, build: Build, workload: Workload) -> RunResult:
        """Run the workload. A host that stops answering during it is a failed run
        (the data of earlier runs is already stored and stays)."""
        try:
            return workload(self.host, build, self.booted)
        except HostError as e:
            alive = True
            try:
                self.host.run(["true"], timeout=max(5, self.spec.timeouts["ssh_connect_s"] * 2))
            except HostError:
                alive = False
            self.booted_build = None if not alive else self.booted_build
            what = "host died during the run" if not alive else "a remote command failed"
            raise RunFailed(f"host {self.spec.name}: {what}: {str(e).splitlines()[0][:500]}", str(e)[-8000:]) from e

    # -- (f) leave it booting its default entry --------------------------------------------------------
    def restore_default(self) -> None:
        env = f"{self.spec.boot['grub_dir']}/grubenv"
        r = self.host.run(["grub-editenv", env, "list"], timeout=30, check=False)
        if "next_entry=" in r.stdout and not re.search(r"^next_entry=$", r.stdout, re.M):
            self.host.run(["grub-editenv", env, "unset", "next_entry"], timeout=30)
            self.event("restored-default", note="cleared a pending one-shot entry")

    # -- one run --------------------------------------------------------------------------------------
    def run(self, build: Build, workload: Workload, *, reboot: str = "if-needed") -> RunResult:
        """install (if needed), boot (if needed or reboot='always'), verify, measure.

        Failures count towards quarantine; success resets the count."""
        if not self.state.locked:
            raise RunFailed(f"host {self.spec.name}: not reserved (use the driver as a context manager or pick_host)")
        limit = self.spec.policy["quarantine_after"]
        t0 = time.monotonic()
        self.events = []
        try:
            booted_now = False
            self.connect()
            # a host that rebooted by itself or was power-cycled runs its default entry: boot the build again.
            # A new process (booted_build unknown) first asks whether the host is still in a boot where
            # this build was verified (by an earlier job): checked again, that boot is used as is.
            if reboot == "always" or self.booted_build != build.build_id or self.verified_boot != self.boot_id:
                adopted = reboot != "always" and self.booted_build is None and self.adopt(build)
                if not adopted:
                    self.install(build)
                    boot_s = self.boot(build)
                    booted_now = True
                    self.verify(build)
            result = self.measure(build, workload)
            self.restore_default()
        except RunFailed as e:
            self._failed(e, limit)
            raise
        except HostError as e:
            err = RunFailed(f"host {self.spec.name}: {str(e).splitlines()[0][:500]}", str(e)[-8000:])
            self._failed(err, limit)
            raise err from e
        except BmcError as e:
            err = RunFailed(f"host {self.spec.name}: BMC: {e}")
            self._failed(err, limit)
            raise err from e
        self.state.record_success()
        result.counters = {
            **result.counters,
            "lab": {
                "host": self.spec.name,
                "build_id": build.build_id,
                "boot_id": self.boot_id,
                "rebooted": booted_now,
                "boot_seconds": round(boot_s, 1) if booted_now else None,
                "booted": {
                    k: self.booted.get(k)
                    for k in (
                        "xen_version",
                        "xen_changeset",
                        "build_id",
                        "xen_commandline",
                        "xen_scheduler",
                        "release",
                        "nr_cpus",
                        "nr_nodes",
                        "cpu_mhz",  # the TSC rate Xen calibrated, beside the trace's measured one
                    )
                },
                "events": self.events,
                "seconds": round(time.monotonic() - t0, 1),
            },
        }
        return result

    def _failed(self, e: RunFailed, limit: int) -> None:
        if not isinstance(e, (HostBusy, HostQuarantined, HostKeyMismatch, BootFailed)):
            # best effort: a failed run must not leave a one-shot entry armed either
            with contextlib.suppress(HostError, RunFailed):
                self.restore_default()
        self.booted_build = None if not isinstance(e, (HostBusy, HostQuarantined)) else self.booted_build
        if isinstance(e, (HostBusy, HostQuarantined)):
            return
        e.log = (e.log + "\n" if e.log else "") + "events:\n" + "\n".join(json.dumps(x) for x in self.events)
        if isinstance(e, HostKeyMismatch):
            limit = 1  # never retry a host that is not the one we know
        if self.state.record_failure(str(e), limit):
            self.event("quarantined", failures=self.state.failures(), file=str(self.state.quarantine_path))
            raise HostQuarantined(
                f"{e} -- host {self.spec.name} failed {limit} time(s) in a row and is "
                f"quarantined for this invocation ({self.state.quarantine_path})",
                e.log,
            ) from e


# --- choosing a host of a pool -----------------------------------------------------------------------


def pick_host(inventory: Inventory, name: str | None, *, log=None) -> HostDriver:
    """Reserve the first usable host of `name` (a host or a pool): not quarantined,
    not locked by another process. While every usable host is busy, wait up to the
    largest `timeouts.lock_s` of the pool. Raises RunFailed naming why each was skipped."""
    specs = inventory.resolve(name)
    deadline = time.monotonic() + max(s.timeouts["lock_s"] for s in specs)
    while True:
        why = []
        for spec in specs:
            d = HostDriver(spec, inventory.state_dir, log=log)
            q = d.state.quarantined()
            if q:
                why.append(f"{spec.name}: quarantined ({q['reason'][:120]})")
                continue
            try:
                d.state.acquire(0)
            except HostBusy:
                why.append(f"{spec.name}: busy")
                continue
            d.event("reserved", lock=str(d.state.lock_path))
            return d
        if all(w.endswith("quarantined") or "quarantined (" in w for w in why) or time.monotonic() >= deadline:
            raise RunFailed(f"no usable host in {name or 'the inventory'}: " + "; ".join(why))
        time.sleep(2)
