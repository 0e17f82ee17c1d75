"""The content-sufficiency judge: is the answer to a turn's question in these passages (yes /
partial / no, with the numbers of the passages that support it)? cross labels the top k of every
cell with it, so it lives here, once. Its prompt file is ``worse_labels/content.yaml`` (the
project's own wording, written for that study first); its judge name, ``worse_labels_content``,
stays what the verdict records carry. worse_labels itself now labels with a judge of its own that
also reads the reference answer, as its paper's labellers do (``studies/worse_labels/judges.py``);
``judge_content`` runs either, and ``context_user`` fills any extra placeholder a template has."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Sequence

from convrag.judges.prompts import check_examples, check_prompts, render_history, render_passages
from convrag.llm.judge import Judge, register_judge, run_judge

LABELS = ("yes", "partial", "no")
PROMPT_FILE = "worse_labels/content.yaml"
CONTEXT_FIELDS = {"history", "question", "passages"}


def check_content_prompts(prompts: Mapping, where: str) -> None:
    check_prompts(prompts, where, {"user": CONTEXT_FIELDS}, texts=("system", "no_history", "no_passages"))
    check_examples(prompts, where, ("question", "passages", "reply"))


def load_content_prompts(prompts_dir: str | Path) -> dict:
    """The content judge's prompt file from the prompts folder, checked at load."""
    from convrag.resources import read_prompt_file

    return read_prompt_file(Path(prompts_dir) / PROMPT_FILE, check_content_prompts)


def context_user(template: str, prompts: Mapping, item: Mapping, **extra) -> str:
    iid = item.get("item_id", item.get("audit_id"))
    return template.format(history=render_history(prompts, item.get("history"), iid),
                           passages=render_passages(prompts, item["passages"], iid),
                           question=str(item["question"]).strip(), **extra)


_MARKUP = re.compile(r"[*_#`>]")
_LEAD = re.compile(r"^\s*(?:label|answer|verdict|sufficient)\s*[:\-]\s*", re.IGNORECASE)
_SUPPORT = re.compile(r"^\s*support(?:ing documents?)?\s*[:\-]\s*(.*)$", re.IGNORECASE | re.MULTILINE)
_FIRST_WORD = re.compile(r"^([a-z]+)\b")


def _label_word(line: str) -> str | None:
    """yes / partial / no when ``line`` (markdown and a ``Label:`` prefix removed) starts with it."""
    clean = _LEAD.sub("", _MARKUP.sub("", line).strip()).strip().lower()
    m = _FIRST_WORD.match(clean)
    return m.group(1) if m and m.group(1) in LABELS else None


def _support(text: str) -> list[int] | None:
    """The numbers of the first ``Support:`` line, distinct, in order, positive; [] for "none";
    None when there is no such line."""
    m = _SUPPORT.search(_MARKUP.sub("", text))
    if m is None:
        return None
    return list(dict.fromkeys(int(n) for n in re.findall(r"\d+", m.group(1)) if int(n) > 0))


def parse_content(text: str | None) -> dict | None:
    """``{"label", "support"}`` from a content reply; None when the first non-empty line is not
    yes / partial / no. ``support`` is None when the reply has no ``Support:`` line. The parser
    does not know how many passages there were: ``judge_content`` drops numbers above n."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    label = _label_word(lines[0]) if lines else None
    if label is None:
        return None
    return {"label": label, "support": _support("\n".join(lines[1:]))}


def content_messages(prompts: Mapping, item: Mapping) -> list[dict]:
    """System, few-shot (context -> reply) turns, then the item's context."""
    msgs = [{"role": "system", "content": prompts["system"].strip()}]
    for ex in prompts.get("examples") or []:
        msgs.append({"role": "user", "content": context_user(prompts["user"], prompts, ex)})
        msgs.append({"role": "assistant", "content": str(ex["reply"]).strip()})
    msgs.append({"role": "user", "content": context_user(prompts["user"], prompts, item)})
    return msgs


# ``labels`` names the values of ``value["label"]`` (the registry only declares them).
CONTENT = register_judge(Judge(
    name="worse_labels_content", prompt=PROMPT_FILE, unit="turn",
    fields=("question", "history", "passages"), messages=content_messages, parse=parse_content,
    labels=LABELS, max_tokens=24,
))


def judge_content(items: Sequence[Mapping], engine, prompts: Mapping, max_tokens: int | None = None,
                  judge: Judge = CONTENT) -> list[dict]:
    """``run_judge`` with the content judge (one batched call; ``judge``: another registered
    judge with the same reply format, e.g. worse_labels' judge that also reads the reference
    answer), then support numbers outside 1..n (n = the item's passage count) are dropped; each
    verdict counts them in ``support_dropped`` (0 when none, or when the value is None)."""
    verdicts = run_judge(judge, list(items), engine, prompts, max_tokens, desc=f"judge {judge.name}")
    for v, it in zip(verdicts, items):
        v["support_dropped"] = 0
        value = v["value"]
        if value is not None and value["support"] is not None:
            n = len(it["passages"] or [])
            keep = [k for k in value["support"] if k <= n]
            v["support_dropped"] = len(value["support"]) - len(keep)
            v["value"] = {**value, "support": keep}
    return verdicts
