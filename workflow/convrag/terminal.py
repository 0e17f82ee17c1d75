"""The terminal of a Snakemake run of this workflow: short lines and one line of progress with an ETA.

Snakemake prints every job as a block (inputs, outputs, reason, resources) and, with
``printshellcmds``, its shell command; the shell lines of this workflow carry JSON arguments (a
47-second rerun printed 184 KB, its longest line 17,641 characters). The logger plugin
``convrag`` (package ``snakemake_logger_plugin_convrag``, enabled by ``profiles/default``) writes
instead, for a run (a dry-run keeps Snakemake's own output, the plan):

- one line per job started, ``[12:00:05] localrule study_table: job 12, study=coral, target=...``
  (the ``rule X:`` words Snakemake's blocks open with, which scripts count);
- at most every ``PROGRESS_EVERY_S`` seconds, and when the last step is done, one line of overall
  progress, ``[12:03:10] 57 of 207 steps (28%) done in 0:03:05, ETA ~0:07:40; running:
  lic_rag_simulate 0:01:12 left, build_index`` (``RunProgress``);
- Snakemake's other messages as Snakemake writes them (errors with the failing job's log, as
  ``show-failed-logs`` asks), no line longer than ``LINE_LIMIT`` characters (``clip``).

Every job's full block and shell command stay in Snakemake's own log,
``.snakemake/log/<time>.snakemake.log``; what a job prints goes to its log under
``<results>/logs/``, where the long stages write ``[progress]`` lines (convrag.progress) that the
ETA reads, as ``convrag status`` does (convrag.status).

This module has the plugin's logic without Snakemake objects (records are read as plain
attributes), so that it can be tested alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from convrag.progress import hms

LINE_LIMIT = 1000  # characters of one terminal line at most
PROGRESS_EVERY_S = 20.0  # seconds between two progress lines at least (the last step is always shown)
RUNNING_SHOWN = 3  # running jobs named in a progress line


def clip(text: str, limit: int = LINE_LIMIT, where: str = "") -> str:
    """``text`` with every line cut to ``limit`` characters, the cut saying how much is left out
    and where the whole line is (``where``: Snakemake's log of the run)."""
    out = []
    for line in text.split("\n"):
        if len(line) > limit:
            note = f" ... ({len(line) - limit + 200:,} more characters" + (f"; in full in {where})" if where else ")")
            line = line[: limit - 200] + note
        out.append(line)
    return "\n".join(out)


def clock_time(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def job_line(t: float, rule: str, jobid, wildcards: dict | None, local: bool = False, checkpoint: bool = False,
             limit: int = 240) -> str:
    """One line for a job that starts (Snakemake's ``[local]rule X:`` words, then the job)."""
    kind = ("local" if local else "") + ("checkpoint" if checkpoint else "rule")
    wc = ", ".join(f"{k}={v}" for k, v in (wildcards or {}).items())
    return clip(f"[{clock_time(t)}] {kind} {rule}: job {jobid}" + (f", {wc}" if wc else ""), limit)


TRUSTED_SHARE = 0.1  # a task's ETA counts once this share of its items is done


def job_log_eta(logs, now: float) -> float | None:
    """Seconds left of a running job from the ``[progress]`` lines of its log (the largest ETA of
    its open tasks, as convrag.status computes it); None without such a line. A task with under
    ``TRUSTED_SHARE`` of its items done gives none: one conversation of 48 after 150 s says two
    hours, while a batch finishes most of its items together at the end."""
    from convrag.status import read_tasks

    etas = []
    for log in logs or []:
        p = Path(str(log).split(" ")[0])
        if not p.is_file():
            continue
        try:
            tasks = read_tasks(p)
        except OSError:
            continue
        etas += [e for t in tasks if not t.finished and t.total and t.done >= TRUSTED_SHARE * t.total
                 and (e := t.eta(now)) is not None]
    return max(etas) if etas else None


@dataclass
class Running:
    rule: str
    start: float
    threads: int
    logs: list


@dataclass
class RunProgress:
    """Jobs started and finished, and the ETA of the run from them.

    The ETA: the jobs not yet started, per rule (Snakemake's job stats less those started), take
    the mean time of that rule's finished jobs (the mean of all finished jobs for a rule with none
    finished yet), times their threads; a running job takes what its log's ``[progress]`` lines
    leave (else its rule's mean less the time it has run); the sum of that work is spread over the
    cores, and the run cannot end before its longest running job."""

    cores: int = 1
    stats: dict = field(default_factory=dict)
    running: dict = field(default_factory=dict)
    durations: dict = field(default_factory=dict)  # rule -> [seconds of each finished job]
    threads: dict = field(default_factory=dict)  # rule -> threads of its last job
    started: dict = field(default_factory=dict)  # rule -> jobs started
    first: float | None = None
    log_eta: object = job_log_eta

    def plan(self, stats: dict) -> None:
        self.stats = {k: int(v) for k, v in (stats or {}).items() if k != "total"}

    def start(self, jobid, rule: str, t: float, threads: int = 1, logs=()) -> None:
        self.first = t if self.first is None else self.first
        self.running[jobid] = Running(rule, t, max(1, int(threads or 1)), list(logs or []))
        self.threads[rule] = max(1, int(threads or 1))
        self.started[rule] = self.started.get(rule, 0) + 1

    def finish(self, jobid, t: float, ok: bool = True) -> None:
        job = self.running.pop(jobid, None)
        if job is not None and ok:
            self.durations.setdefault(job.rule, []).append(max(0.0, t - job.start))

    def _mean(self, rule: str) -> float | None:
        own = self.durations.get(rule)
        if own:
            return sum(own) / len(own)
        every = [d for ds in self.durations.values() for d in ds]
        return sum(every) / len(every) if every else None

    def job_left(self, job: Running, now: float) -> float | None:
        from_log = self.log_eta(job.logs, now)
        if from_log is not None:
            return from_log
        mean = self._mean(job.rule)
        return None if mean is None else max(0.0, mean - (now - job.start))

    def eta(self, now: float) -> float | None:
        """Seconds until the run ends (None before any job finished)."""
        if not any(self.durations.values()):
            return None
        work, longest = 0.0, 0.0
        for rule, n in self.stats.items():
            pending = n - self.started.get(rule, 0)
            if pending > 0:
                work += pending * (self._mean(rule) or 0.0) * min(self.threads.get(rule, 1), self.cores)
        for job in self.running.values():
            left = self.job_left(job, now) or 0.0
            work += left * min(job.threads, self.cores)
            longest = max(longest, left)
        return max(longest, work / max(1, self.cores))

    def line(self, done: int, total: int, now: float) -> str:
        pct = f"{100 * done / total:.0f}%" if total else "100%"
        text = f"[{clock_time(now)}] {done} of {total} steps ({pct}) done"
        if self.first is not None:
            text += f" in {hms(now - self.first)}"
        if done < total:
            eta = self.eta(now)
            text += ", ETA " + ("~" + hms(eta) if eta is not None else "after the first job ends")
        if self.running and done < total:
            jobs = sorted(self.running.values(), key=lambda j: j.start)
            shown = []
            for job in jobs[:RUNNING_SHOWN]:
                left = self.log_eta(job.logs, now)
                shown.append(job.rule + (f" {hms(left)} left" if left is not None else ""))
            more = len(jobs) - len(shown)
            text += "; running: " + ", ".join(shown) + (f" and {more} more" if more > 0 else "")
        return clip(text, 400)
