"""Generate the paper's methods section (methods.tex: each testbed in a paragraph and the
statistics), its provenance appendix (provenance.tex: descriptions, hosts, commits, builds,
command lines and hashes per study), the list of reported testbeds and the dataset
checksum from the study files, the table sidecars and the raw records' provenance.
Nothing in it is typed by hand.

    python -m schedlab.report.methods --data-dir data --paper-dir paper --testbed sim
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np

from schedlab import config
from schedlab.core.files import atomic_write
from schedlab.report import data as rdata
from schedlab.report.table_model import Table
from schedlab.report.tables import axes_text, display_title, runs_text
from schedlab.report.tables import latex_escape as esc

DETECT_PCT = 5.0  # the effect size the power analysis asks each study to detect
POWER = 0.8


def _short(v) -> str:
    """Hashes and paths shortened so a line can break: 12 hex digits identify a build."""
    s = str(v)
    if len(s) >= 40 and all(c in "0123456789abcdef" for c in s):
        return s[:12]
    return s if len(s) <= 48 else s[:45] + "..."


def _variant_line(name: str, v: dict) -> str:
    xen = v.get("xen", {})
    parts = [f"patch series \\texttt{{{esc(xen.get('patches', 'stock'))}}}"]
    if xen.get("boot"):
        parts.append("boot " + ", ".join(f"\\texttt{{{esc(k)}={esc(str(b))}}}" for k, b in xen["boot"].items()))
    if xen.get("sched_credit"):
        parts.append(
            "set at run time (\\texttt{xl sched-credit}) "
            + ", ".join(f"\\texttt{{{esc(k)}={esc(str(b))}}}" for k, b in xen["sched_credit"].items())
        )
    if v.get("kernel"):
        parts.append("kernel " + ", ".join(f"{esc(k)} \\texttt{{{esc(str(g))}}}" for k, g in v["kernel"].items()))
    if v.get("guest"):
        parts.append("guest " + ", ".join(f"{esc(k)} \\texttt{{{esc(str(g))}}}" for k, g in v["guest"].items()))
    if v.get("sim"):
        parts.append("sim " + ", ".join(f"{esc(k)}=\\texttt{{{esc(str(s))}}}" for k, s in sorted(v["sim"].items())))
    return f"\\texttt{{{esc(name)}}}: " + "; ".join(parts)


def booted_text(booted: dict[str, list[str]]) -> str:
    """What the variants booted, each different boot once with the variants that booted it (not
    one command line per variant when they share it)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for v, ds in booted.items():
        groups.setdefault(tuple(ds), []).append(v)
    if len(groups) == 1:
        (ds,) = groups
        return ("every variant " if len(booted) > 1 else "") + ", ".join(esc(d) for d in ds)
    return "; ".join(
        _and([f"\\texttt{{{esc(v)}}}" for v in vs]) + ": " + ", ".join(esc(d) for d in ds) for ds, vs in groups.items()
    )


def variants_table(studies: dict[str, dict]) -> Table:
    """Every study's variants in one table: what each changes in Xen, the guest or kernel, and
    the simulator (from the study files; the appendix's prose names them only)."""
    rag = r">{\raggedright\arraybackslash}"
    cols = [
        ("study", "l"),
        ("variant", "l"),
        ("Xen: patches; settings", rag + "p{5.0cm}"),
        ("guest or kernel", rag + "p{3.2cm}"),
        ("simulator", rag + "p{2.6cm}"),
    ]
    rows = []
    for s, st in studies.items():
        for i, (n, v) in enumerate(st["variants"].items()):
            xen = v.get("xen", {})
            xs = [f"\\texttt{{{esc(xen.get('patches', 'stock'))}}}"]
            xs += [f"\\texttt{{{esc(k)}={esc(str(b))}}}" for k, b in (xen.get("boot") or {}).items()]
            xs += [f"\\texttt{{{esc(k)}={esc(str(b))}}} (run time)" for k, b in (xen.get("sched_credit") or {}).items()]
            guest = [f"{esc(k)} \\texttt{{{esc(str(g))}}}" for k, g in (v.get("kernel") or {}).items()]
            guest += [f"{esc(k)} \\texttt{{{esc(str(g))}}}" for k, g in (v.get("guest") or {}).items()]
            # a long key may break after an underscore: the column is narrow
            sim = [
                esc(k).replace("\\_", "\\_\\allowbreak{}") + f"=\\allowbreak\\texttt{{{esc(str(x))}}}"
                for k, x in sorted((v.get("sim") or {}).items())
            ]
            name = f"\\texttt{{{esc(n)}}}" + (" (baseline)" if n == st["baseline"] else "")
            rows.append(
                [
                    study_label(s) if i == 0 else "",
                    name,
                    "; ".join(xs),
                    ", ".join(guest) or "--",
                    ", ".join(sim) or "--",
                ]
            )
        rows.append(None)
    caption = (
        r"Every study's variants, from the study files: the Xen patch series each builds and the settings it "
        r"boots or sets at run time, what it changes in the guest or the kernel, and the simulator's switches. "
        r"The records name what each run booted (Appendix~\ref{app:provenance})."
    )
    return Table.from_rows(cols, rows[:-1], None, caption, "tab:variants", preamble=r"\setlength{\tabcolsep}{3pt}")


def calibrated_values(study: dict, text: str) -> list[tuple[str, object, str]]:
    """The sim model's calibrated values in a study file: (dotted path, value, the comment that
    says what it was fitted to), from its lines marked CALIBRATED (a key on the line; the key
    before the word when the line holds several)."""
    import yaml

    data = yaml.safe_load(text) or {}
    lines = text.splitlines()
    out = []
    for i, ln in enumerate(lines):
        code, _, comment = ln.partition("#")
        if "CALIBRATED" not in comment or not code.strip():
            continue
        keys = re.findall(r"([A-Za-z_]\w*):", code)
        named = re.search(r"(\w+) CALIBRATED", comment)
        key = named.group(1) if named and named.group(1) in keys else keys[0]
        indent = len(code) - len(code.lstrip())
        # a flow mapping opened on this line (`kind: {..., key: v}`): its key encloses the value
        first = re.match(r"\s*([A-Za-z_]\w*):\s*\{", code)
        path = [first.group(1), key] if first and first.group(1) != key else [key]
        level = indent
        for up in range(i - 1, -1, -1):
            c = lines[up].partition("#")[0]
            m = re.match(r"(\s*)([A-Za-z_]\w*):", c)
            if m and len(m.group(1)) < level:
                path.insert(0, m.group(2))
                level = len(m.group(1))
                if level == 0:
                    break
        value = data
        for k in path:
            value = value.get(k) if isinstance(value, dict) else None
        if isinstance(value, dict):
            value = value.get("mean", value)
        why = comment.strip().split("CALIBRATED", 1)[1].strip(" :")
        for nxt in lines[i + 1 :]:  # a comment continued on the lines below (comment only)
            code_n, _, more = nxt.partition("#")
            if code_n.strip() or not more.strip():
                break
            why += " " + more.strip()
        # a comment's history ("(was 32.5 without netback)") is the study file's, not the value's
        why = re.sub(r"\s*\(was [^)]*\)", "", why)
        out.append((".".join(path).removeprefix("sim_workload."), value, why))
    return out


def calibrated_table(studies: dict[str, dict], studies_dir: Path) -> Table:
    """Every value of the simulator's model fitted to a measurement: the study, the parameter,
    its value and what it was fitted to, from the study files' CALIBRATED marks."""
    rag = r">{\raggedright\arraybackslash}"
    rows = []
    for s, st in studies.items():
        path = Path(studies_dir) / f"{s}.yaml"
        for key, value, why in calibrated_values(st, path.read_text()):
            rows.append([study_label(s), f"\\texttt{{{esc(key)}}}", esc(str(value)), esc(why)])
    caption = (
        r"Every calibrated value of the simulator's model (its path in the study file's \texttt{sim\_workload}), "
        r"from the study files' \texttt{CALIBRATED} marks: "
        r"each was fitted on one point of its study's baseline (marked in the study tables), the only point "
        r"where agreement with the seed is by construction. Every other workload parameter is an estimate "
        r"with its reason in the study file, swept in Appendix~\ref{app:sensitivity}."
    )
    return Table.from_rows(
        [("study", "l"), ("parameter", "l"), ("value", "l"), ("fitted on", rag + "p{7.4cm}")],
        rows,
        None,
        caption,
        "tab:calibrated",
    )


def records_table(data_dir: Path, studies: dict[str, dict], testbeds: list[str]) -> Table:
    """Every raw record on disk per testbed and study: how many the paper uses (and in how many
    boots, where the boot is the unit), how many it does not and why (records.why_not_used: made
    before the design was registered, from a dirty checkout, superseded, exploratory; or of
    another definition of the study), the measuring time they took and the disk they fill."""
    from schedlab import records, store

    reasons = {
        "made before its design was registered": "before registration",
        "made from a checkout with uncommitted changes (exploratory)": "dirty tree",
        "superseded: the design changed after it was made": "superseded",
        "exploratory": "exploratory",
    }
    rows = []
    for tb in testbeds:
        for s, st in studies.items():
            if tb not in st["testbeds"]:
                continue
            folder = store.raw_dir(Path(data_dir), tb, s)
            if not folder.is_dir():
                continue
            want = records.current_definitions(st, tb)
            dhash = config.design_hash(st, tb)
            n = used = measured = other = failed = 0
            boots, why, hours, size = set(), {}, 0.0, 0
            for path in store.iter_records(folder):
                rec = store.read_record(path)
                n += 1
                size += path.stat().st_size
                hours += float(rec.get("duration_s") or 0) / 3600
                if rec.get("status") != "ok":
                    failed += 1
                elif rec.get("definition_hash") not in want:
                    other += 1
                else:
                    w = records.why_not_used(rec, st, tb, dhash)
                    if w:
                        why[reasons.get(w, w)] = why.get(reasons.get(w, w), 0) + 1
                    else:
                        used += 1
                        measured += not rec.get("warmup")
                        boots.add(records.boot_of(rec) or rec["run_id"])
            per_boot = config.testbed_settings(st, tb)["unit"] == "boot"
            not_used = [f"{k} {why[k]}" for k in sorted(why)]
            if other:
                not_used.append(f"other definition {other}")
            if failed:
                not_used.append(f"failed {failed}")
            rows.append(
                [
                    esc(tb),
                    study_label(s),
                    str(n),
                    f"{used} ({measured} measured; {len(boots)} boots)" if per_boot and used else str(used),
                    esc(", ".join(not_used)) or "--",
                    f"{hours:.1f}" if hours >= 0.1 else "<0.1",
                    f"{size / 1e6:.1f}",
                ]
            )
    rag = r">{\raggedright\arraybackslash}"
    caption = (
        r"Every raw record shipped in \texttt{data/raw}, per testbed and study: how many stand for the study's "
        r"current registered design (the tables take each cell's runs from one build, the one with the most "
        r"runs; on qemu, with the measured runs among them, the rest being each boot's discarded warm-up runs, "
        r"and the distinct boots they come from: one per round and build, and one more wherever a round that "
        r"ended early resumed its remaining cells in a fresh boot, while a study table counts one boot per "
        r"round in each cell), how many do not and why (made before the study's "
        r"design was registered, from a checkout with uncommitted changes, superseded by a later design, "
        r"exploratory, of another definition of the study, or failed; kept, never deleted, and listed run by "
        r"run in each study's manifest, \texttt{data/runs/TESTBED/STUDY/all.json}, field \texttt{not\_used}), "
        r"the hours of measuring they took (each run's own duration, boots and builds not included) and their "
        r"size on disk."
    )
    return Table.from_rows(
        [
            ("testbed", "l"),
            ("study", "l"),
            ("records", "r"),
            # "48 (24 measured; 14 boots)" on two lines, so the table stays at the body's size
            ("current design", rag + "p{2.3cm}"),
            ("not used, why", rag + "p{4.6cm}"),
            ("hours", "r"),
            ("MB", "r"),
        ],
        rows,
        None,
        caption,
        "tab:records",
    )


def _size(path: Path) -> int:
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0


def resources_table(data_dir: Path, paper_dir: Path, measure_hours: float) -> Table:
    """What each stage of `make paper` cost in the build that made these files, from Snakemake's
    benchmark files (data/benchmarks/STAGE/...: wall and CPU seconds, peak memory), the disk its
    outputs fill, and the qemu measuring the shipped records took (their runs' own durations)."""
    import csv

    data_dir, paper_dir = Path(data_dir), Path(paper_dir)
    stages = [
        ("sim runs", "sim", [data_dir / "raw" / "sim"]),
        ("sensitivity sweep", "sensitivity", [data_dir / "raw" / "sensitivity"]),
        ("validation and its mutants", "validation", []),
        ("notebooks (tables, figures)", "notebooks", [paper_dir / "generated"]),
        ("qemu tables from shipped records", "qemu", []),
    ]
    rows = []
    for name, folder, disks in stages:
        wall = rss = 0.0
        for f in (data_dir / "benchmarks" / folder).rglob("*.tsv"):
            with f.open() as fh:
                for r in csv.DictReader(fh, delimiter="\t"):
                    try:
                        wall += float(r["s"])
                        rss = max(rss, float(r.get("max_rss") or 0))
                    except (KeyError, ValueError):
                        continue
        if not wall:
            continue
        disk = sum(_size(d) for d in disks)
        rows.append(
            [
                esc(name),
                f"{wall / 60:.0f}" if wall >= 60 else "<1",
                f"{rss:.0f}",
                f"{disk / 1e6:.0f}" if disk else "--",
            ]
        )
    rows.append(
        [
            r"qemu measurement (\texttt{MEASURE=sim,qemu})",
            f"{measure_hours * 60:.0f}",
            "--",
            f"{_size(data_dir / 'raw' / 'qemu') / 1e6:.0f}",
        ]
    )
    caption = (
        r"What each stage of \texttt{make paper} cost in the build that made this PDF, from Snakemake's "
        r"benchmark files (\texttt{data/benchmarks/}): minutes of wall time summed over the "
        rf"stage's jobs (the workflow runs them on all cores, {os.cpu_count()} on the machine that built this, "
        r"so the build takes less), the largest "
        r"job's peak memory, and the disk its outputs fill. Last row: the minutes the "
        r"shipped qemu records took to measure (each run's own duration; boots and image builds not "
        r"included), measured with one QEMU at a time on two host cores, and their size."
    )
    return Table.from_rows(
        [("stage", "l"), ("wall, min", "r"), ("peak memory, MB", "r"), ("disk, MB", "r")],
        rows,
        None,
        caption,
        "tab:resources",
    )


def _and(items: list[str]) -> str:
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def study_label(study: str) -> str:
    """sN -> SN; sNxyz -> SN (xyz): a study's name in the text (other names as they are)."""
    m = re.fullmatch(r"s(\d+)(\w*)", study)
    return f"S{m.group(1)}" + (f" ({m.group(2)})" if m.group(2) else "") if m else study


def power_text(study: dict, testbed: str, runs) -> str:
    from schedlab import stats

    base = study["baseline"]
    settings = config.testbed_settings(study, testbed)
    axes = list(settings["axes"])
    # where the unit is the boot, power is in boots: one value per boot (the mean of its runs)
    per_boot = settings["unit"] == "boot" and "boot" in runs
    ran = settings["runs"] // settings["runs_per_boot"] if per_boot else settings["runs"]
    worst, where = 0, ""
    for m in config.for_testbed(study, testbed)["metrics"]:
        if m["name"] not in runs:
            continue
        for keys, grp in runs[runs["variant"] == base].groupby(axes):
            # NaN where the metric's `when` excludes the point
            vals = (grp.groupby("boot")[m["name"]].mean() if per_boot else grp[m["name"]]).dropna().to_numpy(float)
            if len(vals) < 2:
                continue
            need = stats.runs_needed(vals, detect_pct=DETECT_PCT, confidence=95.0, power=POWER)
            if (need, need.capped) > (worst, getattr(worst, "capped", False)):  # capped: more than max_runs
                worst, where = (
                    need,
                    f"{m['name']} at {', '.join(f'{a}={k}' for a, k in zip(axes, np.atleast_1d(keys)))}",
                )
    if not where:
        return "no baseline variance to estimate power from"
    capped = bool(getattr(worst, "capped", False))
    verdict = "enough" if ran >= worst and not capped else "not enough"
    # runs_needed stops at max_runs: then all we know is "more than that"
    needs = f"more than {int(worst)}" if capped else f"at most {int(worst)}"
    # what the records hold, beside what the design plans: an interim count is said as such
    if per_boot:
        got = runs.groupby(["variant", *axes])["boot"].nunique()
        lo, hi = int(got.min()), int(got.max())
        held = f"{lo}" if lo == hi else f"{lo}--{hi}"
    ran_text = (
        f"the design plans {ran} ({verdict}), and the records hold {held} so far"
        if per_boot and lo < ran
        else f"the study ran {ran}: {verdict}"
    )
    return (
        f"detecting a {DETECT_PCT:g}\\,\\% difference at 95\\,\\% confidence with power {POWER:g} "
        f"needs {needs} {'boots' if per_boot else 'runs'} per point (worst case: {esc(where)}); "
        f"{ran_text}"
    )


# What each testbed can and cannot show: typed once here, printed under the testbed's
# description (no numbers: those come from the records).
TESTBED_NOTES = {
    "qemu": (
        r"The qemu testbed runs the real Xen~4.17 credit1 code (built from Debian's source package with "
        r"each variant's patch series) and real Linux~6.1 guests, but on QEMU's TCG: each vCPU of the "
        r"emulated host is a thread of the development machine, translated, not executed. TCG has no "
        r"caches, TLBs or memory latency of its own and no remote-memory cost between emulated NUMA nodes, "
        r"so the throughput effects of cache warmth or locality (S3, S4) cannot show here, though how often "
        r"Xen migrates vCPUs (S3, counted from Xen's own trace) can. Guest time has one of two sources, "
        r"set per study: by default (multi-threaded TCG) the emulated clock advances with the host's time "
        r"while code runs some 10--100 times slower than on hardware, so guest-measured times move with the "
        r"development machine's load; with QEMU's instruction counting (icount, shift $N$) every guest "
        r"instruction advances one virtual clock by $2^N$\,ns, so guest time no longer depends on the host, "
        r"but all emulated pCPUs share that clock, so a busy pCPU runs slower in guest time while another "
        r"is busy too, a factor \texttt{benchmarks/qemu\_clock.py} measures. Each study's entry in the "
        r"appendix says why its mode suits its comparisons. Either way absolute "
        r"numbers (Mbit/s, lock operations per second, benchmark seconds) are not those of a "
        r"machine; the direction of a difference in what the scheduler decides (BOOSTs, migrations, "
        r"where a vCPU ran) is the testbed's result, and whether any size carries over to hardware is "
        r"untested. Each run records "
        r"the development machine's load average (later runs also the CPU time its own hypervisor stole); "
        r"the ranges are given per study in the appendix."
    ),
    "lab": (
        r"The lab testbed installs the same builds on hosts over SSH, reboots them through GRUB and checks "
        r"what booted before each run."
    ),
}


def statistics_text(tests: set[str]) -> str:
    """The Statistics paragraph; `tests`: compare_table's row tests in the reported tables."""
    text = [
        r"\paragraph{Statistics.} Each cell compares a variant with its baseline at one point: "
        r"Welch's $t$-test on the log ratio of the two means (delta-method standard error, "
        r"Welch--Satterthwaite degrees of freedom), which needs neither equal variances nor a "
        r"symmetric interval"
        + (r"; on the difference of the means where they differ in sign" if "welch" in tests else "")
        + ". "
    ]
    text.append(
        r"On the emulated and real hosts the experimental unit is the boot: runs inside one boot "
        r"share its state and are not independent, so every round boots afresh, a boot's runs of "
        r"a cell are averaged, and tests, intervals and degrees of freedom count boots; a "
        r"comparison with fewer than five boots in a variant is marked untestable. On the "
        r"simulator each run has its own seed and is the unit. Where every run of both variants "
        r"gives the same value (a deterministic point of the model), the difference is exact and "
        r"reported without test or interval. "
    )
    if tests & {"paired-log", "paired"}:
        text.append(
            r"Where a study's variants share a boot (interleaved in it, one fresh boot per round, "
            r"declared in the study file before measuring), the paired $t$-test on the per-boot "
            r"log ratios replaces it (boots $-\,1$ degrees of freedom), and its equivalence test is "
            r"the paired TOST; the caption says so. "
        )
    if "permutation" in tests:
        text.append(
            r"Where a table's caption says so, a permutation test of the difference of the means "
            r"(exact over all partitions where there are few) replaces it, for bimodal runs. "
        )
    text.append(
        r"$p$-values are adjusted with Holm--Bonferroni \citep{holm1979} across all comparisons of a "
        r"table; the caption states the family size. Each difference, in \% of the baseline mean, "
        r"carries the interval dual to its adjusted verdict: computed at the row's Holm level "
        r"$1-\alpha/c$ ($\alpha = 5$\,\%; $\alpha/c$ is the threshold Holm's step-down applies to "
        r"the row's $p$), so it excludes 0 exactly where the row is "
        r"significant. Being an interval of a ratio of means, it is asymmetric and never below "
        r"$-100$\,\%; an unbounded end prints as $\infty$. "
    )
    if "student" in tests:
        text.append(
            r"Rows marked $^{\ddagger}$ keep ministat's unadjusted Student's $t$ interval "
            r"\citep{ministat}, which may disagree with the adjusted star. "
        )
    text.append(
        r"Claims of ``no difference'' rest on a TOST equivalence test \citep{schuirmann1987tost} with "
        r"a margin declared before the comparison (in the study file, or for a comparison outside the "
        r"tables in its notebook, from the seed's own words), its $p$-values Holm-adjusted across the "
        r"table or check like the $t$-tests', never on a non-significant $t$-test. A row is marked "
        r"equivalent only where its TOST holds and the interval the table prints lies inside the "
        r"margin too, so the mark never stands beside an interval that reaches past it. A published "
        r"difference within 0.05 percentage points of an interval's end counts as inside it (the text "
        r"prints differences to 0.1). Means carry 95\,\% $t$-intervals. The "
        r"library reproduces ministat's own numbers exactly \citep{ministat} and adds these tests, the "
        r"adjustment and the intervals. Ratios of mean run totals quoted in the "
        r"text carry a 95\,\% log-ratio $t$ interval (delta method, Welch degrees of freedom), which "
        r"in our simulations covers at least as well as the BCa bootstrap at 20 runs per arm."
    )
    return "".join(text)


def _time_mode_text(options: dict | None, why: str | None = None) -> str:
    """The qemu study's guest-time source (its testbed options; part of the run definition)
    and why it suits the study (the study file's time_mode_why)."""
    if options is None:
        return ""
    from schedlab.machine import MachineOptions

    shift = MachineOptions.of(options).icount_shift
    if shift is None:
        text = " Guest time: multi-threaded TCG (follows the development machine's speed)."
    else:
        text = (
            rf" Guest time: QEMU icount, shift {int(shift)} ({2 ** int(shift)}\,ns per guest instruction, "
            "independent of the development machine's load)."
        )
    return text + (f" Why this mode: {esc(why.strip())}" if why else "")


def _machine_text(m: dict, n_runs: int) -> str:
    """The development machine's load during the runs (qemu), from the records."""
    if not m:
        return ""
    parts = []
    if "load" in m:
        parts.append(f"1-minute load average {m['load'][0]:.1f}--{m['load'][1]:.1f}")
    if "steal_pct" in m:
        lo, hi, n = m["steal_pct"]
        parts.append(
            f"CPU time taken by the machine's own hypervisor (steal) {lo:.1f}--{hi:.1f}\\,\\% "
            f"({n} of {n_runs} runs record it)"
        )
    return " Development machine during the runs: " + "; ".join(parts) + "."


def generate(
    data_dir: Path,
    paper_dir: Path,
    pairs: list[tuple[str, str]],
    studies_dir: Path,
    study_names: list[str],
    base_seed: int,
    measured: list[str] | None = None,
) -> None:
    """pairs: the (study, testbed) results the paper reports; measured: the testbeds
    this build ran (the others' tables are re-derived from shipped raw records)."""
    testbeds = list(dict.fromkeys(tb for _, tb in pairs))
    measured = measured if measured is not None else testbeds
    out = paper_dir / "generated"
    out.mkdir(parents=True, exist_ok=True)
    studies = {s: config.load_study(Path(studies_dir) / f"{s}.yaml") for s in study_names}
    # the testbed's own measurements the text quotes (data/measured: benchmark outputs)
    from schedlab.report.measured import macros as measured_macros
    from schedlab.report.tables import write_macros

    write_macros(out / "measured.tex", "measured", measured_macros(Path(data_dir) / "measured"))
    atomic_write(
        out / "testbeds.tex",
        "% generated: the testbeds and (study, testbed) results this paper reports\n"
        + "".join(f"\\expandafter\\def\\csname slrep@{tb}\\endcsname{{}}\n" for tb in testbeds)
        + "".join(
            f"\\expandafter\\def\\csname slrep@{s}@{tb}\\endcsname{{}}\n\\input{{generated/{s}/{tb}-macros.tex}}\n"
            for s, tb in pairs
        )
        # \sv{reported/qemu}: the studies reported on a testbed, for the text
        + "".join(
            f"\\expandafter\\def\\csname sv@reported/{tb}\\endcsname{{"
            + _and([esc(study_label(s)) for s, t in pairs if t == tb])
            + "}\n"
            for tb in testbeds
        ),
    )

    lines = [r"% generated by schedlab.report.methods from the study files and the records' provenance"]
    body = [r"% generated by schedlab.report.methods: the testbeds in brief and the statistics"]
    hashes, tests_used = [], set()
    for tb in testbeds:
        lines.append(f"\\subsection*{{The {tb} testbed}}")
        body.append(
            f"\\paragraph{{The {tb} testbed}} reports "
            + _and([esc(study_label(s)) for s, t in pairs if t == tb])
            + (
                ", all measured by this build."
                if tb in measured
                else f"; this build re-derived its tables from the raw records shipped in \\texttt{{data/raw/{tb}}}"
                f" (\\texttt{{make paper MEASURE=sim,{tb}}} measures them again)."
            )
            + (" " + TESTBED_NOTES[tb] if tb in TESTBED_NOTES else "")
            + " Its builds, command lines, hosts and hashes are in Appendix~\\ref{app:provenance}."
        )
        described, hosts, commits = {}, set(), set()
        for s in studies:
            if (s, tb) not in pairs:
                continue
            runs = rdata.load_runs(data_dir, tb, s)
            prov = rdata.provenance_summary(data_dir, tb, s, runs)
            for d in prov["testbeds"]:
                described.update(d)
            hosts.update(
                f"{h.get('hostname')} ({h.get('cpu_model')}, {h.get('cpus')} CPUs, Linux {h.get('kernel')})"
                for h in prov["hosts"]
            )
            commits.update(prov["repo_commits"])
        lines.append(
            "Testbed description from the records: "
            + "; ".join(
                f"{esc(str(k))}: \\texttt{{{esc(_short(v))}}}"
                for k, v in sorted(described.items())
                if isinstance(v, (str, int, float))
            )
            + "."
        )
        lines.append(
            f"Hosts: {esc('; '.join(sorted(hosts)))}. {'Repository commit' if len(commits) == 1 else 'Repository commits'}: \\texttt{{{esc(', '.join(sorted(commits)))}}}."
        )
        lines.append(r"\begingroup\sloppy  % long command lines and hashes: no overfull lines")
        lines.append(r"\begin{itemize}")
        for s, st in studies.items():
            if (s, tb) not in pairs:
                continue
            ts = config.testbed_settings(st, tb)
            runs = rdata.load_runs(data_dir, tb, s)
            side = json.loads((out / s / f"{tb}-cells.json").read_text())
            hashes.append((f"{s}-{tb}", side["data_hash"]))
            tests_used.update(c["test"] for c in side["cells"].values() if "test" in c)
            prov = rdata.provenance_summary(data_dir, tb, s, runs)
            seeds = prov["seeds"]
            lines.append(
                f"\\item \\textbf{{{s.upper()}}}, {esc(display_title(st, tb))}: "
                + axes_text(ts["axes"])
                + f". {runs_text(ts['runs'], ts['warmup'], ts)}; "
                f"{prov['n_runs']} measured runs in all, run order seeded and interleaved (plan seed {prov['plan_seed']}); "
                + (
                    "one fresh boot per round with every variant in it, analysed paired by round; "
                    if ts["analysis"] == "paired"
                    else ""
                )
                + f"run seeds derived from the base seed {base_seed} (range {min(seeds)}--{max(seeds)}). "
                f"Variants (Table~\\ref{{tab:variants}}), against \\texttt{{{esc(st['baseline'])}}}: "
                + ", ".join(f"\\texttt{{{esc(n)}}}" for n in st["variants"] if n in ts["variants"])
                + (
                    ""
                    if len(ts["variants"]) == len(st["variants"])
                    else "; not run on this testbed: "
                    + ", ".join(f"\\texttt{{{esc(n)}}}" for n in st["variants"] if n not in ts["variants"])
                )
                + f". Power: {power_text(st, tb, runs)}. Raw data \\texttt{{sha256:{side['data_hash'][:16]}}}."
                + ("" if not prov["booted"] else " Booted, from the records: " + booted_text(prov["booted"]) + ".")
                + _time_mode_text(
                    ts["options"] if tb == "qemu" else None, (st["testbeds"].get(tb) or {}).get("time_mode_why")
                )
                + _machine_text(prov["machine"], prov["n_runs"])
            )
        lines.append(r"\end{itemize}\endgroup")
    body.append(statistics_text(tests_used))
    atomic_write(out / "methods.tex", "\n".join(body) + "\n")
    atomic_write(out / "provenance.tex", "\n".join(lines) + "\n")
    variants_table(studies).write(out / "variants.tex", title="Every study's variants")
    calibrated_table(studies, studies_dir).write(out / "calibrated.tex", title="The simulator's calibrated values")
    all_tbs = list(dict.fromkeys(tb for st in studies.values() for tb in st["testbeds"]))
    rec_table = records_table(data_dir, studies, all_tbs)
    rec_table.write(out / "records.tex", title="Every raw record, used or not")
    hours = sum(float(r[5].lstrip("<")) for r in rec_table.rows() if r and r[0] == "qemu")
    resources_table(data_dir, paper_dir, hours).write(out / "resources.tex", title="What each stage costs")

    h = hashlib.sha256("".join(f"{t} {d}\n" for t, d in sorted(hashes)).encode()).hexdigest()
    atomic_write(
        out / "dataset.tex",
        "% generated\n\\paragraph{Dataset.} The tables of this paper are derived from raw data with checksum\n"
        f"\\begin{{center}}\\small\\texttt{{sha256:{h}}}\\end{{center}}\n"
        # sloppy: a list of unbreakable hashes whose length depends on the tables reported
        "{\\sloppy (the hash of the per-table data hashes: "
        + ", ".join(f"{esc(t)} \\texttt{{{d[:12]}}}" for t, d in sorted(hashes))
        + ").\\par}\n",
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default="data")
    p.add_argument("--paper-dir", default="paper")
    p.add_argument("--studies-dir", default="config/studies")
    p.add_argument("--study", action="append", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument(
        "--pair", action="append", default=[], metavar="STUDY:TESTBED", help="a reported (study, testbed) result"
    )
    p.add_argument(
        "--measured",
        action="append",
        default=None,
        metavar="TESTBED",
        help="a testbed this build measured (others are re-derived from shipped records)",
    )
    a = p.parse_args(argv)
    pairs = [tuple(x.split(":", 1)) for x in a.pair]
    generate(Path(a.data_dir), Path(a.paper_dir), pairs, Path(a.studies_dir), a.study, a.seed, a.measured)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
