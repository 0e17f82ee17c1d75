"""Pieces every graph retriever shares: prompts, query entities, entity linking, embeddings,
the index folder, and turning node scores into the k passages a retriever must return.

Choices made here, where the papers leave room:
- Query entities come from one LLM call per query (JSON list), batched across queries.
  Output that is not the JSON asked for is counted (``QueryCost.parse_failures``) and the
  query is then linked by its own embedding instead (so no query is left without seeds).
- Entities are linked to graph nodes by cosine similarity of their embeddings (the KG's
  embedding model), the nearest node per query entity, as in HippoRAG.
- Every retriever returns exactly ``min(k, corpus size)`` passages: when its own method ranks
  fewer (no entity linked, a small subgraph), the rest is filled with the dense ranking of
  the query over the passage embeddings, after the method's own passages.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

import numpy as np
import yaml

from convrag.resources import PROMPTS_DIR
from convrag.errors import ConfigError, DataError
from convrag.io import read_json
from convrag.llm.parsing import parse_json_object, string_list
from convrag.llm.types import Request, Sampling
from convrag.retrieval.base import (
    Hits,
    QueryCost,
    batched_llm,
    check_manifest,
    relative_to_index,
    file_sha256,
    staging_dir,
    write_manifest,
)
from convrag.retrieval.graph.kg import KnowledgeGraph, normalize_entity

PROMPT_DIR = PROMPTS_DIR / "graph"
GREEDY = Sampling(max_tokens=64)


@functools.lru_cache(maxsize=None)
def load_prompt(name: str) -> dict:
    path = PROMPT_DIR / f"{name}.yaml"
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: graph prompt not found") from e


def few_shot(prompt: dict, **fields) -> list[dict]:
    """System + worked examples (``examples[i]`` has the user fields and ``reply``) + the
    user message for ``fields``; the shared prefix keeps batched prompts cheap."""
    msgs = [{"role": "system", "content": prompt["system"].strip()}]
    for ex in prompt.get("examples", []):
        msgs.append({"role": "user", "content": prompt["user"].format(**{k: v for k, v in ex.items() if k != "reply"})})
        msgs.append({"role": "assistant", "content": ex["reply"]})
    msgs.append({"role": "user", "content": prompt["user"].format(**fields)})
    return msgs


def new_costs(n: int) -> list[QueryCost]:
    return [QueryCost() for _ in range(n)]


def query_entities(engine, queries: list[str], costs: list[QueryCost], max_tokens: int = 48) -> list[list[str] | None]:
    """LLM named entities per query (one batched call); None where the output was not JSON."""
    prompt = load_prompt("query_ner")
    sampling = Sampling(max_tokens=max_tokens)
    per_query = [[Request(few_shot(prompt, query=q), sampling=sampling)] for q in queries]
    out = []
    for resps, cost in zip(batched_llm(engine, per_query, costs, desc=None), costs):
        obj = parse_json_object(resps[0].text)
        if obj is None or "entities" not in obj:
            cost.parse_failures += 1
            out.append(None)
        else:
            out.append(string_list(obj["entities"]))
    return out


def embedding_params(kg: KnowledgeGraph) -> dict:
    """The dense-encoder params the graph was embedded with (queries must use the same)."""
    p = kg.meta.get("embedding")
    if not isinstance(p, dict) or "model" not in p:
        raise DataError("knowledge graph: meta.embedding (the encoder params) is missing")
    return p


def encode(texts: list[str], emb_params: dict) -> np.ndarray:
    """L2-normalised float32 embeddings with the dense retriever's encoder."""
    from convrag.retrieval.dense import _params, encode as dense_encode

    if not texts:
        return np.zeros((0, 1), dtype=np.float32)
    return dense_encode(list(texts), _params({k: v for k, v in emb_params.items()
                                              if k in ("model", "batch_size", "device")}))


def link_entities(kg: KnowledgeGraph, names: list[str], name_emb: np.ndarray | None = None) -> list[tuple[int, float]]:
    """Nearest graph entity per name: exact normalised match first (score 1), else cosine."""
    if not names or kg.n_entities == 0:
        return []
    index = kg.entity_index()
    out: list[tuple[int, float]] = []
    todo = []
    for i, n in enumerate(names):
        e = index.get(normalize_entity(n))
        if e is not None:
            out.append((e, 1.0))
        else:
            todo.append(i)
    if todo and kg.entity_emb is not None:
        emb = name_emb[todo] if name_emb is not None else encode([names[i] for i in todo], embedding_params(kg))
        sims = emb @ kg.entity_emb.T
        for row in sims:
            j = int(np.argmax(row))
            out.append((j, float(row[j])))
    best: dict[int, float] = {}
    for e, s in out:
        best[e] = max(s, best.get(e, -1.0))
    return sorted(best.items(), key=lambda x: -x[1])


def top_docs(scores: np.ndarray, kg: KnowledgeGraph, k: int, dense: np.ndarray | None = None) -> Hits:
    """The k best passages by ``scores`` (those > 0), filled up by ``dense`` (query-passage
    cosine) when fewer than k have a positive score (see module doc)."""
    k = min(k, kg.n_docs)
    order = [int(i) for i in np.argsort(-scores, kind="stable") if scores[i] > 0][:k]
    hits = [(kg.doc_ids[i], float(scores[i])) for i in order]
    if len(hits) < k and dense is not None:
        taken = set(order)
        floor = min((s for _, s in hits), default=1.0)
        for i in np.argsort(-dense, kind="stable"):
            if len(hits) >= k:
                break
            if int(i) not in taken:
                # below every graph-ranked passage, in dense order
                hits.append((kg.doc_ids[int(i)], float(floor * 1e-3 * (1 + dense[int(i)]) / 2)))
    return hits


def strictly_decreasing(values: list[float]) -> list[float]:
    """Scores nudged down by one float step where they tie, so that ranking by score (what
    the retrieval metrics do) keeps the retriever's own order."""
    out: list[float] = []
    for v in values:
        if out and v >= out[-1]:
            v = float(np.nextafter(out[-1], -np.inf))
        out.append(float(v))
    return out


# ---- index folders of graph retrievers ---------------------------------------------------

def write_graph_index(out_dir, retriever: str, params: dict, corpus_path, graph_dir, t0: float,
                      write_extra=None) -> None:
    """An index folder that points at the shared KG (by its path relative to the index folder,
    and its manifest's hash), plus whatever ``write_extra(tmp_folder)`` adds (RAPTOR's tree, for
    instance). A relative pointer keeps a results folder movable: a copy of it reads its own
    graph, never the folder it was copied from."""
    kg = KnowledgeGraph.load(graph_dir)
    with staging_dir(out_dir) as tmp:
        extra = write_extra(tmp) if write_extra else None
        write_manifest(tmp, retriever, params, corpus_path, kg.n_docs, time.perf_counter() - t0)
        man = read_json(tmp / "manifest.json")
        man["graph_dir"] = relative_to_index(graph_dir, out_dir)
        man["graph_manifest_sha256"] = file_sha256(Path(graph_dir) / "manifest.json") if (Path(graph_dir) / "manifest.json").exists() else None
        if extra:
            man["build"] = extra
        from convrag.io import write_json

        write_json(tmp / "manifest.json", man)


def graph_path(index_dir, man: dict) -> Path:
    """The knowledge-graph folder an index manifest points at, resolved against the index
    folder. A manifest of an older version holds an absolute path, which in a copied or moved
    results folder names the original run's graph: it is refused, naming what to rebuild."""
    where = man.get("graph_dir")
    if not where:
        raise DataError(f"{Path(index_dir) / 'manifest.json'}: names no knowledge graph (graph_dir); rebuild the index")
    if os.path.isabs(where):
        raise DataError(
            f"{Path(index_dir) / 'manifest.json'}: names its knowledge graph by an absolute path ({where}), as "
            "versions before relocatable results wrote it; rebuild the index "
            f"(snakemake --forcerun build_index, or delete {index_dir})")
    return Path(os.path.normpath(Path(index_dir) / where))


def load_graph_index(index_dir, retriever: str, params: dict, runtime_keys: frozenset, corpus_path=None) -> tuple[dict, KnowledgeGraph]:
    """Check the manifest against ``params`` and load the KG it points at, refusing a graph that
    is missing or was rebuilt after the index."""
    man = check_manifest(index_dir, retriever, params, runtime_keys, corpus_path)
    graph_dir = graph_path(index_dir, man)
    if not (graph_dir / "graph.json").exists():
        raise DataError(f"{index_dir}: its knowledge graph {graph_dir} is missing; rebuild the graph and the index")
    want = man.get("graph_manifest_sha256")
    if want is not None and (not (graph_dir / "manifest.json").exists()
                             or file_sha256(graph_dir / "manifest.json") != want):
        raise DataError(f"{index_dir}: the knowledge graph {graph_dir} was rebuilt after this index; rebuild the index")
    return man, KnowledgeGraph.load(graph_dir)
