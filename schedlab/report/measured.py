"""Numbers the paper quotes from the qemu benchmarks that measure the testbed itself, read from
their output as committed in data/measured/ (a benchmark's output file is its raw data: the
lines it prints, unchanged). Macros `measured/NAME/...` for the text.

    data/measured/qemu_lock_hazard.out    benchmarks/qemu_lock_hazard.py (docs/emulator-hazard.md)
"""

from __future__ import annotations

import re
import statistics as st
from pathlib import Path

from schedlab.report.tables import count_word

_RUN = re.compile(
    r"^(?P<setting>\S+) boot (?P<boot>\d+) run \d+: (?P<ops>\d+) ops in [\d.]+ s, wait (?P<wait>[\d.]+) s .*?"
    r"runnable (?P<xen>[\d.]+) s"
)
_SUMMARY = re.compile(
    r"^(?P<setting>\S+): (?P<boots>\d+) boots, (?P<runs>\d+) runs: waiting (?P<share>[\d.]+) % .*?"
    r"not explained by Xen (?P<ne>[\d.]+) % \((?P<lo>[\d.]+)-(?P<hi>[\d.]+)\)"
)


def hazard(text: str) -> dict[str, str]:
    """The lock-hazard benchmark's numbers: per setting its boots, the share of the threads'
    time waiting and the share not explained by Xen; for S0's setting (icount5) the part of
    its wait per acquisition that is the one-vCPU floor and the share of the rest below Xen."""
    out: dict[str, str] = {}
    per_op: dict[str, list[tuple[float, float]]] = {}
    for line in text.splitlines():
        if m := _RUN.match(line):
            ops = int(m["ops"])
            per_op.setdefault(m["setting"], []).append((1e6 * float(m["wait"]) / ops, 1e6 * float(m["xen"]) / ops))
        elif m := _SUMMARY.match(line):
            s = m["setting"]
            out[f"{s}/boots"] = count_word(int(m["boots"]))
            out[f"{s}/runs"] = m["runs"]
            out[f"{s}/waiting"] = f"{float(m['share']):.0f}"
            out[f"{s}/not-explained"] = f"{float(m['ne']):.0f}"
            out[f"{s}/not-explained-range"] = f"{float(m['lo']):.0f}--{float(m['hi']):.0f}"
    if "icount5" in per_op and "icount5-1vcpu" in per_op:
        wait = st.mean(w for w, _ in per_op["icount5"])
        xen = st.mean(x for _, x in per_op["icount5"])
        floor = st.mean(w for w, _ in per_op["icount5-1vcpu"])
        excess = max(wait - floor, 0.0)
        out["icount5/wait-us"] = f"{wait:.0f}"
        out["icount5/floor-us"] = f"{floor:.0f}"
        out["icount5/floor-share"] = f"{100 * floor / wait:.0f}"
        out["icount5/xen-bound-share"] = f"{100 * min(xen, excess) / wait:.0f}"
        out["icount5/turn-share"] = f"{100 * (excess - min(xen, excess)) / wait:.0f}"
    return out


def macros(measured_dir: Path) -> dict[str, str]:
    """Every benchmark output in `measured_dir` that this module knows, as macros."""
    from schedlab import config

    # the boots a comparison needs (config.MIN_BOOTS): a benchmark with fewer describes, it tests nothing
    out: dict[str, str] = {"min-boots": count_word(config.MIN_BOOTS)}
    path = Path(measured_dir) / "qemu_lock_hazard.out"
    if path.is_file():
        out.update({f"hazard/{k}": v for k, v in hazard(path.read_text()).items()})
    return out
