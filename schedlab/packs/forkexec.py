"""forkexec: fork+exec+exit latency (microseconds), standing in for LMBench's lat_proc exec (S4).

prepare: the C source (schedlab/packs/forkexec.c) is copied to the target and
compiled there with `cc -O2` (`-static` with link=static). A target without a
compiler gets a binary built here instead: `prebuilt=PATH` (a local file), or,
when this machine has cc and the same architecture, a static build made here.
Each repetition runs `forkexec -n ITERATIONS -w WARMUP`; the metric is the
median over the iterations.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from schedlab.packs.base import Metric, Pack, PackError, PackOutputError, Param, number

SOURCE = Path(__file__).with_name("forkexec.c")


class ForkExec(Pack):
    name = "forkexec"
    description = "forkexec: fork+exec+exit latency (microseconds, median over N iterations)"
    measures = (
        "Process creation cost: fork() copies the page tables, exec() replaces them, exit() "
        "tears them down and the parent is woken by wait(). Under Xen PV every page-table "
        "update is a hypercall or trapped write, so this is where paravirtualisation and "
        "memory virtualisation costs are most visible (LMBench's lat_proc exec)."
    )
    debs = ("gcc", "libc6-dev")
    tools = ()  # cc is optional (a prebuilt binary can be copied instead)
    version_argv = ()
    sweep = None
    params = (
        Param("iterations", "int", 2000, "timed fork+exec+wait iterations per repetition", minimum=1),
        Param("warmup_iterations", "int", 100, "untimed iterations before them", minimum=0),
        Param(
            "link",
            "str",
            "dynamic",
            "how the binary (and so the exec'd helper) is linked",
            choices=("dynamic", "static"),
        ),
        Param("prebuilt", "str", "", "local path of a forkexec binary, for targets without cc"),
    )
    metrics = (
        Metric("median_us", "us", False, "median fork+exec+exit+wait time"),
        Metric("mean_us", "us", False, "mean fork+exec+exit+wait time"),
        Metric("p95_us", "us", False, "95th percentile"),
        Metric("min_us", "us", False, "fastest iteration"),
    )

    def prepare(self, ctx):
        p = ctx.params
        binary = ctx.path("forkexec")
        has_cc = ctx.run(["sh", "-c", "command -v cc"], timeout=30, check=False).returncode == 0
        if p["prebuilt"]:
            ctx.target.put(p["prebuilt"], binary)
            ctx.state["build"] = f"prebuilt {p['prebuilt']}"
        elif has_cc:
            src = ctx.path("forkexec.c")
            ctx.target.put(str(SOURCE), src)
            argv = ["cc", "-O2", "-o", binary, src] + (["-static"] if p["link"] == "static" else [])
            ctx.run(argv, timeout=300)
            ctx.state["build"] = f"{p['link']}, cc -O2 on the target"
        else:
            ctx.state["build"] = self._build_here(ctx, binary)
        ctx.run(["chmod", "0755", binary], timeout=30)
        ctx.state["binary"] = binary
        # warm-up and smoke test: a few iterations must parse
        out = ctx.run([binary, "-n", "10", "-w", "0"], timeout=120).stdout
        self.parse(out, "prepare")

    def _build_here(self, ctx, binary):
        cc = shutil.which("cc")
        if not cc or ctx.facts.get("machine") != platform.machine():
            raise PackError(
                f"forkexec: target {ctx.target.name} has no cc, and no prebuilt binary was given "
                f"(param prebuilt=PATH; this machine is {platform.machine()}, the target "
                f"{ctx.facts.get('machine')})"
            )
        with tempfile.TemporaryDirectory() as d:
            local = os.path.join(d, "forkexec")
            r = subprocess.run([cc, "-O2", "-static", "-o", local, str(SOURCE)], capture_output=True, text=True)
            if r.returncode:
                raise PackError(f"forkexec: building a static binary here failed: {r.stderr.strip()[-1000:]}")
            ctx.target.put(local, binary)
        return "static, built on the controller"

    def run_once(self, ctx, point, seed, run_id):
        argv = [ctx.state["binary"], "-n", str(point["iterations"]), "-w", str(point["warmup_iterations"])]
        return ctx.run(argv, timeout=60 + point["iterations"] * 0.05).stdout

    def parse(self, output, run_id="-"):
        line = r"^forkexec: iterations=(\d+) median_us=([\d.]+) mean_us=([\d.]+) min_us=([\d.]+) p95_us=([\d.]+) max_us=([\d.]+)\s*$"
        number(output, line, run_id, "'forkexec: iterations=...' line")
        n, med, mean, mn, p95, mx = map(float, re.search(line, output, re.M).groups())
        if not (0 < mn <= med <= p95 <= mx):
            raise PackOutputError(run_id, "inconsistent statistics (need 0 < min <= median <= p95 <= max)", output)
        return {"median_us": med, "mean_us": mean, "p95_us": p95, "min_us": mn}


PACK = ForkExec()
