"""LLM judge of final-answer correctness.

Token F1 punishes a right answer written differently ("J. Smith" for "John Smith", "in 1990"
for "1990", "12" for "twelve"); a judge that accepts equivalent names, spellings, dates and
number formats shows how much of a gap between conditions is wording rather than knowledge.

Rules that need no model: no answer -> incorrect (``method: no_answer``); exact match with
the gold answer or an alias (SQuAD normalisation) -> correct (``method: exact_match``).
Every other (question, gold answers, prediction) goes to the LLM once (deduplicated, one
batched call); it must reply CORRECT or INCORRECT, anything else is recorded with
``correct: null, parsed: false`` and counted, never guessed.
"""

from __future__ import annotations

import re

from convrag.llm.judge import Judge, register_judge, run_judge
from convrag.metrics.qa import exact_match

_VERDICT = re.compile(r"\b(incorrect|correct)\b", re.IGNORECASE)


def parse_verdict(text: str | None) -> bool | None:
    m = _VERDICT.search(text or "")
    if not m:
        return None
    return m.group(1).lower() == "correct"


def messages(prompts: dict, question: str, golds: list[str], prediction: str) -> list[dict]:
    msgs = [{"role": "system", "content": prompts["system"].strip()}]

    def user(q, g, p):
        return prompts["user"].format(question=q, gold=" | ".join(g), prediction=p)

    for ex in prompts.get("examples", []):
        msgs.append({"role": "user", "content": user(ex["question"], ex["gold"], ex["prediction"])})
        msgs.append({"role": "assistant", "content": ex["verdict"]})
    msgs.append({"role": "user", "content": user(question, golds, prediction)})
    return msgs


def _rule(item: dict):
    pred = item["prediction"]
    if pred is None or not str(pred).strip():
        return False, "no_answer"
    if exact_match(pred, item["answers"]) == 1.0:
        return True, "exact_match"
    return None


JUDGE = register_judge(Judge(
    name="answer_correctness", prompt="lic_rag/judge.yaml", unit="conversation",
    fields=("question", "answers", "prediction"),
    messages=lambda prompts, it: messages(prompts, it["question"], list(it["answers"]), it["prediction"]),
    parse=parse_verdict, labels=("CORRECT", "INCORRECT"), rule=_rule, max_tokens=8,
))


def judge_answers(items: list[dict], engine, prompts: dict, max_tokens: int | None = None) -> list[dict]:
    """``items``: dicts with key, question, answers (gold list), prediction (str|None).
    Returns one verdict per item: key, correct, method (no_answer|exact_match|llm), parsed, raw.
    ``max_tokens``: the reply budget (None: the judge's own, ``JUDGE.max_tokens``)."""
    verdicts = run_judge(JUDGE, [{**it, "item_id": it["key"]} for it in items], engine, prompts, max_tokens,
                         desc="judge answers")
    return [{"key": it["key"], "prediction": it["prediction"], "correct": v["value"], "method": v["method"],
             "parsed": v["parsed"], "raw": v["raw"]} for it, v in zip(items, verdicts)]
