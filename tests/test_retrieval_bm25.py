"""BM25 (bm25s backend): hand-computed Lucene BM25 scores, params that matter, save/reload."""

import math
import shutil

import pytest

from convrag.records import Passage, write_records
from convrag.retrieval import build_index, load_retriever

PLAIN = {"stopwords": "none", "stemmer": "none", "k1": 0.9, "b": 0.4}
DOCS = [
    Passage("d1", "Alpha", "red apple red"),
    Passage("d2", "Beta", "green apple"),
    Passage("d3", "Gamma", "blue sky over sea"),
]


def lucene_bm25(query, docs, k1=0.9, b=0.4):
    """Reference: Lucene's BM25 (idf = ln(1 + (N - df + .5) / (df + .5)), no (k1 + 1) factor)."""
    toks = {p.doc_id: f"{p.title} {p.text}".lower().split() for p in docs}
    avgdl = sum(map(len, toks.values())) / len(toks)
    out = {}
    for d, t in toks.items():
        s = 0.0
        for term in query.lower().split():
            df = sum(term in x for x in toks.values())
            tf = t.count(term)
            if tf:
                idf = math.log(1 + (len(toks) - df + 0.5) / (df + 0.5))
                s += idf * tf / (tf + k1 * (1 - b + b * len(t) / avgdl))
        if s > 0:
            out[d] = s
    return sorted(out.items(), key=lambda x: -x[1])


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    write_records(path, DOCS)
    return path


def test_bm25_scores_match_hand_computed_lucene_formula(corpus, tmp_path):
    build_index("bm25", corpus, tmp_path / "idx", PLAIN)
    r = load_retriever("bm25", tmp_path / "idx", PLAIN)
    queries = ["red apple", "gamma", "apple", "nothing matches"]
    got = r.search(queries, k=10)  # k above corpus size is clamped
    assert [d for d, _ in got[0]] == ["d1", "d2"]
    assert got[0][0][1] > got[0][1][1] > 0
    assert [d for d, _ in got[1]] == ["d3"]  # the title is indexed
    assert {d for d, _ in got[2]} == {"d1", "d2"}
    assert got[3] == []  # no matching term: no hit (as Lucene)
    for q, hits in zip(queries, got):
        ref = lucene_bm25(q, DOCS)
        assert [d for d, _ in hits] == [d for d, _ in ref]
        assert [s for _, s in hits] == pytest.approx([s for _, s in ref], rel=1e-5)


def test_bm25_k1_b_change_scores(corpus, tmp_path):
    p2 = {**PLAIN, "k1": 1.5, "b": 0.75}
    build_index("bm25", corpus, tmp_path / "idx", p2)
    hits = load_retriever("bm25", tmp_path / "idx", p2).search(["red apple"], 2)[0]
    ref = lucene_bm25("red apple", DOCS, k1=1.5, b=0.75)
    assert [s for _, s in hits] == pytest.approx([s for _, s in ref], rel=1e-5)
    assert hits[0][1] != pytest.approx(lucene_bm25("red apple", DOCS)[0][1], rel=1e-3)


def test_bm25_default_stems_and_drops_stopwords(tmp_path):
    path = tmp_path / "c.jsonl"
    write_records(path, [Passage("cat", "", "The cat runs home"), Passage("dog", "", "A dog sleeps")])
    build_index("bm25", path, tmp_path / "stem", {})
    build_index("bm25", path, tmp_path / "plain", PLAIN)
    stem = load_retriever("bm25", tmp_path / "stem", {})
    plain = load_retriever("bm25", tmp_path / "plain", PLAIN)
    assert [d for d, _ in stem.search(["running cats"], 2)[0]] == ["cat"]
    assert plain.search(["running cats"], 2)[0] == []
    assert stem.search(["the"], 2)[0] == []  # stopword only
    assert [d for d, _ in plain.search(["the"], 2)[0]] == ["cat"]


def test_bm25s_index_saved_and_reloaded_elsewhere_gives_same_results(corpus, tmp_path):
    build_index("bm25", corpus, tmp_path / "idx", PLAIN)
    first = load_retriever("bm25", tmp_path / "idx", PLAIN).search(["red apple", "sky sea"], 3)
    shutil.copytree(tmp_path / "idx", tmp_path / "moved")
    shutil.rmtree(tmp_path / "idx")
    again = load_retriever("bm25", tmp_path / "moved", PLAIN).search(["red apple", "sky sea"], 3)
    assert again == first
    assert [d for d, _ in again[1]] == ["d3"]


def test_bm25_batched_search_equals_one_by_one(corpus, tmp_path):
    build_index("bm25", corpus, tmp_path / "idx", PLAIN)
    r = load_retriever("bm25", tmp_path / "idx", PLAIN)
    qs = ["red apple", "green", "sea"]
    res = r.search(qs, 2)
    assert res == [r.search([q], 2)[0] for q in qs]
    assert [c.llm_calls for c in res.costs] == [0, 0, 0]  # no LLM: one zero cost per query
    empty = r.search([], 2)
    assert empty == [] and empty.costs == []
