"""OpenAI backend against a tiny OpenAI-compatible server on 127.0.0.1 (stdlib http.server)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from convrag.errors import ModelError
from convrag.llm.backends.openai_backend import OpenAIBackend, label_scores
from convrag.llm.backends.vllm_backend import request_seed
from convrag.llm.cache import LLMCache
from convrag.llm.engine import Engine
from convrag.llm.registry import parse_registry
from convrag.llm.types import Request, Sampling

KEY = "sk-test-SECRET-0123456789"
MSG = [{"role": "user", "content": "hello"}]


def completion(text="hi there", finish="stop", logprobs=None):
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish,
              "logprobs": logprobs}
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice],
            "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}}


class Server:
    """Replies from a script: each item is (status, body) or a callable(body) -> (status, body)."""

    def __init__(self, script, default=None, delay=0.0):
        self.script, self.default, self.delay = list(script), default, delay
        self.bodies, self.headers = [], []
        self.lock = threading.Lock()
        self.active = self.max_active = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with outer.lock:
                    outer.bodies.append(body)
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                    outer.active += 1
                    outer.max_active = max(outer.max_active, outer.active)
                    item = outer.script.pop(0) if outer.script else outer.default
                time.sleep(outer.delay)
                status, payload = item(body) if callable(item) else item
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                with outer.lock:
                    outer.active -= 1
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def make_server():
    servers = []

    def make(*args, **kw):
        s = Server(*args, **kw)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def spec_for(url, **over):
    entry = {"backend": "openai", "api_model": "test-model", "base_url": url, "api_key_env": "TEST_LLM_KEY",
             "max_retries": 3, "timeout_s": 5, "concurrency": 4, **over}
    return parse_registry({"api": entry})["api"]


@pytest.fixture(autouse=True)
def key_env(monkeypatch):
    monkeypatch.setenv("TEST_LLM_KEY", KEY)


def backend(url, **over):
    return OpenAIBackend(spec_for(url, **over), backoff_base_s=0.01, backoff_cap_s=0.05)


def test_retries_429_then_500_then_succeeds(make_server):
    err = {"error": {"message": "slow down", "type": "rate_limit"}}
    srv = make_server([(429, err), (500, {"error": {"message": "boom"}}), (200, completion("Paris."))])
    r = Request(MSG, sampling=Sampling(temperature=0.5, top_p=0.9, max_tokens=7, stop=("\n",)), seed=4,
                sample_index=1, json_mode=True)
    (out,) = backend(srv.url).generate([r])
    assert out.text == "Paris." and out.prompt_tokens == 11 and out.completion_tokens == 4
    assert out.finish_reason == "stop" and not out.cached
    assert len(srv.bodies) == 3
    body = srv.bodies[-1]
    assert body["model"] == "test-model" and body["messages"] == MSG
    assert body["seed"] == request_seed(4, 1) and body["temperature"] == 0.5 and body["top_p"] == 0.9
    assert body["max_tokens"] == 7 and body["stop"] == ["\n"]
    assert body["response_format"] == {"type": "json_object"}
    assert srv.headers[-1]["authorization"] == f"Bearer {KEY}"


def test_malformed_body_is_retried(make_server):
    srv = make_server([(200, b"{not json"), (200, {"choices": []}), (200, completion("ok", finish="length"))])
    (out,) = backend(srv.url).generate([Request(MSG)])
    assert out.text == "ok" and out.finish_reason == "length" and len(srv.bodies) == 3


def test_permanent_failure_raises_model_error(make_server):
    srv = make_server([], default=(503, {"error": {"message": "down"}}))
    with pytest.raises(ModelError, match=r"giving up after 4 attempts.*503") as ei:
        backend(srv.url).generate([Request(MSG)])
    assert len(srv.bodies) == 4
    assert KEY not in str(ei.value)


def test_client_error_is_not_retried_and_key_is_scrubbed(make_server):
    srv = make_server([], default=(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}))
    with pytest.raises(ModelError, match="401") as ei:
        backend(srv.url).generate([Request(MSG)])
    assert len(srv.bodies) == 1
    assert KEY not in str(ei.value) and "***" in str(ei.value)


def test_missing_key_env(monkeypatch):
    monkeypatch.delenv("TEST_LLM_KEY")
    with pytest.raises(ModelError, match="TEST_LLM_KEY"):
        backend("http://127.0.0.1:9/v1")


def test_concurrency_is_bounded_and_order_kept(make_server):
    def echo(body):
        return 200, completion(body["messages"][0]["content"])

    srv = make_server([], default=echo, delay=0.15)
    reqs = [Request([{"role": "user", "content": f"q{i}"}]) for i in range(10)]
    out = backend(srv.url, concurrency=3).generate(reqs)
    assert [r.text for r in out] == [f"q{i}" for i in range(10)]
    assert 2 <= srv.max_active <= 3


def test_label_logprobs_approximation(make_server):
    top = [{"token": "ANS", "logprob": -0.3, "bytes": None}, {"token": "UN", "logprob": -1.5, "bytes": None},
           {"token": " ANSWER", "logprob": -2.0, "bytes": None}, {"token": "The", "logprob": -4.0, "bytes": None}]
    lp = {"content": [{"token": "ANS", "logprob": -0.3, "bytes": None, "top_logprobs": top}]}
    srv = make_server([(200, completion("ANS", logprobs=lp))])
    (out,) = backend(srv.url).generate([Request(MSG, labels=("ANSWERABLE", "UNANSWERABLE", "MAYBE"))])
    body = srv.bodies[0]
    assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 20
    import math
    assert out.label_logprobs["ANSWERABLE"] == pytest.approx(math.log(math.exp(-0.3) + math.exp(-2.0)))
    assert out.label_logprobs["UNANSWERABLE"] == pytest.approx(-1.5)
    assert out.label_logprobs["MAYBE"] == pytest.approx(-4.0)  # absent: smallest seen (upper bound)
    assert out.text == "ANSWERABLE" and out.finish_reason == "label"


def test_label_scores_helper():
    s = label_scores([("Yes", -0.1), (" No", -2.5)], ("Yes", "No"))
    assert s == {"Yes": pytest.approx(-0.1), "No": pytest.approx(-2.5)}


def test_engine_with_openai_backend_caches(make_server, tmp_path):
    srv = make_server([], default=(200, completion("cached answer")))
    spec = spec_for(srv.url)
    reqs = [Request(MSG, seed=s) for s in range(3)]
    e1 = Engine(spec, LLMCache(tmp_path / "c.sqlite"), backend=OpenAIBackend(spec, backoff_base_s=0.01))
    assert [r.text for r in e1.generate(reqs)] == ["cached answer"] * 3
    e2 = Engine(spec, LLMCache(tmp_path / "c.sqlite"))
    out = e2.generate(reqs)
    assert all(r.cached for r in out) and len(srv.bodies) == 3 and not e2.backend_loaded
