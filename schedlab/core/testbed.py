"""The one interface every testbed (sim, qemu, lab) implements.

A testbed turns (study, variant, point, seed) into one run's metrics. It knows
nothing about repetitions, warm-ups or storage: `schedlab.run` does those, so
every testbed gets the same run order, records and provenance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class RunFailed(Exception):
    """A run that did not produce data (timeout, crash, bad output).

    `log` is kept with the failure record; it is never stored as data."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


@dataclass
class RunResult:
    metrics: dict[str, float]  # the study's metrics, by name
    counters: dict[str, Any] = field(default_factory=dict)  # testbed counters (switches, boosts, ...)
    samples: dict[str, list[float]] = field(default_factory=dict)  # per-VM values behind a metric


class Testbed:
    name = "base"

    def describe(self) -> dict[str, Any]:
        """Provenance of the testbed itself (simulator build hash, Xen build, host...)."""
        raise NotImplementedError

    def build_id(self, study: dict, variant: str) -> str:
        """Content hash of what this variant runs on (sim binary, Xen+kernel build).
        Part of the run key: a new build means new runs, old records stay."""
        raise NotImplementedError

    def run_once(self, study: dict, variant: str, point: dict, seed: int) -> RunResult:
        raise NotImplementedError

    def fresh_boot(self, study: dict) -> None:
        """The next run boots its host afresh: a new experimental unit (run-study calls it
        where the study's boot plan starts a boot). Testbeds without boots (the sim) ignore it.
        A run's record says which boot it ran in (schedlab.records.boot_of)."""

    def close(self) -> None:
        """Release what the testbed holds (a host lock, a virtual host); called once
        after the last run of a `schedlab run`, also when it fails."""
