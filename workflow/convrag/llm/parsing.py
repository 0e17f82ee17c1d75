"""Lenient parsing of structured model output.

Models (small ones above all) wrap JSON in prose or code fences, or stop mid-object. We
take the first balanced ``{...}`` that parses; anything else is a parse failure that the
caller records and counts (it is never silently dropped or guessed).
"""

from __future__ import annotations

import json
import re

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def balanced_spans(text: str, pairs: dict[str, str] | None = None):
    """Yield every top-level balanced span opened by a key of ``pairs`` (default ``{``) and
    closed by its value; brackets inside JSON strings are ignored, and a span broken by a
    mismatched closer (``{ ... ]``) is dropped."""
    pairs = pairs or {"{": "}"}
    closers = set(pairs.values())
    stack, start, in_str, esc = [], None, False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and stack:
            in_str = True
        elif ch in pairs:
            if not stack:
                start = i
            stack.append(pairs[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                yield text[start:i + 1]
        elif stack and ch in closers:
            stack, start = [], None


def parse_json_object(text: str | None) -> dict | None:
    """The first JSON object in ``text`` (inside a code fence or bare), or None."""
    if not text:
        return None
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for chunk in candidates:
        for obj in balanced_spans(chunk):
            try:
                value = json.loads(obj)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return None


def string_list(value) -> list[str]:
    """A JSON value that should be a list of strings, cleaned; anything else gives []."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    out = []
    for v in value:
        if isinstance(v, (str, int, float)) and not isinstance(v, bool):
            s = " ".join(str(v).split())
            if s:
                out.append(s)
    return list(dict.fromkeys(out))
