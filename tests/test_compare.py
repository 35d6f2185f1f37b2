"""`schedlab compare A B`: two data folders of one study, cell by cell, with the paper's
statistics (boots as the replicate where the records name them) and an equivalence verdict."""

import shutil

import numpy as np
import pandas as pd
from conftest import ROOT, schedlab

from schedlab import config
from schedlab.report.compare import DIFFERS, EQUIVALENT, INCONCLUSIVE, Source, compare, overall


def _source(shift: float = 1.0, n: int = 8, seed: int = 0, boots: bool = False) -> Source:
    rng = np.random.default_rng(seed)
    rows = []
    for v in ("bug", "fixed"):
        for mode in ("alone", "corun"):
            for i in range(n):
                rows.append(
                    {
                        "variant": v,
                        "mode": mode,
                        "throughput_mbps": 100 * shift * (1 + 0.01 * rng.standard_normal()),
                        "latency_us": 50 * (1 + 0.01 * rng.standard_normal()),
                        **({"boot": f"b{i}"} if boots else {"run_id": f"{v}-{mode}-{i}"}),
                    }
                )
    return Source(ROOT, pd.DataFrame(rows), len(rows), boots, 1)


S1 = config.load_study("s1")


def test_the_same_distribution_is_equivalent_and_a_shift_differs():
    t = compare(_source(seed=1), _source(seed=2), S1, "sim", margin_pct=5)
    assert set(t["verdict"]) == {EQUIVALENT} and overall(t) == "agree"
    assert len(t) == 8 and (t["n_a"] == 8).all()
    # a check that can fail: B's throughput 20 % higher differs, its latency stays equivalent
    t = compare(_source(seed=1), _source(1.2, seed=2), S1, "sim", margin_pct=5)
    assert set(t.loc[t["metric"] == "throughput_mbps", "verdict"]) == {DIFFERS}
    assert set(t.loc[t["metric"] == "latency_us", "verdict"]) == {EQUIVALENT}
    assert overall(t) == "differ"
    assert t.loc[t["metric"] == "throughput_mbps", "pct"].between(15, 25).all()


def test_few_replicates_are_inconclusive_not_equivalent():
    t = compare(_source(n=2, seed=1), _source(1.03, n=2, seed=2), S1, "sim", margin_pct=1)
    assert INCONCLUSIVE in set(t["verdict"]) and overall(t) != "agree"


def test_two_sim_folders_of_different_seeds(tmp_path, sim_binary):
    """The CLI on two real sim folders of one study (3 runs a point) measured with two seeds;
    a folder against a copy of itself agrees; a study the folder lacks is one line, exit 2."""
    study = tmp_path / "s1.yaml"
    study.write_text((ROOT / "config" / "studies" / "s1.yaml").read_text().replace("\nruns: 10", "\nruns: 3"))
    for seed in (3, 4):
        r = schedlab("run-study", study, "--testbed", "sim", "--seed", seed, "--out", tmp_path / f"d{seed}")
        assert r.returncode == 0, r.stderr[-2000:]
    r = schedlab("compare", tmp_path / "d3", tmp_path / "d4", "--study", study, "--testbed", "sim")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"A: {tmp_path / 'd3'}: 12 runs") and "n in runs" in lines[2]
    assert lines[3].split()[:4] == ["variant", "mode", "metric", "n"]
    assert len(lines) == 4 + 8 + 1 and lines[-1].startswith("verdict: ")  # 2 variants x 2 modes x 2 metrics
    shutil.copytree(tmp_path / "d3", tmp_path / "copy")
    r = schedlab("compare", tmp_path / "d3", tmp_path / "copy", "--study", study, "--testbed", "sim")
    assert r.stdout.splitlines()[-1].startswith("verdict: agree"), r.stdout
    r = schedlab("compare", tmp_path / "d3", tmp_path / "d4", "--study", "s2", "--testbed", "sim")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "no records of study s2" in r.stderr


def test_boots_are_the_replicate():
    """S2-native's shipped records name their boot: a boot's runs are averaged first, so the
    units (and n, and the degrees of freedom) are boots, fewer than the runs."""
    from schedlab import records, store
    from schedlab.report.compare import load

    study = config.load_study("s2native")
    src = load(ROOT / "data", study, "qemu")
    assert src.boots and len(src.units) < src.runs
    recs = [store.read_record(p) for p in store.iter_records(ROOT / "data" / "raw" / "qemu" / "s2native")]
    cur = records.current_definitions(study, "qemu")
    boots = {
        (r["variant"], r["point_id"], records.boot_of(r))
        for r in recs
        if r["status"] == "ok" and not r["warmup"] and r["definition_hash"] in cur
    }
    assert len(src.units) <= len(boots)
    assert not src.units.duplicated(["variant", *config.testbed_settings(study, "qemu")["axes"], "boot"]).any()
