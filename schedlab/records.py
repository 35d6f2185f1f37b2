"""Which raw records make a study's results: one home for the selection that the run stage,
`schedlab dataset`, the Snakefile and the notebooks share.

A record belongs to the current study when its definition hash is that of a (variant,
point) of the study file as it is now; a point's runs are those of one build, keyed as the
runner keys them (store.run_key_of). A manifest lists, per point, the runs (path and
checksum) the statistics use; the notebooks read records through it, each once.
"""

from __future__ import annotations

import json
from pathlib import Path

from schedlab import config, store


def current_definitions(study: dict, testbed: str) -> dict[str, tuple[str, dict]]:
    """{definition hash: (variant, point)} of every (variant, point) of the study on testbed."""
    return {
        config.sha256(config.definition(study, testbed, v, p)): (v, p)
        for v in config.testbed_settings(study, testbed)["variants"]
        for p in config.points(study, testbed)
    }


def manifest_entry(study: str, testbed: str, variant: str, point: dict, definition_hash: str, recs: list[dict]) -> dict:
    """One point's entry of a manifest: the runs that stand for it."""
    return {
        "study": study,
        "testbed": testbed,
        "variant": variant,
        "point": point,
        "point_id": config.point_id(point),
        "definition_hash": definition_hash,
        "runs": [
            {
                "run_id": r["run_id"],
                "path": str(Path("raw") / testbed / study / f"{r['run_id']}.json"),
                "checksum": r["checksum"],
                "warmup": r["warmup"],
            }
            for r in recs
        ],
    }


def _current(data_dir: Path, study: dict, testbed: str) -> list[tuple[Path, dict | None]]:
    """(path, record) of the files in the study's raw folder that belong to its current
    definition, each read once; a file that cannot be read comes with None."""
    folder = store.raw_dir(Path(data_dir), testbed, study["study"])
    want = current_definitions(study, testbed)
    out: list[tuple[Path, dict | None]] = []
    for path in store.iter_records(folder) if folder.is_dir() else []:
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            out.append((path, None))
            continue
        if isinstance(rec, dict) and rec.get("definition_hash") in want:
            out.append((path, rec))
    return out


def on_disk(data_dir: Path, study: dict, testbed: str) -> list[Path]:
    """Files in the study's raw folder that belong to its current definition (read only; a
    file that cannot be read is listed too, for `schedlab dataset` to name)."""
    return [path for path, _ in _current(data_dir, study, testbed)]


def boot_of(record: dict) -> str | None:
    """Which boot of the testbed a record ran in: the guest's boot id where the record has
    it (native); a Xen boot's run folder (counters.boot.run_dir, one per boot of the virtual
    host); native records written before either prepare each pack once per boot in a fresh
    temporary directory, so that directory names the boot. None when nothing says."""
    c = record.get("counters") or {}
    if c.get("guest_boot_id"):
        return str(c["guest_boot_id"])
    run_dir = (c.get("boot") or {}).get("run_dir") if isinstance(c.get("boot"), dict) else None
    if run_dir:
        return f"run_dir:{run_dir}"
    dirs = {
        v.split("/")[2]
        for v in (c.get("prepared") or {}).values()
        if isinstance(v, str) and v.startswith("/tmp/") and v.count("/") >= 3
    }
    return f"prepared:{dirs.pop()}" if len(dirs) == 1 else None


def boot_is_replicate(options: dict) -> bool:
    """Does the testbed boot afresh at every round, making the boot the replicate?"""
    return options.get("native_resume") is False or bool(options.get("boot_per_round"))


def first_short_point(data_dir: Path, study: dict, testbed: str, need: int = 2) -> str | None:
    """The first (variant/point) with fewer than `need` measured runs on disk (what a
    comparison needs), or None when every point has them."""
    want = {h: f"{v}/{config.point_id(p)}" for h, (v, p) in current_definitions(study, testbed).items()}
    # where the boot is the replicate, runs that share a boot count once (the analysis
    # keeps one of them: report.data.one_run_per_boot)
    per_boot = boot_is_replicate(config.testbed_settings(study, testbed)["options"])
    n: dict[str, set] = {h: set() for h in want}
    for _, rec in _current(data_dir, study, testbed):
        if rec is None:
            return None  # `schedlab dataset` names the broken file
        if rec.get("status") == "ok" and not rec.get("warmup") and rec.get("definition_hash") in n:
            boot = boot_of(rec) if per_boot else None
            n[rec["definition_hash"]].add(boot or rec["run_id"])
    return next((want[h] for h, k in n.items() if len(k) < need), None)


def select(study: dict, testbed: str, data_dir: Path, base_seed: int) -> dict:
    """The manifest of the records on disk: for every (variant, point) of the current
    definition the runs of one build, the build with the most of the plan's repetitions,
    ties to the latest. Every record in the folder is checked; a damaged one, or two records
    of one run, is an error naming the file. Returns {"points": [...], "missing": [...],
    "failed": n, "runs": n}."""
    folder = store.raw_dir(Path(data_dir), testbed, study["study"])
    by_key: dict[str, tuple[Path, dict]] = {}
    failed = 0
    for path in store.iter_records(folder):
        rec = store.read_record(path)
        problems = store.check_record(path, rec)
        if problems:
            raise store.RecordError(f"{path}: {'; '.join(problems)}")
        if rec.get("status") != "ok":
            failed += 1
            continue
        if rec["run_key"] in by_key:
            raise store.RecordError(
                f"{path}: field run_key: same run key as {by_key[rec['run_key']][0]} "
                "(two records of one run; move one aside)"
            )
        by_key[rec["run_key"]] = (path, rec)
    settings = config.testbed_settings(study, testbed)
    total = settings["warmup"] + settings["runs"]
    points, missing, n_runs = [], [], 0
    for definition_hash, (variant, point) in current_definitions(study, testbed).items():
        builds = sorted(
            {rec["provenance"]["build_id"] for _, rec in by_key.values() if rec["definition_hash"] == definition_hash}
        )
        best: list[dict] = []
        for build_id in builds:
            found = [
                by_key[k][1]
                for rep in range(total)
                if (k := store.run_key_of(definition_hash, build_id, rep, base_seed)) in by_key
            ]
            latest = max((r["finished"] for r in found), default="")
            if (len(found), latest) > (len(best), max((r["finished"] for r in best), default="")):
                best = found
        if len(best) < total:
            missing.append(f"{variant}/{config.point_id(point)}: {len(best)} of {total} runs")
        if best:
            n_runs += len(best)
            points.append(manifest_entry(study["study"], testbed, variant, point, definition_hash, best))
    return {
        "points": sorted(points, key=lambda b: (b["variant"], b["point_id"])),
        "missing": missing,
        "failed": failed,
        "runs": n_runs,
    }


def study_manifest(data_dir: Path, testbed: str, study: str) -> Path:
    return Path(data_dir) / "runs" / testbed / study / "all.json"


def read(data_dir: Path, testbed: str, study: str) -> list[dict]:
    """The records a study's manifest names, each checked (schema, checksum, the manifest's
    checksum) as it is read; warm-ups included. Raises store.RecordError naming the file."""
    data_dir = Path(data_dir)
    mpath = study_manifest(data_dir, testbed, study)
    points = json.loads(mpath.read_text())["points"] if mpath.exists() else []
    validator = store._validator()
    out = []
    for man in points:
        for entry in man["runs"]:
            rpath = data_dir / entry["path"]
            rec = store.read_record(rpath)
            problems = store.check_record(rpath, rec, validator)
            if rec.get("checksum") != entry["checksum"]:
                problems.append(f"checksum {rec.get('checksum')} differs from the manifest's {entry['checksum']}")
            if problems:
                raise store.RecordError(f"{rpath}: {'; '.join(problems)}")
            out.append(rec)
    return out
