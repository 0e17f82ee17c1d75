"""LightRAG retrieval (Guo et al. 2024, "LightRAG: Simple and Fast Retrieval-Augmented
Generation") over the project's shared knowledge graph.

Library or own code. The PyPI package ``lightrag-hku`` (read at version 1.5.7, not a
dependency) was judged and not used, because:
- its retrieval runs only over its own storages, filled by its own indexing: entity and
  relation records with LLM-written descriptions, relation keywords, chunk ids and its
  vector stores. The grid requires ONE shared KG artifact per corpus (``kg.py``) reused by
  every graph retriever; re-indexing with LightRAG's extraction (several long prompts per
  chunk, plus description merging) would multiply the most expensive step and give a second
  graph, so results would not be comparable across graph retrievers;
- its query path is one asynchronous ``aquery`` per query, whose keyword extraction is its
  own ``llm_model_func`` call with one prompt; making that one batched ``engine.generate``
  over all queries of a job (as the grid requires) would need a collecting layer around its
  async internals, and its default tokenizer (``tiktoken``) downloads its vocabulary on
  first use, which the offline machines cannot do;
- it returns an answer or a context string, not a ranked passage list with scores, which is
  what the evaluation (Recall@k on supporting passages) needs.
So the paper's retrieval procedure is implemented here, over ``KnowledgeGraph``.

How it follows the paper (section 3.2, "dual-level retrieval"):
1. Keyword extraction: one LLM call per query (prompt ``lightrag_keywords.yaml``, greedy,
   JSON ``{"low_level": [...], "high_level": [...]}``), ONE batched call for all queries.
   Output that is not that JSON (no object, neither key, or a value that is not a list) is
   counted in ``QueryCost.parse_failures`` and the whole query is then used as both keyword
   levels. Valid JSON with both lists empty gets the same fallback (not counted: the model
   did answer in the asked format). A level whose list is empty while the other is not
   retrieves nothing, as in LightRAG.
2. Keyword matching. As LightRAG does, the keywords of a level are joined with ", " into ONE
   text and embedded (the KG's embedding model). Low level: cosine to every entity
   embedding (``kg.entity_emb``), the ``top_k`` best with cosine >= ``cosine_threshold``
   (LightRAG's defaults 40 and 0.2). High level: the same against the relation (triple)
   embeddings (``kg.triple_emb``, of "subject relation object").
3. High-order relatedness: a matched entity brings its one-hop relations (every triple it
   is in); a matched relation brings its two end entities. These neighbours weigh
   ``neighbor_weight`` (default 0.5) x the similarity of the element that brought them.
   ``mode``: ``local`` (low level only), ``global`` (high level only) or ``hybrid`` (both;
   LightRAG's default).
4. Passages (LightRAG's "text units"): an entity points at the passages it was extracted
   from (``kg.entity_docs``), a relation at the passage it was extracted from. Where an
   element points at more than ``max_passages_per_element`` passages (LightRAG's
   ``related_chunk_number``, 5), the ones most similar to the query are kept (LightRAG's
   default chunk pick, "VECTOR").

Where the paper is silent, or where this differs from the library:
- Passage score (documented, not LightRAG's): the sum, over the distinct graph elements
  pointing at the passage, of the element's weight (its cosine when matched directly, the
  neighbour weight otherwise; an element reached twice keeps its larger weight). Ties are
  broken by the summed degree of those elements (LightRAG orders its entities and relations
  by degree; entity degree = number of triples it is in, relation degree = the sum of its
  end entities' degrees), then corpus order. LightRAG instead round-robins its entity and
  relation chunk lists into the LLM context; a sum gives a single ranking the evaluation
  can score, and hybrid passages found by both levels rise to the top.
- Exact ties left after that are separated by one float step, so a consumer that sorts by
  score keeps this order.
- Every query returns exactly ``min(k, corpus size)`` passages: passages no element reaches
  are filled in by the dense ranking of the whole query over ``kg.passage_emb``
  (``common.top_docs``), after all graph-reached passages.
- LightRAG's answer generation, context token budgets and its "mix"/"naive" modes are not
  part of a retriever and are left out.

All params only affect query time (the index folder is a manifest pointing at the KG), so
they are all ``RUNTIME_KEYS``.
"""

from __future__ import annotations

import time

import numpy as np

from convrag.errors import ConfigError, DataError
from convrag.llm.parsing import parse_json_object, string_list
from convrag.llm.types import Request, Sampling
from convrag.retrieval.base import (
    Capabilities,
    SearchResult,
    Hits,
    QueryCost,
    Retriever,
    batched_llm,
    check_k,
    normalize_params,
    read_corpus,
)
from convrag.retrieval.graph import common
from convrag.retrieval.graph.kg import KnowledgeGraph

CAPABILITIES = Capabilities(needs_graph=True, llm_at_query=True, cost_class="query_llm")
NAME = "lightrag"
MODES = ("local", "global", "hybrid")
DEFAULTS = {
    "llm": None,  # the query-time keyword model (registry name); the Engine is passed in
    "mode": "hybrid",
    "top_k": 40,
    "cosine_threshold": 0.2,
    "neighbor_weight": 0.5,
    "max_passages_per_element": 5,
    "keyword_max_tokens": 64,
}
RUNTIME_KEYS = frozenset(DEFAULTS)
PROMPT = "lightrag_keywords"


def _params(params: dict | None) -> dict:
    p = normalize_params(NAME, params, DEFAULTS)
    if p["mode"] not in MODES:
        raise ConfigError(f"retriever '{NAME}': mode must be one of {', '.join(MODES)}, got {p['mode']!r}")
    for key in ("top_k", "max_passages_per_element", "keyword_max_tokens"):
        v = p[key]
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"retriever '{NAME}': {key} must be a positive integer, got {v!r}")
    for key in ("cosine_threshold", "neighbor_weight"):
        v = p[key]
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ConfigError(f"retriever '{NAME}': {key} must be a number, got {v!r}")
    if not 0.0 <= p["neighbor_weight"] <= 1.0:
        raise ConfigError(f"retriever '{NAME}': neighbor_weight must be in [0, 1], got {p['neighbor_weight']!r}")
    if not -1.0 <= p["cosine_threshold"] < 1.0:
        raise ConfigError(f"retriever '{NAME}': cosine_threshold must be in [-1, 1), got {p['cosine_threshold']!r}")
    if p["llm"] is not None and not isinstance(p["llm"], str):
        raise ConfigError(f"retriever '{NAME}': llm must be a model name or null, got {p['llm']!r}")
    return p


def _check_kg(kg: KnowledgeGraph, where) -> None:
    for attr in ("entity_emb", "triple_emb", "passage_emb"):
        if getattr(kg, attr) is None:
            raise DataError(f"{where}: knowledge graph has no {attr}; LightRAG needs entity, relation "
                            f"and passage embeddings (rebuild the graph with embeddings)")
    common.embedding_params(kg)


def build(corpus_path, out_dir, params: dict | None, llm=None, graph_dir=None) -> None:
    """The index is a manifest pointing at the shared KG (LightRAG has no index of its own
    here); the KG is checked to cover this corpus, in order, with every embedding present."""
    t0 = time.perf_counter()
    p = _params(params)
    if graph_dir is None:
        raise ConfigError(f"retriever '{NAME}' needs the knowledge graph (graph_dir)")
    kg = KnowledgeGraph.load(graph_dir)
    _check_kg(kg, graph_dir)
    doc_ids = [x.doc_id for x in read_corpus(corpus_path)]
    if doc_ids != kg.doc_ids:
        raise DataError(f"{graph_dir}: knowledge graph passages differ from the corpus {corpus_path} "
                        f"({kg.n_docs} vs {len(doc_ids)} passages, or another order)")
    common.write_graph_index(out_dir, NAME, p, corpus_path, graph_dir, t0,
                             write_extra=lambda tmp: {"n_entities": kg.n_entities, "n_relations": len(kg.triples)})


def load(index_dir, params: dict | None, corpus_path=None, llm=None) -> "LightRAGRetriever":
    p = _params(params)
    man, kg = common.load_graph_index(index_dir, NAME, p, RUNTIME_KEYS, corpus_path)
    graph_dir = common.graph_path(index_dir, man)
    _check_kg(kg, graph_dir)
    if llm is None:
        raise ConfigError(f"retriever '{NAME}' needs an LLM engine for keyword extraction (llm)")
    return LightRAGRetriever(kg, p, llm)


def parse_keywords(text: str | None) -> tuple[list[str], list[str]] | None:
    """``(low_level, high_level)`` from the model's JSON, or None when it is not the JSON
    asked for (no object, neither key, or a value that is not a list of strings)."""
    obj = parse_json_object(text)
    if obj is None or not ("low_level" in obj or "high_level" in obj):
        return None
    out = []
    for key in ("low_level", "high_level"):
        v = obj.get(key, [])
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list):
            return None
        out.append(string_list(v))
    return out[0], out[1]


def _top(sims: np.ndarray, top_k: int, threshold: float) -> list[int]:
    order = np.argsort(-sims, kind="stable")[:top_k]
    return [int(i) for i in order if sims[i] >= threshold]


class LightRAGRetriever(Retriever):
    name = NAME

    def __init__(self, kg: KnowledgeGraph, p: dict, engine):
        self.kg, self.p, self.engine = kg, p, engine
        self.emb_params = common.embedding_params(kg)
        self.entity_docs = kg.entity_docs()
        self.entity_triples = kg.entity_triples()
        self.entity_degree = np.array([len(t) for t in self.entity_triples], dtype=np.float64)

    # ---- step 1: keywords (one batched LLM call) -----------------------------------------
    def keywords(self, queries: list[str], costs: list[QueryCost]) -> list[tuple[list[str], list[str]]]:
        prompt = common.load_prompt(PROMPT)
        sampling = Sampling(max_tokens=self.p["keyword_max_tokens"])
        per_query = [[Request(common.few_shot(prompt, query=q), sampling=sampling)] for q in queries]
        out = []
        for q, resps, cost in zip(queries, batched_llm(self.engine, per_query, costs), costs):
            kw = parse_keywords(resps[0].text)
            if kw is None:
                cost.parse_failures += 1
                kw = ([q], [q])
            elif not kw[0] and not kw[1]:
                kw = ([q], [q])
            out.append(kw)
        return out

    # ---- steps 2-4: graph elements -> passage scores ---------------------------------------
    def element_weights(self, low_emb: np.ndarray | None, high_emb: np.ndarray | None) -> dict:
        """``{("e", entity) | ("t", triple): weight}`` for one query (see module doc)."""
        p, kg = self.p, self.kg
        nw = float(p["neighbor_weight"])
        weights: dict[tuple[str, int], float] = {}

        def add(key, w):
            if w > weights.get(key, 0.0):
                weights[key] = float(w)

        if low_emb is not None and p["mode"] in ("local", "hybrid") and kg.n_entities:
            sims = kg.entity_emb @ low_emb
            for e in _top(sims, p["top_k"], p["cosine_threshold"]):
                add(("e", e), sims[e])
                for t in self.entity_triples[e]:
                    add(("t", t), sims[e] * nw)
        if high_emb is not None and p["mode"] in ("global", "hybrid") and kg.triples:
            sims = kg.triple_emb @ high_emb
            for t in _top(sims, p["top_k"], p["cosine_threshold"]):
                add(("t", t), sims[t])
                s, _, o, _ = kg.triples[t]
                add(("e", s), sims[t] * nw)
                add(("e", o), sims[t] * nw)
        return weights

    def passage_scores(self, weights: dict, dense: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        kg, cap = self.kg, self.p["max_passages_per_element"]
        scores = np.zeros(kg.n_docs)
        degree = np.zeros(kg.n_docs)
        for (kind, i), w in weights.items():
            if kind == "e":
                docs, deg = self.entity_docs[i], self.entity_degree[i]
            else:
                s, _, o, d = kg.triples[i]
                docs, deg = [d], self.entity_degree[s] + self.entity_degree[o]
            if len(docs) > cap:
                docs = sorted(docs, key=lambda d: (-dense[d], d))[:cap]
            scores[docs] += w
            degree[docs] += deg
        return scores, degree

    def rank(self, scores: np.ndarray, degree: np.ndarray, dense: np.ndarray, k: int) -> Hits:
        reached = np.flatnonzero(scores > 0)
        order = sorted(reached.tolist(), key=lambda d: (-scores[d], -degree[d], d))
        ranked = np.zeros(self.kg.n_docs)
        ranked[order] = common.strictly_decreasing([float(scores[d]) for d in order])
        return common.top_docs(ranked, self.kg, k, dense=dense)

    def search(self, queries: list[str], k: int) -> SearchResult:
        check_k(k)
        queries = list(queries)
        costs = common.new_costs(len(queries))
        if not queries:
            return SearchResult([], costs)
        kws = self.keywords(queries, costs)
        texts = list(queries)
        slots = []  # per query: (row of low-level text or None, row of high-level text or None)
        for low, high in kws:
            row = []
            for words in (low, high):
                if words:
                    row.append(len(texts))
                    texts.append(", ".join(words))
                else:
                    row.append(None)
            slots.append(row)
        emb = common.encode(texts, self.emb_params)
        dense_all = emb[:len(queries)] @ self.kg.passage_emb.T
        out = []
        for qi, (lo, hi) in enumerate(slots):
            weights = self.element_weights(emb[lo] if lo is not None else None, emb[hi] if hi is not None else None)
            scores, degree = self.passage_scores(weights, dense_all[qi])
            out.append(self.rank(scores, degree, dense_all[qi], k))
        return SearchResult(out, costs)
