"""schedlab.stats: error rates and interval coverage checked by seeded simulation,
and the table's verdicts consistent with its intervals (docs/statistics.md)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from schedlab import stats


def _shown_interval(t: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The interval of the relative difference a table row shows: pct_low/pct_high,
    or (tables without them) ministat's pct -+ |pct_err|."""
    if "pct_low" in t:
        return t["pct_low"], t["pct_high"]
    return t["pct"] - t["pct_err"].abs(), t["pct"] + t["pct_err"].abs()


def _points_df(base: np.ndarray, var: np.ndarray) -> pd.DataFrame:
    """Long table: point k has baseline runs base[k] and variant runs var[k]."""
    k, nb = base.shape
    nv = var.shape[1]
    return pd.DataFrame(
        {
            "pt": np.r_[np.repeat(np.arange(k), nb), np.repeat(np.arange(k), nv)],
            "variant": ["base"] * (k * nb) + ["var"] * (k * nv),
            "value": np.r_[base.ravel(), var.ravel()],
        }
    )


# ------------------------------------------------------------ 1. Welch by default
def test_default_table_test_holds_type1_error_with_unequal_variances():
    """3 runs, sd ratio 4, equal means: the Levene pretest almost never picks Welch
    and Student's test then rejects ~9 % of true nulls; the default must hold 5 %."""
    rng = np.random.default_rng(20240601)
    k, n = 4000, 3
    sd_b = np.where(np.arange(k) % 2 == 0, 1.0, 4.0)  # both orders of the ratio
    base = rng.normal(100.0, sd_b[:, None], (k, n))
    var = rng.normal(100.0, 4.0 / sd_b[:, None], (k, n))
    t = stats.compare_table(_points_df(base, var), "value", "base", by=["pt"], holm=False)
    assert len(t) == k
    rate = float((t["p"] < 0.05).mean())
    assert rate <= 0.062, f"type-I error {rate:.3f} at nominal 0.05"
    assert set(t["test"]) == {"welch-log"}


def test_student_table_is_ministats_and_welch_flag_kept():
    rng = np.random.default_rng(3)
    df = _points_df(rng.normal(100, 2, (3, 5)), rng.normal(103, 2, (3, 4)))
    t = stats.compare_table(df, "value", "base", by="pt", test="student")
    assert set(t["test"]) == {"student"} and set(t["interval"]) == {"ministat"}
    for _, r in t.iterrows():
        s = df[df.pt == r["pt"]]
        c = stats.compare(s[s.variant == "base"].value, s[s.variant == "var"].value)
        assert (r["pct"], r["pct_err"], r["diff_err"], r["p"]) == (c.pct, c.pct_err, c.diff_err, c.p)
        assert r["ci_level"] == 95.0  # the ministat interval is unadjusted
    # the old flag still selects the tests
    assert set(stats.compare_table(df, "value", "base", by="pt", welch=False)["test"]) == {"student"}
    assert set(stats.compare_table(df, "value", "base", by="pt", welch=True)["test"]) == {"welch-log"}
    with pytest.raises(ValueError, match="test"):
        stats.compare_table(df, "value", "base", by="pt", test="bogus")
    # compare(): ministat's Student test by default, Welch on request
    a, b = df[(df.pt == 0) & (df.variant == "base")].value, df[(df.pt == 0) & (df.variant == "var")].value
    assert stats.compare(a, b).test == "student" and stats.compare(a, b, welch=True).test == "welch"


# ------------------------------------------------- 2. ratio intervals that cover
def _coverage(n: int, kind: str, reps: int, seed: int) -> tuple[float, set]:
    rng = np.random.default_rng(seed)
    cv, mb, true = 0.10, 100.0, 1.15
    if kind == "lognormal":
        s = math.sqrt(math.log(1 + cv * cv))
        b = rng.lognormal(math.log(mb) - s * s / 2, s, (reps, n))
        v = rng.lognormal(math.log(mb * true) - s * s / 2, s, (reps, n))
    else:
        b, v = rng.normal(mb, cv * mb, (reps, n)), rng.normal(mb * true, cv * mb * true, (reps, n))
    hit, methods = 0, set()
    for i in range(reps):
        r = stats.bootstrap_ratio_ci([[x] for x in b[i]], [[x] for x in v[i]], seed=i)
        hit += r.low <= true <= r.high
        methods.add(getattr(r, "method", None))
    return hit / reps, methods


@pytest.mark.parametrize("n", [3, 5])
@pytest.mark.parametrize("kind", ["normal", "lognormal"])
def test_ratio_ci_covers_at_small_n(n, kind):
    cov, methods = _coverage(n, kind, reps=1500, seed=n * 10 + len(kind))
    assert cov >= 0.92, f"coverage {cov:.3f} for nominal 0.95 at n={n}"
    assert methods == {"log-t"}


def test_ratio_ci_is_bca_only_when_asked():
    n = 20
    rng = np.random.default_rng(5)
    b, v = rng.normal(100, 10, n), rng.normal(110, 11, n)
    assert stats.bootstrap_ratio_ci([[x] for x in b], [[x] for x in v], seed=7).method == "log-t"
    r = stats.bootstrap_ratio_ci([[x] for x in b], [[x] for x in v], n_boot=2000, seed=7, method="BCa")
    assert r.method == "BCa" and r.n_boot == 2000
    ref = st.bootstrap(
        (b, v),
        lambda x, y, axis=-1: np.mean(y, axis=axis) / np.mean(x, axis=axis),
        method="BCa",
        n_resamples=2000,
        rng=7,
        vectorized=True,
    ).confidence_interval
    assert (r.low, r.high) == pytest.approx((ref.low, ref.high), rel=1e-12)
    assert r.low < r.estimate < r.high
    # by default the parametric interval
    r2 = stats.bootstrap_ratio_ci([[x] for x in b[1:]], [[x] for x in v[1:]], seed=7)
    assert r2.method == "log-t" and r2.n_boot == 0
    # a ratio that is not positive: Fieller's interval
    r3 = stats.bootstrap_ratio_ci([[10], [11], [12]], [[-1], [1], [-0.5]], seed=0)
    assert r3.method == "fieller" and r3.low < r3.estimate < r3.high
    with pytest.raises(ValueError, match="method"):
        stats.bootstrap_ratio_ci([[1], [2]], [[1], [2]], method="bogus")


# ---------------------------------- 3. bounded intervals, rank/permutation tests
def test_relative_interval_never_below_minus_100_percent():
    # p99 waits over 3 runs: wide and skewed; the ministat-style +-err goes below -100 %
    df = _points_df(np.array([[10.0, 50.0, 200.0], [3.0, 4.0, 5.0]]), np.array([[1.0, 2.0, 30.0], [1.0, 1.2, 1.1]]))
    t = stats.compare_table(df, "value", "base", by="pt")
    lo, _ = _shown_interval(t)
    assert (lo > -100).all(), lo
    assert (t["pct_low"] <= t["pct"]).all() and (t["pct"] <= t["pct_high"]).all()
    mini = stats.compare_table(df, "value", "base", by="pt", test="student")
    assert (mini["pct"] - mini["pct_err"]).iloc[0] < -100
    assert t["interval"].tolist() == ["log-ratio", "log-ratio"]
    r = t.iloc[0]
    assert r["pct_high"] - r["pct"] > 2 * (r["pct"] - r["pct_low"])  # asymmetric (log scale)
    assert t["pct_err"].isna().all() and t["diff_err"].isna().all()  # no +-err outside ministat tables
    # the interval is the log-ratio Welch interval at the (here unadjusted: one row) level
    b, v = np.array([3.0, 4.0, 5.0]), np.array([1.0, 1.2, 1.1])
    one = stats.compare_table(_points_df(b[None], v[None]), "value", "base", by="pt").iloc[0]
    A, B = b.var(ddof=1) / (3 * b.mean() ** 2), v.var(ddof=1) / (3 * v.mean() ** 2)
    dof = (A + B) ** 2 / (A * A / 2 + B * B / 2)
    L, h = math.log(v.mean() / b.mean()), st.t.ppf(0.975, dof) * math.sqrt(A + B)
    assert (one["pct_low"], one["pct_high"]) == pytest.approx((100 * math.expm1(L - h), 100 * math.expm1(L + h)))
    assert one["p"] == pytest.approx(2 * st.t.sf(abs(L) / math.sqrt(A + B), dof)) and one["dof"] == pytest.approx(dof)


def test_nonnegative_data_with_zero_variant_mean_is_clipped():
    df = _points_df(np.array([[5.0, 9.0, 4.0]]), np.array([[0.0, 0.0, 0.0]]))
    r = stats.compare_table(df, "value", "base", by="pt").iloc[0]
    assert r["interval"] == "difference" and r["test"] == "welch" and r["pct_low"] == -100.0


def _storms(rng, n, storm_b, storm_v):
    """Bimodal runs (S2 storms): most runs ~100, a storm run ~20."""
    b = np.where(rng.random(n) < storm_b, rng.normal(20, 2, n), rng.normal(100, 3, n))
    v = np.where(rng.random(n) < storm_v, rng.normal(20, 2, n), rng.normal(100, 3, n))
    return b, v


def test_permutation_test_option():
    rng = np.random.default_rng(11)
    b, v = _storms(rng, 7, 0.0, 0.5)
    df = _points_df(b[None], v[None])
    t = stats.compare_table(df, "value", "base", by="pt", test="permutation")
    r = t.iloc[0]
    ref = st.permutation_test(
        (b, v),
        lambda x, y, axis=-1: np.mean(y, axis=axis) - np.mean(x, axis=axis),
        vectorized=True,
        n_resamples=9999,
        rng=0,
    )
    assert r["test"] == "permutation" and r["interval"] == "permutation"
    assert r["p"] == pytest.approx(ref.pvalue, rel=1e-12)  # exact: 3432 partitions
    assert -100 <= r["pct_low"] <= r["pct"] <= r["pct_high"]
    # 3 runs each: 20 partitions, the smallest two-sided p is 0.1: never significant, interval unbounded
    t3 = stats.compare_table(_points_df(b[None, :3], v[None, :3] * 0.2), "value", "base", by="pt", test="permutation")
    assert t3["p"].iloc[0] == pytest.approx(0.1) and not t3["significant"].iloc[0]
    assert t3["pct_low"].iloc[0] == -100 and t3["pct_high"].iloc[0] == math.inf
    # selectable per call: the same data under the default test
    assert stats.compare_table(df, "value", "base", by="pt")["test"].iloc[0] == "welch-log"


def test_permutation_interval_inverts_the_test():
    """The permutation interval at level a excludes ratio r exactly when the test of
    'variant/r ~ baseline' rejects at a."""
    rng = np.random.default_rng(12)
    stat = lambda x, y, axis=-1: np.mean(y, axis=axis) - np.mean(x, axis=axis)
    for _ in range(4):
        b, v = _storms(rng, 6, 0.2, 0.6)
        r = stats.compare_table(
            _points_df(b[None], v[None]), "value", "base", by="pt", test="permutation", holm=False
        ).iloc[0]
        lo, hi = 1 + r["pct_low"] / 100, 1 + r["pct_high"] / 100
        for ratio in (lo * 0.98, lo * 1.02, hi * 0.98, hi * 1.02):
            if not 0 < ratio < math.inf:
                continue
            p = st.permutation_test((b, v / ratio), stat, vectorized=True, n_resamples=9999).pvalue
            assert (p < 0.05) == (not lo <= ratio <= hi), (ratio, lo, hi, p)


# ----------------------------------------------------------- 4. robust variance
def test_variance_of_large_values_with_small_spread():
    a = [1e9 + 0.1, 1e9 + 0.3, 1e9 + 0.2]
    b = [1e9 + 0.2, 1e9 + 0.4, 1e9 + 0.3]
    a0, b0 = [0.1, 0.3, 0.2], [0.2, 0.4, 0.3]
    ref = st.ttest_ind(b0, a0, equal_var=False)  # p = 0.288
    w = stats.compare(a, b, welch=True)
    assert w.p == pytest.approx(ref.pvalue, rel=1e-5) and w.sd_base == pytest.approx(0.1, rel=1e-5)
    assert stats.compare(a, b).p == pytest.approx(st.ttest_ind(b0, a0).pvalue, rel=1e-5)
    t = stats.compare_table(_points_df(np.array([a]), np.array([b])), "value", "base", by="pt").iloc[0]
    assert t["p"] == pytest.approx(ref.pvalue, rel=1e-4) and t["sd_base"] == pytest.approx(0.1, rel=1e-5)
    assert t["pct_low"] < 0 < t["pct_high"]
    e = stats.tost(a, b, margin_pct=1e-7)
    assert e.dof == pytest.approx(4.0, rel=1e-6) and 0 < e.p < 1
    chk = stats.enough_runs(a, b, detect_pct=1e-7)
    assert chk.cv_pct == pytest.approx(1e-8, rel=1e-5)
    assert stats.runs_needed(a, 2e-8) == stats.runs_needed(1e-8, 2e-8) > 2
    r = stats.bootstrap_ratio_ci([[x] for x in a], [[x] for x in b])
    assert r.low < r.estimate < r.high and r.high - r.low < 1e-8


# ------------------------------------------------------ 5. runs_needed, errors
def test_runs_needed_survives_nan_from_noncentral_t(monkeypatch):
    from scipy.stats import nct

    expected = stats.runs_needed(5.0, 5.0)
    nan = lambda *a, **k: np.nan
    monkeypatch.setattr(nct, "sf", nan)
    monkeypatch.setattr(nct, "cdf", nan)
    got = stats.runs_needed(5.0, 5.0)
    assert got == expected == 17 and not got.capped


def test_runs_needed_where_scipy_nct_returns_nan():
    """scipy's nct gives NaN around dof ~ 2e4, nc ~ 5 (cv 20 %, detect 1 %, 99.99 %, power 0.9)."""
    from scipy import integrate

    def power(n, effect, alpha):  # independent: integrate over the chi
        dof, nc = 2 * n - 2, effect * math.sqrt(n / 2)
        tc = st.t.isf(alpha / 2, dof)
        f = lambda w: (
            (st.norm.sf(tc * w - nc) + st.norm.cdf(-tc * w - nc)) * st.chi.pdf(w * math.sqrt(dof), dof) * math.sqrt(dof)
        )
        s = 1 / math.sqrt(2 * dof)
        return integrate.quad(f, 1 - 12 * s, 1 + 12 * s, points=[1.0], limit=200)[0]

    n = stats.runs_needed(20.0, 1.0, confidence=99.99, power=0.9)
    assert isinstance(n, int) and not math.isnan(n)
    assert power(n, 0.05, 1e-4) >= 0.9 > power(n - 1, 0.05, 1e-4)


def test_runs_needed_respects_max_runs():
    n = stats.runs_needed(100.0, 0.001, max_runs=1000)
    assert n == 1000 and n.capped and "capped" in repr(n)
    m = stats.runs_needed(5.0, 5.0, max_runs=10)
    assert m == 10 and m.capped
    assert stats.runs_needed(5.0, 5.0, max_runs=17) == 17 and not stats.runs_needed(5.0, 5.0, max_runs=17).capped
    chk = stats.enough_runs([100, 101, 99], [100, 102, 98], detect_pct=0.0001)
    assert chk.capped and not chk.enough


def test_zero_baseline_mean_is_an_error():
    with pytest.raises(ValueError, match="baseline mean is 0"):
        stats.compare([-1.0, 0.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="baseline mean is 0"):
        stats.compare([-1.0, 0.0, 1.0], [1.0, 2.0, 3.0], welch=True)
    df = _points_df(np.array([[-1.0, 0.0, 1.0]]), np.array([[1.0, 2.0, 3.0]]))
    for test in ("welch", "student", "permutation"):
        with pytest.raises(ValueError, match=r"'var' vs 'base' at \{'pt': 0\}: baseline mean is 0"):
            stats.compare_table(df, "value", "base", by="pt", test=test)
    with pytest.raises(ValueError, match="baseline mean is 0"):
        stats.enough_runs([-1.0, 0.0, 1.0], [1.0, 2.0, 3.0], detect_pct=5)


@pytest.mark.parametrize(
    "call",
    [
        lambda: stats.compare([1, 2, 3], [2, 3, 4], confidence=0.95),
        lambda: stats.compare([1, 2, 3], [2, 3, 4], confidence=0.95, welch=True),
        lambda: stats.runs_needed(5.0, 5.0, confidence=0.95),
        lambda: stats.enough_runs([1, 2, 3], [2, 3, 4], 5.0, confidence=0.95),
        lambda: stats.bootstrap_ci([1, 2, 3], confidence=0.95),
        lambda: stats.bootstrap_ratio_ci([[1], [2], [3]], [[2], [3], [4]], confidence=0.95),
        lambda: stats.compare_table(
            _points_df(np.array([[1.0, 2, 3]]), np.array([[2.0, 3, 4]])), "value", "base", by="pt", confidence=0.95
        ),
    ],
)
def test_confidence_as_a_fraction_is_an_error(call):
    with pytest.raises(ValueError, match=r"confidence=0\.95 .*percent"):
        call()


def test_power_as_a_percentage_is_an_error():
    with pytest.raises(ValueError, match="power"):
        stats.runs_needed(5.0, 5.0, power=80)


# -------------------------------------------- 6. multiplicity: stars and intervals
def _random_table(rng, test):
    rows = []
    for pt in range(12):
        n = int(rng.choice([3, 4, 6, 8]))
        sd = float(rng.choice([0.5, 2.0, 8.0]))
        for v, shift in (("base", 0), ("a", rng.choice([0, 1, 3, 10])), ("b", rng.choice([0, -2, -6]))):
            for x in rng.normal(100 + shift, sd * (2 if v == "b" else 1), n):
                rows.append({"pt": pt, "variant": v, "value": max(x, 0.01)})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("test", ["welch", "permutation"])
def test_star_and_interval_agree_after_holm(test):
    rng = np.random.default_rng(31 if test == "welch" else 32)
    nsig = nmid = 0
    for _ in range(3 if test == "welch" else 1):
        kw = {} if test == "welch" else {"test": test}  # the default table, as the paper calls it
        t = stats.compare_table(_random_table(rng, test), "value", "base", by="pt", **kw)
        m = len(t)
        assert m == 24
        lo, hi = _shown_interval(t)
        excl = (lo > 0) | (hi < 0)
        assert (t["significant"] == excl).all(), t.assign(lo=lo, hi=hi)[["p", "p_holm", "significant", "lo", "hi"]]
        assert t["ci_matches_star"].all()
        assert (t["ci_level"] >= 95.0).all()
        # the row with the smallest p is judged at alpha/m (Holm's first step)
        i = int(np.argmin(t["p"]))
        if t["p_holm"].iloc[i] < 1:
            assert t["ci_level"].iloc[i] == pytest.approx(100 * (1 - 0.05 / m))
        nsig += int(t["significant"].sum())
        nmid += int(((t["p"] < 0.05) & ~t["significant"]).sum())  # unadjusted-significant only
    assert nsig > 0 and (nmid > 0 or test == "permutation")


def test_unadjusted_ministat_intervals_are_marked():
    rng = np.random.default_rng(33)
    t = stats.compare_table(_random_table(rng, "student"), "value", "base", by="pt", test="student")
    excl = (t["pct_low"] > 0) | (t["pct_high"] < 0)
    assert (t["ci_level"] == 95.0).all() and (t["interval"] == "ministat").all()
    assert (t["ci_matches_star"] == (t["significant"] == excl)).all()
    assert not t["ci_matches_star"].all()  # some unadjusted interval excludes 0 without a star


def test_tost_verdicts_are_holm_adjusted():
    rng = np.random.default_rng(34)
    rows = []
    for pt in range(10):
        for v, mu in (("base", 100.0), ("same", 100.0)):
            for x in rng.normal(mu, 1.0, 6):
                rows.append({"pt": pt, "variant": v, "value": x})
    df = pd.DataFrame(rows)
    t = stats.compare_table(df, "value", "base", by="pt", margin_pct=2.0)
    raw = [
        stats.tost(
            df[(df.pt == p) & (df.variant == "base")].value, df[(df.pt == p) & (df.variant == "same")].value, 2.0
        ).equivalent
        for p in range(10)
    ]
    assert sum(raw) > int(t["equivalent"].sum())  # some lose equivalence to Holm
    np.testing.assert_allclose(t["eq_p_holm"], stats.holm(t["eq_p"]))
    # equivalent: the Holm-adjusted TOST and the printed interval inside the margin
    inside = (t["pct_low"] > -2) & (t["pct_high"] < 2)
    assert (t["equivalent"] == ((t["eq_p_holm"] < 0.05) & inside)).all()
    t2 = stats.compare_table(df, "value", "base", by="pt", margin_pct=2.0, holm=False)
    assert all(r or not e for e, r in zip(t2["equivalent"], raw)) and (t2["eq_p_holm"] == t2["eq_p"]).all()


def test_several_baselines_in_one_family():
    rng = np.random.default_rng(35)
    rows = [
        {"pt": pt, "variant": v, "value": x}
        for pt in range(3)
        for v, mu in (("b1", 100), ("x", 104), ("b2", 50), ("y", 50.5))
        for x in rng.normal(mu, 1, 5)
    ]
    df = pd.DataFrame(rows)
    t = stats.compare_table(df, "value", {"b1": "b1", "x": "b1", "b2": "b2", "y": "b2"}, by="pt")
    assert len(t) == 6 and t.set_index("variant")["baseline"].to_dict() == {"x": "b1", "y": "b2"}
    np.testing.assert_allclose(t["p_holm"], stats.holm(t["p"]))  # one family over both baselines
    with pytest.raises(ValueError, match="no baseline for variant 'y'"):
        stats.compare_table(df, "value", {"b1": "b1", "x": "b1", "b2": "b2"}, by="pt")
