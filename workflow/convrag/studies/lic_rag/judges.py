"""Response categories of assistant turns (the taxonomy of *LLMs Get Lost in Multi-Turn
Conversation*): answer_attempt, clarification, interrogation, discussion, hedge, refuse and
missing.

Why an LLM: whether a reply commits to an answer, asks one question, asks several, hedges
between candidates or refuses is a judgement about wording that no regular expression makes
well. ``missing`` (an empty reply) needs no model and is set by rule. The classifier sees
the user's last message and the reply, answers with one label, and a reply it labels with
anything else is recorded with ``category: null, parsed: false`` and counted.
"""

from __future__ import annotations

import re

from convrag.llm.judge import Judge, register_judge, run_judge

CATEGORIES = ("answer_attempt", "clarification", "interrogation", "discussion", "hedge", "refuse", "missing")
_LABEL = re.compile(r"answer[\s_-]*attempt|clarification|interrogation|discussion|hedge|refuse|missing", re.IGNORECASE)


def parse_category(text: str | None) -> str | None:
    """The first category label in ``text`` (``answer attempt`` and ``answer-attempt`` accepted)."""
    m = _LABEL.search(text or "")
    if not m:
        return None
    return re.sub(r"[\s-]+", "_", m.group(0).lower()).replace("answer_attempt", "answer_attempt")


def messages(prompts: dict, user_text: str, reply: str) -> list[dict]:
    msgs = [{"role": "system", "content": prompts["system"].strip()}]
    for ex in prompts.get("examples", []):
        msgs.append({"role": "user", "content": prompts["user"].format(user=ex["user"], reply=ex["reply"])})
        msgs.append({"role": "assistant", "content": ex["label"]})
    msgs.append({"role": "user", "content": prompts["user"].format(user=user_text.strip(), reply=reply.strip())})
    return msgs


def _rule(item: dict):
    return ("missing", "rule") if not (item.get("reply") or "").strip() else None


CLASSIFIER = register_judge(Judge(
    name="response_category", prompt="lic_rag/classifier.yaml", unit="turn", fields=("user", "reply"),
    messages=lambda prompts, it: messages(prompts, it["user"], it["reply"]), parse=parse_category,
    labels=CATEGORIES, rule=_rule, max_tokens=8,
))


def classify_turns(conversations, engine, prompts: dict, max_tokens: int = 8) -> list[dict]:
    """One record per assistant turn of ``conversations``: conv_id, turn (1-based among the
    assistant turns), category, method (rule|llm), parsed, raw. One batched engine call."""
    items, keys = [], []
    for c in conversations:
        last_user, n = "", 0
        for t in c.turns:
            if t["role"] == "user":
                last_user = t["text"]
                continue
            n += 1
            items.append({"item_id": f"{c.conv_id}#{n}", "user": last_user, "reply": t.get("text") or ""})
            keys.append((c.conv_id, n))
    verdicts = run_judge(CLASSIFIER, items, engine, prompts, max_tokens, desc="classify turns")
    return [{"conv_id": cid, "turn": n, "category": v["value"], "method": v["method"], "parsed": v["parsed"],
             "raw": v["raw"]} for (cid, n), v in zip(keys, verdicts)]
