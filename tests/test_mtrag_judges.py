"""MTRAG-UN judges and RAGAS-style faithfulness: message layout, batching, the official parse
edge cases, faithfulness arithmetic and NaN causes (scripted engine), and one end-to-end run
with the real tiny model."""

import json
import math

import pytest
import yaml

from convrag.config import REPO_ROOT
from convrag.llm.judge import JUDGES as REGISTRY
from convrag.llm.judge import run_judge
from convrag.llm.types import Response
from convrag.metrics.faithfulness import faithfulness_scores, parse_statements, parse_verdicts
from convrag.metrics.mtrag import parse_rb_llm_rating
from convrag.studies.mtrag_un.judges import (
    ALLOWED,
    CLARIFICATION,
    IDK,
    NO_EARLIER_TURNS,
    RB_LLM,
    UNDERSPECIFIED_TYPE,
    judge_all,
    judge_summary,
    load_prompts,
    parse_underspecified_type,
    rb_llm_fallback,
)

PROMPTS_DIR = REPO_ROOT / "resources" / "prompts"
P = load_prompts(PROMPTS_DIR)


class Scripted:
    """Answers each request with ``reply(request)``; records every generate call."""

    def __init__(self, reply):
        self.reply, self.calls = reply, []

    def generate(self, reqs, desc=None):
        reqs = list(reqs)
        self.calls.append((desc, reqs))
        return [Response(text=self.reply(r), prompt_tokens=5, completion_tokens=1, finish_reason="stop") for r in reqs]


def _last(req) -> str:
    return req.messages[-1]["content"]


TURNS = [{"speaker": "user", "text": "Who built the Harl lighthouse?"},
         {"speaker": "agent", "text": "Tove Marsh built it."},
         {"speaker": "user", "text": "when was it finished?"}]


def _item(i, answerability="ANSWERABLE", response="It was finished in 1881.", turns=TURNS):
    return {"item_id": f"t{i}", "conversation_turns": turns, "response": response,
            "targets": ["It was finished in 1881.", "In 1881."],
            "contexts": ["The Harl lighthouse was finished in 1881.", "Tove Marsh was an engineer."],
            "answerability": answerability}


# ---- prompt files and registration -------------------------------------------------------


def test_judges_registered_with_their_prompt_files():
    for name, file in [("mtrag_idk", "idk"), ("mtrag_rb_llm", "rb_llm"), ("mtrag_clarification", "clarification"),
                       ("ragas_statements", "faithfulness_statements"), ("ragas_verdicts", "faithfulness_verdicts")]:
        j = REGISTRY[name]
        assert j.prompt == f"mtrag_un/{file}.yaml"
        d = yaml.safe_load((PROMPTS_DIR / j.prompt).read_text())
        assert {"system", "user"} <= set(d)
    assert 4 <= len(P["idk"]["examples"]) <= 6
    assert {ex["label"] for ex in P["idk"]["examples"]} == {"yes", "no", "partial"}
    assert IDK.max_tokens < CLARIFICATION.max_tokens < RB_LLM.max_tokens


# ---- message layout ----------------------------------------------------------------------


def test_rb_llm_messages_split_conversation_and_join_documents():
    eng = Scripted(lambda r: "Fine.\nRating: [[8]]")
    out = judge_all([_item(0)], eng, PROMPTS_DIR, which=("rb_llm",))
    (desc, reqs), = eng.calls
    msgs = reqs[0].messages
    assert [m["role"] for m in msgs] == ["system", "user"] and "Rating: [[n]]" in msgs[0]["content"]
    user = msgs[1]["content"]
    earlier = user.split("## Earlier turns\n")[1].split("\n\n## Current question")[0]
    assert earlier == "user: Who built the Harl lighthouse?\nagent: Tove Marsh built it."
    assert user.split("## Current question\n")[1].startswith("when was it finished?\n\n## Reference answer\n"
                                                              "It was finished in 1881.\n\n")
    assert "In 1881." not in user  # only the first target is the reference
    assert user.endswith("## Documents\nThe Harl lighthouse was finished in 1881.\n\nTove Marsh was an engineer.")
    assert out["rb_llm"][0]["value"] == 0.8 and out["rb_llm"][0]["judge"] == "mtrag_rb_llm"

    # one user line only: no earlier turns, whatever precedes it
    eng = Scripted(lambda r: "Rating: [[3]]")
    judge_all([_item(0, turns=[{"speaker": "agent", "text": "Hello!"}, {"speaker": "user", "text": "Hi, who?"}])],
              eng, PROMPTS_DIR, which=("rb_llm",))
    user = eng.calls[0][1][0].messages[1]["content"]
    assert f"## Earlier turns\n{NO_EARLIER_TURNS}\n\n## Current question\nHi, who?\n" in user


def test_idk_and_clarification_messages():
    eng = Scripted(lambda r: "no")
    judge_all([_item(0, "UNDERSPECIFIED")], eng, PROMPTS_DIR, which=("idk", "clarification"))
    (_, idk_reqs), (_, cl_reqs) = eng.calls
    m = idk_reqs[0].messages
    n_ex = len(P["idk"]["examples"])
    assert len(m) == 1 + 2 * n_ex + 1 and [x["role"] for x in m[1:3]] == ["user", "assistant"]
    assert m[2]["content"] == P["idk"]["examples"][0]["label"]
    rendered = "user: Who built the Harl lighthouse?\nagent: Tove Marsh built it.\nuser: when was it finished?"
    assert f"Conversation:\n{rendered}\n\nReply:\nIt was finished in 1881.\n" in _last(idk_reqs[0])
    c = cl_reqs[0].messages
    assert _last(cl_reqs[0]) == "Reply to judge:\nIt was finished in 1881."
    assert "lighthouse" not in "".join(x["content"] for x in c)  # the clarification judge sees only the response
    assert json.loads(c[2]["content"])["decision"] in ("yes", "no")  # few-shot outputs are valid JSON


# ---- batching ----------------------------------------------------------------------------


def test_one_batched_call_per_judge_identical_prompts_once():
    def reply(r):
        s = r.messages[0]["content"]
        if "split an answer" in s:
            return '{"statements": ["The Harl lighthouse was finished in 1881."]}'
        if "check statements" in s:
            return '[{"statement": "x", "reason": "stated", "verdict": 1}]'
        if "Rating: [[n]]" in s:
            return "Rating: [[9]]"
        if "clarification request" in s:
            return '{"decision": "no", "explanation": "answers"}'
        return "no"

    items = [_item(0), _item(1), _item(2, "UNDERSPECIFIED", response="Which lighthouse do you mean?")]
    eng = Scripted(reply)
    out = judge_all(items, eng, PROMPTS_DIR)
    descs = [d for d, _ in eng.calls]
    assert descs == ["judge mtrag_idk", "judge mtrag_rb_llm", "judge mtrag_clarification",
                     "faithfulness statements", "faithfulness verdicts", "judge mtrag_underspecified_type"]
    sizes = [len(r) for _, r in eng.calls]
    # items 0 and 1 are identical: asked once; clarification only for the UNDERSPECIFIED item;
    # step 2 depends only on (contexts, statements), the same for all three items here
    assert sizes == [2, 2, 1, 2, 1, 1]
    assert [v["item_id"] for v in out["idk"]] == ["t0", "t1", "t2"] and [v["value"] for v in out["idk"]] == [0, 0, 0]
    assert [v["value"] for v in out["rb_llm"]] == [0.9, 0.9, 0.9]
    assert [r["faithfulness"] for r in out["faithfulness"]] == [1.0, 1.0, 1.0]
    assert out["faithfulness"][0]["raw_statements"] == out["faithfulness"][1]["raw_statements"]
    # max_tokens: defaults per judge, overridable
    samp = {d: r[0].sampling.max_tokens for d, r in eng.calls}
    assert samp == {"judge mtrag_idk": 16, "judge mtrag_rb_llm": 512, "judge mtrag_clarification": 192,
                    "faithfulness statements": 512, "faithfulness verdicts": 1024,
                    "judge mtrag_underspecified_type": 16}
    eng = Scripted(reply)
    judge_all(items, eng, PROMPTS_DIR, max_tokens={"idk": 4, "faithfulness": 64})
    assert {d: r[0].sampling.max_tokens for d, r in eng.calls}["judge mtrag_idk"] == 4
    assert {d: r[0].sampling.max_tokens for d, r in eng.calls}["faithfulness verdicts"] == 64
    with pytest.raises(ValueError, match="unknown max_tokens"):
        judge_all(items, eng, PROMPTS_DIR, max_tokens={"judge": 4})
    with pytest.raises(ValueError, match="unknown judge"):
        judge_all(items, eng, PROMPTS_DIR, which=("idk", "ragas"))


# ---- parse outcomes ----------------------------------------------------------------------


def test_rb_llm_fallback_is_counted():
    cases = {"Good answer.\nRating: [[7]]": (0.7, False),
             "Rating: [[5]]": (0.5, False),  # a real 5: not a fallback
             "I liked it a lot.": (0.5, True),  # nothing matches
             "Score: 86/100": (0.5, True),  # read as 86 -> 8.6 on the 0-1 scale: out of range
             "Rating: [[0]]": (0.5, True),  # 0 is out of range
             "Rating: [[12]]": (0.5, True),
             "for example: Rating: [[5]]\nno score given": (0.5, True),  # echoed hint removed
             "Rating: [[8]] overall, 6 out of 10": (0.6, False)}  # the last pattern wins
    for raw, (value, fb) in cases.items():
        assert parse_rb_llm_rating(raw) == pytest.approx(value), raw
        assert rb_llm_fallback(raw) is fb, raw
    eng = Scripted(lambda r: {"t0": "Rating: [[7]]", "t1": "no rating here", "t2": "Rating: [[5]]"}[
        "t0" if "first" in _last(r) else "t1" if "second" in _last(r) else "t2"])
    items = [_item(0, response="first"), _item(1, response="second"), _item(2, response="third")]
    res = judge_all(items, eng, PROMPTS_DIR, which=("rb_llm",))
    assert [v["value"] for v in res["rb_llm"]] == [0.7, 0.5, 0.5]
    assert judge_summary(res)["rb_llm"] == {"items": 3, "unparsed": 0, "fallbacks": 1}


def test_idk_values_and_unknown():
    replies = {"a": "Yes.", "b": "no", "c": "partial", "d": "**yes**", "e": "  Nope", "f": ""}
    items = [_item(i, response=k) for i, k in enumerate(replies)]
    eng = Scripted(lambda r: replies[_last(r).split("Reply:\n")[1][0]])
    res = judge_all(items, eng, PROMPTS_DIR, which=("idk",))
    assert [v["value"] for v in res["idk"]] == [1, 0, 0.5, "unknown", 0.5, "unknown"]
    assert all(v["parsed"] for v in res["idk"])
    assert judge_summary(res)["idk"] == {"items": 6, "unparsed": 0, "values": {"1": 1, "0": 1, "0.5": 2, "unknown": 2}}


def test_idk_empty_response_is_still_asked():
    eng = Scripted(lambda r: "yes")
    res = judge_all([_item(0, response=""), _item(1, response=None)], eng, PROMPTS_DIR, which=("idk",))
    assert len(eng.calls) == 1 and len(eng.calls[0][1]) == 1  # both render the same empty reply
    assert [v["value"] for v in res["idk"]] == [1, 1] and {v["method"] for v in res["idk"]} == {"llm"}


def test_clarification_only_on_underspecified_and_parse():
    replies = {"A": '{"decision": "yes", "explanation": "asks"}',
               "B": '```json\n{"decision": "No", "explanation": "answers"}\n```',
               "C": "I think it does ask something.",
               "D": '{"decision": "yes.", "explanation": "x"}'}
    items = [_item(0, "UNDERSPECIFIED", response="A"), _item(1, "ANSWERABLE", response="A"),
             _item(2, ["UNDERSPECIFIED"], response="B"), _item(3, "UNANSWERABLE", response="C"),
             _item(4, "UNDERSPECIFIED", response="C"), _item(5, "UNDERSPECIFIED", response="D")]
    eng = Scripted(lambda r: replies[_last(r).rsplit("\n", 1)[1]])
    res = judge_all(items, eng, PROMPTS_DIR, which=("clarification",))["clarification"]
    assert len(eng.calls) == 1 and len(eng.calls[0][1]) == 4
    assert [v["value"] for v in res] == [1.0, None, 0.0, None, 0.5, 0.5]
    assert [v["method"] for v in res] == ["llm", "skipped", "llm", "skipped", "llm", "llm"]
    assert res[1] == {"item_id": "t1", "judge": "mtrag_clarification", "value": None, "method": "skipped",
                      "parsed": True, "raw": None}
    assert [v["item_id"] for v in res] == [f"t{i}" for i in range(6)]
    assert judge_summary({"clarification": res})["clarification"] == {
        "items": 6, "unparsed": 0, "values": {"1.0": 1, "0.0": 1, "0.5": 2}, "asked": 4, "skipped": 2,
        "undecided": 2}


def test_underspecified_type_parse_and_only_on_underspecified():
    # the reply's one type word, case and punctuation ignored; none or several: invalid (None)
    assert parse_underspecified_type("clarify") == "clarify"
    assert parse_underspecified_type("  Multiple.\n") == "multiple"
    assert parse_underspecified_type("The reply is SINGLE: it assumes one reading.") == "single"
    assert parse_underspecified_type("single or multiple") is None  # two types named
    assert parse_underspecified_type("clarification") is None  # not one of the words
    assert parse_underspecified_type("") is None and parse_underspecified_type(None) is None
    assert UNDERSPECIFIED_TYPE.prompt == "mtrag_un/underspecified_type.yaml" and UNDERSPECIFIED_TYPE.labels == (
        "clarify", "multiple", "single")
    d = P["underspecified_type"]
    assert {ex["label"] for ex in d["examples"]} == {"clarify", "multiple", "single"}
    replies = {"A": "clarify", "B": "Multiple", "C": "I cannot tell."}
    items = [_item(0, "UNDERSPECIFIED", response="A"), _item(1, "ANSWERABLE", response="A"),
             _item(2, ["UNDERSPECIFIED"], response="B"), _item(3, "UNDERSPECIFIED", response="C")]
    eng = Scripted(lambda r: replies[_last(r).split("Reply:\n", 1)[1].split("\n", 1)[0]])
    res = judge_all(items, eng, PROMPTS_DIR, which=("underspecified_type",))["underspecified_type"]
    assert len(eng.calls) == 1 and len(eng.calls[0][1]) == 3  # one batched call, UNDERSPECIFIED items only
    assert eng.calls[0][1][0].messages[0]["role"] == "system" and len(eng.calls[0][1][0].messages) == 2 + 2 * 4
    assert [v["value"] for v in res] == ["clarify", None, "multiple", None]
    assert [v["method"] for v in res] == ["llm", "skipped", "llm", "llm"]
    assert res[3]["parsed"] is False and res[3]["raw"] == "I cannot tell."  # invalid: recorded, never guessed
    assert judge_summary({"underspecified_type": res})["underspecified_type"] == {
        "items": 4, "unparsed": 1, "values": {"clarify": 1, "multiple": 1, "None": 1}, "asked": 3, "skipped": 1}


# ---- faithfulness ------------------------------------------------------------------------


def test_parse_statements_and_verdicts_tolerantly():
    assert parse_statements('["A is B.", "C is D."]') == ["A is B.", "C is D."]
    assert parse_statements('Sure:\n```json\n{"statements": ["A  is\\nB."]}\n```') == ["A is B."]
    assert parse_statements('Here: {"Statements": [{"statement": "X."}]} done') == ["X."]
    assert parse_statements('{"statements": []}') == []
    assert parse_statements("A is B. C is D.") is None
    assert parse_statements('{"statements": [1, 2]}') is None
    assert parse_statements('{"statements": ["cut') is None
    assert parse_verdicts('[{"statement": "a [1]", "reason": "r", "verdict": 1}, {"verdict": "0"}]') == [1, 0]
    assert parse_verdicts('```json\n{"verdicts": [{"verdict": true}, {"verdict": "No"}]}\n```') == [1, 0]
    assert parse_verdicts('{"statement": "a", "verdict": 0}') == [0]
    assert parse_verdicts("[1, 0, 1]") == [1, 0, 1]
    assert parse_verdicts('[{"verdict": 2}]') is None
    assert parse_verdicts('[{"verdict": -1}]') is None
    assert parse_verdicts("supported") is None and parse_verdicts("[]") is None


def _fitem(i, response, contexts=("Ctx one.", "Ctx two.")):
    return {"item_id": f"f{i}", "question": f"user: q{i}", "response": response, "contexts": list(contexts)}


def test_faithfulness_arithmetic_and_nan_causes():
    statements = {"r3": '{"statements": ["S1.", "S2.", "S3."]}', "r0": '{"statements": []}',
                  "rbad": "I cannot split this.", "rwrong": '["W1.", "W2."]'}
    verdicts = {'["S1.", "S2.", "S3."]': json.dumps([{"statement": s, "reason": "r", "verdict": v}
                                                     for s, v in [("S1.", 1), ("S2.", 0), ("S3.", 1)]]),
                '["W1.", "W2."]': '[{"statement": "W1.", "reason": "r", "verdict": 1}]'}

    def reply(r):
        last = _last(r)
        if last.startswith("Question:"):
            return statements[last.rsplit("\n", 1)[1]]
        return verdicts[last.rsplit("\n", 1)[1]]

    items = [_fitem(0, "r3"), _fitem(1, "r0"), _fitem(2, "rbad"), _fitem(3, "rwrong"), _fitem(4, "  ")]
    eng = Scripted(reply)
    recs = faithfulness_scores(items, eng, P["faithfulness"][0], P["faithfulness"][1])
    assert [d for d, _ in eng.calls] == ["faithfulness statements", "faithfulness verdicts"]
    assert [len(r) for _, r in eng.calls] == [4, 2]  # the empty response is never asked
    assert recs[0]["faithfulness"] == pytest.approx(2 / 3)
    assert recs[0]["statements"] == ["S1.", "S2.", "S3."] and recs[0]["verdicts"] == [1, 0, 1]
    assert [r["status"] for r in recs] == ["ok", "no_statements", "unparsed_statements", "unparsed_verdicts",
                                           "no_statements"]
    assert all(math.isnan(r["faithfulness"]) for r in recs[1:])
    assert recs[4]["raw_statements"] is None and recs[1]["raw_verdicts"] is None
    assert recs[3]["raw_verdicts"].startswith('[{"statement": "W1."')
    # step 2 sees the contexts joined by a newline and the statements as a JSON list
    assert _last(eng.calls[1][1][0]) == 'Context:\nCtx one.\nCtx two.\n\nStatements:\n["S1.", "S2.", "S3."]'
    s = judge_summary({"faithfulness": recs})["faithfulness"]
    assert s == {"items": 5, "status": {"ok": 1, "no_statements": 2, "unparsed_statements": 1,
                                        "unparsed_verdicts": 1}, "unparsed": 2, "nan": 4, "scored": 1}


def test_faithfulness_without_any_call():
    eng = Scripted(lambda r: pytest.fail("no call expected"))
    recs = faithfulness_scores([_fitem(0, ""), _fitem(1, None)], eng, P["faithfulness"][0], P["faithfulness"][1])
    assert eng.calls == [] and [r["status"] for r in recs] == ["no_statements"] * 2


def test_registered_judge_runs_alone():
    # the registered judges also work through run_judge directly
    eng = Scripted(lambda r: "partial")
    v = run_judge(IDK, [{"item_id": "x", "conversation": "user: hi?", "response": "half"}], eng, P["idk"])
    assert v == [{"item_id": "x", "judge": "mtrag_idk", "value": 0.5, "method": "llm", "parsed": True,
                  "raw": "partial"}]


# ---- the real tiny model -----------------------------------------------------------------


@pytest.mark.tinymodel
def test_judge_all_with_real_tiny_model(tmp_path):
    from convrag.llm.engine import EnginePool

    eng = EnginePool(REPO_ROOT / "config" / "models.yaml", tmp_path / "c.sqlite").engine("smollm2-135m")
    items = [_item(0), _item(1, "UNDERSPECIFIED", response="Which lighthouse do you mean?")]
    res = judge_all(items, eng, PROMPTS_DIR, max_tokens={"idk": 4, "rb_llm": 16, "clarification": 16,
                                                         "faithfulness": 24})
    assert set(res) == {"idk", "rb_llm", "clarification", "faithfulness", "underspecified_type"}
    names = {"idk": "mtrag_idk", "rb_llm": "mtrag_rb_llm", "clarification": "mtrag_clarification",
             "faithfulness": "faithfulness", "underspecified_type": "mtrag_underspecified_type"}
    for w, recs in res.items():
        assert [r["item_id"] for r in recs] == ["t0", "t1"] and {r["judge"] for r in recs} == {names[w]}
    assert all(v["value"] in ALLOWED["idk"] or v["value"] is None for v in res["idk"])
    assert all(v["value"] is None or 0.1 <= v["value"] <= 1 for v in res["rb_llm"])
    assert all(v["value"] in ALLOWED["clarification"] or v["value"] is None for v in res["clarification"])
    assert [v["method"] for v in res["clarification"]] == ["skipped", "llm"]
    for r in res["faithfulness"]:
        assert r["status"] in ("ok", "no_statements", "unparsed_statements", "unparsed_verdicts")
        assert math.isnan(r["faithfulness"]) == (r["status"] != "ok")
        if r["status"] == "ok":
            assert 0 <= r["faithfulness"] <= 1 and len(r["verdicts"]) == len(r["statements"])
    s = judge_summary(res)
    assert s["idk"]["items"] == 2 and sum(s["idk"]["values"].values()) == 2
    assert s["idk"]["unparsed"] == sum(v["value"] is None for v in res["idk"])
    assert s["rb_llm"]["fallbacks"] == sum(rb_llm_fallback(v["raw"]) for v in res["rb_llm"])
    assert s["clarification"]["asked"] == 1 and s["clarification"]["skipped"] == 1
    assert s["clarification"]["undecided"] == sum(v["value"] == 0.5 for v in res["clarification"])
    st = s["faithfulness"]["status"]
    assert sum(st.values()) == 2 and s["faithfulness"]["scored"] == st["ok"]
    assert s["faithfulness"]["nan"] == 2 - st["ok"]
    assert eng.accounting.batches >= 4  # idk, rb_llm, clarification, statements (+ verdicts if any)
