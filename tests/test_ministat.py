"""`schedlab ministat` against Debian's /usr/bin/ministat: stdout, stderr and exit
status must agree byte for byte.  Most cases call `ministat.run()` in-process
(fast); a few go through the installed console script (stdin, wiring, tty)."""

from __future__ import annotations

import io
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from schedlab.stats import ministat

CMINISTAT = "/usr/bin/ministat"
needs_c = pytest.mark.skipif(
    not os.access(CMINISTAT, os.X_OK),
    reason="Debian's ministat is not installed (apt-get install ministat; the Makefile does)",
)
SCHEDLAB = shutil.which("schedlab", path=os.path.dirname(sys.executable))
ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "POSIXLY_CORRECT", "SCHEDLAB_MINISTAT_ARGV0")}


def c_ministat(args, stdin=b"", env=None, argv0="ministat"):
    p = subprocess.run([argv0, *args], executable=CMINISTAT, input=stdin, capture_output=True, env=env or ENV)
    return p.stdout, p.stderr, p.returncode


def py_ministat(args):
    out, err = [], io.BytesIO()
    code = ministat.run([os.fsencode(a) for a in args], out, err, tty=False)
    return b"".join(out), err.getvalue(), code


def cli_ministat(args, stdin=b"", env=None):
    cmd = [SCHEDLAB, "ministat"] if SCHEDLAB else [sys.executable, "-m", "schedlab.cli", "ministat"]
    p = subprocess.run([*cmd, *args], input=stdin, capture_output=True, env=env or ENV)
    return p.stdout, p.stderr, p.returncode


def same(a, b):
    """`a` (ours) equals `b` (C).  Where C dies of a signal (its plot writes out of
    bounds on infinities/NaNs or -w 1: undefined behaviour) we must refuse cleanly."""
    if b[2] < 0:
        assert a[2] == 2 and b"undefined" in a[1] and a[0] == b"", a
        return
    assert a[2] == b[2], f"exit status {a[2]} != {b[2]}\nstderr: {a[1]!r} / {b[1]!r}"
    assert a[1] == b[1], "stderr differs"
    assert a[0] == b[0], "stdout differs:\n" + a[0].decode(errors="replace") + "\n---\n" + b[0].decode(errors="replace")


# ------------------------------------------------------------ generated data
def _values(rng: random.Random, kind: str, n: int) -> list[str]:
    if kind == "normal":
        mu, sd = rng.choice([(100, 5), (1000, 1), (3.5, 0.2), (1e6, 3e4)])
        return ["%.6f" % rng.gauss(mu, sd) for _ in range(n)]
    if kind == "g":
        return ["%g" % rng.gauss(50, 7) for _ in range(n)]
    if kind == "exp":
        return ["%.4e" % rng.expovariate(1e-3) for _ in range(n)]
    if kind == "ties":
        return ["%d" % rng.randint(8, 12) for _ in range(n)]
    if kind == "negative":
        return ["%.3f" % rng.gauss(-40, 15) for _ in range(n)]
    if kind == "const":
        return [rng.choice(["5", "0.1", "-3.25", "0"])] * n
    if kind == "zero-mean":
        half = ["%.2f" % rng.uniform(0, 5) for _ in range(n // 2)]
        return half + ["-" + h for h in half] + ["0"] * (n % 2)
    if kind == "wide":
        return [
            "%.17g" % rng.uniform(1e-300, 1e-290) if rng.random() < 0.5 else "%.17g" % rng.gauss(1e15, 1e13)
            for _ in range(n)
        ]
    raise ValueError(kind)


KINDS = ["normal", "g", "exp", "ties", "negative", "const", "zero-mean", "wide"]
SIZES = [3, 4, 5, 6, 7, 10, 11, 33, 50, 51, 100, 250]


def _generated_cases(n_cases=260, seed=20150715):
    rng = random.Random(seed)
    cases = []
    for i in range(n_cases):
        nsets = [1, 2, 2, 2, 3, 3, 4, 5, 6, 7][i % 10]
        sets = []
        base_kind = rng.choice(KINDS)
        for _ in range(nsets):
            kind = base_kind if rng.random() < 0.6 else rng.choice(KINDS)
            sets.append(_values(rng, kind, rng.choice(SIZES)))
        opts = []
        opts += ["-c", ["80", "90", "95", "98", "99", "99.5"][i % 6]] if i % 4 else []
        r = rng.random()
        opts += ["-A"] if r < 0.15 else ["-n"] if r < 0.25 else []
        opts += ["-s"] if rng.random() < 0.3 else []
        w = rng.choice([None, None, None, 2, 3, 10, 40, 74, 100, 160])  # -w 0 and 1: UB in C
        opts += ["-w", str(w)] if w is not None else []
        layout = rng.choice(["plain", "plain", "comma", "columns", "messy"])
        cases.append(pytest.param(sets, opts, layout, id=f"gen{i:03d}-{nsets}sets-{layout}"))
    return cases


def _write(tmp: Path, idx: int, values: list[str], layout: str, rng: random.Random) -> tuple[Path, list[str]]:
    p = tmp / f"set{idx}.dat"
    extra: list[str] = []
    if layout == "plain":
        text = "".join(v + "\n" for v in values)
    elif layout == "comma":  # -d , and a second column
        text = "".join(f"{k},{v}\n" for k, v in enumerate(values))
        extra = ["-d", ",", "-C", "2"]
    elif layout == "columns":  # third column, tabs and blanks, comments, blank lines
        lines = [f"run{k}\t{k * 3} {v}  # note" for k, v in enumerate(values)]
        lines.insert(0, "# header line")
        lines.insert(len(lines) // 2, "")
        lines.insert(len(lines) // 3, "only two")
        text = "\n".join(lines) + "\n"
        extra = ["-C", "3"]
    else:  # CRLF, leading blanks, trailing spaces, no final newline
        text = "\r\n".join(("  " if k % 3 == 0 else "") + v + ("  \t" if k % 2 else "") for k, v in enumerate(values))
    p.write_text(text)
    return p, extra


@needs_c
@pytest.mark.parametrize("sets,opts,layout", _generated_cases())
def test_generated_matches_c(tmp_path, sets, opts, layout):
    rng = random.Random(len(sets))
    files, extra = [], []
    for k, vals in enumerate(sets):
        p, extra = _write(tmp_path, k, vals, layout, rng)
        files.append(str(p))
    args = [*opts, *extra, *files]
    same(py_ministat(args), c_ministat(args))


# --------------------------------------------------------- hand-picked cases
def _edge_files(tmp: Path) -> dict[str, Path]:
    f = {
        "a": "1\n2\n3\n",
        "b": "2\n3\n4\n5\n",
        "c": "0.1\n0.1\n0.1\n",
        "z": "0\n0\n0\n",
        "empty": "",
        "one": "42\n",
        "two": "1\n2\n",
        "blank": "\n\n\n",
        "bad3": "1\n2\nx3\n4\n",
        "badtail": "1\n2\n3 \n4abc\n",
        "bad-second-col": "1 2\n3 x\n5 6\n7 8\n",
        "comments": "# c\n1 # one\n#2\n 3\n\t4\n5#x\n",
        "hex": "0x1p3\n0x1.8p1\n-0x.8p0\n0X10\n",
        "infnan": "1\n2\ninf\n-Infinity\nNAN\n",
        "nan": "1\n2\nnan\n3\n",
        "negzero": "-0\n0\n-0.0\n0\n1\n",
        "huge": "1e308\n1e308\n-1e308\n1e-320\n",
        "overflow": "1e999\n2\n3\n",
        "signs": "+1\n-2\n+.5\n5.\n-.25e1\n",
        "nul": "1\n2\x003\n4\n5\n",
        "cr": "1\r\n2\r\n3\r\n",
        "ws": "1\v\n2\f\n3\r\n",
        "zeromean": "-1\n0\n1\n",
        "col3": "a b 1\nc d 2\ne f 3\ng h\n",
        "semi": "1;2\n3;4\n5;6\n7;8\n",
        "ties": "".join(f"{k % 3}\n" for k in range(60)),
        "ties2": "".join(f"{k % 7}\n" for k in range(20)),
        "long": "1\n2\n" + "3" * 9000 + "\n4\n5\n",
        "longcomment": "1\n" + "#" * 10000 + "\n2\n3\n",
        "longspaces": "1\n2\n" + " " * 8189 + "7\n3\n",
        "noeol": "1\n2\n3",
        "big-fixed": "".join("%.3f\n" % (100 + (k * 7919 % 1000) / 10) for k in range(12000)),
        "big-fixed2": "".join("%.2f\n" % (101 + (k * 104729 % 997) / 10) for k in range(15000)),
        "big-exp": "".join("%.6e\n" % (1e3 + k % 977) for k in range(9000)),
        "big-negzero": "".join(
            ("-0\n" if k % 5 == 0 else "0\n" if k % 5 == 1 else "%d\n" % (k % 9 - 4)) for k in range(20000)
        ),
        "big-comment": "# header\n" + "".join("%d\n" % (k % 1000) for k in range(20000)),
        "big-bad": "".join("%d\n" % k for k in range(20000)) + "oops\n",
        "big-long": "".join("%.12f\n" % (k / 7) for k in range(8000)),
        "big-ties": "".join("%d\n" % (k % 11) for k in range(30000)),
    }
    out = {}
    for name, text in f.items():
        out[name] = tmp / name
        out[name].write_bytes(text.encode())
    (tmp / "dir").mkdir()
    out["dir"] = tmp / "dir"
    out["missing"] = tmp / "does-not-exist"
    return out


EDGE = [
    ["a", "b"],
    ["b", "a"],
    ["c", "a"],
    ["a", "z"],
    ["z", "a"],
    ["empty"],
    ["one"],
    ["two"],
    ["blank"],
    ["bad3"],
    ["a", "bad3"],
    ["badtail"],
    ["-C", "2", "bad-second-col"],
    ["comments"],
    ["hex"],
    ["-n", "infnan"],
    ["-A", "infnan", "a"],
    ["-n", "nan", "a"],
    ["nan"],
    ["negzero", "a"],
    ["-n", "huge"],
    ["-n", "overflow", "a"],
    ["signs", "a"],
    ["nul"],
    ["cr", "a"],
    ["ws"],
    ["a", "zeromean"],
    ["zeromean", "a"],
    ["-C", "3", "col3"],
    ["-d", ";", "-C", "2", "semi"],
    ["-d", ";", "semi"],
    ["semi"],
    ["ties", "ties2"],
    ["-s", "ties", "ties2", "a"],
    ["ties2", "ties"],
    ["long", "a"],
    ["longcomment"],
    ["longspaces"],
    ["noeol", "a"],
    ["big-fixed", "big-fixed2"],
    ["-s", "big-fixed2", "big-fixed"],
    ["big-exp", "big-fixed"],
    ["big-negzero", "a"],
    ["-n", "big-negzero"],
    ["big-comment", "big-ties"],
    ["big-bad"],
    ["big-long", "big-fixed"],
    ["-A", "big-ties", "big-fixed"],
    ["-C", "2", "big-fixed"],
    ["-d", ".", "big-fixed"],
    ["-w", "20", "big-ties"],
    # files and counts
    ["missing"],
    ["a", "missing"],
    ["dir"],
    ["a", "a", "a", "a", "a", "a", "a"],
    ["a", "a", "a", "a", "a", "a", "a", "a"],
    ["a"] * 9,
    # options
    ["-x", "a"],
    ["-c"],
    ["-c", "42", "a"],
    ["-c", "abc", "a"],
    ["-c", "", "a"],
    ["-c", "9.5e1", "a", "b"],
    ["-c", "0x5f", "a", "b"],
    ["-c95", "a", "b"],
    ["-c", "95", "-c", "42", "a", "b"],
    ["-C", "0", "a"],
    ["-C", "x", "a"],
    ["-C", "", "a"],
    ["-C", " 1", "a"],
    ["-C", "1 ", "a"],
    ["-C", "-1", "a"],
    ["-C", "4294967297", "a"],
    ["-w", "-1", "a"],
    ["-w", "x", "a"],
    ["-w", "", "a"],
    ["-w", "4294967370", "a", "b"],
    ["-w", "-4294967296", "a"],
    ["-w", "2", "a", "b"],
    ["-w", "1000", "a", "b"],
    ["-w"],
    ["-d", "", "a"],
    ["-d"],
    ["-Ans", "a", "b"],
    ["-sw30", "a", "b"],
    ["a", "-n", "b"],
    ["a", "--", "-n"],
    ["--", "a"],
    ["--foo", "a"],
    ["-A", "-", "a"],
    ["-P", "a"],
    ["-q", "a"],
    ["-é", "a"],
    ["-:", "a"],
    ["-n", "-x", "a"],
    ["-c", "42", "-x", "a"],
    ["-x", "-c", "42", "a"],
]


@needs_c
@pytest.mark.parametrize("args", EDGE, ids=lambda a: " ".join(a)[:60] or "none")
def test_edge_matches_c(tmp_path, args):
    files = _edge_files(tmp_path)
    argv = [str(files[a]) if a in files else a for a in args]
    same(py_ministat(argv), c_ministat(argv))


# ------------------------------------------------- through the real command
@needs_c
@pytest.mark.parametrize(
    "args,stdin,env",
    [
        ([], b"1\n2\n3\n4\n", {}),
        (["-"], b"5\n6\n7\n", {}),
        (["-", "-"], b"5\n6\n7\n", {}),
        (["-n"], b"1\n2\n", {}),
        (["A", "-n", "B"], b"", {}),
        (["A", "-n", "B"], b"", {"POSIXLY_CORRECT": "1"}),
        (["-x"], b"", {}),
        (["-x"], b"", {"SCHEDLAB_MINISTAT_ARGV0": "/usr/bin/ministat"}),
        (["nofile"], b"", {"SCHEDLAB_MINISTAT_ARGV0": "/usr/bin/ministat"}),
    ],
    ids=[
        "stdin-noargs",
        "stdin-dash",
        "stdin-twice",
        "stdin-short",
        "permute",
        "posixly-correct",
        "badopt",
        "badopt-argv0",
        "missing-argv0",
    ],
)
def test_cli_matches_c(tmp_path, args, stdin, env):
    (tmp_path / "A").write_text("1\n2\n3\n")
    (tmp_path / "B").write_text("3\n4\n5\n6\n")
    argv = [str(tmp_path / a) if a in ("A", "B") else a for a in args]
    e = {**ENV, **env}
    argv0 = env.get("SCHEDLAB_MINISTAT_ARGV0", "ministat")
    same(cli_ministat(argv, stdin, e), c_ministat(argv, stdin, e, argv0=argv0))


@needs_c
def test_cli_tty_width_from_columns(tmp_path):
    """On a terminal the width comes from $COLUMNS (atoi), like the C program."""
    import pty

    (tmp_path / "A").write_text("1\n2\n3\n")
    outs = []
    for cmd in ([CMINISTAT], [SCHEDLAB or sys.executable, *([] if SCHEDLAB else ["-m", "schedlab.cli"]), "ministat"]):
        master, slave = pty.openpty()
        p = subprocess.run(
            [*cmd, str(tmp_path / "A")], stdout=slave, stderr=subprocess.PIPE, env={**ENV, "COLUMNS": "33"}
        )
        os.close(slave)
        data = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
        os.close(master)
        outs.append((data, p.returncode))
    assert outs[0] == outs[1]
    assert b"+" + b"-" * 33 + b"+" in outs[0][0]


# ------------------------------------------------------------ pieces and flavor
def test_undefined_plot_fails_cleanly(tmp_path):
    """C ministat writes out of bounds (and often crashes) on infinities in the plot
    or -w 1: we refuse with a clear message; -A/-n still work."""
    p = tmp_path / "inf"
    p.write_text("1\n2\ninf\n")
    (tmp_path / "a").write_text("1\n2\n3\n")
    for args in ([str(p)], ["-w", "1", str(tmp_path / "a")]):
        out, err, code = py_ministat(args)
        assert code == 2 and b"undefined" in err and out == b""


def test_strtod_grammar():
    f = ministat.strtod_full
    assert f(b"1") == 1 and f(b" 1.5") == 1.5 and f(b"-.5e1") == -5 and f(b"0x1p-2") == 0.25
    assert f(b"1 ") is None and f(b"1e") is None and f(b"0x") is None and f(b"1_0") is None
    assert f(b"infinity") == float("inf") and f(b"nan(12)") != f(b"nan(12)")
    assert ministat.fmt_g(-float("nan"), "%13.8g") == "         -nan"


def test_fast_parser_agrees_with_exact_parser():
    np = pytest.importorskip("numpy")
    rng = random.Random(7)
    lines = ["%.*f" % (rng.randint(0, 6), rng.uniform(-1e6, 1e6)) for _ in range(20000)]
    lines += ["-0", "0.", ".5", "123456789012345", "-99999999999.9999"]
    data = ("\n".join(lines) + "\n").encode()
    fast = ministat._fixed_values(data, np)
    assert fast is not None
    exact = ministat.parse_values(data)
    assert [x.hex() for x in fast.tolist()] == [x.hex() for x in exact]
    for bad in (b"1\n-\n", b"1-\n2\n", b"1..2\n", b"1234567890123456\n", b".\n", b"1\n--1\n"):
        assert ministat._fixed_values(bad, np) is None


def test_freebsd_flavor(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("1\n2\n3\n4\n")
    b.write_text("5\n6\n7\n8\n9\n12\n")
    out, err, code = py_ministat(["--flavor", "freebsd", "-A", str(a), str(b)])
    assert code == 0, err
    lines = out.decode().splitlines()
    assert lines[3].split()[4] == "2.5"  # median of an even N: mean of the middle two
    deb = py_ministat(["-A", str(a), str(b)])[0].decode().splitlines()
    assert deb[3].split()[4] == "3"  # Debian: points[n/2]
    assert lines[5] == deb[5] == "Difference at 95.0% confidence"
    assert lines[7] != deb[7]  # percent error: FreeBSD's ratio formula
    out, err, code = py_ministat(["--flavor=freebsd", "-q", "-n", str(a)])
    assert out.decode().splitlines()[0].startswith("x   4")
    out, err, code = py_ministat(["--flavor=freebsd", "-x", str(a)])
    assert code == 2 and err.startswith(b"ministat: illegal option -- x\n")
    assert py_ministat(["--flavor", "bogus", str(a)])[2] == 2


def _on_tty(cmd, env):
    """(stdout as the terminal got it, stderr, exit status) of `cmd` with a pty as stdout."""
    import pty

    master, slave = pty.openpty()
    p = subprocess.run(cmd, stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    data = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    os.close(master)
    return data, p.stderr, p.returncode


@needs_c
@pytest.mark.parametrize(
    "cols, args", [("-5", []), ("4294967290", []), ("-5", ["-n"]), ("-5", ["-w", "30"]), ("abc", []), ("0", [])]
)
def test_cli_tty_odd_columns(tmp_path, cols, args):
    """A negative $COLUMNS crashes C ministat (out-of-bounds plot): we refuse in one line;
    where C is defined (non-numeric = atoi 0, -n, -w) the output is the same."""
    (tmp_path / "A").write_text("1\n2\n3\n")
    env = {**ENV, "COLUMNS": cols}
    ours = _on_tty(
        [
            SCHEDLAB or sys.executable,
            *([] if SCHEDLAB else ["-m", "schedlab.cli"]),
            "ministat",
            *args,
            str(tmp_path / "A"),
        ],
        env,
    )
    c = _on_tty([CMINISTAT, *args, str(tmp_path / "A")], env)
    if c[2] < 0:
        assert ours[2] == 2 and ours[0] == b"" and ours[1].count(b"\n") == 1 and b"undefined" in ours[1], ours
    else:
        assert ours == c
