"""schedlab.stats: ministat-exact comparisons and what ministat does not do.

    from schedlab import stats
    stats.compare(base, variant)            # ministat's numbers + p-value
    stats.compare_table(df, "value", "base", by=["vms"])

Names resolve lazily (PEP 562) so that `schedlab ministat`, which imports the
`ministat` submodule through this package, starts without numpy/scipy/pandas."""

from __future__ import annotations

import importlib

_EXPORTS = {
    "core": [
        "Summary",
        "Comparison",
        "Equivalence",
        "BootstrapResult",
        "RunsCheck",
        "RunsNeeded",
        "read_ministat_file",
        "summarize",
        "compare",
        "tost",
        "tost_paired",
        "icc",
        "holm",
        "runs_needed",
        "enough_runs",
        "bootstrap_ci",
        "bootstrap_ratio_ci",
        "compare_table",
        "t_table_value",
    ],
}
_WHERE = {name: mod for mod, names in _EXPORTS.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
