"""The shape every benchmark pack has (like mmtests' shellpacks).

A pack is data plus four steps:

    debs      Debian packages it needs on the target (installed by the testbed
              or by `make test`; the pack never installs anything itself)
    tools     executables that must be on the target's PATH
    params    its parameters, with defaults that may scale with the target
              (vCPUs, available memory): see `Param`
    sweep     the parameter the pack sweeps (client/thread/job counts): one
              record per value and repetition
    metrics   what it reports, each with its unit and direction

    prepare(ctx)                       data set, build, server start, warm-up
    run_once(ctx, point, seed, run_id) one repetition -> the tool's text output
    parse(output, run_id)              text -> {metric: value}; a pure function
                                       (unit-tested with recorded outputs); raises
                                       PackOutputError on anything unexpected
    cleanup(ctx)                       always called, also after a failure

Packs talk to the machine only through the target protocol of
schedlab/targets.py (run/put/get/tmpdir), so the same code runs locally, in
dom0 or in a guest over SSH.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class PackError(Exception):
    """The pack cannot run: bad parameter, missing tool, failed preparation."""


class PackOutputError(PackError):
    """A benchmark printed something the parser does not understand.

    No record is written for such a run; the message names the run and quotes
    the offending text."""

    def __init__(self, run_id: str, message: str, offending_text: str):
        self.run_id = run_id
        self.message = message
        self.offending_text = offending_text
        text = offending_text if len(offending_text) <= 600 else "..." + offending_text[-600:]
        super().__init__(f"run {run_id}: {message}; offending output: {text!r}")


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    higher_is_better: bool
    description: str = ""

    @property
    def direction(self) -> str:
        return "higher" if self.higher_is_better else "lower"

    def describe(self) -> dict:
        return {"unit": self.unit, "better": self.direction, "description": self.description}


# kinds of parameter values; values from the command line are strings
def _to_int(v) -> int:
    if isinstance(v, bool):
        raise ValueError("not an integer")
    return int(v)


def _to_ints(v) -> list[int]:
    if isinstance(v, (list, tuple)):
        vals = [_to_int(x) for x in v]
    elif isinstance(v, int) and not isinstance(v, bool):
        vals = [v]
    else:
        vals = [int(x) for x in str(v).replace(" ", "").split(",") if x]
    if not vals:
        raise ValueError("empty list")
    return vals


def _to_str(v) -> str:
    if not isinstance(v, (str, int, float)) or isinstance(v, bool):
        raise ValueError("not a string")
    return str(v)


def _to_bool(v) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).lower()
    if s in ("1", "yes", "true", "on"):
        return True
    if s in ("0", "no", "false", "off"):
        return False
    raise ValueError("not a boolean (yes/no)")


KINDS: dict[str, Callable[[Any], Any]] = {
    "int": _to_int,
    "float": float,
    "str": _to_str,
    "ints": _to_ints,
    "bool": _to_bool,
}


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # int, float, str, bool, ints (comma-separated list)
    default: Any  # a value, or a function of the target's facts
    doc: str
    choices: tuple = ()
    minimum: float | None = None

    def value(self, raw, facts: dict) -> Any:
        if raw is None:
            raw = self.default(facts) if callable(self.default) else self.default
        try:
            v = KINDS[self.kind](raw)
        except (TypeError, ValueError) as e:
            raise PackError(f"parameter {self.name}={raw!r}: expected {self.kind} ({e})") from None
        if self.choices and v not in self.choices:
            raise PackError(f"parameter {self.name}={v!r}: must be one of {', '.join(map(str, self.choices))}")
        if self.minimum is not None:
            for x in v if isinstance(v, list) else [v]:
                if isinstance(x, (int, float)) and x < self.minimum:
                    raise PackError(f"parameter {self.name}={raw!r}: must be at least {self.minimum:g}")
        if isinstance(v, list):
            v = sorted(set(v))
        return v


@dataclass
class Context:
    """One pack run on one target: what prepare/run_once/cleanup share."""

    target: Any
    workdir: str  # scratch directory on the target (tmpfs)
    params: dict  # resolved parameters (the sweep parameter is a list)
    facts: dict  # the target's cpus, memory, kernel, ...
    seed: int  # the base seed of this pack run
    state: dict = field(default_factory=dict)  # filled by prepare, read by cleanup

    def path(self, *parts: str) -> str:
        return "/".join([self.workdir.rstrip("/"), *parts])

    def run(self, argv, timeout: float = 120, input: str | None = None, check: bool = True):
        return self.target.run(list(argv), timeout=timeout, input=input, check=check)


def cpu_sweep(facts: dict, factors=(0, 0.5, 1, 2)) -> list[int]:
    """1, N/2, N, 2N for a target with N CPUs (factor 0 means 1)."""
    n = max(1, int(facts.get("cpus", 1)))
    return sorted({max(1, int(n * f)) if f else 1 for f in factors})


def gather_facts(target) -> dict:
    """What defaults scale with: CPUs, available memory, kernel, user (run on the target)."""
    script = 'nproc; uname -r; uname -m; id -u; grep -E "^(MemAvailable|MemTotal):" /proc/meminfo'
    out = target.run(["sh", "-c", script], timeout=30).stdout.splitlines()
    try:
        facts = {"cpus": int(out[0]), "kernel": out[1].strip(), "machine": out[2].strip(), "uid": int(out[3])}
        mem = {}
        for line in out[4:]:
            k, v = line.split(":", 1)
            mem[k.strip()] = int(v.split()[0])
        facts["mem_total_mib"] = mem["MemTotal"] // 1024
        facts["mem_available_mib"] = mem.get("MemAvailable", mem["MemTotal"]) // 1024
    except (IndexError, ValueError, KeyError) as e:
        raise PackError(
            f"target {getattr(target, 'name', target)}: unexpected answer to {script!r}: {out!r} ({e})"
        ) from None
    return facts


# -- timing a command on the target -----------------------------------------------
# The clock is read on the target (not around an SSH round trip). The wrapper
# prints one line and the shell's `times` (user/system CPU of its children).
_TIMED = r"""cd "$1" || exit 125
out=$2; err=$3; shift 3
s=$(date +%s%N)
"$@" >"$out" 2>"$err"
rc=$?
e=$(date +%s%N)
echo "schedlab-timed: exit=$rc start_ns=$s end_ns=$e"
times
if [ "$rc" -ne 0 ]; then tail -c 3000 "$err" >&2; fi
exit $rc"""


def timed_argv(argv: list[str], cwd: str, stdout: str, stderr: str) -> list[str]:
    """argv run in cwd with its output to files, timed on the target."""
    return ["sh", "-c", _TIMED, "sh", cwd, stdout, stderr, *map(str, argv)]


_TIMED_RE = re.compile(r"^schedlab-timed: exit=(\d+) start_ns=(\d+) end_ns=(\d+)\s*$", re.M)
_TIMES_RE = re.compile(r"^(\d+)m([\d.]+)s (\d+)m([\d.]+)s\s*$", re.M)


def parse_timed(output: str, run_id: str) -> dict[str, float]:
    """elapsed_s, user_s, sys_s from the wrapper's output."""
    m = _TIMED_RE.findall(output)
    if len(m) != 1:
        raise PackOutputError(
            run_id, f"expected one 'schedlab-timed: exit=N start_ns=N end_ns=N' line (found {len(m)})", output
        )
    rc, s, e = map(int, m[0])
    if rc != 0:
        raise PackOutputError(run_id, f"the timed command exited with status {rc}", output)
    if e <= s:
        raise PackOutputError(run_id, "the end time is not after the start time", output)
    times = _TIMES_RE.findall(output)
    if len(times) != 2:  # line 1: the shell itself, line 2: its children
        raise PackOutputError(run_id, "expected two lines of `times` output (NmN.NNs NmN.NNs)", output)
    um, us, sm, ss = times[1]
    return {"elapsed_s": (e - s) / 1e9, "user_s": int(um) * 60 + float(us), "sys_s": int(sm) * 60 + float(ss)}


def number(text: str, pattern: str, run_id: str, what: str, flags=re.M) -> float:
    """The single number matched by `pattern` (group 1) in text; anything else is an error."""
    found = re.findall(pattern, text, flags)
    if len(found) != 1:
        raise PackOutputError(run_id, f"expected exactly one {what} (pattern {pattern!r}), found {len(found)}", text)
    raw = found[0] if isinstance(found[0], str) else found[0][0]
    try:
        v = float(raw)
    except ValueError:
        raise PackOutputError(run_id, f"{what} is not a number", raw) from None
    if not math.isfinite(v):
        raise PackOutputError(run_id, f"{what} is not finite", raw)
    return v


class Pack:
    name: str = "base"
    version: str = "1"  # bump when what a run measures changes (part of the run key)
    description: str = ""
    measures: str = ""  # one paragraph for docs/packs.md
    debs: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()
    sweep: str | None = None  # name of the swept parameter, if any
    metrics: tuple[Metric, ...] = ()
    version_argv: tuple[str, ...] = ()  # prints the tool's version (provenance)

    # -- parameters ----------------------------------------------------------------
    def resolve(self, given: dict, facts: dict) -> dict:
        known = {p.name: p for p in self.params}
        unknown = [k for k in given if k not in known]
        if unknown:
            raise PackError(f"pack {self.name}: unknown parameter(s) {', '.join(unknown)} (known: {', '.join(known)})")
        params = {name: p.value(given.get(name), facts) for name, p in known.items()}
        self.check_params(params, facts)
        return params

    def check_params(self, params: dict, facts: dict) -> None:
        """Extra checks across parameters (override)."""

    def points(self, params: dict) -> list[dict]:
        """One point per value of the sweep parameter (all other parameters fixed)."""
        if not self.sweep:
            return [dict(params)]
        return [{**params, self.sweep: v} for v in params[self.sweep]]

    def point_id(self, point: dict) -> str:
        return f"{self.sweep}-{point[self.sweep]}" if self.sweep else "default"

    # -- target ----------------------------------------------------------------------
    def missing_tools(self, target) -> list[str]:
        if not self.tools:
            return []
        script = 'for t; do command -v "$t" >/dev/null 2>&1 || echo "$t"; done'
        res = target.run(["sh", "-c", script, "sh", *self.tools], timeout=30)
        return res.stdout.split()

    def tool_version(self, target) -> str:
        if not self.version_argv:
            return ""
        res = target.run(list(self.version_argv), timeout=30, check=False)
        text = ((res.stdout or "") + "\n" + (res.stderr or "")).strip()
        return text.splitlines()[0].strip() if text else ""

    # -- the four steps ----------------------------------------------------------------
    def prepare(self, ctx: Context) -> None:
        pass

    def run_once(self, ctx: Context, point: dict, seed: int, run_id: str) -> str:
        raise NotImplementedError

    def parse(self, output: str, run_id: str = "-") -> dict[str, float]:
        raise NotImplementedError

    def cleanup(self, ctx: Context) -> None:
        pass

    # -- checks ----------------------------------------------------------------------
    def check_metrics(self, values: dict, output: str, run_id: str) -> dict[str, float]:
        want = [m.name for m in self.metrics]
        missing = [n for n in want if n not in values]
        if missing:
            raise PackOutputError(run_id, f"no value for metric(s) {', '.join(missing)}", output)
        for n in want:
            if not math.isfinite(values[n]) or values[n] < 0:
                raise PackOutputError(run_id, f"metric {n} = {values[n]!r} is not a finite non-negative number", output)
        return {n: float(values[n]) for n in want}

    def describe(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "debs": list(self.debs),
            "sweep": self.sweep,
            "metrics": {m.name: m.describe() for m in self.metrics},
        }


def quote(argv) -> str:
    return shlex.join(map(str, argv))
