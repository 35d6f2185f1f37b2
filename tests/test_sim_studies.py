"""Study scenarios through schedlab.testbeds.sim.SimTestbed (the study files' sim_workload)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from schedlab import config, testbeds
from schedlab.config import ConfigError
from schedlab.core.testbed import RunResult
from schedlab.testbeds.sim import SimTestbed

REPO = Path(__file__).resolve().parents[1]


def study(name):
    return yaml.safe_load((REPO / "config" / "studies" / f"{name}.yaml").read_text())


@pytest.fixture(scope="session")
def tb():
    return SimTestbed()


def test_describe_and_build_id(tb):
    d = tb.describe()
    assert d["simulator"].startswith("credit1sim")
    assert len(d["binary_sha256"]) == 64 and len(d["sources_sha256"]) == 64
    assert "gcc" in d["compiler"].lower()
    s = study("s3")
    assert tb.build_id(s, "d0") != tb.build_id(s, "d1000")
    assert tb.build_id(s, "d0") == tb.build_id(s, "d0")


@pytest.mark.parametrize(
    "name,point",
    [("s0", {"vms": 1}), ("s1", {"mode": "alone"}), ("s2", {"overcommit": 1}), ("s3", {"vms": 24}), ("s4", {"vms": 2})],
)
def test_metric_names_match_study(tb, name, point):
    s = study(name)
    r = tb.run_once(s, s["baseline"], point, 1)
    assert isinstance(r, RunResult)
    # the sim's metrics: S4's `bursts` and `home_share` exist only on the testbeds that trace Xen
    assert set(r.metrics) == {m["name"] for m in config.metrics_for(s, point, "sim")}
    assert r.counters and all(v == v for v in r.metrics.values())


def test_same_seed_same_result_and_seed_variance(tb):
    s = study("s2")
    a = tb.run_once(s, "pv", {"overcommit": 2}, 11)
    b = tb.run_once(s, "pv", {"overcommit": 2}, 11)
    c = tb.run_once(s, "pv", {"overcommit": 2}, 12)
    assert a.metrics == b.metrics and a.counters == b.counters
    assert a.metrics != c.metrics


def test_s1_bug_collapses_and_fix_restores(tb):
    s = study("s1")
    alone = tb.run_once(s, "bug", {"mode": "alone"}, 1).metrics
    bug = tb.run_once(s, "bug", {"mode": "corun"}, 1).metrics
    fix = tb.run_once(s, "fixed", {"mode": "corun"}, 1).metrics
    assert bug["throughput_mbps"] < 0.2 * alone["throughput_mbps"]
    assert fix["throughput_mbps"] > 0.8 * alone["throughput_mbps"]
    assert bug["latency_us"] > 10 * fix["latency_us"]


def test_s2_pv_spinlocks_end_the_storm(tb):
    s = study("s2")
    t = tb.run_once(s, "ticket", {"overcommit": 2}, 1).metrics
    p = tb.run_once(s, "pv", {"overcommit": 2}, 1).metrics
    assert p["ops_per_s"] > 5 * t["ops_per_s"]
    assert p["wait_p99_us"] < t["wait_p99_us"]
    t1 = tb.run_once(s, "ticket", {"overcommit": 1}, 1).metrics
    p1 = tb.run_once(s, "pv", {"overcommit": 1}, 1).metrics
    assert abs(p1["ops_per_s"] / t1["ops_per_s"] - 1) < 0.05  # no overcommit: no storm, no PV cost


def test_s0_yield_helps_under_overcommit(tb):
    s = study("s0")
    base = tb.run_once(s, "base", {"vms": 2}, 1).metrics
    yld = tb.run_once(s, "yield", {"vms": 2}, 1).metrics
    assert yld["throughput"] > base["throughput"]


def test_unknown_variant_raises(tb):
    with pytest.raises(ConfigError, match="unknown variant 'nope'"):
        tb.run_once(study("s1"), "nope", {"mode": "alone"}, 1)


def test_config_errors_stop_at_once_without_retries(tmp_path, sim_binary):
    """A study the sim cannot model is a configuration error: no retries, no failure records."""
    import copy

    from schedlab.run import PointRunner

    s = copy.deepcopy(study("s1"))
    del s["sim_workload"]
    with pytest.raises(ConfigError, match="no `sim_workload` section"):
        PointRunner(s, "sim", "bug", {"mode": "corun"}, tmp_path, 1, testbed=testbeds.get("sim")).run_rep(0)
    assert not list(tmp_path.rglob("*.json"))


def test_sim_never_reads_published():
    src = (REPO / "schedlab" / "testbeds" / "sim.py").read_text()
    assert '["published"]' not in src and 'get("published"' not in src and "'published'" not in src


@pytest.mark.parametrize(
    "name,variant,point",
    [
        ("s0", "base", {"vms": 2}),
        ("s0", "ppy", {"vms": 4}),
        ("s0", "pick", {"vms": 3}),
        ("s0", "push", {"vms": 3}),
        ("s1", "bug", {"mode": "corun"}),
        ("s1", "fixed", {"mode": "corun"}),
        ("s2", "ticket", {"overcommit": 3}),
        ("s2", "pv", {"overcommit": 2}),
        ("s3", "d1000", {"vms": 24}),
        ("s4", "numa", {"vms": 10}),
        ("s4", "pinned", {"vms": 6}),
        ("s4", "none", {"vms": 6}),
    ],
)
def test_invariants_hold_in_every_study_scenario(tb, name, variant, point):
    """Runs shortened study scenarios with the simulator's per-event invariant checks on (runqueue shape, idle
    vCPU at the tail, nr_runnable, no runnable vCPU lost, guest executes only while current, credit bounds)."""
    import json
    import subprocess

    from schedlab.testbeds.sim import BINARY

    for tag, sc in tb.scenarios(study(name), variant, point, 3):
        sc = dict(sc, check=True)
        if sc.get("stop_when_done"):
            sc["duration_s"] = 10
        else:
            sc["duration_s"] = min(sc["duration_s"], 0.6)
            sc["warmup_s"] = min(sc.get("warmup_s", 0), 0.1)
        p = subprocess.run([str(BINARY)], input=json.dumps(sc), capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"{name}/{variant}/{tag}: {p.stderr[-500:]}"


def test_capped_and_weighted_mix_invariants():
    import json
    import subprocess

    from schedlab.testbeds.sim import BINARY, ensure_binary

    ensure_binary()
    w = {
        "kind": "loop",
        "compute_us": {"dist": "exp", "mean": 400},
        "io": {"p": 0.2, "latency_us": 300},
        "lock": {"type": "pv-ticket", "hold_us": 5, "spin_threshold_us": 50},
    }
    sc = {
        "seed": 9,
        "duration_s": 1.0,
        "check": True,
        "host": {"sockets": 2, "cores_per_socket": 2, "threads_per_core": 2, "nodes": 2},
        "xen": {"version": "4.6", "timer_slop_us": 50, "migration_delay_us": 500},
        "domains": [
            {"name": "capped", "vcpus": 3, "cap": 60, "weight": 128, "workload": w},
            {"name": "heavy", "vcpus": 4, "weight": 1024, "soft_affinity": [0, 1, 2, 3], "workload": w},
            {"name": "pinned", "vcpus": 2, "hard_affinity": [5], "workload": {"kind": "cpu"}},
            {"name": "idle", "vcpus": 2, "workload": {"kind": "idle"}},
        ],
    }
    p = subprocess.run([str(BINARY)], input=json.dumps(sc), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-500:]
    r = json.loads(p.stdout)
    assert r["counters"]["parks"] > 0


def test_s0_noop_yield_is_a_noop_only_for_a_yielder_alone_in_its_priority_class(tmp_path):
    """Pins the explanation of S0 base's U-shape over VMs (docs/simulator.md, "Model checks"): with the no-op
    yield the spinner still re-enters csched_schedule and goes behind vCPUs of *equal* priority on its runq.
    With 2 VMs (2 vCPUs per pCPU) accounting puts the pair in opposite classes, so an UNDER spinner almost never
    lets its partner run; with 4 VMs it often has an UNDER peer and the no-op yield round-robins.  Nearly all
    spinning is on a FIFO lock handed to a preempted waiter (not on a preempted holder)."""
    from schedlab.testbeds.sim import mechanism_scenario, read_trace, run_scenario, trace_timeline

    s = study("s0")
    frac, grantee = {}, {}
    for n in (2, 4):
        f = tmp_path / f"t{n}.jsonl"
        sc = mechanism_scenario(s, s["variants"]["base"]["sim"], 1, f, 1.0, vms=n)
        r = run_scenario(sc)
        frac[n] = r["counters"]["yields_changed"] / r["counters"]["yields"]
        tl = trace_timeline(read_trace(f), int(sc["duration_s"] * 1e9))
        gaps = {}
        for g in tl["owner_gaps"]:
            gaps.setdefault((g["dom"], g["lock"]), []).append(g)
        tot = by_grantee = 0
        for sg in tl["segments"]:
            if sg["mode"] != "spin":
                continue
            tot += sg["t1"] - sg["t0"]
            by_grantee += sum(
                max(0, min(g["t1"], sg["t1"]) - max(g["t0"], sg["t0"]))
                for g in gaps.get((sg["dom"], sg["lock"]), [])
                if g["why"] == "grantee"
            )
        grantee[n] = by_grantee / tot
    assert frac[2] < 0.05 and frac[4] > 0.25
    assert grantee[2] > 0.8 and grantee[4] > 0.8


def test_s2_no_overcommit_wait_is_plain_queueing_in_microseconds():
    """S2 at overcommit 1: nothing preempts lock holders; the p99 wait (in us) is the queueing of 4 vCPUs on one
    hot lock (closed FIFO queue, exp(20 us) think, exp(2 us) hold: p99 ~ 7.8 us, mean ~ 0.64 us), PV never polls,
    and ticket and PV give identical runs."""
    from schedlab.testbeds.sim import run_scenario

    s = study("s2")
    res = {}
    for v in ("ticket", "pv"):
        ((_, sc),) = SimTestbed().scenarios(s, v, {"overcommit": 1}, 1)
        sc = dict(sc, duration_s=1.0, warmup_s=0.2)
        res[v] = run_scenario(sc)
    t, p = res["ticket"], res["pv"]
    assert t["lock_wait"] == p["lock_wait"] and [d["ops"] for d in t["domains"]] == [d["ops"] for d in p["domains"]]
    assert len(t["domains"]) == 1 and p["domains"][0]["polls"] == 0
    assert 5 < t["lock_wait"]["p99_us"] < 11 and 0.4 < t["lock_wait"]["mean_us"] < 0.9


def test_era_switches_reach_the_scenarios(tb):
    """Model switches (docs/credit1-model.md section 17) set by the studies for era accuracy: S0 runs Xen 4.0's
    credit1 and its idle Windows VMs take the clock tick on their boot vCPU; S3 uses the 2009 cache-hot rule.
    A variant's `sim:` block can set the switches too."""
    ((_, s0),) = tb.scenarios(study("s0"), "base", {"vms": 2}, 1)
    assert s0["xen"]["version"] == "4.0"
    idle = [d for d in s0["domains"] if d["workload"]["kind"] == "idle"]
    assert len(idle) == 6 and all(
        d["workload"] == {"kind": "idle", "idle_tick_ms": 15.625, "idle_tick_vcpus": 1, "idle_tick_work_us": 10}
        for d in idle
    )
    ((_, s3),) = tb.scenarios(study("s3"), "d1000", {"vms": 24}, 1)
    assert s3["xen"]["cachehot_rule"] == "state_entry" and s3["xen"]["migration_delay_us"] == 1000
    for name, point in (("s1", {"mode": "corun"}), ("s2", {"overcommit": 2}), ("s4", {"vms": 2})):
        for _, sc in tb.scenarios(study(name), study(name)["baseline"], point, 1):
            assert not {"cachehot_rule", "switch_cost_us", "yield_cost_us"} & set(sc["xen"])
            assert all("idle_tick_ms" not in d["workload"] for d in sc["domains"])
    s = study("s3")
    s["variants"]["d1000"]["sim"] = dict(s["variants"]["d1000"]["sim"], cachehot_rule="run_time", yield_cost_us=1)
    ((_, sc),) = tb.scenarios(s, "d1000", {"vms": 24}, 1)
    assert sc["xen"]["cachehot_rule"] == "run_time" and sc["xen"]["yield_cost_us"] == 1


def test_s1_netback_and_s4_dom0_switches_reach_the_scenarios(tb):
    """docs/credit1-model.md sections 17.6-17.7: S1 adds dom0's netback pinned to irq_cpu; S4 adds a dom0 on node 0
    (left out of the metrics) and takes each VM's home node from placement_map."""
    s1 = study("s1")
    for _, sc in tb.scenarios(s1, "fixed", {"mode": "corun"}, 1):
        d0 = sc["domains"][-1]
        assert d0["name"] == "dom0" and d0["workload"]["kind"] == "netback"
        assert d0["hard_affinity"] == [s1["sim_workload"]["host"]["irq_cpu"]]
    s1["sim_workload"]["netback"] = False
    assert all(len(sc["domains"]) == 2 for _, sc in tb.scenarios(s1, "fixed", {"mode": "corun"}, 1))
    s1["sim_workload"]["netback"] = {"rx_us": 5, "tx_ns": 4}
    with pytest.raises(ConfigError, match="tx_ns"):
        tb.scenarios(s1, "fixed", {"mode": "alone"}, 1)

    s4 = study("s4")
    for _, sc in tb.scenarios(s4, "pinned", {"vms": 6}, 1):
        vms, d0 = sc["domains"][:-1], sc["domains"][-1]
        assert [d["home_node"] for d in vms] == [0, 1, 0, 1, 0, 1]
        assert d0["name"] == "dom0" and d0["home_node"] == 0 and d0["hard_affinity"] == list(range(8))
    r = tb.run_once(s4, "none", {"vms": 2}, 1)
    assert len(r.samples["specjbb"]) == 2
    s4["sim_workload"]["placement_map"] = [1, 1, 0]
    ((_, sc), *_) = tb.scenarios(s4, "numa", {"vms": 6}, 1)
    assert [d["home_node"] for d in sc["domains"][:6]] == [1, 1, 0, 1, 1, 0]
    assert sc["domains"][0]["soft_affinity"] == list(range(8, 16))
    for bad in ([2], "asymmetric", []):
        s4["sim_workload"]["placement_map"] = bad
        with pytest.raises(ConfigError, match="placement_map"):
            tb.scenarios(s4, "none", {"vms": 2}, 1)
    s4["sim_workload"]["placement_map"] = "alternate"
    s4["sim_workload"]["dom0"] = dict(s4["sim_workload"]["dom0"], node=5)
    with pytest.raises(ConfigError, match="dom0.node"):
        tb.scenarios(s4, "none", {"vms": 2}, 1)
