"""sysbench: one pack module, two of its tests (S4), each a pack of its own name.

    sysbench_memory   memory throughput: each thread copies blocks of `block_size` into
                      (write) or out of (read) a buffer until `total_size` is moved or `time`
                      seconds pass; the metric is the MiB/s sysbench reports over the run
    sysbench_threads  scheduler/lock throughput: `threads` workers each loop: take one of
                      `locks` mutexes, sched_yield() `yields` times, release. One loop is one
                      event; events/s is the primary metric, the mean event latency is kept too

Both run `sysbench TEST --threads=N --time=T [the test's options] --rand-seed=S run` (the
test's options from its parameters, `OPTIONS`), sweep the thread count and parse sysbench's
text report.
"""

from __future__ import annotations

from schedlab.packs.base import Metric, Pack, PackOutputError, Param, cpu_sweep, number


class Sysbench(Pack):
    """One sysbench test: `test` names it, OPTIONS maps its parameters to sysbench's options."""

    test = ""
    OPTIONS: tuple[tuple[str, str], ...] = ()  # (parameter, sysbench option)
    debs = ("sysbench",)
    tools = ("sysbench",)
    version_argv = ("sysbench", "--version")
    sweep = "threads"

    def run_once(self, ctx, point, seed, run_id):
        argv = [
            "sysbench",
            self.test,
            f"--threads={point['threads']}",
            f"--time={point['time']}",
            *(f"--{option}={point[param]}" for param, option in self.OPTIONS),
            f"--rand-seed={seed % 2**31 or 1}",
            "run",
        ]
        return ctx.run(argv, timeout=point["time"] * 3 + 60).stdout


TIME = Param("time", "int", 10, "seconds per repetition", minimum=1)


class SysbenchMemory(Sysbench):
    name = "sysbench_memory"
    test = "memory"
    description = "sysbench memory: memory throughput (MiB/s) at several thread counts"
    measures = (
        "Memory bandwidth as seen by a guest: threads write (or read) 1 MiB blocks to a "
        "buffer for a fixed time. Under Xen it shows the cost of the guest's memory "
        "virtualisation (EPT/shadow, NUMA placement) and, with more threads than vCPUs, of "
        "vCPU scheduling."
    )
    params = (
        Param("threads", "ints", cpu_sweep, "thread counts (default 1, N/2, N, 2N for N vCPUs)", minimum=1),
        TIME,
        Param("block_size", "str", "1M", "--memory-block-size (e.g. 1K, 1M)"),
        Param("total_size", "str", "1000T", "--memory-total-size: large, so `time` ends the run"),
        Param("oper", "str", "write", "--memory-oper", choices=("read", "write")),
        Param("access_mode", "str", "seq", "--memory-access-mode", choices=("seq", "rnd")),
    )
    OPTIONS = (
        ("block_size", "memory-block-size"),
        ("total_size", "memory-total-size"),
        ("oper", "memory-oper"),
        ("access_mode", "memory-access-mode"),
    )
    metrics = (
        Metric("mib_per_s", "MiB/s", True, "memory throughput over the run"),
        Metric("ops_per_s", "ops/s", True, "block operations per second"),
    )

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


class SysbenchThreads(Sysbench):
    name = "sysbench_threads"
    test = "threads"
    description = "sysbench threads: yield/mutex loop throughput (events/s) at several thread counts"
    measures = (
        "Scheduler and lock hand-off cost: threads repeatedly lock a mutex and call "
        "sched_yield(). With more threads than vCPUs the result depends on how fast the "
        "guest kernel, and under Xen the hypervisor's scheduler, switch between runnable "
        "threads; lock-holder preemption shows up as lower events/s and higher latency."
    )
    params = (
        Param(
            "threads", "ints", lambda f: cpu_sweep(f, (0, 1, 2, 4)), "thread counts (default 1, N, 2N, 4N)", minimum=1
        ),
        TIME,
        Param("yields", "int", 1000, "--thread-yields: yields per event", minimum=1),
        Param("locks", "int", 8, "--thread-locks: mutexes shared by the threads", minimum=1),
    )
    OPTIONS = (("yields", "thread-yields"), ("locks", "thread-locks"))
    metrics = (
        Metric("events_per_s", "events/s", True, "lock+yield loops completed per second (all threads)"),
        Metric("latency_avg_ms", "ms", False, "mean time of one event"),
        Metric("latency_p95_ms", "ms", False, "95th percentile time of one event"),
    )

    def parse(self, output, run_id="-"):
        total = number(output, r"^\s*total time:\s+([\d.]+)s\s*$", run_id, "'total time: Ns' line")
        events = number(output, r"^\s*total number of events:\s+(\d+)\s*$", run_id, "'total number of events' line")
        avg = number(output, r"^\s*avg:\s+([\d.]+)\s*$", run_id, "latency 'avg:' line")
        p95 = number(output, r"^\s*95th percentile:\s+([\d.]+)\s*$", run_id, "latency '95th percentile:' line")
        if total <= 0 or events <= 0:
            raise PackOutputError(run_id, f"no events ({events:g}) or zero run time ({total:g} s)", output)
        return {"events_per_s": events / total, "latency_avg_ms": avg, "latency_p95_ms": p95}


MEMORY = SysbenchMemory()
THREADS = SysbenchThreads()
