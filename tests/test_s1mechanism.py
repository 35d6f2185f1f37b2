"""S1's mechanism figure reads the kick-away chain from the simulator's trace (schedlab.testbeds.sim.boost_chains)."""

from schedlab import config
from schedlab.testbeds import sim


def _trace(variant, tmp_path, duration_s=0.2):
    study = config.load_study(config.ROOT / "config/studies/s1.yaml")
    sc = dict(sim.SimTestbed().scenarios(study, variant, {"mode": "corun"}, 1))["rr"]
    sc = {k: v for k, v in sc.items() if k != "warmup_s"}
    tf = tmp_path / f"{variant}.jsonl"
    sc.update(duration_s=duration_s, trace={"file": str(tf)})
    res = sim.run_scenario(sc)
    return res, sim.read_trace(tf)


def test_bug_chain_kick_migrate_rewake_boost(tmp_path):
    res, ev = _trace("bug", tmp_path)
    chains = sim.boost_chains(ev)
    assert len(chains) == res["counters"]["kickaways"] > 0
    t0, t1, c = sim.boost_chain_window(chains)
    assert c["kick"] <= c["off"] <= c["migrate"] <= c["rewake"] <= c["boost"] and t0 < c["kick"] < t1
    assert c["waker"] == (0, 0) and (c["dom"], c["vcpu"]) == (1, 0)  # the I/O vCPU's wake kicks the CPU-bound one
    assert c["to_cpu"] == c["cpu"] and not c["moved"]  # pinned: the migration picks the same pCPU
    # the I/O vCPU's next wake finds the kicked vCPU BOOSTed and tickles no pCPU
    nxt = next(w for w in sim.wake_waits(ev, 0, 0) if w["wake"] > c["boost"])
    assert not nxt["tickled"] and nxt["run"] - nxt["wake"] > 5_000_000


def test_fixed_has_no_kickaway(tmp_path):
    res, ev = _trace("fixed", tmp_path)
    assert res["counters"]["kickaways"] == 0 and sim.boost_chains(ev) == []
    # after start-up (both vCPUs start BOOSTed) every wake of the I/O vCPU tickles its pCPU
    assert all(w["tickled"] for w in sim.wake_waits(ev, 0, 0) if w["wake"] > 50_000_000)
