"""The paper's tables: one tabular renderer (booktabs, siunitx numbers) for the
study tables and the agreement tables, and one study's comparison table built
on it, with the sidecar mapping every cell to its runs and the text's macros."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from schedlab import config
from schedlab.core.files import atomic_write
from schedlab.report.data import data_hash

# the paper's table renderer lives with the table model (LaTeX and HTML of one table)
from schedlab.report.table_model import Table, latex_table, render_tabular  # noqa: F401

_ESC = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}


def latex_escape(s) -> str:
    """Text-mode escaping of every LaTeX special character."""
    return "".join(_ESC.get(ch, ch) for ch in str(s))


def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _decimals(err: float, sig: int = 2) -> int:
    """Decimal places that show `err` to `sig` significant digits (the value follows)."""
    if not _finite(err) or err <= 0:
        return 2
    return max(0, sig - 1 - int(math.floor(math.log10(abs(err)))))


def _fixed(x: float, d: int) -> str:
    s = f"{x:.{d}f}"
    return s.lstrip("-") if float(s) == 0 else s  # no "-0.0"


# a difference shows at most this many significant digits, however narrow its interval: a
# fourth digit of a -90.861 % says nothing a reader uses
MAX_SIG_DELTA = 3


def _exp(x: float, sig: int) -> int:
    """The decimal exponent of the last of `sig` significant digits of `x` (x != 0)."""
    return int(math.floor(math.log10(abs(x)))) - (sig - 1)


def _delta_exp(value: float, widths: list[float]) -> tuple[int, int]:
    """(exponent of the value's last digit, of the interval halves' last digit): the halves to
    two significant digits of the shorter one (at most four decimals), the value to the same
    place but never past MAX_SIG_DELTA significant digits; one decimal without an interval."""
    if not widths:
        return -1, -1
    e_w = max(_exp(min(widths), 2), -4)
    e_v = max(e_w, _exp(value, MAX_SIG_DELTA)) if value else e_w
    return e_v, e_w


def _at(x: float, e: int) -> str:
    """x rounded to the digit 10**e: "970" (e = 1), "90.9" (e = -1); never "-0"."""
    return _fixed(round(x, -e), max(0, -e))


def fmt_pm(value: float, err: float) -> str:
    """A mean and its symmetric t-interval half-width: \\num{m}\\,$\\pm$\\,\\num{e}."""
    d = _decimals(err)
    if not _finite(err) or err <= 0:
        return rf"\num{{{_fixed(value, d)}}}"
    return rf"\num{{{_fixed(value, d)}}}\,$\pm$\,\num{{{_fixed(err, d)}}}"


def fmt_exact(x: float, sig: int = 6) -> str:
    """A value without spread (a deterministic model's point), to `sig` significant digits and
    no interval: \num{941.49}, never a t-interval over identical runs."""
    if not _finite(x):
        return "--"
    s = np.format_float_positional(float(x), precision=sig, unique=True, fractional=False, trim="-")
    return rf"\num{{{_fixed(float(s), max(0, len(s.split('.')[1]) if '.' in s else 0))}}}"


def fmt_signed(x: float, decimals: int = 1) -> str:
    """A signed number for the text: "+1.2", "$-$1.2" (a real minus), "0.0" (never "-0.0")."""
    if not _finite(x):
        return "--"
    s = _fixed(x, decimals)
    return s if float(s) == 0 else _signed(s if s.startswith("-") else "+" + s)


def fmt_signed_ci(pct: float, low=None, high=None) -> str:
    """A difference for the text to the precision its interval allows (two significant digits of
    the interval's shorter half, as the tables print it; one decimal without an interval)."""
    if not _finite(pct):
        return "--"
    widths = [w for w in (_num_or_nan(high) - pct, pct - _num_or_nan(low)) if math.isfinite(w) and w > 0]
    s = _at(pct, _delta_exp(pct, widths)[0])
    return s if float(s) == 0 else _signed(s if s.startswith("-") else "+" + s)


def _num_or_nan(x) -> float:
    return float(x) if _finite(x) else math.nan


def _end(x, sign: float) -> float:
    """An interval end as a float: None (unbounded) is sign * inf; NaN stays NaN."""
    return sign * math.inf if x is None else float(x)


def _signed(s: str) -> str:
    return r"$-$" + s[1:] if s.startswith("-") else s  # a real minus sign in text


def _half(x: float, e: int) -> str:
    return r"\infty" if math.isinf(x) else rf"\num{{{_at(x, e)}}}"


def fmt_delta(pct: float, low, high, marks: str = "") -> str:
    """A difference with its asymmetric interval, \\num{pct}$^{+a}_{-b}$ (a = high - pct,
    b = pct - low; an unbounded end is \\infty; None is unbounded), then `marks`
    (math) as superscripts."""
    if not _finite(pct):
        return "--"
    low, high = _end(low, -1), _end(high, 1)
    math_part = ""
    if not (math.isnan(low) or math.isnan(high)):
        up, down = max(high - pct, 0.0), max(pct - low, 0.0)
        widths = [w for w in (up, down) if math.isfinite(w) and w > 0]
        e_v, e_w = _delta_exp(pct, widths)
        if up or down:
            math_part = f"^{{+{_half(up, e_w)}}}_{{-{_half(down, e_w)}}}"
    else:
        e_v = -1
    if marks:
        math_part += (r"\," if math_part else "") + "{}^{" + marks + "}"  # \,: a star off the "+a" beside it
    return rf"\num{{{_at(pct, e_v)}}}" + (f"${math_part}$" if math_part else "")


def fmt_bracket(low, high, decimals: int | None = None, value: float | None = None) -> str:
    """ "[lo, hi]" for the text: a real minus sign, $\\infty$ where unbounded (None or
    an infinite end); decimals from the width (two significant digits, at least one), or, given
    the difference `value`, to its last digit as fmt_signed_ci prints it (a -90.9 % beside
    [-90.9, -90.8], not [-90.875, -90.847]: the tables' cells do the same)."""
    low, high = _end(low, -1), _end(high, 1)
    if math.isnan(low) or math.isnan(high):
        return "--"
    if value is not None and _finite(value) and decimals is None:
        widths = [w for w in (high - value, value - low) if math.isfinite(w) and w > 0]
        e_v = _delta_exp(float(value), widths)[0]

        def end_at(x):
            if math.isinf(x):
                return r"$-\infty$" if x < 0 else r"$\infty$"
            return _signed(_at(x, e_v))

        return f"[{end_at(low)}, {end_at(high)}]"
    if decimals is None:
        width = high - low
        decimals = min(max(1, _decimals(width)), 4) if math.isfinite(width) and width > 0 else 1

    def end(x):
        if math.isinf(x):
            return r"$-\infty$" if x < 0 else r"$\infty$"
        return _signed(_fixed(x, decimals))

    return f"[{end(low)}, {end(high)}]"


def fmt_value_bracket(x: float, low, high, stacked: bool = False) -> str:
    """ "+12.3 [4.5, 20.1]" for a table cell: the value and both ends to the decimals the
    interval allows (two significant digits of its shorter half, as fmt_delta), one decimal
    without an interval; `stacked`: the bracket on a second line (a nested tabular), for a
    narrow column."""
    if not _finite(x):
        return "--"
    lo, hi = _end(low, -1), _end(high, 1)
    if math.isnan(lo) or math.isnan(hi):
        return fmt_signed(x, 1)
    widths = [w for w in (hi - x, x - lo) if math.isfinite(w) and w > 0]
    e_v, _ = _delta_exp(x, widths)
    v = _at(x, e_v)
    value = v if float(v) == 0 else _signed(v if v.startswith("-") else "+" + v)

    def end(y):
        if math.isinf(y):
            return r"$-\infty$" if y < 0 else r"$\infty$"
        return _signed(_at(y, e_v))

    bracket = f"[{end(lo)}, {end(hi)}]"
    if stacked:
        # \\[0pt]: a bare \\ would read the bracket as its optional argument
        return r"\begin{tabular}[t]{@{}l@{}}" + value + r"\\[0pt]" + bracket + r"\end{tabular}"
    return f"{value} {bracket}"


_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")


def count_word(n: int, zero: str = "no") -> str:
    """A count as a word where natural in running text (zero to twelve), else digits."""
    n = int(n)
    if n == 0:
        return zero
    return _WORDS[n] if 0 < n < len(_WORDS) else str(n)


def counted(n: int, noun: str, plural: str | None = None, zero: str = "no") -> str:
    """ "one run", "five runs", "no runs", "14 runs": a count and its noun, in agreement."""
    n = int(n)
    return f"{count_word(n, zero)} {noun if n == 1 else (plural or noun + 's')}"


def of_n(k: int, n: int, noun: str = "") -> str:
    """ "all six", "none of the six", "four of the six" (then the noun, plural)."""
    k, n = int(k), int(n)
    tail = f" {noun}" if noun else ""
    if k == n and n > 1:
        return f"all {count_word(n)}{tail}"
    if k == 0:
        return f"neither of the two{tail}" if n == 2 else f"none of the {count_word(n)}{tail}"
    return f"{count_word(k)} of the {count_word(n)}{tail}"


def count_of(k: int, n: int, one: str, many: str, verb: tuple[str, str], owner: str = "the") -> str:
    """A count of a counted set with its verb in agreement, zero in words: "none of the twelve
    comparisons is significant", "one of the table's twelve comparisons is significant", "both
    comparisons are significant", "the only comparison is significant". verb: (singular,
    plural) predicates, e.g. ("is significant", "are significant")."""
    k, n = int(k), int(n)
    sing, plur = verb
    if n == 1:
        if k:
            return f"{owner} only {one} {sing}"
        # "is significant" -> "is not significant", "differs ..." -> "does not differ ..."
        return f"{owner} only {one} " + (
            f"is not {sing.removeprefix('is ')}" if sing.startswith("is ") else f"does not {plur}"
        )
    if k == n:
        return (
            f"both of {owner} {many} {plur}"
            if n == 2
            else f"all {'' if owner == 'the' else owner + ' '}{count_word(n)} {many} {plur}"
        )
    set_ = f"{owner} {count_word(n)} {many}"
    if k == 0:
        return f"neither of {owner} {many} {sing}" if n == 2 else f"none of {set_} {sing}"
    return f"{count_word(k)} of {set_} {sing if k == 1 else plur}"


def word_list(items, conj: str = "and") -> str:
    """ "a", "a and b", "a, b and c"; an empty list is an error (a sentence must not list nothing)."""
    items = list(items)
    if not items:
        raise ValueError("word_list: nothing to list")
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {conj} " + items[-1]


def count_clauses(items, total: int | None = None) -> str:
    """ "nine are inside, 21 sit outside and one has no band": each (count, predicate) pair as a
    clause, the count in words where natural and the predicate's verb agreeing with it (`{is_}`:
    is/are, `{has}`: has/have, `{v}`: the singular's s, "sit{v}"); a zero count is left out (no
    list of nothing), a count equal to `total` reads "all N" ("both"). An empty string when every count
    is zero."""
    parts = []
    for n, pred in items:
        n = int(n)
        if n == 0:
            continue
        who = count_word(n)
        if total is not None and n == total and n > 1:
            who = "both" if n == 2 else f"all {who}"
        one = n == 1
        parts.append(
            f"{who} {pred.format(is_='is' if one else 'are', has='has' if one else 'have', v='s' if one else '')}"
        )
    return word_list(parts) if parts else ""


def count_phrase(items) -> str:
    """Counted nouns, the zeros gathered at the end: "two kick-aways and two BOOSTs", "748 yields
    and no polls or kicks", "no kick-aways or BOOSTs". items: (count, singular, plural)."""
    items = [(int(n), one, many) for n, one, many in items]
    parts = [counted(n, one, many) for n, one, many in items if n]
    zeros = [many for n, _, many in items if n == 0]
    if zeros:
        parts.append("no " + word_list(zeros, "or"))
    return word_list(parts)


def times_word(n: int) -> str:
    """ "never", "once", "twice", "three times", "1546 times"."""
    n = int(n)
    return {0: "never", 1: "once", 2: "twice"}.get(n) or f"{count_word(n)} times"


def axes_text(axes: dict) -> str:
    """A study's points for the text: "vms $\\in$ \\{1, 2, 3\\}", or "vms = 24" for one value."""
    return "; ".join(
        f"{latex_escape(a)} = {latex_escape(str(vals[0]))}"
        if len(vals) == 1
        else f"{latex_escape(a)} $\\in$ \\{{{', '.join(latex_escape(str(v)) for v in vals)}\\}}"
        for a, vals in axes.items()
    )


def runs_text(runs: int, warmup: int, settings: dict | None = None) -> str:
    """ "5 measured runs per point after one discarded warm-up run" (counts in agreement); where
    the testbed's unit is the boot (`settings`, config.testbed_settings), the boots per point and
    what runs in each: "6 boots per point, in each one discarded warm-up run, then one measured run"."""
    if settings and settings.get("unit") == "boot":
        rpb = settings.get("runs_per_boot") or 1
        measured = counted(rpb, "measured run")
        runs = int(runs) // rpb  # `runs` measured runs take runs / runs_per_boot boots (plan.rounds)
        warm = f"{counted(warmup, 'discarded warm-up run')}, then {measured}" if warmup else f"{measured}, no warm-up"
        # a boot per variant per round (boot_plan variant-round) or one for the round's every variant
        per = "per variant and point" if settings.get("boot_plan") == "variant-round" else "per point"
        return f"{runs} {'boot' if runs == 1 else 'boots'} {per}, in each {warm}"
    warm = f"after {counted(warmup, 'discarded warm-up run')}" if warmup else "without a warm-up run"
    return f"{runs} measured {'run' if runs == 1 else 'runs'} per point {warm}"


def mean_ci(values: np.ndarray, confidence: float = 95.0) -> tuple[float, float]:
    from scipy import stats as st

    n = len(values)
    mean = float(np.mean(values))
    if n < 2:
        return mean, float("nan")
    sd = float(np.std(values, ddof=1))
    return mean, float(st.t.ppf(0.5 + confidence / 200, n - 1) * sd / math.sqrt(n))


def compare_study(
    runs: pd.DataFrame,
    study: dict,
    testbed: str,
    confidence: float = 95.0,
    margin_pct: float | None = None,
    test: str = "welch",
) -> pd.DataFrame:
    """Every variant against its own baseline (or the study's) at every point, for
    every metric, in one compare_table call: one Holm family (the whole table), so
    each row's interval is at that row's Holm level."""
    from schedlab.stats import compare_table

    settings = config.testbed_settings(study, testbed)
    axes = list(settings["axes"])
    metrics = [m["name"] for m in study["metrics"]]
    # where the unit is the boot, statistics count boots (runs of one boot averaged first), a
    # paired analysis pairs the variants of one boot, and a cell needs MIN_BOOTS boots
    per_boot = settings["unit"] == "boot"
    long = runs.melt(
        id_vars=["run_id", "variant", *axes, "boot" if per_boot else "repetition"],
        value_vars=[m for m in metrics if m in runs],
        var_name="metric",
        value_name="value",
    )
    # metrics with `when:` exist only at some points (their other rows are NaN)
    long = long.dropna(subset=["value"])
    baselines = {v: d.get("baseline", study["baseline"]) for v, d in study["variants"].items()}
    return compare_table(
        long,
        metric="value",
        baseline=baselines,
        by=["metric", *axes],
        confidence=confidence,
        margin_pct=margin_pct,
        test=test,
        unit_col="boot" if per_boot else None,
        # without boots, a paired analysis pairs the variants of one round
        pair_col=None if per_boot else ("repetition" if test == "paired" else None),
        min_units=config.MIN_BOOTS if per_boot else 2,
    )


# how each compare_table `test` computes a row's p-value and interval, for captions
TEST_TEXT = {
    "welch-log": r"Welch's $t$ on the log ratio of the means",
    "welch": r"Welch's $t$ on the difference of the means (where they differ in sign)",
    "permutation": r"the permutation test of the difference of the means, inverted",
    "student": r"ministat's Student's $t$",
    "paired-log": r"the paired $t$ on the per-round log ratios (variants interleaved within each round's boot)",
    "paired": r"the paired $t$ on the per-round differences (variants interleaved within each round's boot)",
}


def display_title(study: dict, testbed: str | None = None) -> str:
    """A study's title as the paper prints it: a natively booted kernel that a testbed runs
    under an emulator is not "bare metal" (only the lab testbed's hosts are)."""
    title = study["title"]
    if (study.get("workload") or {}).get("where") == "native" and testbed != "lab":
        title = title.replace("on bare metal", "natively (no hypervisor)")
    return title


def metric_text(m: dict) -> str:
    """A metric as the text names it: its label from the study file (never the identifier),
    and its unit in brackets, in LaTeX."""
    label = m.get("label") or m["name"]
    unit = f" [{latex_escape(m['unit'])}]" if m.get("unit") else ""
    return latex_escape(label) + unit


# Units the study files write in ASCII, as the paper sets them
UNIT_TEX = {"us": r"\textmu s"}


def metric_head(m: dict, width: int = 30, pos: str = "b", align: str = "c") -> str:
    """A table header for a metric: label [unit] and an arrow for the better direction; a
    long label is set on two lines (a nested tabular, no extra package: `pos` its vertical
    position, b for a header, t for a cell in a column; `align` its lines')."""
    label = m.get("label") or m["name"]
    arrow = r"$\uparrow$" if m["better"] == "higher" else r"$\downarrow$"
    unit = f" [{UNIT_TEX.get(m['unit'], latex_escape(m['unit']))}]" if m.get("unit") else ""
    if len(label) + len(unit) <= width:
        return f"{latex_escape(label)}{unit} {arrow}"
    # break before a parenthesis if there is one, else at the space nearest the middle
    cut = label.find(" (")
    if cut < 0:
        spaces = [i for i, ch in enumerate(label) if ch == " "]
        cut = min(spaces, key=lambda i: abs(i - len(label) / 2)) if spaces else len(label)
    first, rest = label[:cut].strip(), label[cut:].strip()
    lines = [latex_escape(first)] + ([latex_escape(rest)] if rest else [])
    lines[-1] += f"{unit} {arrow}"
    return rf"\begin{{tabular}}[{pos}]{{@{{}}{align}@{{}}}}" + r" \\ ".join(lines) + r"\end{tabular}"


DELTA_HEAD = r"$\Delta$\,\% (interval)"
# a mean the testbed's model was calibrated on
CALIBRATED_MARK = r"\textsuperscript{cal}"
MEAN_HEAD = r"mean $\pm$ CI"


def json_safe(o):
    """Strict JSON: a non-finite float (an unbounded interval end) becomes null."""
    if isinstance(o, dict):
        return {k: json_safe(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [json_safe(v) for v in o]
    if isinstance(o, (np.bool_,)):
        return bool(o)
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (float, np.floating)):
        return float(o) if math.isfinite(o) else None
    return o


class StudyTable:
    """Builds the LaTeX table and its sidecar for one study on one testbed."""

    def __init__(
        self,
        study: dict,
        testbed: str,
        runs: pd.DataFrame,
        out_dir: Path,
        confidence: float = 95.0,
        margin_pct: float | None = None,
        test: str = "welch",
        calibrated: set[tuple[str, str]] | None = None,
    ):
        self.study, self.testbed, self.runs = study, testbed, runs
        # (variant, point id) whose means the testbed's model was calibrated on (the sim's
        # CALIBRATED parameters): marked in the table, agreement there is by construction
        self.calibrated = set(calibrated or ())
        self.out_dir = Path(out_dir)
        self.confidence, self.margin_pct, self.test = confidence, margin_pct, test
        self.axes = list(config.testbed_settings(study, testbed)["axes"])
        self.per_boot = config.testbed_settings(study, testbed)["unit"] == "boot"
        self.metrics = study["metrics"]
        self.table_id = f"{study['study']}-{testbed}"
        self.hash = data_hash(runs)
        self.cmp = compare_study(runs, study, testbed, confidence, margin_pct, test)
        self.cells: dict[str, dict] = {}
        self.macros: dict[str, str] = {}

    # --- cell bookkeeping -------------------------------------------------
    def _runs_of(self, variant: str, point: dict) -> list[str]:
        sel = self.runs["variant"] == variant
        for a in self.axes:
            sel &= self.runs[a] == point[a]
        return sorted(self.runs.loc[sel, "run_id"])

    def _cell(
        self,
        key: str,
        row: int,
        col: int,
        text: str,
        value,
        stat: str,
        runs: list[str],
        baseline_runs: list[str] | None = None,
        **extra,
    ) -> str:
        self.cells[key] = {
            "row": row,
            "col": col,
            "text": text,
            "value": value,
            "stat": stat,
            "runs": runs,
            **({"baseline_runs": baseline_runs} if baseline_runs else {}),
            **extra,
        }
        self.macros[key] = text
        return text

    # --- the table --------------------------------------------------------
    def _merged(self) -> bool:
        """One metric per point (each metric has a `when:`): one value column group,
        with the metric named in its own column, instead of mostly empty columns."""
        pts = config.points(self.study, self.testbed)
        return len(self.metrics) > 1 and all(len(config.metrics_for(self.study, p)) == 1 for p in pts)

    @staticmethod
    def _metric_head(m: dict) -> str:
        return metric_head(m)

    # more value columns or metrics side by side than these run wider than the line at the body's
    # size (S4: three metrics with a published column each; S3 on qemu: three metrics with long
    # names); such a table is set long, one block of rows per metric
    MAX_WIDE_COLUMNS = 6
    MAX_WIDE_METRICS = 2

    def latex(self, published: bool = True) -> str:
        if self._merged():
            return self._latex_merged()
        st = self.study
        pub = st.get("published", {}) if published else {}
        # Absolute published values only beside a testbed that runs the seed's scale (the
        # sim); elsewhere (scaled down, TCG speeds) the published difference from the baseline.
        relative = self.testbed != "sim"
        points = config.points(st, self.testbed)
        has_pub = {
            m["name"]: m["name"] in pub
            and any(
                self._published_value(pub, m["name"], v, pt, relative) is not None
                for pt in points
                for v in st["variants"]
            )
            for m in self.metrics
        }
        pub_head = r"published $\Delta$\,\%" if relative else "published"
        n_values = sum(3 if has_pub[m["name"]] else 2 for m in self.metrics)
        if n_values > self.MAX_WIDE_COLUMNS or len(self.metrics) > self.MAX_WIDE_METRICS:
            return self._latex_long(pub, relative, has_pub, pub_head)
        groups = [(latex_escape(a), 1) for a in self.axes] + [("variant", 1)]
        columns = [("", "l")] * (len(self.axes) + 1)
        for m in self.metrics:
            span = 3 if has_pub[m["name"]] else 2
            groups.append((self._metric_head(m), span))
            columns += [(MEAN_HEAD, "r"), (DELTA_HEAD, "r")] + ([(pub_head, "r")] if has_pub[m["name"]] else [])
        rows = []
        variants = list(st["variants"])
        row = 0
        for point in points:
            for vi, v in enumerate(variants):
                if not self._runs_of(v, point):
                    continue
                cells = [(latex_escape(point[a]) if vi == 0 else "") for a in self.axes]
                cells.append(latex_escape(v))
                for m in self.metrics:
                    name = m["name"]
                    if not config.metric_applies(m, point):
                        cells += [""] * (3 if has_pub[name] else 2)
                        continue
                    cells += self._value_cells(v, point, name, row, len(cells))
                    if has_pub[name]:
                        cells.append(self._published_cell(pub, name, v, point, relative))
                rows.append(cells)
                row += 1
            rows.append(None)
        return self._tabular(columns, rows, groups)

    def _latex_long(self, pub: dict, relative: bool, has_pub: dict, pub_head: str) -> str:
        """The table set long: one block of rows per metric (named in its first row), then per
        point and variant the metric's mean, difference and published value."""
        st = self.study
        any_pub = any(has_pub.values())
        columns = (
            [("metric", "l")]
            + [(latex_escape(a), "l") for a in self.axes]
            + [("variant", "l"), (MEAN_HEAD, "r"), (DELTA_HEAD, "r")]
            + ([(pub_head, "r")] if any_pub else [])
        )
        rows, row = [], 0
        for m in self.metrics:
            name, first_of_metric = m["name"], True
            for point in config.points(st, self.testbed):
                if not config.metric_applies(m, point):
                    continue
                first_of_point = True
                for v in st["variants"]:
                    if not self._runs_of(v, point):
                        continue
                    # the metric on one line: a two-line name would open a gap after its first row
                    cells = [metric_head(m, 60) if first_of_metric else ""]
                    cells += [(latex_escape(point[a]) if first_of_point else "") for a in self.axes]
                    cells.append(latex_escape(v))
                    cells += self._value_cells(v, point, name, row, len(cells))
                    if any_pub:
                        cells.append(self._published_cell(pub, name, v, point, relative) if has_pub[name] else "")
                    rows.append(cells)
                    first_of_metric = first_of_point = False
                    row += 1
            rows.append(None)
        return self._tabular(columns, rows)

    def _tabular(self, columns, rows, groups=None) -> str:
        """The tabular, keeping its parts for the table model (the report's HTML of it)."""
        self._parts = (list(columns), list(rows), groups)
        return render_tabular(columns, rows, groups)

    def model(self, published: bool = True) -> Table:
        """This table as the table model (table_model.Table): the paper's LaTeX and the report's HTML."""
        self.latex(published)
        columns, rows, groups = self._parts
        # narrower gaps between the columns, not a smaller font: the table prints at the body's size
        return Table.from_rows(
            columns, rows, groups, self.caption(), f"tab:{self.table_id}", preamble=r"\setlength{\tabcolsep}{3pt}"
        )

    def _published_value(self, pub: dict, name: str, v: str, point: dict, relative: bool) -> float | None:
        """The published value of a variant at a point: the seed's value, or (relative) its
        difference in % from the seed's value of the variant's baseline; None if the seed
        gives no such value."""

        def value(variant):
            by = pub.get(name, {}).get(variant, {})
            key = point[self.axes[0]]
            return by.get(str(key), by.get(key))

        pv = value(v)
        if pv is None or not relative:
            return None if pv is None else float(pv)
        base = self.study["variants"][v].get("baseline", self.study["baseline"])
        bv = value(base)
        if v == base or bv in (None, 0):
            return None
        return 100 * (pv / bv - 1)

    def _published_cell(self, pub: dict, name: str, v: str, point: dict, relative: bool) -> str:
        """The published cell, after the row's mean cell: an absolute value as published (its own
        digits), a relative one (computed by us) to one decimal like the text's."""
        pv = self._published_value(pub, name, v, point, relative)
        if pv is None:
            return "--"
        if relative:
            return fmt_signed(pv, 1)
        # as the seed published it ("78", "32", "1402"), never padded to our interval's decimals
        return rf"\num{{{np.format_float_positional(float(pv), trim='-')}}}"

    def _value_cells(self, v: str, point: dict, name: str, row: int, col: int) -> list[str]:
        """mean +- CI and the Delta % cell (with its interval) of one variant, point and metric."""
        st, pid = self.study, config.point_id(point)
        runs_v = self._runs_of(v, point)
        base = st["variants"][v].get("baseline", st["baseline"])
        cell = self.runs[self.runs["run_id"].isin(runs_v)]
        n_runs = len(cell)
        if self.per_boot:  # one value per boot: the mean of its runs
            vals = cell.groupby("boot")[name].mean().to_numpy(float)
            over = f"{len(vals)} boots" + (f" ({n_runs} runs)" if n_runs != len(vals) else "")
        else:
            vals = cell[name].to_numpy(float)
            over = f"{len(vals)} runs"
        mean, ci = mean_ci(vals, self.confidence)
        calibrated = (v, pid) in self.calibrated
        exact = len(vals) > 1 and float(np.ptp(vals)) <= 1e-12 * max(abs(mean), 1e-300)
        out = [
            self._cell(
                f"{v}/{pid}/{name}/mean",
                row,
                col,
                (fmt_exact(mean) if exact else fmt_pm(mean, ci)) + (CALIBRATED_MARK if calibrated else ""),
                mean,
                (f"the same value in all {over}" if exact else f"mean and {self.confidence:g}% t-interval over {over}")
                + ("; the calibration point of the testbed's model" if calibrated else ""),
                runs_v,
                ci=0.0 if exact else ci,
                n=len(vals),
                n_runs=n_runs,
                **({"calibrated": True} if calibrated else {}),
            )
        ]
        if v == base:
            out.append(r"\multicolumn{1}{c}{baseline}")
            return out
        sel = (self.cmp["variant"] == v) & (self.cmp["metric"] == name)
        for a in self.axes:
            sel &= self.cmp[a] == point[a]
        c = self.cmp[sel].iloc[0]
        eq = c.get("equivalent")
        eq = None if eq is None or (isinstance(eq, float) and math.isnan(eq)) else bool(eq)
        eq_p = c.get("eq_p_holm")
        if c["test"] in ("exact", "untestable"):
            exact = c["test"] == "exact"
            text = fmt_exact(c["pct"], 4) + "$^{=}$" if exact else r"\multicolumn{1}{c}{untestable}"
            out.append(
                self._cell(
                    f"{v}/{pid}/{name}/delta",
                    row,
                    col + 1,
                    text,
                    float(c["pct"]) if exact else None,
                    f"exact difference in % of the {base} mean (no spread in either variant: no test)"
                    if exact
                    else f"not tested: {c['reason']}",
                    runs_v,
                    self._runs_of(base, point),
                    pct_low=float(c["pct"]) if exact else None,
                    pct_high=float(c["pct"]) if exact else None,
                    test=c["test"],
                    significant=None,
                    equivalent=eq,
                    reason=c["reason"],
                )
            )
            return out
        mark = "*" if c["significant"] else (r"\approx" if eq is True else "")
        unadjusted = c["interval"] == "ministat" or not c["ci_matches_star"]
        if unadjusted:
            mark += r"\ddagger"
        level = (
            f"ministat's unadjusted {c['ci_level']:.4g}% interval"
            if unadjusted
            else f"{c['ci_level']:.4g}% interval (Holm-adjusted level)"
        )
        units = f", {int(c['n_var'])} and {int(c['n_base'])} boots" if self.per_boot else ""
        out.append(
            self._cell(
                f"{v}/{pid}/{name}/delta",
                row,
                col + 1,
                fmt_delta(c["pct"], c["pct_low"], c["pct_high"], mark),
                float(c["pct"]),
                f"difference in % of the {base} mean, {level}, {c['test']} test{units}, "
                f"Holm-adjusted p={c['p_holm']:.3g}",
                runs_v,
                self._runs_of(base, point),
                pct_low=float(c["pct_low"]),
                pct_high=float(c["pct_high"]),
                ci_level=float(c["ci_level"]),
                interval=c["interval"],
                test=c["test"],
                ci_matches_star=bool(c["ci_matches_star"]),
                p=float(c["p"]),
                p_holm=float(c["p_holm"]),
                significant=bool(c["significant"]),
                equivalent=eq,
                eq_p_holm=None if eq_p is None or pd.isna(eq_p) else float(eq_p),
            )
        )
        return out

    def _latex_merged(self) -> str:
        st = self.study
        columns = [(latex_escape(a), "l") for a in self.axes] + [
            ("metric", "l"),
            ("variant", "l"),
            (MEAN_HEAD, "r"),
            (DELTA_HEAD, "r"),
        ]
        rows = []
        row = 0
        for point in config.points(st, self.testbed):
            (m,) = config.metrics_for(st, point)
            first = True
            for v in st["variants"]:
                if not self._runs_of(v, point):
                    continue
                cells = [(latex_escape(point[a]) if first else "") for a in self.axes]
                cells.append(self._metric_head(m) if first else "")
                cells.append(latex_escape(v))
                cells += self._value_cells(v, point, m["name"], row, len(cells))
                rows.append(cells)
                first = False
                row += 1
            rows.append(None)
        return self._tabular(columns, rows)

    def _units_text(self) -> str:
        """How many units the table's cells rest on, in words: "6 boots per cell (one run each)"."""
        if not self.per_boot or not len(self.runs):
            return ""
        per_cell = self.runs.groupby(["variant", *self.axes])["boot"].nunique()
        # a boot holds every cell of its round: count a cell's runs in each of its boots
        runs_per_boot = self.runs.groupby(["variant", *self.axes, "boot"])["run_id"].size()
        lo, hi = int(per_cell.min()), int(per_cell.max())
        n = f"{lo}" if lo == hi else f"{lo}--{hi}"
        rlo, rhi = int(runs_per_boot.min()), int(runs_per_boot.max())
        each = (
            "one measured run each"
            if rhi == 1
            else f"{rlo} measured runs each, averaged"
            if rlo == rhi
            else f"{rlo}--{rhi} measured runs each, averaged"
        )
        settings = config.testbed_settings(self.study, self.testbed)
        warmup = settings["warmup"]
        warm = f", after {counted(warmup, 'discarded warm-up run')} of the cell in the same boot" if warmup else ""
        # a design not yet complete says so: an interim count is not the registered one
        planned = int(settings["runs"]) // max(1, int(settings.get("runs_per_boot") or 1))
        interim = f" so far, of the {planned} its registered design plans" if lo < planned else ""
        return (
            f"The unit is the boot: {n} boots per cell{interim} ({each}{warm}); means, tests and degrees of "
            f"freedom count boots, and a comparison with fewer than {config.MIN_BOOTS} boots in a "
            "variant is marked untestable"
        )

    def caption(self) -> str:
        cmp = self.cmp
        n_cmp = int(np.isfinite(cmp["p"].to_numpy(float)).sum()) if len(cmp) else 0
        tests = [t for t in TEST_TEXT if (cmp["test"] == t).any()]
        # rows with an interval (an untestable or exact row has none)
        adjusted = cmp[(cmp["interval"] != "ministat") & np.isfinite(cmp["ci_level"].to_numpy(float))]
        how = "; ".join(TEST_TEXT[t] for t in tests if t not in ("student", "untestable", "exact"))
        text = r"$\Delta$\,\%: difference from the baseline variant in \% of its mean"
        if len(adjusted):
            lo, hi = adjusted["ci_level"].min(), adjusted["ci_level"].max()
            lvl = f"{lo:.4g}\\,\\%" if lo == hi else f"{lo:.4g}--{hi:.4g}\\,\\%"
            text += (
                f", with its interval ({how}) at the row's Holm-adjusted level ({lvl}), "
                "so it excludes 0 exactly where starred"
            )
        text += (
            f". $^{{*}}$: significant at {self.confidence:g}\\,\\% after Holm--Bonferroni over the "
            f"{n_cmp} comparisons of this table"
            if n_cmp
            else ". No comparison of this table can be tested yet"
        )
        if self.margin_pct:
            text += (
                rf"; $^{{\approx}}$: equivalent within $\pm${self.margin_pct:g}\,\% "
                r"(TOST, Holm-adjusted over the table)"
            )
        if (cmp["interval"] == "ministat").any() or not cmp["ci_matches_star"].all():
            text += (
                rf"; $^{{\ddagger}}$: ministat's unadjusted {self.confidence:g}\,\% interval "
                r"(Student's $t$), which may disagree with the star"
            )
        if (cmp["test"] == "exact").any():
            text += (
                r"; $^{=}$: an exact difference (no variant's runs vary, as on a deterministic model), "
                r"not tested and without interval"
            )
        text += (
            rf". Means: mean $\pm$ {self.confidence:g}\,\% $t$-interval, or the value itself where the runs do not vary"
        )
        if self._units_text():
            text += ". " + self._units_text()
        if self.calibrated:
            text += (
                rf"; {CALIBRATED_MARK}: the calibration point, where the parameters the study file marks "
                r"CALIBRATED were fitted to the published value, so agreement there is by construction"
            )
        cmd = f"snakemake -c2 paper/generated/{self.study['study']}/{self.testbed}-table.tex"
        return (
            rf"{latex_escape(display_title(self.study, self.testbed))}, {self.testbed} testbed. {text}. "
            rf"Regenerate: \texttt{{{latex_escape(cmd)}}}; raw data "
            rf"\texttt{{sha256:{self.hash[:16]}}}."
        )

    def _title(self) -> str:
        return f"{self.study['study'].upper()}: {display_title(self.study, self.testbed)} ({self.testbed} testbed)"

    def write(
        self,
        extra_macros: dict[str, str] | None = None,
        checks: dict[str, dict] | None = None,
        excluded: list[dict] | None = None,
    ) -> dict:
        """Write <testbed>-table.tex, <testbed>-cells.json and <testbed>-macros.tex.
        checks: comparisons outside the table (StudyContext.check), kept in the sidecar
        beside its cells, traceable to their runs like them; excluded: runs of the current
        definition the analysis left out, each with its reason."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        label = f"tab:{self.table_id}"
        table = self.model()
        macros = {**self.macros, **(extra_macros or {})}
        macros["datahash"] = self.hash[:16]
        macros["nruns"] = str(len(self.runs))
        sidecar = {
            "table": self.table_id,
            "study": self.study["study"],
            "testbed": self.testbed,
            "label": label,
            "data_hash": self.hash,
            "confidence": self.confidence,
            "margin_pct": self.margin_pct,
            "family_size": len(self.cmp),
            "test": self.test,
            "command": f"snakemake -c2 paper/generated/{self.study['study']}/{self.testbed}-table.tex",
            "cells": self.cells,
            "checks": checks or {},
            "excluded": excluded or [],
        }
        sidecar = write_sidecar(self.out_dir / f"{self.testbed}-cells.json", sidecar)
        # the paper's table and the report's page of it, from one table model
        table.write(self.out_dir / f"{self.testbed}-table.tex", sidecar=sidecar, title=self._title())
        write_macros(self.out_dir / f"{self.testbed}-macros.tex", self.table_id, macros)
        return sidecar


def write_sidecar(path: Path, sidecar: dict) -> dict:
    """A table's sidecar as strict JSON (unbounded ends and missing numbers: null)."""
    sidecar = json_safe(sidecar)
    atomic_write(Path(path), json.dumps(sidecar, indent=1, sort_keys=True, allow_nan=False) + "\n")
    return sidecar


def write_macros(path: Path, prefix: str, macros: dict[str, str]) -> None:
    """Numbers for the text: `\\sv{STUDY-TESTBED/VARIANT/POINT/METRIC/delta}` in the paper."""
    lines = [f"% generated by the {prefix} notebook; do not edit"]
    for k, v in sorted(macros.items()):
        lines.append(rf"\expandafter\def\csname sv@{prefix}/{k}\endcsname{{{v}}}")
    atomic_write(Path(path), "\n".join(lines) + "\n")
