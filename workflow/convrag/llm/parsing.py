"""Lenient parsing of structured model output.

Models (small ones above all) wrap JSON in prose or code fences, or stop mid-object. We
take the first balanced ``{...}`` that parses; anything else is a parse failure that the
caller records and counts (it is never silently dropped or guessed).
"""

from __future__ import annotations

import json
import re

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def _balanced_objects(text: str):
    """Yield every top-level balanced ``{...}`` substring (braces inside strings respected)."""
    depth, start, in_str, esc = 0, None, False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and depth > 0:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0 and start is not None:
                yield text[start:i + 1]
                start = None


def parse_json_object(text: str | None) -> dict | None:
    """The first JSON object in ``text`` (inside a code fence or bare), or None."""
    if not text:
        return None
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for chunk in candidates:
        for obj in _balanced_objects(chunk):
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
