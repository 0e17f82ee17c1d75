"""Reader-side analyses of *Better Retrievers, Worse Labels*: how the label of a top-k context
(qrels: "no gold document in it" = unanswerable; content: an LLM judge's yes / partial / no)
changes what an abstention study concludes about its readers.

Inputs (pandas frames, the pipeline's contract):

* ``contexts``: one row per (slice, task_id, set): dialogue, no_gold, qrels_label (all / part /
  none: the turn's gold documents in the context), and for ``score_detectors`` the retrieval
  scores top1, margin, top1_z. ``set`` is a ladder rung, or "gold" (the turn's gold documents,
  the paper's setting 2b), "none" (no documents) or "control".
* ``labels``: one row per (slice, task_id, set, labeller): label "yes" / "partial" / "no", or
  None (unparsable judge output).
* ``reads``: one row per (slice, task_id, set, reader): status "ANSWERABLE" / "UNANSWERABLE" /
  None (no status line), p_answerable, correct (answered and correctness >= 4; None when not
  scored).
* ``ctx``: ladder (rung names in order; or a dict slice -> rung names), primary, labellers,
  readers, main_slice, replication_slice, boot {n_resamples, seed, unit "turn" | "dialogue",
  alpha (0.05)}.

Conventions used by every function (the paper's, §3 and Figure 3 of the text):

* sufficient / insufficient is binary and each label drops its middle value: the qrels label
  compares "all" (sufficient) with "none" (insufficient) and drops "part" (Figure 3: "all vs.
  none"; gold contexts are all sufficient under it); a content label compares "yes" with "no"
  and drops "partial" (§3: binary metrics compare yes with no and drop partial; Figure 3: "yes
  vs. no"). Each label's measure is over the contexts it keeps; a context without a content
  label (None) drops too and is counted (``n_unlabelled``), a dropped middle value is counted
  apart (``n_dropped``, ``n_partial``). A false miss is a no-gold context judged "yes", a true
  miss one judged "no" (Table 2).
* refusal: status "UNANSWERABLE" among the responses with a status line; a response without
  one is excluded from every status-based measure and from the AUROCs of p(answerable), its p
  treated as missing although label mode scored one (§3: responses without a status line are
  excluded from refusal rates and AUROCs) and counted (``n_no_status*``, ``n_no_p``).
  Correctness-based measures keep such responses (they have an answer); a missing p /
  correctness drops the response, counted.
* AUROC: ``convrag.stats.detection.auroc`` (scikit-learn, ties one half); NaN, with the row
  kept, when one class is absent (``n_pos`` says which). Inside bootstraps the identical
  rank formula ``detection._auroc_ranks`` is used (tested equal to scikit-learn there).
* intervals: percentile bootstraps (``convrag.stats.bootstrap``), ``boot.n_resamples``
  resamples with ``boot.seed`` for every estimate (so one estimate's interval does not depend
  on which others are computed), resampling turns, or whole dialogues when
  ``boot.unit == "dialogue"``. Paired comparisons resample the pairs together (§3: differences
  are paired).
* rows: slices in the order main_slice, replication_slice, then the others as they first
  appear; readers in ``ctx.readers`` order (those present in ``reads``); rungs in ladder
  order (those present in ``contexts``). Empty inputs give empty frames with the columns; a
  missing column of a non-empty frame is a ``DataError`` naming it.

The analyses (each returns a tidy DataFrame; its columns are the module's ``*_COLUMNS``):

* ``table2``: Table 2 and §4.2 ``reader_false_misses``;
* ``figure3``: Figure 3 and §4.3 ``auroc_gap_qwen3_4b``, ``auroc_hybrid``;
* ``contrast_2b_2c``: §4.3 ``contrast_2b_2c`` and Table 3's ``within_turn_contrast_hybrid``;
* ``score_detectors``: §4.3 ``score_detectors``;
* ``kitagawa_table``: the composition / rate decomposition of refusal-rate changes (§4.3);
* ``changed_summary``: the counts of §4.3's changed conclusions (the enumeration:
  ``followups.changed_all``);
* ``auroc_columns``: Table 3's ``qwen3_4b_auroc_qrels`` / ``qwen3_4b_auroc_content``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from convrag.studies.worse_labels.label_quality import _is_missing as _missing
from convrag.errors import ConfigError, DataError
from convrag.stats.bootstrap import bootstrap_statistic, paired_bootstrap, paired_cluster_bootstrap
from convrag.stats.decomposition import kitagawa_from_data
from convrag.stats.detection import _auroc_ranks, auroc, insufficient_from_labels, paired_auroc_difference

__all__ = [
    "AUROC_COLUMNS_COLUMNS",
    "CONTRAST_COLUMNS",
    "FIGURE3_COLUMNS",
    "KITAGAWA_COLUMNS",
    "QRELS",
    "SCORE_COLUMNS",
    "TABLE2_COLUMNS",
    "auroc_columns",
    "changed_summary",
    "contrast_2b_2c",
    "figure3",
    "kitagawa_table",
    "score_detectors",
    "table2",
]

QRELS = "qrels"
SPECIAL_SETS = ("gold", "none", "control")
RETRIEVAL_DETECTORS = ("top1", "margin", "top1_z")
STATUSES = ("ANSWERABLE", "UNANSWERABLE")
_NAN = float("nan")

_KEY = ["slice", "task_id", "set"]
_CONTEXT_BASE = [*_KEY, "dialogue", "no_gold", "qrels_label"]
QRELS_LABELS = ("all", "part", "none")
_LABEL_COLS = [*_KEY, "labeller", "label"]
_READ_KEY = [*_KEY, "reader"]

TABLE2_COLUMNS = [
    "slice", "reader", "rung",
    "n_false_miss", "correct_false_miss", "n_unscored_false_miss",
    "n_true_miss", "correct_true_miss", "n_unscored_true_miss",
    "n_no_docs", "correct_no_docs", "n_unscored_no_docs",
    "diff", "diff_ci_low", "diff_ci_high", "n_paired",
    "abstain_no_docs", "n_status_no_docs",
    "n_no_status_false_miss", "n_no_status_true_miss", "n_no_status_no_docs",
    "n_unlabelled", "n_partial", "n_reads", "n_no_status", "share_no_status",
]
FIGURE3_COLUMNS = [
    "slice", "reader", "rung", "restricted", "measure", "label",
    "value", "ci_low", "ci_high", "n", "n_pos", "auroc_content", "auroc_qrels", "n_content", "n_qrels",
    "n_unlabelled", "n_dropped", "n_no_p", "n_resamples_used",
]
CONTRAST_COLUMNS = [
    "slice", "reader", "rung", "label", "n_turns", "n_unlabelled",
    "refusal_rung", "n_rung", "refusal_gold", "n_gold",
    "pooled_diff", "pooled_ci_low", "pooled_ci_high",
    "within_diff", "within_ci_low", "within_ci_high", "n_paired",
    "n_no_status_rung", "n_no_status_gold",
]
SCORE_COLUMNS = [
    "slice", "rung", "label", "measure", "detector", "kind",
    "value", "ci_low", "ci_high", "n", "n_pos", "best", "best_reader", "n_unlabelled", "n_resamples_used",
]
KITAGAWA_COLUMNS = [
    "slice", "reader", "from_rung", "to_rung", "total", "composition", "rate",
    "refusal_from", "refusal_to", "share_sufficient_from", "share_sufficient_to",
    "refusal_sufficient_from", "refusal_sufficient_to",
    "refusal_insufficient_from", "refusal_insufficient_to",
    "n_from", "n_to", "n_no_status_from", "n_no_status_to", "n_unlabelled_from", "n_unlabelled_to",
]
AUROC_COLUMNS_COLUMNS = [
    "slice", "rung", "reader", "auroc_qrels", "n_qrels", "n_pos_qrels",
    "auroc_content", "n_content", "n_pos_content", "n_unlabelled", "n_dropped_qrels", "n_dropped_content", "n_no_p",
]


# ---------------------------------------------------------------------------------------
# Settings and input normalisation
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Settings:
    ladder: object
    primary: str
    labellers: tuple
    readers: tuple | None
    main_slice: str | None
    replication_slice: str | None
    n_resamples: int
    seed: int
    alpha: float
    unit: str


def _settings(ctx) -> _Settings:
    if not isinstance(ctx, dict):
        raise ConfigError(f"worse_labels.abstention: ctx must be a dict, got {type(ctx).__name__}")
    for k in ("ladder", "primary"):
        if ctx.get(k) in (None, "", [], {}):
            raise ConfigError(f"worse_labels.abstention: ctx.{k} is missing")
    ladder = ctx["ladder"]
    if isinstance(ladder, dict):
        ladder = {str(k): [str(r) for r in v] for k, v in ladder.items()}
        rungs = [r for v in ladder.values() for r in v]
    elif isinstance(ladder, (list, tuple)):
        ladder = [str(r) for r in ladder]
        rungs = ladder
    else:
        raise ConfigError(f"worse_labels.abstention: ctx.ladder must be a list of rung names (or a dict slice -> "
                          f"list), got {type(ladder).__name__}")
    bad = [r for r in rungs if r in SPECIAL_SETS]
    if bad:
        raise ConfigError(f"worse_labels.abstention: ctx.ladder names the context set(s) {bad}, which are not rungs")
    primary = str(ctx["primary"])
    labellers = [str(x) for x in (ctx.get("labellers") or [])]
    if QRELS in labellers or primary == QRELS:
        raise ConfigError(f"worse_labels.abstention: ctx.labellers: '{QRELS}' names the qrels label, not a labeller")
    labellers = [primary, *[x for x in labellers if x != primary]]
    readers = ctx.get("readers")
    boot = ctx.get("boot") or {}
    unit = str(boot.get("unit", "turn"))
    if unit not in ("turn", "dialogue"):
        raise ConfigError(f"worse_labels.abstention: ctx.boot.unit must be 'turn' or 'dialogue', got {unit!r}")
    rep = ctx.get("replication_slice")
    main = ctx.get("main_slice")
    return _Settings(
        ladder=ladder, primary=primary, labellers=tuple(labellers),
        readers=None if readers is None else tuple(str(r) for r in readers),
        main_slice=None if main is None else str(main), replication_slice=None if rep is None else str(rep),
        n_resamples=int(boot.get("n_resamples", 1000)), seed=int(boot.get("seed", 0)),
        alpha=float(boot.get("alpha", 0.05)), unit=unit,
    )


def _require(df, cols, name: str, where: str) -> pd.DataFrame:
    """``df`` with ``cols``; an empty frame gets the missing ones, a non-empty one raises."""
    if df is None:
        df = pd.DataFrame()
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"{where}: {name} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in cols if c not in df.columns]
    if missing and len(df):
        raise DataError(f"{where}: {name} lacks the column(s) {', '.join(repr(c) for c in missing)}; "
                        f"has {list(df.columns)}")
    df = df.copy()
    for c in missing:
        df[c] = pd.Series(dtype=object)
    return df




def _check_unique(df: pd.DataFrame, key: list, name: str, where: str) -> None:
    dup = df.duplicated(key, keep=False)
    if dup.any():
        first = df.loc[dup, key].iloc[0].to_dict()
        raise DataError(f"{where}: {name} has {int(dup.sum())} rows sharing a key {key}, e.g. {first}")


def _flags(values, name: str, where: str, missing_ok: bool) -> np.ndarray:
    """Booleans (or 0/1) -> 1.0 / 0.0; a missing value is NaN where allowed, else an error."""
    out = np.empty(len(values), dtype=float)
    for i, v in enumerate(values):
        if missing_ok and _missing(v):
            out[i] = np.nan
        elif isinstance(v, (bool, np.bool_)) or (not _missing(v) and not isinstance(v, str) and v in (0, 1)):
            out[i] = float(bool(v))
        else:
            raise DataError(f"{where}: {name} row {i}: {v!r} is not a boolean{' or None' if missing_ok else ''}")
    return out


def _refused(statuses, where: str) -> np.ndarray:
    """Status -> 1.0 UNANSWERABLE, 0.0 ANSWERABLE, NaN no status line."""
    out = np.empty(len(statuses), dtype=float)
    for i, s in enumerate(statuses):
        if _missing(s):
            out[i] = np.nan
            continue
        key = str(s).strip().upper()
        if key not in STATUSES:
            raise DataError(f"{where}: reads row {i}: status {s!r} is not one of {STATUSES} or None")
        out[i] = 1.0 if key == "UNANSWERABLE" else 0.0
    return out


def _qrels_sufficient(ctx_df: pd.DataFrame, where: str) -> np.ndarray:
    """The qrels label as Figure 3 scores it: "all" 1.0, "none" 0.0, "part" NaN (dropped); a
    label that disagrees with ``no_gold`` (none exactly when no gold) is an error naming it."""
    q = ctx_df["qrels_label"].astype(str).str.strip().str.lower()
    bad = ~q.isin(QRELS_LABELS) | (q.eq("none") != ctx_df["no_gold"].astype(bool))
    if len(q) and bad.any():
        r = ctx_df[bad.to_numpy()].iloc[0]
        raise DataError(f"{where}: contexts row {r['slice']}|{r['set']}|{r['task_id']}: qrels_label "
                        f"{r['qrels_label']!r} is not one of {QRELS_LABELS} or disagrees with no_gold {r['no_gold']}")
    return q.map({"all": 1.0, "none": 0.0, "part": np.nan}).to_numpy(dtype=float)


class _Data:
    """The three frames normalised: string keys, sufficiency per label, reads per reader."""

    def __init__(self, contexts, labels, reads, ctx, *, where: str, context_cols=(), read_cols=()):
        self.s = _settings(ctx)
        self.where = where
        c = _require(contexts, [*_CONTEXT_BASE, *context_cols], "contexts", where)
        lab = _require(labels, _LABEL_COLS, "labels", where)
        r = _require(reads, [*_READ_KEY, *read_cols], "reads", where)
        for df, cols in ((c, _KEY + ["dialogue"]), (lab, _KEY + ["labeller"]), (r, _READ_KEY)):
            for col in cols:
                df[col] = df[col].astype(str) if len(df) else df[col].astype(object)
        _check_unique(c, _KEY, "contexts", where)
        _check_unique(lab, [*_KEY, "labeller"], "labels", where)
        _check_unique(r, _READ_KEY, "reads", where)

        ctx_df = c[_CONTEXT_BASE].copy()
        ctx_df["no_gold"] = _flags(c["no_gold"].tolist(), "contexts.no_gold", where, missing_ok=False).astype(bool)
        ctx_df["suff:" + QRELS] = _qrels_sufficient(ctx_df, where)
        ctx_df["drop:" + QRELS] = ctx_df["qrels_label"].astype(str).eq("part").to_numpy()
        for col in context_cols:
            ctx_df[col] = pd.to_numeric(c[col], errors="coerce").astype(float)
        index = pd.MultiIndex.from_frame(ctx_df[_KEY]) if len(ctx_df) else None
        for name in self.s.labellers:
            sub = lab[lab["labeller"] == name]
            if index is not None and len(sub):
                got = sub.set_index(_KEY)["label"].reindex(index).tolist()
            else:
                got = [None] * len(ctx_df)
            ins = insufficient_from_labels(got, partial="drop")
            ctx_df["suff:" + name] = 1.0 - ins
            ctx_df["drop:" + name] = [not _missing(x) and str(x).strip().lower() == "partial" for x in got]
        self.ctx = ctx_df

        rd = r[_READ_KEY].copy()
        if "status" in r.columns:
            rd["refused"] = _refused(r["status"].tolist(), where)
        if "p_answerable" in r.columns:
            p = pd.to_numeric(r["p_answerable"], errors="coerce").astype(float)
            rd["p"] = p.where(np.isfinite(p))
            if "status" in r.columns:  # §3: a response without a status line is left out of the AUROCs too
                rd["p"] = rd["p"].where(rd["refused"].notna().to_numpy())
        if "correct" in r.columns:
            rd["correct"] = _flags(r["correct"].tolist(), "reads.correct", where, missing_ok=True)
        rd["has_read"] = True
        self.reads = rd
        self._ctx_groups = {k: g.set_index("task_id") for k, g in ctx_df.groupby(["slice", "set"], sort=False)}
        self._read_groups = {k: g.set_index("task_id") for k, g in rd.groupby(["slice", "set", "reader"], sort=False)}

    # ---- selections ----------------------------------------------------------------------

    def slices(self) -> list[str]:
        seen = list(dict.fromkeys(self.ctx["slice"].tolist()))
        first = [s for s in (self.s.main_slice, self.s.replication_slice) if s is not None and s in seen]
        return [*first, *[s for s in seen if s not in first]]

    def rungs(self, sl: str) -> list[str]:
        ladder = self.s.ladder.get(sl, []) if isinstance(self.s.ladder, dict) else self.s.ladder
        return [r for r in ladder if (sl, r) in self._ctx_groups]

    def readers(self, sl: str) -> list[str]:
        present = list(dict.fromkeys(self.reads.loc[self.reads["slice"] == sl, "reader"].tolist()))
        if self.s.readers is None:
            return present
        return [r for r in self.s.readers if r in present]

    def contexts(self, sl: str, st: str) -> pd.DataFrame:
        """The contexts of one set, indexed by task_id."""
        g = self._ctx_groups.get((sl, st))
        return g if g is not None else self.ctx.iloc[:0].set_index("task_id")

    def read(self, sl: str, st: str, reader: str, index) -> pd.DataFrame:
        """One reader's reads of one set, aligned to ``index`` (task_ids; NaN rows where no read)."""
        g = self._read_groups.get((sl, st, reader))
        if g is None:
            g = self.reads.iloc[:0].set_index("task_id")
        out = g.reindex(pd.Index(index, name="task_id"))
        out["has_read"] = out["has_read"].eq(True)
        return out

    def view(self, sl: str, st: str, reader: str) -> pd.DataFrame:
        c = self.contexts(sl, st)
        r = self.read(sl, st, reader, c.index).drop(columns=["slice", "set", "reader"])
        return c.join(r)

    # ---- labels and bootstraps -------------------------------------------------------------

    def suff(self, df: pd.DataFrame, label: str) -> pd.Series:
        """1.0 sufficient ("all" / "yes"), 0.0 insufficient ("none" / "no"), NaN where ``label``
        drops the context ("part" / "partial") or has no label for it."""
        return df["suff:" + label]

    def dropped(self, df: pd.DataFrame, label: str) -> np.ndarray:
        """Where ``label`` drops the context for its middle value ("part" / "partial")."""
        return df["drop:" + label].to_numpy(dtype=bool)

    def clusters(self, dialogues):
        return np.asarray(list(dialogues), dtype=object) if self.s.unit == "dialogue" else None

    def boot(self) -> dict:
        return {"n_resamples": self.s.n_resamples, "seed": self.s.seed, "alpha": self.s.alpha}

    def statistic(self, arrays, f, dialogues) -> dict:
        """``bootstrap_statistic`` with the study's settings; NaN result for no rows."""
        n = len(arrays[0])
        if n == 0:
            return {"estimate": _NAN, "ci_low": _NAN, "ci_high": _NAN, "n": 0, "n_resamples_used": 0}
        return bootstrap_statistic([np.asarray(a) for a in arrays], f, clusters=self.clusters(dialogues), **self.boot())

    def paired_mean(self, a, b, dialogues) -> dict:
        """mean(a - b) with a paired (cluster) bootstrap interval; NaN for no pairs."""
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if a.size == 0:
            return {"mean_diff": _NAN, "ci_low": _NAN, "ci_high": _NAN, "n": 0}
        if self.s.unit == "dialogue":
            return paired_cluster_bootstrap(a, b, self.clusters(dialogues), **self.boot())
        return paired_bootstrap(a, b, **self.boot())


def _nanmean(x) -> float:
    x = np.asarray(x, dtype=float)
    m = ~np.isnan(x)
    return float(x[m].mean()) if m.any() else _NAN


def _mean_or_nan(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(x.mean()) if x.size else _NAN


def _auroc(y, s) -> float:
    y, s = np.asarray(y, dtype=float), np.asarray(s, dtype=float)
    return auroc(y.astype(int), s) if y.size else _NAN


def _auroc_diff_two_scores(y, a, b) -> float:
    """AUROC(b) - AUROC(a) on one labeling (the rank formula; NaN with one class)."""
    return _auroc_ranks(y, b) - _auroc_ranks(y, a)


def _frame(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns)


# ---------------------------------------------------------------------------------------
# Table 2: reader correctness on false misses, true misses and with no documents
# ---------------------------------------------------------------------------------------


def table2(contexts, labels, reads, ctx) -> pd.DataFrame:
    """Table 2 (§4.2 ``reader_false_misses``): is a "no gold" context that the primary judge
    calls sufficient (a FALSE MISS) really answerable? Per slice x reader x rung:

    * ``correct_false_miss``: share of correct responses (``correct``: answered, correctness
      >= 4) on the rung's contexts with no gold and the primary label "yes" (Table 2: none
      contexts that phi-4 judges sufficient); ``correct_true_miss`` the same with label "no";
      a no-gold context judged "partial" is in neither (``n_partial``);
      ``correct_no_docs`` with no documents (set "none") on the SAME turns as the false
      misses. ``n_*`` count the contexts / turns of each group, ``n_unscored_*`` those without
      a correctness value (no read, or ``correct`` None), which drop from the share.
    * ``diff``: false-miss minus no-documents correctness within turn (turns scored in both),
      paired bootstrap CI (``paired_cluster_bootstrap`` over dialogues when unit dialogue);
      the paper's paired difference and its lower bound.
    * ``abstain_no_docs``: share of the no-document responses (false-miss turns) that
      abstain (status UNANSWERABLE), over those with a status line (``n_status_no_docs``);
      responses without one are counted in ``n_no_status_*`` (correctness keeps them).
    * ``n_unlabelled``: no-gold contexts without a primary label (in neither group);
      ``n_partial``: no-gold contexts judged "partial" (in neither group).
    * ``n_no_status`` of ``n_reads``: the reader's responses on ALL the rung's contexts that
      have no status line, and ``share_no_status`` (§3 / Table 1's exclusions, "at most 75 of
      858 per context set"; Table 3's 13-23%).
    """
    d = _Data(contexts, labels, reads, ctx, where="table2", read_cols=("status", "correct"))
    rows = []
    for sl in d.slices():
        for reader in d.readers(sl):
            for rung in d.rungs(sl):
                v = d.view(sl, rung, reader)
                suff = d.suff(v, d.s.primary)
                ng = v["no_gold"].to_numpy(dtype=bool)
                fm, tm = v[ng & (suff == 1.0).to_numpy()], v[ng & (suff == 0.0).to_numpy()]
                nd = d.read(sl, "none", reader, fm.index)
                both = fm["correct"].notna().to_numpy() & nd["correct"].notna().to_numpy()
                pd_ = d.paired_mean(fm["correct"].to_numpy()[both], nd["correct"].to_numpy()[both],
                                    fm["dialogue"].to_numpy()[both])
                nd_status = nd["refused"].dropna()
                row = {"slice": sl, "reader": reader, "rung": rung}
                for name, g in (("false_miss", fm), ("true_miss", tm), ("no_docs", nd)):
                    scored = g["correct"].dropna()
                    row[f"n_{name}"] = int(len(g))
                    row[f"correct_{name}"] = _mean_or_nan(scored)
                    row[f"n_unscored_{name}"] = int(len(g) - len(scored))
                    row[f"n_no_status_{name}"] = int((g["has_read"] & g["refused"].isna()).sum())
                row.update({"diff": pd_["mean_diff"], "diff_ci_low": pd_["ci_low"], "diff_ci_high": pd_["ci_high"],
                            "n_paired": int(pd_["n"]), "abstain_no_docs": _mean_or_nan(nd_status),
                            "n_status_no_docs": int(len(nd_status)),
                            "n_unlabelled": int((ng & suff.isna().to_numpy() & ~d.dropped(v, d.s.primary)).sum()),
                            "n_partial": int((ng & d.dropped(v, d.s.primary)).sum())})
                n_reads = int(v["has_read"].sum())
                n_ns = int((v["has_read"] & v["refused"].isna()).sum())
                row.update(n_reads=n_reads, n_no_status=n_ns, share_no_status=n_ns / n_reads if n_reads else _NAN)
                rows.append(row)
    return _frame(rows, TABLE2_COLUMNS)


# ---------------------------------------------------------------------------------------
# Figure 3: answerability AUROC of p(answerable) under the qrels and content labels
# ---------------------------------------------------------------------------------------


def _figure3_cell(d: _Data, sl, reader, rung, v: pd.DataFrame, restricted: bool) -> list[dict]:
    has_p = v["p"].notna().to_numpy()
    p = v["p"].to_numpy()
    kept_q = ~np.isnan(d.suff(v, QRELS).to_numpy())
    key = {"slice": sl, "reader": reader, "rung": rung, "restricted": restricted}
    rows = []
    for label in (QRELS, *d.s.labellers):
        y = d.suff(v, label).to_numpy()
        kept = ~np.isnan(y)
        # restricted: the contexts both this label and the qrels label keep (the paper's check)
        base = has_p & (kept_q & ~np.isnan(d.suff(v, d.s.primary).to_numpy()) if label == QRELS else kept_q) \
            if restricted else has_p
        keep = base & kept
        dropped = base & d.dropped(v, label)
        rows.append({**key, "measure": "auroc", "label": label, "value": _auroc(y[keep], p[keep]),
                     "ci_low": _NAN, "ci_high": _NAN, "n": int(keep.sum()), "n_pos": int(y[keep].sum()),
                     "n_unlabelled": int((base & ~kept & ~dropped).sum()), "n_dropped": int(dropped.sum()),
                     "n_no_p": int((~has_p).sum())})
    yc, yq = d.suff(v, d.s.primary).to_numpy(), d.suff(v, QRELS).to_numpy()
    use = has_p & (~np.isnan(yc) & ~np.isnan(yq) if restricted else (~np.isnan(yc) | ~np.isnan(yq)))
    a, b = yc[use], yq[use]  # NaN where a label drops the context: each AUROC over its own
    if use.any():
        res = paired_auroc_difference(p[use], a, b, clusters=d.clusters(v["dialogue"].to_numpy()[use]), **d.boot())
    else:
        res = {"estimate": _NAN, "ci_low": _NAN, "ci_high": _NAN, "n": 0, "n_resamples_used": 0,
               "auroc_a": _NAN, "auroc_b": _NAN, "n_a": 0, "n_b": 0}
    rows.append({**key, "measure": "gap", "label": d.s.primary, "value": res["estimate"], "ci_low": res["ci_low"],
                 "ci_high": res["ci_high"], "n": int(res["n"]), "n_pos": int(np.nansum(a)),
                 "auroc_content": res["auroc_a"], "auroc_qrels": res["auroc_b"], "n_content": int(res["n_a"]),
                 "n_qrels": int(res["n_b"]),
                 "n_unlabelled": int((has_p & np.isnan(yc) & ~d.dropped(v, d.s.primary)).sum()),
                 "n_dropped": int((has_p & (d.dropped(v, d.s.primary) | d.dropped(v, QRELS))).sum()),
                 "n_no_p": int((~has_p).sum()), "n_resamples_used": int(res["n_resamples_used"])})
    return rows


def figure3(contexts, labels, reads, ctx) -> pd.DataFrame:
    """Figure 3 (§4.3 ``auroc_gap_qwen3_4b``, ``auroc_hybrid``): how well a reader's
    p(answerable) separates sufficient from insufficient contexts, under the qrels label ("all"
    vs "none") and each content label ("yes" vs "no").

    Per slice x reader x rung x ``restricted``:

    * ``measure == "auroc"``, one row per ``label`` (``qrels`` and each labeller): ``value`` =
      AUROC of p_answerable with positive = sufficient under the label, over the contexts with
      a p that the label keeps (``n``, ``n_pos``); ``n_dropped`` counts the contexts the label
      drops ("part" / "partial"), ``n_unlabelled`` those without a content label, ``n_no_p``
      those without a p (no read, or no status line). NaN AUROC when one class is absent.
    * ``measure == "gap"`` (``label`` = the primary labeller): content (primary) minus qrels
      AUROC, each over the contexts its own label keeps (``n_content``, ``n_qrels``), paired by
      resampling the contexts once for both (``paired_auroc_difference``; dialogue clusters
      when unit dialogue): the paper's "content (phi-4) minus qrels, paired over bootstrap
      resamples" (Qwen3-4B: +.10, +.13, +.14, +.19); ``auroc_content`` / ``auroc_qrels`` the two
      AUROCs.
    * ``restricted`` True: only the contexts both labels keep (the qrels label's all / none and
      the primary's yes / no; for another labeller's row, its own and the qrels label's): the
      paper's check that the gap comes from the label, not from which contexts are dropped
      (+.08 to +.16).
    """
    d = _Data(contexts, labels, reads, ctx, where="figure3", read_cols=("p_answerable",))
    rows = []
    for sl in d.slices():
        for reader in d.readers(sl):
            for rung in d.rungs(sl):
                v = d.view(sl, rung, reader)
                for restricted in (False, True):
                    rows.extend(_figure3_cell(d, sl, reader, rung, v, restricted))
    return _frame(rows, FIGURE3_COLUMNS)


def auroc_columns(contexts, labels, reads, ctx, reader: str, slice: str | None = None) -> pd.DataFrame:
    """Table 3's AUROC columns (``qwen3_4b_auroc_qrels`` / ``qwen3_4b_auroc_content``): per
    slice (only ``slice`` when given) x rung, the AUROC of ``reader``'s p(answerable) under
    the qrels label ("all" vs "none", over the contexts with a p it keeps) and under the primary
    content label ("yes" vs "no"), with n and n_pos of each and the contexts each drops; the
    unrestricted ``figure3`` rows without the bootstrap. No rows when the reader has no reads in
    a slice."""
    d = _Data(contexts, labels, reads, ctx, where="auroc_columns", read_cols=("p_answerable",))
    rows = []
    for sl in d.slices():
        if (slice is not None and sl != str(slice)) or str(reader) not in d.readers(sl):
            continue
        for rung in d.rungs(sl):
            v = d.view(sl, rung, str(reader))
            p = v["p"].to_numpy()
            has_p = ~np.isnan(p)
            yq, yc = d.suff(v, QRELS).to_numpy(), d.suff(v, d.s.primary).to_numpy()
            kq, kc = has_p & ~np.isnan(yq), has_p & ~np.isnan(yc)
            drop_c = has_p & d.dropped(v, d.s.primary)
            rows.append({"slice": sl, "rung": rung, "reader": str(reader),
                         "auroc_qrels": _auroc(yq[kq], p[kq]), "n_qrels": int(kq.sum()),
                         "n_pos_qrels": int(yq[kq].sum()), "auroc_content": _auroc(yc[kc], p[kc]),
                         "n_content": int(kc.sum()), "n_pos_content": int(yc[kc].sum()),
                         "n_unlabelled": int((has_p & np.isnan(yc) & ~drop_c).sum()),
                         "n_dropped_qrels": int((has_p & d.dropped(v, QRELS)).sum()),
                         "n_dropped_content": int(drop_c.sum()), "n_no_p": int((~has_p).sum())})
    return _frame(rows, AUROC_COLUMNS_COLUMNS)


# ---------------------------------------------------------------------------------------
# The 2b / 2c contrast: refusal with the gold documents vs with the rung's context
# ---------------------------------------------------------------------------------------


def _pooled_diff(a, b) -> float:
    return _nanmean(a) - _nanmean(b)


def contrast_2b_2c(contexts, labels, reads, ctx) -> pd.DataFrame:
    """§4.3 ``contrast_2b_2c`` (and Table 3's ``within_turn_contrast_hybrid``): the question
    behind RETECO's 2b/2c pairing, whether a reader refuses more when its retrieval failed
    (setting 2c, a retrieved context the label calls insufficient) than when it had the gold
    (setting 2b, set "gold"). If the label were right, the reader would refuse more after a
    miss; under the qrels label, false misses make the contrast shrink or turn negative.

    Per slice x reader x rung x ``label`` (``qrels``: turns whose rung context holds no gold,
    qrels "none"; the primary labeller: turns whose rung context it judges "no"; a context
    judged "partial", or unlabelled, is not a retrieval failure under the content label and
    drops, ``n_unlabelled``), over those ``n_turns`` turns:

    * ``refusal_rung``: refusal rate (UNANSWERABLE among responses with a status line) on
      those ``n_turns`` contexts (``n_rung`` such responses, ``n_no_status_rung`` without);
    * ``refusal_gold``: the refusal rate with the gold documents (setting 2b) over EVERY turn
      of the rung (``n_gold`` responses with a status line, ``n_no_status_gold`` without):
      "when it had the gold" is the 2b setting, not only the turns whose retrieval failed;
    * ``pooled_diff`` = refusal_rung - refusal_gold, each over its own parsed responses, with
      a bootstrap CI resampling the rung's turns (a turn's two settings together; dialogues
      when unit dialogue; ``bootstrap_statistic``; the paper: +.20 on Fusion, +.31 on the
      hybrid for Qwen3-4B under the content label);
    * ``within_diff``: refusal with the rung's context minus with the gold of the SAME turn,
      over the ``n_paired`` insufficient turns with a status line in both ("compared within
      turns"), paired bootstrap CI; ``n_paired`` is the count the paper gives as 17-30
      insufficient contexts per cell on Fusion and the hybrid, and 58 turns for MTRAG's hybrid
      (Table 3).

    The two differ as the paper's do: the pooled contrast compares the failed retrievals with
    the 2b setting as a whole, the within-turn one only with the gold of the turns that failed
    (where a reader may refuse with the gold too), on fewer contexts.
    """
    d = _Data(contexts, labels, reads, ctx, where="contrast_2b_2c", read_cols=("status",))
    rows = []
    for sl in d.slices():
        for reader in d.readers(sl):
            for rung in d.rungs(sl):
                v = d.view(sl, rung, reader)
                gold_all = d.read(sl, "gold", reader, v.index)  # setting 2b: every turn of the rung
                for label in (QRELS, d.s.primary):
                    y = d.suff(v, label)
                    miss = (y == 0.0).to_numpy()
                    t = v[miss]
                    g = d.read(sl, "gold", reader, t.index)
                    # pooled: the failed retrievals (NaN elsewhere) against the gold of every turn
                    a_all = np.where(miss, v["refused"].to_numpy(dtype=float), np.nan)
                    b_all = gold_all["refused"].to_numpy(dtype=float)
                    pooled = d.statistic([a_all, b_all], _pooled_diff, v["dialogue"].to_numpy())
                    a, b, dia = t["refused"].to_numpy(), g["refused"].to_numpy(), t["dialogue"].to_numpy()
                    both = ~np.isnan(a) & ~np.isnan(b)
                    within = d.paired_mean(a[both], b[both], dia[both])
                    rows.append({
                        "slice": sl, "reader": reader, "rung": rung, "label": label, "n_turns": int(len(t)),
                        "n_unlabelled": int(y.isna().sum()),
                        "refusal_rung": _nanmean(a), "n_rung": int((~np.isnan(a)).sum()),
                        "refusal_gold": _nanmean(b_all), "n_gold": int((~np.isnan(b_all)).sum()),
                        "pooled_diff": pooled["estimate"], "pooled_ci_low": pooled["ci_low"],
                        "pooled_ci_high": pooled["ci_high"],
                        "within_diff": within["mean_diff"], "within_ci_low": within["ci_low"],
                        "within_ci_high": within["ci_high"], "n_paired": int(within["n"]),
                        "n_no_status_rung": int((t["has_read"] & t["refused"].isna()).sum()),
                        "n_no_status_gold": int((gold_all["has_read"] & gold_all["refused"].isna()).sum()),
                    })
    return _frame(rows, CONTRAST_COLUMNS)


# ---------------------------------------------------------------------------------------
# Score-based insufficiency detectors vs the readers
# ---------------------------------------------------------------------------------------


def score_detectors(contexts, labels, reads, ctx) -> pd.DataFrame:
    """§4.3 ``score_detectors``: which signal best detects an INSUFFICIENT context, and does
    the answer depend on the label?

    Per slice x rung x ``label`` (``qrels``: insufficient = "none", sufficient = "all", "part"
    dropped; the primary labeller: insufficient = "no", sufficient = "yes", "partial" and
    unlabelled contexts dropped and counted in ``n_unlabelled``):

    * ``measure == "auroc"``: one row per detector, ``value`` = AUROC for insufficiency
      (positive = insufficient) over the contexts where the detector has a finite score.
      Retrieval detectors (``kind`` "retrieval"; a low score flags insufficiency): "top1"
      (score -top1), "margin" (-margin), "top1_z" (-top1_z). Readers (``kind`` "reader",
      ``detector`` = reader name): 1 - p_answerable. ``best`` marks the detector with the
      highest AUROC of the (slice, rung, label) (first in this order on a tie),
      ``best_reader`` the best reader.
    * ``measure == "top1_z_minus_reader"``: one row per reader (``detector``), ``value`` =
      AUROC(top1_z) - AUROC(reader) over the contexts where both scores are finite, with a
      paired bootstrap CI. ``paired_auroc_difference`` compares two labelings of one score;
      this is two SCORES on one labeling, so it is ``bootstrap_statistic`` over the rows
      [label, -top1_z, 1 - p] resampled together (one draw for both scores; dialogues when
      unit dialogue) with the rank AUROC. ``best_reader`` marks the row of the best reader
      (the paper's "top1_z minus the best reader"); the paper's sign change for a fixed
      reader (Qwen3-4B) is that reader's row.
    """
    d = _Data(contexts, labels, reads, ctx, where="score_detectors", context_cols=RETRIEVAL_DETECTORS,
              read_cols=("p_answerable",))
    rows = []
    for sl in d.slices():
        readers = d.readers(sl)
        for rung in d.rungs(sl):
            c = d.contexts(sl, rung)
            scores = {det: -c[det].to_numpy(dtype=float) for det in RETRIEVAL_DETECTORS}
            for reader in readers:
                scores[reader] = 1.0 - d.read(sl, rung, reader, c.index)["p"].to_numpy(dtype=float)
            kinds = {**{det: "retrieval" for det in RETRIEVAL_DETECTORS}, **{r: "reader" for r in readers}}
            for label in (QRELS, d.s.primary):
                y = 1.0 - d.suff(c, label).to_numpy()  # 1 = insufficient
                labelled = ~np.isnan(y)
                key = {"slice": sl, "rung": rung, "label": label}
                cell = []
                for det, s in scores.items():
                    keep = labelled & np.isfinite(s)
                    cell.append({**key, "measure": "auroc", "detector": det, "kind": kinds[det],
                                 "value": _auroc(y[keep], s[keep]), "ci_low": _NAN, "ci_high": _NAN,
                                 "n": int(keep.sum()), "n_pos": int(y[keep].sum()),
                                 "n_unlabelled": int((~labelled).sum())})
                vals = pd.Series([r["value"] for r in cell], dtype=float)
                best = int(vals.idxmax()) if vals.notna().any() else None
                rvals = pd.Series([r["value"] if r["kind"] == "reader" else np.nan for r in cell], dtype=float)
                best_reader = cell[int(rvals.idxmax())]["detector"] if rvals.notna().any() else None
                for i, r in enumerate(cell):
                    r["best"] = i == best
                    r["best_reader"] = r["detector"] == best_reader
                rows.extend(cell)
                for reader in readers:
                    sz, sr = scores["top1_z"], scores[reader]
                    keep = labelled & np.isfinite(sz) & np.isfinite(sr)
                    yk = y[keep].astype(int)
                    res = d.statistic([yk, sr[keep], sz[keep]], _auroc_diff_two_scores, c["dialogue"].to_numpy()[keep])
                    rows.append({**key, "measure": "top1_z_minus_reader", "detector": reader, "kind": "reader",
                                 "value": res["estimate"], "ci_low": res["ci_low"], "ci_high": res["ci_high"],
                                 "n": int(res["n"]), "n_pos": int(yk.sum()), "best": False,
                                 "best_reader": reader == best_reader, "n_unlabelled": int((~labelled).sum()),
                                 "n_resamples_used": int(res["n_resamples_used"])})
    return _frame(rows, SCORE_COLUMNS)


# ---------------------------------------------------------------------------------------
# Kitagawa: composition and rate effects of a refusal-rate change along the ladder
# ---------------------------------------------------------------------------------------


def kitagawa_table(contexts, labels, reads, ctx) -> pd.DataFrame:
    """§4.3: a reader refuses less with a stronger retriever; how much because the stronger
    retriever returns more sufficient contexts (composition) and how much because the reader
    refuses differently within sufficient / insufficient contexts (rate)?

    Per slice x reader x rung pair (``from_rung`` = the first rung of the ladder,
    ``to_rung`` = each later rung): ``kitagawa_from_data`` with outcome refused (status
    UNANSWERABLE, responses with a status line only; ``n_no_status_*`` the others) and
    strata sufficient ("yes") / insufficient ("no") under the primary label (contexts with a
    status line but no primary label, or judged "partial", are dropped and counted in
    ``n_unlabelled_*``: the paper's binary convention); population a =
    ``to_rung``, b = ``from_rung``, so ``total`` = refusal_to - refusal_from =
    ``composition`` + ``rate`` exactly. Each rung's population is all its parsed, labelled
    contexts (not paired by turn). Shares and rates per stratum are
    given (a rate is NaN where its stratum is empty); a rung with no such context gives NaN.
    """
    d = _Data(contexts, labels, reads, ctx, where="kitagawa_table", read_cols=("status",))
    rows = []
    for sl in d.slices():
        rungs = d.rungs(sl)
        for reader in d.readers(sl):
            pops = {}
            for rung in rungs:
                v = d.view(sl, rung, reader)
                suff = d.suff(v, d.s.primary).to_numpy()
                ref = v["refused"].to_numpy()
                keep = ~np.isnan(suff) & ~np.isnan(ref)
                pops[rung] = {"y": ref[keep], "strata": np.where(suff[keep] == 1.0, "sufficient", "insufficient"),
                              "n_no_status": int((v["has_read"] & v["refused"].isna()).sum()),
                              "n_unlabelled": int((np.isnan(suff) & ~np.isnan(ref)).sum())}
            for to in rungs[1:]:
                a, b = pops[to], pops[rungs[0]]
                row = {"slice": sl, "reader": reader, "from_rung": rungs[0], "to_rung": to,
                       "n_from": int(b["y"].size), "n_to": int(a["y"].size),
                       "n_no_status_from": b["n_no_status"], "n_no_status_to": a["n_no_status"],
                       "n_unlabelled_from": b["n_unlabelled"], "n_unlabelled_to": a["n_unlabelled"]}
                if a["y"].size and b["y"].size:
                    k = kitagawa_from_data(a["y"], a["strata"], b["y"], b["strata"])
                    by = k["by_stratum"].set_index("stratum")

                    def get(col, stratum, by=by):
                        return float(by.loc[stratum, col]) if stratum in by.index else _NAN

                    row.update({
                        "total": k["total"], "composition": k["composition_effect"], "rate": k["rate_effect"],
                        "refusal_from": k["rate_b"], "refusal_to": k["rate_a"],
                        "share_sufficient_from": float(np.mean(b["strata"] == "sufficient")),
                        "share_sufficient_to": float(np.mean(a["strata"] == "sufficient")),
                        "refusal_sufficient_from": get("rate_b", "sufficient"),
                        "refusal_sufficient_to": get("rate_a", "sufficient"),
                        "refusal_insufficient_from": get("rate_b", "insufficient"),
                        "refusal_insufficient_to": get("rate_a", "insufficient"),
                    })
                rows.append(row)
    return _frame(rows, KITAGAWA_COLUMNS)


# ---------------------------------------------------------------------------------------
# Changed conclusions: comparisons whose sign or significance depends on the label
# ---------------------------------------------------------------------------------------


def _auroc_diff_two_rungs(y1, s1, y2, s2) -> float:
    return _auroc_ranks(y2, s2) - _auroc_ranks(y1, s1)


def _excludes_zero(lo, hi) -> bool:
    return bool(np.isfinite(lo) and np.isfinite(hi) and (lo > 0 or hi < 0))


def changed_summary(df: pd.DataFrame) -> dict:
    """Counts of a changed-conclusions frame (``followups.changed_all``; the paper's "75 of 258
    change, 13 by sign"):
    total (defined comparisons), changed (sign or significance), by_sign, by_significance
    (significance changes), undefined (comparisons with a NaN estimate, not in total)."""
    df = _require(df, ["defined", "sign_change", "significance_change", "changed"], "df", "changed_summary")
    ok = df[df["defined"].astype(bool)]
    return {"total": int(len(ok)), "changed": int(ok["changed"].astype(bool).sum()),
            "by_sign": int(ok["sign_change"].astype(bool).sum()),
            "by_significance": int(ok["significance_change"].astype(bool).sum()),
            "undefined": int(len(df) - len(ok))}
