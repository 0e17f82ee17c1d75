"""`convrag status`: what the running jobs of a workflow are doing, read from their logs.

Every rule writes its job's stderr to ``<results>/logs/<rule path>.log``; the long stages write
``[progress]`` lines there (convrag.progress). For each log this finds the last line of every
task, decides whether the job still runs (its pid on this host, else how recently the log
changed) and gives done / total, the mean rate since the task began and the ETA from now. It
also shows Snakemake's own count (``N of M steps``) from the newest ``.snakemake/log`` file.
"""

from __future__ import annotations

import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from convrag.progress import PREFIX, hms

_LINE = re.compile(re.escape(PREFIX) + r" (?P<desc>.+): (?P<done>\d+)/(?P<total>\d+) (?P<unit>\S+?)[ ,(].*"
                   r"\[(?P<kv>[^\[\]]*)\]\s*$")
_STEPS = re.compile(r"(\d+) of (\d+) steps \((\d+)%\) done")
TAIL_BYTES = 256 * 1024


@dataclass
class Task:
    """The last progress line of one task (desc) in one log."""
    log: str
    desc: str
    done: int
    total: int
    unit: str
    elapsed: float
    time: float
    pid: int
    host: str
    finished: bool

    @property
    def rate(self) -> float | None:
        return self.done / self.elapsed if self.elapsed > 0 and self.done > 0 else None

    def eta(self, now: float) -> float | None:
        """Seconds left from ``now``: the remaining items at the mean rate so far, less the time
        since the line was written."""
        if self.finished:
            return 0.0
        if self.rate is None:
            return None
        return max(0.0, (self.total - self.done) / self.rate - (now - self.time))


def parse_line(line: str, log: str = "") -> Task | None:
    m = _LINE.match(line.strip())
    if not m:
        return None
    kv = dict(x.split("=", 1) for x in m["kv"].split() if "=" in x)
    try:
        return Task(log=log, desc=m["desc"], done=int(m["done"]), total=int(m["total"]), unit=m["unit"],
                    elapsed=float(kv["elapsed"]), time=float(kv["time"]), pid=int(kv["pid"]),
                    host=kv["host"], finished=kv.get("state") == "finished")
    except (KeyError, ValueError):
        return None


def read_tasks(path: Path, log: str = "") -> list[Task]:
    """The last line of each task in the log's tail, in order of their last appearance."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - TAIL_BYTES))
        text = fh.read().decode("utf-8", errors="replace")
    last: dict[str, Task] = {}
    for line in re.split(r"[\r\n]+", text):
        if line.startswith(PREFIX) and (t := parse_line(line, log)):
            last.pop(t.desc, None)
            last[t.desc] = t
    return list(last.values())


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():  # a reused pid is some other program
        try:
            return b"convrag" in cmdline.read_bytes()
        except OSError:
            return True
    return True


def job_state(tasks: list[Task], mtime: float, now: float, stale_s: float, host: str) -> str:
    """running / finished / stopped (this host: is the pid alive?); elsewhere running while the
    log changed within ``stale_s``, else quiet."""
    t = tasks[-1]
    if t.host == host:
        if pid_alive(t.pid):
            return "running"
        return "finished" if all(x.finished for x in tasks) else "stopped"
    if now - mtime <= stale_s:
        return "running"
    return "finished" if all(x.finished for x in tasks) else "quiet"


def collect(results: str | Path, now: float | None = None, stale_s: float = 120.0,
            host: str | None = None) -> list[tuple[str, str, list[Task]]]:
    """(log path under <results>/logs, state, tasks to show) for every log with progress lines."""
    now = time.time() if now is None else now
    host = host or socket.gethostname()
    logs = Path(results) / "logs"
    out = []
    for path in sorted(logs.rglob("*.log")) if logs.is_dir() else []:
        tasks = read_tasks(path, str(path.relative_to(logs)))
        if not tasks:
            continue
        state = job_state(tasks, path.stat().st_mtime, now, stale_s, host)
        open_tasks = [t for t in tasks if not t.finished]
        out.append((str(path.relative_to(logs)), state, open_tasks or tasks[-1:]))
    return out


def snakemake_steps(directory: str | Path) -> tuple[str, str] | None:
    """(the newest Snakemake log, its last "N of M steps (P%) done") or None."""
    logs = sorted((Path(directory) / ".snakemake" / "log").glob("*.snakemake.log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return None
    found = _STEPS.findall(logs[-1].read_text(errors="replace"))
    return str(logs[-1]), (f"{found[-1][0]} of {found[-1][1]} steps ({found[-1][2]}%) done" if found
                           else "no step finished yet")


def render(rows, now: float, show_all: bool = False) -> list[str]:
    lines = ["| job log | state | task | done | rate | elapsed | ETA | updated |", "|---|---|---|---|---|---|---|---|"]
    for log, state, tasks in rows:
        if state != "running" and not show_all:
            continue
        for t in tasks:
            pct = f" ({100 * t.done / t.total:.0f}%)" if t.total else ""
            rate = f"{t.rate:.3g} {t.unit}/s" if t.rate else "-"
            eta = t.eta(now)
            eta_s = "-" if state != "running" and not t.finished else ("?" if eta is None else hms(eta))
            lines.append(f"| {log} | {state} | {t.desc} | {t.done}/{t.total} {t.unit}{pct} | {rate} "
                         f"| {hms(t.elapsed)} | {eta_s} | {hms(now - t.time)} ago |")
    return lines


def status(results: str | Path, directory: str | Path = ".", show_all: bool = False, stale_s: float = 120.0,
           now: float | None = None) -> str:
    now = time.time() if now is None else now
    rows = collect(results, now, stale_s)
    out = []
    steps = snakemake_steps(directory)
    if steps:
        out.append(f"workflow: {steps[1]} ({steps[0]})")
    running = sum(1 for _, s, _ in rows if s == "running")
    shown = rows if show_all else [r for r in rows if r[1] == "running"]
    if not (Path(results) / "logs").is_dir():
        out.append(f"{Path(results) / 'logs'}: no such folder (no job of this results folder has started; "
                   "--results names another)")
        return "\n".join(out)
    out.append(f"{running} running job(s) with progress lines under {Path(results) / 'logs'}"
               + ("" if show_all else f" ({len(rows) - running} other logs: --all)"))
    if shown:
        out += render(rows, now, show_all)
    return "\n".join(out)
