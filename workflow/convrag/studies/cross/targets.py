"""The cross grid's tables and figures (captions in ``workflow/report/cross/``).

* ``results_long``: one row per (benchmark, retriever, policy, reader, delivery, metric): the
  mean over the cell's items with a 95% percentile interval resampling whole conversations, the
  items scored and those without a score (an unreadable judge reply: counted, not guessed).
* ``heatmaps``: one heatmap per metric, benchmark x retriever, each cell the mean over the
  readers and query policies of its cell means under one delivery (``cross.heatmap_delivery``).
* ``qrels_vs_content``: per benchmark and retriever, how often "no qrels-relevant document among
  the shown passages" is right that the passages are insufficient (the content label's "no"):
  the precision of the qrels-derived label, with its interval, as worse_labels' Figure 2b
  measures it on RECOR.
* ``plan``: every cell of the configured grid, planned or not, with the reason.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from convrag.studies.base import Target

CELL = ["benchmark", "retriever", "policy", "reader", "delivery"]
LONG_COLUMNS = [*CELL, "kind", "metric", "mean", "ci_low", "ci_high", "n", "n_missing", "conversations"]
QVC_COLUMNS = ["benchmark", "retriever", "contexts", "n_unlabelled", "no_gold", "share_no_gold", "precision",
               "precision_ci_low", "precision_ci_high", "yes_share_no_gold", "partial_share_no_gold",
               "precision_gold", "n_gold"]


def _read(paths) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in paths]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def results_long(scores: pd.DataFrame, boot: dict) -> pd.DataFrame:
    """Cell means with conversation-cluster bootstrap intervals (NaN values counted, not used)."""
    from convrag.stats.bootstrap import cluster_bootstrap_ci

    if scores.empty:
        return pd.DataFrame(columns=LONG_COLUMNS)
    rows = []
    for key, g in scores.groupby([*CELL, "kind", "metric"], sort=False):
        ok = g[g["value"].notna()]
        row = dict(zip([*CELL, "kind", "metric"], key))
        row.update(n=int(len(ok)), n_missing=int(len(g) - len(ok)), conversations=int(ok["conversation_id"].nunique()))
        if len(ok):
            ci = cluster_bootstrap_ci(ok["value"].to_numpy(float), ok["conversation_id"].astype(str).tolist(),
                                      n_resamples=boot["n_resamples"], seed=boot["seed"])
            row.update(mean=ci["mean"], ci_low=ci["ci_low"], ci_high=ci["ci_high"])
        else:
            row.update(mean=math.nan, ci_low=math.nan, ci_high=math.nan)
        rows.append(row)
    return pd.DataFrame(rows, columns=LONG_COLUMNS)


def heatmap_frame(long: pd.DataFrame, delivery: str) -> pd.DataFrame:
    """benchmark x retriever x metric: the mean over readers and policies of the cell means."""
    cols = ["metric", "benchmark", "retriever", "value", "cells"]
    d = long[(long["delivery"] == delivery) & long["mean"].notna()] if not long.empty else long
    if d.empty:
        return pd.DataFrame(columns=cols)
    out = d.groupby(["metric", "benchmark", "retriever"], sort=False)["mean"].agg(["mean", "size"]).reset_index()
    return out.rename(columns={"mean": "value", "size": "cells"})[cols]


# the metrics an LLM judges, by the context key of the judge that gives them
JUDGED = {"correct": "judge", "sufficient": "content"}


def judged_by(df: pd.DataFrame, judges: dict) -> pd.DataFrame:
    """Add ``judge`` and ``judge_params_b`` to the heatmap rows of a judged metric (``judges``:
    context key -> {model, params_b}), so the figure can warn when the judge is tiny."""
    out = df.copy()
    out["judge"] = [(judges.get(JUDGED.get(m)) or {}).get("model") for m in out["metric"]]
    out["judge_params_b"] = [(judges.get(JUDGED.get(m)) or {}).get("params_b") for m in out["metric"]]
    out.attrs["blank_reasons"] = {"judge": "no LLM judges this metric",
                                  "judge_params_b": "no LLM judges this metric, or its size is not in the registry"}
    return out


def plot_heatmaps(df: pd.DataFrame, stem) -> None:
    """One panel per metric, three to a row; a [0, 1] colour scale when the metric's values lie in
    it. A metric judged by a model under ``runnote.TINY_B`` billion parameters gets an orange frame
    and title, and the figure a warning band naming the judge (drawn as a report target, the
    run's band names every stand-in instead: figures.stand_in_warning)."""
    from convrag.report.figures import _figure, active_stand_ins, empty_figure, save_figure
    from convrag.report.runnote import TINY_B

    if df.empty:
        save_figure(empty_figure("no scored cell under this delivery"), stem)
        return
    tiny = {}
    if "judge_params_b" in df:
        j = df.dropna(subset=["judge_params_b"])
        tiny = {m: (g["judge"].iloc[0], float(g["judge_params_b"].iloc[0]))
                for m, g in j[j["judge_params_b"] < TINY_B].groupby("metric", sort=False)}
    metrics = list(dict.fromkeys(df["metric"]))
    ncol = min(3, len(metrics))
    nrow = -(-len(metrics) // ncol)
    nb, nr = df["benchmark"].nunique(), df["retriever"].nunique()
    fig = _figure(figsize=(ncol * (1.6 + 0.7 * nr + 1.2), nrow * (1.4 + 0.45 * nb)), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrow, ncol, squeeze=False).ravel())
    for ax in axes[len(metrics):]:
        ax.set_visible(False)
    for ax, m in zip(axes, metrics):
        p = df[df["metric"] == m].pivot(index="benchmark", columns="retriever", values="value")
        v = p.to_numpy(float)
        lo, hi = (0.0, 1.0) if np.nanmin(v) >= 0 and np.nanmax(v) <= 1 else (np.nanmin(v), np.nanmax(v))
        im = ax.imshow(v, cmap="viridis", aspect="auto", vmin=lo, vmax=hi)
        ax.set_xticks(range(p.shape[1]), list(p.columns), rotation=45, ha="right")
        ax.set_yticks(range(p.shape[0]), list(p.index))
        for (i, j), x in np.ndenumerate(v):
            if np.isfinite(x):
                dark = (x - lo) / ((hi - lo) or 1.0) < 0.6
                ax.text(j, i, f"{x:.2f}", ha="center", va="center", fontsize=8, color="white" if dark else "black")
        ax.set_title(m if m not in tiny else f"{m} (judge {tiny[m][0]}, {tiny[m][1]:g}B)",
                     color="black" if m not in tiny else "darkorange")
        if m in tiny:
            for side in ax.spines.values():
                side.set(edgecolor="darkorange", linewidth=2.5)
        fig.colorbar(im, ax=ax, shrink=0.8)
    if tiny and not active_stand_ins():  # else the run's band under the panels names every stand-in
        judges = sorted({f"{name} ({b:g}B parameters)" for name, b in tiny.values()})
        fig.suptitle(f"Warning: {', '.join(tiny)} {'is' if len(tiny) == 1 else 'are'} judged by "
                     f"{', '.join(judges)}, a tiny stand-in (under {TINY_B:g}B): a check that the pipeline runs, "
                     f"not a measure of quality", fontsize=9, color="black", wrap=True,
                     bbox={"boxstyle": "round", "facecolor": "#ffe0b3", "edgecolor": "darkorange"})
    save_figure(fig, stem)


def qrels_vs_content(contexts: pd.DataFrame, partial_insufficient: bool, boot: dict) -> pd.DataFrame:
    """Per benchmark and retriever: precision of "no gold among the shown passages" as a detector
    of insufficiency (the content label's "no"; "partial" too when ``partial_insufficient``),
    the share of no-gold contexts the label calls sufficient ("yes" / "partial"), and the
    precision of "gold among them" as a sign of sufficiency."""
    from convrag.stats.detection import detector_report, insufficient_from_labels

    if contexts.empty:
        return pd.DataFrame(columns=QVC_COLUMNS)
    rows = []
    for (b, r), g in contexts.groupby(["benchmark", "retriever"], sort=False):
        labelled = g[g["label"].notna()]
        ng = labelled["no_gold"].to_numpy(bool)
        lab = labelled["label"].tolist()
        ins = insufficient_from_labels(lab, partial_insufficient=partial_insufficient)
        row = {"benchmark": b, "retriever": r, "contexts": int(len(g)), "n_unlabelled": int(len(g) - len(labelled)),
               "no_gold": int(ng.sum()), "share_no_gold": float(ng.mean()) if ng.size else math.nan,
               "yes_share_no_gold": float(np.mean([x == "yes" for x, n in zip(lab, ng) if n])) if ng.any() else math.nan,
               "partial_share_no_gold": (float(np.mean([x == "partial" for x, n in zip(lab, ng) if n]))
                                         if ng.any() else math.nan),
               "n_gold": int((~ng).sum()),
               "precision_gold": float(np.mean(ins[~ng] == 0)) if (~ng).any() else math.nan,
               "precision": math.nan, "precision_ci_low": math.nan, "precision_ci_high": math.nan}
        if ng.any():
            rep = detector_report(ng, lab, partial_insufficient=partial_insufficient,
                                  clusters=labelled["conversation_id"].astype(str).tolist(),
                                  n_resamples=boot["n_resamples"], seed=boot["seed"])
            p = rep["precision"]
            row.update(precision=p["estimate"], precision_ci_low=p["ci_low"], precision_ci_high=p["ci_high"])
        rows.append(row)
    return pd.DataFrame(rows, columns=QVC_COLUMNS)


def _plan(grid: dict) -> pd.DataFrame:
    from convrag.studies.cross.plan import grid_cells

    return pd.DataFrame(grid_cells(grid))


def _long(inputs, ctx):
    return results_long(_read(inputs["scores"]), ctx["boot"])


TARGETS = {t.name: t for t in [
    Target("results_long", "table", _long, inputs=("gold", "scores")),
    Target("heatmaps", "figure",
           lambda i, c: judged_by(heatmap_frame(_long(i, c), c["heatmap_delivery"]), c.get("judges") or {}),
           plot_heatmaps,
           inputs=("gold", "scores")),
    Target("qrels_vs_content", "table",
           lambda i, c: qrels_vs_content(_read(i["contexts"]), c["partial_insufficient"], c["boot"]),
           inputs=("gold", "contexts")),
    Target("plan", "table", lambda i, c: _plan(c["grid"]), inputs=()),
]}
