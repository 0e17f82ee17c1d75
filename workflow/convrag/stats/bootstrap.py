"""Percentile bootstrap confidence intervals for per-question scores.

Question-level scores (EM/F1 in {0..1}) are far from normal for the sample sizes we use, so
intervals come from resampling questions.  All resamples are drawn at once as an index
matrix ``rng.integers(0, n, size=(n_resamples, n))`` from ``np.random.default_rng(seed)``:
vectorised, and the same seed gives the same interval on any machine.  Comparisons between
two conditions on the SAME questions use a paired bootstrap (one index matrix for both),
which removes the between-question variance and gives much narrower intervals than
resampling the two conditions independently.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

__all__ = ["bootstrap_ci", "paired_bootstrap", "percentile_ci_by_group"]


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
