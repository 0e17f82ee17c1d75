"""Report figures, each saved as PNG (dpi 150, for quick looks) and PDF (for papers).

Figures are built on ``matplotlib.figure.Figure`` with the Agg canvas rather than pyplot, so
they work headless inside Snakemake jobs and leave no global pyplot state behind.  Saving
goes through convrag.io.atomic_path; the temporary file name has no image suffix, so the
format is passed to savefig explicitly.  PDF dates are dropped so reruns give identical files.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from convrag.io import atomic_path

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["save_figure", "grouped_bars", "stacked_bars", "lines", "scatter", "empty_figure", "placeholder",
           "placeholder_of", "PLACEHOLDER_KEY", "small_model_warning", "stand_in_warning", "active_stand_ins"]

# PNG text key of a placeholder figure: its value is "<kind>: <reason>", so a reader (and
# tests/test_figures.py) can tell a placeholder from a plot and check the reason against the data
PLACEHOLDER_KEY = "convrag-placeholder"


# (what, {model: params_b}) that every figure saved inside ``stand_in_warning`` names in its band
_STAND_INS: list[tuple[str, dict[str, float]]] = []
WARNING_PREFIX = "Warning:"  # a figure with a text starting so already carries its own band


@contextmanager
def stand_in_warning(what: str, models: dict[str, float]):
    """Every figure saved inside gets ``small_model_warning(fig, what, models)`` (unless it is a
    placeholder or already carries a warning of its own): a figure whose numbers come from a
    model under 1B says so on itself, not only in its caption (issue 45; the report's targets
    are drawn inside it, convrag.report.targets.build_target). Empty ``models``: nothing."""
    _STAND_INS.append((what, dict(models)))
    try:
        yield
    finally:
        _STAND_INS.pop()


def active_stand_ins() -> dict[str, float]:
    """The models the enclosing ``stand_in_warning`` names ({} outside one): a figure that would
    draw a warning of its own (a tiny judge, say) leaves it to that band, which names every
    stand-in of the run."""
    return _STAND_INS[-1][1] if _STAND_INS else {}


def save_figure(fig: Figure, stem: str | os.PathLike, note: str | None = None) -> tuple[Path, Path]:
    """Write ``<stem>.png`` and ``<stem>.pdf`` atomically; return their paths. ``note`` goes
    into the PNG's text chunk under PLACEHOLDER_KEY (placeholders only). Inside
    ``stand_in_warning`` a plot (not a placeholder) without a warning of its own gets its band."""
    if active_stand_ins() and note is None and not _has_warning(fig):
        small_model_warning(fig, *_STAND_INS[-1])
    stem = Path(stem)
    png, pdf = stem.with_name(stem.name + ".png"), stem.with_name(stem.name + ".pdf")
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", dpi=150, bbox_inches="tight",
                    metadata={PLACEHOLDER_KEY: note} if note else None)
    with atomic_path(pdf) as tmp:
        fig.savefig(tmp, format="pdf", bbox_inches="tight", metadata={"CreationDate": None, "ModDate": None,
                                                                     **({"Subject": note} if note else {})})
    return png, pdf


def placeholder(stem, kind: str, reason: str) -> str:
    """A figure that says why nothing is plotted, marked as a placeholder of ``kind`` (e.g.
    ``no_rows``, ``no_positive_gap``) so that the reason can be checked against the data;
    returns the reason (for the caption)."""
    import textwrap

    fig = _figure(figsize=(6, 1.8))
    fig.text(0.5, 0.5, "\n".join(textwrap.wrap(f"Nothing plotted: {reason}", 70)), ha="center", va="center",
             fontsize=9)
    save_figure(fig, stem, note=f"{kind}: {reason}")
    return reason


def placeholder_of(png) -> tuple[str, str] | None:
    """(kind, reason) of a placeholder PNG written by ``placeholder``; None for a plot."""
    from PIL import Image

    with Image.open(png) as im:
        note = im.text.get(PLACEHOLDER_KEY)
    if not note:
        return None
    kind, _, reason = note.partition(": ")
    return kind, reason


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


def _canvas(n_panels: int, width_per: float, height: float = 3.6, max_cols: int = 3, max_width: float = 6.5):
    """Panels in rows of at most ``max_cols`` (a wide figure is unreadable at any zoom), each
    at most ``max_width`` inches wide; unused cells hidden. Returns the figure and the used axes."""
    ncol = 2 if n_panels == 4 and max_cols == 3 else min(n_panels, max_cols)
    nrow = -(-n_panels // ncol)
    width = min(max_width, max(4.0, width_per))
    fig = _figure(figsize=(width * ncol, height * nrow), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrow, ncol, sharey=True, squeeze=False).ravel())
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes[:n_panels]


def _first_column(axes, n_cols: int = 3):
    ncol = 2 if len(axes) == 4 and n_cols == 3 else min(len(axes), n_cols)
    return [ax for i, ax in enumerate(axes) if i % ncol == 0]


def _need(df: pd.DataFrame, cols, name: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{name}: missing columns {missing}; have {list(df.columns)}")
    if df.empty:
        raise ValueError(f"{name}: empty DataFrame (nothing to plot)")


def grouped_bars(df: pd.DataFrame, stem, *, x: str, hue: str, y: str, lo: str | None = None, hi: str | None = None,
                 panel: str | None = None, ylabel: str = "", ylim=None, hue_order=(), xlabel: str = "",
                 legend_title: str = "", notes: dict | None = None, notes_label: str = "",
                 hue_labels: dict | None = None, title: str = "", max_cols: int = 3) -> tuple[Path, Path]:
    """Bars of ``y`` per ``x`` and ``hue`` (optional CI whiskers ``lo``/``hi``), one panel per
    value of ``panel``; missing cells stay empty, a cell whose value is NaN (undefined, e.g. a
    ratio without a denominator) is marked "n/a" and a value of exactly 0 is marked "0", so
    neither looks like a missing bar; a cell with several rows (several models, say) shows their
    mean. ``hue_order`` puts those hues first. Each panel's x axis has only the ``x`` values of
    that panel, in the order they first appear in it (a study's ladder or paper order).
    ``notes``: {(panel value, x value): text or (text, bold)} written above that group of bars
    (a paired difference and its interval, say), ``notes_label`` saying what they are under the
    figure; ``hue_labels`` renames hues in the legend, ``title`` goes above the panels."""
    _need(df, [c for c in (x, hue, y, lo, hi, panel) if c], "grouped_bars")
    df = df.copy()
    panel = panel or "_panel"
    if panel not in df:
        df[panel] = "all"
    panels, hues = _ordered(df[panel]), _ordered(df[hue], hue_order)
    xs_of = {pv: _ordered(df.loc[df[panel] == pv, x]) for pv in panels}
    most = max(map(len, xs_of.values()))
    crowded = most > 12  # a paper grid's many cells: two wider panels a row, labels upright
    ncols = 2 if crowded else max_cols
    fig, axes = _canvas(len(panels), 1.0 + (0.5 + 0.35 * len(hues)) * most, max_cols=ncols,
                        max_width=12.0 if crowded else 6.5)
    width = 0.8 / len(hues)
    for ax, pv in zip(axes, panels):
        xs = xs_of[pv]
        pos = np.arange(len(xs))
        sub = df[df[panel] == pv].groupby([x, hue])[[c for c in (y, lo, hi) if c]].mean()
        for j, h in enumerate(hues):
            cells = sub.reindex([(v, h) for v in xs])
            mean = cells[y].to_numpy(dtype=float)
            err = None
            if lo and hi and cells[[lo, hi]].notna().any(axis=None):  # a hue without intervals: no empty caps
                err = np.vstack([mean - cells[lo].to_numpy(dtype=float), cells[hi].to_numpy(dtype=float) - mean])
                err = np.nan_to_num(np.clip(err, 0, None))
            at = pos + (j - (len(hues) - 1) / 2) * width
            ax.bar(at, np.nan_to_num(mean), width, yerr=err, capsize=2, color=f"C{j % 10}",
                   hatch="//" if j >= 10 else None, label=str((hue_labels or {}).get(h, h)))
            present = np.array([(v, h) in sub.index for v in xs])
            for k in np.flatnonzero(present & (np.isnan(mean) | (mean == 0))):
                if mean[k] == 0:  # a measured zero: a thick stub in the hue's colour, unlike a missing bar
                    ax.hlines(0, at[k] - width / 2, at[k] + width / 2, color=f"C{j % 10}", lw=4)
                ax.annotate("n/a" if np.isnan(mean[k]) else "0", (at[k], 0), xytext=(0, 3), textcoords="offset points",
                            ha="center", va="bottom", fontsize=7, rotation=90 if np.isnan(mean[k]) else 0,
                            color="black")
        for k, v in enumerate(xs):
            note = (notes or {}).get((pv, v))
            if note:
                text, bold = note if isinstance(note, tuple) else (note, False)
                ax.annotate(text, (pos[k], 1.0), xycoords=("data", "axes fraction"), xytext=(0, -3),
                            textcoords="offset points", ha="center", va="top", fontsize=7,
                            fontweight="bold" if bold else "normal")
        ax.set_title(str(pv))
        longest = max(len(str(v)) for v in xs)
        tilt = len(xs) * longest > 30 or (len(xs) > 4 and longest > 6)  # labels that would overlap
        ax.set_xticks(pos, [str(v) for v in xs], rotation=(90 if crowded else 30) if tilt else 0,
                      ha=("center" if crowded else "right") if tilt else "center")
        ax.set_xlabel(xlabel or x)
        if ylim:
            ax.set_ylim(*ylim)
        ax.axhline(0, color="black", lw=0.6)
        ax.grid(axis="y", alpha=0.3)
        if pd.api.types.is_integer_dtype(df[y]):  # counts: no tick at 0.25 of a task
            from matplotlib.ticker import MaxNLocator

            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in _first_column(axes, ncols):
        ax.set_ylabel(ylabel or y)
    fig.legend(*axes[0].get_legend_handles_labels(), title=legend_title or hue, fontsize="small",
               loc="outside right upper")
    if title:
        fig.suptitle(title, fontsize="medium")
    if notes and notes_label:
        fig.text(0.5, 0, notes_label, ha="center", va="top", fontsize=8, wrap=True)
    return save_figure(fig, stem)


def stacked_bars(df: pd.DataFrame, stem, *, x: str, parts: list[str], panel: str | None = None,
                 ylabel: str = "share", warn: tuple[str, dict[str, float]] | None = None) -> tuple[Path, Path]:
    """One stacked bar per ``x`` value (parts stacked bottom-up), one panel per ``panel``;
    ``warn``: (what, {model: params_b}) for ``small_model_warning``."""
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
    for ax in _first_column(axes):
        ax.set_ylabel(ylabel)
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize="small", loc="outside right upper")
    if warn and warn[1] and not active_stand_ins():  # else the run's band names every stand-in
        small_model_warning(fig, *warn)
    return save_figure(fig, stem)


LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _levels(df: pd.DataFrame, group: list[str], orders: dict | None = None) -> list[list[str]]:
    """Each ``group`` column's values, those ``orders`` names first in its order (a study's
    conditions, say), the rest sorted."""
    return [_ordered(sorted(df[c].astype(str).unique()), [str(v) for v in (orders or {}).get(c, ())])
            for c in group]


def _rank(levels: list[list[str]], key: tuple) -> tuple:
    return tuple(lv.index(k) if k in lv else len(lv) for lv, k in zip(levels, key))


def line_styles(df: pd.DataFrame, group: list[str], orders: dict | None = None) -> dict[tuple, dict]:
    """A distinct look per ``group`` combination: colour from the first column's values, line
    style from the second's, marker from the third's (the second's with two columns), so 30 lines
    of 5 x 3 x 2 stay apart; with one column, colour and marker both cycle. ``orders``: column ->
    the values in the order their looks are given (C0 to the first)."""
    levels = _levels(df, group, orders)
    out = {}
    for key in df[group].astype(str).drop_duplicates().itertuples(index=False):
        ix = [levels[i].index(k) for i, k in enumerate(key)]
        out[tuple(key)] = {"color": f"C{ix[0] % 10}",
                           "ls": LINESTYLES[ix[1] % len(LINESTYLES)] if len(ix) > 1 else "-",
                           "marker": MARKERS[(ix[2] if len(ix) > 2 else ix[1] if len(ix) > 1 else ix[0] // 10)
                                             % len(MARKERS)]}
    return out


def lines(df: pd.DataFrame, stem, *, x: str, y: str, group: list[str], panel: str | None = None,
          ylabel: str = "", ylim=None, n: str | None = None, max_cols: int = 3, xlabel: str = "",
          legend_title: str = "", styles: dict[tuple, dict] | None = None, dodge: float = 0.0,
          point_labels: str | None = None, refs: pd.DataFrame | None = None,
          orders: dict | None = None) -> tuple[Path, Path]:
    """One line of ``y`` over ``x`` per ``group`` combination (``line_styles``), one panel per
    ``panel``. An integer ``x`` gets integer ticks; ``n`` (a count column) puts the range of n
    at each x under its tick, for means over a population that changes along x. Panels wrap at
    ``max_cols`` per row. ``styles``: looks that replace ``line_styles``' for some groups (a
    baseline drawn black, say). ``dodge``: lines shifted apart along x by this much each (in x
    units), so lines with equal values do not hide each other. ``point_labels``: a column whose
    value is written once at each x of a panel (a rung's name beside its points). ``refs``:
    horizontal reference lines, rows (panel, label, y), drawn across their panel, grey shades
    and a line style per label, in the legend (a single-turn baseline under multi-turn lines).
    ``orders``: column of ``group`` -> its values in the order lines are drawn and listed in the
    legend (a study's conditions; others after them, sorted)."""
    _need(df, [x, y, *group] + [c for c in (panel, n, point_labels) if c], "lines")
    df = df.copy()
    panel = panel or "_panel"
    if panel not in df:
        df[panel] = "all"
    panels = _ordered(df[panel])
    look = {**line_styles(df, group, orders), **(styles or {})}
    levels = _levels(df, group, orders)
    keys = sorted(look, key=lambda k: (_rank(levels, k), k))
    fig, axes = _canvas(len(panels), 4.5 if max_cols <= 3 else 3.4, max_cols=max_cols)
    integer_x = pd.api.types.is_integer_dtype(df[x])
    ref_labels = list(dict.fromkeys(refs["label"])) if refs is not None and not refs.empty else []
    for ax, pv in zip(axes, panels):
        sub = df[df[panel] == pv]
        drawn = [(tuple(map(str, k if isinstance(k, tuple) else (k,))), g) for k, g in sub.groupby(group, sort=True)]
        for key, g in sorted(drawn, key=lambda kg: keys.index(kg[0])):
            g = g.sort_values(x)
            shift = dodge * (keys.index(key) - (len(keys) - 1) / 2) if dodge else 0.0
            ax.plot(g[x] + shift, g[y], **{"ms": 4, "lw": 1.2, **look[key]}, label=" / ".join(key))
        if point_labels:
            top = sub.loc[sub.groupby(x)[y].idxmax()].sort_values(x)
            span = float(top[x].max() - top[x].min()) or 1.0
            level, last = 0, None
            for _, r in top.iterrows():  # labels of points close along x are stacked, not overprinted
                level = level + 1 if last is not None and float(r[x]) - last < 0.06 * span else 0
                last = float(r[x])
                ax.annotate(str(r[point_labels]), (r[x], r[y]), xytext=(0, 6 + 10 * level), textcoords="offset points",
                            ha="center", va="bottom", fontsize=7, rotation=30)
        for j, lab in enumerate(ref_labels):
            for v in refs.loc[(refs["panel"] == pv) & (refs["label"] == lab), "y"].dropna():
                ax.axhline(float(v), color=str(0.15 + 0.35 * (j % 2)), lw=1.4, ls=("-", "--", ":")[j % 3],
                           zorder=1, label=str(lab))
        ax.set_title(str(pv), fontsize="medium")
        ax.set_xlabel((xlabel or x) + (" (n below)" if n else ""))
        if integer_x:
            ticks = sorted(sub[x].unique())
            labels = [str(t) for t in ticks]
            if n:
                rng = sub.groupby(x)[n].agg(["min", "max"])
                labels = [f"{t}\nn={rng.at[t, 'min']}" + (f"-{rng.at[t, 'max']}" if rng.at[t, "max"] != rng.at[t, "min"]
                                                           else "") for t in ticks]
            ax.set_xticks(ticks, labels)
        elif 0 < sub[x].nunique() <= 8 and pd.api.types.is_numeric_dtype(sub[x]) and _spread(sub[x]):
            ticks = sorted(sub[x].unique())  # ticks at the measured values, when they do not crowd
            ax.set_xticks(ticks, [f"{t:.3g}" for t in ticks])
            if len(ticks) == 1:
                ax.set_xlim(ticks[0] - 1, ticks[0] + 1) if ticks[0] >= 1 else ax.set_xlim(0, 2 * ticks[0])
        if ylim:
            ax.set_ylim(*ylim)
        ax.grid(alpha=0.3)
    for ax in _first_column(axes, max_cols):
        ax.set_ylabel(ylabel or y)
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:  # a line only some panels have still gets its legend entry
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, title=legend_title or " / ".join(group), fontsize="x-small",
               loc="outside right upper")
    return save_figure(fig, stem)


def _spread(values: pd.Series) -> bool:
    """Whether the distinct values lie at least 15% of their range apart (tick labels that do not overlap)."""
    v = np.sort(values.dropna().unique().astype(float))
    return len(v) == 1 or float(np.diff(v).min()) >= 0.15 * float(v[-1] - v[0])


def small_model_warning(fig: Figure, what: str, models: dict[str, float]) -> None:
    """An orange band above the figure: ``what`` comes from ``models`` (name -> billions of
    parameters), stand-ins under ``runnote.TINY_B``, so the figure checks that the pipeline runs
    and measures nothing (issue 45: a small model's numbers say so on the figure itself)."""
    from convrag.report.runnote import TINY_B

    import textwrap

    names = ", ".join(f"{m} ({b:g}B parameters)" for m, b in models.items())
    text = (f"{WARNING_PREFIX} {what} {names}, {'a tiny stand-in' if len(models) == 1 else 'tiny stand-ins'} "
            f"(under {TINY_B:g}B): a check that the pipeline runs, not a measure of quality")
    width = max(40, int(fig.get_figwidth() * 14))  # characters of 9-point text across the figure
    # below the panels (a legend at the upper right cannot cover it) and below any note already
    # there (a figure's key to its annotations), wrapped to the figure's width
    fig.text(0.5, _below_notes(fig), "\n".join(textwrap.wrap(text, width)), ha="center", va="top", fontsize=9,
             color="black", bbox={"boxstyle": "round", "facecolor": "#ffe0b3", "edgecolor": "darkorange"})


def _has_warning(fig: Figure) -> bool:
    return any(t.get_text().startswith(WARNING_PREFIX) for t in fig.texts)


def _below_notes(fig: Figure) -> float:
    """The figure-fraction height just under the lowest text placed under the panels (y <= 0,
    as the notes of grouped_bars), or 0 when there is none."""
    notes = [t for t in fig.texts if t.get_position()[1] <= 0 and t.get_text().strip()]
    if not notes:
        return 0.0
    renderer = fig.canvas.get_renderer()
    lowest = min(t.get_window_extent(renderer).y0 for t in notes)
    return float(fig.transFigure.inverted().transform((0, lowest))[1]) - 0.02


def scatter(df: pd.DataFrame, stem, *, x: str, y: str, label: str | None = None, panel: str | None = None,
            xlabel: str = "", ylabel: str = "", diagonal: bool = False, titles: dict | None = None,
            legend_title: str = "", warn: tuple[str, dict[str, float]] | None = None,
            order=()) -> tuple[Path, Path]:
    """Points (``x``, ``y``), coloured by ``label`` (the same colour in every panel), one panel
    per value of ``panel``; ``diagonal`` draws y = x. Labels drawn later get smaller points on
    top, so points at the same place show as rings rather than hide each other. ``titles``:
    panel value -> its title (a per-panel correlation, say); ``warn``: (what, {model: params_b})
    for ``small_model_warning``; ``order``: ``label`` values given colours (and the legend) first,
    in this order (a study's conditions), the others after them, sorted."""
    _need(df, [x, y] + [c for c in (label, panel) if c], "scatter")
    panels = sorted(df[panel].unique(), key=str) if panel else [None]
    fig, axes = _canvas(len(panels), 4.5, 4.0)
    colours = ({k: f"C{j % 10}" for j, k in enumerate(_ordered(sorted(df[label].unique(), key=str), order))}
               if label else {})
    vals = pd.concat([df[x], df[y]]).dropna()
    handles = {}
    for ax, p in zip(axes, panels):
        d = df if p is None else df[df[panel] == p]
        order = {k: j for j, k in enumerate(colours)}
        groups = [(k, d[d[label] == k]) for k in colours if (d[label] == k).any()] if label else [("all", d)]
        for key, g in groups:
            # 16 to 90 points squared: rings stay visible, the largest does not cover its neighbours
            size = 16 + 74 * (len(colours) - 1 - order.get(key, 0)) / max(1, len(colours) - 1) if label else 18
            j = order.get(key, 0)  # past ten labels the colours repeat: the marker tells them apart
            handles[str(key)] = ax.scatter(g[x], g[y], s=size, color=colours.get(key, "C0"), label=str(key),
                                           marker=MARKERS[(j // 10) % len(MARKERS)],
                                           edgecolors="white", linewidths=0.5, zorder=2 + order.get(key, 0))
        if diagonal and len(vals):
            lo, hi = float(vals.min()), float(vals.max())
            ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--")
        ax.axhline(0, color="black", lw=0.5)
        ax.axvline(0, color="black", lw=0.5)
        ax.set_xlabel(xlabel or x)
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(nbins=6))  # no overlapping tick labels in a 4.5-inch panel
        ax.grid(alpha=0.3)
        if p is not None:
            ax.set_title((titles or {}).get(p, f"{panel} = {p}"), fontsize="small")
    for ax in _first_column(axes):
        ax.set_ylabel(ylabel or y)
    if label:
        fig.legend(list(handles.values()), list(handles), title=legend_title or None, fontsize="x-small",
                   loc="outside right upper")
    if warn and warn[1] and not active_stand_ins():  # else the run's band names every stand-in
        small_model_warning(fig, *warn)
    return save_figure(fig, stem)


def empty_figure(message: str) -> Figure:
    """A figure that says why there is nothing to plot (the target still exists)."""
    fig = _figure(figsize=(5, 1.5))
    fig.text(0.5, 0.5, message, ha="center", va="center", fontsize=9)
    return fig
