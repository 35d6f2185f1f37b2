"""The statistics the notebooks use: ministat's comparison as numbers (so the
paper's numbers equal `schedlab ministat`'s), plus what ministat does not do:
p-values, Welch, equivalence (TOST), Holm, power, bootstrap, comparison tables.
Outside ministat's own numbers, variances are two-pass (ministat's running sums
cancel for large values).  See docs/statistics.md."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from schedlab.stats import ministat as _m

__all__ = [
    "Summary",
    "Comparison",
    "Equivalence",
    "BootstrapResult",
    "RunsCheck",
    "RunsNeeded",
    "read_ministat_file",
    "summarize",
    "compare",
    "tost",
    "tost_paired",
    "icc",
    "holm",
    "runs_needed",
    "enough_runs",
    "bootstrap_ci",
    "bootstrap_ratio_ci",
    "compare_table",
    "t_table_value",
]


# ------------------------------------------------------------------ helpers
def _floats(values, what: str = "values", min_n: int = 2) -> list[float]:
    try:
        out = [float(v) for v in (values.tolist() if hasattr(values, "tolist") else values)]
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what}: not a sequence of numbers ({e})") from None
    if len(out) < min_n:
        raise ValueError(f"{what}: need at least {min_n} samples, got {len(out)}")
    if not all(math.isfinite(v) for v in out):
        raise ValueError(f"{what}: contains NaN or infinite values")
    return out


# the end of an untestable comparison's reason when it has too few units ("3 boots in a variant,
# fewer than the 5 a test needs"): the report tells that cause apart by it
TOO_FEW_UNITS_MARK = "a test needs"


def _confidence(confidence, name: str = "confidence") -> float:
    """A confidence level in percent; a fraction (0.95) is an error, not 0.95 %."""
    try:
        c = float(confidence)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a percentage such as 95, got {confidence!r}") from None
    if 0 < c <= 1:
        raise ValueError(f"{name}={confidence!r} looks like a fraction: give a percentage (95, not 0.95)")
    if not 0 < c < 100:
        raise ValueError(f"{name} must be in (0, 100) percent, got {confidence!r}")
    return c


def _dataset(values, what, flavor="debian") -> _m.Dataset:
    return _m.Dataset(b"", _floats(values, what), flavor)


def t_table_value(dof: int, confidence: float) -> float | None:
    """ministat's built-in t value (None when `confidence` is not one of its columns).
    Note its "99.5" column holds two-sided 99.8 % quantiles (3.090 at infinity)."""
    if float(confidence) not in _m.STUDENTPCT:
        return None
    ci = _m.STUDENTPCT.index(float(confidence))
    return _m.STUDENT[0][ci] if dof > _m.NSTUDENT else _m.STUDENT[dof][ci]


def read_ministat_file(path, column: int = 1, delimiters: str = " \t") -> list[float]:
    """The values ministat would read from `path` (same comment, column and
    delimiter rules).  Raises ValueError("path:line: invalid data ...")."""
    if column < 1:
        raise ValueError(f"{path}: column must be >= 1, got {column}")
    if not delimiters:
        raise ValueError(f"{path}: empty delimiter string")
    with open(path, "rb") as f:
        data = f.read()
    try:
        return _m.parse_values(data, column, os.fsencode(delimiters))
    except _m.InvalidData as e:
        line = _m_line(data, e.lineno)
        raise ValueError(f"{path}:{e.lineno}: invalid data {line!r} (column {column})") from None


def _m_line(data: bytes, lineno: int) -> str:
    for k, piece in enumerate(_m._fgets_lines(data), 1):
        if k == lineno:
            return piece.rstrip(_m._CSPACE).decode(errors="replace")
    return ""


# ------------------------------------------------------------------ summary
@dataclass(frozen=True)
class Summary:
    n: int
    min: float
    max: float
    median: float
    mean: float
    stddev: float

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(values, flavor: str = "debian") -> Summary:
    """ministat's vitals line as numbers: median = the upper middle value for even
    N (Debian; flavor="freebsd": mean of the two middle values), N-1 stddev from
    ministat's running sums (so the printed digits agree)."""
    ds = _dataset(values, "values", flavor)
    return Summary(ds.n, ds.min(), ds.max(), ds.median(), ds.avg(), ds.stddev())


# ------------------------------------------------------------------ compare
@dataclass(frozen=True)
class Comparison:
    n_base: int
    n_var: int
    mean_base: float
    mean_var: float
    sd_base: float
    sd_var: float
    diff: float  # mean_var - mean_base
    diff_err: float  # half-width of the confidence interval of diff (ministat's "+/-")
    pct: float  # diff in % of mean_base
    pct_err: float  # diff_err in % of mean_base (ministat's convention)
    significant: bool  # |diff| > diff_err: ministat's verdict
    p: float  # two-sided p-value of the same t-test (scipy)
    t_crit: float
    dof: float
    test: str  # "student" or "welch"
    confidence: float
    spool: float | None  # pooled stddev (Student only)

    def to_dict(self) -> dict:
        return asdict(self)


def _t_ppf(q: float, dof: float) -> float:
    from scipy import stats as st

    return float(st.t.ppf(q, dof))


def _t_two_sided_p(tstat: float, dof: float) -> float:
    from scipy import special

    if math.isnan(tstat):
        return 1.0
    return float(2 * special.stdtr(dof, -abs(tstat)))


def _t_crit(alpha: float, dof: float) -> float:
    """Two-sided critical value: stdtrit on the small tail keeps tiny alphas exact."""
    from scipy import special

    return float(-special.stdtrit(dof, alpha / 2))


def _welch_dof(a: float, b: float, n1: int, n2: int) -> float:
    """Welch-Satterthwaite dof for the variance terms a = s1^2/n1, b = s2^2/n2."""
    den = a * a / (n1 - 1) + b * b / (n2 - 1)
    return (a + b) ** 2 / den if den > 0 else float(n1 + n2 - 2)


def compare(baseline, variant, confidence: float = 95.0, welch: bool = False) -> Comparison:
    """`variant` against `baseline`, as `ministat baseline variant` does.

    Student (default): pooled variance, ministat's own t-table when `confidence`
    is one of 80/90/95/98/99/99.5 (the numbers then equal the CLI's; its 99.5
    column is really 99.8 %), scipy's quantile otherwise.  welch=True: Welch's
    t-test on two-pass variances, Welch-Satterthwaite dof and scipy's quantile
    (ministat's table has no fractional dof).  p is scipy's two-sided p-value of
    the test, from two-pass (shifted) variances in both cases; the verdict
    `significant` is ministat's |diff| > diff_err.  A zero baseline mean is an
    error (the percentages would be undefined)."""
    confidence = _confidence(confidence)
    b, v = _floats(baseline, "baseline"), _floats(variant, "variant")
    n1, n2 = len(b), len(v)
    m = _Moments(b, v)
    if m.mb == 0:
        raise ValueError("baseline mean is 0: the relative difference (pct) is undefined")
    if not welch:
        rs, ds = _m.Dataset(b"", b), _m.Dataset(b"", v)
        if rs.avg() == 0:
            raise ValueError("baseline mean is 0: the relative difference (pct) is undefined")
        v1, v2, mb = rs.var(), ds.var(), rs.avg()
        ci = _m.STUDENTPCT.index(confidence) if confidence in _m.STUDENTPCT else None
        if ci is not None:
            r = _m.relative(ds, rs, ci)
            t, spool, d, e = r["t"], r["spool"], r["diff"], r["err"]
            pct, pct_err = r["pct"], r["pct_err"]
        else:
            dof_i = n1 + n2 - 2
            t = _t_ppf(0.5 + confidence / 200, dof_i)
            spool = math.sqrt(((n2 - 1) * v2 + (n1 - 1) * v1) / dof_i)
            d, e = ds.avg() - mb, t * spool * math.sqrt(1.0 / n2 + 1.0 / n1)
            pct, pct_err = _m._cdiv(d * 100, mb), _m._cdiv(e * 100, mb)
        dof = float(n1 + n2 - 2)
        # p from two-pass variances: ministat's running sums cancel for large values
        sp2 = ((n1 - 1) * m.vb + (n2 - 1) * m.vv) / (n1 + n2 - 2)
        s_p = math.sqrt(sp2 * (1.0 / n1 + 1.0 / n2))
        p = _t_two_sided_p(m.d / s_p, dof) if s_p > 0 else (0.0 if m.d != 0 else 1.0)
        return Comparison(
            n1,
            n2,
            mb,
            ds.avg(),
            rs.stddev(),
            ds.stddev(),
            d,
            e,
            pct,
            pct_err,
            bool(abs(d) > e),
            p,
            t,
            dof,
            "student",
            confidence,
            spool,
        )
    a, bb = m.vb / n1, m.vv / n2
    s = math.sqrt(a + bb)
    dof = _welch_dof(a, bb, n1, n2)
    t = _t_ppf(0.5 + confidence / 200, dof)
    d, e = m.d, t * s
    p = _t_two_sided_p(d / s, dof) if s > 0 else (0.0 if d != 0 else 1.0)
    return Comparison(
        n1,
        n2,
        m.mb,
        m.mv,
        math.sqrt(m.vb),
        math.sqrt(m.vv),
        d,
        e,
        d * 100 / m.mb,
        e * 100 / m.mb,
        bool(abs(d) > e),
        p,
        t,
        dof,
        "welch",
        confidence,
        None,
    )


# -------------------------------------------------------------- equivalence
@dataclass(frozen=True)
class Equivalence:
    equivalent: bool
    p: float  # max of the two one-sided p-values
    pct: float  # observed difference in % of the baseline mean
    ci_low_pct: float  # (1 - 2 alpha) confidence interval of pct
    ci_high_pct: float
    margin_pct: float
    alpha: float
    dof: float

    def to_dict(self) -> dict:
        return asdict(self)


def tost(baseline, variant, margin_pct: float = 2.0, alpha: float = 0.05) -> Equivalence:
    """Two one-sided (Welch) t-tests of H0: |mean_var - mean_base| >= margin, the
    margin being `margin_pct` % of the baseline mean (treated as a known scale).
    Equivalent iff p < alpha, i.e. iff the (1-2 alpha) CI lies inside +-margin.
    "No difference proven" (compare) is not "the same": only this says that."""
    from scipy import special

    if not margin_pct > 0 or not 0 < alpha < 0.5:
        raise ValueError("need margin_pct > 0 and 0 < alpha < 0.5")
    b, v = _floats(baseline, "baseline"), _floats(variant, "variant")
    m = _Moments(b, v)
    if m.mb == 0:
        raise ValueError("baseline mean is 0: a percentage margin is undefined")
    a, bb = m.vb / len(b), m.vv / len(v)
    s = math.sqrt(a + bb)
    dof = _welch_dof(a, bb, len(b), len(v))
    d = m.d
    delta = abs(m.mb) * margin_pct / 100
    if s > 0:
        p_low = float(special.stdtr(dof, -(d + delta) / s))  # H0: d <= -delta
        p_high = float(special.stdtr(dof, (d - delta) / s))  # H0: d >= +delta
        half = float(-special.stdtrit(dof, alpha)) * s
    else:
        p_low = 0.0 if d > -delta else 1.0
        p_high = 0.0 if d < delta else 1.0
        half = 0.0
    p = max(p_low, p_high)
    scale = 100 / abs(m.mb)
    return Equivalence(
        bool(p < alpha), p, d * scale, (d - half) * scale, (d + half) * scale, float(margin_pct), float(alpha), dof
    )


def tost_paired(baseline, variant, margin_pct: float = 2.0, alpha: float = 0.05) -> Equivalence:
    """TOST for a paired design: the pairs' log ratios (their differences where a value is not
    positive) against the margin +-`margin_pct` % of the baseline, one-sample t with n - 1
    degrees of freedom, so the pairing's removal of shared (boot, round) variation counts."""
    from scipy import special

    if not margin_pct > 0 or not 0 < alpha < 0.5:
        raise ValueError("need margin_pct > 0 and 0 < alpha < 0.5")
    b, v = np.asarray(_floats(baseline, "baseline"), float), np.asarray(_floats(variant, "variant"), float)
    if len(b) != len(v):
        raise ValueError("paired TOST: baseline and variant need one value per pair")
    n = len(b)
    mb = float(np.mean(b))
    if mb == 0:
        raise ValueError("baseline mean is 0: a percentage margin is undefined")
    positive = bool(b.min() > 0 and v.min() > 0)
    if positive:
        d = np.log(v / b)
        lo, hi = math.log1p(-min(margin_pct, 99.999) / 100), math.log1p(margin_pct / 100)
    else:
        d = v - b
        lo, hi = -abs(mb) * margin_pct / 100, abs(mb) * margin_pct / 100
    mean, dof = float(d.mean()), n - 1
    s = float(d.std(ddof=1) / math.sqrt(n))
    if s > 0:
        p_low = float(special.stdtr(dof, -(mean - lo) / s))
        p_high = float(special.stdtr(dof, (mean - hi) / s))
        half = float(-special.stdtrit(dof, alpha)) * s
    else:
        p_low = 0.0 if mean > lo else 1.0
        p_high = 0.0 if mean < hi else 1.0
        half = 0.0
    p = max(p_low, p_high)
    if positive:
        pct, a, z = (100 * math.expm1(x) for x in (mean, mean - half, mean + half))
    else:
        pct, a, z = (100 * x / abs(mb) for x in (mean, mean - half, mean + half))
    return Equivalence(bool(p < alpha), p, pct, a, z, float(margin_pct), float(alpha), float(dof))


# ------------------------------------------------------------------- Holm
def holm(pvalues: Iterable[float]) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values, in the input order.  The family is
    every non-NaN p given; NaNs stay NaN."""
    p = np.asarray(list(pvalues), dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adj = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(adj)
    return out


def _holm_factors(p: np.ndarray) -> np.ndarray:
    """Each p's Holm multiplier c (unclipped p_holm = c p, c >= m - step + 1):
    Holm rejects a hypothesis iff p < alpha / c, so the interval at level alpha / c
    excludes the null exactly when it is rejected."""
    m = len(p)
    c = np.ones(m)
    if m == 0:
        return c
    order = np.argsort(p, kind="stable")
    ps = p[order]
    steps = m - np.arange(m)
    cm = np.maximum.accumulate(steps * ps)
    with np.errstate(divide="ignore", invalid="ignore"):
        c[order] = np.where(ps > 0, cm / ps, steps)
    return c


# ------------------------------------------------------------------- power
def _power(n: int, effect: float, alpha: float) -> float:
    """Power of the two-sided two-sample Student t-test, n runs per arm, effect =
    difference / stddev; exact via the noncentral t distribution."""
    from scipy import stats as st

    dof = 2 * n - 2
    nc = effect * math.sqrt(n / 2)
    tc = _t_crit(alpha, dof)
    with np.errstate(all="ignore"):
        pw = float(st.nct.sf(tc, dof, nc) + st.nct.cdf(-tc, dof, nc))
    if math.isfinite(pw) and -1e-12 <= pw <= 1 + 1e-12:
        return min(1.0, max(0.0, pw))
    return _power_quad(dof, nc, tc)  # scipy's nct gives NaN for some large dof


def _power_quad(dof: int, nc: float, tc: float) -> float:
    """The same power by integrating P(|Z + nc| > tc W) over W = sqrt(chi2_dof / dof)."""
    from scipy import integrate
    from scipy import stats as st

    r = math.sqrt(dof)
    lo, hi = st.chi.ppf(1e-15, dof) / r, st.chi.isf(1e-15, dof) / r

    def f(w):
        return (st.norm.sf(tc * w - nc) + st.norm.cdf(-tc * w - nc)) * st.chi.pdf(w * r, dof) * r

    pw = integrate.quad(f, lo, hi, points=[1.0] if lo < 1 < hi else None, limit=200, epsabs=1e-13)[0]
    if not math.isfinite(pw):
        raise ValueError(f"power undefined for dof={dof}, noncentrality={nc}")
    return min(1.0, max(0.0, pw))


def _cv_pct(spread, what="samples") -> float:
    if isinstance(spread, (int, float, np.floating, np.integer)):
        cv = float(spread)
    else:
        x = _floats(spread, what)
        mean, var = _mean_var(x)
        if mean == 0:
            raise ValueError(f"{what}: mean is 0, relative spread undefined")
        cv = math.sqrt(var) / abs(mean) * 100
    if not cv >= 0 or math.isinf(cv):
        raise ValueError(f"stddev_pct must be a finite number >= 0, got {cv}")
    return cv


class RunsNeeded(int):
    """Runs per arm (an int) that also says whether `max_runs` capped it:
    `capped` True means more than max_runs would be needed."""

    capped: bool

    def __new__(cls, n: int, capped: bool = False):
        obj = super().__new__(cls, n)
        obj.capped = bool(capped)
        return obj

    def __repr__(self) -> str:
        return f"{int(self)} (capped at max_runs: more are needed)" if self.capped else repr(int(self))


def icc(values, units) -> float:
    """The intra-class correlation of runs within units (boots): the share of the variance
    that lies between units, from the one-way ANOVA mean squares (unequal runs per unit
    allowed), clipped to [0, 1]; NaN without two units or a unit with two runs."""
    v = np.asarray(values, float)
    u = np.asarray(units)
    groups = [v[u == k] for k in dict.fromkeys(u.tolist())]
    k, n = len(groups), len(v)
    if k < 2 or n <= k:
        return math.nan
    grand = v.mean()
    ssb = sum(len(g) * (g.mean() - grand) ** 2 for g in groups)
    ssw = sum(((g - g.mean()) ** 2).sum() for g in groups)
    msb, msw = ssb / (k - 1), ssw / (n - k)
    n0 = (n - sum(len(g) ** 2 for g in groups) / n) / (k - 1)
    var_b = max((msb - msw) / n0, 0.0)
    total = var_b + msw
    return float(var_b / total) if total > 0 else math.nan


def runs_needed(
    spread,
    detect_pct: float,
    confidence: float = 95.0,
    power: float = 0.8,
    max_runs: int = 100000,
    runs_per_unit: int = 1,
    icc: float = 0.0,
) -> RunsNeeded:
    """Units per variant for a two-sided two-sample t-test at `confidence` to detect a
    `detect_pct` % difference with probability `power`.  `spread` is the stddev
    in % of the mean (coefficient of variation) or a sample to estimate it from.
    Starts from the normal approximation and then searches with the exact
    noncentral-t power (scipy.stats.nct; numerical integration where it gives NaN).
    Never more than `max_runs`: then the result is max_runs with `.capped` True.

    With `runs_per_unit` m runs in each unit (boot) whose runs share a share `icc` of their
    variance, the runs needed independently are divided by the m runs of a unit and
    multiplied by the design effect 1 + (m - 1) icc: the result counts units. With m = 1
    (one run per boot) `spread` is the CV across units and the result is the same."""
    from scipy import stats as st

    confidence = _confidence(confidence)
    cv = _cv_pct(spread)
    if not (isinstance(detect_pct, (int, float, np.floating, np.integer)) and 0 < detect_pct < math.inf):
        raise ValueError(f"detect_pct must be a finite number > 0, got {detect_pct!r}")
    if not 0 < power < 1:
        hint = " (a fraction: 0.8, not 80)" if 1 <= power < 100 else ""
        raise ValueError(f"power must be in (0, 1){hint}, got {power!r}")
    if int(max_runs) < 2:
        raise ValueError(f"max_runs must be >= 2, got {max_runs!r}")
    max_runs = int(max_runs)
    if cv == 0:
        return RunsNeeded(2)
    m = int(runs_per_unit)
    if m < 1 or not 0 <= icc <= 1:
        raise ValueError(f"runs_per_unit must be >= 1 and icc in [0, 1], got {runs_per_unit!r}, {icc!r}")
    if m > 1:
        # the CV of a unit's mean of m runs: the design effect over m
        cv = cv * math.sqrt((1 + (m - 1) * icc) / m)
    alpha = 1 - confidence / 100
    effect = detect_pct / cv
    z = st.norm.ppf(1 - alpha / 2) + st.norm.ppf(power)
    n = min(max_runs, max(2, math.ceil(min(2 * (z / effect) ** 2, 1e18))))
    while n > 2 and _power(n - 1, effect, alpha) >= power:
        n -= 1
    while _power(n, effect, alpha) < power:
        if n >= max_runs:
            return RunsNeeded(max_runs, capped=True)
        n += 1
    return RunsNeeded(n)


@dataclass(frozen=True)
class RunsCheck:
    enough: bool
    have: int  # runs of the smaller arm
    need: int
    cv_pct: float  # pooled stddev in % of the baseline mean
    detect_pct: float
    capped: bool = False  # need is max_runs and more would be needed

    def to_dict(self) -> dict:
        return asdict(self)


def enough_runs(
    baseline, variant, detect_pct: float, confidence: float = 95.0, power: float = 0.8, max_runs: int = 100000
) -> RunsCheck:
    """Did a study run enough? Uses the pooled observed spread (two-pass) of both arms."""
    confidence = _confidence(confidence)
    b, v = _floats(baseline, "baseline"), _floats(variant, "variant")
    m = _Moments(b, v)
    if m.mb == 0:
        raise ValueError("baseline mean is 0: relative spread undefined")
    pooled = math.sqrt(((len(b) - 1) * m.vb + (len(v) - 1) * m.vv) / (len(b) + len(v) - 2))
    cv = pooled / abs(m.mb) * 100
    need = runs_needed(cv, detect_pct, confidence, power, max_runs)
    have = min(len(b), len(v))
    return RunsCheck(have >= need and not need.capped, have, int(need), cv, float(detect_pct), need.capped)


# --------------------------------------------------------------- bootstrap
# Below this many runs per arm the ratio interval is parametric: BCa covered only
# 0.89-0.90 at n = 8 and 0.92-0.94 from n = 12 in seeded simulations (normal and
# lognormal runs, cv 10 %), the log-ratio t interval 0.95-0.97 at n = 3..5.


@dataclass(frozen=True)
class BootstrapResult:
    estimate: float
    low: float
    high: float
    confidence: float
    n_boot: int  # resamples drawn (0: a parametric interval)
    method: str = "percentile"  # percentile, BCa, log-t or fieller

    def to_dict(self) -> dict:
        return asdict(self)


def _rng(seed):
    if seed is None:
        raise ValueError("seed is required: bootstrap results must be reproducible")
    return np.random.default_rng(seed)


def bootstrap_ci(
    values,
    stat: Callable = np.median,
    confidence: float = 95.0,
    n_boot: int = 10000,
    seed: int | None = 0,
    method: str = "percentile",
) -> BootstrapResult:
    """Bootstrap CI of stat(values); deterministic for a given seed.  method:
    "percentile" (default) or "BCa" (scipy.stats.bootstrap; `stat` must take axis=)."""
    confidence = _confidence(confidence)
    x = np.asarray(_floats(values, "values"))
    if method == "BCa":
        from scipy import stats as st

        _rng(seed)
        r = st.bootstrap(
            (x,),
            lambda s, axis=-1: stat(s, axis=axis),
            method="BCa",
            n_resamples=n_boot,
            confidence_level=confidence / 100,
            rng=seed,
            vectorized=True,
        )
        ci = r.confidence_interval
        return BootstrapResult(float(stat(x)), float(ci.low), float(ci.high), confidence, int(n_boot), "BCa")
    if method != "percentile":
        raise ValueError(f"method must be 'percentile' or 'BCa', got {method!r}")
    idx = _rng(seed).integers(0, len(x), size=(n_boot, len(x)))
    samples = x[idx]
    try:
        boot = np.asarray(stat(samples, axis=1), dtype=float)
    except TypeError:  # a stat without axis=
        boot = np.array([stat(row) for row in samples], dtype=float)
    q = (100 - confidence) / 2
    lo, hi = np.percentile(boot, [q, 100 - q])
    return BootstrapResult(float(stat(x)), float(lo), float(hi), confidence, int(n_boot), "percentile")


def _group_totals(groups, what) -> np.ndarray:
    try:
        tot = [float(np.sum(np.asarray(g, dtype=float))) for g in groups]
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what}: each group must be a sequence of numbers ({e})") from None
    return np.asarray(_floats(tot, what))


def _log_ratio_t(m: _Moments, nb: int, nv: int) -> tuple[float, float, float]:
    """log(mean_v / mean_b), its delta-method standard error and Welch-Satterthwaite dof."""
    a, b = m.vb / (nb * m.mb * m.mb), m.vv / (nv * m.mv * m.mv)
    return math.log1p(m.d / m.mb), math.sqrt(a + b), _welch_dof(a, b, nb, nv)


def _fieller(m: _Moments, nb: int, nv: int, confidence: float) -> tuple[float, float]:
    """Fieller's interval for mean_v / mean_b (Welch dof at the estimate); infinite
    when the baseline mean is not clearly away from 0."""
    a, b = m.vv / nv, m.vb / nb
    rho = m.mv / m.mb
    t = _t_crit(1 - confidence / 100, _welch_dof(a, rho * rho * b, nv, nb))
    qa = m.mb * m.mb - t * t * b
    if qa <= 0:
        return -math.inf, math.inf
    half = math.sqrt(t * t * (a * qa + b * m.mv * m.mv))
    return (m.mv * m.mb - half) / qa, (m.mv * m.mb + half) / qa


def bootstrap_ratio_ci(
    baseline_groups: Sequence[Sequence[float]],
    variant_groups: Sequence[Sequence[float]],
    confidence: float = 95.0,
    n_boot: int = 10000,
    seed: int | None = 0,
    method: str = "auto",
) -> BootstrapResult:
    """CI of the ratio mean(variant run totals) / mean(baseline run totals), where a
    run's total is the sum of its group (e.g. throughput summed over VMs).

    method="auto": the parametric log-ratio t interval (delta method,
    Welch-Satterthwaite dof), or Fieller's interval when the ratio is not positive
    (BCa covered no better at 20 runs per arm, and less below: benchmarks/
    stats_error_rates.py).  "BCa", "log-t", "fieller" and "percentile" (the
    old percentile bootstrap, which under-covers at few runs) force one.  The
    result's `method` says which was used."""
    confidence = _confidence(confidence)
    if method not in ("auto", "BCa", "log-t", "fieller", "percentile"):
        raise ValueError(f"method must be auto, BCa, log-t, fieller or percentile, got {method!r}")
    b, v = _group_totals(baseline_groups, "baseline_groups"), _group_totals(variant_groups, "variant_groups")
    m = _Moments(b, v)
    if m.mb == 0:
        raise ValueError("baseline_groups: baseline mean is 0, ratio undefined")
    _rng(seed)
    est = m.mv / m.mb
    if method == "auto":
        # the log-ratio t interval at every size: measured, it covers at least as well as BCa
        # at 20 runs per arm (benchmarks/stats_error_rates.py), which covers less below that
        method = "log-t" if est > 0 else "fieller"
    if method == "BCa":
        from scipy import stats as st

        with np.errstate(all="ignore"):
            r = st.bootstrap(
                (b, v),
                lambda x, y, axis=-1: np.mean(y, axis=axis) / np.mean(x, axis=axis),
                method="BCa",
                n_resamples=n_boot,
                confidence_level=confidence / 100,
                rng=seed,
                vectorized=True,
            )
        lo, hi = float(r.confidence_interval.low), float(r.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return BootstrapResult(est, lo, hi, confidence, int(n_boot), "BCa")
        method = "log-t" if est > 0 else "fieller"  # degenerate resamples (e.g. constant runs)
    if method == "log-t":
        if not est > 0:
            raise ValueError("log-t needs a positive ratio of means; use method='fieller'")
        _, se, dof = _log_ratio_t(m, len(b), len(v))
        h = _t_crit(1 - confidence / 100, dof) * se
        return BootstrapResult(est, est * math.exp(-h), est * math.exp(h), confidence, 0, "log-t")
    if method == "fieller":
        lo, hi = _fieller(m, len(b), len(v), confidence)
        return BootstrapResult(est, lo, hi, confidence, 0, "fieller")
    rng = _rng(seed)
    bb = b[rng.integers(0, len(b), size=(n_boot, len(b)))].mean(axis=1)
    vv = v[rng.integers(0, len(v), size=(n_boot, len(v)))].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = vv / bb
    q = (100 - confidence) / 2
    lo, hi = np.nanpercentile(ratios, [q, 100 - q])
    return BootstrapResult(est, float(lo), float(hi), confidence, int(n_boot), "percentile")


# ------------------------------------------------------------------- table
def _variances_differ(a, b, alpha=0.05) -> bool:
    from scipy import stats as st

    with np.errstate(all="ignore"):
        p = st.levene(a, b, center="median").pvalue  # Brown-Forsythe: robust to non-normality
    return bool(p < alpha) if p == p else False


class _PermInversion:
    """The two-sided permutation test of the difference of means (scipy's
    permutation_test conventions: exact over all partitions when there are at most
    n_resamples of them, else n_resamples random ones plus the observed), inverted
    for an interval.  Non-negative data: the scale model "variant / r ~ baseline"
    (interval for the ratio r, never below -100 %); otherwise the shift model
    "variant - d ~ baseline".  Every statistic is linear in the model's parameter,
    so each p-value is one pass over the partitions."""

    def __init__(self, x: np.ndarray, y: np.ndarray, n_resamples: int, seed: int):
        import itertools

        n1, n2 = len(x), len(y)
        n = n1 + n2
        if math.comb(n, n1) <= n_resamples:
            first = np.array(list(itertools.combinations(range(n), n1)), dtype=np.intp)
            self.adj = 0
        else:
            perms = np.random.default_rng(seed).permuted(np.tile(np.arange(n), (n_resamples, 1)), axis=1)
            first, self.adj = perms[:, :n1], 1
        w = np.full((len(first), n), 1.0 / n2)
        w[np.arange(len(first))[:, None], first] = -1.0 / n1  # variant mean - baseline mean
        self.nonneg = bool(x.min() >= 0 and y.min() >= 0)
        self.scale = self.nonneg and y.mean() > 0
        z0 = np.r_[x, np.zeros(n2)] if self.scale else np.r_[x, y]
        z1 = np.r_[np.zeros(n1), y] if self.scale else np.r_[np.zeros(n1), -np.ones(n2)]
        self.a, self.b = w @ z0, w @ z1
        self.a0, self.b0 = z0[n1:].mean() - z0[:n1].mean(), z1[n1:].mean() - z1[:n1].mean()
        self.mb = float(x.mean())
        # parameter s: log r (scale: the data are x and y * exp(-s)) or d (shift)
        self.est = float(math.log(y.mean() / x.mean())) if self.scale else float(y.mean() - x.mean())
        spread = float(np.ptp(np.r_[x, y])) + abs(self.est) + 1.0
        self.far = 60.0 if self.scale else 1e6 * spread

    def pvalue(self, s: float) -> float:
        th = math.exp(-s) if self.scale else s
        t, t0 = self.a + self.b * th, self.a0 + self.b0 * th
        gamma = abs(np.finfo(float).eps * 100 * t0)
        k = len(t) + self.adj
        less = (np.count_nonzero(t <= t0 + gamma) + self.adj) / k
        greater = (np.count_nonzero(t >= t0 - gamma) + self.adj) / k
        return min(1.0, 2 * min(less, greater))

    def interval(self, alpha: float, null_rejected: bool) -> tuple[float, float]:
        """(low, high) in % of the baseline mean.  Consistent with the verdict by
        construction: a rejected null (s = 0) bounds the search on its side, an
        accepted one is included."""
        ends = []
        for side in (-1.0, 1.0):
            if null_rejected and side * (0.0 - self.est) > 0:
                inner, outer = self.est, 0.0
            else:
                outer = self.est + side * self.far
                if self.pvalue(outer) >= alpha:
                    ends.append(side * math.inf)
                    continue
                inner = self.est
            for _ in range(200):  # bisection: inner accepted, outer rejected
                mid = (inner + outer) / 2
                if mid in (inner, outer) or abs(outer - inner) <= 1e-13 * max(1.0, abs(inner)):
                    break
                if self.pvalue(mid) >= alpha:
                    inner = mid
                else:
                    outer = mid
            ends.append(inner)
        lo, hi = ends
        if not null_rejected:
            lo, hi = min(lo, 0.0), max(hi, 0.0)
        if self.scale:
            return 100 * math.expm1(lo), 100 * math.expm1(hi)
        a, b = 100 * lo / self.mb, 100 * hi / self.mb
        return (max(min(a, b), -100.0) if self.nonneg else min(a, b)), max(a, b)


_TESTS = ("welch", "student", "permutation", "paired")


def _py(x):
    return x.item() if isinstance(x, np.generic) else x


def compare_table(
    df,
    metric: str,
    baseline,
    by=(),
    variant_col: str = "variant",
    value_col: str = "value",
    confidence: float = 95.0,
    welch=None,
    margin_pct: float | None = None,
    holm: bool = True,
    test: str = "welch",
    n_resamples: int = 9999,
    seed: int = 0,
    pair_col: str | None = None,
    unit_col: str | None = None,
    min_units: int = 2,
):
    """Every non-baseline variant against its baseline at every point (a point = one
    combination of the `by` columns) of a long table with one row per run.

    unit_col: the experimental unit (the boot, where runs of one boot are not independent):
    the runs of each unit are averaged first and every test, interval, degree of freedom
    and power counts units (n_base, n_var; n_runs_base, n_runs_var count the runs). With
    the paired test the units are the pairs (pair_col defaults to unit_col). min_units: a
    comparison with fewer units in a group is "untestable" (no p-value; `reason` says
    why), never an error. A comparison whose groups have no spread at all (every value of
    each group equal, e.g. a deterministic model's point) is "exact": its difference is
    exact, without p-value, interval, star or equivalence test (the verdict rules decide
    on the exact value). Neither kind is in the Holm family.

    baseline: a variant name, or a mapping variant -> its baseline variant (every
    variant present must be a key; a baseline maps to itself) so that several
    baselines form one Holm family.
    Values: column `metric` if df has it (wide format), else the rows whose
    "metric" column equals `metric`, column `value_col`.

    test (per call): "welch" (default): Welch's t-test on the log ratio of the
    means (delta method, Welch-Satterthwaite dof) where the ratio is positive,
    on the difference otherwise (column `test`: "welch-log" / "welch");
    "student": ministat's table (Student's pooled t, its +-err in diff_err and
    pct_err, numbers equal to compare()); "permutation": the exact (or seeded
    Monte Carlo, `n_resamples`, `seed`) permutation test of the difference of
    means, for bimodal runs; "paired": runs of the two variants that share a value of
    `pair_col` (a round = one boot, where the variants are interleaved) form a pair, and
    the test is the one-sample t on the pairs' log ratios (on their differences where a
    value is not positive), n pairs - 1 dof; unpaired runs are left out.  The old flag welch=True/False/"auto" selects
    "welch"/"student"/a Brown-Forsythe pretest per row (which inflates the error
    rate at few runs; not recommended).

    Family for Holm: ALL comparisons in the returned table; p_holm and
    `significant` (p_holm < 1 - confidence/100) are adjusted over it (holm=False:
    p_holm = p).  [pct_low, pct_high] is the interval of the relative difference
    dual to that verdict: at confidence 1 - alpha*p/p_holm (Holm's level for the
    row's step, ci_level in %), so it excludes 0 exactly when the row is
    significant; for ratios it comes from the log ratio and never reaches -100 %.
    "student" rows keep ministat's unadjusted pct +- pct_err (ci_level =
    confidence; ci_matches_star says whether it agrees with the star).  With
    margin_pct, `equivalent` is the TOST verdict within +-margin_pct % of the
    baseline mean, Holm-adjusted over the table's TOST p-values (eq_p_holm).

    Columns: *by, variant, n_base, n_var, mean_base, mean_var, sd_base, sd_var,
    median_var, diff, diff_err, pct, pct_err, p, p_holm, significant, test,
    equivalent, eq_margin_pct, eq_p, significant_unadjusted, dof, pct_low,
    pct_high, ci_level, ci_matches_star, interval, eq_p_holm, baseline."""
    from collections.abc import Mapping

    import pandas as pd

    confidence = _confidence(confidence)
    by = [by] if isinstance(by, str) else list(by)
    if test == "paired" and pair_col is None:
        pair_col = unit_col
    if test == "paired" and pair_col is None:
        raise ValueError("compare_table: test 'paired' needs pair_col (the column that names a pair, e.g. the round)")
    if pair_col and unit_col and pair_col != unit_col:
        raise ValueError("compare_table: with unit_col, a pair is a unit (pair_col must be unit_col)")
    if int(min_units) < 2:
        raise ValueError(f"compare_table: min_units must be >= 2, got {min_units!r}")
    want = [variant_col, *by, *([pair_col] if pair_col else []), *([unit_col] if unit_col else [])]
    missing = [c for c in dict.fromkeys(want) if c not in df.columns]
    if missing:
        raise ValueError(f"compare_table: missing columns {missing}")
    if metric in df.columns:
        col, sub = metric, df
    elif "metric" in df.columns and value_col in df.columns:
        col, sub = value_col, df[df["metric"] == metric]
    else:
        raise ValueError(f"compare_table: no column {metric!r} and no metric/{value_col!r} columns")
    if test not in _TESTS:
        raise ValueError(f"compare_table: test must be one of {', '.join(_TESTS)}, got {test!r}")
    if welch is not None:
        if welch not in (True, False, "auto") or (test != "welch" and welch is not True):
            raise ValueError("welch must be True, False or 'auto' (and only with the default test)")
        test = {True: test, False: "student", "auto": "auto"}[welch]
    alpha = 1 - confidence / 100
    bases = dict(baseline) if isinstance(baseline, Mapping) else None
    runs_of: dict[tuple, int] = {}
    if unit_col:
        # one value per unit: the mean of its runs (equal runs per unit by design)
        keys = [variant_col, *by, unit_col]
        counts = sub.groupby(keys, sort=False, dropna=False)[col].size()
        for k, n in counts.items():
            k = k if isinstance(k, tuple) else (k,)
            runs_of[k[:-1]] = runs_of.get(k[:-1], 0) + int(n)
        sub = sub.groupby(keys, sort=False, dropna=False, as_index=False)[col].mean()
        if pair_col:
            pair_col = unit_col

    values = sub[col].to_numpy(float)
    names = sub[variant_col].to_numpy()
    pair_ids = sub[pair_col].to_numpy() if pair_col else None
    if by:
        codes = sub.groupby(by, sort=True, dropna=False).ngroup().to_numpy()
        order = np.argsort(codes, kind="stable")
        chunks = np.split(order, np.flatnonzero(np.diff(codes[order])) + 1) if len(order) else []
        by_cols = [sub[c].to_numpy() for c in by]
    else:
        chunks, by_cols = [np.arange(len(sub))], []

    rows, extra = [], []
    for chunk in chunks:
        if not len(chunk):
            continue
        point = {c: _py(a[chunk[0]]) for c, a in zip(by, by_cols)}
        vnames, vals = names[chunk], values[chunk]
        for v in pd.unique(vnames):
            if bases is None:
                base = baseline
            elif v in bases:
                base = bases[v]
            else:
                raise ValueError(f"compare_table: no baseline for variant {v!r} (at {point})")
            if v == base:
                continue
            xb, xv = vals[vnames == base], vals[vnames == v]
            if len(xb) == 0:
                raise ValueError(f"compare_table: no {base!r} runs at {point}")
            where = f"{v!r} vs {base!r} at {point}"
            if not (np.isfinite(xb).all() and np.isfinite(xv).all()):
                raise ValueError(f"compare_table: {where}: contains NaN or infinite values")
            counted = {
                "n_runs_base": runs_of.get((base, *point.values()), len(xb)),
                "n_runs_var": runs_of.get((v, *point.values()), len(xv)),
                "reason": "",
            }
            ids = pair_ids[chunk] if test == "paired" else None
            try:
                if test == "paired":
                    xb, xv, _ = _pairs(xb, xv, ids[vnames == base], ids[vnames == v])
                unit = unit_col or "run"
                if min(len(xb), len(xv)) < min_units:
                    row, ex = _untestable_row(
                        xb,
                        xv,
                        f"{min(len(xb), len(xv))} {unit if min(len(xb), len(xv)) == 1 else unit + 's'} in a variant, "
                        f"fewer than the {min_units} {TOO_FEW_UNITS_MARK}",
                    )
                    eq = None
                elif _exact(xb) and _exact(xv):
                    row, ex = _exact_row(xb, xv)
                    eq = None
                else:
                    if test == "paired":
                        row, ex = _paired_row(xb, xv)
                        eq = tost_paired(xb, xv, margin_pct, alpha) if margin_pct else None
                    else:
                        row, ex = _table_row(xb, xv, test, confidence, n_resamples, seed)
                        eq = tost(xb, xv, margin_pct, alpha) if margin_pct else None
            except ValueError as e:
                raise ValueError(f"compare_table: {where}: {e}") from None
            rows.append(
                {
                    **point,
                    "variant": v,
                    **row,
                    **counted,
                    "reason": row.pop("reason", ""),
                    "equivalent": None if eq is None else eq.equivalent,
                    "eq_margin_pct": margin_pct,
                    "eq_p": None if eq is None else eq.p,
                    "baseline": base,
                }
            )
            extra.append(ex)

    cols = [
        *by,
        "variant",
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
        "eq_p",
        "significant_unadjusted",
        "dof",
        "pct_low",
        "pct_high",
        "ci_level",
        "ci_matches_star",
        "interval",
        "eq_p_holm",
        "baseline",
        "n_runs_base",
        "n_runs_var",
        "reason",
    ]
    later = (
        "p_holm",
        "significant",
        "significant_unadjusted",
        "pct_low",
        "pct_high",
        "ci_level",
        "ci_matches_star",
        "eq_p_holm",
    )
    out = pd.DataFrame(rows, columns=[c for c in cols if c not in later])
    # the Holm family: the comparisons with a p-value (not the exact or untestable ones)
    p = out["p"].to_numpy(float)
    tested = np.isfinite(p)
    p_holm = (holm_fn(p) if holm else p.copy()) if len(p) else p
    sig = np.where(tested, p_holm < alpha, False)
    level = np.full(len(p), alpha)
    if holm and tested.any():
        level[tested] = alpha / _holm_factors(p[tested])
    lows, highs, ci_level, unadj = [], [], [], []
    for i, ex in enumerate(extra):
        lo, hi, lvl = _row_interval(ex, float(level[i]), bool(sig[i]), confidence)
        lows.append(lo)
        highs.append(hi)
        ci_level.append(lvl)
        unadj.append(ex["verdict"] if ex["kind"] == "ministat" else bool(tested[i] and p[i] < alpha))
    out["p_holm"] = p_holm
    out["significant"] = [bool(x) for x in sig]
    out["significant_unadjusted"] = unadj
    out["pct_low"], out["pct_high"], out["ci_level"] = lows, highs, ci_level
    excl = (out["pct_low"] > 0) | (out["pct_high"] < 0)
    out["ci_matches_star"] = [
        bool(a == b) or k in ("exact", "untestable") for a, b, k in zip(out["significant"], excl, out["test"])
    ]
    if margin_pct and len(out):
        eq_p = out["eq_p"].to_numpy(float)
        eq_holm = holm_fn(eq_p) if holm else eq_p
        out["eq_p_holm"] = eq_holm
        # equivalent: the TOST, Holm-adjusted over the table, and the printed interval inside
        # the margin, so a reader never sees the mark beside an interval that reaches past it
        # (the printed interval is the star's, at the row's Holm level)
        inside = (out["pct_low"] > -margin_pct) & (out["pct_high"] < margin_pct)
        out["equivalent"] = [
            None if k in ("exact", "untestable") else bool(q < alpha and ins)
            for k, q, ins in zip(out["test"], eq_holm, inside)
        ]
    else:
        out["eq_p_holm"] = None
    out["equivalent"] = out["equivalent"].astype(object)
    return out[cols]


class _Moments:
    """Two-pass means and variances of two samples around a common shift, and the
    difference of the means (exact-ish for large values with a small spread)."""

    def __init__(self, b, v):
        b, v = np.asarray(b, float), np.asarray(v, float)
        shift = float(b[0])
        db, dv = b - shift, v - shift
        sb, sv = float(np.mean(db)), float(np.mean(dv))
        self.mb, self.mv, self.d = shift + sb, shift + sv, sv - sb
        self.vb = float(np.sum((db - sb) ** 2) / (len(b) - 1))
        self.vv = float(np.sum((dv - sv) ** 2) / (len(v) - 1))


def _mean_var(x) -> tuple[float, float]:
    m = _Moments(x, x)
    return m.mb, m.vb


def _table_row(
    xb: np.ndarray, xv: np.ndarray, test: str, confidence: float, n_resamples: int, seed: int
) -> tuple[dict, dict]:
    """One comparison's numbers (before the family's adjustment) and what its
    interval needs later."""
    nb, nv = len(xb), len(xv)
    median = float(np.sort(xv)[nv // 2])  # Debian ministat's median
    if test == "auto":
        test = "welch" if _variances_differ(xb, xv) else "student"
    if test == "student":
        c = compare(xb, xv, confidence)
        row = {
            "n_base": nb,
            "n_var": nv,
            "mean_base": c.mean_base,
            "mean_var": c.mean_var,
            "sd_base": c.sd_base,
            "sd_var": c.sd_var,
            "median_var": median,
            "diff": c.diff,
            "diff_err": c.diff_err,
            "pct": c.pct,
            "pct_err": c.pct_err,
            "p": c.p,
            "test": "student",
            "dof": c.dof,
            "interval": "ministat",
        }
        return row, {"kind": "ministat", "pct": c.pct, "err": abs(c.pct_err), "verdict": c.significant}
    m = _Moments(xb, xv)
    if m.mb == 0:
        raise ValueError("baseline mean is 0: the relative difference (pct) is undefined")
    row = {
        "n_base": nb,
        "n_var": nv,
        "mean_base": m.mb,
        "mean_var": m.mv,
        "sd_base": math.sqrt(m.vb),
        "sd_var": math.sqrt(m.vv),
        "median_var": median,
        "diff": m.d,
        "diff_err": math.nan,
        "pct": m.d * 100 / m.mb,
        "pct_err": math.nan,
    }
    if test == "permutation":
        from scipy import stats as st

        perm = _PermInversion(xb, xv, n_resamples, seed)
        p = float(
            st.permutation_test(
                (xb, xv),
                lambda x, y, axis=-1: np.mean(y, axis=axis) - np.mean(x, axis=axis),
                vectorized=True,
                n_resamples=n_resamples,
                rng=seed,
            ).pvalue
        )
        row.update(p=p, test="permutation", dof=math.nan, interval="permutation")
        return row, {"kind": "permutation", "perm": perm}
    nonneg = bool(xb.min() >= 0 and xv.min() >= 0)
    if m.mv / m.mb > 0:
        stat, se, dof = _log_ratio_t(m, nb, nv)
        kind = "log-ratio"
    else:  # opposite signs or a zero variant mean
        a, b = m.vb / nb, m.vv / nv
        stat, se, dof = m.d, math.sqrt(a + b), _welch_dof(a, b, nb, nv)
        kind = "difference"
    p = _t_two_sided_p(stat / se, dof) if se > 0 else (0.0 if stat != 0 else 1.0)
    row.update(p=p, test="welch-log" if kind == "log-ratio" else "welch", dof=dof, interval=kind)
    return row, {"kind": kind, "stat": stat, "se": se, "dof": dof, "mb": m.mb, "nonneg": nonneg}


def _pairs(xb: np.ndarray, xv: np.ndarray, ib: np.ndarray, iv: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
    """The values of both variants that share a pair id (a round, a boot), in one order."""
    b_of, v_of = dict(zip(ib.tolist(), xb)), dict(zip(iv.tolist(), xv))
    if len(b_of) != len(xb) or len(v_of) != len(xv):
        raise ValueError("paired: a pair id occurs twice for one variant")
    common = [k for k in b_of if k in v_of]
    return np.array([b_of[k] for k in common], float), np.array([v_of[k] for k in common], float), common


def _exact(x: np.ndarray) -> bool:
    """No spread at all: every value equal (to floating-point noise, 1e-12 of the mean)."""
    x = np.asarray(x, float)
    return len(x) >= 1 and float(np.ptp(x)) <= 1e-12 * max(abs(float(np.mean(x))), 1e-300)


def _plain_row(xb: np.ndarray, xv: np.ndarray) -> dict:
    """Means, spreads and the difference, the fields every row has."""
    nb, nv = len(xb), len(xv)
    mb = float(np.mean(xb)) if nb else math.nan
    mv = float(np.mean(xv)) if nv else math.nan
    d = mv - mb
    return {
        "n_base": nb,
        "n_var": nv,
        "mean_base": mb,
        "mean_var": mv,
        "sd_base": float(np.std(xb, ddof=1)) if nb > 1 else math.nan,
        "sd_var": float(np.std(xv, ddof=1)) if nv > 1 else math.nan,
        "median_var": float(np.sort(xv)[nv // 2]) if nv else math.nan,
        "diff": d,
        "diff_err": math.nan,
        "pct": d * 100 / mb if mb else math.nan,
        "pct_err": math.nan,
        "p": math.nan,
        "dof": math.nan,
    }


def _untestable_row(xb: np.ndarray, xv: np.ndarray, reason: str) -> tuple[dict, dict]:
    return {**_plain_row(xb, xv), "test": "untestable", "interval": "none", "reason": reason}, {"kind": "untestable"}


def _exact_row(xb: np.ndarray, xv: np.ndarray) -> tuple[dict, dict]:
    """Both groups without spread (a deterministic model): the difference is exact."""
    row = {**_plain_row(xb, xv), "sd_base": 0.0, "sd_var": 0.0, "test": "exact", "interval": "exact"}
    if row["mean_base"] == 0:
        raise ValueError("baseline mean is 0: the relative difference (pct) is undefined")
    return row, {"kind": "exact", "pct": row["pct"]}


def _paired_row(pb: np.ndarray, pv: np.ndarray) -> tuple[dict, dict]:
    """A paired comparison of the pairs' values (_pairs)."""
    if len(pb) < 2:
        raise ValueError(f"paired: need at least 2 pairs (have {len(pb)})")
    m = _Moments(pb, pv)
    if m.mb == 0:
        raise ValueError("baseline mean is 0: the relative difference (pct) is undefined")
    n = len(pb)
    positive = bool(pb.min() > 0 and pv.min() > 0)
    d = np.log(pv / pb) if positive else pv - pb
    stat, se, dof = float(d.mean()), float(d.std(ddof=1) / math.sqrt(n)), n - 1
    p = _t_two_sided_p(stat / se, dof) if se > 0 else (0.0 if stat != 0 else 1.0)
    row = {
        "n_base": n,
        "n_var": n,
        "mean_base": m.mb,
        "mean_var": m.mv,
        "sd_base": math.sqrt(m.vb),
        "sd_var": math.sqrt(m.vv),
        "median_var": float(np.sort(pv)[n // 2]),
        "diff": m.d,
        "diff_err": math.nan,
        "pct": m.d * 100 / m.mb,
        "pct_err": math.nan,
        "p": p,
        "test": "paired-log" if positive else "paired",
        "dof": dof,
        "interval": "log-ratio" if positive else "difference",
    }
    nonneg = bool(pb.min() >= 0 and pv.min() >= 0)
    return row, {"kind": row["interval"], "stat": stat, "se": se, "dof": dof, "mb": m.mb, "nonneg": nonneg}


def _row_interval(ex: dict, level: float, significant: bool, confidence: float) -> tuple[float, float, float]:
    """(pct_low, pct_high, confidence in %) of one row at the two-sided `level`."""
    if ex["kind"] == "exact":  # no interval: the difference itself
        return ex["pct"], ex["pct"], math.nan
    if ex["kind"] == "untestable":
        return math.nan, math.nan, math.nan
    if ex["kind"] == "ministat":  # unadjusted, as ministat prints it
        return ex["pct"] - ex["err"], ex["pct"] + ex["err"], confidence
    ci_level = 100 * (1 - level)
    if ex["kind"] == "permutation":
        lo, hi = ex["perm"].interval(level, significant)
        return lo, hi, ci_level
    stat, se = ex["stat"], ex["se"]
    h = _t_crit(level, ex["dof"]) * se if se > 0 else 0.0
    if se > 0 and (abs(stat) > h) != significant:  # rounding at the boundary: follow the verdict
        h = abs(stat) / se * (1 - 1e-12 if significant else 1 + 1e-12) * se
    lo, hi = stat - h, stat + h
    if ex["kind"] == "log-ratio":
        return 100 * math.expm1(lo), 100 * math.expm1(hi), ci_level
    a, b = 100 * lo / ex["mb"], 100 * hi / ex["mb"]
    lo, hi = min(a, b), max(a, b)
    if ex["nonneg"]:  # a ratio of non-negative means is >= 0
        lo = max(lo, -100.0)
    return lo, hi, ci_level


holm_fn = holm
