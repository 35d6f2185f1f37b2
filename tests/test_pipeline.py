"""The whole pipeline on the sim testbed, in a scratch copy with fewer runs (the `built`
fixture, tests/conftest.py): study files -> runs -> records -> notebooks -> tables -> PDF; then what a
reviewer checks: incremental rebuilds, traceability of every cell, a changed
record changing only its cells, and a killed sweep resuming."""

import json
import os
import re
import signal
import subprocess
import time

from conftest import BIN, copy_workdir, schedlab, smk

from schedlab import config, store


def tables(work):
    """The study tables' sidecars (the agreement tables read these, they are not studies)."""
    return sorted(p for p in work.glob("paper/generated/*/*-cells.json") if p.parent.name != "agreement")


def test_paper_builds_with_a_table_per_study(built):
    work, _, seconds = built
    print(f"pipeline from scratch: {seconds:.0f} s")
    assert (work / "paper" / "main.pdf").stat().st_size > 50_000
    # the sim's five studies, and the qemu tables re-derived from the shipped records of each
    # study's registered design, where every cell has them from at least two boots
    from schedlab import records

    shipped = set()
    for s in config.load_config()["studies"]:
        st = config.load_study(s)
        if "qemu" in st["testbeds"] and records.on_disk(config.ROOT / "data", st, "qemu"):
            if records.first_short_point(config.ROOT / "data", st, "qemu") is None:
                shipped.add(s)
    got = {p.parent.name for p in tables(work) if p.name.startswith("qemu")}
    assert got == shipped
    assert {p.parent.name for p in tables(work) if p.name.startswith("sim")} == {"s0", "s1", "s2", "s3", "s4"}
    log = (work / "paper" / "main.log").read_text(errors="replace")
    assert not re.search(r"undefined (references|citations)|Reference .* undefined|Citation .* undefined", log)
    assert schedlab("verify", work / "data").returncode == 0


def test_published_figures_stand_beside_no_emulated_magnitude(built):
    """The published-figures table sets hardware magnitudes beside the model's (and a real host's),
    never beside an emulated machine's: no qemu cell in it, whatever the qemu testbed reports."""
    from schedlab.report import agreement

    work, _, _ = built
    cells = json.loads((work / "paper" / "generated" / "agreement" / "cells.json").read_text())["cells"]
    assert cells and not [k for k in cells if k.rsplit("/", 1)[-1] in agreement.EMULATED]
    assert "qemu" not in (work / "paper" / "generated" / "agreement" / "table.tex").read_text()


def test_second_run_does_nothing(built):
    work, env, _ = built
    t0 = time.monotonic()
    r = smk(work, env=env)
    assert r.returncode == 0
    assert "Nothing to be done" in r.stdout + r.stderr
    print(f"no-op run: {time.monotonic() - t0:.1f} s")


def test_every_cell_traces_to_its_runs(built):
    import io

    from schedlab.report.trace import trace

    work, _, _ = built
    for side_path in tables(work):
        side = json.loads(side_path.read_text())
        assert side["cells"]
        for key in side["cells"]:  # every cell, in-process (the CLI calls the same function)
            out = io.StringIO()
            assert trace(side["table"], key, work / "paper", work / "data", as_json=True, out=out) == 0
            rep = json.loads(out.getvalue())
            runs = [x for g in rep["groups"].values() for x in g]
            assert runs and all(x["checksum_ok"] and x["build_id"] for x in runs)
            assert all(x["value"] is not None for x in rep["groups"]["runs"])
        first = next(iter(side["cells"]))
        r = schedlab(
            "trace", side["table"], first, "--json", "--paper-dir", work / "paper", "--data-dir", work / "data"
        )
        assert r.returncode == 0 and json.loads(r.stdout)["cell"] == first
    # by coordinates too
    r = schedlab("trace", "s1-sim", "0,2", "--paper-dir", work / "paper", "--data-dir", work / "data")
    assert r.returncode == 0 and "runs (" in r.stdout


def test_editing_one_notebook_rebuilds_only_its_outputs(built):
    work, env, _ = built
    nb = work / "notebooks" / "s3.ipynb"
    data = json.loads(nb.read_text())
    data["cells"][0]["source"].append("\n")
    nb.write_text(json.dumps(data, indent=1))
    r = smk(work, "-n", "--quiet", "rules", env=env)
    jobs = r.stdout + r.stderr
    assert "notebook" in jobs and "paper" in jobs and "run_point" not in jobs and "build_sim" not in jobs


def test_changed_record_changes_its_cells_and_the_hash_only(built):
    work, env, _ = built
    before = {p: p.read_text() for p in tables(work)}
    tex_before = (work / "paper/generated/s1/sim-table.tex").read_text()
    man_path = work / "data/runs/sim/s1/all.json"
    man = json.loads(man_path.read_text())
    point = next(p for p in man["points"] if p["variant"] == "bug" and p["point_id"] == "mode-corun")
    entry = next(e for e in point["runs"] if not e["warmup"])
    rpath = work / "data" / entry["path"]
    rec = json.loads(rpath.read_text())
    rec["metrics"]["throughput_mbps"] *= 1.5
    rec["checksum"] = store.checksum(rec)
    rpath.write_text(json.dumps(rec))  # a scratch copy: this is the experiment
    entry["checksum"] = rec["checksum"]
    man_path.write_text(json.dumps(man))
    r = smk(work, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    after = {p: p.read_text() for p in tables(work)}
    changed_tables = [p for p in before if before[p] != after[p]]
    assert changed_tables == [work / "paper/generated/s1/sim-cells.json"]
    old, new = json.loads(before[changed_tables[0]]), json.loads(after[changed_tables[0]])
    changed = {k for k in old["cells"] if old["cells"][k]["text"] != new["cells"][k]["text"]}
    own = {k for k in changed if k.startswith("bug/mode-corun/throughput_mbps/")}
    assert own
    # another row of the Holm family may move to another step: its interval's level
    # (so its interval) changes, never its estimate or p-value
    for k in changed - own:
        a, b = old["cells"][k], new["cells"][k]
        assert k.endswith("/delta") and (a["value"], a["p"]) == (b["value"], b["p"]), k
        assert a["ci_level"] != b["ci_level"], k
    assert old["data_hash"] != new["data_hash"]
    tex_after = (work / "paper/generated/s1/sim-table.tex").read_text()
    assert new["data_hash"][:16] in tex_after and old["data_hash"][:16] in tex_before
    diff = [(a, b) for a, b in zip(tex_before.splitlines(), tex_after.splitlines()) if a != b]
    assert all("bug" in a or "sha256" in a for a, _ in diff), diff


def test_killed_sweep_resumes_without_losing_records(tmp_path, sim_binary):
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    work = copy_workdir(tmp_path / "w")
    target = ["data/runs/sim/s0/base/vms-4.json", "data/runs/sim/s0/ppy/vms-4.json"]
    proc = subprocess.Popen(
        [str(BIN / "snakemake"), "-c2", *target],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    folder = work / "data/raw/sim/s0"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(folder.glob("*.json"))) < 3:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = {p.name: p.read_bytes() for p in folder.glob("*.json")}
    assert len(done) >= 3
    subprocess.run([str(BIN / "snakemake"), "--unlock"], cwd=work, env=env, capture_output=True)
    r = smk(work, *target, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    final = {p.name: p.read_bytes() for p in folder.glob("*.json")}
    assert all(final[n] == b for n, b in done.items())
    st = config.load_study(work / "config/studies/s0.yaml")
    assert len(final) == 2 * (st["runs"] + st["warmup"])
    assert not list(folder.glob(".tmp-*"))
    assert schedlab("verify", work / "data").returncode == 0
