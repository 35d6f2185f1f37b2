"""python -m schedlab.packs: run one benchmark pack alone.

    python -m schedlab.packs list
    python -m schedlab.packs debs [PACK...]
    python -m schedlab.packs run PACK [--param KEY=VALUE]... [--reps N] [--warmup N]
                                      [--out DIR] [--target TARGET] [--seed N] [--variant NAME]

Targets: local (default); ssh:[USER@]HOST[:PORT] (with --identity, --known-hosts,
--host-key-alias); qemu-native:CONFIG[:CMDLINE] boots the kernel built from
config/kernel/CONFIG.config natively under QEMU on the native image and runs the pack in it
over ssh (e.g. --target qemu-native:pvspin-y or qemu-native:pvspin-y:nopvspin; --build
builds a missing kernel or image first). Records go to OUT/raw/<testbed>/pack-NAME with
testbed local, lab (ssh) or qemu (qemu-native).

Exit status: 0 ok, 2 bad usage or parameter, 3 a benchmark printed output that
does not parse (no record written for it), 1 any other failure (a failed command on
the target, ssh or the VM failing: the message says which).
"""

from __future__ import annotations

import argparse
import sys

from schedlab import config, packs, store, targets
from schedlab.builds.kernel import KernelBuildError
from schedlab.core.testbed import RunFailed
from schedlab.host import HostError
from schedlab.packs import runner
from schedlab.packs import targets as pack_targets
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
    r.add_argument(
        "--out",
        default=str(config.ROOT / "data"),
        help="data directory; records go to OUT/raw/TESTBED/pack-NAME (default: %(default)s)",
    )
    r.add_argument(
        "--target",
        default="local",
        help="where to run: local, ssh:[USER@]HOST[:PORT], qemu-native:CONFIG[:CMDLINE] (default: local)",
    )
    r.add_argument("--identity", help="ssh target: private key file")
    r.add_argument("--known-hosts", help="ssh target: known_hosts file (strict host-key checking)")
    r.add_argument("--host-key-alias", help="ssh target: name of the host key in known_hosts")
    r.add_argument(
        "--build",
        action="store_true",
        help="qemu-native target: build a missing kernel or native image first (root, slow)",
    )
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
            target = pack_targets.target_from_name(
                args.target,
                identity=args.identity,
                known_hosts=args.known_hosts,
                host_key_alias=args.host_key_alias,
                build=args.build,
                log=lambda m: print(m, file=sys.stderr, flush=True),
            )
        except ValueError as e:
            raise PackError(str(e)) from None
        except FileNotFoundError as e:
            print(f"error: {e} (build it, or pass --build)", file=sys.stderr)
            return 1
        try:
            paths = runner.run_pack(
                args.pack,
                _params(args.param),
                target,
                args.reps,
                args.warmup,
                args.out,
                args.seed,
                variant=args.variant,
            )
        finally:
            close = getattr(target, "close", None)
            if close:
                close()
        for p in paths:
            print(p)
        return 0
    except PackOutputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    except (PackError, KernelBuildError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except HostError as e:
        print(f"error: on target {args.target}: {e}", file=sys.stderr)
        return 1
    except RunFailed as e:
        print(f"error: {e}", file=sys.stderr)
        if e.log:
            print(e.log[-3000:], file=sys.stderr)
        return 1
    except (store.RecordError, targets.TargetError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
