"""The sim testbed as every study gets it: a study's simulator model found by its workload kind.

schedlab.testbeds.sim builds a scenario with the builder of a study it knows by name (its
BUILDERS: the studies that first had each workload kind). Until those builders move into the
workload modules, keyed by `workload.kind` (one module holding a kind's Xen run and its
simulator scenario), a study the sim does not know by name runs on the model of the study it
does know whose study file has the same workload kind: a new study scaffolded from an
existing one (`schedlab new-study NAME --like STUDY`) runs on that study's model, with its own
`sim_workload`, variants and points. No study is named here: the kinds come from the study files.
"""

from __future__ import annotations

import functools
from pathlib import Path

from schedlab import config
from schedlab.core.testbed import RunResult

from .sim import BUILDERS, SimTestbed


@functools.cache
def _kind_of_model(studies_dir: str, name: str) -> str | None:
    path = Path(studies_dir) / f"{name}.yaml"
    if not path.is_file():
        return None
    return (config.load_study(path).get("workload") or {}).get("kind")


def model_of(study: dict) -> str | None:
    """The name of the simulator model that runs `study`: its own where the sim knows it, else
    that of a known study (its study file beside this one's) of the same workload kind."""
    sid = study.get("study")
    if sid in BUILDERS:
        return sid
    kind = (study.get("workload") or {}).get("kind")
    folder = Path(study["_file"]).parent if study.get("_file") else Path("config") / "studies"
    if not folder.is_absolute():
        folder = config.ROOT / folder
    for name in BUILDERS:
        if kind is not None and _kind_of_model(str(folder), name) == kind:
            return name
    return None


class KindSimTestbed(SimTestbed):
    """SimTestbed that runs a study on the model of its workload kind (see the module)."""

    def _as_model(self, study: dict) -> dict:
        name = model_of(study)
        return study if name is None or name == study.get("study") else {**study, "study": name}

    def scenarios(self, study: dict, variant: str, point: dict, seed: int) -> list[tuple[str, dict]]:
        return super().scenarios(self._as_model(study), variant, point, seed)

    def run_once(self, study: dict, variant: str, point: dict, seed: int) -> RunResult:
        return super().run_once(self._as_model(study), variant, point, seed)
