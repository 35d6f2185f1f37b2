"""Benchmark packs: registry, parameters, parsers (recorded outputs), targets, the runner and its CLI.

Nothing here needs a Debian package: the parsers are fed recorded outputs from
tests/data/packs, and the runner is driven by a small test pack that only runs
`sh`. Real runs of every pack are in test_packs_local.py.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from schedlab import packrun as cli
from schedlab import packrun as runner
from schedlab import packs, store
from schedlab.packs.base import (
    Metric,
    Pack,
    PackError,
    PackOutputError,
    Param,
    cpu_sweep,
    gather_facts,
    parse_timed,
    timed_argv,
)
from schedlab.targets import LocalTarget, Target, TargetError, TargetTimeout

DATA = Path(__file__).parent / "data" / "packs"
FACTS = {
    "cpus": 4,
    "mem_available_mib": 8192,
    "mem_total_mib": 16384,
    "machine": "x86_64",
    "kernel": "6.1.0-test",
    "uid": 0,
}


def sample(name: str) -> str:
    return (DATA / name).read_text()


# -- registry and the shape of every pack ----------------------------------------------


def test_registry_lists_all_packs():
    assert packs.names() == ["forkexec", "kernbench", "pbzip2", "pgbench", "sysbench_memory", "sysbench_threads"]
    with pytest.raises(PackError, match="unknown pack 'nope'"):
        packs.get("nope")


@pytest.mark.parametrize("name", packs.names())
def test_every_pack_has_the_same_shape(name):
    p = packs.get(name)
    assert p.name == name and isinstance(p, Pack)
    assert p.description and p.measures and p.metrics
    assert all(isinstance(d, str) and d for d in p.debs)
    for m in p.metrics:
        assert isinstance(m, Metric) and m.unit and m.direction in ("higher", "lower")
    names = [prm.name for prm in p.params]
    assert len(names) == len(set(names))
    if p.sweep:
        assert p.sweep in names
    resolved = p.resolve({}, FACTS)  # every default resolves
    pts = p.points(resolved)
    assert pts and all(set(pt) == set(names) for pt in pts)
    ids = [p.point_id(pt) for pt in pts]
    assert len(ids) == len(set(ids))
    # a recorded real output parses to exactly the declared metrics
    out = p.parse(sample(f"{name}.ok.txt"), "r1")
    assert p.check_metrics(out, "", "r1").keys() == {m.name for m in p.metrics}


def test_debs_list():
    assert packs.debs() == [
        "bc",
        "bison",
        "flex",
        "gcc",
        "libc6-dev",
        "libelf-dev",
        "linux-source-6.1",
        "make",
        "pbzip2",
        "postgresql-15",
        "postgresql-client-15",
        "sysbench",
        "util-linux",
        "xz-utils",
    ]
    assert packs.debs(["pgbench"]) == ["postgresql-15", "postgresql-client-15", "util-linux"]


# -- parameters ------------------------------------------------------------------------


def test_cpu_sweep_scales_with_the_target():
    assert cpu_sweep({"cpus": 4}) == [1, 2, 4, 8]
    assert cpu_sweep({"cpus": 1}) == [1, 2]
    assert cpu_sweep({"cpus": 2}, (0, 1, 2, 4)) == [1, 2, 4, 8]


def test_defaults_scale_with_the_target():
    pg = packs.get("pgbench").resolve({}, FACTS)
    assert pg["clients"] == [1, 2, 4, 8]
    assert pg["scale"] == 100  # 8192 MiB / 64, capped at 100
    small = packs.get("pgbench").resolve({}, {**FACTS, "cpus": 3, "mem_available_mib": 512})
    assert small["clients"] == [1, 2, 3, 4, 6] and small["scale"] == 8
    assert packs.get("pbzip2").resolve({}, {**FACTS, "mem_available_mib": 512})["size_mb"] == 64
    assert packs.get("kernbench").resolve({}, FACTS)["jobs"] == [1, 2, 4, 8]
    assert packs.get("kernbench").resolve({}, {**FACTS, "machine": "aarch64"})["arch"] == ""


def test_params_from_the_command_line_are_typed_and_checked():
    p = packs.get("pgbench")
    r = p.resolve({"clients": "4,1,4", "duration": "2", "scale": "1"}, FACTS)
    assert r["clients"] == [1, 4] and r["duration"] == 2 and r["scale"] == 1
    with pytest.raises(PackError, match=r"unknown parameter\(s\) clinets"):
        p.resolve({"clinets": "4"}, FACTS)
    with pytest.raises(PackError, match="duration='two': expected int"):
        p.resolve({"duration": "two"}, FACTS)
    with pytest.raises(PackError, match="builtin='tpcc'"):
        p.resolve({"builtin": "tpcc"}, FACTS)
    with pytest.raises(PackError, match="clients='0,1': must be at least 1"):
        p.resolve({"clients": "0,1"}, FACTS)
    with pytest.raises(PackError, match="would not fit in memory"):
        p.resolve({"scale": "1000"}, FACTS)
    with pytest.raises(PackError, match="only letters"):
        packs.get("kernbench").resolve({"make_target": "vmlinux; rm -rf /"}, FACTS)


def test_points_and_ids():
    p = packs.get("sysbench_memory")
    pts = p.points(p.resolve({"threads": "1,2"}, FACTS))
    assert [p.point_id(x) for x in pts] == ["threads-1", "threads-2"]
    fe = packs.get("forkexec")
    assert [fe.point_id(x) for x in fe.points(fe.resolve({}, FACTS))] == ["default"]


# -- parsers: recorded real outputs and recorded bad ones ----------------------------------


def test_parse_pgbench():
    p = packs.get("pgbench")
    assert p.parse(sample("pgbench.ok.txt")) == {"tps": 1341.259079, "latency_avg_ms": 2.982}
    with pytest.raises(PackOutputError) as e:
        p.parse(sample("pgbench.aborted.txt"), "default_clients-4_r00_abc")
    assert e.value.run_id == "default_clients-4_r00_abc"
    assert "Run was aborted" in e.value.offending_text
    assert "run default_clients-4_r00_abc: expected exactly one 'tps = N" in str(e.value)
    with pytest.raises(PackOutputError, match="3 transactions failed") as e:
        p.parse(sample("pgbench.failed-tx.txt"), "r")
    assert e.value.offending_text == "number of failed transactions: 3"


def test_parse_sysbench():
    m = packs.get("sysbench_memory").parse(sample("sysbench_memory.ok.txt"))
    assert m == {"mib_per_s": 20032.21, "ops_per_s": 20032.21}
    # sysbench pads small rates: "( 8637.05 per second)" (seen here under load)
    assert packs.get("sysbench_memory").parse(sample("sysbench_memory.padded.txt")) == {
        "mib_per_s": 8637.05,
        "ops_per_s": 8637.05,
    }
    with pytest.raises(PackOutputError, match="MiB transferred"):
        packs.get("sysbench_memory").parse(sample("sysbench_memory.garbage.txt"), "r")
    t = packs.get("sysbench_threads").parse(sample("sysbench_threads.ok.txt"))
    assert t["latency_avg_ms"] == 19.58 and t["latency_p95_ms"] == 26.2
    assert t["events_per_s"] == pytest.approx(408.0, abs=0.01)
    with pytest.raises(PackOutputError, match="no events"):
        packs.get("sysbench_threads").parse(sample("sysbench_threads.noevents.txt"), "r")


def test_parse_timed_outputs():
    k = packs.get("kernbench").parse(sample("kernbench.ok.txt"))
    assert k == {"elapsed_s": pytest.approx(23.383022919), "user_s": 6.65, "sys_s": 2.32}
    b = packs.get("pbzip2").parse(sample("pbzip2.ok.txt"))
    assert b["elapsed_s"] == pytest.approx(2.405545435) and b["user_s"] == 1.77
    with pytest.raises(PackOutputError, match="exited with status 2"):
        parse_timed(sample("timed.failed.txt"), "r")
    with pytest.raises(PackOutputError, match="expected one 'schedlab-timed"):
        parse_timed(sample("timed.no-nanoseconds.txt"), "r")
    # bash prints `times` with 3 decimals: also fine
    bash = "schedlab-timed: exit=0 start_ns=1000 end_ns=2000001000\n0m0.004s 0m0.000s\n1m2.500s 0m0.250s\n"
    assert parse_timed(bash, "r") == {"elapsed_s": 2.0, "user_s": 62.5, "sys_s": 0.25}


def test_parse_forkexec():
    f = packs.get("forkexec").parse(sample("forkexec.ok.txt"))
    assert f == {"median_us": 768.709, "mean_us": 1434.151, "p95_us": 4138.57, "min_us": 611.961}
    with pytest.raises(PackOutputError, match="inconsistent"):
        packs.get("forkexec").parse(sample("forkexec.inconsistent.txt"), "r")


@pytest.mark.parametrize("name", packs.names())
@pytest.mark.parametrize("garbage", ["", "Segmentation fault\n", "\x00\xff binary junk", "tps = nan\n"])
def test_every_parser_rejects_garbage(name, garbage):
    with pytest.raises(PackOutputError) as e:
        packs.get(name).parse(garbage, "the-run")
    assert e.value.run_id == "the-run" and "run the-run:" in str(e.value)


def test_check_metrics_rejects_missing_and_negative():
    p = packs.get("pgbench")
    with pytest.raises(PackOutputError, match="no value for metric"):
        p.check_metrics({"tps": 1.0}, "out", "r")
    with pytest.raises(PackOutputError, match="not a finite non-negative"):
        p.check_metrics({"tps": -1.0, "latency_avg_ms": 1.0}, "out", "r")


# -- the local target --------------------------------------------------------------------


def test_local_target_protocol(tmp_path):
    t = LocalTarget()
    assert isinstance(t, Target) and t.name.startswith("local:")
    r = t.run(["sh", "-c", 'printf "%s|%s" "$1" "$(cat)"', "sh", "a b; $(x)"], timeout=10, input="in")
    assert r.stdout == "a b; $(x)|in"
    with pytest.raises(TypeError):
        t.run("echo hi", timeout=10)
    with pytest.raises(TargetError, match="exit 3"):
        t.run(["sh", "-c", "echo oops >&2; exit 3"], timeout=10)
    assert t.run(["sh", "-c", "exit 3"], timeout=10, check=False).returncode == 3
    with pytest.raises(TargetTimeout):
        t.run(["sleep", "10"], timeout=0.5)
    with pytest.raises(TargetError, match="cannot run"):
        t.run(["/nonexistent-tool"], timeout=5)
    d = t.tmpdir()
    try:
        assert os.path.isdir(d)
        src = tmp_path / "f"
        src.write_text("x")
        t.put(src, f"{d}/g")
        t.get(f"{d}/g", tmp_path / "h")
        assert (tmp_path / "h").read_text() == "x"
    finally:
        t.run(["rm", "-rf", d], timeout=10)


def test_local_target_timeout_kills_the_process_group():
    t = LocalTarget()
    with pytest.raises(TargetTimeout):
        t.run(["sh", "-c", "sleep 30 & echo $! > /dev/null; sleep 30"], timeout=0.5)


def test_timed_wrapper_runs_on_the_target(tmp_path):
    t = LocalTarget()
    out = t.run(
        timed_argv(["sh", "-c", "echo hi; echo err >&2"], str(tmp_path), str(tmp_path / "o"), str(tmp_path / "e")),
        timeout=10,
    ).stdout
    assert parse_timed(out, "r")["elapsed_s"] > 0
    assert (tmp_path / "o").read_text() == "hi\n" and (tmp_path / "e").read_text() == "err\n"
    with pytest.raises(TargetError) as e:
        t.run(
            timed_argv(["sh", "-c", "echo broken >&2; exit 4"], str(tmp_path), "/dev/null", str(tmp_path / "e")),
            timeout=10,
        )
    assert "broken" in str(e.value)


def test_gather_facts():
    f = gather_facts(LocalTarget())
    assert f["cpus"] == os.cpu_count() and f["uid"] == os.getuid() and f["mem_available_mib"] > 0


# -- the runner, with a test pack that needs nothing but sh ----------------------------------


class EchoPack(Pack):
    """Prints a value with sh; `value=garbage` makes it print something unparsable."""

    name = "echo"
    description = measures = "test pack"
    debs = ()
    tools = ("sh",)
    sweep = "n"
    params = (
        Param("n", "ints", lambda f: [1, 2], "sweep"),
        Param("value", "str", "1.5", "printed value"),
        Param("status", "int", 0, "exit status of the benchmark command"),
    )
    metrics = (Metric("value", "s", False),)

    def __init__(self):
        self.calls = []

    def prepare(self, ctx):
        self.calls.append("prepare")
        ctx.run(["sh", "-c", 'echo prepared > "$1"', "sh", ctx.path("state")], timeout=10)
        ctx.state["workdir"] = ctx.workdir

    def run_once(self, ctx, point, seed, run_id):
        self.calls.append(f"run n={point['n']}")
        return ctx.run(
            [
                "sh",
                "-c",
                'echo "value: $1"; echo "some trouble" >&2; exit "$2"',
                "sh",
                point["value"],
                str(point["status"]),
            ],
            timeout=10,
        ).stdout

    def parse(self, output, run_id="-"):
        from schedlab.packs.base import number

        return {"value": number(output, r"^value: ([\d.]+)$", run_id, "'value: N' line")}

    def cleanup(self, ctx):
        self.calls.append("cleanup")


@pytest.fixture
def echo_pack(monkeypatch):
    pack = EchoPack()
    real_get = packs.get
    monkeypatch.setattr(packs, "get", lambda name: pack if name == "echo" else real_get(name))
    return pack


def test_runner_writes_valid_records(tmp_path, echo_pack):
    paths = runner.run_pack(
        "echo", {}, LocalTarget(), reps=2, warmup=1, out_dir=tmp_path, seed=7, log=open(os.devnull, "w")
    )
    assert len(paths) == 6 and all(p.parent == tmp_path / "raw" / "local" / "pack-echo" for p in paths)
    assert store.verify(tmp_path) == {}
    recs = [json.loads(p.read_text()) for p in paths]
    assert [r["warmup"] for r in recs] == [True, True, False, False, False, False]
    assert {r["point_id"] for r in recs} == {"n-1", "n-2"}
    assert all(r["testbed"] == "local" and r["study"] == "pack-echo" and r["metrics"] == {"value": 1.5} for r in recs)
    assert recs[0]["provenance"]["testbed"]["pack"]["metrics"]["value"]["better"] == "lower"
    assert [r["run_order"]["index"] for r in recs] == list(range(6))
    assert echo_pack.calls[0] == "prepare" and echo_pack.calls[-1] == "cleanup"
    # the scratch directory is gone
    workdir = recs[0]["provenance"]["testbed"]["pack"]["prepared"]["workdir"]
    assert not os.path.exists(workdir)
    # a second run reuses every record and does not even prepare
    echo_pack.calls.clear()
    again = runner.run_pack(
        "echo", {}, LocalTarget(), reps=2, warmup=1, out_dir=tmp_path, seed=7, log=open(os.devnull, "w")
    )
    assert again == paths and echo_pack.calls == []
    # one more repetition: only the new runs are made
    more = runner.run_pack(
        "echo", {}, LocalTarget(), reps=3, warmup=1, out_dir=tmp_path, seed=7, log=open(os.devnull, "w")
    )
    assert more[:6] == paths and len(more) == 8
    assert sorted(c for c in echo_pack.calls if c.startswith("run")) == ["run n=1", "run n=2"]


def test_runner_malformed_output_writes_no_record(tmp_path, echo_pack):
    with pytest.raises(PackOutputError) as e:
        runner.run_pack(
            "echo",
            {"value": "garbage"},
            LocalTarget(),
            reps=1,
            warmup=0,
            out_dir=tmp_path,
            seed=1,
            log=open(os.devnull, "w"),
        )
    assert e.value.run_id.startswith("default_n-") and e.value.offending_text == "value: garbage\n"
    folder = tmp_path / "raw" / "local" / "pack-echo"
    assert not list(folder.glob("*")) if folder.exists() else True
    assert echo_pack.calls[-1] == "cleanup"


class GarbledTarget(LocalTarget):
    """A local target whose benchmark commands print garbage (as a broken tool would)."""

    def __init__(self, tool):
        super().__init__()
        self.tool = tool

    def run(self, argv, timeout=60, input=None, check=True):
        res = super().run(argv, timeout=timeout, input=input, check=check)
        if argv[0] == self.tool and "run" in argv:
            return subprocess.CompletedProcess(argv, 0, "sysbench 1.0.20\n*** stack smashing detected ***\n", "")
        return res


def test_runner_with_a_garbled_real_tool(tmp_path):
    pytest.importorskip("jsonschema")
    if not _have("sysbench"):
        pytest.skip("sysbench not installed (Debian package sysbench)")
    with pytest.raises(PackOutputError) as e:
        runner.run_pack(
            "sysbench_memory",
            {"threads": "1", "time": "1"},
            GarbledTarget("sysbench"),
            reps=1,
            warmup=0,
            out_dir=tmp_path,
            seed=1,
            log=open(os.devnull, "w"),
        )
    assert "stack smashing" in e.value.offending_text and e.value.run_id.startswith("default_threads-1_r00_")
    assert not list(tmp_path.rglob("*.json"))


def test_cli_malformed_output_exit_status(tmp_path, echo_pack, capsys):
    rc = cli.main(["run", "echo", "--param", "value=garbage", "--reps", "1", "--warmup", "0", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 3
    assert "error: run default_n-1_r00_" in err or "error: run default_n-2_r00_" in err
    assert "offending output: 'value: garbage\\n'" in err
    assert not list(tmp_path.rglob("*.json"))


def test_cli_failing_tool_exit_status(tmp_path, echo_pack, capsys):
    rc = cli.main(["run", "echo", "--param", "status=3", "--reps", "1", "--warmup", "0", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 1 and "exit 3" in err and "some trouble" in err
    assert not list(tmp_path.rglob("*.json")) and echo_pack.calls[-1] == "cleanup"


def test_cli_runs_and_prints_records(tmp_path, echo_pack, capsys):
    rc = cli.main(
        [
            "run",
            "echo",
            "--param",
            "n=3",
            "--reps",
            "2",
            "--warmup",
            "0",
            "--out",
            str(tmp_path),
            "--variant",
            "kernel-a",
        ]
    )
    out = capsys.readouterr().out.split()
    assert rc == 0 and len(out) == 2 and all(Path(p).exists() and "kernel-a_n-3_" in p for p in out)


@pytest.mark.parametrize(
    "args, msg",
    [
        (["run", "echo", "--param", "oops"], "expected KEY=VALUE"),
        (["run", "echo", "--param", "nn=1"], "unknown parameter"),
        (["run", "echo", "--target", "dom0"], "unknown target"),
        (["run", "echo", "--reps", "0"], "need reps >= 1"),
        (["run", "echo", "--variant", "a/b"], "variant 'a/b'"),
        (["run", "nope"], "unknown pack"),
    ],
)
def test_cli_usage_errors(tmp_path, echo_pack, capsys, args, msg):
    assert cli.main(args + ["--out", str(tmp_path)]) == 2
    assert msg in capsys.readouterr().err


def test_cli_list_and_debs(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "metric tps [transactions/s, higher is better]" in out
    assert cli.main(["debs", "pbzip2", "sysbench_memory"]) == 0
    assert capsys.readouterr().out.strip() == "pbzip2 sysbench"


def test_cli_as_a_module(tmp_path):
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "schedlab.packrun", "run", "nope", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "unknown pack 'nope'" in r.stderr


def test_missing_tool_names_the_debian_package(tmp_path, monkeypatch):
    class NoTools(LocalTarget):
        def run(self, argv, timeout=60, input=None, check=True):
            if argv[:2] == ["sh", "-c"] and "command -v" in argv[2]:
                return subprocess.CompletedProcess(argv, 0, "pbzip2\n", "")
            return super().run(argv, timeout=timeout, input=input, check=check)

    with pytest.raises(PackError, match=r"pbzip2 not found on target .* \(Debian packages: pbzip2\)"):
        runner.run_pack("pbzip2", {}, NoTools(), reps=1, warmup=0, out_dir=tmp_path, seed=1)


def _have(tool):
    import shutil

    return shutil.which(tool) is not None
