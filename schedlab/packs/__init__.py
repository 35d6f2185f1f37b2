"""Benchmark packs: one module per benchmark tool (sysbench's two tests share one), all of
the shape of `base.Pack`.

    from schedlab import packs
    packs.names()            -> ['forkexec', 'kernbench', ...]
    packs.get('pgbench')     -> the Pack object

Run one alone: schedlab pack run NAME --param k=v --reps N --out DIR (schedlab.packrun, above
the testbeds: a pack knows no target but the protocol of schedlab.targets).
"""

from __future__ import annotations

import importlib

from schedlab.packs.base import Metric, Pack, PackError, PackOutputError, Param  # noqa: F401

_MODULES = ("forkexec", "kernbench", "pbzip2", "pgbench", "sysbench_memory", "sysbench_threads")


def names() -> list[str]:
    return sorted(_MODULES)


def get(name: str) -> Pack:
    if name not in _MODULES:
        raise PackError(f"unknown pack {name!r} (known: {', '.join(names())})")
    return importlib.import_module(f"schedlab.packs.{name}").PACK


def debs(pack_names=None) -> list[str]:
    """Debian packages the given packs (default: all) need on a target."""
    out: set[str] = set()
    for n in pack_names or names():
        out.update(get(n).debs)
    return sorted(out)
