"""Data loaders and generators: every source becomes the common records (Passage, Question,
TurnTask), behind one registry so that a new benchmark is a new loader, not a new branch.

A corpus loader is registered with ``@register_corpus_loader(kind)`` and called as
``loader(name, spec, files) -> (questions, passages)``: ``name`` the config's corpus name,
``spec`` its ``corpora.<name>`` block, ``files`` the input paths its rule provides
(downloads or local files; none for generated data). A loader that leaves passages out (the
empty ones, under ``empty_passages: drop``) returns a third item, their counts, which the
``prepare-corpus`` stage writes to its log. Built in:

- ``miniworld``: the project's own fictional multi-hop world (the offline default data);
- ``hipporag``: HippoRAG-format multi-hop sets (MuSiQue, 2WikiMultiHopQA, HotpotQA);
- ``download``: Hugging Face file downloads with a recorded sha256 (used by the rules).
"""

from __future__ import annotations

from typing import Callable

from convrag.registry import Registry

# the built-in kinds, registered by convrag.data.builtin when one is first asked for
CORPUS_LOADERS: "Registry[Callable]" = Registry("corpus kind", lazy={
    "miniworld": "convrag.data.builtin", "hipporag": "convrag.data.builtin"})
register_corpus_loader = CORPUS_LOADERS.register


def corpus_loader(kind: str) -> Callable:
    return CORPUS_LOADERS.get(kind)
