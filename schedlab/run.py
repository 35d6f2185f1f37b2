"""Runs: repetitions, warm-ups, run order, seeds, provenance, records.

Testbeds only turn (study, variant, point, seed) into metrics; everything a
reviewer needs to trust a number is added here, the same for every testbed.
"""

from __future__ import annotations

import datetime as dt
import functools
import inspect
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from schedlab import __version__, config, records, store
from schedlab.core.files import atomic_write
from schedlab.core.progress import Progress
from schedlab.core.testbed import RunFailed
from schedlab.plan import boot_key, derive_seed, plan, repetitions  # noqa: F401  (schedlab.run.plan is public)


class Refused(RunFailed):
    """A confirmatory run that the study's registered design does not allow (a dirty tree, a
    design not committed, a second replicate in one boot): nothing is measured or written."""


def _git(*args) -> tuple[int, str]:
    try:
        p = subprocess.run(["git", "-C", str(config.ROOT), *args], capture_output=True, text=True, timeout=20)
        return p.returncode, p.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return 1, ""


def _repo_state() -> dict:
    rc, commit = _git("rev-parse", "HEAD")
    commit = commit if rc == 0 and commit else "unknown"
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no")[1])
    return {"repo_commit": commit, "repo_dirty": dirty}


_repo_state_once = functools.cache(_repo_state)


def repo_state(fresh: bool = False) -> dict:
    """The checkout's commit and whether tracked files differ from it: once per process (the
    sim's thousands of runs), or `fresh` before each run of a registered design (a campaign
    lasts hours; an edit during it makes the later runs exploratory)."""
    return _repo_state() if fresh else _repo_state_once()


def registration_problem(study: dict) -> str | None:
    """Why a confirmatory run of this study may not start now (None: it may): the study's
    design must be committed before its first confirmatory run, and what runs must be what
    is committed (docs/workflow.md, "Registration")."""
    state = repo_state(fresh=True)
    if state["repo_commit"] == "unknown":
        return f"{config.ROOT} is not a git checkout, so the design cannot be shown committed"
    if state["repo_dirty"]:
        return "the checkout has uncommitted changes (git status): commit the design and the code first"
    rel = study.get("_file", "")
    if rel and not Path(rel).is_absolute():
        rc, _ = _git("ls-files", "--error-unmatch", "--", rel)
        if rc != 0:
            return f"{rel} is not committed"
    else:
        return f"{rel or study['study']}: a study file outside the checkout cannot be registered"
    return None


@functools.cache
def host_description() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_model": cpu,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def ok_fields(result, started: str, t0: float) -> dict:
    """What a successful run's record says beyond its identity: the testbed's result (metrics
    as floats, counters, samples) and when (started, finished, duration from monotonic t0)."""
    return {
        "status": "ok",
        "metrics": {k: float(v) for k, v in result.metrics.items()},
        "counters": result.counters,
        "samples": result.samples,
        "started": started,
        "finished": _now(),
        "duration_s": time.monotonic() - t0,
    }


def failed_fields(e: RunFailed, started: str, t0: float) -> dict:
    """What a failed run's record says beyond its identity: the error, the log's tail,
    no metrics, and when (started, finished, duration from monotonic t0)."""
    return {
        "status": "failed",
        "error": str(e),
        "log": e.log[-20000:],
        "metrics": {},
        "started": started,
        "finished": _now(),
        "duration_s": time.monotonic() - t0,
    }


def write_record(folder: Path, record: dict) -> Path:
    """The one record writer: every raw record of a run (a study's runs, the sensitivity sweep's,
    the validation's mirror runs, a benchmark pack's) is written here, through schedlab.store
    (strict JSON, checksummed, written once, never overwritten). tests/test_repo.py holds that
    nothing else in the package calls the store's writer."""
    return store.write_record(folder, record)


def require_registered(study: dict, testbed_name: str) -> None:
    """Refuse a confirmatory run whose design is not committed (registration_problem)."""
    why = registration_problem(study)
    if why:
        raise Refused(
            f"{study['study']} on {testbed_name}: a confirmatory run needs its design committed, "
            f"but {why} (or run with --exploratory: never in the paper's tables)"
        )


def index_plan(order: list[dict]) -> dict[tuple, dict]:
    """A plan's entries by (variant, point id, repetition)."""
    return {(e["variant"], config.point_id(e["point"]), e["repetition"]): e for e in order}


class PointRunner:
    """Runs the repetitions of one (study, testbed, variant, point), and writes their records:
    through the one record writer (write_record): the study runs, the sensitivity sweep
    (schedlab.sweep) and the validation's mirror runs (schedlab.mirror)."""

    def __init__(
        self,
        study: dict,
        testbed_name: str,
        variant: str,
        point: dict,
        data_dir: Path,
        base_seed: int,
        runs: int | None = None,
        *,
        testbed,
        log=sys.stderr,
        order: dict | None = None,
        exploratory: bool = False,
        purpose: dict | None = None,
        described: dict | None = None,
    ):
        """testbed: the testbed object that runs (schedlab.testbeds.get(testbed_name), made by
        the caller: the run stage sits below the testbeds). order: the study's plan indexed by
        (variant, point id, repetition), when the caller has it (run_study); otherwise it is
        derived here once. exploratory: runs that never reach the paper's tables (allowed from
        a dirty tree; their own run keys). purpose: runs made for another question than the
        study's own (the sensitivity sweep): {"name": folder under raw/ and the definition's
        `purpose`, "provenance": what the records add under provenance.<name>, and any of
        "warmup", "retries" in place of the study's; "definition": what the runs' definition
        adds (a mirror's scenario); "seeds": the run seed of each repetition, where the question
        fixes them; "metrics": the metric names a run must give, in place of the study's}.
        described: the testbed's description,
        where the caller has it (one for many runners)."""
        self.study, self.testbed_name, self.variant, self.point = study, testbed_name, variant, point
        self.settings = config.testbed_settings(study, testbed_name)
        self.design_hash = config.design_hash(study, testbed_name)
        if runs is not None:
            if runs < 1:
                raise config.ConfigError(f"--reps {runs}: must be at least 1")
            if runs != self.settings["runs"] and self.settings["unit"] == "boot" and not exploratory:
                raise Refused(
                    f"--reps {runs}: the registered design of {study['study']} on {testbed_name} has "
                    f"{self.settings['runs']} runs; other counts are exploratory (--exploratory)"
                )
            self.settings["runs"] = runs
        for k in ("warmup", "retries"):
            if purpose and k in purpose:
                self.settings[k] = purpose[k]
        # where the unit is the boot the design is registered: its hash is in every run key
        self.registered = self.settings["unit"] == "boot"
        self.exploratory = exploratory
        self.layout = repetitions(self.settings)
        self.data_dir = Path(data_dir)
        self.base_seed = base_seed
        self.purpose = purpose
        self.folder = store.raw_dir(self.data_dir, purpose["name"] if purpose else testbed_name, study["study"])
        self.testbed = testbed
        self.log = log
        self.definition = config.definition(study, testbed_name, variant, point)
        if purpose:  # no run key of such a run equals one of the study's own
            self.definition = {**self.definition, "purpose": purpose["name"], **purpose.get("definition", {})}
        self.definition_hash = config.sha256(self.definition)
        self.order = order if order is not None else index_plan(plan(study, testbed_name, base_seed))
        self._build_id: str | None = None
        self.described: dict | None = described  # the testbed as it describes itself (once)

    def run_key(self, rep: int, build_id: str) -> str:
        return store.run_key_of(
            self.definition_hash,
            build_id,
            rep,
            self.base_seed,
            self.design_hash if self.registered else None,
            self.exploratory,
        )

    def total(self) -> int:
        return len(self.layout)

    def run(self, manifest: Path | None = None) -> list[dict]:
        """All repetitions of this point, in repetition order (the sim's point jobs); where
        the unit is the boot, each round in a fresh boot."""
        self.check_registered()
        entries, boot = [], object()
        for r in self.layout:
            key = boot_key({**r, "variant": self.variant}, self.settings)
            if key is not None and key != boot:
                _fresh_boot(self.testbed, self.study)
                boot = key
            entries.append(self.run_rep(r["repetition"]))
        if manifest:
            write_manifest(Path(manifest), self, entries)
        return entries

    def check_registered(self) -> None:
        """Refuse to measure a confirmatory run of a registered design that is not committed."""
        if self.registered and not self.exploratory:
            require_registered(self.study, self.testbed_name)

    def _check_unit(self, boot: str | None, warm: bool) -> None:
        """Refuse a run whose boot already holds runs_per_boot measured replicates of this
        (variant, point) under this design, or that names no boot, where the unit is the boot."""
        if not self.registered:
            return
        if not boot:
            raise Refused(
                f"testbed {self.testbed_name} did not say which boot the run used; the unit of "
                f"{self.study['study']} is the boot, so the run cannot count"
            )
        if warm or self.exploratory:
            return
        same = 0
        for path in store.iter_records(self.folder) if self.folder.is_dir() else []:
            try:
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if (
                isinstance(rec, dict)
                and rec.get("status") == "ok"
                and not rec.get("warmup")
                and not rec.get("exploratory")
                and rec.get("definition_hash") == self.definition_hash
                and rec.get("design_hash") == self.design_hash
                and records.boot_of(rec) == boot
            ):
                same += 1
        if same >= self.settings["runs_per_boot"]:
            raise Refused(
                f"{self.variant} {config.point_id(self.point)}: boot {boot} already holds {same} measured "
                f"run(s) of it, and the design allows {self.settings['runs_per_boot']} per boot "
                f"(testbeds.{self.testbed_name}.runs_per_boot); the run is not recorded"
            )

    def run_rep(self, rep: int, executed_as: str = "point-job") -> dict:
        """One repetition: reuse its record if it exists, else run it (with retries)
        and write its record. Returns the record."""
        pid = config.point_id(self.point)
        if self._build_id is None:
            store.sweep_partial(self.folder)
            self._build_id = self.testbed.build_id(self.study, self.variant)
        build_id = self._build_id
        total = self.total()
        if not 0 <= rep < total:
            raise ValueError(f"repetition {rep} is not one of the design's 0..{total - 1}")
        warm = self.layout[rep]["warmup"]
        key = self.run_key(rep, build_id)
        run_id = store.run_id_of(self.variant, pid, rep, key)
        path = self.folder / f"{run_id}.json"
        where = self.purpose["name"] if self.purpose else self.testbed_name
        tag = f"[{self.study['study']}/{where}] {self.variant} {pid} run {rep + 1}/{total}" + (
            " (warm-up)" if warm else ""
        )
        if path.exists():
            rec = store.read_record(path)
            problems = store.check_record(path, rec)
            if problems:
                raise store.RecordError(
                    f"{path}: existing record is damaged: {'; '.join(problems)} "
                    "(it is left untouched; move it aside to re-measure)"
                )
            print(f"{tag}: reusing {path.name}", file=self.log, flush=True)
            return rec
        self.check_registered()
        if self.described is None:
            # testbeds whose description depends on the study's options take it
            takes_study = "study" in inspect.signature(self.testbed.describe).parameters
            self.described = self.testbed.describe(**({"study": self.study} if takes_study else {}))
        if self.purpose and "seeds" in self.purpose:
            seed = int(self.purpose["seeds"][rep])
        else:
            seed = derive_seed(self.base_seed, self.testbed_name, self.study["study"], self.variant, pid, rep)
        order = self.order.get((self.variant, pid, rep), {"index": -1, "plan_size": 0, "plan_seed": 0})
        base = {
            "format": store.FORMAT,
            "run_key": key,
            "study": self.study["study"],
            "testbed": self.testbed_name,
            "variant": self.variant,
            "point": self.point,
            "point_id": pid,
            "repetition": rep,
            "warmup": warm,
            "seed": seed,
            "definition_hash": self.definition_hash,
            "design_hash": self.design_hash,
            "registered": self.registered,
            "exploratory": self.exploratory,
            "round": self.layout[rep]["round"],
            "run_order": {
                "index": order["index"],
                "plan_size": order["plan_size"],
                "plan_seed": order["plan_seed"],
                "executed_as": executed_as,
            },
            "provenance": {
                **repo_state(fresh=self.registered),
                "schedlab_version": __version__,
                "testbed": self.described,
                "build_id": build_id,
                "host": host_description(),
                "study_file_sha256": self.study.get("_sha256", ""),
                **({self.purpose["name"]: self.purpose["provenance"]} if self.purpose else {}),
            },
        }
        # attempts number on from the failures earlier processes recorded for this run
        attempt = store.last_attempt(self.folder, run_id)
        for _ in range(self.settings["retries"] + 1):
            attempt += 1
            started, t0 = _now(), time.monotonic()
            try:
                result = self.testbed.run_once(self.study, self.variant, self.point, seed)
            except RunFailed as e:
                failure = {**base, **failed_fields(e, started, t0)}
                while True:
                    try:
                        write_record(
                            self.folder, {**failure, "run_id": f"{run_id}.failed{attempt}", "attempt": attempt}
                        )
                        break
                    except store.RecordExists:
                        attempt += 1  # another process recorded a failure of this run meanwhile
                print(f"{tag}: FAILED (attempt {attempt}): {e}", file=self.log, flush=True)
                continue
            if self.purpose and "metrics" in self.purpose:
                required = list(self.purpose["metrics"])
            else:
                required = [m["name"] for m in config.metrics_for(self.study, self.point, self.testbed_name)]
            missing = [m for m in required if m not in result.metrics]
            if missing:
                raise RunFailed(f"testbed {self.testbed_name} returned no value for metric(s) {', '.join(missing)}")
            boot = records.boot_of({"counters": result.counters}) if self.registered else None
            self._check_unit(boot, warm)
            rec = {**base, "run_id": run_id, "attempt": attempt, **ok_fields(result, started, t0)}
            if self.registered:
                rec["boot_id"] = boot
                # the tree may have changed while the run ran: then it is not confirmatory
                rec["provenance"] = {**rec["provenance"], **_worst(base["provenance"], repo_state(fresh=True))}
            try:
                write_record(self.folder, rec)
            except store.RecordExists:  # a concurrent run-study landed this run first: reuse its record
                theirs = store.read_record(path)
                if store.check_record(path, theirs):
                    raise
                print(f"{tag}: recorded meanwhile by another process; reusing {path.name}", file=self.log, flush=True)
                return theirs
            shown = ", ".join(f"{k}={v:.6g}" for k, v in rec["metrics"].items())
            print(f"{tag}: {shown} ({rec['duration_s']:.2f} s)", file=self.log, flush=True)
            return store.read_record(path)
        raise RunFailed(f"{tag}: failed {self.settings['retries'] + 1} times; failure records are in {self.folder}")


def _fresh_boot(testbed, study: dict) -> None:
    """Ask the testbed to boot afresh for the next run (a testbed without boots has no
    fresh_boot; PointRunner still refuses a second replicate in one boot)."""
    fresh = getattr(testbed, "fresh_boot", None)
    if fresh is not None:
        fresh(study)


def _worst(before: dict, after: dict) -> dict:
    """The checkout's state over a run: the commit it started at, dirty if the tree was dirty
    at its start or end or moved to another commit meanwhile."""
    moved = before["repo_commit"] != after["repo_commit"]
    return {
        "repo_commit": before["repo_commit"],
        "repo_dirty": bool(before["repo_dirty"] or after["repo_dirty"] or moved),
    }


def run_study(
    study: dict,
    testbed_name: str,
    data_dir: Path,
    base_seed: int,
    testbed,
    manifest_dir: Path | None = None,
    log=sys.stderr,
    variants: set[str] | None = None,
    exploratory: bool = False,
    rounds: set[int] | None = None,
) -> dict[tuple, list[dict]]:
    """The whole study in its plan order (real hosts: variants interleaved across
    reboots, so host drift is spread over all of them). Existing records are
    reused, so a killed study resumes where it stopped. `variants`: only their runs,
    in the same order (records keep their index in the whole plan); `rounds`: only these
    rounds' runs (where the unit is the boot, a round is one boot, or one boot per variant,
    so independent boots can run as separate jobs side by side). Where the unit is the
    boot, the testbed boots afresh wherever the study's boot plan starts a boot (a round, or
    a variant in a round), and a run that would put more replicates of one (variant, point)
    in a boot than the design allows is refused (PointRunner)."""
    runners: dict[tuple, PointRunner] = {}
    entries: dict[tuple, list[dict]] = {}
    settings = config.testbed_settings(study, testbed_name)
    whole = plan(study, testbed_name, base_seed)
    indexed = index_plan(whole)
    order = [
        e for e in whole if (variants is None or e["variant"] in variants) and (rounds is None or e["round"] in rounds)
    ]
    if settings["unit"] == "boot" and not exploratory and order:
        require_registered(study, testbed_name)
    progress, started = Progress(len(order), log), _now()
    log = progress.out  # the runs' lines: above the bar on a terminal (tqdm's writer)
    boot = object()
    for e in order:
        key = boot_key(e, settings)
        if key is not None and key != boot:
            _fresh_boot(testbed, study)
            boot = key
        k = (e["variant"], config.point_id(e["point"]))
        if k not in runners:
            runners[k] = PointRunner(
                study,
                testbed_name,
                e["variant"],
                e["point"],
                data_dir,
                base_seed,
                testbed=testbed,
                log=log,
                order=indexed,
                exploratory=exploratory,
            )
        t0 = time.monotonic()
        rec = runners[k].run_rep(e["repetition"], executed_as="plan")
        entries.setdefault(k, []).append(rec)
        # a reused record took no testbed time: only measured runs estimate what is left
        progress.step(time.monotonic() - t0, measured=rec.get("finished", "") >= started)
    progress.close()
    if manifest_dir:
        for (variant, pid), recs in entries.items():
            write_manifest(
                Path(manifest_dir) / variant / f"{pid}.json",
                runners[(variant, pid)],
                sorted(recs, key=lambda r: r["repetition"]),
            )
    return entries


def _json(body) -> str:
    return json.dumps(body, indent=1, sort_keys=True) + "\n"


def gather(point_manifests: list[Path], out: Path) -> None:
    """The study manifest the notebooks read: every point's runs for the current
    definition, from the point manifests (sim) or from run_study (hosts)."""
    points = [json.loads(Path(p).read_text()) for p in point_manifests]
    if not points:
        raise ValueError("gather: no point manifests")
    atomic_write(
        Path(out),
        _json(
            {
                "study": points[0]["study"],
                "testbed": points[0]["testbed"],
                "points": sorted(points, key=lambda b: (b["variant"], b["point_id"])),
            }
        ),
    )


def write_manifest(path: Path, runner: PointRunner, entries: list[dict]) -> None:
    """The point's runs for the current definition. Derived data, so it may be
    replaced (atomically)."""
    atomic_write(
        path,
        _json(
            records.manifest_entry(
                runner.study["study"],
                runner.testbed_name,
                runner.variant,
                runner.point,
                runner.definition_hash,
                entries,
            )
        ),
    )


def dataset(study: dict, testbed_name: str, data_dir: Path, base_seed: int, out: Path, log=sys.stderr) -> dict:
    """The study manifest from raw records already on disk (shipped with the
    repository, or measured earlier on another machine), without a testbed.

    For every (variant, point) of the current definition it takes the runs of one
    build: the build with the most of the plan's repetitions (keys as PointRunner
    computes them), ties to the latest. Nothing is measured and nothing in
    data/raw is changed. Returns {"points": n, "runs": n, "missing": [...], "failed": n}."""
    folder = store.raw_dir(Path(data_dir), testbed_name, study["study"])
    sel = records.select(study, testbed_name, data_dir, base_seed)
    manifests, missing = sel["points"], sel["missing"]
    if not manifests:
        unused = f" ({len(sel['not_used'])} not used: {sel['not_used'][0]['reason']}, ...)" if sel["not_used"] else ""
        raise RunFailed(
            f"no records of study {study['study']} on testbed {testbed_name} for the current definition "
            f"and design in {folder}{unused}"
        )
    for m in missing:
        print(f"[{study['study']}/{testbed_name}] dataset: {m}", file=log)
    reasons: dict[str, int] = {}
    for d in sel["not_used"]:
        reasons[d["reason"]] = reasons.get(d["reason"], 0) + 1
    for why, n in sorted(reasons.items()):
        print(f"[{study['study']}/{testbed_name}] dataset: {n} record(s) not used: {why}", file=log)
    atomic_write(
        Path(out),
        _json(
            {
                "study": study["study"],
                "testbed": testbed_name,
                "source": "records",
                "design_hash": config.design_hash(study, testbed_name),
                "points": manifests,
                # kept, never deleted: records of other designs, exploratory ones (docs/workflow.md)
                "not_used": sel["not_used"],
            }
        ),
    )
    return {
        "points": len(manifests),
        "runs": sel["runs"],
        "missing": missing,
        "failed": sel["failed"],
        "not_used": len(sel["not_used"]),
    }
