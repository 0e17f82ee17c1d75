"""Aptitude and unreliability over repeated runs (*LLMs Get Lost in Multi-Turn Conversation*).

For one question simulated N times, aptitude is the 90th percentile of its N scores (what
the model reaches in its better runs) and unreliability the gap between the 90th and the
10th percentile (how far apart its good and bad runs are). Percentiles use linear
interpolation between order statistics (numpy's default ``method="linear"``): for 5 runs
[0.2, 0.4, 0.6, 0.8, 1.0] the 90th percentile sits at rank 0.9 x 4 = 3.6, i.e.
0.8 + 0.6 x 0.2 = 0.92, the 10th at rank 0.4, i.e. 0.28, so unreliability is 0.64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["aptitude", "unreliability"]


def _scores(x) -> np.ndarray:
    arr = np.asarray(x, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError("aptitude/unreliability: no scores given")
    if not np.all(np.isfinite(arr)):
        raise ValueError("aptitude/unreliability: scores contain NaN or infinite values")
    return arr


def aptitude(scores, percentile: float = 90.0) -> float:
    """The ``percentile``-th percentile of the run scores (linear interpolation)."""
    return float(np.percentile(_scores(scores), percentile, method="linear"))


def unreliability(scores, high: float = 90.0, low: float = 10.0) -> float:
    """Percentile ``high`` minus percentile ``low`` of the run scores (linear interpolation)."""
    arr = _scores(scores)
    return float(np.percentile(arr, high, method="linear") - np.percentile(arr, low, method="linear"))
