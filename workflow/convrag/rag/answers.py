"""Pull the short answer out of an assistant reply.

The assistant is told to finish every reply with a line ``Answer: <short answer>``.  Small
models decorate that line (markdown bold, leading spaces, a trailing full stop) and may
restate an earlier draft, so we take the LAST such line and strip the decoration.  A reply
without the line (or with an empty one) gives ``None``, which the QA metrics score as 0 and
which the analysis can count as a format failure rather than a wrong answer.

A reasoning model (Qwen3 with thinking on) writes ``<think>...</think>`` before its reply: only
the text after the reasoning is the reply (``visible_reply``), so an ``Answer:`` line drafted
while thinking is never taken, and a reply cut off inside its reasoning has no answer.
"""

from __future__ import annotations

import re

__all__ = ["extract_answer", "visible_reply"]

# Optional markdown emphasis around the label: "**Answer:**", "**Answer**:", "_Answer_:".
_ANSWER_LINE = re.compile(r"^\s*[*_]*\s*answer\s*[*_]*\s*:(.*)$", re.IGNORECASE)


def _clean(ans: str) -> str:
    ans = ans.strip()
    # Emphasis around the value itself ("Answer: **Paris**") and a trailing full stop.
    ans = ans.strip("*_").strip()
    if ans.endswith(".") and not ans.endswith(".."):
        ans = ans[:-1].rstrip()
    return ans.strip("*_").strip()


_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"


def visible_reply(text: str | None) -> str:
    """The reply without a reasoning model's ``<think>`` block: the text after the last
    ``</think>``; empty when the reasoning never closed (the reply was cut off while thinking)."""
    text = text or ""
    if _THINK_CLOSE in text:
        return text.rsplit(_THINK_CLOSE, 1)[1].strip()
    if text.lstrip().startswith(_THINK_OPEN):
        return ""
    return text


def extract_answer(text: str | None) -> str | None:
    """Return the answer from the last ``Answer:`` line of the visible reply, or None if
    absent or empty."""
    text = visible_reply(text)
    if not text:
        return None
    found = None
    for line in text.splitlines():
        m = _ANSWER_LINE.match(line)
        if m:
            found = m.group(1)
    if found is None:
        return None
    return _clean(found) or None
