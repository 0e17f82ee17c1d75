"""Progress a person can see (issue 33, item 3): the [progress] lines a long stage writes to its
job's log (convrag.progress) and `convrag status`, which reads them back (convrag.status):
a hand-computed ETA, a real process writing to a log, and the lic_rag conversation runner's lines."""

import io
import os
import subprocess
import sys
import textwrap
import time

from convrag.cli import main
from convrag.progress import LogProgress, hms
from convrag.status import collect, parse_line, read_tasks, render, status


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


def test_log_lines_are_throttled_and_parse_back():
    clock, out = Clock(), io.StringIO()
    bar = LogProgress(120, "judge answers", unit="req", stream=out, interval=5.0, clock=clock)
    clock.t += 2
    bar.update(10)  # within the interval: no line
    clock.t += 4
    bar.update(20)  # 6 s after the first line: one line, 30/120 after 6 s
    bar.set_postfix(turn=3)
    clock.t += 1
    bar.close()
    bar.close()  # twice: one final line
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    first, mid, last = (parse_line(x) for x in lines)
    assert (first.done, first.total, first.elapsed, first.finished) == (0, 120, 0.0, False)
    assert (mid.done, mid.elapsed, mid.time, mid.unit, mid.pid) == (30, 6.0, 1006.0, "req", os.getpid())
    # 30 in 6 s = 5 req/s: the 90 left take 18 s
    assert "30/120 req (25%), 5 req/s, ETA 0:00:18" in lines[1]
    assert last.done == 30 and last.finished and "turn=3" in lines[2] and "done in 0:00:07" in lines[2]


def test_eta_from_known_lines(tmp_path):
    """A log with known lines: 30 of 120 after 60 s is 0.5 conv/s, so 90 left take 180 s at the
    line's time; 20 s later the ETA is 160 s."""
    log = tmp_path / "logs" / "lic_rag" / "simulate" / "chunk0.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        "loading model\n"
        "[progress] bm25 conversations done: 10/120 conv (8%), 0.5 conv/s, ETA 0:03:40 "
        "[elapsed=20.0 pid=999999 host=nodeA time=5000.0 state=running]\n"
        "[progress] rewrite queries: 4/4 req (100%), 2 req/s, done in 0:00:02 "
        "[elapsed=2.0 pid=999999 host=nodeA time=5010.0 state=finished]\n"
        "[progress] bm25 conversations done: 30/120 conv (25%), 0.5 conv/s, ETA 0:03:00 "
        "[elapsed=60.0 pid=999999 host=nodeA time=5040.0 state=running turn=3 active=40]\n")
    tasks = read_tasks(log, "lic_rag/simulate/chunk0.log")
    assert [t.desc for t in tasks] == ["rewrite queries", "bm25 conversations done"]
    conv = tasks[-1]
    assert conv.rate == 0.5 and conv.eta(5040.0) == 180.0 and conv.eta(5060.0) == 160.0
    os.utime(log, (5060.0, 5060.0))
    # another host (a cluster node): running while the log changed within --stale seconds
    rows = collect(tmp_path, now=5060.0, stale_s=120, host="login")
    assert rows == [("lic_rag/simulate/chunk0.log", "running", [conv])]
    table = "\n".join(render(rows, now=5060.0))
    assert "| lic_rag/simulate/chunk0.log | running | bm25 conversations done | 30/120 conv (25%) | 0.5 conv/s " \
           "| 0:01:00 | 0:02:40 | 0:00:20 ago |" in table
    # the same log 10 minutes later: quiet (unfinished, no change), shown only with --all
    assert collect(tmp_path, now=5660.0, stale_s=120, host="login")[0][1] == "quiet"
    # on this host the pid decides: 999999 is not a running convrag process
    assert collect(tmp_path, now=5060.0, host="nodeA")[0][1] == "stopped"
    assert "1 running job(s)" in status(tmp_path, directory=tmp_path, now=5060.0)
    assert "0 running job(s) with progress lines under" in status(tmp_path, directory=tmp_path, now=5660.0)


def test_status_of_a_real_process(tmp_path, capsys):
    """A process that writes through convrag.progress into its log as a Snakemake job does
    (stderr redirected): running while it lives, finished after."""
    log = tmp_path / "res" / "logs" / "answer" / "job.log"
    log.parent.mkdir(parents=True)
    script = tmp_path / "convrag_job.py"  # 'convrag' in the command line, as every job's
    script.write_text(textwrap.dedent("""
        import sys, time
        from convrag.progress import LogProgress
        bar = LogProgress(10, "answers, run 1 of 1", unit="req", interval=0.0)
        bar.update(4)
        sys.stdin.readline()  # wait until the test has looked
        bar.update(6)
        bar.close()
    """))
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stderr=err, text=True)
        try:
            for _ in range(200):
                if "4/10" in log.read_text():
                    break
                time.sleep(0.05)
            assert main(["status", "--results", str(tmp_path / "res"), "--directory", str(tmp_path)]) == 0
            out = capsys.readouterr().out
            assert "1 running job(s)" in out
            assert "| answer/job.log | running | answers, run 1 of 1 | 4/10 req (40%) |" in out
        finally:
            proc.communicate("go\n", timeout=30)
    assert proc.returncode == 0
    main(["status", "--results", str(tmp_path / "res"), "--directory", str(tmp_path), "--all"])
    out = capsys.readouterr().out
    assert "0 running job(s)" in out and "| answer/job.log | finished | answers, run 1 of 1 | 10/10 req (100%) |" in out


def test_snakemake_steps_line(tmp_path):
    d = tmp_path / ".snakemake" / "log"
    d.mkdir(parents=True)
    (d / "2026-12-04T100000.000000.snakemake.log").write_text(
        "Building DAG of jobs...\n3 of 204 steps (1%) done\n[Fri Dec  4]\n17 of 204 steps (8%) done\n")
    assert status(tmp_path / "results", directory=tmp_path).splitlines()[0].startswith(
        "workflow: 17 of 204 steps (8%) done (")


def test_conversation_runner_reports_progress(capsys):
    """The lic_rag simulate stage's runner: one start line and one final line (2 questions x 2 runs)."""
    from test_conversation import _run

    _run([("SHARDED", "history")])
    lines = [parse_line(x) for x in capsys.readouterr().err.splitlines() if x.startswith("[progress]")]
    conv = [t for t in lines if t and t.desc == "bm25 conversations done"]
    assert [(t.done, t.total, t.finished) for t in conv] == [(0, 4, False), (4, 4, True)]


def test_hms():
    assert hms(0) == "0:00:00" and hms(3725.4) == "1:02:05" and hms(-3) == "0:00:00"
