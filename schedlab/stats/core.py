"""The statistics the notebooks use: ministat's comparison as numbers (so the
paper's numbers equal `schedlab ministat`'s), plus what ministat does not do:
p-values, Welch, equivalence (TOST), Holm, power, bootstrap, comparison tables.
See docs/statistics.md."""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from schedlab.stats import ministat as _m

__all__ = [
    "Summary", "Comparison", "Equivalence", "BootstrapResult", "RunsCheck",
    "read_ministat_file", "summarize", "compare", "tost", "holm", "runs_needed",
    "enough_runs", "bootstrap_ci", "bootstrap_ratio_ci", "compare_table", "t_table_value",
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
    diff: float          # mean_var - mean_base
    diff_err: float      # half-width of the confidence interval of diff (ministat's "+/-")
    pct: float           # diff in % of mean_base
    pct_err: float       # diff_err in % of mean_base (ministat's convention)
    significant: bool    # |diff| > diff_err: ministat's verdict
    p: float             # two-sided p-value of the same t-test (scipy)
    t_crit: float
    dof: float
    test: str            # "student" or "welch"
    confidence: float
    spool: float | None  # pooled stddev (Student only)

    def to_dict(self) -> dict:
        return asdict(self)


def _t_ppf(q: float, dof: float) -> float:
    from scipy import stats as st
    return float(st.t.ppf(q, dof))


def _t_two_sided_p(tstat: float, dof: float) -> float:
    from scipy import stats as st
    if math.isnan(tstat):
        return 1.0
    return float(2 * st.t.sf(abs(tstat), dof))


def compare(baseline, variant, confidence: float = 95.0, welch: bool = False) -> Comparison:
    """`variant` against `baseline`, as `ministat baseline variant` does.

    Student (default): pooled variance, ministat's own t-table when `confidence`
    is one of 80/90/95/98/99/99.5 (the numbers then equal the CLI's; its 99.5
    column is really 99.8 %), scipy's quantile otherwise.  welch=True: Welch's
    t-test, Welch-Satterthwaite dof and scipy's quantile (ministat's table has
    no fractional dof).  p is scipy's two-sided p-value of the same test; the
    verdict `significant` is ministat's |diff| > diff_err."""
    if not 0 < confidence < 100:
        raise ValueError(f"confidence must be in (0, 100), got {confidence}")
    rs, ds = _dataset(baseline, "baseline"), _dataset(variant, "variant")
    n1, n2, v1, v2 = rs.n, ds.n, rs.var(), ds.var()
    mb, mv = rs.avg(), ds.avg()
    if not welch:
        ci = _m.STUDENTPCT.index(float(confidence)) if float(confidence) in _m.STUDENTPCT else None
        if ci is not None:
            r = _m.relative(ds, rs, ci)
            t, spool, s, d, e = r["t"], r["spool"], r["s"], r["diff"], r["err"]
            pct, pct_err = r["pct"], r["pct_err"]
        else:
            dof_i = n1 + n2 - 2
            t = _t_ppf(0.5 + confidence / 200, dof_i)
            spool = math.sqrt(((n2 - 1) * v2 + (n1 - 1) * v1) / dof_i)
            s = spool * math.sqrt(1.0 / n2 + 1.0 / n1)
            d, e = mv - mb, t * s
            pct, pct_err = _m._cdiv(d * 100, mb), _m._cdiv(e * 100, mb)
        dof = float(n1 + n2 - 2)
        test = "student"
    else:
        a, b = v1 / n1, v2 / n2
        s = math.sqrt(a + b)
        dof = (a + b) ** 2 / (a * a / (n1 - 1) + b * b / (n2 - 1)) if (a + b) > 0 else float(n1 + n2 - 2)
        t = _t_ppf(0.5 + confidence / 200, dof)
        d, e, spool = mv - mb, t * s, None
        pct, pct_err = _m._cdiv(d * 100, mb), _m._cdiv(e * 100, mb)
        test = "welch"
    if s > 0:
        p = _t_two_sided_p(d / s, dof)
    else:                                  # both samples constant
        p = 0.0 if d != 0 else 1.0
    return Comparison(n1, n2, mb, mv, rs.stddev(), ds.stddev(), d, e, pct, pct_err, bool(abs(d) > e),
                      p, t, dof, test, float(confidence), spool)


# -------------------------------------------------------------- equivalence
@dataclass(frozen=True)
class Equivalence:
    equivalent: bool
    p: float             # max of the two one-sided p-values
    pct: float           # observed difference in % of the baseline mean
    ci_low_pct: float    # (1 - 2 alpha) confidence interval of pct
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
    from scipy import stats as st
    if margin_pct <= 0 or not 0 < alpha < 0.5:
        raise ValueError("need margin_pct > 0 and 0 < alpha < 0.5")
    rs, ds = _dataset(baseline, "baseline"), _dataset(variant, "variant")
    mb = rs.avg()
    if mb == 0:
        raise ValueError("baseline mean is 0: a percentage margin is undefined")
    a, b = rs.var() / rs.n, ds.var() / ds.n
    s = math.sqrt(a + b)
    dof = (a + b) ** 2 / (a * a / (rs.n - 1) + b * b / (ds.n - 1)) if (a + b) > 0 else float(rs.n + ds.n - 2)
    d = ds.avg() - mb
    delta = abs(mb) * margin_pct / 100
    if s > 0:
        p_low = float(st.t.sf((d + delta) / s, dof))     # H0: d <= -delta
        p_high = float(st.t.cdf((d - delta) / s, dof))   # H0: d >= +delta
        half = float(st.t.ppf(1 - alpha, dof)) * s
    else:
        p_low = 0.0 if d > -delta else 1.0
        p_high = 0.0 if d < delta else 1.0
        half = 0.0
    p = max(p_low, p_high)
    scale = 100 / abs(mb)
    return Equivalence(bool(p < alpha), p, d * scale, (d - half) * scale, (d + half) * scale,
                       float(margin_pct), float(alpha), dof)


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


# ------------------------------------------------------------------- power
def _power(n: int, effect: float, alpha: float) -> float:
    """Power of the two-sided two-sample Student t-test, n runs per arm, effect =
    difference / stddev; exact via the noncentral t distribution."""
    from scipy import stats as st
    dof = 2 * n - 2
    nc = effect * math.sqrt(n / 2)
    tc = st.t.ppf(1 - alpha / 2, dof)
    return float(st.nct.sf(tc, dof, nc) + st.nct.cdf(-tc, dof, nc))


def _cv_pct(spread, what="samples") -> float:
    if isinstance(spread, (int, float, np.floating, np.integer)):
        cv = float(spread)
    else:
        s = summarize(_floats(spread, what))
        if s.mean == 0:
            raise ValueError(f"{what}: mean is 0, relative spread undefined")
        cv = s.stddev / abs(s.mean) * 100
    if not cv >= 0 or math.isinf(cv):
        raise ValueError(f"stddev_pct must be a finite number >= 0, got {cv}")
    return cv


def runs_needed(spread, detect_pct: float, confidence: float = 95.0, power: float = 0.8,
                max_runs: int = 100000) -> int:
    """Runs per variant for a two-sided two-sample t-test at `confidence` to detect a
    `detect_pct` % difference with probability `power`.  `spread` is the stddev
    in % of the mean (coefficient of variation) or a sample to estimate it from.
    Starts from the normal approximation and then searches with the exact
    noncentral-t power (scipy.stats.nct)."""
    from scipy import stats as st
    cv = _cv_pct(spread)
    if detect_pct <= 0 or not 0 < power < 1 or not 0 < confidence < 100:
        raise ValueError("need detect_pct > 0, 0 < power < 1, 0 < confidence < 100")
    if cv == 0:
        return 2
    alpha = 1 - confidence / 100
    effect = detect_pct / cv
    z = st.norm.ppf(1 - alpha / 2) + st.norm.ppf(power)
    n = max(2, int(math.ceil(2 * (z / effect) ** 2)))
    while n > 2 and _power(n - 1, effect, alpha) >= power:
        n -= 1
    while _power(n, effect, alpha) < power:
        n += 1
        if n > max_runs:
            raise ValueError(f"more than {max_runs} runs needed")
    return n


@dataclass(frozen=True)
class RunsCheck:
    enough: bool
    have: int            # runs of the smaller arm
    need: int
    cv_pct: float        # pooled stddev in % of the baseline mean
    detect_pct: float

    def to_dict(self) -> dict:
        return asdict(self)


def enough_runs(baseline, variant, detect_pct: float, confidence: float = 95.0,
                power: float = 0.8) -> RunsCheck:
    """Did a study run enough? Uses the pooled observed spread of both arms."""
    b, v = summarize(baseline), summarize(variant)
    if b.mean == 0:
        raise ValueError("baseline mean is 0: relative spread undefined")
    pooled = math.sqrt(((b.n - 1) * b.stddev ** 2 + (v.n - 1) * v.stddev ** 2) / (b.n + v.n - 2))
    cv = pooled / abs(b.mean) * 100
    need = runs_needed(cv, detect_pct, confidence, power)
    have = min(b.n, v.n)
    return RunsCheck(have >= need, have, need, cv, float(detect_pct))


# --------------------------------------------------------------- bootstrap
@dataclass(frozen=True)
class BootstrapResult:
    estimate: float
    low: float
    high: float
    confidence: float
    n_boot: int

    def to_dict(self) -> dict:
        return asdict(self)


def _rng(seed):
    if seed is None:
        raise ValueError("seed is required: bootstrap results must be reproducible")
    return np.random.default_rng(seed)


def bootstrap_ci(values, stat: Callable = np.median, confidence: float = 95.0, n_boot: int = 10000,
                 seed: int | None = 0) -> BootstrapResult:
    """Percentile bootstrap CI of stat(values); deterministic for a given seed."""
    x = np.asarray(_floats(values, "values"))
    idx = _rng(seed).integers(0, len(x), size=(n_boot, len(x)))
    samples = x[idx]
    try:
        boot = np.asarray(stat(samples, axis=1), dtype=float)
    except TypeError:                      # a stat without axis=
        boot = np.array([stat(row) for row in samples], dtype=float)
    q = (100 - confidence) / 2
    lo, hi = np.percentile(boot, [q, 100 - q])
    return BootstrapResult(float(stat(x)), float(lo), float(hi), float(confidence), int(n_boot))


def _group_totals(groups, what) -> np.ndarray:
    try:
        tot = [float(np.sum(np.asarray(g, dtype=float))) for g in groups]
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what}: each group must be a sequence of numbers ({e})") from None
    return np.asarray(_floats(tot, what))


def bootstrap_ratio_ci(baseline_groups: Sequence[Sequence[float]], variant_groups: Sequence[Sequence[float]],
                       confidence: float = 95.0, n_boot: int = 10000, seed: int | None = 0) -> BootstrapResult:
    """CI of the ratio mean(variant run totals) / mean(baseline run totals), where a
    run's total is the sum of its group (e.g. throughput summed over VMs).  Runs
    are resampled independently within each arm; percentile interval."""
    b, v = _group_totals(baseline_groups, "baseline_groups"), _group_totals(variant_groups, "variant_groups")
    if b.mean() == 0:
        raise ValueError("baseline_groups: total is 0, ratio undefined")
    rng = _rng(seed)
    bb = b[rng.integers(0, len(b), size=(n_boot, len(b)))].mean(axis=1)
    vv = v[rng.integers(0, len(v), size=(n_boot, len(v)))].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = vv / bb
    q = (100 - confidence) / 2
    lo, hi = np.nanpercentile(ratios, [q, 100 - q])
    return BootstrapResult(float(v.mean() / b.mean()), float(lo), float(hi), float(confidence), int(n_boot))


# ------------------------------------------------------------------- table
def _variances_differ(a, b, alpha=0.05) -> bool:
    from scipy import stats as st
    with np.errstate(all="ignore"):
        p = st.levene(a, b, center="median").pvalue     # Brown-Forsythe: robust to non-normality
    return bool(p < alpha) if p == p else False


def compare_table(df, metric: str, baseline: str, by=(), variant_col: str = "variant",
                  value_col: str = "value", confidence: float = 95.0, welch="auto",
                  margin_pct: float | None = None, holm: bool = True):
    """Every non-baseline variant against `baseline` at every point (a point = one
    combination of the `by` columns) of a long table with one row per run.

    Values: column `metric` if df has it (wide format), else the rows whose
    "metric" column equals `metric`, column `value_col`.
    Family for Holm: ALL comparisons in the returned table (every point x every
    non-baseline variant); p_holm and `significant` (p_holm < 1 - confidence/100)
    are adjusted over that family.  holm=False leaves p_holm = p (adjust later,
    e.g. over several tables).  `significant_unadjusted` is ministat's own verdict.
    welch: False = Student (ministat's table), True = Welch, "auto" = Welch where
    the Brown-Forsythe/Levene test says the variances differ at 5 %; column `test`
    records which.  With margin_pct, `equivalent` is the TOST verdict (alpha =
    1 - confidence/100) within +-margin_pct % of the baseline mean; else None.

    Columns: *by, variant, n_base, n_var, mean_base, mean_var, sd_base, sd_var,
    median_var, diff, diff_err, pct, pct_err, p, p_holm, significant, test,
    equivalent, eq_margin_pct, eq_p, significant_unadjusted, dof."""
    import pandas as pd
    by = [by] if isinstance(by, str) else list(by)
    missing = [c for c in [variant_col, *by] if c not in df.columns]
    if missing:
        raise ValueError(f"compare_table: missing columns {missing}")
    if metric in df.columns:
        col, sub = metric, df
    elif "metric" in df.columns and value_col in df.columns:
        col, sub = value_col, df[df["metric"] == metric]
    else:
        raise ValueError(f"compare_table: no column {metric!r} and no metric/{value_col!r} columns")
    if welch not in (True, False, "auto"):
        raise ValueError("welch must be True, False or 'auto'")
    alpha = 1 - confidence / 100
    rows = []
    groups = sub.groupby(by, sort=True, dropna=False) if by else [((), sub)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        point = dict(zip(by, key))
        base_vals = g.loc[g[variant_col] == baseline, col].to_numpy(float)
        variants = [v for v in pd.unique(g[variant_col]) if v != baseline]
        if not variants:
            continue
        if len(base_vals) == 0:
            raise ValueError(f"compare_table: no {baseline!r} runs at {point}")
        for v in variants:
            vals = g.loc[g[variant_col] == v, col].to_numpy(float)
            where = f"{v!r} vs {baseline!r} at {point}"
            if len(vals) < 2 or len(base_vals) < 2:
                raise ValueError(f"compare_table: {where}: need at least 2 runs per variant "
                                 f"(have {len(base_vals)} and {len(vals)})")
            use_welch = _variances_differ(base_vals, vals) if welch == "auto" else bool(welch)
            try:
                c = compare(base_vals, vals, confidence, welch=use_welch)
            except ValueError as e:
                raise ValueError(f"compare_table: {where}: {e}") from None
            eq = tost(base_vals, vals, margin_pct, alpha) if margin_pct else None
            rows.append({**point, "variant": v, "n_base": c.n_base, "n_var": c.n_var,
                         "mean_base": c.mean_base, "mean_var": c.mean_var, "sd_base": c.sd_base,
                         "sd_var": c.sd_var, "median_var": summarize(vals).median, "diff": c.diff,
                         "diff_err": c.diff_err, "pct": c.pct, "pct_err": c.pct_err, "p": c.p,
                         "test": c.test, "equivalent": None if eq is None else eq.equivalent,
                         "eq_margin_pct": margin_pct, "eq_p": None if eq is None else eq.p,
                         "significant_unadjusted": c.significant, "dof": c.dof})
    cols = [*by, "variant", "n_base", "n_var", "mean_base", "mean_var", "sd_base", "sd_var", "median_var",
            "diff", "diff_err", "pct", "pct_err", "p", "p_holm", "significant", "test", "equivalent",
            "eq_margin_pct", "eq_p", "significant_unadjusted", "dof"]
    out = pd.DataFrame(rows, columns=[c for c in cols if c not in ("p_holm", "significant")])
    out["p_holm"] = holm_fn(out["p"].to_numpy(float)) if holm else out["p"].to_numpy(float)
    out["significant"] = [bool(x < alpha) for x in out["p_holm"]]
    out["equivalent"] = out["equivalent"].astype(object)
    return out[cols]


holm_fn = holm
