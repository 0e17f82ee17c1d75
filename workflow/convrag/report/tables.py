"""Write a result table twice: CSV for machines (full precision), Markdown for people.

The CSV keeps every digit so downstream analysis never works from rounded numbers; the
Markdown copy is rounded with ``float_fmt`` and may carry a caption paragraph so it can be
pasted into a report as is.  Both files are written atomically (convrag.io.atomic_open).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from convrag.io import atomic_open

__all__ = ["write_table"]


def _flat(df: pd.DataFrame) -> pd.DataFrame:
    # A meaningful index (e.g. after groupby) becomes ordinary columns; a RangeIndex is dropped.
    if isinstance(df.index, pd.RangeIndex) and df.index.name is None:
        return df
    return df.reset_index()


def _fmt(v, float_fmt: str):
    if isinstance(v, (float, np.floating)) and not isinstance(v, bool):
        return "" if np.isnan(v) else float_fmt.format(v)
    return v


def write_table(
    df: pd.DataFrame, stem: str | os.PathLike, caption: str | None = None, float_fmt: str = "{:.3f}"
) -> tuple[Path, Path]:
    """Write ``<stem>.csv`` and ``<stem>.md``; return their paths."""
    stem = Path(stem)
    csv_path, md_path = stem.with_name(stem.name + ".csv"), stem.with_name(stem.name + ".md")
    flat = _flat(df)
    with atomic_open(csv_path, newline="") as fh:
        flat.to_csv(fh, index=False)
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
