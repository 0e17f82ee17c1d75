"""Learned-sparse retrieval: a SPLADE-family encoder and an exact sparse dot-product index.

Why: the MTRAG-UN paper's best retriever is ELSER, Elastic's proprietary learned-sparse model
(text expanded into weighted vocabulary terms, scored by dot product in Elasticsearch). It
cannot be run outside Elastic, so an open SPLADE-family model of the same kind stands in.
Default: ``opensearch-project/opensearch-neural-sparse-encoding-v2-distill`` (Apache-2.0,
DistilBERT; like ELSER it expands queries as well as documents). Any model that
``sentence_transformers.SparseEncoder`` loads works (a HF id, or a local folder: a
SparseEncoder save or a plain ``*ForMaskedLM`` checkpoint, read as MLM + SPLADE max pooling),
including the inference-free ``opensearch-neural-sparse-encoding-doc-v3-distill``.
No learned-sparse model is packaged for offline use (unlike dense's MiniLM), so a config that
uses this kind names a model that must be downloaded into the HF cache first.

Index: every passage encoded once with ``encode_document`` into a float32 scipy CSR matrix
(``matrix.npz``, docs x vocabulary) + ``doc_ids.json``; the manifest adds ``index`` (dimension,
non-zeros in all and per doc, a hash of the tokenizer's vocabulary). Search encodes all
queries in one ``encode_query`` call and scores them exactly by the sparse product with the
index (no pruning, no approximation). Ranking rule: score descending, ties by corpus order
(position in ``doc_ids.json``; identical passages are encoded once, so they tie exactly). A
document that shares no active term with the query scores 0 and is not a hit (as in bm25 and
Elasticsearch's sparse queries), so fewer than k hits may come back. Queries are not
special-cased otherwise (as in dense: an empty string is encoded like any text).

Params: model, max_length (tokens kept per text; null = the model's own limit),
query_prompt / document_prompt (text put before each query / passage; "" = the model's own
prompts, none for the SPLADE defaults), max_active_dims (keep only the largest weights per
vector; null = all), batch_size and device (runtime only: not checked against the index).
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from convrag.errors import ConfigError, DataError, ModelError
from convrag.io import atomic_open, read_json, write_json
from convrag.retrieval.base import (
    MANIFEST,
    Capabilities,
    Hits,
    Retriever,
    SearchResult,
    check_k,
    check_manifest,
    normalize_params,
    passage_text,
    read_corpus,
    staging_dir,
    write_manifest,
)

CAPABILITIES = Capabilities()
DEFAULTS = {
    "model": "opensearch-project/opensearch-neural-sparse-encoding-v2-distill",
    "max_length": None,
    "query_prompt": "",
    "document_prompt": "",
    "max_active_dims": None,
    "batch_size": 32,
    "device": "auto",
    "revision": "lock",  # a commit, or "lock": resolved at the first load (convrag.sources)
}
RUNTIME_KEYS = frozenset({"batch_size", "device"})
MATRIX = "matrix.npz"
ENCODE_CHUNK = 8192  # passages per encode call at build time (bounds the COO tensors)
PRODUCT_CELLS = 1 << 24  # query x doc cells per sparse product at search time (bounds memory)


def _positive_int(p: dict, key: str, optional: bool) -> None:
    v = p[key]
    if optional and v is None:
        return
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ConfigError(f"retriever 'sparse': {key} must be a positive integer{' or null' if optional else ''}, "
                          f"got {v!r}")


def _params(params: dict | None) -> dict:
    p = normalize_params("sparse", params, DEFAULTS)
    _positive_int(p, "batch_size", optional=False)
    _positive_int(p, "max_length", optional=True)
    _positive_int(p, "max_active_dims", optional=True)
    for key in ("model", "query_prompt", "document_prompt", "device", "revision"):
        if not isinstance(p[key], str):
            raise ConfigError(f"retriever 'sparse': {key} must be a string, got {p[key]!r}")
    if not p["model"]:
        raise ConfigError("retriever 'sparse': model must not be empty")
    return p


@functools.lru_cache(maxsize=2)
def _encoder(name: str, device: str, max_length: int | None, revision: str | None = None):
    import torch
    from sentence_transformers import SparseEncoder

    from convrag.sources import LOCK, model_revision

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        hub = not Path(name).exists()  # no revision = the sources.yaml pin / lock file, never a branch
        kw = {"revision": model_revision("retriever model", name, revision or LOCK)} if hub else {}
        model = SparseEncoder(name, device=device, **kw)
    except Exception as e:
        raise ModelError(f"sparse model '{name}' could not be loaded: {e}") from e
    model.eval()
    if max_length is not None:
        try:
            model.max_seq_length = max_length
        except AttributeError as e:
            raise ConfigError(f"retriever 'sparse': model '{name}' does not take max_length") from e
    return model


def _model(p: dict):
    return _encoder(p["model"], p["device"], p["max_length"], p.get("revision"))


def vocab_sha256(model) -> str | None:
    """A hash of the tokenizer's vocabulary (token, id pairs), or None if it has none."""
    try:
        vocab = model.tokenizer.get_vocab()
    except Exception:
        return None
    h = hashlib.sha256()
    for tok, i in sorted(vocab.items(), key=lambda kv: (kv[1], kv[0])):
        h.update(f"{i}\t{tok}\n".encode("utf-8"))
    return h.hexdigest()


def _to_csr(t):
    """A torch sparse COO (or dense) tensor of shape (n, dim) as a float32 scipy CSR matrix."""
    import scipy.sparse as sp

    if t.is_sparse:
        t = t.coalesce().cpu()
        idx = t.indices().numpy()
        vals = t.values().float().numpy()
        m = sp.csr_matrix((vals, (idx[0], idx[1])), shape=tuple(t.shape), dtype=np.float32)
    else:
        m = sp.csr_matrix(t.float().cpu().numpy(), dtype=np.float32)
    m.sum_duplicates()
    m.eliminate_zeros()
    m.sort_indices()
    return m


def encode(texts: list[str], p: dict, side: str):
    """``side`` "query" or "document": the matching SparseEncoder method, all texts in one call.

    Identical texts are encoded once and share one row: a text's vector would otherwise
    depend (in its last bits) on the batch it falls into, and duplicates would not tie."""
    import scipy.sparse as sp

    unique = list(dict.fromkeys(texts))
    if len(unique) < len(texts):
        row = {t: i for i, t in enumerate(unique)}
        return sp.csr_matrix(_encode(unique, p, side)[[row[t] for t in texts]])
    return _encode(texts, p, side)


def _encode(texts: list[str], p: dict, side: str):
    model = _model(p)
    fn = model.encode_query if side == "query" else model.encode_document
    prompt = p["query_prompt"] if side == "query" else p["document_prompt"]
    out = fn(
        texts,
        prompt=prompt or None,
        batch_size=p["batch_size"],
        convert_to_tensor=True,
        convert_to_sparse_tensor=True,
        save_to_cpu=True,
        max_active_dims=p["max_active_dims"],
        show_progress_bar=len(texts) >= 1000,
    )
    return _to_csr(out)


def build(corpus_path, out_dir, params: dict | None) -> None:
    import scipy.sparse as sp

    p = _params(params)
    passages = read_corpus(corpus_path)
    texts = [passage_text(x) for x in passages]
    t0 = time.perf_counter()
    unique = list(dict.fromkeys(texts))  # duplicate passages: encoded once, one shared row (see encode)
    parts = [_encode(unique[i:i + ENCODE_CHUNK], p, "document") for i in range(0, len(unique), ENCODE_CHUNK)]
    matrix = sp.vstack(parts, format="csr", dtype=np.float32) if len(parts) > 1 else parts[0]
    if len(unique) < len(texts):
        row = {t: i for i, t in enumerate(unique)}
        matrix = sp.csr_matrix(matrix[[row[t] for t in texts]])
    nnz = np.diff(matrix.indptr)
    index = {
        "format": "scipy csr float32, docs x vocabulary, rows in doc_ids.json order",
        "dim": int(matrix.shape[1]),
        "nnz": int(matrix.nnz),
        "nnz_per_doc": {"mean": round(float(nnz.mean()), 3), "min": int(nnz.min()),
                        "median": float(np.median(nnz)), "max": int(nnz.max())},
        "empty_docs": int((nnz == 0).sum()),
        "max_seq_length": _model(p).max_seq_length,
        "vocab_sha256": vocab_sha256(_model(p)),
    }
    with staging_dir(out_dir) as tmp:
        sp.save_npz(tmp / MATRIX, matrix, compressed=False)
        with atomic_open(tmp / "doc_ids.json") as fh:
            json.dump([x.doc_id for x in passages], fh)
        write_manifest(tmp, "sparse", p, corpus_path, len(passages), time.perf_counter() - t0)
        man = read_json(tmp / MANIFEST)
        man["index"] = index
        write_json(tmp / MANIFEST, man)


def load(index_dir, params: dict | None, corpus_path=None) -> Retriever:
    p = _params(params)
    man = check_manifest(index_dir, "sparse", p, RUNTIME_KEYS, corpus_path)
    return SparseRetriever(index_dir, p, man)


def top_k(cols: np.ndarray, vals: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k best (column, score) pairs with score > 0: score descending, ties by column."""
    keep = vals > 0
    cols, vals = cols[keep], vals[keep]
    if len(vals) > k:  # every entry tied with the k-th best stays a candidate
        kth = np.partition(vals, len(vals) - k)[len(vals) - k]
        keep = vals >= kth
        cols, vals = cols[keep], vals[keep]
    order = np.lexsort((cols, -vals))[:k]
    return [(int(cols[i]), float(vals[i])) for i in order]


class SparseRetriever(Retriever):
    name = "sparse"

    def __init__(self, index_dir, p: dict, manifest: dict):
        import scipy.sparse as sp

        self.p = p
        self.index_info = manifest.get("index", {})
        index_dir = Path(index_dir)
        self.doc_ids = json.loads((index_dir / "doc_ids.json").read_text(encoding="utf-8"))
        matrix = sp.load_npz(index_dir / MATRIX).tocsr()
        if matrix.shape[0] != len(self.doc_ids) or matrix.shape[0] != manifest.get("n_docs"):
            raise DataError(f"{index_dir}: {MATRIX} has {matrix.shape[0]} rows for {len(self.doc_ids)} doc ids "
                            f"({manifest.get('n_docs')} in the manifest); rebuild the index")
        self.dim = int(matrix.shape[1])
        self.inverted = matrix.T.tocsr()  # vocabulary x docs: one posting list per term
        self._checked = False
        self._index_dir = index_dir

    def _check_encoder(self, q) -> None:
        if q.shape[1] != self.dim:
            raise DataError(f"{self._index_dir}: the index has {self.dim} dimensions but model "
                            f"'{self.p['model']}' encodes {q.shape[1]}; rebuild the index")
        if not self._checked:
            built, now = self.index_info.get("vocab_sha256"), vocab_sha256(_model(self.p))
            if built and now and built != now:
                raise DataError(f"{self._index_dir}: model '{self.p['model']}' now has a different vocabulary "
                                f"than the index was built with; rebuild the index")
            self._checked = True

    def search(self, queries: list[str], k: int) -> SearchResult:
        check_k(k)
        if not queries:
            return SearchResult([])
        q = encode(list(queries), self.p, "query")
        self._check_encoder(q)
        k = min(k, len(self.doc_ids))
        step = max(1, PRODUCT_CELLS // max(1, len(self.doc_ids)))
        out: list[Hits] = []
        for start in range(0, q.shape[0], step):
            scores = (q[start:start + step] @ self.inverted).tocsr()
            for r in range(scores.shape[0]):
                lo, hi = scores.indptr[r], scores.indptr[r + 1]
                out.append([(self.doc_ids[c], s) for c, s in top_k(scores.indices[lo:hi], scores.data[lo:hi], k)])
        return SearchResult(out)
