"""The terminal of a run (issue 45): the logger plugin ``convrag`` of profiles/default
(workflow/snakemake_logger_plugin_convrag, convrag.terminal) prints one line per job started and a
line of overall progress with an ETA, Snakemake's other messages (errors with the failing job's
log), no line over 1,000 characters; a dry-run keeps Snakemake's plan. Checked on records without
Snakemake, then on a plug-in study run for real in a temporary folder (seconds): a job whose shell
command carries a 20,000-character JSON argument, and a job that fails."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from convrag.config import REPO_ROOT

# ---- without Snakemake ----------------------------------------------------------------


def test_clip_cuts_long_lines_and_says_where_the_rest_is():
    from convrag.terminal import clip

    text = clip("short\n" + "x" * 5000, 1000, where=".snakemake/log/a.snakemake.log")
    short, long = text.split("\n")
    assert short == "short" and len(long) <= 1000 + 80 and "4,200 more characters; in full in .snakemake/log" in long


def test_the_eta_spreads_the_work_left_over_the_cores(tmp_path):
    from convrag.terminal import RunProgress

    p = RunProgress(cores=2, log_eta=lambda logs, now: None)
    p.plan({"prep": 2, "simulate": 4, "table": 10, "total": 16})
    p.start(1, "prep", 0.0)
    p.start(2, "prep", 0.0)
    assert p.eta(5.0) is None and "ETA after the first job ends" in p.line(0, 16, 5.0)
    p.finish(1, 10.0)
    p.finish(2, 10.0)
    p.start(3, "simulate", 10.0, threads=1)
    p.start(4, "simulate", 10.0, threads=1)
    # simulate's mean is not known: every rule takes the mean of finished jobs (10 s); 2 simulate and
    # 10 table jobs wait (120 s of work), the 2 running have 10 s each left: (120 + 20) / 2 cores
    assert p.eta(10.0) == pytest.approx(70.0)
    # simulate took 60 s: the other one has run 60 s (nothing left), 2 wait (60 s each); the tables
    # take the mean of every finished job, (10 + 10 + 60) / 3
    p.finish(3, 70.0)
    assert p.eta(70.0) == pytest.approx((2 * 60 + 10 * 80 / 3) / 2)
    line = p.line(3, 16, 70.0)
    assert re.search(r"\] 3 of 16 steps \(19%\) done in 0:01:10, ETA ~0:03:13; running: simulate$", line), line


def test_a_running_jobs_progress_lines_give_its_time_left(tmp_path):
    """A job whose log has convrag's [progress] lines (convrag.progress) is ETA'd from them, as
    `convrag status` does."""
    from convrag.progress import LogProgress
    from convrag.terminal import RunProgress, job_log_eta

    log = tmp_path / "sim.log"
    now = [1000.0]
    with open(log, "w") as fh:
        bar = LogProgress(100, "simulate", unit="conv", stream=fh, interval=0, clock=lambda: now[0])
        now[0] = 1040.0
        bar.update(40)  # 40 in 40 s: 60 left at 1/s
        fh.flush()
    assert job_log_eta([str(log)], 1040.0) == pytest.approx(60.0)
    early = tmp_path / "early.log"  # 1 of 48 after 150 s: too early to trust (two hours)
    with open(early, "w") as fh:
        now[0] = 1000.0
        bar = LogProgress(48, "pog conversations done", unit="conv", stream=fh, interval=0, clock=lambda: now[0])
        now[0] = 1150.0
        bar.update(1)
    assert job_log_eta([str(early)], 1150.0) is None
    p = RunProgress(cores=1)
    p.plan({"simulate": 1, "total": 1})
    p.start(7, "simulate", 1000.0, logs=[str(log)])
    p.durations["prep"] = [5.0]
    assert p.eta(1040.0) == pytest.approx(60.0)
    assert p.line(0, 1, 1040.0).endswith("ETA ~0:01:00; running: simulate 0:01:00 left")


def _handler(**settings):
    import snakemake_logger_plugin_convrag as plugin
    from snakemake.settings.types import OutputSettings

    out = OutputSettings(printshellcmds=True, show_failed_logs=True, **settings)
    return plugin.LogHandler(out, plugin.LogHandlerSettings())


def _record(msg, level=logging.INFO, created=1000.0, **extra):
    rec = logging.makeLogRecord({"msg": msg, "levelno": level, "levelname": logging.getLevelName(level), **extra})
    rec.created = created
    return rec


def test_the_plugin_writes_a_line_per_job_and_progress(capsys, tmp_path, monkeypatch):
    from snakemake_interface_logger_plugins.common import LogEvent

    monkeypatch.chdir(tmp_path)
    h = _handler()
    job = dict(event=LogEvent.JOB_INFO, jobid=12, rule_name="study_table", local=True, is_checkpoint=False,
               wildcards={"study": "coral", "target": "table2"}, threads=1, log=["results/logs/t.log"],
               input=["x" * 20000], output=["results/coral/tables/table2.csv"], reason="Missing output files")
    for rec in (_record("Provided cores: 2", event=LogEvent.RESOURCES_INFO, cores=2),
                _record("Job stats: ...", event=LogEvent.RUN_INFO, stats={"study_table": 2, "total": 2}),
                _record("Select jobs to execute..."),
                _record("Execute 1 jobs...", event=LogEvent.JOB_STARTED, jobs=[12]),
                _record(" Rule: study_table, Jobid: 12", **job),
                _record("Shell command: convrag target " + "{}" * 9000, event=LogEvent.SHELLCMD),
                _record("Finished jobid: 12", event=LogEvent.JOB_FINISHED, job_id=12, created=1004.0),
                _record(None, event=LogEvent.PROGRESS, done=1, total=2, created=1004.0),
                _record(None, event=LogEvent.PROGRESS, done=2, total=2, created=1005.0)):
        h.handle(rec)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert max(map(len, lines)) < 300 and "Shell command" not in err and "Select jobs" not in err
    assert "Execute 1 jobs" not in err and "xxxxx" not in err
    assert lines[0] == "Provided cores: 2" and "Job stats" in lines[1]
    assert re.fullmatch(r"\[\d\d:\d\d:\d\d\] localrule study_table: job 12, study=coral, target=table2", lines[-3])
    assert "each job's inputs, outputs and shell command" in lines[-4]
    # one study_table job waits, at the 4 s the finished one took, on 2 cores
    assert re.search(r"1 of 2 steps \(50%\) done in 0:00:04, ETA ~0:00:02$", lines[-2]), lines[-2]
    assert re.search(r"2 of 2 steps \(100%\) done in 0:00:05$", lines[-1]), lines[-1]


def test_the_plugin_keeps_snakemakes_plan_in_a_dry_run(capsys):
    from snakemake_interface_logger_plugins.common import LogEvent

    h = _handler(dryrun=True)
    h.handle(_record(" Rule: a, Jobid: 1", event=LogEvent.JOB_INFO, jobid=1, rule_name="a", local=False,
                     is_checkpoint=False, wildcards={}, threads=1, log=[], input=["in.txt"], output=["out.txt"],
                     reason="Missing output files: out.txt", benchmark=None, priority=0, resources={},
                     rule_msg=None, indent=False))
    err = capsys.readouterr().err
    assert "rule a:\n    input: in.txt\n    output: out.txt" in err


# ---- a run through Snakemake ---------------------------------------------------------------------

STUDY = '''
"""A study that only runs jobs: one with a long JSON argument, one that sleeps, one that fails."""
from convrag.studies import Study


class Noisy(Study):
    key = "noisy"
    title = "Jobs for the terminal test"


STUDY = Noisy()
'''

RULES = '''
rule noisy_long:
    output:
        L.study("noisy") + "/long.txt",
    log:
        L.log("noisy/long.log"),
    params:
        spec=jarg({"values": list(range(4000))}),
    shell:
        "echo {params.spec} > {output} 2> {log}"


rule noisy_wait:
    output:
        L.study("noisy") + "/wait_{i}.txt",
    log:
        L.log("noisy/wait_{i}.log"),
    shell:
        "sleep 1; echo {wildcards.i} > {output} 2> {log}"


rule noisy_fail:
    output:
        L.study("noisy") + "/never.txt",
    log:
        L.log("noisy/fail.log"),
    shell:
        "(echo 'the noisy job failed on purpose'; exit 3) > {log} 2>&1"
'''


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    wd = tmp_path_factory.mktemp("noisy")
    home = wd / "plugin" / "noisy"
    home.mkdir(parents=True)
    (home / "__init__.py").write_text(textwrap.dedent(STUDY))
    (home / "rules.smk").write_text(RULES.lstrip())
    (home / "schema.yaml").write_text(yaml.safe_dump({"type": "object"}))
    (wd / "config.yaml").write_text(yaml.safe_dump({"studies": ["noisy"], "study_plugins": [str(home)],
                                                    "warm_start": False, "noisy": {}}))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    base = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO_ROOT / "Snakefile"), "--directory", str(wd),
            "--configfile", str(wd / "config.yaml")]
    ok = subprocess.run(base + ["--cores", "2", "results/noisy/long.txt",
                                *(f"results/noisy/wait_{i}.txt" for i in range(3))],
                        capture_output=True, text=True, env=env, timeout=600)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-3000:]
    failed = subprocess.run(base + ["--cores", "1", "results/noisy/never.txt"], capture_output=True, text=True,
                            env=env, timeout=600)
    assert failed.returncode != 0
    dry = subprocess.run(base + ["-n", "--forceall", "results/noisy/long.txt"], capture_output=True, text=True,
                         env=env, timeout=600)
    assert dry.returncode == 0, dry.stderr[-3000:]
    return wd, ok.stdout + ok.stderr, failed.stdout + failed.stderr, dry.stdout + dry.stderr


@pytest.mark.workflow
def test_a_run_prints_a_line_per_job_and_its_progress(noisy):
    wd, out, _, _ = noisy
    lines = out.splitlines()
    assert max(map(len, lines)) <= 1000 and "Shell command" not in out and "3999" not in out
    assert sum(bool(re.match(r"\[\d\d:\d\d:\d\d\] (?:local)?rule noisy_long: job \d+$", ln)) for ln in lines) == 1
    assert sum(bool(re.match(r"\[\d\d:\d\d:\d\d\] (?:local)?rule noisy_wait: job \d+, i=\d$", ln)) for ln in lines) == 3
    assert re.search(r"^\[\d\d:\d\d:\d\d\] 4 of 4 steps \(100%\) done in \d+:\d\d:\d\d$", out, re.M), out[-2000:]
    # the shell command, whole, in Snakemake's own log of the run, which the terminal names
    logs = list((wd / ".snakemake" / "log").glob("*.snakemake.log"))
    assert any(json.dumps({"values": list(range(4000))}) in p.read_text() for p in logs)
    assert re.search(r"each job's inputs, outputs and shell command: \.snakemake/log/\S+\.snakemake\.log", out)


@pytest.mark.workflow
def test_a_failing_job_shows_its_log(noisy):
    _, _, out, _ = noisy
    assert "Error in rule noisy_fail:" in out and "the noisy job failed on purpose" in out, out[-3000:]
    assert max(map(len, out.splitlines())) <= 1000


@pytest.mark.workflow
def test_a_dry_run_prints_snakemakes_plan(noisy):
    _, _, _, out = noisy
    assert re.search(r"^rule noisy_long:\n    output: results/noisy/long\.txt\n", out, re.M), out[-2000:]
