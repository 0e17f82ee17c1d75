"""ToG-2 (Ma et al., "Think-on-Graph 2.0: Deep and Faithful LLM Reasoning with Knowledge-guided
Retrieval Augmented Generation"): iterative exploration that alternates graph expansion with
passage (context) retrieval, on the shared OpenIE knowledge graph.

How it follows the paper, per query:
1. Topic entities: LLM named entities (``common.query_entities``), linked to graph nodes
   (``common.link_entities``: exact normalised name, else nearest entity embedding); when the
   NER output is not JSON or is empty, the query itself is linked by its embedding. Names
   whose best link has a cosine below ``min_link_score`` (0.5) are dropped: small models list
   entities of the prompt's own examples or generic phrases ("1990", "the founder"), which
   link to arbitrary nodes (MiniLM: "1990" -> "mara voss" 0.22, "Alber Bridge" -> "alder
   bridge" 0.90); when no name is left, the query itself is linked (no threshold, so every
   query has a seed). At most ``max_topic_entities`` are kept, by link score (the paper prunes topic entities with the LLM
   when there are more than two; we skip that call). As in ToG-2, the contexts of the topic
   entities (their passages, see 4) start the evidence collection.
2. Relation pruning: the candidate relations of the current entities are the graph edges
   leaving them, grouped by (entity, relation text, direction), without edges back to an
   entity already explored. They are listed to the LLM (at most ``max_relations``, pre-ranked by
   the cosine between the query and the best triple embedding of the group) and the LLM picks
   up to ``width`` of them (JSON ``{"relations": [numbers]}``). Like ToG-2's combined relation
   pruning, one prompt per query covers all of its current entities.
3. Entity expansion: the neighbours along the chosen relations become candidate entities.
4. Context retrieval: the contexts of a candidate entity are the passages that mention it
   (``kg.mentions``), scored by the dense query-passage cosine (``kg.passage_emb``); the
   ``context_k`` best (entity, passage) pairs over all candidates form the context pool.
5. Entity pruning by context, not by the LLM: an entity's score is
   sum over its pool pairs of cosine * exp(-0.8 * rank) (rank 1 = best pair in the pool), and
   the ``width`` best entities are kept; their pool passages join the evidence. This is
   ToG-2's context-based entity pruning (its code, ``para_rank_topk``, uses the same
   exponential rank decay with alpha = 0.8 over the top 10 paragraphs); it needs no LLM call,
   which matters on CPU, and it ranks entities by the relevance of the text that supports them.
6. Sufficiency check: the LLM sees the question, the triples along the explored paths and the
   ``prompt_passages`` best evidence passages, and answers JSON ``{"sufficient": "yes"|"no"}``;
   a query stops when "yes", when no relation or entity is left, or at ``max_depth``. The check
   is not made after the last depth (the query stops there whatever it says), so a query that
   never stops early makes exactly 1 (NER) + max_depth (relations) + (max_depth - 1)
   (sufficiency) LLM calls: 4 with the defaults.
Every LLM step is one batched call over the queries still active (``base.batched_llm``).

Returned ranking: the passages collected across iterations (topic contexts and the contexts of
every kept entity), ranked by their dense query-passage cosine, as ToG-2 ranks its collected
references by relevance to the question; score = 1 + (1 + cosine) / 2 (in [1, 2], so every
collected passage is above the dense fill). Exactly ``min(k, n_docs)`` passages: when fewer
were collected, ``common.top_docs`` fills with the dense ranking (scores below 1e-3).

Parse failures (``QueryCost.parse_failures``) and their fallbacks: relation pruning output
that is not ``{"relations": [...]}`` with at least one valid pick -> the ``width`` candidates
with the best query-triple cosine; sufficiency output that is not yes/no -> "no" (keep
exploring: costs calls, loses no evidence); NER failures as in ``common``.

Simplified against the paper: our relations are free-text OpenIE phrases (not Wikidata
relation types), so relations are chosen per (entity, phrase, direction) group; entities have
no descriptions or Wikipedia pages, so their contexts are the corpus passages that mention
them, whole passages rather than sentence windows; ToG-2's final answer generation is not
part of a retriever (the assistant model answers from the returned passages); small budgets
(depth 2, width 2) because the default grid runs on a 2-core CPU.

The exploration primitives here (candidate relations, relation choice parsing, the context
pool, the retriever base class) are shared with ``pog.py``.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from convrag.errors import ConfigError, DataError
from convrag.llm.parsing import parse_json_object
from convrag.llm.types import Request, Sampling
from convrag.retrieval.base import (
    Capabilities,
    SearchResult,
    QueryCost,
    Retriever,
    batched_llm,
    check_k,
    manifest_corpus,
    normalize_params,
    passage_text,
    read_corpus,
)
from convrag.retrieval.graph import common
from convrag.retrieval.graph.kg import KnowledgeGraph, normalize_entity

CAPABILITIES = Capabilities(needs_graph=True, llm_at_query=True, cost_class="explorer")
DEFAULTS = {
    "llm": None,  # query-time model name (the Engine itself is passed to load)
    "max_depth": 2,
    "width": 2,  # relations kept per depth, and entities kept per depth
    "max_relations": 8,  # candidate relations shown to the LLM per depth
    "context_k": 10,  # size of the (entity, passage) context pool per depth
    "max_topic_entities": 3,
    "min_link_score": 0.5,  # query entities linked with a lower cosine are dropped
    "prompt_passages": 3,  # evidence passages shown in the sufficiency prompt
    "passage_chars": 240,  # each shown passage is cut to this many characters
}
# The index is only a pointer to the shared KG: no param changes it.
RUNTIME_KEYS = frozenset(DEFAULTS)
ALPHA = 0.8  # ToG-2's rank decay in entity scoring

_MIN = {"max_depth": 1, "width": 1, "max_relations": 1, "context_k": 1, "max_topic_entities": 1,
        "prompt_passages": 0, "passage_chars": 1}


def check_link_score(name: str, p: dict) -> None:
    v = p["min_link_score"]
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not -1.0 <= v <= 1.0:
        raise ConfigError(f"retriever '{name}': min_link_score must be a number in [-1, 1], got {v!r}")
RELATION_SAMPLING = Sampling(max_tokens=24)
YESNO_SAMPLING = Sampling(max_tokens=12)


# ---- params, build, load (shared with pog) ------------------------------------------------

def check_params(name: str, params: dict | None, defaults: dict, minimums: dict) -> dict:
    p = normalize_params(name, params, defaults)
    for key, lo in minimums.items():
        v = p[key]
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ConfigError(f"retriever '{name}': {key} must be an integer >= {lo}, got {v!r}")
    if p["llm"] is not None and not isinstance(p["llm"], str):
        raise ConfigError(f"retriever '{name}': llm must be a model name, got {p['llm']!r}")
    check_link_score(name, p)
    return p


def check_graph(kg: KnowledgeGraph, where, name: str) -> None:
    for attr in ("entity_emb", "passage_emb", "triple_emb"):
        if getattr(kg, attr) is None:
            raise DataError(f"{where}: knowledge graph has no {attr}; retriever '{name}' needs it "
                            f"(rebuild the graph with embeddings)")


def corpus_texts(kg: KnowledgeGraph, corpus_path) -> list[str]:
    """Passage texts aligned with ``kg.doc_ids`` (for the prompts)."""
    passages = read_corpus(corpus_path)
    by_id = {p.doc_id: passage_text(p) for p in passages}
    missing = [d for d in kg.doc_ids if d not in by_id]
    if missing:
        raise DataError(f"{corpus_path}: passage '{missing[0]}' of the knowledge graph is not in the "
                        f"corpus ({len(missing)} missing)")
    if len(passages) != kg.n_docs:
        raise DataError(f"{corpus_path}: corpus has {len(passages)} passages, its knowledge graph {kg.n_docs}")
    return [by_id[d] for d in kg.doc_ids]


def build_explorer(name: str, corpus_path, out_dir, p: dict, graph_dir) -> None:
    t0 = time.perf_counter()
    if graph_dir is None:
        raise ConfigError(f"retriever '{name}' needs a knowledge graph (graph_dir)")
    kg = KnowledgeGraph.load(graph_dir)
    check_graph(kg, graph_dir, name)
    corpus_texts(kg, corpus_path)
    common.write_graph_index(out_dir, name, p, corpus_path, graph_dir, t0)


def load_explorer(name: str, index_dir, p: dict, runtime_keys, corpus_path):
    man, kg = common.load_graph_index(index_dir, name, p, runtime_keys, corpus_path)
    check_graph(kg, common.graph_path(index_dir, man), name)
    return kg, corpus_texts(kg, corpus_path if corpus_path is not None else manifest_corpus(index_dir, man))


def build(corpus_path, out_dir, params: dict | None, llm=None, graph_dir=None) -> None:
    build_explorer("tog2", corpus_path, out_dir, check_params("tog2", params, DEFAULTS, _MIN), graph_dir)


def load(index_dir, params: dict | None, corpus_path=None, llm=None) -> "ToG2Retriever":
    p = check_params("tog2", params, DEFAULTS, _MIN)
    kg, texts = load_explorer("tog2", index_dir, p, RUNTIME_KEYS, corpus_path)
    return ToG2Retriever(kg, texts, p, llm)


# ---- exploration primitives (shared with pog) ---------------------------------------------

@dataclass(frozen=True)
class Candidate:
    """Edges leaving ``entity`` with one relation text in one direction."""

    entity: int
    relation: str
    outgoing: bool  # True: entity is the subject (entity | relation | ?)
    targets: tuple[int, ...]  # neighbour entities not yet explored
    triples: tuple[int, ...]  # per target, the (first) triple reaching it
    score: float  # max cosine(query, triple embedding) over the group's triples

    @property
    def key(self) -> tuple[int, str, bool]:
        return (self.entity, self.relation.lower(), self.outgoing)


def candidate_relations(kg: KnowledgeGraph, ent_triples: list[list[int]], frontier: list[int],
                        visited: set[int], used: set, qvec: np.ndarray) -> list[Candidate]:
    """Relation groups leaving ``frontier``, without edges into ``visited`` and without the
    groups in ``used``; best query-triple cosine first (ties: frontier order, then text)."""
    groups: dict[tuple, dict] = {}
    for rank, e in enumerate(frontier):
        for t in ent_triples[e]:
            s, r, o, _ = kg.triples[t]
            for ent, other, out in ((s, o, True), (o, s, False)):
                if ent != e:
                    continue
                key = (e, r.lower(), out)
                if key in used or other in visited:
                    continue
                g = groups.setdefault(key, {"rank": rank, "relation": r, "targets": {}, "tids": []})
                g["targets"].setdefault(other, t)
                g["tids"].append(t)
    out_list = []
    for (e, _, out), g in groups.items():
        score = float(np.max(kg.triple_emb[g["tids"]] @ qvec))
        out_list.append((g["rank"], Candidate(e, g["relation"], out, tuple(g["targets"]),
                                              tuple(g["targets"].values()), score)))
    out_list.sort(key=lambda x: (-x[1].score, x[0], x[1].relation.lower(), not x[1].outgoing))
    return [c for _, c in out_list]


def candidate_line(kg: KnowledgeGraph, c: Candidate) -> str:
    name = kg.entities[c.entity]
    return f"{name} | {c.relation} | ?" if c.outgoing else f"? | {c.relation} | {name}"


def numbered(lines: list[str], empty: str = "(none)") -> str:
    return "\n".join(f"{i}. {x}" for i, x in enumerate(lines, 1)) if lines else empty


def triple_line(kg: KnowledgeGraph, t: int) -> str:
    s, r, o, _ = kg.triples[t]
    return f"{kg.entities[s]} | {r} | {kg.entities[o]}"


_LEADING_NUMBER = re.compile(r"\s*(\d+)\b")


def parse_relation_choice(text: str, cands: list[Candidate], width: int, key: str = "relations") -> list[int] | None:
    """Positions (0-based) of the candidates picked in ``{"relations": [...]}``: numbers from
    the listing (also as strings, or a listing line echoed back), or relation texts. At most
    ``width``; None when the output is not that JSON or picks no listed candidate."""
    obj = parse_json_object(text)
    if obj is None or key not in obj:
        return None
    values = obj[key] if isinstance(obj[key], list) else [obj[key]]
    picked: list[int] = []
    for v in values:
        j = None
        if isinstance(v, bool):
            continue
        if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
            j = int(v) - 1
        elif isinstance(v, str):
            m = _LEADING_NUMBER.match(v)
            if m:
                j = int(m.group(1)) - 1
            else:
                parts = [x.strip() for x in v.split("|")]
                rel = " ".join((parts[1] if len(parts) == 3 else v).lower().split())
                j = next((i for i, c in enumerate(cands) if c.relation.lower() == rel and i not in picked), None)
        if j is not None and 0 <= j < len(cands) and j not in picked:
            picked.append(j)
        if len(picked) == width:
            break
    return picked or None


def parse_yes_no(text: str, key: str) -> bool | None:
    obj = parse_json_object(text)
    if obj is None or key not in obj:
        return None
    v = obj[key]
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("yes", "no", "true", "false"):
        return v.strip().lower() in ("yes", "true")
    return None


def context_pool(entities: list[int], ent_docs: list[list[int]], cos: np.ndarray, k: int) -> list[tuple[int, int, float]]:
    """The ``k`` best (entity, passage, cosine) pairs, a passage being a context of an entity
    when it mentions it; ties by entity order, then passage position."""
    pairs = [(-float(cos[d]), r, d, e) for r, e in enumerate(entities) for d in ent_docs[e]]
    pairs.sort()
    return [(e, d, -s) for s, _, d, e in pairs[:k]]


def rank_entities(pool: list[tuple[int, int, float]], alpha: float = ALPHA) -> list[tuple[int, float]]:
    """ToG-2 entity scores: sum of cosine * exp(-alpha * rank) over the entity's pool pairs."""
    scores: dict[int, float] = {}
    for rank, (e, _, s) in enumerate(pool, 1):
        scores[e] = scores.get(e, 0.0) + s * math.exp(-alpha * rank)
    order = list(scores)  # first appearance breaks ties
    return sorted(scores.items(), key=lambda x: (-x[1], order.index(x[0])))


class GraphExplorer(Retriever):
    """What ToG-2 and PoG share: the graph, passage texts, the engine, query encoding,
    topic entities, prompt blocks and the final ranking."""

    name = ""

    def __init__(self, kg: KnowledgeGraph, texts: list[str], params: dict, engine=None,
                 encoder: Callable[[list[str]], np.ndarray] | None = None):
        self.kg, self.texts, self.p, self.engine = kg, texts, params, engine
        # Query/name encoder; defaults to the KG's own embedding model (tests may replace it).
        self.encoder = encoder or (lambda xs: common.encode(xs, common.embedding_params(kg)))
        self.ent_docs = kg.entity_docs()
        self.ent_triples = kg.entity_triples()
        self.ent_index = kg.entity_index()

    def _engine(self):
        if self.engine is None:
            raise ConfigError(f"retriever '{self.name}' calls an LLM at query time: load it with llm=<Engine> "
                              f"(params.llm names the model)")
        return self.engine

    def _llm(self, per_query: list[list[Request]], costs: list[QueryCost]) -> list[list]:
        """One batched engine call for every query's requests of this step."""
        return batched_llm(self._engine(), per_query, costs, desc=None)

    def topic_entities(self, queries: list[str], qemb: np.ndarray, costs: list[QueryCost]) -> list[list[int]]:
        names = common.query_entities(self._engine(), queries, costs)
        todo = [n for ns in names if ns for n in ns if normalize_entity(n) not in self.ent_index]
        emb = dict(zip(todo, self.encoder(todo))) if todo else {}
        dim = self.kg.entity_emb.shape[1]
        out = []
        for q, ns, qv in zip(queries, names, qemb):
            links = []
            if ns:
                name_emb = np.stack([emb[n] if n in emb else np.zeros(dim, np.float32) for n in ns])
                links = [(e, s) for e, s in common.link_entities(self.kg, ns, name_emb)
                         if s >= self.p["min_link_score"]]
            if not links:  # NER failed, found nothing or nothing close: link the query itself
                links = common.link_entities(self.kg, [q], qv[None, :])
            out.append([e for e, _ in links[: self.p["max_topic_entities"]]])
        return out

    def passages_block(self, docs: list[int], cos: np.ndarray) -> str:
        best = sorted(docs, key=lambda d: (-float(cos[d]), d))[: self.p["prompt_passages"]]
        lines = []
        for d in best:
            t = " ".join(self.texts[d].split())
            n = self.p["passage_chars"]
            lines.append(t if len(t) <= n else t[:n].rstrip() + "...")
        return numbered(lines)

    def names(self, entities) -> list[str]:
        return [self.kg.entities[e] for e in entities]


@dataclass
class _State:
    frontier: list[int]
    visited: set[int]
    used: set = field(default_factory=set)
    collected: set[int] = field(default_factory=set)  # passage positions
    chains: list[int] = field(default_factory=list)  # triples along the explored paths
    stop: str | None = None


class ToG2Retriever(GraphExplorer):
    name = "tog2"

    def search(self, queries: list[str], k: int) -> SearchResult:
        check_k(k)
        n, kg, p = len(queries), self.kg, self.p
        costs = common.new_costs(n)
        traces: list[dict] = [{"topic": [], "steps": [], "stop": None} for _ in queries]
        if n == 0:
            return SearchResult([], costs, traces)
        self._engine()
        qemb = np.asarray(self.encoder(list(queries)), dtype=np.float32)
        pcos = qemb @ kg.passage_emb.T
        states = []
        for i, topic in enumerate(self.topic_entities(queries, qemb, costs)):
            st = _State(frontier=list(topic), visited=set(topic))
            st.collected.update(d for _, d, _ in context_pool(topic, self.ent_docs, pcos[i], p["context_k"]))
            if not topic:
                st.stop = "no_topic_entities"
            traces[i]["topic"] = self.names(topic)
            states.append(st)
        rel_prompt, suff_prompt = common.load_prompt("tog2_relations"), common.load_prompt("tog2_sufficiency")

        for depth in range(1, p["max_depth"] + 1):
            cands: dict[int, list[Candidate]] = {}
            for i, st in enumerate(states):
                if st.stop:
                    continue
                c = candidate_relations(kg, self.ent_triples, st.frontier, st.visited, st.used, qemb[i])
                if c:
                    cands[i] = c[: p["max_relations"]]
                else:
                    st.stop = "no_relations"
            if not cands:
                break
            reqs = [[Request(common.few_shot(rel_prompt, question=queries[i], width=p["width"],
                                             relations=numbered([candidate_line(kg, c) for c in cands[i]])),
                             sampling=RELATION_SAMPLING)] if i in cands else [] for i in range(n)]
            resps = self._llm(reqs, costs)
            for i, cs in cands.items():
                st = states[i]
                picked = parse_relation_choice(resps[i][0].text, cs, p["width"])
                fallback = picked is None
                if fallback:  # documented fallback: best query-triple cosine
                    costs[i].parse_failures += 1
                    picked = list(range(min(p["width"], len(cs))))
                chosen = [cs[j] for j in picked]
                reach: dict[int, int] = {}  # candidate entity -> triple reaching it
                for c in chosen:
                    st.used.add(c.key)
                    for t, tri in zip(c.targets, c.triples):
                        if t not in st.visited:
                            reach.setdefault(t, tri)
                pool = context_pool(list(reach), self.ent_docs, pcos[i], p["context_k"])
                kept = [e for e, _ in rank_entities(pool)[: p["width"]]]
                st.collected.update(d for e, d, _ in pool if e in kept)
                st.chains.extend(reach[e] for e in kept)
                st.visited.update(kept)
                st.frontier = kept
                traces[i]["steps"].append({
                    "depth": depth,
                    "candidates": [candidate_line(kg, c) for c in cs],
                    "chosen": [candidate_line(kg, c) for c in chosen],
                    "fallback": fallback,
                    "expanded": self.names(reach),
                    "kept": self.names(kept),
                    "sufficient": None,
                })
                if not kept:
                    st.stop = "no_entities"
            if depth == p["max_depth"]:
                break
            check = [i for i in cands if not states[i].stop]
            reqs = [[Request(common.few_shot(suff_prompt, question=queries[i],
                                             triples=numbered([triple_line(kg, t) for t in states[i].chains[-8:]]),
                                             passages=self.passages_block(list(states[i].collected), pcos[i])),
                             sampling=YESNO_SAMPLING)] if i in check else [] for i in range(n)]
            resps = self._llm(reqs, costs)
            for i in check:
                yes = parse_yes_no(resps[i][0].text, "sufficient")
                if yes is None:  # documented fallback: not sufficient, keep exploring
                    costs[i].parse_failures += 1
                    yes = False
                traces[i]["steps"][-1]["sufficient"] = yes
                if yes:
                    states[i].stop = "sufficient"

        hits = []
        for i, st in enumerate(states):
            if not st.stop:
                st.stop = "max_depth"
            traces[i]["stop"] = st.stop
            scores = np.zeros(kg.n_docs)
            for d in st.collected:
                scores[d] = 1.0 + (1.0 + float(pcos[i, d])) / 2.0
            traces[i]["collected"] = [kg.doc_ids[d] for d in sorted(st.collected)]
            hits.append(common.top_docs(scores, kg, k, dense=pcos[i]))
        return SearchResult(hits, costs, traces)
