"""The worse-labels study's readers, judges and audit: parsing, the panel rule, batching
(one engine call per stage), the stratified audit sample, and once with the real tiny model."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from convrag.config import REPO_ROOT
from convrag.errors import ConfigError, DataError, ModelError
from convrag.llm.judge import JUDGES, run_judge
from convrag.llm.types import Response, Sampling
from convrag.studies.worse_labels.judges import (
    AUDIT_STRATA_PAPER,
    CONTENT,
    CONTENT_REFERENCE,
    CORRECTNESS,
    audit_items,
    audit_messages,
    audit_sample,
    check_content_prompts,
    is_correct,
    judge_content,
    load_prompts,
    panel_label,
    parse_content,
    parse_correctness,
    parse_claims,
    run_audit,
)
from convrag.studies.worse_labels.readers import (
    STATUSES,
    load_reader_prompts,
    p_answerable,
    parse_status,
    read,
    reader_messages,
)

PROMPTS_DIR = REPO_ROOT / "resources" / "prompts"
READER = load_reader_prompts(PROMPTS_DIR)
PROMPTS = load_prompts(PROMPTS_DIR)


class Scripted:
    """Generation: ``fn(request)`` -> text; label mode: ``logprobs(request)`` -> label log-probs.
    Counts batched calls and the requests of each."""

    def __init__(self, fn, logprobs=None):
        self.fn, self.logprobs, self.sizes, self.requests = fn, logprobs, [], []

    @property
    def calls(self):
        return len(self.sizes)

    def generate(self, reqs, desc=None):
        self.sizes.append(len(reqs))
        self.requests.append(list(reqs))
        return [Response(text=max(r.labels), prompt_tokens=1, completion_tokens=0, finish_reason="label",
                         label_logprobs=self.logprobs(r)) if r.labels is not None else
                Response(text=self.fn(r), prompt_tokens=1, completion_tokens=1, finish_reason="stop")
                for r in reqs]


def _user(r):
    return r.messages[-1]["content"]


# ---------------------------------------------------------------------------------------
# Reader
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text,want", [
    ("ANSWERABLE\nParis is the capital.", ("ANSWERABLE", "Paris is the capital.")),
    ("**UNANSWERABLE**", ("UNANSWERABLE", "")),
    ("unanswerable", ("UNANSWERABLE", "")),
    ("Status: answerable\nParis", ("ANSWERABLE", "Paris")),
    ("**Status:** UNANSWERABLE.", ("UNANSWERABLE", "")),
    ("\n\n  Answerable: Paris\nsince 508", ("ANSWERABLE", "Paris\nsince 508")),
    ("## ANSWERABLE", ("ANSWERABLE", "")),
    ("I think the answer is Paris.", (None, "I think the answer is Paris.")),
    ("ANSWERABLE or UNANSWERABLE", (None, "ANSWERABLE or UNANSWERABLE")),  # an echo of the instruction
    ("ANSWERABLES", (None, "ANSWERABLES")),
    ("Paris\nANSWERABLE", (None, "Paris\nANSWERABLE")),  # only the first line counts
    ("", (None, "")),
    (None, (None, "")),
])
def test_parse_status(text, want):
    assert parse_status(text) == want


def test_p_answerable_hand_computed_and_stable():
    want = math.exp(-0.1) / (math.exp(-0.1) + math.exp(-2.3))  # = 1 / (1 + e^-2.2) = 0.900249...
    assert p_answerable({"ANSWERABLE": -0.1, "UNANSWERABLE": -2.3}) == pytest.approx(want)
    assert want == pytest.approx(0.9002495, abs=1e-7)
    assert p_answerable({"ANSWERABLE": -2000.0, "UNANSWERABLE": -1000.0}) == pytest.approx(0.0)  # no overflow
    assert p_answerable({"ANSWERABLE": -1000.0, "UNANSWERABLE": -1001.0}) == pytest.approx(1 / (1 + math.exp(-1)))
    assert p_answerable({"ANSWERABLE": -math.inf, "UNANSWERABLE": -1.0}) == 0.0
    assert p_answerable({"ANSWERABLE": -math.inf, "UNANSWERABLE": -math.inf}) is None
    assert p_answerable({"ANSWERABLE": -1.0}) is None and p_answerable(None) is None


ITEMS = [
    {"item_id": "t1|fusion", "question": "When did the Tolvern ferry start?",
     "history": [{"role": "user", "text": "Tell me about Tolvern."}, {"role": "assistant", "text": "An island."}],
     "passages": ["The ferry began in May 1958.", "Tolvern has 900 people."], "reference": "In May 1958."},
    {"item_id": "t1|none", "question": "When did the Tolvern ferry start?", "history": "user: Tell me about Tolvern.",
     "passages": [], "reference": "In May 1958."},
    {"item_id": "t2|gold", "question": "Which battery does the Fenwick 3 use?", "history": [],
     "passages": ["The Fenwick 3 shows kilograms."], "reference": "Two AAA batteries."},
]


def test_reader_messages_number_passages_and_no_documents_variant():
    with_docs = reader_messages(READER, ITEMS[0])
    shots = READER["examples"]  # worked examples as earlier chat turns, each reply a status line first
    assert len(shots) == 2 and {parse_status(x["reply"])[0] for x in shots} == {"ANSWERABLE", "UNANSWERABLE"}
    assert [m["role"] for m in with_docs] == ["system", *["user", "assistant"] * len(shots), "user"]
    assert [m["content"] for m in with_docs[2:-1:2]] == [x["reply"].strip() for x in shots]
    assert "[1] The ferry began in May 1958.\n\n[2] Tolvern has 900 people." in with_docs[-1]["content"]
    assert "user: Tell me about Tolvern.\nassistant: An island." in with_docs[-1]["content"]
    none = reader_messages(READER, ITEMS[1])[-1]["content"]
    assert "[1]" not in none and READER["no_passages"] in none
    assert "ANSWERABLE or UNANSWERABLE" in none  # the status line is still asked for
    assert "ANSWERABLE" in with_docs[0]["content"] and "UNANSWERABLE" in with_docs[0]["content"]
    assert READER["no_history"] in reader_messages(READER, ITEMS[2])[-1]["content"]
    with pytest.raises(DataError, match="t9"):
        reader_messages(READER, {"item_id": "t9", "question": "q", "history": []})


def test_reader_prompt_check_names_the_placeholder():
    from convrag.studies.worse_labels.readers import check_reader_prompts

    with pytest.raises(ConfigError, match=r"\{passages\}"):
        check_reader_prompts(dict(READER, user="{history} {question}"), "reader.yaml")
    with pytest.raises(ConfigError, match=r"unknown.*\{documents\}"):
        check_reader_prompts(dict(READER, user="{history} {question} {passages} {documents}"), "reader.yaml")


def test_read_one_call_with_label_requests():
    def answer(r):
        if "Fenwick" in _user(r):
            return "hmm"
        return "ANSWERABLE\nIn May 1958." if "[1]" in _user(r) else "UNANSWERABLE"

    def lps(r):
        return {"ANSWERABLE": -0.1, "UNANSWERABLE": -2.3} if "[1]" in _user(r) else \
            {"ANSWERABLE": -2.3, "UNANSWERABLE": -0.1}

    eng = Scripted(answer, lps)
    recs = read(ITEMS, eng, READER, Sampling(max_tokens=16))
    assert eng.sizes == [6]  # one call, generation + label request per item
    reqs = eng.requests[0]
    assert [r.labels for r in reqs] == [None, STATUSES] * 3
    assert all(reqs[2 * i].messages == reqs[2 * i + 1].messages for i in range(3))  # the same messages
    assert reqs[0].sampling.max_tokens == 16 and reqs[0].sampling.temperature == 0.0
    p = math.exp(-0.1) / (math.exp(-0.1) + math.exp(-2.3))
    assert [r["item_id"] for r in recs] == ["t1|fusion", "t1|none", "t2|gold"]
    assert [r["status"] for r in recs] == ["ANSWERABLE", "UNANSWERABLE", None]
    assert [r["parsed"] for r in recs] == [True, True, False]
    assert [r["answer"] for r in recs] == ["In May 1958.", "", "hmm"]
    assert recs[0]["p_answerable"] == pytest.approx(p) and recs[1]["p_answerable"] == pytest.approx(1 - p)
    assert recs[2]["raw"] == "hmm" and recs[0]["label_logprobs"] == {"ANSWERABLE": -0.1, "UNANSWERABLE": -2.3}
    # the no-documents item's prompt holds no numbered passage
    assert "[1]" not in _user(reqs[2]) and READER["no_passages"] in _user(reqs[2])

    eng2 = Scripted(answer)
    recs2 = read(ITEMS, eng2, READER, Sampling(max_tokens=128), label_mode=False)
    assert eng2.sizes == [3] and all(r["p_answerable"] is None for r in recs2)
    assert recs2[0]["status"] == "ANSWERABLE"


def test_read_names_the_item_without_label_logprobs():
    eng = Scripted(lambda r: "ANSWERABLE", lambda r: {"ANSWERABLE": -1.0})
    with pytest.raises(ModelError, match="t1\\|fusion"):
        read(ITEMS[:1], eng, READER, Sampling(max_tokens=128))


# ---------------------------------------------------------------------------------------
# Content judge and panel
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text,want", [
    ("yes\nSupport: 1, 3", {"label": "yes", "support": [1, 3]}),
    ("Partial.\nSupport: [2]", {"label": "partial", "support": [2]}),
    ("**no**\nSupport: none", {"label": "no", "support": []}),
    ("Label: yes\nSupporting documents: 2 and 2, 0, 4", {"label": "yes", "support": [2, 4]}),
    ("no", {"label": "no", "support": None}),  # no Support line
    ("\nyes, document 1 answers it\nSupport: 1", {"label": "yes", "support": [1]}),
    ("The documents are sufficient.\nyes", None),
    ("maybe\nSupport: 1", None),
    ("yesterday", None),
    ("", None),
    (None, None),
])
def test_parse_content(text, want):
    assert parse_content(text) == want


@pytest.mark.parametrize("labels,want", [
    (["yes", "partial", "no"], "partial"),   # 3-way split
    (["yes", "yes", "no"], "yes"),           # 2-1
    (["no", "partial", "no"], "no"),
    (["yes", "no", None], "partial"),        # tie among the given (one missing)
    (["yes", None, None], "yes"),            # one given label decides
    (["partial", "partial", None], "partial"),
    (["yes", "yes", "no", "no", "partial"], "partial"),  # tie for the top count
    ([None, None, None], None),
    ([], None),
])
def test_panel_label(labels, want):
    assert panel_label(labels) == want


def test_panel_label_rejects_unknown():
    with pytest.raises(ValueError, match="maybe"):
        panel_label(["yes", "maybe"])


def test_content_judge_registered_and_support_filtered():
    assert JUDGES["worse_labels_content"] is CONTENT and JUDGES["worse_labels_correctness"] is CORRECTNESS
    assert JUDGES["worse_labels_content_reference"] is CONTENT_REFERENCE
    items = [{"item_id": "c1", "question": "q1", "history": [], "passages": ["a", "b"], "reference": "r1"},
             {"item_id": "c2", "question": "q2", "history": "", "passages": [], "reference": "r2"},
             {"item_id": "c3", "question": "q3", "history": [], "passages": ["a"], "reference": None}]
    replies = {"q1": "yes\nSupport: 2, 5", "q2": "no\nSupport: none", "q3": "I cannot tell"}
    eng = Scripted(lambda r: replies[_user(r).split("Latest question: ")[1].split("\n")[0]])
    v = judge_content(items, eng, PROMPTS["content"])
    assert eng.sizes == [3]
    assert [x["value"] for x in v] == [{"label": "yes", "support": [2]}, {"label": "no", "support": []}, None]
    assert [x["support_dropped"] for x in v] == [1, 0, 0] and [x["parsed"] for x in v] == [True, True, False]
    msgs = eng.requests[0][0].messages
    n_ex = len(PROMPTS["content"]["examples"])
    assert len(msgs) == 1 + 2 * n_ex + 1 and msgs[2]["content"] == "yes\nSupport: 2"
    # the paper's content label: the judge reads the reference answer (§3), the examples' too
    assert "Reference answer: r1" in msgs[-1]["content"] and "Reference answer: In May 1958" not in msgs[-1]["content"]
    assert "Reference answer: Regular service began in May 1958." in msgs[1]["content"]
    assert "Reference answer: (none given)" in _user(eng.requests[0][2])


def test_content_prompt_check():
    with pytest.raises(ConfigError, match=r"\{history\}, \{reference\}"):
        check_content_prompts(dict(PROMPTS["content"], user="{question} {passages}"), "content.yaml")
    with pytest.raises(ConfigError, match="examples\\[0\\]"):
        check_content_prompts(dict(PROMPTS["content"], examples=[{"question": "q"}]), "content.yaml")


# ---------------------------------------------------------------------------------------
# Correctness
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text,want", [("4", 4), ("**5**", 5), ("Score: 3", 3), ("4/5\nbecause", 4), (" 1.", 1),
                                       ("0", None), ("6", None), ("10", None), ("good", None),
                                       ("The answer\n5", None), ("", None), (None, None)])
def test_parse_correctness(text, want):
    assert parse_correctness(text) == want


def test_is_correct():
    assert is_correct("ANSWERABLE", 4) is True
    assert is_correct("ANSWERABLE", 5) is True
    assert is_correct("ANSWERABLE", 3) is False
    assert is_correct("UNANSWERABLE", 5) is False
    assert is_correct("UNANSWERABLE", None) is False
    assert is_correct(None, 5) is None
    assert is_correct("ANSWERABLE", None) is None  # an unreadable judge reply
    with pytest.raises(ValueError):
        is_correct("MAYBE", 4)


def test_correctness_rules_and_one_call():
    items = [{"item_id": "r1", "question": "q", "reference": "1958", "answer": "In 1958.", "status": "ANSWERABLE"},
             {"item_id": "r2", "question": "q", "reference": "1958", "answer": "  ", "status": "ANSWERABLE"},
             {"item_id": "r3", "question": "q", "reference": "1958", "answer": "", "status": "UNANSWERABLE"},
             {"item_id": "r4", "question": "q", "reference": "1958", "answer": "x", "status": None},
             {"item_id": "r5", "question": "q", "reference": "1958", "answer": "1972"}]
    eng = Scripted(lambda r: "5" if "In 1958." in _user(r) else "2")
    v = run_judge(CORRECTNESS, items, eng, PROMPTS["correctness"])
    assert eng.sizes == [2]
    assert [(x["value"], x["method"]) for x in v] == [(5, "llm"), (1, "rule"), (None, "skipped"), (None, "skipped"),
                                                     (2, "llm")]
    assert [is_correct(it.get("status", "ANSWERABLE"), x["value"]) for it, x in zip(items, v)] == \
        [True, False, False, None, False]


# ---------------------------------------------------------------------------------------
# Audit
# ---------------------------------------------------------------------------------------


def _contexts():
    rows = []
    for s in ("fusion", "bm25_turn", "bm25_hist", "hybrid"):
        for t in range(12):
            label = "none" if t % 3 else ("all" if t % 2 else "some")  # t = 0, 3, 6, 9 hold gold
            rows.append({"task_id": f"t{t:02d}", "set": s, "qrels_label": label, "doc_ids": [f"{s}-{t}-d1"]})
    return pd.DataFrame(rows)


STRATA = [{"set": "fusion", "qrels_label": "none", "n": 5}, {"set": "fusion", "qrels_label": "any_gold", "n": 3},
          {"set": "fusion", "qrels_label": None, "n": 6},  # overlaps the first two: draws only what is left
          {"set": "bm25_turn", "qrels_label": "none", "n": 4}, {"set": "hybrid", "qrels_label": "any_gold", "n": 9},
          {"set": "missing", "qrels_label": None, "n": 2}]


def test_audit_sample_strata_dedup_shuffle_shortfall():
    ctx = _contexts()
    s = audit_sample(ctx, STRATA, seed=7)
    assert list(s["audit_id"]) == [f"a{k:04d}" for k in range(1, len(s) + 1)]
    assert s["stratum"].value_counts().sort_index().to_dict() == {0: 5, 1: 3, 2: 4, 3: 4, 4: 4}
    assert len(s) == 20 and not s.duplicated(["task_id", "set"]).any()
    assert (s[s["stratum"] == 0]["qrels_label"] == "none").all()
    assert (s[s["stratum"] == 1]["qrels_label"] != "none").all() and (s[s["stratum"] == 4]["set"] == "hybrid").all()
    assert [(x["drawn"], x["shortfall"]) for x in s.attrs["strata"]] == [(5, 0), (3, 0), (4, 2), (4, 0), (4, 5),
                                                                         (0, 2)]
    assert s["stratum"].tolist() != sorted(s["stratum"]) and s["set"].tolist() != sorted(s["set"])  # shuffled
    again = audit_sample(ctx, STRATA, seed=7)
    pd.testing.assert_frame_equal(s, again)
    other = audit_sample(ctx, STRATA, seed=8)
    assert other[["task_id", "set"]].values.tolist() != s[["task_id", "set"]].values.tolist()


def test_audit_sample_paper_strata_and_errors():
    assert sum(x["n"] for x in AUDIT_STRATA_PAPER) == 250
    assert sum(x["n"] for x in AUDIT_STRATA_PAPER if x["set"] == "fusion") == 100
    rows = [{"task_id": f"t{t:03d}", "set": s, "qrels_label": "none" if t % 2 else "some", "doc_ids": ["d"]}
            for s in ("fusion", "bm25_turn", "bm25_hist", "hybrid") for t in range(120)]
    s = audit_sample(pd.DataFrame(rows), list(AUDIT_STRATA_PAPER), seed=0)
    assert len(s) == 250 and s.groupby("set").size().to_dict() == {"bm25_hist": 50, "bm25_turn": 50,
                                                                   "fusion": 100, "hybrid": 50}
    assert all(x["shortfall"] == 0 for x in s.attrs["strata"])
    dup = pd.DataFrame(rows[:2] + rows[:1])
    with pytest.raises(DataError, match="t000"):
        audit_sample(dup, STRATA, seed=0)
    with pytest.raises(ValueError, match="gold"):
        audit_sample(pd.DataFrame(rows), [{"set": "fusion", "qrels_label": "gold", "n": 1}], seed=0)


def test_audit_items_hide_ids():
    s = audit_sample(_contexts(), STRATA[:1], seed=1)
    turns = {f"t{t:02d}": {"question": f"question {t}", "history": [], "reference": f"answer {t}"} for t in range(12)}
    passages = {d: f"text of {d}" for ids in _contexts()["doc_ids"] for d in ids}
    items = audit_items(s, turns, passages)
    assert set(items[0]) == {"audit_id", "question", "history", "reference", "passages"}
    for procedure in ("holistic", "claims"):  # both runs see the reference answer, as the paper's labellers do
        user = audit_messages(PROMPTS["audit"], items[0], procedure)[1]["content"]
        assert "[1] text of" in user and s.loc[0, "task_id"] not in user.replace("text of", "")
        assert f"Reference answer: {turns[s.loc[0, 'task_id']]['reference']}" in user
    no_ref = audit_messages(PROMPTS["audit"], {**items[0], "reference": None}, "holistic")[1]["content"]
    assert "Reference answer: (none given)" in no_ref
    with pytest.raises(DataError, match="a0001"):
        audit_items(s, {}, passages)


@pytest.mark.parametrize("text,want", [
    ("Claim 1: began in 1958 -> supported by 2, 3\nClaim 2: runs daily -> not supported\nLabel: partial",
     {"label": "partial", "support": [2, 3], "claims": [{"claim": 1, "supported": True, "documents": [2, 3]},
                                                       {"claim": 2, "supported": False, "documents": []}]}),
    ("**Claim 1:** x \u2192 supported by [1]\n> Label: yes", {"label": "yes", "support": [1], "claims": [
        {"claim": 1, "supported": True, "documents": [1]}]}),
    ("Label: no\nClaim 1: y -> not supported\nLabel: no", {"label": "no", "support": [],
                                                            "claims": [{"claim": 1, "supported": False, "documents": []}]}),
    ("Claim 1: z -> supported by 1\nyes", None),
    ("", None),
])
def test_parse_claims(text, want):
    assert parse_claims(text) == want


AUDIT = [{"audit_id": "a0001", "question": "agree", "history": [], "passages": ["p1", "p2"]},
         {"audit_id": "a0002", "question": "disagree", "history": [], "passages": ["p1"]},
         {"audit_id": "a0003", "question": "unreadable", "history": [], "passages": []}]


def _auditor(r):
    sys, user = r.messages[0]["content"], _user(r)
    q = user.split("Latest question: ")[1].split("\n")[0]
    if "Reviewer A" in user:
        return "no\nSupport: none\nReason: nothing helps." if q == "disagree" else "garbled"
    claims = "one claim at a time" in sys
    if q == "agree":
        return ("Claim 1: the date -> supported by 1\nLabel: yes" if claims else
                "yes\nSupport: 1\nReason: doc 1 says it.")
    if q == "disagree":
        return ("Claim 1: the date -> supported by 1\nClaim 2: the place -> not supported\nLabel: partial" if claims
                else "yes\nSupport: 1\nReason: close enough.")
    return "Label: no" if claims else "I am not sure."


def test_run_audit_adjudicates_only_disagreements():
    eng = Scripted(_auditor)
    out = run_audit(AUDIT, eng, PROMPTS["audit"])
    assert eng.sizes == [6, 2]  # both procedures for 3 items, then the 2 disagreements
    a, b, c = out
    assert (a["holistic"], a["claims"], a["agree"], a["adjudicated"], a["final"]) == ("yes", "yes", True, None, "yes")
    assert a["raw_adjudicated"] is None and a["support_holistic"] == [1] and a["support_claims"] == [1]
    assert (b["holistic"], b["claims"], b["agree"], b["adjudicated"], b["final"]) == \
        ("yes", "partial", False, "no", "no")  # the adjudicated label is final
    assert (c["holistic"], c["claims"], c["agree"], c["adjudicated"], c["final"]) == \
        (None, "no", False, None, None)  # adjudication unreadable -> no final label
    assert c["raw_adjudicated"] == "garbled" and [r["audit_id"] for r in out] == ["a0001", "a0002", "a0003"]
    adj = _user(eng.requests[1][0])
    assert "Reviewer A's label: yes" in adj and "Reviewer B's label: partial" in adj and "-> not supported" in adj
    assert "Reviewer A's label: (unreadable)" in _user(eng.requests[1][1])
    assert "a0002" not in adj  # the auditor never sees ids
    assert eng.requests[0][1].sampling.max_tokens == 320 and eng.requests[1][0].sampling.max_tokens == 96


def test_run_audit_no_disagreement_one_call():
    eng = Scripted(_auditor)
    out = run_audit(AUDIT[:1], eng, PROMPTS["audit"], sampling=Sampling(max_tokens=32))
    assert eng.sizes == [2] and out[0]["final"] == "yes" and out[0]["agree"]
    assert all(r.sampling.max_tokens == 32 for r in eng.requests[0])
    with pytest.raises(ValueError):
        audit_messages(PROMPTS["audit"], AUDIT[0], "vote")


# ---------------------------------------------------------------------------------------
# The real tiny model
# ---------------------------------------------------------------------------------------


@pytest.mark.tinymodel
def test_read_and_content_with_the_real_tiny_model(tmp_path):
    from convrag.llm.engine import load_engine

    eng = load_engine("smollm2-135m", REPO_ROOT / "config" / "models.yaml", tmp_path / "c.sqlite")
    recs = read(ITEMS, eng, READER, Sampling(max_tokens=24))
    assert len(recs) == 3 and [r["item_id"] for r in recs] == [it["item_id"] for it in ITEMS]
    assert all(0.0 < r["p_answerable"] < 1.0 for r in recs)
    assert all(r["status"] in (*STATUSES, None) and r["parsed"] == (r["status"] is not None) for r in recs)
    unparsed = sum(r["status"] is None for r in recs)
    assert 0 <= unparsed <= 3
    assert eng.accounting.calls == 6 and eng.accounting.requests == 6
    calls, hits = eng.accounting.calls, eng.accounting.cache_hits
    again = read(ITEMS, eng, READER, Sampling(max_tokens=24))
    assert eng.accounting.calls == calls and eng.accounting.cache_hits == hits + 6  # all from the cache
    assert [r["p_answerable"] for r in again] == pytest.approx([r["p_answerable"] for r in recs])

    v = run_judge(CONTENT_REFERENCE, ITEMS[:2], eng, PROMPTS["content"], max_tokens=24)
    assert [x["item_id"] for x in v] == ["t1|fusion", "t1|none"] and all(x["judge"] == CONTENT_REFERENCE.name for x in v)
    for x in v:
        assert x["method"] == "llm" and isinstance(x["raw"], str) and x["parsed"] == (x["value"] is not None)
        assert x["value"] is None or (x["value"]["label"] in ("yes", "partial", "no")
                                      and (x["value"]["support"] is None or isinstance(x["value"]["support"], list)))
    assert eng.accounting.calls == calls + 2
