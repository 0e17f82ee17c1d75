"""Dispatch, closed book, and the manifest check that ties an index to its params."""

import json

import pytest

from convrag.errors import ConfigError, DataError
from convrag.records import Passage, write_records
from convrag.retrieval import RETRIEVERS, Capabilities, QueryCost, SearchResult, build_index, capabilities, load_retriever


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    write_records(path, [Passage("a", "A", "apples are red"), Passage("b", "B", "bananas are yellow")])
    return path


def test_unknown_retriever_is_named(corpus, tmp_path):
    with pytest.raises(ConfigError, match="unknown retriever kind 'colbert'"):
        build_index("colbert", corpus, tmp_path / "i", {})
    with pytest.raises(ConfigError, match="'colbert'"):
        load_retriever("colbert", tmp_path / "i", {})


def test_closed_book_writes_only_manifest_and_returns_nothing(corpus, tmp_path):
    build_index("closed_book", corpus, tmp_path / "cb", {})
    assert sorted(p.name for p in (tmp_path / "cb").iterdir()) == [".convrag-artifact", "manifest.json"]
    res = load_retriever("closed_book", tmp_path / "cb", {}).search(["q1", "q2"], 5)
    assert isinstance(res, SearchResult) and res == [[], []]
    assert res.costs == [QueryCost(), QueryCost()] and res.details == []


# kind: (closed_book, needs_graph, llm_at_build, llm_at_query, cost_class)
CAPS = {
    "closed_book": (True, False, False, False, "cheap"),
    "bm25": (False, False, False, False, "cheap"),
    "lucene_bm25": (False, False, False, False, "cheap"),
    "dense": (False, False, False, False, "cheap"),
    "hipporag": (False, True, False, True, "query_llm"),
    "sparse": (False, False, False, False, "cheap"),
    "hipporag2": (False, True, False, True, "query_llm"),
    "lightrag": (False, True, False, True, "query_llm"),
    "raptor": (False, False, True, False, "cheap"),
    "tog2": (False, True, False, True, "explorer"),
    "pog": (False, True, False, True, "explorer"),
}


@pytest.mark.parametrize("kind", sorted(CAPS))
def test_capabilities_declared_per_kind(kind):
    c = capabilities(kind)
    assert isinstance(c, Capabilities)
    assert (c.closed_book, c.needs_graph, c.llm_at_build, c.llm_at_query, c.cost_class) == CAPS[kind]
    assert c.uses_llm == (c.llm_at_build or c.llm_at_query)


def test_capabilities_cover_every_kind_and_check_cost_class():
    assert set(RETRIEVERS) == set(CAPS)
    with pytest.raises(ConfigError, match="unknown retriever kind 'colbert'"):
        capabilities("colbert")
    with pytest.raises(ValueError, match="cost_class"):
        Capabilities(cost_class="pricey")


def test_manifest_records_build(corpus, tmp_path):
    build_index("bm25", corpus, tmp_path / "idx", {"k1": 1.2})
    man = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert man["retriever"] == "bm25" and man["n_docs"] == 2
    assert man["params"]["k1"] == 1.2 and man["params"]["backend"] == "bm25s"
    assert len(man["corpus_sha256"]) == 64 and man["build_seconds"] >= 0


def test_param_mismatch_is_a_clear_error(corpus, tmp_path):
    build_index("bm25", corpus, tmp_path / "idx", {"k1": 0.9})
    with pytest.raises(ConfigError, match=r"built with k1=0\.9 but k1=1\.2"):
        load_retriever("bm25", tmp_path / "idx", {"k1": 1.2})
    with pytest.raises(ConfigError, match="stemmer"):
        load_retriever("bm25", tmp_path / "idx", {"stemmer": "none"})
    # defaults are filled before comparing; runtime-only keys may differ
    assert load_retriever("bm25", tmp_path / "idx", {"threads": 2}).search(["apples"], 1)[0][0][0] == "a"


def test_wrong_retriever_missing_manifest_other_corpus(corpus, tmp_path):
    build_index("bm25", corpus, tmp_path / "idx", {})
    with pytest.raises(ConfigError, match="built for retriever 'bm25', not 'closed_book'"):
        load_retriever("closed_book", tmp_path / "idx", {})
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no manifest.json"):
        load_retriever("bm25", tmp_path / "empty", {})
    other = tmp_path / "other.jsonl"
    write_records(other, [Passage("z", "", "zebra")])
    with pytest.raises(DataError, match="different corpus"):
        load_retriever("bm25", tmp_path / "idx", {}, corpus_path=other)
    load_retriever("bm25", tmp_path / "idx", {}, corpus_path=corpus)


def test_bad_params_named(corpus, tmp_path):
    with pytest.raises(ConfigError, match="unknown param 'k_1'"):
        build_index("bm25", corpus, tmp_path / "i", {"k_1": 1.0})
    with pytest.raises(ConfigError, match="backend must be one of"):
        build_index("bm25", corpus, tmp_path / "i", {"backend": "elastic"})
    with pytest.raises(ConfigError, match="unknown param 'k1'"):
        build_index("closed_book", corpus, tmp_path / "i", {"k1": 1.0})
    assert not (tmp_path / "i").exists()


def test_bad_corpus_and_overwrite_rules(corpus, tmp_path):
    dup = tmp_path / "dup.jsonl"
    write_records(dup, [Passage("a", "", "x"), Passage("a", "", "y")])
    with pytest.raises(DataError, match="duplicate doc_id 'a'"):
        build_index("bm25", dup, tmp_path / "i", {})
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    with pytest.raises(DataError, match="not an index folder"):
        build_index("bm25", corpus, tmp_path / "notes", {})
    assert (tmp_path / "notes" / "keep.txt").exists()
    build_index("bm25", corpus, tmp_path / "idx", {"k1": 0.9})
    build_index("bm25", corpus, tmp_path / "idx", {"k1": 1.1})  # an old index is replaced
    load_retriever("bm25", tmp_path / "idx", {"k1": 1.1})
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
