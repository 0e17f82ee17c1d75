"""lic_rag: scoring, the analyses of *Lost in Conversation or Lost in Translation?*, and
their tables and figures.

Scores are computed once per conversation and per assistant turn into Parquet tables; every
table and figure reads only those tables, so rebuilding one never re-reads conversations or
calls a model.

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
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from convrag.config import REPO_ROOT
from convrag.errors import DataError
from convrag.io import atomic_path, read_json
from convrag.metrics.qa import exact_match, f1_score
from convrag.metrics.reliability import aptitude, unreliability
from convrag.metrics.retrieval import recall_at_k
from convrag.records import Conversation, Question, read_records
from convrag.report import figures
from convrag.report.tables import write_table
from convrag.stats.bootstrap import bootstrap_ci, paired_bootstrap

KEYS = ["dataset", "model", "retriever", "condition", "policy"]
CELL = ["dataset", "model", "retriever"]
MULTI_TURN = ("SHARDED", "RECAP", "SNOWBALL")
CATEGORIES = ("answer_attempt", "clarification", "interrogation", "discussion", "hedge", "refuse", "missing")


# ---- scoring ---------------------------------------------------------------------------------

def _order_kept(c: Conversation) -> float:
    """1.0 if the shards were revealed in dependency order (shard ids increasing), 0.0 if
    not, NaN for single-turn conditions."""
    if c.condition not in MULTI_TURN:
        return np.nan
    ids = [t["shard_id"] for t in c.turns if t["role"] == "user" and t.get("shard_id")]
    return float(all(a < b for a, b in zip(ids, ids[1:])))


def score_conversations(conv_paths: list[str], question_paths: list[str], recall_k: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    questions: dict[tuple[str, str], Question] = {}
    for p in question_paths:
        for q in read_records(p, Question):
            questions[(q.dataset, q.qid)] = q
    conv_rows, turn_rows = [], []
    run_turn, qrels_turn, run_cum = {}, {}, {}
    for p in conv_paths:
        for c in read_records(p, Conversation):
            q = questions.get((c.dataset, c.qid))
            if q is None:
                raise DataError(f"{p}: conversation {c.conv_id} refers to unknown question {c.dataset}/{c.qid}")
            f1s, ems, seen = [], [], {}
            a_turns = [t for t in c.turns if t["role"] == "assistant"]
            for i, t in enumerate(a_turns, start=1):
                f1, em = f1_score(t["answer"], q.answers), exact_match(t["answer"], q.answers)
                f1s.append(f1)
                ems.append(em)
                key = f"{c.conv_id}#{i}"
                ranked = {r["doc_id"]: r["score"] for r in t.get("retrieved", [])[:recall_k]}
                for d in ranked:  # cumulative run: earlier-retrieved docs rank higher
                    seen.setdefault(d, 1e6 - len(seen))
                if ranked:
                    run_turn[key] = ranked
                    run_cum[key] = dict(seen)
                qrels_turn[key] = {d: 1 for d in q.supporting_doc_ids}
                cost = t.get("retrieval_cost") or {}
                turn_rows.append({
                    "conv_id": c.conv_id, **{k: getattr(c, k) for k in KEYS}, "qid": c.qid, "run": c.run,
                    "turn": i, "answered": bool(t["answered"]), "f1": f1, "em": em, "n_retrieved": len(ranked),
                    "category": t.get("category"), "category_parsed": t.get("category_parsed"),
                    "retrieval_llm_calls": cost.get("llm_calls", 0),
                    "retrieval_prompt_tokens": cost.get("prompt_tokens", 0),
                    "retrieval_completion_tokens": cost.get("completion_tokens", 0),
                    "retrieval_parse_failures": cost.get("parse_failures", 0),
                })
            j = c.judgment or {}
            conv_rows.append({
                "conv_id": c.conv_id, **{k: getattr(c, k) for k in KEYS}, "qid": c.qid, "run": c.run,
                "hops": q.hops, "n_turns": len(a_turns),
                "final_f1": f1_score(c.final_answer, q.answers),
                "final_em": exact_match(c.final_answer, q.answers),
                "best_f1": max(f1s) if f1s else 0.0, "best_em": max(ems) if ems else 0.0,
                "answered": c.answered, "n_unanswered_turns": c.n_unanswered_turns,
                "judge_correct": (np.nan if j.get("correct") is None else float(j["correct"])),
                "judge_method": j.get("method"), "judge_parsed": j.get("parsed"),
                "order_kept": _order_kept(c),
            })
    turns = pd.DataFrame(turn_rows)
    convs = pd.DataFrame(conv_rows)
    if len(turns):
        rec = recall_at_k(run_turn, {k: qrels_turn[k] for k in run_turn}, recall_k) if run_turn else {}
        cum = recall_at_k(run_cum, {k: qrels_turn[k] for k in run_cum}, 10**6) if run_cum else {}
        keys = turns["conv_id"] + "#" + turns["turn"].astype(str)
        turns[f"recall@{recall_k}"] = [rec.get(k, np.nan) for k in keys]
        turns["cum_recall"] = [cum.get(k, np.nan) for k in keys]
        last = turns.sort_values("turn").groupby("conv_id")["cum_recall"].last()
        convs["final_cum_recall"] = convs["conv_id"].map(last)
    return convs, turns


def write_parquet(df: pd.DataFrame, path: str) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def _per_question(df: pd.DataFrame, value: str) -> pd.Series:
    """Mean over runs per question: runs of one question are not independent samples."""
    return df.groupby("qid")[value].mean()


def _paired(a: pd.Series, b: pd.Series, boot: dict) -> dict | None:
    common = a.index.intersection(b.index)
    if common.empty:
        return None
    return paired_bootstrap(a[common].to_numpy(), b[common].to_numpy(),
                            n_resamples=boot.get("n_resamples", 1000), seed=boot.get("seed", 0))


# ---- Table 2 and the delivery figure -------------------------------------------------------

def table2(scores: pd.DataFrame, n_resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
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
                "f1_full": res["mean_a"], "f1_sharded": res["mean_b"], "rel_change": res["rel_change"],
                "gap": res["mean_diff"], "gap_ci_low": res["ci_low"], "gap_ci_high": res["ci_high"],
            })
    return pd.DataFrame(rows)


def delivery_summary(scores: pd.DataFrame, n_resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    rows = []
    for (ds, ret, cond), g in scores.groupby(["dataset", "retriever", "condition"], sort=True):
        # one value per question (mean over models, policies and runs): the resampling unit
        per_q = g.groupby("qid")["final_f1"].mean().to_numpy()
        ci = bootstrap_ci(per_q, n_resamples=n_resamples, seed=seed)
        rows.append({"dataset": ds, "retriever": ret, "condition": cond, "mean_f1": ci["mean"],
                     "ci_low": ci["ci_low"], "ci_high": ci["ci_high"], "n": ci["n"]})
    return pd.DataFrame(rows)


# ---- decomposition, recovery ----------------------------------------------------------------

def decomposition(scores: pd.DataFrame, boot: dict) -> pd.DataFrame:
    """FULL -> CONCAT -> SHARDED per (dataset, model, retriever, SHARDED policy):
    formulation loss = FULL - CONCAT, delivery loss = CONCAT - SHARDED, total = their sum."""
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
    return pd.DataFrame(rows)


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

def aptitude_unreliability(scores: pd.DataFrame, boot: dict, analysis: dict) -> pd.DataFrame:
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
    return pd.DataFrame(rows)


# ---- complete coverage ----------------------------------------------------------------------

def complete_coverage(scores: pd.DataFrame, boot: dict) -> pd.DataFrame:
    """F1 gap FULL - SHARDED on the (question, run) pairs where both retrieved every
    supporting passage, beside the gap on all pairs (closed book has no retrieval)."""
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
            row = {"dataset": ds, "model": model, "retriever": ret, "policy": policy,
                   "pairs": len(pairs), "covered_pairs": len(covered)}
            all_res = _paired(full.loc[pairs, "final_f1"].groupby("qid").mean(),
                              sh.loc[pairs, "final_f1"].groupby("qid").mean(), boot)
            if all_res:
                row.update(gap_all=all_res["mean_diff"], gap_all_ci_low=all_res["ci_low"],
                           gap_all_ci_high=all_res["ci_high"])
            if covered:
                idx = pd.MultiIndex.from_tuples(covered, names=["qid", "run"])
                res = _paired(full.loc[idx, "final_f1"].groupby("qid").mean(),
                              sh.loc[idx, "final_f1"].groupby("qid").mean(), boot)
                row.update(covered_questions=res["n"], f1_full_covered=res["mean_a"],
                           f1_sharded_covered=res["mean_b"], gap_covered=res["mean_diff"],
                           gap_covered_ci_low=res["ci_low"], gap_covered_ci_high=res["ci_high"])
            else:
                row.update(covered_questions=0)
            rows.append(row)
    return pd.DataFrame(rows)


# ---- judge ----------------------------------------------------------------------------------

def judge_accuracy(scores: pd.DataFrame) -> pd.DataFrame:
    g = scores.groupby(KEYS, sort=True)
    out = g.agg(n=("conv_id", "size"), mean_f1=("final_f1", "mean"), mean_em=("final_em", "mean"),
                judge_accuracy=("judge_correct", "mean"),
                judge_unparsed=("judge_parsed", lambda s: int((s == False).sum())),  # noqa: E712
                judged_by_llm=("judge_method", lambda s: int((s == "llm").sum()))).reset_index()
    return out


def judge_gap_correlation(scores: pd.DataFrame) -> pd.DataFrame:
    """Across (dataset, model, retriever, policy) pairs: the judge's FULL - SHARDED accuracy
    gap against the F1 gap (per-question means, then means over questions)."""
    from scipy import stats

    pairs = []
    for (ds, model, ret), g in scores.groupby(CELL, sort=True):
        full = g[g.condition == "FULL"]
        if full.empty:
            continue
        fj, ff = _per_question(full, "judge_correct"), _per_question(full, "final_f1")
        for policy, sh in g[g.condition == "SHARDED"].groupby("policy", sort=True):
            sj, sf = _per_question(sh, "judge_correct"), _per_question(sh, "final_f1")
            qs = ff.index.intersection(sf.index)
            jg = (fj[qs] - sj[qs]).mean()
            pairs.append({"dataset": ds, "model": model, "retriever": ret, "policy": policy,
                          "f1_gap": (ff[qs] - sf[qs]).mean(), "judge_gap": jg})
    df = pd.DataFrame(pairs)
    row = {"pairs": len(df)}
    ok = df.dropna(subset=["f1_gap", "judge_gap"]) if len(df) else df
    row["pairs_with_both"] = len(ok)
    if len(ok) >= 3 and ok["f1_gap"].nunique() > 1 and ok["judge_gap"].nunique() > 1:
        pr, pp = stats.pearsonr(ok["f1_gap"], ok["judge_gap"])
        sr, sp = stats.spearmanr(ok["f1_gap"], ok["judge_gap"])
        row.update(pearson_r=float(pr), pearson_p=float(pp), spearman_rho=float(sr), spearman_p=float(sp))
    else:
        row.update(pearson_r=np.nan, pearson_p=np.nan, spearman_rho=np.nan, spearman_p=np.nan,
                   note="fewer than 3 pairs with varying gaps: correlation undefined")
    return pd.DataFrame([row]), df


# ---- categories, dependency order ---------------------------------------------------------------

def response_categories(turns: pd.DataFrame) -> pd.DataFrame:
    """Share of assistant turns per category, per (retriever, condition, policy); turns the
    classifier could not label are the ``unlabelled`` share."""
    t = turns.copy()
    t["category"] = t["category"].fillna("unlabelled")
    rows = []
    for key, g in t.groupby(["retriever", "condition", "policy"], sort=True):
        counts = g["category"].value_counts()
        rows.append({**dict(zip(["retriever", "condition", "policy"], key)), "turns": len(g),
                     **{c: counts.get(c, 0) / len(g) for c in (*CATEGORIES, "unlabelled")}})
    return pd.DataFrame(rows)


def dependency_order(scores: pd.DataFrame) -> pd.DataFrame:
    mt = scores[scores.condition.isin(MULTI_TURN)]
    if mt.empty:
        return pd.DataFrame()
    return (mt.groupby(["dataset", "model", "retriever", "condition", "policy"], sort=True)
            .agg(conversations=("conv_id", "size"), order_kept_share=("order_kept", "mean")).reset_index())


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


def closed_book_retention(scores: pd.DataFrame, closed_retrievers: list[str]) -> pd.DataFrame:
    rows = []
    for (ds, model), g in _closed(scores, closed_retrievers).groupby(["dataset", "model"], sort=True):
        full, concat = (_per_question(g[g.condition == c], "final_f1") for c in ("FULL", "CONCAT"))
        common = full.index.intersection(concat.index)
        if common.empty:
            continue
        f, c = full[common].mean(), concat[common].mean()
        rows.append({"dataset": ds, "model": model, "n_questions": len(common), "f1_full_closed": f,
                     "f1_concat_closed": c, "retention": c / f if f > 0 else np.nan})
    return pd.DataFrame(rows)


# ---- recall by turn ------------------------------------------------------------------------------

def recall_by_turn(turns: pd.DataFrame) -> pd.DataFrame:
    rcol = next((c for c in turns.columns if c.startswith("recall@")), None)
    t = turns.dropna(subset=["cum_recall"]) if rcol else turns.iloc[0:0]
    if t.empty:
        return pd.DataFrame()
    return (t.groupby(["dataset", "retriever", "condition", "policy", "turn"], sort=True)
            .agg(n=("conv_id", "size"), recall=(rcol, "mean"), cum_recall=("cum_recall", "mean"))
            .reset_index().rename(columns={"recall": rcol}))


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
    return out.reset_index()


# ---- accounting ------------------------------------------------------------------------------------

def accounting_table(acc_paths: list[str]) -> pd.DataFrame:
    rows = []
    for p in acc_paths:
        acc = read_json(p)
        parts = Path(p).parts
        rows.append({"job": "/".join(parts[-4:]).removesuffix(".accounting.json"),
                     **{k: v for k, v in _flatten({k: v for k, v in acc.items() if k != "cells"}).items()}})
    return pd.DataFrame(rows)


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        elif not isinstance(v, (list, tuple)):
            out[f"{prefix}{k}"] = v
    return out


# ---- named targets: every table and figure of the study ------------------------------------------
# name -> (kind, build(scores, turns, ctx) -> DataFrame, caption, figure(df, stem) or None).
# Numbering is ConvRAG-Grid's own (docs/lic_rag_targets.md); table 2 is FULL vs SHARDED.

def _fig_delivery(df, stem):
    figures.delivery_conditions_figure(df, stem)


def _fig_recall(df, stem):
    df = df[df.condition.isin(MULTI_TURN)]
    figures.lines(df, stem, x="turn", y="cum_recall", group=["retriever", "condition", "policy"], panel="dataset",
                  ylabel="cumulative recall of supporting passages", ylim=(0, 1.05))


def _fig_decomposition(df, stem):
    d = df.assign(label=df.retriever + "/" + df.policy)
    figures.grouped_bars(d.melt(id_vars=["dataset", "label"], value_vars=["formulation_loss", "delivery_loss"],
                                var_name="part", value_name="f1_loss"),
                         stem, x="label", hue="part", y="f1_loss", panel="dataset", ylabel="F1 lost")


def _fig_recovery(df, stem):
    cols = [c for c in ("recap_recovery", "snowball_recovery") if c in df]
    d = df.assign(label=df.retriever + "/" + df.policy)
    figures.grouped_bars(d.melt(id_vars=["dataset", "label"], value_vars=cols, var_name="condition",
                                value_name="recovery"),
                         stem, x="label", hue="condition", y="recovery", panel="dataset",
                         ylabel="share of FULL-SHARDED gap recovered")


def _fig_reliability(df, stem):
    figures.scatter(df.assign(cell=df.condition + "/" + df.policy), stem, x="aptitude", y="unreliability",
                    label="cell", xlabel="aptitude (P90 of F1 over runs)", ylabel="unreliability (P90 - P10)")


def _fig_categories(df, stem):
    d = df.assign(cell=df.condition + "/" + df.policy)
    figures.stacked_bars(d, stem, x="cell", parts=[*CATEGORIES, "unlabelled"], panel="retriever",
                         ylabel="share of assistant turns")


def _fig_judge(df, stem):
    figures.scatter(df, stem, x="f1_gap", y="judge_gap", label="retriever", xlabel="FULL - SHARDED gap in F1",
                    ylabel="FULL - SHARDED gap in judge accuracy", diagonal=True)


def _judge_pairs(s, t, c):
    return judge_gap_correlation(s)[1]


TARGETS = {
    # name: (kind, build(scores, turns, ctx) -> DataFrame, figure(df, stem) or None); the
    # caption of each is workflow/report/lic_rag/<name>.rst (also used by `snakemake --report`)
    "table2_full_vs_sharded": ("table", lambda s, t, c: table2(s, c["boot"].get("n_resamples", 1000),
                                                                c["boot"].get("seed", 0)), None),
    "table3_decomposition": ("table", lambda s, t, c: decomposition(s, c["boot"]), None),
    "table4_recovery": ("table", lambda s, t, c: recovery(s, c["boot"]), None),
    "table5_aptitude_unreliability": ("table", lambda s, t, c: aptitude_unreliability(s, c["boot"], c["analysis"]), None),
    "table6_complete_coverage": ("table", lambda s, t, c: complete_coverage(s, c["boot"]), None),
    "table7_judge_accuracy": ("table", lambda s, t, c: judge_accuracy(s), None),
    "table8_judge_gap_correlation": ("table", lambda s, t, c: judge_gap_correlation(s)[0], None),
    "table9_response_categories": ("table", lambda s, t, c: response_categories(t), None),
    "table10_dependency_order": ("table", lambda s, t, c: dependency_order(s), None),
    "table11_information_preservation": ("table", lambda s, t, c: information_preservation(
        s, c["closed_retrievers"], c["analysis"]), None),
    "table12_closed_book_retention": ("table", lambda s, t, c: closed_book_retention(s, c["closed_retrievers"]), None),
    "appendix_pog_cost": ("table", lambda s, t, c: retrieval_cost(t, c.get("retrievers_of_kind", {}).get("pog", [])
                                                                  + c.get("retrievers_of_kind", {}).get("tog2", [])), None),
    "figure2_delivery_conditions": ("figure", lambda s, t, c: delivery_summary(
        s, c["boot"].get("n_resamples", 1000), c["boot"].get("seed", 0)), _fig_delivery),
    "figure3_recall_by_turn": ("figure", lambda s, t, c: recall_by_turn(t), _fig_recall),
    "figure4_decomposition": ("figure", lambda s, t, c: decomposition(s, c["boot"]), _fig_decomposition),
    "figure5_recovery": ("figure", lambda s, t, c: recovery(s, c["boot"]), _fig_recovery),
    "figure6_aptitude_unreliability": ("figure", lambda s, t, c: aptitude_unreliability(s, c["boot"], c["analysis"]),
                                       _fig_reliability),
    "figure7_response_categories": ("figure", lambda s, t, c: response_categories(t), _fig_categories),
    "figure8_judge_vs_f1_gap": ("figure", _judge_pairs, _fig_judge),
}
CAPTIONS = REPO_ROOT / "workflow" / "report" / "lic_rag"


def caption(name: str) -> str:
    path = CAPTIONS / f"{name}.rst"
    if not path.exists():
        raise DataError(f"{path}: caption of lic_rag target '{name}' is missing")
    return path.read_text(encoding="utf-8").strip()


def build_target(name: str, scores_path: str, turns_path: str, ctx: dict, out_stem: str) -> None:
    """Write one named table (CSV + Markdown) or figure (PNG + PDF, plus its data as CSV +
    Markdown). An analysis with nothing to show (e.g. no RECAP cells) still writes its files,
    with a caption that says why, so every target of the grid exists."""
    if name not in TARGETS:
        raise DataError(f"unknown lic_rag target '{name}' (known: {', '.join(TARGETS)})")
    kind, build, fig = TARGETS[name]
    text = caption(name)
    df = build(pd.read_parquet(scores_path), pd.read_parquet(turns_path), ctx)
    if kind == "figure":
        if df.empty:
            figures.save_figure(figures.empty_figure(f"{name}: nothing to plot in this grid"), out_stem)
            text += " (Nothing to plot: the grid has no cells this analysis needs.)"
        else:
            fig(df, out_stem)
    elif df.empty:
        text += " (Empty: the grid has no cells this analysis needs.)"
    write_table(df, out_stem, caption=text)


# ---- Table 1: the datasets -------------------------------------------------------------------



def dataset_table(datasets: dict[str, dict[str, str]]) -> pd.DataFrame:
    """``datasets``: name -> {questions, shards, corpus} paths (final shard files)."""
    from convrag.records import ShardSet
    from convrag.io import iter_lines

    rows = []
    for name, paths in datasets.items():
        qs = read_records(paths["questions"], Question)
        sets = {s.qid: s for s in read_records(paths["shards"], ShardSet)}
        used = [sets[q.qid] for q in qs if q.qid in sets and sets[q.qid].passed]
        hops = pd.Series([q.hops for q in qs]).value_counts().sort_index()
        rows.append({
            "dataset": name,
            "corpus_passages": sum(1 for _ in iter_lines(paths["corpus"])),
            "questions": len(qs),
            "in_grid": len(used),
            "llm_shards": sum(s.method == "llm" for s in used),
            "decomposition_shards": sum(s.method == "decomposition" for s in used),
            "edited_in_review": sum(s.review_status == "edited" for s in used),
            "failed_checks": sum(1 for q in qs if q.qid in sets and not sets[q.qid].passed
                                 and sets[q.qid].review_status != "rejected"),
            "rejected_in_review": sum(1 for s in sets.values() if s.review_status == "rejected"),
            "hops": ", ".join(f"{h}-hop: {n}" for h, n in hops.items()),
            "shards_per_question": float(np.mean([len(s.shards) for s in used])) if used else np.nan,
            "supporting_per_question": float(np.mean([len(q.supporting_doc_ids) for q in qs])) if qs else np.nan,
        })
    return pd.DataFrame(rows)
