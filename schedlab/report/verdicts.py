"""The verdict table: for each study, the seed's claim, what each reported testbed found
and a verdict, decided by fixed rules from the same sidecars the study tables come from.

    python -m schedlab.report.verdicts --paper-dir paper --studies-dir config/studies \\
        --study STUDY ... --pair STUDY:TESTBED ... --testbed sim --testbed qemu --measured sim

The claims (which comparisons test them, in which direction, with which margin, and where
a testbed cannot test them at all) are written in each study file (`claim:`) before looking
at any result, and are part of its registered design; the rules are here. Every number
comes from a sidecar or from a study file's `published:` block.

Decision rules, for one comparison (`judge`):

- a claimed direction (higher or lower than the reference):
  significant in that direction and the published difference inside our interval:
  REPRODUCED; significant in that direction otherwise (or the seed gives no size for this
  comparison): DIRECTION; significant the other way: NOT; not significant and the
  published difference outside our interval (ruled out): NOT; not significant otherwise
  (the interval holds both 0 and the published size, or the seed gives no size): UNTESTABLE,
  the runs cannot resolve the effect. A non-significant difference is never REPRODUCED
  or DIRECTION.
- a claimed absence of difference (within a margin): equivalent by the TOST test
  (Holm-adjusted): REPRODUCED; the whole interval beyond the margin: NOT; otherwise
  UNTESTABLE (the interval is wider than the margin or straddles it), whether or not it
  excludes 0. Without a TOST result: UNTESTABLE.

A claim's verdict on a testbed (`combine`): NOT if any of its comparisons is NOT, else
UNTESTABLE if any is, else DIRECTION if any is, else REPRODUCED. A testbed that cannot
show the effect by construction (e.g. no caches under TCG), a study that does not run on
a testbed, or one without records of its current definition and registered design: UNTESTABLE
with that reason, whatever the numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from schedlab import config
from schedlab.core.files import atomic_write
from schedlab.report.table_model import Table
from schedlab.report.tables import (
    count_word,
    counted,
    display_title,
    fmt_bracket,
    fmt_signed,
    fmt_value_bracket,
    latex_escape,
    metric_text,
    of_n,
    word_list,
    write_macros,
    write_sidecar,
)
from schedlab.stats.core import TOO_FEW_UNITS_MARK
from schedlab.sweep import SensitivityError

REPRODUCED = "reproduced"
DIRECTION = "reproduced in direction only"
NOT = "not reproduced"
UNTESTABLE = "untestable here"
CATEGORIES = (REPRODUCED, DIRECTION, NOT, UNTESTABLE)
# combine(): the first of these present decides a claim
_PRECEDENCE = (NOT, UNTESTABLE, DIRECTION, REPRODUCED)


class VerdictError(Exception):
    """Bad input (a missing or malformed sidecar, an unknown study): one line naming it."""


@dataclass(frozen=True)
class Part:
    """Comparisons a claim rests on: `variant` against `reference` (default: the variant's
    baseline in the study table) for `metrics` at the points `where` selects.

    where: "all", "top" (the last value of the testbed's one axis), "first", "rest"
    (all but the first) or {axis: [values]} (those of them the testbed runs).
    direction: +1 the claim says higher, -1 lower, "better"/"worse" as the metric's `better`
    says, 0 no difference (the equivalence margin is the check's, or the study file's).
    check: the name of a StudyContext.check in the sidecar (a comparison the table does
    not make), else the table's own cells."""

    label: str
    variant: str
    metrics: tuple[str, ...]
    direction: int | str
    where: object = "all"
    check: str | None = None
    reference: str | None = None
    margin_pct: float | None = None  # an equivalence part's margin (else the study file's)


@dataclass(frozen=True)
class Claim:
    """One seed's claim. text: LaTeX; `{metric/variant/value}` fields are filled from the
    study file's published figures (`{metric/variant/value/pct}`: the published difference
    from the baseline in %). untestable: {testbed: why it cannot show the effect}."""

    study: str
    title: str
    text: str
    parts: tuple[Part, ...]
    untestable: dict[str, str] = field(default_factory=dict)
    control: tuple[str, str] | None = None  # an A/A pair (variant, reference) that runs the same thing


_DIRECTIONS = {"higher": +1, "lower": -1, "equivalent": 0, "better": "better", "worse": "worse"}


def claim_of(study: dict) -> Claim | None:
    """The study file's claim (`claim:`, fixed before measuring and part of its registered
    design), as the rules read it; None for a study without one."""
    c = study.get("claim")
    if not c:
        return None
    parts = tuple(
        Part(
            p["label"],
            p["variant"],
            tuple(p["metrics"]),
            _DIRECTIONS[p["direction"]],
            p.get("where", "all"),
            p.get("check"),
            p.get("reference"),
            p.get("equivalent_within_pct") if p["direction"] == "equivalent" else None,
        )
        for p in c["parts"]
    )
    ctl = c.get("control")
    return Claim(
        study["study"],
        c["title"],
        c["text"],
        parts,
        dict(c.get("untestable") or {}),
        (ctl["variant"], ctl["reference"]) if ctl else None,
    )


# --- one comparison -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    """One comparison as a sidecar gives it: the difference in % of the reference mean, its
    interval (at the row's Holm-adjusted level), the Holm-adjusted verdicts, and what the
    claim says of it."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    significant: bool | None = None
    equivalent: bool | None = None
    direction: int = 0
    published: float | None = None
    margin_pct: float | None = None
    missing: str = ""  # why there is no value, when known (e.g. a variant the testbed does not run)
    exact: bool = False  # no spread in either variant (a deterministic model): the value is exact


def _num(x) -> float:
    return math.nan if x is None else float(x)


# A published difference counts as inside an interval within this many percentage points of
# its ends: the text prints differences to 0.1, so a reader cannot tell closer values apart.
TOLERANCE_PCT = 0.05


def _inside(pub: float, low, high) -> bool:
    lo = -math.inf if low is None else float(low)
    hi = math.inf if high is None else float(high)
    return lo - TOLERANCE_PCT <= pub <= hi + TOLERANCE_PCT


def judge(e: Evidence) -> tuple[str, str]:
    """(category, why) for one comparison; the rules are the module's docstring."""
    if e.value is None or math.isnan(_num(e.value)):
        return UNTESTABLE, e.missing or "no result"
    if e.exact:
        return _judge_exact(e)
    iv = fmt_bracket(e.low, e.high, value=e.value)
    if e.direction == 0:
        margin = f"$\\pm${e.margin_pct:g}\\,\\%" if e.margin_pct else "the margin"
        if e.equivalent is None:
            return UNTESTABLE, "no equivalence test"
        if e.equivalent:
            return REPRODUCED, f"equivalent within {margin}"
        lo, hi = _num(e.low), _num(e.high)
        if e.margin_pct and (hi < -e.margin_pct or lo > e.margin_pct):
            return NOT, f"the difference, {fmt_signed(e.value)}\\,\\% {iv}, exceeds {margin}"
        if e.significant:
            return (
                UNTESTABLE,
                f"the difference, {fmt_signed(e.value)}\\,\\% {iv}, straddles {margin}, so it is shown neither "
                "within nor beyond it",
            )
        return UNTESTABLE, f"the interval {iv} is wider than {margin} and cannot resolve it"
    same = (e.value > 0) == (e.direction > 0)
    if e.significant:
        if not same:
            return NOT, f"the difference is significant in the opposite direction ({fmt_signed(e.value)}\\,\\%)"
        if e.published is None:
            return DIRECTION, "the difference is significant in the claimed direction and the seed gives no size"
        if _inside(e.published, e.low, e.high):
            return REPRODUCED, f"the published {fmt_signed(e.published)}\\,\\% lies inside {iv}"
        return DIRECTION, f"the published {fmt_signed(e.published)}\\,\\% lies outside {iv}"
    if e.published is not None and not _inside(e.published, e.low, e.high):
        return NOT, (
            f"the difference is not detectable, and the published {fmt_signed(e.published)}\\,\\% lies outside {iv}"
        )
    if e.published is not None:
        return UNTESTABLE, f"the interval {iv} holds both 0 and the published {fmt_signed(e.published)}\\,\\%"
    return UNTESTABLE, f"the difference is not detectable (interval {iv})"


def _judge_exact(e: Evidence) -> tuple[str, str]:
    """An exact difference (a deterministic model's runs do not vary) decides without a test:
    an equivalence claim holds iff it lies inside the margin; a claimed direction is
    REPRODUCED where the difference has that sign and the published one equals it (within
    TOLERANCE_PCT), DIRECTION where only the sign agrees, NOT where it is 0 or opposite."""
    v = float(e.value)
    if e.direction == 0:
        margin = f"$\\pm${e.margin_pct:g}\\,\\%" if e.margin_pct else "the margin"
        if not e.margin_pct:
            return UNTESTABLE, "no equivalence margin"
        if abs(v) < e.margin_pct:
            return REPRODUCED, f"exactly {fmt_signed(v)}\\,\\%, inside {margin}"
        return NOT, f"exactly {fmt_signed(v)}\\,\\%, beyond {margin}"
    if v == 0 or (v > 0) != (e.direction > 0):
        return NOT, f"exactly {fmt_signed(v)}\\,\\%: not in the claimed direction"
    if e.published is None:
        return DIRECTION, f"exactly {fmt_signed(v)}\\,\\%; the seed gives no size"
    if _inside(e.published, v, v):
        return REPRODUCED, f"exactly {fmt_signed(v)}\\,\\%, the published {fmt_signed(e.published)}\\,\\%"
    return DIRECTION, f"exactly {fmt_signed(v)}\\,\\%, published {fmt_signed(e.published)}\\,\\%"


def combine(judgements: list[tuple[str, str]]) -> tuple[str, str]:
    """A claim's verdict from its comparisons': the first category of _PRECEDENCE present, with
    the reason of the first comparison in that category."""
    if not judgements:
        return UNTESTABLE, "no comparison"
    for cat in _PRECEDENCE:
        for c, why in judgements:
            if c == cat:
                return c, why
    raise ValueError(f"unknown categories {judgements}")


# --- from sidecars ------------------------------------------------------------------------------------


def published_pct(study: dict, metric: str, variant: str, reference: str, value) -> float | None:
    """The seed's own difference of `variant` from `reference` in % at one axis value (None
    if it quotes not both); `{metric}_gain_pct` where only a gain is quoted."""
    pub = study.get("published") or {}

    def get(v):
        d = (pub.get(metric) or {}).get(v) or {}
        keys = [value, str(value)] + ([int(value)] if str(value).lstrip("-").isdigit() else [])
        x = next((d[k] for k in keys if k in d), None)
        return None if x is None else float(x)

    a, b = get(variant), get(reference)
    if a is not None and b:
        return 100.0 * (a - b) / b
    gain = (pub.get(f"{metric}_gain_pct") or {}).get(variant)
    return None if gain is None else float(gain)


def evidence(claim: Claim, study: dict, testbed: str, side: dict) -> list[tuple[Part, dict, Evidence]]:
    """Every comparison of a claim on one testbed, from that testbed's sidecar."""
    out = []
    metrics = {m["name"] for m in config.for_testbed(study, testbed)["metrics"]}
    run = set(config.testbed_settings(study, testbed)["variants"])
    for part in claim.parts:
        for point in config.claim_points(study, testbed, part.where):
            pid = config.point_id(point)
            for metric in part.metrics:
                if metric not in metrics or not config.metric_applies(
                    next(m for m in study["metrics"] if m["name"] == metric), point
                ):
                    continue
                if part.check:
                    c = (side.get("checks") or {}).get(f"{part.check}/{part.variant}/{pid}/{metric}")
                    ref = part.reference
                else:
                    c = side["cells"].get(f"{part.variant}/{pid}/{metric}/delta")
                    ref = study["variants"][part.variant].get("baseline", study["baseline"])
                direction = part.direction
                if direction in ("better", "worse"):
                    m = next(x for x in study["metrics"] if x["name"] == metric)
                    direction = (1 if m["better"] == "higher" else -1) * (1 if direction == "better" else -1)
                axis_value = next(iter(point.values())) if len(point) == 1 else None
                pub = published_pct(study, metric, part.variant, ref, axis_value) if axis_value is not None else None
                if c is None:
                    absent = [v for v in (part.variant, ref) if v not in run]
                    missing = (
                        f"{' and '.join(latex_escape(study['variants'][v]['label']) for v in absent)} not run on this testbed"
                        if absent
                        else ""
                    )
                    e = Evidence(part.label, None, direction=direction, published=pub, missing=missing)
                elif c.get("test") == "untestable":
                    e = Evidence(part.label, None, direction=direction, published=pub, missing=c.get("reason", ""))
                else:
                    margin = c.get("margin_pct") or part.margin_pct or side.get("margin_pct")
                    e = Evidence(
                        part.label,
                        c.get("value"),
                        c.get("pct_low"),
                        c.get("pct_high"),
                        c.get("significant"),
                        c.get("equivalent"),
                        direction,
                        pub,
                        margin,
                        exact=c.get("test") == "exact",
                    )
                out.append((part, {"point": point, "metric": metric, "cell": c}, e))
    return out


def _controlled(claim: Claim, study: dict, side: dict, where: dict, cat: str, why: str) -> tuple[str, str]:
    """An equivalence shown where the study's A/A control is not shown equivalent (at the same
    point and metric) is not evidence of no effect: the testbed's own spread is not ruled out."""
    variant, reference = claim.control
    c = side["cells"].get(f"{variant}/{config.point_id(where['point'])}/{where['metric']}/delta") or {}
    if c.get("equivalent"):
        return cat, why
    return UNTESTABLE, (
        f"{why}, but the A/A control ({latex_escape(study['variants'][variant]['label'])} against "
        f"{latex_escape(study['variants'][reference]['label'])}, the same kernel) is not shown equivalent there"
    )


def _short(m: dict) -> str:
    """A metric's label without its parenthesis, for a crowded cell."""
    return latex_escape((m.get("label") or m["name"]).split(" (")[0])


def _where(study: dict, where: dict) -> str:
    m = next(x for x in study["metrics"] if x["name"] == where["metric"])
    point = ", ".join(f"{latex_escape(a)}={latex_escape(v)}" for a, v in where["point"].items())
    return f"{_short(m)} at {point}"


def _item_text(study: dict, part: Part, where: dict, e: Evidence) -> str:
    if e.value is None:
        return f"{_where(study, where)}, {e.missing or 'no result'}"
    star = "$^{*}$" if e.significant else ""
    eq = "$^{\\approx}$" if e.equivalent else ""
    pub = f" (published {fmt_signed(e.published)})" if e.published is not None else ""
    if e.low is None and e.high is None:
        diff = f"{fmt_signed(e.value)}\\,\\%"
    else:  # unbounded ends as infinities; the value to the digits its interval allows
        diff = fmt_value_bracket(e.value, e.low, e.high).replace(" [", "\\,\\% [", 1)
    return f"{_where(study, where)}, {diff}{star}{eq}{pub}"


def _part_summary(study: dict, part: Part, items: list[tuple[dict, Evidence, tuple[str, str]]]) -> str:
    """One line per part: each comparison if there are at most two, else counts."""
    head = f"\\emph{{{latex_escape(part.label)}}}: "
    if len(items) <= 2:
        return head + "; ".join(_item_text(study, part, w, e) for w, e, _ in items)
    n = len(items)
    sig = sum(bool(e.significant) for _, e, _ in items)
    eq = sum(bool(e.equivalent) for _, e, _ in items)
    widest = max((abs(_num(e.value)) for _, e, _ in items if e.value is not None), default=math.nan)
    text = f"{'none' if not sig else ('all' if sig == n else sig)} of {count_word(n)} significant"
    if part.direction != 0 and sig:
        same = sum(j[0] in (REPRODUCED, DIRECTION) for _, _, j in items)
        inside = sum(j[0] == REPRODUCED for _, _, j in items)
        text += f" ({'none' if not same else same} in the claimed direction"
        text += f", {inside} with the published size inside the interval)" if same and inside else ")"
    if part.direction == 0 and any(e.margin_pct for _, e, _ in items):
        margin = next(e.margin_pct for _, e, _ in items if e.margin_pct)
        text += f", {'none' if not eq else eq} equivalent within $\\pm${margin:g}\\,\\%"
    if math.isfinite(widest):
        text += f"; largest $|\\Delta|$ {widest:.1f}\\,\\%"
    return head + text


@dataclass
class Row:
    claim: Claim
    results: dict[str, tuple[str, str, str]]  # testbed -> (category, why, result text)
    cells: dict[str, list[dict]]  # testbed -> the cells behind it
    # testbed -> why an untestable verdict is untestable: "design" (the study file says the testbed
    # cannot show the effect), "records" (no records of the registered design yet), "testbed" (the
    # study does not run there), "evidence" (the comparisons cannot resolve it)
    untestable_kind: dict[str, str] = field(default_factory=dict)


def _status(study: dict, s: str, tb: str, pairs: set[tuple[str, str]]) -> str | None:
    """Why a (study, testbed) has no result in this paper, or None if it has one."""
    if tb not in study["testbeds"]:
        return f"the study does not run on the {tb} testbed"
    if (s, tb) not in pairs:
        return (
            "no records of the current study definition and registered design (the shipped records "
            "were made before it was registered, or under another design)"
        )
    return None


def build(
    studies: dict[str, dict],
    testbeds: list[str],
    pairs: list[tuple[str, str]],
    paper_dir: Path,
) -> list[Row]:
    """One row per study in `studies` with a claim; each reported testbed judged from its sidecar."""
    pairs_set = set(pairs)
    rows = []
    for claim in filter(None, (claim_of(s) for s in studies.values())):
        study = studies[claim.study]
        row = Row(claim, {}, {})
        for tb in testbeds:
            missing = _status(study, claim.study, tb, pairs_set)
            if missing:
                row.results[tb] = (UNTESTABLE, missing, "--")
                row.untestable_kind[tb] = "testbed" if tb not in study["testbeds"] else "records"
                row.cells[tb] = []
                continue
            path = paper_dir / "generated" / claim.study / f"{tb}-cells.json"
            try:
                side = json.loads(path.read_text())
                side["cells"]  # noqa: B018 (a sidecar must have cells)
            except FileNotFoundError:
                raise VerdictError(f"{path}: no such sidecar (run the {claim.study} notebook first)") from None
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise VerdictError(f"{path}: not a table sidecar ({type(e).__name__}: {e})") from None
            ev = evidence(claim, study, tb, side)
            judged = []
            for part, w, e in ev:
                cat, why = judge(e)
                if cat == REPRODUCED and e.direction == 0 and claim.control:
                    cat, why = _controlled(claim, study, side, w, cat, why)
                judged.append((part, w, e, (cat, f"for {_where(study, w)}, {why}")))
            cat, why = combine([j for *_, j in judged])
            if cat == UNTESTABLE:
                # too few boots so far (a design not yet fully measured) is not the evidence failing
                row.untestable_kind[tb] = "boots" if TOO_FEW_UNITS_MARK in why else "evidence"
            if tb in claim.untestable:
                cat, why = UNTESTABLE, claim.untestable[tb]
                row.untestable_kind[tb] = "design"
            lines = []
            for part in claim.parts:
                items = [(w, e, j) for p, w, e, j in judged if p is part]
                if items:
                    lines.append(_part_summary(study, part, items))
            row.results[tb] = (cat, why, "; ".join(lines) or "--")
            row.cells[tb] = [
                {
                    "part": p.label,
                    "point": w["point"],
                    "metric": w["metric"],
                    "category": j[0],
                    "why": j[1],
                    "value": e.value,
                    "low": e.low,
                    "high": e.high,
                    "significant": e.significant,
                    "equivalent": e.equivalent,
                    "published": e.published,
                    "source": f"{claim.study}-{tb}:"
                    + (
                        f"checks/{p.check}/{p.variant}/{config.point_id(w['point'])}/{w['metric']}"
                        if p.check
                        else f"{p.variant}/{config.point_id(w['point'])}/{w['metric']}/delta"
                    ),
                    "runs": (w["cell"] or {}).get("runs", []) + (w["cell"] or {}).get("baseline_runs", []),
                }
                for p, w, e, j in judged
            ]
        rows.append(row)
    return rows


class _Published(dict):
    """str.format_map lookup of `{metric/variant/value}` and `{metric/variant/value/pct}`."""

    def __init__(self, study: dict):
        super().__init__()
        self.study = study

    def __missing__(self, key: str) -> str:
        parts = key.split("/")
        pub = self.study.get("published") or {}
        try:
            if parts[0] == "label" and len(parts) == 2:
                return re.sub(r"(\d) us\b", r"\1\\,\\textmu s", latex_escape(self.study["variants"][parts[1]]["label"]))
            if parts[-1] == "pct":
                metric, variant, value = parts[:3]
                base = self.study["variants"][variant].get("baseline", self.study["baseline"])
                x = published_pct(self.study, metric, variant, base, value)
                if x is None:
                    raise KeyError(key)
                return fmt_signed(x)
            d = pub
            for p in parts:
                d = d.get(p, d.get(int(p)) if p.isdigit() else None) if isinstance(d, dict) else None
            if d is None or isinstance(d, dict):
                raise KeyError(key)
            return f"\\num{{{d}}}"
        except (KeyError, ValueError) as e:
            raise VerdictError(f"{self.study.get('_file', self.study['study'])}: published has no {key}") from e


def claim_text(claim: Claim, study: dict) -> str:
    return claim.text.format_map(_Published(study))


# --- robustness over the sensitivity sweep ------------------------------------------------------------


@dataclass(frozen=True)
class Robustness:
    """How a claim's sim verdict fares over the sensitivity sweep's settings: at each setting the
    claim's comparisons the sweep makes are judged by the same rules (judge, combine); `holds`
    counts the settings whose verdict is the table's. `robust` only when it holds at every one."""

    holds: int
    settings: int
    conclusions: tuple[str, ...]
    changed_to: tuple[str, ...]  # the other verdicts it takes, in _PRECEDENCE order

    @property
    def share(self) -> float:
        return self.holds / self.settings if self.settings else math.nan

    @property
    def robust(self) -> bool:
        return self.settings > 0 and self.holds == self.settings


# a spread this small (relative to the effect) is a deterministic model's: the difference is exact
_EXACT_REL = 1e-9


def _sweep_evidence(study: dict, c, r: dict) -> Evidence:
    """One conclusion at one setting (a row of the sensitivity sidecar's effects) as Evidence."""
    direction = {"higher": +1, "lower": -1, "equivalent": 0}[c.claim]
    value, low, high = (_num(r.get(k)) for k in ("effect_pct", "low", "high"))
    if not math.isfinite(value):
        return Evidence(c.label, None, direction=direction, missing="no result")
    exact = math.isfinite(low) and math.isfinite(high) and high - low <= _EXACT_REL * max(1.0, abs(value))
    axis_value = next(iter(c.point.values())) if len(c.point) == 1 else None
    pub = (
        published_pct(study, c.metric, c.variant, c.reference, axis_value)
        if direction and axis_value is not None
        else None
    )
    return Evidence(
        c.label,
        value,
        low if math.isfinite(low) else None,
        high if math.isfinite(high) else None,
        r.get("outcome") in ("higher", "lower"),
        r.get("outcome") == "equivalent",
        direction,
        pub,
        c.margin_pct,
        exact=exact,
    )


def sweep_robustness(rows: list[Row], studies: dict[str, dict], sweep_cells: dict, sweep) -> dict[str, Robustness]:
    """study -> its sim verdict's Robustness, from the sensitivity sidecar's per-setting effects
    (`sweep_cells["effects"][study]`) and the sweep's conclusions (`sweep.studies[study]`)."""
    out = {}
    for row in rows:
        s = row.claim.study
        if "sim" not in row.results or s not in sweep.studies or s not in (sweep_cells.get("effects") or {}):
            continue
        verdict = row.results["sim"][0]
        plan = sweep.studies[s]
        by_setting: dict[str, dict[str, dict]] = {}
        for r in sweep_cells["effects"][s]:
            by_setting.setdefault(r["setting"], {})[r["conclusion"]] = r
        holds, other = 0, set()
        for effects in by_setting.values():
            judged = [judge(_sweep_evidence(studies[s], c, effects[c.id])) for c in plan.conclusions if c.id in effects]
            cat, _ = combine(judged)
            if cat == verdict:
                holds += 1
            else:
                other.add(cat)
        out[s] = Robustness(
            holds,
            len(by_setting),
            tuple(c.id for c in plan.conclusions),
            tuple(c for c in _PRECEDENCE if c in other),
        )
    return out


def robustness_text(rb: Robustness | None) -> str:
    """The verdict table's robustness cell: the share of the sweep's settings at which the verdict
    holds, and the word the text uses (robust only at every setting, else fragile)."""
    if rb is None or not rb.settings:
        return "--"
    pct = 100.0 * rb.share
    share = f"{pct:.0f}" if pct >= 1 or pct == 0 else "<1"
    if rb.robust:
        return f"robust: all {rb.settings} settings"
    return rf"\textbf{{fragile}}: {share}\,\% ({rb.holds} of {rb.settings})"


def counts_phrase(categories: list[str]) -> str:
    """The verdicts of one testbed in words, only the categories that occur: "two are reproduced
    in direction only, three not reproduced and one untestable here"; "all six are untestable
    here" (never "no are" or a list of zeros)."""
    n = len(categories)
    counts = [(c, sum(x == c for x in categories)) for c in CATEGORIES]
    counts = [(c, k) for c, k in counts if k]
    if len(counts) == 1 and n > 1:
        return f"all {count_word(n)} are {counts[0][0]}"
    items = []
    for i, (c, k) in enumerate(counts):
        verb = (" is" if k == 1 else " are") if i == 0 else ""
        items.append(f"{count_word(k)}{verb} {c}")
    return word_list(items) if items else "none is judged"


def robustness_macros(rows: list[Row], robust: dict[str, Robustness]) -> dict[str, str]:
    """The text's words for the sweep column: per claim `STUDY/sim/robust` (robust or fragile) and
    `STUDY/sim/holds` (the share), the counts, and one sentence that names the fragile verdicts
    (`sim/robustness-sentence`: never a list of none)."""
    out = {}
    fragile, sure = [], []
    for row in rows:
        rb = robust.get(row.claim.study)
        if rb is None or not rb.settings:
            continue
        s = row.claim.study
        out[f"{s}/sim/robust"] = "robust" if rb.robust else "fragile"
        out[f"{s}/sim/holds"] = rf"{100.0 * rb.share:.0f}\,\%"
        out[f"{s}/sim/settings"] = str(rb.settings)
        (sure if rb.robust else fragile).append((row, rb))
    out["sim/robust/n"] = str(len(sure))
    out["sim/fragile/n"] = str(len(fragile))
    out["sim/robust/n-word"] = count_word(len(sure))
    out["sim/fragile/n-word"] = count_word(len(fragile))
    out["sim/fragile/of-n"] = of_n(len(fragile), len(sure) + len(fragile))
    # the abstract's finding, true whichever way the sweep comes out
    out["sim/fragile-finding"] = (
        f"shows {of_n(len(fragile), len(sure) + len(fragile))} verdicts on the model to be fragile: another "
        "plausible workload gives another verdict, so a fragile verdict indicts the model's guesses as much as "
        "the published claim"
        if fragile
        else "leaves every verdict on the model as it is, so none of them hinges on one guessed workload value"
    )
    total = len(sure) + len(fragile)
    if not fragile:
        sentence = f"Each of the {count_word(total)} verdicts on the model holds at every setting of the sweep."
        short = sentence
    else:
        names = word_list(
            rf"{latex_escape(r.claim.title)} (\emph{{{r.results['sim'][0]}}}, {100.0 * rb.share:.0f}\,\%)"
            for r, rb in fragile
        )
        they = "it holds" if len(fragile) == 1 else "they hold"
        sentence = (
            f"{'The verdict' if len(fragile) == 1 else 'The verdicts'} on {names} "
            f"{'is' if len(fragile) == 1 else 'are'} fragile: {they} only at the share of the sweep's settings "
            f"given in parentheses"
        )
        robust_names = word_list(_label(r.claim.study) for r, _ in sure) if sure else ""
        if sure:
            sentence += (
                f"; {'the verdict' if len(sure) == 1 else 'the verdicts'} on {robust_names} "
                f"{'holds' if len(sure) == 1 else 'hold'} at every setting."
            )
        else:
            sentence += ", and no verdict on the model holds at every setting."
        # the same finding in one clause, for the sections that point back to it (the full
        # sentence stands once, in the verdicts section)
        frag = of_n(len(fragile), total, "verdicts on the model")
        short = (
            f"{frag[0].upper() + frag[1:]} {'is' if len(fragile) == 1 and total > 1 else 'are'} fragile under the "
            r"sweep (Section~\ref{sec:verdicts})"
            + (f"; {'that' if len(sure) == 1 else 'those'} on {robust_names} "
               f"{'holds' if len(sure) == 1 else 'hold'} at every setting." if sure else ".")
        )  # fmt: skip
    out["sim/robustness-short"] = short
    out["sim/robustness-sentence"] = sentence
    return out


# --- output -------------------------------------------------------------------------------------------


def _slug(cat: str) -> str:
    return cat.replace(" ", "-")


def seed_macros(studies: dict[str, dict]) -> dict[str, str]:
    """Every published figure of every study file, for the text: `seed/STUDY/METRIC/VARIANT/VALUE`
    and `.../pct` (the difference from the variant's baseline in %), `seed/STUDY/METRIC_gain_pct/V`;
    and the study's own design: `study/STUDY/workload/KEY`, `study/STUDY/points/AXIS`,
    `study/STUDY/runs`, `study/STUDY/margin`."""
    from schedlab.report.notebook import _range

    out = {}
    for s, st in studies.items():
        for metric, by_var in (st.get("published") or {}).items():
            if not isinstance(by_var, dict):
                continue
            for v, vals in by_var.items():
                if isinstance(vals, dict):
                    base = st["variants"].get(v, {}).get("baseline", st["baseline"])
                    for x, y in vals.items():
                        out[f"seed/{s}/{metric}/{v}/{x}"] = f"\\num{{{y}}}"
                        pct = published_pct(st, metric, v, base, x) if v != base else None
                        if pct is not None:
                            out[f"seed/{s}/{metric}/{v}/{x}/pct"] = fmt_signed(pct)
                        for ref in by_var:  # against every other quoted variant: `.../pct-REF`
                            other = published_pct(st, metric, v, ref, x) if ref not in (v, base) else None
                            if other is not None:
                                out[f"seed/{s}/{metric}/{v}/{x}/pct-{ref}"] = fmt_signed(other)
                elif isinstance(vals, (int, float)):
                    out[f"seed/{s}/{metric}/{v}"] = f"{vals:g}"
        for k, v in (st.get("workload") or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[f"study/{s}/workload/{k}"] = str(v)
        for a, vals in st["axes"].items():
            out[f"study/{s}/points/{a}"] = _range(vals)
        for v, d in st["variants"].items():
            out[f"study/{s}/variant/{v}"] = re.sub(r"(\d) us\b", r"\1\\,\\textmu s", latex_escape(d["label"]))
        # all variants in one phrase: "delay 0, 250, 500, 1000 and 2000 us" where the labels differ only
        # in a number, else their labels listed
        labels = [d["label"] for d in st["variants"].values()]
        parts = [re.fullmatch(r"(.*?)(\d+) (\S+)", x) for x in labels]
        if all(parts) and len({(m[1], m[3]) for m in parts}) == 1:
            phrase = f"{parts[0][1]}{word_list(m[2] for m in parts)} {parts[0][3]}"
        else:
            phrase = word_list(labels)
        out[f"study/{s}/variants"] = re.sub(r"(\d) us\b", r"\1\\,\\textmu s", latex_escape(phrase))
        out[f"study/{s}/runs"] = str(st["runs"])
        out[f"study/{s}/warmup"] = str(st["warmup"])
        if st.get("equivalence_margin_pct") is not None:
            out[f"study/{s}/margin"] = f"{st['equivalence_margin_pct']:g}"
        for m in st["metrics"]:
            out[f"study/{s}/metric/{m['name']}"] = metric_text(m)
            out[f"study/{s}/label/{m['name']}"] = latex_escape(m.get("label") or m["name"])
    return out


def _write_prefixed(path: Path, macros: dict[str, str]) -> None:
    lines = ["% generated by schedlab.report.verdicts; do not edit"]
    for k, v in sorted(macros.items()):
        lines.append(rf"\expandafter\def\csname sv@{k}\endcsname{{{v}}}")
    atomic_write(path, "\n".join(lines) + "\n")


def _label(study: str) -> str:
    from schedlab.report.methods import study_label

    return study_label(study)


def _inline_label(study: str) -> str:
    """ "S2-native", not "S2 (native)": a study's name where it stands inside parentheses."""
    return re.sub(r" \((\w+)\)$", r"-\1", _label(study))


def coverage_tex(
    studies: dict[str, dict], all_testbeds: list[str], reported: list[str], pairs: set, measured: list[str]
) -> Table:
    """Every study on every testbed the study files name: what this paper reports of it (a Table)."""
    cols = [("study", "l")] + [(latex_escape(tb), "l") for tb in all_testbeds]
    rows = []
    for s, st in studies.items():
        row = [f"{_label(s)}: {latex_escape(display_title(st))}"]
        for tb in all_testbeds:
            if tb not in st["testbeds"]:
                row.append("--")
            elif (s, tb) in pairs:
                row.append("measured" if tb in measured else "shipped records")
            elif tb in reported:
                row.append("not covered")
            else:
                row.append("ready, not run")
        rows.append(row)
    caption = (
        r"What this paper reports of every study on every testbed the study files name. "
        r"``measured'': measured by this build; ``shipped records'': re-derived from the raw records in "
        r"\texttt{data/raw/TESTBED} (measured earlier by the same pipeline); ``not covered'': the shipped "
        r"records do not cover the current study definition, so the paper omits it; ``ready, not run'': "
        r"the testbed's code runs the study (tested against a virtual host) but no results of it ship; "
        r"--: the study does not run there. One study on one testbed: \texttt{snakemake -c2 "
        r"paper/generated/STUDY/TESTBED-table.tex}."
    )
    return Table.from_rows(cols, rows, None, caption, "tab:coverage")


def setups_tex(studies: dict[str, dict], pairs: list[tuple[str, str]]) -> str:
    """The setup-as-run paragraphs of every reported (study, testbed), for the appendix."""
    out = ["% generated by schedlab.report.verdicts: the setup of every reported study, per testbed"]
    for s, st in studies.items():
        tbs = [tb for ss, tb in pairs if ss == s]
        if not tbs:
            continue
        out.append(f"\\subsection*{{{_label(s)}: {latex_escape(display_title(st))}}}")
        out += [f"\\input{{generated/{s}/{tb}-setup.tex}}" for tb in tbs]
    return "\n".join(out) + "\n"


def write(
    rows: list[Row],
    studies: dict[str, dict],
    testbeds: list[str],
    pairs: list[tuple[str, str]],
    paper_dir: Path,
    all_testbeds: list[str] | None = None,
    measured: list[str] | None = None,
    robust: dict[str, Robustness] | None = None,
    out: Path | None = None,
) -> dict:
    out = Path(out) if out else paper_dir / "generated" / "verdicts"
    out.mkdir(parents=True, exist_ok=True)
    # the folder as a command names it: paper/generated/verdicts, or .../verdicts/sweep for the
    # paper's table with the robustness column (the caption's regenerate command names its own file)
    try:
        where = "paper/" + out.resolve().relative_to(Path(paper_dir).resolve()).as_posix()
    except ValueError:
        where = out.as_posix()
    hashes = []
    for s, tb in sorted(pairs):
        p = paper_dir / "generated" / s / f"{tb}-cells.json"
        if p.exists():
            hashes.append(f"{s}-{tb} {json.loads(p.read_text()).get('data_hash', '')}\n")
    data_hash = hashlib.sha256("".join(hashes).encode()).hexdigest()

    rag = r">{\raggedright\arraybackslash}"  # array's column prefix (siunitx loads array)
    robust = robust or {}
    # The paper's table: one line per claim at body size; the reasons and comparisons behind each
    # verdict are the evidence tables' (one per testbed, in the appendix)
    cols = [("claim", rag + "p{2.2cm}"), ("what is compared", rag + "p{4.6cm}")]
    for tb in testbeds:
        cols.append((f"{latex_escape(tb)} verdict", rag + "p{2.5cm}"))
        if tb == "sim" and robust:
            cols.append((r"sim verdict over the sweep", rag + "p{2.6cm}"))
    table_rows, cells = [], {}
    for i, row in enumerate(rows):
        study = studies[row.claim.study]
        parts = "; ".join(latex_escape(p.label) for p in row.claim.parts)
        cells_row = [latex_escape(row.claim.title), parts]
        col = 2
        for tb in testbeds:
            cat, why, result = row.results[tb]
            rb = robust.get(row.claim.study) if tb == "sim" else None
            # an untestable cell says why in a word: the testbed cannot show the effect, or the
            # records are not made yet, or the study does not run there (never all alike)
            text = cat + (f" ({_UNTESTABLE_SHORT[row.untestable_kind[tb]]})" if tb in row.untestable_kind else "")
            cells_row.append(text)
            cells[f"{row.claim.study}/{tb}"] = {
                "row": i,
                "col": col,
                "text": text,
                "value": cat,
                "stat": "verdict by the decision rules of schedlab.report.verdicts",
                "why": why,
                "comparisons": row.cells[tb],
                "runs": sorted({r for c in row.cells[tb] for r in c["runs"]}),
            }
            col += 1
            if tb == "sim" and robust:
                rtext = robustness_text(rb)
                cells_row.append(rtext)
                cells[f"{row.claim.study}/{tb}/robustness"] = {
                    "row": i,
                    "col": col,
                    "text": rtext,
                    "value": None if rb is None else {"holds": rb.holds, "settings": rb.settings},
                    "stat": "settings of the sensitivity sweep at which the claim's comparisons, judged by the "
                    "same rules, give the table's verdict (robust: every setting)",
                    "conclusions": [] if rb is None else list(rb.conclusions),
                    "source": "sensitivity/cells.json:effects",
                    "runs": [],
                }
                col += 1
        table_rows.append(cells_row)
    caption = (
        r"Verdicts: each seed's claim against each testbed, decided by the rules of Section~\ref{sec:verdicts} "
        r"from the same cells as the study tables (a non-significant difference is never reproduced; no "
        r"difference only by an equivalence test)."
        + (
            r" Sim verdict over the sweep: the share of the sensitivity sweep's settings (the shipped one, each "
            r"uncalibrated workload parameter at either end of its range, and the joint points; "
            r"Appendix~\ref{app:sensitivity}) at which the claim's comparisons, judged by the same rules, give "
            r"the same verdict; \emph{fragile} where any setting gives another."
            if robust
            else ""
        )
        + r" The reasons and the comparisons behind each verdict are in Tables~\ref{tab:verdict-evidence-"
        + testbeds[0]
        + r"}"
        + ("" if len(testbeds) == 1 else r"--\ref{tab:verdict-evidence-" + testbeds[-1] + "}")
        + r". Regenerate: \texttt{snakemake -c2 "
        + latex_escape(where)
        + rf"/table.tex}}; sidecars \texttt{{sha256:{data_hash[:16]}}}."
    )
    side = write_sidecar(
        out / "cells.json",
        {"table": "verdicts", "data_hash": data_hash, "testbeds": testbeds, "cells": cells},
    )
    # the paper's table and the report's page of it (table.html), from one table model
    Table.from_rows(cols, table_rows, None, caption, "tab:verdicts", preamble=r"\setlength{\tabcolsep}{4pt}").write(
        out / "table.tex", sidecar=side, title="Verdicts: each seed's claim against each testbed"
    )
    # the evidence behind the verdicts, one table per testbed (appendix)
    for tb in testbeds:
        ev_rows = []
        for row in rows:
            study = studies[row.claim.study]
            cat, why, result = row.results[tb]
            ev_rows += [
                [
                    f"{latex_escape(row.claim.title)}: {claim_text(row.claim, study)}",
                    f"\\textbf{{{cat}}}: {why}." + (f"\\newline {result}" if result != "--" else ""),
                ],
                None,
            ]
        Table.from_rows(
            [
                ("the seed's claim", rag + "p{5.2cm}"),
                ("verdict, its reason and the comparisons behind it", rag + "p{10.2cm}"),
            ],
            ev_rows,
            None,
            rf"The evidence behind the {latex_escape(tb)} column of Table~\ref{{tab:verdicts}}: each claim's verdict, "
            r"its reason (the deciding comparison) and every comparison the claim rests on. Differences in \% with "
            r"the interval at the row's Holm-adjusted level; $^{*}$ significant, $^{\approx}$ equivalent "
            r"(Holm-adjusted). Every cell lists its comparisons and runs in \texttt{"
            + latex_escape(where)
            + "/cells.json}.",
            f"tab:verdict-evidence-{tb}",
        ).write(out / f"evidence-{tb}.tex", title=f"The evidence behind the {tb} verdicts")
    macros = {"n": str(len(rows))}
    for tb in testbeds:
        for cat in CATEGORIES:
            macros[f"{tb}/{_slug(cat)}"] = str(sum(r.results[tb][0] == cat for r in rows))
    for row in rows:
        for tb in testbeds:
            cat, why, _ = row.results[tb]
            macros[f"{row.claim.study}/{tb}"] = cat
            macros[f"{row.claim.study}/{tb}/why"] = why
    macros["n-word"] = count_word(len(rows))
    for tb in testbeds:
        for cat in CATEGORIES:
            k = sum(r.results[tb][0] == cat for r in rows)
            macros[f"{tb}/{_slug(cat)}-word"] = count_word(k)
            macros[f"{tb}/{_slug(cat)}-claims"] = counted(k, "claim")
            macros[f"{tb}/{_slug(cat)}-of-n"] = of_n(k, len(rows))
    for tb in testbeds:
        macros[f"{tb}/counts"] = counts_phrase([r.results[tb][0] for r in rows])
        # what the rules do, for the abstract and the conclusion, without the verdicts no claim got
        k = {cat: sum(r.results[tb][0] == cat for r in rows) for cat in CATEGORIES}
        # a verdict that does not reproduce a claim is no refutation where the sweep calls it fragile
        rb_tb = robust if tb == "sim" else {}
        not_fragile = sum(
            r.results[tb][0] == NOT and r.claim.study in rb_tb and not rb_tb[r.claim.study].robust for r in rows
        )
        not_text = "do not reproduce {}"
        if not_fragile:
            not_text += (
                " (fragile)"
                if k[NOT] == 1
                else f" ({'all' if not_fragile == k[NOT] else count_word(not_fragile)} of them fragile)"
            )
        does = [
            (k[REPRODUCED], "reproduce {}"),
            (k[DIRECTION], "reproduce {} only in direction"),
            (k[NOT], not_text),
        ]
        parts = [what.format(counted(n, "claim")) for n, what in does if n]
        macros[f"{tb}/rules-decide"] = word_list(parts) if parts else "decide no claim"
        # a claim whose study does not run on the testbed is not left untestable by it: said apart
        absent = [r for r in rows if r.untestable_kind.get(tb) == "testbed"]
        if k[UNTESTABLE] - len(absent):
            parts.append(f"leave {counted(k[UNTESTABLE] - len(absent), 'claim')} untestable")
        names = word_list(_inline_label(r.claim.study) for r in absent) if absent else ""
        runs_not = f"; {names} {'does' if len(absent) == 1 else 'do'} not run there" if absent else ""
        macros[f"{tb}/rules-do"] = (word_list(parts) if parts else "decide no claim") + runs_not
        macros.update(untestable_macros(rows, tb))
    if robust:
        macros.update(robustness_macros(rows, robust))
    write_macros(out / "macros.tex", "verdicts", macros)
    _write_prefixed(out / "seeds.tex", seed_macros(studies))
    coverage_tex(studies, all_testbeds or testbeds, testbeds, set(pairs), measured or testbeds).write(
        out / "coverage.tex", title="Every study on every testbed"
    )
    atomic_write(out / "setups.tex", setups_tex(studies, pairs))
    return side


_UNTESTABLE_SHORT = {
    "design": "by construction",
    "records": "no records of its design yet",
    "boots": "too few boots so far",
    "testbed": "does not run there",
    "evidence": "not resolved",
}


def _shared_subject(reasons: list[str]) -> list[str]:
    """Reasons joined by "and" name a subject they share once: "TCG models no caches and gives
    remote memory no extra cost", not "... and TCG gives ..."."""
    out = []
    for r in dict.fromkeys(reasons):
        first = out[0].split(" ", 1)[0] if out else None
        out.append(r.split(" ", 1)[1] if first and r.startswith(first + " ") and " " in r else r)
    return out


def untestable_macros(rows: list[Row], tb: str) -> dict[str, str]:
    """Why the untestable verdicts of one testbed are untestable, split by cause, so that the text
    never blames the testbed for records not yet made: `TB/untestable-finding` (the abstract's
    clause) and `TB/untestable-sentence` (the conclusion's), each naming only the causes that occur."""
    by_kind: dict[str, list[str]] = {}
    reasons = []  # the study files' own reasons, up to their consequence ("TCG models no caches")
    for r in rows:
        if r.results.get(tb, ("",))[0] == UNTESTABLE:
            kind = r.untestable_kind.get(tb, "evidence")
            by_kind.setdefault(kind, []).append(_inline_label(r.claim.study))
            if kind == "design":
                reasons.append(re.split(r",? so\b|\(", r.claim.untestable[tb])[0].strip().rstrip(","))

    def claims(kind: str) -> str:
        names = by_kind[kind]
        return f"{counted(len(names), 'claim')} ({word_list(names)})"

    def verb(kind: str, one: str, many: str) -> str:
        return one if len(by_kind[kind]) == 1 else many

    short, long = [], []
    if "design" in by_kind:
        short.append(f"{claims('design')} {verb('design', 'is', 'are')} untestable by construction")
        long.append(
            f"{claims('design')} {verb('design', 'is', 'are')} untestable by construction, since "
            + " and ".join(_shared_subject(reasons))
        )
    if "records" in by_kind:
        short.append(
            f"{claims('records')} {verb('records', 'awaits', 'await')} re-measurement under "
            f"{verb('records', 'its', 'their')} registered design{verb('records', '', 's')}"
        )
        long.append(
            f"{claims('records')} {verb('records', 'has', 'have')} no records under "
            f"{verb('records', 'its', 'their')} registered design{verb('records', '', 's')} yet"
        )
    if "boots" in by_kind:
        short.append(f"{claims('boots')} {verb('boots', 'has', 'have')} too few boots measured so far")
        long.append(
            f"{claims('boots')} {verb('boots', 'is', 'are')} measured so far in fewer boots per cell than "
            f"{verb('boots', 'its', 'their')} registered design{verb('boots', '', 's')} plan"
            f"{verb('boots', 's', '')} and a test needs"
        )
    if "evidence" in by_kind:
        short.append(f"{claims('evidence')} cannot be resolved from the boots measured")
        long.append(f"the comparisons of {claims('evidence')} cannot resolve the claimed effect")
    if "testbed" in by_kind:
        long.append(f"{claims('testbed')} {verb('testbed', 'does', 'do')} not run there")
    return {
        f"{tb}/untestable-finding": word_list(short) if short else "no claim is left untestable",
        # "; " between the causes: a cause's own "since ... and ..." must not run into the next
        f"{tb}/untestable-sentence": ("; ".join(long)[0].upper() + "; ".join(long)[1:] + ".") if long else "",
    }


def _read_robustness(rows, studies, cells_path: Path, config_path, studies_dir) -> dict[str, Robustness]:
    from schedlab.sweep import load

    try:
        cells = json.loads(cells_path.read_text())
        cells["effects"]  # noqa: B018 (the sidecar must have the per-setting effects)
    except FileNotFoundError:
        raise VerdictError(f"{cells_path}: no such sidecar (run the sensitivity notebook first)") from None
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise VerdictError(f"{cells_path}: not the sensitivity sidecar ({type(e).__name__}: {e})") from None
    sweep = load(config_path, studies_dir) if config_path else load(studies_dir=studies_dir)
    return sweep_robustness(rows, studies, cells, sweep)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="The paper's verdict table, from the study tables' sidecars.")
    p.add_argument("--paper-dir", default="paper")
    p.add_argument("--studies-dir", default="config/studies")
    p.add_argument("--study", action="append", required=True, help="a study of the paper (repeat)")
    p.add_argument("--pair", action="append", default=[], metavar="STUDY:TESTBED", help="a reported result")
    p.add_argument("--testbed", action="append", required=True, help="a testbed the paper reports (repeat)")
    p.add_argument("--measured", action="append", default=None, metavar="TESTBED")
    p.add_argument("--sensitivity", metavar="CELLS", help="the sensitivity sidecar (its per-setting effects)")
    p.add_argument("--sensitivity-config", metavar="YAML", help="the sweep's configuration (its conclusions)")
    p.add_argument("--out-dir", metavar="DIR", help="where to write (default PAPER/generated/verdicts)")
    a = p.parse_args(argv)
    try:
        pairs = []
        for x in a.pair:
            s, sep, tb = x.partition(":")
            if not sep or not s or not tb:
                raise VerdictError(f"--pair {x!r}: expected STUDY:TESTBED")
            pairs.append((s, tb))
        studies = {}
        for s in a.study:
            path = Path(a.studies_dir) / f"{s}.yaml"
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", s) or not path.is_file():
                raise VerdictError(f"--study {s!r}: no study file {path}")
            studies[s] = config.load_study(path)
        for s, _ in pairs:
            if s not in studies:
                raise VerdictError(f"--pair {s}: not among the --study names")
        all_tbs = list(dict.fromkeys(tb for st in studies.values() for tb in st["testbeds"]))
        rows = build(studies, a.testbed, pairs, Path(a.paper_dir))
        robust = None
        if a.sensitivity:
            robust = _read_robustness(rows, studies, Path(a.sensitivity), a.sensitivity_config, a.studies_dir)
        write(rows, studies, a.testbed, pairs, Path(a.paper_dir), all_tbs, a.measured, robust, a.out_dir)
    except (VerdictError, config.ConfigError, SensitivityError) as e:
        print(f"verdicts: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
