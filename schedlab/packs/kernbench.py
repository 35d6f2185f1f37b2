"""kernbench-style kernel build from Debian's linux-source-6.1 tarball, on tmpfs.

prepare: unpack /usr/src/linux-source-6.1.tar.xz into the target's scratch
directory (tmpfs; optionally only some members, see `extract`), then
`make <config>` (default `tinyconfig`; on x86_64 with ARCH=x86_64 so the
kernel is 64-bit, as allnoconfig would otherwise pick i386).
Each repetition: `make clean` (not timed), then `make -j<jobs> <make_target>`
timed on the target. The default target is `vmlinux` (a tinyconfig vmlinux took
about 250 s user + 50 s system CPU on the 2-vCPU EPYC development VM); the
tests build `scripts_basic` of a partly unpacked tree.
"""

from __future__ import annotations

from schedlab.packs.base import Metric, Pack, PackError, Param, cpu_sweep, parse_timed, timed_argv

TEST_EXTRACT = "Makefile Kconfig scripts include arch/x86 kernel/configs tools/include *Kconfig* *Makefile* *Kbuild*"


class Kernbench(Pack):
    name = "kernbench"
    description = "kernbench: time to build a kernel (seconds) at make -j 1, N/2, N, 2N"
    measures = (
        "A mixed CPU, fork/exec, page-cache and memory workload: thousands of short gcc "
        "processes plus make's coordination. It is the classic test of PV spinlocks "
        "(kernel lock contention in fork/exit/mm and the page cache) and of vCPU "
        "overcommit at -j 2N."
    )
    debs = ("linux-source-6.1", "make", "gcc", "libc6-dev", "flex", "bison", "bc", "libelf-dev", "xz-utils")
    tools = ("make", "cc", "flex", "bison", "bc", "tar", "xz")
    version_argv = ("cc", "--version")
    sweep = "jobs"
    params = (
        Param("jobs", "ints", cpu_sweep, "make -j values (default 1, N/2, N, 2N)", minimum=1),
        Param("tarball", "str", "/usr/src/linux-source-6.1.tar.xz", "kernel source tarball on the target"),
        Param(
            "config",
            "str",
            "tinyconfig",
            "make target that writes .config (tinyconfig, allnoconfig, defconfig)",
            choices=("tinyconfig", "allnoconfig", "defconfig"),
        ),
        Param("make_target", "str", "vmlinux", "what each repetition builds (vmlinux; the tests build scripts_basic)"),
        Param(
            "arch",
            "str",
            lambda f: "x86_64" if f.get("machine") == "x86_64" else "",
            "ARCH= for make (default x86_64 on x86_64 targets, else the kernel's default)",
        ),
        Param(
            "extract",
            "str",
            "",
            f"space-separated tar member patterns to unpack (default: everything); the tests use {TEST_EXTRACT!r}",
        ),
    )
    metrics = (
        Metric("elapsed_s", "s", False, "wall-clock build time"),
        Metric("user_s", "s", False, "user CPU time of the build (all processes)"),
        Metric("sys_s", "s", False, "system CPU time of the build"),
    )

    def check_params(self, params, facts):
        bad = [c for c in params["make_target"] + params["arch"] if not (c.isalnum() or c in "/_.-")]
        if bad or params["make_target"].startswith("-"):
            raise PackError(
                f"parameter make_target={params['make_target']!r} / arch={params['arch']!r}: "
                "only letters, digits and / _ . - are allowed"
            )

    def _make(self, ctx, *args):
        argv = ["make", "-C", ctx.state["src"]]
        if ctx.params["arch"]:
            argv.append(f"ARCH={ctx.params['arch']}")
        return argv + list(args)

    def prepare(self, ctx):
        p = ctx.params
        src = ctx.path("linux")
        ctx.run(["mkdir", "-p", src], timeout=30)
        argv = ["tar", "-xJf", p["tarball"], "-C", src, "--strip-components=1"]
        members = p["extract"].split()
        if members:
            top = ctx.run(["sh", "-c", 'tar -tJf "$1" | head -n 1', "sh", p["tarball"]], timeout=300).stdout.strip()
            top = top.split("/", 1)[0]
            if not top:
                raise PackError(f"kernbench: {p['tarball']} looks empty")
            argv += ["--wildcards", *(f"{top}/{m}" for m in members)]
        ctx.run(argv, timeout=1800)
        ctx.state["src"] = src
        ctx.run(self._make(ctx, "-s", p["config"]), timeout=600)
        # the generated config headers too (`make clean` keeps them): otherwise only the first
        # timed build after each prepare pays for them (~15 % of lib/math/ under icount)
        ctx.run(self._make(ctx, "-s", "syncconfig"), timeout=600)
        ctx.state["config_sha256"] = ctx.run(["sha256sum", f"{src}/.config"], timeout=30).stdout.split()[0]

    def run_once(self, ctx, point, seed, run_id):
        if ctx.state.get("built"):  # the first build starts from the fresh tree anyway
            ctx.run(self._make(ctx, "-s", "clean"), timeout=600)
        ctx.state["built"] = True
        argv = self._make(ctx, f"-j{point['jobs']}", point["make_target"])
        return ctx.run(timed_argv(argv, ctx.workdir, ctx.path("build.log"), ctx.path("build.err")), timeout=7200).stdout

    def parse(self, output, run_id="-"):
        return parse_timed(output, run_id)


PACK = Kernbench()
