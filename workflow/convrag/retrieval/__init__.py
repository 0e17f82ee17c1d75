"""Retrieval: build a cached index per (corpus, retriever, params), then search it in batches.

``build_index`` is its own Snakemake rule (an index outlives a change of LLM);
``load_retriever`` is called by the search jobs and checks the index's manifest against the
params it is given, so a stale or mismatched index is an error, not a silent result.

Retrievers: ``closed_book`` (no retrieval; the no-RAG condition), ``bm25`` (see bm25.py),
``dense`` (see dense.py).
"""

from __future__ import annotations

import time

from convrag.errors import ConfigError
from convrag.retrieval.base import (
    Hits,
    Retriever,
    check_k,
    check_manifest,
    normalize_params,
    read_corpus,
    staging_dir,
    write_manifest,
)

__all__ = ["RETRIEVERS", "Retriever", "build_index", "load_retriever"]

RETRIEVERS = ("closed_book", "bm25", "dense")


class ClosedBookRetriever(Retriever):
    """The closed-book condition: the model answers from its own knowledge."""

    name = "closed_book"

    def search(self, queries: list[str], k: int) -> list[Hits]:
        check_k(k)
        return [[] for _ in queries]


def _module(retriever: str):
    if retriever == "bm25":
        from convrag.retrieval import bm25 as mod
    elif retriever == "dense":
        from convrag.retrieval import dense as mod
    else:
        raise ConfigError(f"unknown retriever '{retriever}' (known: {', '.join(RETRIEVERS)})")
    return mod


def build_index(retriever: str, corpus_path, out_dir, params: dict | None) -> None:
    """Build the index for ``retriever`` into ``out_dir`` (replaced atomically), with a manifest."""
    if retriever == "closed_book":
        p = normalize_params("closed_book", params, {})
        t0 = time.perf_counter()
        n_docs = len(read_corpus(corpus_path))
        with staging_dir(out_dir) as tmp:
            write_manifest(tmp, "closed_book", p, corpus_path, n_docs, time.perf_counter() - t0)
        return
    _module(retriever).build(corpus_path, out_dir, params)


def load_retriever(retriever: str, index_dir, params: dict | None, corpus_path=None) -> Retriever:
    """Load a built index; with ``corpus_path`` also check it was built from that corpus."""
    if retriever == "closed_book":
        check_manifest(index_dir, "closed_book", normalize_params("closed_book", params, {}), corpus_path=corpus_path)
        return ClosedBookRetriever()
    return _module(retriever).load(index_dir, params, corpus_path=corpus_path)
