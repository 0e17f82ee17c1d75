"""The local OpenAI-compatible endpoint (convrag.llm.serve) with the real SmolLM2: the
project's own OpenAI backend, pointed at it, gets the same greedy replies the transformers
backend gives directly, label scores from the first token's top log-probs that equal the
direct scores for one-token labels, concurrent requests answered in shared batches, and
clear 400s; it listens on the loopback address only."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request

import pytest

from convrag.errors import ConfigError
from convrag.llm.backends.openai_backend import OpenAIBackend
from convrag.llm.registry import get_spec, load_registry, parse_registry
from convrag.llm.serve import ModelServer
from convrag.llm.types import Request, Sampling

pytestmark = pytest.mark.tinymodel

MODEL = "smollm2-135m"


@pytest.fixture(scope="module")
def served():
    spec = get_spec(load_registry("config/models.yaml"), MODEL)
    server = ModelServer(spec, max_batch=8, wait_s=0.2)
    url = server.start()
    yield server, url
    server.stop()


def _client(url, monkeypatch) -> OpenAIBackend:
    monkeypatch.setenv("LOCAL_KEY", "anything")
    spec = parse_registry({"local": {"backend": "openai", "api_model": MODEL, "base_url": url,
                                     "api_key_env": "LOCAL_KEY", "concurrency": 8}})["local"]
    return OpenAIBackend(spec)


QUESTIONS = ["What is the capital of France?", "Name a colour.", "What is 2 + 2?", "Say hello.",
             "Which animal barks?", "What do bees make?"]


def _requests(labels=None) -> list[Request]:
    return [Request(messages=[{"role": "user", "content": q}], sampling=Sampling(max_tokens=12), seed=3,
                    labels=labels) for q in QUESTIONS]


def test_greedy_replies_equal_the_direct_backend_and_arrive_batched(served, monkeypatch):
    server, url = served
    direct = server._backend.generate(_requests())
    before = server.served
    via_api = _client(url, monkeypatch).generate(_requests())
    assert [r.text for r in via_api] == [r.text for r in direct]
    assert all(r.text.strip() for r in via_api)
    assert [r.prompt_tokens for r in via_api] == [r.prompt_tokens for r in direct]
    assert server.served - before == len(QUESTIONS)


def test_top_logprobs_are_the_models_first_token_distribution(served, monkeypatch):
    """The server's top log-probs are the direct model's: each returned token that is one token
    of its own scores, as a one-token label, the same log p; the client's label scores come from
    them (its approximation sums the tokens that start a label, ' Yes' and 'Yes' alike)."""
    from convrag.llm.backends.openai_backend import label_scores

    server, url = served
    tok = server._backend.tok
    checked = 0
    for q in QUESTIONS[:3]:
        code, body = _post(url, {"model": MODEL, "messages": [{"role": "user", "content": q}], "max_tokens": 1,
                                 "temperature": 0, "logprobs": True, "top_logprobs": 5})
        assert code == 200
        top = [(t["token"], t["logprob"]) for t in body["choices"][0]["logprobs"]["content"][0]["top_logprobs"]]
        assert len(top) == 5 and [lp for _, lp in top] == sorted((lp for _, lp in top), reverse=True)
        assert sum(math.exp(lp) for _, lp in top) <= 1 + 1e-6
        single = [t for t, _ in top if len(tok(t, add_special_tokens=False)["input_ids"]) == 1]
        direct = server._backend.generate([Request(messages=[{"role": "user", "content": q}], labels=tuple(single))])[0]
        for t, lp in top:
            if t in single:
                assert lp == pytest.approx(direct.label_logprobs[t], abs=1e-3), (q, t)
                checked += 1
    assert checked >= 6
    labels = ("Yes", "No")
    via_api = _client(url, monkeypatch).generate(_requests(labels))
    for r, (toks, _) in zip(via_api, server._backend.first_token_logprobs(_requests(labels), 20)):
        # abs 1e-4: the server answers in shared batches, whose padding moves float32 log-probs by ~1e-5
        # (measured 1.4e-5 on a 2-core host); a wrong token or label would be off by far more
        assert r.finish_reason == "label" and r.label_logprobs == pytest.approx(label_scores(toks, labels), abs=1e-4)


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_bad_requests_get_a_400_that_says_why(served):
    _, url = served
    code, body = _post(url, {"model": MODEL, "messages": []})
    assert code == 400 and body["error"]["message"] == "'messages' must be a non-empty list"
    code, body = _post(url, {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "logprobs": True,
                             "top_logprobs": 50})
    assert code == 400 and body["error"]["message"] == "'top_logprobs' must be between 1 and 20"
    code, body = _post(url, {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0})
    assert code == 400 and "max_tokens must be >= 1" in body["error"]["message"]
    with urllib.request.urlopen(url + "/models", timeout=30) as r:
        assert json.loads(r.read())["data"][0]["id"] == MODEL


def test_only_the_loopback_address_and_a_local_model():
    spec = get_spec(load_registry("config/models.yaml"), MODEL)
    with pytest.raises(ConfigError, match="loopback address only, not '0.0.0.0'"):
        ModelServer(spec, host="0.0.0.0")
    api = get_spec(load_registry("config/models.yaml"), "gpt-4o-mini")
    with pytest.raises(ConfigError, match="transformers backend, not 'openai'"):
        ModelServer(api)


def test_the_server_accepts_a_jobs_burst_of_connections_without_syn_drops():
    """A job's OpenAI client opens its `concurrency` connections at once; Python's default
    backlog of 5 drops SYNs past the fifth (the client retries after 1, 3, 7 s, and its 5 s
    connect timeout then reads as "Connection error"): seen in the lic_rag miniature's OpenIE."""
    from convrag.llm.serve import LoopbackHTTPServer

    assert LoopbackHTTPServer.request_queue_size >= 64 and LoopbackHTTPServer.daemon_threads
