"""Retrieval: build a cached index per (corpus, retriever, params), then search it in batches.

``build_index`` is its own Snakemake rule (an index outlives a change of LLM);
``load_retriever`` is called by the search jobs and checks the index's manifest against the
params it is given, so a stale or mismatched index is an error, not a silent result.

``KINDS`` (a ``convrag.registry.Registry``) maps a retriever *kind* (the config's
``retrievers.<name>.kind``) to its module, imported on first use: every module of this package,
of ``graph`` and of the config's ``retriever_plugins`` folders that defines ``CAPABILITIES`` is a
kind named by its file, so a kind is added as one module (docs/adding_a_retriever.md). A module
provides ``CAPABILITIES`` (what it needs and costs, read everywhere through ``capabilities``), ``DEFAULTS`` (its params), ``build(corpus_path, out_dir, params, **extra)``
and ``load(index_dir, params, corpus_path=None, **extra)``: a module whose capabilities say
``needs_graph`` gets ``graph_dir`` (the shared knowledge-graph artifact) at build time, one
that ``uses_llm`` gets ``llm`` (an Engine) at build and load time. ``search`` returns a
``SearchResult``: hits per query with each query's LLM cost.
"""

from __future__ import annotations


from convrag.errors import ConfigError
from convrag.registry import Registry, listed_modules
from convrag.retrieval.base import Capabilities, Hits, QueryCost, Retriever, SearchResult

__all__ = ["KINDS", "RETRIEVER_PATH_ENV", "Capabilities", "Hits", "QueryCost", "Retriever", "SearchResult", "build_index",
           "capabilities", "load_retriever"]

RETRIEVER_PATH_ENV = "CONVRAG_RETRIEVER_PATH"  # the run's retriever_plugins, for every job (common.smk)
_KIND = r"^CAPABILITIES\b"
KINDS = Registry("retriever kind", plugins=(RETRIEVER_PATH_ENV, _KIND), lazy={
    **listed_modules(None, _KIND, __name__),
    **listed_modules(None, _KIND, f"{__name__}.graph")})


def _module(kind: str):
    return KINDS.get(kind)


def capabilities(kind: str) -> Capabilities:
    """The declared capabilities of a retriever kind."""
    return _module(kind).CAPABILITIES


def _extras(kind: str, llm, graph_dir, build: bool) -> dict:
    caps, extra = capabilities(kind), {}
    if caps.uses_llm:
        extra["llm"] = llm
    if build and caps.needs_graph:
        if graph_dir is None:
            raise ConfigError(f"retriever '{kind}' needs a knowledge graph (graph_dir)")
        extra["graph_dir"] = graph_dir
    return extra


def build_index(kind: str, corpus_path, out_dir, params: dict | None, llm=None, graph_dir=None) -> None:
    """Build the index for ``kind`` into ``out_dir`` (replaced atomically), with a manifest."""
    _module(kind).build(corpus_path, out_dir, params, **_extras(kind, llm, graph_dir, build=True))


def load_retriever(kind: str, index_dir, params: dict | None, corpus_path=None, llm=None) -> Retriever:
    """Load a built index; with ``corpus_path`` also check it was built from that corpus."""
    return _module(kind).load(index_dir, params, corpus_path=corpus_path, **_extras(kind, llm, None, build=False))


# ---- a config's retrievers (config.retrievers.<name>: {kind, params}) ----------------------------


def retriever_kind(config: dict, retriever: str) -> str:
    return config["retrievers"][retriever]["kind"]


def retriever_llm(config: dict, retriever: str) -> str | None:
    """The query/build-time LLM of an LLM-using retriever (params.llm or the KG model)."""
    if not capabilities(retriever_kind(config, retriever)).uses_llm:
        return None
    return (config["retrievers"][retriever].get("params") or {}).get("llm") or config["knowledge_graph"]["model"]


def is_closed_book(config: dict, retriever: str) -> bool:
    return capabilities(retriever_kind(config, retriever)).closed_book


def needs_jdk(config: dict, retriever: str) -> bool:
    """Whether a configured retriever's jobs need the Java (Lucene) environment: its kind's
    ``Capabilities.needs_jdk``, a flag or a test of its params."""
    need = capabilities(retriever_kind(config, retriever)).needs_jdk
    return bool(need(config["retrievers"][retriever].get("params") or {}) if callable(need) else need)


def graph_inputs(config: dict, L, corpora, retriever: str) -> list[str]:
    """The knowledge-graph manifests a job searching ``retriever`` over ``corpora`` (one corpus
    id or several) reads through its indexes: a graph retriever's index points at its corpus's
    graph folder, so the graph is a declared input of every rule that loads such an index (a
    removed or rebuilt graph is then Snakemake's to rebuild, not a file read behind its back)."""
    if not capabilities(retriever_kind(config, retriever)).needs_graph:
        return []
    return [L.graph_manifest(c) for c in ([corpora] if isinstance(corpora, str) else corpora)]
