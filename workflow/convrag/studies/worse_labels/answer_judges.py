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
  judge, 6 under the other"), over the enumerated comparisons of ``changed_conclusions``
  (``followups.changed_all``: the families §4.3 lists; its docstring gives the grid), the
  qrels -> content-label rows (``base_label`` qrels):

  - refusal-based changed conclusion: a row of a refusal family, defined and changed (sign or
    significance) between its two labels: ``refusal_rungs`` (one reader, rungs ``first`` and
    ``second``), ``refusal_readers`` (one rung, readers ``first`` and ``second``),
    ``refusal_gap`` and ``contrast_2b_2c`` (one reader x rung cell), ``kitagawa_composition`` and
    ``kitagawa_rate`` (the terms of one reader's refusal change between rungs ``first`` and
    ``second``);
  - the change comes from relabelling the false misses (no gold, content label sufficient) of
    the comparison's reader x rung cells (two for the pairwise families, one for the per-cell
    ones); it is **checkable** when, under every answer judge, each of its cells has at least
    one false-miss turn scored both with its context and with no documents (Table 2's
    ``n_paired`` > 0);
  - it **survives** under a judge when, in each of its cells, that judge's paired difference
    (false-miss correctness minus no-documents correctness) has a 95% interval above 0: the
    reader answers the relabelled contexts correctly beyond what it knows without documents,
    so the content label's "sufficient" and the changed conclusion stand. ``every`` = survives
    under every judge.

  Rows: per slice, one per answer judge and one ``judge`` = ``every``, with
  ``n_refusal_changed``, ``n_checkable``, ``n_survive`` and the surviving comparisons
  (``family:reader@rung`` for a cell, ``family:reader:first->second`` /
  ``family:rung:first->second`` for a pair; "; "-joined).
"""

from __future__ import annotations

from itertools import combinations
from typing import Mapping

import numpy as np
import pandas as pd

from convrag.errors import DataError

__all__ = ["ANSWER_JUDGES_COLUMNS", "EVERY", "LARGEST", "REFUSAL_FAMILIES", "SURVIVAL_COLUMNS", "SHARES",
           "answer_judges", "judge_survival"]

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


REFUSAL_FAMILIES = ("refusal_rungs", "refusal_readers", "refusal_gap", "contrast_2b_2c", "kitagawa_composition",
                    "kitagawa_rate")
_RUNG_PAIRS = ("refusal_rungs", "kitagawa_composition", "kitagawa_rate")


def _cells(r) -> tuple[str, list[tuple[str, str]]]:
    """(name, the reader x rung cells) of one refusal-based comparison row."""
    fam = r.comparison
    if fam in _RUNG_PAIRS:
        return f"{fam}:{r.reader}:{r.first}->{r.second}", [(r.reader, r.first), (r.reader, r.second)]
    if fam == "refusal_readers":
        return f"{fam}:{r.rung}:{r.first}->{r.second}", [(r.first, r.rung), (r.second, r.rung)]
    return f"{fam}:{r.reader}@{r.rung}", [(r.reader, r.rung)]


def judge_survival(changed: pd.DataFrame, per_judge: pd.DataFrame, judges: list[str], base: str = "qrels"
                   ) -> pd.DataFrame:
    """Refusal-based changed conclusions checked against each answer judge (module doc).
    ``changed``: a ``changed_conclusions`` frame (``followups.changed_all``; only its rows of
    ``base_label`` ``base`` when it has that column); ``per_judge``: ``answer_judges``' frame;
    ``judges``: the answer judges in order."""
    need_c = ["slice", "comparison", "reader", "rung", "first", "second", "defined", "changed"]
    need_p = ["slice", "reader", "rung", "judge", "diff_ci_low", "n_paired"]
    for name, df, need in (("changed", changed, need_c), ("per_judge", per_judge, need_p)):
        missing = [c for c in need if c not in df.columns]
        if missing:
            raise DataError(f"judge_survival: {name} lacks column(s) {', '.join(missing)}")
    if not judges:
        raise DataError("judge_survival: no answer judge")
    if "base_label" in changed.columns:
        changed = changed[changed["base_label"].astype(str) == str(base)]
    cell = {(str(r.slice), str(r.reader), str(r.rung), str(r.judge)): (r.n_paired, r.diff_ci_low)
            for r in per_judge.itertuples()}
    ref = changed[changed["comparison"].isin(REFUSAL_FAMILIES) & changed["defined"].astype(bool)
                  & changed["changed"].astype(bool)]
    rows = []
    for sl in dict.fromkeys(changed["slice"].astype(str)):
        sub = ref[ref["slice"].astype(str) == sl]
        checkable, survive = [], {j: [] for j in judges}
        for r in sub.itertuples():
            name, cells = _cells(r)
            got = {j: [cell.get((sl, str(q), str(rung), j)) for q, rung in cells] for j in judges}
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
