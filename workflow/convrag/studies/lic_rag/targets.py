"""The named tables and figures of lic_rag (each caption in ``workflow/report/lic_rag/<name>.rst``).

Targets the paper numbers carry its number (Tables 2, 8, 9, 11, 12 and Figures 5 to 10;
``../shared/reference/published/lic_rag.yaml`` lists the numbering; its Table 1 and Figure 1 are
schematics); the others keep descriptive names. Every analysis target reads only the
two score tables (``scores``, ``turns``); ``datasets`` reads the question, shard and corpus files.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from convrag.io import iter_lines
from convrag.records import Question, ShardSet, read_records
from convrag.report.reproduction import reproduction_target
from convrag.studies.base import Target
from convrag.studies.lic_rag import analyses as A
from convrag.studies.lic_rag.plan import CATEGORIES, CONDITIONS, MULTI_TURN, POLICIES


def _scored(fn):
    """A build from the two score tables: ``fn(scores, turns, context)``."""
    def build(inputs: dict, ctx: dict):
        return fn(pd.read_parquet(inputs["scores"]), pd.read_parquet(inputs["turns"]), ctx)
    return build


def _boot(ctx: dict) -> tuple[int, int]:
    return ctx["boot"]["n_resamples"], ctx["boot"]["seed"]


def _panels(df: pd.DataFrame) -> pd.DataFrame:
    """The rows a figure shows one panel per dataset of: on a single-dataset run the rows over all
    datasets (kept in the data file, where the published map reads them) repeat that dataset's,
    so the figure leaves them out."""
    real = set(df.dataset) - {"all"}
    return df[df.dataset != "all"] if len(real) == 1 else df


def _fig_delivery(df, stem):
    from convrag.report import figures

    df = _panels(df[df.condition != "all"])  # condition "all" (overall F1) is in the data file, not a bar
    figures.grouped_bars(df, stem, x="retriever", hue="condition", y="mean_f1", lo="ci_low", hi="ci_high",
                         panel="dataset", ylabel="mean F1 (95% CI)", ylim=(0, 1), hue_order=CONDITIONS)


def _fig_recall(df, stem):
    """One column per retriever (and dataset): the top row Recall@k at each turn over the
    conversations reaching it, the bottom row cumulative recall over all conversations (ended
    ones carried at their last value); n under each tick; colour per condition, style per policy.
    More than five retrievers: each retriever's two panels side by side, two retrievers a row."""
    from convrag.report import figures

    single = df[df.condition.isin(["FULL", "CONCAT"])]  # §5.4's baseline: one retrieval, drawn across the turns
    df = df[df.condition.isin(MULTI_TURN)]
    if df.empty:
        return figures.placeholder(stem, "no_multi_turn", "the grid has no multi-turn (SHARDED, RECAP, SNOWBALL) "
                                                    "conversation with retrieval")
    rcol = next(c for c in df.columns if c.startswith("recall@"))
    pooled = df.dataset.nunique() > 1
    if pooled:  # a paper grid: pooled over the datasets (weighted by n); each is in the data
        keys = ["retriever", "condition", "policy", "turn"]

        def pool(x):
            w = x.assign(_r=x[rcol] * x["n"], _c=x["cum_recall"] * x["n_all"]).groupby(keys, sort=True)[
                ["_r", "_c", "n", "n_all"]].sum().reset_index()
            return w.assign(**{rcol: w["_r"] / w["n"], "cum_recall": w["_c"] / w["n_all"],
                               "retriever": "all datasets: " + w["retriever"]})
        df = pool(df)
        single = pool(single) if not single.empty else single
    col = df.retriever
    d = pd.concat([df.assign(panel=col + f": {rcol} at the turn", y=df[rcol], count=df["n"], col=col, part=0),
                   df.assign(panel=col + ": cumulative", y=df["cum_recall"], count=df["n_all"], col=col, part=1)],
                  ignore_index=True)
    d["turn"] = d["turn"].astype(int)
    cols = col.nunique()
    if cols > 5:  # a paper grid's retrievers: two retrievers (four panels) to a row instead of one wide row
        order = {c: i for i, c in enumerate(dict.fromkeys(col))}
        d = d.assign(_o=d["col"].map(order)).sort_values(["_o", "part"], kind="stable").drop(columns="_o")
    single = single[single.retriever.isin(set(col)) & (single["turn"] == 1)]
    refs = pd.concat([single.assign(panel=single.retriever + f": {rcol} at the turn", y=single[rcol]),
                      single.assign(panel=single.retriever + ": cumulative", y=single[rcol])], ignore_index=True)
    refs = refs.assign(label=refs.condition + " (one retrieval)")[["panel", "label", "y"]]
    figures.lines(d, stem, x="turn", y="y", group=["condition", "policy"], panel="panel",
                  max_cols=cols if cols <= 5 else 4, ylabel="recall of the supporting passages", ylim=(0, 1.05),
                  n="count", dodge=0.05, refs=refs.sort_values("label", key=lambda v: v.str.startswith("CONCAT")),
                  xlabel="turn", legend_title="condition / query policy",
                  orders={"condition": CONDITIONS, "policy": ("none", *POLICIES)})


DECOMPOSITION_PARTS = {"formulation": "formulation loss (FULL - CONCAT)", "delivery": "delivery loss (CONCAT - SHARDED)"}


def _fig_decomposition(df, stem):
    """The pooled rows (dataset and model "all": on a single dataset the same numbers as its
    own), one panel per query policy, retrievers along x with the closed book (no query
    policy) first in each; both losses with their 95% intervals. The data file keeps every
    dataset and model."""
    from convrag.report import figures

    pooled = df[(df.dataset == "all") & (df.model == "all")] if (df.dataset == "all").any() else df
    closed = pooled[pooled.policy == "none"]
    policies = [p for p in dict.fromkeys(pooled.policy) if p not in ("none", "all")] or ["none"]
    parts = []
    for p in policies:
        rows = pd.concat([closed, pooled[pooled.policy == p]]) if p != "none" else closed
        for key, label in DECOMPOSITION_PARTS.items():
            parts.append(pd.DataFrame({"panel": f"SHARDED under query policy {p}" if p != "none" else "closed book",
                                       "retriever": rows.retriever.to_numpy(), "part": label,
                                       "loss": rows[f"{key}_loss"].to_numpy(float),
                                       "lo": rows[f"{key}_ci_low"].to_numpy(float),
                                       "hi": rows[f"{key}_ci_high"].to_numpy(float)}))
    d = pd.concat(parts, ignore_index=True)
    figures.grouped_bars(d, stem, x="retriever", hue="part", y="loss", lo="lo", hi="hi", panel="panel",
                         ylabel="F1 lost (95% CI)", xlabel="retriever", legend_title="loss", max_cols=2,
                         hue_order=list(DECOMPOSITION_PARTS.values()))


def _fig_recovery(df, stem):
    from convrag.report import figures

    cols = [c for c in ("recap_recovery", "snowball_recovery") if c in df]
    gap = df.f1_full - df.f1_sharded
    if df[cols].isna().all().all() and (gap.dropna() <= 0).all():
        return figures.placeholder(
            stem, "no_positive_gap",
            f"no cell has a positive FULL-SHARDED gap (mean F1 FULL - SHARDED <= 0 in all {len(df)} rows, one "
            f"per dataset, model, retriever and policy, from {gap.min():.2f} to {gap.max():.2f}), so there is no "
            f"share of a gap to recover; the rows are in the data file")
    d = df.assign(label=df.retriever + "/" + df.policy)
    figures.grouped_bars(d.melt(id_vars=["dataset", "label"], value_vars=cols, var_name="condition",
                                value_name="recovery"),
                         stem, x="label", hue="condition", y="recovery", panel="dataset",
                         ylabel="share of FULL-SHARDED gap recovered")


def _study_order(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in the study's order of conditions (FULL, CONCAT, SHARDED, RECAP, SNOWBALL) and
    policies (none, history, current), not the alphabet's; other values after them."""
    ranks = {"condition": CONDITIONS, "policy": ("none", *POLICIES)}
    cols = [c for c in ranks if c in df]
    keys = {f"_{c}": df[c].map({v: i for i, v in enumerate(ranks[c])}).fillna(len(ranks[c])) for c in cols}
    return df.assign(**keys).sort_values(list(keys), kind="stable").drop(columns=list(keys))


def _cells_in_order(df: pd.DataFrame) -> list[str]:
    """The condition/policy cells of ``df`` in the study's order."""
    d = _study_order(df[["condition", "policy"]].drop_duplicates())
    return list(d.condition + "/" + d.policy)


def _fig_reliability(df, stem):
    from convrag.report import figures

    figures.scatter(df.assign(cell=df.condition + "/" + df.policy), stem, x="aptitude", y="unreliability",
                    label="cell", xlabel="aptitude (P90 of F1 over runs)", ylabel="unreliability (P90 - P10)",
                    order=_cells_in_order(df), legend_title="condition / query policy")


def _fig_categories(df, stem):
    from convrag.report import figures

    d = _study_order(df)
    d = d.assign(cell=d.condition + "/" + d.policy)
    figures.stacked_bars(d, stem, x="cell", parts=[*CATEGORIES, "unlabelled"], panel="retriever",
                         ylabel="share of assistant turns")


def _recovery_pooled(scores: pd.DataFrame, ctx: dict) -> pd.DataFrame:
    """RECAP and SNOWBALL recovery pooled over the LLMs under every policy (Figures 5 and 6 show two
    of these; §B.1 also gives SNOWBALL under CURRENT)."""
    parts = [A.recovery_for(scores, ctx["boot"], p, ("RECAP", "SNOWBALL"), _pooled_models(ctx))
             for p in sorted(scores.policy.unique()) if p != "none"]
    parts = [x for x in parts if not x.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _pooled_models(ctx: dict) -> list[str] | None:
    """The LLMs the pooled rows average over (``lic_rag.analysis.pooled_models``; None: all)."""
    return (ctx.get("pool") or {}).get("models")


def _outside_pool(scores: pd.DataFrame, ctx: dict) -> list[str]:
    """The retrievers of ``scores`` that retrieve but are outside the pool (PoG by default): the
    paper counts its conversations without them (§4: PoG of the appendix apart)."""
    pool = ctx.get("pool")
    if pool is None:
        return list(ctx.get("pog") or [])
    return sorted(set(scores.retriever) - set(ctx["closed_retrievers"]) - set(pool["retrievers"]))


def _coverage_cells(scores: pd.DataFrame, ctx: dict) -> pd.DataFrame:
    """The cells §B.4 pools (analysis.coverage_retrievers; default: every retriever)."""
    keep = (ctx.get("analysis") or {}).get("coverage_retrievers")
    return scores if not keep else scores[scores.retriever.isin(keep)]


def _judge_pairs(scores, ctx):
    """Figure 10's configurations, with the judge that gave the accuracy gap and its size (the
    figure warns when it is a tiny stand-in)."""
    pairs = A.judge_gap_correlation(scores, ctx["boot"])[1]
    judge = (ctx.get("reproduction") or {}).get("judge_model")
    out = pairs.assign(judge=judge, judge_params_b=(ctx.get("judge_sizes") or {}).get(judge))
    out.attrs = {**pairs.attrs, "blank_reasons": {**pairs.attrs.get("blank_reasons", {}),
                                                  "judge_params_b": "the judge's size is not in the model registry"}}
    return out


def _fig_judge(df, stem):
    """Figure 10, one panel per policy with its Pearson r (§B.5 gives r per policy); an orange
    warning band when the judge is a model under 1B parameters."""
    from convrag.report import figures
    from convrag.report.runnote import TINY_B

    titles = {}
    for p, g in df.groupby("policy"):
        ok = g[["f1_gap", "judge_gap"]].dropna()
        r = ok["f1_gap"].corr(ok["judge_gap"]) if len(ok) > 2 and ok.std().gt(0).all() else np.nan
        titles[p] = f"policy {p}: r = {r:.2f} (n = {len(ok)})" if np.isfinite(r) else \
            f"policy {p}: r undefined (n = {len(ok)}{', a gap is constant' if len(ok) > 2 else ''})"
    tiny = {}
    if {"judge", "judge_params_b"} <= set(df.columns):
        j = df.dropna(subset=["judge_params_b"]).drop_duplicates("judge")
        tiny = {str(r.judge): float(r.judge_params_b) for r in j.itertuples() if r.judge_params_b < TINY_B}
    figures.scatter(df, stem, x="f1_gap", y="judge_gap", label="retriever", panel="policy", titles=titles,
                    xlabel="FULL - SHARDED gap in F1", ylabel="FULL - SHARDED gap in judge accuracy", diagonal=True,
                    legend_title="retriever", warn=("the judge accuracy is judged by", tiny))



def _fig_recovery_policy(df, stem):
    """Figures 5 and 6; when no cell has a positive FULL-SHARDED gap there is no recovery to
    show, and the placeholder says so with the gaps (not "no cells")."""
    from convrag.report import figures

    if df["recovery"].isna().all() and (df["gap"].dropna() <= 0).all():
        gaps = df["gap"].dropna()
        span = f", from {gaps.min():.2f} to {gaps.max():.2f}" if len(gaps) else ""
        return figures.placeholder(
            stem, "no_positive_gap",
            f"no cell has a positive FULL-SHARDED gap (mean F1 FULL - SHARDED <= 0 in all {len(df)} rows, "
            f"one per retriever, dataset and condition{span}), so there is no share of a gap to recover; the "
            f"rows and their gaps are in the data file")
    figures.grouped_bars(_panels(df), stem, x="retriever", hue="condition", y="recovery", lo="ci_low", hi="ci_high",
                         panel="dataset", ylabel="share of the FULL-SHARDED gap recovered", hue_order=CONDITIONS,
                         legend_title="condition")


def _fig_full_vs_sharded(df, stem):
    """Figure 7: FULL and SHARDED F1 per retriever and policy; above a group with the gap's
    interval (the rows over all datasets and LLMs), the gap in F1 points and its 95% interval."""
    from convrag.report import figures

    df = _study_order(_panels(df))
    d = df.assign(label=df.retriever + "/" + df.policy)
    notes = {}
    for r in d.itertuples(index=False):
        lo, hi = getattr(r, "gap_ci_low", np.nan), getattr(r, "gap_ci_high", np.nan)
        if np.isfinite(r.gap) and np.isfinite(lo) and np.isfinite(hi):
            notes[(r.dataset, r.label)] = (f"gap {_pts(r.gap)}\n[{_pts(lo)}, {_pts(hi)}]", lo > 0 or hi < 0)
    figures.grouped_bars(d.melt(id_vars=["dataset", "label"], value_vars=["f1_full", "f1_sharded"],
                                var_name="condition", value_name="f1"),
                         stem, x="label", hue="condition", y="f1", panel="dataset", ylabel="mean F1",
                         ylim=(0, 1.15 if notes else 1), hue_labels={"f1_full": "FULL", "f1_sharded": "SHARDED"},
                         legend_title="condition", xlabel="retriever / query policy", notes=notes,
                         notes_label="Above a group: the FULL - SHARDED gap in F1 points [95% interval, questions "
                                     "resampled], on the rows over all datasets and LLMs; bold when it excludes 0."
                         if notes else "")


CEILING_FLOOR_BARS = {("FULL", "ceiling"): "FULL: ceiling (P90)", ("SHARDED", "ceiling"): "SHARDED: ceiling (P90)",
                      ("FULL", "floor"): "FULL: floor (P10)", ("SHARDED", "floor"): "SHARDED: floor (P10)"}


def _pts(v: float) -> str:
    """An F1 on 0-1 in points, one decimal, never "-0.0"."""
    t = f"{100 * v:.1f}"
    return "0.0" if t == "-0.0" else t


def _fig_ceiling_floor(df, stem):
    """Figure 8: per dataset panel, with retrieval, the closed book and each retriever outside the
    pool along x, the ceiling and the floor under FULL and SHARDED side by side; the SHARDED bars
    carry the paired 95% interval of their fall from FULL (FULL's level minus the fall's interval:
    a whisker short of FULL's bar is a fall that excludes 0), and each group says both falls in
    F1 points with their intervals (bold when they exclude 0), as §B.3 reports them."""
    from convrag.report import figures

    df = _panels(df)
    first = {"with retrieval": 0, "closed book": 1}
    df = df.assign(_o=df.retrieval.map(first).fillna(2)).sort_values(["_o", "retrieval"], kind="stable")
    full = df[df.condition == "FULL"].set_index(["dataset", "retrieval"])
    bars, notes = [], {}
    for r in df.itertuples(index=False):
        for m in ("ceiling", "floor"):
            lo = hi = np.nan
            if r.condition == "SHARDED" and (r.dataset, r.retrieval) in full.index:
                base = float(full.loc[(r.dataset, r.retrieval), m])
                lo, hi = base - getattr(r, f"{m}_fall_ci_high", np.nan), base - getattr(r, f"{m}_fall_ci_low", np.nan)
            bars.append({"dataset": r.dataset, "retrieval": r.retrieval, "bar": CEILING_FLOOR_BARS[(r.condition, m)],
                         "f1": getattr(r, m), "lo": lo, "hi": hi})
        if r.condition == "SHARDED":
            parts, bold = [], False
            for m in ("ceiling", "floor"):
                fall, lo, hi = (getattr(r, f"{m}_fall{k}", np.nan) for k in ("", "_ci_low", "_ci_high"))
                if np.isfinite(fall):
                    parts.append(f"{m} {_pts(fall)}" + (f"\n[{_pts(lo)}, {_pts(hi)}]"
                                                           if np.isfinite(lo) and np.isfinite(hi) else ""))
                    bold = bold or (np.isfinite(lo) and (lo > 0 or hi < 0))
            if parts:
                notes[(r.dataset, r.retrieval)] = ("\n".join(parts), bold)
    figures.grouped_bars(pd.DataFrame(bars), stem, x="retrieval", hue="bar", y="f1", lo="lo", hi="hi", panel="dataset",
                         ylabel="F1 over runs (ceiling P90, floor P10)", ylim=(0, 1.35), xlabel="retrieval",
                         hue_order=list(CEILING_FLOOR_BARS.values()), legend_title="condition: level", notes=notes,
                         notes_label="Above each group: the falls FULL - SHARDED of the ceiling and the floor in F1 "
                                     "points (negative: a rise) [paired 95% interval, questions resampled]; bold when "
                                     "an interval excludes 0. Whiskers on the SHARDED bars: FULL's level minus that "
                                     "interval.")


def _fig_coverage_by_model(df, stem):
    from convrag.report import figures

    figures.grouped_bars(df, stem, x="model", hue="policy", y="gap_covered",
                         ylabel="FULL - SHARDED BEST F1 under complete coverage")


def _retrieval_systems(inputs: dict, ctx: dict) -> pd.DataFrame:
    from convrag.studies.lic_rag.wiring import RETRIEVAL_SYSTEM_COLUMNS

    return pd.DataFrame(ctx["retrieval_systems"], columns=RETRIEVAL_SYSTEM_COLUMNS)


def _models(inputs: dict, ctx: dict) -> pd.DataFrame:
    from convrag.studies.lic_rag.wiring import MODEL_COLUMNS

    return pd.DataFrame(ctx["models"], columns=MODEL_COLUMNS)


def _datasets(inputs: dict, ctx: dict) -> pd.DataFrame:
    return dataset_table({d: {"questions": q, "shards": s, "corpus": c} for d, q, s, c in
                          zip(ctx["datasets"], inputs["questions"], inputs["shards"], inputs["corpora"])})


def _shard_wording(inputs: dict, ctx: dict) -> pd.DataFrame:
    from convrag.io import read_json

    return A.shard_wording([read_json(p) for p in inputs["shard_variability"]], ctx["boot"])


# F1, and differences of F1, recall or judge accuracy, that the paper writes in points (0-100: "a
# 5.1-point gap", §5): the Markdown shows these columns x100 (convrag.report.tables; the CSV, which
# the published map reads with its ``scale: 100``, keeps 0-1). Shares (recovery, delivery_share),
# ratios (rel_gap, retention, unreliability_relative_rise) and correlations stay as they are.
_F1 = ("f1_full", "f1_concat", "f1_sharded", "f1_recap", "f1_snowball", "f1_recovered", "f1_full_covered",
       "f1_sharded_covered", "f1_full_closed", "f1_concat_closed", "mean_f1")
_GAP = ("gap", "gap_ci_low", "gap_ci_high")
_CI = ("ci_low", "ci_high")
_DECOMPOSITION = ("formulation_loss", "formulation_ci_low", "formulation_ci_high", "delivery_loss",
                  "delivery_ci_low", "delivery_ci_high", "total_gap", "total_ci_low", "total_ci_high")
_RELIABILITY = tuple(f"{m}{s}" for m in ("aptitude", "unreliability", "aptitude_change", "unreliability_rise")
                     for s in ("", "_ci_low", "_ci_high"))
POINTS = {
    "table2_full_vs_sharded": _GAP + ("history_gain", "history_gain_ci_low", "history_gain_ci_high"),
    "decomposition": _DECOMPOSITION, "decomposition_bars": _DECOMPOSITION,
    "recovery": ("gap",), "recovery_bars": ("gap",), "recovery_pooled": ("gap",),
    "figure5_recap_recovery_current": ("gap",), "figure6_recovery_history": ("gap",),
    "table8_aptitude_unreliability": _RELIABILITY, "aptitude_vs_unreliability": _RELIABILITY,
    "delivery_conditions": _CI, "table9_complete_coverage": _GAP + _CI,
    "complete_coverage_cells": ("gap_covered", "gap_covered_ci_low", "gap_covered_ci_high", "gap_all", "gap_all_ci_low",
                                "gap_all_ci_high"),
    "figure9_coverage_decline_by_llm": ("gap_covered", "gap_all"),
    "judge_gap_correlation": ("f1_gap", "f1_gap_ci_low", "f1_gap_ci_high", "judge_gap", "judge_gap_ci_low",
                              "judge_gap_ci_high"),
    "figure10_judge_vs_f1_gap": ("f1_gap", "judge_gap"),
    "recall_summary": ("recall", "vs_full", "vs_full_ci_low", "vs_full_ci_high") + _CI,
    "figure7_pog_full_vs_sharded": _GAP,
    "figure8_ceiling_and_floor": tuple(f"{m}{s}" for m in ("ceiling_fall", "floor_fall") for s in ("", "_ci_low", "_ci_high"))
    + ("ceiling", "floor", "unreliability"),
}


def _in_points(name, build):
    """``build`` whose table names the columns it shows in points (``attrs["points"]``)."""
    def wrapped(inputs: dict, ctx: dict):
        df = build(inputs, ctx)
        if isinstance(df, pd.DataFrame):
            df.attrs["points"] = [c for c in (*_F1, *POINTS.get(name, ())) if c in df.columns]
        return df
    return wrapped


def _t(name, kind, fn, plot=None):
    return Target(name, kind, _in_points(name, _scored(fn)), plot, inputs=("scores", "turns"))


TARGETS = {t.name: t for t in [
    Target("datasets", "table", _datasets, inputs=("questions", "shards", "corpora")),
    # built only when lic_rag.sharding.variability is on (its artifact is None otherwise)
    Target("shard_wording", "table", _shard_wording, inputs=("shard_variability",)),
    _t("table2_full_vs_sharded", "table",
       lambda s, t, c: A.table2(s, *_boot(c), closed_retrievers=c["closed_retrievers"], pool=c.get("pool"))),
    _t("decomposition", "table", lambda s, t, c: A.decomposition(s, c["boot"], _pooled_models(c))),
    _t("recovery", "table", lambda s, t, c: A.recovery(s, c["boot"])),
    _t("table8_aptitude_unreliability", "table",
       lambda s, t, c: A.aptitude_unreliability(s, c["boot"], c["analysis"], c["closed_retrievers"], c.get("pool"))),
    _t("table9_complete_coverage", "table",
       lambda s, t, c: A.complete_coverage_by_dataset(_coverage_cells(s, c), c["boot"])),
    _t("complete_coverage_cells", "table", lambda s, t, c: A.complete_coverage(s, c["boot"])),
    _t("judge_accuracy", "table", lambda s, t, c: A.judge_accuracy(s)),
    _t("judge_gap_correlation", "table", lambda s, t, c: A.judge_gap_correlation(s, c["boot"])[0]),
    _t("response_categories", "table",
       lambda s, t, c: A.response_categories(t, c["closed_retrievers"], c["boot"], c.get("pool"))),
    _t("dependency_order", "table", lambda s, t, c: A.dependency_order(s)),
    _t("simulated_wording", "table",
       lambda s, t, c: A.simulated_wording(s, c["boot"], (c.get("analysis") or {}).get("wording_simulations", 15))),
    _t("grid_size", "table", lambda s, t, c: A.grid_size(s, _outside_pool(s, c))),
    _t("information_preservation", "table",
       lambda s, t, c: A.information_preservation(s, c["closed_retrievers"], c["analysis"])),
    _t("closed_book_retention", "table",
       lambda s, t, c: A.closed_book_retention(s, c["closed_retrievers"], c.get("largest_per_family"))),
    _t("recall_summary", "table", lambda s, t, c: A.recall_summary(s, c["closed_retrievers"], c["boot"], c.get("pool"))),
    _t("pog_cost", "table", lambda s, t, c: A.retrieval_cost(t, c["explorers"])),
    _t("delivery_conditions", "figure", lambda s, t, c: A.delivery_summary(s, *_boot(c), _pooled_models(c)),
       _fig_delivery),
    _t("recall_by_turn", "figure", lambda s, t, c: A.recall_by_turn(t), _fig_recall),
    _t("decomposition_bars", "figure", lambda s, t, c: A.decomposition(s, c["boot"], _pooled_models(c)),
       _fig_decomposition),
    _t("recovery_bars", "figure", lambda s, t, c: A.recovery(s, c["boot"]), _fig_recovery),
    _t("aptitude_vs_unreliability", "figure", lambda s, t, c: A.aptitude_unreliability(s, c["boot"], c["analysis"]),
       _fig_reliability),
    _t("recovery_pooled", "table", lambda s, t, c: _recovery_pooled(s, c)),
    _t("figure5_recap_recovery_current", "figure",
       lambda s, t, c: A.recovery_for(s, c["boot"], "current", ("RECAP",), _pooled_models(c)), _fig_recovery_policy),
    _t("figure6_recovery_history", "figure",
       lambda s, t, c: A.recovery_for(s, c["boot"], "history", ("RECAP", "SNOWBALL"), _pooled_models(c)),
       _fig_recovery_policy),
    _t("figure7_pog_full_vs_sharded", "figure", lambda s, t, c: A.full_vs_sharded_of(s, c["pog"], c["boot"]),
       _fig_full_vs_sharded),
    _t("figure8_ceiling_and_floor", "figure",
       lambda s, t, c: A.ceiling_and_floor(s, c["boot"], c["analysis"], c["closed_retrievers"], pool=c.get("pool")),
       _fig_ceiling_floor),
    _t("figure9_coverage_decline_by_llm", "figure",
       lambda s, t, c: A.coverage_decline_by_model(_coverage_cells(s, c), c["boot"], sizes=c.get("model_sizes")),
       _fig_coverage_by_model),
    Target("table11_retrieval_systems", "table", _retrieval_systems),
    Target("table12_models", "table", _models),
    _t("response_category_shares", "figure", lambda s, t, c: A.response_categories(t), _fig_categories),
    _t("figure10_judge_vs_f1_gap", "figure", lambda s, t, c: _judge_pairs(s, c), _fig_judge),
    reproduction_target("lic_rag"),
]}


def dataset_table(datasets: dict[str, dict[str, str]]) -> pd.DataFrame:
    """``datasets``: name -> {questions, shards, corpus} paths (final shard files)."""
    rows = []
    for name, paths in datasets.items():
        qs = read_records(paths["questions"], Question)
        sets = {s.qid: s for s in read_records(paths["shards"], ShardSet)}
        # every passed set: replacements from the reserve (sharding.replace_failed) are not in qs
        used = [s for s in sets.values() if s.passed]
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
