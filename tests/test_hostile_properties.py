"""Hostile input, generated: hypothesis mutates study files, config/config.yaml, the lab
inventory and raw records (values swapped for YAML 1.1 numbers, anchors, TeX, shell words,
huge or deep values; lines dropped, doubled, swapped; bytes flipped; files cut short) and
runs the command a person would. What must hold for every example:

- one line on stderr and a non-zero exit, or acceptance (exit 0);
- never a traceback (an exception out of the command), never a hang (20 s), never a change
  under data/raw (the example's records, and the repository's shipped ones).

Examples are derandomized (the same ones every run) and sized to about a minute in all;
the number run and the time are printed at the end of the pytest run (tests/conftest.py)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
from conftest import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab import cli
from schedlab import run as _run  # noqa: F401  (imported now: its log=sys.stderr defaults outlive a test)

STUDY = ROOT / "config" / "studies"
CONFIG = ROOT / "config" / "config.yaml"
LAB = ROOT / "config" / "lab.yaml"
RECORDS = sorted((ROOT / "data" / "raw" / "qemu" / "s1").glob("*.json"))[:3]
EXAMPLES: dict[str, int] = {}  # per property, printed by conftest
SECONDS: dict[str, float] = {}

# values a person (or an attacker) might put where a value goes
HOSTILE = [
    "10.0",
    "012",
    "0755",
    "10:00",
    "1_0",
    "0b1010",
    "0x1f",
    "0o17",
    "!!float 10",
    "!!int 012",
    "!!str 1",
    "-1",
    "0",
    "1e400",
    "-.inf",
    ".nan",
    "9" * 40,
    "yes",
    "off",
    "null",
    "~",
    "",
    "[]",
    "{}",
    "[[[[",
    "]}",
    "*nope",
    "&a [*a]",
    "&b x",
    "<<: *b",
    "'\\input{/etc/passwd}'",
    '"$(reboot)"',
    "'a;b|c&d'",
    '"\\x00"',
    '"\\t"',
    "!!binary aGk=",
    "!!set {a, b}",
    "2024-01-01",
    "!!python/object:os.system x",
    "? [a]",
    "'x' * 3",
    '"' + "x" * 5000 + '"',
    "[" + ", ".join(["1"] * 500) + "]",
    "{a: {b: {c: {d: {e: 1}}}}}",
    "three",
    "4K",
    "-10",
]


def _alarm(signum, frame):
    raise TimeoutError("no answer in 20 s")


def _cli(argv: list[str], cwd: Path) -> tuple[int, str]:
    """The command in-process (each example would take 0.4 s as a process): exit, stderr."""
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    try:
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(argv)
            except SystemExit as e:  # argparse
                code = e.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return code, err.getvalue()


ACCEPTED: dict[str, int] = {}  # examples that exited 0 (the others: one-line errors)


def _holds(code: int, err: str, name: str) -> None:
    assert "Traceback" not in err, err
    ACCEPTED[name] = ACCEPTED.get(name, 0) + (code == 0)
    if code != 0:
        lines = err.splitlines()
        assert len(lines) == 1, f"exit {code} with {len(lines)} lines on stderr:\n{err[:2000]}"
        assert len(lines[0]) < 1000, lines[0][:300]


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "?"
        for p in sorted(folder.rglob("*"))
    }


@st.composite
def text_mutation(draw, text: str) -> bytes:
    """`text` with one to three edits of its lines, values or bytes."""
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        op = draw(st.sampled_from(["value", "value", "value", "drop", "double", "swap", "insert", "indent"]))
        if op == "value" and ":" in lines[i]:
            key, _, rest = lines[i].partition(":")
            new = draw(st.sampled_from(HOSTILE) | st.text(max_size=12))
            lines[i] = f"{key}: {new}" if not rest.strip().startswith(("{", "[")) or draw(st.booleans()) else lines[i]
            if rest.strip().startswith("{") and lines[i] == f"{key}:{rest}":  # inside a flow mapping
                inner = rest.strip()[1:].split(",")
                j = draw(st.integers(0, len(inner) - 1))
                k, _, _ = inner[j].partition(":")
                inner[j] = f"{k}: {new}"
                lines[i] = f"{key}: {{{','.join(inner)}"
        elif op == "drop" and len(lines) > 1:
            del lines[i]
        elif op == "double":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "insert":
            lines.insert(i, draw(st.sampled_from(HOSTILE + ["x: &a [1, 2]", "y: [*a, *a, *a]", "---", "%YAML 1.1"])))
        elif op == "indent":
            lines[i] = draw(st.sampled_from(["  ", "\t", " "])) + lines[i]
    out = bytearray("\n".join(lines).encode())
    if out and draw(st.integers(0, 9)) == 0:  # a byte flipped, or the file cut short
        k = draw(st.integers(0, len(out) - 1))
        if draw(st.booleans()):
            out[k] = draw(st.integers(0, 255))
        else:
            del out[k:]
    return bytes(out)


COMMON = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def _count(name: str, t0: float) -> None:
    EXAMPLES[name] = EXAMPLES.get(name, 0) + 1
    SECONDS[name] = SECONDS.get(name, 0.0) + time.monotonic() - t0


@pytest.fixture(scope="module", autouse=True)
def shipped_raw_untouched():
    before = _tree(ROOT / "data" / "raw")
    yield
    assert _tree(ROOT / "data" / "raw") == before, "a command changed the repository's data/raw"


STUDY_NAMES = ["s0", "s1", "s2", "s3", "s4"]


@settings(COMMON, max_examples=700)
@given(st.data())
def test_mutated_study_files(data):
    t0 = time.monotonic()
    name = data.draw(st.sampled_from(STUDY_NAMES))
    text = data.draw(text_mutation((STUDY / f"{name}.yaml").read_text()))
    cmd = data.draw(st.sampled_from(["validate", "validate", "plan"]))
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / f"{name}.yaml"
        f.write_bytes(text)
        argv = (
            ["plan", str(f), "--seed", "1"]
            if cmd == "plan"
            else ["validate", "--config", str(CONFIG), "--lab", str(LAB), str(f)]
        )
        _holds(*_cli(argv, Path(tmp)), "study files")
    _count("study files", t0)


@pytest.mark.parametrize("which", ["config", "inventory"])
@settings(COMMON, max_examples=300)
@given(data=st.data())
def test_mutated_config_and_inventory(which, data):
    t0 = time.monotonic()
    original = CONFIG if which == "config" else LAB
    text = data.draw(text_mutation(original.read_text()))
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / original.name
        f.write_bytes(text)
        files = {"config": CONFIG, "inventory": LAB, which: f}
        argv = ["validate", "--config", str(files["config"]), "--lab", str(files["inventory"]), str(STUDY / "s1.yaml")]
        _holds(*_cli(argv, Path(tmp)), which)
    _count(which, t0)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12,
)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


@settings(COMMON, max_examples=500)
@given(st.data())
def test_mutated_records(data):
    """A record of the shipped S1 qemu data, edited (a value replaced or removed, its checksum
    recomputed or not) or damaged as bytes, beside two intact ones: verify and dataset."""
    from schedlab import store

    t0 = time.monotonic()
    k = data.draw(st.integers(0, len(RECORDS) - 1))
    rec = json.loads(RECORDS[k].read_text())
    op = data.draw(st.sampled_from(["set", "set", "delete", "bytes", "deep"]))
    if op in ("set", "delete"):
        path = data.draw(st.sampled_from([p for p in _paths(rec) if p]))
        parent = rec
        for key in path[:-1]:
            parent = parent[key]
        if op == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(JSON)
        if data.draw(st.booleans()):
            try:
                rec["checksum"] = store.checksum(rec)
            except (TypeError, ValueError):
                pass
        body = json.dumps(rec, indent=1, allow_nan=True).encode()
    elif op == "bytes":
        b = bytearray(RECORDS[k].read_bytes())
        for _ in range(data.draw(st.integers(1, 4))):
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.integers(0, 255))
        body = bytes(b)
    else:
        n = data.draw(st.integers(50, 5000))
        body = ('{"a": ' + "[" * n + "]" * n + "}").encode()
    cmd = data.draw(st.sampled_from(["verify", "dataset"]))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "data" / "raw" / "qemu" / "s1"
        folder.mkdir(parents=True)
        for r in RECORDS:
            shutil.copy2(r, folder / r.name)
        (folder / RECORDS[k].name).write_bytes(body)
        before = _tree(Path(tmp) / "data" / "raw")
        if cmd == "verify":
            argv = ["verify", str(Path(tmp) / "data")]
        else:
            argv = ["dataset", "s1", "--testbed", "qemu", "--out", str(Path(tmp) / "data")]
            argv += ["--manifest", str(Path(tmp) / "m.json"), "--seed", "20261121"]
        _holds(*_cli(argv, Path(tmp)), "records")
        assert _tree(Path(tmp) / "data" / "raw") == before, "the command changed data/raw"
    _count("records", t0)
