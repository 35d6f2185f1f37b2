"""sysbench threads: scheduler/lock throughput (S4).

`threads` workers each loop: take one of `locks` mutexes, sched_yield()
`yields` times, release. One loop is one event. Throughput (events/s) is the
primary metric; the mean event latency is kept too.
"""

from __future__ import annotations

from schedlab.packs.base import Metric, Pack, PackOutputError, Param, cpu_sweep, number


class SysbenchThreads(Pack):
    name = "sysbench_threads"
    description = "sysbench threads: yield/mutex loop throughput (events/s) at several thread counts"
    measures = (
        "Scheduler and lock hand-off cost: threads repeatedly lock a mutex and call "
        "sched_yield(). With more threads than vCPUs the result depends on how fast the "
        "guest kernel, and under Xen the hypervisor's scheduler, switch between runnable "
        "threads; lock-holder preemption shows up as lower events/s and higher latency."
    )
    debs = ("sysbench",)
    tools = ("sysbench",)
    version_argv = ("sysbench", "--version")
    sweep = "threads"
    params = (
        Param(
            "threads", "ints", lambda f: cpu_sweep(f, (0, 1, 2, 4)), "thread counts (default 1, N, 2N, 4N)", minimum=1
        ),
        Param("time", "int", 10, "seconds per repetition", minimum=1),
        Param("yields", "int", 1000, "--thread-yields: yields per event", minimum=1),
        Param("locks", "int", 8, "--thread-locks: mutexes shared by the threads", minimum=1),
    )
    metrics = (
        Metric("events_per_s", "events/s", True, "lock+yield loops completed per second (all threads)"),
        Metric("latency_avg_ms", "ms", False, "mean time of one event"),
        Metric("latency_p95_ms", "ms", False, "95th percentile time of one event"),
    )

    def run_once(self, ctx, point, seed, run_id):
        argv = [
            "sysbench",
            "threads",
            f"--threads={point['threads']}",
            f"--time={point['time']}",
            f"--thread-yields={point['yields']}",
            f"--thread-locks={point['locks']}",
            f"--rand-seed={seed % 2**31 or 1}",
            "run",
        ]
        return ctx.run(argv, timeout=point["time"] * 3 + 60).stdout

    def parse(self, output, run_id="-"):
        total = number(output, r"^\s*total time:\s+([\d.]+)s\s*$", run_id, "'total time: Ns' line")
        events = number(output, r"^\s*total number of events:\s+(\d+)\s*$", run_id, "'total number of events' line")
        avg = number(output, r"^\s*avg:\s+([\d.]+)\s*$", run_id, "latency 'avg:' line")
        p95 = number(output, r"^\s*95th percentile:\s+([\d.]+)\s*$", run_id, "latency '95th percentile:' line")
        if total <= 0 or events <= 0:
            raise PackOutputError(run_id, f"no events ({events:g}) or zero run time ({total:g} s)", output)
        return {"events_per_s": events / total, "latency_avg_ms": avg, "latency_p95_ms": p95}


PACK = SysbenchThreads()
