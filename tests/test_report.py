"""The report layer: the one table renderer, the study table's cells (interval
and star agree), its sidecar and macros (no NaN anywhere), the agreement
verdicts."""

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from schedlab import config
from schedlab.report import agreement
from schedlab.report.notebook import StudyContext
from schedlab.report.tables import (
    StudyTable,
    fmt_bracket,
    fmt_delta,
    fmt_signed,
    latex_escape,
    latex_table,
    render_tabular,
)

# \num{v}$^{+a}_{-b}...$ as StudyTable writes a Delta cell (a, b: \num{x} or \infty)
DELTA = re.compile(
    r"\\num\{(-?[\d.]+)\}\$\^\{\+(?:\\num\{([\d.]+)\}|(\\infty))\}"
    r"_\{-(?:\\num\{([\d.]+)\}|(\\infty))\}"
)


def _interval_of(text: str) -> tuple[float, float]:
    m = DELTA.match(text)
    assert m, text
    v = float(m.group(1))
    up = math.inf if m.group(3) else float(m.group(2))
    down = math.inf if m.group(5) else float(m.group(4))
    return v - down, v + up


def _s1_runs(n=5):
    """Synthetic S1 runs (a statistics test, not a result): co-run, the bug collapses
    throughput; alone, both variants draw from one distribution."""
    rng = np.random.default_rng(7)
    base = rng.normal(0, 1, n)
    rows = []
    for v in ("fixed", "bug"):
        for mode in ("alone", "corun"):
            for rep in range(n):
                tput = 940 + base[rep] * 3 + (0.3 if v == "bug" else 0.0)  # alone: no real difference
                if mode == "corun":
                    tput = (90 if v == "bug" else 940) + base[rep] * 2
                lat = 80 + rng.normal(0, 2) + (5000 if v == "bug" and mode == "corun" else 0)
                rows.append(
                    {
                        "run_id": f"{v}_{mode}_{rep}",
                        "variant": v,
                        "mode": mode,
                        "repetition": rep,
                        "checksum": f"{v}{mode}{rep}",
                        "throughput_mbps": tput,
                        "latency_us": lat,
                    }
                )
    return pd.DataFrame(rows)


def _study():
    return config.for_testbed(config.load_study("s1"), "sim")


def _context(table: StudyTable) -> StudyContext:
    """A StudyContext around an existing table (no data directory to load)."""
    ctx = object.__new__(StudyContext)
    ctx.table, ctx.axes = table, table.axes
    return ctx


def _files(tmp_path, testbed="sim"):
    return {k: (tmp_path / f"{testbed}-{k}").read_text() for k in ("table.tex", "cells.json", "macros.tex")}


def test_render_tabular_structure_and_escaping():
    tex = render_tabular(
        [("a", "l"), (latex_escape("x^2"), "r"), ("y", "r")],
        [[latex_escape("a_b & c%"), "1.5", latex_escape("#1 $5")], None, ["b", "2", "3"], None],
        groups=[("", 1), ("both", 2)],
    )
    lines = tex.splitlines()
    assert lines[0] == r"\begin{tabular}{lrr}" and lines[1] == r"\toprule" and lines[-1] == r"\end{tabular}"
    assert lines[2] == r" & \multicolumn{2}{c}{both} \\" and lines[3] == r"\cmidrule(lr){2-3}"
    assert lines[4] == r"a & x\textasciicircum{}2 & y \\" and lines[5] == r"\midrule"
    assert lines[6] == r"a\_b \& c\% & 1.5 & \#1 \$5 \\"
    assert lines[7] == r"\addlinespace" and lines[-2] == r"\bottomrule"
    assert tex.count(r"\addlinespace") == 1  # none after the last row
    with pytest.raises(ValueError, match="row 0 has 2 cells for 3 columns"):
        render_tabular([("a", "l")] * 3, [["x", "y"]])
    with pytest.raises(ValueError, match="span 2 of 3"):
        render_tabular([("a", "l")] * 3, [], groups=[("g", 2)])
    t = latex_table(tex, "cap", "tab:x")
    assert t.startswith(r"\begin{table}[tbp]") and r"\caption{cap}" in t and r"\label{tab:x}" in t


def test_interval_formats():
    # decimals: two significant digits of the narrower side
    # the halves to two significant digits, the difference to their place but at most three
    # significant digits (MAX_SIG_DELTA): -90.84 is -90.8, 1076 is 1080
    assert fmt_delta(-90.84, -91.5, -90.2) == r"\num{-90.8}$^{+\num{0.64}}_{-\num{0.66}}$"
    assert fmt_delta(1076.0, 900.0, 1300.0) == r"\num{1080}$^{+\num{220}}_{-\num{180}}$"
    assert fmt_delta(5.0, -2.0, math.inf, "*") == r"\num{5.0}$^{+\infty}_{-\num{7.0}}\,{}^{*}$"
    assert fmt_delta(5.0, 5.0, 5.0, "*") == r"\num{5.0}${}^{*}$"  # no interval: just the mark
    assert fmt_signed(-0.01) == "0.0" and fmt_signed(-13.94) == "$-$13.9" and fmt_signed(2.0) == "+2.0"
    assert fmt_delta(5.0, None, None) == r"\num{5.0}$^{+\infty}_{-\infty}$"
    assert fmt_delta(float("nan"), 0, 1) == "--"
    assert fmt_bracket(-12.34, 4.5) == r"[$-$12.3, 4.5]"
    assert fmt_bracket(-math.inf, 3.0) == r"[$-\infty$, 3.0]" and fmt_bracket(1.0, None) == r"[1.0, $\infty$]"
    assert fmt_bracket(-0.01, 0.02) == "[$-$0.010, 0.020]" and "-0.0" not in fmt_bracket(-0.001, 30)
    assert fmt_bracket(float("nan"), 1) == "--"
    # beside its difference, the interval to the difference's last digit (capped at three
    # significant digits), as the table's cell prints it: not -90.9 % [-90.875, -90.847]
    assert fmt_bracket(-90.875, -90.847, value=-90.861) == r"[$-$90.9, $-$90.8]"
    assert fmt_bracket(1071.8, 1090.3, value=1081) == "[1070, 1090]"
    assert fmt_bracket(15.5, 30.7, value=22.8) == fmt_bracket(15.5, 30.7) == "[15.5, 30.7]"


def test_star_and_interval_agree_in_the_study_table(tmp_path):
    t = StudyTable(_study(), "sim", _s1_runs(), tmp_path)
    assert len(t.cmp) == 4 and t.cmp["baseline"].eq("fixed").all()
    side = t.write(_context(t).comparison_macros())
    stars = {}
    for key, c in side["cells"].items():
        if not key.endswith("/delta"):
            continue
        lo, hi = _interval_of(c["text"])
        # the printed interval is the sidecar's, rounded
        assert lo == pytest.approx(c["pct_low"], abs=0.051 * (1 + abs(c["pct_low"])))
        assert hi == pytest.approx(c["pct_high"], abs=0.051 * (1 + abs(c["pct_high"])))
        assert (c["pct_low"] > 0 or c["pct_high"] < 0) == c["significant"], key
        assert ("{}^{*}" in c["text"]) == c["significant"]
        assert c["ci_matches_star"] and c["interval"] == "log-ratio" and "pct_err" not in c
        assert c["ci_level"] >= 95.0
        stars[key] = c["significant"]
    assert stars["bug/mode-corun/throughput_mbps/delta"] and stars["bug/mode-corun/latency_us/delta"]
    assert not stars["bug/mode-alone/throughput_mbps/delta"]
    # an unstarred cell's interval includes 0, a starred one's does not, in print too
    lo, hi = _interval_of(side["cells"]["bug/mode-alone/throughput_mbps/delta"]["text"])
    assert lo <= 0 <= hi
    lo, hi = _interval_of(side["cells"]["bug/mode-corun/throughput_mbps/delta"]["text"])
    assert hi < 0 and lo > -100
    files = _files(tmp_path)
    assert r"\dagger" not in files["table.tex"] and r"\pm$\,\num" in files["table.tex"]  # means keep +-
    assert "Holm-adjusted level" in files["table.tex"] and "log ratio of the means" in files["table.tex"]
    macros = files["macros.tex"]
    assert r"sv@s1-sim/ci/bug/mode-corun/throughput_mbps\endcsname{[$-$" in macros
    assert "sv@s1-sim/e/" not in macros
    for name, text in files.items():
        assert not re.search(r"nan|inf(?!ty)", text, re.I), name
    json.loads(files["cells.json"], parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))


def test_unbounded_and_unadjusted_intervals_render_without_nan(tmp_path):
    runs = _s1_runs(3)
    # a permutation test of 3 + 3 runs can never reach 5 %: its intervals are unbounded
    t = StudyTable(_study(), "sim", runs, tmp_path / "perm", test="permutation")
    side = t.write(_context(t).comparison_macros())
    files = _files(tmp_path / "perm")
    assert r"\infty" in files["table.tex"] and r"$\infty$" in files["macros.tex"]
    assert any(c.get("pct_high", 0) is None for c in side["cells"].values())
    assert "permutation test" in files["table.tex"]
    # ministat's table: its unadjusted interval is marked
    t = StudyTable(_study(), "sim", runs, tmp_path / "student", test="student")
    t.write(_context(t).comparison_macros())
    student = _files(tmp_path / "student")
    assert r"\ddagger}$" in student["table.tex"] and "ministat's unadjusted" in student["table.tex"]
    for files_ in (files, student):
        for name, text in files_.items():
            assert "nan" not in text.lower(), name
        json.loads(files_["cells.json"], parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))


def test_one_holm_family_over_several_baselines(tmp_path):
    st = _study()
    st["variants"] = {**st["variants"], "bug2": {**st["variants"]["bug"], "baseline": "bug"}}
    runs = _s1_runs()
    runs = pd.concat(
        [
            runs,
            runs[runs.variant == "bug"].assign(
                variant="bug2", run_id=lambda d: d.run_id + "_2", throughput_mbps=lambda d: d.throughput_mbps * 1.01
            ),
        ]
    )
    t = StudyTable(st, "sim", runs, tmp_path)
    assert set(zip(t.cmp["variant"], t.cmp["baseline"])) == {("bug", "fixed"), ("bug2", "bug")}
    from schedlab.stats import holm

    assert np.allclose(t.cmp["p_holm"], holm(t.cmp["p"]))  # one family: all 8 rows
    assert "over the 8 comparisons" in t.caption()


def test_agreement_verdicts_use_the_interval():
    assert agreement.verdict(5.0, 3.0, 1.0, 6.0, False) == agreement.INSIDE
    assert agreement.verdict(9.0, 3.0, 1.0, None, False) == agreement.INSIDE  # unbounded above
    assert agreement.verdict(9.0, 3.0, 1.0, math.inf, False) == agreement.INSIDE
    assert agreement.verdict(9.0, 3.0, 1.0, 6.0, False) == "same direction"
    assert agreement.verdict(-9.0, 3.0, 1.0, 6.0, False) == "opposite"
    assert agreement.verdict(5.0, 3.0, math.nan, math.nan, False) == "same direction"  # no interval
    assert agreement.verdict(1.2, 1.1, math.nan, math.nan, True) == "same direction"
    assert agreement.verdict(1.2, math.nan, 0, 1, False) == "--"
    # an exact 0.0 (a deterministic point) has no direction: never "same direction" or "opposite"
    assert agreement.verdict(5.0, 0.0, 0.0, 0.0, False) == agreement.NO_DIFFERENCE
    assert agreement.verdict(5.0, 0.0, math.nan, math.nan, False) == agreement.NO_DIFFERENCE
    a = {"value": 4.0, "significant": True}
    assert agreement.cross_verdict(a, {"value": 2.0, "significant": True}) == "same direction"
    assert agreement.cross_verdict(a, {"value": -2.0, "significant": True}) == "opposite"
    assert agreement.cross_verdict(a, {"value": None, "significant": False}) == "untestable"
    assert set(agreement.CROSS_VERDICTS) == {
        "same direction",
        "opposite",
        "one testbed only",
        "neither significant",
        "untestable",
    }


def test_agreement_rows_carry_the_interval():
    study = {
        "study": "sx",
        "axes": {"n": [1]},
        "baseline": "b",
        "metrics": [{"name": "m", "better": "higher"}],
        "variants": {"b": {}, "v": {}},
        "published": {"m": {"b": {1: 100.0}, "v": {1: 110.0}}},
    }
    cell = {"value": 8.0, "pct_low": 2.0, "pct_high": None, "runs": ["r1"], "baseline_runs": ["r0"]}
    (row,) = agreement.rows(study, {"sim": {"cells": {"v/n-1/m/delta": cell}}})
    assert row["published"] == pytest.approx(10.0)
    assert row["sim_low"] == 2.0 and row["sim_high"] == math.inf and "sim_err" not in row
    assert row["sim_runs"] == ["r1", "r0"]


def test_power_text_says_more_than_when_capped():
    from schedlab.report.methods import power_text

    st = config.load_study("s1")
    # a mean near 0 and a large spread: no run count up to max_runs suffices
    rows = [
        {"variant": "fixed", "mode": "corun", "throughput_mbps": v, "latency_us": 80.0 + i}
        for i, v in enumerate([-100, 100, -100, 100, 1])
    ]
    text = power_text(st, "sim", pd.DataFrame(rows))
    assert "needs more than 100000 runs" in text and text.endswith("not enough")
    rows = [{**r, "throughput_mbps": 100 + i % 2} for i, r in enumerate(rows)]
    assert "needs at most" in power_text(st, "sim", pd.DataFrame(rows))


def test_power_text_says_an_interim_count_of_boots_as_such():
    """Where the records hold fewer boots than the registered design plans, the provenance line
    says both: not 'the study ran 6' for a campaign at 3."""
    from schedlab.report.methods import power_text

    st = config.load_study("s1")
    rows = [
        {"variant": v, "mode": "corun", "boot": f"{v}-{b}", "throughput_mbps": 100 + b, "latency_us": 80.0 + b}
        for v in ("fixed", "bug")
        for b in range(3)
    ]
    text = power_text(st, "qemu", pd.DataFrame(rows))
    assert text.endswith("and the records hold 3 so far") and "the design plans 6 (" in text, text


def test_setup_macros_give_the_design_stated_before_measuring():
    """The power design of a testbed (stated in the study file) reaches the text as macros,
    so a section can set a measured CV against the one the design assumed."""
    ctx = object.__new__(StudyContext)
    ctx.study, ctx.testbed, ctx.confidence = config.for_testbed(config.load_study("s1"), "qemu"), "qemu", 95.0
    ctx.runs = pd.DataFrame()
    ctx.runs.attrs["records"] = {}
    out = ctx.setup_macros()
    design = config.load_study("s1")["testbeds"]["qemu"]["design"]
    assert out["setup/design/cv_pct"] == f"{design['cv_pct']:g}"
    assert out["setup/design/detect_pct"] == f"{design['detect_pct']:g}"
    assert not any(k.startswith("setup/design/basis") for k in out)  # text fields stay in the study file
    assert out["setup/opt/stream_window"] == "4K"


def test_the_lock_hazard_numbers_come_from_the_benchmark_output():
    """data/measured/qemu_lock_hazard.out is benchmarks/qemu_lock_hazard.py's output as it ran;
    the macros the paper quotes are read from it, never typed."""
    from schedlab.report import measured

    m = measured.macros(config.ROOT / "data" / "measured")
    for key in (
        "icount5/not-explained",
        "icount5/floor-share",
        "icount5/xen-bound-share",
        "icount5-1pcpu/not-explained",
    ):
        assert f"hazard/{key}" in m
    assert int(m["hazard/icount5/floor-share"]) + int(m["hazard/icount5/xen-bound-share"]) + int(
        m["hazard/icount5/turn-share"]
    ) in (99, 100, 101)
    # the parser reads the benchmark's own line formats
    line = (
        "icount5 boot 1 run 1: 30000 ops in 13.85 s, wait 4.33 s (mean 144.3 us, 15.6 % of the threads' time); "
        "Xen, over the 12.09 s both vCPUs stayed awake: runnable 1.257 s, one vCPU running 1.26 s, both 89.6 %; "
        "453 blocks in the trace; not explained by Xen 70.9 % (load 10.5)\n"
        "icount5: 1 boots, 1 runs: waiting 15.6 % (15.6-15.6), mean wait 144.3 us; not explained by Xen 70.9 % (70.9-70.9)\n"
    )
    h = measured.hazard(line)
    assert h["icount5/not-explained"] == "71" and h["icount5/boots"] == "one"  # a count in words


def test_the_caption_counts_a_cells_runs_per_boot_not_the_boots_runs(tmp_path):
    """A boot of a round holds every (variant, point) of it: one run of each is 'one measured run
    each', after the cell's warm-up run in the same boot where the study has one."""
    runs = _s1_runs(n=6)
    runs["boot"] = [f"boot-{r}" for r in runs["repetition"]]  # round r: one boot for all four cells
    t = StudyTable(_study(), "qemu", runs, tmp_path)
    text = t._units_text()
    assert "6 boots per cell (one measured run each" in text
    assert ("discarded warm-up run of the cell" in text) == bool(config.testbed_settings(_study(), "qemu")["warmup"])
    two = pd.concat([runs, runs.assign(run_id=runs["run_id"] + "b")])
    assert "(2 measured runs each, averaged" in StudyTable(_study(), "qemu", two, tmp_path / "two")._units_text()
    # a design not yet complete says how far it is: fewer boots than the registered design plans
    planned = config.testbed_settings(_study(), "qemu")["runs"]
    assert "so far" not in text and planned == 6
    part = runs[runs["repetition"] < 4]
    assert "4 boots per cell so far, of the 6 its registered design plans (" in (
        StudyTable(_study(), "qemu", part, tmp_path / "part")._units_text()
    )


def test_a_calibrated_values_reason_leaves_out_the_files_history():
    """The paper's table of calibrated values quotes the study file's reason, not its history
    ("(was 32.5 without netback)" is the file's change log)."""
    from schedlab.report.methods import calibrated_values

    st = config.load_study("s1")
    text = (config.ROOT / "config" / "studies" / "s1.yaml").read_text()
    rr = dict((p, w) for p, _, w in calibrated_values(st, text))["rr.one_way_us"]
    assert rr.endswith("= 78 us") and "(was" not in rr
