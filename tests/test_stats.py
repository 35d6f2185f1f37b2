"""schedlab.stats: the library's numbers equal `schedlab ministat`'s, and what
ministat does not do (p-values, Welch, TOST, Holm, power, bootstrap, tables)."""

from __future__ import annotations

import io
import math
import os
import random
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from schedlab import stats
from schedlab.stats import ministat


def _cli(files, *opts):
    out, err = [], io.BytesIO()
    code = ministat.run([*(o.encode() for o in opts), *(os.fsencode(str(f)) for f in files)], out, err, tty=False)
    assert code == 0, err.getvalue()
    return b"".join(out).decode()


def _write(tmp_path, name, vals):
    p = tmp_path / name
    p.write_text("".join("%r\n" % v for v in vals))
    return p


def _datasets(seed):
    rng = random.Random(seed)
    n1, n2 = rng.choice([3, 4, 5, 8, 13, 40, 120]), rng.choice([3, 4, 6, 9, 20, 77])
    mu = rng.choice([1.0, 100.0, -50.0, 1e5])
    sd = abs(mu) * rng.choice([0.001, 0.01, 0.1])
    shift = rng.choice([0, 0.5, 2, 10]) * sd
    return (
        [round(rng.gauss(mu, sd), 4) for _ in range(n1)],
        [round(rng.gauss(mu + shift, sd * rng.choice([1, 2])), 4) for _ in range(n2)],
    )


@pytest.mark.parametrize("seed", range(40))
def test_library_numbers_equal_cli_output(tmp_path, seed):
    base, var = _datasets(seed)
    conf = ["80", "90", "95", "98", "99", "99.5"][seed % 6]
    text = _cli([_write(tmp_path, "b", base), _write(tmp_path, "v", var)], "-A", "-c", conf)
    lines = text.splitlines()
    for line, vals in ((lines[3], base), (lines[4], var)):
        s = stats.summarize(vals)
        assert line[2:] == "%3d %13.8g %13.8g %13.8g %13.8g %13.8g" % (s.n, s.min, s.max, s.median, s.mean, s.stddev)
    c = stats.compare(base, var, confidence=float(conf))
    if c.significant:
        assert lines[5] == "Difference at %.1f%% confidence" % float(conf)
        assert lines[6] == "\t%g +/- %g" % (c.diff, c.diff_err)
        assert lines[7] == "\t%g%% +/- %g%%" % (c.pct, c.pct_err)
        assert lines[8] == "\t(Student's t, pooled s = %g)" % c.spool
    else:
        assert lines[5] == "No difference proven at %.1f%% confidence" % float(conf)
    assert 0 <= c.p <= 1 and c.test == "student"


def test_library_equals_debian_binary(tmp_path):
    """The same, against /usr/bin/ministat itself (when installed)."""
    if not os.access("/usr/bin/ministat", os.X_OK):
        pytest.skip("Debian's ministat is not installed")
    base, var = [10.1, 10.4, 9.9, 10.2, 10.0], [10.9, 11.2, 10.8, 11.0]
    p = subprocess.run(
        ["/usr/bin/ministat", "-A", str(_write(tmp_path, "b", base)), str(_write(tmp_path, "v", var))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    c = stats.compare(base, var)
    assert p[6] == "\t%g +/- %g" % (c.diff, c.diff_err) and p[7] == "\t%g%% +/- %g%%" % (c.pct, c.pct_err)


def test_summary_median_rule():
    assert stats.summarize([4, 1, 3, 2]).median == 3  # Debian: points[n/2]
    assert stats.summarize([4, 1, 3, 2], flavor="freebsd").median == 2.5
    s = stats.summarize([1, 2, 3, 4])
    assert s.stddev == pytest.approx(np.std([1, 2, 3, 4], ddof=1))


def test_pvalue_matches_scipy_and_welch():
    from scipy import stats as st

    a, b = [10.1, 10.4, 9.9, 10.2, 10.0, 10.3], [10.9, 11.9, 10.1, 11.0, 12.5]
    assert stats.compare(a, b).p == pytest.approx(st.ttest_ind(b, a).pvalue, rel=1e-9)
    w = stats.compare(a, b, welch=True)
    r = st.ttest_ind(b, a, equal_var=False)
    assert w.p == pytest.approx(r.pvalue, rel=1e-9) and w.test == "welch" and w.spool is None
    assert w.dof < len(a) + len(b) - 2
    assert w.diff_err == pytest.approx(
        st.t.ppf(0.975, w.dof) * math.sqrt(np.var(a, ddof=1) / 6 + np.var(b, ddof=1) / 5)
    )
    # a confidence outside ministat's table falls back to scipy's quantile
    c = stats.compare(a, b, confidence=97.5)
    assert c.t_crit == pytest.approx(st.t.ppf(0.9875, 9))
    assert stats.t_table_value(1, 99.5) == 318.313 and stats.t_table_value(101, 95) == 1.960


def test_bad_input_is_a_clear_error(tmp_path):
    p = tmp_path / "runs.txt"
    p.write_text("# header\n1.5\n2.5\n3x\n4\n")
    with pytest.raises(ValueError, match=rf"^{p}:4: invalid data '3x'"):
        stats.read_ministat_file(p)
    p.write_text("a 1\nb 2\n# c\nd 3 # x\n")
    assert stats.read_ministat_file(p, column=2) == [1.0, 2.0, 3.0]
    (tmp_path / "csv").write_text("1,x\n2,y\n")
    with pytest.raises(ValueError, match=r"csv:1: invalid data"):
        stats.read_ministat_file(tmp_path / "csv", column=2, delimiters=",")
    with pytest.raises(FileNotFoundError):
        stats.read_ministat_file(tmp_path / "missing")
    with pytest.raises(ValueError, match="at least 2 samples"):
        stats.compare([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="NaN"):
        stats.summarize([1.0, float("nan"), 2.0])
    with pytest.raises(ValueError, match="not a sequence of numbers"):
        stats.summarize(["a", "b"])
    with pytest.raises(ValueError, match="baseline mean is 0"):
        stats.tost([-1, 0, 1], [1, 2, 3])


def test_holm_hand_computed():
    # sorted: .005*4=.02, .01*3=.03, .03*2=.06, .04*1=.04 -> monotone .06
    np.testing.assert_allclose(stats.holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(stats.holm([0.5, 0.9]), [1.0, 1.0])
    out = stats.holm([0.01, float("nan"), 0.02])
    assert math.isnan(out[1]) and out[0] == pytest.approx(0.02) and out[2] == pytest.approx(0.02)
    assert len(stats.holm([])) == 0


def test_tost_equivalence_is_not_no_difference():
    rng = np.random.default_rng(1)
    a, b = rng.normal(100, 0.5, 30), rng.normal(100.1, 0.5, 30)
    e = stats.tost(a, b, margin_pct=1.0)
    assert e.equivalent and e.ci_low_pct > -1 and e.ci_high_pct < 1 and e.p < 0.05
    # 3 noisy runs: no difference proven, but not equivalent either
    a3, b3 = [100, 110, 90], [101, 93, 108]
    assert not stats.compare(a3, b3).significant
    assert not stats.tost(a3, b3, margin_pct=2.0).equivalent
    # a real 5 % difference is not equivalent within 2 %
    assert not stats.tost(a, a * 1.05, margin_pct=2.0).equivalent


def test_runs_needed_known_values():
    assert stats.runs_needed(5.0, 5.0) == 17  # effect size 1: 17 per arm (noncentral t)
    assert stats.runs_needed(2.0, 1.0) == 64  # effect size 0.5: 64 per arm
    assert stats.runs_needed(1.0, 10.0) == 2
    samples = [100, 102, 98, 101, 99]  # cv = 1.58 %
    assert stats.runs_needed(samples, 2.0) == stats.runs_needed(np.std(samples, ddof=1), 2.0)
    chk = stats.enough_runs(samples, [103, 105, 101, 104, 102], detect_pct=2.0)
    assert chk.have == 5 and chk.enough == (chk.need <= 5)
    with pytest.raises(ValueError):
        stats.runs_needed(1.0, 0)


def test_bootstrap_deterministic():
    x = [3.1, 2.9, 3.3, 3.0, 2.7, 3.6, 3.2]
    a, b = stats.bootstrap_ci(x, seed=42), stats.bootstrap_ci(x, seed=42)
    assert a == b and a.low <= a.estimate <= a.high and a.estimate == np.median(x)
    assert stats.bootstrap_ci(x, seed=43) != a or True
    m = stats.bootstrap_ci(x, stat=np.mean, n_boot=2000, seed=1)
    assert m.estimate == pytest.approx(np.mean(x)) and m.n_boot == 2000
    r = stats.bootstrap_ratio_ci([[1, 2], [2, 2], [1, 1]], [[2, 2], [3, 3], [2, 3]], seed=0)
    assert r.estimate == pytest.approx(15 / 9) and r.low < r.estimate < r.high
    assert r == stats.bootstrap_ratio_ci([[1, 2], [2, 2], [1, 1]], [[2, 2], [3, 3], [2, 3]], seed=0)
    with pytest.raises(ValueError, match="seed"):
        stats.bootstrap_ci(x, seed=None)
    assert a.method == "percentile" and r.method == "log-t"  # 3 runs: parametric ratio interval
    bca = stats.bootstrap_ci(x, stat=np.mean, method="BCa", n_boot=2000, seed=1)
    assert bca.method == "BCa" and bca.low < bca.estimate < bca.high


def _long_df(seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for vms in (1, 2, 4):
        for v, mu, sd in (("base", 100, 1), ("fast", 95, 1), ("same", 100.05, 0.3), ("noisy", 101, 9)):
            for run in range(8):
                rows.append({"variant": v, "vms": vms, "run": run, "value": rng.normal(mu * vms, sd * vms)})
    return pd.DataFrame(rows)


def test_compare_table():
    df = _long_df()
    t = stats.compare_table(df, "value", "base", by=["vms"], margin_pct=2.0)
    assert list(t.columns[:2]) == ["vms", "variant"] and len(t) == 9
    for col in (
        "n_base",
        "n_var",
        "mean_base",
        "mean_var",
        "sd_base",
        "sd_var",
        "median_var",
        "diff",
        "diff_err",
        "pct",
        "pct_err",
        "p",
        "p_holm",
        "significant",
        "test",
        "equivalent",
        "eq_margin_pct",
    ):
        assert col in t.columns
    np.testing.assert_allclose(t["p_holm"], stats.holm(t["p"]))  # family = the whole table
    assert (t["p_holm"] >= t["p"]).all()
    assert set(t["test"]) == {"welch-log"}  # Welch by default, no pretest
    assert t.loc[t.variant == "fast", "significant"].all()
    assert all(x is True for x in t.loc[t.variant == "same", "equivalent"])
    assert ((t["pct_low"] <= t["pct"]) & (t["pct"] <= t["pct_high"])).all()
    row = t[(t.vms == 2) & (t.variant == "fast")].iloc[0]
    sub = df[df.vms == 2]
    c = stats.compare(sub[sub.variant == "base"].value, sub[sub.variant == "fast"].value)
    assert row["pct"] == pytest.approx(c.pct, rel=1e-12)
    ts = stats.compare_table(df, "value", "base", by=["vms"], test="student")  # ministat's table
    rs = ts[(ts.vms == 2) & (ts.variant == "fast")].iloc[0]
    assert rs["pct"] == c.pct and rs["diff_err"] == c.diff_err and rs["p"] == c.p
    ta = stats.compare_table(df, "value", "base", by=["vms"], welch="auto")  # the old pretest
    assert set(ta.loc[ta.variant == "noisy", "test"]) == {"welch-log"}  # Levene: variances differ
    assert set(ta.loc[ta.variant == "fast", "test"]) == {"student"}
    t2 = stats.compare_table(df, "value", "base", by="vms", welch=False, holm=False)
    assert set(t2["test"]) == {"student"} and (t2["p_holm"] == t2["p"]).all()
    assert t2["equivalent"].isna().all()
    # long format with a metric column
    m = df.assign(metric="thr")
    t3 = stats.compare_table(pd.concat([m, m.assign(metric="lat")]), "thr", "base", by=["vms"])
    assert len(t3) == 9


def test_compare_table_errors():
    df = _long_df()
    with pytest.raises(ValueError, match="no 'nope' runs at"):
        stats.compare_table(df, "value", "nope", by=["vms"])
    with pytest.raises(ValueError, match="missing columns"):
        stats.compare_table(df, "value", "base", by=["cpus"])


def test_cli_does_not_import_heavy_modules():
    code = (
        "import sys; from schedlab.cli import main; import schedlab.stats.ministat; "
        "print(sorted(m for m in ('numpy', 'pandas', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_compare_table_paired_by_round():
    """Variants interleaved within each round's boot: the paired t on the per-round log
    ratios resolves an effect that the rounds' own spread hides from Welch's t."""
    from scipy import stats as sps

    from schedlab.stats import compare_table

    boots = [1.00, 1.10, 0.92, 1.05, 0.97, 1.08]  # each round's boot runs everything this much faster
    jitter = [1.002, 0.998, 1.001, 0.999, 1.0, 1.001]
    rows = []
    for r, (b, j) in enumerate(zip(boots, jitter)):
        rows += [{"variant": "a", "round": r, "m": 100 * b}, {"variant": "b", "round": r, "m": 95 * b * j}]
    rows.append({"variant": "b", "round": 9, "m": 50.0})  # no partner: left out
    df = pd.DataFrame(rows)
    p = compare_table(df, "m", "a", test="paired", pair_col="round").iloc[0]
    assert p["test"] == "paired-log" and p["dof"] == 5 and p["n_base"] == p["n_var"] == 6
    assert p["significant"] and p["pct_high"] < 0 < p["pct_low"] + 6
    w = compare_table(df[df["round"] != 9], "m", "a").iloc[0]
    assert not w["significant"]
    # by hand: the mean log ratio and its standard error
    d = np.log(np.array([95 * b * j for b, j in zip(boots, jitter)]) / (100 * np.array(boots)))
    t = d.mean() / (d.std(ddof=1) / np.sqrt(6))
    assert p["p"] == pytest.approx(2 * sps.t.sf(abs(t), 5), rel=1e-9)
    with pytest.raises(ValueError, match="pair_col"):
        compare_table(df, "m", "a", test="paired")
    # one pair: untestable, not an error
    one = ((df.variant == "a") & (df["round"] < 2)) | ((df.variant == "b") & df["round"].isin([1, 9]))
    u = compare_table(df[one], "m", "a", test="paired", pair_col="round").iloc[0]
    assert u["test"] == "untestable" and "fewer than the 2 a test needs" in u["reason"]
