"""Replay of benchmark turns (TurnTask) through the shared reader: queries per policy, the
prompt layout (history first, passages last), reference and no-passage settings, one batch
per run, chunks, the all-or-nothing job writer, and a real `convrag answer` job with the
packaged tiny model."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from convrag.config import REPO_ROOT
from convrag.errors import DataError
from convrag.llm.types import Response, Sampling
from convrag.rag.jobs import write_job
from convrag.rag.replay import ChatPrompt, answer_tasks
from convrag.records import Passage, TurnTask, write_records
from convrag.retrieval import build_index, capabilities, load_retriever

PROMPT = ChatPrompt(yaml.safe_load((REPO_ROOT / "resources" / "prompts" / "rag" / "reader.yaml").read_text()))
CORPUS = [Passage("p1", "Orvik Theatre", "The Orvik Theatre was founded by Sera Lund in 1990."),
          Passage("p2", "Sera Lund", "Sera Lund was born in Kamira."),
          Passage("p3", "Kamira", "Kamira is a port city on the east coast.")]
TASKS = [
    TurnTask(task_id="c1::2", benchmark="toy", conversation_id="c1", turn=2,
             history=[{"role": "user", "text": "Who founded the Orvik Theatre?"},
                      {"role": "assistant", "text": "Sera Lund founded it."}],
             question="Where was she born?", reference_answers=["Kamira"], gold_docs={"p2": 1},
             rewrite="Where was Sera Lund born?",
             contexts=[{"doc_id": "p2", "title": "Sera Lund", "text": "Sera Lund was born in Kamira."}]),
    TurnTask(task_id="c2::1", benchmark="toy", conversation_id="c2", turn=1, history=[],
             question="What kind of city is Kamira?", reference_answers=["a port city"], gold_docs={"p3": 1},
             rewrite="What kind of city is Kamira?", contexts=[]),
]


class Scripted:
    def __init__(self):
        self.calls = []

    def generate(self, reqs, desc=None):
        self.calls.append(list(reqs))
        return [Response(text=f"reply {r.sample_index}", prompt_tokens=10, completion_tokens=2, finish_reason="stop")
                for r in reqs]


@pytest.fixture(scope="module")
def bm25(tmp_path_factory):
    d = tmp_path_factory.mktemp("bm25")
    write_records(d / "corpus.jsonl", CORPUS)
    build_index("bm25", d / "corpus.jsonl", d / "index", {"backend": "bm25s"})
    return load_retriever("bm25", d / "index", {"backend": "bm25s"})


def _answer(eng, **kw):
    base = dict(engine=eng, prompt=PROMPT, sampling=Sampling(0.0, 1.0, 16), policy="current", passages_from="retrieved",
                capabilities=capabilities("bm25"), corpus={p.doc_id: p for p in CORPUS}, top_k=2, recall_k=3,
                setting={"model": "m", "retriever": "bm25"})
    return answer_tasks(TASKS, **{**base, **kw})


def test_queries_follow_the_policy(bm25):
    for policy, expected in [("current", "Where was she born?"),
                             ("history", "Who founded the Orvik Theatre?\nWhere was she born?"),
                             ("rewrite", "Where was Sera Lund born?")]:
        recs = _answer(Scripted(), retriever=bm25, policy=policy)
        assert recs[0]["query"] == expected and recs[0]["policy"] == policy
        assert len(recs[0]["retrieved"]) <= 3


def test_prompt_layout_history_first_passages_last(bm25):
    eng = Scripted()
    recs = _answer(eng, retriever=bm25, policy="rewrite", runs=2)
    assert len(eng.calls) == 2 and [len(c) for c in eng.calls] == [2, 2]  # one batch per run
    msgs = eng.calls[0][0].messages
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[1]["content"] == "Who founded the Orvik Theatre?" and msgs[2]["content"] == "Sera Lund founded it."
    shown = [d["doc_id"] for d in recs[0]["retrieved"][:2]]
    assert shown[0] == "p2" and "Sera Lund was born in Kamira." in msgs[-1]["content"]
    assert msgs[-1]["content"].endswith("Question: Where was she born?")
    assert [r["run"] for r in recs] == [0, 0, 1, 1] and recs[2]["text"] == "reply 1"
    assert recs[0]["answer"] == "reply 0" and recs[0]["answered"] is True  # answer: text
    assert "retrieval_cost" not in recs[0]  # BM25 calls no LLM


def test_reference_and_no_passage_settings():
    eng = Scripted()
    recs = _answer(eng, passages_from="reference", capabilities=None, corpus=None)
    assert [d["doc_id"] for d in recs[0]["retrieved"]] == ["p2"] and recs[1]["retrieved"] == []
    assert recs[0]["query"] is None and recs[0]["policy"] is None
    assert "Sera Lund was born in Kamira." in eng.calls[0][0].messages[-1]["content"]
    assert "(no documents)" in eng.calls[0][1].messages[-1]["content"]
    eng = Scripted()
    recs = _answer(eng, passages_from="none", capabilities=None, corpus=None)
    assert all(r["retrieved"] == [] for r in recs)
    assert all("(no documents)" in r.messages[-1]["content"] for r in eng.calls[0])


def test_duplicate_task_ids_are_an_error(bm25):
    with pytest.raises(DataError, match="duplicate task id"):
        answer_tasks([TASKS[0], TASKS[0]], engine=Scripted(), prompt=PROMPT, sampling=Sampling(0.0, 1.0, 8),
                     policy="current", passages_from="none")


def test_job_writer_is_all_or_nothing(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    b.write_text("stale\n")

    class Boom:
        def to_dict(self):
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_job({a: [{"x": 1}], b: [Boom()]}, tmp_path / "acc.json", {})
    assert not a.exists() and not b.exists() and not (tmp_path / "acc.json").exists()
    write_job({a: [{"x": 1}]}, tmp_path / "acc.json", {"n": 1})
    assert a.read_text() == '{"x": 1}\n' and json.loads((tmp_path / "acc.json").read_text()) == {"n": 1}


@pytest.mark.tinymodel
def test_answer_stage_with_the_real_tiny_model(tmp_path):
    write_records(tmp_path / "corpus.jsonl", CORPUS)
    write_records(tmp_path / "tasks.jsonl", TASKS)
    build_index("bm25", tmp_path / "corpus.jsonl", tmp_path / "index", {"backend": "bm25s"})
    argv = [sys.executable, "-m", "convrag.cli", "answer", "--tasks", str(tmp_path / "tasks.jsonl"),
            "--passages", "retrieved", "--policy", "rewrite", "--retriever", "bm25", "--retriever-name", "bm25",
            "--retriever-params", '{"backend": "bm25s"}', "--index-dir", str(tmp_path / "index"),
            "--corpus", str(tmp_path / "corpus.jsonl"), "--model", "smollm2-135m",
            "--prompts", str(REPO_ROOT / "resources/prompts/rag/reader.yaml"),
            "--registry", str(REPO_ROOT / "config/models.yaml"), "--cache", str(tmp_path / "llm.sqlite"),
            "--sampling", '{"temperature": 0.0, "max_tokens": 12}', "--top-k", "2", "--chunk", "0", "--chunk-size", "1",
            "--out", str(tmp_path / "out.jsonl"), "--accounting", str(tmp_path / "acc.json")]
    for _ in range(2):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    recs = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in recs] == ["c1::2"]  # chunk 0 of size 1
    assert recs[0]["text"].strip() and recs[0]["query"] == "Where was Sera Lund born?"
    assert recs[0]["retrieved"][0]["doc_id"] == "p2"
    acc = json.loads((tmp_path / "acc.json").read_text())
    assert acc["job"]["tasks"] == 1 and acc["reader"]["requests"] == 1
    assert acc["reader"]["calls"] == 0 and acc["reader"]["cache_hits"] == 1  # the second run: from the cache
    assert Path(tmp_path / "out.jsonl").exists()
