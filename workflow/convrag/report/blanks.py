"""Why a table cell is blank, said in the caption.

A blank (NaN / None) cell means different things: no items to compute it from, a ratio
whose denominator is 0, an accounting role the job did not have, an analysis switched off.
``blank_reasons`` finds, per column with blanks, the reasons the row itself proves (checked
against the row, never assumed) and names the rest as "reason not recorded", so a reader
(and tests) can see which blanks are still unexplained. A build may give its own reasons in
``df.attrs["blank_reasons"]``: column -> a reason (every blank of the column), or a function of
the row giving the reason or None (then the rules below are asked).
"""

from __future__ import annotations

import pandas as pd

UNRECORDED = "reason not recorded"


def _count_column(df: pd.DataFrame, col: str) -> str | None:
    """The count column of ``col``: ``n_<x>`` where ``col`` ends with ``<x>`` or both end with
    the same ``_<suffix>`` (``precision_dense`` / ``n_no_gold_dense``), longest match first."""
    best, best_len = None, 0
    for n in df.columns:
        if not str(n).startswith("n_") or n == col or not pd.api.types.is_numeric_dtype(df[n]):
            continue
        x = str(n)[2:]
        cand = len(x) if (col == x or col.endswith("_" + x)) else 0
        parts = x.split("_")
        for i in range(1, len(parts)):  # else the longest shared "_suffix" of 4+ letters
            suf = "_" + "_".join(parts[i:])
            if not cand and col.endswith(suf) and len(suf) > 4:
                cand = len(suf)
        if cand > best_len:
            best, best_len = n, cand
    return best


def _row_reason(df: pd.DataFrame, i, col: str, given: dict) -> str:
    row = df.loc[i]
    if col in given:
        why = given[col](row) if callable(given[col]) else given[col]
        if why:
            return str(why)
    if "note" in df.columns and isinstance(row.get("note"), str) and row["note"].strip():
        return row["note"].strip()
    if {"verdict", "published", "ours"} <= set(df.columns):  # the reproduction table (report.reproduction)
        if col == "published" and row.get("kind") == "statement":
            return "a statement of the text, no number (its verdict says whether it holds)"
        if col.startswith("published_ci"):
            return "the paper gives no interval"
        if col == "ours":
            return f"this run gives no value ({row['verdict']}; see reason)"
        if col.startswith("ours_ci"):
            return "its estimate (ours) is blank" if pd.isna(row["ours"]) else "the mapped output has no interval"
        if col == "tolerance":
            return "the published-values map gives no tolerance for this entry"
        if col == "n":  # ours.n names the column that counts the row's units (questions, conversations)
            return ("its estimate (ours) is blank" if pd.isna(row["ours"]) else
                    "no unit count for this entry (the published-values map names no ours.n, or its row has none)")
    n = _count_column(df, col)
    if n is not None and row[n] == 0:
        return f"no items to compute it from ({n} = 0)"
    if ("recovery" in col or col.startswith(("recap_ci", "snowball_ci"))) and {"f1_full", "f1_sharded"} <= set(df.columns) \
            and row["f1_full"] - row["f1_sharded"] <= 0:
        return "no positive FULL-SHARDED gap to recover"
    if col == "delivery_share" and "total_gap" in df.columns and abs(row["total_gap"]) <= 1e-12:
        return "a share of a total gap of 0 is undefined"
    if col.endswith(("_fall", "_fall_ci_low", "_fall_ci_high")) and row.get("condition") == "FULL":
        return "the fall is measured from FULL, so FULL has none"
    if col.startswith("rel_") and "f1_full" in df.columns and row["f1_full"] == 0:
        return "a relative change of a FULL F1 of 0 is undefined"
    if "job" in df.columns and "job" not in given:  # the accounting table: a column per key of the files
        role = col.split(".", 1)[0] if "." in col else None
        same = [c for c in df.columns if role and c.startswith(role + ".")]
        if role and role != "job" and all(pd.isna(row[c]) for c in same):
            return f"the job has no {role} role"
        return "this job's accounting file has no such entry"
    if col in ("note", "reason"):
        return "nothing to note for the row"
    if col.endswith(("ci_low", "ci_high", "_low", "_high")):  # an interval without its estimate
        base = col.removesuffix("_ci_low").removesuffix("_ci_high").removesuffix("_low").removesuffix("_high")
        for est in (base, "mean", "value", "estimate"):
            if est != col and est in df.columns and pd.isna(row[est]):
                return f"its estimate ({est}) is blank"
    return UNRECORDED


def blank_reasons(df: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Column -> {reason: number of blank cells} for every column with blank cells."""
    given = dict(df.attrs.get("blank_reasons") or {})
    out: dict[str, dict[str, int]] = {}
    for col in df.columns:
        blank = df.index[df[col].isna()]
        for i in blank:
            r = _row_reason(df, i, str(col), given)
            out.setdefault(str(col), {})
            out[str(col)][r] = out[str(col)].get(r, 0) + 1
    return out


def blanks_sentence(df: pd.DataFrame, limit: int = 12) -> str:
    """``Blank cells: col (k of n rows: reason; ...); ...`` for the caption ("" without blanks);
    columns sharing the same reasons are named together; beyond ``limit`` groups, a count."""
    reasons = blank_reasons(df)
    if not reasons:
        return ""
    groups: dict[tuple, list[str]] = {}
    for col, rs in reasons.items():
        groups.setdefault(tuple(sorted(rs.items())), []).append(col)
    parts = []
    for rs, cols in list(groups.items())[:limit]:
        what = "; ".join(f"{k} of {len(df)} rows: {r}" for r, k in rs)
        parts.append(f"{_columns(cols)} ({what})")
    more = len(groups) - limit
    return "Blank cells: " + "; ".join(parts) + (f"; and {more} more groups of columns" if more > 0 else "") + "."


def _columns(cols: list[str]) -> str:
    """Column names, those sharing a dotted prefix (an accounting role) as ``prefix.* (n)``."""
    by_prefix: dict[str, list[str]] = {}
    for c in cols:
        by_prefix.setdefault(c.split(".", 1)[0] + ".*" if "." in c else c, []).append(c)
    return ", ".join(v[0] if len(v) == 1 else f"{k} ({len(v)} columns)" for k, v in by_prefix.items())
