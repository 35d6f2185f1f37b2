"""`schedlab compare A B`: two data folders of one study on one testbed (e.g. an artifact
evaluator's re-measurement B against the shipped records A), cell by cell.

Each folder gives, per (variant, point) of the study's current definition, the measured runs of
one build (the build with the most runs there; a re-measurement is a new build). Where the
records name the boot they ran in (records.boot_of), the boot is the replicate: a boot's runs
are averaged first, so n and the degrees of freedom count boots. Every (variant, point, metric)
is then B against A as the paper compares variants (schedlab.stats.compare_table: Welch's t on
the log ratio of the means, Holm over every cell), with an equivalence test (TOST) within a
margin: the study's `equivalence_margin_pct`, else 5 %.

A cell's verdict: "equivalent" (TOST, Holm-adjusted: B is within the margin of A), "differs"
(Welch, Holm-adjusted: B's mean is not A's) or "inconclusive" (neither: too few runs or too
much noise to tell). The whole: "agree" when every cell is equivalent, "differ" when any cell
differs, else "inconclusive"."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from schedlab import config, records, store

DEFAULT_MARGIN_PCT = 5.0
EQUIVALENT, DIFFERS, INCONCLUSIVE = "equivalent", "differs", "inconclusive"


class CompareError(config.ConfigError):
    """A comparison that cannot be made (the CLI prints it as one line)."""


@dataclass
class Source:
    """The runs one data folder gives for the study: one row per replicate (a boot's mean where
    the records name their boot, else a run), the study's variant, the point's axes, the metrics."""

    folder: Path
    units: pd.DataFrame
    runs: int
    boots: bool
    builds: int
    definitions: int = 1
    current: bool = True


def load(folder: Path, study: dict, testbed: str, any_definition: bool = False) -> Source:
    """The measured runs of the study's current definition in `folder` (raw/TESTBED/STUDY/):
    per (variant, point) those of the build with the most runs (ties: the latest).
    any_definition: a (variant, point) of the study whatever the definition its records were
    measured under (e.g. a campaign before a change of the study file); per (variant, point)
    the (definition, build) with the most runs."""
    raw = store.raw_dir(Path(folder), testbed, study["study"])
    if not raw.is_dir():
        raise CompareError(f"{folder}: no records of study {study['study']} on testbed {testbed} (no folder {raw})")
    current = records.current_definitions(study, testbed)
    want = {f"{v}/{config.point_id(p)}": (v, p) for v, p in current.values()}
    by_point: dict[str, dict[tuple, list[dict]]] = {}
    for path in store.iter_records(raw):
        rec = store.read_record(path)
        problems = store.check_record(path, rec)
        if problems:
            raise store.RecordError(f"{path}: {'; '.join(problems)}")
        cell = f"{rec.get('variant')}/{rec.get('point_id')}"
        ok = rec.get("definition_hash") in current or (any_definition and cell in want)
        if rec.get("status") != "ok" or rec.get("warmup") or not ok:
            continue
        by_point.setdefault(cell, {}).setdefault((rec["definition_hash"], rec["provenance"]["build_id"]), []).append(
            rec
        )
    if not by_point:
        what = "" if any_definition else "the current definition of "
        hint = "" if any_definition else " (--any-definition: campaigns measured under an earlier study file)"
        raise CompareError(f"{raw}: no measured runs of {what}study {study['study']}{hint}")
    axes = list(config.testbed_settings(study, testbed)["axes"])
    rows, builds, definitions = [], set(), set()
    for cell, per_build in by_point.items():
        (dhash, build), recs = max(per_build.items(), key=lambda kv: (len(kv[1]), max(r["finished"] for r in kv[1])))
        builds.add(build)
        definitions.add(dhash)
        variant, point = want[cell]
        for r in recs:
            boot = records.boot_of(r)
            rows.append(
                {"variant": variant, **{a: point[a] for a in axes}, "boot": boot, "run_id": r["run_id"], **r["metrics"]}
            )
    frame = pd.DataFrame(rows)
    boots = bool(frame["boot"].notna().any())
    metrics = [m["name"] for m in study["metrics"] if m["name"] in frame]
    if boots:
        # the boot is the replicate: one row per (variant, point, boot), its runs' mean
        frame["boot"] = frame["boot"].fillna(frame["run_id"])
        units = frame.groupby(["variant", *axes, "boot"], sort=False)[metrics].mean().reset_index()
    else:
        units = frame.drop(columns=["boot"])
    current_only = definitions <= set(current)
    return Source(Path(folder), units, len(frame), boots, len(builds), len(definitions), current_only)


def compare(
    a: Source, b: Source, study: dict, testbed: str, margin_pct: float, confidence: float = 95.0
) -> pd.DataFrame:
    """B against A at every (variant, point, metric) both have: one row each, with n (the
    replicates), the means, the difference in % of A's mean with its interval (Holm level), the
    Holm-adjusted p-values of the difference and of the equivalence test, and the verdict."""
    from schedlab.stats import compare_table

    axes = list(config.testbed_settings(study, testbed)["axes"])
    metrics = [m["name"] for m in study["metrics"]]
    frames = []
    for name, src in (("A", a), ("B", b)):
        u = src.units.rename(columns={"variant": "study_variant"}).assign(source=name)
        frames.append(u.melt(id_vars=["source", "study_variant", *axes], value_vars=[m for m in metrics if m in u]))
    long = pd.concat(frames, ignore_index=True).rename(columns={"variable": "metric"}).dropna(subset=["value"])
    # cells both folders measured with at least two replicates each
    n = long.groupby(["study_variant", *axes, "metric", "source"]).size().unstack("source")
    both = n[(n.get("A", 0) >= 2) & (n.get("B", 0) >= 2)].index
    if not len(both):
        raise CompareError("no (variant, point, metric) with at least two replicates in both folders")
    key = ["study_variant", *axes, "metric"]
    long = long.set_index(key).loc[both].reset_index()
    cmp = compare_table(
        long,
        metric="value",
        baseline={"A": "A", "B": "A"},
        by=key,
        variant_col="source",
        confidence=confidence,
        margin_pct=margin_pct,
    )
    out = cmp.drop(columns=["variant"]).rename(columns={"study_variant": "variant", "n_base": "n_a", "n_var": "n_b"})
    out["mean_a"], out["mean_b"] = cmp["mean_base"], cmp["mean_var"]

    def verdict(r) -> str:
        if r["test"] == "exact":  # neither folder's runs vary: the difference itself decides
            return EQUIVALENT if abs(r["pct"]) < margin_pct else DIFFERS
        if r["equivalent"] is True or r["equivalent"] == 1:
            return EQUIVALENT
        return DIFFERS if r["significant"] else INCONCLUSIVE

    out["verdict"] = out.apply(verdict, axis=1)
    cols = ["variant", *axes, "metric", "n_a", "mean_a", "n_b", "mean_b", "pct", "pct_low", "pct_high"]
    return out[cols + ["ci_level", "p_holm", "eq_p_holm", "verdict"]].reset_index(drop=True)


def overall(table: pd.DataFrame) -> str:
    if (table["verdict"] == DIFFERS).any():
        return "differ"
    return "agree" if (table["verdict"] == EQUIVALENT).all() else "inconclusive"


def _num(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "--"
    return f"{x:.4g}"


def _pct(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "inf" if x and x > 0 else "-inf" if x else "--"
    return f"{x:+.1f}"


def text(a: Source, b: Source, table: pd.DataFrame, study: dict, testbed: str, margin_pct: float) -> str:
    """The comparison as the terminal shows it: what each folder gave, a header and a line per
    cell, and the verdict."""
    axes = list(config.testbed_settings(study, testbed)["axes"])
    unit = "boots" if a.boots or b.boots else "runs"
    lines = []
    for name, src in (("A", a), ("B", b)):
        what = (
            f"{len(src.units)} {'boots' if src.boots else 'runs'} ({src.runs} runs)"
            if src.boots
            else f"{src.runs} runs"
        )
        defs = "the current definition" if src.current else f"{src.definitions} definition(s), not all current"
        lines.append(f"{name}: {src.folder}: {what}, {src.builds} build(s), {defs}")
    lines.append(
        f"{study['study']} on {testbed}: B against A per (variant, point, metric); n in {unit}; "
        f"Welch on the log ratio of the means, Holm over {len(table)} cells; TOST within ±{margin_pct:g} %"
    )
    head = ["variant", *axes, "metric", "n A", "mean A", "n B", "mean B", "Δ % [interval]", "p", "p eq", "verdict"]
    body = [
        [
            str(r["variant"]),
            *(str(r[x]) for x in axes),
            str(r["metric"]),
            str(int(r["n_a"])),
            _num(r["mean_a"]),
            str(int(r["n_b"])),
            _num(r["mean_b"]),
            f"{_pct(r['pct'])} [{_pct(r['pct_low'])}, {_pct(r['pct_high'])}]",
            f"{r['p_holm']:.2g}",
            "--" if pd.isna(r["eq_p_holm"]) else f"{r['eq_p_holm']:.2g}",
            r["verdict"],
        ]
        for _, r in table.iterrows()
    ]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    for row in [head, *body]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    counts = table["verdict"].value_counts()
    summary = ", ".join(f"{counts.get(v, 0)} {v}" for v in (EQUIVALENT, DIFFERS, INCONCLUSIVE))
    verdict = overall(table)
    why = {
        "agree": f"every cell of B is within ±{margin_pct:g} % of A's",
        "differ": "B's mean differs from A's in at least one cell (Holm-adjusted)",
        "inconclusive": f"no cell differs, but not every cell is shown within ±{margin_pct:g} % (more {unit} would tell)",
    }[verdict]
    lines.append(f"verdict: {verdict}: {why} ({summary})")
    return "\n".join(lines)


def main(
    folder_a: Path, folder_b: Path, study_name: str, testbed: str, margin_pct: float | None, any_definition=False
) -> int:
    study = config.load_study(study_name)
    config.testbed_settings(study, testbed)
    if margin_pct is None:
        margin_pct = study.get("equivalence_margin_pct") or DEFAULT_MARGIN_PCT
    if not margin_pct > 0:
        raise CompareError(f"--margin {margin_pct}: must be a positive percentage")
    a, b = load(folder_a, study, testbed, any_definition), load(folder_b, study, testbed, any_definition)
    table = compare(a, b, study, testbed, margin_pct)
    print(text(a, b, table, study, testbed, margin_pct))
    return 0
