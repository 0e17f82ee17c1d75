"""Agreement coefficients against published worked examples, the libraries, and edge cases."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats import inter_rater

from convrag.errors import ConfigError, DataError
from convrag.stats.agreement import cohen_kappa, fleiss_kappa, gwet_ac1, raw_agreement, rating_counts


def _rows_from_counts(counts, categories):
    """Subjects x categories counts -> items x raters rows (rater identity is irrelevant here)."""
    return [[c for c, m in zip(categories, row) for _ in range(m)] for row in counts]


def _pairs_from_table(table, categories):
    """Two-rater contingency table (rows rater A, columns rater B) -> two label sequences."""
    a, b = [], []
    for i, ci in enumerate(categories):
        for j, cj in enumerate(categories):
            a += [ci] * table[i][j]
            b += [cj] * table[i][j]
    return a, b


# Fleiss (1971) / Wikipedia "Fleiss' kappa" worked example: 10 subjects, 14 raters, 5 categories.
# Published: P-bar = 0.378, P-bar_e = 0.213, kappa = 0.210.
WIKI_FLEISS = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]

# Fleiss (1971), Table 1: 15 patients, 6 psychiatrists, 5 diagnoses (irrCAC's distrib.6raters).
# Gwet's irrCAC R package (README): fleiss.kappa.dist = 0.4139265 (pa 0.5511111, pe 0.2340741),
# gwet.ac1.dist = 0.4448007 (pe 0.1914815).
FLEISS_1971 = {
    "Depression": [0, 0, 0, 0, 0, 2, 0, 2, 2, 0, 1, 1, 0, 1, 0],
    "Personality Disorder": [0, 3, 1, 0, 3, 0, 0, 0, 0, 0, 0, 1, 3, 0, 2],
    "Schizophrenia": [0, 0, 4, 0, 0, 4, 4, 3, 0, 0, 0, 0, 3, 0, 0],
    "Neurosis": [6, 0, 0, 0, 3, 0, 0, 1, 4, 0, 5, 4, 0, 5, 3],
    "Other": [0, 3, 1, 6, 0, 0, 2, 0, 0, 6, 0, 0, 0, 0, 1],
}

# Gwet, K.L. (2014) Handbook of Inter-Rater Reliability, 4th ed., p. 120: 12 subjects, 4 raters,
# 5 categories, missing ratings (irrCAC's cac.raw4raters). Published (irrCAC README, by Gwet):
# pa 0.8181818; AC1 pe 0.1903212, AC1 0.77544; Fleiss' generalised kappa pe 0.2387153, 0.76117.
GWET_RAW4 = [
    [1, 1, None, 1], [2, 2, 3, 2], [3, 3, 3, 3], [3, 3, 3, 3], [2, 2, 2, 2], [1, 2, 3, 4],
    [4, 4, 4, 4], [1, 1, 2, 1], [2, 2, 2, 2], [None, 5, 5, 5], [None, None, 1, 1], [None, None, 3, None],
]

# Gwet (2014) Handbook: 100 pregnant women classified by 2 abstractors (irrCAC's
# cont3x3abstractors; rows abstractor 1). Published (irrCAC README): Cohen's kappa 0.7964094,
# Gwet's AC1 0.8493305, percent agreement 0.89.
ABSTRACTORS = [[13, 0, 0], [0, 20, 7], [0, 4, 56]]
ABSTRACTOR_CATS = ["Ectopic", "AIU", "NIU"]


def test_fleiss_wikipedia_example_and_statsmodels():
    rows = _rows_from_counts(WIKI_FLEISS, [1, 2, 3, 4, 5])
    r = fleiss_kappa(rows, [1, 2, 3, 4, 5])
    assert round(r["value"], 3) == 0.210
    assert round(r["p_observed"], 3) == 0.378 and round(r["p_expected"], 3) == 0.213
    assert r["n_items"] == 10 and r["n_dropped"] == 0
    assert r["value"] == pytest.approx(inter_rater.fleiss_kappa(np.array(WIKI_FLEISS)), abs=1e-12)


def test_fleiss_1971_table_kappa_and_ac1():
    cats = list(FLEISS_1971)
    counts = np.array([FLEISS_1971[c] for c in cats]).T
    rows = _rows_from_counts(counts, cats)
    f, g = fleiss_kappa(rows, cats), gwet_ac1(rows, cats)
    assert f["value"] == pytest.approx(0.4139265, abs=5e-8)
    assert f["p_observed"] == pytest.approx(0.5511111, abs=5e-8)
    assert f["p_expected"] == pytest.approx(0.2340741, abs=5e-8)
    assert g["value"] == pytest.approx(0.4448007, abs=5e-8)
    assert g["p_expected"] == pytest.approx(0.1914815, abs=5e-8)


def test_gwet_handbook_raw_ratings_with_missing():
    cats = [1, 2, 3, 4, 5]
    # Gwet's convention: a singly rated item (12) still enters the category shares pi_k
    g = gwet_ac1(GWET_RAW4, cats, single_ratings="chance")
    assert g["p_observed"] == pytest.approx(0.8181818, abs=5e-8)
    assert g["p_expected"] == pytest.approx(0.1903212, abs=5e-8)
    assert g["value"] == pytest.approx(0.77544, abs=5e-6)
    f = fleiss_kappa(GWET_RAW4, cats, single_ratings="chance")
    assert f["p_expected"] == pytest.approx(0.2387153, abs=5e-8)
    assert f["value"] == pytest.approx(0.76117, abs=5e-6)
    assert raw_agreement(GWET_RAW4, cats)["value"] == pytest.approx(0.8181818, abs=5e-8)
    # default "drop": item 12 leaves the chance term too. By hand, r_ik / r_i summed over the 11
    # items rated >= 2 times: category 1: 1 + .25 + .75 + 1 = 3 (items 1, 6, 8, 11); 2: .75 + 1
    # + .25 + .25 + 1 = 3.25 (2, 5, 6, 8, 9); 3: .25 + 1 + 1 + .25 = 2.5 (2, 3, 4, 6); 4: .25 + 1
    # (6, 7); 5: 1 (10) -> p_e = sum pi (1 - pi) / 4 = 0.191374, AC1 = (9/11 - p_e) / (1 - p_e).
    d = gwet_ac1(GWET_RAW4, cats)
    assert d["n_items"] == 11 and d["n_dropped"] == 1
    pi = np.array([3, 3.25, 2.5, 1.25, 1]) / 11
    pe = (pi * (1 - pi)).sum() / 4
    assert round(pe, 6) == 0.191374
    assert d["p_expected"] == pytest.approx(pe, abs=1e-12)
    assert d["value"] == pytest.approx((9 / 11 - pe) / (1 - pe), abs=1e-12)
    assert round(d["value"], 6) == 0.775152


def test_handbook_two_abstractors_cohen_ac1_raw():
    a, b = _pairs_from_table(ABSTRACTORS, ABSTRACTOR_CATS)
    k = cohen_kappa(a, b, ABSTRACTOR_CATS)
    assert k["value"] == pytest.approx(0.7964094, abs=5e-8)
    assert k["value"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    pairs = list(zip(a, b))
    assert gwet_ac1(pairs, ABSTRACTOR_CATS)["value"] == pytest.approx(0.8493305, abs=5e-8)
    assert raw_agreement(pairs, ABSTRACTOR_CATS)["value"] == pytest.approx(0.89)


def test_cohen_wikipedia_50_items():
    # Wikipedia "Cohen's kappa": A yes/B yes 20, A yes/B no 5, A no/B yes 10, A no/B no 15.
    # p_o = 35/50 = 0.7; p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = 0.4.
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    r = cohen_kappa(a, b, ["yes", "no"])
    assert r == {"value": pytest.approx(0.4), "p_observed": pytest.approx(0.7), "p_expected": pytest.approx(0.5),
                 "n_items": 50, "n_dropped": 0}


def test_fleiss_statsmodels_path_equals_general_formula():
    rng = np.random.default_rng(0)
    rows = rng.choice(["yes", "partial", "no"], size=(40, 4)).tolist()
    cats = ["yes", "partial", "no"]
    table, _ = inter_rater.aggregate_raters(np.vectorize(cats.index)(np.array(rows)), n_cat=3)
    r = fleiss_kappa(rows, cats)
    assert r["value"] == pytest.approx(inter_rater.fleiss_kappa(table), abs=1e-12)
    assert r["value"] == pytest.approx((r["p_observed"] - r["p_expected"]) / (1 - r["p_expected"]), abs=1e-12)


def test_two_rater_multi_coefficients_match_two_sequence_forms():
    rng = np.random.default_rng(1)
    a = rng.choice(["yes", "partial", "no"], 60).tolist()
    b = [x if rng.random() < 0.7 else "no" for x in a]
    cats = ["yes", "partial", "no"]
    pairs = list(zip(a, b))
    assert raw_agreement(pairs, cats)["value"] == pytest.approx(np.mean([x == y for x, y in pairs]))
    # two raters: Fleiss' kappa is Scott's pi (pooled marginals), not Cohen's kappa
    pooled = np.array([(a + b).count(c) for c in cats]) / 120
    po = np.mean([x == y for x, y in pairs])
    assert fleiss_kappa(pairs, cats)["value"] == pytest.approx((po - (pooled**2).sum()) / (1 - (pooled**2).sum()))


def test_unused_category_counts_for_ac1_only():
    pairs = [("yes", "yes"), ("yes", "no"), ("no", "no"), ("no", "no")]
    two, three = gwet_ac1(pairs, ["yes", "no"]), gwet_ac1(pairs, ["yes", "no", "partial"])
    # pi = (3/8, 5/8, 0): p_e = 2 * 15/64 / 1 vs / 2
    assert two["p_expected"] == pytest.approx(30 / 64) and three["p_expected"] == pytest.approx(15 / 64)
    two_f, three_f = fleiss_kappa(pairs, ["yes", "no"]), fleiss_kappa(pairs, ["yes", "no", "partial"])
    assert two_f["value"] == pytest.approx(three_f["value"])
    a, b = zip(*pairs)
    two_k, three_k = cohen_kappa(a, b, ["yes", "no"]), cohen_kappa(a, b, ["yes", "no", "partial"])
    assert two_k["value"] == pytest.approx(three_k["value"])


def test_one_category_only_is_nan_not_error():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning / UndefinedMetricWarning either
        assert math.isnan(cohen_kappa(["no"] * 5, ["no"] * 5, ["yes", "no"])["value"])
        assert math.isnan(fleiss_kappa([["no"] * 3] * 4, ["yes", "no"])["value"])
        assert math.isnan(fleiss_kappa([["no", "no", None]] * 4, ["yes", "no"])["value"])
        assert math.isnan(gwet_ac1([["no"] * 3] * 4, ["no"])["value"])
        # AC1 stays defined with one used category of two: p_e = 0, AC1 = p_o = 1
        assert gwet_ac1([["no"] * 3] * 4, ["yes", "no"])["value"] == 1.0
        # nothing left to compare
        assert math.isnan(gwet_ac1([["no", None], [None, None]], ["yes", "no"])["value"])
        r = cohen_kappa(["no", None], [None, "yes"], ["yes", "no"])
        assert math.isnan(r["value"]) and r["n_items"] == 0 and r["n_dropped"] == 2


def test_missing_ratings_dropped_and_counted():
    df = pd.DataFrame({"j1": ["yes", "no", None, "no", np.nan],
                       "j2": ["yes", "yes", "no", None, None],
                       "j3": ["yes", "no", None, "no", "yes"]})
    assert rating_counts(df, ["yes", "no"]).sum(axis=1).tolist() == [3, 3, 1, 2, 1]
    r = raw_agreement(df, ["yes", "no"])
    # items 2 and 4 have one rating each; kept: 3/3 pairs agree, 1/3 (no, yes, no), 1/1 (no, no)
    assert r["n_items"] == 3 and r["n_dropped"] == 2
    assert r["value"] == pytest.approx((1 + 1 / 3 + 1) / 3)


def test_cohen_drops_pairs_with_a_missing_label():
    r = cohen_kappa(["yes", "no", None, "no"], ["yes", "no", "no", float("nan")], ["yes", "no"])
    assert r["n_items"] == 2 and r["n_dropped"] == 2 and r["value"] == 1.0


def test_errors_name_the_problem():
    with pytest.raises(DataError, match=r"item 1, rater 0: label 'No'"):
        fleiss_kappa([["no", "no"], ["No", "no"]], ["yes", "no"])
    with pytest.raises(DataError, match="rater_a has 2 labels, rater_b 3"):
        cohen_kappa(["a", "b"], ["a", "b", "a"], ["a", "b"])
    with pytest.raises(ConfigError, match="categories is empty"):
        gwet_ac1([["a", "a"]], [])
    with pytest.raises(ConfigError, match="duplicates"):
        gwet_ac1([["a", "a"]], ["a", "a"])
    with pytest.raises(ConfigError, match="single_ratings"):
        gwet_ac1([["a", "a"]], ["a", "b"], single_ratings="keep")
