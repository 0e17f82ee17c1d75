"""lic_rag scoring, Table 2 and the delivery-conditions figure.

Scores are computed once per conversation and per assistant turn into Parquet tables; the
table and figure rules read only those tables, so rebuilding a figure never re-reads
conversations or calls a model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from convrag.errors import DataError
from convrag.io import atomic_path, read_json
from convrag.metrics.qa import exact_match, f1_score
from convrag.metrics.retrieval import recall_at_k
from convrag.records import Conversation, Question, read_records
from convrag.report.figures import delivery_conditions_figure
from convrag.report.tables import write_table
from convrag.stats.bootstrap import bootstrap_ci, paired_bootstrap

KEYS = ["dataset", "model", "retriever", "condition", "policy"]


def score_conversations(conv_paths: list[str], question_paths: list[str], top_k: int) -> tuple[pd.DataFrame, pd.DataFrame]:
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
            f1s, seen = [], {}
            a_turns = [t for t in c.turns if t["role"] == "assistant"]
            for i, t in enumerate(a_turns, start=1):
                f1 = f1_score(t["answer"], q.answers)
                f1s.append(f1)
                key = f"{c.conv_id}#{i}"
                ranked = {r["doc_id"]: r["score"] for r in t.get("retrieved", [])[:top_k]}
                for d in ranked:  # cumulative run: earlier-retrieved docs rank higher
                    seen.setdefault(d, 1e6 - len(seen))
                if ranked:
                    run_turn[key] = ranked
                    run_cum[key] = dict(seen)
                qrels_turn[key] = {d: 1 for d in q.supporting_doc_ids}
                turn_rows.append({
                    "conv_id": c.conv_id, **{k: getattr(c, k) for k in KEYS}, "qid": c.qid, "run": c.run,
                    "turn": i, "answered": bool(t["answered"]), "f1": f1,
                    "em": exact_match(t["answer"], q.answers), "n_retrieved": len(ranked),
                })
            conv_rows.append({
                "conv_id": c.conv_id, **{k: getattr(c, k) for k in KEYS}, "qid": c.qid, "run": c.run,
                "hops": q.hops, "n_turns": len(a_turns),
                "final_f1": f1_score(c.final_answer, q.answers),
                "final_em": exact_match(c.final_answer, q.answers),
                "best_f1": max(f1s) if f1s else 0.0,
                "answered": c.answered, "n_unanswered_turns": c.n_unanswered_turns,
            })
    turns = pd.DataFrame(turn_rows)
    convs = pd.DataFrame(conv_rows)
    if len(turns):
        rec = recall_at_k(run_turn, {k: qrels_turn[k] for k in run_turn}, top_k) if run_turn else {}
        cum = recall_at_k(run_cum, {k: qrels_turn[k] for k in run_cum}, 10**6) if run_cum else {}
        keys = turns["conv_id"] + "#" + turns["turn"].astype(str)
        turns[f"recall@{top_k}"] = [rec.get(k, np.nan) for k in keys]
        turns["cum_recall"] = [cum.get(k, np.nan) for k in keys]
    return convs, turns


def write_parquet(df: pd.DataFrame, path: str) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def _per_question(df: pd.DataFrame, value: str) -> pd.Series:
    """Mean over runs per question: runs of one question are not independent samples."""
    return df.groupby("qid")[value].mean()


def table2(scores: pd.DataFrame, n_resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    rows = []
    group = ["dataset", "model", "retriever"]
    for (ds, model, ret), g in scores.groupby(group, sort=True):
        full = g[g.condition == "FULL"]
        if full.empty:
            continue
        full_q = _per_question(full, "final_f1")
        for policy, sh in g[g.condition == "SHARDED"].groupby("policy", sort=True):
            sh_q = _per_question(sh, "final_f1")
            common = full_q.index.intersection(sh_q.index)
            if common.empty:
                continue
            res = paired_bootstrap(full_q[common].to_numpy(), sh_q[common].to_numpy(), n_resamples=n_resamples, seed=seed)
            rows.append({
                "dataset": ds, "model": model, "retriever": ret, "policy": policy, "n_questions": len(common),
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


def accounting_table(conv_paths: list[str]) -> pd.DataFrame:
    rows = []
    for p in conv_paths:
        acc_path = Path(str(p)[: -len(".jsonl")] + ".accounting.json")
        acc = read_json(acc_path)
        parts = Path(p).parts
        rows.append({"job": "/".join(parts[-5:]).removesuffix(".jsonl"), **{k: v for k, v in _flatten(acc).items()}})
    return pd.DataFrame(rows)


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        elif not isinstance(v, (list, tuple)):
            out[f"{prefix}{k}"] = v
    return out


TABLE2_CAPTION = (
    "Table 2. Mean final-answer F1 under FULL and SHARDED delivery, relative change "
    "(SHARDED-FULL)/FULL, and the FULL-SHARDED gap with a paired bootstrap 95% CI over questions "
    "(F1 averaged over runs per question)."
)


def run_table2(scores_path: str, boot: dict, out_stem: str) -> None:
    df = table2(pd.read_parquet(scores_path), boot.get("n_resamples", 1000), boot.get("seed", 0))
    write_table(df, out_stem, caption=TABLE2_CAPTION)


def run_figure(scores_path: str, boot: dict, out_stem: str) -> None:
    """The figure plus its data (mean F1 and CI per dataset x retriever x condition) as CSV."""
    df = delivery_summary(pd.read_parquet(scores_path), boot.get("n_resamples", 1000), boot.get("seed", 0))
    delivery_conditions_figure(df, out_stem)
    write_table(df, out_stem, caption="Mean final-answer F1 per condition (bootstrap 95% CI over questions).")
