"""HippoRAG 2 (Gutierrez et al. 2025, "From RAG to Memory: Non-Parametric Continual Learning
for Large Language Models") over the shared knowledge graph (kg.py).

Online retrieval, as in the paper and its released code:
1. **Query-to-triple linking**: cosine of the query embedding with every triple embedding
   (``kg.triple_emb``), min-max normalised over all triples (all equal -> all 1), and the
   ``link_top_k`` best distinct facts (a fact extracted from several passages counts once)
   are the candidates.
2. **Recognition memory**: one LLM call per query (batched over all queries of the search
   call, greedy) sees the query and the numbered candidates and returns the relevant ones
   (prompt ``recognition_filter.yaml``). HippoRAG 2 has the model rewrite the kept facts and
   maps them back to the candidates by string similarity; to save output tokens on CPU we
   ask for the candidates' numbers instead, ``{"relevant": [1, 3]}``. A reply counts as valid
   when ``relevant`` is a list of candidate numbers (1..n); anything else is counted in
   ``QueryCost.parse_failures`` and the query keeps all its candidates unfiltered (our
   fallback; param ``filter: false`` skips the call, the paper's "w/o filter" ablation).
   A valid empty list means no fact is relevant: as in HippoRAG 2's code, the query then
   gets the dense passage ranking.
3. **Graph**: entity nodes plus passage nodes; entity-entity edges from triples (weight =
   number of triples) and synonym edges (cosine x ``synonym_weight``), entity-passage
   context edges for every OpenIE mention (weight ``context_edge_weight``, 1.0 as in the
   code), all undirected.
4. **Reset vector**: each kept fact gives its subject and object its (normalised) fact
   score, divided by the entity's passage count when ``specificity`` is on (HippoRAG 2's
   weighting); an entity's weight is the mean over the kept facts naming it, and only the
   ``link_top_k`` heaviest entities stay seeded. Every passage node is seeded with its
   min-max-normalised dense query-passage score times ``passage_node_weight`` (0.05).
5. **PPR** (``ppr.PPR``, damping 0.5, batched over queries), passages ranked by their
   node's PPR probability; top ``k``, filled with the dense ranking if fewer than ``k``
   passages have mass (``common.top_docs``).

CPU simplification: one encoder (the KG's, default all-MiniLM-L6-v2, no instructions) for
query-to-triple and query-to-passage scores, where the paper uses NV-Embed-v2 with
task-specific instructions. Per-query diagnostics are in the search result's ``details`` (candidates with
scores, kept facts, the fallback taken: None, "filter_parse_failure", "filter_off",
"no_relevant_facts" or "no_triples", entity seeds).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from convrag.errors import ConfigError
from convrag.llm.parsing import parse_json_object
from convrag.llm.types import Request, Sampling
from convrag.retrieval.base import Capabilities, SearchResult, Retriever, batched_llm, check_k, normalize_params
from convrag.retrieval.graph.common import embedding_params, encode, few_shot, load_prompt, new_costs, top_docs
from convrag.retrieval.graph.hipporag import _int, _number, build_pointer, incidence, load_pointer
from convrag.retrieval.graph.kg import KnowledgeGraph
from convrag.retrieval.graph.ppr import PPR

CAPABILITIES = Capabilities(needs_graph=True, llm_at_query=True, cost_class="query_llm")
NAME = "hipporag2"
PROMPT = "recognition_filter"
DEFAULTS = {
    "llm": None,
    "damping": 0.5,
    "link_top_k": 5,
    "passage_node_weight": 0.05,
    "context_edge_weight": 1.0,
    "synonym_weight": 1.0,
    "specificity": True,
    "filter": True,
    "filter_max_tokens": 32,
}
RUNTIME_KEYS = frozenset(DEFAULTS)
BLOCK = 64  # queries per batched PPR run


def _params(params: dict | None) -> dict:
    p = normalize_params(NAME, params, DEFAULTS)
    if p["llm"] is not None and not isinstance(p["llm"], str):
        raise ConfigError(f"retriever '{NAME}': llm must be a model name or null, got {p['llm']!r}")
    _number(p, "damping", 0.0, 1.0, NAME)
    for key in ("passage_node_weight", "context_edge_weight", "synonym_weight"):
        _number(p, key, 0.0, None, NAME)
    _int(p, "link_top_k", 1, NAME)
    _int(p, "filter_max_tokens", 1, NAME)
    for key in ("specificity", "filter"):
        if not isinstance(p[key], bool):
            raise ConfigError(f"retriever '{NAME}': {key} must be true or false, got {p[key]!r}")
    return p


def build(corpus_path, out_dir, params: dict | None, llm=None, graph_dir=None) -> None:
    build_pointer(NAME, _params(params), corpus_path, out_dir, graph_dir, need_triples=True)


def load(index_dir, params: dict | None, corpus_path=None, llm=None) -> "HippoRAG2Retriever":
    p = _params(params)
    kg = load_pointer(NAME, index_dir, p, RUNTIME_KEYS, corpus_path, need_triples=True)
    if llm is None and p["filter"]:
        raise ConfigError(f"retriever '{NAME}' needs an LLM engine for the recognition-memory filter (llm)")
    return HippoRAG2Retriever(kg, p, llm)


def min_max(x: np.ndarray) -> np.ndarray:
    lo, hi = float(np.min(x)), float(np.max(x))
    return np.ones_like(x) if hi == lo else (x - lo) / (hi - lo)


def parse_filter(text: str | None, n: int) -> list[int] | None:
    """Kept candidate positions (0-based, reply order, no repeats), or None when the reply is
    not ``{"relevant": [numbers in 1..n]}``."""
    obj = parse_json_object(text)
    if obj is None or not isinstance(obj.get("relevant"), list):
        return None
    out = []
    for v in obj["relevant"]:
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v.strip())
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= n:
            return None
        if v - 1 not in out:
            out.append(v - 1)
    return out


def passage_graph(kg: KnowledgeGraph, synonym_weight: float, context_edge_weight: float) -> sparse.csr_matrix:
    """(E + P) x (E + P) symmetric adjacency: entity graph, entity-passage context edges."""
    ent = kg.entity_adjacency(synonym_weight)
    ctx = incidence(kg).T.tocsr() * float(context_edge_weight)  # entities x passages
    zero = sparse.csr_matrix((kg.n_docs, kg.n_docs))
    return sparse.bmat([[ent, ctx], [ctx.T, zero]], format="csr")


class HippoRAG2Retriever(Retriever):
    name = NAME

    def __init__(self, kg: KnowledgeGraph, p: dict, engine):
        self.kg, self.p, self.engine = kg, p, engine
        self.emb_params = embedding_params(kg)
        self.ppr = PPR(passage_graph(kg, p["synonym_weight"], p["context_edge_weight"]))
        counts = np.array([len(d) for d in kg.entity_docs()], dtype=np.float64)
        self.divisor = np.where(counts > 0, counts, 1.0) if p["specificity"] else np.ones(kg.n_entities)
        self.facts = [(s, r, o) for s, r, o, _ in kg.triples]

    def candidates(self, scores: np.ndarray) -> list[int]:
        """Top ``link_top_k`` distinct facts (triple indices) by normalised score."""
        out, seen = [], set()
        for t in np.argsort(-scores, kind="stable"):
            f = self.facts[int(t)]
            if f not in seen:
                seen.add(f)
                out.append(int(t))
                if len(out) == self.p["link_top_k"]:
                    break
        return out

    def fact_text(self, t: int) -> str:
        s, r, o = self.facts[t]
        return f"{self.kg.entities[s]} | {r} | {self.kg.entities[o]}"

    def entity_weights(self, kept: list[int], scores: np.ndarray) -> dict[int, float]:
        total: dict[int, float] = {}
        count: dict[int, int] = {}
        for t in kept:
            s, _, o = self.facts[t]
            for e in (s, o):
                total[e] = total.get(e, 0.0) + float(scores[t]) / self.divisor[e]
                count[e] = count.get(e, 0) + 1
        mean = {e: float(total[e] / count[e]) for e in total}
        top = sorted(mean.items(), key=lambda x: (-x[1], x[0]))[: self.p["link_top_k"]]
        return dict(top)

    def search(self, queries: list[str], k: int) -> SearchResult:
        check_k(k)
        queries = list(queries)
        costs = new_costs(len(queries))
        if not queries:
            return SearchResult([], costs)
        kg, p = self.kg, self.p
        q_emb = encode(queries, self.emb_params)
        dense = kg.passage_emb @ q_emb.T  # passages x queries
        fact_scores = [min_max(kg.triple_emb @ q_emb[i]) if self.facts else None for i in range(len(queries))]
        cands = [self.candidates(fs) if fs is not None else [] for fs in fact_scores]

        # recognition memory: ONE batched call over the queries that have candidates
        per_query = []
        if p["filter"]:
            prompt = load_prompt(PROMPT)
            sampling = Sampling(max_tokens=p["filter_max_tokens"])
            for q, c in zip(queries, cands):
                listing = "\n".join(f"{j + 1}. {self.fact_text(t)}" for j, t in enumerate(c))
                per_query.append([Request(few_shot(prompt, question=q, facts=listing), sampling=sampling)] if c else [])
            replies = batched_llm(self.engine, per_query, costs)
        details, seeds = [], []
        for i, c in enumerate(cands):
            fallback = None
            if not c:
                kept, fallback = [], "no_triples"
            elif not p["filter"]:
                kept, fallback = list(c), "filter_off"
            else:
                pos = parse_filter(replies[i][0].text, len(c))
                if pos is None:
                    costs[i].parse_failures += 1
                    kept, fallback = list(c), "filter_parse_failure"
                else:
                    kept = [c[j] for j in pos]
                    if not kept:
                        fallback = "no_relevant_facts"
            w = self.entity_weights(kept, fact_scores[i]) if kept else {}
            seeds.append(w)
            details.append({
                "candidates": [(self.fact_text(t), float(fact_scores[i][t])) for t in c],
                "kept": [self.fact_text(t) for t in kept], "fallback": fallback,
                "seeds": {kg.entities[e]: v for e, v in sorted(w.items())},
            })

        E, out = kg.n_entities, []
        for start in range(0, len(queries), BLOCK):
            block = range(start, min(start + BLOCK, len(queries)))
            resets = np.zeros((E + kg.n_docs, len(block)))
            graph = []  # queries of the block that run PPR (kept facts); the others get dense
            for j, i in enumerate(block):
                if not seeds[i]:
                    continue
                for e, v in seeds[i].items():
                    resets[e, j] = v
                resets[E:, j] = min_max(dense[:, i]) * p["passage_node_weight"]
                if resets[:, j].sum() > 0:
                    graph.append(j)
            probs = np.zeros_like(resets)
            if graph:
                probs[:, graph] = self.ppr.run(resets[:, graph], p["damping"])
            for j, i in enumerate(block):
                out.append(top_docs(probs[E:, j], kg, k, dense=dense[:, i]))
        return SearchResult(out, costs, details)
