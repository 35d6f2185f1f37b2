"""The lab testbed: real Xen hosts in a rack, over ssh, with BMC power control.

    schedlab run config/studies/STUDY.yaml --testbed lab --host virtual ...

`--host` names an inventory host or pool (config/lab.yaml, or
$SCHEDLAB_LAB_INVENTORY). The first host of it that is neither quarantined nor
driven by another process is reserved for the whole job (a lock file), so the
runs of one point job share a boot when they share a build.

One run (schedlab.lab.driver.HostDriver.run): install the variant's build
(content-addressed under /boot/schedlab), one-shot GRUB boot into it, wait for
ssh (power-cycle a host that does not come back), check that what booted is
that build (`xl info`, `uname -r`), run the study's workload, leave the host
booting its default entry. Records are written by schedlab.run as for every
testbed; failures become failure records and retries.

Builds are folders made by schedlab.builds.lab (`python -m schedlab.builds.lab make
--study STUDY`, or the Snakemake rule lab_builds). Workloads are those of the qemu
testbed (schedlab.workloads, driven from dom0 over ssh): `workloads.get(kind)(host,
domains, options, point, seed, booted)`, options = schedlab.workloads.DEFAULTS and
this testbed's, overridden by the study's `testbeds.lab.options`. Tests may inject
their own (`workloads={kind: f(host, build, booted, study, point, seed)}`).
See docs/lab-testbed.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schedlab.config import ROOT, ConfigError
from schedlab.core.testbed import RunFailed, RunResult, Testbed

from .. import workloads as shared_workloads

# an injected workload(host, build, booted_info, study, point, seed) -> RunResult
LabWorkload = Callable[..., RunResult]

DEFAULTS: dict[str, Any] = {
    "scheduler": "credit",  # the studies are about credit1 (Xen >= 4.12 defaults to credit2)
    "reboot": "if-needed",  # or "always": reboot before every run
    **shared_workloads.DEFAULTS,  # what runs in the guests (schedlab/workloads/)
}


class LabTestbed(Testbed):
    name = "lab"

    def __init__(
        self,
        *,
        host: str | None = None,
        inventory: str | Path | None = None,
        builds_dir: str | Path | None = None,
        workloads: dict[str, LabWorkload] | None = None,
        verifier=None,
        log: Callable[[str], None] | None = None,
        **overrides,
    ):
        unknown = set(overrides) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown lab testbed options: {sorted(unknown)}")
        from schedlab.builds.lab import default_builds_dir
        from schedlab.lab.inventory import load_inventory

        self.options = {**DEFAULTS, **overrides}
        self.inventory = load_inventory(inventory)
        self.selector = host
        self.hosts = self.inventory.resolve(host)  # fails early on an unknown host/pool
        self.builds_dir = Path(builds_dir) if builds_dir else default_builds_dir()
        self.workloads = dict(workloads or {})
        self.verifier = verifier
        self.log = log or (lambda msg: None)
        self._driver = None
        self._domains = None  # schedlab.workloads.xl.Domains of the current boot
        self._domains_key = None
        self._reboot_next = False  # fresh_boot: the next run reboots whatever `reboot` says

    # -- options ---------------------------------------------------------------------------
    def config(self, study: dict) -> dict:
        """This testbed's options for a study: DEFAULTS < constructor < testbeds.lab.options
        (and the study's workload.weights, as on the qemu testbed)."""
        cfg = shared_workloads.study_options("lab", self.options, DEFAULTS, study)
        if cfg["reboot"] not in ("if-needed", "always"):
            raise ConfigError(
                f"{study.get('_file', study.get('study'))}: field testbeds.lab.options.reboot: "
                f"{cfg['reboot']!r} (if-needed or always)"
            )
        return cfg

    # -- builds ------------------------------------------------------------------------------
    @staticmethod
    def build_name(study: dict, variant: str) -> str:
        from schedlab.builds.lab import build_name

        try:
            return build_name(study, variant)
        except KeyError:
            raise RunFailed(f"study {study.get('study')!r} has no variant {variant!r}") from None

    def build(self, study: dict, variant: str):
        """The variant's Build: <builds_dir>/<build name>/build.json (schedlab.builds.lab),
        with the variant's Xen boot options and the scheduler added."""
        from schedlab.builds.lab import variant_build

        name = self.build_name(study, variant)
        try:
            return variant_build(self.builds_dir, study, variant, self.config(study)["scheduler"])
        except FileNotFoundError:
            raise RunFailed(
                f"lab build {name} not found ({self.builds_dir / name}/build.json); build it first: "
                f"python -m schedlab.builds.lab make --study {study.get('study')}"
            ) from None

    def _builds(self, study: dict) -> dict[str, Any]:
        out = {}
        for variant in study["variants"]:
            name = self.build_name(study, variant)
            try:
                b = self.build(study, variant)
                meta = json.loads((self.builds_dir / name / "build.json").read_text())
                out[variant] = {
                    "name": name,
                    "build_id": b.build_id,
                    "expect": b.expect,
                    "xen_cmdline": b.xen_cmdline,
                    "dom0_cmdline": b.dom0_cmdline,
                    "sha256": b.sha256,
                    "source": meta.get("source"),
                }
            except RunFailed:
                out[variant] = {"name": name, "build_id": None, "error": "not built"}
            except (OSError, ValueError) as e:
                out[variant] = {"name": name, "build_id": None, "error": f"unreadable build: {type(e).__name__}"}
        return out

    # -- the host --------------------------------------------------------------------------------
    def _reserve(self):
        from schedlab.lab.driver import pick_host

        if self._driver is None:
            self._driver = pick_host(self.inventory, self.selector, log=self.log)
            if self.verifier is not None:
                self._driver.verifier = self.verifier
            self._domains = self._domains_key = None
        return self._driver

    # -- Testbed interface --------------------------------------------------------------------
    def describe(self, study: dict | None = None) -> dict[str, Any]:
        """Provenance: the inventory (file, hash, the selector's host entries without
        secrets) and, for a study, the options, its builds and the host reserved for it
        (reserving it: a run follows)."""
        inv = self.inventory.path
        d = {
            "testbed": "lab",
            "inventory": str(inv.relative_to(ROOT) if inv.is_relative_to(ROOT) else inv),
            "inventory_sha256": hashlib.sha256(inv.read_bytes()).hexdigest(),
            "selector": self.selector,
            "hosts": [h.public() for h in self.hosts],
            "options": dict(self.options),
        }
        if study is not None:
            d["options"] = self.config(study)
            d["builds_dir"] = _cache_rel(self.builds_dir)
            d["builds"] = self._builds(study)
            self._reserve()
        if self._driver is not None:
            d["reserved_host"] = self._driver.spec.name
            d["host"] = self._driver.spec.public()
            if self._driver.booted:
                d["booted"] = {
                    k: self._driver.booted.get(k)
                    for k in ("xen_version", "xen_changeset", "xen_commandline", "xen_scheduler", "release")
                }
        return d

    def build_id(self, study: dict, variant: str) -> str:
        try:
            return self.build(study, variant).build_id
        except RunFailed:
            return f"unbuilt:{self.build_name(study, variant)}"

    def _workload(self, study: dict, point: dict, seed: int, variant: str | None = None):
        """(host, build, booted) -> RunResult for the study's workload kind."""
        kind = (study.get("workload") or {}).get("kind")
        if kind in self.workloads:
            injected = self.workloads[kind]
            return lambda h, b, info: injected(h, b, info, study, point, seed)
        run = shared_workloads.get(kind)  # RunFailed naming the kinds there are
        # the variant's guest settings (lock flavour, guest boot options) as qemu passes them
        opts = {**self.config(study), **(shared_workloads.variant_options(study, variant) if variant else {})}
        driver = self._driver

        def workload(h, b, info):
            from schedlab.workloads.xl import Domains

            key = (id(h), driver.boot_id)
            if self._domains is None or self._domains_key != key:
                self._domains, self._domains_key = Domains(h), key  # a new boot has no guests of ours
            return run(h, self._domains, opts, point, seed, info)

        return workload

    def fresh_boot(self, study: dict) -> None:
        """The next run reboots its host (run_study, where the study's boot plan starts a boot)."""
        self._reboot_next = True

    def run_once(self, study: dict, variant: str, point: dict, seed: int) -> RunResult:
        from schedlab.lab.driver import HostQuarantined

        build = self.build(study, variant)
        opts = self.config(study)
        driver = self._reserve()
        workload = self._workload(study, point, seed, variant)
        reboot = "always" if self._reboot_next else opts["reboot"]
        try:
            res = driver.run(build, workload, reboot=reboot)
            self._reboot_next = False
        except HostQuarantined:
            # out of the pool: the next attempt picks another host of it
            self.close()
            raise
        res.counters["lab_build"] = {
            "name": self.build_name(study, variant),
            "build_id": build.build_id,
            "expect": build.expect,
        }
        return res

    def close(self) -> None:
        if self._driver is not None:
            self._driver.release()
            self._driver = None
        self._domains = self._domains_key = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _cache_rel(p: Path) -> str:
    """$SCHEDLAB_CACHE/... for a folder in the cache (records name no path of this machine)."""
    from schedlab.core.files import cache_relative

    return cache_relative(p) or str(p)
