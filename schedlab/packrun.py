"""Run one benchmark pack alone on one target and write its raw records: the `schedlab pack`
command (also `python -m schedlab.packrun`). Above the testbeds: a qemu-native target boots a
kernel (schedlab.testbeds.qemu_native); the packs themselves (schedlab.packs) know no target
but the protocol of schedlab.targets.

    schedlab pack list
    schedlab pack debs [PACK...]
    schedlab pack run PACK [--param KEY=VALUE]... [--reps N] [--warmup N]
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

Records have the format of schedlab.run (schedlab-run/1, validated by
workflow/schemas/record.schema.json, written once by the run stage's one record writer,
schedlab.run.write_record):

    study       pack-<name>
    testbed     "local" for LocalTarget runs, "qemu" on a natively booted qemu
                guest (--target qemu-native:CONFIG), "lab" on an ssh host
    variant     --variant (default "default"; S2 names kernels here)
    point       every resolved parameter, with the sweep parameter's one value
    point_id    <sweep>-<value> (e.g. clients-4), or "default"
    metrics     the pack's metrics; units and directions are in
                provenance.testbed.pack.metrics
    log         the tool's raw output (so a record can be re-parsed)

Folder: OUT/raw/<testbed>/pack-<name>/<run_id>.json. Each round of
repetitions (warm-ups first, recorded with warmup=true) runs every point once
in a seeded random order. An existing record for a run key is reused, not
re-measured. A run whose output does not parse raises PackOutputError and
writes no record; cleanup (server stop, scratch removal) always happens.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

from schedlab import __version__, config, packs, store, targets
from schedlab.builds.kernel import KernelBuildError
from schedlab.core.testbed import RunFailed
from schedlab.host import HostError
from schedlab.packs.base import Context, PackError, PackOutputError, gather_facts
from schedlab.run import _now, derive_seed, host_description, repo_state, write_record
from schedlab.targets import LocalTarget

LOG_LIMIT = 20000


TARGET_SPECS = ("local", "ssh:[USER@]HOST[:PORT]", "qemu-native:CONFIG[:CMDLINE]")


def target_from_name(
    spec: str,
    *,
    identity: str | None = None,
    known_hosts: str | None = None,
    host_key_alias: str | None = None,
    build: bool = False,
    log=None,
):
    """A target from its command-line name:

    local                          this machine (LocalTarget)
    ssh:[USER@]HOST[:PORT]         a machine over ssh (schedlab.host.Host: BatchMode, strict host
                                   keys; identity/known_hosts/host_key_alias as given, else ssh's
                                   defaults); records go to testbed "lab"
    qemu-native:CONFIG[:CMDLINE]   boots the kernel built from config/kernel/CONFIG.config
                                   (schedlab.builds.kernel, cached) natively under QEMU on the native
                                   image (schedlab.builds.native) with CMDLINE appended
                                   (e.g. nopvspin); records go to testbed "qemu". build=True builds
                                   a missing kernel or image first. The caller must close() it
                                   (kills QEMU).

    Targets that hold something (a VM, an ssh master) have close()."""
    if spec == "local":
        return LocalTarget()
    kind, sep, rest = spec.partition(":")
    if kind == "ssh" and sep and rest:
        from schedlab.host import Host
        from schedlab.lab.inventory import check_destination

        user, at, hostport = rest.rpartition("@")
        host, colon, port = hostport.partition(":")
        if not host or (colon and not re.fullmatch(r"[0-9]{1,5}", port)):
            raise ValueError(f"--target {spec!r}: expected ssh:[USER@]HOST[:PORT]")
        user, port = (user if at else "root"), (int(port) if colon else 22)
        try:  # the inventory's rules: no '-option' or shell word can reach ssh
            check_destination(user, host, port, f"--target {spec!r}")
        except config.ConfigError as e:
            raise ValueError(str(e)) from None
        h = Host(
            host,
            user=user,
            port=port,
            identity=identity,
            known_hosts=known_hosts,
            host_key_alias=host_key_alias,
            multiplex=True,
        )
        h.testbed = "lab"
        return h
    if kind == "qemu-native" and sep and rest:
        from schedlab.testbeds.qemu_native import NativeTarget

        kconfig, _, cmdline = rest.partition(":")
        return NativeTarget(kconfig, cmdline, build=build, log=log)
    raise ValueError(f"--target {spec!r}: unknown target (known: {', '.join(TARGET_SPECS)})")


def run_pack(
    pack_name: str,
    params: dict,
    target,
    reps: int,
    warmup: int,
    out_dir,
    seed: int,
    variant: str = "default",
    testbed: str | None = None,
    log=sys.stderr,
) -> list[Path]:
    """Run pack_name with params on target: warmup + reps rounds over the sweep.
    Returns the paths of the records (new and reused), in run order. testbed: the records'
    testbed (default: the target's `testbed` attribute, e.g. "qemu" for a natively booted
    qemu guest, "lab" for an ssh host, else "local")."""
    testbed = testbed or getattr(target, "testbed", "local")
    if reps < 1 or warmup < 0:
        raise PackError(f"--reps {reps} / --warmup {warmup}: need reps >= 1 and warmup >= 0")
    if seed < 0:
        raise PackError(f"--seed {seed}: must be >= 0")
    if not re.fullmatch(r"[A-Za-z0-9_.=-]+", variant):
        raise PackError(f"variant {variant!r}: only letters, digits and _ . = - are allowed")
    pack = packs.get(pack_name)
    missing = pack.missing_tools(target)
    if missing:
        raise PackError(
            f"pack {pack.name}: {', '.join(missing)} not found on target {target.name} "
            f"(Debian packages: {' '.join(pack.debs)})"
        )
    facts = gather_facts(target)
    resolved = pack.resolve(dict(params), facts)
    points = pack.points(resolved)
    study = f"pack-{pack.name}"
    folder = store.raw_dir(Path(out_dir), testbed, study)
    store.sweep_partial(folder)
    build_id = f"{target.name}:kernel-{facts['kernel']}:{facts['machine']}"

    # the plan: rounds (warm-ups first), points shuffled per round
    plan_seed = derive_seed(seed, "plan", testbed, study)
    rng = random.Random(plan_seed)
    rounds = warmup + reps
    plan = []
    for rep in range(rounds):
        order = points[:]
        rng.shuffle(order)
        plan += [(rep, pt) for pt in order]

    metric_names = [m.name for m in pack.metrics]
    entries = []
    for index, (rep, pt) in enumerate(plan):
        pid = pack.point_id(pt)
        definition = {
            "study": study,
            "testbed": testbed,
            "variant": variant,
            "point": pt,
            "metrics": metric_names,
            "pack": pack.name,
            "pack_version": pack.version,
        }
        dhash = config.sha256(definition)
        key = store.run_key_of(dhash, build_id, rep, seed)
        run_id = store.run_id_of(variant, pid, rep, key)
        entries.append(
            dict(
                index=index,
                rep=rep,
                point=pt,
                pid=pid,
                dhash=dhash,
                key=key,
                run_id=run_id,
                path=folder / f"{run_id}.json",
            )
        )

    todo = []
    for e in entries:
        if e["path"].exists():
            problems = store.check_record(e["path"], store.read_record(e["path"]))
            if problems:
                raise store.RecordError(
                    f"{e['path']}: existing record is damaged: {'; '.join(problems)} "
                    "(left untouched; move it aside to re-measure)"
                )
            print(f"[{study}/{testbed}] {e['run_id']}: reusing", file=log, flush=True)
        else:
            todo.append(e)
    if not todo:
        return [e["path"] for e in entries]

    workdir = target.tmpdir()
    ctx = Context(target=target, workdir=workdir, params=resolved, facts=facts, seed=seed)
    try:
        t0 = time.monotonic()
        pack.prepare(ctx)
        print(f"[{study}/{testbed}] prepared on {target.name} in {time.monotonic() - t0:.1f} s", file=log, flush=True)
        described = {
            "name": testbed,
            "target": target.name,
            "facts": facts,
            "pack": {
                **pack.describe(),
                "params": resolved,
                "tool_version": pack.tool_version(target),
                "prepared": {k: v for k, v in ctx.state.items() if isinstance(v, (str, int, float, bool))},
            },
        }
        provenance = {
            **repo_state(),
            "schedlab_version": __version__,
            "testbed": described,
            "build_id": build_id,
            "host": host_description(),
        }
        for e in todo:
            rep, pt = e["rep"], e["point"]
            warm = rep < warmup
            rseed = derive_seed(seed, testbed, study, variant, e["pid"], rep)
            tag = f"[{study}/{testbed}] {variant} {e['pid']} run {rep + 1}/{rounds}" + (" (warm-up)" if warm else "")
            started, t1 = _now(), time.monotonic()
            output = pack.run_once(ctx, pt, rseed, e["run_id"])
            values = pack.check_metrics(pack.parse(output, e["run_id"]), output, e["run_id"])
            rec = {
                "format": store.FORMAT,
                "run_id": e["run_id"],
                "run_key": e["key"],
                "study": study,
                "testbed": testbed,
                "variant": variant,
                "point": pt,
                "point_id": e["pid"],
                "repetition": rep,
                "warmup": warm,
                "seed": rseed,
                "status": "ok",
                "attempt": 1,
                "metrics": values,
                "counters": {},
                "samples": {},
                "log": output[-LOG_LIMIT:],
                "started": started,
                "finished": _now(),
                "duration_s": time.monotonic() - t1,
                "run_order": {
                    "index": e["index"],
                    "plan_size": len(plan),
                    "plan_seed": plan_seed,
                    "executed_as": "pack-runner",
                },
                "definition_hash": e["dhash"],
                "provenance": provenance,
            }
            write_record(folder, rec)  # the run stage's one record writer
            shown = ", ".join(f"{k}={v:.6g}" for k, v in values.items())
            print(f"{tag}: {shown} ({rec['duration_s']:.2f} s)", file=log, flush=True)
    finally:
        try:
            pack.cleanup(ctx)
        finally:
            target.run(["rm", "-rf", "--", workdir], timeout=300, check=False)
    return [e["path"] for e in entries]


def _params(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PackError(f"--param {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="schedlab pack", description=__doc__.split("\n\n")[0])
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
            target = target_from_name(
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
            paths = run_pack(
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
