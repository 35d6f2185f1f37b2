"""The sensitivity sweep (schedlab/sweep.py, its analysis schedlab/report/sensitivity.py, config/sensitivity.yaml): its
configuration (one line naming file, line and field for bad input), the planner (shipped,
one at a time, Latin hypercube), the robust / not-robust decision, and one tiny real sweep
whose records are raw data (written once, reused on a rerun, read without the simulator)."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT

from schedlab import config, store
from schedlab import sweep as sens_run
from schedlab.report import sensitivity as sens
from schedlab.report import verdicts

# --- a small configuration on a copy of S1 (fast, and it has CALIBRATED leaves) ---------------------------


def _fixed_for(study_path, swept):
    """Every sim_workload leaf not swept, fixed (CALIBRATED ones say so)."""
    study = config.load_study(study_path)
    cal = sens_run.calibrated_paths(study_path)
    return {
        leaf: ("CALIBRATED, kept" if leaf in cal else "held for the test")
        for leaf in sens_run._leaves(study["sim_workload"])
        if leaf not in swept
    }


def small_config(seeds=2, points=2, param=None):
    param = param or {
        "path": "rr.client_us.mean",
        "low": 2,
        "high": 20,
        "scale": "log",
        "why": "client turnaround on another host",
    }
    return {
        "seeds": seeds,
        "joint": {"points": points, "seed": 7},
        "confidence": 95,
        "studies": {
            "s1": {
                "parameters": [param],
                "fixed": None,  # filled by write_config
                "conclusions": [
                    {
                        "id": "tput",
                        "label": "bug vs fixed, throughput",
                        "variant": "bug",
                        "reference": "fixed",
                        "metric": "throughput_mbps",
                        "point": {"mode": "corun"},
                        "claim": "lower",
                    },
                    {
                        "id": "lat",
                        "label": "bug vs fixed, latency",
                        "variant": "bug",
                        "reference": "fixed",
                        "metric": "latency_us",
                        "point": {"mode": "corun"},
                        "claim": "higher",
                    },
                ],
            }
        },
    }


@pytest.fixture
def studies_dir(tmp_path):
    d = tmp_path / "studies"
    d.mkdir()
    shutil.copy(ROOT / "config" / "studies" / "s1.yaml", d / "s1.yaml")
    return d


def write_config(path, cfg, studies_dir):
    cfg = json.loads(json.dumps(cfg))
    for sid, body in cfg["studies"].items():
        if body.get("fixed") is None:
            body["fixed"] = _fixed_for(studies_dir / f"{sid}.yaml", {p["path"] for p in body["parameters"]})
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


# --- the shipped configuration ---------------------------------------------------------------------------


def test_shipped_config_covers_every_leaf_and_keeps_calibrated_ones_fixed():
    sw = sens_run.load()
    assert sw.seeds >= 2 and sw.joint_points >= 8
    for sid, plan in sw.studies.items():
        leaves = sens_run._leaves(plan.study["sim_workload"])
        swept = {p.path for p in plan.parameters}
        cal = sens_run.calibrated_paths(ROOT / "config" / "studies" / f"{sid}.yaml")
        assert not swept & set(cal), sid
        for p in plan.parameters:
            assert p.low <= leaves[p.path] <= p.high and p.why
    # every study the sim models is in it
    assert set(sw.studies) == {"s0", "s1", "s2", "s3", "s4"}
    assert set(sens_run.calibrated_paths(ROOT / "config" / "studies" / "s4.yaml")) == {
        "kinds.specjbb.scale",
        "kinds.sysbench.scale",
        "kinds.lmbench.scale",
    }  # `# scale CALIBRATED` on a line that also holds mem_frac marks only scale


def _direction(study, metric, d):
    if d in ("better", "worse"):
        m = next(x for x in study["metrics"] if x["name"] == metric)
        d = (1 if m["better"] == "higher" else -1) * (1 if d == "better" else -1)
    return {1: "higher", -1: "lower", 0: "equivalent"}[d]


def test_conclusions_are_the_comparisons_the_verdicts_use():
    sw = sens_run.load()
    for claim in filter(None, (verdicts.claim_of(config.load_study(s)) for s in config.load_config()["studies"])):
        if claim.study not in sw.studies:
            continue
        study = sw.studies[claim.study].study
        metrics = {m["name"] for m in config.for_testbed(study, "sim")["metrics"]}
        want = set()
        for part in claim.parts:
            ref = part.reference or study["variants"][part.variant].get("baseline", study["baseline"])
            for point in config.claim_points(study, "sim", part.where):
                for m in part.metrics:
                    if m in metrics:
                        want.add((part.variant, ref, m, config.point_id(point), _direction(study, m, part.direction)))
        have = {(c.variant, c.reference, c.metric, c.point_id, c.claim) for c in sw.studies[claim.study].conclusions}
        assert have == want, claim.study


# --- bad input: one line naming file, line and field -----------------------------------------------------


def _mutate(cfg, how):
    s1 = cfg["studies"]["s1"]
    p0, c0 = s1["parameters"][0], s1["conclusions"][0]
    {
        "unknown-top": lambda: cfg.update(sedes=3),
        "seeds": lambda: cfg.update(seeds=1),
        "confidence": lambda: cfg.update(confidence=120),
        "not-a-leaf": lambda: p0.update(path="rr.nosuch"),
        "calibrated": lambda: s1["parameters"].append(
            {"path": "rr.one_way_us.mean", "low": 20, "high": 40, "why": "should never be swept"}
        ),
        "low-above-high": lambda: p0.update(low=30, high=20),
        "no-shipped": lambda: p0.update(low=8, high=20),
        "log-zero": lambda: p0.update(low=0),
        "no-why": lambda: p0.pop("why"),
        "scale": lambda: p0.update(scale="cubic"),
        "variant": lambda: c0.update(variant="nosuch"),
        "metric": lambda: c0.update(metric="ops_per_s"),
        "point": lambda: c0.update(point={"mode": "solo"}),
        "claim": lambda: c0.update(claim="bigger"),
        "margin": lambda: c0.update(claim="equivalent"),
        "study": lambda: cfg["studies"].update(s9=json.loads(json.dumps(cfg["studies"]["s1"]))),
    }[how]()
    return cfg


CASES = {
    # case: (what the config does, field the message names, words of the message)
    "unknown-top": ("(top level)|sedes", "unknown key"),
    "seeds": ("seeds", "integer >= 2"),
    "confidence": ("confidence", "between 50 and 100"),
    "not-a-leaf": ("studies.s1.parameters.0.path", "not a leaf"),
    "calibrated": ("studies.s1.parameters.1.path", "CALIBRATED"),
    "low-above-high": ("studies.s1.parameters.0.low", "must be below high"),
    "no-shipped": ("studies.s1.parameters.0", "does not hold the shipped"),
    "log-zero": ("studies.s1.parameters.0.low", "log scale"),
    "no-why": ("studies.s1.parameters.0", "missing key `why`"),
    "scale": ("studies.s1.parameters.0.scale", "one of linear, log"),
    "variant": ("studies.s1.conclusions.0.variant", "not a variant"),
    "metric": ("studies.s1.conclusions.0.metric", "not a sim metric"),
    "point": ("studies.s1.conclusions.0.point", "not a sim point"),
    "claim": ("studies.s1.conclusions.0.claim", "one of higher"),
    "margin": ("studies.s1.conclusions.0.margin_pct", "needs a margin_pct"),
    "study": ("studies.s9", "no study file"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_config_is_one_line_naming_file_line_and_field(case, tmp_path, studies_dir, capsys):
    path = write_config(tmp_path / "yaml", small_config(), studies_dir)
    cfg = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump(_mutate(cfg, case), sort_keys=False))
    rc = sens_run.main(["validate", "--config", str(path), "--studies-dir", str(studies_dir)])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    field, words = CASES[case]
    assert lines[0].startswith(f"sensitivity: {path}:"), err
    assert any(f in lines[0] for f in field.split("|")) and words in lines[0], err


def test_a_leaf_neither_swept_nor_fixed_is_named(tmp_path, studies_dir, capsys):
    path = write_config(tmp_path / "yaml", small_config(), studies_dir)
    cfg = yaml.safe_load(path.read_text())
    del cfg["studies"]["s1"]["fixed"]["rr.proc_us.cv"]
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert sens_run.main(["validate", "--config", str(path), "--studies-dir", str(studies_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "studies.s1.fixed" in err and "rr.proc_us.cv" in err and "neither swept nor fixed" in err


def test_broken_yaml_and_calibrated_fixed_without_saying_so(tmp_path, studies_dir, capsys):
    path = tmp_path / "yaml"
    path.write_text("seeds: 2\nseeds: 3\nstudies: {}\n")
    assert sens_run.main(["validate", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{path}:2" in err and "duplicate key" in err
    write_config(path, small_config(), studies_dir)
    cfg = yaml.safe_load(path.read_text())
    cfg["studies"]["s1"]["fixed"]["rr.one_way_us.mean"] = "held at its value"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert sens_run.main(["validate", "--config", str(path), "--studies-dir", str(studies_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "rr.one_way_us.mean is CALIBRATED" in err and "must say so" in err


# --- the planner ---------------------------------------------------------------------------------------


def test_planner_one_at_a_time_and_latin_hypercube(tmp_path, studies_dir):
    cfg = small_config(points=8)
    cfg["studies"]["s1"]["parameters"] = [
        {"path": "rr.client_us.mean", "low": 2, "high": 20, "scale": "log", "why": "client turnaround"},
        {"path": "stream.window_bytes", "low": 87380, "high": 1048576, "type": "int", "why": "receive window"},
        {"path": "stream.proc_us.cv", "low": 0.1, "high": 1.0, "why": "per-segment cost spread"},
    ]
    sw = sens_run.load(write_config(tmp_path / "yaml", cfg, studies_dir), studies_dir)
    plan = sw.studies["s1"]
    sets = sens_run.settings(plan, sw.joint_points, sw.joint_seed)
    assert [s.kind for s in sets] == ["shipped"] + ["oat"] * 6 + ["joint"] * 8
    assert sets[0].values == {}
    for s in sets[1:7]:  # one parameter at one end, the others shipped
        p = next(p for p in plan.parameters if p.path == s.param)
        assert s.values == {p.path: getattr(p, s.side)}
    joint = sets[7:]
    assert len({s.id for s in sets}) == len(sets)
    for p in plan.parameters:
        xs = [s.values[p.path] for s in joint]
        assert all(p.low <= x <= p.high for x in xs)
        if p.kind == "int":
            assert all(isinstance(x, int) for x in xs)
        # one point in each of the 8 strata (in the parameter's own scale)
        u = [
            (math.log(x / p.low) / math.log(p.high / p.low)) if p.scale == "log" else (x - p.low) / (p.high - p.low)
            for x in xs
        ]
        assert sorted(min(int(v * 8), 7) for v in u) == list(range(8)), (p.path, u)
    # the same seed gives the same plan; another seed another
    assert sens_run.settings(plan, 8, sw.joint_seed) == sets
    assert sens_run.settings(plan, 8, sw.joint_seed + 1)[7:] != joint
    # apply() changes a copy only; the runs the conclusions need
    st = sens_run.apply(plan.study, joint[0].values)
    assert st["sim_workload"]["stream"]["window_bytes"] == joint[0].values["stream.window_bytes"]
    assert plan.study["sim_workload"]["stream"]["window_bytes"] == 262144
    assert plan.runs() == [("bug", {"mode": "corun"}), ("fixed", {"mode": "corun"})]


def test_latin_hypercube_strata():
    u = sens_run.latin_hypercube(16, 5, 1)
    assert u.shape == (16, 5) and ((u >= 0) & (u < 1)).all()
    for d in range(5):
        assert sorted((u[:, d] * 16).astype(int)) == list(range(16))


# --- the robust / not-robust decision --------------------------------------------------------------------


def synthetic_runs(plan, sets, values):
    """Runs of every setting: `values[setting_id] = (reference values, variant values)` for
    the first conclusion's metric (the second conclusion's metric: identical arms)."""
    rows = []
    c = plan.conclusions[0]
    for s in sets:
        ref, var = values[s.id]
        for variant, vals in ((c.reference, ref), (c.variant, var)):
            for i, x in enumerate(vals):
                rows.append(
                    {
                        "setting": s.id,
                        "kind": s.kind,
                        "param": s.param,
                        "side": s.side,
                        "variant": variant,
                        "point_id": c.point_id,
                        "repetition": i,
                        "run_id": f"{s.id}-{variant}-{i}",
                        c.metric: x,
                        plan.conclusions[1].metric: 100.0 + i,
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture
def plan_and_settings(tmp_path, studies_dir):
    sw = sens_run.load(write_config(tmp_path / "yaml", small_config(points=3), studies_dir), studies_dir)
    plan = sw.studies["s1"]
    return plan, sens_run.settings(plan, sw.joint_points, sw.joint_seed)


LOWER = ([100.0, 101, 99, 100.5], [50.0, 51, 49, 50.5])  # variant 50 % lower, clearly significant
NS = ([100.0, 110, 90, 105], [99.0, 108, 92, 104])  # no significant difference
HIGHER = ([100.0, 101, 99, 100.5], [150.0, 151, 149, 150.5])


def test_robust_when_every_setting_keeps_the_outcome(plan_and_settings):
    plan, sets = plan_and_settings
    runs = synthetic_runs(plan, sets, {s.id: LOWER for s in sets})
    eff = sens.effects(runs, plan)
    assert set(eff[eff.conclusion == "tput"]["outcome"]) == {"lower"}
    assert np.allclose(eff[eff.conclusion == "tput"]["effect_pct"], -50.0, atol=0.2)
    rob = sens.robustness(eff, plan).set_index("conclusion")
    assert rob.loc["tput", "robust"] and rob.loc["tput", "supports_claim"] and rob.loc["tput", "breaks"] == []
    assert rob.loc["tput", "sign_kept"]
    assert rob.loc["tput", "shipped_outcome"] == "lower"
    # the other conclusion: identical arms, never significant, so robustly "n.s." (not the claim)
    assert rob.loc["lat", "robust"] and not rob.loc["lat", "supports_claim"]


def test_a_parameter_end_that_loses_significance_or_flips_breaks_it(plan_and_settings):
    plan, sets = plan_and_settings
    vals = {s.id: LOWER for s in sets}
    vals["oat/rr.client_us.mean/high"] = NS
    vals[sets[-1].id] = HIGHER  # one joint point flips the sign
    eff = sens.effects(synthetic_runs(plan, sets, vals), plan)
    rob = sens.robustness(eff, plan).set_index("conclusion")
    assert not rob.loc["tput", "robust"]
    assert rob.loc["tput", "breaks"] == ["rr.client_us.mean high", "joint 1/3"]
    assert rob.loc["tput", "oat_min"] == pytest.approx(-50.0, abs=0.5)
    assert rob.loc["tput", "joint_max"] == pytest.approx(50.0, abs=0.5)
    assert rob.loc["tput", "joint_broken"] == 1
    assert not rob.loc["tput", "sign_kept"]  # the joint point flips the sign
    vals[sets[-1].id] = LOWER  # only the loss of significance left: the sign holds, the outcome does not
    rob = sens.robustness(sens.effects(synthetic_runs(plan, sets, vals), plan), plan).set_index("conclusion")
    assert not rob.loc["tput", "robust"] and rob.loc["tput", "sign_kept"]


def test_equivalence_outcomes_and_holm():
    alpha = 0.05
    assert sens.outcome("equivalent", 0.3, 0.01, (-0.5, 1.0), 2.0, alpha) == "equivalent"
    assert sens.outcome("equivalent", -3.0, 0.9, (-3.5, -2.5), 2.0, alpha) == "beyond"
    assert sens.outcome("equivalent", -1.5, 0.3, (-2.5, -0.5), 2.0, alpha) == "unresolved"
    assert sens.outcome("higher", -4.0, 0.001, (-5, -3), None, alpha) == "lower"
    assert sens.outcome("higher", 4.0, 0.2, (-1, 9), None, alpha) == "n.s."
    assert sens.outcome("higher", math.nan, math.nan, (math.nan, math.nan), None, alpha) == "no result"


def test_equivalence_claim_breaks_when_a_setting_leaves_the_margin(tmp_path, studies_dir):
    cfg = small_config(points=2)
    cfg["studies"]["s1"]["conclusions"][0].update(claim="equivalent", margin_pct=2)
    sw = sens_run.load(write_config(tmp_path / "yaml", cfg, studies_dir), studies_dir)
    plan = sw.studies["s1"]
    sets = sens_run.settings(plan, sw.joint_points, sw.joint_seed)
    same = ([100.0, 100.2, 99.8, 100.1, 99.9], [100.1, 100.0, 99.9, 100.2, 100.0])
    off = ([100.0, 100.2, 99.8, 100.1, 99.9], [105.1, 105.0, 104.9, 105.2, 105.0])
    vals = {s.id: same for s in sets}
    vals["oat/rr.client_us.mean/low"] = off
    eff = sens.effects(synthetic_runs(plan, sets, vals), plan)
    e = eff[eff.conclusion == "tput"].set_index("setting")
    assert e.loc["shipped", "outcome"] == "equivalent"
    assert e.loc["oat/rr.client_us.mean/low", "outcome"] == "beyond"
    rob = sens.robustness(eff, plan).set_index("conclusion")
    assert not rob.loc["tput", "robust"] and rob.loc["tput", "breaks"] == ["rr.client_us.mean low"]
    # one Holm family per setting: the adjusted p is never below the raw one
    assert (eff["p_holm"] >= eff["p"] - 1e-12).all()


# --- one tiny real sweep ---------------------------------------------------------------------------------


def test_tiny_sweep_writes_records_once_and_the_analysis_needs_no_simulator(
    tmp_path, studies_dir, sim_binary, monkeypatch
):
    import time

    path = write_config(tmp_path / "yaml", small_config(seeds=2, points=2), studies_dir)
    sw = sens_run.load(path, studies_dir)
    data = tmp_path / "data"
    t0 = time.monotonic()
    r = sens_run.sweep(sw, "s1", data, base_seed=1)
    assert time.monotonic() - t0 < 20
    assert r["runs"] == 5 * 2 * 2 and r["new"] == 20 and r["failed"] == 0
    folder = data / "raw" / "sensitivity" / "s1"
    files = sorted(folder.glob("*.json"))
    assert len(files) == 20
    keys = set()
    for f in files:
        rec = store.read_record(f)
        assert store.check_record(f, rec) == []
        prov = rec["provenance"]
        assert prov["testbed"]["binary_sha256"] and prov["build_id"] and prov["sensitivity"]["setting"]
        assert rec["definition_hash"] != config.sha256(
            config.definition(sw.studies["s1"].study, "sim", rec["variant"], rec["point"])
        )  # never a run key of the study's own runs
        keys.add(rec["run_key"])
    assert len(keys) == 20
    mtimes = {f: f.stat().st_mtime_ns for f in files}
    # a rerun skips every run on disk and rewrites nothing
    r2 = sens_run.sweep(sw, "s1", data, base_seed=1)
    assert r2["new"] == 0 and sorted(folder.glob("*.json")) == files
    assert all(f.stat().st_mtime_ns == m for f, m in mtimes.items())
    # the analysis reads the records through the manifest; the simulator is not touched
    import schedlab.testbeds.sim as simtb

    def no_sim(*a, **k):
        raise AssertionError("the analysis ran the simulator")

    monkeypatch.setattr(simtb, "run_scenario", no_sim)
    runs = sens.read_runs(sw, "s1", data)
    assert len(runs) == 20 and set(runs["setting"]) == {s.id for s in sens_run.settings(sw.studies["s1"], 2, 7)}
    eff = sens.effects(runs, sw.studies["s1"], sw.confidence)
    rob = sens.robustness(eff, sw.studies["s1"])
    assert list(rob["conclusion"]) == ["tput", "lat"]
    assert np.isfinite(rob["shipped_pct"]).all()
    # select() rebuilds the same manifest from the records alone
    before = json.loads(sens_run.manifest_path(data, "s1").read_text())
    sel = sens_run.select(sw, "s1", data)
    assert sel["runs"] == 20 and sel["missing"] == 0
    assert json.loads(sens_run.manifest_path(data, "s1").read_text()) == before
    # a changed range is another configuration: the old manifest is refused, not misread
    cfg = yaml.safe_load(path.read_text())
    cfg["studies"]["s1"]["parameters"][0]["high"] = 30
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    with pytest.raises(sens_run.SensitivityError, match="written for another"):
        sens.read_runs(sens_run.load(path, studies_dir), "s1", data)


def test_a_sweep_with_two_jobs_writes_the_same_records_and_manifest(tmp_path, studies_dir, sim_binary):
    """--jobs runs simulator processes side by side; the records (their run keys and metrics)
    and the manifest's order are those of the sweep one run at a time."""
    path = write_config(tmp_path / "yaml", small_config(seeds=2, points=2), studies_dir)
    sw = sens_run.load(path, studies_dir)
    out = {}
    for jobs in (1, 2):
        data = tmp_path / f"data{jobs}"
        r = sens_run.sweep(sw, "s1", data, base_seed=1, jobs=jobs)
        assert r["new"] == 20 and r["failed"] == 0
        recs = [store.read_record(f) for f in sorted((data / "raw" / "sensitivity" / "s1").glob("*.json"))]
        man = json.loads(sens_run.manifest_path(data, "s1").read_text())
        out[jobs] = (
            [(x["run_id"], x["metrics"]) for x in recs],
            [[e["run_id"] for e in s["runs"]] for s in man["settings"]],
        )
    assert out[1] == out[2]
