"""Read a study's runs for the notebooks: the manifests written by the run
stage say which records belong to the current study definition; every record
is checked (schema and checksum) as it is read."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from schedlab import records, store


class DataError(Exception):
    pass


def load_runs(data_dir: Path, testbed: str, study: str, include_warmup: bool = False) -> pd.DataFrame:
    """One row per run: run_id, variant, the point's axes, repetition, warmup,
    seed, one column per metric, plus `checksum`. Warm-ups are dropped unless
    asked for. Raises DataError naming the file on a damaged record. The records
    themselves stay with the frame (`frame.attrs["records"]`), so nothing reads them twice."""
    try:
        recs = records.read(data_dir, testbed, study)
    except store.RecordError as e:
        raise DataError(str(e)) from None
    kept = [r for r in recs if include_warmup or not r["warmup"]]
    rows = [
        {
            "run_id": r["run_id"],
            # the experimental unit: its boot where the record names one, else the run itself
            "boot": records.boot_of(r) or r["run_id"],
            "variant": r["variant"],
            **r["point"],
            "repetition": r["repetition"],
            "warmup": r["warmup"],
            "seed": r["seed"],
            "checksum": r["checksum"],
            "build_id": r["provenance"]["build_id"],
            **r["metrics"],
        }
        for r in kept
    ]
    if not rows:
        manifest = records.study_manifest(Path(data_dir), testbed, study)
        shown = _shown(manifest)
        raise DataError(
            f"no runs for study {study} on testbed {testbed} in {shown} (measure them first: "
            f"`schedlab run-study {study} --testbed {testbed} --out {_shown(Path(data_dir))} --manifest {shown}`, "
            f"or `snakemake -c2 {shown}`)"
        )
    frame = pd.DataFrame(rows)
    frame.attrs["records"] = {r["run_id"]: r for r in kept}
    return frame


def _shown(path: Path) -> str:
    """A path as the user types it: relative to the working directory when inside it."""
    p = Path(path).resolve()
    return str(p.relative_to(Path.cwd())) if p.is_relative_to(Path.cwd()) else str(path)


def data_hash(runs: pd.DataFrame) -> str:
    """Hash of the raw data behind a table: the sorted (run id, checksum) pairs."""
    h = hashlib.sha256()
    for rid, ck in sorted(zip(runs["run_id"], runs["checksum"])):
        h.update(f"{rid} {ck}\n".encode())
    return h.hexdigest()


def _records(data_dir: Path, testbed: str, study: str, runs: pd.DataFrame) -> list[dict]:
    """The records behind `runs`: those load_runs kept, else read from the raw folder."""
    kept = runs.attrs.get("records") or {}
    folder = store.raw_dir(Path(data_dir), testbed, study)
    return [kept.get(rid) or store.read_record(folder / f"{rid}.json") for rid in runs["run_id"]]


def provenance_summary(data_dir: Path, testbed: str, study: str, runs: pd.DataFrame) -> dict:
    """What the methods section says about these runs (from the records, not typed)."""
    recs = _records(data_dir, testbed, study, runs)
    tbs = {json.dumps(r["provenance"]["testbed"], sort_keys=True) for r in recs}
    hosts = {json.dumps(r["provenance"]["host"], sort_keys=True) for r in recs}
    commits = sorted(
        {r["provenance"]["repo_commit"][:12] + ("+dirty" if r["provenance"].get("repo_dirty") else "") for r in recs}
    )
    return {
        "testbeds": [json.loads(t) for t in sorted(tbs)],
        "hosts": [json.loads(h) for h in sorted(hosts)],
        "repo_commits": commits,
        "builds": sorted({r["provenance"]["build_id"] for r in recs}),
        "seeds": sorted(r["seed"] for r in recs),
        "plan_seed": recs[0]["run_order"]["plan_seed"] if recs else None,
        "n_runs": len(recs),
        "booted": booted_builds(recs),
        "machine": machine_load(recs),
    }


def machine_load(recs: list[dict]) -> dict:
    """The development machine's state during qemu runs, from each record's counters:
    its 1-minute load average, and the share of its CPU time its own hypervisor stole
    (`host_cpu_ticks`, recorded since the S3 workload; older records lack it). Empty where
    no record has either (sim, lab)."""
    load = [c["host_loadavg"][0] for r in recs if (c := r.get("counters") or {}).get("host_loadavg")]
    steal = []
    for r in recs:
        t = (r.get("counters") or {}).get("host_cpu_ticks") or {}
        if total := sum(t.values()):
            steal.append(100.0 * t.get("steal", 0) / total)
    out: dict = {}
    if load:
        out["load"] = (min(load), max(load))
    if steal:
        out["steal_pct"] = (min(steal), max(steal), len(steal))
    return out


def booted_builds(recs: list[dict]) -> dict[str, list[str]]:
    """Per variant, what its runs booted, from each record's counters (qemu and lab: the Xen
    build and its command line; native runs: the kernel and its command line). Empty for the sim."""
    out: dict[str, dict[str, set[str]]] = {}  # variant -> build -> command lines seen
    for r in recs:
        c = r.get("counters") or {}
        booted = c.get("booted") or {}
        if not booted:
            # records made before counters.booted existed: the process-wide description names
            # one boot only; trust it only where it is this run's build
            old = (r["provenance"].get("testbed") or {}).get("booted") or {}
            if old.get("xen_version") and old.get("xen_version") == (c.get("xen") or {}).get("xen_version"):
                booted = old
        if c.get("xen"):
            x = c["xen"]
            build = (
                f"Xen {x.get('xen_version')} (patch series {x.get('patches')}, "
                f"binary sha256 {str(x.get('sha256', ''))[:12]})"
            )
            cmdline = booted.get("xen_commandline")
        elif c.get("kernel"):
            k = c["kernel"]
            build = (
                f"Linux {k.get('kernelrelease')} (config {k.get('config')}, "
                f".config sha256 {str(k.get('config_sha256', ''))[:12]})"
            )
            cmdline = c.get("cmdline")
        else:
            continue
        seen = out.setdefault(r["variant"], {}).setdefault(build, set())
        if cmdline:
            seen.add(cmdline)
    return {
        v: [b + "".join(f", command line `{cl}'" for cl in sorted(cls)) for b, cls in sorted(builds.items())]
        for v, builds in sorted(out.items())
    }
