"""Cluster bootstrap and generic statistic bootstrap: hand-checkable cases, coverage, validation."""

import math

import numpy as np
import pytest

from convrag.stats.bootstrap import (
    bootstrap_ci,
    bootstrap_statistic,
    cluster_bootstrap_ci,
    paired_bootstrap,
    paired_cluster_bootstrap,
)


def test_equal_valued_clusters_give_wider_interval_than_items():
    # Two dialogues of 4 turns: A all 0, B all 1. Drawing 2 clusters with replacement gives
    # mean 0 (AA, p=1/4), 0.5 (AB/BA, p=1/2) or 1 (BB, p=1/4): 2.5%/97.5% quantiles are 0 and 1.
    # The item bootstrap sees 8 independent coin flips: k ~ Bin(8, 1/2), P(k <= 1) = 9/256 = 0.035
    # and P(k = 0) = 0.004, so its quantiles are 1/8 and 7/8: too narrow for 2 dialogues.
    x = [0, 0, 0, 0, 1, 1, 1, 1]
    c = ["A"] * 4 + ["B"] * 4
    r = cluster_bootstrap_ci(x, c)
    assert r == {"mean": 0.5, "ci_low": 0.0, "ci_high": 1.0, "n": 8, "n_clusters": 2}
    item = bootstrap_ci(x)
    assert (item["ci_low"], item["ci_high"]) == (0.125, 0.875)


def test_one_cluster_has_zero_width():
    r = cluster_bootstrap_ci([0.2, 0.4, 0.9], ["d1"] * 3)
    assert r["mean"] == r["ci_low"] == r["ci_high"] == pytest.approx(0.5)
    assert r["n_clusters"] == 1 and r["n"] == 3


def test_singleton_clusters_equal_item_bootstrap_and_seed_reproducible():
    x = np.random.default_rng(1).normal(size=40)
    r = cluster_bootstrap_ci(x, range(40), seed=3)
    item = bootstrap_ci(x, seed=3)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((item["ci_low"], item["ci_high"]), abs=1e-12)
    assert r["n_clusters"] == 40
    c = np.repeat(np.arange(8), 5)
    assert cluster_bootstrap_ci(x, c, seed=3) == cluster_bootstrap_ci(x, c, seed=3)
    assert cluster_bootstrap_ci(x, c, seed=3)["ci_low"] != cluster_bootstrap_ci(x, c, seed=4)["ci_low"]


def test_row_order_and_label_type_do_not_matter():
    rng = np.random.default_rng(2)
    x = rng.random(30)
    c = np.repeat(["d1", "d2", "d3", "d4", "d5", "d6"], 5)
    perm = rng.permutation(30)
    a, b = cluster_bootstrap_ci(x, c), cluster_bootstrap_ci(x[perm], c[perm])
    assert (a["ci_low"], a["ci_high"]) == pytest.approx((b["ci_low"], b["ci_high"]))


def test_unequal_cluster_sizes_use_item_mean():
    # A = [1] (1 item), B = [0, 0, 0] (3 items): the resample AB has item mean 1/4, not 1/2;
    # AA -> 1 (p=1/4), BB -> 0 (p=1/4), so the interval is [0, 1] and the point estimate 1/4.
    r = cluster_bootstrap_ci([1, 0, 0, 0], ["A", "B", "B", "B"], n_resamples=2000)
    assert r["mean"] == 0.25 and (r["ci_low"], r["ci_high"]) == (0.0, 1.0)
    s = bootstrap_statistic([np.array([1.0, 0, 0, 0])], np.mean, n_resamples=2000, clusters=["A", "B", "B", "B"])
    assert (s["estimate"], s["ci_low"], s["ci_high"], s["n_clusters"]) == (0.25, 0.0, 1.0, 2)


def test_paired_cluster_bootstrap():
    a = np.array([0.2, 0.5, 0.9, 0.4, 0.7])
    c = ["x", "x", "y", "z", "z"]
    p = paired_cluster_bootstrap(a, a, c)
    assert p["mean_diff"] == p["ci_low"] == p["ci_high"] == 0.0
    assert p["rel_change"] == 0.0 and p["n_clusters"] == 3 and p["n"] == 5
    # b = a - 0.1 everywhere: every resample's mean difference is 0.1
    q = paired_cluster_bootstrap(a, a - 0.1, c)
    assert q["ci_low"] == pytest.approx(0.1) and q["ci_high"] == pytest.approx(0.1)
    # singleton clusters reproduce paired_bootstrap (same keys apart from n_clusters)
    b = np.array([0.1, 0.6, 0.3, 0.4, 0.2])
    pc = paired_cluster_bootstrap(a, b, range(5), seed=5)
    pb = paired_bootstrap(a, b, seed=5)
    assert pc.pop("n_clusters") == 5 and pc == pytest.approx(pb)


def test_bootstrap_statistic_matches_mean_bootstraps():
    x = np.random.default_rng(3).random(25)
    s = bootstrap_statistic([x], np.mean, n_resamples=500, seed=9)
    r = bootstrap_ci(x, n_resamples=500, seed=9)
    assert s["estimate"] == pytest.approx(r["mean"]) and s["n_resamples_used"] == 500 and s["n"] == 25
    assert (s["ci_low"], s["ci_high"]) == pytest.approx((r["ci_low"], r["ci_high"]))
    assert "n_clusters" not in s
    c = np.arange(25) % 7
    sc = bootstrap_statistic([x], np.mean, n_resamples=500, seed=9, clusters=c)
    rc = cluster_bootstrap_ci(x, c, n_resamples=500, seed=9)
    assert (sc["ci_low"], sc["ci_high"]) == pytest.approx((rc["ci_low"], rc["ci_high"]))
    assert sc["n_clusters"] == 7


def _mean_gap(labels, scores):
    """mean score of positives minus negatives; NaN if a class is absent (like AUROC)."""
    if labels.all() or not labels.any():
        return float("nan")
    return float(scores[labels].mean() - scores[~labels].mean())


def test_bootstrap_statistic_skips_nan_resamples():
    labels = np.array([False, False, True, True])
    scores = np.array([0.1, 0.3, 0.6, 0.8])
    s = bootstrap_statistic([labels, scores], _mean_gap, n_resamples=1000, seed=0)
    assert s["estimate"] == pytest.approx(0.5)
    # Replay the documented index matrix: resamples with one class only (p = 2 / 2^4 = 1/8) are skipped.
    idx = np.random.default_rng(0).integers(0, 4, size=(1000, 4))
    one_class = (labels[idx].all(axis=1) | ~labels[idx].any(axis=1)).sum()
    assert s["n_resamples_used"] == 1000 - one_class and 80 < one_class < 170
    assert s["ci_low"] <= 0.5 <= s["ci_high"]
    # All resamples NaN -> NaN interval, none used.
    t = bootstrap_statistic([labels], lambda _l: float("nan"), n_resamples=10)
    assert t["n_resamples_used"] == 0 and math.isnan(t["ci_low"]) and math.isnan(t["ci_high"])


def test_coverage_on_clustered_data():
    # 40 dialogues of 2-8 turns, turn score = mu + dialogue effect N(0, 1) + noise N(0, 0.5):
    # true mean mu. The cluster interval must cover mu in 90-99% of 300 data sets; the item
    # interval, ignoring that turns of a dialogue move together, covers far less.
    rng = np.random.default_rng(2024)
    mu, reps, hits, item_hits = 1.0, 300, 0, 0
    for rep in range(reps):
        sizes = rng.integers(2, 9, size=40)
        clusters = np.repeat(np.arange(40), sizes)
        x = mu + np.repeat(rng.normal(0.0, 1.0, size=40), sizes) + rng.normal(0.0, 0.5, size=sizes.sum())
        r = cluster_bootstrap_ci(x, clusters, n_resamples=1000, seed=rep)
        hits += r["ci_low"] <= mu <= r["ci_high"]
        i = bootstrap_ci(x, n_resamples=200, seed=rep)
        item_hits += i["ci_low"] <= mu <= i["ci_high"]
    assert 0.90 <= hits / reps <= 0.99, hits
    assert item_hits / reps < 0.85, item_hits


def test_validation_errors():
    with pytest.raises(ValueError, match="one label per item"):
        cluster_bootstrap_ci([1.0, 2.0], ["a"])
    with pytest.raises(ValueError, match="missing labels"):
        cluster_bootstrap_ci([1.0, 2.0], ["a", None])
    with pytest.raises(ValueError, match="empty"):
        cluster_bootstrap_ci([], [])
    with pytest.raises(ValueError, match="NaN"):
        cluster_bootstrap_ci([1.0, float("nan")], ["a", "b"])
    with pytest.raises(ValueError, match="equal length"):
        paired_cluster_bootstrap([1.0, 2.0], [1.0], ["a", "b"])
    with pytest.raises(ValueError, match="alpha"):
        cluster_bootstrap_ci([1.0], ["a"], alpha=0.0)
    with pytest.raises(ValueError, match="list of arrays"):
        bootstrap_statistic(np.array([1.0, 2.0]), np.mean)
    with pytest.raises(ValueError, match="equal length"):
        bootstrap_statistic([np.ones(3), np.ones(2)], lambda a, b: 0.0)
