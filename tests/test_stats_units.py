"""Statistics at the experimental unit and at the edges (issue: runs that share a boot,
exact data, paired equivalence, the mark beside its interval, one run, bounds)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from schedlab import stats
from schedlab.report import verdicts as vd


def _frame(groups: dict[str, list[list[float]]], point=1) -> pd.DataFrame:
    """{variant: [[runs of boot 1], [runs of boot 2], ...]} as a long table."""
    rows = []
    for v, boots in groups.items():
        for i, runs in enumerate(boots):
            for x in runs:
                rows.append({"variant": v, "vms": point, "boot": f"{v}-{i}", "value": float(x)})
    return pd.DataFrame(rows)


def test_runs_of_one_boot_count_once():
    """Two boots per variant, three runs each, a large boot effect: at the unit there are 2
    values per variant and 2 degrees of freedom, not 6 runs and ~10."""
    df = _frame({"a": [[100, 100.1, 99.9], [110, 110.1, 109.9]], "b": [[104, 104.1, 103.9], [114, 114.1, 113.9]]})
    runs = stats.compare_table(df, "value", "a", by=["vms"])
    units = stats.compare_table(df, "value", "a", by=["vms"], unit_col="boot")
    assert runs.loc[0, "n_base"] == 6 and units.loc[0, "n_base"] == 2 and units.loc[0, "n_runs_base"] == 6
    assert units.loc[0, "dof"] < 3 and units.loc[0, "p"] > runs.loc[0, "p"]
    assert not units.loc[0, "significant"]


def test_identical_runs_are_exact_no_star_no_interval_no_equivalence():
    df = _frame({"a": [[941.4896000000002]] * 5, "b": [[941.4896]] * 5})
    df2 = _frame({"a": [[100.0]] * 5, "b": [[90.0]] * 5}, point=2)
    out = stats.compare_table(pd.concat([df, df2]), "value", "a", by=["vms"], margin_pct=2)
    for _, r in out.iterrows():
        assert r["test"] == "exact" and not r["significant"] and r["equivalent"] is None
        assert np.isnan(r["p"]) and r["pct_low"] == r["pct_high"] == r["pct"]
    assert out.set_index("vms").loc[2, "pct"] == pytest.approx(-10)


def test_exact_rows_leave_the_holm_family():
    exact = _frame({"a": [[1.0]] * 3, "b": [[2.0]] * 3}, point=1)
    noisy = _frame({"a": [[10, 10.2, 9.9]], "b": [[12, 12.1, 11.8]]}, point=2)
    df = pd.concat([exact, noisy])
    df["boot"] = df["boot"] + df["vms"].astype(str) + df.groupby(["variant", "vms"]).cumcount().astype(str)
    out = stats.compare_table(df, "value", "a", by=["vms"])
    noisy_row = out.set_index("vms").loc[2]
    assert noisy_row["p_holm"] == pytest.approx(noisy_row["p"])  # a family of one


def test_one_run_per_group_is_untestable_not_an_error():
    df = _frame({"a": [[1.0], [1.1]], "b": [[1.3]]})
    out = stats.compare_table(df, "value", "a", by=["vms"], unit_col="boot")
    assert (
        out.loc[0, "test"] == "untestable"
        and "1 boot in a variant, fewer than the 2 a test needs" in out.loc[0, "reason"]
    )
    assert not out.loc[0, "significant"] and np.isnan(out.loc[0, "p"])


def test_fewer_boots_than_the_minimum_is_untestable():
    df = _frame({"a": [[1.0], [1.1], [1.05]], "b": [[1.3], [1.31], [1.29]]})
    out = stats.compare_table(df, "value", "a", by=["vms"], unit_col="boot", min_units=5)
    assert out.loc[0, "test"] == "untestable" and "fewer than the 5 a test needs" in out.loc[0, "reason"]


def test_paired_tost_uses_the_pairs():
    """A true +0.5 % difference, a 2 % margin and a large shared boot effect: the paired
    TOST shows equivalence, the unpaired one cannot."""
    rng = np.random.default_rng(3)
    boot = rng.normal(0, 0.05, 8)
    a = 100 * np.exp(boot + rng.normal(0, 0.001, 8))
    b = a * 1.005 * np.exp(rng.normal(0, 0.001, 8))
    paired = stats.tost_paired(a, b, 2.0)
    assert paired.equivalent and paired.pct == pytest.approx(0.5, abs=0.2)
    assert not stats.tost(a, b, 2.0).equivalent
    rows = [{"variant": v, "vms": 1, "boot": i, "value": x} for v, xs in (("a", a), ("b", b)) for i, x in enumerate(xs)]
    out = stats.compare_table(
        pd.DataFrame(rows), "value", "a", by=["vms"], test="paired", unit_col="boot", margin_pct=2
    )
    assert out.loc[0, "equivalent"] is True


def test_the_equivalence_mark_never_sits_beside_an_interval_past_the_margin():
    """Where TOST's narrower (1 - 2 alpha) interval is inside the margin but the printed one
    (the star's, at the row's Holm level) reaches past it, the row is not marked equivalent."""
    rng = np.random.default_rng(11)
    found = 0
    for _ in range(300):
        a = 100 + rng.normal(0, 1.2, 6)
        b = 101 + rng.normal(0, 1.2, 6)
        df = pd.DataFrame({"variant": ["a"] * 6 + ["b"] * 6, "vms": 1, "value": np.r_[a, b]})
        r = stats.compare_table(df, "value", "a", by=["vms"], margin_pct=2).iloc[0]
        if r["equivalent"]:
            assert -2 < r["pct_low"] and r["pct_high"] < 2
        if stats.tost(a, b, 2.0).equivalent and not r["equivalent"]:
            found += 1
    assert found > 0  # the case occurs, and the mark follows the printed interval


def test_a_published_value_at_an_interval_bound_within_tolerance():
    e = vd.Evidence("x", 5.0, 3.0, 7.0, True, None, +1, published=7.0 + 1e-12)
    assert vd.judge(e)[0] == vd.REPRODUCED
    e = vd.Evidence("x", 5.0, 3.0, 7.0, True, None, +1, published=7.0 + vd.TOLERANCE_PCT / 2)
    assert vd.judge(e)[0] == vd.REPRODUCED
    e = vd.Evidence("x", 5.0, 3.0, 7.0, True, None, +1, published=7.0 + 2 * vd.TOLERANCE_PCT)
    assert vd.judge(e)[0] == vd.DIRECTION


def test_exact_differences_decide_by_the_rules():
    assert vd.judge(vd.Evidence("x", -10.0, -10.0, -10.0, None, None, -1, exact=True))[0] == vd.DIRECTION
    assert vd.judge(vd.Evidence("x", 0.0, 0.0, 0.0, None, None, +1, exact=True))[0] == vd.NOT
    assert vd.judge(vd.Evidence("x", 0.4, 0.4, 0.4, None, None, 0, margin_pct=1, exact=True))[0] == vd.REPRODUCED
    assert vd.judge(vd.Evidence("x", 1.4, 1.4, 1.4, None, None, 0, margin_pct=1, exact=True))[0] == vd.NOT


def test_runs_needed_counts_units_with_the_design_effect():
    one = stats.runs_needed(2.0, 5, 95, 0.8)
    assert stats.runs_needed(2.0, 5, 95, 0.8, runs_per_unit=1, icc=0.9) == one
    # four runs per boot that share 90 % of their variance are worth little more than one
    assert stats.runs_needed(2.0, 5, 95, 0.8, runs_per_unit=4, icc=0.9) >= one - 1
    assert stats.runs_needed(2.0, 5, 95, 0.8, runs_per_unit=4, icc=0.0) < one


def test_icc_from_runs_and_boots():
    rng = np.random.default_rng(5)
    vals, boots = [], []
    for b in range(40):
        be = rng.normal(0, 3)
        for _ in range(4):
            vals.append(be + rng.normal(0, 1))
            boots.append(b)
    assert stats.icc(vals, boots) == pytest.approx(0.9, abs=0.06)
    assert np.isnan(stats.icc([1.0, 2.0], [0, 1]))


def test_an_equivalence_counts_only_where_the_aa_control_is_equivalent_too():
    from schedlab import config

    study = config.load_study("s2native")
    claim = vd.claim_of(study)
    assert claim.control == ("pv_n_nopvspin", "pv_n")
    where = {"point": {"bench": "kernbench", "threads": 4}, "metric": "kernbench_s"}
    key = "pv_n_nopvspin/bench-kernbench_threads-4/kernbench_s/delta"
    ok = vd._controlled(claim, study, {"cells": {key: {"equivalent": True}}}, where, vd.REPRODUCED, "x")
    assert ok == (vd.REPRODUCED, "x")
    cat, why = vd._controlled(claim, study, {"cells": {key: {"equivalent": False}}}, where, vd.REPRODUCED, "x")
    assert cat == vd.UNTESTABLE and "A/A control" in why
