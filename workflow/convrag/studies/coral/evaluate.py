"""Score CORAL generations as Table 3 reports them (arXiv 2410.23090, section 5.2).

Per answer record (:func:`convrag.studies.coral.generate.answer`):

* BLEU-1 (``convrag.metrics.citation.bleu1``, sentence level) and ROUGE-L
  (``convrag.metrics.text.rouge_l``) of the response with its citation markers removed
  (ALCE's ``remove_citations`` over the whole response, as ALCE does before its non-citation
  metrics) against the golden response (``reference_answers[0]``, plain text). A task without
  a golden response gets NaN and is counted (``no_reference``);
* citation recall and precision as ALCE computes them (``citation_scores``, ``id_mode
  "index"``: ``[n]`` is the n-th passage SHOWN to the model, the record's ``passages``), with
  every NLI check of every record in one batched ``entail`` call. A response with no
  statement (empty) is kept with NaN citation scores and counted (``items_skipped``), not
  scored 0, as ALCE does. A shown passage without a title is given to the NLI premise as its
  text alone.

``first_line=False`` by default: CORAL's answers run over several sentences and lines (a
stated choice; ALCE keeps the first line only). :func:`table3` aggregates per (model,
strategy) in the paper's row order; citation scores are ALCE's corpus means over the scored
items, so NaN rows do not count.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import pandas as pd

from convrag.errors import DataError
from convrag.metrics.citation import AT_MOST_CITATIONS, bleu1, citation_scores, citation_summary, strip_citations
from convrag.metrics.text import rouge_l
from convrag.records import TurnTask
from convrag.studies.coral.generate import STRATEGIES

__all__ = ["FRAMEWORK_BLANKS", "TABLE3_COLUMNS", "score_answers", "table3"]

TABLE3_COLUMNS = ("model", "strategy", "retrieval", "compression", "bleu1", "rougeL", "citation_recall", "citation_precision",
                  "input_tokens", "tasks", "citation_scored", "win", "draw", "lose", "compared")

# A current answer job always labels its records (``retrieval``: the run or strategy label;
# ``compression``: the f_p model or "none"), so a blank can only come from older answer files.
FRAMEWORK_BLANKS = {col: (f"its answers carry no {col} label (answer or score files from before the jobs recorded "
                          f"it; a current answer job always writes one)") for col in ("retrieval", "compression")}


def _premise_passage(p: Mapping) -> dict:
    return {"id": p.get("id"), "title": p.get("title") or None, "text": p["text"]}


def score_answers(records: Sequence[Mapping], tasks: Sequence[TurnTask],
                  entail: Callable[[list[str], list[str]], list[bool]], *,
                  at_most_citations: int | None = AT_MOST_CITATIONS,
                  first_line: bool = False) -> tuple[pd.DataFrame, dict]:
    """``(one row per record, summary)``.

    Row: ``task_id, conversation_id, turn, model, strategy, max_history_turns, bleu1, rougeL``
    (0-1; NaN without reference), ``citation_recall, citation_precision`` (0-1; NaN when the
    response has no statement), ``citation_skipped, n_statements, n_entailed, n_citations,
    n_precise, n_overcite, prompt_tokens, completion_tokens, finish_reason,
    used_rewrite_fallback, has_reference``.

    Summary: ALCE's corpus numbers over all records (``citation_summary``: citation_rec,
    citation_prec, items, items_scored, items_skipped, statements, citations, shares,
    splitter), plus ``no_reference``, ``at_most_citations``, ``first_line`` and ``entail``
    (the judge's own counts when it has ``summary()``, e.g. LLMEntail's calls / asked /
    unparsed)."""
    by_id = {t.task_id: t for t in tasks}
    missing = [r["task_id"] for r in records if r["task_id"] not in by_id]
    if missing:
        raise DataError(f"score_answers: answer record for unknown task {missing[0]!r} ({len(missing)} unknown)")
    items = [{"item_id": f"{r.get('model')}|{r.get('strategy')}|{r['task_id']}",
              "response": r.get("response") or "",
              "passages": [_premise_passage(p) for p in r.get("passages", [])]} for r in records]
    cites = citation_scores(items, entail, id_mode="index", at_most_citations=at_most_citations,
                            first_line=first_line) if items else []
    rows = []
    for r, c in zip(records, cites):
        t = by_id[r["task_id"]]
        ref = t.reference_answers[0] if t.reference_answers else None
        plain = strip_citations(r.get("response") or "").strip()
        rows.append({
            "task_id": t.task_id, "conversation_id": t.conversation_id, "turn": t.turn,
            "model": r.get("model"), "strategy": r.get("strategy"), "max_history_turns": r.get("max_history_turns"),
            "bleu1": bleu1(plain, ref) if ref is not None else math.nan,
            "rougeL": rouge_l(plain, ref) if ref is not None else math.nan,
            "citation_recall": math.nan if c["skipped"] else c["recall"],
            "citation_precision": math.nan if c["skipped"] else c["precision"],
            "citation_skipped": c["skipped"], "n_statements": c["n_statements"], "n_entailed": c["n_entailed"],
            "n_citations": c["n_citations"], "n_precise": c["n_precise"], "n_overcite": c["n_overcite"],
            "prompt_tokens": r.get("prompt_tokens"), "completion_tokens": r.get("completion_tokens"),
            "finish_reason": r.get("finish_reason"), "used_rewrite_fallback": r.get("used_rewrite_fallback"),
            "has_reference": ref is not None, "retrieval": r.get("retrieval"), "compression": r.get("compression"),
        })
    summary = {**citation_summary(cites), "no_reference": sum(1 for row in rows if not row["has_reference"]),
               "at_most_citations": at_most_citations, "first_line": first_line,
               "entail": entail.summary() if hasattr(entail, "summary") else None}
    return pd.DataFrame(rows), summary


def _one(g: pd.DataFrame, col: str):
    """A row's retrieval / compression (one value per answers file; None in scores made before
    the framework recorded them)."""
    vals = g[col].dropna().unique() if col in g else []
    return ", ".join(map(str, vals)) if len(vals) else None


def _shares(g: pd.DataFrame) -> dict:
    """win / draw / lose as percentages of the decided comparisons (NaN when none was made)."""
    decided = g["comparison"].dropna() if "comparison" in g else pd.Series([], dtype=object)
    n = len(decided)
    return {**{o: (100.0 * float((decided == o).sum()) / n if n else math.nan) for o in ("win", "draw", "lose")},
            "compared": n}


def table3(df: pd.DataFrame) -> pd.DataFrame:
    """Table 3: per (model, strategy), BLEU-1 and ROUGE-L (x100, means over tasks with a
    reference), citation recall / precision (x100, means over the scored items), mean input
    tokens, tasks, how many were citation-scored, and win / draw / lose against the golden
    response (% of the decided comparisons; ``compared`` of them); strategies in the paper's
    order."""
    if df.empty:
        return pd.DataFrame(columns=list(TABLE3_COLUMNS))
    rows = []
    for (model, strategy), g in df.groupby(["model", "strategy"], sort=False, dropna=False):
        rows.append({
            "model": model, "strategy": strategy, "retrieval": _one(g, "retrieval"),
            "compression": _one(g, "compression"), "bleu1": 100.0 * g["bleu1"].mean(), "rougeL": 100.0 * g["rougeL"].mean(),
            "citation_recall": 100.0 * g["citation_recall"].mean(),
            "citation_precision": 100.0 * g["citation_precision"].mean(),
            "input_tokens": float(g["prompt_tokens"].mean()), "tasks": len(g),
            "citation_scored": int((~g["citation_skipped"].astype(bool)).sum()),
            **_shares(g),
        })
    out = pd.DataFrame(rows, columns=list(TABLE3_COLUMNS))
    order = {s: i for i, s in enumerate(STRATEGIES)}
    out["_m"] = out["model"].astype(str)
    out["_s"] = out["strategy"].map(lambda s: order.get(s, len(order)))
    out = out.sort_values(["_m", "_s", "strategy"], kind="stable").drop(columns=["_m", "_s"]).reset_index(drop=True)
    out.attrs["blank_reasons"] = dict(FRAMEWORK_BLANKS)
    return out
