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
from schedlab.core.plan import derive_seed, plan  # noqa: F401  (schedlab.run.plan is public)
from schedlab.core.testbed import RunFailed


@functools.cache
def repo_state() -> dict:
    root = config.ROOT

    def git(*args):
        try:
            return subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=20
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    commit = git("rev-parse", "HEAD") or "unknown"
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return {"repo_commit": commit, "repo_dirty": dirty}


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


def index_plan(order: list[dict]) -> dict[tuple, dict]:
    """A plan's entries by (variant, point id, repetition)."""
    return {(e["variant"], config.point_id(e["point"]), e["repetition"]): e for e in order}


class PointRunner:
    """Runs the repetitions of one (study, testbed, variant, point)."""

    def __init__(
        self,
        study: dict,
        testbed_name: str,
        variant: str,
        point: dict,
        data_dir: Path,
        base_seed: int,
        runs: int | None = None,
        testbed=None,
        log=sys.stderr,
        order: dict | None = None,
    ):
        """order: the study's plan indexed by (variant, point id, repetition), when the
        caller has it (run_study); otherwise it is derived here once."""
        from schedlab import testbeds

        self.study, self.testbed_name, self.variant, self.point = study, testbed_name, variant, point
        self.settings = config.testbed_settings(study, testbed_name)
        if runs is not None:
            if runs < 1:
                raise config.ConfigError(f"--reps {runs}: must be at least 1")
            self.settings["runs"] = runs
        self.data_dir = Path(data_dir)
        self.base_seed = base_seed
        self.folder = store.raw_dir(self.data_dir, testbed_name, study["study"])
        self.testbed = testbed or testbeds.get(testbed_name)
        self.log = log
        self.definition = config.definition(study, testbed_name, variant, point)
        self.definition_hash = config.sha256(self.definition)
        self.order = order if order is not None else index_plan(plan(study, testbed_name, base_seed))
        self._build_id: str | None = None
        self._described: dict | None = None

    def run_key(self, rep: int, build_id: str) -> str:
        return store.run_key_of(self.definition_hash, build_id, rep, self.base_seed)

    def total(self) -> int:
        return self.settings["warmup"] + self.settings["runs"]

    def run(self, manifest: Path | None = None) -> list[dict]:
        """All repetitions of this point, in repetition order (the sim's point jobs)."""
        entries = [self.run_rep(rep) for rep in range(self.total())]
        if manifest:
            write_manifest(Path(manifest), self, entries)
        return entries

    def run_rep(self, rep: int, executed_as: str = "point-job") -> dict:
        """One repetition: reuse its record if it exists, else run it (with retries)
        and write its record. Returns the record."""
        pid = config.point_id(self.point)
        if self._build_id is None:
            store.sweep_partial(self.folder)
            self._build_id = self.testbed.build_id(self.study, self.variant)
        build_id = self._build_id
        total = self.total()
        warm = rep < self.settings["warmup"]
        key = self.run_key(rep, build_id)
        run_id = store.run_id_of(self.variant, pid, rep, key)
        path = self.folder / f"{run_id}.json"
        tag = f"[{self.study['study']}/{self.testbed_name}] {self.variant} {pid} run {rep + 1}/{total}" + (
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
        if self._described is None:
            # testbeds whose description depends on the study's options take it
            takes_study = "study" in inspect.signature(self.testbed.describe).parameters
            self._described = self.testbed.describe(**({"study": self.study} if takes_study else {}))
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
            "run_order": {
                "index": order["index"],
                "plan_size": order["plan_size"],
                "plan_seed": order["plan_seed"],
                "executed_as": executed_as,
            },
            "provenance": {
                **repo_state(),
                "schedlab_version": __version__,
                "testbed": self._described,
                "build_id": build_id,
                "host": host_description(),
                "study_file_sha256": self.study.get("_sha256", ""),
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
                        store.write_record(
                            self.folder, {**failure, "run_id": f"{run_id}.failed{attempt}", "attempt": attempt}
                        )
                        break
                    except store.RecordExists:
                        attempt += 1  # another process recorded a failure of this run meanwhile
                print(f"{tag}: FAILED (attempt {attempt}): {e}", file=self.log, flush=True)
                continue
            missing = [
                m["name"]
                for m in config.metrics_for(self.study, self.point, self.testbed_name)
                if m["name"] not in result.metrics
            ]
            if missing:
                raise RunFailed(f"testbed {self.testbed_name} returned no value for metric(s) {', '.join(missing)}")
            rec = {**base, "run_id": run_id, "attempt": attempt, **ok_fields(result, started, t0)}
            try:
                store.write_record(self.folder, rec)
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


class Progress:
    """Plan-wide progress of a study on stderr: one line per run ("57/240 (24 %) · ETA 31 min",
    the ETA from the runs this process measured), and a live bar when stderr is a terminal."""

    def __init__(self, total: int, log=sys.stderr):
        self.total, self.done, self.log = total, 0, log
        self.started = _now()
        self.measured: list[float] = []
        self.bar = None
        if hasattr(log, "isatty") and log.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, file=log, unit="run", dynamic_ncols=True, leave=True)

    def eta_s(self) -> float | None:
        if not self.measured:
            return None
        return sum(self.measured) / len(self.measured) * (self.total - self.done)

    def line(self) -> str:
        eta = self.eta_s()
        left = "ETA --" if eta is None else f"ETA {eta / 60:.0f} min" if eta >= 90 else f"ETA {eta:.0f} s"
        return f"{self.done}/{self.total} ({100 * self.done / self.total:.0f} %) · {left}"

    def step(self, seconds: float, measured: bool) -> None:
        self.done += 1
        if measured:
            self.measured.append(seconds)
        if self.bar is not None:
            self.bar.set_postfix_str(self.line().split(" · ")[1], refresh=False)
            self.bar.update(1)
        else:
            print(f"progress: {self.line()}", file=self.log, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_study(
    study: dict,
    testbed_name: str,
    data_dir: Path,
    base_seed: int,
    testbed,
    manifest_dir: Path | None = None,
    log=sys.stderr,
    variants: set[str] | None = None,
) -> dict[tuple, list[dict]]:
    """The whole study in its plan order (real hosts: variants interleaved across
    reboots, so host drift is spread over all of them). Existing records are
    reused, so a killed study resumes where it stopped. `variants`: only their runs,
    in the same order (records keep their index in the whole plan)."""
    runners: dict[tuple, PointRunner] = {}
    entries: dict[tuple, list[dict]] = {}
    whole = plan(study, testbed_name, base_seed)
    indexed = index_plan(whole)
    order = [e for e in whole if variants is None or e["variant"] in variants]
    progress = Progress(len(order), log)
    new_round = getattr(testbed, "start_round", None)  # e.g. qemu's boot_per_round
    rnd = None
    for e in order:
        if new_round is not None and e["repetition"] != rnd:
            rnd = e["repetition"]
            new_round(study, rnd)
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
            )
        t0 = time.monotonic()
        rec = runners[k].run_rep(e["repetition"], executed_as="plan")
        entries.setdefault(k, []).append(rec)
        # a reused record took no testbed time: only measured runs estimate what is left
        progress.step(time.monotonic() - t0, measured=rec.get("finished", "") >= progress.started)
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
        raise RunFailed(
            f"no records of study {study['study']} on testbed {testbed_name} for the current definition in {folder}"
        )
    for m in missing:
        print(f"[{study['study']}/{testbed_name}] dataset: {m}", file=log)
    atomic_write(
        Path(out), _json({"study": study["study"], "testbed": testbed_name, "source": "records", "points": manifests})
    )
    return {"points": len(manifests), "runs": sel["runs"], "missing": missing, "failed": sel["failed"]}
