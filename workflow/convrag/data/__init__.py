"""Data loaders and generators: every source becomes the common records (Passage, Question,
TurnTask), behind one registry so that a new benchmark is a new loader, not a new branch.

A corpus loader is registered with ``@register_corpus_loader(kind)`` and called as
``loader(name, spec, files) -> (questions, passages)``: ``name`` the config's corpus name,
``spec`` its ``corpora.<name>`` block, ``files`` the input paths its rule provides
(downloads or local files; none for generated data). Built in:

- ``miniworld``: the project's own fictional multi-hop world (the offline default data);
- ``hipporag``: HippoRAG-format multi-hop sets (MuSiQue, 2WikiMultiHopQA, HotpotQA);
- ``download``: Hugging Face file downloads with a recorded sha256 (used by the rules).
"""

from __future__ import annotations

from typing import Callable

from convrag.errors import ConfigError

CORPUS_LOADERS: dict[str, Callable] = {}


def register_corpus_loader(kind: str):
    def deco(fn):
        CORPUS_LOADERS[kind] = fn
        return fn

    return deco


def corpus_loader(kind: str) -> Callable:
    import convrag.data.builtin  # noqa: F401  (registers the built-in loaders)

    if kind not in CORPUS_LOADERS:
        raise ConfigError(f"unknown corpus kind '{kind}' (known: {', '.join(sorted(CORPUS_LOADERS))})")
    return CORPUS_LOADERS[kind]
