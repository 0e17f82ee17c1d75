"""Percentile bootstrap confidence intervals for per-question scores.

Question-level scores (EM/F1 in {0..1}) are far from normal for the sample sizes we use, so
intervals come from resampling questions.  All resamples are drawn at once as an index
matrix ``rng.integers(0, n, size=(n_resamples, n))`` from ``np.random.default_rng(seed)``:
vectorised, and the same seed gives the same interval on any machine.  Comparisons between
two conditions on the SAME questions use a paired bootstrap (one index matrix for both),
which removes the between-question variance and gives much narrower intervals than
resampling the two conditions independently.

Items are often not independent: the turns of one dialogue (MTRAG-UN, CORAL, RECOR) or the
repeated runs of one question share a topic and a difficulty.  Resampling items then gives
intervals that are too narrow, so ``cluster_bootstrap_ci`` / ``paired_cluster_bootstrap``
resample whole clusters (dialogues) with replacement, drawing the index matrix over clusters
the same way (``integers(0, n_clusters, size=(n_resamples, n_clusters))``); the statistic is
the mean over all items of the drawn clusters (sum of their sums / sum of their counts).
Clusters are numbered in sorted label order, so the row order of the data does not matter.
``bootstrap_statistic`` does the same for any statistic (e.g. an AUROC difference).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "bootstrap_ci",
    "bootstrap_statistic",
    "cluster_bootstrap_ci",
    "paired_bootstrap",
    "paired_cluster_bootstrap",
    "percentile_ci_by_group",
]


def _as_scores(x, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError(f"bootstrap: {name} is empty; need at least one score")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"bootstrap: {name} contains NaN or infinite values")
    return arr


def _check_params(n_resamples: int, alpha: float) -> None:
    if int(n_resamples) < 1:
        raise ValueError(f"bootstrap: n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"bootstrap: alpha must be in (0, 1), got {alpha}")


def _resample_means(x: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    n = x.size
    idx = np.random.default_rng(seed).integers(0, n, size=(int(n_resamples), n))
    return x[idx].mean(axis=1)


def _interval(means: np.ndarray, alpha: float) -> tuple[float, float]:
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def bootstrap_ci(x, n_resamples: int = 1000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Mean of ``x`` with a (1 - alpha) percentile bootstrap interval."""
    _check_params(n_resamples, alpha)
    x = _as_scores(x, "x")
    lo, hi = _interval(_resample_means(x, n_resamples, seed), alpha)
    return {"mean": float(x.mean()), "ci_low": lo, "ci_high": hi, "n": int(x.size)}


def paired_bootstrap(a, b, n_resamples: int = 1000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Paired bootstrap for mean(a - b); ``a[i]`` and ``b[i]`` must score the same question.

    ``mean_diff``/``ci_*`` are for a - b; ``rel_change`` is (mean_b - mean_a) / mean_a, i.e.
    the relative change going from condition a (e.g. FULL) to b (e.g. SHARDED); NaN when
    mean_a is 0.
    """
    _check_params(n_resamples, alpha)
    a, b = _as_scores(a, "a"), _as_scores(b, "b")
    if a.size != b.size:
        raise ValueError(
            f"paired_bootstrap: a and b must have equal length (same questions), got {a.size} and {b.size}"
        )
    lo, hi = _interval(_resample_means(a - b, n_resamples, seed), alpha)
    mean_a, mean_b = float(a.mean()), float(b.mean())
    rel = (mean_b - mean_a) / mean_a if mean_a != 0 else float("nan")
    return {
        "mean_a": mean_a,
        "mean_b": mean_b,
        "mean_diff": float((a - b).mean()),
        "ci_low": lo,
        "ci_high": hi,
        "n": int(a.size),
        "rel_change": rel,
    }


def percentile_ci_by_group(
    df: pd.DataFrame,
    group_cols: str | Sequence[str],
    value_col: str,
    n_resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """One row per group: group columns + mean, ci_low, ci_high, n (groups sorted).

    Every group uses the same ``seed`` so a group's interval does not depend on which other
    groups are in the table.
    """
    cols = [group_cols] if isinstance(group_cols, str) else list(group_cols)
    missing = [c for c in [*cols, value_col] if c not in df.columns]
    if missing:
        raise ValueError(f"percentile_ci_by_group: missing columns {missing}; have {list(df.columns)}")
    if df.empty:
        raise ValueError("percentile_ci_by_group: empty DataFrame")
    rows = []
    for key, grp in df.groupby(cols, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        res = bootstrap_ci(grp[value_col].to_numpy(), n_resamples=n_resamples, seed=seed, alpha=alpha)
        rows.append({**dict(zip(cols, key)), **res})
    return pd.DataFrame(rows, columns=[*cols, "mean", "ci_low", "ci_high", "n"])


def _cluster_codes(clusters, n: int) -> np.ndarray:
    """Cluster labels -> codes 0..G-1 in sorted label order (so row order does not matter)."""
    labels = list(clusters)
    if len(labels) != n:
        raise ValueError(f"bootstrap: clusters must have one label per item, got {len(labels)} for {n} items")
    codes, _ = pd.factorize(pd.Series(labels, dtype=object), sort=True)
    if (codes < 0).any():
        raise ValueError("bootstrap: clusters contain missing labels (None/NaN)")
    return codes


def _cluster_means(x: np.ndarray, clusters, n_resamples: int, seed: int) -> tuple[np.ndarray, int]:
    """Means of ``n_resamples`` cluster resamples, vectorised via per-cluster sums and counts."""
    codes = _cluster_codes(clusters, x.size)
    sums, counts = np.bincount(codes, weights=x), np.bincount(codes)
    g = sums.size
    idx = np.random.default_rng(seed).integers(0, g, size=(int(n_resamples), g))
    return sums[idx].sum(axis=1) / counts[idx].sum(axis=1), g


def cluster_bootstrap_ci(values, clusters, n_resamples: int = 1000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Item mean of ``values`` with a percentile interval from resampling whole clusters.

    With one item per cluster this is exactly ``bootstrap_ci`` (same seed, same numbers).
    With a single cluster every resample is the data itself, so the interval has zero
    width: between-cluster variance cannot be estimated from one cluster.
    """
    _check_params(n_resamples, alpha)
    x = _as_scores(values, "values")
    means, g = _cluster_means(x, clusters, n_resamples, seed)
    lo, hi = _interval(means, alpha)
    return {"mean": float(x.mean()), "ci_low": lo, "ci_high": hi, "n": int(x.size), "n_clusters": g}


def paired_cluster_bootstrap(
    a, b, clusters, n_resamples: int = 1000, seed: int = 0, alpha: float = 0.05
) -> dict:
    """``paired_bootstrap`` resampling clusters: a[i], b[i] score the same item, in cluster[i]."""
    _check_params(n_resamples, alpha)
    a, b = _as_scores(a, "a"), _as_scores(b, "b")
    if a.size != b.size:
        raise ValueError(
            f"paired_cluster_bootstrap: a and b must have equal length (same items), got {a.size} and {b.size}"
        )
    means, g = _cluster_means(a - b, clusters, n_resamples, seed)
    lo, hi = _interval(means, alpha)
    mean_a, mean_b = float(a.mean()), float(b.mean())
    return {
        "mean_a": mean_a,
        "mean_b": mean_b,
        "mean_diff": float((a - b).mean()),
        "ci_low": lo,
        "ci_high": hi,
        "n": int(a.size),
        "rel_change": (mean_b - mean_a) / mean_a if mean_a != 0 else float("nan"),
        "n_clusters": g,
    }


def bootstrap_statistic(
    data_arrays: Sequence,
    statistic: Callable[..., float],
    n_resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    clusters=None,
) -> dict:
    """Percentile bootstrap of ``statistic(*arrays)`` for any statistic of aligned arrays.

    ``data_arrays`` is a list of equal-length 1-D arrays (``[x]`` for one), resampled by row
    together (or by whole cluster when ``clusters`` is given, one label per row), e.g.
    ``[labels, scores_a, scores_b]`` with an AUROC difference.  Resamples where the statistic
    is NaN (say, a resample holding one class only) are skipped and ``n_resamples_used``
    says how many remained; make the statistic return NaN for such cases rather than raise,
    as its exceptions propagate.  The rows/clusters index matrix is drawn as in
    ``bootstrap_ci``/``cluster_bootstrap_ci``, so with ``statistic=np.mean`` the interval
    is the same.  Returns estimate, ci_low, ci_high (NaN if no resample was usable), n,
    n_resamples_used, and n_clusters when clusters are given.
    """
    _check_params(n_resamples, alpha)
    if isinstance(data_arrays, np.ndarray) or not isinstance(data_arrays, Sequence) or not data_arrays:
        raise ValueError("bootstrap_statistic: data_arrays must be a non-empty list of arrays ([x] for one)")
    arrays = [np.asarray(arr) for arr in data_arrays]
    n = arrays[0].shape[0] if arrays[0].ndim else 0
    if n == 0 or any(arr.ndim != 1 or arr.shape[0] != n for arr in arrays):
        raise ValueError(
            f"bootstrap_statistic: need non-empty 1-D arrays of equal length, got shapes {[a.shape for a in arrays]}"
        )
    rng = np.random.default_rng(seed)
    if clusters is None:
        rows = list(rng.integers(0, n, size=(int(n_resamples), n)))
    else:
        codes = _cluster_codes(clusters, n)
        order = np.argsort(codes, kind="stable")  # rows grouped by cluster
        counts = np.bincount(codes)
        starts = np.cumsum(counts) - counts
        g = counts.size
        rows = []
        for pick in rng.integers(0, g, size=(int(n_resamples), g)):
            lens = counts[pick]  # rows of the drawn clusters, concatenated
            offsets = np.repeat(starts[pick] - (np.cumsum(lens) - lens), lens) + np.arange(lens.sum())
            rows.append(order[offsets])
    stats = np.array([float(statistic(*(arr[r] for arr in arrays))) for r in rows])
    stats = stats[~np.isnan(stats)]
    lo, hi = _interval(stats, alpha) if stats.size else (float("nan"), float("nan"))
    out = {
        "estimate": float(statistic(*arrays)),
        "ci_low": lo,
        "ci_high": hi,
        "n": int(n),
        "n_resamples_used": int(stats.size),
    }
    if clusters is not None:
        out["n_clusters"] = int(g)
    return out
