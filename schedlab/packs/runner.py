"""Run one pack alone on one target and write its raw records.

Records have the format of schedlab.run (schedlab-run/1, validated by
workflow/schemas/record.schema.json, written once by schedlab.store):

    study       pack-<name>
    testbed     "local" for LocalTarget runs, "qemu" on a natively booted qemu
                guest (--target qemu-native:CONFIG), "lab" on an ssh host
    variant     --variant (default "default"; S2 names kernels here)
    point       every resolved parameter, with the sweep parameter's one value
    point_id    <sweep>-<value> (e.g. clients-4), or "default"
    metrics     the pack's metrics; units and directions are in
                provenance.testbed.pack.metrics
    log         the tool's raw output (so a record can be re-parsed)

Folder: OUT/raw/<testbed>/pack-<name>/<run_id>.json. Each round of
repetitions (warm-ups first, recorded with warmup=true) runs every point once
in a seeded random order. An existing record for a run key is reused, not
re-measured. A run whose output does not parse raises PackOutputError and
writes no record; cleanup (server stop, scratch removal) always happens.
"""

from __future__ import annotations

import random
import re
import sys
import time
from pathlib import Path

from schedlab import __version__, config, store
from schedlab.packs import get
from schedlab.packs.base import Context, PackError, gather_facts
from schedlab.run import _now, derive_seed, host_description, repo_state

LOG_LIMIT = 20000


def run_pack(
    pack_name: str,
    params: dict,
    target,
    reps: int,
    warmup: int,
    out_dir,
    seed: int,
    variant: str = "default",
    testbed: str | None = None,
    log=sys.stderr,
) -> list[Path]:
    """Run pack_name with params on target: warmup + reps rounds over the sweep.
    Returns the paths of the records (new and reused), in run order. testbed: the records'
    testbed (default: the target's `testbed` attribute, e.g. "qemu" for a natively booted
    qemu guest, "lab" for an ssh host, else "local")."""
    testbed = testbed or getattr(target, "testbed", "local")
    if reps < 1 or warmup < 0:
        raise PackError(f"--reps {reps} / --warmup {warmup}: need reps >= 1 and warmup >= 0")
    if seed < 0:
        raise PackError(f"--seed {seed}: must be >= 0")
    if not re.fullmatch(r"[A-Za-z0-9_.=-]+", variant):
        raise PackError(f"variant {variant!r}: only letters, digits and _ . = - are allowed")
    pack = get(pack_name)
    missing = pack.missing_tools(target)
    if missing:
        raise PackError(
            f"pack {pack.name}: {', '.join(missing)} not found on target {target.name} "
            f"(Debian packages: {' '.join(pack.debs)})"
        )
    facts = gather_facts(target)
    resolved = pack.resolve(dict(params), facts)
    points = pack.points(resolved)
    study = f"pack-{pack.name}"
    folder = store.raw_dir(Path(out_dir), testbed, study)
    store.sweep_partial(folder)
    build_id = f"{target.name}:kernel-{facts['kernel']}:{facts['machine']}"

    # the plan: rounds (warm-ups first), points shuffled per round
    plan_seed = derive_seed(seed, "plan", testbed, study)
    rng = random.Random(plan_seed)
    rounds = warmup + reps
    plan = []
    for rep in range(rounds):
        order = points[:]
        rng.shuffle(order)
        plan += [(rep, pt) for pt in order]

    metric_names = [m.name for m in pack.metrics]
    entries = []
    for index, (rep, pt) in enumerate(plan):
        pid = pack.point_id(pt)
        definition = {
            "study": study,
            "testbed": testbed,
            "variant": variant,
            "point": pt,
            "metrics": metric_names,
            "pack": pack.name,
            "pack_version": pack.version,
        }
        dhash = config.sha256(definition)
        key = store.run_key_of(dhash, build_id, rep, seed)
        run_id = store.run_id_of(variant, pid, rep, key)
        entries.append(
            dict(
                index=index,
                rep=rep,
                point=pt,
                pid=pid,
                dhash=dhash,
                key=key,
                run_id=run_id,
                path=folder / f"{run_id}.json",
            )
        )

    todo = []
    for e in entries:
        if e["path"].exists():
            problems = store.check_record(e["path"], store.read_record(e["path"]))
            if problems:
                raise store.RecordError(
                    f"{e['path']}: existing record is damaged: {'; '.join(problems)} "
                    "(left untouched; move it aside to re-measure)"
                )
            print(f"[{study}/{testbed}] {e['run_id']}: reusing", file=log, flush=True)
        else:
            todo.append(e)
    if not todo:
        return [e["path"] for e in entries]

    workdir = target.tmpdir()
    ctx = Context(target=target, workdir=workdir, params=resolved, facts=facts, seed=seed)
    try:
        t0 = time.monotonic()
        pack.prepare(ctx)
        print(f"[{study}/{testbed}] prepared on {target.name} in {time.monotonic() - t0:.1f} s", file=log, flush=True)
        described = {
            "name": testbed,
            "target": target.name,
            "facts": facts,
            "pack": {
                **pack.describe(),
                "params": resolved,
                "tool_version": pack.tool_version(target),
                "prepared": {k: v for k, v in ctx.state.items() if isinstance(v, (str, int, float, bool))},
            },
        }
        provenance = {
            **repo_state(),
            "schedlab_version": __version__,
            "testbed": described,
            "build_id": build_id,
            "host": host_description(),
        }
        for e in todo:
            rep, pt = e["rep"], e["point"]
            warm = rep < warmup
            rseed = derive_seed(seed, testbed, study, variant, e["pid"], rep)
            tag = f"[{study}/{testbed}] {variant} {e['pid']} run {rep + 1}/{rounds}" + (" (warm-up)" if warm else "")
            started, t1 = _now(), time.monotonic()
            output = pack.run_once(ctx, pt, rseed, e["run_id"])
            values = pack.check_metrics(pack.parse(output, e["run_id"]), output, e["run_id"])
            rec = {
                "format": store.FORMAT,
                "run_id": e["run_id"],
                "run_key": e["key"],
                "study": study,
                "testbed": testbed,
                "variant": variant,
                "point": pt,
                "point_id": e["pid"],
                "repetition": rep,
                "warmup": warm,
                "seed": rseed,
                "status": "ok",
                "attempt": 1,
                "metrics": values,
                "counters": {},
                "samples": {},
                "log": output[-LOG_LIMIT:],
                "started": started,
                "finished": _now(),
                "duration_s": time.monotonic() - t1,
                "run_order": {
                    "index": e["index"],
                    "plan_size": len(plan),
                    "plan_seed": plan_seed,
                    "executed_as": "pack-runner",
                },
                "definition_hash": e["dhash"],
                "provenance": provenance,
            }
            store.write_record(folder, rec)
            shown = ", ".join(f"{k}={v:.6g}" for k, v in values.items())
            print(f"{tag}: {shown} ({rec['duration_s']:.2f} s)", file=log, flush=True)
    finally:
        try:
            pack.cleanup(ctx)
        finally:
            target.run(["rm", "-rf", "--", workdir], timeout=300, check=False)
    return [e["path"] for e in entries]
