"""mtrag_un judge-human correlation (``convrag.studies.mtrag_un.human``): the weighted Spearman on
hand-computed examples and against scipy, the rows of MTRAG's human-evaluation sample checked
against the raw JSON, the correlation table against independent computations, and bad input."""

import json
import math
from functools import reduce

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from convrag.data.mtrag import load_human_evaluations
from convrag.studies.mtrag_un import human as H

SAMPLE = ("mtrag", "evaluations", "reference_subset_with_human_evaluations.sample.json")


@pytest.fixture
def sample(shared_data):
    path = shared_data.joinpath(*SAMPLE)
    raw = json.loads(path.read_text())
    return raw, H.human_rows(load_human_evaluations(path))


def _replicated_spearman(x, y, w):
    """Spearman of the data with row i repeated w[i] (integer) times: independent of the module's ranks."""
    w = np.asarray(w, dtype=int)
    return stats.spearmanr(np.repeat(x, w), np.repeat(y, w)).statistic


# ---- weighted_spearman ---------------------------------------------------------------------


def test_hand_computed_weighted_example():
    # Row 1 weighs 2: the sample is x = 1 1 2 3, y = 1 1 3 2; ranks 1.5 1.5 3 4 and 1.5 1.5 4 3,
    # mean 2.5, deviations -1 -1 .5 1.5 and -1 -1 1.5 .5: cov 3.5 / var 4.5 = 7/9.
    assert H.weighted_spearman([1, 2, 3], [1, 3, 2], [2, 1, 1]) == pytest.approx(7 / 9)
    # unweighted: 1 - 6 * (0 + 1 + 1) / (3 * 8) = 0.5
    assert H.weighted_spearman([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    assert H.weighted_spearman([1, 2, 3], [1, 3, 2], [1, 1, 1]) == pytest.approx(0.5)
    # the weights' scale does not matter, and a zero weight is a dropped row
    assert H.weighted_spearman([1, 2, 3], [1, 3, 2], [0.2, 0.1, 0.1]) == pytest.approx(7 / 9)
    assert H.weighted_spearman([1, 2, 3, 9], [1, 3, 2, -5], [2, 1, 1, 0]) == pytest.approx(7 / 9)


def test_equal_weights_is_scipy_spearman_with_ties():
    rng = np.random.default_rng(3)
    for _ in range(20):
        x = rng.integers(0, 5, 25).astype(float)  # many ties
        y = x + rng.integers(-2, 3, 25)
        assert H.weighted_spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic)
        assert H.weighted_spearman(x, y, np.full(25, 0.3)) == pytest.approx(stats.spearmanr(x, y).statistic)


def test_integer_weights_equal_replicated_rows():
    rng = np.random.default_rng(7)
    for _ in range(20):
        x = rng.integers(0, 6, 15).astype(float)
        y = rng.normal(size=15).round(1) + 0.3 * x
        w = rng.integers(1, 5, 15)
        assert H.weighted_spearman(x, y, w) == pytest.approx(_replicated_spearman(x, y, w))


def test_nan_rows_dropped_and_degenerate_cases():
    x, y = [1, 2, np.nan, 3, 4], [2, 1, 5, 4, np.nan]
    assert H.weighted_spearman(x, y) == pytest.approx(stats.spearmanr([1, 2, 3], [2, 1, 4]).statistic)
    assert math.isnan(H.weighted_spearman([1, 2, 3], [3, 2, 1], [1, np.nan, 1]))  # 2 rows left
    assert math.isnan(H.weighted_spearman([1, 2], [1, 2]))
    assert math.isnan(H.weighted_spearman([1, 1, 1, 1], [1, 2, 3, 4]))
    assert math.isnan(H.weighted_spearman([1, 2, 3, 4], [5, 5, 5, 5]))
    assert math.isnan(H.weighted_spearman([1, 2, 3, 4], [1, 2, 3, 4], [0, 0, 1, 1]))


def test_bad_weights_and_lengths_raise():
    with pytest.raises(ValueError, match="weights must be finite and >= 0"):
        H.weighted_spearman([1, 2, 3], [1, 2, 3], [1, -1, 1])
    with pytest.raises(ValueError, match="weights must be finite"):
        H.weighted_spearman([1, 2, 3], [1, 2, 3], [1, np.inf, 1])
    with pytest.raises(ValueError, match="one value per row"):
        H.weighted_spearman([1, 2, 3], [1, 2], [1, 1, 1])


def test_balanced_weights_by_hand():
    w = H.balanced_weights([4, 4, 4, 2, np.nan, 3.0000000001, 3])
    assert w[:4] == pytest.approx([1 / 3, 1 / 3, 1 / 3, 1])
    assert math.isnan(w[4]) and w[5:] == pytest.approx([0.5, 0.5])


# ---- human_rows on the shared sample ------------------------------------------------------


def test_rows_match_the_raw_file(sample):
    raw, rows = sample
    assert len(rows) == len(raw["evaluations"]) == 36
    assert not rows.duplicated(["task_id", "system"]).any()
    assert set(rows.system) == {m["model_id"] for m in raw["models"]}
    # one row by hand: the reference response of the first task (annotators 4/3/4 faithfulness, 50/50/100 win rate)
    r = rows[(rows.task_id == "1c041ce47a81941c26899fdf08bde961<::>1") & (rows.system == "reference")].iloc[0]
    assert r.human_faithfulness == pytest.approx(11 / 3) and r.median_faithfulness == 4 and r.n_faithfulness == 3
    assert r.human_win_rate == pytest.approx(200 / 3) and r.median_win_rate == 50
    assert r.human_appropriateness == r.human_completeness == r.human_naturalness == 4
    assert r.official_RougeL == 1.0 and r.official_rb_agg == pytest.approx(0.9579022479722727)
    assert r.official_rl_f == pytest.approx(0.9333333333333332) and r.official_conditional_idk == 1
    assert r.answerability == "ANSWERABLE" and r.domain == "cloud" and r.turn == 1
    question = "I cannot get select query to work, what steps should I take?"
    assert r.conversation_turns == [{"speaker": "user", "text": question}]
    # every row against the raw JSON, computed here independently
    docs = {d["document_id"]: d["text"] for d in raw["documents"]}
    tasks = {t["task_id"]: t for t in raw["tasks"]}
    by_key = rows.set_index(["task_id", "system"])
    for ev in raw["evaluations"]:
        r = by_key.loc[(ev["task_id"], ev["model_id"])]
        a = ev["annotations"]
        for name, col in (("faithfulness", "faithfulness"), ("appropriateness", "appropriateness"),
                          ("completeness", "completeness"), ("naturalness", "naturalness"),
                          ("win-rate", "win_rate")):
            vals = [float(v["value"]) for v in a[name].values()]
            assert r[f"human_{col}"] == pytest.approx(sum(vals) / len(vals)) and r[f"n_{col}"] == len(vals)
        for name, col in (("RougeL", "RougeL"), ("Bert-Rec", "Bert_Rec"), ("Bert-KPrec", "Bert_KPrec"),
                          ("rb_agg", "rb_agg"), ("rb_llm", "rb_llm"), ("rl_f", "rl_f"),
                          ("conditional_idk", "conditional_idk")):
            assert r[f"official_{col}"] == pytest.approx(next(iter(a[name].values()))["value"])
        t = tasks[ev["task_id"]]
        assert r.response == ev["model_response"] and r.answerability == t["Answerability"][0]
        assert r.targets == [x["text"] for x in t["targets"]]
        assert r.contexts == [docs[c["document_id"]] for c in t["contexts"]]
        assert r.conversation_turns == [{"speaker": m["speaker"], "text": m["text"]} for m in t["input"]]
        assert r.conversation_turns[-1]["speaker"] == "user"
    assert sorted(rows.n_completeness.unique()) == [2, 3]  # one response has two completeness judgments


# ---- correlation_table ---------------------------------------------------------------------


def test_official_vs_human_correlation_matches_independent_computation(sample):
    raw, rows = sample
    x = [next(iter(e["annotations"]["rl_f"].values()))["value"] for e in raw["evaluations"]]
    y = [np.mean([float(v["value"]) for v in e["annotations"]["faithfulness"].values()]) for e in raw["evaluations"]]
    t = H.correlation_table(rows, ["official_rl_f"], ["human_faithfulness"], weights="equal", n_resamples=0)
    assert len(t) == 1 and t.rows[0] == 36 and t.tasks[0] == 12
    assert t.rho[0] == pytest.approx(stats.spearmanr(x, y).statistic) == pytest.approx(t.spearman[0])
    assert math.isnan(t.ci_low[0]) and t.n_resamples_used[0] == 0
    # balanced: weight 1 / frequency of the human value == integer weights lcm / frequency, replicated
    y_r = np.round(y, 9)
    counts = {v: int((y_r == v).sum()) for v in set(y_r)}
    lcm = reduce(math.lcm, counts.values())
    w = [lcm // counts[v] for v in y_r]
    tb = H.correlation_table(rows, ["official_rl_f"], ["human_faithfulness"], n_resamples=0)
    assert tb.weighting[0] == "balanced"
    assert tb.rho[0] == pytest.approx(_replicated_spearman(x, y, w))
    assert tb.rho[0] != pytest.approx(t.rho[0])


def test_table_layout_bootstrap_and_weightings(sample):
    _, rows = sample
    metrics, humans = ["official_rb_agg", "official_rl_f"], ["human_faithfulness", "human_win_rate"]
    t = H.correlation_table(rows, metrics, humans, n_resamples=200, seed=1)
    assert list(zip(t.metric, t.human)) == [(m, h) for m in metrics for h in humans]
    assert (t.rows == 36).all() and (t.tasks == 12).all() and (t.n_resamples_used > 150).all()
    assert (t.ci_low <= t.rho).all() and (t.rho <= t.ci_high).all()
    again = H.correlation_table(rows, metrics, humans, n_resamples=200, seed=1)
    pd.testing.assert_frame_equal(t, again)
    # annotator-count weights: integer weights, so the replicated-rows Spearman
    ta = H.correlation_table(rows, ["official_rb_llm"], ["human_completeness"], weights="annotators", n_resamples=0)
    assert ta.rho[0] == pytest.approx(_replicated_spearman(rows.official_rb_llm, rows.human_completeness,
                                                           rows.n_completeness))
    # a weight column by name
    tw = H.correlation_table(rows.assign(w=2.0), ["official_rb_llm"], ["human_completeness"], weights="w",
                             n_resamples=0)
    assert tw.rho[0] == pytest.approx(tw.spearman[0])


def test_figure5_subset(sample):
    raw, rows = sample
    answerable = {t["task_id"] for t in raw["tasks"] if t["Answerability"][0] in ("ANSWERABLE", "PARTIAL")}
    t = H.figure5_table(rows, n_resamples=50)
    assert list(t.metric.unique()) == ["official_rb_agg", "official_rb_llm", "official_rl_f"]
    assert list(t.human.unique()) == list(H.FIGURE5_HUMAN)
    assert (t.rows == 2 * len(answerable)).all() and (t.tasks == len(answerable)).all()
    sub = H.select_rows(rows, H.PAPER_SYSTEMS, H.ANSWERABLE_SUBSET)
    assert set(sub.system) == set(H.PAPER_SYSTEMS) and set(sub.task_id) == answerable


def test_correlation_on_synthetic_rows_with_nans():
    rows = pd.DataFrame({"task_id": ["a", "a", "b", "b", "c", "c"], "m": [0.1, 0.5, 0.2, np.nan, 0.9, 0.7],
                         "human_f": [1, 3, 2, 4, 4, np.nan], "n_f": [3, 3, 3, 3, 3, 0]})
    t = H.correlation_table(rows, ["m"], ["human_f"], weights="equal", n_resamples=0)
    assert t.rows[0] == 4 and t.tasks[0] == 3
    assert t.rho[0] == pytest.approx(stats.spearmanr([0.1, 0.5, 0.2, 0.9], [1, 3, 2, 4]).statistic)
    t2 = H.correlation_table(rows.iloc[:2], ["m"], ["human_f"], n_resamples=100)
    assert t2.rows[0] == 2 and math.isnan(t2.rho[0]) and math.isnan(t2.ci_low[0])


# ---- malformed input -----------------------------------------------------------------------


def test_malformed_input_is_a_clear_error(sample):
    _, rows = sample
    with pytest.raises(ValueError, match=r"missing columns \['official_nope'\]"):
        H.correlation_table(rows, ["official_nope"], ["human_faithfulness"])
    with pytest.raises(ValueError, match=r"missing columns \['human_fluency'\]"):
        H.correlation_table(rows, ["official_rl_f"], ["human_fluency"])
    with pytest.raises(ValueError, match="missing columns.*task_id"):
        H.correlation_table(rows.drop(columns="task_id"), ["official_rl_f"], ["human_faithfulness"])
    with pytest.raises(ValueError, match="metric column 'response' is not numeric"):
        H.correlation_table(rows, ["response"], ["human_faithfulness"])
    with pytest.raises(ValueError, match="weights must be one of"):
        H.correlation_table(rows, ["official_rl_f"], ["human_faithfulness"], weights="agreement")
    with pytest.raises(ValueError, match="missing columns.*n_x"):
        H.correlation_table(rows.assign(human_x=1.0), ["official_rl_f"], ["human_x"], weights="annotators")
    with pytest.raises(ValueError, match="weights 'w' for 'human_faithfulness' must be finite and >= 0"):
        H.correlation_table(rows.assign(w=-1.0), ["official_rl_f"], ["human_faithfulness"], weights="w")
    with pytest.raises(ValueError, match="at least one metric column"):
        H.correlation_table(rows, [], ["human_faithfulness"])
    with pytest.raises(ValueError, match=r"unknown system \['gpt4o'\]"):
        H.select_rows(rows, systems=["gpt4o"])
    with pytest.raises(ValueError, match=r"unknown answerability \['ANSWERED'\]"):
        H.select_rows(rows, answerability=["ANSWERED"])
    with pytest.raises(ValueError, match="must be a list"):
        H.select_rows(rows, systems="gpt-4o")


def test_column_names():
    assert H.column_name("win-rate") == "win_rate" and H.column_name("Bert-KPrec") == "Bert_KPrec"
    with pytest.raises(ValueError, match="no letters or digits"):
        H.column_name("--")
