"""Write a result table twice: CSV for machines (full precision), Markdown for people.

The CSV keeps every digit so downstream analysis never works from rounded numbers; the
Markdown copy is rounded with ``float_fmt`` and may carry a caption paragraph so it can be
pasted into a report as is.  A table whose generic Markdown would not read well (the
reproduction table: long texts repeated on every row) passes ``markdown``, its own page; the
CSV stays the same full table.  Both files are written atomically (convrag.io.atomic_open).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from convrag.io import atomic_open

__all__ = ["points_sentence", "write_table", "wrap"]


def _flat(df: pd.DataFrame) -> pd.DataFrame:
    # A meaningful index (e.g. after groupby) becomes ordinary columns; a RangeIndex is dropped.
    if isinstance(df.index, pd.RangeIndex) and df.index.name is None:
        return df
    return df.reset_index()


def _fmt(v, float_fmt: str):
    if isinstance(v, (float, np.floating)) and not isinstance(v, bool):
        if np.isnan(v):
            return ""
        text = float_fmt.format(v)
        return text[1:] if text.startswith("-") and not text.strip("-0.") else text  # no -0.000
    if v is None or v is pd.NA or (isinstance(v, str) and v in ("nan", "NaN", "None", "<NA>")):
        return ""  # a blank is blank, not the word nan (the caption says why)
    return v


_COUNT = re.compile(r"^(n|tasks|turns|questions|conversations|dialogues|pairs|contexts|runs|compared|both_decided"
                    r"|judged|invalid|calls|batches|cache_hits)$|^n_|_n$|count|tokens|_nan$|fallbacks|unparsed"
                    r"|^num_|_calls$")


def _is_count(col, values: pd.Series) -> bool:
    """A count column (by its name: n, n_*, tasks, *tokens*, *_nan, ...) whose values are all
    whole numbers: printed as integers (750, not 750.000) though NaN made its dtype float."""
    v = values.dropna()
    return bool(_COUNT.search(str(col))) and len(v) > 0 and bool(np.all(np.mod(v.to_numpy(float), 1) == 0)) \
        and bool(np.all(np.abs(v.to_numpy(float)) < 1e15))


def points_sentence(columns: list[str]) -> str:
    """The caption's note for columns a table shows in points (``df.attrs["points"]``: an F1, or a
    difference of F1, recall or accuracy, that the paper writes on 0-100)."""
    return (f"Points: {', '.join(columns)} are shown x100 (0-100, as the paper writes them); the CSV "
            f"keeps them on 0-1.")


def wrap(text: str, width: int = 100, indent: str = "", keep: tuple[str, ...] = ()) -> list[str]:
    """``text`` as lines of at most ``width`` characters (continuation lines start with
    ``indent``), broken between words, so a page reads in a terminal or a report's literal block
    without scrolling; a word longer than a line (a path) is kept whole unless it alone would pass
    the 400-character line limit of a page. ``keep``: phrases never broken across lines, so a
    check that reads a page line by line (e.g. for "reason not recorded") still finds them."""
    import textwrap

    nbsp = "\u00a0"  # textwrap breaks on ASCII whitespace only
    for k in keep:
        text = text.replace(k, k.replace(" ", nbsp))
    lines = textwrap.wrap(text, width=width, subsequent_indent=indent, break_long_words=False,
                          break_on_hyphens=False)
    out = []
    for line in lines:
        out += [line] if len(line) <= 400 else textwrap.wrap(line, width=400, subsequent_indent=indent)
    return [line.replace(nbsp, " ") for line in out]


def write_table(
    df: pd.DataFrame, stem: str | os.PathLike, caption: str | None = None, float_fmt: str = "{:.3f}",
    markdown: Callable[[pd.DataFrame, str], str] | None = None,
) -> tuple[Path, Path]:
    """Write ``<stem>.csv`` and ``<stem>.md``; return their paths. ``markdown(df, caption)``, when
    given, writes the Markdown page instead of the generic caption-and-table (the CSV is the same
    either way: every column, full precision). Columns named in ``df.attrs["points"]`` are shown
    x100 with one decimal (a paper's F1 points) and the caption says so; the CSV keeps them on 0-1."""
    stem = Path(stem)
    csv_path, md_path = stem.with_name(stem.name + ".csv"), stem.with_name(stem.name + ".md")
    flat = _flat(df)
    with atomic_open(csv_path, newline="") as fh:
        flat.to_csv(fh, index=False)
    if markdown is not None:
        page = markdown(df, (caption or "").strip())
        with atomic_open(md_path) as fh:
            fh.write(page.rstrip("\n") + "\n")
        return csv_path, md_path
    shown = flat.copy()
    points = [c for c in (df.attrs.get("points") or ()) if c in shown.columns
              and pd.api.types.is_float_dtype(shown[c])]
    for col in points:  # the paper's scale: x100, one decimal (the CSV keeps 0-1)
        shown[col] = (shown[col] * 100).map(lambda v: _fmt(v, "{:.1f}")).astype(object)
    if points:
        caption = ((caption or "").strip() + " " + points_sentence(points)).strip()
    for col in shown.columns:
        if col in points:
            continue
        if pd.api.types.is_float_dtype(shown[col]) and _is_count(col, shown[col]):
            shown[col] = shown[col].map(lambda v: "" if np.isnan(v) else f"{int(v)}").astype(object)
        elif pd.api.types.is_float_dtype(shown[col]) or not pd.api.types.is_numeric_dtype(shown[col]):
            shown[col] = shown[col].map(lambda v: _fmt(v, float_fmt)).astype(object)
    md = shown.to_markdown(index=False, disable_numparse=True)
    with atomic_open(md_path) as fh:
        if caption:
            fh.write(caption.strip() + "\n\n")
        fh.write(md + "\n")
    return csv_path, md_path
