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
from schedlab.plan import repetitions


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
                "boot": boot_of(r),
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
            rec = store.read_record(path)
        except store.RecordError:
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
    """Which boot of the testbed a record ran in (its experimental unit): the record's own
    `boot_id` (written since designs are registered), else what its counters say: a native
    guest's boot id, a Xen boot under QEMU by its run folder (one per QEMU process), a lab
    host's kernel boot id; native records written before that prepare each pack once per
    boot in a fresh temporary directory, so that directory names the boot. None when
    nothing says."""
    if record.get("boot_id"):
        return str(record["boot_id"])
    c = record.get("counters") or {}
    if c.get("guest_boot_id"):
        return str(c["guest_boot_id"])
    run_dir = (c.get("boot") or {}).get("run_dir") if isinstance(c.get("boot"), dict) else None
    if run_dir:
        return f"qemu:{run_dir}"
    lab = c.get("lab") if isinstance(c.get("lab"), dict) else {}
    if lab.get("boot_id"):
        return f"{lab.get('host')}:{lab['boot_id']}"
    dirs = {
        v.split("/")[2]
        for v in (c.get("prepared") or {}).values()
        if isinstance(v, str) and v.startswith("/tmp/") and v.count("/") >= 3
    }
    return f"prepared:{dirs.pop()}" if len(dirs) == 1 else None


def why_not_used(rec: dict, study: dict, testbed: str, design_hash: str) -> str | None:
    """Why a record of the current definition does not stand for the study's registered
    design (None: it does). Where the unit is the boot, a record counts only if it is
    confirmatory (not --exploratory, from a clean checkout) and was measured under today's
    design (its design hash). Records made before designs were registered carry no design
    hash and no record of what ran (the QEMU command line): they are kept, never used."""
    if config.testbed_settings(study, testbed)["unit"] != "boot":
        return None
    if rec.get("exploratory"):
        return "exploratory"
    if (rec.get("provenance") or {}).get("repo_dirty") is not False:
        return "made from a checkout with uncommitted changes (exploratory)"
    if rec.get("design_hash") is None or not rec.get("registered"):
        return "made before its design was registered"
    return None if rec["design_hash"] == design_hash else "superseded: the design changed after it was made"


def _standing(
    data_dir: Path, study: dict, testbed: str, any_design: bool = False
) -> tuple[dict[str, tuple[Path, dict]], list[dict], int]:
    """The study folder's records, each checked: ({run key: (path, record)} of the ok records
    that stand for the current design, [{run_id, reason}] of those that do not, the number
    of failure records). A damaged record, or two records of one run, is an error naming it."""
    folder = store.raw_dir(Path(data_dir), testbed, study["study"])
    want = current_definitions(study, testbed)
    dhash = config.design_hash(study, testbed)
    by_key: dict[str, tuple[Path, dict]] = {}
    seen: dict[str, Path] = {}
    not_used, failed = [], 0
    for path in store.iter_records(folder) if folder.is_dir() else []:
        rec = store.read_record(path)
        problems = store.check_record(path, rec)
        if problems:
            raise store.RecordError(f"{path}: {'; '.join(problems)}")
        if rec.get("status") != "ok":
            failed += 1
            continue
        if rec["run_key"] in seen:
            raise store.RecordError(
                f"{path}: field run_key: same run key as {seen[rec['run_key']]} (two records of one run; move one aside)"
            )
        seen[rec["run_key"]] = path
        if rec.get("definition_hash") not in want:
            continue  # another definition: the study file changed what is measured
        why = None if any_design else why_not_used(rec, study, testbed, dhash)
        if why:
            not_used.append({"run_id": rec["run_id"], "reason": why})
            continue
        by_key[rec["run_key"]] = (path, rec)
    return by_key, not_used, failed


def first_short_point(data_dir: Path, study: dict, testbed: str, need: int = 2) -> str | None:
    """The first (variant/point) with fewer than `need` measured units on disk (what a
    comparison needs: runs, or boots where the boot is the unit), or None when every point
    has them. None also when a record is damaged (`schedlab dataset` names it)."""
    want = {h: f"{v}/{config.point_id(p)}" for h, (v, p) in current_definitions(study, testbed).items()}
    per_boot = config.testbed_settings(study, testbed)["unit"] == "boot"
    try:
        standing, _, _ = _standing(data_dir, study, testbed)
    except store.RecordError:
        return None
    n: dict[str, set] = {h: set() for h in want}
    for _, rec in standing.values():
        if not rec.get("warmup"):
            n[rec["definition_hash"]].add((boot_of(rec) if per_boot else None) or rec["run_id"])
    return next((want[h] for h, k in n.items() if len(k) < need), None)


def select(study: dict, testbed: str, data_dir: Path, base_seed: int, any_design: bool = False) -> dict:
    """The manifest of the records on disk: for every (variant, point) of the current
    definition the runs of one build, the build with the most of the plan's repetitions,
    ties to the latest; where the unit is the boot only records that stand for the
    registered design (why_not_used). Every record in the folder is checked; a damaged one,
    or two records of one run, is an error naming the file. Returns {"points": [...],
    "missing": [...], "failed": n, "runs": n, "not_used": [{run_id, reason}]}. `any_design`: every
    record of the current definition whatever its design or registration (exploratory uses only,
    such as testing the validation's power on the records made before registration; never the
    paper's tables)."""
    by_key, not_used, failed = _standing(data_dir, study, testbed, any_design)
    settings = config.testbed_settings(study, testbed)
    reps = [r["repetition"] for r in repetitions(settings)]
    points, missing, n_runs = [], [], 0
    for definition_hash, (variant, point) in current_definitions(study, testbed).items():
        by_build: dict[str, dict[int, dict]] = {}
        for _, rec in by_key.values():
            if rec["definition_hash"] != definition_hash or not store.run_key_matches(rec, base_seed):
                continue
            if rec["repetition"] not in reps:
                continue
            got = by_build.setdefault(rec["provenance"]["build_id"], {})
            old = got.get(rec["repetition"])
            # a repetition made twice (before and after registration, same design): the later
            if old is None or (rec.get("registered", False), rec["finished"]) > (
                old.get("registered", False),
                old["finished"],
            ):
                got[rec["repetition"]] = rec
        best: list[dict] = []
        for build_id in sorted(by_build):
            found = [by_build[build_id][r] for r in reps if r in by_build[build_id]]
            latest = max((r["finished"] for r in found), default="")
            if (len(found), latest) > (len(best), max((r["finished"] for r in best), default="")):
                best = found
        if len(best) < len(reps):
            missing.append(f"{variant}/{config.point_id(point)}: {len(best)} of {len(reps)} runs")
        if best:
            n_runs += len(best)
            points.append(manifest_entry(study["study"], testbed, variant, point, definition_hash, best))
    return {
        "points": sorted(points, key=lambda b: (b["variant"], b["point_id"])),
        "missing": missing,
        "failed": failed,
        "runs": n_runs,
        "not_used": sorted(not_used, key=lambda d: d["run_id"]),
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
