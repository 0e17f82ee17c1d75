"""CORAL generation with citations (Table 3): the four history strategies and the history-length
cut, batched requests with numbered passages, the LLM-summary step, the scores (BLEU-1, ROUGE-L,
ALCE citation recall / precision) on hand-worked examples, Table 3's aggregation, and one run
with the real tiny model."""

import math

import pandas as pd
import pytest

from convrag.config import REPO_ROOT
from convrag.errors import ConfigError, DataError
from convrag.llm.types import Response, Sampling
from convrag.records import Passage, TurnTask
from convrag.studies.coral.evaluate import TABLE3_COLUMNS, score_answers, table3
from convrag.studies.coral.generate import (
    STRATEGIES,
    answer,
    generation_requests,
    history_block,
    keep_last_turns,
    load_prompts,
    parse_summary,
    summaries,
)

PROMPTS = load_prompts()
SAMPLING = Sampling(temperature=0.0, max_tokens=64)

Q1, A1 = "What is the Velmar Observatory?", "An observatory on a hill above Velmar."
Q2, A2 = "Who founded it?", "Hedda Korsvik founded it in 1892."
Q3 = "What did she pay with?"


def _task(turn, history, question, rewrite, reference):
    return TurnTask(task_id=f"c1_{turn}", benchmark="coral", conversation_id="c1", turn=turn, history=history,
                    question=question, reference_answers=[reference], rewrite=rewrite)


H1 = [{"role": "user", "text": Q1}, {"role": "assistant", "text": A1}]
H2 = H1 + [{"role": "user", "text": Q2}, {"role": "assistant", "text": A2}]
TASKS = [
    _task(1, [], Q1, Q1, "the cat sat on the mat"),
    _task(2, H1, Q2, "Who founded the Velmar Observatory?", A2),
    _task(3, H2, Q3, None, "She sold her family's orchard."),  # no rewrite: fallback
]
P1 = Passage(doc_id="d1", title="Velmar Observatory",
             text="The Velmar Observatory opened in 1892. Hedda Korsvik paid for its first telescope.")
P2 = {"doc_id": "d2", "title": "", "text": "Velmar is a market town."}  # untitled, given as a mapping
P3 = {"id": "d3", "title": "Korsvik family", "text": "The Korsvik family sold an orchard in 1890."}
PASSAGES = {"c1_1": [P1], "c1_2": [P1, P2], "c1_3": [P1, P2, P3]}
SHOWN_3 = ("[1] Velmar Observatory: The Velmar Observatory opened in 1892. Hedda Korsvik paid for its first "
           "telescope.\n[2] Velmar is a market town.\n[3] Korsvik family: The Korsvik family sold an orchard in 1890.")


class Scripted:
    """Engine double: ``rule(request) -> reply``; records every batch; prompt tokens = words of
    the user message (so shorter histories give fewer input tokens)."""

    def __init__(self, rule):
        self.rule, self.calls = rule, []

    def generate(self, requests, desc=None):
        self.calls.append(list(requests))
        return [Response(text=self.rule(r), prompt_tokens=len(r.messages[-1]["content"].split()),
                         completion_tokens=3, finish_reason="stop") for r in requests]


def _is_summary(r):
    return r.messages[0]["content"] == PROMPTS["summary"]["system"].strip()


# ----------------------------------------------------------------------------- history blocks


def test_history_block_per_strategy():
    t1, t2, t3 = TASKS
    raw3 = f"User: {Q1}\nAssistant: {A1}\nUser: {Q2}\nAssistant: {A2}"
    assert history_block(t3, "raw_context", PROMPTS) == (raw3, Q3)
    # every earlier question, only the LAST answer (after the question it answers)
    assert history_block(t3, "last_response", PROMPTS) == (f"User: {Q1}\nUser: {Q2}\nAssistant: {A2}", Q3)
    assert history_block(t2, "last_response", PROMPTS) == (f"User: {Q1}\nAssistant: {A1}", Q2)
    # rewrite: no history, the standalone rewrite; no rewrite -> the question itself
    assert history_block(t2, "rewrite", PROMPTS) == ("", "Who founded the Velmar Observatory?")
    assert history_block(t3, "rewrite", PROMPTS) == ("", Q3)
    # llm_summary: the summary (stripped); a first turn needs none
    assert history_block(t3, "llm_summary", PROMPTS, summary="  They talked about Velmar.\n") == \
        ("They talked about Velmar.", Q3)
    assert history_block(t1, "llm_summary", PROMPTS) == ("", Q1)
    with pytest.raises(ConfigError, match="no summary"):
        history_block(t3, "llm_summary", PROMPTS)
    for s in STRATEGIES:  # the first turn has no history under any strategy
        assert history_block(t1, s, PROMPTS, summary="x") == ("", Q1)
    with pytest.raises(ConfigError, match="not one of"):
        history_block(t1, "full", PROMPTS)


def test_max_history_turns_keeps_the_last_m_turns():
    t3 = TASKS[2]
    last = f"User: {Q2}\nAssistant: {A2}"
    assert history_block(t3, "raw_context", PROMPTS, max_history_turns=1) == (last, Q3)
    assert history_block(t3, "last_response", PROMPTS, max_history_turns=1) == (last, Q3)
    assert history_block(t3, "raw_context", PROMPTS, max_history_turns=2) == history_block(t3, "raw_context", PROMPTS)
    assert history_block(t3, "raw_context", PROMPTS, max_history_turns=10) == history_block(t3, "raw_context", PROMPTS)
    assert history_block(t3, "raw_context", PROMPTS, max_history_turns=0) == ("", Q3)
    assert history_block(t3, "rewrite", PROMPTS, max_history_turns=1) == ("", Q3)
    # with no kept turn the summary is not needed
    assert history_block(t3, "llm_summary", PROMPTS, max_history_turns=0) == ("", Q3)
    assert keep_last_turns(H2, 1) == H2[2:]
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="max_history_turns"):
            keep_last_turns(H2, bad)


# ----------------------------------------------------------------------------- requests and answers


def test_answer_is_one_batched_call_with_numbered_passages():
    eng = Scripted(lambda r: "It opened in 1892 [1].")
    records, rep = answer(eng, TASKS, PASSAGES, "raw_context", PROMPTS, sampling=SAMPLING, seed=3)
    assert len(eng.calls) == 1 and len(eng.calls[0]) == 3
    assert eng.calls[0] == generation_requests(TASKS, PASSAGES, "raw_context", PROMPTS, SAMPLING, 3)
    req = eng.calls[0][2]
    assert req.seed == 3 and req.sampling == SAMPLING
    assert req.messages[0] == {"role": "system", "content": PROMPTS["system"].strip()}
    assert req.messages[1]["content"] == (
        f"Passages:\n{SHOWN_3}\n\nConversation so far:\nUser: {Q1}\nAssistant: {A1}\nUser: {Q2}\nAssistant: {A2}"
        f"\n\nQuestion: {Q3}")
    # a first turn has no history section
    assert eng.calls[0][0].messages[1]["content"] == (
        f"Passages:\n[1] Velmar Observatory: {P1.text}\n\nQuestion: {Q1}")
    assert [r["task_id"] for r in records] == ["c1_1", "c1_2", "c1_3"]
    r3 = records[2]
    assert r3["passages"] == [{"id": "d1", "title": "Velmar Observatory", "text": P1.text},
                              {"id": "d2", "title": "", "text": P2["text"]},
                              {"id": "d3", "title": "Korsvik family", "text": P3["text"]}]
    assert {k: r3[k] for k in ("conversation_id", "turn", "strategy", "question_asked", "response",
                               "completion_tokens", "finish_reason", "used_rewrite_fallback")} == {
        "conversation_id": "c1", "turn": 3, "strategy": "raw_context", "question_asked": Q3,
        "response": "It opened in 1892 [1].", "completion_tokens": 3, "finish_reason": "stop",
        "used_rewrite_fallback": False}
    tokens = [len(r.messages[-1]["content"].split()) for r in eng.calls[0]]
    assert [r["prompt_tokens"] for r in records] == tokens
    assert rep["tasks"] == 3 and rep["with_history"] == 2 and rep["rewrite_fallbacks"] == 0
    assert rep["prompt_tokens_total"] == sum(tokens) and rep["prompt_tokens_mean"] == pytest.approx(sum(tokens) / 3)
    assert rep["summary"] is None and rep["finish_reasons"] == {"stop": 3} and rep["passages_mean"] == 2

    # the rewrite strategy: shorter inputs, the fallback counted
    eng2 = Scripted(lambda r: "x")
    recs, rep2 = answer(eng2, TASKS, PASSAGES, "rewrite", PROMPTS, sampling=SAMPLING)
    assert [r["question_asked"] for r in recs] == [Q1, "Who founded the Velmar Observatory?", Q3]
    assert [r["used_rewrite_fallback"] for r in recs] == [False, False, True]
    assert rep2["rewrite_fallbacks"] == 1 and rep2["rewrite_fallback_tasks"] == ["c1_3"] and rep2["with_history"] == 0
    assert rep2["prompt_tokens_total"] < rep["prompt_tokens_total"]
    assert "Conversation so far" not in eng2.calls[0][2].messages[1]["content"]

    with pytest.raises(DataError, match="no passages for task 'c1_3'"):
        answer(eng2, TASKS, {"c1_1": [], "c1_2": []}, "raw_context", PROMPTS, sampling=SAMPLING)
    recs, _ = answer(eng2, TASKS[:1], {"c1_1": []}, "raw_context", PROMPTS, sampling=SAMPLING)
    assert "(no passages were found)" in eng2.calls[-1][0].messages[1]["content"] and recs[0]["passages"] == []


def test_ranked_passages_reads_the_ranking():
    from convrag.rag.replay import ranked_passages

    corpus = {"d1": P1, "d2": Passage(doc_id="d2", title="", text="t2"),
              "d3": Passage(doc_id="d3", title="", text="t3")}
    got = ranked_passages(TASKS[:1], {"c1_1": {"d1": 1.0, "d3": 3.0, "d2": 3.0}}, corpus, 2)
    assert [p.doc_id for p in got["c1_1"]] == ["d3", "d2"]  # ties keep the file's order
    with pytest.raises(DataError, match="no ranking"):
        ranked_passages(TASKS[1:2], {}, corpus, 2)
    with pytest.raises(DataError, match="which the corpus lacks"):
        ranked_passages(TASKS[:1], {"c1_1": {"zz": 1.0}}, corpus, 2)


def test_llm_summary_one_call_for_tasks_with_history():
    def rule(r):
        if _is_summary(r):
            # turn 2's history has no A2: an empty reply; turn 3 gets a labelled summary
            return "   " if A2 not in r.messages[1]["content"] else "Summary: They discussed Velmar's founder."
        return "Answer [1]."

    eng = Scripted(rule)
    records, rep = answer(eng, TASKS, PASSAGES, "llm_summary", PROMPTS, sampling=SAMPLING)
    assert len(eng.calls) == 2
    summary_call, gen_call = eng.calls
    assert all(_is_summary(r) for r in summary_call) and len(summary_call) == 2  # none for the first turn
    assert summary_call[1].messages[1]["content"] == PROMPTS["summary"]["user"].format(
        history=f"User: {Q1}\nAssistant: {A1}\nUser: {Q2}\nAssistant: {A2}")
    assert len(gen_call) == 3 and not any(_is_summary(r) for r in gen_call)
    assert gen_call[2].messages[1]["content"] == (
        f"Passages:\n{SHOWN_3}\n\nSummary of the conversation so far:\nThey discussed Velmar's founder."
        f"\n\nQuestion: {Q3}")
    assert "Summary of the conversation" not in gen_call[1].messages[1]["content"]  # empty summary: no section
    assert [r["history_text"] for r in records] == ["", "", "They discussed Velmar's founder."]
    s = rep["summary"]
    assert (s["tasks"], s["no_history"], s["requests"], s["summarised"], s["empty"]) == (3, 1, 2, 1, 1)
    assert s["empty_tasks"] == ["c1_2"] and s["raw_replies"]["c1_2"] == "   " and rep["summary_empty"] == 1

    # a separate summary engine; the history cut reaches the summariser's input
    seng, geng = Scripted(lambda r: "Short."), Scripted(lambda r: "A.")
    _, rep = answer(geng, TASKS, PASSAGES, "llm_summary", PROMPTS, sampling=SAMPLING, summary_engine=seng,
                    max_history_turns=1)
    assert len(seng.calls) == 1 and len(geng.calls) == 1
    assert seng.calls[0][1].messages[1]["content"] == PROMPTS["summary"]["user"].format(
        history=f"User: {Q2}\nAssistant: {A2}")
    got, rep = summaries(Scripted(lambda r: "x"), TASKS[:1], PROMPTS, SAMPLING)
    assert got == {"c1_1": ""} and rep["requests"] == 0  # no call at all
    assert parse_summary("**Summary:** a b") == "a b" and parse_summary(" \n") is None


# ----------------------------------------------------------------------------- scores


def _entail_rule(premise, claim):
    if claim == "The Velmar Observatory opened in 1892.":
        return "opened in 1892" in premise
    if claim == "Hedda Korsvik paid for its first telescope.":
        return "paid for its first telescope" in premise
    return False


def test_score_answers_hand_worked():
    seen = []

    def entail(premises, hypotheses):
        seen.append(list(zip(premises, hypotheses)))
        return [_entail_rule(p, h) for p, h in zip(premises, hypotheses)]

    shown = [{"id": "d1", "title": P1.title, "text": P1.text}, {"id": "d2", "title": "", "text": P2["text"]},
             {"id": "d3", "title": P3["title"], "text": P3["text"]}]
    records = [
        {"task_id": "c1_2", "model": "m", "strategy": "raw_context", "prompt_tokens": 50, "passages": shown,
         "response": "The Velmar Observatory opened in 1892 [1]. It has a red dome [2][3]. It stands on a hill. "
                     "Hedda Korsvik paid for its first telescope [1][3]."},
        {"task_id": "c1_1", "model": "m", "strategy": "raw_context", "prompt_tokens": 20, "passages": shown[:1],
         "response": "the cat sat [1]"},
        {"task_id": "c1_3", "model": "m", "strategy": "raw_context", "prompt_tokens": 80, "passages": shown,
         "response": "  "},
    ]
    df, summ = score_answers(records, TASKS, entail)
    # Record 1, by hand (ALCE's rules):
    #   S1 "... opened in 1892 [1]."          cites [1]; P1 entails       -> recall 1; 1 citation, precise 1
    #   S2 "It has a red dome [2][3]."         P2+P3 do not entail         -> recall 0; 2 citations, precise 0
    #   S3 "It stands on a hill."              no citation                 -> recall 0; no citation counted
    #   S4 "Hedda Korsvik paid ... [1][3]."    P1+P3 entail; P1 alone entails (precise); P3 alone does not
    #                                          and the rest (P1) still entails: [3] is redundant -> precise 0
    #                                                                      -> recall 1; 2 citations, precise 1
    #   recall = 2 entailed / 4 statements = 0.5; precision = (1 + 0 + 1) precise / 5 citations = 0.4
    r = df.iloc[0]
    assert (r["n_statements"], r["n_entailed"], r["n_citations"], r["n_precise"], r["n_overcite"]) == (4, 2, 5, 2, 1)
    assert r["citation_recall"] == pytest.approx(0.5) and r["citation_precision"] == pytest.approx(0.4)
    # Record 2: "the cat sat [1]" -> claim "the cat sat", not entailed: recall 0, precision 0/1.
    # BLEU-1 against "the cat sat on the mat": 3/3 unigrams match, brevity penalty exp(1 - 6/3)
    # = exp(-1) = 0.36788; ROUGE-L: LCS 3, P = 3/3, R = 3/6, F = 2PR/(P+R) = 2/3.
    r = df.iloc[1]
    assert r["bleu1"] == pytest.approx(math.exp(-1)) and r["rougeL"] == pytest.approx(2 / 3)
    assert r["citation_recall"] == 0 and r["citation_precision"] == 0
    # Record 3: no statement -> kept, NaN citation scores, counted; empty text scores 0
    r = df.iloc[2]
    assert r["citation_skipped"] and math.isnan(r["citation_recall"]) and math.isnan(r["citation_precision"])
    assert r["bleu1"] == 0 and r["rougeL"] == 0
    # one batched entail call with the 8 distinct pairs: S1 joint; S2 joint, P2, P3; S4 joint, P1, P3;
    # record 2's joint check
    assert len(seen) == 1 and len(seen[0]) == 8 == len(set(seen[0]))
    assert all(p.startswith("Title: ") or p == P2["text"] or p.startswith(P2["text"] + "\n") for p, _ in seen[0])
    # corpus numbers (ALCE: 100 x mean over the 2 scored items)
    assert summ["citation_rec"] == pytest.approx(25.0) and summ["citation_prec"] == pytest.approx(20.0)
    assert (summ["items"], summ["items_scored"], summ["items_skipped"], summ["no_reference"]) == (3, 2, 1, 0)
    assert summ["first_line"] is False and summ["at_most_citations"] == 3 and summ["entail"] is None
    assert list(df["strategy"]) == ["raw_context"] * 3 and list(df["prompt_tokens"]) == [50, 20, 80]

    with pytest.raises(DataError, match="unknown task 'zz'"):
        score_answers([{**records[0], "task_id": "zz"}], TASKS, entail)


def test_table3_orders_strategies_and_scales():
    nan = math.nan
    df = pd.DataFrame([
        {"model": "m", "strategy": "llm_summary", "bleu1": 0.2, "rougeL": 0.3, "citation_recall": nan,
         "citation_precision": nan, "citation_skipped": True, "prompt_tokens": 10},
        {"model": "m", "strategy": "raw_context", "bleu1": 0.1, "rougeL": 0.2, "citation_recall": 0.5,
         "citation_precision": 0.4, "citation_skipped": False, "prompt_tokens": 100},
        {"model": "m", "strategy": "raw_context", "bleu1": 0.3, "rougeL": 0.4, "citation_recall": 0.0,
         "citation_precision": 1.0, "citation_skipped": False, "prompt_tokens": 50},
        {"model": "m", "strategy": "llm_summary", "bleu1": 0.4, "rougeL": 0.5, "citation_recall": 1.0,
         "citation_precision": 0.5, "citation_skipped": False, "prompt_tokens": 30},
        {"model": "a", "strategy": "rewrite", "bleu1": 0.0, "rougeL": 0.0, "citation_recall": 0.0,
         "citation_precision": 0.0, "citation_skipped": False, "prompt_tokens": 5},
    ])
    t = table3(df)
    assert tuple(t.columns) == TABLE3_COLUMNS
    assert list(zip(t["model"], t["strategy"])) == [("a", "rewrite"), ("m", "raw_context"), ("m", "llm_summary")]
    raw, summ = t.iloc[1], t.iloc[2]
    assert raw["bleu1"] == pytest.approx(20.0) and raw["rougeL"] == pytest.approx(30.0)
    assert raw["citation_recall"] == pytest.approx(25.0) and raw["citation_precision"] == pytest.approx(70.0)
    assert raw["input_tokens"] == 75 and raw["tasks"] == 2 and raw["citation_scored"] == 2
    # the skipped item does not count in the citation means
    assert summ["citation_recall"] == pytest.approx(100.0) and summ["citation_precision"] == pytest.approx(50.0)
    assert summ["tasks"] == 2 and summ["citation_scored"] == 1 and summ["input_tokens"] == 20
    assert table3(df.iloc[:0]).empty


# ----------------------------------------------------------------------------- real tiny model


@pytest.mark.tinymodel
def test_raw_context_with_the_real_tiny_model(tmp_path):
    import time

    from convrag.llm.engine import EnginePool
    from convrag.metrics.citation import llm_entail

    eng = EnginePool(REPO_ROOT / "config" / "models.yaml", tmp_path / "c.sqlite").engine("smollm2-135m")
    t0 = time.perf_counter()
    records, rep = answer(eng, TASKS, PASSAGES, "raw_context", PROMPTS, sampling=Sampling(max_tokens=48))
    ent = llm_entail(eng)
    # the tiny model rarely cites, so one hand-written cited answer makes sure the judge runs
    cited = {**records[0], "model": "hand", "response": "The Velmar Observatory opened in 1892 [1]."}
    df, summ = score_answers(records + [cited], TASKS, ent)
    print(f"tiny model: {time.perf_counter() - t0:.1f}s; responses {[r['response'] for r in records]}; "
          f"tokens {[r['prompt_tokens'] for r in records]}; citations {summ}")
    assert [r["task_id"] for r in records] == ["c1_1", "c1_2", "c1_3"] and rep["tasks"] == 3
    for r in records:
        assert r["model"] == "smollm2-135m" and r["prompt_tokens"] > 0 and r["completion_tokens"] <= 48
        assert isinstance(r["response"], str) and r["finish_reason"] in ("stop", "length")
        assert len(r["passages"]) == len(PASSAGES[r["task_id"]])
    tokens = [r["prompt_tokens"] for r in records]
    assert tokens[0] < tokens[1] < tokens[2]  # longer histories, more passages
    assert rep["prompt_tokens_total"] == sum(tokens)
    assert len(df) == 4 and summ["items"] == 4 and summ["items_scored"] + summ["items_skipped"] == 4
    assert df.iloc[3]["n_citations"] == 1 and not df.iloc[3]["citation_skipped"]
    assert df["bleu1"].between(0, 1).all() and df["rougeL"].between(0, 1).all()
    scored = df[~df["citation_skipped"]]
    assert scored["citation_recall"].between(0, 1).all() and scored["citation_precision"].between(0, 1).all()
    assert ent.calls == 1 and ent.asked >= 1 and ent.unparsed <= ent.asked  # one batched judge call
    assert summ["entail"] == ent.summary()
    assert eng.accounting.calls == 3 + ent.asked
