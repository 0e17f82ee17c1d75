"""Judge-human correlation: MTRAG-UN's Figure 5 (the correlation analysis of MTRAG repeated with
the paper's judge), as pure functions over MTRAG's human-evaluation file.

**Data.** ``reference_subset_with_human_evaluations.json`` (``convrag.data.mtrag.load_human_evaluations``)
holds, per (task, system) (systems: reference, gpt-4o, llama-3.1-405b-instruct), the official per-task
metric values and each annotator's judgments: naturalness, appropriateness, completeness and
faithfulness on a 1-4 scale, and ``win-rate`` (0 / 50 / 100). The file defines win-rate as the
"number of times this model response is preferred over other model responses from the same task",
i.e. each annotator's share (in percent) of the head-to-head comparisons of the task that this
response won, ties counting one half (MTRAG section 7: pairwise comparisons, ties allowed). So a
human win rate per (task, system) needs no further derivation: ``human_rows`` takes the mean over
the row's annotators, like every other human judgment. (The annotators of one task's three
responses are not always the same people, so a task's per-annotator values need not form one
ranking; a system-level win rate is the mean of the rows, and with three systems a system-level
correlation says nothing.)

**Weighted Spearman: what the papers say.** MTRAG (Katsis et al. 2025, arXiv:2501.03468v1, section 8,
Table 7 and Figure 4) reports "weighted Spearman" correlations of the metrics with the win rate and
with faithfulness / appropriateness / naturalness / completeness, and says only: "We employed a
weighted correlation on human judgements to correct for data imbalance." Figure 4 is on the
answerable subset (ANSWERABLE + PARTIAL) for GPT-4o and Llama 3.1 405B, the reference responses
excluded "because by design the ranking of the reference is 1 for the Reference-Based metrics".
MTRAG-UN (arXiv:2602.23184, appendix A, Figure 5) repeats that analysis with GPT-OSS-120B as the
judge; neither paper nor IBM's repository (``IBM/mt-rag-benchmark`` @ cc5b1d4, whose scripts have no
correlation code; InspectorRAGet's metric view uses a plain Spearman) gives the weights or the
formula. What follows is **the project's reading** of that sentence, not a reproduction of code:

* ``weighted_spearman(x, y, w)``: the Spearman correlation of the weighted sample, i.e. the weighted
  Pearson correlation of weighted mid-ranks. A row's rank is the total weight of the rows with a
  smaller value plus (its tie group's total weight + 1) / 2, so for integer weights the result
  equals ``scipy.stats.spearmanr`` on the data with row i repeated w_i times, and for equal weights
  it equals ``spearmanr`` on the data itself (average ranks for ties). Scaling all weights by a
  constant does not change it.
* the weights (``correlation_table(weights=...)``): ``"balanced"`` (default, "to correct for data
  imbalance"): each row weighs 1 / (the number of rows that share its human value), so every
  observed human score level carries the same total weight; the human scores are heavily skewed
  towards the top of the scale (MTRAG Table 6: means 3.5-4.0 on 1-4), and unweighted ranks would
  mostly measure the order among the many top-scored responses. ``"annotators"``: each row weighs
  its number of annotators for that human judgment. ``"equal"``: plain Spearman. Any other string
  names a numeric weight column of ``rows``.
* the human value of a row is the annotators' mean (``human_<name>``); ``median_<name>`` holds the
  median, which MTRAG's Table 6 used to consolidate the three annotators; the papers do not say
  which one entered the correlation.

Confidence intervals resample whole tasks (``convrag.stats.bootstrap.bootstrap_statistic`` with
clusters), recomputing balanced weights inside each resample.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from convrag.data.mtrag import ANSWERABILITY, OFFICIAL_METRICS, HumanEvaluations
from convrag.stats.bootstrap import bootstrap_statistic

__all__ = [
    "ANSWERABLE_SUBSET",
    "FIGURE5_HUMAN",
    "FIGURE5_METRICS",
    "PAPER_SYSTEMS",
    "WEIGHTINGS",
    "balanced_weights",
    "column_name",
    "correlation_table",
    "figure5_table",
    "human_rows",
    "select_rows",
    "weighted_spearman",
]

# MTRAG Figure 4 / MTRAG-UN Figure 5: the model responses (not the reference) on the answerable subset.
PAPER_SYSTEMS = ("gpt-4o", "llama-3.1-405b-instruct")
ANSWERABLE_SUBSET = ("ANSWERABLE", "PARTIAL")
# The paper's metric names -> the official per-task (IDK-conditioned) columns of ``human_rows``.
FIGURE5_METRICS = {"RB_alg": "official_rb_agg", "RB_llm": "official_rb_llm", "RL_F": "official_rl_f"}
# Figure 5(a) faithfulness, appropriateness, completeness; 5(b) win rate.
FIGURE5_HUMAN = ("human_faithfulness", "human_appropriateness", "human_completeness", "human_win_rate")
WEIGHTINGS = ("balanced", "annotators", "equal")

_ROW_KEYS = ("task_id", "conversation_id", "turn", "domain", "system", "answerability")
_SPEAKER = {"user": "user", "assistant": "agent"}


def column_name(name: str) -> str:
    """A file's metric name as a column suffix: runs of characters other than letters and digits
    become one underscore (``win-rate`` -> ``win_rate``, ``Bert-KPrec`` -> ``Bert_KPrec``)."""
    out = re.sub(r"[^0-9A-Za-z]+", "_", str(name)).strip("_")
    if not out:
        raise ValueError(f"metric name {name!r} has no letters or digits")
    return out


def _suffixes(names: Sequence[str], kind: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for n in names:
        c = column_name(n)
        if c in out.values():
            other = next(k for k, v in out.items() if v == c)
            raise ValueError(f"{kind} metrics {other!r} and {n!r} both become the column suffix {c!r}")
        out[n] = c
    return out


def human_rows(he: HumanEvaluations) -> pd.DataFrame:
    """One row per (task_id, system) of the human-evaluation file, in file order.

    Columns: task_id, conversation_id, turn, domain, system, answerability (the task's label);
    per human judgment ``<name>`` (from the file's metric definitions with author "human", in their
    order; ``win-rate`` -> ``win_rate``): ``human_<name>`` (mean over the row's annotators, NaN with
    none), ``median_<name>`` and ``n_<name>`` (annotators); per official metric (``OFFICIAL_METRICS``):
    ``official_<name>`` (NaN where the file has none; rb_agg, rb_llm and rl_f are the IDK-conditioned
    values); and what re-scoring needs: ``response``, ``targets`` (list of texts), ``contexts`` (list
    of passage texts, the task's order) and ``conversation_turns`` ([{speaker: user|agent, text}],
    ending with the task's question).
    """
    human_names = [m["name"] for m in he.metrics if isinstance(m, dict) and m.get("author") == "human"]
    for ev in he.evaluations.values():
        human_names += [k for k in ev.human if k not in human_names]
    hcols = _suffixes(human_names, "human")
    ocols = _suffixes(list(OFFICIAL_METRICS), "official")
    rows = []
    for (task_id, system), ev in he.evaluations.items():
        task = he.tasks[task_id]
        row = {"task_id": task_id, "conversation_id": task.conversation_id, "turn": task.turn,
               "domain": task.labels.get("domain"), "system": system,
               "answerability": task.labels.get("answerability")}
        for name, c in hcols.items():
            vals = list((ev.human.get(name) or {}).values())
            row[f"human_{c}"] = float(np.mean(vals)) if vals else math.nan
            row[f"median_{c}"] = float(np.median(vals)) if vals else math.nan
            row[f"n_{c}"] = len(vals)
        for name, c in ocols.items():
            v = ev.metrics.get(name)
            row[f"official_{c}"] = math.nan if v is None else float(v)
        row["response"] = ev.prediction
        row["targets"] = list(task.reference_answers)
        row["contexts"] = [c["text"] for c in task.contexts]
        row["conversation_turns"] = [{"speaker": _SPEAKER[t["role"]], "text": t["text"]} for t in task.history] + [
            {"speaker": "user", "text": task.question}]
        rows.append(row)
    columns = [*_ROW_KEYS, *(f"{p}_{c}" for c in hcols.values() for p in ("human", "median", "n")),
               *(f"official_{c}" for c in ocols.values()), "response", "targets", "contexts", "conversation_turns"]
    return pd.DataFrame(rows, columns=columns)


# ---- weighted Spearman ---------------------------------------------------------------------


def _clean(x, y, w) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Aligned float arrays with the rows that carry no information removed: a NaN in x, y or w,
    or a zero weight. A negative or infinite weight, or unequal lengths, is an error."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    w = np.ones_like(x) if w is None else np.asarray(w, dtype=float).ravel()
    if not (x.size == y.size == w.size):
        raise ValueError(f"weighted_spearman: x, y and w need one value per row, got {x.size}, {y.size}, {w.size}")
    if np.any(np.isinf(w)) or np.any(w[~np.isnan(w)] < 0):
        raise ValueError("weighted_spearman: weights must be finite and >= 0")
    if np.any(np.isinf(x)) or np.any(np.isinf(y)):
        raise ValueError("weighted_spearman: x and y must not hold infinite values")
    keep = ~(np.isnan(x) | np.isnan(y) | np.isnan(w)) & (w > 0)
    return x[keep], y[keep], w[keep]


def _weighted_midranks(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Rank of each value in the weighted sample: the weight of the smaller values plus
    (the weight of its tie group + 1) / 2 (= the average rank of the replicated rows)."""
    order = np.argsort(v, kind="mergesort")
    vs = v[order]
    group = np.cumsum(np.r_[True, vs[1:] != vs[:-1]]) - 1
    gw = np.bincount(group, weights=w[order])
    rank_of_group = (np.cumsum(gw) - gw) + (gw + 1.0) / 2.0
    out = np.empty_like(v)
    out[order] = rank_of_group[group]
    return out


def _weighted_pearson(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> float:
    p = w / w.sum()
    da, db = a - np.dot(p, a), b - np.dot(p, b)
    den = math.sqrt(float(np.dot(p, da * da)) * float(np.dot(p, db * db)))
    return float(np.dot(p, da * db) / den) if den > 0 else math.nan


def weighted_spearman(x, y, w=None) -> float:
    """Weighted Spearman correlation: the weighted Pearson correlation of the weighted mid-ranks of
    ``x`` and ``y`` (the project's reading of MTRAG's "weighted Spearman", see the module docstring).

    With integer weights it equals ``scipy.stats.spearmanr`` of the data with row i repeated
    ``w[i]`` times; with equal weights (or ``w=None``) it equals ``spearmanr(x, y)``. Rows with a NaN
    in x, y or w, or a zero weight, are dropped. NaN when fewer than 3 rows remain or when x or y is
    constant over them. Negative or infinite weights raise ValueError.
    """
    x, y, w = _clean(x, y, w)
    if x.size < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    return _weighted_pearson(_weighted_midranks(x, w), _weighted_midranks(y, w), w)


def balanced_weights(values) -> np.ndarray:
    """1 / (number of rows sharing the row's value), so every distinct value carries the same total
    weight (values equal to 9 decimals count as one); NaN rows get NaN."""
    v = np.round(np.asarray(values, dtype=float).ravel(), 9)
    out = np.full(v.shape, np.nan)
    ok = ~np.isnan(v)
    if ok.any():
        _, inverse, counts = np.unique(v[ok], return_inverse=True, return_counts=True)
        out[ok] = 1.0 / counts[inverse]
    return out


# ---- the correlation table ----------------------------------------------------------------


def _numeric(rows: pd.DataFrame, col: str, role: str) -> np.ndarray:
    try:
        return pd.to_numeric(rows[col], errors="raise").to_numpy(dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"correlation_table: {role} column {col!r} is not numeric ({e})") from None


def _count_column(human_col: str) -> str:
    for prefix in ("human_", "median_"):
        if human_col.startswith(prefix):
            return "n_" + human_col[len(prefix):]
    return "n_" + human_col


def select_rows(rows: pd.DataFrame, systems: Sequence[str] | None = None,
                answerability: Sequence[str] | None = None) -> pd.DataFrame:
    """The rows of the given systems and answerability labels (None: all), index reset. A system
    that no row has, or a label that is no MTRAG / MTRAG-UN answerability class, is an error, so a
    misspelling does not silently empty the table (a valid class may be absent from a small sample)."""
    known = {a for labels in ANSWERABILITY.values() for a in labels}
    for col, wanted, vocab in (("system", systems, None), ("answerability", answerability, known)):
        if wanted is None:
            continue
        if isinstance(wanted, str):
            raise ValueError(f"select_rows: {col} must be a list of values, got the string {wanted!r}")
        if col not in rows.columns:
            raise ValueError(f"select_rows: rows have no column {col!r}; have {list(rows.columns)}")
        have = set(rows[col].dropna())
        unknown = sorted(set(wanted) - (have if vocab is None else vocab))
        if unknown:
            raise ValueError(f"select_rows: unknown {col} {unknown}; "
                             f"expected one of {sorted(have if vocab is None else vocab)}")
        rows = rows[rows[col].isin(list(wanted))]
    return rows.reset_index(drop=True)


def correlation_table(
    rows: pd.DataFrame,
    metric_columns: Sequence[str],
    human_columns: Sequence[str],
    *,
    weights: str = "balanced",
    cluster: str = "task_id",
    n_resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Long table, one row per (metric column, human column), metric-major in the given order: ``metric``,
    ``human``, ``weighting``, ``rho`` (``weighted_spearman``), ``spearman`` (unweighted, same rows),
    ``rows`` (rows used: metric, human value and weight present), ``tasks`` (distinct ``cluster``
    values among them), ``ci_low`` / ``ci_high`` (percentile interval resampling whole clusters,
    ``n_resamples`` times; NaN with ``n_resamples=0`` or fewer than 3 rows) and
    ``n_resamples_used`` (resamples where rho was defined).

    ``weights``: ``"balanced"`` (1 / frequency of the row's human value among the rows used,
    recomputed in each resample), ``"annotators"`` (the ``n_<name>`` column of the human column),
    ``"equal"``, or the name of a numeric column of ``rows``. A missing or non-numeric column is a
    ValueError naming it.
    """
    metric_columns, human_columns = list(metric_columns), list(human_columns)
    if not metric_columns or not human_columns:
        raise ValueError("correlation_table: need at least one metric column and one human column")
    if weights not in WEIGHTINGS and weights not in rows.columns:
        raise ValueError(f"correlation_table: weights must be one of {', '.join(WEIGHTINGS)} or a column of rows, "
                         f"got {weights!r}")
    needed = [*metric_columns, *human_columns, cluster]
    if weights == "annotators":
        needed += [_count_column(h) for h in human_columns]
    elif weights not in WEIGHTINGS:
        needed.append(weights)
    missing = [c for c in dict.fromkeys(needed) if c not in rows.columns]
    if missing:
        raise ValueError(f"correlation_table: missing columns {missing}; rows have {list(rows.columns)}")
    clusters_all = rows[cluster].to_numpy(dtype=object)
    out = []
    for m in metric_columns:
        mv = _numeric(rows, m, "metric")
        for h in human_columns:
            hv = _numeric(rows, h, "human")
            if weights == "annotators":
                base_w = _numeric(rows, _count_column(h), "weight")
            elif weights in WEIGHTINGS:
                base_w = np.ones(len(rows))
            else:
                base_w = _numeric(rows, weights, "weight")
            if np.any(base_w[~np.isnan(base_w)] < 0) or np.any(np.isinf(base_w)):
                raise ValueError(f"correlation_table: weights {weights!r} for {h!r} must be finite and >= 0")
            keep = ~(np.isnan(mv) | np.isnan(hv) | np.isnan(base_w)) & (base_w > 0)
            x, y, bw, cl = mv[keep], hv[keep], base_w[keep], clusters_all[keep]

            def stat(a, b, c, _mode=weights):
                return weighted_spearman(a, b, balanced_weights(b) if _mode == "balanced" else c)

            rec = {"metric": m, "human": h, "weighting": weights, "rho": stat(x, y, bw),
                   "spearman": math.nan, "rows": int(keep.sum()), "tasks": int(pd.Series(cl).nunique()),
                   "ci_low": math.nan, "ci_high": math.nan, "n_resamples_used": 0}
            if x.size >= 3 and not (np.all(x == x[0]) or np.all(y == y[0])):
                rec["spearman"] = float(stats.spearmanr(x, y).statistic)
            if n_resamples and x.size >= 3:
                b = bootstrap_statistic([x, y, bw], stat, n_resamples=n_resamples, seed=seed, alpha=alpha,
                                        clusters=list(cl))
                rec.update(ci_low=b["ci_low"], ci_high=b["ci_high"], n_resamples_used=b["n_resamples_used"])
            out.append(rec)
    return pd.DataFrame(out, columns=["metric", "human", "weighting", "rho", "spearman", "rows", "tasks",
                                      "ci_low", "ci_high", "n_resamples_used"])


def figure5_table(rows: pd.DataFrame, metric_columns: Sequence[str] | None = None, **kwargs) -> pd.DataFrame:
    """Figure 5 on ``human_rows`` output: the model responses (``PAPER_SYSTEMS``) on the answerable
    subset (``ANSWERABLE_SUBSET``), faithfulness / appropriateness / completeness / win rate against
    ``metric_columns`` (default: the official RB_alg, RB_llm, RL_F columns; pass the project's
    re-scored columns to compare). ``kwargs`` go to ``correlation_table``."""
    metrics = list(FIGURE5_METRICS.values()) if metric_columns is None else list(metric_columns)
    return correlation_table(select_rows(rows, PAPER_SYSTEMS, ANSWERABLE_SUBSET), metrics, list(FIGURE5_HUMAN),
                             **kwargs)
