"""Sub-commands of `schedlab` (cli.py dispatches `ministat` before this parser, for its start-up time)."""

from __future__ import annotations

import argparse
import errno
import re
import sys
from pathlib import Path

from schedlab import config, testbeds
from schedlab.core.inputs import InputError, one_line


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (argparse prints the whole usage first)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {one_line(' '.join(message.split()))} (see {self.prog} --help)\n")


def _schema_bounds(prop: str) -> tuple[int | None, int | None]:
    """minimum/maximum of study.schema.json's `prop` (a property, else a $defs entry)."""
    schema = config._schema("study")
    s = schema.get("properties", {}).get(prop) or schema.get("$defs", {}).get(prop) or {}
    while "$ref" in s:
        s = schema["$defs"][s["$ref"].rsplit("/", 1)[-1]]
    return s.get("minimum"), s.get("maximum")


def _round(text: str) -> int:
    """An argparse type: a round number (0-based)."""
    if not re.fullmatch(r"[0-9]{1,6}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a round number (0, 1, ...)")
    return int(text)


def _bounded(prop: str):
    """An argparse type: an integer within the study schema's bounds for `prop`."""

    def parse(text: str) -> int:
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer")
        v = int(text)
        lo, hi = _schema_bounds(prop)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(
                f"{v} is out of range {lo}..{hi} (workflow/schemas/study.schema.json: {prop})"
            )
        return v

    return parse


DESCRIPTION = (
    "schedlab: hypervisor scheduler studies, from study files to raw run records to the paper's "
    "tables. Run in a project folder (one with config/studies/); `schedlab COMMAND --help` for a command."
)
# help texts of the options several commands share
TESTBED_HELP = "testbed to run on: sim (the simulator), qemu (Xen under QEMU, root) or lab (hosts over SSH)"
OUT_HELP = "data folder (records go to OUT/raw/TESTBED/STUDY/; default: data)"
SEED_HELP = "base seed every run's seed derives from (default: config/config.yaml's seed)"
STUDY_HELP = "study name (config/studies/NAME.yaml) or study file"
TESTBEDS = testbeds.NAMES  # schedlab.testbeds: the one list of testbeds


def _parser() -> argparse.ArgumentParser:
    from schedlab import __version__

    p = _Parser(prog="schedlab", description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"schedlab {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    r = sub.add_parser("run", help="run one study point: N repetitions plus the study's warm-ups")
    r.add_argument("study", help=STUDY_HELP)
    r.add_argument("--testbed", choices=TESTBEDS, default="sim", help=TESTBED_HELP + " (default: sim)")
    r.add_argument("--variant", required=True, help="the variant to run (one of the study's variants)")
    r.add_argument(
        "--point", action="append", default=[], metavar="AXIS=VALUE", help="the point: one AXIS=VALUE per axis"
    )
    r.add_argument("--reps", type=_bounded("runs"), help="measured runs (default: the study's runs for this testbed)")
    r.add_argument("--out", default="data", help=OUT_HELP)
    r.add_argument("--seed", type=_bounded("seed"), help=SEED_HELP)
    r.add_argument("--manifest", help="also write the point's manifest (used by the Snakemake rules)")
    r.add_argument("--host", help="lab testbed: inventory host or pool to run on")
    r.add_argument(
        "--exploratory",
        action="store_true",
        help="runs that never reach the paper's tables: allowed from a checkout with uncommitted "
        "changes or with another --reps than the registered design's",
    )

    rs = sub.add_parser(
        "run-study",
        help="run a whole study in its randomised, interleaved plan order, on any testbed "
        "(with --manifest, what the notebooks read)",
    )
    rs.add_argument("study", help=STUDY_HELP)
    rs.add_argument("--testbed", choices=TESTBEDS, required=True, help=TESTBED_HELP)
    rs.add_argument("--out", default="data", help=OUT_HELP)
    rs.add_argument("--seed", type=_bounded("seed"), help=SEED_HELP)
    rs.add_argument("--manifest", help="write the study manifest (all.json) here")
    rs.add_argument("--host", help="lab testbed: inventory host or pool to run on")
    rs.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="V",
        help="run only these variants' runs, in the whole plan's order (repeatable; "
        "a later run without it resumes and adds the others)",
    )
    rs.add_argument(
        "--round",
        action="append",
        default=[],
        type=_round,
        metavar="R",
        help="run only round R (0-based; repeatable): on qemu and lab a round is one boot (or one per "
        "variant), so rounds can run as separate jobs side by side",
    )
    rs.add_argument(
        "--exploratory",
        action="store_true",
        help="runs that never reach the paper's tables (allowed from a checkout with uncommitted changes)",
    )

    ds = sub.add_parser(
        "dataset",
        help="the study manifest (all.json) from raw records already on disk, "
        "e.g. the qemu records shipped with the repository; measures nothing",
    )
    ds.add_argument("study", help=STUDY_HELP)
    ds.add_argument("--testbed", choices=TESTBEDS, required=True, help="testbed whose records to read")
    ds.add_argument("--out", default="data", help="data folder holding raw/TESTBED/STUDY/ (default: data)")
    ds.add_argument("--seed", type=_bounded("seed"), help=SEED_HELP + "; it selects the runs' keys")
    ds.add_argument(
        "--manifest", required=True, help="the study manifest to write (e.g. data/runs/qemu/STUDY/all.json)"
    )

    ns = sub.add_parser(
        "new-study",
        help="a new study file scaffolded from an existing one (new id, titles marked TODO, the rest "
        "copied; validated), added to the study list of config/config.yaml",
    )
    ns.add_argument("name", help="the new study's name (config/studies/NAME.yaml)")
    ns.add_argument("--like", required=True, metavar="STUDY", help="the study it starts from")
    ns.add_argument(
        "--root",
        help="the project folder (default: the nearest folder from here up holding config/config.yaml)",
    )
    ns.add_argument("--no-list", action="store_true", help="leave config/config.yaml's study list as it is")

    pl = sub.add_parser("plan", help="print a study's randomised, interleaved run order")
    pl.add_argument("study", help=STUDY_HELP)
    pl.add_argument("--testbed", choices=TESTBEDS, default="sim", help=TESTBED_HELP + " (default: sim)")
    pl.add_argument("--seed", type=_bounded("seed"), help=SEED_HELP)

    v = sub.add_parser("verify", help="check every raw record (schema, checksum, no duplicates)")
    v.add_argument("data_dir", nargs="?", default="data", help="data folder (default: data)")

    c = sub.add_parser("validate", help="validate config/config.yaml, the lab inventory and the study files")
    c.add_argument("files", nargs="*", help="study files (default: config/studies/*.yaml)")
    c.add_argument("--config", default=str(config.ROOT / "config" / "config.yaml"), help="pipeline configuration")
    c.add_argument("--lab", help="lab inventory (default: $SCHEDLAB_LAB_INVENTORY, else config/lab.yaml if present)")

    t = sub.add_parser("trace", help="print the runs, builds and hosts behind one number of the paper")
    t.add_argument("table", help="table id, STUDY-TESTBED (see paper/generated/*/ *.cells.json)")
    t.add_argument("cell", nargs="?", help="cell id (as listed without CELL), or ROW,COL")
    t.add_argument("--paper-dir", default="paper", help="paper folder holding generated/ (default: paper)")
    t.add_argument("--data-dir", default="data", help="data folder holding raw/ (default: data)")
    t.add_argument("--json", action="store_true", help="print JSON instead of text")

    vs = sub.add_parser("validate-sim", help="the simulator against real credit1 (qemu records): docs/validation.md")
    vs.add_argument("--scenario", help="one scenario of config/validation.yaml (default: all)")
    vs.add_argument("--out", default="paper/generated/validation", help="folder for table.csv, table.tex, ...")
    vs.add_argument("--sim", metavar="PATH", help="validate this simulator binary (default: sim/build/credit1sim)")
    vs.add_argument("--mutant", metavar="NAME", help="--sim is the mutant NAME (its --version must say so)")
    vs.add_argument(
        "--mutants", action="store_true", help="build and validate every mutant (Snakemake, cached): the kill matrix"
    )
    vs.add_argument(
        "--derive-band",
        action="store_true",
        help="print the band's margins from real Xen's spread across boots (for config/validation.yaml)",
    )
    vs.add_argument("--jobs", type=int, help="simulator runs (--mutants: Snakemake jobs) at once (default 1; 2)")
    vs.add_argument("--data-dir", default="data", help="data folder whose raw/qemu records are the real side")

    cp = sub.add_parser(
        "compare",
        help="two data folders of one study and testbed (a re-measurement against the shipped records), "
        "cell by cell, with an equivalence verdict",
    )
    cp.add_argument("a", metavar="A", help="the reference data folder (holding raw/TESTBED/STUDY/), e.g. data")
    cp.add_argument("b", metavar="B", help="the data folder compared with it, e.g. a re-measurement")
    cp.add_argument("--study", required=True, help=STUDY_HELP)
    cp.add_argument("--testbed", choices=TESTBEDS, required=True, help="testbed of both folders' records")
    cp.add_argument(
        "--margin",
        type=float,
        metavar="PCT",
        help="equivalence margin in %% of A's mean (default: the study's equivalence_margin_pct, else 5)",
    )
    cp.add_argument(
        "--any-definition",
        action="store_true",
        help="match runs by variant and point whatever study definition they were measured under "
        "(campaigns before a change of the study file); the output says so",
    )

    # listed for --help only: cli.py runs `schedlab pack` and `schedlab ministat` before this
    # parser is built
    sub.add_parser(
        "pack",
        add_help=False,
        help="run one benchmark pack alone on a target (local, ssh, a natively booted kernel) and "
        "write its raw records (`schedlab pack -h`)",
    )
    sub.add_parser(
        "ministat",
        add_help=False,
        help="Debian's ministat(1), byte for byte: compare samples in files "
        "(statistics with confidence intervals; `schedlab ministat -h` for its options)",
    )
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        return globals()[f"cmd_{args.cmd.replace('-', '_')}"](args)
    except (config.ConfigError, InputError) as e:
        lines = str(e).strip().splitlines() or ["?"]
        more = f" (and {len(lines) - 1} more problem(s))" if len(lines) > 1 else ""
        print(f"schedlab {args.cmd}: {one_line(lines[0])}{more}", file=sys.stderr)
        return 2
    except RecursionError:  # a reader without its own limit met a deeply nested input
        print(f"schedlab {args.cmd}: an input is nested too deeply to read", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"schedlab {args.cmd}: out of memory (an input too large?)", file=sys.stderr)
        return 1
    except OSError as e:
        import traceback

        if e.filename is None and traceback.extract_tb(e.__traceback__)[-1].filename == __file__:
            raise  # a print here: standard output (e.g. on a full disk); cli.main says so
        out = getattr(args, "out", None)
        print(f"schedlab {args.cmd}: {one_line(describe_oserror(e, f'--out {out}' if out else None))}", file=sys.stderr)
        return 1
    except Exception as e:  # one clear line, not a traceback, for the expected failures
        from schedlab.core.testbed import RunFailed
        from schedlab.store import RecordError

        if isinstance(e, (RecordError, RunFailed, KeyError)):
            text = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
            print(f"schedlab {args.cmd}: {one_line(text)}", file=sys.stderr)
            return 1
        raise


STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO)


def describe_oserror(e: OSError, what: str | None = None) -> str:
    """One line for an OSError: the file (else `what`, for a storage error without one) and why."""
    where = e.filename if e.filename is not None else (what if e.errno in STORAGE_ERRNOS else None)
    msg = f"{where}: {e.strerror or e}" if where else str(e.strerror or e)
    if e.errno == errno.ENOSPC:
        msg += " (disk full)"
    return " ".join(msg.split())


def _out_dir(out: str) -> Path:
    """--out: a folder, or a place one can be made (not a regular file, not under one)."""
    if not out:
        raise config.ConfigError("--out: empty path (name the data folder, e.g. --out data)")
    p = Path(out)
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                raise config.ConfigError(f"--out {out}: {q} is not a directory")
            break
    return p


def _is_manifest(raw: bytes) -> bool:
    """Whether a file is a manifest schedlab wrote (a study's or a point's)."""
    import json

    try:
        m = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    keys = set(m) if isinstance(m, dict) else set()
    return {"study", "testbed", "points"} <= keys or {"study", "testbed", "point_id", "definition_hash", "runs"} <= keys


def _manifest(args, out: Path) -> Path | None:
    """--manifest: a new path or an earlier manifest, never in a raw data folder."""
    if args.manifest is None:
        return None
    from schedlab.core.files import check_output

    raw = [out / "raw", config.ROOT / "data" / "raw"]
    return check_output(args.manifest, "--manifest", never_under=raw, is_own=_is_manifest)


def _testbed(args):
    """The testbed named by --testbed (with --host, which only the lab has)."""
    from schedlab import testbeds

    host = getattr(args, "host", None)
    if host is not None:
        if args.testbed != "lab":
            raise config.ConfigError(
                f"--host {host}: the {args.testbed} testbed has no hosts (--host is for --testbed lab)"
            )
        if not host:
            raise config.ConfigError("--host: empty name (an inventory host or pool)")
    return testbeds.get(args.testbed, **({"host": host} if host else {}))


def _base_seed(args) -> int:
    return args.seed if args.seed is not None else config.load_config()["seed"]


def cmd_run(args) -> int:
    from schedlab.run import PointRunner

    study = config.load_study(args.study)
    point = config.parse_point_args(study, args.testbed, args.point)
    if args.variant not in study["variants"]:
        raise config.ConfigError(
            f"{study['_file']}: field variants: unknown variant {args.variant!r} "
            f"(known: {', '.join(study['variants'])})"
        )
    out, seed = _out_dir(args.out), _base_seed(args)
    manifest = _manifest(args, out)
    tb = _testbed(args)
    try:
        PointRunner(
            study,
            args.testbed,
            args.variant,
            point,
            out,
            seed,
            runs=args.reps,
            testbed=tb,
            exploratory=args.exploratory,
        ).run(manifest=manifest)
    finally:
        tb.close()
    return 0


def cmd_run_study(args) -> int:
    from schedlab.run import gather, repetitions, run_study

    study = config.load_study(args.study)
    config.testbed_settings(study, args.testbed)
    out, seed = _out_dir(args.out), _base_seed(args)
    manifest = _manifest(args, out)
    tb = _testbed(args)
    points_dir = out / "runs" / args.testbed / study["study"]
    unknown = sorted(set(args.variant) - set(study["variants"]))
    if unknown:
        raise config.ConfigError(
            f"{study['_file']}: field variants: unknown variant {unknown[0]!r} (known: {', '.join(study['variants'])})"
        )
    n_rounds = 1 + max(r["round"] for r in repetitions(config.testbed_settings(study, args.testbed)))
    past = sorted(r for r in args.round if r >= n_rounds)
    if past:
        raise InputError(f"--round {past[0]}: {study['study']} has rounds 0-{n_rounds - 1} on {args.testbed}")
    if args.round:
        # a round's job writes its own point manifests: rounds run side by side
        points_dir = points_dir / "rounds" / "-".join(map(str, sorted(set(args.round))))
    try:
        entries = run_study(
            study,
            args.testbed,
            out,
            seed,
            tb,
            manifest_dir=points_dir,
            variants=set(args.variant) or None,
            exploratory=args.exploratory,
            rounds=set(args.round) or None,
        )
    finally:
        tb.close()
    if manifest:
        gather([points_dir / v / f"{pid}.json" for v, pid in entries], manifest)
    return 0


def cmd_dataset(args) -> int:
    from schedlab.run import dataset

    study = config.load_study(args.study)
    config.testbed_settings(study, args.testbed)
    out = _out_dir(args.out)
    res = dataset(study, args.testbed, out, _base_seed(args), _manifest(args, out))
    print(
        f"{study['study']}/{args.testbed}: {res['runs']} runs at {res['points']} (variant, point)s from the "
        f"records; {len(res['missing'])} incomplete, {res['failed']} failed-run records not used, "
        f"{res['not_used']} record(s) of other designs or exploratory not used (kept; listed in the manifest)"
    )
    return 0


def cmd_new_study(args) -> int:
    from schedlab.newstudy import new_study, project_root

    root = Path(args.root).resolve() if args.root else project_root()
    for path in new_study(args.name, args.like, root, add=not args.no_list):
        print(f"wrote {_rel_to(path, root)}")
    print(
        f"next: edit config/studies/{args.name}.yaml (its TODO titles, then what differs from {args.like}); "
        f"its table comes from notebooks/{args.name}.ipynb if you write one, else notebooks/generic-study.ipynb; "
        f"its section from paper/sections/{args.name}.tex if you write one, else the template "
        "(paper/templates/study-section.tex)"
    )
    return 0


def _rel_to(path: Path, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return str(path)


def cmd_plan(args) -> int:
    from schedlab.plan import plan

    study = config.load_study(args.study)
    print(f"{'#':>4}  {'variant':<10} {'point':<20} {'rep':>3}  warm-up")
    for e in plan(study, args.testbed, _base_seed(args)):
        print(
            f"{e['index']:4d}  {e['variant']:<10} {config.point_id(e['point']):<20} "
            f"{e['repetition']:3d}  {'yes' if e['warmup'] else 'no'}"
        )
    return 0


def cmd_validate(args) -> int:
    import os

    from schedlab.lab.inventory import DEFAULT_PATH, ENV_INVENTORY, load_inventory

    files = args.files or [str(p) for p in sorted(config.STUDIES_DIR.glob("*.yaml"))]
    cfg = config.load_config(args.config)
    lab = args.lab or os.environ.get(ENV_INVENTORY) or (str(DEFAULT_PATH) if DEFAULT_PATH.exists() else None)
    if lab:
        load_inventory(lab)
    for f in files:
        config.load_study(f)
    print(
        f"ok: {_rel(args.config)}{', ' + _rel(lab) if lab else ''} and {len(files)} study file(s) "
        f"({', '.join(cfg['studies'])})"
    )
    return 0


def _rel(path) -> str:
    p = Path(path).resolve()
    return str(p.relative_to(config.ROOT)) if p.is_relative_to(config.ROOT) else str(path)


def cmd_verify(args) -> int:
    from schedlab import store

    problems = store.verify(Path(args.data_dir))
    n = sum(1 for _ in store.iter_records(Path(args.data_dir) / "raw")) if (Path(args.data_dir) / "raw").is_dir() else 0
    for path, ps in sorted(problems.items()):
        for p in ps:
            print(f"{path}: {p}")
    print(f"{n} record(s) checked, {len(problems)} with problems")
    if problems:
        first, ps = min(problems.items())
        print(f"schedlab verify: {len(problems)} file(s) with problems; first: {first}: {ps[0]}", file=sys.stderr)
    return 1 if problems else 0


def cmd_trace(args) -> int:
    from schedlab.report.trace import trace

    if args.cell and "," in args.cell and "/" not in args.cell and not re.fullmatch(r"[0-9]+,[0-9]+", args.cell):
        raise config.ConfigError(f"cell {args.cell!r}: expected a cell id or ROW,COL (two numbers)")
    return trace(args.table, args.cell, Path(args.paper_dir), Path(args.data_dir), as_json=args.json)


def cmd_compare(args) -> int:
    from schedlab.report.compare import main

    return main(Path(args.a), Path(args.b), args.study, args.testbed, args.margin, args.any_definition)


def cmd_validate_sim(args) -> int:
    """The run stage (schedlab.mirror: the simulator's runs as raw records, reused where on
    disk), then the report (schedlab.report.validation: reads them and the qemu records)."""
    from schedlab import mirror
    from schedlab.report import validation

    if args.jobs is not None and args.jobs < 1:
        raise config.ConfigError(f"--jobs {args.jobs}: must be at least 1")
    if args.mutant and not args.sim:
        raise config.ConfigError("--mutant NAME needs --sim PATH (the mutant's binary)")
    if args.derive_band:
        return validation.main_derive_band(data_dir=args.data_dir)
    if args.mutants:
        return _validate_mutants(args.jobs or 2)
    out = _out_dir(args.out)
    cfg = mirror.load(mirror.DEFAULT_PATH)  # read at call time (a test points it elsewhere)
    mirror.check_mutant(cfg, args.sim, args.mutant)
    version = mirror.check_binary(Path(args.sim) if args.sim else None, args.mutant)
    print(f"simulator: {version}", file=sys.stderr)
    runs = mirror.run(cfg, Path(args.data_dir), config.load_config()["seed"], args.scenario, binary=args.sim,
                      jobs=args.jobs or 1, progress=lambda s: print(s, file=sys.stderr, flush=True))  # fmt: skip
    return validation.main(args.scenario, out, data_dir=args.data_dir, runs=runs, mutant=args.mutant)


def _validate_mutants(jobs: int = 2) -> int:
    """`schedlab validate-sim --mutants`: the kill matrix through the pipeline (each mutant's
    runs and report Snakemake jobs, cached like any output): builds what is missing or stale,
    prints the matrix."""
    import subprocess

    import pandas as pd

    from schedlab.report.validation import MODEL, kill_matrix_text

    target = "paper/generated/validation/kill-matrix.csv"
    cmd = ["snakemake", "--workflow-profile", "workflow/profiles/default", "--quiet", "rules", "--cores", str(jobs),
           target]  # fmt: skip
    p = subprocess.run(cmd, cwd=config.ROOT)
    if p.returncode != 0:
        print(f"schedlab validate-sim --mutants: `{' '.join(cmd)}` failed (exit {p.returncode})", file=sys.stderr)
        return 1
    km = pd.read_csv(config.ROOT / target, keep_default_na=False)
    print(kill_matrix_text(km))
    model = km[km["model"] == MODEL].iloc[0]
    print(f"validated: {model['validated']} of {model['of']} scenarios")
    return 0
