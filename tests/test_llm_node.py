"""One loaded model per node (convrag.llm.node, issue 47 item 3): a job's local model is a client
of a long-lived server that the first job starts and later jobs reuse.

The protocol tests run a server in this process with a stand-in backend (step counters, progress,
failures); the tinymodel tests run real `convrag`-style jobs as separate processes with the
packaged SmolLM2 (transformers backend): the second job connects to the first job's server
(same pid, no load of its own) and gets the replies an in-process backend gives; the server
stops by itself when idle and on SIGTERM, its socket removed."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from convrag.errors import ConfigError, ModelError
from convrag.llm import node
from convrag.llm.engine import Engine
from convrag.llm.registry import get_spec, load_registry
from convrag.llm.types import Request, Response, Sampling

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"


def _short_dir() -> Path:
    """A Unix socket path has at most 107 bytes: pytest's tmp_path can be longer."""
    import tempfile
    return Path(tempfile.mkdtemp(prefix="cms-")) / "ms"


@pytest.fixture
def sockets(monkeypatch):
    import shutil
    d = _short_dir()
    monkeypatch.setenv(node.DIR_ENV, str(d))
    monkeypatch.setenv(node.ENV, "node")
    yield d
    shutil.rmtree(d.parent, ignore_errors=True)


def _spec(name=MODEL):
    return get_spec(load_registry(REPO / "config" / "models.yaml"), name)


class Counting:
    """A stand-in local backend: answers 'echo:<last message>', counts prompt tokens as the
    transformers backend does (prefill_tokens, prefill_seconds) and reports progress."""

    builds = 0

    def __init__(self, spec):
        Counting.builds += 1
        self.prefill_tokens, self.prefill_seconds, self.on_progress, self.calls = 0, 0.0, None, []

    def generate(self, requests):
        self.calls.append(len(requests))
        if any(r.messages[-1]["content"] == "fail" for r in requests):
            raise RuntimeError("the stand-in backend failed")
        out = []
        for r in requests:
            n = len(r.messages[-1]["content"].split())
            self.prefill_tokens += n
            self.prefill_seconds += 0.5
            if self.on_progress:
                self.on_progress(1)
            out.append(Response(f"echo:{r.messages[-1]['content']}", n, 2, "stop"))
        return out


def _serve_in_thread(spec, idle_s=30.0):
    path, key = node.socket_path(spec)
    server = node.NodeServer(spec, path, key, idle_s, make=Counting)
    t = threading.Thread(target=server.serve, daemon=True)
    t.start()
    for _ in range(200):
        if path.exists():
            break
        time.sleep(0.02)
    return server, t, path


def _reqs(*texts):
    return [Request(messages=[{"role": "user", "content": x}], sampling=Sampling(max_tokens=4)) for x in texts]


def test_mode_and_settings_are_checked(monkeypatch, tmp_path):
    monkeypatch.delenv(node.ENV, raising=False)
    assert node.mode() == "off" and not node.serves(_spec())
    monkeypatch.setenv(node.ENV, "node")
    assert node.serves(_spec())
    api = get_spec(load_registry(REPO / "config" / "models.yaml"), "gpt-4o-mini")
    assert not node.serves(api)  # API models are never served here
    monkeypatch.setenv(node.ENV, "nodes")
    with pytest.raises(ConfigError, match=r"CONVRAG_MODEL_SERVER='nodes'.*model_server.mode"):
        node.mode()
    monkeypatch.setenv(node.IDLE_ENV, "-3")
    with pytest.raises(ConfigError, match=r"model_server.idle_s"):
        node.idle_seconds()
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    monkeypatch.setenv(node.DIR_ENV, str(loose))
    with pytest.raises(ConfigError, match=r"mode 0700"):
        node.server_dir()


def test_the_key_follows_the_model_gpus_and_allocation(sockets, monkeypatch):
    spec = _spec()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    a, _ = node.socket_path(spec)
    assert node.socket_path(spec)[0] == a and a.parent == sockets and a.name.startswith("smollm2-135m-")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert node.socket_path(spec)[0] != a
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    b = node.socket_path(spec)[0]
    monkeypatch.setenv("SLURM_JOB_ID", "43")
    assert node.socket_path(spec)[0] != b
    import dataclasses
    thinking = dataclasses.replace(spec, chat_template_kwargs={"enable_thinking": False})
    assert node.socket_path(thinking)[0] != node.socket_path(spec)[0]


def test_two_jobs_share_one_backend_with_their_own_counters_and_progress(sockets):
    Counting.builds = 0
    spec = _spec()
    server, t, path = _serve_in_thread(spec)
    try:
        one, two = node.NodeBackend(spec), node.NodeBackend(spec)
        assert Counting.builds == 1 and one.info["pid"] == two.info["pid"] == os.getpid()
        assert (one.info["jobs"], two.info["jobs"]) == (1, 2)
        seen = []
        one.on_progress = seen.append
        got = one.generate(_reqs("a b c", "d e"))
        assert [r.text for r in got] == ["echo:a b c", "echo:d e"] and not any(r.cached for r in got)
        assert seen == [1, 1] and (one.prefill_tokens, one.prefill_seconds) == (5, 1.0)
        two.generate(_reqs("x"))
        # each job counts what its own calls computed; the server's backend saw both batches
        assert (two.prefill_tokens, one.prefill_tokens) == (1, 5) and server.backend.calls == [2, 1]
        # a failing call fails that job's call with the backend's message; the server stays
        with pytest.raises(ModelError, match="the stand-in backend failed"):
            two.generate(_reqs("fail"))
        assert [r.text for r in one.generate(_reqs("again"))] == ["echo:again"]
        # the engine on top: cache-free accounting as with an in-process backend
        eng = Engine(spec, cache=None, backend=two)
        eng.generate(_reqs("p q r", "p q r"))
        assert (eng.accounting.calls, eng.accounting.backend_computed_prompt_tokens) == (1, 3)
        one.close()
        two.close()
    finally:
        server.stopping.set()
        t.join(10)
    assert not path.exists() and server.backend is None


def test_an_idle_server_stops_once_its_last_job_left(sockets):
    spec = _spec()
    server, t, path = _serve_in_thread(spec, idle_s=0.5)
    c = node.NodeBackend(spec)
    time.sleep(1.0)
    assert path.exists(), "a connected job keeps the server"
    c.close()
    t.join(5)
    assert not t.is_alive() and not path.exists()


def test_a_server_that_fails_to_load_names_its_log(sockets, monkeypatch, tmp_path):
    """A registry entry whose weights cannot load: the job's error carries the server's log."""
    import dataclasses
    bad = dataclasses.replace(_spec(), name="broken", weights={"path": str(tmp_path / "no-such-weights")})
    with pytest.raises(ModelError, match=r"broken: the node's model server exited \(1\) before listening; its log"):
        node.NodeBackend(bad, start_timeout_s=120)


# ---- real jobs, real model --------------------------------------------------------------------

JOB = r"""
import json, sys, time
from convrag.llm.engine import EnginePool
from convrag.llm.types import Request, Sampling
pool = EnginePool(sys.argv[1], None)
eng = pool.engine("smollm2-135m", role="assistant")
qs = ["What is the capital of France?", "Name a colour.", "What is 2 + 2?", "Say hello."]
t = time.perf_counter()
out = eng.generate([Request(messages=[{"role": "user", "content": q}], sampling=Sampling(max_tokens=10), seed=1)
                    for q in qs])
info = getattr(eng.backend, "info", None)
print(json.dumps({"texts": [r.text for r in out], "load_s": eng.accounting.load_seconds,
                  "computed": eng.accounting.backend_computed_prompt_tokens, "info": info}))
pool.close()
"""


def _job(env) -> dict:
    out = subprocess.run([sys.executable, "-c", JOB, str(REPO / "config" / "models.yaml")], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _gone(pid: int, path: Path, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return not path.exists()
        time.sleep(0.2)
    return False


@pytest.mark.tinymodel
def test_consecutive_jobs_load_the_model_once_per_node(tmp_path):
    base = {k: v for k, v in os.environ.items() if not k.startswith("CONVRAG_MODEL_SERVER")}
    base[node.DIR_ENV] = str(_short_dir())
    alone = _job(base)  # model_server off: the job loads SmolLM2 itself
    assert alone["info"] is None and alone["load_s"] > 0.2
    env = {**base, node.ENV: "node", node.IDLE_ENV: "3"}
    first, second = _job(env), _job(env)
    # the same replies as in process; the first job computes the prompt tokens an in-process
    # backend computes, the second fewer: the server's prefix store outlived the first job
    assert first["texts"] == second["texts"] == alone["texts"]
    assert first["computed"] == alone["computed"] and second["computed"] < first["computed"]
    # one server: the second job connected to the first job's, which loaded the model once
    assert first["info"]["pid"] == second["info"]["pid"] != os.getpid()
    assert (first["info"]["jobs"], second["info"]["jobs"]) == (1, 2)
    assert second["info"]["load_seconds"] == first["info"]["load_seconds"] > 0.2
    assert second["load_s"] < 0.5 * first["load_s"], (first["load_s"], second["load_s"])
    path = next(Path(base[node.DIR_ENV]).glob("*.sock"))
    # idle for 3 s: it stops by itself, socket removed; its log says so
    assert _gone(first["info"]["pid"], path), "the idle server did not stop"
    log = path.with_suffix(".log").read_text()
    assert "loaded smollm2-135m (transformers)" in log and "idle for 3 s after 2 jobs and 2 calls: stopping" in log
    # a later job starts a fresh one; SIGTERM (the end of an allocation) stops it cleanly
    third = _job({**env, node.IDLE_ENV: "600"})
    assert third["info"]["pid"] != first["info"]["pid"] and third["texts"] == alone["texts"]
    os.kill(third["info"]["pid"], signal.SIGTERM)
    assert _gone(third["info"]["pid"], path), "SIGTERM did not stop the server"
    assert "signal 15: stopping" in path.with_suffix(".log").read_text()
    import shutil
    shutil.rmtree(Path(base[node.DIR_ENV]).parent, ignore_errors=True)


@pytest.mark.tinymodel
def test_an_allocations_launcher_owns_the_server_that_its_jobs_share():
    """Under SLURM the jobs of a group are srun steps of one allocation, and a server a step
    started would end with the step: the allocation's Snakemake holds a Launcher
    ($CONVRAG_MODEL_LAUNCHER) that starts it instead. Here this test process is that Snakemake:
    two jobs (processes of their own) share one server, which is the launcher's child (not the
    first job's), carries the launcher as its run owner, outlives the job that asked for it, and
    stops cleanly when the launcher closes."""
    import shutil

    from convrag import lifeline

    d = _short_dir()
    base = {k: v for k, v in os.environ.items() if not k.startswith("CONVRAG_MODEL_")}
    env = {**base, node.DIR_ENV: str(d), node.ENV: "node", node.IDLE_ENV: "600", "SLURM_JOB_ID": "4242"}
    old = os.environ.get(node.DIR_ENV)
    os.environ[node.DIR_ENV] = str(d)
    try:
        launcher = node.Launcher(node.server_dir() / "launcher-4242.sock").start()
        env[node.LAUNCHER_ENV] = str(launcher.path)
        first = _job(env)
        pid = first["info"]["pid"]
        # the first job has ended; its server runs on, as the launcher's child
        os.kill(pid, 0)
        import psutil
        server = psutil.Process(pid)
        assert server.ppid() == os.getpid(), "the server is not the launcher's child"
        assert server.environ().get(lifeline.ENV) == lifeline.token(os.getpid())
        assert server.environ().get("SLURM_JOB_ID") == "4242"  # the job's environment
        second = _job(env)
        assert second["info"]["pid"] == pid and (first["info"]["jobs"], second["info"]["jobs"]) == (1, 2)
        assert second["texts"] == first["texts"]
        path = next(d.glob(f"{MODEL}-*.sock"))
        launcher.close()
        assert _gone(pid, path), "closing the launcher did not stop its server"
        log = path.with_suffix(".log").read_text()
        assert log.count("loaded smollm2-135m (transformers)") == 1 and "signal 15: stopping" in log
        assert not launcher.path.exists()
        # it starts model servers and nothing else
        launcher = node.Launcher(node.server_dir() / "launcher-4243.sock").start()
        os.environ[node.LAUNCHER_ENV] = str(launcher.path)
        with pytest.raises(ModelError, match="starts convrag.llm.node servers only"):
            node.launch([sys.executable, "-c", "print(1)"], d / "x.log")
        launcher.close()
    finally:
        os.environ.pop(node.LAUNCHER_ENV, None)
        if old is None:
            os.environ.pop(node.DIR_ENV, None)
        else:
            os.environ[node.DIR_ENV] = old
        shutil.rmtree(d.parent, ignore_errors=True)


# ---- the estimate: one load per node ----------------------------------------------------------


def test_the_estimate_counts_one_load_per_jobs_per_load():
    from convrag.cost import Throughput, Tokens, Work, WorkList, summarize

    reg = load_registry(REPO / "config" / "models.yaml")
    m = "llama-3.1-8b-instruct"
    spec = reg[m]
    t = Tokens(requests=100, calls=100, prompt_tokens=100_000, completion_tokens=10_000,
               backend_prompt_tokens=100_000, backend_completion_tokens=10_000)
    work = WorkList([Work("s", "run", f"j{i}", m, "reader", sc, t) for i in range(10) for sc in ("measured", "long")])
    tp = Throughput()
    one, shared = (summarize({"s": work}, reg, tp, jobs_per_load=n) for n in (1, 4))
    load = tp.load_seconds(spec.params_b) * spec.gpus
    gh = lambda s: next(x for x in s["models"] if x["model"] == m)["gpu_hours"]["long"]  # noqa: E731
    # 10 jobs: 10 loads against ceil(10 / 4) = 3
    assert gh(one) - gh(shared) == pytest.approx((10 - math.ceil(10 / 4)) * load / 3600, abs=2e-3)
    # a job's minutes keep its whole load: the limit check never counts on the sharing
    assert one["layout"]["rows"] == shared["layout"]["rows"] and shared["layout"]["jobs_per_load"] == 4
    with pytest.raises(ConfigError, match="jobs_per_load must be >= 1"):
        summarize({"s": work}, reg, tp, jobs_per_load=0)
