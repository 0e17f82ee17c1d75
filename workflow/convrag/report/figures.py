"""Report figures, each saved as PNG (dpi 150, for quick looks) and PDF (for papers).

Figures are built on ``matplotlib.figure.Figure`` with the Agg canvas rather than pyplot, so
they work headless inside Snakemake jobs and leave no global pyplot state behind.  Saving
goes through convrag.io.atomic_path; the temporary file name has no image suffix, so the
format is passed to savefig explicitly.  PDF dates are dropped so reruns give identical files.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from convrag.io import atomic_path

__all__ = ["save_figure", "delivery_conditions_figure", "CONDITION_ORDER"]

CONDITION_ORDER = ("FULL", "CONCAT", "SHARDED", "RECAP", "SNOWBALL")
_REQUIRED = ("retriever", "condition", "mean_f1", "ci_low", "ci_high")


def save_figure(fig: Figure, stem: str | os.PathLike) -> tuple[Path, Path]:
    """Write ``<stem>.png`` and ``<stem>.pdf`` atomically; return their paths."""
    stem = Path(stem)
    png, pdf = stem.with_name(stem.name + ".png"), stem.with_name(stem.name + ".pdf")
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", dpi=150, bbox_inches="tight")
    with atomic_path(pdf) as tmp:
        fig.savefig(tmp, format="pdf", bbox_inches="tight", metadata={"CreationDate": None, "ModDate": None})
    return png, pdf


def _ordered(values, preferred=()) -> list:
    present = list(dict.fromkeys(values))  # first-appearance order
    return [v for v in preferred if v in present] + [v for v in present if v not in preferred]


def delivery_conditions_figure(df: pd.DataFrame, stem: str | os.PathLike) -> tuple[Path, Path]:
    """Grouped bars of mean F1 (+ CI error bars) per retriever and delivery condition.

    One panel per dataset (a single panel 'all' when there is no ``dataset`` column).
    Conditions are drawn in the order FULL, CONCAT, SHARDED, RECAP, SNOWBALL (those present),
    then any others; retrievers in order of first appearance.  Missing cells are left empty.
    """
    missing = [c for c in _REQUIRED if c not in df.columns]
    if missing:
        raise ValueError(f"delivery_conditions_figure: missing columns {missing}; have {list(df.columns)}")
    if df.empty:
        raise ValueError("delivery_conditions_figure: empty DataFrame")
    df = df.copy()
    if "dataset" not in df.columns:
        df["dataset"] = "all"
    keys = ["dataset", "retriever", "condition"]
    if df.duplicated(keys).any():
        raise ValueError(f"delivery_conditions_figure: duplicate rows for {keys}")

    datasets = _ordered(df["dataset"])
    retrievers = _ordered(df["retriever"])
    conditions = _ordered(df["condition"], CONDITION_ORDER)
    width = 0.8 / len(conditions)
    x = np.arange(len(retrievers))

    fig = Figure(figsize=(max(4.0, 1.0 + 1.2 * len(retrievers)) * len(datasets), 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = np.atleast_1d(fig.subplots(1, len(datasets), sharey=True, squeeze=False)[0])
    colors = {c: f"C{i}" for i, c in enumerate(conditions)}
    for ax, ds in zip(axes, datasets):
        sub = df[df["dataset"] == ds].set_index(["retriever", "condition"])
        for j, cond in enumerate(conditions):
            cells = sub.reindex([(r, cond) for r in retrievers])
            mean = cells["mean_f1"].to_numpy(dtype=float)
            err = np.vstack([mean - cells["ci_low"].to_numpy(dtype=float), cells["ci_high"].to_numpy(dtype=float) - mean])
            err = np.nan_to_num(np.clip(err, 0, None))
            ax.bar(x + (j - (len(conditions) - 1) / 2) * width, np.nan_to_num(mean), width,
                   yerr=err, capsize=2, color=colors[cond], label=str(cond))
        ax.set_title(str(ds))
        ax.set_xticks(x, [str(r) for r in retrievers])
        ax.set_xlabel("retriever")
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("mean F1 (95% CI)")
    # Outside the panels so high bars are never hidden behind it.
    fig.legend(*axes[0].get_legend_handles_labels(), title="condition", fontsize="small", loc="outside right upper")
    return save_figure(fig, stem)
