"""The openai backend and whole `convrag lic-rag simulate` jobs against a fault-injecting server.

The server (tests/openai_fault_server.py) answers 429 with Retry-After, 500, timeouts and
malformed bodies before good answers. Proven here: the backend retries each fault with
backoff and succeeds (attempts counted, Retry-After honoured); it gives up after exactly
``max_retries + 1`` attempts naming the fault; a simulate job under a permanent failure
exits non-zero, names the model and the failure on stderr and leaves no output file; a
failed job keeps the answers it paid for and its rerun pays only for the rest; with a
healthy server the same job succeeds with the server's answers and exact accounting.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from convrag.errors import ModelError
from convrag.llm.backends.openai_backend import OpenAIBackend
from convrag.llm.registry import parse_registry
from convrag.llm.types import Request, Sampling
from openai_fault_server import (MINI_SETTINGS, FaultServer, build_mini_inputs, default_reply, files_under,
                                 run_logged, simulate_argv)

KEY_ENV = "CONVRAG_FAULT_TEST_KEY"
KEY = "sk-fault-test-0000"
MODEL = "fake-gpt"
MSG = [{"role": "user", "content": "Where was Tolo Vanes born?"}]


@pytest.fixture(autouse=True)
def key_env(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture
def server():
    made = []

    def make(*args, **kw):
        s = FaultServer(*args, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def _entry(url, **over):
    entry = {"backend": "openai", "api_model": "fake-model", "base_url": url, "api_key_env": KEY_ENV,
             "max_retries": 2, "timeout_s": 1.0, "concurrency": 2, "batch_size": 2, **over}
    return entry


def _post(url, payload=b'{"model": "m", "messages": []}', timeout=5.0):
    req = urllib.request.Request(url, data=payload, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


# ---- the server itself --------------------------------------------------------------------


def test_fault_server_serves_the_script_then_the_default_within_its_budget(server):
    srv = server(["429", "500", "invalid_json", "no_choices", "empty_choices", "timeout"], default="ok",
                 retry_after=2.5, timeout_sleep_s=1.0, max_requests=8)
    chat = srv.url + "/chat/completions"
    status, headers, body = _post(chat)
    assert status == 429 and {k.lower(): v for k, v in headers.items()}["retry-after"] == "2.5"
    assert _post(chat)[0] == 500
    status, _, body = _post(chat)
    assert status == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)
    status, _, body = _post(chat)
    assert status == 200 and "choices" not in json.loads(body)
    assert json.loads(_post(chat)[2])["choices"] == []
    with pytest.raises(OSError):  # timeout fault: nothing within the client's 0.3 s
        _post(chat, timeout=0.3)
    status, _, body = _post(chat, json.dumps({"model": "m", "messages": MSG}).encode())
    assert status == 200
    text = json.loads(body)["choices"][0]["message"]["content"]
    assert text == default_reply({"messages": MSG}) and text.endswith("\nAnswer: X")
    assert text != default_reply({"messages": MSG, "seed": 1})  # the seed (the run) enters the reply
    assert _post(srv.url + "/completions")[0] == 404  # only chat completions are served
    assert srv.overflow == 0
    assert _post(chat)[0] == 400 and srv.overflow == 1  # past max_requests: a non-retryable 400
    assert srv.faults_served == ["429", "500", "invalid_json", "no_choices", "empty_choices", "timeout", "ok",
                                 "not_found", "overflow"]
    with pytest.raises(ValueError, match="unknown fault"):
        FaultServer(["503"])


# ---- the backend --------------------------------------------------------------------------


def test_backend_retries_every_fault_with_backoff_and_succeeds(server, caplog):
    script = ["429", "500", "timeout", "invalid_json", "no_choices", "empty_choices"]
    srv = server(script, retry_after=0.6, timeout_sleep_s=3.0)
    spec = parse_registry({MODEL: _entry(srv.url, max_retries=6, timeout_s=0.4)})[MODEL]
    base = 0.02
    be = OpenAIBackend(spec, backoff_base_s=base, backoff_cap_s=1.0)
    req = Request(MSG, sampling=Sampling(temperature=0.5, max_tokens=9), seed=3, sample_index=1)
    with caplog.at_level(logging.WARNING, logger="convrag.llm.backends.openai_backend"):
        (out,) = be.generate([req])
    assert out.text == default_reply(srv.hits[-1].body) and out.finish_reason == "stop" and not out.cached
    assert out.completion_tokens == len(out.text.split()) and out.prompt_tokens == 5
    assert srv.faults_served == script + ["ok"]  # 7 attempts: one per fault, then the good answer
    assert srv.overflow == 0
    assert all(h.body == srv.hits[0].body for h in srv.hits)  # a retry resends the same request
    assert all(h.headers["authorization"] == f"Bearer {KEY}" for h in srv.hits)
    gaps = [b.t - a.t for a, b in zip(srv.hits, srv.hits[1:])]
    assert gaps[0] >= 0.6 - 0.02  # Retry-After honoured (backoff alone would wait <= 0.03 s)
    assert gaps[2] >= 0.4  # the timed-out attempt waited for the client timeout
    for i, g in enumerate(gaps):  # exponential backoff: at least half of base * 2^attempt
        assert g >= 0.5 * base * 2 ** i - 0.005, (i, gaps)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 6
    assert all(w.startswith(f"{MODEL}: attempt {i + 1}/7 failed") for i, w in enumerate(warnings))
    assert "HTTP 429" in warnings[0] and "HTTP 500" in warnings[1] and "APITimeoutError" in warnings[2]


@pytest.mark.parametrize("fault, says", [
    ("429", "HTTP 429 RateLimitError"),
    ("500", "HTTP 500 InternalServerError"),
    ("timeout", "APITimeoutError"),
    ("invalid_json", "JSONDecodeError"),
    ("no_choices", "unusable response body"),
    ("empty_choices", "unusable response body (IndexError"),
])
def test_backend_gives_up_after_max_retries_naming_the_fault(server, fault, says):
    srv = server([], default=fault, retry_after=0.05, timeout_sleep_s=2.0)
    spec = parse_registry({MODEL: _entry(srv.url, max_retries=1, timeout_s=0.3)})[MODEL]
    with pytest.raises(ModelError) as ei:
        OpenAIBackend(spec, backoff_base_s=0.01, backoff_cap_s=0.1).generate([Request(MSG)])
    msg = str(ei.value)
    assert msg.startswith(f"{MODEL}: giving up after 2 attempts at {srv.url}: ") and says in msg
    assert srv.faults_served == [fault, fault]


# ---- whole simulate jobs -------------------------------------------------------------------


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_mini_inputs(tmp_path_factory.mktemp("mini_inputs"))


def write_registry(path: Path, url: str, **over) -> Path:
    path.write_text(yaml.safe_dump({MODEL: _entry(url, **over)}))
    return path


def cache_rows(path: Path) -> int:
    with sqlite3.connect(path) as con:
        return con.execute("SELECT COUNT(*) FROM responses").fetchone()[0]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def simulate(inputs, tmp: Path, url: str, name: str, settings=None, cache: Path | None = None, **registry):
    out = tmp / "results" / name
    argv = simulate_argv(inputs, model=MODEL, registry=write_registry(tmp / f"{name}.models.yaml", url, **registry),
                         cache=cache or tmp / "cache" / "llm.sqlite", out_dir=out, settings=settings)
    rc, stdout = run_logged(argv, tmp / "logs" / f"{name}.log", env={**os.environ, KEY_ENV: KEY}, timeout=120)
    assert stdout == ""  # simulate reports on stderr only
    return rc, (tmp / "logs" / f"{name}.log").read_text(), out


def error_line(log: str) -> str:
    """The CLI's one error message, to the end of its line (the progress bar, drawn with
    carriage returns, may precede it on the same line and redraws itself after it)."""
    tag = "convrag lic-rag simulate: error: "
    lines = [ln[ln.index(tag):] for ln in log.splitlines() if tag in ln]
    assert len(lines) == 1, log
    return lines[0]


ONE_REQUEST = {**MINI_SETTINGS, "runs": 1, "chunk_size": 1}  # chunk 0 = one question, one run


def test_simulate_fails_cleanly_under_permanent_failure(inputs, server, tmp_path):
    # a timeout, a malformed body, then HTTP 500 for good
    srv = server(["timeout", "invalid_json"], default="500", timeout_sleep_s=4.0)
    rc, log, out = simulate(inputs, tmp_path, srv.url, "failing", settings=ONE_REQUEST, timeout_s=0.5)
    assert rc == 2, log
    err = error_line(log)
    assert err.startswith(f"convrag lic-rag simulate: error: {MODEL}: giving up after 3 attempts at {srv.url}: HTTP 500 "), log
    assert "Traceback" not in log
    assert f"{MODEL}: attempt 1/3 failed (APITimeoutError" in log
    assert f"{MODEL}: attempt 2/3 failed (JSONDecodeError" in log
    assert srv.faults_served == ["timeout", "invalid_json", "500"]  # max_retries + 1 attempts, no runaway
    assert files_under(out) == []  # no conversations, no accounting, no temp file
    assert cache_rows(tmp_path / "cache" / "llm.sqlite") == 0


def test_simulate_rejected_request_fails_at_once(inputs, server, tmp_path):
    srv = server([], default="401")
    rc, log, out = simulate(inputs, tmp_path, srv.url, "rejected", settings=ONE_REQUEST)
    assert rc == 2, log
    assert error_line(log) == (f"convrag lic-rag simulate: error: {MODEL}: request rejected (HTTP 401 AuthenticationError: "
                               f"Error code: 401 - Incorrect API key provided)")
    assert srv.faults_served == ["401"]  # a client error is not retried
    assert files_under(out) == []


@pytest.fixture(scope="module")
def healthy_run(inputs, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("healthy")
    with FaultServer([], default="ok") as srv:
        rc, log, out = simulate(inputs, tmp, srv.url, "healthy")
        hits = list(srv.hits)
    return rc, log, out, hits


def test_simulate_succeeds_with_healthy_server(healthy_run):
    rc, log, out, hits = healthy_run
    assert rc == 0, log
    assert sorted(p.name for p in files_under(out)) == ["chunk0.accounting.json", "chunk0.jsonl"]
    convs = read_jsonl(out / "FULL_none" / "chunk0.jsonl")
    assert len(convs) == 3 * 2 and sorted({c["run"] for c in convs}) == [0, 1]
    replies = {default_reply(h.body) for h in hits}
    for c in convs:
        assert c["model"] == MODEL and c["condition"] == "FULL" and len(c["turns"]) == 2
        reply = c["turns"][1]
        assert reply["text"] in replies and reply["text"].endswith("Answer: X")
        assert reply["answer"] == "X" and reply["answered"] is True and len(reply["retrieved"]) == 1
        assert c["final_answer"] == "X" and c["answered"] is True and c["n_unanswered_turns"] == 0
    assert len({c["turns"][1]["text"] for c in convs}) == 6  # every request got its own answer
    assert len(hits) == 6 and all(h.fault == "ok" for h in hits)
    assert all(h.body["model"] == "fake-model" and h.headers["authorization"] == f"Bearer {KEY}" for h in hits)
    assert sorted(h.body["seed"] for h in hits)[0] != sorted(h.body["seed"] for h in hits)[-1]  # runs differ
    acc = json.loads((out / "chunk0.accounting.json").read_text())
    a = acc["assistant"]
    assert (a["requests"], a["unique_requests"], a["calls"], a["batches"], a["cache_hits"]) == (6, 6, 6, 3, 0)
    usage_prompt = sum(sum(len(m["content"].split()) for m in h.body["messages"]) for h in hits)
    assert a["prompt_tokens"] == a["backend_prompt_tokens"] == usage_prompt
    assert acc["job"] == {**acc["job"], "conversations": 6, "questions": 3, "unanswered_turns": 0}
    assert acc["user_simulator"]["requests"] == 0  # FULL: the user simulator (its own accounting) is never asked


def test_failed_job_keeps_paid_answers_and_rerun_pays_only_the_rest(inputs, server, tmp_path, healthy_run):
    # first backend batch (2 requests) answered, then the server breaks for good
    srv = server(["ok", "ok"], default="500")
    cache = tmp_path / "cache" / "llm.sqlite"
    rc, log, out = simulate(inputs, tmp_path, srv.url, "resume", cache=cache, timeout_s=0.5)
    assert rc == 2 and f"{MODEL}: giving up after 3 attempts" in error_line(log), log
    assert files_under(out) == []
    assert cache_rows(cache) == 2
    assert srv.faults_served[:2] == ["ok", "ok"] and 3 <= srv.faults_served.count("500") <= 6
    n_before = len(srv.hits)

    srv.set_default("ok")
    rc, log, out = simulate(inputs, tmp_path, srv.url, "resume", cache=cache)
    assert rc == 0, log
    a = json.loads((out / "chunk0.accounting.json").read_text())["assistant"]
    assert (a["cache_hits"], a["calls"], a["batches"]) == (2, 4, 2)
    assert len(srv.hits) - n_before == 4  # only the unpaid requests reached the server
    assert cache_rows(cache) == 6
    # the same conversations, byte for byte, as the uninterrupted healthy run
    assert (out / "FULL_none" / "chunk0.jsonl").read_bytes() == (healthy_run[2] / "FULL_none" / "chunk0.jsonl").read_bytes()
