"""Test support: a fault-injecting OpenAI-compatible chat server, and a tiny simulate job.

``FaultServer`` is the project's own stand-in for an OpenAI-compatible endpoint (stdlib
``http.server`` on 127.0.0.1, a free port, served from a daemon thread). It answers
``POST /v1/chat/completions`` from a script of faults, then from a default:

    ok            200 with a deterministic completion ending in "Answer: X" (``reply``)
    401           authentication failed (not retried by the client)
    429           rate limited, with a ``Retry-After`` header (``retry_after`` seconds)
    500           server error
    timeout       sleeps ``timeout_sleep_s`` (longer than the client's timeout), then 200
    invalid_json  200 whose body is not JSON
    no_choices    200 with a JSON completion that has no ``choices`` key
    empty_choices 200 with ``"choices": []``

The request count is bounded (``max_requests``): past it the server answers 400 (which the
client does not retry) and counts ``overflow``, so a runaway retry loop ends quickly and a
test can assert it never happened. Every request is recorded (``hits``: arrival time,
fault served, parsed body, headers), so tests count attempts and measure backoff gaps.
With ``echo_auth=True`` error bodies quote the request's Authorization header, as some
gateways do ("invalid key: Bearer ..."), to test that the client scrubs the key.

Why here and not in the package: it exists only to test the package's openai backend; the
package ships no test servers.

The second half builds the inputs of one small ``convrag lic-rag simulate`` job (a small mini
world, its questions, a BM25 index, shard sets from the world's own decompositions and
short prompts) and runs the job as a subprocess, as the ``simulate`` rule does.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

FAULTS = ("ok", "401", "429", "500", "timeout", "invalid_json", "no_choices", "empty_choices")
CHAT_PATH = "/v1/chat/completions"


def default_reply(body: dict) -> str:
    """Deterministic text per request (a digest of its messages and seed), ending in 'Answer: X'."""
    ident = {"messages": body.get("messages"), "seed": body.get("seed")}
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:8]
    return f"Reply {digest} from the fake server.\nAnswer: X"


@dataclass
class Hit:
    t: float  # time.perf_counter() at arrival
    path: str
    fault: str  # what was served ("overflow" past max_requests)
    body: dict | None
    headers: dict[str, str] = field(default_factory=dict)


class FaultServer:
    def __init__(self, script=(), default: str = "ok", *, reply: Callable[[dict], str] = default_reply,
                 retry_after: float = 1.0, timeout_sleep_s: float = 5.0, max_requests: int = 100,
                 echo_auth: bool = False):
        for f in [*script, default]:
            if f not in FAULTS:
                raise ValueError(f"unknown fault {f!r}; expected one of {FAULTS}")
        self.script, self.default, self.reply = list(script), default, reply
        self.retry_after, self.timeout_sleep_s = retry_after, timeout_sleep_s
        self.max_requests, self.echo_auth = max_requests, echo_auth
        self.hits: list[Hit] = []
        self.overflow = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, status: int, payload, headers: dict | None = None) -> None:
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(raw)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout fault): nothing to answer

            def do_GET(self):
                self._send(404, {"error": {"message": f"only POST {CHAT_PATH} is served"}})

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    body = None
                headers = {k.lower(): v for k, v in self.headers.items()}
                with outer._lock:
                    if self.path != CHAT_PATH:
                        fault = "not_found"
                    elif len(outer.hits) >= outer.max_requests:
                        fault = "overflow"
                        outer.overflow += 1
                    else:
                        fault = outer.script.pop(0) if outer.script else outer.default
                    outer.hits.append(Hit(time.perf_counter(), self.path, fault, body, headers))
                outer._serve(self, fault, body, headers)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda request, client_address: None  # no tracebacks on broken pipes
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()

    # -- answers -----------------------------------------------------------------------
    def _error(self, message: str, headers: dict) -> dict:
        if self.echo_auth:
            message += f" (request sent authorization: {headers.get('authorization')})"
        return {"error": {"message": message, "type": "fault_injection"}}

    def completion(self, body: dict) -> dict:
        text = self.reply(body)
        prompt_words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
        return {"id": "chatcmpl-fault", "object": "chat.completion", "created": 0,
                "model": body.get("model", "fake"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "stop", "logprobs": None}],
                "usage": {"prompt_tokens": prompt_words, "completion_tokens": len(text.split()),
                          "total_tokens": prompt_words + len(text.split())}}

    def _serve(self, h, fault: str, body, headers: dict) -> None:
        if fault == "not_found":
            return h._send(404, self._error(f"only POST {CHAT_PATH} is served", headers))
        if fault == "overflow":
            return h._send(400, self._error(f"fault server: request budget of {self.max_requests} exhausted",
                                            headers))
        if body is None:
            return h._send(400, self._error("request body is not JSON", headers))
        if fault == "401":
            return h._send(401, self._error("Incorrect API key provided", headers))
        if fault == "429":
            return h._send(429, self._error("rate limited", headers), {"retry-after": f"{self.retry_after:g}"})
        if fault == "500":
            return h._send(500, self._error("internal server error", headers))
        if fault == "invalid_json":
            return h._send(200, b'{"id": "chatcmpl-broken", "choices": [')
        if fault == "no_choices":
            return h._send(200, {"id": "chatcmpl-nochoices", "object": "chat.completion", "created": 0,
                                 "model": body.get("model", "fake")})
        if fault == "empty_choices":
            return h._send(200, {"id": "chatcmpl-empty", "object": "chat.completion", "created": 0,
                                 "model": body.get("model", "fake"), "choices": []})
        if fault == "timeout":
            if self._stop.wait(self.timeout_sleep_s):
                return  # server closing
        return h._send(200, self.completion(body))

    # -- inspection and life cycle -------------------------------------------------------
    @property
    def faults_served(self) -> list[str]:
        with self._lock:
            return [h.fault for h in self.hits]

    def set_default(self, fault: str) -> None:
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}")
        with self._lock:
            self.default = fault

    def close(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---- a tiny simulate job -------------------------------------------------------------------

MINI_WORLD = {"kind": "miniworld", "seed": 13,
              "spec": {"n_people": 12, "n_places": 6, "n_organisations": 5, "n_works": 6, "n_distractors": 4,
                       "questions": {"2": 2, "3": 1}, "comparison_share": 0.0}}
BM25_PARAMS = {"backend": "bm25s", "k1": 1.5, "b": 0.75}
# Short prompts (no worked examples): the tiny model's prompt fill dominates CPU time.
MINI_PROMPTS = {
    "assistant_system": "Answer briefly. End with a line 'Answer: <short answer>'.",
    "examples": [],
    "passages_header": "Passages:",
    "passage": "[{rank}] {title}: {text}",
    "question_header": "Message:",
    "concat_intro": "Here is everything about my question:",
    "nudge": "Please give your final answer.",
    "user_system": "Pick a clue and rewrite it as a short message: '<number>: <message>'.",
    "user": "{history}\nClues:\n{remaining}\nMessage:",
    "recap_intro": "All I said:",
    "recap_outro": "Please answer.",
    "snowball_intro": "So far:",
    "snowball_new": "Also:",
}
MINI_SETTINGS = {"runs": 2, "chunk_size": 50, "top_k": 1, "recall_k": 1, "seed": 0, "max_extra_turns": 0,
                 "assistant": {"temperature": 0.7, "top_p": 0.95, "max_tokens": 12, "stop": ["\n\n"]},
                 "user_simulator": {"temperature": 0.7, "max_tokens": 12, "stop": ["\n"]}}


def build_mini_inputs(root: Path) -> dict[str, Path]:
    """corpus, questions (3: two 2-hop, one 3-hop), BM25 index, shard sets and prompts under
    ``root``, made by the project's own stage commands (run in-process: same code, no
    interpreter start-up)."""
    import yaml

    from convrag.cli import main
    from convrag.records import Question, ShardSet, read_records, write_records
    from convrag.sharding import check_shards

    root = Path(root)
    p = {"corpus_dir": root / "corpus", "questions": root / "questions.jsonl", "index": root / "index",
         "shards": root / "shards.jsonl", "prompts": root / "prompts.yaml"}
    p["corpus"] = p["corpus_dir"] / "corpus.jsonl"
    steps = [
        ["prepare-corpus", "--name", "mw", "--spec", json.dumps(MINI_WORLD), "--out-dir", str(p["corpus_dir"])],
        ["select-questions", "--dataset", "mw", "--spec", json.dumps({"n_questions": 3}),
         "--questions", str(p["corpus_dir"] / "questions_all.jsonl"), "--out", str(p["questions"])],
        ["build-index", "--retriever", "bm25", "--params", json.dumps(BM25_PARAMS),
         "--corpus", str(p["corpus"]), "--out-dir", str(p["index"])],
    ]
    for argv in steps:
        assert main(argv) == 0, argv
    # Shard sets from the mini world's own decompositions (what `sharding.fallback:
    # decomposition` records), so building inputs costs no model call.
    qs = read_records(p["questions"], Question)
    assert len(qs) == 3 and all(len(q.decomposition) >= 2 for q in qs)
    write_records(p["shards"], [
        ShardSet(qid=q.qid, shards=[{"shard_id": i, "text": t} for i, t in enumerate(q.decomposition, 1)],
                 checks=check_shards(q, q.decomposition), passed=True, method="decomposition") for q in qs])
    p["prompts"].write_text(yaml.safe_dump(MINI_PROMPTS))
    return p


def convrag_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "convrag"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "convrag.cli"]


def simulate_argv(inputs: dict[str, Path], *, model: str, registry: Path, cache: Path, out_dir: Path,
                  condition: str = "FULL", policy: str = "none", settings: dict | None = None,
                  threads: int = 1) -> list[str]:
    """The simulate rule's command line for chunk 0 of the mini job (one cell): conversations
    go to ``out_dir/<condition>_<policy>/chunk0.jsonl``, accounting to ``out_dir/chunk0.accounting.json``."""
    return convrag_cmd() + [
        "lic-rag", "simulate", "--questions", str(inputs["questions"]), "--shards", str(inputs["shards"]),
        "--corpus", str(inputs["corpus"]), "--index-dir", str(inputs["index"]), "--retriever", "bm25",
        "--retriever-name", "bm25", "--retriever-params", json.dumps(BM25_PARAMS),
        "--prompts", str(inputs["prompts"]), "--dataset", "mw", "--model", model, "--user-model", model,
        "--cells", f"{condition}:{policy}", "--chunk", "0",
        "--settings", json.dumps(settings or MINI_SETTINGS), "--registry", str(registry), "--cache", str(cache),
        "--threads", str(threads), "--out-dir", str(out_dir),
        "--accounting", str(out_dir / "chunk0.accounting.json"),
    ]


def run_logged(argv: list[str], log: Path, env: dict | None = None, timeout: float = 300) -> tuple[int, str]:
    """Run ``argv`` with stderr to ``log`` (as the rule's ``2> {log}``); returns (rc, stdout)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as err:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=err, env=env or dict(os.environ),
                              timeout=timeout)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def files_under(path: Path) -> list[Path]:
    """Every file below ``path`` (hidden ones included); [] when it does not exist."""
    path = Path(path)
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.exists() else []

