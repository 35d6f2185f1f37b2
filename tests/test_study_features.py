"""Study-file features beyond one metric set per study: metrics that apply to some
points only (`when:`), testbed options in the run definition, variant-blocked run
order on real hosts, and study manifests re-derived from records on disk."""

import copy
import json
import re

import numpy as np
import pandas as pd
import pytest
from conftest import schedlab

from schedlab import config, testbeds
from schedlab.report.tables import StudyTable
from schedlab.run import PointRunner, dataset, plan


def test_when_metrics_select_points():
    st = config.load_study("s2native")
    pg = {"bench": "pgbench", "threads": 1}
    assert [m["name"] for m in config.metrics_for(st, pg)] == ["pgbench_tps"]
    assert [m["name"] for m in config.metrics_for(st, {"bench": "kernbench", "threads": 4})] == ["kernbench_s"]
    s1 = config.load_study("s1")
    assert len(config.metrics_for(s1, {"mode": "alone"})) == 2


def test_when_naming_an_unknown_axis_value_is_an_error(tmp_path):
    text = (config.STUDIES_DIR / "s2native.yaml").read_text().replace("when: {bench: pbzip2}", "when: {bench: pbzip3}")
    p = tmp_path / "s2native.yaml"
    p.write_text(text)
    with pytest.raises(config.ConfigError, match=r"s2native.yaml:\d+: field metrics.1.when.bench: 'pbzip3'"):
        config.load_study(p)


def test_testbed_metrics_exist_only_on_their_testbeds():
    st = config.load_study("s4")
    assert [m["name"] for m in config.metrics_for(st, {"vms": 2}, "sim")] == ["specjbb", "sysbench", "lmbench"]
    assert [m["name"] for m in config.metrics_for(st, {"vms": 2}, "qemu")] == [
        "bursts",
        "sysbench",
        "lmbench",
        "home_share",
    ]
    assert [m["name"] for m in config.for_testbed(st, "qemu")["metrics"]] == [
        "bursts",
        "sysbench",
        "lmbench",
        "home_share",
    ]
    # without a testbed, every metric (the run definition lists them all)
    assert len(config.metrics_for(st, {"vms": 2})) == 5


def test_metric_on_an_unknown_testbed_is_an_error(tmp_path):
    text = (config.STUDIES_DIR / "s4.yaml").read_text().replace("testbeds: [sim]}", "testbeds: [sim, lab2]}", 1)
    p = tmp_path / "s4.yaml"
    p.write_text(text)
    with pytest.raises(config.ConfigError, match=r"s4.yaml:\d+: field metrics.0.testbeds"):
        config.load_study(p)
    text = text.replace("testbeds: [sim, lab2]}", "testbeds: [sim]}").replace("  lab: {}\n", "")
    p.write_text(text)
    with pytest.raises(config.ConfigError, match=r"s4.yaml:\d+: field metrics.1.testbeds.1: testbed 'lab'"):
        config.load_study(p)


def _runs(study, rng):
    """Synthetic runs (a statistics test, not a result): each point reports only its metric."""
    rows = []
    for v in study["variants"]:
        for p in config.points(study, "qemu"):
            (m,) = config.metrics_for(study, p)
            for rep in range(5):
                rows.append(
                    {
                        "run_id": f"{v}_{config.point_id(p)}_r{rep}",
                        "boot": f"{v}-boot{rep}",  # one run per boot, as the design says
                        "variant": v,
                        **p,
                        "checksum": f"{v}{rep}",
                        m["name"]: 100 + rng.normal(0, 1),
                    }
                )
    return pd.DataFrame(rows)


def test_table_with_when_metrics_has_one_value_column(tmp_path):
    st = config.load_study("s2native")
    runs = _runs(st, np.random.default_rng(1))
    t = StudyTable(st, "qemu", runs, tmp_path, margin_pct=st["equivalence_margin_pct"])
    # 3 variants x 6 points compared with the baseline, no NaN comparisons
    assert len(t.cmp) == 3 * 6 and t.cmp["pct"].notna().all()
    side = t.write()
    body = (tmp_path / "qemu-table.tex").read_text()
    assert "pgbench [tx/s]" in body and "kernbench build [s]" in body
    assert "pv_y/bench-pbzip2_threads-4/pbzip2_s/delta" in side["cells"]
    assert not any("pgbench_tps" in k for k in side["cells"] if "bench-pbzip2" in k)
    # every row has the same number of columns
    rows = [l for l in body.splitlines() if l.endswith(r"\\") and "&" in l]
    assert len({r.count("&") for r in rows}) == 1


def test_testbed_options_enter_the_definition_only_when_set():
    s1 = config.load_study("s1")
    d = config.definition(s1, "qemu", "bug", {"mode": "corun"})
    assert d["testbed_options"] == s1["testbeds"]["qemu"]["options"] and d["testbed_options"]["smp"] == 3
    assert "testbed_options" not in config.definition(s1, "sim", "bug", {"mode": "corun"})
    s1b = copy.deepcopy(s1)
    s1b["testbeds"]["qemu"]["options"]["smp"] = 2
    assert config.sha256(config.definition(s1b, "qemu", "bug", {"mode": "corun"})) != config.sha256(d)


def test_unknown_qemu_option_is_a_config_error():
    from schedlab.testbeds.qemu import QemuTestbed

    s1 = copy.deepcopy(config.load_study("s1"))
    s1["testbeds"]["qemu"]["options"]["smpp"] = 3
    with pytest.raises(config.ConfigError, match="testbeds.qemu.options: unknown option.*smpp"):
        QemuTestbed().config(s1)


def test_real_hosts_run_a_variants_points_together():
    st = copy.deepcopy(config.load_study("s0"))
    del st["testbeds"]["qemu"]["variants"]  # all five
    order = plan(st, "qemu", 3)
    npts = len(config.points(st, "qemu"))
    per_round = len(st["variants"]) * npts
    for r in range(len(order) // per_round):
        rnd = [e["variant"] for e in order[r * per_round : (r + 1) * per_round]]
        blocks = [rnd[i] for i in range(len(rnd)) if i == 0 or rnd[i] != rnd[i - 1]]
        assert len(blocks) == len(st["variants"]) == len(set(blocks))  # one block per variant
    firsts = {
        tuple(e["variant"] for e in order[r * per_round : (r + 1) * per_round : npts])
        for r in range(len(order) // per_round)
    }
    assert len(firsts) > 1  # the variant order changes between rounds
    assert plan(st, "sim", 3) != order


def test_dataset_rederives_the_manifest_from_records(sim_binary, tmp_path):
    """`schedlab dataset` finds the same runs PointRunner wrote, from the records alone."""
    st = config.load_study("s1")
    st = copy.deepcopy(st)
    st["testbeds"]["sim"] = {"runs": 2, "warmup": 1}
    made = {}
    for v in st["variants"]:
        for p in config.points(st, "sim"):
            recs = PointRunner(st, "sim", v, p, tmp_path, 11, testbed=testbeds.get("sim")).run()
            made[(v, config.point_id(p))] = [r["run_id"] for r in recs]
    out = tmp_path / "all.json"
    res = dataset(st, "sim", tmp_path, 11, out)
    assert res == {"points": 4, "runs": 12, "missing": [], "failed": 0, "not_used": 0}
    man = json.loads(out.read_text())
    got = {(m["variant"], m["point_id"]): [r["run_id"] for r in m["runs"]] for m in man["points"]}
    assert got == made
    # another base seed: the same records are not this dataset's runs
    with pytest.raises(Exception, match="no records"):
        dataset(st, "sim", tmp_path, 12, tmp_path / "other.json")
    # the CLI reports what it found and never writes into raw/
    before = sorted(p.name for p in (tmp_path / "raw" / "sim" / "s1").iterdir())
    r = schedlab(
        "dataset", "s1", "--testbed", "sim", "--out", tmp_path, "--seed", "11", "--manifest", tmp_path / "cli.json"
    )
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "raw" / "sim" / "s1").iterdir()) == before


def test_methods_name_what_each_variant_booted_from_its_own_records():
    """The methods' 'Booted' line comes from each run's counters; a process-wide description
    (older qemu records) counts only where it names the run's own build."""
    from schedlab.report.data import booted_builds

    xen = lambda v, p: {"xen_version": v, "patches": p, "sha256": "ab" * 32}  # noqa: E731
    stale = {"xen_version": "4.17.5-schedlab-a99", "xen_commandline": "sched=credit"}
    recs = [
        {
            "variant": "fixed",
            "counters": {"xen": xen("4.17.5-schedlab-a99", "stock")},
            "provenance": {"testbed": {"booted": stale}},
        },
        {
            "variant": "bug",
            "counters": {"xen": xen("4.17.5-schedlab-2f9", "boost-bug")},
            "provenance": {"testbed": {"booted": stale}},
        },  # stale: names fixed's boot
        {
            "variant": "bug",
            "counters": {
                "xen": xen("4.17.5-schedlab-2f9", "boost-bug"),
                "booted": {"xen_commandline": "sched=credit x"},
            },
            "provenance": {"testbed": {}},
        },
        {
            "variant": "n",
            "counters": {
                "kernel": {"kernelrelease": "6.1-k", "config": "pvspin-n", "config_sha256": "cd" * 32},
                "cmdline": "ro nopvspin",
            },
            "provenance": {"testbed": {}},
        },
        {"variant": "sim", "counters": {}, "provenance": {"testbed": {}}},
    ]
    b = booted_builds(recs)
    assert set(b) == {"fixed", "bug", "n"}
    assert b["fixed"] == [
        "Xen 4.17.5-schedlab-a99 (patch series stock, binary sha256 abababababab), command line `sched=credit'"
    ]
    assert b["bug"] == [
        "Xen 4.17.5-schedlab-2f9 (patch series boost-bug, binary sha256 abababababab), command line `sched=credit x'"
    ]
    assert "nopvspin" in b["n"][0] and "pvspin-n" in b["n"][0]


def test_runs_meet_each_stated_design():
    """A testbed block with a `design` (the power analysis stated before measuring) runs at
    least as many runs per point as it asks for."""
    from schedlab.stats import runs_needed

    for path in sorted(config.ROOT.joinpath("config", "studies").glob("*.yaml")):
        study = config.load_study(path)
        for tb, block in study["testbeds"].items():
            d = (block or {}).get("design")
            if not d:
                continue
            need = runs_needed(d["cv_pct"], d["detect_pct"], d["confidence"], d["power"])
            runs = config.testbed_settings(study, tb)["runs"]
            assert runs >= need, f"{path.name}: testbeds.{tb}: runs {runs} < {int(need)} the design needs"


def test_a_testbed_runs_a_subset_of_the_variants_in_the_whole_plans_order(tmp_path):
    """testbeds.<tb>.variants: the plan keeps the whole plan's order and indices (like
    run-study --variant, so adding the others later renumbers nothing), the records'
    definitions and the testbed's view of the study list only those variants; an unknown
    name, or a variant whose baseline is left out, is an error naming the field."""
    shipped = (config.STUDIES_DIR / "s0.yaml").read_text()
    line = next(ln for ln in shipped.splitlines() if ln.startswith("  qemu: {axes:"))
    text = shipped.replace(line, re.sub(r"variants: \[[^]]*\]", "variants: [base, yield, ppy]", line))
    (tmp_path / "sub").mkdir()
    src = tmp_path / "sub" / "s0.yaml"
    src.write_text(text)
    st = config.load_study(src)
    assert config.testbed_settings(st, "qemu")["variants"] == ["base", "yield", "ppy"]
    assert config.testbed_settings(st, "sim")["variants"] == list(st["variants"])
    whole = copy.deepcopy(st)
    del whole["testbeds"]["qemu"]["variants"]
    full = plan(whole, "qemu", 7)
    sub = plan(st, "qemu", 7)
    assert [e for e in full if e["variant"] in ("base", "yield", "ppy")] == sub
    assert len(sub) < len(full)  # pick and push left out
    assert list(config.for_testbed(st, "qemu")["variants"]) == ["base", "yield", "ppy"]
    for bad, msg in (
        ("variants: [base, nosuch]", r"field testbeds.qemu.variants.1: unknown variant 'nosuch'"),
        ("variants: [yield, ppy]", r"field testbeds.qemu.variants: 'yield' is compared with 'base'"),
    ):
        p = tmp_path / "s0.yaml"
        p.write_text(text.replace("variants: [base, yield, ppy]", bad))
        with pytest.raises(config.ConfigError, match=r"s0.yaml:\d+: " + msg):
            config.load_study(p)


def test_run_time_credit1_parameters_are_set_by_every_variant(tmp_path):
    """A run-time parameter persists in a boot: a variant without it would inherit the last
    run's value, so every variant must set the keys any variant sets."""
    text = (config.STUDIES_DIR / "s3.yaml").read_text()
    p = tmp_path / "s3.yaml"
    p.write_text(
        text.replace("xen: {patches: stock, sched_credit: {migration_delay_us: 250}}", "xen: {patches: stock}")
    )
    with pytest.raises(
        config.ConfigError, match=r"s3.yaml:\d+: field variants.d250: sets no xen.sched_credit migration_delay_us"
    ):
        config.load_study(p)


def test_every_kind_of_record_names_its_boot():
    """records.boot_of: the record's boot_id, else what its counters say (a Xen boot's run
    folder, a lab host's kernel boot id, a native guest's boot id, a pack's temporary folder)."""
    from schedlab import records

    assert records.boot_of({"boot_id": "qemu:x", "counters": {"guest_boot_id": "g"}}) == "qemu:x"
    assert records.boot_of({"counters": {"boot": {"run_dir": "20261124T0056-ab"}}}) == "qemu:20261124T0056-ab"
    assert records.boot_of({"counters": {"lab": {"host": "h1", "boot_id": "b"}}}) == "h1:b"
    assert records.boot_of({"counters": {"guest_boot_id": "b1"}}) == "b1"
    prepared = {"prepared": {"data": "/tmp/schedlab.X/pg/data", "log": "/tmp/schedlab.X/pg/log"}}
    assert records.boot_of({"counters": prepared}) == "prepared:schedlab.X"
    assert records.boot_of({"counters": {}}) is None
