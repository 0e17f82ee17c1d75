"""A local OpenAI-compatible chat endpoint that answers with a registry model.

Why: a paper config gives some roles to API models (GPT-4o-mini, DeepSeek, Claude, GPT-OSS
behind an OpenAI-compatible endpoint). To run such a config in miniature on a laptop, every
one of those calls must still go through the project's OpenAI backend (its request mapping,
retries, label scoring from top log-probs, accounting), only answered by a model that runs
here. This server is that endpoint: ``POST /v1/chat/completions`` on the loopback address,
answered by any registry model with the transformers backend (the shipped SmolLM2).

What it implements of the API is what the project's client sends: ``messages``, ``max_tokens``,
``temperature``, ``top_p``, ``stop``, ``seed``, ``response_format`` (passed on as JSON mode),
and ``logprobs`` with ``top_logprobs`` for a one-token reply (the client's label scoring): the
first token's most probable continuations from one forward pass. Requests that arrive together
are answered in one backend batch. ``GET /v1/models`` lists the one model. Any key is accepted:
the server listens on the loopback address only, for the user's own jobs.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from convrag.errors import ConfigError
from convrag.llm.types import Request, Sampling

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class BadRequest(ValueError):
    """A request body the server cannot answer (a 400 with the message)."""


def parse_body(body: dict) -> tuple[Request, int | None]:
    """The project's Request for a chat-completions body, and ``top_logprobs`` when the body
    asks for the first token's log-probs (else None)."""
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' must be a non-empty list")
    try:
        def given(*keys, default):
            return next((body[k] for k in keys if body.get(k) is not None), default)

        sampling = Sampling(temperature=given("temperature", default=1.0), top_p=given("top_p", default=1.0),
                            max_tokens=given("max_tokens", "max_completion_tokens", default=256),
                            stop=body.get("stop") or ())
        seed = body.get("seed")
        req = Request(messages=[{"role": m["role"], "content": m["content"]} for m in msgs], sampling=sampling,
                      seed=int(seed) if seed is not None else 0,
                      json_mode=(body.get("response_format") or {}).get("type") == "json_object")
    except (KeyError, TypeError, ValueError) as e:
        raise BadRequest(f"unusable request: {e}") from e
    top = None
    if body.get("logprobs"):
        top = int(body.get("top_logprobs") or 1)
        if not 1 <= top <= 20:
            raise BadRequest("'top_logprobs' must be between 1 and 20")
    return req, top


def completion(model: str, text: str, finish: str, prompt_tokens: int, completion_tokens: int,
               top: list[tuple[str, float]] | None = None) -> dict:
    """A chat-completions response body."""
    logprobs = None
    if top is not None:
        first_tok, first_lp = top[0]
        logprobs = {"content": [{"token": first_tok, "logprob": first_lp, "bytes": list(first_tok.encode()),
                                 "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())}
                                                  for t, lp in top]}]}
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                         "finish_reason": finish, "logprobs": logprobs}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


class LoopbackHTTPServer(ThreadingHTTPServer):
    """Python's default listen backlog is 5: a job's client opening its ``concurrency`` (16)
    connections at once had some refused ("Connection error", then a retry after backoff)."""

    request_queue_size = 256
    daemon_threads = True


class ModelServer:
    """``start()`` listens on ``host:port`` (port 0: a free one) and returns the base URL
    (``http://127.0.0.1:<port>/v1``); ``stop()`` ends it. One backend, loaded at start; a
    worker thread answers what is queued in batches of up to ``max_batch``."""

    def __init__(self, spec, host: str = "127.0.0.1", port: int = 0, max_batch: int = 16, wait_s: float = 0.02):
        if host not in LOOPBACK:
            raise ConfigError(f"the local model server listens on the loopback address only, not {host!r}")
        if spec.backend != "transformers":
            raise ConfigError(f"{spec.where('backend')}: the local server runs a model with the transformers "
                              f"backend, not {spec.backend!r}")
        self.spec, self.host, self.port, self.max_batch, self.wait_s = spec, host, port, max_batch, wait_s
        self.jobs: queue.Queue = queue.Queue()
        self.served = 0
        self._httpd = self._worker = self._backend = None
        self._stopping = threading.Event()

    # ---- answering ------------------------------------------------------------------------
    def _answer(self, batch: list) -> None:
        gen = [j for j in batch if j["top"] is None]
        top = [j for j in batch if j["top"] is not None]
        try:
            if gen:
                for j, r in zip(gen, self._backend.generate([j["request"] for j in gen])):
                    j["result"] = completion(self.spec.name, r.text, "length" if r.finish_reason == "length" else "stop",
                                             r.prompt_tokens, r.completion_tokens)
            if top:
                k = max(j["top"] for j in top)
                for j, (toks, n_prompt) in zip(top, self._backend.first_token_logprobs([j["request"] for j in top], k)):
                    j["result"] = completion(self.spec.name, toks[0][0], "length", n_prompt, 1, toks[:j["top"]])
        except Exception as e:  # the model failed: every request of the batch gets a 500
            for j in batch:
                j.setdefault("error", f"{type(e).__name__}: {e}")
        for j in batch:
            self.served += 1
            j["done"].set()

    def _work(self) -> None:
        while not self._stopping.is_set():
            try:
                batch = [self.jobs.get(timeout=0.2)]
            except queue.Empty:
                continue
            deadline = time.monotonic() + self.wait_s
            while len(batch) < self.max_batch:
                try:
                    batch.append(self.jobs.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            self._answer(batch)

    def ask(self, body: dict) -> dict:
        """Answer one request body (the HTTP handler's work, callable directly)."""
        req, top = parse_body(body)
        job = {"request": req, "top": top, "done": threading.Event()}
        self.jobs.put(job)
        job["done"].wait()
        if "error" in job:
            raise RuntimeError(job["error"])
        return job["result"]

    # ---- the HTTP side ---------------------------------------------------------------------
    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):  # quiet: the jobs' own logs say what was asked
                pass

            def _send(self, code: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.spec.name, "object": "model",
                                                                 "owned_by": "convrag"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                    self._send(200, server.ask(body))
                except (BadRequest, json.JSONDecodeError) as e:
                    self._send(400, {"error": {"message": str(e), "type": "invalid_request_error"}})
                except RuntimeError as e:
                    self._send(500, {"error": {"message": str(e), "type": "server_error"}})

        return Handler

    def start(self) -> str:
        from convrag.llm.backends import make_backend

        self._backend = make_backend(self.spec)
        self._worker = threading.Thread(target=self._work, name="model-server-batches", daemon=True)
        self._worker.start()
        self._httpd = LoopbackHTTPServer((self.host, self.port), self._handler())
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, name="model-server-http", daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


def main(argv: list[str] | None = None) -> int:
    """``python -m convrag.llm.serve --model NAME [--registry FILE] [--port N] [--port-file F]``:
    serve until interrupted; the port file (written once listening) tells a script where."""
    import argparse
    import signal

    from convrag.llm.registry import DEFAULT_REGISTRY, get_spec, load_registry

    p = argparse.ArgumentParser(prog="python -m convrag.llm.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="a registry model with the transformers backend")
    p.add_argument("--registry", default=str(DEFAULT_REGISTRY))
    p.add_argument("--host", default="127.0.0.1", help="a loopback address")
    p.add_argument("--port", type=int, default=0, help="0: a free port")
    p.add_argument("--port-file", default=None, help="write the port here once listening")
    a = p.parse_args(argv)
    server = ModelServer(get_spec(load_registry(a.registry), a.model), host=a.host, port=a.port)
    url = server.start()
    if a.port_file:
        from convrag.io import atomic_open

        with atomic_open(a.port_file) as fh:  # whole or absent: a script polling for it never reads half
            fh.write(f"{server.port}\n")
    print(f"serving {a.model} at {url}", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
