"""coral's framework (paper section 4): each history strategy's own retrieval query, the
post-retrieval compression f_p, Table 3's retrieval / compression columns; LLM4CS's promptings
and aggregations with hand-worked vectors; the paper's API entries."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import yaml

from convrag.config import REPO_ROOT
from convrag.errors import ConfigError
from convrag.llm.types import Response, Sampling
from convrag.rag.policies import make_queries
from convrag.rag.retrieve import query_states
from convrag.records import Passage, TurnTask, write_records
from convrag.studies.coral import conversational as C
from convrag.studies.coral.framework import compress, retrieval_label, retrieval_queries, retrieval_query
from convrag.studies.coral.generate import answer, load_prompts, summaries
from coral_helpers import validated as _validate

PROMPTS = load_prompts()
Q1, A1 = "What is the Velmar Observatory?", "An observatory on a hill above Velmar."
Q2, A2 = "Who founded it?", "Hedda Korsvik founded it in 1892."
Q3 = "What did she pay with?"
H2 = [{"role": "user", "text": Q1}, {"role": "assistant", "text": A1},
      {"role": "user", "text": Q2}, {"role": "assistant", "text": A2}]
TASK = TurnTask(task_id="c1_3", benchmark="coral", conversation_id="c1", turn=3, history=H2, question=Q3,
                reference_answers=["She sold an orchard [1]."], rewrite="What did Hedda Korsvik pay with?")
FIRST = TurnTask(task_id="c1_1", benchmark="coral", conversation_id="c1", turn=1, history=[], question=Q1,
                 reference_answers=[A1], rewrite=Q1)
COMPRESS = yaml.safe_load((REPO_ROOT / "resources" / "prompts" / "coral" / "compress.yaml").read_text())
REWRITE = yaml.safe_load((REPO_ROOT / "resources" / "prompts" / "rag" / "rewrite.yaml").read_text())
VARIANT_PROMPTS = yaml.safe_load((REPO_ROOT / "resources" / "prompts" / "coral" / "llm4cs.yaml").read_text())


class Scripted:
    """Engine double: ``rule(request) -> reply``; records every batch."""

    def __init__(self, rule):
        self.rule, self.calls = rule, []

    def generate(self, requests, desc=None):
        self.calls.append(list(requests))
        return [Response(text=self.rule(r), prompt_tokens=5, completion_tokens=3, finish_reason="stop")
                for r in requests]


# ----------------------------------------------------------------------------- P_k = R(f(H_k), q_k)


def test_each_strategy_retrieves_with_the_query_the_paper_defines():
    # raw context: every earlier turn verbatim, then the question; last response: the last one
    assert retrieval_query(TASK, "raw_context") == "\n".join([Q1, A1, Q2, A2, Q3])
    assert retrieval_query(TASK, "last_response") == f"{A2}\n{Q3}"
    assert retrieval_query(TASK, "raw_context", max_history_turns=1) == f"{Q2}\n{A2}\n{Q3}"  # Figure 4's m
    # LLM summary: a scripted summariser's summary (its "Summary:" label dropped), then the question
    summariser = Scripted(lambda r: "Summary: Hedda Korsvik founded the Velmar Observatory.")
    got, rep = summaries(summariser, [TASK, FIRST], PROMPTS, Sampling(max_tokens=32))
    assert rep["requests"] == 1 and got["c1_1"] == ""  # a first turn has no history: no call
    assert retrieval_queries([TASK, FIRST], "llm_summary", summaries=got) == [
        f"Hedda Korsvik founded the Velmar Observatory.\n{Q3}", Q1]
    # rewrite: the configured rewriting model's rewrite (the llm_rewrite policy, a scripted rewriter)
    rewriter = Scripted(lambda r: "What did Hedda Korsvik pay the observatory with?")
    pol = make_queries("llm_rewrite", query_states([TASK]), llm=rewriter, prompts=REWRITE)
    assert retrieval_query(TASK, "rewrite", rewrite=pol.queries[0]) == "What did Hedda Korsvik pay the observatory with?"
    assert rewriter.calls[0][0].messages[-1]["content"].count(A2) == 1  # the rewriter saw the history
    with pytest.raises(ConfigError, match="no summary"):
        retrieval_query(TASK, "llm_summary")
    # the four queries differ, so the strategies retrieve differently
    assert len({retrieval_query(TASK, s, summary="S", rewrite="R") for s in
                ("raw_context", "last_response", "rewrite", "llm_summary")}) == 4


def test_the_rewrite_strategy_asks_the_generator_the_rewrite_it_retrieved_with():
    from convrag.studies.coral.framework import asked_rewrites

    got = asked_rewrites([TASK, FIRST], {"c1_3": "What did Hedda Korsvik pay the observatory with?", "c1_1": ""})
    assert got[0].rewrite == "What did Hedda Korsvik pay the observatory with?" and got[1].rewrite == Q1
    recs, _ = answer(Scripted(lambda r: "x"), got[:1], {"c1_3": []}, "rewrite", PROMPTS, sampling=Sampling())
    assert recs[0]["question_asked"] == "What did Hedda Korsvik pay the observatory with?"


def test_table3_rows_name_the_retrieval_query_and_the_compression():
    assert retrieval_label("raw_context", "strategy") == "raw_context"
    assert retrieval_label("rewrite", "strategy", rewrite_source="golden") == "rewrite:golden"
    assert retrieval_label("rewrite", "strategy", rewrite_model="qwen2.5-1.5b-instruct") == \
        "rewrite:qwen2.5-1.5b-instruct"
    assert retrieval_label("llm_summary", "strategy", summary_model="m") == "llm_summary:m"
    assert retrieval_label("llm_summary", "shared", shared_run="ance/rewrite") == "shared:ance/rewrite"
    import pandas as pd

    from convrag.studies.coral.evaluate import TABLE3_COLUMNS, table3

    rows = pd.DataFrame([{"model": "m", "strategy": "raw_context", "retrieval": "raw_context (bm25)",
                          "compression": "none", "bleu1": 0.5, "rougeL": 0.25, "citation_recall": 1.0,
                          "citation_precision": 0.5, "prompt_tokens": 10, "citation_skipped": False}])
    t = table3(rows)
    assert list(t.columns) == list(TABLE3_COLUMNS) and t.retrieval[0] == "raw_context (bm25)"
    assert t.compression[0] == "none" and t.rougeL[0] == 25.0


class Recorder:
    """A retriever double: records the queries and ranks d2 then d1 for every one."""

    queries: list = []

    def search(self, queries, k):
        Recorder.queries = list(queries)
        return [[("d2", 2.0), ("d1", 1.0)][:k] for _ in queries]


def test_the_answer_stage_searches_with_the_strategy_query(tmp_path, monkeypatch):
    from convrag.studies.coral import cli

    write_records(tmp_path / "corpus.jsonl", [Passage(doc_id="d1", title="A", text="one"),
                                              Passage(doc_id="d2", title="B", text="two")])
    monkeypatch.setattr("convrag.retrieval.load_retriever", lambda kind, d, p: Recorder())
    a = argparse.Namespace(retrieval="strategy", strategy_run=None, strategy="last_response", index_dir=str(tmp_path),
                           retriever="bm25", retriever_params={}, top_k=1, max_history_turns=None,
                           corpus=str(tmp_path / "corpus.jsonl"))
    passages, queries, rep = cli._framework_passages(a, [TASK], None)
    assert Recorder.queries == [f"{A2}\n{Q3}"] and queries == {"c1_3": f"{A2}\n{Q3}"}
    assert [p.doc_id for p in passages["c1_3"]] == ["d2"] and rep["searched"]
    a.retrieval = "shared"
    a.run, a.run_queries = tmp_path / "r.trec", tmp_path / "r.queries.jsonl"
    (tmp_path / "r.trec").write_text("c1_3 Q0 d1 1 5.0 t\n")
    (tmp_path / "r.queries.jsonl").write_text('{"task_id": "c1_3", "query": "golden"}\n')
    passages, queries, rep = cli._framework_passages(a, [TASK], None)
    assert [p.doc_id for p in passages["c1_3"]] == ["d1"] and queries == {"c1_3": "golden"} and not rep["searched"]


# ----------------------------------------------------------------------------- f_p


def test_compression_changes_the_passages_the_generator_is_shown():
    shown = {"c1_3": [{"id": "d1", "title": "Velmar", "text": "The observatory opened in 1892. Cows graze there."},
                      {"id": "d2", "title": "", "text": "Velmar is a market town."}]}
    eng = Scripted(lambda r: "" if "market town" in r.messages[-1]["content"] else "It opened in 1892.")
    out, rep = compress(eng, {"c1_3": "when did it open"}, shown, COMPRESS, Sampling(max_tokens=16))
    assert len(eng.calls) == 1 and len(eng.calls[0]) == 2  # one batched call, a request per passage
    assert "when did it open" in eng.calls[0][0].messages[-1]["content"]
    assert [p["text"] for p in out["c1_3"]] == ["It opened in 1892.", "Velmar is a market town."]
    assert [p["id"] for p in out["c1_3"]] == ["d1", "d2"] and out["c1_3"][0]["title"] == "Velmar"
    assert rep["compressed"] == 1 and rep["empty_kept"] == 1 and rep["empty_tasks"] == ["c1_3"]
    assert rep["chars_after"] < rep["chars_before"]
    reader = Scripted(lambda r: "It opened in 1892 [1].")
    recs, _ = answer(reader, [TASK], out, "rewrite", PROMPTS, sampling=Sampling(max_tokens=16))
    user = reader.calls[0][0].messages[-1]["content"]
    assert "[1] Velmar: It opened in 1892." in user and "Cows graze" not in user
    assert recs[0]["passages"][0]["text"] == "It opened in 1892."
    with pytest.raises(Exception, match="no retrieval query"):
        compress(eng, {}, shown, COMPRESS, Sampling())


@pytest.mark.tinymodel
def test_summary_query_and_compression_with_the_real_tiny_model(tmp_path):
    from convrag.llm.engine import EnginePool

    eng = EnginePool(REPO_ROOT / "config" / "models.yaml", tmp_path / "c.sqlite").engine("smollm2-135m")
    got, rep = summaries(eng, [TASK], PROMPTS, Sampling(max_tokens=24))
    q = retrieval_query(TASK, "llm_summary", summary=got["c1_3"])
    assert rep["requests"] == 1 and q.endswith(Q3) and (q == Q3 or q.startswith(got["c1_3"].strip()))
    shown = {"c1_3": [{"id": "d1", "title": "Velmar", "text": "The Velmar Observatory opened in 1892. "
                       "Hedda Korsvik paid for it with money from her family's orchard. Cows graze nearby."}]}
    out, crep = compress(eng, {"c1_3": q}, shown, COMPRESS, Sampling(max_tokens=24))
    assert crep["passages"] == 1 and crep["compressed"] + crep["empty_kept"] == 1
    assert out["c1_3"][0]["id"] == "d1" and out["c1_3"][0]["original_text"] == shown["c1_3"][0]["text"]
    if crep["compressed"]:
        assert out["c1_3"][0]["text"] != shown["c1_3"][0]["text"]


# ----------------------------------------------------------------------------- LLM4CS


def test_llm4cs_aggregations_by_hand():
    s = np.sqrt
    # Mean (REW): the mean of the rewrites, normalised
    assert np.allclose(C.aggregate(np.array([[1.0, 0.0], [0.0, 1.0]]), None, "mean"), [1 / s(2), 1 / s(2)])
    # Mean (RAR / RTR): the mean of all four rows = (0.75, 0.25), normalised = (3, 1) / sqrt(10)
    got = C.aggregate(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 0.0], [1.0, 0.0]]), "mean")
    assert np.allclose(got, [3 / s(10), 1 / s(10)])
    # SC: summed inner products 1.8, 2.4, 1.6 -> the middle rewrite (0.8, 0.6)
    r = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
    assert np.allclose(C.aggregate(r, None, "sc"), [0.8, 0.6])
    # SC with responses: (r_1 + a_1) / 2 = (0.9, 0.3), normalised = (3, 1) / sqrt(10)
    assert np.allclose(C.aggregate(r, np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]]), "sc"), [3 / s(10), 1 / s(10)])
    # MaxProb: the one greedy candidate, (3, 4) -> (0.6, 0.8); with its response (1,0)+(0,1) over 2
    assert np.allclose(C.aggregate(np.array([[3.0, 4.0]]), None, "maxprob"), [0.6, 0.8])
    assert np.allclose(C.aggregate(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]), "maxprob"), [1 / s(2), 1 / s(2)])
    with pytest.raises(ConfigError, match="MaxProb takes the one greedy candidate"):
        C.aggregate(r, None, "maxprob")
    with pytest.raises(ConfigError, match="aggregation 'median'"):
        C.aggregate(r, None, "median")


def test_llm4cs_policies_and_request_counts():
    assert C.llm4cs_policy("rew", "mean") == "llm4cs" and C.llm4cs_policy("rar", "sc") == "llm4cs_rar_sc"
    assert C.llm4cs_variant("llm4cs_rtr_maxprob") == ("rtr", "maxprob") and C.llm4cs_variant("llm4cs") == ("rew", "mean")
    assert [C.llm4cs_requests(p, a, 5) for p, a in (("rew", "mean"), ("rtr", "sc"), ("rar", "maxprob"),
                                                     ("rtr", "maxprob"))] == [5, 10, 1, 2]
    with pytest.raises(ConfigError, match="prompting 'cot'"):
        C.llm4cs_policy("cot", "mean")


def _vectors(texts):
    """A 2-d 'encoder': a text holding "A" -> (1, 0), else (0, 1)."""
    return np.array([[1.0, 0.0] if "A" in t else [0.0, 1.0] for t in texts], dtype=np.float32)


class VecRetriever:
    def encode_queries(self, texts):
        self.texts = list(texts)
        return _vectors(texts)

    def search_vectors(self, vecs, k):
        self.vecs = np.array(vecs)
        return [[("d1", 1.0)] for _ in vecs]


def test_llm4cs_promptings_call_and_aggregate_as_the_variant_says():
    base = Sampling(temperature=0.7, max_tokens=16, stop=("\n",))
    # REW + SC: 3 sampled rewrites in one call; "A x", "A y", "B" -> SC picks an "A" rewrite: (1, 0)
    eng = Scripted(lambda r: ["A x", "A y", "B"][r.sample_index])
    gen, fb = C.llm4cs_generate(eng, [TASK], REWRITE, {}, "rew", "sc", 3, base)
    assert len(eng.calls) == 1 and [r.sample_index for r in eng.calls[0]] == [0, 1, 2] and fb == 0
    ret = VecRetriever()
    run, recs, counts = C.llm4cs_variant_runs([TASK], ret, gen, "sc", 5, "llm4cs_rew_sc")
    assert np.allclose(ret.vecs[0], [1.0, 0.0]) and recs[0]["policy"] == "llm4cs_rew_sc" and run == {"c1_3": {"d1": 1.0}}
    # RTR + Mean: 2 rewrites ("A", "B"), then one response to each ("B", "B"): mean (1, 3)/4 -> (1, 3)/sqrt(10)
    eng = Scripted(lambda r: "B answer" if r.messages[0]["content"] == VARIANT_PROMPTS["response"]["system"].strip()
                   else ["A one", "B two"][r.sample_index])
    gen, _ = C.llm4cs_generate(eng, [TASK], REWRITE, VARIANT_PROMPTS, "rtr", "mean", 2, base)
    assert len(eng.calls) == 2 and len(eng.calls[1]) == 2 and gen[0]["responses"] == ["B answer", "B answer"]
    assert eng.calls[1][0].messages[-1]["content"].endswith("A one\nPassage:")  # the response asks about rewrite 1
    assert eng.calls[1][0].sampling.stop == () and eng.calls[1][0].sampling.max_tokens == 64
    ret = VecRetriever()
    C.llm4cs_variant_runs([TASK], ret, gen, "mean", 5, "llm4cs_rtr_mean")
    assert np.allclose(ret.vecs[0], np.array([1.0, 3.0]) / np.sqrt(10))
    # RAR + MaxProb: ONE greedy request holding a rewrite and a response: ((1,0) + (0,1)) / 2
    eng = Scripted(lambda r: "Rewrite: A question?\nAnswer: B fact.")
    gen, fb = C.llm4cs_generate(eng, [TASK], REWRITE, VARIANT_PROMPTS, "rar", "maxprob", 5, base)
    assert len(eng.calls[0]) == 1 and eng.calls[0][0].sampling.temperature == 0.0 and fb == 0
    assert gen[0] == {"rewrites": ["A question?"], "responses": ["B fact."]}
    ret = VecRetriever()
    C.llm4cs_variant_runs([TASK], ret, gen, "maxprob", 5, "llm4cs_rar_maxprob")
    assert np.allclose(ret.vecs[0], [1 / np.sqrt(2), 1 / np.sqrt(2)])
    # an unlabelled RAR reply without a response: the rewrite stands in for it (counted)
    eng = Scripted(lambda r: "A alone")
    gen, fb = C.llm4cs_generate(eng, [TASK], REWRITE, VARIANT_PROMPTS, "rar", "mean", 1, base)
    assert gen[0]["responses"] == ["A alone"] and fb == 1


# ----------------------------------------------------------------------------- config and wiring




def test_framework_config_and_wiring():
    from convrag.layout import Layout
    from convrag.studies.coral.plan import llm4cs_jobs, model_jobs, strategy_run
    from convrag.studies.coral.wiring import framework_args, framework_inputs

    cfg = _validate(lambda c: (c["coral"]["generation"].update(rewrite="golden"),
                               c["coral"].update(policies=["current", "rewrite"])))
    L = Layout("R")
    g = cfg["coral"]["generation"]
    assert g["retrieval"] == "strategy" and cfg["coral"]["compression"] is None
    assert strategy_run(cfg, "rewrite")[1] == "rewrite" and strategy_run(cfg, "raw_context") is None
    ins = framework_inputs(cfg, L, "P", "raw_context")
    assert list(ins) == ["index", "graph"] and ins["graph"] == []  # a graph retriever's graph, none for this one
    from convrag.studies.coral.plan import generation_run
    from convrag.studies.coral.wiring import framework_retriever

    assert framework_retriever(cfg, "history_m1") == generation_run(cfg)[0] and framework_retriever(cfg, "rewrite") is None
    ins = framework_inputs(cfg, L, "P", "rewrite")
    assert ins["strategy_run"].endswith("/rewrite.trec") and "index" not in ins

    class In(dict):
        def __getattr__(self, k):
            return self[k]

    args = framework_args(cfg, "smollm2-135m", "raw_context", In(index="R/idx/manifest.json"))
    assert "--retrieval strategy" in args and "--index-dir R/idx" in args and "'raw_context (" in args
    # the rewrite strategy by a rewriting model needs its llm_rewrite run
    with pytest.raises(ConfigError, match="coral.policies must list 'llm_rewrite'"):
        _validate(lambda c: (c["coral"]["generation"].update(rewrite="model"),
                             c["coral"].update(policies=["current", "rewrite"])))
    comp = _validate(lambda c: (c["coral"].update(compression={"model": "judge-b"}, policies=["rewrite", "llm_rewrite"])))
    assert comp["coral"]["compression"]["max_tokens"] == 128
    assert "--compress-model judge-b" in framework_args(comp, "smollm2-135m", "rewrite",
                                                         In(strategy_run="a.trec", strategy_queries="a.jsonl",
                                                            compress_prompts="P/coral/compress.yaml"))
    assert any(j["role"] == "compressor" and j["model"] == "judge-b" for j in model_jobs(comp))
    with pytest.raises(ConfigError, match="coral.compression.model"):
        _validate(lambda c: c["coral"].update(compression={"model": "nope"}))
    # LLM4CS variants: one run each
    v = _validate(lambda c: c["coral"].update(llm4cs={"retrievers": ["dense"], "n": 3, "variants": [
        {"prompting": "rew", "aggregation": "mean"}, {"prompting": "rar", "aggregation": "sc"}]}, policies=["rewrite",
                                                                                                          "llm_rewrite"]))
    assert [j["policy"] for j in llm4cs_jobs(v)] == ["llm4cs", "llm4cs_rar_sc"]
    with pytest.raises(ConfigError, match="listed twice"):
        _validate(lambda c: c["coral"].update(llm4cs={"retrievers": ["dense"], "variants": [
            {"prompting": "rew", "aggregation": "sc"}, {"prompting": "rew", "aggregation": "sc"}]}))


def test_the_paper_config_and_its_api_entries():
    from convrag.config import load_config
    from convrag.studies.coral.plan import llm4cs_jobs

    models = yaml.safe_load((REPO_ROOT / "config" / "models.yaml").read_text())
    for name in ("gpt-3.5-turbo", "gpt-4-turbo"):
        assert models[name]["backend"] == "openai" and models[name]["api_key_env"]
    cfg = load_config(REPO_ROOT / "config" / "studies" / "coral.yaml")
    c = cfg["coral"]
    assert c["llm4cs"]["model"] == "gpt-3.5-turbo" and c["evaluation"]["compare_model"] == "gpt-4-turbo"
    assert len(llm4cs_jobs(cfg)) == 9 and c["generation"]["retrieval"] == "strategy"
    assert c["generation"]["rewrite"] == "model" and c["generation"]["history_sweep"]["seed"] == 0
