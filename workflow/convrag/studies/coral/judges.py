"""CORAL's model-based comparison with the golden response: win / draw / lose.

The paper (arXiv 2410.23090, section 5.4 and Figure 4) lets GPT-4 compare a generated
response with the golden one; it releases no code or prompt for it. Here: the judge
``coral_pairwise`` (prompt ``resources/prompts/coral/pairwise.yaml``, the project's own wording)
sees the conversation's question and two responses, labelled A and B, and replies ``A``,
``B`` or ``tie``. Position bias is the known weakness of pairwise LLM judges, so every pair is
asked in both orders (the model's response first, then the golden one first), as MT-Bench
does: a WIN when both orders prefer the model's response, a LOSE when both prefer the golden
one, a DRAW otherwise (a tie in either order, or the two orders disagreeing). A reply the
parser cannot read leaves the pair undecided (``None``): recorded and counted, not guessed.
Both orders of every pair go to the engine in one batched call.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Mapping, Sequence

from convrag.llm.judge import Judge, register_judge, run_judge
from convrag.metrics.citation import strip_citations

__all__ = ["OUTCOMES", "PAIRWISE", "PROMPT_FILE", "check_pairwise_prompts", "compare", "outcome", "parse_choice"]

PROMPT_FILE = "coral/pairwise.yaml"
OUTCOMES = ("win", "draw", "lose")
_CHOICE = re.compile(r"\b(A|B|tie)\b", re.I)


def parse_choice(text: str | None) -> str | None:
    """The first standalone ``A``, ``B`` or ``tie`` (tie in any case) -> "A" / "B" / "tie"."""
    for m in _CHOICE.finditer(text or ""):
        word = m.group(1)
        if word.lower() == "tie":
            return "tie"
        if word in ("A", "B"):  # a lower-case "a" is an article, not a choice
            return word
    return None


def check_pairwise_prompts(prompts: Mapping, where: str) -> None:
    """Every key and placeholder the judge fills, before any model call."""
    from convrag.errors import ConfigError

    for key in ("system", "user"):
        if not isinstance(prompts.get(key), str):
            raise ConfigError(f"{where}: missing prompt '{key}'")
    for ph in ("{question}", "{a}", "{b}"):
        if ph not in prompts["user"]:
            raise ConfigError(f"{where}: prompt 'user' lacks the placeholder {ph}")
    for i, ex in enumerate(prompts.get("examples") or []):
        for key in ("question", "a", "b", "choice"):
            if not isinstance(ex, Mapping) or not isinstance(ex.get(key), str):
                raise ConfigError(f"{where}: examples[{i}] lacks '{key}'")


def _messages(prompts: Mapping, item: Mapping) -> list[dict]:
    msgs = [{"role": "system", "content": prompts["system"].strip()}]
    for ex in prompts.get("examples", []):
        msgs.append({"role": "user", "content": prompts["user"].format(question=ex["question"], a=ex["a"], b=ex["b"])})
        msgs.append({"role": "assistant", "content": ex["choice"]})
    msgs.append({"role": "user", "content": prompts["user"].format(question=item["question"], a=item["a"],
                                                                   b=item["b"])})
    return msgs


PAIRWISE = register_judge(Judge(
    name="coral_pairwise", prompt=PROMPT_FILE, unit="turn", fields=("question", "a", "b"),
    messages=_messages, parse=parse_choice, labels=("A", "B", "tie"), max_tokens=4,
))


def outcome(model_first: str | None, golden_first: str | None) -> str | None:
    """The model response's outcome from the two orders' choices (see the module doc)."""
    if model_first is None or golden_first is None:
        return None
    if model_first == "A" and golden_first == "B":
        return "win"
    if model_first == "B" and golden_first == "A":
        return "lose"
    return "draw"


def compare(records: Sequence[Mapping], questions: Sequence[str], goldens: Sequence[str | None], engine,
            prompts: Mapping, max_tokens: int | None = None) -> tuple[list[str | None], list[dict], dict]:
    """``(outcome per record, every verdict record, counts)``. A record without a golden
    response is not compared (``None``, counted as ``no_reference``); responses are compared
    with their citation markers removed, as BLEU and ROUGE see them."""
    items, where = [], []
    for i, (r, q, g) in enumerate(zip(records, questions, goldens)):
        if g is None:
            continue
        resp = strip_citations(r.get("response") or "").strip()
        key = f"{r.get('model')}|{r.get('strategy')}|{r.get('max_history_turns')}|{r['task_id']}"
        items += [{"item_id": f"{key}|model_first", "question": q, "a": resp, "b": g},
                  {"item_id": f"{key}|golden_first", "question": q, "a": g, "b": resp}]
        where.append(i)
    verdicts = run_judge(PAIRWISE, items, engine, prompts, max_tokens, desc="pairwise comparison") if items else []
    out: list[str | None] = [None] * len(records)
    for k, i in enumerate(where):
        out[i] = outcome(verdicts[2 * k]["value"], verdicts[2 * k + 1]["value"])
    counts = Counter(o for o in out if o is not None)
    summary = {"pairs": len(where), "no_reference": len(records) - len(where),
               "undecided": sum(1 for i in where if out[i] is None),
               "unparsed_replies": sum(1 for v in verdicts if not v["parsed"]),
               **{o: counts.get(o, 0) for o in OUTCOMES}}
    return out, verdicts, summary
