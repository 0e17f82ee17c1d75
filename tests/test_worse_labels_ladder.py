"""The Fusion / Hybrid machinery of the worse_labels retriever ladder: min-max fusion, the weight
grid fitted on qrels, and the LLM query expansions (a scripted engine, hand-checkable values;
once with the real tiny model)."""

from __future__ import annotations

import math

import pytest

from convrag.config import REPO_ROOT
from convrag.data.recor import official_query
from convrag.errors import ConfigError, DataError
from convrag.llm.types import Response, Sampling
from convrag.records import TurnTask
from convrag.studies.worse_labels.ladder import (
    EXPANSIONS, conversation_text, expand, expansion_requests, fallback_counts, fit_weights, fuse, load_prompts,
    minmax, parse_reply, queries_by_kind, read_weights, weight_grid, write_weights,
)

PROMPTS = load_prompts()
GREEDY = Sampling(max_tokens=128)  # the schema's default for an expansion rung
HIST2 = "Q: What is a hydrofoil?\nA: A wing under a boat's hull that lifts it out of the water."


def _task(tid, question, history=(), official=None):
    labels = {"domain": "drones", "split": "train"}
    if official is not None:
        labels["official_history"] = official
    return TurnTask(task_id=tid, benchmark="recor", conversation_id=tid.split("_turn_")[0], turn=1,
                    history=list(history), question=question, labels=labels)


T1 = _task("drones/c1_turn_1", "What is a hydrofoil?", official="No previous conversation.")
T2 = _task("drones/c1_turn_2", "How fast can it go?",
           history=[{"role": "user", "text": "What is a hydrofoil?"},
                    {"role": "assistant", "text": "A wing under a boat's hull that lifts it out of the water."}],
           official=HIST2)


class Scripted:
    """Replies from a list, in request order; counts batched calls."""

    def __init__(self, replies):
        self.replies, self.calls, self.asked = list(replies), 0, []

    def generate(self, reqs, desc=None):
        self.calls += 1
        self.asked.append(list(reqs))
        return [Response(text=self.replies[i], prompt_tokens=1, completion_tokens=1, finish_reason="stop")
                for i in range(len(reqs))]


# ---- min-max and fusion ----------------------------------------------------------------------


def test_minmax_hand_example_and_equal_scores():
    assert minmax({"a": 2, "b": 4, "c": 3}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert minmax({"a": 7.0, "b": 7.0}) == {"a": 1.0, "b": 1.0}  # no spread: all 1.0
    assert minmax({"x": -3.0}) == {"x": 1.0}
    assert minmax({}) == {}
    with pytest.raises(DataError, match="doc 'b'"):
        minmax({"a": 1.0, "b": float("nan")})


def test_fuse_weighted_minmax_by_hand():
    r1 = {"q": {"a": 3, "b": 1, "c": 2}}     # minmax: a 1, b 0, c .5
    r2 = {"q": {"a": 0, "b": 10, "d": 5}}    # minmax: a 0, b 1, d .5
    out = fuse([r1, r2], [0.7, 0.3], k=10)
    # a = .7*1 + .3*0 = .7; c = .7*.5 + 0 (missing from r2) = .35; b = 0 + .3*1 = .3; d = 0 + .3*.5 = .15
    assert list(out["q"]) == ["a", "c", "b", "d"]
    assert out["q"] == pytest.approx({"a": 0.7, "c": 0.35, "b": 0.3, "d": 0.15})
    top3 = fuse([r1, r2], [0.7, 0.3], k=3)
    assert list(top3["q"]) == ["a", "c", "b"]
    # weights need not sum to 1: [7, 3] gives the same order, scores x10
    assert list(fuse([r1, r2], [7, 3], k=10)["q"]) == ["a", "c", "b", "d"]


def test_fuse_ties_by_doc_id_and_queries_of_one_run():
    r1 = {"q": {"y": 1.0, "x": 0.0}, "only1": {"m": 2.0}}
    r2 = {"q": {"y": 0.0, "x": 1.0}}
    out = fuse([r1, r2], [1, 1], k=5)
    assert list(out["q"].items()) == [("x", 1.0), ("y", 1.0)]  # tie at 1.0: doc id ascending
    assert out["only1"] == {"m": 1.0}  # a query one run lacks: that run adds 0
    # weight 0: the run's documents do not enter the pool, its queries vanish
    solo = fuse([r1, {"q": {"z": 5.0}, "only2": {"n": 1.0}}], [1, 0], k=5)
    assert solo == {"q": {"y": 1.0, "x": 0.0}, "only1": {"m": 1.0}}


def test_fuse_weight_errors():
    runs = [{"q": {"a": 1.0}}, {"q": {"a": 2.0}}]
    with pytest.raises(ConfigError, match="1 weights for 2 runs"):
        fuse(runs, [1.0], k=3)
    with pytest.raises(ConfigError, match=r"weights\[1\] must be a finite number >= 0"):
        fuse(runs, [1.0, -0.5], k=3)
    with pytest.raises(ConfigError, match="all weights are 0"):
        fuse(runs, [0, 0], k=3)
    with pytest.raises(ConfigError, match="k must be a positive integer"):
        fuse(runs, [1, 1], k=0)


# ---- fitting the weights ---------------------------------------------------------------------

# With w = weight of run A (1 - w for B):
#  q1: A norm r1 1, n1 .5, z1 0; B norm r1 0, n1 1, z1 0 -> r1 = w, n1 = 1 - .5w: r1 first iff w > 2/3
#  q2: A norm r2 .75, n2 1, z2 0; B norm r2 1, n2 0, z2 0 -> r2 = 1 - .25w, n2 = w: r2 first iff w < .8
# (at w = .8 r2 and n2 tie at .8 and "n2" < "r2" wins the tie). On the 0.1 grid only w = .7 ranks
# both relevant docs first: nDCG@10 = 1; every other w puts one of them second: (1 + 1/log2(3)) / 2.
RUN_A = {"q1": {"r1": 4.0, "n1": 2.0, "z1": 0.0}, "q2": {"r2": 3.0, "n2": 4.0, "z2": 0.0}}
RUN_B = {"q1": {"r1": 0.0, "n1": 4.0, "z1": 0.0}, "q2": {"r2": 5.0, "n2": 0.0, "z2": 0.0}}
QRELS = {"q1": {"r1": 1}, "q2": {"r2": 1}}


def test_fit_weights_finds_the_only_good_weights():
    res = fit_weights([RUN_A, RUN_B], QRELS, step=0.1)
    assert res["weights"] == [0.7, 0.3]
    assert res["score"] == pytest.approx(1.0)
    assert res["n_candidates"] == 11 and res["n_tied"] == 1 and res["measure"] == "nDCG@10"
    assert res["n_queries"] == 2 and res["n_skipped"] == 0
    # the runner-up: one of the two relevant docs at rank 2
    worse = fit_weights([RUN_A, RUN_B], QRELS, step=0.5)  # grid (0,1), (.5,.5), (1,0)
    assert worse["n_candidates"] == 3 and worse["n_tied"] == 3
    assert worse["score"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert worse["weights"] == [0.5, 0.5]  # all tie: closest to equal weights


def test_fit_weights_tie_break_and_missing_queries():
    # identical runs: every candidate ranks alike; 3 runs, step .5: six candidates, three at
    # distance-equal (.5, .5, 0) permutations -> the lexicographically first, (0, .5, .5)
    res = fit_weights([RUN_A, RUN_A, RUN_A], QRELS, step=0.5)
    assert res["n_candidates"] == 6 and res["n_tied"] == 6
    assert res["weights"] == [0.0, 0.5, 0.5]
    # a qrels query no run answers scores 0 and counts in the mean: q1 1.0, q2 r2 second, q3 0
    three = fit_weights([RUN_A], {**QRELS, "q3": {"x": 1}}, step=1)
    assert three["weights"] == [1.0] and three["n_candidates"] == 1
    assert three["score"] == pytest.approx((1 + 1 / math.log2(3) + 0) / 3)
    # a query without a relevant doc (a turn without gold) is skipped, not scored 0
    skip = fit_weights([RUN_A], {**QRELS, "q4": {}, "q5": {"r1": 0}}, step=1)
    assert skip["n_queries"] == 2 and skip["n_skipped"] == 2
    assert skip["score"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    with pytest.raises(DataError, match="none of the 1 qrels queries has a relevant doc"):
        fit_weights([RUN_A], {"q4": {}}, step=1)


def test_weight_grid_and_step_validation():
    assert weight_grid(2, 0.25) == [(0.0, 1.0), (0.25, 0.75), (0.5, 0.5), (0.75, 0.25), (1.0, 0.0)]
    assert len(weight_grid(3, 0.1)) == 66 and (0.3, 0.3, 0.4) in weight_grid(3, 0.1)
    for bad in (0, -0.1, 1.5):
        with pytest.raises(ConfigError, match=r"step must be in \(0, 1\]"):
            fit_weights([RUN_A, RUN_B], QRELS, step=bad)
    with pytest.raises(ConfigError, match=r"step 0.3 does not divide 1"):
        fit_weights([RUN_A, RUN_B], QRELS, step=0.3)
    with pytest.raises(ConfigError, match="unknown retrieval metric"):
        fit_weights([RUN_A, RUN_B], QRELS, measure="nDCG@ten")


def test_weights_file_round_trip(tmp_path):
    res = fit_weights([RUN_A, RUN_B], QRELS, step=0.1)
    write_weights(tmp_path / "w.json", res)
    assert read_weights(tmp_path / "w.json") == res
    (tmp_path / "bad.json").write_text('{"weights": [0, 0]}')
    with pytest.raises(DataError, match="bad.json.*all weights are 0"):
        read_weights(tmp_path / "bad.json")


# ---- expansions ------------------------------------------------------------------------------


def test_prompt_messages_carry_history_and_question():
    reqs = expansion_requests([T1, T2], PROMPTS, EXPANSIONS, Sampling(max_tokens=128))
    assert len(reqs) == 6
    assert [r.messages[0]["content"] for r in reqs[:3]] == [PROMPTS[k]["system"].strip() for k in EXPANSIONS]
    assert reqs[0].messages[-1]["content"] == PROMPTS["query2doc"]["user"].format(
        history="(none)", question="What is a hydrofoil?")
    assert reqs[4].messages[-1]["content"] == PROMPTS["rewrite_passage"]["user"].format(
        history=HIST2, question="How fast can it go?")
    assert reqs[0].sampling.temperature == 0.0
    # without the official history label: the task's own turns, in the same Q / A form
    bare = _task("drones/c1_turn_2", "How fast can it go?", history=T2.history)
    assert conversation_text(bare) == HIST2
    assert conversation_text(_task("drones/c2_turn_1", "Hi?")) == "(none)"


@pytest.mark.parametrize("kind,text,want", [
    ("query2doc", "Hydrofoils lift the hull.", ("", "Hydrofoils lift the hull.", True)),
    ("query2doc", "Passage: Hydrofoils lift.", ("", "Hydrofoils lift.", True)),
    ("query2doc", "   ", ("", "", False)),
    ("rewrite_passage", "Rewrite: Q?\nPassage: P.", ("Q?", "P.", True)),
    ("rewrite_passage", "**Rewrite:** \"Q?\"\nmore words\n**Passage:** P.", ("Q?", "P.", True)),
    ("rewrite_passage", "rewrite: Q?", ("Q?", "", True)),
    ("rewrite_hyde", "Rewrite: Q?\nDocument: D.\nPassage: x", ("Q?", "D.", True)),
    ("rewrite_hyde", "Rewrite: Q?\nPassage: not a document", ("Q?", "", True)),
    ("rewrite_hyde", "Document: D only", ("", "D only", False)),
    ("rewrite_passage", "Rewrite:\nPassage: P", ("", "P", False)),
])
def test_parse_reply(kind, text, want):
    got = parse_reply(kind, text)
    assert (got["rewrite"], got["passage"], got["parsed"]) == want


def test_expand_one_call_parsed_queries_and_fallbacks():
    passage = "A hydrofoil is a wing-like foil under a hull."
    eng = Scripted([
        passage,                                                              # T1 query2doc
        "Rewrite: What is a hydrofoil?\nPassage: A foil that lifts a hull.",  # T1 rewrite_passage
        "Rewrite: What is a hydrofoil boat?",                                 # T1 rewrite_hyde, no document
        "",                                                                   # T2 query2doc: empty -> fallback
        "**Rewrite:** How fast can a hydrofoil boat go?\n**Passage:** Up to 50 knots.",
        "I am not sure what you mean.",                                       # T2 rewrite_hyde -> fallback
    ])
    recs = expand([T1, T2], eng, PROMPTS, sampling=Sampling(max_tokens=64))
    assert eng.calls == 1 and len(eng.asked[0]) == 2 * 3
    assert eng.asked[0][0].sampling.max_tokens == 64 and eng.asked[0][0].sampling.temperature == 0.0
    assert [(r["task_id"], r["kind"]) for r in recs] == [(t.task_id, k) for t in (T1, T2) for k in EXPANSIONS]
    # T1 has no history: the official query is the question; query2doc repeats it 5 times
    assert recs[0]["query"] == "\n".join(["What is a hydrofoil?"] * 5 + [passage])
    assert recs[0]["passage"] == passage and recs[0]["fallback"] is False
    assert recs[1]["rewrite"] == "What is a hydrofoil?" and recs[1]["passage"] == "A foil that lifts a hull."
    assert recs[1]["query"] == "What is a hydrofoil?\nA foil that lifts a hull."
    assert recs[2]["query"] == "What is a hydrofoil boat?" and recs[2]["passage"] == ""
    assert recs[2]["fallback"] is False
    t2_official = "How fast can it go?\n\nConversation History:\n" + HIST2
    assert official_query(T2, with_history=True) == t2_official
    assert recs[3]["fallback"] is True and recs[3]["query"] == t2_official and recs[3]["raw"] == ""
    assert recs[4]["query"] == "How fast can a hydrofoil boat go?\nUp to 50 knots."
    assert recs[5]["fallback"] is True and recs[5]["query"] == t2_official
    assert recs[5]["raw"] == "I am not sure what you mean."
    assert fallback_counts(recs) == {"query2doc": 1, "rewrite_passage": 0, "rewrite_hyde": 1}
    assert queries_by_kind(recs)["rewrite_passage"] == {T1.task_id: recs[1]["query"], T2.task_id: recs[4]["query"]}
    # query_repeats and a subset of kinds
    one = expand([T1], Scripted([passage]), PROMPTS, kinds=["query2doc"], sampling=GREEDY, query_repeats=2)
    assert one[0]["query"] == f"What is a hydrofoil?\nWhat is a hydrofoil?\n{passage}"


def test_expand_errors():
    with pytest.raises(ConfigError, match="unknown kind 'hyde'"):
        expand([T1], Scripted([]), PROMPTS, kinds=["hyde"], sampling=GREEDY)
    with pytest.raises(ConfigError, match="missing section 'rewrite_hyde'"):
        expand([T1], Scripted([]), {k: v for k, v in PROMPTS.items() if k != "rewrite_hyde"}, sampling=GREEDY)
    with pytest.raises(DataError, match="drones/c1_turn_1 is listed twice"):
        expand([T1, T1], Scripted([]), PROMPTS, sampling=GREEDY)
    with pytest.raises(DataError, match="task drones/x_turn_1: empty question"):
        expand([_task("drones/x_turn_1", " ")], Scripted([]), PROMPTS, sampling=GREEDY)


@pytest.mark.tinymodel
def test_expand_with_the_real_tiny_model(tmp_path):
    from convrag.llm.engine import load_engine

    eng = load_engine("smollm2-135m", REPO_ROOT / "config" / "models.yaml", tmp_path / "c.sqlite")
    recs = expand([T1, T2], eng, PROMPTS, sampling=Sampling(max_tokens=48))
    print([(r["kind"], r["fallback"], r["raw"][:80]) for r in recs])
    assert eng.accounting.requests == 6 and eng.accounting.calls == 6 and eng.accounting.batches == 1
    assert len(recs) == 6 and all(r["query"].strip() for r in recs)
    for r in recs:  # a fallback's query is the official one
        assert not r["fallback"] or r["query"] == official_query(T1 if r["task_id"] == T1.task_id else T2, True)
    # the same tasks again, from the cache: a fresh engine never reaches (or loads) the backend
    again = load_engine("smollm2-135m", REPO_ROOT / "config" / "models.yaml", tmp_path / "c.sqlite")
    assert expand([T1, T2], again, PROMPTS, sampling=Sampling(max_tokens=48)) == recs
    assert again.accounting.calls == 0 and again.accounting.cache_hits == 6 and not again.backend_loaded
