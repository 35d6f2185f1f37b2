"""A raw record against itself, its plan and its study: what a checksum cannot tell.

A checksum says the bytes are those written; a record whose checksum was recomputed after
an edit passes it. These checks find the contradictions such an edit leaves (docs/inputs.md):

- its point, point_id and definition: the point_id is the point's, and where the record is
  of its study's current definition, that definition is of the record's variant and point;
- its run key and seed, where the base seed is known (the one in config/config.yaml, found
  from the record's plan seed): the run key of its definition, build, repetition and base
  seed, and the seed of its names;
- its warm-up flag: the plan's (a record of the current definition and design is a warm-up
  exactly when the design's repetitions say so, plan.repetitions; its plan entry, where
  the plan is known, has its variant, point and repetition);
- its metrics: every metric the study requires at its point (current definition);
- its numbers: finite (checked by the store) and within 64 bits, so 10**400 is refused;
- its times: finished not before started.

Records of an earlier definition of a study (or of a study no longer in config/studies)
are checked as far as they can be without it. store.check_record calls `problems` with its
run key function (imports run downward: this module knows neither the store nor records).
"""

from __future__ import annotations

import datetime as dt
import functools
import os
from collections.abc import Callable
from typing import Any

from schedlab import config
from schedlab.plan import derive_seed, plan, repetitions

INT_BOUND = 2**63  # a record's integers fit a signed 64-bit integer
# the validation's mirror runs (schedlab.mirror): their seeds are the validation file's, named in
# provenance.validation.seeds, and their plan seed is the mirror's, not the study's
MIRROR = "validation"


def _big_int(obj: Any) -> str | None:
    """The dotted field of the first integer in `obj` beyond 64 bits (iteratively)."""
    todo = [(obj, ())]
    while todo:
        o, path = todo.pop()
        if isinstance(o, int) and not isinstance(o, bool):
            if not -INT_BOUND <= o < INT_BOUND:
                return ".".join(path) or "(top level)"
        elif isinstance(o, dict):
            todo += [(v, (*path, str(k))) for k, v in o.items()]
        elif isinstance(o, list):
            todo += [(v, (*path, str(i))) for i, v in enumerate(o)]
    return None


def _time(value) -> dt.datetime | None:
    try:
        t = dt.datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)


@functools.cache
def _config_seed() -> int | None:
    try:
        return config.load_config()["seed"]
    except config.ConfigError:
        return None


def _study_key(name: str) -> tuple | None:
    path = config.STUDIES_DIR / f"{name}.yaml"
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _view(key: tuple, testbed: str):
    """(study, {definition hash: (variant, point)}, warm-ups) of a study file on a testbed,
    or None when it does not load or does not run there. The hashes are those of
    records.current_definitions: every (variant, point) the testbed runs."""
    try:
        study = config.load_study(key[0])
        settings = config.testbed_settings(study, testbed)
        current = {
            config.sha256(config.definition(study, testbed, v, p)): (v, p)
            for v in settings["variants"]
            for p in config.points(study, testbed)
        }
        warm = {r["repetition"]: r["warmup"] for r in repetitions(settings)}
        return study, current, warm, config.design_hash(study, testbed), settings["unit"]
    except (config.ConfigError, KeyError, TypeError, ValueError):
        return None


@functools.lru_cache(maxsize=64)
def _plan(key: tuple, testbed: str, base_seed: int) -> dict[int, dict]:
    view = _view(key, testbed)
    return {e["index"]: e for e in plan(view[0], testbed, base_seed)} if view else {}


def _base_seed(rec: dict, order: dict) -> int | None:
    """The base seed the record was made with, when it is config/config.yaml's: its plan
    seed, or its run seed, derives from it."""
    seed = _config_seed()
    if seed is None:
        return None
    if order.get("plan_seed") and order["plan_seed"] == derive_seed(seed, "plan", rec["testbed"], rec["study"]):
        return seed
    if _fixed_seeds(rec) is not None:
        return seed if order.get("plan_seed") == derive_seed(seed, "plan", MIRROR, rec["study"]) else None
    run_seed = derive_seed(seed, rec["testbed"], rec["study"], rec["variant"], rec["point_id"], rec["repetition"])
    return seed if rec.get("seed") == run_seed else None


def _fixed_seeds(rec: dict) -> list | None:
    """The seeds a mirror run's record names (provenance.validation.seeds), else None."""
    prov = rec.get("provenance")
    mine = prov.get(MIRROR) if isinstance(prov, dict) else None
    seeds = mine.get("seeds") if isinstance(mine, dict) else None
    return seeds if isinstance(seeds, list) else None


def problems(rec: dict, run_key_of: Callable[..., str]) -> list[str]:
    """The record's contradictions (empty: none found). Assumes nothing of its shape: the
    schema check reports what is missing or of the wrong type. `run_key_of`: the store's."""
    out: list[str] = []
    big = _big_int(rec)
    if big:
        out.append(f"field {big}: an integer beyond 64 bits")
    started, finished = _time(rec.get("started")), _time(rec.get("finished"))
    if started and finished and finished < started:
        out.append(f"field finished: {rec['finished']} is before started ({rec['started']})")
    point, pid = rec.get("point"), rec.get("point_id")
    if rec.get("testbed") == "local":  # a benchmark pack's record: its own point ids (packs/base.py)
        return out
    if isinstance(point, dict) and isinstance(pid, str):
        if config.point_id(point) != pid:
            out.append(f"field point: {point} is point_id {config.point_id(point)!r}, not {pid!r}")
    names = ("study", "testbed", "variant", "point_id", "definition_hash")
    if not all(isinstance(rec.get(k), str) for k in names) or not isinstance(point, dict):
        return out
    rep = rec.get("repetition")
    if not isinstance(rep, int) or isinstance(rep, bool):
        return out
    order = rec.get("run_order") if isinstance(rec.get("run_order"), dict) else {}
    build = (rec.get("provenance") or {}).get("build_id") if isinstance(rec.get("provenance"), dict) else None
    try:
        base = _base_seed(rec, order)
    except (TypeError, ValueError):
        base = None
    if base is not None and isinstance(build, str):
        # the key's form: with the design hash where the design was registered, exploratory apart
        design = rec.get("design_hash") if rec.get("registered") is True else None
        key = run_key_of(rec["definition_hash"], build, rep, base, design, rec.get("exploratory") is True)
        if rec.get("run_key") != key:
            out.append(
                f"field run_key: not the key of its definition, build {build}, repetition {rep} and base seed {base}"
            )
        fixed = _fixed_seeds(rec)
        if fixed is not None:
            want = fixed[rep] if 0 <= rep < len(fixed) else None
        else:
            want = derive_seed(base, rec["testbed"], rec["study"], rec["variant"], pid, rep)
        if rec.get("seed") != want:
            out.append(f"field seed: {rec.get('seed')!r}, but its names and base seed {base} give {want}")
    skey = _study_key(rec["study"])
    view = _view(skey, rec["testbed"]) if skey else None
    if view is None or rec["definition_hash"] not in view[1]:
        return out  # an earlier definition (or no study file): nothing more to hold it to
    study, current, warm, design_hash, unit = view
    variant, want_point = current[rec["definition_hash"]]
    if rec["variant"] != variant or point != want_point:
        out.append(
            f"field definition_hash: the definition of {variant} at {config.point_id(want_point)}, "
            f"not of the record's {rec['variant']} at {config.point_id(point)}"
        )
        return out
    if unit == "boot" and rec.get("design_hash") != design_hash:
        return out  # made under another design (or before registration): its plan is not today's
    if rep in warm and rec.get("warmup") is not warm[rep]:
        out.append(
            f"field warmup: {rec.get('warmup')!r}, but repetition {rep} is "
            f"{'a warm-up' if warm[rep] else 'measured'} in the plan of {study['_file']}"
        )
    index = order.get("index")
    if base is not None and isinstance(index, int) and index >= 0:
        entry = _plan(skey, rec["testbed"], base).get(index)
        # the plan as it is now: where the study's runs changed since, its indices moved
        if entry is not None and order.get("plan_size") == entry["plan_size"]:
            got = (rec["variant"], pid, rep, rec.get("warmup"))
            exp = (entry["variant"], config.point_id(entry["point"]), entry["repetition"], entry["warmup"])
            if got != exp:
                out.append(
                    f"field run_order.index: plan entry {index} is {exp[0]} {exp[1]} repetition {exp[2]}"
                    f"{' (warm-up)' if exp[3] else ''}, not this record's"
                )
    if rec.get("status") == "ok" and isinstance(rec.get("metrics"), dict):
        missing = [
            m["name"] for m in config.metrics_for(study, point, rec["testbed"]) if m["name"] not in rec["metrics"]
        ]
        if missing:
            out.append(f"field metrics: no value for {', '.join(missing)}, which {study['_file']} requires here")
    return out
