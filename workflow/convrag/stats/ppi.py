"""Prediction-powered (judge-corrected) means: an LLM judge's mean corrected by human labels.

Several studies score every item with an LLM judge and have human labels for some of them (MTRAG's
human evaluations, the worse_labels audit sample). The judge mean alone inherits the judge's bias;
the human-only mean is unbiased but rests on few items. Prediction-powered inference (PPI,
Angelopoulos et al. 2023, "Prediction-powered inference", Science 382) combines them: the judge
mean over all items plus the mean judge-vs-human residual on the labelled items (as ARES does),
with a normal interval. It is unbiased whatever the judge's error, and narrower than the
human-only interval when the judge tracks the humans. ``ppi_table`` puts judge mean, PPI estimate
and human-only mean side by side, per system and for paired differences between systems, so a
reader sees how much of a judge-based difference survives the judge's error.

**Which items enter the judge mean: all of them.** ``judge_all`` holds the judge's score of EVERY
item, the labelled ones included (what ARES and most applications do). The PPI paper's
disjoint-sets form (judge mean over the unlabelled items only) throws away the judge's scores of
the labelled items: with a perfect judge it returns the mean of the N - n unlabelled items
instead of all N. With all items, n labelled of N and judge f, human Y, weight lam:

    estimate = lam * mean_N(f) + mean_n(Y - lam * f)
    se^2     = s^2_n(Y) / N + (1/n - 1/N) * s^2_n(Y - lam * f)

The variance is that of a double-sampling difference estimator (cf. Cochran 1977, ch. 12): what
a human mean over all N items would have, plus the extra of estimating the residual on n of them.
The labelled items are inside the judge mean, so the two parts are correlated; the formula
accounts for that (PPI's s^2(f)/N + s^2(Y - f)/n would not, off by 2 Cov(f, Y - f)/N, which
matters when n is a sizeable share of N). Both terms are non-negative, and with n = N it is the
classical s^2(Y)/n. Sample variances use ddof=1; the interval is normal (z), for the PPI
and the human-only interval alike, so the two differ only in the information they use.

**Power tuning (PPI++, Angelopoulos, Duchi & Zrnic 2023, arXiv:2311.01453).** ``tuned=False``:
lam = 1 (plain PPI). ``tuned=True``: lam minimises se^2 above, i.e. s^2(Y - lam f), which is the
labelled-set regression slope Cov(f, Y) / Var(f), clipped to [0, 1] as PPI++ does (0: human-only
mean, 1: plain PPI); a judge that is constant on the labelled items gets lam = 0.

**Assumptions.** The labelled items are a uniformly random subset of the judged items (a set
picked for being hard or disputed breaks the unbiasedness); judge and human scores are on the same
scale (the residual is their difference; rescale first, e.g. 1-4 to 0-1); items are independent
(turns of one dialogue are not: the interval is then too narrow, as for any item-level interval).

**Stratified labelling** (``ppi_mean_stratified``). When the labelled items are drawn per stratum
(e.g. the worse_labels audit: n_h contexts of each retriever and qrels class, not in proportion to
the stratum's size), the labelled set is not a uniform sample of all items and one pooled PPI is
biased. Within a stratum it is uniform, so PPI per stratum is valid, and the strata combine with
the weights of their sizes, w_h = N_h / N (N_h: judged items of stratum h):

    estimate = sum_h w_h * estimate_h
    se^2     = sum_h w_h^2 * se_h^2

(the stratified estimator, Cochran 1977 ch. 5, with each stratum's PPI in place of its mean; the
strata are sampled independently, so their variances add). The judge-only and human-only means
are stratified the same way (judge: sum w_h mean_h(f), equal to the plain mean over all N items;
human-only: sum w_h mean_n_h(Y) with se^2 = sum w_h^2 s_h^2(Y) / n_h). With ``tuned=True`` each
stratum gets its own lam (the variance is a sum over strata, so per-stratum minimisation is the
joint one). Every stratum needs at least 2 labelled items.

**Why not the ``ppi-python`` package (import ``ppi_py``).** Checked (0.2.3, which installs here):
its interval is the disjoint-sets one (lam^2 s^2(f)/N + s^2(Y - lam f)/n, ddof=0). Given all items
as its "unlabelled" set it leaves out the covariance term above: in a simulation with n/N = 1/4
(judge 0.5 Y + 0.2 + noise, 4000 runs) its se was 12% too small and its 95% interval covered 91%,
this module's 94%. Fed the disjoint sets, its estimate equals this one at its lam = ours * (1 - n/N).
It also pulls numba and gdown (with beautifulsoup4, soupsieve and PySocks, not otherwise in this
environment) and adds about 0.5 s to every import, for a closed form of a few lines of numpy.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from convrag.errors import ConfigError, DataError

__all__ = ["PPIResult", "StratifiedPPIResult", "TABLE_COLUMNS", "ppi_mean", "ppi_mean_difference",
           "ppi_mean_stratified", "ppi_table"]


@dataclass(frozen=True)
class PPIResult:
    """A PPI mean with its interval, beside the judge-only and human-only means it combines.

    ``judge_low``/``judge_high``: the judge-only interval (judge mean +- z s/sqrt(N)), which treats
    the judge as the truth; shown so a table can put the judge's apparent certainty beside PPI's.
    """

    estimate: float
    low: float
    high: float
    se: float
    n_labelled: int
    n_all: int
    judge_mean: float
    human_mean: float
    human_low: float
    human_high: float
    lam: float
    judge_low: float
    judge_high: float


def _scores(x, name: str, where: str) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{where}: {name} must be numeric scores ({exc})") from None
    if arr.ndim == 0 or sum(d > 1 for d in arr.shape) > 1:
        raise DataError(f"{where}: {name} must be one score per item, got shape {arr.shape}")
    arr = arr.ravel()
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise DataError(f"{where}: {name} has {bad.size} NaN or infinite value(s), first at position {bad[0]}; "
                        "every judged item needs a judge score and every labelled item a human score")
    return arr


def _z(alpha: float, where: str) -> float:
    if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 1.0):
        raise ConfigError(f"{where}: alpha must be in (0, 1), got {alpha!r}")
    return float(stats.norm.ppf(1.0 - alpha / 2.0))


def ppi_mean(judge_all, judge_labelled, human_labelled, alpha: float = 0.05, tuned: bool = False, *,
             where: str = "ppi_mean") -> PPIResult:
    """PPI estimate of the human mean from judge scores of ALL items and human labels on a subset.

    ``judge_all``: the judge's score of every item, labelled ones included (see the module
    docstring for why); ``judge_labelled``/``human_labelled``: aligned judge and human scores of
    the labelled items. ``where`` prefixes error messages (e.g. the system's name).
    """
    f_all = _scores(judge_all, "judge_all", where)
    f = _scores(judge_labelled, "judge_labelled", where)
    y = _scores(human_labelled, "human_labelled", where)
    z = _z(alpha, where)
    if y.size == 0:
        raise DataError(f"{where}: no labelled items (human_labelled is empty); PPI needs human labels")
    if f.size != y.size:
        raise DataError(f"{where}: judge_labelled has {f.size} scores but human_labelled {y.size}; "
                        "they must be the judge and human scores of the same labelled items")
    if y.size < 2:
        raise DataError(f"{where}: only 1 labelled item; the residual's variance needs at least 2")
    n, n_all = int(y.size), int(f_all.size)
    if n_all < n:
        raise DataError(f"{where}: judge_all has {n_all} items but {n} are labelled; judge_all must hold "
                        "every judged item, the labelled ones included")
    lam = 1.0
    if tuned:
        var_f = float(np.var(f, ddof=1))
        lam = float(np.clip(np.cov(f, y, ddof=1)[0, 1] / var_f, 0.0, 1.0)) if var_f > 0 else 0.0
    resid = y - lam * f
    estimate = lam * float(f_all.mean()) + float(resid.mean())
    var_y = float(np.var(y, ddof=1))
    se = math.sqrt(max(var_y / n_all + (1.0 / n - 1.0 / n_all) * float(np.var(resid, ddof=1)), 0.0))
    human_mean, human_se = float(y.mean()), math.sqrt(var_y / n)
    judge_mean = float(f_all.mean())
    judge_se = math.sqrt(float(np.var(f_all, ddof=1)) / n_all) if n_all > 1 else math.nan
    return PPIResult(
        estimate=estimate, low=estimate - z * se, high=estimate + z * se, se=se, n_labelled=n, n_all=n_all,
        judge_mean=judge_mean, human_mean=human_mean, human_low=human_mean - z * human_se,
        human_high=human_mean + z * human_se, lam=lam, judge_low=judge_mean - z * judge_se,
        judge_high=judge_mean + z * judge_se,
    )


@dataclass(frozen=True)
class StratifiedPPIResult(PPIResult):
    """``ppi_mean_stratified``'s result: the combined estimate (``lam``: the strata's common lam,
    NaN when tuning gave them different ones), each stratum's ``PPIResult`` and weight N_h / N."""

    strata: tuple = ()
    weights: tuple = ()
    names: tuple = ()


def ppi_mean_stratified(strata, alpha: float = 0.05, tuned: bool = False, *,
                        where: str = "ppi_mean_stratified") -> StratifiedPPIResult:
    """Stratified PPI: ``ppi_mean`` within each stratum, combined with weights N_h / N.

    ``strata``: a mapping ``name -> (judge_all, judge_labelled, human_labelled)`` (or a sequence of
    such triples, named by position), each as ``ppi_mean`` takes them for that stratum alone:
    the judge's score of every judged item of the stratum, and the judge and human scores of the
    stratum's labelled items, a uniform sample of that stratum. A stratum with no items at all
    (both empty) is left out; any other stratum needs at least 2 labelled items (a DataError
    naming it). See the module docstring for the formulas.
    """
    z = _z(alpha, where)
    named = list(strata.items()) if hasattr(strata, "items") else list(enumerate(strata))
    parts = []
    for name, triple in named:
        try:
            f_all, f_lab, y_lab = triple
        except (TypeError, ValueError):
            raise DataError(f"{where}: stratum {name!r} must be (judge_all, judge_labelled, human_labelled)") from None
        sw = f"{where}: stratum {name!r}"
        f_all, f_lab, y_lab = _scores(f_all, "judge_all", sw), _scores(f_lab, "judge_labelled", sw), \
            _scores(y_lab, "human_labelled", sw)
        if f_all.size == 0 and y_lab.size == 0:
            continue
        parts.append((name, f_all, y_lab, ppi_mean(f_all, f_lab, y_lab, alpha, tuned, where=sw)))
    if not parts:
        raise DataError(f"{where}: no stratum has any item")
    n_all = sum(r.n_all for *_, r in parts)
    w = np.array([r.n_all / n_all for *_, r in parts])
    est = float(np.dot(w, [r.estimate for *_, r in parts]))
    se = math.sqrt(float(np.dot(w**2, [r.se**2 for *_, r in parts])))
    judge_mean = float(np.dot(w, [r.judge_mean for *_, r in parts]))
    judge_var = float(np.dot(w**2, [np.var(f, ddof=1) / f.size if f.size > 1 else 0.0 for _, f, _, _ in parts]))
    human_mean = float(np.dot(w, [r.human_mean for *_, r in parts]))
    human_se = math.sqrt(float(np.dot(w**2, [np.var(y, ddof=1) / y.size for _, _, y, _ in parts])))
    lams = {r.lam for *_, r in parts}
    judge_se = math.sqrt(judge_var) if n_all > 1 else math.nan
    return StratifiedPPIResult(
        estimate=est, low=est - z * se, high=est + z * se, se=se, n_labelled=sum(r.n_labelled for *_, r in parts),
        n_all=n_all, judge_mean=judge_mean, human_mean=human_mean, human_low=human_mean - z * human_se,
        human_high=human_mean + z * human_se, lam=lams.pop() if len(lams) == 1 else math.nan,
        judge_low=judge_mean - z * judge_se, judge_high=judge_mean + z * judge_se,
        strata=tuple(r for *_, r in parts), weights=tuple(float(x) for x in w), names=tuple(n for n, *_ in parts),
    )


def ppi_mean_difference(judge_all_a, judge_all_b, judge_labelled_a, judge_labelled_b, human_labelled_a,
                        human_labelled_b, alpha: float = 0.05, tuned: bool = False, *,
                        where: str = "ppi_mean_difference") -> PPIResult:
    """PPI estimate of mean(A) - mean(B) for two systems judged (and labelled) on the SAME items.

    Paired: PPI on the per-item differences, so the between-item variance cancels as in a paired
    test. Each pair of arrays must be aligned item by item (``judge_all_a[i]`` and
    ``judge_all_b[i]`` score the same item).
    """
    pairs = {"judge_all": (judge_all_a, judge_all_b), "judge_labelled": (judge_labelled_a, judge_labelled_b),
             "human_labelled": (human_labelled_a, human_labelled_b)}
    diffs = {}
    for name, (a, b) in pairs.items():
        xa, xb = _scores(a, f"{name}_a", where), _scores(b, f"{name}_b", where)
        if xa.size != xb.size:
            raise DataError(f"{where}: {name}_a has {xa.size} scores but {name}_b {xb.size}; a paired "
                            "difference needs both systems scored on the same items")
        diffs[name] = xa - xb
    return ppi_mean(diffs["judge_all"], diffs["judge_labelled"], diffs["human_labelled"], alpha, tuned, where=where)


def _correlations(f: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Pearson and Spearman of judge vs human on the labelled items; NaN when either is constant."""
    if f.size < 2 or np.ptp(f) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan
    return float(stats.pearsonr(f, y).statistic), float(stats.spearmanr(f, y).statistic)


def _row(res: PPIResult, f_lab: np.ndarray, y_lab: np.ndarray, kind: str, system: str, baseline) -> dict:
    pearson, spearman = _correlations(f_lab, y_lab)
    return {"row": kind, "system": system, "baseline": baseline, "judge_mean": res.judge_mean,
            "judge_low": res.judge_low, "judge_high": res.judge_high, "estimate": res.estimate, "low": res.low,
            "high": res.high, "se": res.se, "human_mean": res.human_mean, "human_low": res.human_low,
            "human_high": res.human_high, "n_labelled": res.n_labelled, "n_all": res.n_all, "lam": res.lam,
            "judge_bias": float(np.mean(f_lab - y_lab)), "pearson_r": pearson, "spearman_rho": spearman}


TABLE_COLUMNS = ["row", "system", "baseline", "judge_mean", "judge_low", "judge_high", "estimate", "low", "high",
                 "se", "human_mean", "human_low", "human_high", "n_labelled", "n_all", "lam", "judge_bias",
                 "pearson_r", "spearman_rho"]


def ppi_table(df: pd.DataFrame, system: str, judge: str, human: str, item: str = "task_id", *,
              pairs: Sequence[tuple[str, str]] | Literal["all"] | None = None, alpha: float = 0.05,
              tuned: bool = False) -> pd.DataFrame:
    """Judge mean, PPI estimate and human-only mean per system (plus paired differences), as a table.

    ``df``: one row per (system, item), columns ``system`` (name), ``judge`` (the judge's score,
    required on every row), ``human`` (the human score, NaN where the item is not labelled) and
    ``item`` (an id shared by the systems' rows for the same item). ``pairs``: None (no
    difference rows), ``"all"`` (every pair of systems in order of first appearance) or a list of
    (system, baseline) for rows estimating mean(system) - mean(baseline) over their shared items,
    labelled where both have a human score.

    Columns: row ("system" / "difference"), system, baseline, judge_mean with the judge-only
    interval (judge_low, judge_high), the PPI estimate with its interval (low, high) and se, the
    human-only mean and interval, n_labelled, n_all, lam, judge_bias (mean judge - human on the
    labelled items) and the judge-human Pearson r and Spearman rho on the labelled items (for
    difference rows: on the per-item differences).
    """
    where = "ppi_table"
    missing = [c for c in dict.fromkeys([system, judge, human, item]) if c not in df.columns]
    if missing:
        raise DataError(f"{where}: missing column(s) {missing}; have {list(df.columns)}")
    data = df[[system, item, judge, human]].copy()
    for col, role in ((judge, "judge"), (human, "human")):
        try:
            data[col] = pd.to_numeric(data[col], errors="raise").astype(float)
        except (TypeError, ValueError) as exc:
            raise DataError(f"{where}: {role} column {col!r} is not numeric ({exc})") from None
    no_judge = data[data[judge].isna() | ~np.isfinite(data[judge])]
    if len(no_judge):
        first = no_judge.iloc[0]
        raise DataError(f"{where}: {len(no_judge)} row(s) without a judge score in column {judge!r}, first: "
                        f"{system}={first[system]!r}, {item}={first[item]!r}; PPI needs the judge on every item")
    dup = data[data.duplicated([system, item], keep=False)]
    if len(dup):
        first = dup.iloc[0]
        raise DataError(f"{where}: {len(dup)} rows share a ({system}, {item}) pair, first: {first[system]!r}, "
                        f"{first[item]!r}; aggregate to one score per system and item first (e.g. mean annotator)")
    names = list(pd.unique(data[system]))
    if pairs == "all":
        pair_list = list(itertools.combinations(names, 2))
    elif pairs is None:
        pair_list = []
    elif isinstance(pairs, str):
        raise ConfigError(f"{where}: pairs must be None, 'all' or a list of (system, baseline), got {pairs!r}")
    else:
        pair_list = [tuple(p) for p in pairs]
        unknown = [s for p in pair_list for s in p if s not in names]
        if unknown or any(len(p) != 2 for p in pair_list):
            raise ConfigError(f"{where}: pairs {pair_list} must be (system, baseline) tuples of known systems "
                              f"{names}; unknown: {unknown}")
    rows = []
    for name in names:
        sub = data[data[system] == name]
        lab = sub[sub[human].notna()]
        f_lab, y_lab = lab[judge].to_numpy(), lab[human].to_numpy()
        res = ppi_mean(sub[judge].to_numpy(), f_lab, y_lab, alpha, tuned, where=f"{where}: system {name!r}")
        rows.append(_row(res, f_lab, y_lab, "system", name, None))
    for a, b in pair_list:
        both = data[data[system] == a].merge(data[data[system] == b], on=item, suffixes=("_a", "_b"))
        if both.empty:
            raise DataError(f"{where}: systems {a!r} and {b!r} share no {item!r}; a paired difference needs "
                            "shared items")
        lab = both[both[f"{human}_a"].notna() & both[f"{human}_b"].notna()]
        res = ppi_mean_difference(both[f"{judge}_a"], both[f"{judge}_b"], lab[f"{judge}_a"], lab[f"{judge}_b"],
                                  lab[f"{human}_a"], lab[f"{human}_b"], alpha, tuned,
                                  where=f"{where}: difference {a!r} - {b!r}")
        f_d = (lab[f"{judge}_a"] - lab[f"{judge}_b"]).to_numpy()
        y_d = (lab[f"{human}_a"] - lab[f"{human}_b"]).to_numpy()
        rows.append(_row(res, f_d, y_d, "difference", a, b))
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)
