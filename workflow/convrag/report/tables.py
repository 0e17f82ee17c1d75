"""Write a result table twice: CSV for machines (full precision), Markdown for people.

The CSV keeps every digit so downstream analysis never works from rounded numbers; the
Markdown copy is rounded with ``float_fmt`` and may carry a caption paragraph so it can be
pasted into a report as is.  A table whose generic Markdown would not read well (the
reproduction table: long texts repeated on every row) passes ``markdown``, its own page; the
CSV stays the same full table.  Both files are written atomically (convrag.io.atomic_open).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from convrag.io import atomic_open

__all__ = ["write_table", "wrap"]


def _flat(df: pd.DataFrame) -> pd.DataFrame:
    # A meaningful index (e.g. after groupby) becomes ordinary columns; a RangeIndex is dropped.
    if isinstance(df.index, pd.RangeIndex) and df.index.name is None:
        return df
    return df.reset_index()


def _fmt(v, float_fmt: str):
    if isinstance(v, (float, np.floating)) and not isinstance(v, bool):
        return "" if np.isnan(v) else float_fmt.format(v)
    return v


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
    either way: every column, full precision)."""
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
    for col in shown.columns:
        if pd.api.types.is_float_dtype(shown[col]) or shown[col].dtype == object:
            shown[col] = shown[col].map(lambda v: _fmt(v, float_fmt)).astype(object)
    md = shown.to_markdown(index=False, disable_numparse=True)
    with atomic_open(md_path) as fh:
        if caption:
            fh.write(caption.strip() + "\n\n")
        fh.write(md + "\n")
    return csv_path, md_path
