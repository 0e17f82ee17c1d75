"""Pull the short answer out of an assistant reply.

The assistant is told to finish every reply with a line ``Answer: <short answer>``.  Small
models decorate that line (markdown bold, leading spaces, a trailing full stop) and may
restate an earlier draft, so we take the LAST such line and strip the decoration.  A reply
without the line (or with an empty one) gives ``None``, which the QA metrics score as 0 and
which the analysis can count as a format failure rather than a wrong answer.
"""

from __future__ import annotations

import re

__all__ = ["extract_answer"]

# Optional markdown emphasis around the label: "**Answer:**", "**Answer**:", "_Answer_:".
_ANSWER_LINE = re.compile(r"^\s*[*_]*\s*answer\s*[*_]*\s*:(.*)$", re.IGNORECASE)


def _clean(ans: str) -> str:
    ans = ans.strip()
    # Emphasis around the value itself ("Answer: **Paris**") and a trailing full stop.
    ans = ans.strip("*_").strip()
    if ans.endswith(".") and not ans.endswith(".."):
        ans = ans[:-1].rstrip()
    return ans.strip("*_").strip()


def extract_answer(text: str | None) -> str | None:
    """Return the answer from the last ``Answer:`` line, or None if absent or empty."""
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
