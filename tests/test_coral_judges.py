"""CORAL's win / draw / lose judge: parsing, the two-order rule, batching and counting, with a
scripted engine (hand-checkable) and once with the real tiny model."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from convrag.config import REPO_ROOT, read_prompt_file
from convrag.errors import ConfigError
from convrag.llm.types import Response
from convrag.studies.coral.evaluate import table3
from convrag.studies.coral.judges import PROMPT_FILE, check_pairwise_prompts, compare, outcome, parse_choice

PROMPTS = read_prompt_file(REPO_ROOT / "resources" / "prompts" / PROMPT_FILE, check_pairwise_prompts)


@pytest.mark.parametrize("text,want", [("A", "A"), ("B.", "B"), (" Tie", "tie"), ("Answer B is better", "B"),
                                       ("a tie", "tie"), ("I think a better one is A", "A"), ("neither", None),
                                       ("", None), (None, None)])
def test_parse_choice(text, want):
    assert parse_choice(text) == want


def test_outcome_needs_both_orders():
    assert outcome("A", "B") == "win"          # model first preferred, golden first: model (B) preferred
    assert outcome("B", "A") == "lose"
    assert outcome("A", "A") == "draw"         # position bias: always the first
    assert outcome("tie", "B") == "draw"
    assert outcome(None, "B") is None


class Scripted:
    """Replies from a function of the last user message; counts batched calls."""

    def __init__(self, fn):
        self.fn, self.calls, self.asked = fn, 0, 0

    def generate(self, reqs, desc=None):
        self.calls += 1
        self.asked += len(reqs)
        return [Response(text=self.fn(r.messages[-1]["content"]), prompt_tokens=1, completion_tokens=1,
                         finish_reason="stop") for r in reqs]


def test_compare_batches_both_orders_and_counts():
    def prefer_long(user):  # prefers the longer answer, "tie" on equal length, garbage on "???"
        if "???" in user:
            return "hmm"
        a = user.split("Answer A: ")[1].split("\n\nAnswer B: ")[0]
        b = user.split("\n\nAnswer B: ")[1].split("\n\nWhich")[0]
        return "tie" if len(a) == len(b) else ("A" if len(a) > len(b) else "B")

    recs = [{"task_id": "t1", "model": "m", "strategy": "s", "response": "a much longer answer [1]"},
            {"task_id": "t2", "model": "m", "strategy": "s", "response": "short"},
            {"task_id": "t3", "model": "m", "strategy": "s", "response": "same!"},
            {"task_id": "t4", "model": "m", "strategy": "s", "response": "???"},
            {"task_id": "t5", "model": "m", "strategy": "s", "response": "no golden"}]
    eng = Scripted(prefer_long)
    out, verdicts, summary = compare(recs, ["q"] * 5, ["golden", "a golden answer", "same?", "golden", None],
                                     eng, PROMPTS)
    assert out == ["win", "lose", "draw", None, None]
    assert eng.calls == 1 and eng.asked == 8  # 4 pairs x 2 orders in one call
    assert len(verdicts) == 8 and verdicts[0]["item_id"].endswith("|model_first")
    assert summary == {"pairs": 4, "no_reference": 1, "undecided": 1, "unparsed_replies": 2,
                       "win": 1, "draw": 1, "lose": 1}


def test_table3_shares_of_decided_comparisons():
    rows = [{"model": "m", "strategy": "raw_context", "bleu1": 0.5, "rougeL": 0.5, "citation_recall": 1.0,
             "citation_precision": 1.0, "citation_skipped": False, "prompt_tokens": 10, "comparison": c}
            for c in ("win", "win", "lose", "draw", None)]
    t = table3(pd.DataFrame(rows))
    assert t.loc[0, "win"] == 50.0 and t.loc[0, "lose"] == 25.0 and t.loc[0, "draw"] == 25.0
    assert t.loc[0, "compared"] == 4
    t2 = table3(pd.DataFrame(rows).drop(columns="comparison"))
    assert math.isnan(t2.loc[0, "win"]) and t2.loc[0, "compared"] == 0


def test_prompt_check_names_the_missing_placeholder(tmp_path):
    bad = dict(PROMPTS, user="Question: {question} A: {a}")
    with pytest.raises(ConfigError, match=r"\{b\}"):
        check_pairwise_prompts(bad, "pairwise.yaml")


@pytest.mark.tinymodel
def test_compare_with_the_real_tiny_model(tmp_path):
    from convrag.llm.engine import load_engine

    eng = load_engine("smollm2-135m", REPO_ROOT / "config" / "models.yaml", tmp_path / "c.sqlite")
    recs = [{"task_id": f"t{i}", "model": "smollm2-135m", "strategy": "rewrite", "response": r}
            for i, r in enumerate(["The Harl lighthouse opened in 1881 [1].", "Ships."])]
    out, verdicts, summary = compare(recs, ["When did the Harl lighthouse open?"] * 2,
                                     ["It was completed in 1881.", "It was completed in 1881."], eng, PROMPTS)
    assert len(verdicts) == 4 and all(v["judge"] == "coral_pairwise" for v in verdicts)
    assert all(o in ("win", "draw", "lose", None) for o in out)
    assert summary["pairs"] == 2 and summary["unparsed_replies"] == sum(not v["parsed"] for v in verdicts)
    assert eng.accounting.calls == 4 and eng.accounting.batches == 1  # both orders of both pairs, one batch
