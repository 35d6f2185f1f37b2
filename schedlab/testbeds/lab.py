"""The lab testbed: real Xen hosts in a rack, over ssh, with BMC power control.

    schedlab run config/studies/s1.yaml --testbed lab --host virtual ...

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

Status: the lifecycle, power control and fault handling are implemented and
tested against a loopback sshd host and an ipmi_sim BMC (tests/test_lab_*.py).
Lab workloads (what runs inside a booted host for each study) are not written
yet: pass them in `workloads` ({workload kind: function}); without one, a run
fails with a clear message. See docs/lab-testbed.md.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Callable

from schedlab.config import ROOT

from .base import RunFailed, RunResult, Testbed

# workload(host, build, booted_info, study, point, seed) -> RunResult
LabWorkload = Callable[..., RunResult]

DEFAULTS: dict[str, Any] = {
    "scheduler": "credit",        # the studies are about credit1 (Xen >= 4.12 defaults to credit2)
    "reboot": "if-needed",        # or "always": reboot before every run
}


class LabTestbed(Testbed):
    name = "lab"

    def __init__(self, *, host: str | None = None, inventory: str | Path | None = None,
                 builds_dir: str | Path | None = None, workloads: dict[str, LabWorkload] | None = None,
                 verifier=None, log: Callable[[str], None] | None = None, **overrides):
        unknown = set(overrides) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown lab testbed options: {sorted(unknown)}")
        from schedlab.lab.inventory import cache_root, load_inventory
        self.options = {**DEFAULTS, **overrides}
        self.inventory = load_inventory(inventory)
        self.selector = host
        self.hosts = self.inventory.resolve(host)       # fails early on an unknown host/pool
        self.builds_dir = Path(builds_dir or os.environ.get("SCHEDLAB_LAB_BUILDS") or cache_root() / "builds" / "lab")
        self.workloads = dict(workloads or {})
        self.verifier = verifier
        self.log = log or (lambda msg: None)
        self._driver = None

    # -- builds ------------------------------------------------------------------------------
    @staticmethod
    def build_name(study: dict, variant: str) -> str:
        v = study["variants"].get(variant)
        if v is None:
            raise RunFailed(f"study {study.get('study')!r} has no variant {variant!r}")
        return f"xen-{(v.get('xen') or {}).get('patches', 'stock')}_kernel-{(v.get('kernel') or {}).get('config', 'default')}"

    def build(self, study: dict, variant: str):
        """The variant's Build: <builds_dir>/<build name>/build.json (written by the
        build rule), with the variant's Xen boot options and the scheduler added."""
        from schedlab.lab.driver import Build
        folder = self.builds_dir / self.build_name(study, variant)
        if not (folder / "build.json").exists():
            raise RunFailed(f"lab build {folder.name} not found ({folder}/build.json); build it first")
        b = Build.from_dir(folder)
        v = study["variants"][variant]
        boot = (v.get("xen") or {}).get("boot") or {}
        xen = " ".join(p for p in (b.xen_cmdline, f"sched={self.options['scheduler']}",
                                   *(f"{k}={val}" for k, val in sorted(boot.items()))) if p)
        dom0 = " ".join(p for p in (b.dom0_cmdline, (v.get("kernel") or {}).get("cmdline", "")) if p)
        expect = {**b.expect, "xen_scheduler": self.options["scheduler"]}
        return Build(files=b.files, xen_cmdline=xen, dom0_cmdline=dom0, expect=expect)

    # -- Testbed interface --------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        inv = self.inventory.path
        d = {"testbed": "lab",
             "inventory": str(inv.relative_to(ROOT) if inv.is_relative_to(ROOT) else inv),
             "inventory_sha256": hashlib.sha256(inv.read_bytes()).hexdigest(),
             "selector": self.selector,
             "hosts": [h.public() for h in self.hosts],
             "options": dict(self.options)}
        if self._driver is not None:
            d["reserved_host"] = self._driver.spec.name
            if self._driver.booted:
                d["booted"] = {k: self._driver.booted.get(k) for k in
                               ("xen_version", "xen_changeset", "xen_commandline", "xen_scheduler", "release")}
        return d

    def build_id(self, study: dict, variant: str) -> str:
        try:
            return self.build(study, variant).build_id
        except RunFailed:
            return f"unbuilt:{self.build_name(study, variant)}"

    def run_once(self, study: dict, variant: str, point: dict, seed: int) -> RunResult:
        from schedlab.lab.driver import HostQuarantined, pick_host
        kind = (study.get("workload") or {}).get("kind")
        workload = self.workloads.get(kind)
        if workload is None:
            raise RunFailed(f"lab testbed: no workload for kind {kind!r} yet "
                            f"(available: {', '.join(self.workloads) or 'none'})")
        build = self.build(study, variant)
        if self._driver is None:
            self._driver = pick_host(self.inventory, self.selector, log=self.log)
            if self.verifier is not None:
                self._driver.verifier = self.verifier
        driver = self._driver
        try:
            return driver.run(build, lambda h, b, info: workload(h, b, info, study, point, seed),
                              reboot=self.options["reboot"])
        except HostQuarantined:
            # out of the pool: the next attempt picks another host of it
            self.close()
            raise

    def close(self) -> None:
        if self._driver is not None:
            self._driver.release()
            self._driver = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
