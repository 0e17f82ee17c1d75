"""Dispatch, closed book, and the manifest check that ties an index to its params."""

import inspect
import json

import pytest

from convrag.errors import ConfigError, DataError
from convrag.records import Passage, write_records
from convrag.retrieval import KINDS, Capabilities, QueryCost, SearchResult, build_index, capabilities, load_retriever


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


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_keeps_the_module_contract(kind):
    """Every registered kind (read from the registry, so a new module is checked unasked) declares
    its capabilities and params and takes what the dispatch passes it for them (``_extras``)."""
    mod = KINDS.get(kind)
    c = capabilities(kind)
    assert isinstance(c, Capabilities) and c is mod.CAPABILITIES and isinstance(mod.DEFAULTS, dict)
    assert c.uses_llm == (c.llm_at_build or c.llm_at_query)
    build, load = (set(inspect.signature(f).parameters) for f in (mod.build, mod.load))
    assert {"corpus_path", "out_dir", "params"} <= build and {"index_dir", "params", "corpus_path"} <= load
    assert (not c.needs_graph or "graph_dir" in build) and (not c.uses_llm or "llm" in build & load)


def test_capabilities_of_the_papers_kinds_and_the_cost_classes():
    caps = {k: capabilities(k) for k in KINDS}
    assert {k for k, c in caps.items() if c.closed_book} == {"closed_book"}
    assert caps["raptor"].llm_at_build and not caps["raptor"].needs_graph and caps["raptor"].cost_class == "cheap"
    assert {k for k, c in caps.items() if c.cost_class == "explorer"} >= {"tog2", "pog"}
    assert all(caps[k].needs_graph and caps[k].llm_at_query for k in ("hipporag", "hipporag2", "lightrag", "tog2", "pog"))
    assert not any(caps[k].uses_llm or caps[k].needs_graph for k in ("bm25", "lucene_bm25", "dense", "sparse"))
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
