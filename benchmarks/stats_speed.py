"""`schedlab ministat f1 f2` against Debian's `/usr/bin/ministat f1 f2` on two files
of 1,000,000 samples each: best wall time of several runs (Python start-up
included), identical output required.  Last line: `ratio: X` (target <= 1.5).

    .venv/bin/python benchmarks/stats_speed.py [--n 1000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time


def _schedlab() -> list[str]:
    exe = shutil.which("schedlab", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", "schedlab.cli"]


def _best(cmd: list[str], repeat: int) -> tuple[float, bytes, bytes, int]:
    best, res = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True)
        dt = time.perf_counter() - t0
        if dt < best:
            best, res = dt, p
    return best, res.stdout, res.stderr, res.returncode


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ministat", default="/usr/bin/ministat")
    a = ap.parse_args(argv)
    if not os.access(a.ministat, os.X_OK):
        print(f"{a.ministat} not found (apt-get install ministat)", file=sys.stderr)
        return 2
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for k, mu in enumerate((100.0, 100.02)):  # benchmark-like: fixed-point, ~6 decimals
            path = os.path.join(tmp, f"f{k + 1}")
            with open(path, "w") as f:
                f.write("".join("%.6f\n" % rng.gauss(mu, 5.0) for _ in range(a.n)))
            files.append(path)
        ours = _best([*_schedlab(), "ministat", *files], a.repeat)
        theirs = _best([a.ministat, *files], a.repeat)
    same = ours[1:] == theirs[1:]
    print(f"schedlab ministat: {ours[0]:.3f} s  ({' '.join(_schedlab())} ministat)")
    print(f"/usr/bin/ministat: {theirs[0]:.3f} s")
    print(f"identical stdout/stderr/exit status: {same}")
    if not same:
        print("OUTPUT DIFFERS", file=sys.stderr)
        return 1
    print(f"ratio: {ours[0] / theirs[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
