"""Snakemake logger plugin ``convrag``: this workflow's terminal (convrag.terminal).

``profiles/default`` enables it (``logger: [convrag]``), so a run in this repository prints one
line per job started and one line of overall progress with an ETA, Snakemake's other messages as
Snakemake writes them, no line longer than 1,000 characters; every job's full block and shell
command stay in Snakemake's log, ``.snakemake/log/<time>.snakemake.log``. A dry-run prints
Snakemake's own plan. ``--logger-convrag-full`` prints Snakemake's own output throughout.

Snakemake finds the plugin by its package name (``snakemake_logger_plugin_*`` on the Python path):
it ships with the ``convrag`` distribution (pyproject's packages), beside the ``convrag`` package.
"""

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    full: bool = field(
        default=False,
        metadata={"help": "Print Snakemake's own output (every job's block and shell command) unchanged."},
    )


_DROPPED = {LogEvent.SHELLCMD, LogEvent.JOB_STARTED}  # the shell line; "Execute N jobs..."
_QUIET_TEXT = ("Select jobs to execute...",)


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        from snakemake.logging import ColorizingTextHandler, DefaultFilter, DefaultFormatter

        from convrag.terminal import RunProgress

        s = self.common_settings
        self.full = bool(getattr(self.settings, "full", False))
        self.dryrun = bool(s.dryrun)
        self.out = ColorizingTextHandler(nocolor=s.nocolor, stream=sys.stdout if s.stdout else sys.stderr)
        self.out.setFormatter(DefaultFormatter(s.quiet, s.show_failed_logs))
        self.addFilter(DefaultFilter(s.quiet, s.debug_dag, s.verbose, s.dryrun, s.printshellcmds))
        self.progress = RunProgress()
        self.last_line = 0.0
        self.told_where = False

    # ---- LogHandlerBase -------------------------------------------------------------------
    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False

    # ---- output -----------------------------------------------------------------------------
    def _write(self, record: logging.LogRecord, text: str) -> None:
        """``text`` as a plain message of ``record``'s level (Snakemake's colours)."""
        line = logging.makeLogRecord({"name": record.name, "levelno": record.levelno,
                                      "levelname": record.levelname, "msg": text, "created": record.created})
        self.out.emit(line)

    def _where(self) -> str:
        """Snakemake's log of this run (the newest under .snakemake/log), where every line is whole."""
        logs = sorted(Path(".snakemake", "log").glob("*.snakemake.log"), key=lambda p: p.stat().st_mtime)
        return str(logs[-1]) if logs else ".snakemake/log"

    def emit(self, record: logging.LogRecord) -> None:
        from convrag.terminal import clip, job_line

        try:
            event = getattr(record, "event", None)
            if self.full or self.dryrun:
                self.out.emit(record)
                return
            p = self.progress
            if event in _DROPPED or (event is None and str(record.msg) in _QUIET_TEXT):
                return
            if event == LogEvent.RESOURCES_INFO and getattr(record, "cores", None):
                p.cores = int(record.cores)
            elif event == LogEvent.RUN_INFO:
                p.plan(getattr(record, "stats", {}) or {})
            if event == LogEvent.JOB_INFO:
                if not self.told_where:
                    self.told_where = True
                    self._write(record, f"One line per job here; each job's inputs, outputs and shell command: "
                                        f"{self._where()}; what a job prints: its log (the path in that file).")
                p.start(record.jobid, record.rule_name, record.created, getattr(record, "threads", 1),
                        getattr(record, "log", []))
                self._write(record, job_line(record.created, record.rule_name, record.jobid,
                                             getattr(record, "wildcards", None), getattr(record, "local", False),
                                             getattr(record, "is_checkpoint", False)))
                return
            if event == LogEvent.JOB_FINISHED:
                p.finish(getattr(record, "job_id", None), record.created)
                return
            if event == LogEvent.JOB_ERROR:
                p.finish(getattr(record, "jobid", None), record.created, ok=False)
            if event == LogEvent.PROGRESS:
                done, total = int(record.done), int(record.total)
                if done < total and record.created - self.last_line < self._every():
                    return
                self.last_line = record.created
                self._write(record, p.line(done, total, record.created))
                return
            text = self.out.format(record)
            if text and text != "None":
                self._write(record, clip(text, where=self._where()))
        except Exception:
            self.handleError(record)

    @staticmethod
    def _every() -> float:
        from convrag.terminal import PROGRESS_EVERY_S

        return PROGRESS_EVERY_S
