"""Judge-corrected shares of sufficient contexts (target ``judge_corrected``): each content
judge's (and the panel's) share of contexts labelled sufficient, per retriever set, beside a
stratified prediction-powered estimate that corrects it with the blind audit's labels.

**The audit is the gold.** The audit (``judges.run_audit``: two procedures, adjudicated where
they differ) labels a stratified sample of the main slice's contexts (``judges.audit_sample``:
per stratum, ``n`` contexts of one set and qrels class, drawn uniformly without replacement).
The content judges and the panel label EVERY context of the slice, so within a stratum the
audited contexts are a uniform sample of the judged ones, and PPI is valid per stratum
(``convrag.stats.ppi.ppi_mean_stratified``: PPI within each stratum, combined with weights
N_h / N, variance sum w_h^2 se_h^2). A pooled PPI would not be: the strata are not sampled in
proportion to their sizes. The auditor is a model (Claude Opus 5.5 in the paper config, as §3 names it), not a
person: the estimate corrects the judge towards the auditor.

**System and population.** A system is a retriever set (rung) named by a stratum; its population
is the union of its strata (e.g. the paper's BM25-turn stratum holds only its contexts without a
gold document, so its estimate is the share of sufficient contexts among those; Fusion's two
strata cover all its contexts; a set no stratum names gets no row). Stratum membership is recomputed from the contexts with
``judges._in_stratum``; overlapping strata (a context in two) make inclusion probabilities
unknown, and the table then says so instead of estimating.

**Scores** (``SCORINGS``): ``yes`` (yes = 1, partial and no = 0), ``partial_half`` (partial =
0.5) and ``yes_or_partial`` (yes and partial = 1: the study's default sufficiency, where only
"no" is insufficient). A judge's unreadable reply leaves the context out of that judge's
population (``n_unjudged``); an unreadable final audit label leaves it unlabelled
(``n_audit_unread``).

**Agreement** on the audited contexts, each weighted N_h / n_h (so it describes the population,
not the sample): ``agreement`` (share of contexts where judge score = audit score), ``judge_bias``
(mean judge minus audit) and ``pearson_r``.

**Differences** between two systems: estimate_a - estimate_b with se^2 = se_a^2 + se_b^2 (the
two sets' audit samples are drawn independently from different strata; the sets' contexts of the
same turn are not independent, which this ignores). Not paired: the audit labels different
contexts in each set.

**Audit off** (the default: ``worse_labels.judges.audit.model: null``): one row per set of the
main slice with the judge's share and an empty estimate, and ``reason`` saying so.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy import stats

from convrag.errors import DataError
from convrag.stats.ppi import ppi_mean_stratified

__all__ = ["AUDIT_OFF", "COLUMNS", "SCORINGS", "judge_corrected"]

SCORINGS = {"yes": {"yes": 1.0, "partial": 0.0, "no": 0.0},
            "partial_half": {"yes": 1.0, "partial": 0.5, "no": 0.0},
            "yes_or_partial": {"yes": 1.0, "partial": 1.0, "no": 0.0}}

AUDIT_OFF = ("no audit labels: the audit is off (worse_labels.judges.audit.model is null); set "
             "worse_labels.judges.audit.model to an auditor model (and optionally worse_labels.judges.audit.strata) "
             "to label a stratified sample and get these estimates")

COLUMNS = ["slice", "judge", "scoring", "row", "system", "baseline", "population", "judge_mean", "judge_low",
           "judge_high", "estimate", "low", "high", "se", "audit_mean", "audit_low", "audit_high", "n_labelled",
           "n_all", "n_unjudged", "n_audit_unread", "lam", "judge_bias", "agreement", "pearson_r",
           "judge_excludes_0", "ppi_excludes_0", "reason"]


def _describe(stratum) -> str:
    q = stratum.get("qrels_label")
    return "all contexts" if q is None else f"qrels {q}"


def _excludes_0(low, high):
    return None if low is None or high is None or pd.isna(low) or pd.isna(high) else bool(low > 0 or high < 0)


def _judge_only(f: np.ndarray, z: float) -> dict:
    if f.size == 0:
        return {"judge_mean": math.nan, "judge_low": math.nan, "judge_high": math.nan}
    m = float(f.mean())
    h = z * math.sqrt(float(np.var(f, ddof=1)) / f.size) if f.size > 1 else math.nan
    return {"judge_mean": m, "judge_low": m - h, "judge_high": m + h}


def _weighted_agreement(f: np.ndarray, y: np.ndarray, w: np.ndarray) -> dict:
    if f.size == 0:
        return {"judge_bias": math.nan, "agreement": math.nan, "pearson_r": math.nan}
    p = w / w.sum()
    out = {"judge_bias": float(np.dot(p, f - y)), "agreement": float(np.dot(p, f == y))}
    df, dy = f - np.dot(p, f), y - np.dot(p, y)
    den = math.sqrt(float(np.dot(p, df * df)) * float(np.dot(p, dy * dy)))
    out["pearson_r"] = float(np.dot(p, df * dy) / den) if den > 0 else math.nan
    return out


def _labels_by_context(labels: pd.DataFrame, labeller: str) -> dict:
    sub = labels[labels["labeller"] == labeller]
    return {(t, s): (None if lab is None or pd.isna(lab) else lab)
            for t, s, lab in zip(sub["task_id"], sub["set"], sub["label"])}


def judge_corrected(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict) -> pd.DataFrame:
    """The table (``COLUMNS``) for the main slice: see the module docstring.

    ``contexts``/``labels``: ``targets.load_contexts`` / ``load_labels`` frames; ``ctx``: the
    study context (``main_slice``, ``ladders``, ``labellers``, ``audit``, ``audit_strata``
    (None: the paper's), ``ppi`` {alpha, tuned}).
    """
    from convrag.studies.worse_labels.judges import AUDIT_STRATA_PAPER, _in_stratum

    s = ctx["main_slice"]
    ppi = {"alpha": 0.05, "tuned": False, **(ctx.get("ppi") or {})}
    z = float(stats.norm.ppf(1 - ppi["alpha"] / 2))
    c = contexts[contexts["slice"] == s].reset_index(drop=True)
    lab = labels[labels["slice"] == s]
    ladder = list(ctx["ladders"].get(s, []))
    judges = [j for j in ctx["labellers"] if (lab["labeller"] == j).any()] or list(ctx["labellers"])
    base = {"slice": s}

    def share_rows(sets, judge, reason, population="all contexts"):
        by = _labels_by_context(lab, judge)
        rows = []
        for st in sets:
            keys = zip(c.loc[c["set"] == st, "task_id"], [st] * int((c["set"] == st).sum()))
            given = [by.get(k) for k in keys]
            f = np.array([SCORINGS["yes"][x] for x in given if x is not None], dtype=float)
            rows.append({**base, "judge": judge, "scoring": "yes", "row": "system", "system": st, "baseline": None,
                         "population": population, **_judge_only(f, z), "n_all": int(f.size),
                         "n_unjudged": sum(x is None for x in given), "reason": reason})
        return rows

    if not ctx.get("audit"):
        judge = "panel" if "panel" in judges else (judges[0] if judges else None)
        return pd.DataFrame(share_rows(ladder, judge, AUDIT_OFF) if judge else [], columns=COLUMNS)

    strata = list(ctx.get("audit_strata") or AUDIT_STRATA_PAPER)
    masks = np.array([_in_stratum(c, st).to_numpy(bool) for st in strata]) if len(c) else np.zeros((len(strata), 0))
    systems = list(dict.fromkeys(st["set"] for st in strata))
    audit = _labels_by_context(lab, "audit")
    rows: list[dict] = []
    overlap = masks.sum(axis=0) > 1 if masks.size else np.zeros(0, bool)
    if overlap.any():
        first = c[overlap].iloc[0]
        why = (f"the audit strata overlap (context {first['set']}|{first['task_id']} is in more than one of "
               "worse_labels.judges.audit.strata), so the audited contexts' inclusion probabilities are unknown; "
               "make the strata disjoint for a stratified estimate")
        for j in judges:
            rows += share_rows(systems, j, why)
        return pd.DataFrame(rows, columns=COLUMNS)
    if not audit:
        for j in judges:
            rows += share_rows(systems, j, "the audit file holds no labels for this slice")
        return pd.DataFrame(rows, columns=COLUMNS)
    for j in judges:
        by = _labels_by_context(lab, j)
        for scoring, score in SCORINGS.items():
            results = {}
            for system in systems:
                idx = [h for h, st in enumerate(strata) if st["set"] == system]
                parts, agree, n_unjudged, n_unread = {}, ([], [], []), 0, 0
                for h in idx:
                    keys = list(zip(c.loc[masks[h], "task_id"], c.loc[masks[h], "set"]))
                    judged = [k for k in keys if by.get(k) is not None]
                    n_unjudged += len(keys) - len(judged)
                    audited = [k for k in judged if k in audit]
                    n_unread += sum(audit[k] is None for k in audited)
                    audited = [k for k in audited if audit[k] is not None]
                    f_all = np.array([score[by[k]] for k in judged], dtype=float)
                    f_lab = np.array([score[by[k]] for k in audited], dtype=float)
                    y_lab = np.array([score[audit[k]] for k in audited], dtype=float)
                    parts[f"{system} {_describe(strata[h])}"] = (f_all, f_lab, y_lab)
                    if len(audited):
                        agree[0].append(f_lab), agree[1].append(y_lab)
                        agree[2].append(np.full(len(audited), len(judged) / len(audited)))
                row = {**base, "judge": j, "scoring": scoring, "row": "system", "system": system, "baseline": None,
                       "population": f"{system}: " + " + ".join(_describe(strata[h]) for h in idx),
                       "n_unjudged": n_unjudged, "n_audit_unread": n_unread, "reason": None}
                f_every = np.concatenate([p[0] for p in parts.values()]) if parts else np.zeros(0)
                row.update(_judge_only(f_every, z), n_all=int(f_every.size),
                           n_labelled=int(sum(p[2].size for p in parts.values())))
                if agree[0]:
                    row.update(_weighted_agreement(*(np.concatenate(a) for a in agree)))
                try:
                    r = ppi_mean_stratified(parts, alpha=ppi["alpha"], tuned=ppi["tuned"],
                                            where=f"judge_corrected: {j} on {system}")
                except DataError as err:
                    row["reason"] = f"no PPI estimate: {err}"
                else:
                    row.update(judge_mean=r.judge_mean, judge_low=r.judge_low, judge_high=r.judge_high,
                               estimate=r.estimate, low=r.low, high=r.high, se=r.se, audit_mean=r.human_mean,
                               audit_low=r.human_low, audit_high=r.human_high, lam=r.lam)
                    results[system] = (r, z)
                rows.append(row)
            for a, b in itertools.combinations(systems, 2):
                rows.append(_difference(base, j, scoring, a, b, results))
    return pd.DataFrame(rows, columns=COLUMNS)


def _difference(base: dict, judge: str, scoring: str, a: str, b: str, results: dict) -> dict:
    row = {**base, "judge": judge, "scoring": scoring, "row": "difference", "system": a, "baseline": b,
           "population": f"{a} minus {b} (independent strata)", "reason": None}
    if a not in results or b not in results:
        row["reason"] = f"no PPI estimate for {', '.join(x for x in (a, b) if x not in results)}"
        return row
    (ra, z), (rb, _) = results[a], results[b]
    for key, lo, hi in (("estimate", "low", "high"), ("judge_mean", "judge_low", "judge_high"),
                        ("audit_mean", "audit_low", "audit_high")):
        src = "human_mean" if key == "audit_mean" else key
        src_lo = "human_low" if key == "audit_mean" else lo
        va, vb = getattr(ra, src), getattr(rb, src)
        ha, hb = va - getattr(ra, src_lo), vb - getattr(rb, src_lo)  # z * se of each
        d, h = va - vb, math.sqrt(ha**2 + hb**2)
        row.update({key: d, lo: d - h, hi: d + h})
    row.update(se=math.sqrt(ra.se**2 + rb.se**2), n_labelled=ra.n_labelled + rb.n_labelled, n_all=ra.n_all + rb.n_all,
               lam=ra.lam if ra.lam == rb.lam else math.nan)
    row["judge_excludes_0"] = _excludes_0(row["judge_low"], row["judge_high"])
    row["ppi_excludes_0"] = _excludes_0(row["low"], row["high"])
    return row
