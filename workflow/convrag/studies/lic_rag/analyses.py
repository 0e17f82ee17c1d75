"""lic_rag: scoring, the analyses of *Lost in Conversation or Lost in Translation?*, and
their tables and figures.

Scores are computed once per conversation and per assistant turn into Parquet tables; every
table and figure reads only those tables, so rebuilding one never re-reads conversations or
calls a model.

Pools: the paper averages its main numbers over its ten LLMs and its main retrieval methods
(§4.1: seven and closed book); PoG is an appendix retriever run on eight LLMs (§B.2). Every row
pooled over retrievers (``retriever = all``, Figure 8's "with retrieval") and over LLMs
(``model = all``, or per retriever over the LLMs) averages only the config's pool
(``lic_rag.analysis.pooled_retrievers`` / ``pooled_models``: ``wiring.pool``; the paper's main
methods and every LLM by default); a retriever outside it keeps its own rows. Rows over all
datasets (``dataset = all``) are written on a single-dataset run too, so a target holds every
row its caption and the published map name whatever the grid's size.

Statistical unit: the question. Runs of one question are repeated samples, not independent
observations, so every mean with a CI first averages a question's runs and then bootstraps
over questions (paired over the same questions when two conditions are compared; 1,000
resamples, seed 0 by default, percentile intervals).

The analyses (each a function returning a DataFrame; ``TARGETS`` maps target names to them):
- Table 2: FULL vs SHARDED F1 with the paired bootstrap CI of the gap.
- Decomposition FULL -> CONCAT -> SHARDED: formulation loss (FULL - CONCAT: the question
  written as separate clues) and delivery loss (CONCAT - SHARDED: the clues spread over
  turns); they add up to the FULL - SHARDED gap, per question and hence on average.
- Recovery: (RECAP - SHARDED) / (FULL - SHARDED) and the same for SNOWBALL, the share of the
  gap a recap turn or restating every shard wins back (undefined, NaN, without a gap).
- Aptitude and unreliability per question over runs (metrics.reliability), averaged.
- Complete coverage: the (question, run) pairs where both FULL and SHARDED retrieved every
  supporting passage (cumulative recall 1 by their last turn); the F1 gap on those pairs,
  where retrieval cannot explain it, with a paired bootstrap CI.
- LLM judge: accuracy per cell, and the correlation (Pearson, Spearman) across
  (dataset, model, retriever, policy) pairs of the judge's FULL-SHARDED gap with F1's.
- Response categories per condition and policy; the share of multi-turn conversations
  whose shards were revealed in dependency order.
- Information preservation: closed-book CONCAT must keep >= ``preservation_threshold`` of
  closed-book FULL F1 per dataset (else the shards lost information); and the closed-book
  CONCAT/FULL retention per model.
- Recall@k per turn and cumulatively across turns.
- Shard-wording variability (§A.2): distinct wordings of one question's repeated shard sets.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from convrag.metrics.reliability import aptitude, unreliability
from convrag.stats.bootstrap import bootstrap_ci, paired_bootstrap
from convrag.studies.lic_rag.plan import CATEGORIES, MULTI_TURN

KEYS = ["dataset", "model", "retriever", "condition", "policy"]
CELL = ["dataset", "model", "retriever"]


def _per_question(df: pd.DataFrame, value: str) -> pd.Series:
    """Mean over runs per question: runs of one question are not independent samples."""
    return df.groupby("qid")[value].mean()


def _paired(a: pd.Series, b: pd.Series, boot: dict) -> dict | None:
    common = a.index.intersection(b.index)
    if common.empty:
        return None
    return paired_bootstrap(a[common].to_numpy(), b[common].to_numpy(),
                            n_resamples=boot.get("n_resamples", 1000), seed=boot.get("seed", 0))


def pool_of(scores: pd.DataFrame, closed_retrievers=None, pool: dict | None = None) -> tuple[list[str], list[str]]:
    """(retrievers, models) a pooled row averages over: the config's pool (``pool``:
    ``wiring.pool``, the paper's main methods and every LLM by default), else, for a caller that
    names none, every retriever but closed book and every model of ``scores``."""
    every = sorted(scores.model.unique()) if "model" in scores else []
    if pool is not None:
        return list(pool["retrievers"]), list(pool.get("models") or every)
    return sorted(set(scores.retriever) - set(closed_retrievers or [])), every


def _models(scores: pd.DataFrame, models) -> pd.DataFrame:
    """``scores`` of the pooled LLMs (all of them when ``models`` is None)."""
    return scores if models is None else scores[scores.model.isin(list(models))]


# ---- Table 2 and the delivery figure -------------------------------------------------------

def table2(scores: pd.DataFrame, n_resamples: int = 1000, seed: int = 0, closed_retrievers=None,
           pool: dict | None = None) -> pd.DataFrame:
    """FULL against SHARDED final F1 per (dataset, LLM, retriever, SHARDED policy) with the paired
    bootstrap CI of the gap; with ``closed_retrievers`` or ``pool``, also the paper's pooled gaps
    (§5.1, §5.2), over all datasets and the pooled LLMs: per retriever, per LLM over the pooled
    retrievers, and over both (``all``); CIs resample questions. The pooled HISTORY rows also
    give HISTORY's SHARDED F1 minus CURRENT's (§5.2: HISTORY helps six of seven methods)."""
    rows = []
    boot = {"n_resamples": n_resamples, "seed": seed}
    for (ds, model, ret), g in scores.groupby(CELL, sort=True):
        full = g[g.condition == "FULL"]
        if full.empty:
            continue
        full_q = _per_question(full, "final_f1")
        for policy, sh in g[g.condition == "SHARDED"].groupby("policy", sort=True):
            res = _paired(full_q, _per_question(sh, "final_f1"), boot)
            if res is None:
                continue
            rows.append({
                "dataset": ds, "model": model, "retriever": ret, "policy": policy, "n_questions": res["n"],
                "f1_full": res["mean_a"], "f1_sharded": res["mean_b"], "gap": res["mean_diff"],
                "gap_ci_low": res["ci_low"], "gap_ci_high": res["ci_high"], "rel_gap": _rel_gap(res),
            })
    out = pd.DataFrame(rows)
    if closed_retrievers is not None or pool is not None:
        out = pd.DataFrame(rows + _pooled_gaps(scores, boot, *pool_of(scores, closed_retrievers, pool)))
        out.attrs["blank_reasons"] = {c: (lambda row: "HISTORY against CURRENT is given on the pooled HISTORY rows "
                                          "(dataset = all) of a grid with both policies")
                                      for c in ("history_gain", "history_gain_ci_low", "history_gain_ci_high")}
    return out


def _rel_gap(r: dict) -> float:
    """The relative FULL - SHARDED gap, (FULL - SHARDED) / FULL: the share of FULL's F1 that
    SHARDED loses, positive for a drop like ``gap`` beside it (the paper's "11.7% relative loss",
    §5.2); NaN when FULL's F1 is 0."""
    return r["mean_diff"] / r["mean_a"] if r["mean_a"] else float("nan")


def _pooled_gaps(scores: pd.DataFrame, boot: dict, retrievers: list[str], models: list[str]) -> list[dict]:
    """Table 2's pooled rows: per retriever over the pooled LLMs (every retriever, PoG too: its
    own row), per LLM over the pooled retrievers, and over both (``all``)."""
    rows = []
    unit = ["dataset", "model", "retriever", "qid"]
    mine = scores[scores.model.isin(models)]
    pooled = scores[scores.retriever.isin(retrievers)]
    groups = [({"model": "all", "retriever": r}, mine[mine.retriever == r]) for r in sorted(scores.retriever.unique())]
    groups += [({"model": "all", "retriever": "all"}, pooled[pooled.model.isin(models)])]
    groups += [({"model": m, "retriever": "all"}, pooled[pooled.model == m]) for m in sorted(pooled.model.unique())]
    for key, g in groups:
        full = g[g.condition == "FULL"].groupby(unit)["final_f1"].mean()
        shq = {p: sh.groupby(unit)["final_f1"].mean() for p, sh in g[g.condition == "SHARDED"].groupby("policy", sort=True)}
        for policy, sh in shq.items():
            idx = full.index.intersection(sh.index)
            if idx.empty:
                continue
            r = _clustered(full, sh, idx, boot)
            row = {"dataset": "all", **key, "policy": policy, "n_questions": r["n_clusters"],
                   "f1_full": r["mean_a"], "f1_sharded": r["mean_b"], "gap": r["mean_diff"],
                   "gap_ci_low": r["ci_low"], "gap_ci_high": r["ci_high"], "rel_gap": _rel_gap(r)}
            both = sh.index.intersection(shq["current"].index) if policy == "history" and "current" in shq else []
            if len(both):  # HISTORY's SHARDED F1 minus CURRENT's, paired per unit
                h = _clustered(sh, shq["current"], both, boot)
                row.update(history_gain=h["mean_diff"], history_gain_ci_low=h["ci_low"],
                           history_gain_ci_high=h["ci_high"])
            rows.append(row)
    return rows


def delivery_summary(scores: pd.DataFrame, n_resamples: int = 1000, seed: int = 0, models=None) -> pd.DataFrame:
    """Mean final F1 per dataset, retriever and condition over the pooled LLMs (``models``; all
    by default; and policies and runs), and over all datasets (``dataset = all``: the paper's
    means over its LLMs and datasets, on a single-dataset run too); ``condition = all`` pools
    every condition and policy (a retriever's overall F1, §5.4). The interval resamples questions."""
    scores = _models(scores, models)
    rows = []

    def add(g, ds, ret, cond):
        # one value per question (mean over models, policies and runs): the resampling unit
        per_q = g.groupby(["dataset", "qid"])["final_f1"].mean().to_numpy()
        ci = bootstrap_ci(per_q, n_resamples=n_resamples, seed=seed)
        rows.append({"dataset": ds, "retriever": ret, "condition": cond, "mean_f1": ci["mean"],
                     "ci_low": ci["ci_low"], "ci_high": ci["ci_high"], "n": ci["n"]})

    for (ds, ret, cond), g in scores.groupby(["dataset", "retriever", "condition"], sort=True):
        add(g, ds, ret, cond)
    for (ds, ret), g in scores.groupby(["dataset", "retriever"], sort=True):
        add(g, ds, ret, "all")
    for (ret, cond), g in scores.groupby(["retriever", "condition"], sort=True):
        add(g, "all", ret, cond)
    for ret, g in scores.groupby("retriever", sort=True):
        add(g, "all", ret, "all")
    return pd.DataFrame(rows)


# ---- decomposition, recovery ----------------------------------------------------------------

def decomposition(scores: pd.DataFrame, boot: dict, models=None) -> pd.DataFrame:
    """FULL -> CONCAT -> SHARDED per (dataset, model, retriever, SHARDED policy):
    formulation loss = FULL - CONCAT, delivery loss = CONCAT - SHARDED, total = their sum; and
    per retriever over all datasets and the pooled LLMs (``models``; all by default)."""
    rows = []
    for (ds, model, ret), g in scores.groupby(CELL, sort=True):
        full, concat = (_per_question(g[g.condition == c], "final_f1") for c in ("FULL", "CONCAT"))
        if full.empty or concat.empty:
            continue
        for policy, sh in g[g.condition == "SHARDED"].groupby("policy", sort=True):
            sh_q = _per_question(sh, "final_f1")
            qs = full.index.intersection(concat.index).intersection(sh_q.index)
            if qs.empty:
                continue
            f, c, s = full[qs], concat[qs], sh_q[qs]
            form, deliv, total = _paired(f, c, boot), _paired(c, s, boot), _paired(f, s, boot)
            rows.append({
                "dataset": ds, "model": model, "retriever": ret, "policy": policy, "n_questions": len(qs),
                "f1_full": f.mean(), "f1_concat": c.mean(), "f1_sharded": s.mean(),
                "formulation_loss": form["mean_diff"], "formulation_ci_low": form["ci_low"],
                "formulation_ci_high": form["ci_high"],
                "delivery_loss": deliv["mean_diff"], "delivery_ci_low": deliv["ci_low"],
                "delivery_ci_high": deliv["ci_high"],
                "total_gap": total["mean_diff"], "total_ci_low": total["ci_low"], "total_ci_high": total["ci_high"],
                "delivery_share": (deliv["mean_diff"] / total["mean_diff"]
                                   if abs(total["mean_diff"]) > 1e-12 else np.nan),
            })
    return pd.DataFrame(rows + _pooled_decomposition(_models(scores, models), boot))


def _pair_means(scores: pd.DataFrame, cond: str, policies=None) -> pd.Series:
    """Mean final F1 over runs (and the given SHARDED policies) per (dataset, model, qid)."""
    x = scores[scores.condition == cond]
    if policies is not None:
        x = x[x.policy.isin(policies)]
    return x.groupby(["dataset", "model", "qid"])["final_f1"].mean()


def _clustered(a, b, idx, boot: dict) -> dict:
    """Paired means of two aligned series over ``idx`` ((dataset, model[, retriever], qid) pairs),
    the interval resampling questions (a question's pairs across LLMs are not independent)."""
    from convrag.stats.bootstrap import paired_cluster_bootstrap

    clusters = [f"{d}/{q}" for d, q in zip(idx.get_level_values("dataset"), idx.get_level_values("qid"))]
    return paired_cluster_bootstrap(a[idx].to_numpy(), b[idx].to_numpy(), clusters,
                                    n_resamples=boot.get("n_resamples", 1000), seed=boot.get("seed", 0))


def _pooled_decomposition(scores: pd.DataFrame, boot: dict) -> list[dict]:
    """The decomposition over all datasets and LLMs per retriever and SHARDED policy (and both
    policies pooled, ``policy = all``, where the paper does not say which): the paper's §5.3."""
    rows = []
    for ret, g in scores.groupby("retriever", sort=True):
        full, concat = _pair_means(g, "FULL"), _pair_means(g, "CONCAT")
        policies = sorted(g[g.condition == "SHARDED"].policy.unique())
        for policy in [*policies, *(["all"] if len(policies) > 1 else [])]:
            sh = _pair_means(g, "SHARDED", policies if policy == "all" else [policy])
            idx = full.index.intersection(concat.index).intersection(sh.index)
            if idx.empty:
                continue
            form, deliv, total = (_clustered(a, b, idx, boot) for a, b in ((full, concat), (concat, sh), (full, sh)))
            rows.append({
                "dataset": "all", "model": "all", "retriever": ret, "policy": policy, "n_questions": form["n_clusters"],
                "f1_full": form["mean_a"], "f1_concat": form["mean_b"], "f1_sharded": deliv["mean_b"],
                "formulation_loss": form["mean_diff"], "formulation_ci_low": form["ci_low"],
                "formulation_ci_high": form["ci_high"], "delivery_loss": deliv["mean_diff"],
                "delivery_ci_low": deliv["ci_low"], "delivery_ci_high": deliv["ci_high"],
                "total_gap": total["mean_diff"], "total_ci_low": total["ci_low"], "total_ci_high": total["ci_high"],
                "delivery_share": (deliv["mean_diff"] / total["mean_diff"]
                                   if abs(total["mean_diff"]) > 1e-12 else np.nan)})
    return rows


def recovery_share(full: float, sharded: float, recovered: float, eps: float = 1e-9) -> float:
    """(recovered - sharded) / (full - sharded): 1 = the whole FULL-SHARDED gap won back,
    0 = none, < 0 = worse than SHARDED; NaN when there is no positive gap to recover."""
    gap = full - sharded
    return (recovered - sharded) / gap if gap > eps else float("nan")


def recovery(scores: pd.DataFrame, boot: dict) -> pd.DataFrame:
    rows = []
    n, seed = boot.get("n_resamples", 1000), boot.get("seed", 0)
    for (ds, model, ret), g in scores.groupby(CELL, sort=True):
        full = _per_question(g[g.condition == "FULL"], "final_f1")
        if full.empty:
            continue
        for policy, gp in g[g.condition.isin(MULTI_TURN)].groupby("policy", sort=True):
            per = {c: _per_question(gp[gp.condition == c], "final_f1") for c in MULTI_TURN}
            if per["SHARDED"].empty:
                continue
            row = {"dataset": ds, "model": model, "retriever": ret, "policy": policy,
                   "f1_full": np.nan, "f1_sharded": np.nan}
            for cond in ("RECAP", "SNOWBALL"):
                rec = per[cond]
                qs = full.index.intersection(per["SHARDED"].index).intersection(rec.index)
                if qs.empty:
                    continue
                f, s, r = full[qs].to_numpy(), per["SHARDED"][qs].to_numpy(), rec[qs].to_numpy()
                row.update(n_questions=len(qs), f1_full=f.mean(), f1_sharded=s.mean())
                row[f"f1_{cond.lower()}"] = r.mean()
                row[f"{cond.lower()}_recovery"] = recovery_share(f.mean(), s.mean(), r.mean())
                # bootstrap the ratio of means over questions (resamples without a gap are skipped)
                idx = np.random.default_rng(seed).integers(0, len(qs), size=(n, len(qs)))
                gap, won = f[idx].mean(1) - s[idx].mean(1), r[idx].mean(1) - s[idx].mean(1)
                ok = gap > 1e-9
                if ok.sum() >= max(10, n // 2):
                    lo, hi = np.quantile(won[ok] / gap[ok], [0.025, 0.975])
                else:
                    lo = hi = np.nan
                row[f"{cond.lower()}_ci_low"], row[f"{cond.lower()}_ci_high"] = lo, hi
            rows.append(row)
    return pd.DataFrame(rows)


# ---- reliability --------------------------------------------------------------------------

def aptitude_unreliability(scores: pd.DataFrame, boot: dict, analysis: dict, closed_retrievers=None,
                           pool: dict | None = None) -> pd.DataFrame:
    """Aptitude (P90 of F1 over a question's runs) and unreliability (P90 - P10) per cell, and,
    when ``closed_retrievers`` or ``pool`` is given, pooled like the paper's Table 8 and §5.4
    (``dataset`` = all): per LLM over the pooled retrievers (``retriever`` = all), over the pooled
    LLMs and retrievers (both ``all``), and per retrieval method over the pooled LLMs (``model`` =
    all; PoG too, its own row: §B.3 holds every model and every retrieval method to a rise), with
    intervals resampling questions."""
    hi, lo = analysis.get("aptitude_percentile", 90), analysis.get("unreliability_low", 10)
    rows = []
    for key, g in scores.groupby(KEYS, sort=True):
        per_q = g.groupby("qid")["final_f1"].agg(list)
        apt = np.array([aptitude(v, hi) for v in per_q])
        unr = np.array([unreliability(v, hi, lo) for v in per_q])
        a_ci = bootstrap_ci(apt, boot.get("n_resamples", 1000), boot.get("seed", 0))
        u_ci = bootstrap_ci(unr, boot.get("n_resamples", 1000), boot.get("seed", 0))
        rows.append({**dict(zip(KEYS, key)), "n_questions": len(per_q),
                     "runs_per_question": float(per_q.map(len).mean()), "mean_f1": g["final_f1"].mean(),
                     "aptitude": a_ci["mean"], "aptitude_ci_low": a_ci["ci_low"], "aptitude_ci_high": a_ci["ci_high"],
                     "unreliability": u_ci["mean"], "unreliability_ci_low": u_ci["ci_low"],
                     "unreliability_ci_high": u_ci["ci_high"]})
    paired: dict = {}  # (model, retriever, policy) of a pooled SHARDED row -> (paired units, mean FULL unreliability)
    if closed_retrievers is not None or pool is not None:
        rets, models = pool_of(scores, closed_retrievers, pool)
        pooled = scores[scores.retriever.isin(rets)]
        rows += _pooled_reliability(pooled, boot, hi, lo, paired, by=("", "model"), models=models)
        retrieving = scores[~scores.retriever.isin(list(closed_retrievers or [])) & scores.model.isin(models)]
        rows += _pooled_reliability(retrieving, boot, hi, lo, paired, by=("retriever",))
    out = pd.DataFrame(rows)
    out.attrs["blank_reasons"] = _reliability_blanks(paired)
    return out


def _reliability_blanks(paired: dict) -> dict:
    """Table 8's blank reasons: the pooled rows have no runs per question; the change FULL ->
    SHARDED is only on pooled SHARDED rows, and there blank without paired FULL units (its
    relative rise also when their mean FULL unreliability is 0), as ``paired`` records."""
    only = "the FULL -> SHARDED change is given only on the pooled SHARDED rows (dataset = all)"

    def change(row, relative=False):
        if row["dataset"] != "all" or row["condition"] != "SHARDED":
            return only
        n, full = paired.get((row["model"], row["retriever"], row["policy"]), (None, None))
        if n == 0:
            return "no FULL unit (LLM, retriever, question) pairs with these SHARDED ones"
        if relative and n and full == 0:
            return "the paired FULL units' mean unreliability is 0 (a relative rise over 0 is undefined)"
        return None

    return {"runs_per_question": lambda row: ("a row pooled over datasets and retrievers gives no runs per question"
                                              if row["dataset"] == "all" else None),
            "aptitude_change": change, "unreliability_rise": change,
            "unreliability_relative_rise": lambda row: change(row, relative=True)}


def _pooled_reliability(scores: pd.DataFrame, boot: dict, hi: float, lo: float, paired: dict | None = None,
                        by=("", "model"), models=None) -> list[dict]:
    """Table 8's pooled rows over ``scores``' units (LLM, retriever, question): for each of ``by``,
    over all of them (``""``, only the ``models`` LLMs when given) or one row per LLM (``model``)
    or per retriever (``retriever``); the SHARDED rows carry the changes from FULL."""
    from convrag.stats.bootstrap import cluster_bootstrap_ci

    if scores.empty:
        return []
    per_q = (scores.groupby([*KEYS, "qid"], sort=True)["final_f1"]
             .agg(aptitude=lambda v: aptitude(list(v), hi), unreliability=lambda v: unreliability(list(v), hi, lo),
                  mean_f1="mean").reset_index())
    per_q["cluster"] = per_q.dataset + "/" + per_q.qid
    rows = []
    for part in by:
        units = per_q if part or models is None else per_q[per_q.model.isin(list(models))]
        keys = ["condition", "policy", *([part] if part else [])]
        for key, g in units.groupby(keys, sort=True):
            k = dict(zip(keys, key))
            row = {"dataset": "all", "model": k.get("model", "all"), "retriever": k.get("retriever", "all"),
                   "condition": k["condition"], "policy": k["policy"], "n_questions": g.cluster.nunique(),
                   "runs_per_question": np.nan, "mean_f1": g.mean_f1.mean()}
            for col in ("aptitude", "unreliability"):
                ci = cluster_bootstrap_ci(g[col].to_numpy(), g.cluster.tolist(), boot.get("n_resamples", 1000),
                                          boot.get("seed", 0))
                row.update({col: ci["mean"], f"{col}_ci_low": ci["ci_low"], f"{col}_ci_high": ci["ci_high"]})
            if k["condition"] == "SHARDED":  # the changes FULL -> SHARDED, paired per (LLM, retriever, question)
                full = units[(units.condition == "FULL") & ((units[part] == k[part]) if part else True)]
                change = _reliability_change(full, g, boot)
                n_units = change.pop("_paired", 0), change.pop("_full_unreliability", np.nan)
                if paired is not None:  # for the blank reasons
                    paired[(row["model"], row["retriever"], row["policy"])] = n_units
                row.update(change)
            rows.append(row)
    return rows


def _reliability_change(full: pd.DataFrame, sharded: pd.DataFrame, boot: dict) -> dict:
    """SHARDED - FULL aptitude and unreliability over paired units, and the relative rise of
    unreliability (mean SHARDED / mean FULL - 1), with question-clustered 95% intervals; plus
    ``_paired`` (the paired units) and ``_full_unreliability`` (their mean FULL unreliability),
    which the caller keeps out of the row for the blank reasons."""
    from convrag.stats.bootstrap import bootstrap_statistic, paired_cluster_bootstrap

    unit = ["dataset", "model", "retriever", "qid"]
    m = sharded.merge(full, on=unit, suffixes=("", "_full"))
    if m.empty:
        return {"_paired": 0}
    n, seed, clusters = boot.get("n_resamples", 1000), boot.get("seed", 0), m.cluster.tolist()
    out = {"_paired": len(m), "_full_unreliability": float(m.unreliability_full.mean())}
    for col, name in (("aptitude", "aptitude_change"), ("unreliability", "unreliability_rise")):
        r = paired_cluster_bootstrap(m[col].to_numpy(), m[f"{col}_full"].to_numpy(), clusters, n_resamples=n, seed=seed)
        out.update({name: r["mean_diff"], f"{name}_ci_low": r["ci_low"], f"{name}_ci_high": r["ci_high"]})

    def rel(sh, fu):
        return sh.mean() / fu.mean() - 1 if fu.mean() > 0 else np.nan

    b = bootstrap_statistic([m.unreliability.to_numpy(), m.unreliability_full.to_numpy()], rel, n_resamples=n,
                            seed=seed, clusters=clusters)
    out.update(unreliability_relative_rise=rel(m.unreliability, m.unreliability_full),
               unreliability_relative_rise_ci_low=b["ci_low"], unreliability_relative_rise_ci_high=b["ci_high"])
    return out


# ---- complete coverage ----------------------------------------------------------------------

def complete_coverage(scores: pd.DataFrame, boot: dict, metric: str = "final_f1") -> pd.DataFrame:
    """The gap FULL - SHARDED in ``metric`` (final-answer F1, or BEST F1: the best turn) on the
    (question, run) pairs where both retrieved every supporting passage, beside the gap on all
    pairs (closed book has no retrieval)."""
    rows = []
    if "final_cum_recall" not in scores:
        return pd.DataFrame(rows)
    for (ds, model, ret), g in scores.groupby(CELL, sort=True):
        full = g[g.condition == "FULL"].set_index(["qid", "run"])
        if full.empty or full["final_cum_recall"].isna().all():
            continue
        for policy, sh in g[g.condition == "SHARDED"].groupby("policy", sort=True):
            sh = sh.set_index(["qid", "run"])
            pairs = full.index.intersection(sh.index)
            covered = [p for p in pairs if full.at[p, "final_cum_recall"] == 1.0 and sh.at[p, "final_cum_recall"] == 1.0]
            row = {"dataset": ds, "model": model, "retriever": ret, "policy": policy, "metric": metric,
                   "pairs": len(pairs), "covered_pairs": len(covered)}
            all_res = _paired(full.loc[pairs, metric].groupby("qid").mean(),
                              sh.loc[pairs, metric].groupby("qid").mean(), boot)
            if all_res:
                row.update(gap_all=all_res["mean_diff"], gap_all_ci_low=all_res["ci_low"],
                           gap_all_ci_high=all_res["ci_high"])
            if covered:
                idx = pd.MultiIndex.from_tuples(covered, names=["qid", "run"])
                res = _paired(full.loc[idx, metric].groupby("qid").mean(),
                              sh.loc[idx, metric].groupby("qid").mean(), boot)
                row.update(covered_questions=res["n"], f1_full_covered=res["mean_a"],
                           f1_sharded_covered=res["mean_b"], gap_covered=res["mean_diff"],
                           gap_covered_ci_low=res["ci_low"], gap_covered_ci_high=res["ci_high"])
            else:
                row.update(covered_questions=0)
            rows.append(row)
    out = pd.DataFrame(rows)
    none_covered = (lambda row: "no pair where FULL and SHARDED both retrieved every supporting passage "
                                "(covered_pairs = 0)" if row["covered_pairs"] == 0 else None)
    out.attrs["blank_reasons"] = {c: none_covered for c in ("f1_full_covered", "f1_sharded_covered", "gap_covered")}
    return out


def complete_coverage_by_dataset(scores: pd.DataFrame, boot: dict, metric: str = "best_f1") -> pd.DataFrame:
    """The paper's Table 9: per dataset and policy (and over all datasets), the (question, run)
    pairs of every (model, retriever) cell where FULL and SHARDED both retrieved every supporting
    passage, and FULL against SHARDED on them in ``metric`` (BEST F1: the best turn of the
    conversation). Pairs of one question are not independent (several models, retrievers and
    runs), so the interval resamples questions (paired cluster bootstrap, 95%)."""
    from convrag.stats.bootstrap import paired_cluster_bootstrap

    if "final_cum_recall" not in scores:
        return pd.DataFrame()
    scores = scores.dropna(subset=["final_cum_recall"])  # closed book retrieves nothing: no coverage to speak of
    if scores.empty:
        return pd.DataFrame()
    key = ["dataset", "model", "retriever", "qid", "run"]
    full = scores[scores.condition == "FULL"].set_index(key)
    rows = []
    for policy, sh in scores[scores.condition == "SHARDED"].groupby("policy", sort=True):
        sh = sh.set_index(key)
        pairs = full.index.intersection(sh.index)
        f, s = full.loc[pairs], sh.loc[pairs]
        covered = (f.final_cum_recall == 1.0).to_numpy() & (s.final_cum_recall == 1.0).to_numpy()
        datasets = pairs.get_level_values("dataset")
        for ds in [*sorted(set(datasets)), "all"]:
            in_ds = np.ones(len(pairs), bool) if ds == "all" else (datasets == ds)
            m = in_ds & covered
            row = {"dataset": ds, "policy": policy, "metric": metric, "pairs": int(in_ds.sum()),
                   "covered_pairs": int(m.sum()), "covered_share": float(m.sum() / in_ds.sum()) if in_ds.any() else np.nan}
            if m.any():
                qids = [f"{d}/{q}" for d, q in zip(datasets[m], pairs.get_level_values("qid")[m])]
                res = paired_cluster_bootstrap(f[metric].to_numpy()[m], s[metric].to_numpy()[m], qids,
                                               n_resamples=boot["n_resamples"], seed=boot["seed"])
                row.update(questions=res["n_clusters"], f1_full=res["mean_a"], f1_sharded=res["mean_b"],
                           gap=res["mean_diff"], ci_low=res["ci_low"], ci_high=res["ci_high"],
                           significant=bool(res["ci_low"] > 0 or res["ci_high"] < 0))
            if ds == "all":  # §B.4: significant declines on four of five datasets
                row["significant_datasets"] = sum(r["policy"] == policy and r.get("significant") is True
                                                  and r["ci_low"] > 0 for r in rows)
            rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs["blank_reasons"] = {"significant_datasets": "counted on the rows over all datasets (dataset = all)"}
    return out


# ---- judge ----------------------------------------------------------------------------------

def judge_accuracy(scores: pd.DataFrame) -> pd.DataFrame:
    g = scores.groupby(KEYS, sort=True)
    out = g.agg(n=("conv_id", "size"), mean_f1=("final_f1", "mean"), mean_em=("final_em", "mean"),
                judge_accuracy=("judge_correct", "mean"),
                judge_unparsed=("judge_parsed", lambda s: int((s == False).sum())),  # noqa: E712
                judged_by_llm=("judge_method", lambda s: int((s == "llm").sum()))).reset_index()
    return out


def _correlation(f1_gap, judge_gap, boot: dict) -> dict:
    """Pearson (with a 95% interval resampling configurations) and Spearman of two gap columns;
    NaN with a note below three configurations with varying gaps."""
    from scipy import stats

    from convrag.stats.bootstrap import bootstrap_statistic

    x, y = np.asarray(f1_gap, float), np.asarray(judge_gap, float)
    if len(x) < 3 or np.unique(x).size < 2 or np.unique(y).size < 2:
        return {"pearson_r": np.nan, "pearson_ci_low": np.nan, "pearson_ci_high": np.nan, "pearson_p": np.nan,
                "spearman_rho": np.nan, "spearman_p": np.nan,
                "note": "fewer than 3 pairs with varying gaps: correlation undefined"}

    def r(a, b):
        return float(np.corrcoef(a, b)[0, 1]) if np.unique(a).size > 1 and np.unique(b).size > 1 else np.nan

    pr, pp = stats.pearsonr(x, y)
    sr, sp = stats.spearmanr(x, y)
    b = bootstrap_statistic([x, y], r, n_resamples=boot.get("n_resamples", 1000), seed=boot.get("seed", 0))
    return {"pearson_r": float(pr), "pearson_ci_low": b["ci_low"], "pearson_ci_high": b["ci_high"],
            "pearson_p": float(pp), "spearman_rho": float(sr), "spearman_p": float(sp), "note": ""}


def judge_gap_correlation(scores: pd.DataFrame, boot: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The paper's §B.5 and Figure 10, per policy (and over both): across (dataset, model,
    retriever) configurations, the LLM judge's FULL - SHARDED accuracy gap against the F1 gap
    (per-question means over runs, then means over questions): their correlation, the mean of
    each gap and of their difference (F1 gap - judge gap: a judge that reverses the finding
    would make it large) with 95% intervals resampling questions; and ``reversals``, the
    configurations whose gap is a significant decline in F1 and a significant improvement under
    the judge (§B.5: none), each configuration's two gaps with 95% intervals resampling its
    questions (in the pairs). Returns (summary, pairs)."""
    from convrag.stats.bootstrap import cluster_bootstrap_ci

    def interval(gaps: pd.Series) -> tuple[float, float]:
        x = gaps.dropna().to_numpy(float)
        if not len(x):
            return np.nan, np.nan
        ci = bootstrap_ci(x, boot.get("n_resamples", 1000), boot.get("seed", 0))
        return ci["ci_low"], ci["ci_high"]

    boot = boot or {"n_resamples": 1000, "seed": 0}
    pairs, per_q = [], []
    for (ds, model, ret), g in scores.groupby(CELL, sort=True):
        full = g[g.condition == "FULL"]
        if full.empty:
            continue
        fj, ff = _per_question(full, "judge_correct"), _per_question(full, "final_f1")
        for policy, sh in g[g.condition == "SHARDED"].groupby("policy", sort=True):
            sj, sf = _per_question(sh, "judge_correct"), _per_question(sh, "final_f1")
            qs = ff.index.intersection(sf.index)
            f1_gap, judge_gap = ff[qs] - sf[qs], fj[qs] - sj[qs]
            (f_lo, f_hi), (j_lo, j_hi) = interval(f1_gap), interval(judge_gap)
            pairs.append({"dataset": ds, "model": model, "retriever": ret, "policy": policy,
                          "f1_gap": f1_gap.mean(), "judge_gap": judge_gap.mean(), "f1_gap_ci_low": f_lo,
                          "f1_gap_ci_high": f_hi, "judge_gap_ci_low": j_lo, "judge_gap_ci_high": j_hi,
                          "reversed": bool(f_lo > 0 and j_hi < 0)})
            per_q += [{"policy": policy, "cluster": f"{ds}/{q}", "f1_gap": a, "judge_gap": b}
                      for q, a, b in zip(qs, f1_gap, judge_gap)]
    df, q = pd.DataFrame(pairs), pd.DataFrame(per_q)
    rows = []
    policies = sorted(df.policy.unique()) if len(df) else []
    for policy in [*policies, *(["all"] if len(policies) > 1 else [])]:
        d = df if policy == "all" else df[df.policy == policy]
        ok = d.dropna(subset=["f1_gap", "judge_gap"])
        row = {"policy": policy, "pairs": len(d), "pairs_with_both": len(ok), "reversals": int(d.reversed.sum()),
               **_correlation(ok.f1_gap, ok.judge_gap, boot)}
        qq = (q if policy == "all" else q[q.policy == policy]).dropna(subset=["f1_gap", "judge_gap"])
        if len(qq):
            for name, values in (("f1_gap", qq.f1_gap), ("judge_gap", qq.judge_gap),
                                 ("gap_difference", qq.f1_gap - qq.judge_gap)):
                ci = cluster_bootstrap_ci(values.to_numpy(), qq.cluster.tolist(), boot.get("n_resamples", 1000),
                                          boot.get("seed", 0))
                row.update({name: ci["mean"], f"{name}_ci_low": ci["ci_low"], f"{name}_ci_high": ci["ci_high"]})
        rows.append(row)
    if not rows:
        rows = [{"policy": "all", "pairs": 0, "pairs_with_both": 0, "reversals": 0, **_correlation([], [], boot)}]
    return pd.DataFrame(rows), df


# ---- categories, dependency order ---------------------------------------------------------------

def response_categories(turns: pd.DataFrame, closed_retrievers=None, boot: dict | None = None,
                        pool: dict | None = None) -> pd.DataFrame:
    """Share of assistant turns per category, per (retriever, condition, policy); turns the
    classifier could not label are the ``unlabelled`` share. With ``closed_retrievers`` or
    ``pool``: also the retrieval-based turns of the pooled retrievers and LLMs (``retriever =
    all``, the paper's §A.2), each share with a 95% interval resampling questions."""
    from convrag.stats.bootstrap import cluster_bootstrap_ci

    t = turns.copy()
    t["category"] = t["category"].fillna("unlabelled")
    rows = []
    for key, g in t.groupby(["retriever", "condition", "policy"], sort=True):
        counts = g["category"].value_counts()
        rows.append({**dict(zip(["retriever", "condition", "policy"], key)), "turns": len(g),
                     **{c: counts.get(c, 0) / len(g) for c in (*CATEGORIES, "unlabelled")}})
    if (closed_retrievers is not None or pool is not None) and "qid" in t:
        boot = boot or {"n_resamples": 1000, "seed": 0}
        rets, models = pool_of(t, closed_retrievers, pool)
        open_t = t[t.retriever.isin(rets) & (t.model.isin(models) if "model" in t else True)]
        for (cond, pol), g in open_t.groupby(["condition", "policy"], sort=True):
            clusters = (g.dataset + "/" + g.qid).tolist()
            row = {"retriever": "all", "condition": cond, "policy": pol, "turns": len(g)}
            for c in (*CATEGORIES, "unlabelled"):
                ci = cluster_bootstrap_ci((g.category == c).to_numpy(float), clusters, boot.get("n_resamples", 1000),
                                          boot.get("seed", 0))
                row.update({c: ci["mean"], f"{c}_ci_low": ci["ci_low"], f"{c}_ci_high": ci["ci_high"]})
            rows.append(row)
    out = pd.DataFrame(rows)
    per_cell = (lambda row: "intervals are given only on the pooled retrieval rows (retriever = all)"
                if row["retriever"] != "all" else None)
    out.attrs["blank_reasons"] = {f"{c}_{e}": per_cell for c in (*CATEGORIES, "unlabelled") for e in ("ci_low", "ci_high")}
    return out


def grid_size(scores: pd.DataFrame, appendix_retrievers: list[str] = ()) -> pd.DataFrame:
    """How big the grid is, per dataset and over all (``dataset = all``): its questions, its
    simulated conversations (every cell, policies apart), and the conversations as the paper
    counts them (§4: "about 1.5 M" = 750 questions x 10 LLMs x 8 retrieval settings x 5 conditions
    x 5 runs): one per (question, LLM, retrieval setting, condition, run), HISTORY and CURRENT
    counted once, the appendix's retrievers (PoG) left out."""
    main = scores[~scores.retriever.isin(list(appendix_retrievers))]
    keys = ["dataset", "qid", "model", "retriever", "condition", "run"]

    def row(ds, g, m):
        return {"dataset": ds, "questions": int(g[["dataset", "qid"]].drop_duplicates().shape[0]),
                "llms": int(g.model.nunique()), "retrieval_settings": int(m.retriever.nunique()),
                "conditions": int(g.condition.nunique()), "runs": int(g.run.nunique()),
                "conversations": int(len(g)), "conversations_as_paper": int(m[keys].drop_duplicates().shape[0])}

    rows = [row(ds, g, main[main.dataset == ds]) for ds, g in scores.groupby("dataset", sort=True)]
    return pd.DataFrame(rows + [row("all", scores, main)])


def dependency_order(scores: pd.DataFrame) -> pd.DataFrame:
    """Share of multi-turn conversations whose shards were revealed in dependency order, per cell
    and over every multi-turn conversation of the grid (all keys ``all``, the paper's §A.2)."""
    mt = scores[scores.condition.isin(MULTI_TURN)]
    if mt.empty:
        return pd.DataFrame()
    keys = ["dataset", "model", "retriever", "condition", "policy"]
    out = (mt.groupby(keys, sort=True)
           .agg(conversations=("conv_id", "size"), order_kept_share=("order_kept", "mean")).reset_index())
    pooled = {**{k: "all" for k in keys}, "conversations": len(mt), "order_kept_share": mt.order_kept.mean()}
    return pd.concat([out, pd.DataFrame([pooled])], ignore_index=True)


# ---- information preservation ------------------------------------------------------------------

def _closed(scores: pd.DataFrame, closed_retrievers: list[str]) -> pd.DataFrame:
    return scores[scores.retriever.isin(closed_retrievers)]


def information_preservation(scores: pd.DataFrame, closed_retrievers: list[str], analysis: dict) -> pd.DataFrame:
    """Per dataset: closed-book CONCAT F1 / FULL F1 against the threshold (pooled over models)."""
    thr = analysis.get("preservation_threshold", 0.8)
    rows = []
    for ds, g in _closed(scores, closed_retrievers).groupby("dataset", sort=True):
        full, concat = (g[g.condition == c].groupby(["model", "qid"])["final_f1"].mean() for c in ("FULL", "CONCAT"))
        common = full.index.intersection(concat.index)
        if common.empty:
            continue
        f, c = full[common].mean(), concat[common].mean()
        ratio = c / f if f > 0 else np.nan
        rows.append({"dataset": ds, "n_model_questions": len(common), "f1_full_closed": f, "f1_concat_closed": c,
                     "ratio": ratio, "threshold": thr,
                     "passes": bool(ratio >= thr) if not np.isnan(ratio) else None})
    return pd.DataFrame(rows)


def _retention(full, concat) -> float:
    """Closed-book CONCAT / FULL F1: a ratio of means (NaN without FULL F1)."""
    return float(concat.mean() / full.mean()) if full.mean() > 0 else np.nan


def closed_book_retention(scores: pd.DataFrame, closed_retrievers: list[str],
                          largest: dict[str, str] | None = None) -> pd.DataFrame:
    """Closed-book CONCAT / FULL F1 per dataset and LLM, and over all datasets per LLM (a ratio of
    means with a 95% interval resampling questions). ``largest`` (family -> the grid's largest
    LLM of it): one more row, ``model = largest_per_family`` (§5.1: 94.3%), the ratio of means
    over those LLMs' (LLM, dataset, question) pairs, its interval resampling questions."""
    rows = []
    for (ds, model), g in _closed(scores, closed_retrievers).groupby(["dataset", "model"], sort=True):
        full, concat = (_per_question(g[g.condition == c], "final_f1") for c in ("FULL", "CONCAT"))
        common = full.index.intersection(concat.index)
        if common.empty:
            continue
        f, c = full[common].mean(), concat[common].mean()
        rows.append({"dataset": ds, "model": model, "n_questions": len(common), "f1_full_closed": f,
                     "f1_concat_closed": c, "retention": c / f if f > 0 else np.nan})
    closed = _closed(scores, closed_retrievers)
    if len(closed):  # over all datasets (a single dataset's run too), per LLM: a ratio of means, CI resampling questions
        from convrag.stats.bootstrap import bootstrap_statistic

        for model, g in closed.groupby("model", sort=True):
            full, concat = _pair_means(g, "FULL"), _pair_means(g, "CONCAT")
            idx = full.index.intersection(concat.index)
            if idx.empty:
                continue
            f, c = full[idx].to_numpy(), concat[idx].to_numpy()
            b = bootstrap_statistic([f, c], _retention, n_resamples=1000, seed=0,
                                    clusters=[f"{d}/{q}" for d, _, q in idx])
            rows.append({"dataset": "all", "model": model, "n_questions": len(idx), "f1_full_closed": f.mean(),
                         "f1_concat_closed": c.mean(), "retention": _retention(f, c), "retention_ci_low": b["ci_low"],
                         "retention_ci_high": b["ci_high"]})
    models = sorted(m for m in (largest or {}).values() if m in set(closed["model"]))
    if models:
        g = closed[closed.model.isin(models)]
        full, concat = _pair_means(g, "FULL"), _pair_means(g, "CONCAT")
        idx = full.index.intersection(concat.index)
        if not idx.empty:
            from convrag.stats.bootstrap import bootstrap_statistic

            f, c = full[idx].to_numpy(), concat[idx].to_numpy()
            b = bootstrap_statistic([f, c], _retention, n_resamples=1000, seed=0,
                                    clusters=[f"{d}/{q}" for d, _, q in idx])
            rows.append({"dataset": "all", "model": "largest_per_family", "models": ", ".join(models),
                         "n_questions": len({(d, q) for d, _, q in idx}), "f1_full_closed": f.mean(),
                         "f1_concat_closed": c.mean(), "retention": _retention(f, c),
                         "retention_ci_low": b["ci_low"], "retention_ci_high": b["ci_high"]})
    out = pd.DataFrame(rows)
    per_dataset = (lambda row: "a single dataset's row has no interval (given only over all datasets)"
                   if row["dataset"] != "all" else None)
    out.attrs["blank_reasons"] = {
        "models": lambda row: ("only the largest_per_family row names its LLMs" if row["model"] != "largest_per_family"
                               else None),
        "retention": lambda row: "closed-book FULL F1 is 0 (a ratio over 0 is undefined)" if row["f1_full_closed"] == 0
        else None,
        "retention_ci_low": per_dataset, "retention_ci_high": per_dataset}
    return out


# ---- recall by turn ------------------------------------------------------------------------------

def recall_by_turn(turns: pd.DataFrame) -> pd.DataFrame:
    """Per cell and turn: ``n`` conversations that reach the turn and their mean Recall@k at it
    (a changing population: fewer conversations reach later turns); and the cumulative recall
    of the supporting passages over a fixed population, ``n_all`` conversations, each carried at
    its last value after its last turn (it retrieves nothing more), so the curve never falls
    because short conversations drop out."""
    rcol = next((c for c in turns.columns if c.startswith("recall@")), None)
    t = turns.dropna(subset=["cum_recall"]) if rcol else turns.iloc[0:0]
    if t.empty:
        return pd.DataFrame()
    keys = ["dataset", "retriever", "condition", "policy"]
    per_turn = (t.groupby([*keys, "turn"], sort=True)
                .agg(n=("conv_id", "size"), recall=(rcol, "mean")).reset_index().rename(columns={"recall": rcol}))
    rows = []
    for key, g in t.groupby(keys, sort=True):
        wide = g.pivot(index="conv_id", columns="turn", values="cum_recall").sort_index(axis=1).ffill(axis=1)
        for turn in wide.columns:
            rows.append({**dict(zip(keys, key)), "turn": turn, "n_all": int(wide[turn].notna().sum()),
                         "cum_recall": float(wide[turn].mean())})
    return per_turn.merge(pd.DataFrame(rows), on=[*keys, "turn"], how="left")


def recall_summary(scores: pd.DataFrame, closed_retrievers: list[str], boot: dict,
                   pool: dict | None = None) -> pd.DataFrame:
    """Recall@k of the supporting passages by each conversation's last turn (cumulative over its
    turns; for one-turn FULL and CONCAT, that turn's Recall@k): per dataset, retriever, condition
    and policy, and as the paper's §5.4 pools it, over all datasets and the pooled LLMs per
    retriever (PoG too, its own row) and over the pooled retrievers (``retriever = all``);
    SHARDED also with both policies pooled (``policy = all``). The pooled rows of a condition other
    than FULL also give their recall minus FULL's over the same (LLM, retriever, question) units
    (``vs_full``: §5.4's "exceeds FULL for every retriever"). Intervals resample questions."""
    from convrag.stats.bootstrap import cluster_bootstrap_ci, paired_cluster_bootstrap

    s = scores[~scores.retriever.isin(closed_retrievers)].dropna(subset=["final_cum_recall"])
    if s.empty:
        return pd.DataFrame()
    rets, models = pool_of(s, closed_retrievers, pool)
    s = s.assign(cluster=s.dataset + "/" + s.qid)
    n, seed = boot.get("n_resamples", 1000), boot.get("seed", 0)
    unit = ["model", "retriever", "cluster"]
    rows = []

    def add(g, **key):
        per_q = g.groupby(["model", "retriever", "policy", "cluster"])["final_cum_recall"].mean().reset_index()
        ci = cluster_bootstrap_ci(per_q.final_cum_recall.to_numpy(), per_q.cluster.tolist(), n, seed)
        rows.append({**key, "questions": ci["n_clusters"], "conversations": len(g), "recall": ci["mean"],
                     "ci_low": ci["ci_low"], "ci_high": ci["ci_high"]})

    def vs_full(g, full):
        if g.condition.iloc[0] == "FULL" or full.empty:
            return
        a, b = g.groupby(unit)["final_cum_recall"].mean(), full.groupby(unit)["final_cum_recall"].mean()
        idx = a.index.intersection(b.index)
        if len(idx):
            r = paired_cluster_bootstrap(a[idx].to_numpy(), b[idx].to_numpy(), list(idx.get_level_values("cluster")),
                                         n_resamples=n, seed=seed)
            rows[-1].update(vs_full=r["mean_diff"], vs_full_ci_low=r["ci_low"], vs_full_ci_high=r["ci_high"])

    for (ds, ret, cond, pol), g in s.groupby(["dataset", "retriever", "condition", "policy"], sort=True):
        add(g, dataset=ds, retriever=ret, condition=cond, policy=pol)
    mine = s[s.model.isin(models)]
    for ret in [*sorted(s.retriever.unique()), "all"]:
        r = mine[mine.retriever.isin(rets)] if ret == "all" else mine[mine.retriever == ret]
        full = r[r.condition == "FULL"]
        for (cond, pol), g in r.groupby(["condition", "policy"], sort=True):
            add(g, dataset="all", retriever=ret, condition=cond, policy=pol)
            vs_full(g, full)
        sh = r[r.condition == "SHARDED"]
        if sh.policy.nunique() > 1:
            add(sh, dataset="all", retriever=ret, condition="SHARDED", policy="all")
            vs_full(sh, full)
    out = pd.DataFrame(rows)

    def why(row):
        if row["dataset"] != "all":
            return "the difference from FULL is given on the pooled rows (dataset = all)"
        return "FULL is the reference" if row["condition"] == "FULL" else "no FULL units paired with these"

    out.attrs["blank_reasons"] = {c: why for c in ("vs_full", "vs_full_ci_low", "vs_full_ci_high")}
    return out


# ---- retrieval cost (appendix: PoG vs ToG-2) -------------------------------------------------------

def retrieval_cost(turns: pd.DataFrame, retrievers: list[str]) -> pd.DataFrame:
    """LLM calls and tokens the retriever spent per retrieval (one per assistant turn) and per
    conversation, per (dataset, model, retriever, condition, policy)."""
    t = turns[turns.retriever.isin(retrievers)]
    if t.empty:
        return pd.DataFrame()
    t = t.assign(retrieval_tokens=t.retrieval_prompt_tokens + t.retrieval_completion_tokens)
    cols = ["retrieval_llm_calls", "retrieval_prompt_tokens", "retrieval_completion_tokens", "retrieval_tokens"]
    keys = ["dataset", "model", "retriever", "condition", "policy"]
    per_conv = t.groupby(keys + ["conv_id"])[cols].sum().groupby(keys).mean()
    per_ret = t.groupby(keys)[cols].mean()
    out = per_ret.rename(columns=lambda c: c.replace("retrieval_", "") + "_per_retrieval")
    out = out.join(per_conv.rename(columns=lambda c: c.replace("retrieval_", "") + "_per_conversation"))
    out.insert(0, "retrievals", t.groupby(keys).size())
    out.insert(1, "conversations", t.groupby(keys)["conv_id"].nunique())
    out["parse_failures"] = t.groupby(keys)["retrieval_parse_failures"].sum()
    # over all datasets, LLMs and policies (the paper's §B.2 figures): dataset, model, policy = all;
    # and over every condition too (condition = all), with each explorer's tokens relative to ToG-2's
    t = pd.concat([t, t.assign(condition="all")], ignore_index=True)
    pk = ["retriever", "condition"]
    pooled = t.groupby(pk)[cols].mean().rename(columns=lambda c: c.replace("retrieval_", "") + "_per_retrieval")
    pooled = pooled.join(t.groupby(pk + ["conv_id"])[cols].sum().groupby(pk).mean()
                         .rename(columns=lambda c: c.replace("retrieval_", "") + "_per_conversation"))
    pooled.insert(0, "retrievals", t.groupby(pk).size())
    pooled.insert(1, "conversations", t.groupby(pk)["conv_id"].nunique())
    pooled["parse_failures"] = t.groupby(pk)["retrieval_parse_failures"].sum()
    pooled = pooled.reset_index().assign(dataset="all", model="all", policy="all")
    base = pooled[pooled.retriever == "tog2"].set_index("condition")["tokens_per_conversation"]
    pooled["tokens_vs_tog2"] = pooled.tokens_per_conversation / pooled.condition.map(base).where(lambda x: x > 0)
    out = out.reset_index()
    out = pd.concat([out, pooled[[*out.columns, "tokens_vs_tog2"]]], ignore_index=True)
    tog2 = base.to_dict()

    def no_ratio(row) -> str | None:
        if row["dataset"] != "all":
            return "the ratio to ToG-2 is given only on the pooled rows (dataset, model, policy = all)"
        if row["condition"] not in tog2:
            return "no ToG-2 (tog2) retrievals in this run to compare with"
        return "ToG-2 spent no tokens here (a ratio over 0 is undefined)" if tog2[row["condition"]] == 0 else None

    out.attrs["blank_reasons"] = {"tokens_vs_tog2": no_ratio}
    return out




# ---- the paper's figures 5-9 ------------------------------------------------------------------

def _question_means(scores: pd.DataFrame, cond: str, policy: str | None = None) -> pd.Series:
    """Mean final F1 over runs per (dataset, model, qid) of one condition (and policy)."""
    x = scores[scores.condition == cond]
    if policy is not None:
        x = x[x.policy == policy]
    return x.groupby(["dataset", "model", "qid"])["final_f1"].mean()


def pooled_recovery(full, sharded, recovered, clusters, boot: dict) -> dict:
    """The share of the FULL-SHARDED gap a condition wins back, pooled: (mean recovered - mean
    SHARDED) / (mean FULL - mean SHARDED) over every (model, question) pair, not a mean of
    per-model ratios (a model with a tiny gap would swing those). Its 95% interval resamples
    questions (``clusters``: one label per pair), since a question's pairs are not independent;
    NaN without a positive gap (resamples without one are skipped)."""
    from convrag.stats.bootstrap import bootstrap_statistic

    def ratio(f, s, r):
        return recovery_share(f.mean(), s.mean(), r.mean())

    f, s, r = (np.asarray(v, float) for v in (full, sharded, recovered))
    est = ratio(f, s, r)
    out = {"pairs": len(f), "questions": len(set(clusters)), "f1_full": f.mean(), "f1_sharded": s.mean(),
           "f1_recovered": r.mean(), "gap": f.mean() - s.mean(), "recovery": est, "ci_low": np.nan, "ci_high": np.nan}
    if not np.isnan(est):
        b = bootstrap_statistic([f, s, r], ratio, n_resamples=boot.get("n_resamples", 1000),
                                seed=boot.get("seed", 0), clusters=list(clusters))
        out.update(ci_low=b["ci_low"], ci_high=b["ci_high"])
    return out


def recovery_for(scores: pd.DataFrame, boot: dict, policy: str, conditions: tuple[str, ...],
                 models=None) -> pd.DataFrame:
    """The paper's Figures 5 and 6: per retriever and dataset, and over all datasets (on a
    single-dataset run too), the share of the FULL-SHARDED gap each condition recovers under one
    policy, pooled over the LLMs (``models``: the config's pool; ``pooled_recovery``; intervals
    resample questions). A cell without a positive gap keeps its row with a NaN recovery and says
    so (``note``)."""
    rows = []
    for ret, g in _models(scores, models).groupby("retriever", sort=True):
        full, sh = _question_means(g, "FULL"), _question_means(g, "SHARDED", policy)
        for cond in conditions:
            rec = _question_means(g, cond, policy)
            idx = full.index.intersection(sh.index).intersection(rec.index)
            if idx.empty:
                continue
            datasets = idx.get_level_values("dataset")
            for ds in [*sorted(set(datasets)), "all"]:
                k = idx if ds == "all" else idx[datasets == ds]
                clusters = [f"{d}/{q}" for d, q in zip(k.get_level_values("dataset"), k.get_level_values("qid"))]
                res = pooled_recovery(full[k], sh[k], rec[k], clusters, boot)
                rows.append({"dataset": ds, "retriever": ret, "policy": policy, "condition": cond,
                             "models": k.get_level_values("model").nunique(), **res,
                             "note": "" if not np.isnan(res["recovery"]) else "no positive FULL-SHARDED gap to recover"})
    return pd.DataFrame(rows)


def full_vs_sharded_of(scores: pd.DataFrame, retrievers: list[str], boot: dict) -> pd.DataFrame:
    """FULL and SHARDED F1 per dataset, retriever and policy for some retrievers (the paper's
    Figure 7: PoG), pooled over models: the rows of Table 2, averaged."""
    t2 = table2(scores[scores.retriever.isin(retrievers)], boot["n_resamples"], boot["seed"])
    if t2.empty:
        return t2
    g = t2.groupby(["dataset", "retriever", "policy"], sort=True).agg(
        models=("model", "size"), f1_full=("f1_full", "mean"), f1_sharded=("f1_sharded", "mean"),
        gap=("gap", "mean")).reset_index()
    g["rel_gap"] = (g.f1_full - g.f1_sharded) / g.f1_full.where(g.f1_full > 0)
    rows = []
    s = scores[scores.retriever.isin(retrievers)]
    for (ret, policy), sh in s[s.condition == "SHARDED"].groupby(["retriever", "policy"], sort=True):
        full, shq = _pair_means(s[s.retriever == ret], "FULL"), _pair_means(sh, "SHARDED")
        idx = full.index.intersection(shq.index)
        if len(idx):  # over all datasets and LLMs (a single dataset's run too)
            r = _clustered(full, shq, idx, boot)
            rows.append({"dataset": "all", "retriever": ret, "policy": policy,
                         "models": idx.get_level_values("model").nunique(), "f1_full": r["mean_a"],
                         "f1_sharded": r["mean_b"], "gap": r["mean_diff"], "rel_gap": _rel_gap(r),
                         "gap_ci_low": r["ci_low"], "gap_ci_high": r["ci_high"]})
    out = pd.concat([g, pd.DataFrame(rows)], ignore_index=True) if rows else g.assign(gap_ci_low=np.nan, gap_ci_high=np.nan)

    def per_dataset(row):
        return ("a per-dataset row is the mean of Table 2's per-LLM gaps (each with its own interval there), given "
                "without an interval of the mean; the 95% "
                "interval (questions resampled) is on the rows over all datasets and LLMs (dataset = all)"
                if row["dataset"] != "all" else None)
    out.attrs["blank_reasons"] = {"gap_ci_low": per_dataset, "gap_ci_high": per_dataset}
    return out


def ceiling_and_floor(scores: pd.DataFrame, boot: dict, analysis: dict, closed_retrievers: list[str],
                      policy: str = "history", pool: dict | None = None) -> pd.DataFrame:
    """The paper's Figure 8 (§B.3): aptitude (the ceiling, P90 of F1 over runs) and the floor
    (P10), FULL against SHARDED under one policy (the paper's: HISTORY; closed book has only
    ``none``), with retrieval (the pooled retrievers: the paper's main methods by default), without
    (closed book), and for each retriever outside the pool on its own (``retrieval`` = its name:
    PoG), over the pooled LLMs, per dataset and over all datasets (``all``), averaged over the
    (LLM, retriever, question) units of each group;
    floor = aptitude - unreliability per question. The SHARDED rows carry the falls FULL ->
    SHARDED of the ceiling and the floor, paired per unit, with 95% intervals resampling questions."""
    from convrag.stats.bootstrap import paired_cluster_bootstrap

    hi, lo = analysis.get("aptitude_percentile", 90), analysis.get("unreliability_low", 10)
    rets, models = pool_of(scores, closed_retrievers, pool)
    scores = scores[scores.model.isin(models)]
    s = scores[(scores.condition == "FULL") | ((scores.condition == "SHARDED") & scores.policy.isin([policy, "none"]))]
    if s.empty:
        return pd.DataFrame()
    unit = ["dataset", "model", "retriever", "qid"]
    per_q = (s.groupby(["condition", *unit], sort=True)["final_f1"]
             .agg(ceiling=lambda v: aptitude(list(v), hi), unreliability=lambda v: unreliability(list(v), hi, lo))
             .reset_index())
    per_q["floor"] = per_q.ceiling - per_q.unreliability
    per_q["retrieval"] = np.where(per_q.retriever.isin(closed_retrievers), "closed book",
                                  np.where(per_q.retriever.isin(rets), "with retrieval", per_q.retriever))
    rows = []
    datasets = sorted(per_q.dataset.unique())
    for ds in [*datasets, "all"]:
        d = per_q if ds == "all" else per_q[per_q.dataset == ds]
        for retrieval, g in d.groupby("retrieval", sort=True):
            full = g[g.condition == "FULL"].set_index(unit)
            for cond, c in g.groupby("condition", sort=True):
                row = {"dataset": ds, "retrieval": retrieval, "condition": cond,
                       "policy": policy if cond == "SHARDED" else "none",
                       "cells": c[["model", "retriever"]].drop_duplicates().shape[0], "ceiling": c.ceiling.mean(),
                       "floor": c.floor.mean(), "unreliability": c.unreliability.mean()}
                if cond == "SHARDED":
                    sh = c.set_index(unit)
                    idx = full.index.intersection(sh.index)
                    clusters = [f"{a}/{q}" for a, q in zip(idx.get_level_values("dataset"), idx.get_level_values("qid"))]
                    for m in ("ceiling", "floor"):
                        if len(idx):
                            r = paired_cluster_bootstrap(full.loc[idx, m].to_numpy(), sh.loc[idx, m].to_numpy(), clusters,
                                                         n_resamples=boot.get("n_resamples", 1000), seed=boot.get("seed", 0))
                            row.update({f"{m}_fall": r["mean_diff"], f"{m}_fall_ci_low": r["ci_low"],
                                        f"{m}_fall_ci_high": r["ci_high"]})
                rows.append(row)
    return pd.DataFrame(rows)


def coverage_decline_by_model(scores: pd.DataFrame, boot: dict, metric: str = "best_f1",
                              sizes: dict | None = None) -> pd.DataFrame:
    """The paper's Figure 9 (§B.4, like Table 9): per LLM, the FULL-SHARDED decline in BEST F1
    on the complete-coverage pairs, averaged over datasets and retrievers (cells without covered
    pairs left out), with the mean FULL and SHARDED F1 on them and what SHARDED retains of FULL
    (their ratio: §B.4's "about three quarters", "over 90%"). ``sizes`` (LLM -> billions of
    parameters, None when undisclosed) adds each LLM's size and its rank from the smallest
    (``size_rank`` 1, 2, ...; blank for an undisclosed size), so "the four smallest models" are
    the rows of rank 1 to 4 whatever their names."""
    cc = complete_coverage(scores, boot, metric)
    if cc.empty or "gap_covered" not in cc:
        return pd.DataFrame()
    cc = cc.dropna(subset=["gap_covered"])
    out = (cc.groupby(["model", "policy", "metric"], sort=True)
           .agg(cells=("retriever", "size"), covered_pairs=("covered_pairs", "sum"),
                gap_covered=("gap_covered", "mean"), gap_all=("gap_all", "mean"),
                f1_full_covered=("f1_full_covered", "mean"), f1_sharded_covered=("f1_sharded_covered", "mean"))
           .reset_index())
    out["retention"] = out.f1_sharded_covered / out.f1_full_covered.where(out.f1_full_covered > 0)
    known = {m: b for m, b in (sizes or {}).items() if b is not None}
    ranks = {m: i + 1 for i, m in enumerate(sorted(known, key=lambda m: (known[m], m)))}
    out["size_b"] = out.model.map(known)
    out["size_rank"] = out.model.map(ranks).astype("Int64")  # an integer in the CSV (the published map names 1-4)
    undisclosed = (lambda row: "the registry gives no size for this model (params_b: null)"
                   if sizes and row["model"] in sizes else "the run gives no model sizes")
    out.attrs["blank_reasons"] = {
        "size_b": undisclosed, "size_rank": undisclosed,
        "retention": lambda row: "FULL F1 on the covered pairs is 0 (a ratio over 0 is undefined)"}
    return out


# ---- §A.2 shard-wording variability ----------------------------------------------------------

_PUNCT = re.compile(r"[^\w\s]")


def normalise_wording(text: str) -> str:
    """A shard's wording for comparison: lower case, punctuation removed, whitespace collapsed."""
    return " ".join(_PUNCT.sub("", text.lower()).split())


def distinct_wordings(samples: list[list[str]]) -> int:
    """How many different shard sets ``samples`` (each a list of shard texts) hold once each
    shard's wording is normalised (``normalise_wording``); order and number of shards count,
    and an empty set (nothing parsed) is one wording of its own."""
    return len({tuple(normalise_wording(s) for s in shards) for shards in samples})


WORDING_COLUMNS = ["dataset", "qid", "questions", "samples", "distinct_wordings", "ci_low", "ci_high",
                   "distinct_shard_counts", "pass_share"]


def shard_wording(variability: list[dict], boot: dict) -> pd.DataFrame:
    """Per dataset and question: the shard sets sampled, their distinct wordings, distinct
    shard counts and the share passing the checks; then a pooled row (``dataset`` and ``qid``
    ``all``): means over the questions, with a bootstrap interval over questions for the
    distinct wordings, and the share of all samples that pass."""
    rows = []
    for v in variability:
        for q in v.get("questions", []):
            sets = [s["shards"] for s in q["samples"]]
            rows.append({"dataset": q["dataset"], "qid": q["qid"], "questions": 1, "samples": len(sets),
                         "distinct_wordings": distinct_wordings(sets), "ci_low": np.nan, "ci_high": np.nan,
                         "distinct_shard_counts": len({len(s) for s in sets}),
                         "pass_share": float(np.mean([s["passed"] for s in q["samples"]])) if sets else np.nan})
    if not rows:
        return pd.DataFrame(columns=WORDING_COLUMNS)
    df = pd.DataFrame(rows)
    ci = bootstrap_ci(df.distinct_wordings.to_numpy(float), boot["n_resamples"], boot["seed"])
    n_samples = df.samples.sum()
    pooled = {"dataset": "all", "qid": "all", "questions": len(df), "samples": float(df.samples.mean()),
              "distinct_wordings": ci["mean"], "ci_low": ci["ci_low"], "ci_high": ci["ci_high"],
              "distinct_shard_counts": float(df.distinct_shard_counts.mean()),
              "pass_share": float((df.pass_share * df.samples).sum() / n_samples) if n_samples else np.nan}
    return pd.concat([df, pd.DataFrame([pooled])], ignore_index=True)[WORDING_COLUMNS]


# ---- §A.2 wording across simulated conversations ------------------------------------------------

SIMULATED_WORDING_COLUMNS = ["dataset", "qid", "questions", "simulations", "distinct_openings", "opening_identical",
                             "most_varied_shard", "max_distinct_forms", "ci_low", "ci_high"]


def simulated_wording(scores: pd.DataFrame, boot: dict, simulations: int = 15) -> pd.DataFrame:
    """§A.2: how the user simulator words the same shards across simulated conversations. Per
    question, over its first ``simulations`` SHARDED conversations (in conversation-id order; the
    paper counts 15 and does not say which): how many distinct openings (the first user message,
    wording normalised as ``normalise_wording``) and, for the shard sent in the most distinct forms
    (the paper's example is one shard of one question), how many forms. A pooled row (``dataset``
    and ``qid`` ``all``): the mean of those counts over questions (a 95% interval resampling
    questions for the forms), the largest number of distinct openings, and the share of questions
    whose opening was identical in every simulation (``opening_identical``)."""
    import json

    if "shard_forms" not in scores:
        return pd.DataFrame(columns=SIMULATED_WORDING_COLUMNS)
    sh = scores[(scores.condition == "SHARDED") & scores.shard_forms.notna()].sort_values("conv_id")
    rows = []
    for (ds, qid), g in sh.groupby(["dataset", "qid"], sort=True):
        g = g.head(simulations)
        forms: dict[str, set] = {}
        for f in g.shard_forms:
            for shard, key in json.loads(f).items():
                forms.setdefault(shard, set()).add(key)
        later = {k: v for k, v in forms.items() if k != "1"}  # shard 1 is the opening, sent as written
        most = max(later, key=lambda k: (len(later[k]), -int(k))) if later else None
        openings = g.opening.nunique()
        rows.append({"dataset": ds, "qid": qid, "questions": 1, "simulations": len(g), "distinct_openings": openings,
                     "opening_identical": float(openings == 1), "most_varied_shard": most,
                     "max_distinct_forms": len(later[most]) if most else np.nan, "ci_low": np.nan, "ci_high": np.nan})
    if not rows:
        return pd.DataFrame(columns=SIMULATED_WORDING_COLUMNS)
    df = pd.DataFrame(rows)
    have = df.max_distinct_forms.dropna().to_numpy(float)
    ci = bootstrap_ci(have, boot["n_resamples"], boot["seed"]) if len(have) else {"mean": np.nan, "ci_low": np.nan,
                                                                                  "ci_high": np.nan}
    pooled = {"dataset": "all", "qid": "all", "questions": len(df), "simulations": float(df.simulations.mean()),
              "distinct_openings": int(df.distinct_openings.max()), "opening_identical": float(df.opening_identical.mean()),
              "most_varied_shard": None, "max_distinct_forms": ci["mean"], "ci_low": ci["ci_low"], "ci_high": ci["ci_high"]}
    out = pd.concat([df, pd.DataFrame([pooled])], ignore_index=True)[SIMULATED_WORDING_COLUMNS]
    out.attrs["blank_reasons"] = {
        "most_varied_shard": lambda row: ("the pooled row is over questions" if row["qid"] == "all"
                                          else "no shard after the opening was sent"),
        "max_distinct_forms": "no shard after the opening was sent",
        "ci_low": lambda row: "the interval is given on the pooled row (over questions)" if row["qid"] != "all" else None,
        "ci_high": lambda row: "the interval is given on the pooled row (over questions)" if row["qid"] != "all" else None}
    return out
