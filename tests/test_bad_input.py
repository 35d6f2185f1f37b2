"""Bad input, case by case: a study file, config/config.yaml, the lab inventory, a
command-line argument, a ministat input or a raw record that is wrong gets ONE line on
stderr naming the file (and line) or the field, and a non-zero exit; never a traceback,
never a silent acceptance. Raw data is never rewritten.

Most cases call the CLI's main() in-process: jsonschema and the study files load once,
~50 ms a case instead of ~0.4 s for a process. Cases with how="subprocess" run the
installed `schedlab` like a person would (exit status, stdout on a full disk). A case
with `accept` is a documented acceptance: the reason says why it is not a one-line failure.

Every case ends in one outcome (`classify`): "one-line error" or "accepted" pass; a
traceback, a crash, a hang, a silent acceptance, an unclear error, a refusal of good input or
harm to data fails. The counts are printed at the end of a pytest run (tests/conftest.py), and
by `python tests/bad_input_counts.py` (PYTHONPATH=an older tree counts how it fares there)."""

from __future__ import annotations

import errno
import io
import json
import os
import re
import resource
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from schedlab import cli
from schedlab import run as _run  # noqa: F401  (imported now: its log=sys.stderr defaults must not be a test's closed capture)
from schedlab.stats import ministat

STUDY = (ROOT / "config" / "studies" / "s1.yaml").read_text()
CONFIG = (ROOT / "config" / "config.yaml").read_text()
LAB = """\
version: 1
state_dir: lab
defaults:
  ssh: {user: root, key: {path: /etc/schedlab/id_ed25519}, known_hosts: {cache: lab/known_hosts}}
hosts:
  xen1:
    ssh: {address: 10.0.0.11}
    topology: {sockets: 2, cores_per_socket: 8, threads_per_core: 2, numa_nodes: 2}
    bmc: {address: 10.0.1.11, user: admin, password: {env: XEN1_BMC_PASSWORD}}
    console: {argv: [ipmitool, -I, lanplus, -H, 10.0.1.11, -U, admin, -E, sol, activate], bmc_password: true}
    boot: {dom0_cmdline: "root=/dev/sda1 ro", reboot: [systemctl, reboot]}
    timeouts: {boot_s: 600}
  xen2:
    ssh: {address: xen2.lab.example.org, port: 2222}
    topology: {sockets: 1, cores_per_socket: 4, threads_per_core: 1, numa_nodes: 1}
pools:
  rack: [xen1, xen2]
"""
S1 = str(ROOT / "config" / "studies" / "s1.yaml")
REAL_CONFIG = str(ROOT / "config" / "config.yaml")
REAL_LAB = str(ROOT / "config" / "lab.yaml")
POINT = ["--variant", "bug", "--point", "mode=alone"]
USAGE = (
    "byte-exact Debian ministat: its usage text follows the one-line message "
    "(tests/test_ministat.py compares with /usr/bin/ministat)"
)


@dataclass
class Case:
    id: str
    argv: list  # "{f}" is the case's file, "{tmp}" its folder
    files: dict = field(default_factory=dict)  # name in tmp -> text or bytes
    expect: tuple = ()  # substrings of the one stderr line ("{f}", "{tmp}" as in argv)
    line_has: str | None = None  # the line the message names holds this text
    line: bool = False  # the message names the file's line: "{f}:N:"
    code: int | None = None  # the exit status, when it matters
    accept: str | None = None  # a documented acceptance: why this is not a one-line failure
    how: str = "cli"  # cli (in-process), subprocess, ministat-tty, stub-run
    env: dict = field(default_factory=dict)
    check: Callable | None = None  # extra assertions on (stdout, stderr, tmp)
    harm: bool = False  # `check` guards data (a failure is harm, not an unclear error)
    issue: int | None = None  # the issue that found the defect (its cases are counted apart)
    timeout: int = 60  # seconds before the case counts as a hang


@dataclass(frozen=True)
class Special:
    """A case file that is not text: a FIFO, or a symbolic link to `target` ({tmp}, {root})."""

    kind: str
    target: str = ""


FIFO = Special("fifo")


def sub(text: str, old: str, new: str, count: int = 1) -> str:
    assert old in text, old
    return text.replace(old, new, count)


def edited(edit) -> str:
    data = yaml.safe_load(STUDY)
    edit(data)
    return yaml.safe_dump(data, sort_keys=False)


CASES: list[Case] = []


# --------------------------------------------------------------------------- study files
def study(id, text, *expect, line_has=None, name="s1.yaml", line=True):
    """`schedlab validate FILE` on a changed copy of config/studies/s1.yaml."""
    CASES.append(
        Case(
            f"study-{id}",
            ["validate", "--config", REAL_CONFIG, "--lab", REAL_LAB, "{f}"],
            {name: text},
            ("{f}",) + expect,
            line_has=line_has,
            line=line,
            code=2,
        )
    )


def study_sub(id, old, new, *expect, line_has=None):
    study(id, sub(STUDY, old, new), *expect, line_has=line_has)


# wrong types and bounds
study_sub("runs-negative", "runs: 10", "runs: -3", "field runs", "minimum", line_has="runs:")
study_sub("runs-zero", "runs: 10", "runs: 0", "field runs", line_has="runs:")
study_sub("runs-too-many", "runs: 10", "runs: 1001", "field runs", "maximum", line_has="runs:")
study_sub("runs-huge", "runs: 10", "runs: 1000000000000000000000000000000", "field runs", line_has="runs:")
study_sub("runs-string", "runs: 10", "runs: ten", "field runs", "not of type 'integer'", line_has="runs:")
study_sub("runs-quoted", "runs: 10", "runs: '10'", "field runs", line_has="runs:")
study_sub("runs-float", "runs: 10", "runs: 2.5", "field runs", line_has="runs:")
study_sub("runs-bool", "runs: 10", "runs: true", "field runs", line_has="runs:")
study_sub("runs-null", "runs: 10", "runs:", "field runs", line_has="runs:")
study_sub("runs-list", "runs: 10", "runs: [10]", "field runs", line_has="runs:")
study_sub("runs-exponent", "runs: 10", "runs: 1e3", "field runs", line_has="runs:")
study_sub("warmup-negative", "warmup: 1\n", "warmup: -1\n", "field warmup", line_has="warmup:")
study_sub("warmup-too-many", "warmup: 1\n", "warmup: 101\n", "field warmup", line_has="warmup:")
study_sub("retries-negative", "warmup: 1\n", "warmup: 1\nretries: -1\n", "field retries", line_has="retries:")
study_sub("retries-too-many", "warmup: 1\n", "warmup: 1\nretries: 11\n", "field retries", line_has="retries:")
study_sub("retries-string", "warmup: 1\n", "warmup: 1\nretries: many\n", "field retries", line_has="retries:")
study_sub("margin-zero", "warmup: 1\n", "warmup: 1\nequivalence_margin_pct: 0\n", "field equivalence_margin_pct")
study_sub("margin-too-big", "warmup: 1\n", "warmup: 1\nequivalence_margin_pct: 60\n", "field equivalence_margin_pct")
study_sub("margin-string", "warmup: 1\n", "warmup: 1\nequivalence_margin_pct: 5%\n", "field equivalence_margin_pct")
study_sub("title-empty", 'title: "Mistaken BOOST on wake"', 'title: ""', "field title", line_has="title:")
study_sub("title-number", 'title: "Mistaken BOOST on wake"', "title: 5", "field title", line_has="title:")
study_sub("seed-doc-number", "seed_doc: 001_2b61b981043e920c.txt", "seed_doc: 7", "field seed_doc")
study_sub("study-mismatch", "study: s1", "study: s9", "field study", "s1.yaml", line_has="study:")
study_sub("study-uppercase", "study: s1", "study: S1", "field study", "not allowed", line_has="study:")
study("workload-string", edited(lambda d: d.update(workload="netperf")), "field workload", "not of type 'object'")
study("sim-workload-list", edited(lambda d: d.update(sim_workload=[])), "field sim_workload", "not of type 'object'")
study("published-number", edited(lambda d: d.update(published=1)), "field published", "not of type 'object'")
# unknown and missing fields
study_sub("unknown-top-field", "runs: 10", "rnus: 10\nruns: 10", "field rnus", "unknown field", line_has="rnus:")
study_sub(
    "unknown-variant-field",
    'bug:   {label: "Xen',
    'bug:   {colour: red, label: "Xen',
    "field variants.bug.colour",
    "unknown field",
    line_has="colour",
)
study_sub(
    "unknown-metric-field", "better: lower}", "better: lower, higher: no}", "field metrics.1.higher", line_has="higher"
)
study_sub("unknown-testbed", "  lab: {}", "  lab: {}\n  vmware: {}", "field testbeds.vmware", line_has="vmware")
study_sub(
    "unknown-testbed-field", "qemu: {runs: 6,", "qemu: {smp: 3, runs: 6,", "field testbeds.qemu.smp", line_has="smp"
)
study_sub(
    "unknown-xen-field",
    "xen: {patches: boost-bug}",
    "xen: {patches: boost-bug, version: 4.6}",
    "field variants.bug.xen.version",
    line_has="version: 4.6",
)
for req in ("study", "title", "metrics", "axes", "baseline", "variants", "runs", "warmup", "testbeds"):
    study(f"missing-{req}", edited(lambda d, r=req: d.pop(r)), "field (top level)", f"'{req}' is a required property")
study("missing-metric-name", edited(lambda d: d["metrics"][0].pop("name")), "field metrics.0", "'name'")
study("missing-metric-better", edited(lambda d: d["metrics"][1].pop("better")), "field metrics.1", "'better'")
study("missing-variant-label", edited(lambda d: d["variants"]["bug"].pop("label")), "field variants.bug", "'label'")
# metrics
study_sub("better-more", "better: higher}", "better: more}", "field metrics.0.better", line_has="better: more")
study_sub("metric-uppercase", "name: throughput_mbps", "name: Throughput", "field metrics.0.name", "not allowed")
study_sub("metric-shell", "name: throughput_mbps", 'name: "tput;reboot"', "field metrics.0.name", "not allowed")
study("metrics-empty", edited(lambda d: d.update(metrics=[])), "field metrics")
study("metrics-string", edited(lambda d: d.update(metrics="throughput")), "field metrics")
study("metric-when-empty", edited(lambda d: d["metrics"][0].update(when={})), "field metrics.0.when")
study(
    "metric-when-unknown-axis",
    edited(lambda d: d["metrics"][0].update(when={"bench": "pgbench"})),
    "field metrics.0.when.bench",
    "unknown axis",
)
study(
    "metric-when-unknown-value",
    edited(lambda d: d["metrics"][0].update(when={"mode": "sometimes"})),
    "field metrics.0.when.mode",
    "'sometimes' is not a value of axis mode",
)
study(
    "metric-when-list-empty", edited(lambda d: d["metrics"][0].update(when={"mode": []})), "field metrics.0.when.mode"
)
study(
    "metric-testbeds-unknown",
    edited(lambda d: d["metrics"][0].update(testbeds=["vmware"])),
    "field metrics.0.testbeds.0",
)
study("metric-testbeds-empty", edited(lambda d: d["metrics"][0].update(testbeds=[])), "field metrics.0.testbeds")
study(
    "metric-testbed-not-in-study",
    edited(lambda d: (d["metrics"][0].update(testbeds=["lab"]), d["testbeds"].pop("lab"))),
    "field metrics.0.testbeds.0",
    "testbed 'lab' is not one of the study's",
)
# axes
study_sub("axes-empty", "axes:\n  mode: [alone, corun]", "axes: {}", "field axes", line_has="axes:")
study_sub("axis-no-values", "mode: [alone, corun]", "mode: []", "field axes.mode", line_has="mode: []")
study_sub("axis-repeated-value", "mode: [alone, corun]", "mode: [alone, alone]", "field axes.mode", "unique")
study_sub("axis-scalar", "mode: [alone, corun]", "mode: alone", "field axes.mode", line_has="mode: alone")
study_sub("axis-value-space", "mode: [alone, corun]", 'mode: [alone, "co run"]', "field axes.mode.1", "not allowed")
study_sub("axis-value-shell", "mode: [alone, corun]", 'mode: [alone, "$(reboot)"]', "field axes.mode.1", "not allowed")
study_sub("axis-value-newline", "mode: [alone, corun]", 'mode: [alone, "corun\\n"]', "field axes.mode.1", "not allowed")
study_sub("axis-value-null", "mode: [alone, corun]", "mode: [alone, null]", "field axes.mode.1")
study_sub("axis-value-object", "mode: [alone, corun]", "mode: [alone, {a: 1}]", "field axes.mode.1")
study_sub("axis-value-too-long", "mode: [alone, corun]", f"mode: [alone, {'x' * 40}]", "field axes.mode.1")
study_sub("axis-value-nan", "mode: [alone, corun]", "mode: [alone, .nan]", "not a finite number", line_has="mode:")
study_sub("axis-value-inf", "mode: [alone, corun]", "mode: [alone, .inf]", "not a finite number", line_has="mode:")
study_sub("axis-value-minus-inf", "mode: [alone, corun]", "mode: [-.Inf, alone]", "not a finite number")
study_sub("axis-value-overflow", "mode: [alone, corun]", "mode: [alone, 1.0e+999]", "not a finite number")
study_sub("axis-name-uppercase", "mode: [alone, corun]", "Mode: [alone, corun]", "field axes", "not allowed")
study_sub("axis-name-int", "mode: [alone, corun]", "1: [alone, corun]", "field axes")
study_sub(
    "testbed-axis-unknown",
    "  sim: {}",
    "  sim: {axes: {bogus: [1]}}",
    "field testbeds.sim.axes.bogus",
    "unknown axis",
    line_has="bogus",
)
study_sub("testbed-axis-empty", "  sim: {}", "  sim: {axes: {mode: []}}", "field testbeds.sim.axes.mode")
# baseline and variants
study_sub(
    "baseline-unknown",
    "baseline: fixed",
    "baseline: nope",
    "field baseline",
    "unknown variant 'nope'",
    line_has="baseline:",
)
study_sub("baseline-uppercase", "baseline: fixed", "baseline: Fixed", "field baseline", line_has="baseline:")
study_sub(
    "baseline-newline", "baseline: fixed", 'baseline: "fixed\\n"', "field baseline", "not allowed", line_has="baseline:"
)
study_sub("baseline-list", "baseline: fixed", "baseline: [fixed]", "field baseline", line_has="baseline:")
study("one-variant", edited(lambda d: d["variants"].pop("bug")), "field variants")
study("variants-list", edited(lambda d: d.update(variants=["fixed", "bug"])), "field variants")
study_sub(
    "variant-baseline-unknown",
    'bug:   {label: "Xen',
    'bug:   {baseline: nope, label: "Xen',
    "field variants.bug.baseline",
    "unknown variant 'nope'",
    line_has="baseline: nope",
)
study_sub("variant-name-shell", "  bug:   {label", '  "bug;rm -rf ~":   {label', "field variants", "not allowed")
study_sub("variant-name-subst", "  bug:   {label", '  "$(reboot)":   {label', "field variants", "not allowed")
study_sub("variant-name-newline", "  bug:   {label", '  "bug\\n":   {label', "field variants", "not allowed")
study_sub("variant-name-space", "  bug:   {label", '  "a b":   {label', "field variants", "not allowed")
study_sub("variant-label-number", 'label: "Xen 4.2-4.6 wake path (bug)"', "label: 46", "field variants.bug.label")
study_sub("patches-space", "patches: boost-bug", 'patches: "boost bug"', "field variants.bug.xen.patches")
study_sub("patches-uppercase", "patches: boost-bug", "patches: Boost", "field variants.bug.xen.patches")
study_sub(
    "boot-option-shell",
    "xen: {patches: boost-bug}",
    'xen: {patches: boost-bug, boot: {sched: "credit; reboot"}}',
    "field variants.bug.xen.boot.sched",
    "not allowed",
)
study_sub(
    "boot-option-name",
    "xen: {patches: boost-bug}",
    "xen: {patches: boost-bug, boot: {Sched: credit}}",
    "field variants.bug.xen.boot",
)
study_sub(
    "boot-option-list",
    "xen: {patches: boost-bug}",
    "xen: {patches: boost-bug, boot: {sched: [a]}}",
    "field variants.bug.xen.boot.sched",
    "not of type 'integer' or 'string'",
)
study_sub(
    "kernel-cmdline-shell",
    "xen: {patches: boost-bug}",
    'xen: {patches: boost-bug}, kernel: {cmdline: "a `id`"}',
    "field variants.bug.kernel.cmdline",
    "not allowed",
)
study_sub(
    "guest-placement",
    "xen: {patches: boost-bug}",
    "xen: {patches: boost-bug}, guest: {placement: everywhere}",
    "field variants.bug.guest.placement",
)
study_sub(
    "guest-lock",
    "xen: {patches: boost-bug}",
    "xen: {patches: boost-bug}, guest: {lock: Spin}",
    "field variants.bug.guest.lock",
)
study_sub(
    "guest-boot-pipe",
    "xen: {patches: boost-bug}",
    'xen: {patches: boost-bug}, guest: {boot: "a|b"}',
    "field variants.bug.guest.boot",
)
study_sub("variant-sim-string", 'sim: {version: "4.6"}', "sim: old", "field variants.bug.sim")
# per-testbed blocks
study("testbeds-empty", edited(lambda d: d.update(testbeds={})), "field testbeds", "should be non-empty")
study_sub("testbed-runs-zero", "qemu: {runs: 6,", "qemu: {runs: 0,", "field testbeds.qemu.runs", line_has="runs: 0")
study_sub(
    "testbed-warmup-negative", "qemu: {runs: 6, warmup: 1,", "qemu: {runs: 6, warmup: -1,", "field testbeds.qemu.warmup"
)
study_sub("testbed-order", "qemu: {runs: 6,", "qemu: {order: random, runs: 6,", "field testbeds.qemu.order")
study_sub("testbed-timeout-zero", "qemu: {runs: 6,", "qemu: {timeout_s: 0, runs: 6,", "field testbeds.qemu.timeout_s")
study_sub(
    "testbed-timeout-negative", "qemu: {runs: 6,", "qemu: {timeout_s: -5, runs: 6,", "field testbeds.qemu.timeout_s"
)
study_sub("testbed-timeout-inf", "qemu: {runs: 6,", "qemu: {timeout_s: .inf, runs: 6,", "not a finite number")
study_sub("testbed-retries", "qemu: {runs: 6,", "qemu: {retries: 99, runs: 6,", "field testbeds.qemu.retries")
# the experimental unit, the boot plan and the claim (registered with the design)
study_sub("testbed-unit-unknown", "unit: boot, boot_plan", "unit: vm, boot_plan", "field testbeds.qemu.unit")
study_sub("testbed-unit-boot-on-sim", "sim: {}", "sim: {unit: boot}", "field testbeds.sim.unit", "the sim has no boots")
study_sub("testbed-boot-plan-unknown", "boot_plan: round", "boot_plan: never", "field testbeds.qemu.boot_plan")
study_sub("testbed-runs-per-boot-zero", "runs_per_boot: 1", "runs_per_boot: 0", "field testbeds.qemu.runs_per_boot")
study_sub(
    "testbed-boot-plan-with-run-unit",
    "unit: boot, boot_plan: round",
    "unit: run, boot_plan: round",
    "field testbeds.qemu.boot_plan",
    "applies where the unit is the boot",
)
study_sub(
    "testbed-paired-across-builds",
    "unit: boot, boot_plan: round,",
    "unit: boot, boot_plan: round, analysis: paired,",
    "field testbeds.qemu.analysis",
    "share a boot",
)
study_sub(
    "claim-unknown-variant", 'variant: "bug", metrics', 'variant: "nosuch", metrics', "field claim.parts.0.variant"
)
study_sub(
    "claim-unknown-metric", '"throughput_mbps", "latency_us"], direction', '"tput"], direction', "field claim.parts.0"
)
study_sub("claim-direction-unknown", 'direction: "worse"', 'direction: "sideways"', "field claim.parts.0.direction")
study_sub(
    "claim-equivalent-without-margin",
    'direction: "worse"',
    'direction: "equivalent"',
    "field claim.parts.0",
    "needs equivalent_within_pct",
)
study_sub("testbed-option-name", "options: {smp: 3,", "options: {Smp: 3,", "field testbeds.qemu.options")
study_sub("testbed-option-null", "options: {smp: 3,", "options: {smp: null,", "field testbeds.qemu.options.smp")
study_sub(
    "testbed-options-list",
    "options: {smp: 3, xen_build: source, icount_shift: 5, sched_trace: true, trace_pages: 1024,\n"
    "                   stream_window: 4K}}",
    "options: [smp]}",
    "field testbeds.qemu.options",
)
study_sub("testbed-block-list", "  lab: {}", "  lab: []", "field testbeds.lab")
# duplicate keys: PyYAML's last one used to win silently
study_sub("dup-runs", "runs: 10", "runs: 10\nruns: 3", "duplicate key 'runs'", "first on line", line_has="runs: 3")
study_sub(
    "dup-baseline",
    "baseline: fixed",
    "baseline: fixed\nbaseline: bug",
    "duplicate key 'baseline'",
    line_has="baseline: bug",
)
study_sub(
    "dup-variant",
    "  bug:   {label",
    '  fixed: {label: "again"}\n  bug:   {label',
    "duplicate key 'fixed'",
    line_has="again",
)
study_sub("dup-label-flow", 'bug:   {label: "Xen', 'bug:   {label: x, label: "Xen', "duplicate key 'label'")
study_sub(
    "dup-axis",
    "mode: [alone, corun]",
    "mode: [alone, corun]\n  mode: [corun]",
    "duplicate key 'mode'",
    line_has="mode: [corun]",
)
study_sub("dup-testbed", "  lab: {}", "  lab: {}\n  sim: {runs: 1}", "duplicate key 'sim'", line_has="sim: {runs: 1}")
study_sub(
    "dup-deep",
    "    link_mbps: 1000",
    "    link_mbps: 1000\n    link_mbps: 10",
    "duplicate key 'link_mbps'",
    line_has="link_mbps: 10",
)
study_sub("dup-metric-field", "better: lower}", "better: lower, better: higher}", "duplicate key 'better'")
study_sub(
    "dup-workload",
    "workload:\n  kind: netperf-pair",
    "workload:\n  kind: netperf-pair\n  kind: other",
    "duplicate key 'kind'",
    line_has="kind: other",
)
study_sub(
    "dup-int-key",
    "  throughput_mbps: {bug: {alone: 941, corun: 32}}",
    "  throughput_mbps: {bug: {alone: 941, corun: 32, alone: 1}}",
    "duplicate key 'alone'",
)
# encodings and bytes
study(
    "latin1-title",
    sub(STUDY, 'title: "Mistaken BOOST', 'title: "Mistaken BOOST caf\u00e9').encode("latin-1"),
    "not UTF-8 text",
    line_has="title:",
)
study("invalid-byte-comment", STUDY.encode().replace(b"# S1.", b"# S1. \xff\xfe", 1), "not UTF-8 text", "0xff")
study("utf16", STUDY.encode("utf-16"), "not UTF-8 text")
study(
    "truncated-utf8", STUDY.encode().replace(b"runs: 10", b"runs: 10 # \xe2\x82", 1), "not UTF-8 text", line_has="runs:"
)
study("nul-byte", STUDY.replace("runs: 10", "runs: 10\x00"), "not valid YAML", "U+0000", line_has="runs:")
study("bell-char", STUDY.replace("warmup: 1", "warmup: 1\x07"), "not valid YAML", "U+0007", line_has="warmup:")
study("empty-file", "", "empty study file", line=False)
study("only-comments", "# nothing here\n# at all\n", "empty study file", line=False)
study("only-whitespace", "\n\n   \n", "empty study file", line=False)
# YAML syntax
study_sub("unclosed-bracket", "mode: [alone, corun]", "mode: [alone, corun", "not valid YAML")
study_sub("unclosed-brace", "  sim: {}", "  sim: {", "not valid YAML")
study_sub("unclosed-quote", 'title: "Mistaken BOOST on wake"', 'title: "Mistaken BOOST on wake', "not valid YAML")
study_sub("bad-indent", "runs: 10\nwarmup: 1", "runs: 10\n  warmup: 1", "not valid YAML")
study_sub("tab-indent", "  sim: {}", "\tsim: {}", "not valid YAML")
study_sub("two-documents", "runs: 10", "runs: 10\n---\nruns: 3", "not valid YAML", "single document")
study_sub("undefined-alias", "runs: 10", "runs: *nope", "not valid YAML", "nope", line_has="runs:")
study_sub("colon-in-key", "runs: 10", "runs: 10: 3", "not valid YAML", line_has="runs:")
study_sub("python-tag", "runs: 10", "runs: !!python/object:os.system 10", "not valid YAML", line_has="runs:")
study_sub("unhashable-key", "runs: 10", "? [a, b]\n: 1\nruns: 10", "not valid YAML")
study("top-level-list", "- study: s1\n- runs: 10\n", "field (top level)", "not of type 'object'")
study("top-level-scalar", "s1\n", "field (top level)", "not of type 'object'")
study("nested-too-deep", "study: s1\nworkload: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply", line=False)
# data a run definition cannot hold (it is hashed as JSON)
study_sub(
    "date-in-workload",
    "  kind: netperf-pair",
    "  kind: netperf-pair\n  since: 2024-01-01",
    "field workload.since",
    "a date value",
    line_has="since:",
)
study_sub(
    "binary-in-workload",
    "  kind: netperf-pair",
    "  kind: netperf-pair\n  blob: !!binary aGk=",
    "field workload.blob",
    "a bytes value",
    line_has="blob:",
)
study_sub(
    "set-in-workload",
    "  kind: netperf-pair",
    "  kind: netperf-pair\n  hosts: !!set {a, b}",
    "field workload.hosts",
    "not JSON data",
    line_has="hosts:",
)
study_sub(
    "mixed-keys-in-workload",
    "  kind: netperf-pair",
    "  kind: netperf-pair\n  1: one",
    "field workload",
    "keys of mixed types",
    line_has="kind:",
)
# the study file named on the command line of other commands
CASES.append(
    Case(
        "study-run-dup-key",
        ["run", "{f}", *POINT, "--out", "{tmp}/data"],
        {"s1.yaml": sub(STUDY, "runs: 10", "runs: 10\nruns: 3")},
        ("{f}:", "duplicate key 'runs'"),
        code=2,
        check=lambda out, err, tmp: not (tmp / "data").exists(),
    )
)
CASES.append(
    Case(
        "study-plan-bad-runs",
        ["plan", "{f}", "--seed", "1"],
        {"s1.yaml": sub(STUDY, "runs: 10", "runs: -1")},
        ("{f}:", "field runs"),
        code=2,
    )
)
CASES.append(
    Case(
        "study-plan-non-utf8",
        ["plan", "{f}", "--seed", "1"],
        {"s1.yaml": STUDY.encode().replace(b"fixed)", b"fixed\xc0)", 1)},
        ("{f}:", "not UTF-8 text"),
        code=2,
    )
)
CASES.append(
    Case(
        "study-renamed",
        ["validate", "--config", REAL_CONFIG, "--lab", REAL_LAB, "{f}"],
        {"other.yaml": STUDY},
        ("{f}:", "field study", "other.yaml"),
        code=2,
    )
)
CASES.append(
    Case(
        "study-directory",
        ["validate", "--config", REAL_CONFIG, "--lab", REAL_LAB, "{tmp}/d.yaml"],
        {"d.yaml/x": "x"},
        ("{tmp}/d.yaml", "cannot read"),
        code=2,
    )
)


# --------------------------------------------------------------------------- config.yaml
def cfg(id, text, *expect, line_has=None, line=True):
    CASES.append(
        Case(
            f"config-{id}",
            ["validate", "--config", "{f}", "--lab", REAL_LAB, S1],
            {"config.yaml": text},
            ("{f}",) + expect,
            line_has=line_has,
            line=line,
            code=2,
        )
    )


def cfg_sub(id, old, new, *expect, line_has=None):
    cfg(id, sub(CONFIG, old, new), *expect, line_has=line_has)


cfg_sub("testbed-unknown", "testbed: sim", "testbed: vmware", "field testbed", line_has="testbed:")
cfg_sub("testbed-list", "testbed: sim", "testbed: [sim]", "field testbed", line_has="testbed:")
for key in ("testbed", "studies", "seed"):
    cfg(
        f"missing-{key}",
        yaml.safe_dump({k: v for k, v in yaml.safe_load(CONFIG).items() if k != key}),
        "field (top level)",
        f"'{key}' is a required property",
    )
cfg_sub("seed-negative", "seed: 20261121", "seed: -1", "field seed", line_has="seed:")
cfg_sub("seed-too-big", "seed: 20261121", "seed: 4294967296", "field seed", line_has="seed:")
cfg_sub("seed-string", "seed: 20261121", "seed: abc", "field seed", line_has="seed:")
cfg_sub("seed-float", "seed: 20261121", "seed: 1.5", "field seed", line_has="seed:")
cfg_sub("seed-nan", "seed: 20261121", "seed: .nan", "not a finite number", line_has="seed:")
cfg_sub("studies-empty", "studies: [s0, s1, s2, s2native, s3, s4]", "studies: []", "field studies")
cfg_sub("studies-repeated", "studies: [s0, s1,", "studies: [s0, s0, s1,", "field studies")
cfg_sub(
    "studies-unknown", "studies: [s0,", "studies: [nosuch, s0,", "field studies.0", "no study file", line_has="studies:"
)
cfg_sub("studies-uppercase", "studies: [s0,", "studies: [S0,", "field studies.0")
cfg_sub("studies-path", "studies: [s0,", 'studies: ["../config", s0,', "field studies.0", "not allowed")
cfg_sub("studies-string", "studies: [s0, s1, s2, s2native, s3, s4]", "studies: s0", "field studies")
cfg_sub("testbeds-unknown", "testbeds: [sim, qemu]", "testbeds: [sim, vmware]", "field testbeds.1")
cfg_sub("testbeds-repeated", "testbeds: [sim, qemu]", "testbeds: [sim, sim]", "field testbeds")
cfg_sub("measure-unknown", "testbeds: [sim, qemu]", "testbeds: [sim, qemu]\nmeasure: [cloud]", "field measure.0")
cfg_sub(
    "unknown-key", "data_dir: data", "data_dir: data\ndatadir: x", "field datadir", "unknown field", line_has="datadir"
)
cfg_sub("data-dir-shell", "data_dir: data", 'data_dir: "data;rm -rf ~"', "field data_dir", "not allowed")
cfg_sub("data-dir-newline", "data_dir: data", 'data_dir: "data\\n"', "field data_dir", "not allowed")
cfg_sub("paper-dir-space", "paper_dir: paper", 'paper_dir: "my paper"', "field paper_dir")
cfg_sub("lab-host-shell", "data_dir: data", 'data_dir: data\nlab_host: "x;reboot"', "field lab_host")
cfg_sub("studies-dir-dollar", "data_dir: data", 'data_dir: data\nstudies_dir: "$HOME"', "field studies_dir")
cfg_sub("dup-seed", "seed: 20261121", "seed: 20261121\nseed: 1", "duplicate key 'seed'", line_has="seed: 1")
cfg_sub(
    "dup-testbed",
    "testbed: sim ",
    "testbed: sim\ntestbed: qemu\n#",
    "duplicate key 'testbed'",
    line_has="testbed: qemu",
)
cfg_sub("dup-studies", "data_dir: data", "data_dir: data\nstudies: [s1]", "duplicate key 'studies'")
cfg("non-utf8", CONFIG.encode().replace(b"# Top-level", b"# Top\xfflevel", 1), "not UTF-8 text")
cfg("empty", "", "empty configuration file", line=False)
cfg_sub("yaml-error", "testbeds: [sim, qemu]", "testbeds: [sim, qemu", "not valid YAML")
cfg("top-level-list", "- testbed: sim\n", "field (top level)")
CASES.append(
    Case(
        "config-missing-file",
        ["validate", "--config", "{tmp}/nope.yaml", "--lab", REAL_LAB, S1],
        {},
        ("{tmp}/nope.yaml", "cannot read"),
        code=2,
    )
)


# --------------------------------------------------------------------------- lab inventory
def lab(id, text, *expect, line_has=None, line=True):
    CASES.append(
        Case(
            f"lab-{id}",
            ["validate", "--config", REAL_CONFIG, "--lab", "{f}", S1],
            {"lab.yaml": text},
            ("{f}",) + expect,
            line_has=line_has,
            line=line,
            code=2,
        )
    )


def lab_sub(id, old, new, *expect, line_has=None):
    lab(id, sub(LAB, old, new), *expect, line_has=line_has)


lab_sub("version-2", "version: 1", "version: 2", "field version", line_has="version:")
lab_sub("no-version", "version: 1\n", "", "'version' is a required property")
lab(
    "no-hosts",
    yaml.safe_dump({k: v for k, v in yaml.safe_load(LAB).items() if k not in ("hosts", "pools")}),
    "field (top level)",
    "'hosts' is a required property",
)
lab_sub("host-name-uppercase", "  xen1:\n", "  Xen1:\n", "field hosts", "not allowed")
lab_sub("host-name-shell", "  xen1:\n", '  "xen1;id":\n', "field hosts", "not allowed")
lab_sub(
    "address-shell",
    "address: 10.0.0.11}",
    'address: "10.0.0.11;reboot"}',
    "field hosts.xen1.ssh.address",
    "not allowed",
    line_has="10.0.0.11;reboot",
)
lab_sub(
    "address-newline", "address: 10.0.0.11}", 'address: "10.0.0.11\\n"}', "field hosts.xen1.ssh.address", "not allowed"
)
lab_sub(
    "address-option",
    "address: 10.0.0.11}",
    'address: "-oProxyCommand=id"}',
    "field hosts.xen1.ssh.address",
    "not allowed",
)
lab_sub("address-space", "address: 10.0.0.11}", 'address: "10.0.0.11 -v"}', "field hosts.xen1.ssh.address")
lab_sub("user-newline", "ssh: {user: root,", 'ssh: {user: "root\\n",', "field defaults.ssh.user", "not allowed")
lab_sub("user-option", "ssh: {user: root,", 'ssh: {user: "-oX=y",', "field defaults.ssh.user", "not allowed")
lab_sub("user-uppercase", "ssh: {user: root,", "ssh: {user: Root,", "field defaults.ssh.user")
lab_sub("port-zero", "port: 2222}", "port: 0}", "field hosts.xen2.ssh.port", line_has="port: 0")
lab_sub("port-too-big", "port: 2222}", "port: 70000}", "field hosts.xen2.ssh.port")
lab_sub("port-string", "port: 2222}", 'port: "22"}', "field hosts.xen2.ssh.port")
lab_sub(
    "no-key",
    "ssh: {user: root, key: {path: /etc/schedlab/id_ed25519}, ",
    "ssh: {user: root, ",
    "field hosts.xen1.ssh",
    "no key",
)
lab_sub("key-relative", "key: {path: /etc/schedlab/id_ed25519}", "key: {path: etc/id}", "field defaults.ssh.key.path")
lab_sub(
    "key-dotdot",
    "key: {path: /etc/schedlab/id_ed25519}",
    "key: {path: /etc/../srv/id}",
    "field defaults.ssh.key.path",
    "not allowed",
    "no '..'",
)
lab_sub(
    "key-two-sources",
    "key: {path: /etc/schedlab/id_ed25519}",
    "key: {path: /etc/id, env: KEY}",
    "field defaults.ssh.key",
)
lab_sub("key-env-lowercase", "key: {path: /etc/schedlab/id_ed25519}", "key: {env: key}", "field defaults.ssh.key.env")
lab_sub(
    "password-plain",
    "password: {env: XEN1_BMC_PASSWORD}",
    "password: hunter2",
    "field hosts.xen1.bmc.password",
    "is not of type 'object'",
    line_has="hunter2",
)
lab_sub(
    "password-in-repo",
    "password: {env: XEN1_BMC_PASSWORD}",
    f"password: {{file: {ROOT}/bmc.pass}}",
    "field hosts.xen1.bmc.password.file",
    "inside the repository",
)
lab_sub(
    "bmc-privilege",
    "user: admin, password:",
    "user: admin, privilege: ROOT, password:",
    "field hosts.xen1.bmc.privilege",
)
lab_sub("bmc-user-shell", "user: admin, password:", 'user: "admin$(id)", password:', "field hosts.xen1.bmc.user")
lab_sub(
    "bmc-timeout-zero",
    "user: admin, password:",
    "user: admin, timeout_s: 0, password:",
    "field hosts.xen1.bmc.timeout_s",
)
lab_sub(
    "pool-unknown-host",
    "rack: [xen1, xen2]",
    "rack: [xen1, xen3]",
    "field pools.rack.1",
    "no host named 'xen3'",
    line_has="rack:",
)
lab_sub(
    "pool-named-like-host",
    "rack: [xen1, xen2]",
    "rack: [xen1]\n  xen2: [xen1]",
    "field pools.xen2",
    "has the name of a host",
)
lab_sub(
    "bmc-cycle-no-bmc",
    "port: 2222}",
    "port: 2222}\n    boot: {reboot: [bmc-cycle]}",
    "field hosts.xen2.boot.reboot",
    "needs a bmc section",
)
lab_sub(
    "console-password-no-bmc",
    "port: 2222}",
    "port: 2222}\n    console: {argv: [cat], bmc_password: true}",
    "field hosts.xen2.console.bmc_password",
    "needs a bmc section",
)
lab_sub(
    "topology-missing",
    "    topology: {sockets: 1, cores_per_socket: 4, threads_per_core: 1, numa_nodes: 1}\n",
    "",
    "field hosts.xen2",
    "'topology' is a required property",
)
lab_sub("topology-zero", "sockets: 1,", "sockets: 0,", "field hosts.xen2.topology.sockets")
lab_sub("topology-float", "sockets: 1,", "sockets: 1.5,", "field hosts.xen2.topology.sockets")
lab_sub(
    "cmdline-shell",
    'dom0_cmdline: "root=/dev/sda1 ro"',
    'dom0_cmdline: "root=/dev/sda1; reboot"',
    "field hosts.xen1.boot.dom0_cmdline",
)
lab_sub(
    "reboot-arg-space", "reboot: [systemctl, reboot]", 'reboot: ["systemctl reboot"]', "field hosts.xen1.boot.reboot.0"
)
lab_sub("reboot-empty", "reboot: [systemctl, reboot]", "reboot: []", "field hosts.xen1.boot.reboot")
lab_sub("timeout-negative", "timeouts: {boot_s: 600}", "timeouts: {boot_s: -1}", "field hosts.xen1.timeouts.boot_s")
lab_sub("timeout-inf", "timeouts: {boot_s: 600}", "timeouts: {boot_s: .inf}", "not a finite number", line_has="boot_s")
lab_sub("timeout-unknown", "timeouts: {boot_s: 600}", "timeouts: {boots: 600}", "field hosts.xen1.timeouts.boots")
lab_sub("state-dir-dotdot", "state_dir: lab", "state_dir: ../../etc", "field state_dir")
lab_sub("unknown-top", "version: 1", "version: 1\nracks: 2", "field racks", "unknown field", line_has="racks")
lab_sub(
    "dup-host", "pools:\n", "  xen1:\n    ssh: {address: 10.0.0.99}\npools:\n", "duplicate key 'xen1'", line_has="xen1:"
)
lab_sub("dup-address", "address: 10.0.0.11}", "address: 10.0.0.11, address: 10.0.0.12}", "duplicate key 'address'")
lab_sub(
    "dup-pools",
    "pools:\n  rack: [xen1, xen2]",
    "pools:\n  rack: [xen1, xen2]\n  rack: [xen1]",
    "duplicate key 'rack'",
    line_has="rack: [xen1]",
)
lab("non-utf8", LAB.encode().replace(b"version: 1", b"version: 1 # \xff", 1), "not UTF-8 text", line_has="version")
lab("empty", "", "empty inventory", line=False)
lab_sub("yaml-error", "rack: [xen1, xen2]", "rack: [xen1, xen2", "not valid YAML")
CASES.append(
    Case(
        "lab-run-unknown-host",
        ["run", "s1", "--testbed", "lab", "--host", "nosuch", *POINT, "--out", "{tmp}/data", "--seed", "1"],
        {"lab.yaml": LAB},
        ("{f}", "no host or pool named 'nosuch'"),
        code=2,
        env={"SCHEDLAB_LAB_INVENTORY": "{f}"},
        check=lambda out, err, tmp: not (tmp / "data").exists(),
    )
)
CASES.append(
    Case(
        "lab-run-bad-inventory",
        ["run", "s1", "--testbed", "lab", "--host", "xen1", *POINT, "--out", "{tmp}/data", "--seed", "1"],
        {"lab.yaml": sub(LAB, "pools:\n", "  xen2:\n    ssh: {address: x}\npools:\n")},
        ("{f}:", "duplicate key 'xen2'"),
        code=2,
        env={"SCHEDLAB_LAB_INVENTORY": "{f}"},
    )
)
CASES.append(
    Case(
        "lab-run-study-missing-inventory",
        ["run-study", "s1", "--testbed", "lab", "--host", "xen1", "--out", "{tmp}/data", "--seed", "1"],
        {},
        ("{tmp}/missing.yaml", "cannot read"),
        code=2,
        env={"SCHEDLAB_LAB_INVENTORY": "{tmp}/missing.yaml"},
    )
)
CASES.append(
    Case(
        "lab-validate-env-inventory",
        ["validate", "--config", REAL_CONFIG, S1],
        {"lab.yaml": sub(LAB, "version: 1", "version: 1\nversion: 1")},
        ("{f}:", "duplicate key 'version'"),
        code=2,
        env={"SCHEDLAB_LAB_INVENTORY": "{f}"},
    )
)


# --------------------------------------------------------------------------- command line
def cli_case(id, argv, *expect, code=2, **kw):
    CASES.append(Case(f"cli-{id}", argv, expect=expect, code=code, **kw))


RUN = ["run", "s1", "--out", "{tmp}/data", "--seed", "1"]
for bad in ("abc", "-1", "0", "1001", "1.5", "", " 3", "1_0", "0x10", "1e3"):
    cli_case(
        f"reps-{bad or 'empty'}",
        [*RUN, *POINT, "--reps", bad],
        "argument --reps",
        check=lambda out, err, tmp: not (tmp / "data").exists(),
    )
for cmd, extra in (
    ("run", POINT),
    ("plan", []),
    ("run-study", ["--testbed", "sim"]),
    ("dataset", ["--testbed", "sim", "--manifest", "{tmp}/m.json"]),
):
    for bad in ("-1", "4294967296", "abc", "1.0", ""):
        cli_case(f"{cmd}-seed-{bad or 'empty'}", [cmd, "s1", *extra, "--seed", bad], "argument --seed")
for bad, what in (
    ("mode", "expected AXIS=VALUE"),
    ("=alone", "expected AXIS=VALUE"),
    ("mode:alone", "expected AXIS=VALUE"),
    ("mode=", "is not a value of axis mode"),
    ("nosuch=1", "expected AXIS=VALUE"),
    ("mode=sometimes", "'sometimes' is not a value of axis mode"),
    ("mode=ALONE", "not a value"),
    ("mode= alone", "not a value"),
    ("", "expected AXIS=VALUE"),
):
    cli_case(f"point-{bad or 'empty'}", [*RUN, "--variant", "bug", "--point", bad], "--point", what)
cli_case("point-missing", [*RUN, "--variant", "bug"], "--point", "missing value for axis mode")
cli_case(
    "point-twice",
    [*RUN, "--variant", "bug", "--point", "mode=alone", "--point", "mode=corun"],
    "--point 'mode=corun'",
    "given twice",
)
cli_case(
    "point-s0-float",
    ["run", "s0", "--out", "{tmp}/data", "--seed", "1", "--variant", "base", "--point", "vms=1.0"],
    "--point",
    "not a value of axis vms",
)
for name, what in (
    ("nosuch", "no such study 'nosuch'"),
    ("../config", "no such study"),
    ("S1", "no such study"),
    ("s1;id", "no such study"),
    ("", "no such study"),
):
    cli_case(f"study-{name or 'empty'}", [*RUN[:1], name, *RUN[2:], *POINT], "config/studies/", what)
cli_case("study-missing-path", [*RUN[:1], "{tmp}/nope.yaml", *RUN[2:], *POINT], "{tmp}/nope.yaml", "cannot read")
for v in ("nosuch", "Bug", "", "bug;id"):
    cli_case(
        f"variant-{v or 'empty'}",
        [*RUN, "--variant", v, "--point", "mode=alone"],
        "config/studies/s1.yaml",
        "field variants",
        f"unknown variant {v!r}",
    )
for tb in ("vmware", "SIM", ""):
    cli_case(f"testbed-{tb or 'empty'}", [*RUN, *POINT, "--testbed", tb], "argument --testbed", "invalid choice")
cli_case(
    "testbed-not-in-study",
    ["run", "s2native", "--testbed", "sim", "--variant", "x", "--point", "a=1", "--out", "{tmp}/data"],
    "config/studies/s2native.yaml",
    "field testbeds.sim",
)
cli_case(
    "plan-testbed-not-in-study",
    ["plan", "s2native", "--testbed", "sim", "--seed", "1"],
    "config/studies/s2native.yaml",
    "field testbeds.sim",
)
for cmd, extra in (
    ("run", POINT),
    ("run-study", ["--testbed", "sim"]),
    ("dataset", ["--testbed", "sim", "--manifest", "{tmp}/m.json"]),
):
    cli_case(
        f"{cmd}-out-file",
        [cmd, "s1", *extra, "--seed", "1", "--out", "{tmp}/f"],
        "--out {tmp}/f",
        "not a directory",
        files={"f": "a regular file\n"},
        check=lambda out, err, tmp: (tmp / "f").read_text() == "a regular file\n",
    )
cli_case(
    "run-out-under-file",
    [*RUN[:2], "--seed", "1", *POINT, "--out", "{tmp}/f/data"],
    "{tmp}/f",
    "not a directory",
    files={"f": "x"},
)
for tb in ("sim", "qemu"):
    cli_case(
        f"host-with-{tb}",
        [*RUN, *POINT, "--testbed", tb, "--host", "vhost0"],
        "--host vhost0",
        f"the {tb} testbed has no hosts",
    )
    cli_case(
        f"run-study-host-with-{tb}",
        ["run-study", "s1", "--testbed", tb, "--host", "x", "--out", "{tmp}/data", "--seed", "1"],
        "--host x",
        "has no hosts",
    )
cli_case("host-empty", [*RUN, *POINT, "--testbed", "lab", "--host", ""], "--host", "empty name")
cli_case(
    "host-unknown",
    [*RUN, *POINT, "--testbed", "lab", "--host", "nosuch"],
    "config/lab.yaml",
    "no host or pool named 'nosuch'",
    env={"SCHEDLAB_LAB_INVENTORY": REAL_LAB},
)
cli_case("no-variant", [*RUN, "--point", "mode=alone"], "--variant")
cli_case("no-study", ["run", "--variant", "bug"], "study")
cli_case("no-command", [], "COMMAND")
cli_case("unknown-command", ["frobnicate"], "invalid choice")
cli_case("unknown-option", [*RUN, *POINT, "--frobnicate"], "unrecognized arguments")
cli_case("run-study-no-testbed", ["run-study", "s1"], "--testbed")
cli_case("dataset-no-manifest", ["dataset", "s1", "--testbed", "sim"], "--manifest")
cli_case("trace-bad-cell", ["trace", "s0-sim", "a,b", "--paper-dir", "{tmp}"], "cell 'a,b'", "ROW,COL")
cli_case("trace-unknown-table", ["trace", "nosuch", "--paper-dir", "{tmp}"], "no table 'nosuch'", code=1)
cli_case(
    "validate-missing-study",
    ["validate", "--config", REAL_CONFIG, "--lab", REAL_LAB, "{tmp}/s9.yaml"],
    "{tmp}/s9.yaml",
    "cannot read",
)
cli_case("verify-missing-dir", ["verify", "{tmp}/nodata"], "{tmp}/nodata/raw", "no raw data folder", code=1)

# a full disk: the store raises RecordError (or an OSError gets through): one line, exit 1
cli_case(
    "disk-full-record-error",
    [*RUN, *POINT, "--reps", "1"],
    "{tmp}/data",
    "No space left on device",
    code=1,
    how="stub-run:record-error",
)
cli_case(
    "disk-full-store",
    [*RUN, *POINT, "--reps", "1"],
    "{tmp}/data/raw/sim/s1/",
    "no space left on device",
    code=1,
    how="stub-run:fsync",
    check=lambda out, err, tmp: not any((tmp / "data/raw/sim/s1").iterdir()),
)
cli_case(
    "disk-full-oserror",
    [*RUN, *POINT, "--reps", "1"],
    "{tmp}/data",
    "No space left on device",
    "disk full",
    code=1,
    how="stub-run:oserror",
)
cli_case(
    "disk-full-oserror-no-name",
    [*RUN, *POINT, "--reps", "1"],
    "--out {tmp}/data",
    "disk full",
    code=1,
    how="stub-run:oserror-no-name",
)
cli_case(
    "disk-full-stdout",
    ["plan", "s1", "--seed", "1"],
    "standard output",
    "disk full",
    code=1,
    how="subprocess:/dev/full",
)
cli_case(
    "disk-full-ministat-stdout",
    ["ministat", "{f}"],
    "standard output",
    "No space left",
    code=1,
    how="subprocess:/dev/full",
    files={"a": "1\n2\n3\n"},
)

# the installed command, like a person runs it
for c in [
    Case("sub-reps", [*RUN, *POINT, "--reps", "0"], expect=("argument --reps", "1..1000"), code=2),
    Case("sub-unknown-study", ["plan", "nosuch"], expect=("no such study 'nosuch'",), code=2),
    Case(
        "sub-dup-key",
        ["validate", "--config", REAL_CONFIG, "--lab", REAL_LAB, "{f}"],
        {"s1.yaml": sub(STUDY, "runs: 10", "runs: 10\nruns: 3")},
        ("{f}:", "duplicate key 'runs'"),
        code=2,
    ),
    Case("sub-host-with-sim", [*RUN, *POINT, "--host", "x"], expect=("has no hosts",), code=2),
    Case("sub-out-file", [*RUN, *POINT, "--out", "{f}"], {"f": "x"}, ("not a directory",), code=2),
]:
    c.how = "subprocess"
    CASES.append(c)


# --------------------------------------------------------------------------- ministat
def mini(id, args, *expect, files=None, code=2, accept=None, **kw):
    CASES.append(Case(f"ministat-{id}", ["ministat", *args], files or {}, expect, code=code, accept=accept, **kw))


GOOD3 = {"a": "1\n2\n3\n"}
mini("invalid-word", ["{f}"], "Invalid data on line 3 in {f}", files={"a": "1\n2\nabc\n"})
mini("invalid-suffix", ["{f}"], "Invalid data on line 2 in {f}", files={"a": "1\n2x\n3\n"})
mini("invalid-comma", ["{f}"], "Invalid data on line 1 in {f}", files={"a": "1,5\n2\n3\n"})
mini("invalid-hex-prefix", ["{f}"], "Invalid data on line 1 in {f}", files={"a": "0x\n1\n2\n"})
mini("invalid-double-minus", ["{f}"], "Invalid data on line 4 in {f}", files={"a": "1\n2\n3\n--1\n"})
mini("invalid-exponent", ["{f}"], "Invalid data on line 2 in {f}", files={"a": "1\n1e\n3\n"})
mini("invalid-bytes", ["{f}"], "Invalid data on line 2 in {f}", files={"a": b"1\n\xff\xfe\n3\n"})
mini("invalid-column-2", ["-C", "2", "{f}"], "Invalid data on line 2 in {f}", files={"a": "x 1\nx y\nx 3\n"})
mini("too-few", ["{f}"], "Dataset {f} must contain at least 3 data points", files={"a": "1\n2\n"})
mini("empty-file", ["{f}"], "Dataset {f} must contain at least 3 data points", files={"a": ""})
mini("only-comments", ["{f}"], "Dataset {f} must contain at least 3 data points", files={"a": "# x\n# y\n"})
mini("column-missing", ["-C", "3", "{f}"], "Dataset {f} must contain at least 3 data points", files=GOOD3)
mini("directory", ["{tmp}"], "Dataset {tmp} must contain at least 3 data points")
mini("missing-file", ["{tmp}/nope"], "Cannot open {tmp}/nope", code=1)
mini("flavor-unknown", ["--flavor", "bsd", "{f}"], "--flavor", files=GOOD3)
mini("width-1", ["-w", "1", "{f}"], "cannot plot", "undefined", files=GOOD3)
mini("infinite-value", ["{f}"], "cannot plot", files={"a": "1\n2\ninf\n"})
for id, args, first in (
    ("opt-unknown", ["-x"], "invalid option -- 'x'"),
    ("column-zero", ["-C", "0"], "Column number"),
    ("column-word", ["-C", "x"], "Invalid column number."),
    ("confidence-42", ["-c", "42"], "No support for confidence level"),
    ("confidence-word", ["-c", "x"], "Not a floating point number"),
    ("delimiter-empty", ["-d", ""], "Can't use empty delimiter string"),
    ("width-negative", ["-w", "-1"], "Unable to move beyond left margin."),
    ("width-word", ["-w", "x"], "Invalid width, not a number."),
    ("width-missing", ["-w"], "option requires an argument -- 'w'"),
):
    mini(f"usage-{id}", [*args, "{f}"] if args != ["-w"] else args, first, files=GOOD3, accept=USAGE)
mini("usage-too-many-datasets", ["{f}"] * 8, "Too many datasets.", files=GOOD3, accept=USAGE)
for cols in ("-5", "-100000000000", "4294967290"):
    mini(
        f"columns{cols}",
        ["{f}"],
        f"COLUMNS={cols}",
        "negative plot width",
        files=GOOD3,
        how="ministat-tty",
        env={"COLUMNS": cols},
    )
for cols in ("abc", "0"):
    mini(
        f"columns-{cols}",
        ["{f}"],
        files=GOOD3,
        how="ministat-tty",
        env={"COLUMNS": cols},
        code=0,
        accept="byte-exact C ministat: atoi($COLUMNS) is 0, the empty `-w 0` frame is printed (exit 0)",
        check=lambda out, err, tmp: b"++\n||\n" in out,
    )
mini(
    "columns-negative-with-w",
    ["-w", "30", "{f}"],
    files=GOOD3,
    how="ministat-tty",
    env={"COLUMNS": "-5"},
    code=0,
    accept="-w overrides $COLUMNS, as in C ministat: nothing is plotted at the negative width",
    check=lambda out, err, tmp: b"+" + b"-" * 30 + b"+" in out,
)
mini(
    "columns-negative-with-n",
    ["-n", "{f}"],
    files=GOOD3,
    how="ministat-tty",
    env={"COLUMNS": "-5"},
    code=0,
    accept="-n plots nothing, as in C ministat: the negative width is never used",
    check=lambda out, err, tmp: b"Stddev" in out,
)


# --------------------------------------------------------------------------- raw records
# a shipped record made under the study's registered design (its plan and warm-ups are today's)
SHIPPED = next(
    p for p in sorted((ROOT / "data" / "raw" / "qemu" / "s1").glob("*.json")) if '"registered": true' in p.read_text()
)


def record(id, mutate, *expect, name=None):
    text = SHIPPED.read_text()
    rec = json.loads(text)
    body = mutate(rec) if callable(mutate) else mutate
    path = f"data/raw/qemu/s1/{name or SHIPPED.name}"
    CASES.append(Case(f"record-{id}", ["verify", "{tmp}/data"], {path: body}, ("{tmp}/" + path,) + expect, code=1))


def _set(rec, **kw):
    rec.update(kw)
    return json.dumps(rec, indent=1)


record("bad-json", '{\n "attempt": 1,\n', "unreadable")
record("not-an-object", "[1, 2]\n", "not a JSON object")
record("empty", "", "unreadable")
record("non-utf8", b'{"a": "\xff"}\n', "unreadable")
record("wrong-checksum", lambda r: _set(r, metrics={k: v + 1 for k, v in r["metrics"].items()}), "checksum")
record("missing-field", lambda r: json.dumps({k: v for k, v in r.items() if k != "seed"}), "seed")
record("renamed", lambda r: json.dumps(r), "run_id", name="other.json")


# --------------------------------------------------------------------------- issue 34: hostile input
# Each case below is a defect issue 34 found: on the code before it, a traceback, a hang, a
# silent acceptance (a value changed or ignored), an unclear error or harm to data.
def i34(case: Case) -> None:
    case.issue = 34
    CASES.append(case)


def v34(id, text, *expect, line_has=None, line=True, name="s1.yaml"):
    study(id, text, *expect, line_has=line_has, line=line, name=name)
    CASES[-1].issue = 34


def v34_sub(id, old, new, *expect, line_has=None):
    v34(id, sub(STUDY, old, new), *expect, line_has=line_has)


# numbers: JSON Schema's integer took 10.0 (then plan/run died in range()); YAML 1.1 forms changed values
for key, old, new in (
    ("runs-10.0", "runs: 10", "runs: 10.0"),
    ("runs-float-tag", "runs: 10", "runs: !!float 10"),
    ("warmup-1.0", "warmup: 1\n", "warmup: 1.0\n"),
    ("retries-1.0", "warmup: 1\n", "warmup: 1\nretries: 1.0\n"),
):
    field_name = key.split("-")[0]
    v34_sub(f"{key}", old, new, f"field {field_name}", "not of type 'integer'", line_has=f"{field_name}:")
for key, form in (("octal-012", "012"), ("base60", "10:00"), ("octal-0755", "0755"), ("underscore", "1_0")):
    v34_sub(f"runs-yaml11-{key}", "runs: 10", f"runs: {form}", "field runs", "YAML 1.2", line_has="runs:")
v34_sub("runs-yaml11-binary", "runs: 10", "runs: 0b1010", "field runs", "YAML 1.2", line_has="runs:")
v34_sub(  # in a free-form section the value silently became 600
    "workload-base60",
    "  kind: netperf-pair",
    "  kind: netperf-pair\n  start: 10:00",
    "field workload.start",
    "YAML 1.2",
    line_has="start:",
)
v34_sub("axis-yes", "mode: [alone, corun]", "mode: [alone, corun, yes]", "field axes.mode.2", "YAML 1.2")
i34(
    Case(
        "i34-plan-runs-10.0",
        ["plan", "{f}", "--seed", "1"],
        {"s1.yaml": sub(STUDY, "runs: 10", "runs: 10.0")},
        ("{f}:", "field runs", "not of type 'integer'"),
        code=2,
    )
)
i34(
    Case(
        "i34-config-seed-0755",
        ["validate", "--config", "{f}", "--lab", REAL_LAB, S1],
        {"config.yaml": sub(CONFIG, "seed: 20261121", "seed: 0755")},
        ("{f}:", "field seed", "YAML 1.2"),
        code=2,
        line_has="seed:",
    )
)
i34(
    Case(
        "i34-lab-port-2222.0",
        ["validate", "--config", REAL_CONFIG, "--lab", "{f}", S1],
        {"lab.yaml": sub(LAB, "port: 2222}", "port: 2222.0}")},
        ("{f}:", "field hosts.xen2.ssh.port", "not of type 'integer'"),
        code=2,
        line_has="port: 2222.0",
    )
)

# aliases and nesting: nine levels of nine aliases are 387 million nodes for whatever walks them
BOMB = "\n".join(["  x0: &a0 [lol]"] + [f"  x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)])
v34_sub("alias-bomb", "  kind: netperf-pair", "  kind: netperf-pair\n" + BOMB, "field workload.x", "alias")
v34_sub(
    "alias-cycle", "  kind: netperf-pair", "  kind: netperf-pair\n  loop: &me [*me]", "field workload.loop", "itself"
)
i34(
    Case(  # libyaml's composer has no recursion limit: this overflowed the C stack
        "i34-yaml-100000-brackets",
        ["validate", "--config", REAL_CONFIG, "--lab", REAL_LAB, "{f}"],
        {"s1.yaml": "study: s1\nworkload: " + "[" * 100000 + "\n"},
        ("{f}:", "nested too deeply"),
        code=2,
        how="subprocess",
    )
)

# files that are not regular files: a FIFO hung every reader, /dev/zero ran out of memory
for what, argv in (
    ("study", ["validate", "--config", REAL_CONFIG, "--lab", REAL_LAB, "{f}"]),
    ("config", ["validate", "--config", "{f}", "--lab", REAL_LAB, S1]),
    ("inventory", ["validate", "--config", REAL_CONFIG, "--lab", "{f}", S1]),
):
    i34(Case(f"i34-fifo-{what}", argv, {"x.yaml": FIFO}, ("{f}", "cannot read", "a FIFO"), code=2, timeout=10))
i34(
    Case(
        "i34-fifo-record",
        ["verify", "{tmp}/data"],
        {f"data/raw/qemu/s1/{SHIPPED.name}": FIFO},
        ("{f}", "a FIFO"),
        code=1,
        timeout=10,
    )
)
i34(
    Case(
        "i34-fifo-ministat",
        ["ministat", "{f}"],
        {"a": FIFO},
        ("Dataset {f} must contain at least 3 data points",),
        code=2,
        timeout=10,
    )
)
for what, argv in (
    ("config", ["validate", "--config", "/dev/zero", "--lab", REAL_LAB, S1]),
    ("inventory", ["validate", "--config", REAL_CONFIG, "--lab", "/dev/zero", S1]),
):
    i34(
        Case(
            f"i34-dev-zero-{what}",
            argv,
            expect=("/dev/zero", "cannot read", "character device"),
            code=2,
            how="subprocess",
            timeout=60,
        )
    )
i34(
    Case(
        "i34-dev-zero-ministat",
        ["ministat", "/dev/zero"],
        expect=("Cannot open /dev/zero",),
        code=1,
        how="subprocess",
        timeout=60,
    )
)
i34(
    Case(
        "i34-study-symlink-out",
        ["validate", "--config", REAL_CONFIG, "--lab", REAL_LAB, "{f}"],
        {"s1.yaml": Special("symlink", "{root}/config/config.yaml")},
        ("{f}", "symbolic link out of"),
        code=2,
    )
)


# raw records whose checksum was recomputed after an edit: contradictions verify used to pass
def record34(id, mutate, *expect, name=None, body=None):
    rec = json.loads(SHIPPED.read_text())
    if body is None:
        from schedlab import store

        mutate(rec)
        rec["checksum"] = store.checksum(rec)
        body = json.dumps(rec, indent=1)
    path = f"data/raw/qemu/s1/{name or SHIPPED.name}"
    i34(Case(f"i34-record-{id}", ["verify", "{tmp}/data"], {path: body}, ("{tmp}/" + path,) + expect, code=1))


_FLIP = {"alone": "corun", "corun": "alone"}
record34("point-contradicts-id", lambda r: r.update(point={"mode": _FLIP[r["point"]["mode"]]}), "field point")
record34("warmup-flipped", lambda r: r.update(warmup=not r["warmup"]), "field warmup")
record34("metric-missing", lambda r: r["metrics"].pop("latency_us"), "field metrics", "latency_us")
record34("int-10e400", lambda r: r["counters"].update(huge=10**400), "field counters.huge", "64 bits")
record34("finished-before-started", lambda r: r.update(finished="2000-01-01T00:00:00+00:00"), "field finished")
record34("seed-changed", lambda r: r.update(seed=r["seed"] + 1), "field seed")
record34("run-key-list", lambda r: r.update(run_key=[]), "field run_key")  # found by test_hostile_properties
_dup = SHIPPED.read_text().replace('\n "attempt": 1,', '\n "attempt": 1,\n "attempt": 2,', 1)
record34("duplicate-key", None, "duplicate key 'attempt'", body=_dup)
_deep = "[" * 100000
record34("100000-brackets", None, "nested too deeply", body=_deep)
i34(
    Case(
        "i34-dataset-100000-brackets",
        ["dataset", "s1", "--testbed", "qemu", "--out", "{tmp}/data", "--manifest", "{tmp}/m.json", "--seed", "1"],
        {f"data/raw/qemu/s1/{SHIPPED.name}": _deep},
        ("{f}", "nested too deeply"),
        code=1,
    )
)
i34(
    Case(
        "i34-record-symlink-out",
        ["verify", "{tmp}/data"],
        {
            "outside.json": SHIPPED.read_text(),
            f"data/raw/qemu/s1/{SHIPPED.name}": Special("symlink", "{tmp}/outside.json"),
        },
        (f"{{tmp}}/data/raw/qemu/s1/{SHIPPED.name}", "symbolic link out of"),
        code=1,
    )
)


def _rekeyed():
    """The record with another run key, and the run id and file name that go with it."""
    from schedlab import store

    rec = json.loads(SHIPPED.read_text())
    rec["run_key"] = "0" * 64
    rec["run_id"] = store.run_id_of(rec["variant"], rec["point_id"], rec["repetition"], rec["run_key"])
    rec["checksum"] = store.checksum(rec)
    return rec["run_id"], json.dumps(rec, indent=1)


_rid, _body = _rekeyed()
record34("run-key-not-its-own", None, "field run_key", name=f"{_rid}.json", body=_body)


def _line_short(out, err, tmp):
    return len(err.splitlines()[0]) < 600


_many = json.loads(SHIPPED.read_text())
_many["samples"] = [1] * 3_000_000  # not an object: the schema's message used to repeat the 3 million samples
i34(
    Case(
        "i34-record-3-million-samples",
        ["verify", "{tmp}/data"],
        {f"data/raw/qemu/s1/{SHIPPED.name}": json.dumps(_many)},
        ("field samples", "more characters"),
        code=1,
        check=_line_short,
    )
)
i34(
    Case(
        "i34-lab-1mb-cmdline",
        ["validate", "--config", REAL_CONFIG, "--lab", "{f}", S1],
        {"lab.yaml": sub(LAB, 'dom0_cmdline: "root=/dev/sda1 ro"', f'dom0_cmdline: "{"root=/dev/sda1 " * 70000}"')},
        ("{f}", "field hosts.xen1.boot.dom0_cmdline", "more characters"),
        code=2,
        check=_line_short,
    )
)

# option values: they passed validate, and the run failed three times with a line that named no field
for key, old, new, fld in (
    ("sim-duration-negative", "duration_s: 10 ", "duration_s: -10 ", "sim_workload.duration_s"),
    ("sim-link-zero", "link_mbps: 1000", "link_mbps: 0", "sim_workload.stream.link_mbps"),
    ("sim-pin-cpu-99", "pin_cpu: 0 ", "pin_cpu: 99 ", "sim_workload.pin_cpu"),
    (
        "sim-dist-cauchy",
        "dist: lognormal, mean: 26.0",
        "dist: cauchy, mean: 26.0",
        "sim_workload.stream.one_way_us.dist",
    ),
    ("qemu-smp-three", "options: {smp: 3,", "options: {smp: three,", "testbeds.qemu.options.smp"),
    ("qemu-icount-5.5", "icount_shift: 5,", "icount_shift: 5.5,", "testbeds.qemu.options.icount_shift"),
    (
        "qemu-trace-pages-shell",
        "trace_pages: 1024,",
        'trace_pages: "1024; reboot",',
        "testbeds.qemu.options.trace_pages",
    ),
    (
        "qemu-duration-negative",
        "options: {smp: 3,",
        "options: {smp: 3, duration_s: -10,",
        "testbeds.qemu.options.duration_s",
    ),
    ("qemu-unknown-option", "options: {smp: 3,", "options: {smp: 3, smpp: 4,", "testbeds.qemu.options.smpp"),
    ("variant-sim-unknown", 'sim: {version: "4.6"}', 'sim: {version: "4.6", yeild: noop}', "variants.bug.sim.yeild"),
    ("variant-sim-version-float", 'sim: {version: "4.6"}', "sim: {version: 4.6}", "variants.bug.sim.version"),
    ("sim-options-unknown", "  sim: {}", "  sim: {options: {cores: 8}}", "testbeds.sim.options.cores"),
    ("lab-reboot-never", "  lab: {}", "  lab: {options: {reboot: never}}", "testbeds.lab.options.reboot"),
):
    v34_sub(f"options-{key}", old, new, f"field {fld}")

# paths: an empty --out wrote into the working directory, an empty --manifest was ignored
for cmd, extra in (
    ("run", [*POINT, "--reps", "1"]),
    ("run-study", ["--testbed", "sim"]),
    ("dataset", ["--testbed", "sim", "--manifest", "{tmp}/m.json"]),
):
    i34(
        Case(
            f"i34-{cmd}-out-empty",
            [cmd, "s1", *extra, "--seed", "1", "--out", ""],
            expect=("--out", "empty path"),
            code=2,
            how="stub-run",
            harm=True,
            check=lambda out, err, tmp: not (tmp / "raw").exists(),
        )
    )
for cmd, extra in (
    ("run", [*POINT, "--reps", "1"]),
    ("run-study", ["--testbed", "sim"]),
    ("dataset", ["--testbed", "sim"]),
):
    i34(
        Case(
            f"i34-{cmd}-manifest-empty",
            [cmd, "s1", *extra, "--seed", "1", "--out", "{tmp}/data", "--manifest", ""],
            expect=("--manifest", "empty path"),
            code=2,
            how="stub-run",
        )
    )
i34(
    Case(
        "i34-config-data-dir-etc",
        ["validate", "--config", "{f}", "--lab", REAL_LAB, S1],
        {"config.yaml": sub(CONFIG, "data_dir: data", "data_dir: /etc")},
        ("{f}:", "field data_dir"),
        code=2,
    )
)
i34(
    Case(
        "i34-config-studies-dir-dotdot",
        ["validate", "--config", "{f}", "--lab", REAL_LAB, S1],
        {"config.yaml": sub(CONFIG, "data_dir: data", "data_dir: data\nstudies_dir: ../../etc")},
        ("{f}:", "field studies_dir"),
        code=2,
    )
)
i34(
    Case(
        "i34-lab-state-dir-etc",
        ["validate", "--config", REAL_CONFIG, "--lab", "{f}", S1],
        {"lab.yaml": sub(LAB, "state_dir: lab", "state_dir: /etc")},
        ("{f}:", "field state_dir"),
        code=2,
    )
)

# --manifest replaced whatever was there: a raw record (then gone), a FIFO, a link, a file of the user's
_RECORD = f"data/raw/qemu/s1/{SHIPPED.name}"
DATASET = ["dataset", "s1", "--testbed", "qemu", "--out", "{tmp}/data", "--seed", "20261121"]


def _unchanged(name, body):
    def check(out, err, tmp):
        p = tmp / name
        if isinstance(body, Special):
            return p.is_fifo() if body.kind == "fifo" else p.is_symlink()
        return p.read_bytes() == (body if isinstance(body, bytes) else body.encode())

    return check


for key, name, body in (
    ("raw-record", _RECORD, None),
    ("unrelated-file", "notes.txt", "my notes\n"),
    ("fifo", "m.json", FIFO),
    ("symlink", "m.json", Special("symlink", "{tmp}/notes.txt")),
    ("folder-file", "d/x", "x"),
):
    files = {_RECORD: SHIPPED.read_text(), "notes.txt": "my notes\n"}
    if body is not None:
        files[name] = body
    target = "{tmp}/d" if key == "folder-file" else "{tmp}/" + name
    i34(
        Case(
            f"i34-dataset-manifest-{key}",
            [*DATASET, "--manifest", target],
            files,
            ("--manifest",),
            code=2,
            harm=True,
            check=_unchanged(name, files[name]),
            timeout=20,
        )
    )
i34(
    Case(
        "i34-run-manifest-raw-record",
        ["run", "s1", "--testbed", "qemu", *POINT, "--reps", "1", "--out", "{tmp}/data", "--seed", "1"]
        + ["--manifest", "{tmp}/" + _RECORD],
        {_RECORD: SHIPPED.read_text()},
        ("--manifest", "raw records"),
        code=2,
        how="stub-run",
        harm=True,
        check=_unchanged(_RECORD, SHIPPED.read_text()),
    )
)
i34(
    Case(
        "i34-dataset-manifest-again",
        [*DATASET, "--manifest", "{tmp}/m.json"],
        {_RECORD: SHIPPED.read_text(), "m.json": json.dumps({"study": "s1", "testbed": "qemu", "points": []})},
        code=0,
        accept="a manifest this command wrote before is its own output: it is replaced (atomically)",
        check=lambda out, err, tmp: json.loads((tmp / "m.json").read_text())["points"],
    )
)

# others
v34_sub(
    "axis-duplicate-point-id", "mode: [alone, corun]", 'mode: [alone, corun, 1, "1"]', "field axes.mode.3", "point id"
)
i34(
    Case(
        "i34-run-study-race",
        ["run-study", "s1", "--testbed", "sim", "--out", "{tmp}/data", "--seed", "1"],
        code=0,
        how="stub-run:race",
        accept="a record another run-study landed first (same run key) is reused, not a failure",
        check=lambda out, err, tmp: len(list((tmp / "data/raw/sim/s1").glob("*.json"))) == 44,
    )
)
i34(
    Case(
        "i34-latex-label",
        ["(papermill notebooks/s1mechanism.ipynb)"],
        {
            "studies/s1.yaml": sub(
                STUDY, 'bug:   {label: "Xen 4.2-4.6 wake path (bug)"', r"bug:   {label: '\input{pwn}&%$#_^~'"
            )
        },
        code=0,
        how="latex",
        harm=True,
        accept="a label is text: validate takes it, and every file that reaches LaTeX escapes it (tests/test_latex_escape.py)",
        check=lambda out, err, tmp: r"\input{pwn}" not in (tmp / "gen" / "caption.tex").read_text(),
        timeout=600,
    )
)


# --------------------------------------------------------------------------- running a case
class _Stub:
    """A testbed that measures instantly (the disk-full cases are about the store)."""

    name = "sim"

    def describe(self):
        return {"name": "stub"}

    def build_id(self, study, variant):
        return "stub"

    def run_once(self, study, variant, point, seed):
        from schedlab.core.testbed import RunResult

        return RunResult(metrics={m["name"]: 1.0 for m in study["metrics"]})

    def close(self):
        pass


def _full_disk(kind):
    if kind == "fsync":

        def fsync(fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        return fsync

    def write_record(folder, record):
        from schedlab.store import RecordError

        path = str(Path(folder) / f"{record['run_id']}.json")
        if kind == "record-error":
            raise RecordError(f"{path}: cannot write: No space left on device")
        if kind == "oserror":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return write_record


def _fill(s, f: str, tmp: Path):
    return s.replace("{f}", f).replace("{tmp}", str(tmp)).replace("{root}", str(ROOT)) if isinstance(s, str) else s


class _Hang(Exception):
    pass


def _limit_memory():  # a subprocess case: a MemoryError, not the machine's memory, if a reader runs away
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def _race(monkeypatch):
    """Another run-study process lands each run's record just before this one writes it."""
    from schedlab import store

    real = store.write_record

    def racing(folder, record):
        if record.get("status") == "ok":
            real(folder, dict(record))
        return real(folder, record)

    monkeypatch.setattr(store, "write_record", racing)


def _latex(tmp: Path):
    """The S1 mechanism notebook on a study whose labels hold TeX: its caption.tex, included by
    the paper, must carry them escaped."""
    from conftest import BIN

    r = subprocess.run(
        [str(BIN / "papermill"), "--no-progress-bar", "--cwd", str(ROOT), str(ROOT / "notebooks" / "s1mechanism.ipynb")]
        + [str(tmp / "executed.ipynb"), "-p", "studies_dir", str(tmp / "studies"), "-p", "out_dir", str(tmp / "gen")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    return r.returncode, r.stdout.encode(), r.stderr[-2000:] if r.returncode else "", ""


def run_case(case: Case, tmp: Path, monkeypatch, capfd):
    f = ""
    for name, body in case.files.items():
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, Special):
            if body.kind == "fifo":
                os.mkfifo(p)
            else:
                p.symlink_to(_fill(body.target, "", tmp))
        else:
            p.write_bytes(body if isinstance(body, bytes) else body.encode())
        f = f or str(p)
    argv = [_fill(a, f, tmp) for a in case.argv]
    env = {k: _fill(v, f, tmp) for k, v in case.env.items()}
    monkeypatch.chdir(tmp)  # a default --out data lands here, never in the repository
    if "SCHEDLAB_LAB_INVENTORY" not in env:
        monkeypatch.delenv("SCHEDLAB_LAB_INVENTORY", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if case.how == "latex":
        code, out, err, _ = _latex(tmp)
        return code, out, err, f
    if case.how.startswith("subprocess"):
        from conftest import BIN

        with open("/dev/full" if case.how.endswith("/dev/full") else os.devnull, "w") as sink:
            r = subprocess.run(
                [str(BIN / "schedlab"), *argv],
                stdout=sink if case.how.endswith("/dev/full") else subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                timeout=case.timeout,
                cwd=tmp,
                env={**os.environ, **env},
                preexec_fn=_limit_memory,
            )
        if r.returncode < 0:
            raise _Crash(f"killed by signal {-r.returncode}")
        return r.returncode, (r.stdout or "").encode(), r.stderr, f
    if case.how == "ministat-tty":
        out, err = [], io.BytesIO()
        code = ministat.run([os.fsencode(a) for a in argv[1:]], out, err, tty=True)
        return code, b"".join(out), err.getvalue().decode(errors="replace"), f
    if case.how.startswith("stub-run"):
        from schedlab import store, testbeds

        monkeypatch.setattr(testbeds, "get", lambda name, **kw: _Stub())
        kind = case.how.partition(":")[2]
        if kind == "fsync":  # the real store on a full disk
            monkeypatch.setattr(os, "fsync", _full_disk("fsync"))
        elif kind == "race":
            _race(monkeypatch)
        elif kind:
            monkeypatch.setattr(store, "write_record", _full_disk(kind))

    def alarm(signum, frame):
        raise _Hang(f"no answer in {case.timeout} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(case.timeout)
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse
        code = e.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    out, err = capfd.readouterr()
    return code, out.encode(), err, f


class _Crash(Exception):
    pass


ERROR, ACCEPTED = "one-line error", "accepted"


def classify(case: Case, tmp: Path, monkeypatch, capfd) -> tuple[str, str]:
    """(outcome, why): one-line error or accepted (the case holds), or traceback, crash, hang,
    silent acceptance, unclear error, refused (good input turned away), harm."""
    try:
        code, out, err, f = run_case(case, tmp, monkeypatch, capfd)
    except (_Hang, subprocess.TimeoutExpired) as e:
        capfd.readouterr()
        return "hang", str(e)
    except _Crash as e:
        return "crash", str(e)
    except Exception as e:  # noqa: BLE001 (whatever escapes the CLI is a traceback for its user)
        capfd.readouterr()
        return "traceback", f"{type(e).__name__}: {str(e)[:200]}"
    if "Traceback" in err:
        return "traceback", err[-500:]
    lines = err.splitlines()

    def checked() -> str | None:
        if case.check is None:
            return None
        try:
            ok = case.check(out, err if case.accept is None else err.encode(), tmp)
        except Exception as e:  # noqa: BLE001
            ok, e_text = False, f"{type(e).__name__}: {e}"
        else:
            e_text = "check failed"
        if ok:
            return None
        return ("harm" if case.harm else "unclear error") + f"|{e_text}"

    if case.accept:  # documented: see `accept` for why
        if case.code is not None and code != case.code:
            return ("refused" if code else "silent acceptance"), f"exit {code}: {err[-300:]}"
        if lines and not all(_fill(s, f, tmp) in lines[0] for s in case.expect):
            return "unclear error", err[-300:]
        bad = checked()
        return (bad.split("|")[0], bad.split("|")[1]) if bad else (ACCEPTED, "")
    bad = checked()
    if bad and case.harm:
        return "harm", bad.split("|")[1]
    if code == 0:
        return "silent acceptance", (out[-200:].decode(errors="replace") + err[-200:])
    if case.code is not None and code != case.code:
        return "unclear error", f"exit {code}, not {case.code}: {err[-300:]}"
    if len(lines) != 1:
        return "unclear error", f"{len(lines)} lines on stderr: {err[:300]}"
    line = lines[0]
    for want in case.expect:
        if _fill(want, f, tmp) not in line:
            return "unclear error", f"no {_fill(want, f, tmp)!r} in: {line[:300]}"
    if case.line or case.line_has:
        m = re.search(re.escape(f) + r":(\d+): ", line)
        if not m:
            return "unclear error", f"no line number: {line[:300]}"
        if case.line_has:
            text = Path(f).read_bytes().decode(errors="replace").splitlines()
            if case.line_has not in text[int(m.group(1)) - 1]:
                return "unclear error", f"line {m.group(1)} is not the one with {case.line_has!r}"
    if bad:
        return bad.split("|")[0], bad.split("|")[1]
    return ERROR, ""


OUTCOMES: list[tuple[str, int | None, str]] = []  # (case id, issue, outcome), printed by conftest


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, tmp_path, monkeypatch, capfd):
    outcome, why = classify(case, tmp_path, monkeypatch, capfd)
    OUTCOMES.append((case.id, case.issue, outcome))
    assert outcome == (ACCEPTED if case.accept else ERROR), f"{outcome}: {why}"


def test_table_is_large():
    assert len(CASES) >= 200
    assert len({c.id for c in CASES}) == len(CASES)


def test_raw_data_never_rewritten(tmp_path, monkeypatch, capfd):
    """A corrupt record is reported, not repaired: verify leaves its bytes alone."""
    case = next(c for c in CASES if c.id == "record-wrong-checksum")
    code, _, err, f = run_case(case, tmp_path, monkeypatch, capfd)
    path = tmp_path / next(iter(case.files))
    assert code == 1 and path.read_text() == case.files[next(iter(case.files))]
