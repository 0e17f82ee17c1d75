"""Report figures, each saved as PNG (dpi 150, for quick looks) and PDF (for papers).

Figures are built on ``matplotlib.figure.Figure`` with the Agg canvas rather than pyplot, so
they work headless inside Snakemake jobs and leave no global pyplot state behind.  Saving
goes through convrag.io.atomic_path; the temporary file name has no image suffix, so the
format is passed to savefig explicitly.  PDF dates are dropped so reruns give identical files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from convrag.io import atomic_path

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["save_figure", "grouped_bars", "stacked_bars", "lines", "scatter", "empty_figure"]


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


def _figure(**kw) -> Figure:
    """A Figure on the Agg canvas; matplotlib is imported here so table jobs never load it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kw)
    FigureCanvasAgg(fig)
    return fig


def _canvas(n_panels: int, width_per: float, height: float = 3.6):
    fig = _figure(figsize=(max(4.0, width_per) * n_panels, height), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, n_panels, sharey=True, squeeze=False)[0])
    return fig, axes


def _need(df: pd.DataFrame, cols, name: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{name}: missing columns {missing}; have {list(df.columns)}")
    if df.empty:
        raise ValueError(f"{name}: empty DataFrame (nothing to plot)")


def grouped_bars(df: pd.DataFrame, stem, *, x: str, hue: str, y: str, lo: str | None = None, hi: str | None = None,
                 panel: str | None = None, ylabel: str = "", ylim=None, hue_order=()) -> tuple[Path, Path]:
    """Bars of ``y`` per ``x`` and ``hue`` (optional CI whiskers ``lo``/``hi``), one panel per
    value of ``panel``; missing cells stay empty, a cell whose value is NaN (undefined, e.g. a
    ratio without a denominator) is marked "n/a" and a value of exactly 0 is marked "0", so
    neither looks like a missing bar; a cell with several rows (several models, say) shows their
    mean. ``hue_order`` puts those hues first."""
    _need(df, [c for c in (x, hue, y, lo, hi, panel) if c], "grouped_bars")
    df = df.copy()
    panel = panel or "_panel"
    if panel not in df:
        df[panel] = "all"
    panels, xs, hues = _ordered(df[panel]), _ordered(df[x]), _ordered(df[hue], hue_order)
    fig, axes = _canvas(len(panels), 1.0 + 1.2 * len(xs))
    width = 0.8 / len(hues)
    pos = np.arange(len(xs))
    for ax, pv in zip(axes, panels):
        sub = df[df[panel] == pv].groupby([x, hue])[[c for c in (y, lo, hi) if c]].mean()
        for j, h in enumerate(hues):
            cells = sub.reindex([(v, h) for v in xs])
            mean = cells[y].to_numpy(dtype=float)
            err = None
            if lo and hi:
                err = np.vstack([mean - cells[lo].to_numpy(dtype=float), cells[hi].to_numpy(dtype=float) - mean])
                err = np.nan_to_num(np.clip(err, 0, None))
            at = pos + (j - (len(hues) - 1) / 2) * width
            ax.bar(at, np.nan_to_num(mean), width, yerr=err, capsize=2, color=f"C{j}", label=str(h))
            present = np.array([(v, h) in sub.index for v in xs])
            for k in np.flatnonzero(present & (np.isnan(mean) | (mean == 0))):
                ax.annotate("n/a" if np.isnan(mean[k]) else "0", (at[k], 0), xytext=(0, 2), textcoords="offset points",
                            ha="center", va="bottom", fontsize=6, rotation=90, color="dimgrey")
        ax.set_title(str(pv))
        tilt = len(xs) > 4 or len(xs) * max(len(str(v)) for v in xs) > 40  # labels that would overlap
        ax.set_xticks(pos, [str(v) for v in xs], rotation=30 if tilt else 0, ha="right" if tilt else "center")
        ax.set_xlabel(x)
        if ylim:
            ax.set_ylim(*ylim)
        ax.axhline(0, color="black", lw=0.6)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel(ylabel or y)
    fig.legend(*axes[0].get_legend_handles_labels(), title=hue, fontsize="small", loc="outside right upper")
    return save_figure(fig, stem)


def stacked_bars(df: pd.DataFrame, stem, *, x: str, parts: list[str], panel: str | None = None,
                 ylabel: str = "share") -> tuple[Path, Path]:
    """One stacked bar per ``x`` value (parts stacked bottom-up), one panel per ``panel``."""
    _need(df, [x, *parts] + ([panel] if panel else []), "stacked_bars")
    df = df.copy()
    panel = panel or "_panel"
    if panel not in df:
        df[panel] = "all"
    panels = _ordered(df[panel])
    fig, axes = _canvas(len(panels), 1.0 + 0.8 * df[x].nunique())
    for ax, pv in zip(axes, panels):
        sub = df[df[panel] == pv]
        labels = [str(v) for v in sub[x]]
        pos = np.arange(len(sub))
        bottom = np.zeros(len(sub))
        for j, part in enumerate(parts):
            vals = np.nan_to_num(sub[part].to_numpy(dtype=float))
            ax.bar(pos, vals, 0.7, bottom=bottom, color=f"C{j}", label=part)
            bottom += vals
        ax.set_title(str(pv))
        ax.set_xticks(pos, labels, rotation=45, ha="right")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel(ylabel)
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize="small", loc="outside right upper")
    return save_figure(fig, stem)


def lines(df: pd.DataFrame, stem, *, x: str, y: str, group: list[str], panel: str | None = None,
          ylabel: str = "", ylim=None, style_col: str | None = None) -> tuple[Path, Path]:
    """One line of ``y`` over ``x`` per ``group`` combination, one panel per ``panel``."""
    _need(df, [x, y, *group] + ([panel] if panel else []), "lines")
    df = df.copy()
    panel = panel or "_panel"
    if panel not in df:
        df[panel] = "all"
    panels = _ordered(df[panel])
    fig, axes = _canvas(len(panels), 4.5)
    for ax, pv in zip(axes, panels):
        sub = df[df[panel] == pv]
        for j, (key, g) in enumerate(sub.groupby(group, sort=True)):
            key = key if isinstance(key, tuple) else (key,)
            g = g.sort_values(x)
            ax.plot(g[x], g[y], marker="o", ms=3, color=f"C{j % 10}", label=" / ".join(map(str, key)))
        ax.set_title(str(pv))
        ax.set_xlabel(x)
        if ylim:
            ax.set_ylim(*ylim)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel or y)
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize="x-small", loc="outside right upper")
    return save_figure(fig, stem)


def scatter(df: pd.DataFrame, stem, *, x: str, y: str, label: str | None = None, panel: str | None = None,
            xlabel: str = "", ylabel: str = "", diagonal: bool = False) -> tuple[Path, Path]:
    """Points (``x``, ``y``), coloured by ``label`` (the same colour in every panel), one panel
    per value of ``panel``; ``diagonal`` draws y = x."""
    _need(df, [x, y] + [c for c in (label, panel) if c], "scatter")
    panels = sorted(df[panel].unique(), key=str) if panel else [None]
    fig, axes = _canvas(len(panels), 4.5, 4.0)
    colours = {k: f"C{j % 10}" for j, k in enumerate(sorted(df[label].unique(), key=str))} if label else {}
    vals = pd.concat([df[x], df[y]]).dropna()
    handles = {}
    for ax, p in zip(axes, panels):
        d = df if p is None else df[df[panel] == p]
        for key, g in (d.groupby(label, sort=True) if label else [("all", d)]):
            handles[str(key)] = ax.scatter(g[x], g[y], s=18, color=colours.get(key, "C0"), label=str(key))
        if diagonal and len(vals):
            lo, hi = float(vals.min()), float(vals.max())
            ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--")
        ax.axhline(0, color="black", lw=0.5)
        ax.axvline(0, color="black", lw=0.5)
        ax.set_xlabel(xlabel or x)
        ax.grid(alpha=0.3)
        if p is not None:
            ax.set_title(f"{panel} = {p}", fontsize="small")
    axes[0].set_ylabel(ylabel or y)
    if label:
        fig.legend(list(handles.values()), list(handles), fontsize="x-small", loc="outside right upper")
    return save_figure(fig, stem)


def empty_figure(message: str) -> Figure:
    """A figure that says why there is nothing to plot (the target still exists)."""
    fig = _figure(figsize=(5, 1.5))
    fig.text(0.5, 0.5, message, ha="center", va="center", fontsize=9)
    return fig
