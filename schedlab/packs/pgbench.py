"""pgbench against a PostgreSQL server started for the run (Debian's postgresql-15).

prepare: initdb into the target's scratch directory (tmpfs), as the
`postgres` user when the target runs us as root (PostgreSQL refuses to run as
root); the server listens only on a unix socket in that private directory
(listen_addresses = '', so the port number only names the socket and cannot
clash with another server); `pgbench -i -s SCALE`.
Each repetition: `pgbench -c CLIENTS -j min(CLIENTS, vCPUs) -T DURATION` with
the default TPC-B-like read-write script (`builtin`), seeded. The server is
stopped in cleanup, also after a failure.
"""

from __future__ import annotations

import re

from schedlab.packs.base import Metric, Pack, PackError, PackOutputError, Param, number

_SAFE_PATH = re.compile(r"^/[A-Za-z0-9/_.-]+$")
MIB_PER_SCALE = 16  # pgbench -i -s 1 is about 15 MiB with indexes


def _clients(facts):
    """1, 2, 4, ... up to 2N, plus N and 2N."""
    n = max(1, int(facts.get("cpus", 1)))
    vals, c = {n, 2 * n}, 1
    while c <= 2 * n:
        vals.add(c)
        c *= 2
    return sorted(vals)


class Pgbench(Pack):
    name = "pgbench"
    description = "pgbench: PostgreSQL TPC-B-like read-write transactions per second at 1..2N clients"
    measures = (
        "An OLTP database: many short transactions, lots of lightweight-lock and spinlock "
        "traffic inside PostgreSQL and the kernel (futexes, semaphores, socket wake-ups), "
        "WAL writes to tmpfs. With clients up to 2x vCPUs it is sensitive to lock-holder "
        "preemption, the case PV spinlocks are for."
    )
    debs = ("postgresql-15", "postgresql-client-15", "util-linux")
    tools = ("pgbench", "runuser")
    version_argv = ("pgbench", "--version")
    sweep = "clients"
    params = (
        Param(
            "clients", "ints", _clients, "client counts, pgbench -c (default 1, 2, 4, ... 2N, with N and 2N)", minimum=1
        ),
        Param("duration", "int", 30, "seconds per repetition, pgbench -T", minimum=1),
        Param(
            "scale",
            "int",
            lambda f: max(1, min(100, f.get("mem_available_mib", 1024) // (4 * MIB_PER_SCALE))),
            "pgbench -i -s: 16 MiB per unit (default: a quarter of available memory, at most 100)",
            minimum=1,
        ),
        Param(
            "builtin", "str", "tpcb-like", "pgbench script (-b)", choices=("tpcb-like", "simple-update", "select-only")
        ),
        Param("pg_bin", "str", "/usr/lib/postgresql/15/bin", "directory of initdb, pg_ctl, postgres"),
        Param("pg_user", "str", "postgres", "OS user the server runs as when the target runs us as root"),
        Param("port", "int", 54329, "port (names the socket in the private socket directory)", minimum=1024),
        Param("shared_buffers", "str", "128MB", "postgresql.conf shared_buffers"),
    )
    metrics = (
        Metric("tps", "transactions/s", True, "transactions per second (without initial connection time)"),
        Metric("latency_avg_ms", "ms", False, "mean transaction latency"),
    )

    def check_params(self, params, facts):
        need = params["scale"] * MIB_PER_SCALE * 2
        if need > facts.get("mem_available_mib", 1 << 30):
            raise PackError(
                f"parameter scale={params['scale']}: the database (~{need // 2} MiB) would not fit "
                f"in memory twice over ({facts['mem_available_mib']} MiB available)"
            )
        if not re.fullmatch(r"[0-9]+[kMG]?B?", params["shared_buffers"]):
            raise PackError(f"parameter shared_buffers={params['shared_buffers']!r}: expected e.g. 128MB")

    # every postgres-side command runs as pg_user when we are root
    def _as_pg(self, ctx, argv):
        if ctx.facts.get("uid") == 0:
            return ["runuser", "-u", ctx.params["pg_user"], "--", *argv]
        return list(argv)

    def _pg(self, ctx, argv, timeout=120, check=True):
        return ctx.run(self._as_pg(ctx, argv), timeout=timeout, check=check)

    def _conn(self, ctx):
        return ["-h", ctx.state["sockdir"], "-p", str(ctx.params["port"]), "-U", "postgres"]

    def prepare(self, ctx):
        p = ctx.params
        if not _SAFE_PATH.match(ctx.workdir):
            raise PackError(
                f"pgbench: scratch directory {ctx.workdir!r} has characters postgresql.conf would need quoted"
            )
        base, data, sockdir = ctx.path("pg"), ctx.path("pg", "data"), ctx.path("pg", "sock")
        ctx.run(["mkdir", "-p", sockdir], timeout=30)
        if ctx.facts.get("uid") == 0:
            # the server's user must reach its directory inside our scratch dir
            ctx.run(["chmod", "0711", ctx.workdir], timeout=30)
            ctx.run(["chown", "-R", f"{p['pg_user']}:", base], timeout=30)
        ctx.state.update(data=data, sockdir=sockdir, log=ctx.path("pg", "server.log"))
        self._pg(
            ctx,
            [
                f"{p['pg_bin']}/initdb",
                "-D",
                data,
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            timeout=300,
        )
        conf = (
            f"listen_addresses = ''\nport = {p['port']}\nunix_socket_directories = '{sockdir}'\n"
            f"shared_buffers = {p['shared_buffers']}\n"
            f"max_connections = {max(100, 2 * max(p['clients']) + 10)}\n"
        )
        ctx.run(self._as_pg(ctx, ["sh", "-c", 'cat >> "$1"', "sh", f"{data}/postgresql.conf"]), timeout=30, input=conf)
        ctx.state["started"] = True  # from here on cleanup stops the server
        self._pg(
            ctx, [f"{p['pg_bin']}/pg_ctl", "-D", data, "-l", ctx.state["log"], "-w", "-t", "120", "start"], timeout=180
        )
        self._pg(
            ctx,
            ["pgbench", "-i", "-q", "-s", str(p["scale"]), *self._conn(ctx), "postgres"],
            timeout=120 + 60 * p["scale"],
        )

    def run_once(self, ctx, point, seed, run_id):
        jobs = min(point["clients"], max(1, ctx.facts.get("cpus", 1)))
        argv = [
            "pgbench",
            *self._conn(ctx),
            "-c",
            str(point["clients"]),
            "-j",
            str(jobs),
            "-T",
            str(point["duration"]),
            "-b",
            point["builtin"],
            f"--random-seed={seed}",
            "postgres",
        ]
        return self._pg(ctx, argv, timeout=point["duration"] * 3 + 120).stdout

    def cleanup(self, ctx):
        if not ctx.state.get("started"):
            return
        data, pg_ctl = ctx.state["data"], f"{ctx.params['pg_bin']}/pg_ctl"
        r = self._pg(ctx, [pg_ctl, "-D", data, "-m", "fast", "-w", "-t", "60", "stop"], timeout=90, check=False)
        if r.returncode != 0:
            status = self._pg(ctx, [pg_ctl, "-D", data, "status"], timeout=30, check=False)
            if status.returncode == 0:  # still running: stop it hard
                self._pg(ctx, [pg_ctl, "-D", data, "-m", "immediate", "-w", "-t", "60", "stop"], timeout=90)

    def parse(self, output, run_id="-"):
        tps = number(
            output,
            r"^tps = ([\d.]+) \(without initial connection time\)\s*$",
            run_id,
            "'tps = N (without initial connection time)' line",
        )
        lat = number(output, r"^latency average = ([\d.]+) ms\s*$", run_id, "'latency average = N ms' line")
        failed = re.search(r"^number of failed transactions: (\d+)", output, re.M)
        if failed and int(failed.group(1)) > 0:
            raise PackOutputError(run_id, f"{failed.group(1)} transactions failed", failed.group(0))
        return {"tps": tps, "latency_avg_ms": lat}


PACK = Pgbench()
