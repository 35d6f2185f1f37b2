"""`schedlab ministat`: a byte-for-byte re-implementation of Debian's ministat(1)
(FreeBSD ministat.c as packaged in Debian 20150715-1), plus `--flavor freebsd`
for the modern FreeBSD behaviour (see docs/statistics.md).

Only stdlib modules are imported at start-up; numpy is imported lazily, and only
for large inputs, where it pays for its import time.  Every computation below
follows the C code's operation order so that the doubles (and hence the
printed digits) are identical, including C's IEEE results where Python would
raise (x/0, sqrt(-x)) and glibc's "-nan" spelling.
"""

from __future__ import annotations

import errno
import math
import os
import re
import select
import stat
import sys

NSTUDENT = 100
STUDENTPCT = (80.0, 90.0, 95.0, 98.0, 99.0, 99.5)
# ministat's t-table, copied (not computed): row = degrees of freedom, row 0 = infinity.
# Its columns are labelled by two-sided confidence, but the 99.5 column holds the
# 99.8 % (one-sided 0.999) quantiles: 318.313 for dof 1, 3.090 for infinity.
STUDENT = (
    (1.282, 1.645, 1.960, 2.326, 2.576, 3.090),
    (3.078, 6.314, 12.706, 31.821, 63.657, 318.313),
    (1.886, 2.920, 4.303, 6.965, 9.925, 22.327),
    (1.638, 2.353, 3.182, 4.541, 5.841, 10.215),
    (1.533, 2.132, 2.776, 3.747, 4.604, 7.173),
    (1.476, 2.015, 2.571, 3.365, 4.032, 5.893),
    (1.440, 1.943, 2.447, 3.143, 3.707, 5.208),
    (1.415, 1.895, 2.365, 2.998, 3.499, 4.782),
    (1.397, 1.860, 2.306, 2.896, 3.355, 4.499),
    (1.383, 1.833, 2.262, 2.821, 3.250, 4.296),
    (1.372, 1.812, 2.228, 2.764, 3.169, 4.143),
    (1.363, 1.796, 2.201, 2.718, 3.106, 4.024),
    (1.356, 1.782, 2.179, 2.681, 3.055, 3.929),
    (1.350, 1.771, 2.160, 2.650, 3.012, 3.852),
    (1.345, 1.761, 2.145, 2.624, 2.977, 3.787),
    (1.341, 1.753, 2.131, 2.602, 2.947, 3.733),
    (1.337, 1.746, 2.120, 2.583, 2.921, 3.686),
    (1.333, 1.740, 2.110, 2.567, 2.898, 3.646),
    (1.330, 1.734, 2.101, 2.552, 2.878, 3.610),
    (1.328, 1.729, 2.093, 2.539, 2.861, 3.579),
    (1.325, 1.725, 2.086, 2.528, 2.845, 3.552),
    (1.323, 1.721, 2.080, 2.518, 2.831, 3.527),
    (1.321, 1.717, 2.074, 2.508, 2.819, 3.505),
    (1.319, 1.714, 2.069, 2.500, 2.807, 3.485),
    (1.318, 1.711, 2.064, 2.492, 2.797, 3.467),
    (1.316, 1.708, 2.060, 2.485, 2.787, 3.450),
    (1.315, 1.706, 2.056, 2.479, 2.779, 3.435),
    (1.314, 1.703, 2.052, 2.473, 2.771, 3.421),
    (1.313, 1.701, 2.048, 2.467, 2.763, 3.408),
    (1.311, 1.699, 2.045, 2.462, 2.756, 3.396),
    (1.310, 1.697, 2.042, 2.457, 2.750, 3.385),
    (1.309, 1.696, 2.040, 2.453, 2.744, 3.375),
    (1.309, 1.694, 2.037, 2.449, 2.738, 3.365),
    (1.308, 1.692, 2.035, 2.445, 2.733, 3.356),
    (1.307, 1.691, 2.032, 2.441, 2.728, 3.348),
    (1.306, 1.690, 2.030, 2.438, 2.724, 3.340),
    (1.306, 1.688, 2.028, 2.434, 2.719, 3.333),
    (1.305, 1.687, 2.026, 2.431, 2.715, 3.326),
    (1.304, 1.686, 2.024, 2.429, 2.712, 3.319),
    (1.304, 1.685, 2.023, 2.426, 2.708, 3.313),
    (1.303, 1.684, 2.021, 2.423, 2.704, 3.307),
    (1.303, 1.683, 2.020, 2.421, 2.701, 3.301),
    (1.302, 1.682, 2.018, 2.418, 2.698, 3.296),
    (1.302, 1.681, 2.017, 2.416, 2.695, 3.291),
    (1.301, 1.680, 2.015, 2.414, 2.692, 3.286),
    (1.301, 1.679, 2.014, 2.412, 2.690, 3.281),
    (1.300, 1.679, 2.013, 2.410, 2.687, 3.277),
    (1.300, 1.678, 2.012, 2.408, 2.685, 3.273),
    (1.299, 1.677, 2.011, 2.407, 2.682, 3.269),
    (1.299, 1.677, 2.010, 2.405, 2.680, 3.265),
    (1.299, 1.676, 2.009, 2.403, 2.678, 3.261),
    (1.298, 1.675, 2.008, 2.402, 2.676, 3.258),
    (1.298, 1.675, 2.007, 2.400, 2.674, 3.255),
    (1.298, 1.674, 2.006, 2.399, 2.672, 3.251),
    (1.297, 1.674, 2.005, 2.397, 2.670, 3.248),
    (1.297, 1.673, 2.004, 2.396, 2.668, 3.245),
    (1.297, 1.673, 2.003, 2.395, 2.667, 3.242),
    (1.297, 1.672, 2.002, 2.394, 2.665, 3.239),
    (1.296, 1.672, 2.002, 2.392, 2.663, 3.237),
    (1.296, 1.671, 2.001, 2.391, 2.662, 3.234),
    (1.296, 1.671, 2.000, 2.390, 2.660, 3.232),
    (1.296, 1.670, 2.000, 2.389, 2.659, 3.229),
    (1.295, 1.670, 1.999, 2.388, 2.657, 3.227),
    (1.295, 1.669, 1.998, 2.387, 2.656, 3.225),
    (1.295, 1.669, 1.998, 2.386, 2.655, 3.223),
    (1.295, 1.669, 1.997, 2.385, 2.654, 3.220),
    (1.295, 1.668, 1.997, 2.384, 2.652, 3.218),
    (1.294, 1.668, 1.996, 2.383, 2.651, 3.216),
    (1.294, 1.668, 1.995, 2.382, 2.650, 3.214),
    (1.294, 1.667, 1.995, 2.382, 2.649, 3.213),
    (1.294, 1.667, 1.994, 2.381, 2.648, 3.211),
    (1.294, 1.667, 1.994, 2.380, 2.647, 3.209),
    (1.293, 1.666, 1.993, 2.379, 2.646, 3.207),
    (1.293, 1.666, 1.993, 2.379, 2.645, 3.206),
    (1.293, 1.666, 1.993, 2.378, 2.644, 3.204),
    (1.293, 1.665, 1.992, 2.377, 2.643, 3.202),
    (1.293, 1.665, 1.992, 2.376, 2.642, 3.201),
    (1.293, 1.665, 1.991, 2.376, 2.641, 3.199),
    (1.292, 1.665, 1.991, 2.375, 2.640, 3.198),
    (1.292, 1.664, 1.990, 2.374, 2.640, 3.197),
    (1.292, 1.664, 1.990, 2.374, 2.639, 3.195),
    (1.292, 1.664, 1.990, 2.373, 2.638, 3.194),
    (1.292, 1.664, 1.989, 2.373, 2.637, 3.193),
    (1.292, 1.663, 1.989, 2.372, 2.636, 3.191),
    (1.292, 1.663, 1.989, 2.372, 2.636, 3.190),
    (1.292, 1.663, 1.988, 2.371, 2.635, 3.189),
    (1.291, 1.663, 1.988, 2.370, 2.634, 3.188),
    (1.291, 1.663, 1.988, 2.370, 2.634, 3.187),
    (1.291, 1.662, 1.987, 2.369, 2.633, 3.185),
    (1.291, 1.662, 1.987, 2.369, 2.632, 3.184),
    (1.291, 1.662, 1.987, 2.368, 2.632, 3.183),
    (1.291, 1.662, 1.986, 2.368, 2.631, 3.182),
    (1.291, 1.662, 1.986, 2.368, 2.630, 3.181),
    (1.291, 1.661, 1.986, 2.367, 2.630, 3.180),
    (1.291, 1.661, 1.986, 2.367, 2.629, 3.179),
    (1.291, 1.661, 1.985, 2.366, 2.629, 3.178),
    (1.290, 1.661, 1.985, 2.366, 2.628, 3.177),
    (1.290, 1.661, 1.985, 2.365, 2.627, 3.176),
    (1.290, 1.661, 1.984, 2.365, 2.627, 3.175),
    (1.290, 1.660, 1.984, 2.365, 2.626, 3.175),
    (1.290, 1.660, 1.984, 2.364, 2.626, 3.174),
)
MAX_DS = 8
SYMBOL = b" x+*%#@O"
BUFSIZ = 8192  # glibc's; fgets(buf, BUFSIZ) splits longer lines
FAST_MIN_BYTES = 1 << 16  # below this numpy's import costs more than it saves
FLAVORS = ("debian", "freebsd")


class InvalidData(ValueError):
    """A data line ministat rejects ("Invalid data on line N")."""

    def __init__(self, lineno: int):
        super().__init__(f"invalid data on line {lineno}")
        self.lineno = lineno


class _Exit(Exception):
    def __init__(self, code: int):
        self.code = code


# ---------------------------------------------------------------- C emulation
_CSPACE = b" \t\n\v\f\r"  # isspace() in the C locale (ministat never calls setlocale)
_NUM_RE = re.compile(
    rb"[ \t\n\v\f\r]*([+-]?)(?:"
    rb"(0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?)"
    rb"|((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    rb"|([iI][nN][fF](?:[iI][nN][iI][tT][yY])?)"
    rb"|([nN][aA][nN](?:\([0-9A-Za-z_]*\))?))"
)
_INT_RE = re.compile(rb"[ \t\n\v\f\r]*([+-]?[0-9]+)")


def strtod_full(tok: bytes) -> float | None:
    """strtod(tok, &p) when it consumes all of tok (`*p == '\\0'`), else None.
    The regex is exactly glibc's C-locale grammar; the conversions round correctly,
    like glibc's."""
    m = _NUM_RE.fullmatch(tok)
    if m is None:
        return None
    sign, hx, dec, inf, _nan = m.groups()
    if dec is not None:
        return float(sign + dec)
    if hx is not None:
        try:
            v = float.fromhex(hx.decode())
        except OverflowError:  # glibc: HUGE_VAL with ERANGE, still fully parsed
            v = math.inf
    else:
        v = math.inf if inf is not None else math.nan
    return -v if sign == b"-" else v


def _strtol_int(s: bytes) -> tuple[int, bool]:
    """(int)strtol(s, &p, 10) and whether *p == '\\0'."""
    m = _INT_RE.match(s)
    if m is None:  # no conversion: p == s
        return 0, s == b""
    v = max(-(1 << 63), min((1 << 63) - 1, int(m.group(1))))  # long saturates
    v = ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)  # then truncates to int
    return v, m.end() == len(s)


def _cdiv(a: float, b: float) -> float:
    """IEEE division as C does it (Python raises on b == 0)."""
    if b != 0:
        return a / b
    if a != a:
        return a
    if a == 0:
        return -math.nan  # x86's default NaN has the sign bit set
    return math.inf if (math.copysign(1, a) * math.copysign(1, b)) > 0 else -math.inf


def _csqrt(x: float) -> float:
    if x < 0:
        return -math.nan  # sqrtsd of a negative: default NaN, printed "-nan"
    return math.sqrt(x) if x == x else x


def _cint(x: float) -> int:
    """(int)x on x86-64: truncation, INT_MIN when out of range or NaN."""
    if x != x or not (-2147483649.0 < x < 2147483648.0):
        return -2147483648
    return int(x)


def fmt_g(x: float, spec: str = "%g", flavor: str = "debian") -> str:
    """printf %g: Python's is glibc's except for NaN's sign (glibc prints -nan;
    FreeBSD's libc drops the sign)."""
    if x != x:
        s = "-nan" if (math.copysign(1, x) < 0 and flavor == "debian") else "nan"
        w = re.match(r"%(\d*)", spec).group(1)
        return s.rjust(int(w)) if w else s
    return spec % x


# --------------------------------------------------------------- data parsing
def _fgets_lines(data: bytes):
    """The pieces fgets(buf, BUFSIZ, f) returns, each cut at its first NUL (strlen)."""
    pos, n, lim = 0, len(data), BUFSIZ - 1
    while pos < n:
        nl = data.find(b"\n", pos, pos + lim)
        end = nl + 1 if nl >= 0 else min(pos + lim, n)
        piece = data[pos:end]
        pos = end
        z = piece.find(b"\0")
        yield piece if z < 0 else piece[:z]


def parse_values(data: bytes, column: int = 1, delim: bytes = b" \t") -> list[float]:
    """ministat's ReadSet loop: the values of `column` in input order, skipping
    comment ('#'-led token) and short lines; raises InvalidData(lineno)."""
    d0 = delim[:1]
    table = bytes.maketrans(delim, d0 * len(delim))
    out = []
    append = out.append
    for lineno, piece in enumerate(_fgets_lines(data), 1):
        piece = piece.rstrip(_CSPACE)
        tok = None
        i = 0
        for t in piece.translate(table).split(d0):
            if not t:  # strtok collapses runs of delimiters
                continue
            if t[0] == 0x23:  # '#'
                break
            i += 1
            if i == column:
                tok = t
                break
        if tok is None:
            continue
        v = strtod_full(tok)
        if v is None:
            raise InvalidData(lineno)
        append(v)
    return out


def _fixed_values(data: bytes, np):
    """Vectorised parse of files whose lines are all plain `-?digits[.digits]` with
    at most 15 digits (the usual benchmark output), else None.  Exact: mantissa
    < 2**53 and 10**frac (frac <= 15) are exact doubles, and one IEEE division
    of exact operands is correctly rounded - the same double strtod returns."""
    b = np.frombuffer(data if data.endswith(b"\n") else data + b"\n", np.uint8)
    nl = np.flatnonzero(b == 10)
    lens = np.diff(nl, prepend=-1) - 1
    if not (lens > 0).all():  # empty lines are skipped by ministat too
        nl, lens = nl[lens > 0], lens[lens > 0]
    n = len(nl)
    w = int(lens.max()) if n else 0
    if w == 0 or w > 17:
        return None
    pad = np.concatenate((np.full(w, 10, np.uint8), b))
    cls = np.empty((w, n), np.uint8)  # column-major: row k = char k of each right-aligned line
    lut = np.frombuffer(_LUT_CLASS, np.uint8)
    for k in range(w):
        cls[k] = lut[pad[nl + k]]
    first = w - lens
    for k in range(w - 1):  # blank the bytes before each line's start
        cls[k][first > k] = 4
    if not cls.all():  # class 0: a byte outside [0-9.-]
        return None
    isd = cls >= 10
    ndig = isd.sum(0, dtype=np.int32)
    if ndig.min() == 0 or ndig.max() > 15 or (cls == 2).sum(0, dtype=np.int32).max() > 1:
        return None
    neg = (cls == 3).any(0)  # '-' allowed once, as a line's first byte
    if (cls == 3).sum() != neg.sum() or not (cls[first[neg], np.flatnonzero(neg)] == 3).all():
        return None
    seen = np.zeros(n, bool)
    frac = np.zeros(n, np.int32)
    mant = np.zeros(n, np.int64)
    for k in range(w):
        ck = cls[k]
        dk = isd[k]
        seen |= ck == 2
        frac += dk & seen
        mant = np.where(dk, mant * 10 + (ck - 10), mant)
    v = mant.astype(np.float64) / (10.0 ** np.arange(16))[frac]
    np.negative(v, out=v, where=neg)
    return v


# byte -> class for _fixed_values: 0 invalid, 2 '.', 3 '-', 10+d digit d (4 = blank)
_LUT_CLASS = bytes(10 + c - 48 if 48 <= c <= 57 else 2 if c == 46 else 3 if c == 45 else 0 for c in range(256))


def _fast_values(data: bytes, np):
    """numpy array of the values when `data` is certainly plain numbers, one per
    line (no blanks/tabs/comments/exotic syntax/over-long lines), else None.  Within
    that alphabet float() accepts exactly what strtod accepts, rounding identically."""
    b = np.frombuffer(data, np.uint8)
    ok = np.zeros(256, bool)
    ok[list(b"0123456789.+-eE\n")] = True
    if not ok[b].all():
        return None
    v = _fixed_values(data, np)
    if v is not None:
        return v
    toks = data.split()
    if toks and max(map(len, toks)) >= BUFSIZ - 2:
        return None
    try:
        return np.array(list(map(float, toks)), dtype=np.float64)
    except ValueError:
        return None


def msort(vals: list[float]) -> list[float]:
    """glibc 2.36 qsort (a top-down merge sort) with ministat's dbl_cmp; used only
    when NaNs make the comparison inconsistent and the result algorithm-specific."""

    def cmp(a, b):
        return -1 if a < b else (1 if a > b else 0)

    def rec(b):
        n = len(b)
        if n <= 1:
            return b
        n1 = n // 2
        b1, b2 = rec(b[:n1]), rec(b[n1:])
        out, i, j = [], 0, 0
        while i < len(b1) and j < len(b2):
            if cmp(b1[i], b2[j]) <= 0:
                out.append(b1[i])
                i += 1
            else:
                out.append(b2[j])
                j += 1
        return out + b1[i:] + b2[j:]

    return rec(list(vals))


# ------------------------------------------------------------------- datasets
class Dataset:
    """One data set with ministat's statistics (same operation order as the C)."""

    def __init__(self, name: bytes, values, flavor: str = "debian", pstdev: bool = False, np=None):
        self.name, self.flavor, self.pstdev, self._np = name, flavor, pstdev, np
        self.n = n = len(values)
        if np is not None and not isinstance(values, list):
            # Sequential (not pairwise) sums, as AddPoint accumulates them.
            self.sy = float(np.cumsum(values)[-1]) if n else 0.0
            self.syy = float(np.cumsum(values * values)[-1]) if n else 0.0
            neg0 = bool(np.any(np.signbit(values) & (values == 0)))
            # -0.0 == 0.0 for qsort; only then does a stable sort (glibc's) differ.
            self.points = np.sort(values, kind="stable" if neg0 else "quicksort")
        else:
            sy = syy = 0.0
            if any(v != v for v in values):
                for a in values:  # x86 keeps the NaN of the first operand; Python may not
                    sy = sy if sy != sy else sy + a
                    syy = syy if syy != syy else syy + a * a
                self.points = msort(values)
            else:
                for a in values:
                    sy += a
                    syy += a * a
                self.points = sorted(values)
            self.sy, self.syy = sy, syy
        self._var = None

    def min(self) -> float:
        return float(self.points[0])

    def max(self) -> float:
        return float(self.points[self.n - 1])

    def avg(self) -> float:
        return _cdiv(self.sy, float(self.n))

    def median(self) -> float:
        m = self.n // 2
        if self.flavor == "freebsd" and self.n % 2 == 0:
            return (float(self.points[m]) + float(self.points[m - 1])) / 2
        return float(self.points[m])

    def var(self) -> float:
        if self._var is None:
            if self.flavor == "freebsd":  # two-pass, over the sorted points
                a = self.avg()
                if isinstance(self.points, list):
                    s = 0.0
                    for p in self.points:
                        s += (p - a) * (p - a)
                else:  # sequential sum, not numpy's pairwise
                    d = self.points - a
                    s = float(self._np.cumsum(d * d)[-1])
                self._var = _cdiv(s, self.n - 1.0)
            else:
                self._var = _cdiv(self.syy - _cdiv(self.sy * self.sy, float(self.n)), self.n - 1.0)
        return self._var

    def stddev(self) -> float:
        if self.pstdev:
            return _csqrt(self.var()) * _csqrt(_cdiv(self.n - 1.0, float(self.n)))
        return _csqrt(self.var())


def relative(ds: Dataset, rs: Dataset, confidx: int, flavor: str = "debian") -> dict:
    """ministat's Relative(): variant `ds` against baseline `rs` (numbers only)."""
    dof = ds.n + rs.n - 2
    t = STUDENT[0][confidx] if dof > NSTUDENT else STUDENT[dof][confidx]
    spool = (ds.n - 1) * ds.var() + (rs.n - 1) * rs.var()
    spool = _cdiv(spool, float(ds.n + rs.n - 2))
    spool = _csqrt(spool)
    s = spool * _csqrt(1.0 / ds.n + 1.0 / rs.n)
    d = ds.avg() - rs.avg()
    e = t * s
    pct = _cdiv(d * 100, rs.avg())
    if flavor == "freebsd":  # modern FreeBSD: error of the ratio, not e/mean
        re_ = (ds.n - 1) * ds.var() + _cdiv((rs.n - 1) * rs.var() * (ds.avg() * ds.avg()), rs.avg() * rs.avg())
        re_ *= _cdiv(float(ds.n + rs.n), ds.n * rs.n * (ds.n + rs.n - 2.0))
        re_ = t * _csqrt(re_)
        pct_err = _cdiv(re_ * 100, rs.avg())
    else:
        pct_err = _cdiv(e * 100, rs.avg())
    return {
        "t": t,
        "dof": dof,
        "spool": spool,
        "s": s,
        "diff": d,
        "err": e,
        "pct": pct,
        "pct_err": pct_err,
        "significant": abs(d) > e,
        "confidence": STUDENTPCT[confidx],
    }


# ----------------------------------------------------------------------- plot
_OR = [bytes(k | v for k in range(256)) for v in range(MAX_DS)]  # translate tables: byte |= v
_SYMTAB = bytes(SYMBOL[k] if k < MAX_DS else 0x3F for k in range(256))


class _Plot:
    def __init__(self, width: int, separate: bool, num: int):
        self.width, self.separate, self.num = width, separate, num
        self.height = 0
        self.data = bytearray()  # pl->data: rows of `width` bytes
        self.bar: list[bytearray | None] | None = None
        self.min, self.max = 999e99, -999e99
        self.span = self.dx = self.x0 = 0.0

    def adj(self, a: float):
        if a < self.min:
            self.min = a
        if a > self.max:
            self.max = a
        self.span = self.max - self.min
        self.dx = _cdiv(self.span, self.width - 1.0)
        self.x0 = self.min - 0.5 * self.dx

    def dim(self, ds: Dataset):
        self.adj(ds.min())
        self.adj(ds.max())
        self.adj(ds.avg() - ds.stddev())
        self.adj(ds.avg() + ds.stddev())

    def _col(self, v: float) -> int:
        return _cint(_cdiv(v - self.x0, self.dx))

    def _runs(self, ds: Dataset, np):
        """[(x, run length)] of consecutive equal columns, in point order."""
        if np is not None and not isinstance(ds.points, list):
            with np.errstate(all="ignore"):
                q = (ds.points - self.x0) / self.dx
            if self.dx != 0 and np.isfinite(q).all() and np.abs(q).max() < 2147483648.0:
                xs = q.astype(np.int64)  # truncates toward zero, like C
                starts = np.concatenate(([0], np.flatnonzero(np.diff(xs)) + 1))
                lens = np.diff(np.concatenate((starts, [len(xs)])))
                return list(zip(xs[starts].tolist(), lens.tolist()))
            xs = [self._col(float(v)) for v in ds.points]
        else:
            xs = [self._col(p) for p in ds.points]
        runs = []
        for x in xs:
            if runs and runs[-1][0] == x:
                runs[-1][1] += 1
            else:
                runs.append([x, 1])
        return runs

    def _check(self, x: int) -> bool:
        # Out-of-range columns are out-of-bounds writes in C: undefined behaviour
        # (it crashes on infinities, often on NaNs, on -w 1).  With -w 0 every write
        # is out of bounds but invisible; we print the empty frame C prints when it
        # survives (it may crash on larger inputs).
        if self.width > 0 and not 0 <= x < self.width:
            raise _Undefined()
        return self.width > 0

    def plot_set(self, ds: Dataset, val: int, np=None):
        if self.span == 0:
            return
        w = self.width
        bar = val - 1 if self.separate else 0
        if self.bar is None:
            self.bar = [None] * self.num
        if self.bar[bar] is None:
            self.bar[bar] = bytearray(w)
        runs = self._runs(ds, np)
        m = max([r for _, r in runs] + [1]) + 1
        if m > self.height:  # realloc(width*m) keeps old bytes, memset zeroes [height, m)
            d = self.data[: w * m]
            d += bytes(w * m - len(d))
            d[w * self.height :] = bytes(w * (m - self.height))
            self.data = d
        self.height = m  # may shrink: rows above m are then never printed
        for x, r in runs:
            if self._check(x):
                sl = slice(w + x, w * (r + 1) + x, w)  # rows 1..r of column x
                self.data[sl] = self.data[sl].translate(_OR[val])
        b = self.bar[bar]
        sd, av = ds.stddev(), ds.avg()
        if sd == sd:
            x, m2 = self._col(av - sd), self._col(av + sd)
            if self._check(m2):
                b[m2] = 0x7C
            if self._check(x):
                b[x] = 0x7C
            for i in range(x + 1, m2):
                if self._check(i) and b[i] == 0:
                    b[i] = 0x5F
        x = self._col(ds.median())
        if self._check(x):
            b[x] = 0x4D
        x = self._col(av)
        if self._check(x):
            b[x] = 0x41

    def dump(self, out: list):
        if self.span == 0:
            out.append(b"[no plot, span is zero width]\n")
            return
        w, h, d = self.width, self.height, self.data
        border = b"+" + b"-" * w + b"+\n"
        out.append(border)
        np = sys.modules.get("numpy")
        if np is not None and h > 256 and w > 0:  # big plots (1M points): vectorised
            grid = np.frombuffer(bytes(d[w : h * w]), np.uint8).reshape(h - 1, w)[::-1]
            body = np.empty((h - 1, w + 3), np.uint8)
            body[:, 0] = body[:, w + 1] = 0x7C
            body[:, w + 2] = 10
            body[:, 1 : w + 1] = np.frombuffer(_SYMTAB, np.uint8)[grid]
            out.append(body.tobytes())
        else:
            out.append(b"".join(b"|" + d[r * w : (r + 1) * w].translate(_SYMTAB) + b"|\n" for r in range(h - 1, 0, -1)))
        for b in self.bar or ():
            if b is not None:
                out.append(b"|" + bytes(b).replace(b"\0", b" ") + b"|\n")
        out.append(border)


class _Undefined(Exception):
    pass


# ----------------------------------------------------------------------- main
def _usage_text(whine: str, flavor: str) -> bytes:
    conf = ", ".join("%g%%" % p for p in STUDENTPCT)
    if flavor == "freebsd":
        opts, extra = (
            "[-AnPqs]",
            (
                "\t-P : calculate the standard deviation from an entire population\n"
                "\t-q : suppress printing summary-statistics headers and data-set names\n"
            ),
        )
    else:
        opts, extra = "[-Ans]", ""
    return (
        f"{whine}\n"
        f"Usage: ministat [-C column] [-c confidence] [-d delimiter(s)] {opts} [-w width] [file [file ...]]\n"
        f"\tconfidence = {{{conf}}}\n"
        "\t-A : print statistics only. suppress the graph.\n"
        "\t-C : column number to extract (starts and defaults to 1)\n"
        '\t-d : delimiter(s) string, default to " \\t"\n'
        "\t-n : print summary statistics only, no graph/test\n"
        + extra
        + "\t-s : print avg/median/stddev bars on separate lines\n"
        "\t-w : width of graph/test output (default 74 or terminal width)\n"
    ).encode()


def _getopt(args: list[bytes], optstring: bytes, prog: bytes, gnu: bool):
    """Options in command-line order as (char, optarg) - an error as (None, message) -
    and the operands.  gnu=True is glibc's getopt (permutes unless POSIXLY_CORRECT);
    False is BSD getopt (stops at the first operand)."""
    permute = gnu and "POSIXLY_CORRECT" not in os.environ
    events, operands, i = [], [], 0
    while i < len(args):
        a = args[i]
        if a == b"--":
            operands += args[i + 1 :]
            break
        if not a.startswith(b"-") or a == b"-":
            if not permute:
                operands += args[i:]
                break
            operands.append(a)
            i += 1
            continue
        k = 1
        while k < len(a):
            c = a[k : k + 1]
            pos = optstring.find(c)
            if c == b":" or pos < 0:
                msg = (b"%s: invalid option -- '%s'\n" if gnu else b"%s: illegal option -- %s\n") % (prog, c)
                events.append((None, msg))
                return events, operands
            if optstring[pos + 1 : pos + 2] == b":":
                if k + 1 < len(a):
                    events.append((c, a[k + 1 :]))
                elif i + 1 < len(args):
                    i += 1
                    events.append((c, args[i]))
                else:
                    msg = (
                        b"%s: option requires an argument -- '%s'\n"
                        if gnu
                        else b"%s: option requires an argument -- %s\n"
                    ) % (prog, c)
                    events.append((None, msg))
                    return events, operands
                break
            events.append((c, None))
            k += 1
        i += 1
    return events, operands


MAX_INPUT_BYTES = 1 << 30  # a dataset larger than this would not fit in memory as floats


def _unreadable(fd: int) -> OSError | None:
    """Why ministat will not read `fd` (None: it will). C ministat reads anything; here a
    device other than a terminal or /dev/null is refused (/dev/zero would never end), and so
    is a file beyond MAX_INPUT_BYTES (docs/inputs.md)."""
    st = os.fstat(fd)
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        null = os.stat(os.devnull)
        if os.isatty(fd) or (stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev):
            return None
        kind = "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
        return OSError(errno.EINVAL, f"{kind}, not a file or a pipe")
    if stat.S_ISREG(st.st_mode) and st.st_size > MAX_INPUT_BYTES:
        return OSError(errno.EFBIG, f"more than {MAX_INPUT_BYTES} bytes")
    return None


def _read_file(name: bytes, state: dict) -> bytes | OSError:
    """Everything fgets would see; OSError when fopen fails (or the input is refused). A FIFO
    nobody writes to reads as empty instead of waiting for a writer."""
    if name == b"-":
        if state.get("stdin_closed"):  # ministat fclose()s stdin after reading it
            return b""
        state["stdin_closed"] = state["flavor"] == "debian"
        fd = 0
    else:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError as e:
            return e
    chunks, n = [], 0
    try:
        refused = _unreadable(fd)
        if refused is not None:
            return refused
        while True:
            try:
                c = os.read(fd, 1 << 20)
            except BlockingIOError:  # a pipe whose writer has not written yet
                select.select([fd], [], [])
                continue
            if not c:
                break
            chunks.append(c)
            n += len(c)
            if n > MAX_INPUT_BYTES:
                return OSError(errno.EFBIG, f"more than {MAX_INPUT_BYTES} bytes")
    except OSError:  # e.g. EISDIR: fgets returns NULL, i.e. end of data
        pass
    finally:
        if fd != 0:
            os.close(fd)
    return b"".join(chunks)


def run(argv: list[bytes], out: list, err, tty: bool | None = None) -> int:
    """ministat with byte arguments; appends stdout chunks to `out`, writes
    stderr to the binary stream `err`; returns the exit status.  `tty` overrides
    isatty(stdout), which picks the default plot width."""
    flavor = "debian"
    if argv and argv[0].startswith(b"--flavor"):
        if argv[0].startswith(b"--flavor="):
            flavor, argv = argv[0][9:].decode(errors="replace"), argv[1:]
        elif len(argv) > 1:
            flavor, argv = argv[1].decode(errors="replace"), argv[2:]
        if flavor not in FLAVORS:
            err.write(b"ministat: --flavor must be one of: debian, freebsd\n")
            return 2
    prog = os.fsencode(os.environ.get("SCHEDLAB_MINISTAT_ARGV0", "ministat"))
    short = prog.rsplit(b"/", 1)[-1]  # err(3)'s program_invocation_short_name

    def usage(whine):
        err.write(_usage_text(whine, flavor))
        raise _Exit(2)

    termwidth = 74
    cols = None
    if os.isatty(1) if tty is None else tty:
        cols = os.environ.get("COLUMNS")
        if cols:
            termwidth = _strtol_int(os.fsencode(cols))[0]
        else:
            try:
                ws = os.get_terminal_size(1).columns
                if ws > 0:
                    termwidth = ws - 2
            except OSError:
                pass
    column, delim, flag_s, flag_n, flag_q, pstdev, suppress = 1, b" \t", False, False, False, False, False
    ci = -1
    optstring = b"AC:c:d:nPqsw:" if flavor == "freebsd" else b"AC:c:d:snw:"
    try:
        events, operands = _getopt(argv, optstring, prog if flavor == "debian" else short, flavor == "debian")
        for c, arg in events:
            if c is None:
                err.write(arg)
                usage("Unknown option")
            elif c == b"A":
                suppress = True
            elif c == b"C":
                column, ok = _strtol_int(arg)
                if not ok:
                    usage("Invalid column number.")
                if column <= 0:
                    usage("Column number should be positive.")
            elif c == b"c":
                a = strtod_full(arg) if arg else 0.0
                if a is None:
                    usage("Not a floating point number")
                for i, p in enumerate(STUDENTPCT):
                    if a == p:
                        ci = i
                if ci == -1:
                    usage("No support for confidence level")
            elif c == b"d":
                if arg == b"":
                    usage("Can't use empty delimiter string")
                delim = arg
            elif c == b"n":
                flag_n = True
            elif c == b"s":
                flag_s = True
            elif c == b"P":
                pstdev = True
            elif c == b"q":
                flag_q = True
            elif c == b"w":
                termwidth, ok = _strtol_int(arg)
                if not ok:
                    usage("Invalid width, not a number.")
                if termwidth < 0:
                    usage("Unable to move beyond left margin.")
        if ci == -1:
            ci = 2
        if not operands:
            operands = [b"-"]
        elif len(operands) > MAX_DS - 1:
            usage("Too many datasets.")
        state = {"flavor": flavor}
        names = [b"<stdin>" if o == b"-" else o for o in operands]
        if flavor == "freebsd":  # opens every file before reading any
            raw = [_read_file(o, state) for o in operands]
            for o, r in zip(operands, raw):
                if isinstance(r, OSError):
                    err.write(b"%s: Cannot open %s: %s\n" % (short, o, (r.strerror or os.strerror(r.errno)).encode()))
                    raise _Exit(2)
        np = None
        sets = []
        for k, o in enumerate(operands):
            r = raw[k] if flavor == "freebsd" else _read_file(o, state)
            if isinstance(r, OSError):
                err.write(
                    b"%s: Cannot open %s: %s\n" % (short, names[k], (r.strerror or os.strerror(r.errno)).encode())
                )
                raise _Exit(1)
            vals = None
            if len(r) >= FAST_MIN_BYTES and column == 1 and not set(delim) & set(b"0123456789.+-eE"):
                if np is None:
                    import numpy as np
                vals = _fast_values(r, np)
            if vals is None:
                try:
                    vals = parse_values(r, column, delim)
                except InvalidData as e:
                    err.write(b"%s: Invalid data on line %d in %s\n" % (short, e.lineno, names[k]))
                    raise _Exit(2) from None
            if len(vals) < 3:
                err.write(b"Dataset %s must contain at least 3 data points\n" % names[k])
                raise _Exit(2)
            sets.append(Dataset(names[k], vals, flavor, pstdev, np if not isinstance(vals, list) else None))
        if termwidth < 0 and not (flag_n or suppress):
            # from $COLUMNS or a 1-column terminal (-w refuses negatives): C plots out of bounds and crashes
            src = b"COLUMNS=" + os.fsencode(cols) if cols else b"the terminal width"
            err.write(
                b"ministat: %s: a negative plot width as C ministat reads it (its behaviour is undefined "
                b"here); use -w, -A or -n\n" % src
            )
            raise _Exit(2)
        _report(sets, out, err, termwidth, flag_s, flag_n, flag_q, suppress, ci, flavor, np)
    except _Exit as e:
        return e.code
    return 0


def _report(sets, out, err, termwidth, flag_s, flag_n, flag_q, suppress, ci, flavor, np):
    if not flag_q:
        for i, ds in enumerate(sets):
            out.append(b"%c %s\n" % (SYMBOL[i + 1], ds.name))
    if not flag_n and not suppress:
        pl = _Plot(termwidth, flag_s, len(sets))
        for ds in sets:
            pl.dim(ds)
        try:
            for i, ds in enumerate(sets):
                pl.plot_set(ds, i + 1, np)
        except _Undefined:
            del out[:]
            err.write(
                b"ministat: cannot plot these values (C ministat's behaviour "
                b"is undefined here: non-finite values or -w 1); use -A or -n\n"
            )
            raise _Exit(2) from None
        pl.dump(out)
    if not flag_q:
        out.append(b"    N           Min           Max        Median           Avg        Stddev\n")
    for i, ds in enumerate(sets):
        g = [fmt_g(v, "%13.8g", flavor) for v in (ds.min(), ds.max(), ds.median(), ds.avg(), ds.stddev())]
        out.append(("%c %3d %s %s %s %s %s\n" % (SYMBOL[i + 1], ds.n, *g)).encode())
        if i and not flag_n and not (flavor == "freebsd" and ds.pstdev):
            r = relative(ds, sets[0], ci, flavor)
            if r["significant"]:
                f = lambda v: fmt_g(v, "%g", flavor)  # noqa: E731
                out.append(
                    (
                        "Difference at %.1f%% confidence\n\t%s +/- %s\n\t%s%% +/- %s%%\n"
                        "\t(Student's t, pooled s = %s)\n"
                        % (r["confidence"], f(r["diff"]), f(r["err"]), f(r["pct"]), f(r["pct_err"]), f(r["spool"]))
                    ).encode()
                )
            else:
                out.append(b"No difference proven at %.1f%% confidence\n" % r["confidence"])


def main(argv: list[str]) -> int:
    out: list[bytes] = []
    code = run([os.fsencode(a) for a in argv], out, sys.stderr.buffer)
    sys.stderr.flush()
    try:
        sys.stdout.flush()
        w = sys.stdout.buffer.write
        for chunk in out:
            w(chunk)
        sys.stdout.flush()
    except BrokenPipeError:
        # Like C's stdio: output into a closed pipe is simply lost.
        _drop_stdout()
    except OSError as e:
        # C ministat loses its output silently on a full disk; say so (one line) instead
        _drop_stdout()
        sys.stderr.write(f"ministat: standard output: {e.strerror or e}\n")
        sys.stderr.flush()
        return 1
    return code


def _drop_stdout() -> None:
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    except OSError:
        pass
