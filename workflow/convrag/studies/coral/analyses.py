"""coral's tables: statistics per conversation structure (the paper's Table 4), the retrieval
table (Table 2), generation against generator size (Table 5 / Figure 3) and against history
length (Figure 4), from the study's task and score files."""

from __future__ import annotations

import pandas as pd

from convrag.studies.coral.plan import FLOWS, POLICY_LABELS

JUDGE_COLUMN = "comparison:"  # + a judge model: Figure 5's other judges' outcomes per turn


def _words(text: str | None) -> int:
    return len((text or "").split())


# §3.3's conversation lengths: LDS 3-6 turns; SIDS, STRW and DTRW 1,600 of 6-10 turns and 400 of
# 11-20 (bounds included; a 6-turn conversation is in both of the first two bands, as the text has it)
TURN_BANDS = ((3, 6), (6, 10), (11, 20))


def structure_table(tasks) -> pd.DataFrame:
    """Table 4: per conversation-flow sampler, the conversations, turns per conversation (mean,
    min, max), the conversations in each of §3.3's length bands (``turns_3_6``, ``turns_6_10``,
    ``turns_11_20``: what its per-type counts are checked against), words per question and per
    golden response, golden passages per turn and the share of turns that have any; then all
    flows together."""
    rows = [{"flow": t.labels.get("flow") or "unknown", "conversation_id": t.conversation_id,
             "question_words": _words(t.question),
             "response_words": _words(t.reference_answers[0] if t.reference_answers else ""),
             "gold": sum(1 for r in t.gold_docs.values() if r > 0)} for t in tasks]
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows)
    order = [f for f in FLOWS if f in set(df.flow)] + sorted(set(df.flow) - set(FLOWS))

    def summarise(g: pd.DataFrame) -> dict:
        turns = g.groupby("conversation_id").size()
        return {"conversations": int(turns.size), "turns": int(len(g)), "turns_mean": round(float(turns.mean()), 2),
                "turns_min": int(turns.min()), "turns_max": int(turns.max()),
                **{f"turns_{lo}_{hi}": int(((turns >= lo) & (turns <= hi)).sum()) for lo, hi in TURN_BANDS},
                "question_words": round(float(g.question_words.mean()), 1),
                "response_words": round(float(g.response_words.mean()), 1),
                "gold_per_turn": round(float(g.gold.mean()), 2), "turns_with_gold": round(float((g.gold > 0).mean()), 3)}

    out = [{"flow": f, **summarise(df[df.flow == f])} for f in order]
    out.append({"flow": "all", **summarise(df)})
    return pd.DataFrame(out)


def retrieval_table(scores: pd.DataFrame, queries: dict | None = None) -> pd.DataFrame:
    """Table 2: the mean of each measure (x100, as the paper prints them) per retriever and
    query policy (``queries`` labels the session encoders' and LLM4CS's runs), over the turns
    that have golden passages."""
    if scores.empty:
        return pd.DataFrame()
    per = (scores.groupby(["retriever", "policy", "measure"], sort=False)
           .agg(turns=("task_id", "nunique"), value=("value", "mean")).reset_index())
    per["value"] = (100 * per.value).round(1)
    wide = per.pivot_table(index=["retriever", "policy", "turns"], columns="measure", values="value",
                           sort=False)[list(dict.fromkeys(scores.measure))].reset_index()
    wide.columns.name = None
    wide.insert(2, "query", wide.policy.map({**POLICY_LABELS, **(queries or {})}).fillna(wide.policy))
    return wide


def generator_size_table(table3: pd.DataFrame, sizes: dict) -> pd.DataFrame:
    """Table 5 / Figure 3: Table 3's rows with each model's size (billions of parameters, from
    the registry's ``params_b``; NaN when undisclosed), smallest model first."""
    if table3.empty:
        return table3.assign(params_b=pd.Series(dtype=float))
    out = table3.assign(params_b=table3["model"].map(lambda m: sizes.get(m)).astype(float))
    cols = ["model", "params_b"] + [c for c in table3.columns if c != "model"]
    out = out[cols].sort_values(["params_b", "model"], kind="stable", na_position="last").reset_index(drop=True)
    out.attrs["blank_reasons"] = {**table3.attrs.get("blank_reasons", {}),
                                  "params_b": "the registry gives no parameter count for this model"}
    return out


def history_sweep_table(scores: pd.DataFrame, sft_bases: dict | None = None) -> pd.DataFrame:
    """Figure 4: per answering model and history length m (the last m earlier turns shown), the
    answers' BLEU-1 and ROUGE-L (x100), win / draw / lose against the golden response (% of the
    decided comparisons), the mean input tokens and the number of answered turns. A fine-tuned
    generator (``sft_bases``: its name -> base model) is the curve after fine-tuning: ``sft``
    true, ``base_model`` its base, ``rougeL_gain`` its relative ROUGE-L gain over the base at the
    same m (tuned / base - 1; §5.4's +55% at m = 4); NaN for the other rows."""
    from convrag.studies.coral.evaluate import table3

    sft_bases = sft_bases or {}
    if scores.empty:
        return pd.DataFrame(columns=["model", "m", "bleu1", "rougeL", "win", "draw", "lose", "compared",
                                     "input_tokens", "tasks", "sft", "base_model", "rougeL_gain"])
    rows = []
    for (model, m), g in scores.groupby(["model", "max_history_turns"], sort=True):
        t = table3(g.assign(strategy=f"m={int(m)}")).iloc[0]
        rows.append({"model": model, "m": int(m), "bleu1": t["bleu1"], "rougeL": t["rougeL"], "win": t["win"],
                     "draw": t["draw"], "lose": t["lose"], "compared": int(t["compared"]),
                     "input_tokens": t["input_tokens"], "tasks": int(t["tasks"]), "sft": model in sft_bases,
                     "base_model": sft_bases.get(model)})
    out = pd.DataFrame(rows)
    base = out.set_index(["model", "m"])["rougeL"].to_dict()
    out["rougeL_gain"] = [(r.rougeL / base[(r.base_model, r.m)] - 1
                           if r.sft and base.get((r.base_model, r.m)) else float("nan")) for r in out.itertuples()]

    def no_gain(row) -> str:
        if not row["sft"]:
            return "not a fine-tuned generator (sft false): no base model to compare with"
        b = base.get((row["base_model"], row["m"]))
        if b is None or pd.isna(b):
            return f"its base model ({row['base_model']}) has no ROUGE-L at m = {row['m']}"
        return f"its base model's ROUGE-L at m = {row['m']} is 0 (a relative gain over 0 is undefined)"

    out.attrs["blank_reasons"] = {
        "base_model": lambda row: None if row["sft"] else "not a fine-tuned generator (sft false)",
        "rougeL_gain": no_gain}
    return out



def judge_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Figure 5: per answering model, history strategy and pairwise judge (the compare model
    first, then the other judges of ``evaluation.judges``), win / draw / lose (% of the pairs
    that judge decided), the decided pairs, and the judge's agreement with the compare model
    over the pairs both decided (share of equal outcomes, and Cohen's kappa from scikit-learn;
    NaN when fewer than two pairs or a single outcome class makes kappa undefined)."""
    from sklearn.metrics import cohen_kappa_score

    cols = ["model", "strategy", "judge", "role", "win", "draw", "lose", "compared", "agreement", "kappa",
            "both_decided"]
    if scores.empty or "comparison" not in scores:
        return pd.DataFrame(columns=cols)
    others = [c for c in scores.columns if c.startswith(JUDGE_COLUMN)]
    order = {s: i for i, s in enumerate(["raw_context", "last_response", "rewrite", "llm_summary"])}
    rows = []
    for (model, strategy), g in scores.groupby(["model", "strategy"], sort=False):
        primary = g["comparison"]
        for col, judge in [("comparison", g["compare_model"].iloc[0])] + [(c, c[len(JUDGE_COLUMN):]) for c in others]:
            o = g[col].dropna()
            n = len(o)
            both = primary.notna() & g[col].notna()
            a, b = primary[both].astype(str), g.loc[both, col].astype(str)
            own = col == "comparison"  # the compare model against itself: 1 by definition, not a measure
            agree = float((a == b).mean()) if both.any() and not own else float("nan")
            kappa = float("nan")
            if both.sum() >= 2 and len(set(a) | set(b)) > 1 and not own:
                kappa = float(cohen_kappa_score(a, b))
            rows.append({"model": model, "strategy": strategy, "judge": judge,
                         "role": "compare model" if own else "other judge",
                         **{x: (100.0 * float((o == x).sum()) / n if n else float("nan")) for x in ("win", "draw", "lose")},
                         "compared": n, "agreement": agree, "kappa": kappa, "both_decided": int(both.sum())})
    out = pd.DataFrame(rows, columns=cols)
    out["_s"] = out.strategy.map(lambda s: order.get(s, len(order)))
    out = out.sort_values(["model", "_s"], kind="stable").drop(columns="_s").reset_index(drop=True)
    out.attrs["blank_reasons"] = {"kappa": _no_kappa, "agreement": _no_agreement,
                                  **{x: (lambda row: "the judge decided no pair (compared = 0)"
                                         if row["compared"] == 0 else None) for x in ("win", "draw", "lose")}}
    return out


SELF = "the compare model itself (its agreement with itself is 1 by definition, not a measure)"


def _no_agreement(row) -> str | None:
    """Why Figure 5's agreement is blank (None: not for a reason the row shows)."""
    if row.get("role") == "compare model":
        return SELF
    return "no pair decided by both this judge and the compare model (both_decided = 0)" \
        if row["both_decided"] == 0 else None


def _no_kappa(row) -> str | None:
    """Why Figure 5's kappa is blank: the compare model itself, fewer than two pairs, or
    (agreement 1 and one outcome at 100% of the judge's decided pairs) a single outcome class;
    None when the row shows neither."""
    if row.get("role") == "compare model":
        return SELF
    if row["both_decided"] < 2:
        return f"fewer than two pairs decided by both judges (both_decided = {int(row['both_decided'])})"
    single = [x for x in ("win", "draw", "lose") if row[x] == 100.0]
    if row["agreement"] == 1.0 and single:
        return f"a single outcome class (every pair a {single[0]} for both judges) leaves kappa undefined"
    return None
