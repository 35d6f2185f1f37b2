"""The run order of a study and the seeds of its runs, from its study file (schedlab.config):
shared by the run stage (schedlab.run), the records (which repetition is a warm-up) and the
testbeds that plan on their own (the lab driver, native boots)."""

from __future__ import annotations

import hashlib
import random

from schedlab import config


def derive_seed(*parts) -> int:
    """A 32-bit seed from the base seed and the names of a run (stable across machines)."""
    h = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:4], "big")


def repetitions(settings: dict) -> list[dict]:
    """The repetitions of one (variant, point): [{repetition, round, warmup}], in order.

    Where the unit is the run (the sim), round r is repetition r and the first `warmup`
    rounds are discarded. Where it is the boot, a round is one boot: `runs_per_boot`
    measured runs after `warmup` discarded ones in each boot (a warm-up warms a boot, and
    every round boots afresh), so `runs` measured runs take runs / runs_per_boot rounds."""
    w, runs = settings["warmup"], settings["runs"]
    if settings.get("unit", "run") != "boot":
        return [{"repetition": r, "round": r, "warmup": r < w} for r in range(w + runs)]
    m = settings.get("runs_per_boot", 1)
    rounds = -(-runs // m)  # the last boot may hold fewer
    out, rep = [], 0
    for k in range(rounds):
        for j in range(w + min(m, runs - k * m)):
            out.append({"repetition": rep, "round": k, "warmup": j < w})
            rep += 1
    return out


def boot_key(entry: dict, settings: dict):
    """Which boot of the plan an entry runs in (None where the unit is not the boot): its
    round (boot_plan round: the round's variants share the boot where they share a build) or
    its (round, variant) (variant-round)."""
    if settings.get("unit") != "boot":
        return None
    if settings.get("boot_plan") == "variant-round":
        return (entry["round"], entry["variant"])
    return entry["round"]


def plan(study: dict, testbed: str, base_seed: int) -> list[dict]:
    """The study's run order: round by round (warm-up rounds first), every
    (variant, point) once per round in a seeded random order, so variants are
    interleaved (ABBA rather than AAAA BBBB) and drift on a host does not look
    like a variant effect. With order "variant-blocks" (real hosts, where a new
    variant means a reboot) each round visits the variants in a seeded random
    order and runs a variant's points together, in random order. Where the unit is
    the boot, a round is one boot and holds each (variant, point)'s warm-ups and
    runs_per_boot measured runs (repetitions())."""
    s = config.testbed_settings(study, testbed)
    cells = [(v, p) for v in study["variants"] for p in config.points(study, testbed)]
    plan_seed = derive_seed(base_seed, "plan", testbed, study["study"])
    rng = random.Random(plan_seed)
    reps = repetitions(s)
    rounds: dict[int, list[dict]] = {}
    for r in reps:
        rounds.setdefault(r["round"], []).append(r)
    order = []
    for k in sorted(rounds):
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
            for r in rounds[k]:  # a cell's runs in one boot follow each other, warm-ups first
                order.append({"variant": v, "point": p, **r})
    for i, entry in enumerate(order):
        entry.update(index=i, plan_size=len(order), plan_seed=plan_seed)
    # a testbed that runs some of the variants (testbeds.<tb>.variants) runs them in the whole
    # plan's order and indices, like `run-study --variant`, so adding the others later
    # neither reorders nor renumbers what was measured
    keep = set(s["variants"])
    return [e for e in order if e["variant"] in keep]
