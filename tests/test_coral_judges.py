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


def test_judge_table_hand_computed():
    from convrag.studies.coral.analyses import JUDGE_COLUMN, judge_table

    rows = [("win", "win"), ("draw", "lose"), ("lose", "lose"), ("draw", None), (None, "win")]
    df = pd.DataFrame([{"task_id": f"t{i}", "model": "m", "strategy": "rewrite", "compare_model": "big",
                        "comparison": a, f"{JUDGE_COLUMN}small": b} for i, (a, b) in enumerate(rows)])
    t = judge_table(df).set_index("judge")
    assert list(t.index) == ["big", "small"]
    # big decided 4: win 1, draw 2, lose 1; small decided 4: win 2, lose 2
    assert (t.loc["big", "win"], t.loc["big", "draw"], t.loc["big", "lose"], t.loc["big", "compared"]) == \
        (25.0, 50.0, 25.0, 4)
    assert (t.loc["small", "win"], t.loc["small", "draw"], t.loc["small", "lose"]) == (50.0, 0.0, 50.0)
    # both decided t0-t2: 2 of 3 equal; kappa by hand: p_o = 2/3; big (win, draw, lose) = 1/3 each,
    # small (win 1/3, lose 2/3): p_e = 1/9 + 0 + 2/9 = 1/3; kappa = (2/3 - 1/3) / (2/3) = 0.5
    assert t.loc["small", "both_decided"] == 3 and t.loc["small", "agreement"] == pytest.approx(2 / 3)
    assert t.loc["small", "kappa"] == pytest.approx(0.5)
    # the compare model against itself: blank, with its reason (issue 45), not a measured 1.000
    assert math.isnan(t.loc["big", "agreement"]) and math.isnan(t.loc["big", "kappa"])
    assert (t.loc["big", "role"], t.loc["small", "role"]) == ("compare model", "other judge")
    from convrag.report.blanks import blank_reasons

    r = blank_reasons(judge_table(df))
    assert any("itself" in k for k in r["agreement"]) and any("itself" in k for k in r["kappa"])
    assert judge_table(df.drop(columns=["comparison"])).empty


@pytest.mark.tinymodel
def test_evaluate_cli_other_judges_same_weights_agree(tmp_path):
    """Two registry names for the same SmolLM2 weights judge the same pairs: their outcomes agree
    exactly, and the second judge is answered from the cache (keyed on the weights, not the
    name); each judge is accounted apart."""
    import json

    import yaml

    from convrag.cli import main
    from convrag.io import write_jsonl
    from convrag.records import TurnTask, write_records
    from convrag.studies.coral.analyses import JUDGE_COLUMN, judge_table

    reg = yaml.safe_load((REPO_ROOT / "config" / "models.yaml").read_text())
    write = {"smollm2-135m": reg["smollm2-135m"], "smollm2-135m-b": reg["smollm2-135m"]}
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(write))
    tasks = [TurnTask(task_id=f"t{i}", benchmark="coral", conversation_id=f"c{i}", turn=1, history=[],
                      question="When did the Harl lighthouse open?", reference_answers=["It opened in 1881."])
             for i in range(2)]
    write_records(tmp_path / "tasks.jsonl", tasks)
    write_jsonl(tmp_path / "answers.jsonl", [
        {"task_id": f"t{i}", "model": "m", "strategy": "rewrite", "response": r, "prompt_tokens": 10,
         "passages": [{"id": "p1", "title": "Harl", "text": "The Harl lighthouse opened in 1881."}]}
        for i, r in enumerate(["The Harl lighthouse opened in 1881 [1].", "Ships sail at night."])])
    out = tmp_path / "scores.parquet"
    main(["coral", "evaluate", "--tasks", str(tmp_path / "tasks.jsonl"), "--answers", str(tmp_path / "answers.jsonl"),
          "--model", "m", "--strategy", "rewrite", "--nli-model", "smollm2-135m", "--nli-max-tokens", "2",
          "--registry", str(tmp_path / "models.yaml"), "--cache", str(tmp_path / "c.sqlite"),
          "--prompts-dir", str(REPO_ROOT / "resources" / "prompts"), "--compare-model", "smollm2-135m",
          "--judges", "smollm2-135m-b", "--out", str(out), "--verdicts", str(tmp_path / "v.jsonl"),
          "--accounting", str(tmp_path / "acc.json")])
    df = pd.read_parquet(out)
    assert list(df["comparison"]) == list(df[f"{JUDGE_COLUMN}smollm2-135m-b"])
    t = judge_table(df).set_index("judge")
    assert t.loc["smollm2-135m-b", "agreement"] == 1.0 and t.loc["smollm2-135m-b", "both_decided"] == 2
    acc = json.loads((tmp_path / "acc.json").read_text())
    assert acc["pairwise_judge"]["calls"] == 4
    assert (acc["pairwise_judge:smollm2-135m-b"]["calls"], acc["pairwise_judge:smollm2-135m-b"]["cache_hits"]) == (0, 4)
    verdicts = [json.loads(x) for x in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert sum(v.get("judge_model") == "smollm2-135m-b" for v in verdicts) == 4


def test_coral_budgets_are_defined_once_and_match_the_schema():
    """The CLI leaves --nli/--compare/--compress-max-tokens unset by default: the nli_entailment
    and pairwise judges' own budgets and COMPRESS_MAX_TOKENS apply, and they are the schema's
    defaults, which the rules pass (issue 46: one definition of each default)."""
    import yaml

    from convrag.config import REPO_ROOT
    from convrag.metrics.citation import NLI_JUDGE
    from convrag.studies.coral.framework import COMPRESS_MAX_TOKENS
    from convrag.studies.coral.judges import PAIRWISE

    schema = yaml.safe_load((REPO_ROOT / "workflow" / "schemas" / "studies" / "coral.schema.yaml").read_text())
    text = yaml.safe_dump(schema)

    def default(key):
        found = []

        def walk(node):
            if isinstance(node, dict):
                for k, v in node.items():
                    if k == key and isinstance(v, dict) and "default" in v:
                        found.append(v["default"])
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        walk(schema)
        assert len(found) == 1, (key, found)
        return found[0]

    assert default("nli_max_tokens") == NLI_JUDGE.max_tokens == 8
    assert default("compare_max_tokens") == PAIRWISE.max_tokens == 4
    assert "compression" in text and COMPRESS_MAX_TOKENS == 128
    comp = schema["properties"]["compression"]["properties"]["max_tokens"]
    assert comp["default"] == COMPRESS_MAX_TOKENS
