"""HippoRAG (Gutierrez et al. 2024, "HippoRAG: Neurobiologically Inspired Long-Term Memory
for Large Language Models") over the shared knowledge graph (kg.py).

Online retrieval, as in the paper:
1. **Query NER**: the LLM names the query's entities (``common.query_entities``: one JSON
   call per query, batched over all queries of the search call; greedy).
2. **Linking**: each query entity is linked to its nearest graph entity (exact normalised
   name first, else cosine of the embeddings, top 1; ``common.link_entities``), as HippoRAG
   links each query named entity to the most similar phrase node.
3. **Reset vector**: the linked entities, each weighted by its node specificity
   ``1 / |P_i|`` (``kg.specificity()``; param ``specificity``; off = equal weights, the
   paper's "w/o node specificity" ablation). A query entity linked twice counts once.
4. **Personalized PageRank** over the entity graph (``kg.entity_adjacency``: triple edges,
   weight = number of triples between the pair, plus synonym edges with weight cosine x
   ``synonym_weight``), damping ``damping`` (0.5 as in HippoRAG's code; igraph's meaning:
   the probability to continue the walk), with ``ppr.PPR`` (all queries of one search call
   in one batched run).
5. **Passage scores**: the sum of the PPR probabilities of the passage's entities (the
   entity-passage incidence of the OpenIE mentions), as HippoRAG scores passages through
   its node-to-passage matrix; the top ``k`` by score, filled with the dense ranking (query
   vs passage embeddings of the KG) when fewer than ``k`` passages score above zero
   (``common.top_docs``), so every query gets exactly ``min(k, n_docs)`` passages.

Grounding (our addition, param ``grounded_only``, default on): a query entity the NER
names that does not occur in the query (compared after ``normalize_entity``, on word
boundaries) is dropped before linking, as the OpenIE build drops ungrounded entities:
SmolLM2-135M copies the prompt's example entities (e.g. "1990") into unrelated queries, and
HippoRAG's nearest-node linking would then seed an arbitrary entity ("1898"). Both the NER
output and the kept entities are in the search result's ``details`` ("query_entities",
"grounded_entities").

Fallback (our choice; the paper is silent): when the NER output is not the JSON asked for
(counted in ``QueryCost.parse_failures``) or names no entity (none left after grounding), the query's own embedding is
linked to its ``fallback_top_entities`` nearest graph entities, each weighted by its cosine
(if > 0) times specificity, and the walk runs from those. Which path each query took is in
``details[i]["fallback"]`` (None, "ner_parse_failure" or "no_query_entities"); with
its NER entities, seed weights and the 10 entities of most PPR mass. A query left with no
seed at all (no entity with positive similarity) gets the dense ranking.

CPU simplification: queries and passages are embedded with the KG's encoder (default
all-MiniLM-L6-v2, no query instruction) instead of the paper's Contriever/ColBERTv2.

Params: ``llm`` (the query-time LLM's registry name; the engine is passed in), ``damping``,
``synonym_weight``, ``specificity``, ``ner_max_tokens``, ``fallback_top_entities``,
``grounded_only``. The index
folder is only a manifest pointing at the KG, so every param is a runtime key.
"""

from __future__ import annotations

import time

import numpy as np
from scipy import sparse

from convrag.errors import ConfigError, DataError
from convrag.retrieval.base import Capabilities, SearchResult, Retriever, check_k, normalize_params, read_corpus
from convrag.retrieval.graph.common import (
    embedding_params,
    encode,
    link_entities,
    graph_path,
    load_graph_index,
    new_costs,
    query_entities,
    top_docs,
    write_graph_index,
)
from convrag.retrieval.graph.kg import KnowledgeGraph, normalize_entity
from convrag.retrieval.graph.openie import occurs_in
from convrag.retrieval.graph.ppr import PPR

CAPABILITIES = Capabilities(needs_graph=True, llm_at_query=True, cost_class="query_llm")
NAME = "hipporag"
DEFAULTS = {
    "llm": None,
    "damping": 0.5,
    "synonym_weight": 1.0,
    "specificity": True,
    "ner_max_tokens": 48,
    "fallback_top_entities": 5,
    "grounded_only": True,
}
RUNTIME_KEYS = frozenset(DEFAULTS)
BLOCK = 64  # queries per batched PPR run (bounds the dense n_entities x queries matrices)
TOP_DETAIL = 10  # entities with the most PPR mass kept per query in the search details


def _number(p: dict, key: str, low: float, high: float | None, name: str) -> None:
    v = p[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < low or (high is not None and v >= high):
        rng = f"[{low}, {high})" if high is not None else f">= {low}"
        raise ConfigError(f"retriever '{name}': {key} must be a number in {rng}, got {v!r}")


def _int(p: dict, key: str, low: int, name: str) -> None:
    v = p[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ConfigError(f"retriever '{name}': {key} must be an integer >= {low}, got {v!r}")


def _params(params: dict | None) -> dict:
    p = normalize_params(NAME, params, DEFAULTS)
    if p["llm"] is not None and not isinstance(p["llm"], str):
        raise ConfigError(f"retriever '{NAME}': llm must be a model name or null, got {p['llm']!r}")
    _number(p, "damping", 0.0, 1.0, NAME)
    _number(p, "synonym_weight", 0.0, None, NAME)
    if not isinstance(p["specificity"], bool):
        raise ConfigError(f"retriever '{NAME}': specificity must be true or false, got {p['specificity']!r}")
    _int(p, "ner_max_tokens", 1, NAME)
    _int(p, "fallback_top_entities", 1, NAME)
    if not isinstance(p["grounded_only"], bool):
        raise ConfigError(f"retriever '{NAME}': grounded_only must be true or false, got {p['grounded_only']!r}")
    return p


def check_graph(kg: KnowledgeGraph, where, name: str, need_triples: bool = False) -> None:
    """The KG must carry the embeddings the retriever reads and its encoder params."""
    embedding_params(kg)
    need = ["entity_emb", "passage_emb"] + (["triple_emb"] if need_triples else [])
    for attr in need:
        if getattr(kg, attr) is None:
            raise DataError(f"{where}: knowledge graph has no {attr} (needed by retriever '{name}'); rebuild it")


def build_pointer(name: str, p: dict, corpus_path, out_dir, graph_dir, need_triples: bool = False) -> None:
    """The index of a PPR retriever: a manifest pointing at the KG, after checking that the KG
    covers this corpus (same passages, same order) with the embeddings needed."""
    t0 = time.perf_counter()
    if graph_dir is None:
        raise ConfigError(f"retriever '{name}' needs the knowledge graph (graph_dir)")
    kg = KnowledgeGraph.load(graph_dir)
    check_graph(kg, graph_dir, name, need_triples)
    doc_ids = [x.doc_id for x in read_corpus(corpus_path)]
    if doc_ids != kg.doc_ids:
        raise DataError(f"{graph_dir}: knowledge graph passages differ from the corpus {corpus_path} "
                        f"({kg.n_docs} vs {len(doc_ids)} passages, or another order)")
    write_graph_index(out_dir, name, p, corpus_path, graph_dir, t0,
                      write_extra=lambda tmp: {"n_entities": kg.n_entities, "n_triples": len(kg.triples),
                                               "n_synonyms": len(kg.synonyms)})


def load_pointer(name: str, index_dir, p: dict, runtime_keys, corpus_path,
                 need_triples: bool = False) -> KnowledgeGraph:
    man, kg = load_graph_index(index_dir, name, p, runtime_keys, corpus_path)
    graph_dir = graph_path(index_dir, man)
    check_graph(kg, graph_dir, name, need_triples)
    return kg


def build(corpus_path, out_dir, params: dict | None, llm=None, graph_dir=None) -> None:
    build_pointer(NAME, _params(params), corpus_path, out_dir, graph_dir)


def load(index_dir, params: dict | None, corpus_path=None, llm=None) -> "HippoRAGRetriever":
    p = _params(params)
    kg = load_pointer(NAME, index_dir, p, RUNTIME_KEYS, corpus_path)
    if llm is None:
        raise ConfigError(f"retriever '{NAME}' needs an LLM engine for query NER (llm)")
    return HippoRAGRetriever(kg, p, llm)


def incidence(kg: KnowledgeGraph) -> sparse.csr_matrix:
    """(passages x entities) 0/1 matrix of the OpenIE mentions."""
    if not kg.mentions:
        return sparse.csr_matrix((kg.n_docs, kg.n_entities))
    e, d = np.array(kg.mentions, dtype=np.int64).T
    return sparse.csr_matrix((np.ones(len(e)), (d, e)), shape=(kg.n_docs, kg.n_entities))


class HippoRAGRetriever(Retriever):
    name = NAME

    def __init__(self, kg: KnowledgeGraph, p: dict, engine):
        self.kg, self.p, self.engine = kg, p, engine
        self.emb_params = embedding_params(kg)
        self.ppr = PPR(kg.entity_adjacency(p["synonym_weight"]))
        self.spec = kg.specificity() if p["specificity"] else (kg.specificity() > 0).astype(np.float64)
        self.doc_ent = incidence(kg)

    def seeds(self, names: list[str] | None, name_emb: np.ndarray | None,
              q_emb: np.ndarray) -> tuple[dict[int, float], str | None]:
        """Reset weights per entity and the fallback taken (None when NER linked entities)."""
        kg = self.kg
        fallback = "ner_parse_failure" if names is None else (None if names else "no_query_entities")
        weights: dict[int, float] = {}
        if fallback is None:
            for e, _ in link_entities(kg, names, name_emb):
                weights[e] = float(self.spec[e])
        else:
            sims = kg.entity_emb @ q_emb
            for e in np.argsort(-sims, kind="stable")[: self.p["fallback_top_entities"]]:
                if sims[e] > 0:
                    weights[int(e)] = float(sims[e]) * float(self.spec[e])
        return {e: w for e, w in weights.items() if w > 0}, fallback

    def name_embeddings(self, names: list[list[str] | None]) -> list[np.ndarray | None]:
        """Per query, the embeddings of its entity names (one encoder call for all queries);
        names with an exact normalised match in the graph are not encoded (zero rows)."""
        index = self.kg.entity_index()
        todo = [(i, j, n) for i, ns in enumerate(names) if ns for j, n in enumerate(ns)
                if normalize_entity(n) not in index]
        out = [np.zeros((len(ns), self.kg.entity_emb.shape[1]), dtype=np.float32) if ns else None for ns in names]
        if todo:
            emb = encode([n for _, _, n in todo], self.emb_params)
            for (i, j, _), row in zip(todo, emb):
                out[i][j] = row
        return out

    def search(self, queries: list[str], k: int) -> SearchResult:
        check_k(k)
        queries = list(queries)
        costs = new_costs(len(queries))
        if not queries:
            return SearchResult([], costs)
        kg = self.kg
        ner = query_entities(self.engine, queries, costs, max_tokens=self.p["ner_max_tokens"])
        names = [ns if ns is None or not self.p["grounded_only"] else
                 [n for n in ns if occurs_in(n, normalize_entity(q))] for q, ns in zip(queries, ner)]
        q_emb = encode(queries, self.emb_params)
        name_embs = self.name_embeddings(names)
        seeds, details = [], []
        for i, ns in enumerate(names):
            emb = name_embs[i]
            w, fallback = self.seeds(ns, emb, q_emb[i]) if kg.n_entities else ({}, "empty_graph")
            seeds.append(w)
            details.append({"query_entities": ner[i], "grounded_entities": ns, "fallback": fallback,
                            "seeds": {kg.entities[e]: v for e, v in sorted(w.items())}})
        dense = kg.passage_emb @ q_emb.T
        out = []
        for start in range(0, len(queries), BLOCK):
            block = range(start, min(start + BLOCK, len(queries)))
            resets = np.zeros((kg.n_entities, len(block)))
            for j, i in enumerate(block):
                for e, v in seeds[i].items():
                    resets[e, j] = v
            probs = np.zeros_like(resets)
            active = np.flatnonzero(resets.sum(axis=0) > 0)  # no seed at all: dense ranking only
            if active.size:
                probs[:, active] = self.ppr.run(resets[:, active], self.p["damping"])
            doc_scores = self.doc_ent @ probs  # (passages x queries of the block)
            for j, i in enumerate(block):
                out.append(top_docs(doc_scores[:, j], kg, k, dense=dense[:, i]))
                top = [int(e) for e in np.argsort(-probs[:, j], kind="stable")[:TOP_DETAIL] if probs[e, j] > 0]
                details[i]["entity_ppr"] = {kg.entities[e]: float(probs[e, j]) for e in top}
        return SearchResult(out, costs, details)
