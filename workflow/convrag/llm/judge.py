"""The judge registry: an LLM judge is a prompt, a unit, a parser and (optionally) rules.

A judge declares what one verdict is about (``unit``: a turn, a conversation, a task), the
item fields its prompt reads, how to build its messages, how to parse a reply, which outputs
it may give (``labels``; None for free text or numbers) and rules that decide an item
without a model (an empty reply, an exact match). ``run_judge`` answers a whole list of
items with ONE batched engine call (identical prompts asked once), and returns one
verdict record per item: ``{item_id, judge, value, method (rule|llm), parsed, raw}``. A
reply the parser cannot read gets ``value: None, parsed: false``: recorded and counted,
never guessed.

Verdicts are records of their own (each judging stage writes them as JSONL beside its scores),
so a judge's model or prompt can change without regenerating the answers it judges. A new judge
is ``register_judge(Judge(...))`` in the module that defines it (a study's own package is fine):
names are unique across the project.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from convrag.errors import DataError
from convrag.llm.types import Request, Sampling
from convrag.registry import Registry

UNITS = ("turn", "conversation", "task")


@dataclass(frozen=True)
class Judge:
    name: str
    prompt: str  # prompt file, relative to the prompts folder (e.g. "lic_rag/judge.yaml")
    unit: str
    fields: tuple[str, ...]  # item fields the prompt and rules read
    messages: Callable[[dict, dict], list[dict]]  # (prompts, item) -> chat messages
    parse: Callable[[str | None], Any]  # reply -> value, None when unreadable
    labels: tuple[str, ...] | None = None
    rule: Callable[[dict], tuple[Any, str] | None] | None = None  # item -> (value, method) or None
    max_tokens: int = 8

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ValueError(f"judge {self.name}: unit must be one of {UNITS}")


JUDGES: "Registry[Judge]" = Registry("judge")


def register_judge(judge: Judge) -> Judge:
    return JUDGES.add(judge.name, judge)


def run_judge(judge: Judge, items: list[dict], engine, prompts: dict, max_tokens: int | None = None,
              desc: str | None = None) -> list[dict]:
    """One verdict per item, in order (see the module doc)."""
    out, todo = [], {}  # prompt -> the verdicts waiting for it (identical prompts asked once)
    sampling = Sampling(max_tokens=max_tokens or judge.max_tokens)
    for i, it in enumerate(items):
        missing = [f for f in judge.fields if f not in it]
        if missing:
            raise DataError(f"judge {judge.name}: item {it.get('item_id', i)} lacks field(s) {', '.join(missing)}")
        v = {"item_id": it.get("item_id"), "judge": judge.name, "value": None, "method": "llm", "parsed": False,
             "raw": None}
        decided = judge.rule(it) if judge.rule else None
        if decided is not None:
            v.update(value=decided[0], method=decided[1], parsed=True, raw="")
        else:
            msgs = judge.messages(prompts, it)
            todo.setdefault(json.dumps(msgs, sort_keys=True), (msgs, []))[1].append(v)
        out.append(v)
    if todo:
        waiting = list(todo.values())
        reqs = [Request(messages=msgs, sampling=sampling) for msgs, _ in waiting]
        for (_, vs), r in zip(waiting, engine.generate(reqs, desc=desc)):
            value = judge.parse(r.text)
            for v in vs:
                v.update(value=value, parsed=value is not None, raw=r.text)
    return out


def summary(verdicts: list[dict]) -> dict:
    """Counts per method and the unparsed replies: what a table caption reports."""
    out = {"items": len(verdicts), "unparsed": sum(1 for v in verdicts if not v["parsed"])}
    for v in verdicts:
        out[f"method_{v['method']}"] = out.get(f"method_{v['method']}", 0) + 1
    return out
