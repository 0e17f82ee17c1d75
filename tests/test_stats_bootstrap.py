"""Percentile bootstrap: exact small cases, coverage, paired vs unpaired width, validation."""

import math

import numpy as np
import pandas as pd
import pytest

from convrag.stats.bootstrap import bootstrap_ci, paired_bootstrap, percentile_ci_by_group


def test_constant_data_zero_width():
    r = bootstrap_ci([0.7] * 25)
    assert r == {"mean": pytest.approx(0.7), "ci_low": pytest.approx(0.7), "ci_high": pytest.approx(0.7), "n": 25}
    p = paired_bootstrap([1.0] * 10, [0.5] * 10)
    assert p["mean_diff"] == p["ci_low"] == p["ci_high"] == pytest.approx(0.5)


def test_hand_checkable_binary_example():
    # x = [0,0,0,1]: a resample mean is k/4 with k ~ Binomial(4, 1/4).
    # P(k=0) = (3/4)^4 = 0.316 > 0.025            -> 2.5% quantile = 0
    # P(k>=3) = 4*(1/4)^3*(3/4) + (1/4)^4 = 0.0508 > 0.025, P(k=4) = 0.0039 < 0.025
    #                                              -> 97.5% quantile = 3/4
    r = bootstrap_ci([0, 0, 0, 1], n_resamples=1000, seed=0)
    assert r["mean"] == 0.25 and r["n"] == 4
    assert r["ci_low"] == 0.0
    assert r["ci_high"] == 0.75


def test_matches_documented_resampling_scheme():
    # Same index matrix as the spec: default_rng(seed).integers(0, n, size=(B, n)).
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0])
    idx = np.random.default_rng(7).integers(0, x.size, size=(200, x.size))
    means = x[idx].mean(axis=1)
    r = bootstrap_ci(x, n_resamples=200, seed=7, alpha=0.1)
    assert r["ci_low"] == pytest.approx(np.quantile(means, 0.05))
    assert r["ci_high"] == pytest.approx(np.quantile(means, 0.95))
    assert r["mean"] == pytest.approx(25 / 7)  # (3+1+4+1+5+9+2)/7


def test_seed_reproducible_and_seed_sensitive():
    x = np.random.default_rng(1).normal(size=40)
    assert bootstrap_ci(x, seed=3) == bootstrap_ci(x, seed=3)
    assert bootstrap_ci(x, seed=3)["ci_low"] != bootstrap_ci(x, seed=4)["ci_low"]


def test_coverage_on_normal_data():
    # 200 data sets of n=50 from N(mu=2, 1); the 95% interval should cover mu in 88-99% of them.
    rng = np.random.default_rng(12345)
    mu, hits = 2.0, 0
    for rep in range(200):
        r = bootstrap_ci(rng.normal(mu, 1.0, size=50), n_resamples=1000, seed=rep)
        hits += r["ci_low"] <= mu <= r["ci_high"]
    assert 0.88 <= hits / 200 <= 0.99


def test_paired_narrower_than_unpaired_on_correlated_data():
    rng = np.random.default_rng(0)
    z = rng.normal(size=200)  # shared per-question difficulty
    a = z + 0.3 + 0.1 * rng.normal(size=200)
    b = z + 0.1 * rng.normal(size=200)
    p = paired_bootstrap(a, b)
    # unpaired: resample a and b with independent index matrices
    ia = np.random.default_rng(1).integers(0, 200, size=(1000, 200))
    ib = np.random.default_rng(2).integers(0, 200, size=(1000, 200))
    d = a[ia].mean(axis=1) - b[ib].mean(axis=1)
    lo, hi = np.quantile(d, [0.025, 0.975])
    assert (p["ci_high"] - p["ci_low"]) < 0.5 * (hi - lo)
    assert p["ci_low"] <= p["mean_diff"] <= p["ci_high"]
    assert p["mean_diff"] == pytest.approx(a.mean() - b.mean())


def test_paired_fields_and_rel_change():
    # a = [1, 0.5], b = [0.5, 0.5]: mean_a = 0.75, mean_b = 0.5, diff (a-b) = 0.25
    # rel_change = (0.5 - 0.75) / 0.75 = -1/3
    p = paired_bootstrap([1.0, 0.5], [0.5, 0.5])
    assert p["mean_a"] == 0.75 and p["mean_b"] == 0.5 and p["n"] == 2
    assert p["mean_diff"] == pytest.approx(0.25)
    assert p["rel_change"] == pytest.approx(-1 / 3)
    # differences are [0.5, 0] -> resample means in {0, 0.25, 0.5}
    assert p["ci_low"] == 0.0 and p["ci_high"] == 0.5
    assert math.isnan(paired_bootstrap([0, 0], [1, 0])["rel_change"])


def test_validation_errors():
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="empty"):
        paired_bootstrap([], [])
    with pytest.raises(ValueError, match="equal length"):
        paired_bootstrap([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_ci([1.0, float("nan")])
    with pytest.raises(ValueError, match="alpha"):
        bootstrap_ci([1.0], alpha=1.5)


def test_percentile_ci_by_group():
    df = pd.DataFrame(
        {
            "retriever": ["bm25"] * 4 + ["dense"] * 3,
            "condition": ["FULL", "FULL", "SHARDED", "SHARDED", "FULL", "FULL", "FULL"],
            "f1": [1.0, 1.0, 0.0, 1.0, 0.5, 0.5, 0.5],
        }
    )
    out = percentile_ci_by_group(df, ["retriever", "condition"], "f1")
    assert list(out.columns) == ["retriever", "condition", "mean", "ci_low", "ci_high", "n"]
    assert out[["retriever", "condition"]].values.tolist() == [
        ["bm25", "FULL"], ["bm25", "SHARDED"], ["dense", "FULL"]
    ]
    assert out["n"].tolist() == [2, 2, 3]
    assert out["mean"].tolist() == pytest.approx([1.0, 0.5, 0.5])
    # group interval equals a direct call with the same seed
    direct = bootstrap_ci([0.0, 1.0])
    row = out.iloc[1]
    assert (row["ci_low"], row["ci_high"]) == (direct["ci_low"], direct["ci_high"])
    one = percentile_ci_by_group(df, "retriever", "f1")
    assert one["retriever"].tolist() == ["bm25", "dense"]
    with pytest.raises(ValueError, match="missing columns"):
        percentile_ci_by_group(df, ["dataset"], "f1")


def test_percentile_interval_coverage_on_synthetic_data():
    """On data with a known mean, the 95% percentile interval must cover it in 90-99% of 200
    repetitions (the percentile bootstrap undercovers a little for small n; far outside this
    band means a bug in resampling or quantiles)."""
    import numpy as np

    from convrag.stats.bootstrap import bootstrap_ci, paired_bootstrap

    rng = np.random.default_rng(123)
    hits = paired_hits = 0
    for rep in range(200):
        x = rng.beta(2.0, 5.0, size=60)  # skewed like per-question F1; true mean 2 / 7
        hits += bootstrap_ci(x, n_resamples=1000, seed=rep)["ci_low"] <= 2 / 7 <= bootstrap_ci(x, 1000, rep)["ci_high"]
        a = rng.normal(0.6, 0.2, size=60)
        b = a - 0.1 + rng.normal(0.0, 0.1, size=60)  # paired, true mean difference 0.1
        r = paired_bootstrap(a, b, n_resamples=1000, seed=rep)
        paired_hits += r["ci_low"] <= 0.1 <= r["ci_high"]
    assert 0.90 <= hits / 200 <= 0.99, hits
    assert 0.90 <= paired_hits / 200 <= 0.99, paired_hits
