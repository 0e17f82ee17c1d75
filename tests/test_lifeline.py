"""A job of a local Snakemake run, and the run's warm server, end with the run (convrag.lifeline).

The unit tests check the owner token (a recycled pid is not the owner) and who claims a run.
The workflow test starts the default workflow for real, waits until its knowledge-graph job
(SmolLM2 OpenIE, tens of seconds) and the warm server run, kills Snakemake with SIGKILL (no
handler of Snakemake's runs) or SIGTERM, and finds no process that belongs to the run a few
seconds later: none whose environment names it as its owner.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from convrag import lifeline

ROOT = Path(__file__).resolve().parents[1]


def _members(owner: str) -> list[psutil.Process]:
    """Every live process whose environment names ``owner`` (jobs' shells, convrag clients,
    the warm server and the children it forked)."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(lifeline.ENV) == owner and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


def _describe(procs) -> str:
    out = []
    for p in procs:
        try:
            out.append(f"{p.pid}: {' '.join(p.cmdline())[:160]}")
        except psutil.Error:
            pass
    return "\n".join(out)


def test_a_token_names_one_process_and_not_a_later_one_with_its_pid():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        tok = lifeline.token(child.pid)
        assert tok is not None and tok.split(":")[1] == str(child.pid)
        assert lifeline.owner_alive(tok)
        host, pid, start = tok.rsplit(":", 2)
        assert not lifeline.owner_alive(f"{host}:{pid}:{float(start) - 100:.2f}")  # same pid, earlier process
        assert lifeline.owner_alive(f"another-host-{host}:{pid}:{start}")  # not ours to judge
    finally:
        child.kill()
        child.wait()
    assert not lifeline.owner_alive(tok)
    assert lifeline.token(child.pid) is None


def test_the_main_process_claims_the_run_and_a_descendant_keeps_its_owner(monkeypatch):
    monkeypatch.setenv(lifeline.ENV, "")  # recorded, so that the claims below are undone
    monkeypatch.delenv(lifeline.ENV)
    lifeline.claim(local_main=True)
    mine = os.environ[lifeline.ENV]
    assert mine == lifeline.token(os.getpid())
    # a child (Snakemake's own subprocess re-reading the Snakefile) keeps the owner it inherited
    code = (f"import os; from convrag import lifeline; lifeline.claim(local_main=True); "
            f"print(os.environ['{lifeline.ENV}'])")
    seen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert seen == mine
    # a cluster job step (not local) drops an owner that is not its ancestor
    monkeypatch.setenv(lifeline.ENV, "elsewhere:1:1.00")
    lifeline.claim(local_main=False)
    assert lifeline.ENV not in os.environ


def test_a_job_started_by_a_dead_run_stops_at_once(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = f"{psutil.Process().create_time()}"  # any value: the pid is gone
    owner = lifeline.token(os.getpid()).rsplit(":", 2)[0] + f":{gone.pid}:{stale}"
    env = {**os.environ, lifeline.ENV: owner}
    r = subprocess.run([sys.executable, "-c", "import sys; from convrag.cli import main; sys.exit(main())",
                        "list"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 143
    assert f"the Snakemake run that started this job (pid {gone.pid}) has ended" in r.stderr


@pytest.mark.workflow
@pytest.mark.tinymodel
# SIGKILL: the jobs' and the server's own watchers; SIGTERM: the Snakefile's handler (SIGINT and
# SIGHUP take the same two paths: checked by hand, 14 s and 11 s)
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_killing_snakemake_ends_its_jobs_and_warm_server_within_seconds(tmp_path, sig):
    log = open(tmp_path / "snakemake.log", "wb")
    target = "results/graphs/miniworld/manifest.json"
    smk = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
         "--cores", "2", target],
        env={k: v for k, v in os.environ.items() if k != lifeline.ENV}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        owner, cmds = None, []
        deadline = time.monotonic() + 240
        while True:
            assert smk.poll() is None, (tmp_path / "snakemake.log").read_text()[-3000:]
            assert time.monotonic() < deadline, ("the graph job and the warm server did not both start in 240 s; "
                                                 f"seen: {cmds if owner else 'no owner'}\n"
                                                 + (tmp_path / "snakemake.log").read_text()[-3000:])
            owner = owner or lifeline.token(smk.pid)
            procs = _members(owner) if owner else []
            cmds = _describe(procs).splitlines()
            if any("convrag.warm" in c for c in cmds) and any("build-graph" in c for c in cmds):
                break
            time.sleep(0.2)
        time.sleep(1.0)  # the job is under way
        os.kill(smk.pid, sig)
        smk.wait(60)
        deadline = time.monotonic() + 8
        left = _members(owner)
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = _members(owner)
        assert not left, f"processes of the killed run still alive after 8 s:\n{_describe(left)}"
        assert not (tmp_path / target).exists()
    finally:
        if smk.poll() is None:
            smk.kill()
        for p in _members(owner) if owner else []:
            p.kill()
