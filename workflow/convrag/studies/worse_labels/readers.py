"""Readers of the "Better Retrievers, Worse Labels" study: a status line, an answer, p(answerable).

A reader answers one turn from one *context* (a retriever's top-5, the gold documents, or no
documents). Its reply must start with a line holding exactly ANSWERABLE or UNANSWERABLE, then
the answer (nothing when UNANSWERABLE). ``parse_status`` reads that line; a reply whose first
line is neither is recorded with ``status None, parsed False`` (the study excludes such
replies and reports how many there were), never guessed.

p(answerable) is scored, not sampled: with ``label_mode`` every item also gets a label-mode
request (``Request.labels = STATUSES``) over the SAME messages, in the SAME batched engine
call as the generation. What the engine returns per label, and so what ``p_answerable``
means, depends on the backend:

* transformers and vLLM: log p(label | prompt) SUMMED over all of the label's tokens (the
  reply starting with the whole word). This equals a comparison of first-token
  probabilities only when each label is a single token, which is not the case for most
  tokenizers (e.g. "UN" + "ANSWERABLE" pieces).
* OpenAI-compatible servers: an approximation from the first token's top log-probs.

``p_answerable = exp(a) / (exp(a) + exp(u))`` over the two returned log-probs (a softmax
renormalised to the two labels, computed from their difference so it cannot overflow).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Mapping, Sequence

from convrag.errors import ModelError
from convrag.judges.prompts import check_prompts, render_history, render_passages
from convrag.judges.prompts import need as _need
from convrag.llm.types import Request, Sampling

__all__ = ["PROMPT_FILE", "STATUSES", "check_prompts", "check_reader_prompts", "load_reader_prompts",
           "p_answerable", "parse_status", "read", "reader_messages", "render_history", "render_passages"]

STATUSES = ("ANSWERABLE", "UNANSWERABLE")
PROMPT_FILE = "worse_labels/reader.yaml"


# ---------------------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------------------


def check_reader_prompts(prompts: Mapping, where: str) -> None:
    check_prompts(prompts, where, {"user": {"history", "passages", "question"}},
                  texts=("system", "no_history", "no_passages"))


def load_reader_prompts(prompts_dir: str | Path) -> dict:
    """``reader.yaml`` from the prompts folder (``resources/prompts``), checked."""
    from convrag.resources import read_prompt_file

    return read_prompt_file(Path(prompts_dir) / PROMPT_FILE, check_reader_prompts)


def reader_messages(prompts: Mapping, item: Mapping) -> list[dict]:
    """System, then one user message with the earlier turns, the numbered passages and the
    question. The no-documents variant is the same prompt with ``no_passages`` in place of the
    passages, so the only difference between contexts is the documents."""
    _need(item, ("question", "history", "passages"), "reader")
    iid = item.get("item_id")

    def user(it):
        return prompts["user"].format(history=render_history(prompts, it["history"], iid),
                                      passages=render_passages(prompts, it["passages"], iid),
                                      question=str(it["question"]).strip())

    shots = []  # worked examples as earlier chat turns: small models copy the reply format from them
    for ex in prompts.get("examples") or ():
        shots += [{"role": "user", "content": user(ex)}, {"role": "assistant", "content": ex["reply"].strip()}]
    return [{"role": "system", "content": prompts["system"].strip()}, *shots, {"role": "user", "content": user(item)}]


# ---------------------------------------------------------------------------------------
# Parsing and scoring
# ---------------------------------------------------------------------------------------

# after markdown is removed: an optional "Status:" prefix, the status word, then the rest of the line
_STATUS = re.compile(r"^(?:status\s*[:\-]?\s*)?(UNANSWERABLE|ANSWERABLE)\b[\s:.\-]*(.*)$", re.IGNORECASE)
_WORDS = re.compile(r"\b(UNANSWERABLE|ANSWERABLE)\b", re.IGNORECASE)


def parse_status(text: str | None) -> tuple[str | None, str]:
    """``(status, answer)`` from a reply; status None when the first non-empty line is not a status.

    Tolerated: any case, markdown emphasis or headings (``**UNANSWERABLE**``), a ``Status:``
    prefix, punctuation after the word. Text after the status on the same line starts the
    answer. A line naming both statuses (an echo of the instruction) is unreadable. An
    unreadable reply keeps its whole text as ``answer``.
    """
    text = (text or "").strip()
    if not text:
        return None, ""
    first, _, rest = text.partition("\n")
    clean = re.sub(r"[*_#`>]", "", first).strip()
    m = _STATUS.match(clean)
    if m is None or len({w.upper() for w in _WORDS.findall(clean)}) > 1:
        return None, text
    answer = "\n".join(x for x in (m.group(2).strip(), rest.strip()) if x)
    return m.group(1).upper(), answer


def p_answerable(label_logprobs: Mapping[str, float] | None) -> float | None:
    """exp(a) / (exp(a) + exp(u)), computed as a logistic of a - u; None when either is missing
    or both are -inf (no probability mass to share)."""
    if not label_logprobs or any(s not in label_logprobs for s in STATUSES):
        return None
    a, u = (float(label_logprobs[s]) for s in STATUSES)
    if math.isnan(a) or math.isnan(u) or (a == u == -math.inf):
        return None
    d = a - u  # may be +-inf when one side is -inf: the limits 1.0 / 0.0
    return 1.0 / (1.0 + math.exp(-d)) if d >= 0 else math.exp(d) / (1.0 + math.exp(d))


def read(items: Sequence[Mapping], engine, prompts: Mapping, sampling: Sampling,
         label_mode: bool = True) -> list[dict]:
    """One record per item, in order: ``{item_id, status, answer, parsed, p_answerable,
    label_logprobs, raw}``.

    ONE ``engine.generate`` call holds every item's greedy generation request and (with
    ``label_mode``) its label-mode request over the same messages, so the two always see the
    same prompt and share the batch (and the backend's prompt-prefix reuse). Without label
    mode ``p_answerable`` and ``label_logprobs`` are None. ``sampling``: the generation's decoding
    settings (``--sampling``, from the config's ``readers`` block: greedy, its ``max_tokens``).
    """
    gen = sampling
    score = Sampling(max_tokens=1)  # label mode decodes nothing
    reqs = []
    for it in items:
        msgs = reader_messages(prompts, it)
        reqs.append(Request(messages=msgs, sampling=gen))
        if label_mode:
            reqs.append(Request(messages=msgs, sampling=score, labels=STATUSES))
    answers = engine.generate(reqs, desc="worse_labels read") if reqs else []
    step = 2 if label_mode else 1
    out = []
    for i, it in enumerate(items):
        g = answers[step * i]
        status, answer = parse_status(g.text)
        lp, p = None, None
        if label_mode:
            lp = answers[step * i + 1].label_logprobs
            if not lp or any(s not in lp for s in STATUSES):
                raise ModelError(f"read: item {it.get('item_id')}: the label-mode response lacks log-probs "
                                 f"for {', '.join(STATUSES)} (got {lp})")
            lp = {s: float(lp[s]) for s in STATUSES}
            p = p_answerable(lp)
        out.append({"item_id": it.get("item_id"), "status": status, "answer": answer, "parsed": status is not None,
                    "p_answerable": p, "label_logprobs": lp, "raw": g.text})
    return out
