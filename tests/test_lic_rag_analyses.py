"""The lic_rag analyses on hand-made score tables, each checked against numbers worked out
by hand in the comments (aptitude/unreliability, decomposition, recovery, complete coverage,
judge-gap correlation, categories, dependency order, preservation, recall by turn)."""

import math

import numpy as np
import pandas as pd
import pytest

from convrag.metrics.reliability import aptitude, unreliability
from convrag.studies.lic_rag import analyses as L
from convrag.studies.lic_rag.score import _order_kept

BOOT = {"n_resamples": 200, "seed": 0}


def _scores(vals: dict, extra: dict | None = None, retriever="bm25") -> pd.DataFrame:
    """vals: (qid, condition, policy) -> list of final F1 over runs."""
    rows = []
    for (qid, cond, pol), fs in vals.items():
        for run, f in enumerate(fs):
            row = dict(conv_id=f"{retriever}/{cond}_{pol}/{qid}/run{run}", dataset="d", model="m", retriever=retriever,
                       condition=cond, policy=pol, qid=qid, run=run, final_f1=f, final_em=float(f == 1.0))
            row.update((extra or {}).get((qid, cond, pol, run), {}))
            rows.append(row)
    return pd.DataFrame(rows)


def test_aptitude_and_unreliability_on_five_runs():
    runs = [0.6, 1.0, 0.2, 0.8, 0.4]  # sorted: 0.2 0.4 0.6 0.8 1.0
    # P90: rank 0.9 * 4 = 3.6 -> 0.8 + 0.6 * (1.0 - 0.8) = 0.92; P10: rank 0.4 -> 0.2 + 0.4 * 0.2 = 0.28
    assert aptitude(runs) == pytest.approx(0.92)
    assert unreliability(runs) == pytest.approx(0.92 - 0.28)
    assert unreliability([0.5] * 5) == 0.0
    with pytest.raises(ValueError, match="no scores"):
        aptitude([])


def test_aptitude_table_averages_questions():
    s = _scores({("q1", "SHARDED", "history"): [0.6, 1.0, 0.2, 0.8, 0.4],
                 ("q2", "SHARDED", "history"): [1.0, 1.0, 1.0, 1.0, 1.0]})
    t = L.aptitude_unreliability(s, BOOT, {}).iloc[0]
    # q1: A = 0.92, U = 0.64; q2: A = 1, U = 0 -> means 0.96 and 0.32
    assert t.aptitude == pytest.approx(0.96) and t.unreliability == pytest.approx(0.32)
    assert t.n_questions == 2 and t.runs_per_question == 5


def test_decomposition_arithmetic():
    s = _scores({("q1", "FULL", "none"): [1.0, 0.8], ("q1", "CONCAT", "none"): [0.7, 0.7],
                 ("q1", "SHARDED", "history"): [0.4, 0.4],
                 ("q2", "FULL", "none"): [0.6, 0.6], ("q2", "CONCAT", "none"): [0.6, 0.4],
                 ("q2", "SHARDED", "history"): [0.0, 0.2]})
    r = L.decomposition(s, BOOT).iloc[0]
    # per question (mean over runs): FULL 0.9 / 0.6, CONCAT 0.7 / 0.5, SHARDED 0.4 / 0.1
    # formulation = mean(0.2, 0.1) = 0.15; delivery = mean(0.3, 0.4) = 0.35; total = 0.5
    assert r.f1_full == pytest.approx(0.75) and r.f1_concat == pytest.approx(0.6) and r.f1_sharded == pytest.approx(0.25)
    assert r.formulation_loss == pytest.approx(0.15) and r.delivery_loss == pytest.approx(0.35)
    assert r.total_gap == pytest.approx(r.formulation_loss + r.delivery_loss) == pytest.approx(0.5)
    assert r.delivery_share == pytest.approx(0.7)
    assert r.formulation_ci_low <= r.formulation_loss <= r.formulation_ci_high


def test_recovery_share_hand_computed():
    assert L.recovery_share(0.8, 0.4, 0.7) == pytest.approx(0.75)
    assert L.recovery_share(0.8, 0.4, 0.3) == pytest.approx(-0.25)
    assert L.recovery_share(0.8, 0.4, 0.8) == pytest.approx(1.0)
    assert math.isnan(L.recovery_share(0.5, 0.5, 0.9))  # no gap to recover
    s = _scores({("q1", "FULL", "none"): [0.8], ("q1", "SHARDED", "history"): [0.4],
                 ("q1", "RECAP", "history"): [0.7], ("q1", "SNOWBALL", "history"): [0.3],
                 ("q2", "FULL", "none"): [0.8], ("q2", "SHARDED", "history"): [0.4],
                 ("q2", "RECAP", "history"): [0.7], ("q2", "SNOWBALL", "history"): [0.3]})
    r = L.recovery(s, BOOT).iloc[0]
    assert r.recap_recovery == pytest.approx(0.75) and r.snowball_recovery == pytest.approx(-0.25)
    assert r.recap_ci_low == pytest.approx(0.75) and r.recap_ci_high == pytest.approx(0.75)  # identical questions


def test_complete_coverage_subset():
    vals = {("q1", "FULL", "none"): [1.0, 1.0], ("q1", "SHARDED", "history"): [0.0, 1.0],
            ("q2", "FULL", "none"): [1.0, 1.0], ("q2", "SHARDED", "history"): [0.5, 0.5]}
    cov = {("q1", "FULL", "none", 0): 1.0, ("q1", "SHARDED", "history", 0): 1.0,  # pair (q1, 0) covered
           ("q1", "FULL", "none", 1): 1.0, ("q1", "SHARDED", "history", 1): 0.5,  # (q1, 1) not: SHARDED missed one
           ("q2", "FULL", "none", 0): 0.5, ("q2", "SHARDED", "history", 0): 1.0,  # (q2, 0) not: FULL missed one
           ("q2", "FULL", "none", 1): 1.0, ("q2", "SHARDED", "history", 1): 1.0}  # (q2, 1) covered
    s = _scores(vals, {k: {"final_cum_recall": v} for k, v in cov.items()})
    r = L.complete_coverage(s, BOOT).iloc[0]
    assert r.pairs == 4 and r.covered_pairs == 2 and r.covered_questions == 2
    # covered gaps: q1 run 0: 1 - 0 = 1; q2 run 1: 1 - 0.5 = 0.5 -> mean 0.75
    assert r.gap_covered == pytest.approx(0.75)
    # all pairs: q1 mean gap 0.5, q2 0.5 -> 0.5
    assert r.gap_all == pytest.approx(0.5)


def test_judge_gap_correlation_across_pairs():
    rows = []
    # three retrievers; F1 gaps 0.1, 0.2, 0.3 and judge gaps 0.0, 0.5, 1.0: perfectly linear (r = 1)
    for ret, (f1_sh, j_sh) in {"a": (0.9, 1.0), "b": (0.8, 0.5), "c": (0.7, 0.0)}.items():
        for cond, f1, j in (("FULL", 1.0, 1.0), ("SHARDED", f1_sh, j_sh)):
            rows.append(dict(conv_id=f"{ret}{cond}", dataset="d", model="m", retriever=ret, condition=cond,
                             policy="none" if cond == "FULL" else "history", qid="q1", run=0, final_f1=f1,
                             final_em=0.0, judge_correct=j, judge_parsed=True, judge_method="llm"))
    summary, pairs = L.judge_gap_correlation(pd.DataFrame(rows), BOOT)
    assert pairs.f1_gap.tolist() == pytest.approx([0.0 + 0.1, 0.2, 0.3])
    assert pairs.judge_gap.tolist() == pytest.approx([0.0, 0.5, 1.0])
    r = summary.set_index("policy").loc["history"]
    assert r.pearson_r == pytest.approx(1.0) and r.spearman_rho == pytest.approx(1.0)
    # mean gaps: F1 0.2, judge 0.5, difference -0.3 (one question: the intervals are the values)
    assert (r.f1_gap, r.judge_gap, r.gap_difference) == (pytest.approx(0.2), pytest.approx(0.5), pytest.approx(-0.3))
    assert r.gap_difference_ci_low == pytest.approx(-0.3) == pytest.approx(r.gap_difference_ci_high)
    acc = L.judge_accuracy(pd.DataFrame(rows))
    assert acc[(acc.retriever == "b") & (acc.condition == "SHARDED")].judge_accuracy.iloc[0] == 0.5


def test_judge_gap_correlation_per_policy():
    """§B.5 reports r per policy (.94 HISTORY, .96 CURRENT): pooling both would hide a policy where
    the judge disagrees. HISTORY: F1 gaps .1 .2 .3, judge gaps 0 .5 1 (r = 1); CURRENT: the
    judge gaps reversed (r = -1)."""
    rows = []
    for ret, f1_sh, j_hist, j_cur in (("a", 0.9, 1.0, 0.0), ("b", 0.8, 0.5, 0.5), ("c", 0.7, 0.0, 1.0)):
        rows.append(dict(dataset="d", model="m", retriever=ret, condition="FULL", policy="none", qid="q1", run=0,
                         final_f1=1.0, judge_correct=1.0))
        for pol, j in (("history", j_hist), ("current", j_cur)):
            rows.append(dict(dataset="d", model="m", retriever=ret, condition="SHARDED", policy=pol, qid="q1", run=0,
                             final_f1=f1_sh, judge_correct=j))
    summary, pairs = L.judge_gap_correlation(pd.DataFrame(rows), BOOT)
    by = summary.set_index("policy")
    assert list(by.index) == ["current", "history", "all"] and by.loc["all", "pairs"] == 6
    assert by.loc["history", "pearson_r"] == pytest.approx(1.0) and by.loc["current", "pearson_r"] == pytest.approx(-1.0)
    # CURRENT judge gaps 1 - (0, .5, 1) = 1, .5, 0: mean .5; F1 gaps mean .2; difference -.3
    assert by.loc["current", "judge_gap"] == pytest.approx(0.5) and by.loc["current", "gap_difference"] == pytest.approx(-0.3)
    assert set(pairs.policy) == {"history", "current"}


def test_judge_correlation_undefined_with_too_few_pairs():
    s = _scores({("q1", "FULL", "none"): [1.0], ("q1", "SHARDED", "history"): [0.5]},
                {("q1", "FULL", "none", 0): {"judge_correct": 1.0}, ("q1", "SHARDED", "history", 0): {"judge_correct": 0.0}})
    summary, _ = L.judge_gap_correlation(s, BOOT)
    assert summary.iloc[0].pairs == 1 and np.isnan(summary.iloc[0].pearson_r) and "fewer than 3" in summary.iloc[0].note


def test_response_category_shares():
    turns = pd.DataFrame({"retriever": "bm25", "condition": "SHARDED", "policy": "history", "conv_id": "c",
                          "category": ["answer_attempt", "answer_attempt", "clarification", None]})
    r = L.response_categories(turns).iloc[0]
    assert r.turns == 4 and r.answer_attempt == 0.5 and r.clarification == 0.25 and r.unlabelled == 0.25
    assert r.hedge == 0.0


def test_dependency_order_share():
    s = _scores({("q1", "SHARDED", "history"): [0.0, 0.0, 0.0, 0.0], ("q1", "FULL", "none"): [1.0]},
                {("q1", "SHARDED", "history", i): {"order_kept": v} for i, v in enumerate([1.0, 1.0, 0.0, 1.0])})
    d = L.dependency_order(s)
    assert len(d) == 2 and d.iloc[0].order_kept_share == 0.75 and d.iloc[0].conversations == 4
    assert d.iloc[1].dataset == "all" and d.iloc[1].order_kept_share == 0.75  # the pooled row (§A.2)


def test_order_kept_from_turns():
    from convrag.records import Conversation

    def conv(ids, cond="SHARDED"):
        turns = [t for i in ids for t in ({"role": "user", "text": "x", "shard_id": i}, {"role": "assistant", "text": ""})]
        return Conversation("c", "lic_rag", "q", "d", cond, "history", "bm25", "m", 0, turns)

    assert _order_kept(conv([1, 2, 3])) == 1.0
    assert _order_kept(conv([1, 3, 2])) == 0.0
    assert np.isnan(_order_kept(conv([None], cond="FULL")))


def test_information_preservation_and_retention():
    # closed book: FULL 0.5 / 0.5, CONCAT 0.5 / 0.3 -> ratio 0.4 / 0.5 = 0.8 -> passes at 0.8, fails at 0.9
    s = _scores({("q1", "FULL", "none"): [0.5], ("q1", "CONCAT", "none"): [0.5],
                 ("q2", "FULL", "none"): [0.5], ("q2", "CONCAT", "none"): [0.3]}, retriever="closed_book")
    p = L.information_preservation(s, ["closed_book"], {"preservation_threshold": 0.8}).iloc[0]
    assert p.ratio == pytest.approx(0.8) and p.passes
    assert not L.information_preservation(s, ["closed_book"], {"preservation_threshold": 0.9}).iloc[0].passes
    r = L.closed_book_retention(s, ["closed_book"]).iloc[0]
    assert r.retention == pytest.approx(0.8) and r.model == "m"
    assert L.information_preservation(s, ["other"], {}).empty  # no closed-book retriever in the grid


def test_recall_by_turn():
    turns = pd.DataFrame({"dataset": "d", "retriever": "bm25", "condition": "SHARDED", "policy": "history",
                          "conv_id": ["c1", "c1", "c2", "c2"], "turn": [1, 2, 1, 2],
                          "recall@5": [0.5, 0.0, 0.0, 1.0], "cum_recall": [0.5, 0.5, 0.0, 1.0]})
    r = L.recall_by_turn(turns).set_index("turn")
    assert r.loc[1, "recall@5"] == 0.25 and r.loc[2, "recall@5"] == 0.5
    assert r.loc[1, "cum_recall"] == 0.25 and r.loc[2, "cum_recall"] == 0.75


def test_recall_by_turn_carries_ended_conversations():
    # c1 ends at turn 1 with cumulative recall 1.0; c2 goes on to 0.0 then 0.5. Over the ones
    # reaching a turn, the mean would fall 0.5 -> 0.0; over both, c1 carried: 0.5, 0.5, 0.75.
    turns = pd.DataFrame({"dataset": "d", "retriever": "bm25", "condition": "SHARDED", "policy": "history",
                          "conv_id": ["c1", "c2", "c2", "c2"], "turn": [1, 1, 2, 3],
                          "recall@5": [1.0, 0.0, 0.0, 0.5], "cum_recall": [1.0, 0.0, 0.0, 0.5]})
    r = L.recall_by_turn(turns).set_index("turn")
    assert r["n"].tolist() == [2, 1, 1] and r["n_all"].tolist() == [2, 2, 2]
    assert r["recall@5"].tolist() == [0.5, 0.0, 0.5]
    assert r["cum_recall"].tolist() == [0.5, 0.5, 0.75]
    assert r["cum_recall"].is_monotonic_increasing


def test_retrieval_cost_per_retrieval_and_per_conversation():
    # PoG: two conversations of 2 and 1 turns with 6, 4 and 5 calls; ToG-2: one of 2 turns, 4 + 4 calls
    turns = pd.DataFrame({
        "dataset": "d", "model": "m", "condition": "SHARDED", "policy": "history",
        "retriever": ["pog", "pog", "pog", "tog2", "tog2", "bm25"],
        "conv_id": ["p1", "p1", "p2", "t1", "t1", "b1"], "turn": [1, 2, 1, 1, 2, 1],
        "retrieval_llm_calls": [6, 4, 5, 4, 4, 0], "retrieval_prompt_tokens": [600, 400, 500, 300, 300, 0],
        "retrieval_completion_tokens": [60, 40, 50, 30, 30, 0], "retrieval_parse_failures": [1, 0, 0, 0, 0, 0]})
    out = L.retrieval_cost(turns, ["pog", "tog2"])
    t = out[out.dataset == "d"].set_index("retriever")
    assert set(t.index) == {"pog", "tog2"}
    # the pooled rows (dataset, model, policy = all; the paper's §B.2): here the same one cell each
    pooled = out[(out.dataset == "all") & (out.condition == "SHARDED")].set_index("retriever")
    assert pooled.loc["pog", "llm_calls_per_conversation"] == pytest.approx(7.5) and pooled.loc["pog", "policy"] == "all"
    # PoG's tokens per conversation against ToG-2's (§B.2): (1100 + 550) / 2 = 825 against 330 + 330 = 660
    every = out[(out.dataset == "all") & (out.condition == "all")].set_index("retriever")
    assert every.loc["pog", "tokens_vs_tog2"] == pytest.approx(825 / 660) and every.loc["tog2", "tokens_vs_tog2"] == 1.0
    assert t.loc["pog", "retrievals"] == 3 and t.loc["pog", "conversations"] == 2
    assert t.loc["pog", "llm_calls_per_retrieval"] == pytest.approx(5.0)  # (6 + 4 + 5) / 3
    assert t.loc["pog", "llm_calls_per_conversation"] == pytest.approx(7.5)  # (10 + 5) / 2
    assert t.loc["pog", "tokens_per_conversation"] == pytest.approx((1100 + 550) / 2)
    assert t.loc["tog2", "llm_calls_per_conversation"] == pytest.approx(8.0) and t.loc["pog", "parse_failures"] == 1
    assert L.retrieval_cost(turns, []).empty


def _two_retrievers(vals_bm25: dict, vals_closed: dict) -> pd.DataFrame:
    return pd.concat([_scores(vals_bm25, retriever="bm25"), _scores(vals_closed, retriever="closed_book")],
                     ignore_index=True)


def test_recovery_per_policy_pools_models_figures_5_and_6():
    v = {("q1", "FULL", "none"): [0.8], ("q1", "SHARDED", "current"): [0.4], ("q1", "RECAP", "current"): [0.7],
         ("q1", "SHARDED", "history"): [0.6], ("q1", "RECAP", "history"): [0.7], ("q1", "SNOWBALL", "history"): [0.8]}
    s = pd.concat([_scores(v), _scores(v).assign(model="m2")], ignore_index=True)
    f5 = L.recovery_for(s, BOOT, "current", ("RECAP",))
    # a single-dataset run keeps the row over all datasets its caption and the published map name
    assert list(f5.dataset) == ["d", "all"] and f5.recovery.iloc[1] == pytest.approx(f5.recovery.iloc[0])
    # CURRENT: (0.7 - 0.4) / (0.8 - 0.4) = 0.75 for both models; one question: the interval is that value
    r = f5.iloc[0]
    assert (r.dataset, r.retriever, r.policy, r.condition, r.models, r.pairs, r.questions) == \
        ("d", "bm25", "current", "RECAP", 2, 2, 1)
    assert r.recovery == pytest.approx(0.75) and r.ci_low == pytest.approx(0.75) and r.ci_high == pytest.approx(0.75)
    f6 = L.recovery_for(s, BOOT, "history", ("RECAP", "SNOWBALL")).query("dataset == 'd'").set_index("condition")
    # HISTORY: RECAP (0.7 - 0.6) / 0.2 = 0.5; SNOWBALL (0.8 - 0.6) / 0.2 = 1.0
    assert f6.loc["RECAP", "recovery"] == pytest.approx(0.5) and f6.loc["SNOWBALL", "recovery"] == pytest.approx(1.0)
    # the pooled LLMs (lic_rag.analysis.pooled_models): m alone, one pair
    assert L.recovery_for(s, BOOT, "current", ("RECAP",), models=["m"]).pairs.tolist() == [1, 1]


def test_recovery_is_pooled_over_llms_not_a_mean_of_ratios():
    # model m: FULL .8, SHARDED .4, RECAP .7 (ratio .75); model m2: FULL .6, SHARDED .5, RECAP .6 (ratio 1.0)
    # pooled: (mean RECAP .65 - mean SHARDED .45) / (mean FULL .7 - .45) = .2 / .25 = .8 (the mean of ratios: .875)
    m = _scores({("q1", "FULL", "none"): [0.8], ("q1", "SHARDED", "current"): [0.4], ("q1", "RECAP", "current"): [0.7]})
    m2 = _scores({("q1", "FULL", "none"): [0.6], ("q1", "SHARDED", "current"): [0.5], ("q1", "RECAP", "current"): [0.6]})
    r = L.recovery_for(pd.concat([m, m2.assign(model="m2")], ignore_index=True), BOOT, "current", ("RECAP",)).iloc[0]
    assert r.recovery == pytest.approx(0.8) and r.gap == pytest.approx(0.25) and r.models == 2
    # the interval resamples questions: q2 has no gap in m and a gap of .5 in m2 that RECAP fully wins back
    q2 = {("q2", "FULL", "none"): [0.5], ("q2", "SHARDED", "current"): [0.5], ("q2", "RECAP", "current"): [0.5]}
    q2b = {("q2", "FULL", "none"): [1.0], ("q2", "SHARDED", "current"): [0.5], ("q2", "RECAP", "current"): [1.0]}
    s = pd.concat([m, m2.assign(model="m2"), _scores(q2), _scores(q2b).assign(model="m2")], ignore_index=True)
    r = L.recovery_for(s, {"n_resamples": 400, "seed": 1}, "current", ("RECAP",)).iloc[0]
    # pooled over 4 pairs: FULL (.8+.6+.5+1)/4 = .725, SHARDED .475, RECAP (.7+.6+.5+1)/4 = .7 -> .225 / .25 = .9
    assert r.recovery == pytest.approx(0.9) and r.questions == 2 and r.pairs == 4
    # resampling questions: {q1, q1} gives .8, {q2, q2} gives 1.0 (gap .25, won back .25): the interval spans both
    assert r.ci_low == pytest.approx(0.8) and r.ci_high == pytest.approx(1.0)
    # a cell without a positive gap keeps its row, NaN, and says why
    flat = _scores({("q1", "FULL", "none"): [0.5], ("q1", "SHARDED", "current"): [0.5], ("q1", "RECAP", "current"): [0.7]})
    r = L.recovery_for(flat, BOOT, "current", ("RECAP",)).iloc[0]
    assert np.isnan(r.recovery) and "no positive" in r.note


def test_full_vs_sharded_of_pog_figure_7():
    v = {("q1", "FULL", "none"): [1.0], ("q1", "SHARDED", "history"): [0.5], ("q1", "SHARDED", "current"): [0.25],
         ("q2", "FULL", "none"): [0.5], ("q2", "SHARDED", "history"): [0.5], ("q2", "SHARDED", "current"): [0.0]}
    s = pd.concat([_scores(v, retriever="pog"), _scores(v, retriever="bm25")], ignore_index=True)
    f7 = L.full_vs_sharded_of(s, ["pog"], BOOT)
    every = f7[f7.dataset == "all"].set_index("policy")  # kept on a single-dataset run
    f7 = f7[f7.dataset == "d"].set_index("policy")
    assert every.loc["current", "gap"] == pytest.approx(0.625) and every.loc["history", "f1_full"] == pytest.approx(0.75)
    assert set(f7.retriever) == {"pog"} and f7.loc["history", "models"] == 1
    # FULL 0.75; SHARDED history 0.5, current 0.125; relative gap (0.75 - 0.5) / 0.75
    assert f7.loc["history", "f1_full"] == pytest.approx(0.75) and f7.loc["history", "f1_sharded"] == pytest.approx(0.5)
    assert f7.loc["current", "gap"] == pytest.approx(0.625)
    assert f7.loc["history", "rel_gap"] == pytest.approx(1 / 3)
    assert L.full_vs_sharded_of(s, [], BOOT).empty


def test_ceiling_and_floor_with_and_without_retrieval_figure_8():
    runs = [0.6, 1.0, 0.2, 0.8, 0.4]  # P90 0.92, P10 0.28
    s = _two_retrievers({("q1", "FULL", "none"): [1.0] * 5, ("q1", "SHARDED", "history"): runs,
                         ("q1", "SHARDED", "current"): [0.0] * 5},  # §B.3 is HISTORY only: CURRENT is left out
                        {("q1", "FULL", "none"): runs, ("q1", "SHARDED", "none"): [0.0] * 5})
    f8 = L.ceiling_and_floor(s, BOOT, {}, ["closed_book"])
    assert set(f8.dataset) == {"d", "all"}  # the rows over all datasets, on a single-dataset run too
    f8 = f8[f8.dataset == "d"].set_index(["retrieval", "condition"])
    assert f8.loc[("with retrieval", "SHARDED"), "cells"] == 1 and f8.loc[("with retrieval", "SHARDED"), "policy"] == "history"
    assert f8.loc[("with retrieval", "FULL"), "ceiling"] == pytest.approx(1.0)
    assert f8.loc[("with retrieval", "SHARDED"), "ceiling"] == pytest.approx(0.92)
    assert f8.loc[("with retrieval", "SHARDED"), "floor"] == pytest.approx(0.28)
    assert f8.loc[("closed book", "FULL"), "floor"] == pytest.approx(0.28)
    assert f8.loc[("closed book", "SHARDED"), "ceiling"] == 0.0
    # the falls FULL -> SHARDED (§B.3): ceiling 1.0 - 0.92, floor 1.0 - 0.28; closed book 0.92 - 0, 0.28 - 0
    assert f8.loc[("with retrieval", "SHARDED"), "ceiling_fall"] == pytest.approx(0.08)
    assert f8.loc[("with retrieval", "SHARDED"), "floor_fall"] == pytest.approx(0.72)
    assert f8.loc[("closed book", "SHARDED"), "floor_fall"] == pytest.approx(0.28)
    assert f8.loc[("with retrieval", "SHARDED"), "floor_fall_ci_low"] == pytest.approx(0.72)  # one question


def test_coverage_decline_by_model_figure_9():
    vals = {("q1", "FULL", "none"): [1.0], ("q1", "SHARDED", "history"): [0.25]}
    # BEST F1 (the best turn; §B.4 and Figure 9) differs from the final answer's F1 in SHARDED: 0.5
    cov = {("q1", "FULL", "none", 0): (1.0, 1.0), ("q1", "SHARDED", "history", 0): (1.0, 0.5)}
    s = _scores(vals, {k: {"final_cum_recall": c, "best_f1": b} for k, (c, b) in cov.items()})
    s = pd.concat([s, s.assign(model="m2", best_f1=1.0)], ignore_index=True)
    f9 = L.coverage_decline_by_model(s, BOOT).set_index("model")
    assert f9.loc["m", "gap_covered"] == pytest.approx(0.5) and f9.loc["m2", "gap_covered"] == pytest.approx(0.0)
    assert f9.loc["m", "covered_pairs"] == 1 and f9.loc["m", "metric"] == "best_f1"
    # on the final answer's F1 the decline would be 0.75
    assert L.coverage_decline_by_model(s, BOOT, metric="final_f1").set_index("model").loc["m", "gap_covered"] == \
        pytest.approx(0.75)


def test_table9_pools_cells_per_dataset_on_best_f1():
    # two retrievers x two questions x one run; BEST F1 differs from final F1
    rows = []
    for ret, q, cond, best, final, cov in [
        ("bm25", "q1", "FULL", 1.0, 1.0, 1.0), ("bm25", "q1", "SHARDED", 0.5, 0.0, 1.0),   # covered: gap 0.5
        ("bm25", "q2", "FULL", 1.0, 1.0, 0.5), ("bm25", "q2", "SHARDED", 0.0, 0.0, 1.0),   # FULL missed a passage
        ("dense", "q1", "FULL", 0.8, 0.8, 1.0), ("dense", "q1", "SHARDED", 0.8, 0.2, 1.0),  # covered: gap 0
        ("dense", "q2", "FULL", 1.0, 1.0, 1.0), ("dense", "q2", "SHARDED", 0.25, 0.25, 1.0),  # covered: gap 0.75
    ]:
        rows.append(dict(dataset="d", model="m", retriever=ret, condition=cond,
                         policy="none" if cond == "FULL" else "history", qid=q, run=0, best_f1=best,
                         final_f1=final, final_cum_recall=cov))
    t9 = L.complete_coverage_by_dataset(pd.DataFrame(rows), BOOT).set_index("dataset")
    r = t9.loc["d"]
    assert r.pairs == 4 and r.covered_pairs == 3 and r.covered_share == pytest.approx(0.75) and r.questions == 2
    # BEST F1 on the covered pairs: FULL (1 + 0.8 + 1) / 3, SHARDED (0.5 + 0.8 + 0.25) / 3; gap (0.5 + 0 + 0.75) / 3
    assert r.f1_full == pytest.approx(2.8 / 3) and r.f1_sharded == pytest.approx(1.55 / 3)
    assert r.gap == pytest.approx(1.25 / 3) and r.metric == "best_f1"
    # resampling questions: q1 contributes gaps {0.5, 0}, q2 {0.75}; every resample's gap lies in [0.25, 0.75]
    assert 0.25 - 1e-9 <= r.ci_low <= r.gap <= r.ci_high <= 0.75 + 1e-9 and bool(r.significant)
    assert t9.loc["all", "covered_pairs"] == 3  # one dataset: "all" equals it
    assert L.complete_coverage_by_dataset(pd.DataFrame(rows).drop(columns="final_cum_recall"), BOOT).empty


def test_paper_level_means_pool_datasets_and_llms_with_question_intervals():
    """The paper reports means over its LLMs and datasets: delivery_conditions and Table 8 get
    dataset = all rows (and Table 8 model = all / per model, retriever = all: every retriever
    that retrieves), computed from the per-question values, not from the cells' means."""
    def frame(ds, model, vals, retriever="bm25"):
        return _scores(vals, retriever=retriever).assign(dataset=ds, model=model)

    s = pd.concat([
        frame("d1", "m", {("q1", "FULL", "none"): [1.0, 0.0], ("q1", "SHARDED", "history"): [0.5, 0.5]}),
        frame("d2", "m", {("q1", "FULL", "none"): [0.5, 0.5], ("q2", "FULL", "none"): [1.0, 1.0],
                          ("q1", "SHARDED", "history"): [0.0, 0.0]}),
        frame("d2", "m2", {("q1", "FULL", "none"): [0.0, 0.0]}),
        frame("d1", "m", {("q1", "FULL", "none"): [0.2, 0.2]}, retriever="closed_book"),
    ], ignore_index=True)
    d = L.delivery_summary(s[s.retriever == "bm25"], 200, 0).set_index(["dataset", "condition"])
    # FULL per question (mean over LLMs and runs): d1/q1 .5; d2/q1 (.5 + 0) / 2 = .25; d2/q2 1 -> mean 7/12
    assert d.loc[("all", "FULL"), "mean_f1"] == pytest.approx(7 / 12) and d.loc[("all", "FULL"), "n"] == 3
    assert d.loc[("d2", "FULL"), "mean_f1"] == pytest.approx(0.625)
    t8 = L.aptitude_unreliability(s, BOOT, {}, ["closed_book"])
    pooled = t8[(t8.dataset == "all") & (t8.retriever == "all")].set_index(["model", "condition"])
    # unreliability (P90 - P10 over runs) per (LLM, question) with retrieval: m d1/q1 FULL [1, 0] -> .8,
    # m d2/q1 0, m d2/q2 0, m2 d2/q1 0 -> mean over the four .2; closed book is left out
    assert pooled.loc[("all", "FULL"), "unreliability"] == pytest.approx(0.2)
    assert pooled.loc[("m", "FULL"), "unreliability"] == pytest.approx(0.8 / 3)
    assert pooled.loc[("all", "FULL"), "n_questions"] == 3  # d1/q1, d2/q1, d2/q2
    lo, hi = pooled.loc[("all", "FULL"), ["unreliability_ci_low", "unreliability_ci_high"]]
    assert 0.0 <= lo <= 0.2 <= hi <= 0.8 + 1e-9  # all-d1/q1 resamples give .8
    assert pooled.loc[("all", "SHARDED"), "policy"] == "history" and pooled.loc[("all", "SHARDED"), "unreliability"] == 0
    # the changes FULL -> SHARDED (HISTORY) over the units that have both: m d1/q1 (runs [1, 0]: P90 .9, P10 .1;
    # SHARDED [.5, .5]) and m d2/q1 ([.5, .5] -> [0, 0]): rise (-.8 + 0) / 2 = -.4; aptitude (-.4 - .5) / 2 = -.45
    sh = pooled.loc[("all", "SHARDED")]
    assert sh.unreliability_rise == pytest.approx(-0.4) and sh.aptitude_change == pytest.approx(-0.45)
    assert sh.unreliability_relative_rise == pytest.approx(-1.0)  # mean 0 against mean .4
    # the per-cell rows stay as they were
    cell = t8[(t8.dataset == "d1") & (t8.retriever == "bm25") & (t8.condition == "FULL")].iloc[0]
    assert cell.unreliability == pytest.approx(0.8)


def test_table2_pools_the_papers_gaps():
    """§5.1/§5.2 give FULL-SHARDED gaps pooled over LLMs, datasets and retrievers: per retriever,
    per LLM over the retrievers that retrieve, and over all of them."""
    def frame(model, ret, full, sh):
        return _scores({("q1", "FULL", "none"): [full], ("q1", "SHARDED", "history" if ret != "closed_book" else "none"): [sh]},
                       retriever=ret).assign(model=model)

    s = pd.concat([frame("m", "bm25", 0.8, 0.4), frame("m2", "bm25", 0.6, 0.6), frame("m", "dense", 1.0, 0.5),
                   frame("m", "closed_book", 0.3, 0.2)], ignore_index=True)
    t = L.table2(s, 200, 0, closed_retrievers=["closed_book"])
    pooled = t[t.dataset == "all"].set_index(["model", "retriever", "policy"])
    # over every retrieving (LLM, retriever) pair: gaps .4, 0, .5 -> mean .3; FULL mean .8, SHARDED .5
    r = pooled.loc[("all", "all", "history")]
    assert r.gap == pytest.approx(0.3) and r.f1_full == pytest.approx(0.8) and r.rel_gap == pytest.approx(0.375)
    assert pooled.loc[("all", "bm25", "history"), "gap"] == pytest.approx(0.2)
    assert pooled.loc[("m", "all", "history"), "gap"] == pytest.approx(0.45)  # bm25 .4, dense .5
    assert pooled.loc[("all", "closed_book", "none"), "rel_gap"] == pytest.approx(1 / 3)
    assert ("m", "closed_book", "none") not in pooled.index  # per-LLM rows pool retrieving retrievers only
    assert len(t[t.dataset != "all"]) == 4  # the per-cell rows stay


# ---- §A.2 shard-wording variability ----------------------------------------------------------


def test_distinct_wordings_by_hand():
    a = ["I need a city.", "The album is Cold Rivers."]
    same = ["i need a CITY", "  The album is   Cold Rivers!"]  # case, punctuation, whitespace only
    other = ["I need a town.", "The album is Cold Rivers."]
    longer = ["I need a city.", "It is an album.", "The album is Cold Rivers."]
    assert L.normalise_wording("  The album, is   'Cold Rivers'! ") == "the album is cold rivers"
    assert L.distinct_wordings([a, same]) == 1
    assert L.distinct_wordings([a, same, other]) == 2
    assert L.distinct_wordings([a, other, longer, longer, []]) == 4  # an empty set counts as one wording
    assert L.distinct_wordings([a[::-1], a]) == 2  # shard order counts
    assert L.distinct_wordings([]) == 0


def test_shard_wording_table_per_question_and_pooled():
    a, b, c = ["goal", "clue one"], ["Goal.", "Clue one"], ["goal", "clue two", "clue three"]
    var = [{"questions": [{"qid": "x1", "dataset": "d1", "samples": [
                {"shards": a, "passed": True}, {"shards": b, "passed": True}, {"shards": c, "passed": False},
                {"shards": c, "passed": False}]}]},
           {"questions": [{"qid": "y1", "dataset": "d2", "samples": [
                {"shards": a, "passed": True}, {"shards": c, "passed": True}]}]}]
    df = L.shard_wording(var, BOOT).set_index("qid")
    assert df.loc["x1"].samples == 4 and df.loc["x1"].distinct_wordings == 2  # a == b after normalising
    assert df.loc["x1"].distinct_shard_counts == 2 and df.loc["x1"].pass_share == 0.5
    assert df.loc["y1"].distinct_wordings == 2 and df.loc["y1"].pass_share == 1.0
    pooled = df.loc["all"]
    assert pooled.dataset == "all" and pooled.questions == 2 and pooled.samples == 3
    assert pooled.distinct_wordings == 2 and pooled.ci_low == 2 and pooled.ci_high == 2
    assert pooled.pass_share == pytest.approx(4 / 6)  # 2 of 4 plus 2 of 2 samples pass
    assert L.shard_wording([], BOOT).empty


def test_retention_of_the_largest_model_per_family():
    """§5.1: closed-book CONCAT/FULL over the largest LLM of each family, a ratio of means over
    their (LLM, dataset, question) pairs. big-a: FULL .5/.5, CONCAT .5/.3; big-b: FULL 1/0,
    CONCAT .8/0 -> (.5+.3+.8+0)/(.5+.5+1+0) = 1.6/2.0 = 0.8; small-a (not largest) is left out."""
    def model(m, full, concat):
        s = _scores({("q1", "FULL", "none"): [full[0]], ("q1", "CONCAT", "none"): [concat[0]],
                     ("q2", "FULL", "none"): [full[1]], ("q2", "CONCAT", "none"): [concat[1]]}, retriever="closed_book")
        return s.assign(model=m)

    s = pd.concat([model("big-a", (0.5, 0.5), (0.5, 0.3)), model("big-b", (1.0, 0.0), (0.8, 0.0)),
                   model("small-a", (1.0, 1.0), (0.0, 0.0))], ignore_index=True)
    t = L.closed_book_retention(s, ["closed_book"], {"a": "big-a", "b": "big-b", "c": "absent"})
    row = t[t.model == "largest_per_family"].iloc[0]
    assert row.retention == pytest.approx(0.8) and row.models == "big-a, big-b" and row.n_questions == 2
    assert row.retention_ci_low <= 0.8 <= row.retention_ci_high
    assert "largest_per_family" not in set(L.closed_book_retention(s, ["closed_book"]).model)


def test_largest_per_family_from_the_registry(tmp_path):
    from convrag.studies.lic_rag.wiring import largest_per_family

    reg = tmp_path / "models.yaml"
    reg.write_text(
        "qwen3-8b: {backend: transformers, weights: {hf_repo: o/a}, params_b: 8.2}\n"
        "qwen3.6-27b: {backend: transformers, weights: {hf_repo: o/b}, params_b: 27.0}\n"
        "gemma-x: {backend: transformers, weights: {hf_repo: o/c}, params_b: 12.0, family: gemma}\n"
        "gemma-api: {backend: openai, api_model: g, base_url: 'http://x', api_key_env: K, family: gemma}\n"
        "luna-5.6: {backend: openai, api_model: l, base_url: 'http://x', api_key_env: K}\n")
    config = {"models_registry": str(reg),
              "lic_rag": {"models": ["qwen3-8b", "qwen3.6-27b", "gemma-x", "gemma-api", "luna-5.6"]}}
    # qwen: the 27B; gemma: one size unknown -> no largest; luna: its only model
    assert largest_per_family(config) == {"qwen": "qwen3.6-27b", "luna": "luna-5.6"}


def test_grid_size_counts_as_the_paper_does():
    """2 questions x 2 runs; bm25 FULL (policy none) + SHARDED history and current, pog FULL:
    every conversation = 2*2*(1+2) + 2*2*1 = 16; as the paper counts (policies once, PoG out):
    2 questions x 1 LLM x 1 setting x 2 conditions x 2 runs = 8."""
    s = pd.concat([_scores({("q1", "FULL", "none"): [1, 1], ("q1", "SHARDED", "history"): [1, 1],
                            ("q1", "SHARDED", "current"): [1, 1], ("q2", "FULL", "none"): [1, 1],
                            ("q2", "SHARDED", "history"): [1, 1], ("q2", "SHARDED", "current"): [1, 1]}),
                   _scores({("q1", "FULL", "none"): [1, 1], ("q2", "FULL", "none"): [1, 1]}, retriever="pog")])
    g = L.grid_size(s, ["pog"]).set_index("dataset")
    assert list(g.index) == ["d", "all"]
    r = g.loc["all"]
    assert (r.questions, r.llms, r.retrieval_settings, r.conditions, r.runs) == (2, 1, 1, 2, 2)
    assert (r.conversations, r.conversations_as_paper) == (16, 8)
    assert L.grid_size(s).loc[1, "conversations_as_paper"] == 12  # PoG counted when not the appendix's
