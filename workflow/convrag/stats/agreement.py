"""Inter-rater agreement: raw agreement, Cohen's kappa, Fleiss' kappa and Gwet's AC1.

The "Worse Labels" study compares content labels from several judges (and a blind audit):
Cohen's kappa between two labellers, Fleiss' kappa over the small-judge panel, raw
agreement, and Gwet's AC1, which stays informative when one label dominates (the kappa
"paradox": high agreement, low kappa).

Inputs
------
* two raters: ``cohen_kappa(rater_a, rater_b, categories=...)``, two aligned label
  sequences; an item where either label is missing (None / NaN / pd.NA) is dropped and
  counted in ``n_dropped``.
* several raters: an items x raters table (a DataFrame or a list of rows), missing ratings
  allowed. An item with fewer than 2 ratings carries no agreement information and is
  dropped (counted in ``n_dropped``). Gwet's Handbook (2014) and his irrCAC keep such items
  in the chance term (the category shares pi_k average over every item rated at least
  once); ``single_ratings="chance"`` does that and reproduces his published numbers, the
  default ``"drop"`` leaves them out everywhere. Items with no rating at all never count.

``categories`` is always given explicitly: a category no rater used still counts (it
changes Gwet's AC1, whose chance term divides by q - 1), and a label outside the list is an
error naming it and its item, not a silent new category.

Formulas (n items kept, r_i ratings of item i, r_ik of them in category k, q categories):
p_o = mean_i sum_k r_ik (r_ik - 1) / (r_i (r_i - 1)) (for two raters: the share of items
on which they agree); pi_k = mean_i r_ik / r_i; Fleiss p_e = sum_k pi_k^2 (Fleiss 1971;
the generalisation to unequal r_i as in Gwet 2014); AC1 p_e = sum_k pi_k (1 - pi_k) / (q - 1)
(Gwet 2008); Cohen p_e = sum_k p_ak p_bk from each rater's own marginals (Cohen 1960,
computed by scikit-learn's ``cohen_kappa_score``). Every coefficient is (p_o - p_e) / (1 - p_e).
Fleiss' kappa on complete data (equal r_i) is statsmodels' ``fleiss_kappa`` over
``aggregate_raters``; with unequal r_i (which statsmodels does not take) the generalised
formula above, which equals it on complete data.

Undefined values are NaN, not exceptions, so a sweep over many labeller pairs does not
stop: kappa (Cohen, Fleiss) is NaN when p_e = 1, i.e. every kept rating is the same
category; AC1 is NaN when fewer than 2 categories are given (q - 1 = 0), but defined (= p_o)
when the data use one category of several; everything is NaN when no item is kept.

Each function returns a dict: value, p_observed, p_expected, n_items (kept), n_dropped.
"""

from __future__ import annotations

from typing import Literal, Sequence

import numpy as np
import pandas as pd

from convrag.errors import ConfigError, DataError

__all__ = ["cohen_kappa", "fleiss_kappa", "gwet_ac1", "raw_agreement", "rating_counts"]

SingleRatings = Literal["drop", "chance"]
_NAN = float("nan")


def _categories(categories: Sequence, where: str) -> list:
    if isinstance(categories, (str, bytes)) or categories is None:
        raise ConfigError(f"{where}: categories must be a list of labels, got {categories!r}")
    cats = list(categories)
    if not cats:
        raise ConfigError(f"{where}: categories is empty; list every possible label")
    if len(set(cats)) != len(cats):
        raise ConfigError(f"{where}: categories has duplicates: {cats}")
    return cats


def _is_missing(x) -> bool:
    return x is None or (not isinstance(x, (str, bytes)) and bool(pd.isna(x)))


def _rows(ratings, where: str) -> list[list]:
    if isinstance(ratings, pd.DataFrame):
        return ratings.astype(object).values.tolist()
    if isinstance(ratings, np.ndarray):
        if ratings.ndim != 2:
            raise DataError(f"{where}: ratings must be an items x raters table, got shape {ratings.shape}")
        return ratings.tolist()
    return [list(r) for r in ratings]


def rating_counts(ratings, categories: Sequence, *, where: str = "rating_counts") -> np.ndarray:
    """Items x categories count table (r_ik) of an items x raters table; missing ratings skipped.

    A label outside ``categories`` raises ``DataError`` naming the label, its item (row) and
    rater (column), so a typo ("No" vs "no") is not counted as disagreement.
    """
    cats = _categories(categories, where)
    code = {c: k for k, c in enumerate(cats)}
    rows = _rows(ratings, where)
    counts = np.zeros((len(rows), len(cats)), dtype=float)
    for i, row in enumerate(rows):
        for j, label in enumerate(row):
            if _is_missing(label):
                continue
            k = code.get(label)
            if k is None:
                raise DataError(f"{where}: item {i}, rater {j}: label {label!r} is not one of the categories {cats}")
            counts[i, k] += 1
    return counts


def _result(p_o: float, p_e: float, n_items: int, n_dropped: int) -> dict:
    value = (p_o - p_e) / (1.0 - p_e) if np.isfinite(p_o) and np.isfinite(p_e) and p_e < 1.0 else _NAN
    return {"value": float(value), "p_observed": float(p_o), "p_expected": float(p_e),
            "n_items": int(n_items), "n_dropped": int(n_dropped)}


def _multi(ratings, categories, single_ratings: str, where: str):
    """Count table split into: items kept for p_o (>= 2 ratings), items for pi_k, n_dropped."""
    if single_ratings not in ("drop", "chance"):
        raise ConfigError(f"{where}: single_ratings must be 'drop' or 'chance', got {single_ratings!r}")
    counts = rating_counts(ratings, categories, where=where)
    r = counts.sum(axis=1)
    kept = counts[r >= 2]
    for_pi = counts[r >= 1] if single_ratings == "chance" else kept
    return kept, for_pi, int((r < 2).sum())


def _p_observed(kept: np.ndarray) -> float:
    if kept.shape[0] == 0:
        return _NAN
    r = kept.sum(axis=1)
    return float(np.mean((kept * (kept - 1)).sum(axis=1) / (r * (r - 1))))


def _pi(for_pi: np.ndarray) -> np.ndarray:
    if for_pi.shape[0] == 0:
        return np.full(for_pi.shape[1], np.nan)
    return (for_pi / for_pi.sum(axis=1, keepdims=True)).mean(axis=0)


def raw_agreement(ratings, categories: Sequence, *, single_ratings: SingleRatings = "drop") -> dict:
    """Observed agreement p_o: the share of agreeing rater pairs per item, averaged over items.

    For two raters this is the share of items with the same label. ``p_expected`` is 0 (no
    chance correction), so ``value`` equals ``p_observed``.
    """
    kept, _, n_dropped = _multi(ratings, categories, single_ratings, "raw_agreement")
    p_o = _p_observed(kept)
    return {"value": p_o, "p_observed": p_o, "p_expected": 0.0, "n_items": int(kept.shape[0]),
            "n_dropped": n_dropped}


def fleiss_kappa(ratings, categories: Sequence, *, single_ratings: SingleRatings = "drop") -> dict:
    """Fleiss' (1971) kappa over an items x raters table; NaN when every rating is one category.

    Complete data (every kept item has the same number of ratings) goes through statsmodels'
    ``aggregate_raters`` + ``fleiss_kappa``; otherwise the generalised formula (Gwet 2014).
    """
    from statsmodels.stats import inter_rater

    kept, for_pi, n_dropped = _multi(ratings, categories, single_ratings, "fleiss_kappa")
    p_o, pi = _p_observed(kept), _pi(for_pi)
    p_e = float((pi * pi).sum())
    out = _result(p_o, p_e, kept.shape[0], n_dropped)
    r = kept.sum(axis=1)
    complete = kept.shape[0] > 0 and np.all(r == r[0]) and for_pi.shape[0] == kept.shape[0]
    if complete and p_e < 1.0:
        # statsmodels' own path: rater-coded table -> counts -> kappa (same numbers, checked in tests)
        codes = np.vstack([np.repeat(np.arange(kept.shape[1]), row.astype(int)) for row in kept])
        table, _ = inter_rater.aggregate_raters(codes, n_cat=kept.shape[1])
        out["value"] = float(inter_rater.fleiss_kappa(table, method="fleiss"))
    return out


def gwet_ac1(ratings, categories: Sequence, *, single_ratings: SingleRatings = "drop") -> dict:
    """Gwet's (2008) AC1 over an items x raters table (two or more raters, missing allowed).

    Chance agreement is sum_k pi_k (1 - pi_k) / (q - 1), q = len(categories): NaN when fewer
    than 2 categories are given. Implemented here: the irrCAC Python package pins
    scipy==1.12 and pandas<3 and cannot be installed beside this project's stack.
    """
    cats = _categories(categories, "gwet_ac1")
    kept, for_pi, n_dropped = _multi(ratings, cats, single_ratings, "gwet_ac1")
    p_o, pi = _p_observed(kept), _pi(for_pi)
    q = len(cats)
    p_e = float((pi * (1.0 - pi)).sum() / (q - 1)) if q >= 2 else _NAN
    return _result(p_o, p_e, kept.shape[0], n_dropped)


def cohen_kappa(rater_a: Sequence, rater_b: Sequence, categories: Sequence) -> dict:
    """Cohen's (1960) kappa of two aligned label sequences (scikit-learn ``cohen_kappa_score``).

    Items where either label is missing are dropped (``n_dropped``). NaN when no item is left
    or when both raters use one and the same category throughout (p_e = 1).
    """
    from sklearn.metrics import cohen_kappa_score

    cats = _categories(categories, "cohen_kappa")
    a, b = list(rater_a), list(rater_b)
    if len(a) != len(b):
        raise DataError(f"cohen_kappa: rater_a has {len(a)} labels, rater_b {len(b)}; they must rate the same items")
    rating_counts(list(zip(a, b)), cats, where="cohen_kappa")  # validates labels, naming item and rater
    pairs = [(x, y) for x, y in zip(a, b) if not (_is_missing(x) or _is_missing(y))]
    n, n_dropped = len(pairs), len(a) - len(pairs)
    if n == 0:
        return _result(_NAN, _NAN, 0, n_dropped)
    xa, xb = [x for x, _ in pairs], [y for _, y in pairs]
    p_o = float(np.mean([x == y for x, y in pairs]))
    pa = np.array([xa.count(c) for c in cats], dtype=float) / n
    pb = np.array([xb.count(c) for c in cats], dtype=float) / n
    p_e = float((pa * pb).sum())
    out = _result(p_o, p_e, n, n_dropped)
    if p_e < 1.0:
        out["value"] = float(cohen_kappa_score(xa, xb, labels=cats))
    return out
