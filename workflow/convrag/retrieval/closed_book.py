"""Closed book: no retrieval, the model answers from its own knowledge (the no-RAG condition).

Its "index" is only a manifest (so a closed-book job depends on its corpus like any other
and a stale setting is caught); search returns no passage. Readers decide closed-book
prompts from ``CAPABILITIES.closed_book``, never from the retriever's config name.
"""

from __future__ import annotations

import time

from convrag.retrieval.base import (
    Capabilities,
    Retriever,
    SearchResult,
    check_k,
    check_manifest,
    normalize_params,
    read_corpus,
    staging_dir,
    write_manifest,
)

CAPABILITIES = Capabilities(closed_book=True)
DEFAULTS: dict = {}


class ClosedBookRetriever(Retriever):
    name = "closed_book"

    def search(self, queries: list[str], k: int) -> SearchResult:
        check_k(k)
        return SearchResult([[] for _ in queries])


def build(corpus_path, out_dir, params: dict | None) -> None:
    p = normalize_params("closed_book", params, DEFAULTS)
    t0 = time.perf_counter()
    n_docs = len(read_corpus(corpus_path))
    with staging_dir(out_dir) as tmp:
        write_manifest(tmp, "closed_book", p, corpus_path, n_docs, time.perf_counter() - t0)


def load(index_dir, params: dict | None, corpus_path=None) -> ClosedBookRetriever:
    check_manifest(index_dir, "closed_book", normalize_params("closed_book", params, DEFAULTS), corpus_path=corpus_path)
    return ClosedBookRetriever()
