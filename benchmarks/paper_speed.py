"""How long a researcher waits for the paper: `make clean-derived` then `make paper` (every
notebook, table and figure and the PDF re-derived; raw records on disk are reused as usual),
then `make paper` again, which must find nothing to do. Prints the time per rule of the clean
build (from Snakemake's job log lines), CPU seconds beside wall seconds (the machine is
shared: CPU time moves less with the load) and the load; the last line is
`clean build: N s, no-op: M s` (targets: <= 90 s and <= 2 s, dependencies installed).

    .venv/bin/python benchmarks/paper_speed.py [--jobs 1] [--noop-runs 3]

--jobs N is `make paper JOBS=N` (default: the profile's `cores: all`). Run it where no other
Snakemake works in the same checkout (it would hold the lock).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _make(args: list[str]) -> tuple[float, float, str, int]:
    """Wall and CPU seconds (make and every process it waited for), output, exit status."""
    c0, t0 = _cpu(), time.perf_counter()
    p = subprocess.run(["make", "--no-print-directory", *args], cwd=REPO, capture_output=True, text=True)
    return time.perf_counter() - t0, _cpu() - c0, p.stdout + p.stderr, p.returncode


def per_rule(log: str) -> dict[str, tuple[int, float]]:
    """{rule: (jobs, seconds)} from Snakemake's `[date]`, `rule X:`, `jobid: N` and
    `Finished jobid: N` lines (whole seconds; exact when jobs run one at a time)."""
    started: dict[str, tuple[str, dt.datetime]] = {}
    out: dict[str, list] = defaultdict(lambda: [0, 0.0])
    now = rule = None
    for line in log.splitlines():
        if m := re.match(r"\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$", line):
            now = dt.datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        elif m := re.match(r"(?:local)?rule (\w+):$", line):
            rule = m.group(1)
        elif (m := re.match(r"\s+jobid: (\d+)$", line)) and rule and now:
            started[m.group(1)] = (rule, now)
            rule = None
        elif (m := re.match(r"Finished jobid: (\d+)", line)) and m.group(1) in started and now:
            r, t0 = started.pop(m.group(1))
            out[r][0] += 1
            out[r][1] += (now - t0).total_seconds()
    return {r: (n, s) for r, (n, s) in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, help="make paper JOBS=N (default: all cores)")
    ap.add_argument("--noop-runs", type=int, default=3, help="no-op builds timed (the median is reported)")
    a = ap.parse_args(argv)
    jobs = [f"JOBS={a.jobs}"] if a.jobs else []

    print(f"load before: {_load()}")
    _, _, out, rc = _make(["clean-derived"])
    if rc:
        print(out[-3000:], file=sys.stderr)
        return 1
    clean, cpu, out, rc = _make(["paper", *jobs])
    if rc:
        print(out[-5000:], file=sys.stderr)
        print(f"make paper failed after {clean:.1f} s", file=sys.stderr)
        return 1
    for r, (n, s) in sorted(per_rule(out).items(), key=lambda kv: -kv[1][1]):
        print(f"  {r:16s} {n:3d} jobs {s:6.0f} s")
    print(f"clean build: {clean:.1f} s wall, {cpu:.1f} s cpu (load after: {_load()})")

    noops = []
    for i in range(a.noop_runs):
        t, cpu, out, rc = _make(["paper", *jobs])
        if rc:
            print(out[-3000:], file=sys.stderr)
            return 1
        ran = [r for r, (n, _) in per_rule(out).items() if n]
        note = "" if not ran else f"  NOT a no-op: ran {', '.join(ran)}"
        print(f"no-op {i + 1}: {t:.2f} s wall, {cpu:.2f} s cpu{note}")
        noops.append(t)
    print(f"load after: {_load()}")
    print(f"clean build: {clean:.0f} s, no-op: {statistics.median(noops):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
