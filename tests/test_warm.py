"""Warm start (convrag.warm): a job forked from the run's server behaves as a fresh process
(directory, environment, streams, exit status, thread count), signals reach it, a vanished
client ends it, anything unusual falls back to a cold start, and a real stage writes the same
bytes warm and cold."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from convrag import warm

HERE = Path(__file__).resolve().parent
CONVRAG = [sys.executable, "-c", "import sys; from convrag.cli import main; sys.exit(main())"]


@pytest.fixture
def server(tmp_path):
    """Start ``python -m convrag.warm`` with an entry and preload list; stop it afterwards."""
    procs = []

    def start(entry: str, *preload: str):
        sock = str(tmp_path / f"w{len(procs)}.sock")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
        log = open(tmp_path / f"w{len(procs)}.log", "w")
        proc = subprocess.Popen([sys.executable, "-m", "convrag.warm", sock, "--idle", "120", "--entry", entry,
                                 "--preload", *(preload or ("json",))], env=env, stdout=log, stderr=log)
        procs.append(proc)
        deadline = time.time() + 120
        while not os.path.exists(sock):
            assert proc.poll() is None, (tmp_path / f"w{len(procs) - 1}.log").read_text()
            assert time.time() < deadline, "the warm server did not come up"
            time.sleep(0.1)
        return proc, sock

    yield start
    for p in procs:
        p.terminate()
        p.wait(10)


def _client(sock, *args, cwd, extra_env=None, **kw):
    env = {**os.environ, warm.ENV: sock, **(extra_env or {})}
    return subprocess.run([*CONVRAG, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, **kw)


def _gone(pid: int, within: float) -> bool:
    deadline = time.time() + within
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_the_forked_child_runs_the_job_in_the_clients_place(server, tmp_path):
    proc, sock = server("warm_helpers:report")
    work = tmp_path / "job dir"
    work.mkdir()
    r = _client(sock, "3", "two words", cwd=work, extra_env={"WARM_TEST_MARKER": "m-17"}, input="from stdin")
    assert r.returncode == 3, r.stderr
    seen = json.loads(r.stdout)
    assert seen["ppid"] == proc.pid  # forked by the server, not started by the client
    assert seen["cwd"] == str(work)
    assert seen["argv"] == ["3", "two words"]
    assert seen["marker"] == "m-17"
    assert seen["stdin"] == "from stdin"
    assert r.stderr == "to stderr\n"
    assert _client(sock, cwd=work).returncode == 0


def test_a_system_exit_message_and_status_come_back(server, tmp_path):
    _, sock = server("warm_helpers:leave")
    r = _client(sock, "a", cwd=tmp_path)
    assert r.returncode == 1
    assert "leaving: ['a']" in r.stderr


def test_torch_threads_follow_the_jobs_environment(server, tmp_path):
    _, sock = server("warm_helpers:report", "torch")
    for n in (1, 2):
        r = _client(sock, cwd=tmp_path, extra_env={"OMP_NUM_THREADS": str(n)}, input="")
        assert json.loads(r.stdout)["torch_threads"] == n


@pytest.mark.parametrize("how", ["SIGTERM to the client", "client killed"])
def test_signals_reach_the_child_and_a_vanished_client_ends_it(server, tmp_path, how):
    _, sock = server("warm_helpers:sleep")
    pidfile = tmp_path / "child.pid"
    client = subprocess.Popen([*CONVRAG, str(pidfile)], cwd=tmp_path, env={**os.environ, warm.ENV: sock},
                              stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (pidfile.exists() and pidfile.read_text()):
        assert time.time() < deadline and client.poll() is None
        time.sleep(0.05)
    child = int(pidfile.read_text())
    if how == "SIGTERM to the client":
        client.send_signal(signal.SIGTERM)  # forwarded: the child dies, the client reports it
        assert client.wait(30) == 1
        assert "ended without an exit status" in client.stderr.read()
    else:
        client.kill()
        client.wait(30)
    assert _gone(child, 10), f"child {child} still running"


def test_no_server_or_a_refusal_means_a_cold_start(server, tmp_path, monkeypatch):
    monkeypatch.setenv(warm.ENV, str(tmp_path / "absent.sock"))
    assert warm.delegate(["x"]) is None
    _, sock = server("warm_helpers:report")
    monkeypatch.setenv(warm.ENV, sock)
    real = warm._identity()
    monkeypatch.setattr(warm, "_identity", lambda: {**real, "fingerprint": "code edited since"})
    assert warm.delegate(["x"]) is None
    monkeypatch.setattr(warm, "_identity", lambda: {**real, "prefix": "/another/venv"})
    assert warm.delegate(["x"]) is None


def test_the_forked_child_takes_the_clients_umask(server, tmp_path):
    """The server's umask (and convrag.io's copy of it, read when the server imported it) is not
    the job's: the child writes as the client would have, atomic writes and plain open() alike."""
    mask = os.umask(0)
    os.umask(mask)  # the server's, inherited from this process
    job_mask, want = (0o022, "0o644") if mask == 0o027 else (0o027, "0o640")
    proc, sock = server("warm_helpers:modes", "convrag.io")
    r = _client(sock, str(tmp_path), cwd=tmp_path, preexec_fn=lambda: os.umask(job_mask))
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout)
    assert seen == {"ppid": proc.pid, "umask": job_mask, "atomic.json": want, "plain.txt": want}


def test_fingerprint_changes_when_a_module_changes(tmp_path, monkeypatch):
    before = warm.fingerprint()
    assert warm.fingerprint() == before
    pkg = Path(warm.__file__).parent
    st = os.stat(pkg / "errors.py")
    try:
        os.utime(pkg / "errors.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        assert warm.fingerprint() != before
    finally:
        os.utime(pkg / "errors.py", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert warm.fingerprint() == before


def test_a_real_stage_writes_the_same_bytes_warm_and_cold(server, tmp_path):
    proc, sock = server("convrag.cli:main", "convrag.cli")
    spec = json.dumps({"kind": "miniworld", "seed": 3, "spec": {"n_people": 6, "n_places": 3, "n_organisations": 3,
                                                                 "n_works": 3, "n_distractors": 2,
                                                                 "questions": {"2": 1}}})
    outs = {}
    for mode in ("warm", "cold"):
        (tmp_path / mode).mkdir()
        args = ["prepare-corpus", "--name", "w", "--spec", spec, "--out-dir", "out"]
        r = (_client(sock, *args, cwd=tmp_path / mode) if mode == "warm"
             else subprocess.run([*CONVRAG, *args], cwd=tmp_path / mode, capture_output=True, text=True,
                                 env={k: v for k, v in os.environ.items() if k != warm.ENV}))
        assert r.returncode == 0, r.stderr
        outs[mode] = {p.name: p.read_bytes() for p in sorted((tmp_path / mode / "out").iterdir())}
    assert outs["warm"] == outs["cold"] and set(outs["warm"]) == {"corpus.jsonl", "questions_all.jsonl"}
    assert "convrag prepare-corpus --name" in (tmp_path / "w0.log").read_text()  # served by the server
