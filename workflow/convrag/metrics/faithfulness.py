"""Faithfulness of an answer to its retrieved texts, as RAGAS 0.3.3 computes it (MTRAG's RL_F).

Why two LLM steps: a whole answer is rarely all right or all wrong, so it is first broken
into standalone statements (step 1, given the question: for MTRAG the whole rendered
conversation), then each statement gets a 0/1 verdict against the context texts (step 2).
Score = supported statements / statements. Independent of any study (MTRAG-UN and CORAL use
it); the prompts come in as dicts (``resources/prompts/mtrag_un/faithfulness_*.yaml``).

Every step is one batched engine call over all items (``run_judge`` with the judges
``ragas_statements`` and ``ragas_verdicts`` registered here). RAGAS gives NaN when there are
no statements or a step fails; so does this module, but each record says why in ``status``
(``ok``, ``no_statements``, ``unparsed_statements``, ``unparsed_verdicts``) so the NaNs can
be counted. Differences from RAGAS 0.3.3 (all about failures, not about the arithmetic):

* one try per step; RAGAS re-asks the LLM to repair output its parser rejects;
* step 2 must give exactly one verdict per statement (matched by position), else the item
  is ``unparsed_verdicts`` (NaN); RAGAS divides by the number of verdicts it got back;
* an empty response gets no statements without a model call (RAGAS asks the LLM, which
  then normally finds none);
* the context texts are joined by a newline, as RAGAS does; no context at all is still asked.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from convrag.llm.judge import Judge, register_judge, run_judge
from convrag.llm.parsing import balanced_spans

__all__ = [
    "STATEMENTS_JUDGE",
    "STATUSES",
    "VERDICTS_JUDGE",
    "faithfulness_scores",
    "parse_statements",
    "parse_verdicts",
    "statements_messages",
    "verdicts_messages",
]

STATUSES = ("ok", "no_statements", "unparsed_statements", "unparsed_verdicts")

# ---------------------------------------------------------------------------------------
# Tolerant JSON reading
# ---------------------------------------------------------------------------------------

_FENCE = re.compile(r"```[A-Za-z]*\s*(.*?)```", re.DOTALL)


def _json_values(text) -> list:
    """The JSON values found in ``text``: each fenced block (or the whole text) parsed as a
    whole, else its balanced bracket spans; in order of appearance."""
    if not isinstance(text, str) or not text.strip():
        return []
    out = []
    for chunk in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
        try:
            out.append(json.loads(chunk.strip()))
            continue
        except (json.JSONDecodeError, ValueError):
            pass
        for span in balanced_spans(chunk, {"[": "]", "{": "}"}):
            try:
                out.append(json.loads(span))
            except (json.JSONDecodeError, ValueError):
                continue
    return out


def _statement_list(value) -> list[str] | None:
    if not isinstance(value, list):
        return None
    out = []
    for v in value:
        if isinstance(v, dict):
            v = v.get("statement", v.get("text"))
        if not isinstance(v, str):
            return None
        v = " ".join(v.split())
        if v:
            out.append(v)
    return out


def parse_statements(text) -> list[str] | None:
    """Step 1's statements, or None when no readable list is found.

    Accepted (first that fits wins): a JSON list of strings (or of objects with a
    "statement" / "text" string), bare or in a code fence, or an object whose "statements"
    key holds such a list. Whitespace is collapsed and empty strings dropped; duplicates are
    kept (RAGAS keeps them). ``[]`` is a valid answer: no statements.
    """
    for value in _json_values(text):
        if isinstance(value, dict):
            key = next((k for k in value if str(k).lower() == "statements"), None)
            value = value.get(key) if key is not None else None
        found = _statement_list(value)
        if found is not None:
            return found
    return None


_TRUE = {"1", "yes", "true"}
_FALSE = {"0", "no", "false"}


def _verdict(v) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)) and v in (0, 1):
        return int(v)
    if isinstance(v, str):
        s = v.strip().lower()
        return 1 if s in _TRUE else 0 if s in _FALSE else None
    return None


def _verdict_list(value) -> list[int] | None:
    if isinstance(value, dict):
        if "verdict" in value:  # a single object for a single statement
            value = [value]
        else:
            key = next((k for k in value if str(k).lower() in ("verdicts", "statements", "answer")), None)
            value = value.get(key) if key is not None else None
    if not isinstance(value, list) or not value:
        return None
    out = []
    for item in value:
        v = _verdict(item.get("verdict") if isinstance(item, dict) else item)
        if v is None:
            return None
        out.append(v)
    return out


def parse_verdicts(text) -> list[int] | None:
    """Step 2's verdicts (0/1, in order), or None when no readable list is found.

    Accepted: a JSON list of objects with a "verdict" (bare or fenced), an object holding
    such a list under "verdicts" / "statements" / "answer", a single object with a
    "verdict", or a bare list of verdicts. A verdict is 0/1 (number, boolean, or the
    strings "0"/"1", "yes"/"no", "true"/"false"); any other verdict makes the whole list
    unreadable. Whether there is one verdict per statement is checked by the caller.
    """
    for value in _json_values(text):
        found = _verdict_list(value)
        if found is not None:
            return found
    return None


# ---------------------------------------------------------------------------------------
# The two judges
# ---------------------------------------------------------------------------------------


def _dump(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def statements_messages(prompts: dict, item: dict) -> list[dict]:
    """Step 1 chat: system, few-shot (question, answer) -> {"statements": [...]}, the item."""
    msgs = [{"role": "system", "content": prompts["system"].strip()}]
    for ex in prompts.get("examples", []):
        msgs.append({"role": "user", "content": prompts["user"].format(question=ex["question"], answer=ex["answer"])})
        msgs.append({"role": "assistant", "content": _dump({"statements": list(ex["statements"])})})
    msgs.append({"role": "user", "content": prompts["user"].format(question=item["question"],
                                                                   answer=str(item["response"]).strip())})
    return msgs


def verdicts_messages(prompts: dict, item: dict) -> list[dict]:
    """Step 2 chat: system, few-shot (context, statements) -> verdict list, the item.

    The context is the item's texts joined by a newline (as RAGAS); statements are shown as
    a JSON list of strings."""
    msgs = [{"role": "system", "content": prompts["system"].strip()}]

    def user(context, statements):
        return prompts["user"].format(context=context, statements=_dump(list(statements)))

    for ex in prompts.get("examples", []):
        msgs.append({"role": "user", "content": user(ex["context"], ex["statements"])})
        msgs.append({"role": "assistant", "content": _dump(list(ex["verdicts"]))})
    msgs.append({"role": "user", "content": user("\n".join(item["contexts"]), item["statements"])})
    return msgs


STATEMENTS_JUDGE = register_judge(Judge(
    name="ragas_statements", prompt="mtrag_un/faithfulness_statements.yaml", unit="task",
    fields=("question", "response"), messages=statements_messages, parse=parse_statements, max_tokens=512,
))

VERDICTS_JUDGE = register_judge(Judge(
    name="ragas_verdicts", prompt="mtrag_un/faithfulness_verdicts.yaml", unit="task",
    fields=("contexts", "statements"), messages=verdicts_messages, parse=parse_verdicts, max_tokens=1024,
))


# ---------------------------------------------------------------------------------------
# The score
# ---------------------------------------------------------------------------------------


def faithfulness_scores(items: list[dict], engine, prompts_statements: dict, prompts_verdicts: dict,
                        max_tokens: tuple[int, int] = (512, 1024)) -> list[dict]:
    """Faithfulness per item, in order.

    ``items``: ``{item_id, question, response, contexts: [str]}``. Returns per item
    ``{item_id, judge: "faithfulness", faithfulness: float | nan, statements: [str],
    verdicts: [0|1], status, raw_statements: str | None, raw_verdicts: str | None}``;
    ``status`` is one of ``STATUSES`` and ``faithfulness`` is NaN unless it is "ok". A raw
    field is None when that step was not asked. Two batched engine calls at most (all
    step-1 prompts, then all step-2 prompts; identical prompts asked once). ``max_tokens``:
    (step 1, step 2); step 2 writes a reason per statement, so it needs the larger budget (a
    reply cut short is unreadable JSON: ``unparsed_verdicts``).
    """
    recs: list[dict[str, Any]] = []
    for i, it in enumerate(items):
        for f in ("question", "response", "contexts"):
            if f not in it:
                raise ValueError(f"faithfulness_scores: item {it.get('item_id', i)} lacks field {f!r}")
        if isinstance(it["contexts"], str):
            raise ValueError(f"faithfulness_scores: item {it.get('item_id', i)}: contexts must be a list of texts")
        recs.append({"item_id": it.get("item_id"), "judge": "faithfulness", "faithfulness": math.nan,
                     "statements": [], "verdicts": [], "status": "no_statements",
                     "raw_statements": None, "raw_verdicts": None})

    ask1 = [i for i, it in enumerate(items) if (it["response"] or "").strip()]
    step1 = run_judge(STATEMENTS_JUDGE, [{"item_id": items[i].get("item_id"), "question": items[i]["question"],
                                          "response": items[i]["response"]} for i in ask1],
                      engine, prompts_statements, max_tokens[0], desc="faithfulness statements")
    ask2 = []
    for i, v in zip(ask1, step1):
        recs[i]["raw_statements"] = v["raw"]
        if v["value"] is None:
            recs[i]["status"] = "unparsed_statements"
        elif v["value"]:
            recs[i]["statements"] = list(v["value"])
            ask2.append(i)
    step2 = run_judge(VERDICTS_JUDGE, [{"item_id": items[i].get("item_id"), "contexts": list(items[i]["contexts"]),
                                        "statements": recs[i]["statements"]} for i in ask2],
                      engine, prompts_verdicts, max_tokens[1], desc="faithfulness verdicts")
    for i, v in zip(ask2, step2):
        r = recs[i]
        r["raw_verdicts"] = v["raw"]
        if v["value"] is None or len(v["value"]) != len(r["statements"]):
            r["status"] = "unparsed_verdicts"
            continue
        r.update(verdicts=list(v["value"]), status="ok", faithfulness=sum(v["value"]) / len(r["statements"]))
    return recs
