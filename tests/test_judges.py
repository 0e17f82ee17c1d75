"""Turn classifier and answer judge: rules that need no model, parsing, batching, counted
parse failures (scripted engine), and one run of each with the real tiny model."""

import pytest
import yaml

from convrag.config import REPO_ROOT
from convrag.studies.lic_rag.judges import CATEGORIES, classify_turns, parse_category
from convrag.judges.correctness import judge_answers, parse_verdict
from convrag.llm.types import Response
from convrag.records import Conversation

PROMPTS = REPO_ROOT / "resources" / "prompts" / "lic_rag"
CLS = yaml.safe_load((PROMPTS / "classifier.yaml").read_text())
JUDGE = yaml.safe_load((PROMPTS / "judge.yaml").read_text())


class Scripted:
    def __init__(self, replies):
        self.replies, self.calls = list(replies), []

    def generate(self, reqs, desc=None):
        self.calls.append(reqs)
        return [Response(text=self.replies.pop(0), prompt_tokens=5, completion_tokens=1, finish_reason="stop")
                for _ in reqs]


def _conv(replies, cid="c1"):
    turns = []
    for i, r in enumerate(replies):
        turns += [{"role": "user", "text": f"user {i}"}, {"role": "assistant", "text": r, "answer": None, "answered": False}]
    return Conversation(cid, "lic_rag", "q1", "d", "SHARDED", "history", "bm25", "m", 0, turns)


def test_parse_category():
    assert parse_category("answer_attempt") == "answer_attempt"
    assert parse_category("Label: Answer attempt.") == "answer_attempt"
    assert parse_category(" clarification\n") == "clarification"
    assert parse_category("It is a HEDGE") == "hedge"
    assert parse_category("a question") is None and parse_category(None) is None
    assert set(CATEGORIES) == {"answer_attempt", "clarification", "interrogation", "discussion", "hedge", "refuse",
                               "missing"}


def test_classify_turns_rules_batching_and_failures():
    eng = Scripted(["clarification", "banana", "answer_attempt"])
    recs = classify_turns([_conv(["Which one?", "   ", "Hmm", "Answer: X"])], eng, CLS)
    assert len(eng.calls) == 1 and len(eng.calls[0]) == 3  # the empty reply needs no call
    assert [r["turn"] for r in recs] == [1, 2, 3, 4]
    assert [r["category"] for r in recs] == ["clarification", "missing", None, "answer_attempt"]
    assert [r["method"] for r in recs] == ["llm", "rule", "llm", "llm"]
    assert recs[2]["parsed"] is False and recs[2]["raw"] == "banana"  # recorded, not guessed
    # the classifier sees the user's last message and the reply
    assert "User: user 0" in eng.calls[0][0].messages[-1]["content"] and "Which one?" in eng.calls[0][0].messages[-1]["content"]


def test_parse_verdict():
    assert parse_verdict("CORRECT") is True and parse_verdict("Verdict: incorrect.") is False
    assert parse_verdict("correct, mostly") is True and parse_verdict("maybe") is None


def test_judge_rules_dedupe_and_failures():
    items = [
        {"key": "a", "question": "Who?", "answers": ["Sera Lund"], "prediction": None},
        {"key": "b", "question": "Who?", "answers": ["Sera Lund"], "prediction": "sera lund."},
        {"key": "c", "question": "Who?", "answers": ["Sera Lund"], "prediction": "S. Lund"},
        {"key": "d", "question": "Who?", "answers": ["Sera Lund"], "prediction": "S. Lund"},
        {"key": "e", "question": "Who?", "answers": ["Sera Lund"], "prediction": "Tolo"},
    ]
    eng = Scripted(["CORRECT", "no idea"])
    out = {r["key"]: r for r in judge_answers(items, eng, JUDGE)}
    assert len(eng.calls) == 1 and len(eng.calls[0]) == 2  # c and d are one question to the judge
    assert (out["a"]["correct"], out["a"]["method"]) == (False, "no_answer")
    assert (out["b"]["correct"], out["b"]["method"]) == (True, "exact_match")
    assert out["c"]["correct"] is True and out["d"]["correct"] is True and out["c"]["method"] == "llm"
    assert out["e"]["correct"] is None and out["e"]["parsed"] is False and out["e"]["raw"] == "no idea"


@pytest.mark.tinymodel
def test_classifier_and_judge_with_the_real_tiny_model(tmp_path):
    from convrag.llm.engine import EnginePool

    pool = EnginePool(REPO_ROOT / "config" / "models.yaml", tmp_path / "c.sqlite")
    eng = pool.engine("smollm2-135m")
    recs = classify_turns([_conv(["Which painter do you mean?", "Tolo Vanes was born in Kamira.\nAnswer: Kamira",
                                  ""])], eng, CLS)
    assert [r["method"] for r in recs] == ["llm", "llm", "rule"]
    assert all(r["raw"] is not None for r in recs[:2])
    assert all((r["category"] in CATEGORIES) == r["parsed"] for r in recs)
    verdicts = judge_answers([{"key": "x", "question": "Who founded the Orvik Theatre?", "answers": ["Sera Lund"],
                               "prediction": "Lund, Sera"}], pool.engine("smollm2-135m"), JUDGE)
    assert verdicts[0]["method"] == "llm" and verdicts[0]["raw"] is not None
    assert (verdicts[0]["correct"] is None) == (not verdicts[0]["parsed"])
    assert eng.accounting.calls == 2 and eng.accounting.prompt_tokens > 0


def test_judge_budgets_are_the_schemas_defaults():
    """A judge's reply budget is defined by its spec (used when a caller names none) and the
    config's default is the same number (issue 46: one definition, held together here)."""
    from convrag.judges.content import CONTENT
    from convrag.judges.correctness import JUDGE as CORRECTNESS

    cross = yaml.safe_load((REPO_ROOT / "workflow" / "schemas" / "studies" / "cross.schema.yaml").read_text())
    props = cross["properties"]
    assert props["judge"]["properties"]["max_tokens"]["default"] == CORRECTNESS.max_tokens == 8
    assert props["content"]["properties"]["max_tokens"]["default"] == CONTENT.max_tokens == 24
