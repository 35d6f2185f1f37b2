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

# pack name -> (its module, the object there); a module may hold several (sysbench's tests)
_PACKS = {
    "forkexec": ("forkexec", "PACK"),
    "kernbench": ("kernbench", "PACK"),
    "pbzip2": ("pbzip2", "PACK"),
    "pgbench": ("pgbench", "PACK"),
    "sysbench_memory": ("sysbench", "MEMORY"),
    "sysbench_threads": ("sysbench", "THREADS"),
}


def names() -> list[str]:
    return sorted(_PACKS)


def get(name: str) -> Pack:
    if name not in _PACKS:
        raise PackError(f"unknown pack {name!r} (known: {', '.join(names())})")
    module, attr = _PACKS[name]
    return getattr(importlib.import_module(f"schedlab.packs.{module}"), attr)


def debs(pack_names=None) -> list[str]:
    """Debian packages the given packs (default: all) need on a target."""
    out: set[str] = set()
    for n in pack_names or names():
        out.update(get(n).debs)
    return sorted(out)
