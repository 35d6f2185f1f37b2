"""The sensitivity sweep: the sim's runs at the settings of config/sensitivity.yaml, a part of
the run stage (the report stage only reads their records: schedlab.report.sensitivity).

    python -m schedlab.sweep validate              # config/sensitivity.yaml against the studies
    python -m schedlab.sweep plan [--study S]      # the settings and how many runs
    python -m schedlab.sweep run [--study S]       # run what is missing, write the manifests
    python -m schedlab.sweep select [--study S]    # the manifests from records on disk (no sim)

`config/sensitivity.yaml` names, per study, every swept `sim_workload` parameter (a dotted path,
its range and why) and every leaf held fixed (CALIBRATED ones always), and the conclusions to
check: the comparisons the verdicts use (schedlab/report/verdicts.py). For each study the sweep
runs the shipped setting, each parameter at its low and at its high end with the others shipped
(one at a time, OAT), and a Latin hypercube of joint points over all swept parameters (fixed
seed), each at `seeds` seeds per (variant, point) the conclusions need, through
`SimTestbed.run_once` on a modified copy of the study.

Every run is a raw record written by the run stage's one record writer (schedlab.run.PointRunner:
schedlab.store's strict JSON, checksummed, written once, never overwritten) in
`data/raw/sensitivity/STUDY/`, with the run's provenance (repository commit, simulator binary
sha256, build id, host) and the setting it belongs to (`provenance.sensitivity`). Its definition
is the study's run definition with the modified `sim_workload` (and `"purpose": "sensitivity"`,
so no run key equals one of the study's own), so a rerun skips every run already on disk, and a
changed range or simulator makes new runs. `data/runs/sensitivity/STUDY.json` lists the runs of
each setting; the notebook (notebooks/sensitivity.ipynb) reads only those records.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import re
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from schedlab import config
from schedlab.core.progress import Progress

CONFIG = config.ROOT / "config" / "sensitivity.yaml"
TESTBED = "sim"
CLAIMS = ("higher", "lower", "equivalent")
PURPOSE = "sensitivity"


class SensitivityError(Exception):
    """Bad input or missing data: one line naming the file and field."""


@dataclass(frozen=True)
class Parameter:
    path: str
    low: float
    high: float
    why: str
    shipped: float
    scale: str = "linear"
    kind: str = "float"

    def value(self, u: float) -> float | int:
        """The value at u in [0, 1] of the range (log or linear), typed."""
        if self.scale == "log":
            x = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        else:
            x = self.low + u * (self.high - self.low)
        return self.typed(x)

    def typed(self, x: float) -> float | int:
        if self.kind == "int":
            return int(round(x))
        return float(f"{x:.4g}")


@dataclass(frozen=True)
class Conclusion:
    id: str
    label: str
    variant: str
    reference: str
    metric: str
    point: dict
    claim: str
    margin_pct: float | None = None

    @property
    def point_id(self) -> str:
        return config.point_id(self.point)


@dataclass(frozen=True)
class Setting:
    id: str
    kind: str  # shipped | oat | joint
    values: dict = field(default_factory=dict)  # dotted path -> value (the changed ones)
    param: str | None = None  # oat: the parameter moved
    side: str | None = None  # oat: low | high


@dataclass
class StudyPlan:
    name: str
    study: dict
    parameters: list[Parameter]
    fixed: dict[str, str]
    conclusions: list[Conclusion]

    def runs(self) -> list[tuple[str, dict]]:
        """The (variant, point) pairs the conclusions compare, each once, in order."""
        out: list[tuple[str, dict]] = []
        for c in self.conclusions:
            for v in (c.variant, c.reference):
                if (v, c.point) not in out:
                    out.append((v, c.point))
        return out


@dataclass
class Sweep:
    path: Path
    sha256: str
    seeds: int
    joint_points: int
    joint_seed: int
    confidence: float
    studies: dict[str, StudyPlan]


# --- the configuration ---------------------------------------------------------------------------------


def _leaves(d: Any, prefix: str = "") -> dict[str, Any]:
    """Every scalar leaf of a nested dict, by dotted path (a list is one leaf)."""
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_leaves(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: d}


def _get(d: dict, path: str):
    for k in path.split("."):
        if not isinstance(d, dict) or k not in d:
            raise KeyError(path)
        d = d[k]
    return d


def calibrated_paths(study_path: Path) -> dict[str, int]:
    """{dotted path: line} of the `sim_workload` leaves a study file marks CALIBRATED: a comment
    `# NAME CALIBRATED ...` marks the leaves named NAME on its line, `# CALIBRATED ...` every
    leaf on its line."""
    _, node = config.load_yaml(study_path)
    lines = Path(study_path).read_text().splitlines()
    sw = next((v for k, v in node.value if k.value == "sim_workload"), None) if node is not None else None
    found: dict[str, int] = {}

    def walk(n, prefix):
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                walk(v, f"{prefix}{k.value}.")
            return
        line = n.start_mark.line
        code, _, comment = lines[line].partition("#")
        m = re.search(r"(?:^|\s)(?:(\w+)\s+)?CALIBRATED\b", comment)
        if not m:
            return
        path, name = prefix[:-1], m.group(1)
        # `# NAME CALIBRATED`: the leaves named NAME (if NAME is a key on the line), else the whole line
        if name is None or f"{name}:" not in code or path.split(".")[-1] == name:
            found[path] = line + 1

    if sw is not None:
        walk(sw, "")
    return found


def _err(cfg_path: Path, node, path: list, msg: str) -> SensitivityError:
    line = config._line_of(node, path)
    where = f"{cfg_path}:{line}" if line else str(cfg_path)
    return SensitivityError(f"{where}: field {'.'.join(map(str, path)) or '(top level)'}: {msg}")


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _keys(cfg_path, node, path, d, allowed: set[str], required: set[str]) -> None:
    if not isinstance(d, dict):
        raise _err(cfg_path, node, path, f"expected a mapping, got {type(d).__name__}")
    for k in d:
        if k not in allowed:
            raise _err(cfg_path, node, [*path, k], f"unknown key (allowed: {', '.join(sorted(allowed))})")
    for k in sorted(required):
        if k not in d:
            raise _err(cfg_path, node, path, f"missing key `{k}`")


def load(path: Path | str = CONFIG, studies_dir: Path | str | None = None, only: list[str] | None = None) -> Sweep:
    """config/sensitivity.yaml, checked against the study files (`only`: just those studies);
    every problem is one SensitivityError naming the file, line and field."""
    import hashlib

    path = Path(path)
    studies_dir = Path(studies_dir) if studies_dir else config.STUDIES_DIR
    try:
        data, node = config.load_yaml(path)
    except config.ConfigError as e:
        raise SensitivityError(str(e)) from None
    if data is None:
        raise SensitivityError(f"{path}: empty file")
    _keys(path, node, [], data, {"seeds", "joint", "confidence", "studies"}, {"seeds", "studies"})
    seeds = data["seeds"]
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 2:
        raise _err(path, node, ["seeds"], f"{seeds!r}: need an integer >= 2 (a comparison needs two runs per arm)")
    joint = data.get("joint", {"points": 0, "seed": 0})
    _keys(path, node, ["joint"], joint, {"points", "seed"}, {"points"})
    for k in ("points", "seed"):
        v = joint.get(k, 0)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise _err(path, node, ["joint", k], f"{v!r}: need an integer >= 0")
    conf = data.get("confidence", 95)
    if not _number(conf) or not 50 < conf < 100:
        raise _err(path, node, ["confidence"], f"{conf!r}: need a number between 50 and 100")
    studies = data["studies"]
    if not isinstance(studies, dict) or not studies:
        raise _err(path, node, ["studies"], "need a mapping of study names")
    plans = {}
    for sid in only or []:
        if sid not in studies:
            raise SensitivityError(f"--study {sid}: not in {path} ({', '.join(studies)})")
    for sid, body in studies.items():
        if only is None or sid in only:
            plans[sid] = _study_plan(path, node, studies_dir, sid, body)
    return Sweep(
        path,
        hashlib.sha256(path.read_bytes()).hexdigest(),
        seeds,
        joint.get("points", 0),
        joint.get("seed", 0),
        float(conf),
        plans,
    )


def _study_plan(path: Path, node, studies_dir: Path, sid: str, body) -> StudyPlan:
    where = ["studies", sid]
    sfile = studies_dir / f"{sid}.yaml"
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", str(sid)) or not sfile.is_file():
        raise _err(path, node, where, f"no study file {sfile}")
    try:
        study = config.load_study(sfile)
    except config.ConfigError as e:
        raise SensitivityError(str(e)) from None
    wl = study.get("sim_workload")
    if TESTBED not in study["testbeds"] or not wl:
        raise _err(path, node, where, f"study {sid} has no sim testbed model (sim_workload)")
    _keys(path, node, where, body, {"parameters", "fixed", "conclusions"}, {"parameters", "fixed", "conclusions"})
    leaves = _leaves(wl)
    calibrated = calibrated_paths(sfile)
    # parameters
    params: list[Parameter] = []
    if not isinstance(body["parameters"], list):
        raise _err(path, node, [*where, "parameters"], "need a list")
    for i, p in enumerate(body["parameters"]):
        w = [*where, "parameters", i]
        _keys(path, node, w, p, {"path", "low", "high", "why", "scale", "type"}, {"path", "low", "high", "why"})
        pp = p["path"]
        if not isinstance(pp, str) or pp not in leaves:
            raise _err(path, node, [*w, "path"], f"{pp!r} is not a leaf of {sid}'s sim_workload")
        if pp in calibrated:
            raise _err(
                path,
                node,
                [*w, "path"],
                f"{pp} is marked CALIBRATED in {study['_file']}:{calibrated[pp]}; calibrated parameters stay fixed",
            )
        if any(q.path == pp for q in params):
            raise _err(path, node, [*w, "path"], f"{pp} is swept twice")
        shipped = leaves[pp]
        if not _number(shipped):
            raise _err(path, node, [*w, "path"], f"{pp} is {shipped!r} in the study file, not a number")
        for k in ("low", "high"):
            if not _number(p[k]):
                raise _err(path, node, [*w, k], f"{p[k]!r} is not a finite number")
        if not p["low"] < p["high"]:
            raise _err(path, node, [*w, "low"], f"low {p['low']} must be below high {p['high']}")
        if not p["low"] <= shipped <= p["high"]:
            raise _err(path, node, w, f"the range [{p['low']}, {p['high']}] does not hold the shipped {shipped}")
        scale, kind = p.get("scale", "linear"), p.get("type", "float")
        if scale not in ("linear", "log"):
            raise _err(path, node, [*w, "scale"], f"{scale!r}: one of linear, log")
        if scale == "log" and p["low"] <= 0:
            raise _err(path, node, [*w, "low"], f"{p['low']}: a log scale needs low > 0")
        if kind not in ("float", "int"):
            raise _err(path, node, [*w, "type"], f"{kind!r}: one of float, int")
        if kind == "int" and not all(float(p[k]).is_integer() for k in ("low", "high")):
            raise _err(path, node, [*w, "low"], "an int parameter needs integer low and high")
        if not isinstance(p["why"], str) or len(p["why"].strip()) < 10:
            raise _err(path, node, [*w, "why"], "need a one-line reason for the range")
        params.append(Parameter(pp, p["low"], p["high"], p["why"].strip(), shipped, scale, kind))
    if not params:
        raise _err(path, node, [*where, "parameters"], "no parameter to sweep")
    # fixed
    fixed = body["fixed"]
    if not isinstance(fixed, dict):
        raise _err(path, node, [*where, "fixed"], "need a mapping {dotted path: reason}")
    swept = {p.path for p in params}
    for fp, why in fixed.items():
        w = [*where, "fixed", fp]
        covered = [leaf for leaf in leaves if leaf == fp or leaf.startswith(fp + ".")]
        if not covered:
            raise _err(path, node, w, f"{fp} is not in {sid}'s sim_workload")
        both = [leaf for leaf in covered if leaf in swept]
        if both:
            raise _err(path, node, w, f"{both[0]} is both swept and fixed")
        if not isinstance(why, str) or len(why.strip()) < 5:
            raise _err(path, node, w, "need the reason it stays fixed")
        cal = [leaf for leaf in covered if leaf in calibrated]
        if cal and "calibrated" not in why.lower():
            raise _err(path, node, w, f"{cal[0]} is CALIBRATED in {study['_file']}: the reason must say so")
    for leaf in leaves:
        if leaf not in swept and not any(leaf == fp or leaf.startswith(fp + ".") for fp in fixed):
            raise _err(path, node, [*where, "fixed"], f"{leaf} of {sid}'s sim_workload is neither swept nor fixed")
    # conclusions
    concl: list[Conclusion] = []
    if not isinstance(body["conclusions"], list) or not body["conclusions"]:
        raise _err(path, node, [*where, "conclusions"], "need a non-empty list")
    metrics = {m["name"] for m in config.for_testbed(study, TESTBED)["metrics"]}
    pts = config.points(study, TESTBED)
    for i, c in enumerate(body["conclusions"]):
        w = [*where, "conclusions", i]
        _keys(
            path,
            node,
            w,
            c,
            {"id", "label", "variant", "reference", "metric", "point", "claim", "margin_pct"},
            {"id", "label", "variant", "reference", "metric", "point", "claim"},
        )
        if not isinstance(c["id"], str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", c["id"]):
            raise _err(path, node, [*w, "id"], f"{c['id']!r}: lower-case letters, digits and '-'")
        if any(x.id == c["id"] for x in concl):
            raise _err(path, node, [*w, "id"], f"{c['id']} twice")
        for k in ("variant", "reference"):
            if c[k] not in study["variants"]:
                raise _err(path, node, [*w, k], f"{c[k]!r} is not a variant of {sid} ({', '.join(study['variants'])})")
        if c["variant"] == c["reference"]:
            raise _err(path, node, [*w, "reference"], "a variant against itself")
        if c["metric"] not in metrics:
            raise _err(path, node, [*w, "metric"], f"{c['metric']!r} is not a sim metric of {sid}")
        if c["point"] not in pts:
            raise _err(path, node, [*w, "point"], f"{c['point']!r} is not a sim point of {sid}")
        if c["claim"] not in CLAIMS:
            raise _err(path, node, [*w, "claim"], f"{c['claim']!r}: one of {', '.join(CLAIMS)}")
        margin = c.get("margin_pct")
        if c["claim"] == "equivalent" and not (_number(margin) and margin > 0):
            raise _err(path, node, [*w, "margin_pct"], "an equivalence claim needs a margin_pct > 0")
        if c["claim"] != "equivalent" and margin is not None:
            raise _err(path, node, [*w, "margin_pct"], "only an equivalence claim has a margin")
        concl.append(
            Conclusion(
                c["id"],
                str(c["label"]),
                c["variant"],
                c["reference"],
                c["metric"],
                dict(c["point"]),
                c["claim"],
                margin,
            )
        )
    return StudyPlan(sid, study, params, dict(fixed), concl)


# --- the plan ------------------------------------------------------------------------------------------


def latin_hypercube(n: int, d: int, seed: int):
    """n points in [0, 1)^d, one in each of the n strata of every dimension (seeded)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    if n == 0:
        return np.zeros((0, d))
    strata = np.stack([rng.permutation(n) for _ in range(d)], axis=1)
    return (strata + rng.random((n, d))) / n


def settings(plan: StudyPlan, joint_points: int, joint_seed: int) -> list[Setting]:
    """shipped; each parameter at low and at high (the others shipped); the joint points."""
    from schedlab.plan import derive_seed

    out = [Setting("shipped", "shipped")]
    for p in plan.parameters:
        for side in ("low", "high"):
            out.append(Setting(f"oat/{p.path}/{side}", "oat", {p.path: p.typed(getattr(p, side))}, p.path, side))
    u = latin_hypercube(joint_points, len(plan.parameters), derive_seed(joint_seed, "sensitivity", plan.name))
    for i, row in enumerate(u):
        out.append(Setting(f"joint/{i + 1:02d}", "joint", {p.path: p.value(x) for p, x in zip(plan.parameters, row)}))
    return out


def apply(study: dict, values: dict) -> dict:
    """A copy of the study whose sim_workload has `values` (dotted paths) set."""
    st = copy.deepcopy(study)
    for path, v in values.items():
        keys = path.split(".")
        d = st["sim_workload"]
        for k in keys[:-1]:
            d = d[k]
        if keys[-1] not in d:
            raise KeyError(path)
        d[keys[-1]] = v
    return st


def definition(study: dict, variant: str, point: dict) -> dict:
    """The run definition of a sensitivity run: the study's, marked as a sensitivity run."""
    return {**config.definition(study, TESTBED, variant, point), "purpose": PURPOSE}


def raw_folder(data_dir: Path, study: str) -> Path:
    return Path(data_dir) / "raw" / PURPOSE / study


def manifest_path(data_dir: Path, study: str) -> Path:
    return Path(data_dir) / "runs" / PURPOSE / f"{study}.json"


# --- the sweep -----------------------------------------------------------------------------------------


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class SnapshotSim:
    """The simulator as its sources are now, copied to `into` and built there (a copy already
    built there is reused): one model for a whole sweep while another process edits sim/src. Runs as SimTestbed does; its description
    and build id name the copy's sources (the same build id as SimTestbed's for the same sources
    and scenario builders, so records are shared with a sweep on the checkout)."""

    def __init__(self, into: Path, tries: int = 5):
        import hashlib
        import shutil
        import subprocess

        from schedlab.core.testbed import RunFailed
        from schedlab.testbeds import sim as simtb

        self._simtb = simtb
        root = Path(into).resolve() / "sim"
        for _ in range(tries if not (root / "build" / "credit1sim").exists() else 0):
            before = simtb.sources_hash()
            if root.exists():
                shutil.rmtree(root)
            (root / "src").mkdir(parents=True)
            for f in simtb.source_files():
                shutil.copy2(f, root / f.relative_to(simtb.SIM_DIR))
            if simtb.sources_hash() == before:
                break
            time.sleep(2)  # copied while being edited: again
        else:
            if not (root / "build" / "credit1sim").exists():
                raise RunFailed(f"sim/src kept changing while it was copied ({tries} tries)")
        p = subprocess.run(["make", "-C", str(root)], capture_output=True, text=True)
        if p.returncode != 0:
            raise RunFailed(f"the copy of sim/src in {root} does not build", log=p.stdout + p.stderr)
        self.files = sorted((root / "src").glob("*.[ch]")) + [root / "Makefile"]
        h = hashlib.sha256()
        for f in self.files:
            h.update(f.relative_to(root).as_posix().encode() + b"\0")
            h.update(f.read_bytes())
        self.root, self.sources_sha256 = root, h.hexdigest()
        self.tb = simtb.SimTestbed(binary=root / "build" / "credit1sim")

    def describe(self) -> dict:
        d = self.tb.describe()
        d["sources_sha256"] = self.sources_sha256
        d["sources"] = {f.relative_to(self.root).as_posix(): self._simtb._sha256_file(f) for f in self.files}
        d["snapshot"] = "sim/src copied and built apart for the sweep (schedlab.sweep.SnapshotSim)"
        return d

    def build_id(self, study: dict, variant: str) -> str:
        return self._simtb.build_id_of(self.sources_sha256, study, variant)

    def run_once(self, study: dict, variant: str, point: dict, seed: int):
        return self.tb.run_once(study, variant, point, seed)


def sweep(
    sw: Sweep,
    study: str,
    data_dir: Path,
    base_seed: int,
    testbed=None,
    log=sys.stderr,
    jobs: int = 1,
) -> dict:
    """Run every (setting, variant, point, seed) of one study not yet on disk; write the
    study's manifest. Returns {"runs", "new", "failed", "cpu_s", "manifest"}.

    Every run goes through the run stage's one record writer (schedlab.run.PointRunner, one
    runner per setting and (variant, point), purpose "sensitivity": its records go to
    raw/sensitivity/STUDY/, their definitions say so, provenance.sensitivity names the
    setting). `jobs` runs at once: each run is a simulator process, so threads suffice; every
    record is written as its run ends (a killed sweep keeps them), the manifest in plan order."""
    from concurrent.futures import Future, ThreadPoolExecutor

    from schedlab import store, testbeds
    from schedlab.core.testbed import RunFailed
    from schedlab.run import PointRunner
    from schedlab.testbeds.sim import SimTestbed, sources_hash

    plan = sw.studies[study]
    tb = testbed or testbeds.get(TESTBED)
    folder = raw_folder(data_dir, study)
    folder.mkdir(parents=True, exist_ok=True)
    store.sweep_partial(folder)
    sets = settings(plan, sw.joint_points, sw.joint_seed)
    pairs = plan.runs()
    size = len(sets) * len(pairs) * sw.seeds
    t_cpu, n_new, n_failed, index = _cpu(), 0, 0, 0
    entries = []
    sources = sources_hash() if isinstance(tb, SimTestbed) else None
    described = None
    # the runs not on disk yet, as they end: a bar on a terminal, else a line every 30 s (stderr);
    # the sweep's own lines go to `log` through tqdm's writer
    progress = Progress(0, sys.stderr, desc=f"sensitivity/{study}", jobs=jobs, every_s=30)
    log = progress.writer(log)
    took: dict[str, float] = {}

    def one(s: Setting, runner: PointRunner, rep: int, run_id: str):
        """One run through its runner, its record written: the manifest entry, or None if it failed."""
        # one build per study: a simulator edited during the sweep would mix models across settings
        if sources is not None and sources_hash() != sources:
            raise SensitivityError(
                f"{study}: the simulator's sources (sim/src) changed during the sweep (at setting {s.id}); "
                "the records so far stay on disk; run the sweep again for one build throughout"
            )
        t0 = time.monotonic()
        try:
            rec = runner.run_rep(rep, executed_as=PURPOSE)
        except RunFailed:
            return None  # its failure record is written; the runner said so in the log
        finally:
            took[run_id] = time.monotonic() - t0
        return _entry(rec, data_dir)

    pool = ThreadPoolExecutor(max_workers=max(1, int(jobs)))
    planned: list[tuple[Setting, list]] = []  # per setting: entries on disk, or futures of runs
    submitted: dict[str, Future] = {}
    for s in sets:
        st = apply(plan.study, s.values)
        runs: list = []
        for variant, point in pairs:
            pid = config.point_id(point)
            build_id = tb.build_id(st, variant)
            order = {
                (variant, pid, rep): {"index": index + rep, "plan_size": size, "plan_seed": sw.joint_seed}
                for rep in range(sw.seeds)
            }
            index += sw.seeds
            runner = PointRunner(
                st,
                TESTBED,
                variant,
                point,
                data_dir,
                base_seed,
                runs=sw.seeds,
                testbed=tb,
                log=log,
                order=order,
                purpose={
                    "name": PURPOSE,
                    "provenance": {
                        "config": _rel(sw.path),
                        "config_sha256": sw.sha256,
                        "setting": s.id,
                        "kind": s.kind,
                        "param": s.param,
                        "side": s.side,
                        "values": s.values,
                    },
                    "warmup": 0,  # every seed is measured
                    "retries": 0,  # a model that fails at a setting fails again: record it once
                },
                described=described,
            )
            for rep in range(sw.seeds):
                run_id = store.run_id_of(variant, pid, rep, runner.run_key(rep, build_id))
                path = folder / f"{run_id}.json"
                if run_id in submitted:  # another setting with the same definition (e.g. a rounded low end)
                    runs.append(submitted[run_id])
                    continue
                if path.exists():
                    rec = store.read_record(path)
                    problems = store.check_record(path, rec)
                    if problems:
                        raise SensitivityError(f"{path}: existing record is damaged: {'; '.join(problems)}")
                    runs.append(_entry(rec, data_dir))
                    continue
                if described is None:
                    described = runner.described = tb.describe()
                submitted[run_id] = pool.submit(one, s, runner, rep, run_id)
                submitted[run_id].add_done_callback(lambda f, rid=run_id: progress.step(took.get(rid, 0.0)))
                runs.append(submitted[run_id])
        planned.append((s, runs))
    progress.set_total(len(submitted))
    counted: set[Future] = set()
    try:
        for s, runs in planned:
            done = []
            for r in runs:
                if not isinstance(r, Future):  # on disk already
                    done.append(r)
                    continue
                got = r.result()
                if r not in counted:  # a run two settings share counts once
                    counted.add(r)
                    n_new, n_failed = n_new + (got is not None), n_failed + (got is None)
                if got is not None:
                    done.append(got)
            entries.append(_setting_entry(s, done))
            print(f"[sensitivity/{study}] {s.id}: {len(done)} runs", file=log, flush=True)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        progress.close()
    out = write_manifest(sw, study, data_dir, entries)
    cpu = _cpu() - t_cpu
    print(
        f"[sensitivity/{study}] {size} runs ({n_new} new, {n_failed} failed), CPU {cpu:.1f} s; manifest {out}",
        file=log,
        flush=True,
    )
    return {"runs": size, "new": n_new, "failed": n_failed, "cpu_s": cpu, "manifest": out}


def _rel(p: Path) -> str:
    p = Path(p).resolve()
    return str(p.relative_to(config.ROOT)) if p.is_relative_to(config.ROOT) else str(p)


def _entry(rec: dict, data_dir: Path) -> dict:
    return {
        "run_id": rec["run_id"],
        "path": str(Path("raw") / PURPOSE / rec["study"] / f"{rec['run_id']}.json"),
        "checksum": rec["checksum"],
        "variant": rec["variant"],
        "point_id": rec["point_id"],
        "repetition": rec["repetition"],
    }


def _setting_entry(s: Setting, runs: list[dict]) -> dict:
    return {"id": s.id, "kind": s.kind, "param": s.param, "side": s.side, "values": s.values, "runs": runs}


def write_manifest(sw: Sweep, study: str, data_dir: Path, entries: list[dict]) -> Path:
    from schedlab.core.files import atomic_write

    path = manifest_path(data_dir, study)
    body = {
        "study": study,
        "config": _rel(sw.path),
        "config_sha256": sw.sha256,
        "seeds": sw.seeds,
        "joint_points": sw.joint_points,
        "settings": entries,
    }
    atomic_write(path, json.dumps(body, indent=1, sort_keys=True) + "\n")
    return path


def select(sw: Sweep, study: str, data_dir: Path) -> dict:
    """The study's manifest from the records on disk, without the simulator: for every
    (setting, variant, point) the runs of the current definition, of one build (the one with
    the most runs, ties to the latest). Returns {"runs", "missing", "manifest"}."""
    from schedlab import store

    plan = sw.studies[study]
    folder = raw_folder(data_dir, study)
    by_def: dict[str, list[dict]] = {}
    for p in store.iter_records(folder) if folder.is_dir() else []:
        rec = store.read_record(p)
        problems = store.check_record(p, rec)
        if problems:
            raise SensitivityError(f"{p}: {'; '.join(problems)}")
        if rec.get("status") == "ok":
            by_def.setdefault(rec["definition_hash"], []).append(rec)
    entries, n, missing = [], 0, 0
    for s in settings(plan, sw.joint_points, sw.joint_seed):
        st = apply(plan.study, s.values)
        runs = []
        for variant, point in plan.runs():
            recs = by_def.get(config.sha256(definition(st, variant, point)), [])
            builds: dict[str, list[dict]] = {}
            for r in recs:
                if r["repetition"] < sw.seeds:
                    builds.setdefault(r["provenance"]["build_id"], []).append(r)
            best = max(builds.values(), key=lambda rs: (len(rs), max(r["finished"] for r in rs)), default=[])
            missing += sw.seeds - len(best)
            runs += [_entry(r, data_dir) for r in sorted(best, key=lambda r: r["repetition"])]
        n += len(runs)
        entries.append(_setting_entry(s, runs))
    return {"runs": n, "missing": missing, "manifest": write_manifest(sw, study, data_dir, entries)}


# --- command line --------------------------------------------------------------------------------------


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m schedlab.sweep",
        description="Sensitivity of the sim's conclusions to its uncalibrated workload parameters.",
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, what in (
        ("validate", "check the configuration against the study files"),
        ("plan", "list the settings and the number of runs"),
        ("run", "run the missing runs and write the manifests"),
        ("select", "write the manifests from the records on disk (never runs the sim)"),
    ):
        s = sub.add_parser(name, help=what)
        s.add_argument("--config", default=str(CONFIG), help="the sweep (default config/sensitivity.yaml)")
        s.add_argument("--studies-dir", default=None, help="the study files (default config/studies)")
        s.add_argument("--study", action="append", default=None, help="one study (repeat; default: all)")
        s.add_argument("--data", default="data", help="the data directory (records under DATA/raw/sensitivity)")
        s.add_argument("--seed", type=int, default=None, help="base seed (default: config/config.yaml's)")
        if name == "run":
            s.add_argument(
                "--snapshot",
                default=None,
                metavar="DIR",
                help="copy sim/src to DIR and build it there (or reuse the copy DIR has): one model for the whole sweep",
            )
            s.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    a = p.parse_args(argv)
    try:
        sw = load(a.config, a.studies_dir, a.study)
        names = a.study or list(sw.studies)
        if a.cmd == "validate":
            print(f"{_rel(Path(a.config))}: {len(sw.studies)} studies, ok")
        elif a.cmd == "plan":
            total = 0
            for s in names:
                pl = sw.studies[s]
                sets = settings(pl, sw.joint_points, sw.joint_seed)
                n = len(sets) * len(pl.runs()) * sw.seeds
                total += n
                print(
                    f"{s}: {len(pl.parameters)} parameters, {len(sets)} settings "
                    f"(1 shipped, {2 * len(pl.parameters)} OAT, {sw.joint_points} joint) x "
                    f"{len(pl.runs())} (variant, point) x {sw.seeds} seeds = {n} runs"
                )
            print(f"total: {total} runs")
        elif a.cmd == "run":
            base_seed = a.seed if a.seed is not None else config.load_config()["seed"]
            cpu = 0.0
            tb = SnapshotSim(Path(a.snapshot)) if a.snapshot else None
            if tb is not None:
                print(f"sensitivity: simulator copied and built in {tb.root} (sources {tb.sources_sha256[:16]})")
            for s in names:
                cpu += sweep(sw, s, Path(a.data), base_seed, testbed=tb, jobs=a.jobs, log=sys.stdout)["cpu_s"]
            print(f"sensitivity: CPU {cpu:.1f} s", file=sys.stderr)
        elif a.cmd == "select":
            for s in names:
                r = select(sw, s, Path(a.data))
                print(f"{s}: {r['runs']} runs, {r['missing']} missing; {r['manifest']}")
    except (SensitivityError, config.ConfigError) as e:
        print(f"sensitivity: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a run's or a record's failure: one line, not a traceback
        from schedlab import store
        from schedlab.core.testbed import RunFailed

        if isinstance(e, (RunFailed, store.RecordError, OSError)):
            print(f"sensitivity: {e}", file=sys.stderr)
            return 1
        raise
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
