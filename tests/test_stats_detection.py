"""'No gold in the top k' as an insufficiency detector (hand-worked metrics, AUROC, bootstraps)
and the Kitagawa decomposition of a refusal-rate difference."""

import math

import numpy as np
import pytest

from convrag.errors import ConfigError, DataError
from convrag.stats.bootstrap import bootstrap_ci
from convrag.stats.decomposition import kitagawa, kitagawa_from_data
from convrag.stats.detection import (
    DETECTOR_METRICS,
    _auroc_ranks,
    auroc,
    detector_metrics,
    detector_report,
    insufficient_from_labels,
    paired_auroc_difference,
    paired_detector_change,
)

# Ten contexts worked by hand. Contexts 0-4 lack gold, 5-9 hold gold.
NO_GOLD = [True] * 5 + [False] * 5
LABELS = ["no", "no", "no", "yes", "partial", "no", "yes", "yes", "partial", "yes"]


def test_ten_contexts_by_hand_partial_sufficient():
    ins = insufficient_from_labels(LABELS)
    assert ins.tolist() == [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]
    m = detector_metrics(NO_GOLD, ins.astype(bool))
    # tp = 3 (0, 1, 2), fp = 2 (3 "yes", 4 "partial": false misses), fn = 1 (5), tn = 4
    assert (m["tp"], m["fp"], m["fn"], m["tn"], m["n"]) == (3, 2, 1, 4, 10)
    assert m["precision"] == pytest.approx(3 / 5)
    assert m["false_miss_share"] == pytest.approx(2 / 5)
    assert m["recall"] == pytest.approx(3 / 4)
    assert m["specificity"] == pytest.approx(4 / 6)
    assert m["youden_j"] == pytest.approx(3 / 4 + 4 / 6 - 1)  # 5/12
    assert m["share_no_gold"] == 0.5 and m["share_insufficient"] == pytest.approx(0.4)
    assert m["ratio"] == pytest.approx(1.25)


def test_ten_contexts_by_hand_partial_insufficient():
    ins = insufficient_from_labels(LABELS, partial_insufficient=True)
    m = detector_metrics(NO_GOLD, ins.astype(bool))
    # "partial" contexts 4 and 8 turn insufficient: tp = 4, fp = 1, fn = 2, tn = 3
    assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (4, 1, 2, 3)
    assert m["precision"] == pytest.approx(0.8) and m["false_miss_share"] == pytest.approx(0.2)
    assert m["youden_j"] == pytest.approx(4 / 6 + 3 / 4 - 1)
    assert m["share_insufficient"] == pytest.approx(0.6)


def test_undefined_metrics_are_nan():
    m = detector_metrics([False, False], [True, False])  # nothing flagged
    assert math.isnan(m["precision"]) and math.isnan(m["false_miss_share"])
    assert m["recall"] == 0.0 and m["specificity"] == 1.0
    assert math.isnan(detector_metrics([True, False], [False, False])["ratio"])


def test_report_points_intervals_and_counts():
    r = detector_report(NO_GOLD, LABELS)
    assert r["precision"]["estimate"] == pytest.approx(0.6)
    assert r["youden_j"]["estimate"] == pytest.approx(5 / 12)
    for name in DETECTOR_METRICS:
        res = r[name]
        if not math.isnan(res["estimate"]):
            assert res["ci_low"] <= res["estimate"] <= res["ci_high"], name
    assert r["counts"] == {"n": 10, "tp": 3, "fp": 2, "fn": 1, "tn": 4, "n_unlabelled": 0, "n_partial_dropped": 0}
    # precision is undefined on resamples without a no_gold context: those are skipped and counted
    assert 990 <= r["precision"]["n_resamples_used"] <= 1000
    # the share of no_gold is a mean: its interval is the project's plain bootstrap (same seed)
    plain = bootstrap_ci(np.array(NO_GOLD, dtype=float))
    assert (r["share_no_gold"]["ci_low"], r["share_no_gold"]["ci_high"]) == (plain["ci_low"], plain["ci_high"])
    assert detector_report(NO_GOLD, LABELS) == r  # seed 0 by default: reproducible


def test_report_drops_unlabelled_and_resamples_dialogues():
    labels = LABELS[:9] + [None]
    r = detector_report(NO_GOLD, labels, clusters=["d1", "d1", "d2", "d2", "d3", "d3", "d4", "d4", "d5", "d5"])
    assert r["counts"]["n"] == 9 and r["counts"]["n_unlabelled"] == 1
    assert r["precision"]["n_clusters"] == 5
    assert r["precision"]["estimate"] == pytest.approx(0.6)
    one = detector_report(NO_GOLD, LABELS, clusters=["d"] * 10)  # one dialogue: zero width
    assert one["precision"]["ci_low"] == one["precision"]["ci_high"] == pytest.approx(0.6)


def test_paired_change_b_minus_a():
    # b: retriever b misses gold on 0-3 (two insufficient, two sufficient): precision 2/4
    no_gold_b = [True, True, False, True, True, False, False, False, False, False]
    labels_b = ["no", "yes", "no", "yes", "no", "no", "yes", "yes", "yes", "yes"]
    r = paired_detector_change(NO_GOLD, LABELS, no_gold_b, labels_b)
    assert r["value_a"] == pytest.approx(0.6) and r["value_b"] == pytest.approx(0.5)
    assert r["estimate"] == pytest.approx(-0.1)
    assert r["ci_low"] <= -0.1 <= r["ci_high"] and r["metric"] == "precision"
    j = paired_detector_change(NO_GOLD, LABELS, no_gold_b, labels_b, metric="youden_j", n_resamples=200)
    assert j["estimate"] == pytest.approx(j["value_b"] - j["value_a"])
    same = paired_detector_change(NO_GOLD, LABELS, NO_GOLD, LABELS)
    assert same["estimate"] == same["ci_low"] == same["ci_high"] == 0.0


def test_paired_change_drops_turns_unlabelled_under_either():
    labels_b = list(LABELS)
    labels_b[3] = float("nan")
    r = paired_detector_change(NO_GOLD, LABELS, NO_GOLD, labels_b)
    assert r["n"] == 9 and r["n_unlabelled"] == 1
    assert r["value_a"] == r["value_b"] == pytest.approx(3 / 4)  # context 3 (a false miss) left out of both


def test_auroc_by_hand():
    # positives score .9, .4, .6; negatives .5, .1. Of the 6 positive-negative pairs, only
    # (.4, .5) is discordant: AUROC = 5/6.
    assert auroc([1, 1, 1, 0, 0], [0.9, 0.4, 0.6, 0.5, 0.1]) == pytest.approx(5 / 6)
    # a tie counts one half: pairs (.8,.5) (.8,.2) (.5,.2) concordant, (.5,.5) tied -> 3.5/4
    assert auroc([True, True, False, False], [0.8, 0.5, 0.5, 0.2]) == pytest.approx(0.875)
    assert math.isnan(auroc([1, 1, 1], [0.2, 0.3, 0.4]))


def test_rank_auroc_equals_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(2)
    for _ in range(5):
        y = rng.integers(0, 2, 50)
        s = rng.integers(0, 6, 50) / 5  # many ties
        assert _auroc_ranks(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert math.isnan(_auroc_ranks(np.ones(4, dtype=int), np.arange(4.0)))


def test_paired_auroc_difference_identical_labels_is_zero():
    rng = np.random.default_rng(0)
    scores = rng.random(8)
    labels = [1, 0, 1, 1, 0, 0, 1, 0]
    r = paired_auroc_difference(scores, labels, labels)
    assert r["estimate"] == 0.0 and r["ci_low"] == 0.0 and r["ci_high"] == 0.0
    # 8 contexts: some resamples hold one class only; they are skipped and counted
    assert r["n_resamples_skipped"] > 0
    assert r["n_resamples_used"] + r["n_resamples_skipped"] == 1000
    assert r["auroc_a"] == r["auroc_b"] == auroc(labels, scores)


def test_paired_auroc_difference_value_and_seed():
    rng = np.random.default_rng(1)
    scores = rng.random(60)
    content = (scores > 0.5).astype(int)  # the score ranks the content label perfectly
    qrels = rng.integers(0, 2, 60)
    r = paired_auroc_difference(scores, content, qrels, n_resamples=300, seed=3)
    assert r["auroc_a"] == 1.0
    assert r["estimate"] == pytest.approx(1.0 - auroc(qrels, scores), abs=1e-12)
    assert r["estimate"] == pytest.approx(r["auroc_a"] - r["auroc_b"], abs=1e-12)
    assert r["ci_low"] <= r["estimate"] <= r["ci_high"] and r["n_resamples_skipped"] == 0
    assert paired_auroc_difference(scores, content, qrels, n_resamples=300, seed=3) == r
    other = paired_auroc_difference(scores, content, qrels, n_resamples=300, seed=4)
    assert (other["ci_low"], other["ci_high"]) != (r["ci_low"], r["ci_high"])
    dial = paired_auroc_difference(scores, content, qrels, n_resamples=100, clusters=np.repeat(np.arange(12), 5))
    assert dial["n_clusters"] == 12 and dial["estimate"] == r["estimate"]


def test_errors_name_the_problem():
    with pytest.raises(DataError, match=r"context 2: label 'maybe'"):
        insufficient_from_labels(["yes", "no", "maybe"])
    with pytest.raises(DataError, match="10 no_gold values for 9 content labels"):
        detector_report(NO_GOLD, LABELS[:9])
    with pytest.raises(ConfigError, match="metric must be one of"):
        paired_detector_change(NO_GOLD, LABELS, NO_GOLD, LABELS, metric="f1")
    with pytest.raises(DataError, match="same turns"):
        paired_detector_change(NO_GOLD, LABELS, NO_GOLD[:9], LABELS[:9])
    with pytest.raises(DataError, match="booleans"):
        detector_metrics([0.5, 1.0], [True, False])
    with pytest.raises(DataError, match="no context has a content label"):
        detector_report([True], [None])


# Kitagawa decomposition (convrag.stats.decomposition): its tests live here, beside the
# detector they serve (refusal rates of two retrievers split by content-label class).


def test_kitagawa_two_strata_by_hand():
    # Refusal rate by content label: A = (no: .8, yes: .1) with shares (.5, .5), B = (no: .6,
    # yes: .2) with shares (.2, .8). R_A = .45, R_B = .28, total .17.
    # rate effect: (.8-.6)(.5+.2)/2 + (.1-.2)(.5+.8)/2 = .07 - .065 = .005
    # composition: (.5-.2)(.8+.6)/2 + (.5-.8)(.1+.2)/2 = .21 - .045 = .165
    r = kitagawa({"no": 0.8, "yes": 0.1}, {"no": 0.5, "yes": 0.5}, {"no": 0.6, "yes": 0.2}, {"no": 0.2, "yes": 0.8})
    assert r["rate_a"] == pytest.approx(0.45) and r["rate_b"] == pytest.approx(0.28)
    assert r["total"] == pytest.approx(0.17)
    assert r["rate_effect"] == pytest.approx(0.005) and r["composition_effect"] == pytest.approx(0.165)
    by = r["by_stratum"].set_index("stratum")
    assert by.loc["no", "rate_effect"] == pytest.approx(0.07)
    assert by.loc["yes", "composition_effect"] == pytest.approx(-0.045)


def test_kitagawa_identity_and_absent_stratum():
    rng = np.random.default_rng(0)
    for _ in range(20):
        wa, wb = rng.dirichlet(np.ones(3)), rng.dirichlet(np.ones(3))
        ra, rb = rng.random(3), rng.random(3)
        r = kitagawa(dict(enumerate(ra)), dict(enumerate(wa)), dict(enumerate(rb)), dict(enumerate(wb)))
        assert r["rate_effect"] + r["composition_effect"] == pytest.approx(r["total"], abs=1e-12)
        assert r["total"] == pytest.approx(wa @ ra - wb @ rb, abs=1e-12)
    # "partial" absent from A (share 0, rate undefined): its rate effect is 0 and its whole
    # contribution -w_B r_B = -.2 * .5 = -.1 is composition
    r = kitagawa({"no": 0.8, "yes": 0.1, "partial": None}, {"no": 0.5, "yes": 0.5},
                 {"no": 0.6, "yes": 0.2, "partial": 0.5}, {"no": 0.2, "yes": 0.6, "partial": 0.2})
    p = r["by_stratum"].set_index("stratum").loc["partial"]
    assert p["rate_effect"] == 0.0 and p["composition_effect"] == pytest.approx(-0.1)
    assert r["rate_effect"] + r["composition_effect"] == pytest.approx(r["total"]) == pytest.approx(0.45 - 0.34)


def test_kitagawa_from_data_and_errors():
    # A: n n y y (refusals 1 1 0 0); B: n y y y (1 0 0 0) -> rates .5 vs .25
    r = kitagawa_from_data([1, 1, 0, 0], ["n", "n", "y", "y"], [1, 0, 0, 0], ["n", "y", "y", "y"])
    assert r["total"] == pytest.approx(0.25) and r["n_a"] == r["n_b"] == 4
    # within-stratum rates are equal (n: 1, y: 0), so all of it is composition
    assert r["rate_effect"] == 0.0 and r["composition_effect"] == pytest.approx(0.25)
    with pytest.raises(DataError, match="shares_a sums to 0.9"):
        kitagawa({"x": 0.1}, {"x": 0.9}, {"x": 0.1}, {"x": 1.0})
    with pytest.raises(DataError, match=r"rates_b has no finite rate for strata \['x'\]"):
        kitagawa({"x": 0.1}, {"x": 1.0}, {"x": None}, {"x": 1.0})
    with pytest.raises(DataError, match="outcome_b has 2 values for 3 strata labels"):
        kitagawa_from_data([1], ["n"], [1, 0], ["n", "y", "y"])
