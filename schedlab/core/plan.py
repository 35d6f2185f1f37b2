"""The run order of a study and the seeds of its runs: the ground floor, shared by the run
stage (schedlab.run) and the testbeds that plan on their own (the lab driver, native boots)."""

from __future__ import annotations

import hashlib
import random

from schedlab import config


def derive_seed(*parts) -> int:
    """A 32-bit seed from the base seed and the names of a run (stable across machines)."""
    h = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:4], "big")


def plan(study: dict, testbed: str, base_seed: int) -> list[dict]:
    """The study's run order: round by round (warm-up rounds first), every
    (variant, point) once per round in a seeded random order, so variants are
    interleaved (ABBA rather than AAAA BBBB) and drift on a host does not look
    like a variant effect. With order "variant-blocks" (real hosts, where a new
    variant means a reboot) each round visits the variants in a seeded random
    order and runs a variant's points together, in random order."""
    s = config.testbed_settings(study, testbed)
    cells = [(v, p) for v in study["variants"] for p in config.points(study, testbed)]
    plan_seed = derive_seed(base_seed, "plan", testbed, study["study"])
    rng = random.Random(plan_seed)
    order = []
    for rep in range(s["warmup"] + s["runs"]):
        if s["order"] == "variant-blocks":
            variants = list(study["variants"])
            rng.shuffle(variants)
            rnd = []
            for v in variants:
                block = [c for c in cells if c[0] == v]
                rng.shuffle(block)
                rnd += block
        else:
            rnd = cells[:]
            rng.shuffle(rnd)
        for v, p in rnd:
            order.append({"variant": v, "point": p, "repetition": rep, "warmup": rep < s["warmup"]})
    for i, entry in enumerate(order):
        entry.update(index=i, plan_size=len(order), plan_seed=plan_seed)
    # a testbed that runs some of the variants (testbeds.<tb>.variants) runs them in the whole
    # plan's order and indices, like `run-study --variant`, so adding the others later
    # neither reorders nor renumbers what was measured
    keep = set(s["variants"])
    return [e for e in order if e["variant"] in keep]
