"""The answer judges compared (*Better Retrievers, Worse Labels*, Table 2 and §4.3): the paper
scores reader answers with two answer-correctness judges, reports that Table 2's correctness
moves by at most .04 when one judge replaces the other, and checks the refusal-based changed
conclusions of §4.3 against each judge ("4 survive").

* ``answer_judges``: Table 2 (``abstention.table2``: correctness on false misses, true misses and
  with no documents, and the paired false-miss minus no-documents difference) once per answer
  judge (rows ``judge`` = the judge's model), then per slice x reader x rung one row ``judge`` =
  ``largest_difference``: for each of the three correctness shares the largest absolute
  difference between any two judges (``correct_*``; NaN with fewer than two judges that give
  the share), and ``largest_difference`` = the largest of those three (the paper's "<= .04").
  The paired ``diff`` of that row is the largest difference of the judges' paired differences.
* ``judge_survival``: which refusal-based changed conclusions survive the answer-judge check.
  The paper's text available to this project does not spell the check out; it is reconstructed
  from what it reports (Table 2's finding that false misses are answered correctly far more
  often than with no documents, and the counts "7 refusal-based, checkable; 4 survive under one
  judge, 6 under the other"):

  - refusal-based changed conclusion: a ``changed_conclusions`` row of comparison
    ``refusal_rungs`` (refusal on insufficient contexts, rung ``first`` vs ``second``, one reader)
    that is defined and changed (sign or significance) between its two labels;
  - the change comes from relabelling the false misses (no gold, content label sufficient) of
    the two rungs; it is **checkable** when, under every answer judge, each of the two rungs has
    at least one false-miss turn of that reader scored both with its context and with no
    documents (Table 2's ``n_paired`` > 0);
  - it **survives** under a judge when, on both rungs, that judge's paired difference (false-miss
    correctness minus no-documents correctness) has a 95% interval above 0: the reader answers
    the relabelled contexts correctly beyond what it knows without documents, so the content
    label's "sufficient" and the changed conclusion stand. ``every`` = survives under every judge.

  Rows: per slice, one per answer judge and one ``judge`` = ``every``, with
  ``n_refusal_changed``, ``n_checkable``, ``n_survive`` and the surviving comparisons
  (``reader:first->second``, "; "-joined).
"""

from __future__ import annotations

from itertools import combinations
from typing import Mapping

import numpy as np
import pandas as pd

from convrag.errors import DataError

__all__ = ["ANSWER_JUDGES_COLUMNS", "EVERY", "LARGEST", "SURVIVAL_COLUMNS", "SHARES", "answer_judges",
           "judge_survival"]

LARGEST = "largest_difference"
EVERY = "every"
SHARES = ("correct_false_miss", "correct_true_miss", "correct_no_docs")
ANSWER_JUDGES_COLUMNS = [
    "slice", "reader", "rung", "judge",
    "n_false_miss", "correct_false_miss", "n_true_miss", "correct_true_miss", "n_no_docs", "correct_no_docs",
    "diff", "diff_ci_low", "diff_ci_high", "n_paired", "n_judges", LARGEST,
]
SURVIVAL_COLUMNS = ["slice", "judge", "n_refusal_changed", "n_checkable", "n_survive", "surviving"]
_CELL = ["slice", "reader", "rung"]


def _largest(values) -> float:
    """The largest |a - b| over pairs of finite values; NaN with fewer than two."""
    v = [float(x) for x in values if x is not None and np.isfinite(float(x))]
    return max((abs(a - b) for a, b in combinations(v, 2)), default=float("nan"))


def answer_judges(contexts, labels, reads_by_judge: Mapping[str, pd.DataFrame], ctx) -> pd.DataFrame:
    """Table 2 per answer judge and the largest difference between judges per cell (module doc).
    ``reads_by_judge``: judge -> the reads frame with that judge's ``correct`` (``load_reads``), in
    the config's order."""
    from convrag.studies.worse_labels.abstention import table2

    if not reads_by_judge:
        raise DataError("answer_judges: no answer judge (judges.answer lists none)")
    parts = []
    for judge, reads in reads_by_judge.items():
        t = table2(contexts, labels, reads, ctx)
        parts.append(t.assign(judge=str(judge)))
    per = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=ANSWER_JUDGES_COLUMNS)
    per["n_judges"] = 1
    per[LARGEST] = np.nan
    rows = []
    for key, g in per.groupby(_CELL, sort=False):
        row = dict(zip(_CELL, key), judge=LARGEST, n_judges=int(len(g)))
        for col in (*SHARES, "diff"):
            row[col] = _largest(g[col])
        shares = [row[c] for c in SHARES if np.isfinite(row[c])]
        row[LARGEST] = max(shares) if shares else float("nan")
        rows.append(row)
    out = pd.concat([per, pd.DataFrame(rows)], ignore_index=True) if rows else per
    return out.reindex(columns=ANSWER_JUDGES_COLUMNS)


def judge_survival(changed: pd.DataFrame, per_judge: pd.DataFrame, judges: list[str]) -> pd.DataFrame:
    """Refusal-based changed conclusions checked against each answer judge (module doc).
    ``changed``: a ``changed_conclusions`` frame; ``per_judge``: ``answer_judges``' frame;
    ``judges``: the answer judges in order."""
    need_c = ["slice", "comparison", "reader", "first", "second", "defined", "changed"]
    need_p = ["slice", "reader", "rung", "judge", "diff_ci_low", "n_paired"]
    for name, df, need in (("changed", changed, need_c), ("per_judge", per_judge, need_p)):
        missing = [c for c in need if c not in df.columns]
        if missing:
            raise DataError(f"judge_survival: {name} lacks column(s) {', '.join(missing)}")
    if not judges:
        raise DataError("judge_survival: no answer judge")
    cell = {(r.slice, r.reader, r.rung, r.judge): (r.n_paired, r.diff_ci_low) for r in per_judge.itertuples()}
    ref = changed[(changed["comparison"] == "refusal_rungs") & changed["defined"].astype(bool)
                  & changed["changed"].astype(bool)]
    rows = []
    for sl in dict.fromkeys(changed["slice"].astype(str)):
        sub = ref[ref["slice"].astype(str) == sl]
        checkable, survive = [], {j: [] for j in judges}
        for r in sub.itertuples():
            name = f"{r.reader}:{r.first}->{r.second}"
            got = {j: [cell.get((sl, r.reader, rung, j)) for rung in (r.first, r.second)] for j in judges}
            if not all(x is not None and x[0] > 0 for j in judges for x in got[j]):
                continue
            checkable.append(name)
            for j in judges:
                if all(np.isfinite(x[1]) and x[1] > 0 for x in got[j]):
                    survive[j].append(name)
        every = [n for n in checkable if all(n in survive[j] for j in judges)]
        for j, names in [*survive.items(), (EVERY, every)]:
            rows.append({"slice": sl, "judge": j, "n_refusal_changed": int(len(sub)), "n_checkable": len(checkable),
                         "n_survive": len(names), "surviving": "; ".join(names)})
    return pd.DataFrame(rows, columns=SURVIVAL_COLUMNS)
