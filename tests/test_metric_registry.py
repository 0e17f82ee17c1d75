"""Metric registry: ir_measures retrieval metrics vs hand-computed values, answer metrics by name."""

import math

import pytest

from convrag.errors import ConfigError, DataError
from convrag.metrics.qa import exact_match, f1_score
from convrag.metrics.registry import (
    ANSWER_METRICS,
    answer_metric,
    answer_metric_names,
    check_metric_names,
    mean_retrieval_scores,
    register_answer_metric,
    retrieval_measure,
    retrieval_scores,
)

# Graded qrels: d1 is highly relevant (2), d2 relevant (1), d3 judged non-relevant (0).
QRELS = {
    "q1": {"d1": 2, "d2": 1, "d3": 0},
    "q2": {"d4": 1, "d5": 1},
    "q3": {"d6": 1},  # missing from the run
    "q4": {"d7": 1},  # empty ranking (closed book)
}
RUN = {
    "q1": {"d3": 0.9, "d1": 0.8, "x": 0.7, "d2": 0.6},  # ranks: d3(0) d1(2) x(-) d2(1)
    "q2": {"d4": 0.9, "y": 0.8, "d5": 0.7},  # ranks: d4(1) y(-) d5(1)
    "q4": {},
    "q9": {"d6": 1.0},  # not in qrels: ignored
}
MEASURES = ["R@2", "R@5", "nDCG@3", "nDCG@10", "RR", "AP", "P@2"]

# nDCG: gain = grade, discount 1/log2(rank + 1) (trec_eval ndcg_cut).
# q1 DCG@3  = 0/log2(2) + 2/log2(3) + 0/log2(4)              = 1.26186
#    IDCG@3 = 2/log2(2) + 1/log2(3) + 0/log2(4) = 2 + 0.63093 = 2.63093  -> nDCG@3 = 0.47962
#    DCG@10 adds d2 at rank 4: + 1/log2(5) = 0.43068 -> 1.69254           -> nDCG@10 = 0.64332
# q2 DCG@3  = 1/log2(2) + 0 + 1/log2(4) = 1 + 0.5 = 1.5
#    IDCG@3 = 1/log2(2) + 1/log2(3) = 1.63093                              -> nDCG@3 = 0.91972
Q1_DCG3 = 2 / math.log2(3)
Q1_IDCG = 2 / math.log2(2) + 1 / math.log2(3)
Q2_DCG3 = 1 / math.log2(2) + 1 / math.log2(4)
Q2_IDCG = 1 / math.log2(2) + 1 / math.log2(3)
EXPECTED = {
    # q1: relevant (rel >= 1) = d1, d2 at ranks 2 and 4
    "q1": {"R@2": 1 / 2, "R@5": 1.0, "nDCG@3": Q1_DCG3 / Q1_IDCG,
           "nDCG@10": (Q1_DCG3 + 1 / math.log2(5)) / Q1_IDCG,
           "RR": 1 / 2, "AP": (1 / 2 + 2 / 4) / 2, "P@2": 1 / 2},
    # q2: relevant d4, d5 at ranks 1 and 3
    "q2": {"R@2": 1 / 2, "R@5": 1.0, "nDCG@3": Q2_DCG3 / Q2_IDCG, "nDCG@10": Q2_DCG3 / Q2_IDCG,
           "RR": 1.0, "AP": (1 / 1 + 2 / 3) / 2, "P@2": 1 / 2},
    "q3": dict.fromkeys(MEASURES, 0.0),
    "q4": dict.fromkeys(MEASURES, 0.0),
}


def test_retrieval_scores_hand_computed():
    df = retrieval_scores(RUN, QRELS, MEASURES)
    assert list(df.columns) == ["query_id", *MEASURES]
    assert df["query_id"].tolist() == ["q1", "q2", "q3", "q4"]  # qrels queries only, q9 dropped
    for _, row in df.iterrows():
        assert row[MEASURES].to_dict() == pytest.approx(EXPECTED[row["query_id"]]), row["query_id"]
    assert round(df.loc[0, "nDCG@3"], 4) == 0.4796 and round(df.loc[1, "nDCG@3"], 4) == 0.9197


def test_missing_and_empty_queries_score_zero_in_mean():
    # trec_eval -c: the mean is over all 4 qrels queries, q3/q4 contributing 0.
    means = mean_retrieval_scores(RUN, QRELS, ["R@2", "RR"])
    assert means == pytest.approx({"R@2": (0.5 + 0.5) / 4, "RR": (0.5 + 1.0) / 4})
    assert mean_retrieval_scores({}, QRELS, ["R@5"]) == {"R@5": 0.0}
    with pytest.raises(DataError, match="qrels are empty"):
        retrieval_scores(RUN, {}, ["R@5"])


def test_graded_relevance_rel_parameter():
    # Default rel=1: the rel=2 doc d1 counts once, like a rel=1 doc (R@5 of q1 is 2/2, not 3/3).
    # R(rel=2)@2 counts only d1 (found at rank 2): 1/1; q2 has no doc graded >= 2: 0.
    df = retrieval_scores(RUN, QRELS, ["R@2", "R(rel=2)@2", "R(rel=2)@1", "R@5"])
    assert df["R(rel=2)@2"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert df["R(rel=2)@1"].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert df.loc[0, "R@5"] == 1.0 and df.loc[0, "R@2"] == 0.5


def test_aliases_and_trec_names_keep_given_column_names():
    df = retrieval_scores(RUN, QRELS, ["MRR", "RR", "MAP", "ndcg_cut_3", "RR@10"])
    assert list(df.columns) == ["query_id", "MRR", "RR", "MAP", "ndcg_cut_3", "RR@10"]
    assert df["MRR"].tolist() == df["RR"].tolist() == df["RR@10"].tolist() == [0.5, 1.0, 0.0, 0.0]
    assert df["MAP"].tolist() == pytest.approx([EXPECTED[q]["AP"] for q in sorted(QRELS)])
    assert df["ndcg_cut_3"].tolist() == pytest.approx([EXPECTED[q]["nDCG@3"] for q in sorted(QRELS)])


def test_unknown_retrieval_metrics_raise_config_error():
    with pytest.raises(ConfigError, match=r"'bogus@5'.*examples: R@5"):
        retrieval_scores(RUN, QRELS, ["R@5", "bogus@5"])
    with pytest.raises(ConfigError, match=r"'nDCG@0'.*positive integer"):
        retrieval_measure("nDCG@0")
    with pytest.raises(ConfigError, match=r"'alpha_nDCG@5'"):  # parses, but no installed provider
        retrieval_measure("alpha_nDCG@5")
    with pytest.raises(ConfigError, match="listed twice"):
        retrieval_scores(RUN, QRELS, ["R@5", "R@5"])
    with pytest.raises(ConfigError, match="list of names"):
        retrieval_scores(RUN, QRELS, "R@5")


def test_check_metric_names_names_config_key():
    check_metric_names(["em", "f1", "R@5", "nDCG@10"], "studies.mtrag.metrics")
    check_metric_names(["nDCG@3", "RR"], "studies.coral.retrieval_metrics", kind="retrieval")
    # (the known names are listed sorted; other modules register more, e.g. bleu1, rougeL)
    with pytest.raises(ConfigError, match=r"'studies\.mtrag\.metrics\[2\]'.*'nope'.*answer metrics: .*\bem, f1\b"):
        check_metric_names(["em", "R@5", "nope"], "studies.mtrag.metrics")
    with pytest.raises(ConfigError, match=r"'x\.metrics\[0\]'.*unknown answer metric 'R@5'.*known: .*\bem, f1\b"):
        check_metric_names(["R@5"], "x.metrics", kind="answer")
    with pytest.raises(ConfigError, match=r"'x\.metrics\[0\]'.*'em'"):
        check_metric_names(["em"], "x.metrics", kind="retrieval")
    with pytest.raises(ConfigError, match=r"'x\.metrics\[1\]'.*listed twice"):
        check_metric_names(["em", "em"], "x.metrics")
    with pytest.raises(ConfigError, match="expected a list"):
        check_metric_names("em", "x.metrics")


def test_answer_metrics_match_qa_module():
    cases = [("The Eiffel Tower", ["eiffel tower"]), ("Paris, France", ["Paris", "City of Light"]),
             (None, ["x"]), ("", [""]), ("blue whale shark", ["whale"])]
    names = answer_metric_names()
    assert {"em", "f1"} <= set(names) and names == sorted(names)
    for pred, refs in cases:
        assert answer_metric("em")(pred, refs) == exact_match(pred, refs)
        assert answer_metric("f1")(pred, refs) == f1_score(pred, refs)
    assert answer_metric("f1")("blue whale shark", ["whale"]) == pytest.approx(0.5)  # P 1/3, R 1
    # (other modules register more, e.g. rougeL in convrag.metrics.text, bleu1 in convrag.metrics.citation)
    with pytest.raises(ConfigError, match=r"unknown answer metric 'bleu9' \(known: .*\bem, f1\b"):
        answer_metric("bleu9")


def test_register_answer_metric_from_outside():
    try:
        @register_answer_metric("test_len_ratio")
        def len_ratio(prediction, references):
            return 0.0 if prediction is None else len(prediction) / max(len(r) for r in references)

        assert answer_metric("test_len_ratio")("ab", ["abcd"]) == 0.5
        check_metric_names(["em", "test_len_ratio"], "studies.x.metrics", kind="answer")
        register_answer_metric("test_len_ratio")(len_ratio)  # same function again: fine
        with pytest.raises(ConfigError, match="answer metric 'test_len_ratio' is registered twice"):
            register_answer_metric("test_len_ratio")(lambda p, r: 1.0)
        with pytest.raises(ConfigError, match="answer metric 'em' is registered twice"):
            register_answer_metric("em")(lambda p, r: 1.0)
    finally:
        ANSWER_METRICS.remove("test_len_ratio")
    assert "test_len_ratio" not in answer_metric_names()
    assert ANSWER_METRICS["em"] is exact_match
