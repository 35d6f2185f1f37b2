"""sysbench memory: memory throughput (S4).

Each thread copies blocks of `block_size` into (write) or out of (read) a
buffer until `total_size` is moved or `time` seconds pass; the metric is the
MiB/s sysbench reports over the whole run.
"""

from __future__ import annotations

from schedlab.packs.base import Metric, Pack, Param, cpu_sweep, number


class SysbenchMemory(Pack):
    name = "sysbench_memory"
    description = "sysbench memory: memory throughput (MiB/s) at several thread counts"
    measures = (
        "Memory bandwidth as seen by a guest: threads write (or read) 1 MiB blocks to a "
        "buffer for a fixed time. Under Xen it shows the cost of the guest's memory "
        "virtualisation (EPT/shadow, NUMA placement) and, with more threads than vCPUs, of "
        "vCPU scheduling."
    )
    debs = ("sysbench",)
    tools = ("sysbench",)
    version_argv = ("sysbench", "--version")
    sweep = "threads"
    params = (
        Param("threads", "ints", cpu_sweep, "thread counts (default 1, N/2, N, 2N for N vCPUs)", minimum=1),
        Param("time", "int", 10, "seconds per repetition", minimum=1),
        Param("block_size", "str", "1M", "--memory-block-size (e.g. 1K, 1M)"),
        Param("total_size", "str", "1000T", "--memory-total-size: large, so `time` ends the run"),
        Param("oper", "str", "write", "--memory-oper", choices=("read", "write")),
        Param("access_mode", "str", "seq", "--memory-access-mode", choices=("seq", "rnd")),
    )
    metrics = (
        Metric("mib_per_s", "MiB/s", True, "memory throughput over the run"),
        Metric("ops_per_s", "ops/s", True, "block operations per second"),
    )

    def run_once(self, ctx, point, seed, run_id):
        argv = [
            "sysbench",
            "memory",
            f"--threads={point['threads']}",
            f"--time={point['time']}",
            f"--memory-block-size={point['block_size']}",
            f"--memory-total-size={point['total_size']}",
            f"--memory-oper={point['oper']}",
            f"--memory-access-mode={point['access_mode']}",
            f"--rand-seed={seed % 2**31 or 1}",
            "run",
        ]
        return ctx.run(argv, timeout=point["time"] * 3 + 60).stdout

    def parse(self, output, run_id="-"):
        mib = number(
            output,
            r"^\s*[\d.]+ MiB transferred \(\s*([\d.]+) MiB/sec\)\s*$",
            run_id,
            "'N MiB transferred (N MiB/sec)' line",
        )
        ops = number(
            output,
            r"^\s*Total operations: \d+ \(\s*([\d.]+) per second\)\s*$",
            run_id,
            "'Total operations: N (N per second)' line",
        )
        return {"mib_per_s": mib, "ops_per_s": ops}


PACK = SysbenchMemory()
