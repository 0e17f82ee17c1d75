"""Retrieval: build a cached index per (corpus, retriever, params), then search it in batches.

``build_index`` is its own Snakemake rule (an index outlives a change of LLM);
``load_retriever`` is called by the search jobs and checks the index's manifest against the
params it is given, so a stale or mismatched index is an error, not a silent result.

Retrievers: ``closed_book`` (no retrieval; the no-RAG condition), ``bm25`` (see bm25.py),
``dense`` (see dense.py), and the graph/tree retrievers of ``graph/`` (hipporag, hipporag2,
lightrag, raptor, tog2, pog).

A retriever module provides ``DEFAULTS`` (its params), ``build(corpus_path, out_dir,
params, **extra)`` and ``load(index_dir, params, corpus_path=None, **extra)``; modules with
``NEEDS_GRAPH = True`` get ``graph_dir`` (the shared knowledge-graph artifact) at build time,
modules with ``USES_LLM = True`` get ``llm`` (an Engine) at build and load time.
"""

from __future__ import annotations

import time

from convrag.errors import ConfigError
from convrag.retrieval.base import (
    Hits,
    QueryCost,
    Retriever,
    check_k,
    check_manifest,
    normalize_params,
    read_corpus,
    staging_dir,
    write_manifest,
)

__all__ = ["RETRIEVERS", "QueryCost", "Retriever", "build_index", "load_retriever", "needs_graph", "uses_llm", "builds_with_llm"]

_MODULES = {
    "bm25": "convrag.retrieval.bm25",
    "dense": "convrag.retrieval.dense",
    "hipporag": "convrag.retrieval.graph.hipporag",
    "hipporag2": "convrag.retrieval.graph.hipporag2",
    "lightrag": "convrag.retrieval.graph.lightrag",
    "raptor": "convrag.retrieval.graph.raptor",
    "tog2": "convrag.retrieval.graph.tog2",
    "pog": "convrag.retrieval.graph.pog",
}
RETRIEVERS = ("closed_book", *_MODULES)


class ClosedBookRetriever(Retriever):
    """The closed-book condition: the model answers from its own knowledge."""

    name = "closed_book"

    def search(self, queries: list[str], k: int) -> list[Hits]:
        check_k(k)
        return [[] for _ in queries]


def _module(retriever: str):
    import importlib

    if retriever not in _MODULES:
        raise ConfigError(f"unknown retriever '{retriever}' (known: {', '.join(RETRIEVERS)})")
    return importlib.import_module(_MODULES[retriever])


def needs_graph(retriever: str) -> bool:
    """Whether ``retriever`` reads the shared knowledge-graph artifact."""
    return retriever != "closed_book" and getattr(_module(retriever), "NEEDS_GRAPH", False)


def uses_llm(retriever: str) -> bool:
    """Whether ``retriever`` calls an LLM (at build or query time)."""
    return retriever != "closed_book" and getattr(_module(retriever), "USES_LLM", False)


def builds_with_llm(retriever: str) -> bool:
    """Whether building ``retriever``'s index calls an LLM (RAPTOR's summaries)."""
    return retriever != "closed_book" and getattr(_module(retriever), "BUILD_USES_LLM", False)


def _extras(mod, llm, graph_dir, build: bool) -> dict:
    extra = {}
    if getattr(mod, "USES_LLM", False):
        extra["llm"] = llm
    if build and getattr(mod, "NEEDS_GRAPH", False):
        if graph_dir is None:
            raise ConfigError(f"retriever module {mod.__name__} needs a knowledge graph (graph_dir)")
        extra["graph_dir"] = graph_dir
    return extra


def build_index(retriever: str, corpus_path, out_dir, params: dict | None, llm=None, graph_dir=None) -> None:
    """Build the index for ``retriever`` into ``out_dir`` (replaced atomically), with a manifest."""
    if retriever == "closed_book":
        p = normalize_params("closed_book", params, {})
        t0 = time.perf_counter()
        n_docs = len(read_corpus(corpus_path))
        with staging_dir(out_dir) as tmp:
            write_manifest(tmp, "closed_book", p, corpus_path, n_docs, time.perf_counter() - t0)
        return
    mod = _module(retriever)
    mod.build(corpus_path, out_dir, params, **_extras(mod, llm, graph_dir, build=True))


def load_retriever(retriever: str, index_dir, params: dict | None, corpus_path=None, llm=None) -> Retriever:
    """Load a built index; with ``corpus_path`` also check it was built from that corpus."""
    if retriever == "closed_book":
        check_manifest(index_dir, "closed_book", normalize_params("closed_book", params, {}), corpus_path=corpus_path)
        return ClosedBookRetriever()
    mod = _module(retriever)
    return mod.load(index_dir, params, corpus_path=corpus_path, **_extras(mod, llm, None, build=False))
