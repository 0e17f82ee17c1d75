"""Progress of a long stage that a person can follow: a tqdm bar at a terminal, and in a job's
log (every rule sends stderr to ``<results>/logs/...``) one plain line every few seconds that
``convrag status`` parses into done / total, rate and ETA.

A log line (the bracketed fields are for the parser; the rest is for ``tail -f``)::

    [progress] judge answers: 45/100 req (45%), 4.5 req/s, ETA 0:00:12 [elapsed=10.0 pid=1234 host=n1 time=1733355000.0 state=running]
"""

from __future__ import annotations

import os
import socket
import sys
import time

PREFIX = "[progress]"
INTERVAL_S = 5.0  # between two lines of one task (the first and the last are always written)


def hms(seconds: float) -> str:
    s = int(round(max(seconds, 0.0)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class LogProgress:
    """The tqdm calls the stages use (update, set_postfix, close, ``with``), written as lines."""

    def __init__(self, total: int, desc: str, unit: str = "it", stream=None, interval: float = INTERVAL_S,
                 clock=time.time):
        self.total, self.unit, self.n = int(total), unit, 0
        self.desc = " ".join(str(desc).replace("|", "/").replace("[", "(").replace("]", ")").split())
        self.stream, self.interval, self.clock = stream or sys.stderr, interval, clock
        self.start = self.last = clock()
        self.postfix: dict = {}
        self.closed = False
        self._write("running")

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.clock() - self.last >= self.interval:
            self._write("running")

    def set_postfix(self, **kw) -> None:
        self.postfix = {k: v for k, v in kw.items() if " " not in f"{k}={v}"}

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._write("finished")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def line(self, state: str, now: float) -> str:
        elapsed = now - self.start
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        rate = self.n / elapsed if elapsed > 0 else 0.0
        if state == "finished":
            tail = f"done in {hms(elapsed)}"
        elif rate > 0:
            tail = f"ETA {hms((self.total - self.n) / rate)}"
        else:
            tail = "ETA ?"
        fields = {"elapsed": f"{elapsed:.1f}", "pid": os.getpid(), "host": socket.gethostname(),
                  "time": f"{now:.1f}", "state": state, **self.postfix}
        kv = " ".join(f"{k}={v}" for k, v in fields.items())
        return (f"{PREFIX} {self.desc}: {self.n}/{self.total} {self.unit}{pct}, {rate:.3g} {self.unit}/s, "
                f"{tail} [{kv}]")

    def _write(self, state: str) -> None:
        self.last = now = self.clock()
        try:
            print(self.line(state, now), file=self.stream, flush=True)
        except (OSError, ValueError):
            pass  # a closed or full log must not fail the stage


def progress(total: int, desc: str | None, unit: str = "it", stream=None):
    """A progress counter for ``total`` items: a tqdm bar when stderr is a terminal, log lines
    otherwise (a Snakemake job), nothing when ``desc`` is None."""
    stream = stream or sys.stderr
    if desc is None or _isatty(stream):
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit=unit, disable=desc is None, file=stream)
    return LogProgress(total, desc, unit, stream=stream)


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
