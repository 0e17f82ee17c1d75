"""Judge-corrected means on MTRAG's human-evaluated responses (target ``judge_corrected``).

The study re-scores MTRAG's human-evaluated responses with its judges (``human-eval`` stage,
``paths.human_scores``); every one of those responses has human judgments, so a
prediction-powered estimate (``convrag.stats.ppi``) over all of them would just be the human mean.
To show what PPI does where only part of the items carry human labels (the situation of a new
grid), the labelled set is a **seeded uniformly random share of the tasks**
(``mtrag_un.evaluation.ppi.labelled_share`` and ``seed``): the same tasks for every system, so
paired differences have both systems' labels. The human mean over ALL items is reported beside
it (``human_all_*``) as the reference the PPI interval can be compared with.

**Pairs of judge metric and human judgment** (``PAIRS``; both on 0-1):

* ``RL_F`` (RAGAS faithfulness: share of the reply's statements the documents support) against
  human ``faithfulness`` ("faithful and grounded on the context");
* ``RB_llm`` (the judge's 1-10 rating divided by 10, over faithfulness, appropriateness and
  completeness against the reference) against the mean of the human ``faithfulness``,
  ``appropriateness`` and ``completeness`` (the three criteria its prompt names).

Each judgment is an annotator mean per (task, system) (``human.human_rows``: the mean
annotator, as the PPI unit is one item); 1-4 is rescaled to 0-1 as (x - 1) / 3. Judge values are
the study's own, conditioned on answerability as in Table 4 and Figure 5 (RB_llm keeps its 0.1
floor, so ``judge_bias`` includes that offset; PPI estimates the human mean whatever the judge's
scale). Both the project's judges (``judge: project``) and the official scores shipped with the
file (``official_rl_f``, ``official_rb_llm``; ``judge: official``) are corrected. Rows: the
answerable subset (ANSWERABLE + PARTIAL, as Figure 5), every system of the file (the reference
responses included), per system and per pair of systems (paired, over shared tasks). An item
without a judge score (e.g. NaN faithfulness) leaves that metric's population and is counted
(``n_no_judge``); a cell PPI cannot estimate (fewer than 2 labelled items) keeps its judge mean
and says why in ``reason``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy import stats

from convrag.errors import DataError
from convrag.stats.ppi import TABLE_COLUMNS, ppi_table

__all__ = ["COLUMNS", "HUMAN_SCALE", "PAIRS", "human_score", "judge_corrected_table", "labelled_tasks"]

HUMAN_SCALE = (1.0, 4.0)
# judge metric -> (human judgments averaged into its counterpart, official column of the file)
PAIRS = {"RL_F": (("faithfulness",), "official_rl_f"),
         "RB_llm": (("faithfulness", "appropriateness", "completeness"), "official_rb_llm")}

COLUMNS = ["metric", "judge", "human", *TABLE_COLUMNS[:13], "human_all_mean", "human_all_low", "human_all_high",
           *TABLE_COLUMNS[13:], "n_no_judge", "judge_excludes_0", "ppi_excludes_0", "reason"]


def labelled_tasks(task_ids, share: float, seed: int) -> set:
    """A uniformly random ``ceil(share * T)`` of the T distinct task ids (at least 2, at most T),
    drawn without replacement by ``numpy.random.default_rng(seed)`` from the sorted ids (so the
    draw does not depend on file order)."""
    if not 0.0 < share <= 1.0:
        raise DataError(f"labelled_tasks: share must be in (0, 1], got {share!r}")
    ids = sorted(set(task_ids))
    n = min(len(ids), max(2, math.ceil(share * len(ids))))
    rng = np.random.default_rng(seed)
    return {ids[i] for i in rng.choice(len(ids), size=n, replace=False)} if ids else set()


def human_score(rows: pd.DataFrame, names) -> pd.Series:
    """The mean of ``human_<name>`` over ``names``, each rescaled from 1-4 to 0-1; NaN when any is."""
    lo, hi = HUMAN_SCALE
    cols = [f"human_{n}" for n in names]
    missing = [c for c in cols if c not in rows.columns]
    if missing:
        raise DataError(f"judge_corrected: human-evaluation rows lack {missing}")
    scaled = (rows[cols].astype(float) - lo) / (hi - lo)
    return scaled.mean(axis=1, skipna=False)


def _excludes_0(low, high) -> bool | None:
    return None if pd.isna(low) or pd.isna(high) else bool(low > 0 or high < 0)


def _human_all(y: np.ndarray, z: float) -> dict:
    y = y[~np.isnan(y)]
    if y.size == 0:
        return {"human_all_mean": math.nan, "human_all_low": math.nan, "human_all_high": math.nan}
    m = float(y.mean())
    h = z * math.sqrt(float(np.var(y, ddof=1)) / y.size) if y.size > 1 else math.nan
    return {"human_all_mean": m, "human_all_low": m - h, "human_all_high": m + h}


def judge_corrected_table(rows: pd.DataFrame, *, labelled_share: float = 0.25, seed: int = 0, alpha: float = 0.05,
                          tuned: bool = False, answerability=("ANSWERABLE", "PARTIAL")) -> pd.DataFrame:
    """One row per (metric, judge, system) and per (metric, judge, pair of systems): judge mean,
    PPI estimate from the labelled share, human-only mean on that share, the human mean over all
    items (``human_all_*``), agreement on the labelled items; see the module docstring.

    ``rows``: the ``human-eval`` scores (one row per task and system: ``task_id``, ``system``,
    ``answerability``, the judge columns, ``human_<name>``, ``official_<name>``).
    """
    need = ["task_id", "system", "answerability"]
    missing = [c for c in need if c not in rows.columns]
    if missing:
        raise DataError(f"judge_corrected: human-evaluation rows lack {missing}")
    dup = rows.duplicated(["task_id", "system"])
    if dup.any():
        r = rows[dup].iloc[0]
        raise DataError(f"judge_corrected: task {r['task_id']!r} of system {r['system']!r} appears twice; one row per "
                        "(task, system) is expected (annotators are already averaged)")
    sub = rows[rows["answerability"].isin(list(answerability))] if answerability else rows
    labelled = labelled_tasks(sub["task_id"], labelled_share, seed) if len(sub) else set()
    systems = list(pd.unique(sub["system"]))
    z = float(stats.norm.ppf(1 - alpha / 2))
    out = []
    for metric, (names, official) in PAIRS.items():
        human_label = names[0] if len(names) == 1 else f"mean({', '.join(names)})"
        for judge, col in (("project", metric), ("official", official)):
            if col not in sub.columns:
                continue
            d = pd.DataFrame({"system": sub["system"], "task_id": sub["task_id"],
                              "judge": pd.to_numeric(sub[col], errors="coerce").astype(float),
                              "y": human_score(sub, names).to_numpy()})
            no_judge = d[d["judge"].isna()].groupby("system").size()
            d = d[d["judge"].notna()]
            d["human"] = d["y"].where(d["task_id"].isin(labelled))
            base = {"metric": metric, "judge": judge, "human": human_label}
            for s in systems:
                one = d[d["system"] == s]
                out.append(_cell(one, base, z, alpha, tuned, [s], int(no_judge.get(s, 0))))
            for a, b in itertools.combinations(systems, 2):
                two = d[d["system"].isin([a, b])]
                out.append(_cell(two, base, z, alpha, tuned, [a, b],
                                 int(no_judge.get(a, 0)) + int(no_judge.get(b, 0))))
    return pd.DataFrame(out, columns=COLUMNS)


def _cell(d: pd.DataFrame, base: dict, z: float, alpha: float, tuned: bool, names: list, n_no_judge: int) -> dict:
    """One system (``names`` = [s]) or one paired difference ([a, b]) of ``d`` (system, task_id,
    judge, human: NaN unless labelled, y: every item's human score)."""
    diff = len(names) == 2
    if diff:
        a, b = (d[d["system"] == n].set_index("task_id") for n in names)
        shared = a.index.intersection(b.index)
        judge = (a.loc[shared, "judge"] - b.loc[shared, "judge"]).to_numpy()
        y_all = (a.loc[shared, "y"] - b.loc[shared, "y"]).to_numpy()
    else:
        judge, y_all = d["judge"].to_numpy(), d["y"].to_numpy()
    n_lab = (int((a.loc[shared, "human"] - b.loc[shared, "human"]).notna().sum()) if diff
             else int(d["human"].notna().sum()))
    row = {**base, "row": "difference" if diff else "system", "system": names[0],
           "baseline": names[1] if diff else None, "n_no_judge": n_no_judge, "reason": None,
           **_human_all(y_all.astype(float), z)}
    try:
        unjudged = [n for n in names if not (d["system"] == n).any()]
        if unjudged:  # ppi_table has no row for it (a small human-evaluation file, every item of a system unjudged)
            raise DataError(f"no item of {' and '.join(unjudged)} has a judge score")
        t = ppi_table(d[["system", "task_id", "judge", "human"]], "system", "judge", "human", "task_id",
                      pairs=[tuple(names)] if diff else None, alpha=alpha, tuned=tuned)
        row.update(t.iloc[-1].to_dict())
    except DataError as err:
        n = int(np.isfinite(judge).sum())
        jm = float(np.mean(judge)) if n else math.nan
        jh = z * math.sqrt(float(np.var(judge, ddof=1)) / n) if n > 1 else math.nan
        row.update({"judge_mean": jm, "judge_low": jm - jh, "judge_high": jm + jh, "n_all": n,
                    "n_labelled": n_lab,
                    "reason": f"no PPI estimate: {err}"})
    row["judge_excludes_0"] = _excludes_0(row.get("judge_low"), row.get("judge_high")) if diff else None
    row["ppi_excludes_0"] = _excludes_0(row.get("low"), row.get("high")) if diff else None
    return row
