"""Prompt files of the judges and readers: their checks (every template uses exactly its
placeholders, at load, before any model call) and the renderers of a context (history lines,
numbered passages) that the content judge, the audit and the abstention reader share."""

from __future__ import annotations

import string
from typing import Mapping, Sequence

from convrag.errors import ConfigError, DataError


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}


def check_prompts(prompts: Mapping, where: str, templates: Mapping[str, set[str]], texts: Sequence[str] = ()) -> None:
    """Each template key exists and uses exactly its placeholders (a missing one loses input, an
    unknown one would fail at format time); each key of ``texts`` is a string. Runs before any
    model call, so a bad prompt file fails at load."""
    for key in texts:
        if not isinstance(prompts.get(key), str):
            raise ConfigError(f"{where}: missing prompt '{key}'")
    for key, want in templates.items():
        node = prompts
        for part in key.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if not isinstance(node, str):
            raise ConfigError(f"{where}: missing prompt '{key}'")
        got = _fields(node)
        if got != set(want):
            missing, extra = sorted(set(want) - got), sorted(got - set(want))
            raise ConfigError(f"{where}: prompt '{key}' " + "; ".join(
                ([f"lacks the placeholder(s) {', '.join('{' + m + '}' for m in missing)}"] if missing else []) +
                ([f"has unknown placeholder(s) {', '.join('{' + e + '}' for e in extra)}"] if extra else [])))


def check_examples(prompts: Mapping, where: str, keys: Sequence[str]) -> None:
    """Each few-shot example of a prompt file has ``keys``."""
    for i, ex in enumerate(prompts.get("examples") or []):
        for key in keys:
            if not isinstance(ex, Mapping) or key not in ex:
                raise ConfigError(f"{where}: examples[{i}] lacks '{key}'")


def render_history(prompts: Mapping, history, item_id=None) -> str:
    """Earlier turns as ``role: text`` lines; a string is used as it is; none -> ``no_history``."""
    if history is None or history == "" or history == []:
        return prompts["no_history"].strip()
    if isinstance(history, str):
        return history.strip()
    lines = []
    for i, t in enumerate(history):
        if not isinstance(t, Mapping) or "role" not in t or "text" not in t:
            raise DataError(f"item {item_id}: history[{i}] must be a mapping with 'role' and 'text'")
        lines.append(f"{t['role']}: {t['text']}")
    return "\n".join(lines)


def render_passages(prompts: Mapping, passages, item_id=None) -> str:
    """Passages numbered ``[1]``..``[n]`` (no doc ids: the reader and the judges must not see
    which collection or retriever they came from); an empty list -> ``no_passages``."""
    passages = list(passages or [])
    if not passages:
        return prompts["no_passages"].strip()
    for i, p in enumerate(passages):
        if not isinstance(p, str):
            raise DataError(f"item {item_id}: passages[{i}] is {type(p).__name__}, not a string")
    return "\n\n".join(f"[{i}] {p.strip()}" for i, p in enumerate(passages, 1))


def need(item: Mapping, fields: Sequence[str], what: str) -> None:
    missing = [f for f in fields if f not in item]
    if missing:
        raise DataError(f"{what}: item {item.get('item_id')} lacks field(s) {', '.join(missing)}")
