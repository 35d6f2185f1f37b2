"""python -m schedlab.packs: run one benchmark pack alone.

    python -m schedlab.packs list
    python -m schedlab.packs debs [PACK...]
    python -m schedlab.packs run PACK [--param KEY=VALUE]... [--reps N] [--warmup N]
                                      [--out DIR] [--target local] [--seed N] [--variant NAME]

Exit status: 0 ok, 2 bad usage or parameter, 3 a benchmark printed output that
does not parse (no record written for it), 1 any other failure.
"""
from __future__ import annotations

import argparse
import sys

from schedlab import config, packs, store, targets
from schedlab.packs import runner
from schedlab.packs.base import PackError, PackOutputError


def _params(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PackError(f"--param {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m schedlab.packs", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the packs, their parameters and metrics")
    d = sub.add_parser("debs", help="Debian packages the packs need on a target")
    d.add_argument("packs", nargs="*")
    r = sub.add_parser("run", help="run one pack and write its raw records")
    r.add_argument("pack")
    r.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    r.add_argument("--reps", type=int, default=5)
    r.add_argument("--warmup", type=int, default=1)
    r.add_argument("--out", default=str(config.ROOT / "data"),
                   help="data directory; records go to OUT/raw/local/pack-NAME (default: %(default)s)")
    r.add_argument("--target", default="local", help="where to run (only 'local' for now)")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--variant", default="default", help="variant name in the records (e.g. the kernel)")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "list":
            for n in packs.names():
                p = packs.get(n)
                print(f"{n}: {p.description}\n  debs: {' '.join(p.debs)}")
                for prm in p.params:
                    d = "(scaled to the target)" if callable(prm.default) else repr(prm.default)
                    print(f"  param {prm.name} [{prm.kind}] default {d}: {prm.doc}")
                for m in p.metrics:
                    print(f"  metric {m.name} [{m.unit}, {m.direction} is better]: {m.description}")
            return 0
        if args.cmd == "debs":
            print(" ".join(packs.debs(args.packs or None)))
            return 0
        try:
            target = targets.get(args.target)
        except ValueError as e:
            raise PackError(str(e)) from None
        paths = runner.run_pack(args.pack, _params(args.param), target, args.reps, args.warmup,
                                      args.out, args.seed, variant=args.variant)
        for p in paths:
            print(p)
        return 0
    except PackOutputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    except PackError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (store.RecordError, targets.TargetError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
