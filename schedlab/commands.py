"""Sub-commands of `schedlab` (all but `ministat`, which cli.py dispatches first)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from schedlab import config


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="schedlab", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="run one study point: N repetitions plus the study's warm-ups")
    r.add_argument("study")
    r.add_argument("--testbed", choices=["sim", "qemu", "lab"], default="sim")
    r.add_argument("--variant", required=True)
    r.add_argument("--point", action="append", default=[], metavar="AXIS=VALUE")
    r.add_argument("--reps", type=int, help="measured runs (default: the study's runs for this testbed)")
    r.add_argument("--out", default="data", help="data folder (records go to OUT/raw/TESTBED/STUDY/)")
    r.add_argument("--seed", type=int, help="base seed (default: config/config.yaml)")
    r.add_argument("--manifest", help="also write the point's manifest (used by the Snakemake rules)")
    r.add_argument("--host", help="lab testbed: inventory host or pool to run on")

    rs = sub.add_parser("run-study", help="run a whole study in its interleaved plan order (real hosts)")
    rs.add_argument("study")
    rs.add_argument("--testbed", choices=["sim", "qemu", "lab"], required=True)
    rs.add_argument("--out", default="data")
    rs.add_argument("--seed", type=int)
    rs.add_argument("--manifest", help="write the study manifest (all.json) here")
    rs.add_argument("--host", help="lab testbed: inventory host or pool to run on")

    ds = sub.add_parser("dataset", help="the study manifest (all.json) from raw records already on disk, "
                                        "e.g. the qemu records shipped with the repository; measures nothing")
    ds.add_argument("study")
    ds.add_argument("--testbed", choices=["sim", "qemu", "lab"], required=True)
    ds.add_argument("--out", default="data")
    ds.add_argument("--seed", type=int)
    ds.add_argument("--manifest", required=True)

    pl = sub.add_parser("plan", help="print a study's randomised, interleaved run order")
    pl.add_argument("study")
    pl.add_argument("--testbed", choices=["sim", "qemu", "lab"], default="sim")
    pl.add_argument("--seed", type=int)

    v = sub.add_parser("verify", help="check every raw record (schema, checksum, no duplicates)")
    v.add_argument("data_dir", nargs="?", default="data")

    c = sub.add_parser("validate", help="validate config/config.yaml and the study files")
    c.add_argument("files", nargs="*")

    t = sub.add_parser("trace", help="print the runs, builds and hosts behind one number of the paper")
    t.add_argument("table", help="table id, e.g. s0-sim (see paper/generated/*/ *.cells.json)")
    t.add_argument("cell", nargs="?", help="cell id (as listed without CELL), or ROW,COL")
    t.add_argument("--paper-dir", default="paper")
    t.add_argument("--data-dir", default="data")
    t.add_argument("--json", action="store_true")
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        return globals()[f"cmd_{args.cmd.replace('-', '_')}"](args)
    except config.ConfigError as e:
        print(f"schedlab: configuration error:\n{e}", file=sys.stderr)
        return 2
    except Exception as e:  # one clear line, not a traceback, for the expected failures
        from schedlab.store import RecordError
        from schedlab.testbeds.base import RunFailed
        if isinstance(e, (RecordError, RunFailed, FileNotFoundError, KeyError)):
            print(f"schedlab {args.cmd}: {e}", file=sys.stderr)
            return 1
        raise


def _base_seed(args) -> int:
    return args.seed if args.seed is not None else config.load_config()["seed"]


def cmd_run(args) -> int:
    from schedlab.run import PointRunner
    study = config.load_study(args.study)
    if args.reps is not None and args.reps < 1:
        raise config.ConfigError(f"--reps {args.reps}: the number of measured runs must be at least 1")
    point = config.parse_point_args(study, args.testbed, args.point)
    if args.variant not in study["variants"]:
        raise config.ConfigError(f"{study['_file']}: field variants: unknown variant {args.variant!r} "
                                 f"(known: {', '.join(study['variants'])})")
    options = {"host": args.host} if args.host else {}
    from schedlab import testbeds
    tb = testbeds.get(args.testbed, **options)
    try:
        PointRunner(study, args.testbed, args.variant, point, Path(args.out), _base_seed(args),
                    runs=args.reps, testbed=tb).run(manifest=Path(args.manifest) if args.manifest else None)
    finally:
        tb.close()
    return 0


def cmd_run_study(args) -> int:
    from schedlab import testbeds
    from schedlab.run import gather, run_study
    study = config.load_study(args.study)
    tb = testbeds.get(args.testbed, **({"host": args.host} if args.host else {}))
    points_dir = Path(args.out) / "runs" / args.testbed / study["study"]
    try:
        entries = run_study(study, args.testbed, Path(args.out), _base_seed(args), tb, manifest_dir=points_dir)
    finally:
        tb.close()
    if args.manifest:
        gather([points_dir / v / f"{pid}.json" for v, pid in entries], Path(args.manifest))
    return 0


def cmd_dataset(args) -> int:
    from schedlab.run import dataset
    study = config.load_study(args.study)
    res = dataset(study, args.testbed, Path(args.out), _base_seed(args), Path(args.manifest))
    print(f"{study['study']}/{args.testbed}: {res['runs']} runs at {res['points']} (variant, point)s from the "
          f"records; {len(res['missing'])} incomplete, {res['failed']} failed-run records not used")
    return 0


def cmd_plan(args) -> int:
    from schedlab.run import plan
    study = config.load_study(args.study)
    for e in plan(study, args.testbed, _base_seed(args)):
        print(f"{e['index']:4d}  {e['variant']:<10} {config.point_id(e['point']):<20} "
              f"rep {e['repetition']}{'  warm-up' if e['warmup'] else ''}")
    return 0


def cmd_validate(args) -> int:
    files = args.files or [str(p) for p in sorted(config.STUDIES_DIR.glob("*.yaml"))]
    cfg = config.load_config()
    for f in files:
        config.load_study(f)
    print(f"ok: config/config.yaml and {len(files)} study file(s) ({', '.join(cfg['studies'])})")
    return 0


def cmd_verify(args) -> int:
    from schedlab import store
    problems = store.verify(Path(args.data_dir))
    n = sum(1 for _ in store.iter_records(Path(args.data_dir) / "raw")) if (Path(args.data_dir) / "raw").is_dir() else 0
    for path, ps in sorted(problems.items()):
        for p in ps:
            print(f"{path}: {p}")
    print(f"{n} record(s) checked, {len(problems)} with problems")
    return 1 if problems else 0


def cmd_trace(args) -> int:
    from schedlab.report.trace import trace
    return trace(args.table, args.cell, Path(args.paper_dir), Path(args.data_dir), as_json=args.json)
