"""The shared knowledge-graph artifact: one per corpus, reused by every graph retriever.

Why one artifact: OpenIE over a corpus is the expensive part of HippoRAG-style indexing
(one LLM call per passage); HippoRAG, HippoRAG2, LightRAG, ToG-2 and PoG all need the same
entities, triples and embeddings, so it is built once by its own rule and never rebuilt
when a retriever or an LLM of the grid changes.

Contents (all indices are positions in these lists):
- ``doc_ids``: passage nodes, in corpus order;
- ``entities``: entity nodes, normalised names (``normalize_entity``), unique;
- ``triples``: ``(subject, relation, object, doc)`` = entity index, relation text, entity
  index, passage index (the passage the triple was extracted from);
- ``mentions``: ``(entity, doc)`` pairs: the entity was extracted from that passage (as a
  named entity or as a triple argument);
- ``synonyms``: ``(entity_a, entity_b, cosine)`` with a < b and cosine >= the threshold;
- embeddings (L2-normalised float32 rows): ``entity_emb`` (E x d), ``passage_emb``
  (P x d, of title + text) and ``triple_emb`` (T x d, of "subject relation object").

Files in the artifact folder: ``graph.json`` (everything but the embeddings),
``entity_emb.npy``, ``passage_emb.npy``, ``triple_emb.npy``, ``openie.jsonl`` (the raw and
parsed extraction per passage, parse failures included) and ``manifest.json``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from convrag.errors import DataError
from convrag.io import atomic_open, atomic_path

GRAPH_FILE = "graph.json"
EMB_FILES = {"entity_emb": "entity_emb.npy", "passage_emb": "passage_emb.npy", "triple_emb": "triple_emb.npy"}


def normalize_entity(name: str) -> str:
    """Lower-case, NFKC, strip punctuation at the ends and collapse spaces (HippoRAG's
    phrase normalisation, kept simple): "The  Orvik Theatre." -> "the orvik theatre"."""
    s = unicodedata.normalize("NFKC", str(name)).lower()
    s = re.sub(r"[^\w\s'&.-]", " ", s)
    s = " ".join(s.split())
    return s.strip(" .'-")


@dataclass
class KnowledgeGraph:
    doc_ids: list[str]
    entities: list[str]
    triples: list[tuple[int, str, int, int]]
    mentions: list[tuple[int, int]]
    synonyms: list[tuple[int, int, float]] = field(default_factory=list)
    entity_emb: np.ndarray | None = None
    passage_emb: np.ndarray | None = None
    triple_emb: np.ndarray | None = None
    meta: dict = field(default_factory=dict)  # build params and extraction statistics

    # ---- construction -----------------------------------------------------------------
    @classmethod
    def from_extractions(cls, doc_ids: list[str], extractions: list[dict], meta: dict | None = None) -> "KnowledgeGraph":
        """Build the graph from per-passage extractions ``{"entities": [...], "triples": [[s, r, o], ...]}``
        aligned with ``doc_ids`` (hand-built graphs in tests use this too). Entities are
        normalised and merged by exact normalised name; empty names are dropped."""
        if len(doc_ids) != len(extractions):
            raise DataError(f"knowledge graph: {len(doc_ids)} passages but {len(extractions)} extractions")
        index: dict[str, int] = {}
        entities: list[str] = []

        def ent(name) -> int | None:
            n = normalize_entity(name) if isinstance(name, str) else ""
            if not n:
                return None
            if n not in index:
                index[n] = len(entities)
                entities.append(n)
            return index[n]

        triples, mentions = [], set()
        for d, ex in enumerate(extractions):
            for name in ex.get("entities", []):
                e = ent(name)
                if e is not None:
                    mentions.add((e, d))
            for t in ex.get("triples", []):
                if not isinstance(t, (list, tuple)) or len(t) != 3:
                    continue
                s, r, o = ent(t[0]), " ".join(str(t[1]).split()), ent(t[2])
                if s is None or o is None or not r or s == o:
                    continue
                triples.append((s, r, o, d))
                mentions.update({(s, d), (o, d)})
        triples = list(dict.fromkeys(triples))
        return cls(list(doc_ids), entities, triples, sorted(mentions), meta=dict(meta or {}))

    # ---- views used by the retrievers -------------------------------------------------
    @property
    def n_entities(self) -> int:
        return len(self.entities)

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)

    def entity_index(self) -> dict[str, int]:
        return {e: i for i, e in enumerate(self.entities)}

    def entity_docs(self) -> list[list[int]]:
        """Per entity, the passages it was extracted from (sorted)."""
        out: list[list[int]] = [[] for _ in self.entities]
        for e, d in self.mentions:
            out[e].append(d)
        return [sorted(set(x)) for x in out]

    def doc_entities(self) -> list[list[int]]:
        """Per passage, the entities extracted from it (sorted)."""
        out: list[list[int]] = [[] for _ in self.doc_ids]
        for e, d in self.mentions:
            out[d].append(e)
        return [sorted(set(x)) for x in out]

    def triple_text(self, t: int) -> str:
        s, r, o, _ = self.triples[t]
        return f"{self.entities[s]} {r} {self.entities[o]}"

    def entity_triples(self) -> list[list[int]]:
        """Per entity, the triples it takes part in (as subject or object)."""
        out: list[list[int]] = [[] for _ in self.entities]
        for i, (s, _, o, _) in enumerate(self.triples):
            out[s].append(i)
            out[o].append(i)
        return out

    def specificity(self) -> np.ndarray:
        """HippoRAG's node specificity 1 / |passages(entity)| (0 for an entity in no passage)."""
        counts = np.zeros(self.n_entities)
        for e, _ in self.mentions:
            counts[e] += 1
        return np.divide(1.0, counts, out=np.zeros_like(counts), where=counts > 0)

    def entity_adjacency(self, synonym_weight: float = 1.0):
        """Symmetric sparse (E x E) matrix: triple edges (weight = number of triples between
        the pair) plus synonym edges (weight = cosine x ``synonym_weight``)."""
        from scipy import sparse

        rows, cols, vals = [], [], []
        for s, _, o, _ in self.triples:
            rows += [s, o]
            cols += [o, s]
            vals += [1.0, 1.0]
        for a, b, sim in self.synonyms:
            rows += [a, b]
            cols += [b, a]
            vals += [sim * synonym_weight] * 2
        n = self.n_entities
        return sparse.csr_matrix((vals, (rows, cols)), shape=(n, n), dtype=np.float64)

    # ---- files ------------------------------------------------------------------------
    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_open(folder / GRAPH_FILE) as fh:
            json.dump({"doc_ids": self.doc_ids, "entities": self.entities,
                       "triples": [list(t) for t in self.triples], "mentions": [list(m) for m in self.mentions],
                       "synonyms": [list(s) for s in self.synonyms], "meta": self.meta}, fh, ensure_ascii=False)
        for attr, name in EMB_FILES.items():
            arr = getattr(self, attr)
            if arr is not None:
                with atomic_path(folder / name) as tmp:
                    with open(tmp, "wb") as fh:
                        np.save(fh, np.ascontiguousarray(arr, dtype=np.float32))

    @classmethod
    def load(cls, folder: str | Path) -> "KnowledgeGraph":
        folder = Path(folder)
        path = folder / GRAPH_FILE
        if not path.exists():
            raise DataError(f"{folder}: not a knowledge-graph artifact (no {GRAPH_FILE}); run build_graph first")
        d = json.loads(path.read_text(encoding="utf-8"))
        kg = cls(d["doc_ids"], d["entities"], [tuple(t) for t in d["triples"]],
                 [tuple(m) for m in d["mentions"]], [tuple(s) for s in d["synonyms"]], meta=d.get("meta", {}))
        for attr, name in EMB_FILES.items():
            if (folder / name).exists():
                setattr(kg, attr, np.load(folder / name))
        kg.check()
        return kg

    def check(self) -> None:
        """Every index in range and every embedding matrix the right height."""
        E, P = self.n_entities, self.n_docs
        for i, (s, _, o, d) in enumerate(self.triples):
            if not (0 <= s < E and 0 <= o < E and 0 <= d < P):
                raise DataError(f"knowledge graph: triple {i} {self.triples[i]!r} points outside the graph")
        for e, d in self.mentions:
            if not (0 <= e < E and 0 <= d < P):
                raise DataError(f"knowledge graph: mention {(e, d)!r} points outside the graph")
        for a, b, _ in self.synonyms:
            if not (0 <= a < E and 0 <= b < E):
                raise DataError(f"knowledge graph: synonym edge {(a, b)!r} points outside the graph")
        for attr, n in (("entity_emb", E), ("passage_emb", P), ("triple_emb", len(self.triples))):
            arr = getattr(self, attr)
            if arr is not None and arr.shape[0] != n:
                raise DataError(f"knowledge graph: {attr} has {arr.shape[0]} rows for {n} items")
