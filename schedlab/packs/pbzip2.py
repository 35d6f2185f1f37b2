"""pbzip2: parallel bzip2 compression of a seeded pseudo-random text file on tmpfs.

The input is generated once in prepare, on the controlling machine, from the
seed (so it is byte-identical on every testbed; its sha256 goes into the
records), and copied into the target's scratch directory (tmpfs). Random bytes
are mapped onto a skewed 32-symbol alphabet, so bzip2 has real work to do
(about 4 bits of entropy per byte; it compresses to roughly half). Each
repetition compresses it to /dev/null with `threads` threads; the time is read
on the target.
"""

from __future__ import annotations

import hashlib
import os
import random
import tempfile

from schedlab.packs.base import Metric, Pack, PackError, Param, cpu_sweep, parse_timed, timed_argv

# a skewed alphabet: frequent letters appear more often (256 slots)
_ALPHABET = (
    b"e" * 26
    + b"t" * 19
    + b"a" * 17
    + b"o" * 16
    + b"i" * 15
    + b"n" * 14
    + b"s" * 13
    + b"h" * 12
    + b"r" * 12
    + b"d" * 9
    + b"l" * 8
    + b"c" * 6
    + b"u" * 6
    + b"m" * 5
    + b"w" * 5
    + b"f" * 5
    + b"g" * 4
    + b"y" * 4
    + b"p" * 4
    + b"b" * 3
    + b"v" * 2
    + b"k" * 2
    + b"j"
    + b"x"
    + b"q"
    + b"z"
    + b" " * 36
    + b"\n" * 5
    + b"," * 2
    + b"." * 2
)
assert len(_ALPHABET) == 256, len(_ALPHABET)


def write_input(path: str, size_bytes: int, seed: int) -> str:
    """Write the input file; return its sha256. Deterministic in (size, seed)."""
    rng = random.Random(seed)
    h = hashlib.sha256()
    chunk = 4 << 20
    with open(path, "wb") as f:
        left = size_bytes
        while left > 0:
            n = min(chunk, left)
            data = rng.randbytes(n).translate(_ALPHABET)
            f.write(data)
            h.update(data)
            left -= n
    return h.hexdigest()


class Pbzip2(Pack):
    name = "pbzip2"
    description = "pbzip2: compress a seeded random text file on tmpfs (seconds) at several thread counts"
    measures = (
        "CPU-bound parallel work with little synchronisation: throughput of independent "
        "compression blocks. Wall time at 1..2N threads shows how well the (guest) scheduler "
        "spreads threads over (v)CPUs; with PV spinlocks only the little locking pbzip2 does "
        "matters, so it is a baseline for pure CPU overhead."
    )
    debs = ("pbzip2",)
    tools = ("pbzip2",)
    version_argv = ("pbzip2", "-V")
    sweep = "threads"
    params = (
        Param("threads", "ints", cpu_sweep, "thread counts, pbzip2 -p (default 1, N/2, N, 2N)", minimum=1),
        Param(
            "size_mb",
            "int",
            lambda f: max(8, min(256, f.get("mem_available_mib", 2048) // 8)),
            "input size in MiB (default min(256, available memory/8))",
            minimum=1,
        ),
        Param("block", "int", 9, "bzip2 block size in 100 kB, pbzip2 -b", minimum=1),
        Param("level", "int", 9, "compression level 1..9", minimum=1),
    )
    metrics = (
        Metric("elapsed_s", "s", False, "wall-clock time to compress the file"),
        Metric("user_s", "s", False, "user CPU time of pbzip2 (all threads)"),
        Metric("sys_s", "s", False, "system CPU time of pbzip2"),
    )

    def check_params(self, params, facts):
        if not 1 <= params["level"] <= 9:
            raise PackError(f"parameter level={params['level']}: must be 1..9")
        if params["size_mb"] * 2 > facts.get("mem_available_mib", 1 << 30):
            raise PackError(
                f"parameter size_mb={params['size_mb']}: the file would not fit in tmpfs twice over "
                f"({facts['mem_available_mib']} MiB available)"
            )

    def prepare(self, ctx):
        remote = ctx.path("input.txt")
        fd, local = tempfile.mkstemp(prefix="schedlab-pbzip2-")
        os.close(fd)
        try:
            ctx.state["input_sha256"] = write_input(local, ctx.params["size_mb"] << 20, ctx.seed)
            ctx.target.put(local, remote)
        finally:
            os.unlink(local)
        # warm-up: read it once and check it arrived whole
        out = ctx.run(["sha256sum", remote], timeout=300).stdout.split()
        if not out or out[0] != ctx.state["input_sha256"]:
            raise PackError(
                f"pbzip2: input file on the target has checksum {out[:1]}, expected {ctx.state['input_sha256']}"
            )
        ctx.state["input"] = remote

    def run_once(self, ctx, point, seed, run_id):
        argv = [
            "pbzip2",
            "-c",
            "-k",
            f"-p{point['threads']}",
            f"-b{point['block']}",
            f"-{point['level']}",
            ctx.state["input"],
        ]
        timeout = 120 + point["size_mb"] * 4
        return ctx.run(timed_argv(argv, ctx.workdir, "/dev/null", ctx.path("pbzip2.err")), timeout=timeout).stdout

    def parse(self, output, run_id="-"):
        return parse_timed(output, run_id)


PACK = Pbzip2()
