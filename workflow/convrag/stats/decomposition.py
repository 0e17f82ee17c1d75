"""Kitagawa (1955) decomposition of a difference between two rates.

A reader refuses more often under retriever A than under B: is it because it refuses more
within each kind of context (rate effect), or because A returns more of the contexts it
refuses anyway, e.g. more insufficient ones (composition effect)? With strata i (e.g. the
content-label classes), stratum shares w (summing to 1 in each population) and stratum
rates r, the overall rates are R = sum_i w_i r_i and

    R_A - R_B = sum_i (r_Ai - r_Bi)(w_Ai + w_Bi)/2   (rate effect)
              + sum_i (w_Ai - w_Bi)(r_Ai + r_Bi)/2   (composition effect),

an exact identity (the two effects always sum to the total difference).

A stratum absent from one population (share 0) has no rate there. Convention: the missing
rate is taken equal to the other population's rate for that stratum, so the stratum adds
nothing to the rate effect (there is nothing to compare rates with) and its whole
contribution, w_Ai r_Ai (or -w_Bi r_Bi), goes to the composition effect; the identity still
holds, since a rate with weight 0 never enters R. A stratum absent from both contributes 0.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from convrag.errors import DataError

__all__ = ["kitagawa", "kitagawa_from_data"]

_TOL = 1e-9


def _as_series(x, name: str) -> pd.Series:
    if isinstance(x, pd.Series):
        s = x
    elif isinstance(x, Mapping):
        s = pd.Series(dict(x), dtype=object)
    else:
        raise DataError(f"kitagawa: {name} must map stratum -> value (dict or Series), got {type(x).__name__}")
    if not s.index.is_unique:
        raise DataError(f"kitagawa: {name} names a stratum twice")
    try:
        return pd.to_numeric(s.astype(object).where(s.notna(), np.nan), errors="raise").astype(float)
    except (TypeError, ValueError) as e:
        raise DataError(f"kitagawa: {name} holds a non-numeric value: {e}") from None


def kitagawa(rates_a: Mapping, shares_a: Mapping, rates_b: Mapping, shares_b: Mapping) -> dict:
    """Decompose R_A - R_B into rate and composition effects (all inputs: stratum -> value).

    A stratum missing from a shares mapping has share 0; a stratum with share 0 may have no
    rate (missing or NaN), and a rate given for it is not used (see the module docstring).
    Shares must be in [0, 1] and sum to 1 per population. Returns total, rate_effect,
    composition_effect, rate_a, rate_b (overall rates) and by_stratum (a DataFrame: stratum,
    share_a, share_b, rate_a, rate_b as given, rate_effect, composition_effect; strata in
    first-seen order).
    """
    ra, wa, rb, wb = (_as_series(x, n) for x, n in
                      ((rates_a, "rates_a"), (shares_a, "shares_a"), (rates_b, "rates_b"), (shares_b, "shares_b")))
    strata = list(dict.fromkeys([*wa.index, *wb.index, *ra.index, *rb.index]))
    wa, wb = wa.reindex(strata).fillna(0.0), wb.reindex(strata).fillna(0.0)
    ra, rb = ra.reindex(strata), rb.reindex(strata)
    for w, name in ((wa, "shares_a"), (wb, "shares_b")):
        if ((w < -_TOL) | (w > 1 + _TOL)).any():
            raise DataError(f"kitagawa: {name} has a share outside [0, 1]: {w[(w < 0) | (w > 1)].to_dict()}")
        if abs(w.sum() - 1.0) > 1e-6:
            raise DataError(f"kitagawa: {name} sums to {w.sum():.6g}, not 1")
    for r, w, name in ((ra, wa, "rates_a"), (rb, wb, "rates_b")):
        bad = [s for s in strata if w[s] > 0 and not np.isfinite(r[s])]
        if bad:
            raise DataError(f"kitagawa: {name} has no finite rate for strata {bad}, which have a positive share")
    # the convention above: a rate missing where the share is 0 borrows the other population's
    ra_f = ra.where(wa > 0, rb.where(wb > 0))  # NaN only when the stratum is absent from both
    rb_f = rb.where(wb > 0, ra_f)
    ra_f, rb_f = ra_f.fillna(0.0), rb_f.fillna(0.0)  # absent from both: contributes 0 either way
    rate_eff = (ra_f - rb_f) * (wa + wb) / 2.0
    comp_eff = (wa - wb) * (ra_f + rb_f) / 2.0
    rate_a, rate_b = float((wa * ra_f).sum()), float((wb * rb_f).sum())
    by = pd.DataFrame({"stratum": strata, "share_a": wa.to_numpy(), "share_b": wb.to_numpy(),
                       "rate_a": ra.to_numpy(), "rate_b": rb.to_numpy(),
                       "rate_effect": rate_eff.to_numpy(), "composition_effect": comp_eff.to_numpy()})
    return {"total": rate_a - rate_b, "rate_effect": float(rate_eff.sum()),
            "composition_effect": float(comp_eff.sum()), "rate_a": rate_a, "rate_b": rate_b, "by_stratum": by}


def _rates_shares(outcome, strata, name: str) -> tuple[dict, dict, int]:
    y = np.asarray(outcome, dtype=float)
    s = list(strata)
    if y.ndim != 1 or y.size != len(s):
        raise DataError(f"kitagawa_from_data: outcome_{name} has {y.size} values for {len(s)} strata labels")
    if y.size == 0:
        raise DataError(f"kitagawa_from_data: population {name} is empty")
    if not np.all(np.isfinite(y)):
        raise DataError(f"kitagawa_from_data: outcome_{name} has NaN or infinite values")
    df = pd.DataFrame({"y": y, "s": pd.Series(s, dtype=object)})
    if df["s"].isna().any():
        raise DataError(f"kitagawa_from_data: strata_{name} has missing labels")
    g = df.groupby("s", sort=False)["y"]
    return g.mean().to_dict(), (g.size() / y.size).to_dict(), int(y.size)


def kitagawa_from_data(outcome_a, strata_a: Sequence, outcome_b, strata_b: Sequence) -> dict:
    """``kitagawa`` from item-level data: outcome (e.g. refused, 0/1) and stratum per item.

    Rates are the stratum means of the outcome, shares the stratum item shares, in each
    population separately; ``n_a``/``n_b`` are added to the result.
    """
    ra, wa, na = _rates_shares(outcome_a, strata_a, "a")
    rb, wb, nb = _rates_shares(outcome_b, strata_b, "b")
    return {**kitagawa(ra, wa, rb, wb), "n_a": na, "n_b": nb}
