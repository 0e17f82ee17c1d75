"""A lic_rag simulate job whose API roles overlap its GPU work (issue 47, item 2).

The whole ``convrag lic-rag simulate`` command runs in-process, as the paper configs run it: a
local (vLLM) assistant, the user simulator, classifier and judge on an API model, over every
condition and both policies. The backends are stand-ins: the "GPU" sleeps a step time that grows
with the batch and refuses two calls at once; the "API" sleeps a fixed latency per call and takes
calls side by side. Both answer each request by a digest of its content, so a conversation does
not depend on which batch carried it.

- The job's wall time (``cmd_simulate``, from reading its inputs to writing its outputs; the
  command line's parsing and the process's first imports are not timed) is within 1.2x of
  max(GPU time, API time), both measured by the fakes (GPU: the sum of its calls; API: the time
  during which at least one API call was in flight), where lockstep pays about their sum.
- ``--overlap off`` (lockstep) writes the same conversations, labels included; also with a graph
  retriever (hipporag2's kind) whose LLM is the API model, retrieving on the API side.
- A failure on a worker thread (user step, judge) fails the job and leaves no output.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from pathlib import Path

import pytest
import yaml

from convrag.config import REPO_ROOT
from convrag.errors import ConvragError, ModelError
from convrag.llm.types import Request, Response
from convrag.records import Passage, Question, ShardSet, write_records
from convrag.retrieval.base import QueryCost, SearchResult

PROMPTS = REPO_ROOT / "resources" / "prompts" / "lic_rag"
ASSISTANT = yaml.safe_load((PROMPTS / "assistant.yaml").read_text())
CELLS = ("FULL:none,CONCAT:none,SHARDED:history,SHARDED:current,RECAP:history,RECAP:current,"
         "SNOWBALL:history,SNOWBALL:current")
N_QUESTIONS, RUNS = 8, 2
# scaled-down step times: GPU step = GPU_BASE + GPU_ROW x rows, API call = API_LATENCY (times a run's
# scale). The API's share is the paper's (issue 47: about 7 minutes of API calls beside 6 of GPU work
# per job, one after the other): lockstep, this job's API calls add up to about 1.1x its GPU time.
GPU_BASE, GPU_ROW, API_LATENCY = 0.06, 0.0012, 0.08
# the timed run: sleeps long enough that the job's own Python work between model calls (prompts,
# cache keys, records: tens of milliseconds per batch on a busy 2-core host) stays small beside them
TIMED_SCALE = 3.0
REGISTRY = f"""
gpu-model:
  backend: vllm
  weights: {{path: /nonexistent/gpu-model}}
  batch_size: 512
  gpus: 1
  params_b: 8.0
api-model:
  backend: openai
  api_model: fake-api
  base_url: http://127.0.0.1:9/v1
  api_key_env: CONVRAG_FAKE_API_KEY
  batch_size: 64
  concurrency: 16
"""


def _digest(*parts) -> int:
    return int(hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:8], 16)


def _marker(i: int, k: int) -> str:
    return f"Zeta{i}x{k}"


def _shards(i: int) -> list[str]:
    n = 4 + i % 3
    return [f"I am looking for the home town of Case{i}."] + \
        [f"Case{i} is linked to {_marker(i, k)}." for k in range(1, n)]


class Meter:
    """What the fakes measured: GPU seconds (calls never overlap) and API call intervals."""

    def __init__(self):
        self.lock = threading.Lock()
        self.gpu_busy = False
        self.gpu_s, self.gpu_batches = 0.0, []
        self.api = []  # (start, end) of every API call
        self.log = []  # (start, end, what, size): the timeline, for a failure's message
        self.fail: dict | None = None  # {"role": ..., "after": n}: that role's n-th call raises
        self.scale = 1.0  # of every sleep
        self.error = ""  # the job's error message

    def timeline(self, start: float) -> str:
        return "\n".join(f"{a - start:7.3f} {b - start:7.3f} {what:10} {n}" for a, b, what, n in sorted(self.log))

    def api_busy_s(self) -> float:
        total, end = 0.0, None
        for a, b in sorted(self.api):
            if end is None or a > end:
                total, end = total + (b - a), b
            elif b > end:
                total, end = total + (b - end), b
        return total


class FakeGPU:
    """The assistant on a GPU: one call at a time, GPU_BASE + GPU_ROW x batch seconds."""

    def __init__(self, meter: Meter):
        self.meter = meter

    def generate(self, requests: list[Request]) -> list[Response]:
        m = self.meter
        with m.lock:
            assert not m.gpu_busy, "two GPU calls at once"
            m.gpu_busy = True
        t0 = time.perf_counter()
        try:
            time.sleep(m.scale * (GPU_BASE + GPU_ROW * len(requests)))
            return [_assistant_reply(r) for r in requests]
        finally:
            with m.lock:
                m.gpu_busy = False
                m.gpu_s += time.perf_counter() - t0
                m.gpu_batches.append(len(requests))
                m.log.append((t0, time.perf_counter(), "gpu", len(requests)))


def _assistant_reply(r: Request) -> Response:
    body = " ".join(m["content"] for m in r.messages[1 + 2 * len(ASSISTANT["examples"]):])
    i = int(re.search(r"\bCase(\d+)\b", body).group(1))
    n, h = len(_shards(i)), _digest(r.to_dict())
    seen = sum(1 for k in range(1, n) if _marker(i, k) in body)
    if seen == n - 1:
        text = "I am not sure yet." if h % 4 == 0 else f"It is Town{i}.\nAnswer: Town{i}"
    else:
        text = ("Could you tell me more?", "Perhaps Paris.\nAnswer: Paris", f"Answer: Town{i + 1}")[h % 3]
    return Response(text=text, prompt_tokens=100, completion_tokens=10, finish_reason="stop")


class FakeAPI:
    """An API model: API_LATENCY seconds per call, calls side by side; replies per role."""

    def __init__(self, meter: Meter):
        self.meter, self.calls = meter, {}

    def generate(self, requests: list[Request]) -> list[Response]:
        role = self._role(requests[0])
        with self.meter.lock:
            self.calls[role] = self.calls.get(role, 0) + 1
            fail = self.meter.fail and self.meter.fail["role"] == role and self.calls[role] > self.meter.fail["after"]
        t0 = time.perf_counter()
        time.sleep(self.meter.scale * API_LATENCY)
        with self.meter.lock:
            self.meter.api.append((t0, time.perf_counter()))
            self.meter.log.append((t0, time.perf_counter(), role, len(requests)))
        if fail:
            raise ModelError(f"api-model: giving up after 1 attempt ({role} call {self.calls[role]})")
        return [Response(text=self._reply(role, r), prompt_tokens=50, completion_tokens=5, finish_reason="stop")
                for r in requests]

    @staticmethod
    def _role(r: Request) -> str:
        system = r.messages[0]["content"]
        if system == ASSISTANT["user_system"]:
            return "user"
        if r.messages[-1]["content"].startswith("retrieve: "):
            return "retriever"
        return "judge" if "Predicted answer:" in r.messages[-1]["content"] else "classifier"

    @staticmethod
    def _reply(role: str, r: Request) -> str:
        h = _digest(r.to_dict())
        if role == "user":  # a remaining clue, picked by the digest, sent verbatim
            body = r.messages[-1]["content"].split("Clues not given yet:\n")[1].split("\nYour reply:")[0]
            clues = [line for line in body.splitlines() if line.strip()]
            return clues[h % len(clues)]
        if role == "retriever":
            return "entities: Case"
        if role == "judge":
            return "CORRECT" if h % 2 else "INCORRECT"
        return ("answer_attempt", "clarification", "hedge")[h % 3]


class FakeRetriever:
    """Fixed hits; with an LLM (a graph retriever's), one LLM request per query, batched."""

    def __init__(self, llm=None):
        self.llm = llm

    def search(self, queries, k):
        costs = [QueryCost() for _ in queries]
        if self.llm is not None:
            resps = self.llm.generate([Request(messages=[{"role": "user", "content": f"retrieve: {q}"}]) for q in queries])
            for c, r in zip(costs, resps):
                c.add([r])
        hits = [[(f"d/{(_digest(q) + j) % 6}", 1.0 / (j + 1)) for j in range(k)] for q in queries]
        return SearchResult(hits, costs)


@pytest.fixture
def job(tmp_path, monkeypatch):
    """Inputs of one paper-shaped simulate job and a runner of it: ``run(name, *extra)`` ->
    (rc, seconds, out_dir, meter)."""
    import convrag.llm.backends as backends
    import convrag.retrieval as retrieval
    from convrag.cli import build_parser

    monkeypatch.setenv("CONVRAG_FAKE_API_KEY", "test")
    for var in ("CONVRAG_LLM_REPLAY", "CONVRAG_LLM_TRACE", "CONVRAG_WARM_SOCKET"):
        monkeypatch.delenv(var, raising=False)
    qs = [Question(qid=f"q{i}", dataset="d", question=f"Where is the home town of Case{i}?",
                   answers=[f"Town{i}"], supporting_doc_ids=["d/0"], hops=2) for i in range(N_QUESTIONS)]
    files = {"questions": tmp_path / "questions.jsonl", "shards": tmp_path / "shards.jsonl",
             "corpus": tmp_path / "corpus.jsonl", "registry": tmp_path / "models.yaml"}
    write_records(files["questions"], qs)
    write_records(files["shards"], [ShardSet(qid=q.qid, shards=[{"shard_id": k + 1, "text": t}
                                                                for k, t in enumerate(_shards(i))],
                                             passed=True, method="test") for i, q in enumerate(qs)])
    write_records(files["corpus"], [Passage(doc_id=f"d/{j}", title=f"T{j}", text=f"passage {j}") for j in range(6)])
    files["registry"].write_text(REGISTRY)
    settings = {"runs": RUNS, "chunk_size": N_QUESTIONS, "top_k": 2, "recall_k": 3, "seed": 0, "max_extra_turns": 1,
                "assistant": {"temperature": 1.0, "top_p": 1.0, "max_tokens": 64},
                "user_simulator": {"temperature": 1.0, "max_tokens": 32},
                "classifier": {"max_tokens": 16}, "judge": {"max_tokens": 16}}
    meter = {}

    def make_backend(spec):
        return FakeGPU(meter["now"]) if spec.backend == "vllm" else FakeAPI(meter["now"])

    # what a process pays once (imports: the retriever kinds, the settings schema) is left out of
    # the timing: against the paper's minutes of work it is nothing, against these scaled-down sleeps
    # it would be a third of the job
    from convrag.retrieval import capabilities
    from convrag.studies.lic_rag import cli, labels, simulate  # noqa: F401
    from convrag.studies.lic_rag.plan import job_block

    capabilities("bm25"), capabilities("hipporag2"), job_block(settings)
    monkeypatch.setattr(backends, "make_backend", make_backend)
    monkeypatch.setattr(retrieval, "load_retriever", lambda kind, index_dir, params, llm=None, **kw: FakeRetriever(llm))

    def run(name: str, *extra: str, retriever: str = "bm25", fail: dict | None = None, scale: float = 1.0):
        meter["now"] = m = Meter()
        m.fail, m.scale = fail, scale
        out = tmp_path / name
        argv = ["lic-rag", "simulate", "--questions", str(files["questions"]), "--shards", str(files["shards"]),
                "--corpus", str(files["corpus"]), "--index-dir", str(tmp_path), "--retriever", retriever,
                "--retriever-name", retriever, "--prompts", str(PROMPTS / "assistant.yaml"), "--dataset", "d",
                "--model", "gpu-model", "--user-model", "api-model", "--cells", CELLS,
                "--classifier-model", "api-model", "--classifier-prompts", str(PROMPTS / "classifier.yaml"),
                "--judge-model", "api-model", "--judge-prompts", str(PROMPTS / "judge.yaml"),
                "--settings", json.dumps(settings), "--registry", str(files["registry"]),
                "--cache", str(tmp_path / f"{name}.sqlite"), "--out-dir", str(out),
                "--accounting", str(out / "chunk0.accounting.json"), *extra]
        if retriever != "bm25":
            argv += ["--retriever-llm", "api-model"]
        args = build_parser().parse_args(argv)  # the command line's parsing (a fixed cost) is not timed
        t0 = m.start = time.perf_counter()
        try:
            rc = args.fn(args) or 0
        except ConvragError as e:  # what `convrag` exits 2 with
            rc, m.error = 2, str(e)
        return rc, time.perf_counter() - t0, out, m

    return run


def _conversations(out: Path) -> dict[str, list[dict]]:
    return {p.parent.name: [json.loads(line) for line in p.read_text().splitlines()]
            for p in sorted(out.glob("*/chunk0.jsonl"))}


def _ratio(wall: float, m: Meter) -> tuple[float, float]:
    return wall / max(m.gpu_s, m.api_busy_s()), max(m.gpu_s, m.api_busy_s())


def test_overlapped_job_takes_about_max_of_gpu_and_api(job):
    rc, wall, out, m = job("overlap", scale=TIMED_SCALE)
    assert rc == 0
    convs = _conversations(out)
    assert len(convs) == 8 and all(len(v) == N_QUESTIONS * RUNS for v in convs.values())
    sharded = convs["SHARDED_history"]
    assert max(sum(t["role"] == "assistant" for t in c["turns"]) for c in sharded) >= 4  # multi-turn
    assert all(c["judgment"] is not None and all("category" in t for t in c["turns"] if t["role"] == "assistant")
               for v in convs.values() for c in v)
    ratio, bound = _ratio(wall, m)
    print(f"overlapped: wall {wall:.2f} s, GPU {m.gpu_s:.2f} s ({len(m.gpu_batches)} batches), "
          f"API busy {m.api_busy_s():.2f} s ({len(m.api)} calls, {sum(b - a for a, b in m.api):.2f} s in all): "
          f"wall / max = {ratio:.3f}")
    # the GPU and the API each carry a fair share: lockstep would take about their sum
    assert min(m.gpu_s, m.api_busy_s()) > 0.5 * bound
    assert ratio <= 1.2, (f"wall {wall:.2f} s is {ratio:.2f}x max(GPU {m.gpu_s:.2f} s, API {m.api_busy_s():.2f} s)\n"
                          + m.timeline(m.start))


@pytest.mark.parametrize("retriever", ["bm25", "hipporag2"])
def test_lockstep_writes_the_same_conversations(job, retriever):
    """``--overlap off`` (lockstep: one batch per role and turn, labels after the simulation) and
    the overlapped run write the same conversations; with hipporag2 its API LLM retrieves on the
    API side of an overlapped turn."""
    rc, wall, out, m = job("overlap", retriever=retriever, scale=0.25)
    rc_off, wall_off, out_off, m_off = job("lockstep", "--overlap", "off", retriever=retriever, scale=0.25)
    assert rc == rc_off == 0
    on, off = _conversations(out), _conversations(out_off)
    assert list(on) == list(off) and on == off
    if retriever == "hipporag2":
        assert all("retrieval_cost" in t for v in on.values() for c in v for t in c["turns"] if t["role"] == "assistant")
    # lockstep: one GPU batch per turn; overlapped: one per cohort and turn
    assert len(m.gpu_batches) > len(m_off.gpu_batches)
    acc, acc_off = (json.loads((o / "chunk0.accounting.json").read_text()) for o in (out, out_off))
    for role in ("assistant", "user_simulator", "classifier", "judge"):
        assert acc[role]["requests"] >= 1 and acc_off[role]["requests"] >= 1
    assert acc["cells"].keys() == acc_off["cells"].keys()
    print(f"{retriever}: overlapped {wall:.2f} s, lockstep {wall_off:.2f} s (GPU {m_off.gpu_s:.2f} s + API "
          f"{m_off.api_busy_s():.2f} s) at scale 0.25")


@pytest.mark.parametrize("role", ["user", "judge"])
def test_a_worker_thread_failure_fails_the_job_with_no_output(job, role):
    rc, _, out, m = job(f"fail-{role}", fail={"role": role, "after": 1}, scale=0.25)
    assert rc == 2 and f"({role} call 2)" in m.error
    assert not out.exists() or not [p for p in out.rglob("*") if p.is_file()]
