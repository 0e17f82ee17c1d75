"""The API key never reaches a file: simulate jobs against the fault server with the key set
to a unique sentinel, then the sentinel is searched, as bytes, in everything the jobs left:
results (conversations, accounting), the SQLite cache (with its -wal/-shm files), the logs
(stderr, as the rule's ``2> {log}``) and stdout, of a good job and of failing ones whose
server quotes the key back in its error bodies."""

from __future__ import annotations

import json
import os
import uuid

import pytest
import yaml

from openai_fault_server import FaultServer, build_mini_inputs, files_under, run_logged, simulate_argv

KEY_ENV = "CONVRAG_SECRET_TEST_KEY"
MODEL = "fake-gpt"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_mini_inputs(tmp_path_factory.mktemp("mini_inputs"))


def test_api_key_appears_in_no_output_cache_log_or_error(inputs, tmp_path):
    sentinel = f"sk-sentinel-{uuid.uuid4().hex}"
    env = {**os.environ, KEY_ENV: sentinel}
    work = tmp_path / "job"  # everything the jobs write lives below here
    registry = work / "models.yaml"
    work.mkdir()
    cache = work / "results" / "cache" / "llm.sqlite"
    stdouts, logs = [], {}

    def simulate(srv, name, seed):
        registry.write_text(yaml.safe_dump({MODEL: {
            "backend": "openai", "api_model": "fake-model", "base_url": srv.url, "api_key_env": KEY_ENV,
            "max_retries": 1, "timeout_s": 2.0, "batch_size": 2}}))
        settings = {"runs": 1, "chunk_size": 2, "top_k": 1, "seed": seed, "max_extra_turns": 0,
                    "assistant": {"temperature": 0.7, "max_tokens": 12}}
        argv = simulate_argv(inputs, model=MODEL, registry=registry, cache=cache,
                             out_dir=work / "results" / name, settings=settings)
        assert sentinel not in " ".join(argv)
        logs[name] = work / "logs" / f"{name}.log"
        rc, stdout = run_logged(argv, logs[name], env=env, timeout=120)
        stdouts.append(stdout)
        return rc

    with FaultServer([], default="ok", echo_auth=True) as srv:
        assert simulate(srv, "good", seed=0) == 0, logs["good"].read_text()
        srv.set_default("500")  # retried, then given up: warnings and the final error quote the server
        assert simulate(srv, "error500", seed=1) == 2
        srv.set_default("401")  # rejected at once
        assert simulate(srv, "error401", seed=2) == 2
        hits = list(srv.hits)

    # the key was really sent, and the server really quoted it back in its errors
    faults = [h.fault for h in hits]
    assert {h.headers["authorization"] for h in hits} == {f"Bearer {sentinel}"}
    # (the job stops at the first request that fails for good, so the other one's count varies)
    assert faults[:2] == ["ok", "ok"] and 3 <= faults.count("500") <= 4 and 1 <= faults.count("401") <= 2
    for name in ("error500", "error401"):
        log = logs[name].read_text()
        assert f"convrag lic-rag simulate: error: {MODEL}:" in log and "authorization: Bearer ***" in log, log
    assert "attempt 1/2 failed (HTTP 500" in logs["error500"].read_text()

    files = files_under(work)
    names = {str(p.relative_to(work)) for p in files}
    assert {"results/good/FULL_none/chunk0.jsonl", "results/good/chunk0.accounting.json", "results/cache/llm.sqlite",
            "logs/good.log", "logs/error500.log", "logs/error401.log"} <= names, names
    acc = json.loads((work / "results/good/chunk0.accounting.json").read_text())
    assert acc["assistant"]["calls"] == 2  # the good job really went through the server
    leaked = [str(p) for p in files if sentinel.encode() in p.read_bytes()]
    assert leaked == []
    # parts of the key, as a half-scrubbing gateway or logger might print them
    assert not any(sentinel[-16:].encode() in p.read_bytes() for p in files)
    assert all(sentinel not in s for s in stdouts)
