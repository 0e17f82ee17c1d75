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

from convrag.llm.types import Request, Sampling
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


def judge_answers(items: list[dict], engine, prompts: dict, max_tokens: int = 8) -> list[dict]:
    """``items``: dicts with key, question, answers (gold list), prediction (str|None).
    Returns one verdict per item: key, correct, method (no_answer|exact_match|llm), parsed, raw."""
    out, todo = [], {}
    for it in items:
        rec = {"key": it["key"], "prediction": it["prediction"]}
        if it["prediction"] is None or not str(it["prediction"]).strip():
            rec.update(correct=False, method="no_answer", parsed=True, raw="")
        elif exact_match(it["prediction"], it["answers"]) == 1.0:
            rec.update(correct=True, method="exact_match", parsed=True, raw="")
        else:
            rec.update(correct=None, method="llm", parsed=False, raw=None)
            todo.setdefault((it["question"], tuple(it["answers"]), it["prediction"]), []).append(rec)
        out.append(rec)
    if todo:
        sampling = Sampling(temperature=0.0, top_p=1.0, max_tokens=max_tokens)
        keys = list(todo)
        reqs = [Request(messages=messages(prompts, q, list(g), p), sampling=sampling) for q, g, p in keys]
        for k, r in zip(keys, engine.generate(reqs, desc="judge answers")):
            v = parse_verdict(r.text)
            for rec in todo[k]:
                rec.update(correct=v, parsed=v is not None, raw=r.text)
    return out
