"""Progress of a long step (a study's plan, a sensitivity sweep, the validation's simulator runs).

On a terminal, a tqdm bar; the step's own log lines then go through tqdm's writer (`write`, or
the file-like `out`), above the bar, so neither breaks the other and the final bar is printed
once. Elsewhere (a log file, a pipe, CI), one plain line per step, or at most one every
`every_s` seconds: "progress: 57/240 (24 %) · ETA 31 min"."""

from __future__ import annotations

import sys
import threading
import time


class _Writer:
    """A file-like object whose lines go to `file` through Progress.write."""

    def __init__(self, progress: Progress, file):
        self.progress, self.file, self.buf = progress, file, ""

    def write(self, s: str) -> int:
        self.buf += s
        *lines, self.buf = self.buf.split("\n")
        for line in lines:
            self.progress.write(line, self.file)
        return len(s)

    def flush(self) -> None:
        if self.buf:
            self.progress.write(self.buf, self.file)
            self.buf = ""

    def isatty(self) -> bool:
        return False


class Progress:
    """`total` steps on `log` (stderr); `desc` names the step in its lines ("progress DESC: ...").
    The ETA comes from the steps measured (`step(seconds, measured=True)`), divided by `jobs`
    that run at once; reused work (measured=False) counts as done but estimates nothing."""

    def __init__(
        self,
        total: int,
        log=sys.stderr,
        desc: str = "",
        unit: str = "run",
        jobs: int = 1,
        every_s: float = 0.0,
        bar: bool | None = None,
    ):
        self.total, self.done, self.log, self.desc = total, 0, log, desc
        self.jobs, self.every_s = max(1, int(jobs)), every_s
        self.measured: list[float] = []
        self._lock = threading.Lock()
        self._last_line = time.monotonic()
        self.bar = None
        tty = hasattr(log, "isatty") and log.isatty()
        if tty if bar is None else bar:
            from tqdm import tqdm

            self.bar = tqdm(total=total, file=log, desc=desc or None, unit=unit, dynamic_ncols=True, leave=True)
        self.out = self.writer(log)

    def writer(self, file):
        """`file` (a log), or on a terminal a file-like object writing to it through tqdm."""
        return _Writer(self, file) if self.bar is not None else file

    def set_total(self, total: int) -> None:
        """The number of steps, once known (steps may already be done)."""
        with self._lock:
            self.total = total
            if self.bar is not None:
                self.bar.total = total
                self.bar.refresh()

    def eta_s(self) -> float | None:
        if not self.measured:
            return None
        return sum(self.measured) / len(self.measured) * (self.total - self.done) / self.jobs

    def line(self) -> str:
        eta = self.eta_s()
        left = "ETA --" if eta is None else f"ETA {eta / 60:.0f} min" if eta >= 90 else f"ETA {eta:.0f} s"
        pct = 100 * self.done / self.total if self.total else 100
        return f"{self.done}/{self.total} ({pct:.0f} %) · {left}"

    def step(self, seconds: float = 0.0, measured: bool = True, n: int = 1) -> None:
        with self._lock:
            self.done += n
            if measured:
                self.measured.append(seconds)
            if self.bar is not None:
                self.bar.set_postfix_str(self.line().split(" · ")[1], refresh=False)
                self.bar.update(n)
                return
            now = time.monotonic()
            if not self.total or (self.done < self.total and now - self._last_line < self.every_s):
                return
            self._last_line = now
            name = f"progress {self.desc}" if self.desc else "progress"
            print(f"{name}: {self.line()}", file=self.log, flush=True)

    def write(self, text: str, file=None) -> None:
        """A log line to `file` (default: the progress's own): above the bar on a terminal
        (tqdm's writer), else as it is."""
        if self.bar is not None:
            self.bar.write(text, file=file or self.log)
        else:
            print(text, file=file or self.log, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
