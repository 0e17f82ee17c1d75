"""PoG (Chen et al. 2024, "Plan-on-Graph: Self-Correcting Adaptive Planning of Large Language
Model on Knowledge Graphs"): LLM planning into sub-objectives, then hop-by-hop exploration of
the shared OpenIE knowledge graph guided by them, with a memory, a reflection after every hop
and backtracking (self-correction).

How it follows the paper, per query:
1. Topic entities as in ToG-2 (``tog2.GraphExplorer.topic_entities``: LLM NER + linking,
   names linked below ``min_link_score`` dropped; the query's own embedding when no name is
   left). PoG's datasets give topic entities; we need the NER call. A query without a topic
   entity (only possible on a graph without entities) makes no further call.
2. Planning (task decomposition): the LLM splits the question into sub-objectives, JSON
   ``{"subobjectives": [...]}`` (at most 4 are kept). Fallback when that is not what comes
   back: one sub-objective, the question itself.
3. Memory: the sub-objectives with their status ([open] / [done]) and the evidence found so
   far (the triples on the kept paths, and in the reflection prompt the best passages of that
   evidence). It is kept by this code from the LLM's reflection answers and fed back into
   every later prompt; PoG has the LLM rewrite a free-text memory in an extra call per hop,
   which we save (CPU budget).
4. A hop: the candidate relations of the current frontier (edges grouped by (entity, relation
   text, direction), as in ``tog2.candidate_relations``, at most ``max_relations``, pre-ranked
   by query-triple cosine) are listed with the sub-objectives and memory; the LLM picks up to
   ``width`` (JSON ``{"relations": [numbers]}``; one prompt per query for all its frontier
   entities, where PoG makes one per entity). Their neighbours are the entities reached; when a
   relation leads to more than ``width`` entities, the ``width`` with the best query-entity
   cosine are kept (PoG prunes entities with the LLM, and only when a relation yields more than
   one; with OpenIE phrases that is rare, so we save the call).
5. Reflection after every hop: the LLM sees the sub-objectives, the memory, the new triples,
   the best evidence passages and the numbered earlier entities (entities already searched
   from, topic entities included, that still have unexplored relations) and answers
   ``{"done": [numbers], "decision": "continue" | "enough" | "backtrack", "backtrack_to": n}``.
   "enough" stops the query. "continue" searches on from the entities just reached.
   "backtrack" (at most ``max_backtracks`` times) abandons the entities reached below the
   chosen earlier entity (they leave the kept paths and are not entered again) and searches
   from that entity along its other relations; since the abandoned hops found nothing useful,
   a backtrack gives back one hop, so a query makes at most ``max_hops + max_backtracks`` hops.
   PoG splits this into separate "is the evidence sufficient", "add entities?" and "which
   entities" calls; here it is one call. The reflection is skipped when nothing it could say
   would lead to another hop (hop budget spent and no backtrack left).
   Fallbacks (each counted in ``QueryCost.parse_failures``): output without a valid decision
   -> "continue"; "backtrack" without a valid earlier entity -> the most recently searched
   one. A "backtrack" with no backtrack left (or no earlier entity with unexplored relations)
   is taken as "continue" (not a parse failure in itself; an invalid target is still counted).
Every LLM step is one batched call over the queries still active (``base.batched_llm``).

LLM calls per query: 1 (NER) + 1 (plan) + per hop 1 (relations) + 1 (reflection, unless
skipped). With the defaults (2 hops, 1 backtrack) and no early stop or backtrack: 6.

Returned ranking (exactly ``min(k, n_docs)``): the passages of the kept paths in two tiers,
each in dense order (cos = query-passage cosine). Tier 1, score 2 + (1 + cos) / 2: the
passages of the evidence triples and the passages that mention a path end (a kept entity from
which no kept path goes on: where the answer usually is, as the answer passage of a multi-hop
question often names only the last entity). Tier 2, score 1 + (1 + cos) / 2: the other
passages that mention an entity on a kept path (topic and intermediate entities, often hubs).
Then the dense fill of ``common.top_docs`` (scores below 1e-3). Passages that mention only
entities of an abandoned branch are not among them.

Simplified against the paper: free-text OpenIE relations instead of Freebase relation types
(no type-based relation filtering, no CVT nodes); no entity descriptions; passages stand in
for the paper's final answer generation (the assistant model answers from them); small
budgets (2 hops, width 2, 1 backtrack) because the default grid runs on a 2-core CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from convrag.llm.parsing import parse_json_object, string_list
from convrag.llm.types import Request, Sampling
from convrag.retrieval.base import Capabilities, SearchResult, check_k
from convrag.retrieval.graph import common
from convrag.retrieval.graph.kg import normalize_entity
from convrag.retrieval.graph.tog2 import (
    RELATION_SAMPLING,
    GraphExplorer,
    build_explorer,
    candidate_line,
    candidate_relations,
    check_params,
    load_explorer,
    numbered,
    parse_relation_choice,
    triple_line,
)

CAPABILITIES = Capabilities(needs_graph=True, llm_at_query=True, cost_class="explorer")
DEFAULTS = {
    "llm": None,  # query-time model name (the Engine itself is passed to load)
    "max_hops": 2,
    "width": 2,  # relations picked per hop, and entities kept per relation
    "max_backtracks": 1,
    "max_relations": 8,  # candidate relations shown to the LLM per hop
    "max_topic_entities": 3,
    "min_link_score": 0.5,  # as in tog2
    "memory_triples": 8,  # evidence triples shown in the prompts (the most recent)
    "prompt_passages": 2,  # evidence passages shown in the reflection prompt
    "passage_chars": 240,
}
# The index is only a pointer to the shared KG: no param changes it.
RUNTIME_KEYS = frozenset(DEFAULTS)
MAX_SUBOBJECTIVES = 4
DECISIONS = ("continue", "enough", "backtrack")

_MIN = {"max_hops": 1, "width": 1, "max_backtracks": 0, "max_relations": 1, "max_topic_entities": 1,
        "memory_triples": 0, "prompt_passages": 0, "passage_chars": 1}
PLAN_SAMPLING = Sampling(max_tokens=64)
REFLECT_SAMPLING = Sampling(max_tokens=40)


def build(corpus_path, out_dir, params: dict | None, llm=None, graph_dir=None) -> None:
    build_explorer("pog", corpus_path, out_dir, check_params("pog", params, DEFAULTS, _MIN), graph_dir)


def load(index_dir, params: dict | None, corpus_path=None, llm=None) -> "PoGRetriever":
    p = check_params("pog", params, DEFAULTS, _MIN)
    kg, texts = load_explorer("pog", index_dir, p, RUNTIME_KEYS, corpus_path)
    return PoGRetriever(kg, texts, p, llm)


def parse_plan(text: str) -> list[str] | None:
    obj = parse_json_object(text)
    if obj is None or "subobjectives" not in obj:
        return None
    subs = string_list(obj["subobjectives"])[:MAX_SUBOBJECTIVES]
    return subs or None


def parse_reflection(text: str, n_subs: int, earlier: list[str]):
    """(decision, done numbers, backtrack position or None, ok); ok is False when the output
    is not the JSON asked for (no valid decision, or a backtrack without a valid target)."""
    obj = parse_json_object(text)
    if obj is None or not isinstance(obj.get("decision"), str) or obj["decision"].strip().lower() not in DECISIONS:
        return "continue", set(), None, False
    decision = obj["decision"].strip().lower()
    done = set()
    for v in (obj["done"] if isinstance(obj.get("done"), list) else []):
        if isinstance(v, (int, str)) and not isinstance(v, bool) and str(v).strip().isdigit():
            if 1 <= int(v) <= n_subs:
                done.add(int(v))
    target = None
    if decision == "backtrack":
        v = obj.get("backtrack_to")
        if isinstance(v, (int, str)) and not isinstance(v, bool) and str(v).strip().isdigit():
            j = int(v) - 1
            target = j if 0 <= j < len(earlier) else None
        elif isinstance(v, str) and normalize_entity(v) in earlier:
            target = earlier.index(normalize_entity(v))
        if target is None:
            return decision, done, None, False
    return decision, done, target, True


@dataclass
class _State:
    topic: list[int]
    frontier: list[int]
    visited: set[int]
    subs: list[str] = field(default_factory=list)
    done: set[int] = field(default_factory=set)
    used: set = field(default_factory=set)
    parent: dict[int, tuple[int, int]] = field(default_factory=dict)  # reached entity -> (from, triple)
    explored: list[int] = field(default_factory=list)  # entities searched from, in order
    abandoned: set[int] = field(default_factory=set)
    hops: int = 0
    backtracks: int = 0
    stop: str | None = None

    def kept(self) -> list[int]:
        return self.topic + [e for e in self.parent if e not in self.abandoned]

    def ends(self) -> list[int]:
        """Kept entities from which no kept path goes on."""
        kept = self.kept()
        inner = {self.parent[e][0] for e in kept if e in self.parent}
        return [e for e in kept if e not in inner]

    def evidence(self) -> list[int]:
        return [t for e, (_, t) in self.parent.items() if e not in self.abandoned]

    def below(self, target: int) -> set[int]:
        """Reached entities whose path from a topic entity passes through ``target``."""
        out = set()
        for e in self.parent:
            x = e
            while x in self.parent:
                x = self.parent[x][0]
                if x == target:
                    out.add(e)
                    break
        return out


class PoGRetriever(GraphExplorer):
    name = "pog"

    def _subs_block(self, st: _State) -> str:
        return numbered([f"[{'done' if j in st.done else 'open'}] {s}" for j, s in enumerate(st.subs, 1)])

    def _memory(self, triples: list[int]) -> str:
        m = self.p["memory_triples"]
        return numbered([triple_line(self.kg, t) for t in (triples[-m:] if m else [])])

    def _evidence_docs(self, st: _State) -> list[int]:
        docs = {self.kg.triples[t][3] for t in st.evidence()}
        for e in st.kept():
            docs.update(self.ent_docs[e])
        return sorted(docs)

    def _reflect_request(self, prompt: dict, query: str, st: _State, reached: list[int], earlier: list[int],
                         cos: np.ndarray) -> Request:
        new = [st.parent[e][1] for e in reached]
        return Request(common.few_shot(
            prompt, question=query, subobjectives=self._subs_block(st),
            memory=self._memory([t for t in st.evidence() if t not in new]),
            new=numbered([triple_line(self.kg, t) for t in new]),
            passages=self.passages_block(self._evidence_docs(st), cos),
            earlier=numbered(self.names(earlier))), sampling=REFLECT_SAMPLING)

    def search(self, queries: list[str], k: int) -> SearchResult:
        check_k(k)
        n, kg, p = len(queries), self.kg, self.p
        costs = common.new_costs(n)
        traces: list[dict] = [{"topic": [], "subobjectives": [], "hops": [], "stop": None, "backtracks": 0}
                              for _ in queries]
        if n == 0:
            return SearchResult([], costs, traces)
        self._engine()
        qemb = np.asarray(self.encoder(list(queries)), dtype=np.float32)
        pcos = qemb @ kg.passage_emb.T
        ecos = qemb @ kg.entity_emb.T
        states = []
        for i, topic in enumerate(self.topic_entities(queries, qemb, costs)):
            st = _State(topic=list(topic), frontier=list(topic), visited=set(topic))
            st.stop = None if topic else "no_topic_entities"
            traces[i]["topic"] = self.names(topic)
            states.append(st)

        # planning
        plan = common.load_prompt("pog_plan")
        todo = [i for i, st in enumerate(states) if not st.stop]
        reqs = [[Request(common.few_shot(plan, question=queries[i]), sampling=PLAN_SAMPLING)] if i in todo else []
                for i in range(n)]
        resps = self._llm(reqs, costs)
        for i in todo:
            subs = parse_plan(resps[i][0].text)
            if subs is None:  # documented fallback: the question is the only sub-objective
                costs[i].parse_failures += 1
                subs = [queries[i]]
            states[i].subs = subs
            traces[i]["subobjectives"] = list(subs)

        rel_prompt, refl_prompt = common.load_prompt("pog_relations"), common.load_prompt("pog_reflect")
        while True:
            cands = {}
            for i, st in enumerate(states):
                if st.stop:
                    continue
                if st.hops >= p["max_hops"] + st.backtracks:
                    st.stop = "max_hops"
                    continue
                c = candidate_relations(kg, self.ent_triples, st.frontier, st.visited, st.used, qemb[i])
                if c:
                    cands[i] = c[: p["max_relations"]]
                else:
                    st.stop = "no_relations"
            if not cands:
                break
            reqs = [[Request(common.few_shot(rel_prompt, question=queries[i], subobjectives=self._subs_block(states[i]),
                                             memory=self._memory(states[i].evidence()), width=p["width"],
                                             relations=numbered([candidate_line(kg, c) for c in cands[i]])),
                             sampling=RELATION_SAMPLING)] if i in cands else [] for i in range(n)]
            resps = self._llm(reqs, costs)
            new: dict[int, list[int]] = {}
            for i, cs in cands.items():
                st = states[i]
                picked = parse_relation_choice(resps[i][0].text, cs, p["width"])
                fallback = picked is None
                if fallback:  # documented fallback: best query-triple cosine
                    costs[i].parse_failures += 1
                    picked = list(range(min(p["width"], len(cs))))
                chosen = [cs[j] for j in picked]
                reached = []
                for c in chosen:
                    st.used.add(c.key)
                    fresh = [(t, tri) for t, tri in zip(c.targets, c.triples) if t not in st.visited]
                    fresh.sort(key=lambda x: -float(ecos[i, x[0]]))  # stable: listing order on ties
                    for t, tri in fresh[: p["width"]]:
                        st.parent[t] = (c.entity, tri)
                        st.visited.add(t)
                        reached.append(t)
                st.explored.extend(e for e in st.frontier if e not in st.explored)
                st.hops += 1
                new[i] = reached
                traces[i]["hops"].append({
                    "hop": st.hops, "frontier": self.names(st.frontier),
                    "candidates": [candidate_line(kg, c) for c in cs],
                    "chosen": [candidate_line(kg, c) for c in chosen], "fallback": fallback,
                    "reached": self.names(reached), "decision": None, "backtrack_to": None, "done": [],
                })
                st.frontier = reached

            # reflection, where its answer could still lead to another hop
            reflect, earlier = [], {}
            for i in new:
                st = states[i]
                if st.hops >= p["max_hops"] + st.backtracks and st.backtracks >= p["max_backtracks"]:
                    st.stop = "max_hops"
                    continue
                reflect.append(i)
                earlier[i] = [e for e in st.explored if e not in st.abandoned and candidate_relations(
                    kg, self.ent_triples, [e], st.visited, st.used, qemb[i])]
            reqs = [[self._reflect_request(refl_prompt, queries[i], states[i], new[i], earlier[i], pcos[i])]
                    if i in reflect else [] for i in range(n)]
            resps = self._llm(reqs, costs)
            for i in reflect:
                st, hop = states[i], traces[i]["hops"][-1]
                decision, done, target, ok = parse_reflection(resps[i][0].text, len(st.subs), self.names(earlier[i]))
                if not ok:
                    costs[i].parse_failures += 1
                st.done |= done
                hop["done"] = sorted(st.done)
                if decision == "backtrack":
                    if st.backtracks >= p["max_backtracks"] or not earlier[i]:
                        decision = "continue"  # no backtrack left: go on (documented, not a failure)
                    else:
                        if target is None:  # documented fallback: the most recently searched entity
                            target = len(earlier[i]) - 1
                        back = earlier[i][target]
                        st.abandoned |= st.below(back)
                        st.frontier = [back]
                        st.backtracks += 1
                        hop["backtrack_to"] = kg.entities[back]
                hop["decision"] = decision
                if decision == "enough":
                    st.stop = "enough"
                elif decision == "continue" and not st.frontier:
                    st.stop = "no_entities"

        hits = []
        for i, st in enumerate(states):
            traces[i]["stop"] = st.stop
            traces[i]["backtracks"] = st.backtracks
            tier1 = {kg.triples[t][3] for t in st.evidence()}
            for e in st.ends():
                tier1.update(self.ent_docs[e])
            scores = np.zeros(kg.n_docs)
            for d in self._evidence_docs(st):
                scores[d] = (2.0 if d in tier1 else 1.0) + (1.0 + float(pcos[i, d])) / 2.0
            traces[i]["kept"] = self.names(st.kept())
            traces[i]["ends"] = self.names(st.ends())
            traces[i]["evidence"] = [triple_line(kg, t) for t in st.evidence()]
            hits.append(common.top_docs(scores, kg, k, dense=pcos[i]))
        return SearchResult(hits, costs, traces)
