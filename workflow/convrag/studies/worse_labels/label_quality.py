"""worse_labels: how good is the qrels label "no gold in the top k"? (Figure 2, Tables 1 and 3,
and the numbers of sections 4.1-4.2.)

Inputs (the pipeline's contract; every function takes ``(contexts, labels, ctx, reads=None)``
and returns a tidy DataFrame; ``reads`` is accepted for a uniform signature and unused here):

* ``contexts``: one row per (slice, task_id, set): ``set`` is a ladder rung, ``gold``, ``none``
  or ``control``; ``no_gold`` is the qrels label "none" (what the protocol calls insufficient);
  ``has_copy``, ``doc_classes`` (aligned with ``doc_ids``), ``ndcg10`` (per turn, rungs only),
  ``domain``, ``dialogue``.
* ``labels``: long, one row per (slice, task_id, set, labeller): ``label`` yes / partial / no,
  or None for an unparsable judge output; ``support`` (1-based positions in ``doc_ids``, in the
  order the labeller names them).
* ``ctx``: ``ladder`` (ordered rungs; a list, or a dict slice -> list), ``primary``,
  ``labellers``, ``content_judges``, ``panel_members``, ``audit``, ``main_slice``,
  ``replication_slice``, ``boot`` {n_resamples, seed, unit: turn | dialogue}.

The paper's definitions (§3 and §4.1 of the text; every function follows them, the other
conventions the paper reports are columns of their own, named for what they count):

* **Binary metrics drop "partial"** (§3: binary metrics compare yes with no; Table 1: "no;
  partial excluded"): the precision of "no gold" (the share of the no-gold contexts judged
  "no", among those judged "yes" or "no"), recall, specificity, Youden's J and their changes
  between rungs (``convrag.stats.detection`` with ``partial="drop"``). Worked: no-gold
  contexts judged yes .28 / partial .11 / no .61 give a precision of .61 / .89 = .68.
* **Shares keep every parsable label**: the false-miss share is the share of the no-gold
  contexts the labeller judges "yes" (§4.1: the share of none contexts a judge finds
  sufficient; .28 in the example); Figure 2a's insufficiency share is the share judged "no"
  (its caption: partial counted as sufficient), and its ratio is the no-gold share over it.
* **The paper's second setting**, partial counted as insufficient (§4.1's last sentences),
  beside them: ``precision_partial_insufficient`` = (no + partial) / no-gold (.72 in the
  example), ``false_miss_share_with_partial`` = (yes + partial) / no-gold (.39: "now including
  partial") and ``ratio_partial_insufficient``. ``precision_partial_sufficient`` = no / no-gold
  is the convention this project used before (partial counted as sufficient), kept as a named
  column; no published number uses it.

Other conventions (the same in every function):

* A labeller's sample of a context set is the contexts that have a label row of that labeller
  (the audit labels only the audited contexts, so its sample is the audited ones); ``n`` counts
  the parsable labels, ``n_unlabelled`` the unparsable ones (label None), which are dropped
  (Table 1: unparsable outputs are dropped from precision). The negative control's shares are
  the exception: over every control context asked, unparsable ones included (Table 1's caption:
  control shares are over all 858 contexts).
* Statistics are ``convrag.stats``' (``detector_report``, ``paired_detector_change``,
  ``cohen_kappa``, ``fleiss_kappa``, ``gwet_ac1``, ``raw_agreement``, ``bootstrap_ci``,
  ``cluster_bootstrap_ci``, ``bootstrap_statistic``): percentile intervals with
  ``boot.n_resamples`` resamples and ``boot.seed``; ``boot.unit == "dialogue"`` resamples whole
  dialogues (clusters = the ``dialogue`` column; if one dialogue id occurs in two domains of a
  slice, domain + dialogue).
* Rungs: the slice's ladder (``ctx.ladder[slice]`` when ``ladder`` is a dict, else
  ``ctx.ladder``) restricted to the rungs the slice has; a slice with none of them (e.g. the
  MTRAG replication under a RECOR ladder) uses its own retrieval sets ordered by macro nDCG@10
  (the paper orders Table 3's retrievers by nDCG).
* Labellers: ``ctx.labellers`` first, then any other labeller present in ``labels`` (sorted);
  ``audit`` is dropped when ``ctx.audit`` is False. A labeller with no label in a group gives no
  row there.
* nDCG@10 is macro: the mean over domains of the per-turn mean (over all the rung's contexts of
  the slice, whatever the labeller). The share of contexts without gold is over all the rung's
  contexts too: the qrels label needs no judge.
"""

from __future__ import annotations

from itertools import combinations
from typing import Callable

import numpy as np
import pandas as pd

from convrag.errors import ConfigError, DataError
from convrag.stats.agreement import cohen_kappa, fleiss_kappa, gwet_ac1, raw_agreement
from convrag.stats.bootstrap import bootstrap_ci, cluster_bootstrap_ci
from convrag.stats.detection import (
    detector_metrics,
    detector_report,
    insufficient_from_labels,
    paired_detector_change,
)

__all__ = [
    "AGREEMENT_COLUMNS",
    "COPIES_COLUMNS",
    "EVIDENCE_COLUMNS",
    "FIGURE2A_COLUMNS",
    "FIGURE2B_COLUMNS",
    "NEGATIVE_CONTROL_COLUMNS",
    "TABLE3_COLUMNS",
    "TARGETS",
    "agreement",
    "copies",
    "evidence",
    "figure2a",
    "figure2b",
    "negative_control",
    "table1",
    "best_class",
    "table1_columns",
    "table3",
]

CONTENT_LABELS = ("yes", "partial", "no")
EXTRA_SETS = ("gold", "none", "control")
EVIDENCE_CLASSES = ("same_thread", "near_duplicate", "other_turn_gold", "other_chunk", "other")
DOC_CLASSES = ("gold", *EVIDENCE_CLASSES)
_NAN = float("nan")

FIGURE2A_COLUMNS = ["slice", "rung", "labeller", "ndcg10", "share_no_gold", "share_insufficient", "share_partial",
                    "ratio", "n", "n_unlabelled", "n_contexts", "n_insufficient", "ratio_partial_insufficient"]
FIGURE2B_COLUMNS = ["slice", "rung", "labeller", "precision", "precision_ci_low", "precision_ci_high",
                    "youden_j", "youden_j_ci_low", "youden_j_ci_high", "recall", "specificity",
                    "false_miss_share", "false_miss_ci_low", "false_miss_ci_high", "partial_share_no_gold",
                    "precision_partial_insufficient", "precision_partial_insufficient_ci_low",
                    "precision_partial_insufficient_ci_high", "false_miss_share_with_partial",
                    "false_miss_with_partial_ci_low", "false_miss_with_partial_ci_high", "precision_partial_sufficient",
                    "n_no_gold", "n_no_gold_binary", "n_binary", "n_partial", "n", "n_unlabelled", "unit"]
COPIES_COLUMNS = ["slice", "rung", "share_copy", "ci_low", "ci_high", "n_copy", "n_no_gold", "n_contexts",
                  "ratio_to_first", "ratio_ci_low", "ratio_ci_high", "first_rung", "unit"]
NEGATIVE_CONTROL_COLUMNS = ["slice", "labeller", "control_yes_share", "control_partial_share", "control_no_share",
                            "n_control", "n_control_unlabelled", "rung", "false_miss_share",
                            "corrected_false_miss_share", "corrected_false_miss_share_rescaled"]
AGREEMENT_COLUMNS = ["slice", "measure", "labeller_a", "labeller_b", "value", "n", "ci_low", "ci_high"]
EVIDENCE_COLUMNS = ["slice", "rung", "labeller", "n_false_miss",
                    *[f"share_{c}" for c in (*EVIDENCE_CLASSES, "unstated")],
                    *[f"n_{c}" for c in (*EVIDENCE_CLASSES, "unstated")],
                    "share_tied", "n_world", "share_world_sufficient", "n_false_miss_stackexchange",
                    "share_same_thread_stackexchange", "n_copy_docs", "n_copy_docs_named", "share_copy_docs_named",
                    "copy_docs_named_ci_low", "copy_docs_named_ci_high"]
TABLE3_COLUMNS = ["slice", "rung", "labeller", "ndcg10", "share_no_gold", "share_content_no", "false_miss_share",
                  "precision", "precision_ci_low", "precision_ci_high", "n", "n_unlabelled"]
DIALOGUE_TIED = ("same_thread", "near_duplicate", "other_turn_gold", "other_chunk")


# ---- inputs ------------------------------------------------------------------------------------

def _require(df: pd.DataFrame, cols, frame: str, where: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise DataError(f"worse_labels.{where}: the {frame} table lacks the column(s) {', '.join(missing)} "
                        f"(has {', '.join(map(str, df.columns))})")


def _is_missing(x) -> bool:
    if x is None:
        return True
    if isinstance(x, (str, bytes, list, tuple, np.ndarray)):
        return False
    return bool(pd.isna(x))


def _bool_col(df: pd.DataFrame, col: str, where: str) -> pd.Series:
    s = df[col]
    bad = s.map(lambda v: _is_missing(v) or v not in (True, False, 0, 1))
    if bad.any():
        i = bad.to_numpy().nonzero()[0][0]
        r = df.iloc[i]
        raise DataError(f"worse_labels.{where}: contexts column {col} must be boolean; context "
                        f"{r['slice']}|{r['set']}|{r['task_id']} has {s.iloc[i]!r}")
    return s.astype(bool)


def _contexts(contexts: pd.DataFrame, cols, where: str) -> pd.DataFrame:
    """Checked copy with str keys (slice, set, _tid) and boolean no_gold / has_copy."""
    need = ["slice", "task_id", "set", *cols]
    _require(contexts, need, "contexts", where)
    c = contexts.copy()
    c["slice"] = c["slice"].astype(str)
    c["set"] = c["set"].astype(str)
    c["_tid"] = c["task_id"].astype(str)
    dup = c.duplicated(["slice", "_tid", "set"])
    if dup.any():
        r = c[dup].iloc[0]
        raise DataError(f"worse_labels.{where}: contexts has two rows for slice {r['slice']}, set {r['set']}, "
                        f"task_id {r['task_id']}; need one per (slice, task_id, set)")
    for col in ("no_gold", "has_copy"):
        if col in cols:
            c[col] = _bool_col(c, col, where)
    return c.reset_index(drop=True)


def _norm_label(x, where: str, r) -> str | None:
    if _is_missing(x):
        return None
    key = str(x).strip().lower()
    if key not in CONTENT_LABELS:
        raise DataError(f"worse_labels.{where}: labels row slice {r['slice']}, set {r['set']}, task_id "
                        f"{r['task_id']}, labeller {r['labeller']}: label {x!r} is not one of {CONTENT_LABELS}")
    return key


def _labels(labels: pd.DataFrame, ctx: dict, where: str, support: bool = False) -> pd.DataFrame:
    need = ["slice", "task_id", "set", "labeller", "label", *(["support"] if support else [])]
    _require(labels, need, "labels", where)
    lab = labels.copy()
    lab["slice"] = lab["slice"].astype(str)
    lab["set"] = lab["set"].astype(str)
    lab["labeller"] = lab["labeller"].astype(str)
    lab["_tid"] = lab["task_id"].astype(str)
    raw = lab["label"].astype(object)
    miss = raw.map(_is_missing).to_numpy(bool)
    norm = raw.where(miss, raw.astype(str).str.strip().str.lower())
    bad = ~miss & ~norm.isin(CONTENT_LABELS).to_numpy(bool)
    if bad.any():
        r = lab[bad].iloc[0]
        _norm_label(r["label"], where, r)  # raises, naming the row
    lab["label"] = pd.Series([None if m else v for m, v in zip(miss, norm)], index=lab.index, dtype=object)
    dup = lab.duplicated(["slice", "_tid", "set", "labeller"])
    if dup.any():
        r = lab[dup].iloc[0]
        raise DataError(f"worse_labels.{where}: labels has two rows for slice {r['slice']}, set {r['set']}, "
                        f"task_id {r['task_id']}, labeller {r['labeller']}")
    if not ctx.get("audit", True):
        lab = lab[lab["labeller"] != "audit"]
    return lab.reset_index(drop=True)


def _join(c: pd.DataFrame, lab: pd.DataFrame) -> pd.DataFrame:
    """Contexts x labels (inner): one row per labelled context and labeller."""
    cols = [x for x in lab.columns if x not in ("slice", "_tid", "set", "task_id")]
    return c.merge(lab[["slice", "_tid", "set", *cols]], on=["slice", "_tid", "set"], how="inner")


def _empty(columns) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


def _is_empty(*frames) -> bool:
    return any(f is None or len(f) == 0 for f in frames)


def _boot(ctx: dict) -> dict:
    b = dict(ctx.get("boot") or {})
    unit = b.get("unit", "turn")
    if unit not in ("turn", "dialogue"):
        raise ConfigError(f"worse_labels: ctx boot.unit must be 'turn' or 'dialogue', got {unit!r}")
    return {"n_resamples": int(b.get("n_resamples", 1000)), "seed": int(b.get("seed", 0)), "unit": unit}


def _key(ctx: dict, name: str, where: str):
    if ctx.get(name) in (None, ""):
        raise ConfigError(f"worse_labels.{where}: ctx has no {name!r}")
    return ctx[name]


def _clusters(df: pd.DataFrame, boot: dict, where: str):
    """Dialogue labels for a cluster bootstrap, or None for the turn unit."""
    if boot["unit"] != "dialogue":
        return None
    _require(df, ["dialogue"], "contexts", where)
    d = df["dialogue"].astype(str)
    if "domain" in df.columns and len(df) and df.groupby(d)["domain"].nunique().max() > 1:
        d = df["domain"].astype(str) + "/" + d  # one id in two domains: two dialogues
    return d.tolist()


def _labellers(lab: pd.DataFrame, ctx: dict) -> list[str]:
    present = set(lab["labeller"])
    listed = [str(x) for x in (ctx.get("labellers") or [])]
    return [x for x in listed if x in present] + sorted(present - set(listed))


def _macro_ndcg(rc: pd.DataFrame) -> float:
    if "ndcg10" not in rc.columns or rc.empty:
        return _NAN
    v = pd.to_numeric(rc["ndcg10"], errors="coerce")
    dom = rc["domain"].astype(str) if "domain" in rc.columns else pd.Series("", index=rc.index)
    per = v.groupby(dom).mean().dropna()
    return float(per.mean()) if len(per) else _NAN


def _ladder(c: pd.DataFrame, ctx: dict, slice_: str) -> list[str]:
    """The slice's rungs, in ladder order (see the module docstring)."""
    cs = c[c["slice"] == slice_]
    present = set(cs["set"]) - set(EXTRA_SETS)
    lad = ctx.get("ladder") or []
    if isinstance(lad, dict):
        lad = lad.get(slice_) or []
    rungs = [str(r) for r in lad if str(r) in present]
    if rungs:
        return rungs
    return sorted(present, key=lambda r: (np.nan_to_num(_macro_ndcg(cs[cs["set"] == r]), nan=np.inf), r))


def _slices(c: pd.DataFrame) -> list[str]:
    return sorted(set(c["slice"]))


# ---- shared computations ------------------------------------------------------------------------

def _parsed(g: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(no_gold, label) of g's rows with a parsable label."""
    keep = g["label"].notna().to_numpy()
    return g["no_gold"].to_numpy(bool)[keep], g["label"].to_numpy(object)[keep]


def _label_shares(labels: np.ndarray, mask: np.ndarray | None = None) -> dict:
    lab = labels if mask is None else labels[mask]
    n = lab.size
    return {k: (float(np.count_nonzero(lab == k)) / n if n else _NAN) for k in CONTENT_LABELS}


_PAPER = ("precision", "youden_j", "recall", "specificity")


def _report(g: pd.DataFrame, ctx: dict, boot: dict, where: str) -> dict:
    """Every figure2b quantity of one group of labelled contexts (the module doc's definitions):
    the binary metrics with "partial" dropped, the false-miss share over every parsable no-gold
    label, the second setting (partial insufficient) and the earlier convention (partial
    sufficient); all with the same resamples (one seed). NaN where a quantity has no
    denominator."""
    ng, labs = _parsed(g)
    binary = labs != "partial"
    out = {"n": int(ng.size), "n_unlabelled": int(len(g) - ng.size), "n_no_gold": int(ng.sum()),
           "n_binary": int(binary.sum()), "n_no_gold_binary": int((ng & binary).sum()),
           "n_partial": int((~binary).sum()),
           "partial_share_no_gold": _label_shares(labs, ng)["partial"],
           "share_content_no": _label_shares(labs)["no"]}
    nan3 = {f"{m}{x}": _NAN for m in (*_PAPER, "false_miss_share", "precision_partial_insufficient",
                                        "false_miss_share_with_partial", "precision_partial_sufficient")
            for x in ("", "_ci_low", "_ci_high")}
    out.update(nan3)
    if ng.size == 0:
        return out
    cl = _clusters(g[g["label"].notna().to_numpy()], boot, where)
    kw = dict(clusters=cl, n_resamples=boot["n_resamples"], seed=boot["seed"])
    if binary.any():
        rep = detector_report(ng, labs.tolist(), partial="drop", metrics=["precision", "youden_j"], **kw)
        for m in ("precision", "youden_j"):
            out[m], out[f"{m}_ci_low"], out[f"{m}_ci_high"] = rep[m]["estimate"], rep[m]["ci_low"], rep[m]["ci_high"]
        point = detector_metrics(ng[binary], insufficient_from_labels(labs[binary].tolist()).astype(bool))
        out["recall"], out["specificity"] = point["recall"], point["specificity"]
    ins = detector_report(ng, labs.tolist(), partial="insufficient", metrics=["precision", "false_miss_share"], **kw)
    suf = detector_report(ng, labs.tolist(), partial="sufficient", metrics=["precision", "false_miss_share"], **kw)
    for name, rep, m in (("false_miss_share", ins, "false_miss_share"),
                         ("precision_partial_insufficient", ins, "precision"),
                         ("false_miss_share_with_partial", suf, "false_miss_share"),
                         ("precision_partial_sufficient", suf, "precision")):
        out[name], out[f"{name}_ci_low"], out[f"{name}_ci_high"] = (rep[m]["estimate"], rep[m]["ci_low"],
                                                                    rep[m]["ci_high"])
    return out


def _groups(j: pd.DataFrame, slice_: str, rung: str, labellers: list[str]):
    g = j[(j["slice"] == slice_) & (j["set"] == rung)]
    for lab in labellers:
        gl = g[g["labeller"] == lab]
        if len(gl):
            yield lab, gl


def _share_no_gold(rc: pd.DataFrame) -> float:
    """The qrels label's share of contexts without gold, over all the rung's contexts."""
    return float(rc["no_gold"].mean()) if len(rc) else _NAN


# ---- Figure 2a ----------------------------------------------------------------------------------

def figure2a(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Figure 2a / section 4.1 "insufficiency_share": per slice x rung x labeller, the share of
    the rung's contexts without gold (``share_no_gold``, the qrels label, over all its
    contexts: 71.6% on BM25-turn, 18.4% on the hybrid) against the share the labeller judges
    "no" (``share_insufficient``, over its parsable labels: "partial" counts as sufficient, as
    Figure 2's caption says; phi-4: 45.0% and 4.9%), their ``ratio`` (no gold / insufficient:
    1.6 and 3.8) and the rung's macro nDCG@10 (the x axis). ``share_partial`` is the share
    judged "partial"; ``n_insufficient`` counts the contexts judged "no" (§4.1's none counts:
    386, 157, 68 and 42). ``ratio_partial_insufficient``: the ratio with "partial" counted
    insufficient (§4.1's second setting: 1.07-1.30 under phi-4, below 1 under Qwen3-14B on the
    three stronger retrievers)."""
    if _is_empty(contexts, labels):
        return _empty(FIGURE2A_COLUMNS)
    where = "figure2a"
    c = _contexts(contexts, ["no_gold"], where)
    lab = _labels(labels, ctx, where)
    j, labellers = _join(c, lab), _labellers(lab, ctx)
    rows = []
    for s in _slices(c):
        for rung in _ladder(c, ctx, s):
            rc = c[(c["slice"] == s) & (c["set"] == rung)]
            nd, sng = _macro_ndcg(rc), _share_no_gold(rc)
            for who, g in _groups(j, s, rung, labellers):
                _, labs = _parsed(g)
                sh = _label_shares(labs)
                no_p = sh["no"] + sh["partial"] if labs.size else _NAN
                rows.append({"slice": s, "rung": rung, "labeller": who, "ndcg10": nd, "share_no_gold": sng,
                             "share_insufficient": sh["no"], "share_partial": sh["partial"],
                             "ratio": sng / sh["no"] if labs.size and sh["no"] else _NAN,
                             "n": int(labs.size), "n_unlabelled": int(len(g) - labs.size), "n_contexts": int(len(rc)),
                             "n_insufficient": int(np.count_nonzero(labs == "no")),
                             "ratio_partial_insufficient": sng / no_p if labs.size and no_p else _NAN})
    return pd.DataFrame(rows, columns=FIGURE2A_COLUMNS) if rows else _empty(FIGURE2A_COLUMNS)


# ---- Figure 2b ----------------------------------------------------------------------------------

def figure2b(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Figure 2b / section 4.1 ("precision_no_gold_*", "false_miss_share", "youden_j"): per slice
    x rung x labeller, with the module doc's definitions:

    * ``precision`` of "no gold" as a detector of insufficiency, "partial" dropped (phi-4: .68
      [.65, .72] on BM25-turn -> .10 [.05, .16] on the hybrid), ``youden_j`` (.52 -> .15),
      ``recall``, ``specificity``, over the ``n_binary`` contexts judged yes or no
      (``n_no_gold_binary`` of them without gold);
    * ``false_miss_share``: the share of the ``n_no_gold`` labelled no-gold contexts judged
      "yes" (28%, 45%, 68%, 72%), ``partial_share_no_gold`` those judged "partial";
    * the second setting, partial counted insufficient: ``precision_partial_insufficient``
      (.72 -> .28) and ``false_miss_share_with_partial`` (.39 -> .92); and
      ``precision_partial_sufficient`` (the project's earlier convention, no interval).

    Intervals from ``detector_report`` (one seed: the same resamples for every quantity; whole
    dialogues when ``boot.unit == "dialogue"``)."""
    if _is_empty(contexts, labels):
        return _empty(FIGURE2B_COLUMNS)
    where = "figure2b"
    c = _contexts(contexts, ["no_gold"], where)
    lab = _labels(labels, ctx, where)
    boot = _boot(ctx)
    j, labellers = _join(c, lab), _labellers(lab, ctx)
    rows = []
    for s in _slices(c):
        for rung in _ladder(c, ctx, s):
            for who, g in _groups(j, s, rung, labellers):
                r = _report(g, ctx, boot, where)
                rows.append({"slice": s, "rung": rung, "labeller": who, "unit": boot["unit"],
                             **{k: r[k] for k in FIGURE2B_COLUMNS if k in r},
                             "false_miss_ci_low": r["false_miss_share_ci_low"],
                             "false_miss_ci_high": r["false_miss_share_ci_high"],
                             "false_miss_with_partial_ci_low": r["false_miss_share_with_partial_ci_low"],
                             "false_miss_with_partial_ci_high": r["false_miss_share_with_partial_ci_high"]})
    return pd.DataFrame(rows, columns=FIGURE2B_COLUMNS) if rows else _empty(FIGURE2B_COLUMNS)


# ---- Table 1 ------------------------------------------------------------------------------------

def table1_columns(rungs) -> list[str]:
    """Table 1's columns for a ladder (precision and its CI per rung come first)."""
    per = [x for r in rungs for x in (f"precision_{r}", f"precision_{r}_ci_low", f"precision_{r}_ci_high",
                                      f"n_no_gold_{r}")]
    return ["slice", "labeller", *per, "first_rung", "last_rung", "change", "change_ci_low", "change_ci_high",
            "change_n", "youden_change", "youden_change_ci_low", "youden_change_ci_high", "kappa_audit", "n_audit",
            "control_yes_share", "control_yes_ci_low", "control_yes_ci_high", "n_control_yes", "n_control_yes_ci_low",
            "n_control_yes_ci_high", "n_control", "n_unparsable", "n_unparsable_max_set"]


def _paired(ga: pd.DataFrame, gb: pd.DataFrame, metric: str, ctx: dict, boot: dict, where: str) -> dict:
    """paired_detector_change b - a ("partial" dropped at each rung) over the turns (task_id)
    both groups hold; NaN if none."""
    a, b = ga.set_index("_tid"), gb.set_index("_tid")
    common = a.index.intersection(b.index)
    nan = {"estimate": _NAN, "ci_low": _NAN, "ci_high": _NAN, "n": 0}
    if common.empty:
        return nan
    a, b = a.loc[common], b.loc[common]
    try:
        return paired_detector_change(a["no_gold"].to_numpy(bool), a["label"].tolist(), b["no_gold"].to_numpy(bool),
                                      b["label"].tolist(), metric=metric, partial="drop",
                                      clusters=_clusters(a, boot, where), n_resamples=boot["n_resamples"],
                                      seed=boot["seed"])
    except DataError:  # no turn labelled under both rungs
        return nan


def _unpaired(ga: pd.DataFrame, gb: pd.DataFrame, metric: str, ctx: dict, boot: dict, where: str) -> dict:
    """The change b - a of a detector metric ("partial" dropped) between two samples that share
    few turns (the audit draws its contexts of each rung apart: 50 without gold from each): each
    rung's metric over its own contexts, the interval from resampling the two samples' contexts
    together (whole dialogues when ``boot.unit`` is dialogue). ``n``: the contexts."""
    from convrag.stats.bootstrap import bootstrap_statistic
    from convrag.stats.detection import DETECTOR_METRICS

    parts = [g[g["label"].isin(["yes", "no"]).to_numpy()] for g in (ga, gb)]
    both = pd.concat(parts, ignore_index=True)
    nan = {"estimate": _NAN, "ci_low": _NAN, "ci_high": _NAN, "n": 0}
    if any(x.empty for x in parts):
        return nan
    f = DETECTOR_METRICS[metric]
    ng, ins = both["no_gold"].to_numpy(bool), (both["label"] == "no").to_numpy()
    second = np.r_[np.zeros(len(parts[0]), dtype=bool), np.ones(len(parts[1]), dtype=bool)]

    def diff(n_, i_, b_):
        return f(n_[b_], i_[b_]) - f(n_[~b_], i_[~b_])
    return bootstrap_statistic([ng, ins, second], diff, n_resamples=boot["n_resamples"], seed=boot["seed"],
                               clusters=_clusters(both, boot, where))


def _control_yes(ctl: pd.DataFrame, boot: dict, where: str) -> tuple[float, float, float, int]:
    """(share, ci_low, ci_high, n) of "yes" over every control context asked (an unparsable
    label counts in the denominator: Table 1's control shares are over all 858 contexts)."""
    if ctl.empty:
        return _NAN, _NAN, _NAN, 0
    x = (ctl["label"] == "yes").to_numpy(float)
    cl = _clusters(ctl, boot, where)
    res = (bootstrap_ci(x, n_resamples=boot["n_resamples"], seed=boot["seed"]) if cl is None else
           cluster_bootstrap_ci(x, cl, n_resamples=boot["n_resamples"], seed=boot["seed"]))
    return res["mean"], res["ci_low"], res["ci_high"], int(x.size)


def table1(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Table 1 (main slice): per labeller, the precision of "no gold" ("partial" dropped, as
    ``figure2b``) at each rung with its CI and ``n_no_gold_<rung>`` (the no-gold contexts judged
    yes or no), its change first -> last rung (the paper: BM25-turn -> hybrid) as
    ``paired_detector_change`` (last - first) over the turns labelled under both rungs, aligned
    by task_id, and the same for Youden's J (-0.37 [-0.51, -0.22]); for the audit, whose samples
    of the two rungs share few turns, the difference of the two rungs' values with an interval
    from resampling both samples' contexts (``change_n``: its contexts); Cohen's kappa (three
    labels) with the audit over the rung contexts both labelled (NaN for the audit itself,
    without an audit, or with no common context); the negative control's "yes" share over every
    control context asked (Table 1's caption: over all 858 contexts; phi-4 35 = 4.1%, Qwen3-14B
    none, the small judges 6.8-30.7%) with its interval, and the count ``n_control_yes``; and the
    unparsable labels (label None) over all the slice's context sets: the total and the most in
    one set (the paper: at most 27 of 858)."""
    lad_ctx = ctx.get("ladder") or []
    main = ctx.get("main_slice")
    if _is_empty(contexts, labels):
        rungs = lad_ctx.get(main, []) if isinstance(lad_ctx, dict) else lad_ctx
        return _empty(table1_columns(rungs))
    where = "table1"
    main = str(_key(ctx, "main_slice", where))
    c = _contexts(contexts, ["no_gold"], where)
    lab = _labels(labels, ctx, where)
    boot = _boot(ctx)
    rungs = _ladder(c, ctx, main)
    cols = table1_columns(rungs)
    j = _join(c, lab)
    j = j[j["slice"] == main]
    if j.empty:
        return _empty(cols)
    rows = []
    ladder_rows = j[j["set"].isin(rungs)]
    audit = ladder_rows[ladder_rows["labeller"] == "audit"].set_index(["set", "_tid"])["label"]
    for who in _labellers(j, ctx):
        jl = j[j["labeller"] == who]
        row = {"slice": main, "labeller": who}
        for rung in rungs:
            g = jl[jl["set"] == rung]
            r = _report(g, ctx, boot, where) if len(g) else {}
            row[f"precision_{rung}"] = r.get("precision", _NAN)
            row[f"precision_{rung}_ci_low"] = r.get("precision_ci_low", _NAN)
            row[f"precision_{rung}_ci_high"] = r.get("precision_ci_high", _NAN)
            row[f"n_no_gold_{rung}"] = r.get("n_no_gold_binary", 0)
        if len(rungs) >= 2:
            ga, gb = jl[jl["set"] == rungs[0]], jl[jl["set"] == rungs[-1]]
            change = _unpaired if who == "audit" else _paired  # the audit's two samples share few turns
            ch = change(ga, gb, "precision", ctx, boot, where)
            yj = change(ga, gb, "youden_j", ctx, boot, where)
            row.update(first_rung=rungs[0], last_rung=rungs[-1], change=ch["estimate"], change_ci_low=ch["ci_low"],
                       change_ci_high=ch["ci_high"], change_n=int(ch["n"]), youden_change=yj["estimate"],
                       youden_change_ci_low=yj["ci_low"], youden_change_ci_high=yj["ci_high"])
        else:
            row.update(first_rung=rungs[0] if rungs else None, last_rung=rungs[-1] if rungs else None, change=_NAN,
                       change_ci_low=_NAN, change_ci_high=_NAN, change_n=0, youden_change=_NAN,
                       youden_change_ci_low=_NAN, youden_change_ci_high=_NAN)
        kappa, n_audit = _NAN, 0
        if who != "audit" and len(audit):
            mine = ladder_rows[ladder_rows["labeller"] == who].set_index(["set", "_tid"])["label"].dropna()
            common = mine.index.intersection(audit.dropna().index)
            if len(common):
                k = cohen_kappa(mine.loc[common].tolist(), audit.loc[common].tolist(), CONTENT_LABELS)
                kappa, n_audit = k["value"], k["n_items"]
        share, lo, hi, n_ctl = _control_yes(jl[jl["set"] == "control"], boot, where)
        unp = jl[jl["label"].isna()].groupby("set").size()
        row.update(kappa_audit=kappa, n_audit=int(n_audit), control_yes_share=share, control_yes_ci_low=lo,
                   control_yes_ci_high=hi, n_control_yes=share * n_ctl if n_ctl else _NAN,
                   n_control_yes_ci_low=lo * n_ctl if n_ctl else _NAN,
                   n_control_yes_ci_high=hi * n_ctl if n_ctl else _NAN, n_control=n_ctl,
                   n_unparsable=int(unp.sum()), n_unparsable_max_set=int(unp.max()) if len(unp) else 0)
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


# ---- copies -------------------------------------------------------------------------------------

def _copy_ratio(first: pd.Series, later: pd.Series):
    """(first's values, later's values, the statistic) of the copy share of ``later`` over that
    of ``first`` (each: has_copy among the rung's no-gold contexts, NaN where the turn's context
    holds gold), aligned by turn so that one resample draws both."""
    turns = first.index.union(later.index)
    a = first.reindex(turns).to_numpy(float)
    b = later.reindex(turns).to_numpy(float)

    def ratio(x, y):
        mx, my = np.nanmean(x) if np.any(~np.isnan(x)) else _NAN, np.nanmean(y) if np.any(~np.isnan(y)) else _NAN
        return my / mx if mx and np.isfinite(mx) and np.isfinite(my) else _NAN
    return a, b, ratio


def copies(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Section 4.2 "copy_detection": per slice x rung, the share of no-gold contexts holding a
    near-verbatim copy of a gold document of the turn (``has_copy``: at least 80% of its word
    8-grams, or character 5-gram Jaccard >= .7; paper: 1.6% [0.7, 2.8] on BM25-turn, 16.4%
    [11.2, 21.7] on Fusion), a judge-free lower bound on how often "no gold" is wrong, with a
    percentile CI (``bootstrap_ci`` over contexts, ``cluster_bootstrap_ci`` over dialogues); and
    ``ratio_to_first``, that share over the first rung's (the paper: "ten times higher on Fusion
    than on BM25-turn"), with an interval from resampling the turns of both rungs together
    (``bootstrap_statistic``; resamples without a copy on the first rung are skipped). Over all
    no-gold contexts of the rung (no label needed; ``labels`` is not read)."""
    from convrag.stats.bootstrap import bootstrap_statistic

    if _is_empty(contexts):
        return _empty(COPIES_COLUMNS)
    where = "copies"
    c = _contexts(contexts, ["no_gold", "has_copy"], where)
    boot = _boot(ctx)
    rows = []
    for s in _slices(c):
        rungs = _ladder(c, ctx, s)
        per = {}
        for rung in rungs:
            rc = c[(c["slice"] == s) & (c["set"] == rung)]
            per[rung] = rc.set_index("_tid").apply(lambda r: float(r["has_copy"]) if r["no_gold"] else _NAN, axis=1) \
                if len(rc) else pd.Series(dtype=float)
        for rung in rungs:
            rc = c[(c["slice"] == s) & (c["set"] == rung)]
            ng = rc[rc["no_gold"]]
            x = ng["has_copy"].to_numpy(float)
            share, lo, hi = _NAN, _NAN, _NAN
            if x.size:
                cl = _clusters(ng, boot, where)
                res = (bootstrap_ci(x, n_resamples=boot["n_resamples"], seed=boot["seed"]) if cl is None else
                       cluster_bootstrap_ci(x, cl, n_resamples=boot["n_resamples"], seed=boot["seed"]))
                share, lo, hi = res["mean"], res["ci_low"], res["ci_high"]
            ratio = rlo = rhi = _NAN
            if rungs and x.size and per[rungs[0]].notna().any():
                a, b, f = _copy_ratio(per[rungs[0]], per[rung])
                ratio = f(a, b)
                if np.isfinite(ratio):
                    turns = per[rungs[0]].index.union(per[rung].index)
                    dia = c[(c["slice"] == s) & c["set"].isin([rungs[0], rung])].drop_duplicates("_tid") \
                        .set_index("_tid").reindex(turns)
                    res = bootstrap_statistic([a, b], f, n_resamples=boot["n_resamples"], seed=boot["seed"],
                                              clusters=_clusters(dia.reset_index(), boot, where))
                    rlo, rhi = res["ci_low"], res["ci_high"]
            rows.append({"slice": s, "rung": rung, "share_copy": share, "ci_low": lo, "ci_high": hi,
                         "n_copy": int(x.sum()), "n_no_gold": int(x.size), "n_contexts": int(len(rc)),
                         "ratio_to_first": ratio, "ratio_ci_low": rlo, "ratio_ci_high": rhi,
                         "first_rung": rungs[0] if rungs else None, "unit": boot["unit"]})
    return pd.DataFrame(rows, columns=COPIES_COLUMNS) if rows else _empty(COPIES_COLUMNS)


# ---- negative control ---------------------------------------------------------------------------

def negative_control(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Section 4.2 / Table 1 "negative_control": per slice x labeller, the shares labelled yes /
    partial / no on the ``control`` contexts (another dialogue's context: should be "no"; paper:
    phi-4 yes 35 of 858, 4.1%), over every control context asked (unparsable included, Table 1's
    caption); and per rung the false-miss share (the "yes" share of the labelled no-gold
    contexts, as ``figure2b``) corrected for that base rate: ``corrected_false_miss_share`` the
    raw difference f - c (not clipped, so it can be negative), ``..._rescaled`` (f - c) / (1 - c),
    the usual chance correction. The published phi-4 values (28% -> 25% on BM25-turn, 72% -> 70%
    on the hybrid, c = .041) fit the rescaled form. One row per (slice, labeller, rung); a
    labeller with no rung label gets one row, rung None."""
    if _is_empty(contexts, labels):
        return _empty(NEGATIVE_CONTROL_COLUMNS)
    where = "negative_control"
    c = _contexts(contexts, ["no_gold"], where)
    lab = _labels(labels, ctx, where)
    j, labellers = _join(c, lab), _labellers(lab, ctx)
    rows = []
    for s in _slices(c):
        js = j[j["slice"] == s]
        rungs = _ladder(c, ctx, s)
        for who in labellers:
            ctl = js[(js["set"] == "control") & (js["labeller"] == who)]
            if ctl.empty:
                continue
            labs = ctl["label"].to_numpy(object)
            n = labs.size
            base = {"slice": s, "labeller": who,
                    **{f"control_{k}_share": float(np.count_nonzero(labs == k)) / n for k in CONTENT_LABELS},
                    "n_control": int(n), "n_control_unlabelled": int(ctl["label"].isna().sum())}
            cy = base["control_yes_share"]
            made = False
            for rung in rungs:
                g = js[(js["set"] == rung) & (js["labeller"] == who)]
                if g.empty:
                    continue
                ng, rl = _parsed(g)
                fm = _label_shares(rl, ng)["yes"]
                rows.append({**base, "rung": rung, "false_miss_share": fm, "corrected_false_miss_share": fm - cy,
                             "corrected_false_miss_share_rescaled": (fm - cy) / (1 - cy) if cy < 1 else _NAN})
                made = True
            if not made:
                rows.append({**base, "rung": None, "false_miss_share": _NAN, "corrected_false_miss_share": _NAN,
                             "corrected_false_miss_share_rescaled": _NAN})
    return pd.DataFrame(rows, columns=NEGATIVE_CONTROL_COLUMNS) if rows else _empty(NEGATIVE_CONTROL_COLUMNS)


# ---- agreement ----------------------------------------------------------------------------------

def _below_large(j: pd.DataFrame, ctx: dict, rungs: list[str]) -> tuple[int, int] | None:
    """(how many panel members have a lower precision of "no gold" than every content judge at
    every rung, how many were compared), "partial" dropped; None without two kinds of judge."""
    large = [str(x) for x in (ctx.get("content_judges") or [])]
    small = [str(x) for x in (ctx.get("panel_members") or []) if str(x) not in large]
    if not large or not small or not rungs:
        return None

    def precision(who, rung):
        ng, labs = _parsed(j[(j["labeller"] == who) & (j["set"] == rung)])
        keep = ng & (labs != "partial")
        return float(np.mean(labs[keep] == "no")) if keep.any() else _NAN

    prec = {(w, r): precision(w, r) for w in [*large, *small] for r in rungs}
    if any(np.isnan(prec[(w, r)]) for w in large for r in rungs):
        return None
    compared = [w for w in small if not any(np.isnan(prec[(w, r)]) for r in rungs)]
    below = [w for w in compared if all(prec[(w, r)] < min(prec[(x, r)] for x in large) for r in rungs)]
    return len(below), len(compared)


def _kappa_codes(a: np.ndarray, b: np.ndarray, k: int = 3) -> float:
    """Cohen's kappa of two integer-coded ratings (0..k-1): (po - pe) / (1 - pe), NaN when
    pe = 1 (the bootstrap's fast path; ``cohen_kappa`` gives the estimate)."""
    n = a.size
    if n == 0:
        return _NAN
    po = float(np.mean(a == b))
    pe = float(np.dot(np.bincount(a, minlength=k), np.bincount(b, minlength=k))) / (n * n)
    return (po - pe) / (1 - pe) if pe < 1 else _NAN


def _same(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(a == b)) if a.size else _NAN


def _pair_ci(f, xa: list, xb: list, cats, dialogues, boot: dict) -> tuple[float, float]:
    """Percentile interval of an agreement statistic over the items, resampled (whole
    dialogues when ``boot.unit`` is dialogue)."""
    from convrag.stats.bootstrap import bootstrap_statistic

    if not xa:
        return _NAN, _NAN
    code = {c: i for i, c in enumerate(cats)}
    a = np.array([code[x] for x in xa])
    b = np.array([code[x] for x in xb])
    res = bootstrap_statistic([a, b], f, n_resamples=boot["n_resamples"], seed=boot["seed"],
                              clusters=dialogues if boot["unit"] == "dialogue" else None)
    return res["ci_low"], res["ci_high"]


def _families_on_decline(j: pd.DataFrame, ctx: dict, rungs: list[str]) -> tuple[int, int] | None:
    """(the model families whose every labeller's precision of "no gold" falls from the first to
    the last rung, the families of the labellers compared), "partial" dropped, point values;
    ``ctx.families``: labeller -> its model's family (the panel's majority and the world have
    none). None without two rungs or families."""
    fams = {str(k): str(v) for k, v in (ctx.get("families") or {}).items() if v}
    if len(rungs) < 2 or not fams:
        return None

    def precision(who, rung):
        ng, labs = _parsed(j[(j["labeller"] == who) & (j["set"] == rung)])
        keep = ng & (labs != "partial")
        return float(np.mean(labs[keep] == "no")) if keep.any() else _NAN

    falls: dict[str, list[bool]] = {}
    for who, fam in fams.items():
        a, b = precision(who, rungs[0]), precision(who, rungs[-1])
        if np.isfinite(a) and np.isfinite(b):
            falls.setdefault(fam, []).append(b < a)
    if not falls:
        return None
    return sum(all(v) for v in falls.values()), len(falls)


def agreement(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Section 4.2 "agreement", long format (slice, measure, labeller_a, labeller_b, value, n).

    Items: the slice's rung contexts and its gold contexts (the paper: all 858 x 5 = 4,290:
    the top 5 of each retriever and the gold; ``ctx.agreement_sets`` overrides: a list of sets).
    Per labeller pair (the audit included; the audit labels only its sample, so its pairs are
    over the audited contexts), over the contexts both labelled (parsable): ``cohen_kappa``
    (three labels; paper: phi-4 vs Qwen3-14B .44, the audit vs phi-4 .38, vs Qwen3-14B .49),
    ``binary_kappa`` (the yes / no decision: contexts either labeller calls partial are dropped,
    as every binary metric of the paper; .74, .59, .79, ``n`` its contexts) and ``raw_agreement``
    (share of identical three-way labels; .70, .64, .68). Over ``ctx.panel_members``
    (labeller_a = "panel_members"): ``fleiss_kappa`` (paper: .26), ``gwet_ac1`` and
    ``panel_raw_agreement`` over the items x members table (missing ratings allowed; items with
    < 2 ratings dropped, as ``convrag.stats.agreement``'s default), and
    ``small_judges_below_large``: how many panel members (of ``n`` compared) have a lower
    precision of "no gold" than every content judge (``ctx.content_judges``) at every rung of
    the ladder (the paper: three of its four small judges). ``families_on_decline``
    (labeller_a "labellers"): how many model families (of ``n``; ``ctx.families``) have every
    one of their labellers' precision of "no gold" falling from the first to the last rung
    (§6: labellers from five model families agree on the decline). Per labeller:
    ``gold_labelled_no``, the number of ``gold`` contexts (the turn's own gold documents)
    labelled "no" (paper: phi-4 59, Qwen3-14B 56), n = its parsable gold labels. The three
    pairwise measures carry a percentile interval from resampling the items (``boot``; the paper
    gives none); the others none."""
    if _is_empty(contexts, labels):
        return _empty(AGREEMENT_COLUMNS)
    where = "agreement"
    c = _contexts(contexts, [], where)
    lab = _labels(labels, ctx, where)
    j, labellers = _join(c, lab), _labellers(lab, ctx)
    members = [str(m) for m in (ctx.get("panel_members") or [])]
    boot = _boot(ctx)
    rows = []
    for s in _slices(c):
        rungs = _ladder(c, ctx, s)
        sets = [str(x) for x in ctx["agreement_sets"]] if ctx.get("agreement_sets") else [*rungs, "gold"]
        items = j[(j["slice"] == s) & j["set"].isin(sets)]
        wide = items.pivot(index=["set", "_tid"], columns="labeller", values="label") if len(items) else pd.DataFrame()
        if len(items) and boot["unit"] == "dialogue":
            dia = c[c["slice"] == s].set_index(["set", "_tid"])["dialogue"].astype(str)
        for a, b in combinations([x for x in labellers if x in wide.columns], 2):
            both = wide[[a, b]].dropna()
            if both.empty:
                continue
            xa, xb = both[a].tolist(), both[b].tolist()
            d_all = dia.reindex(both.index).tolist() if boot["unit"] == "dialogue" else None
            k3 = cohen_kappa(xa, xb, CONTENT_LABELS)
            yn = [i for i, (x, y) in enumerate(zip(xa, xb)) if x != "partial" and y != "partial"]
            ya, yb = [xa[i] for i in yn], [xb[i] for i in yn]
            k2 = cohen_kappa(ya, yb, ["yes", "no"]) if yn else {"value": _NAN}
            d_yn = [d_all[i] for i in yn] if d_all is not None else None
            n = len(both)
            ci3 = _pair_ci(_kappa_codes, xa, xb, CONTENT_LABELS, d_all, boot)
            ci2 = _pair_ci(lambda u, v: _kappa_codes(u, v, 2), ya, yb, ["yes", "no"], d_yn, boot)
            cir = _pair_ci(_same, xa, xb, CONTENT_LABELS, d_all, boot)
            rows += [{"slice": s, "measure": "cohen_kappa", "labeller_a": a, "labeller_b": b, "value": k3["value"],
                      "n": n, "ci_low": ci3[0], "ci_high": ci3[1]},
                     {"slice": s, "measure": "binary_kappa", "labeller_a": a, "labeller_b": b, "value": k2["value"],
                      "n": len(yn), "ci_low": ci2[0], "ci_high": ci2[1]},
                     {"slice": s, "measure": "raw_agreement", "labeller_a": a, "labeller_b": b,
                      "value": float(np.mean([x == y for x, y in zip(xa, xb)])), "n": n, "ci_low": cir[0],
                      "ci_high": cir[1]}]
        present = [m for m in members if m in wide.columns]
        if len(present) >= 2:
            table = wide[present].astype(object).where(wide[present].notna(), None)
            for measure, f in (("fleiss_kappa", fleiss_kappa), ("gwet_ac1", gwet_ac1),
                               ("panel_raw_agreement", raw_agreement)):
                res = f(table, CONTENT_LABELS)
                rows.append({"slice": s, "measure": measure, "labeller_a": "panel_members",
                             "labeller_b": "+".join(present), "value": res["value"], "n": res["n_items"]})
        below = _below_large(j[j["slice"] == s], ctx, rungs)
        if below is not None:
            rows.append({"slice": s, "measure": "small_judges_below_large", "labeller_a": "panel_members",
                         "labeller_b": "+".join(str(x) for x in ctx.get("content_judges") or []),
                         "value": float(below[0]), "n": below[1]})
        fams = _families_on_decline(j[j["slice"] == s], ctx, rungs)
        if fams is not None:
            rows.append({"slice": s, "measure": "families_on_decline", "labeller_a": "labellers",
                         "labeller_b": f"{rungs[0]}->{rungs[-1]}", "value": float(fams[0]), "n": fams[1]})
        gold = j[(j["slice"] == s) & (j["set"] == "gold")]
        for who in labellers:
            gl = gold[gold["labeller"] == who]["label"].dropna()
            if len(gl):
                rows.append({"slice": s, "measure": "gold_labelled_no", "labeller_a": who, "labeller_b": None,
                             "value": float((gl == "no").sum()), "n": int(len(gl))})
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS) if rows else _empty(AGREEMENT_COLUMNS)


# ---- false-miss evidence ------------------------------------------------------------------------

def _positions(x) -> list:
    if x is None or (not isinstance(x, (list, tuple, np.ndarray)) and pd.isna(x)):
        return []
    return list(x)


def _support_classes(row, where: str) -> set[str]:
    classes = _positions(row["doc_classes"])
    out = set()
    for p in _positions(row["support"]):
        try:
            i = int(p)
        except (TypeError, ValueError):
            i = 0
        if not 1 <= i <= len(classes):
            raise DataError(f"worse_labels.{where}: labels row slice {row['slice']}, set {row['set']}, task_id "
                            f"{row['task_id']}, labeller {row['labeller']}: support position {p!r} is outside "
                            f"1..{len(classes)} (the context's documents)")
        cls = str(classes[i - 1])
        if cls not in DOC_CLASSES:
            raise DataError(f"worse_labels.{where}: contexts doc_classes of slice {row['slice']}, set {row['set']}, "
                            f"task_id {row['task_id']} holds {cls!r}, not one of {DOC_CLASSES}")
        out.add(cls)
    return out


def best_class(row, where: str) -> str | None:
    """The class of the best evidence document the labeller names: the first of its supporting
    documents, in the order it names them (§4.2 classifies "the best evidence document named by
    the judge"; the judge names the one that best supports first); None when it names none."""
    support = _positions(row["support"])
    if not support:
        return None
    return sorted(_support_classes({**row, "support": support[:1]}, where))[0]


def _copy_named(g: pd.DataFrame, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Per labelled context: (near-duplicate documents of gold it holds, how many of them the
    labeller names as support)."""
    n_copy, n_named = [], []
    for _, r in g.iterrows():
        classes = _positions(r["doc_classes"])
        named = {int(p) for p in _positions(r["support"])}
        pos = [i + 1 for i, x in enumerate(classes) if str(x) == "near_duplicate"]
        n_copy.append(len(pos))
        n_named.append(sum(1 for i in pos if i in named))
    return np.array(n_copy, dtype=float), np.array(n_named, dtype=float)


def _ratio_of_sums(named, total) -> float:
    return float(named.sum() / total.sum()) if total.sum() else _NAN


def evidence(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Section 4.2 "What a false miss contains": per slice x rung, the primary labeller's false
    misses (no gold, judged "yes": "partial" is not a false miss) by the class of the best
    evidence document it names (``best_class``: the first supporting document), one class each:
    same_thread (a hard negative mined for the same question), near_duplicate (a near-verbatim
    copy of a gold document), other_turn_gold, other_chunk (another chunk of the gold page),
    other (paper, Fusion: .41, .14, .19, .13), ``unstated`` when it names none; ``share_tied``
    the four dialogue-tied classes together (86% on both strong retrievers). ``share_world_sufficient``:
    among the false misses the ``world`` labeller (the generated benchmark's ground truth)
    labels, the share it calls "yes" too (NaN without world labels).
    ``share_same_thread_stackexchange``: the same-thread share among the false misses of RECOR's
    five StackExchange domains (``n_false_miss_stackexchange``; the only domains whose corpora
    hold the thread's own negatives; paper: .63-.69), NaN without such false misses.
    ``share_copy_docs_named``: of the near-verbatim copies of gold (``doc_classes``
    near_duplicate) in the rung's labelled contexts (``n_copy_docs``), the share the labeller
    names as support (the paper: phi-4 names about half of those Fusion retrieves), with a
    bootstrap interval over contexts (dialogues when ``boot.unit`` is dialogue)."""
    from convrag.data.recor import STACKEXCHANGE_DOMAINS
    from convrag.stats.bootstrap import bootstrap_statistic

    if _is_empty(contexts, labels):
        return _empty(EVIDENCE_COLUMNS)
    where = "evidence"
    primary = str(_key(ctx, "primary", where))
    c = _contexts(contexts, ["no_gold", "doc_classes"], where)
    lab = _labels(labels, ctx, where, support=True)
    boot = _boot(ctx)
    j = _join(c, lab)
    world = j[j["labeller"] == "world"].set_index(["slice", "set", "_tid"])["label"]
    rows = []
    for s in _slices(c):
        for rung in _ladder(c, ctx, s):
            g = j[(j["slice"] == s) & (j["set"] == rung) & (j["labeller"] == primary)]
            if g.empty:
                continue
            fm = g[g["no_gold"].to_numpy(bool) & (g["label"] == "yes").to_numpy()]
            n = len(fm)
            best = [best_class(r, where) for _, r in fm.iterrows()]
            counts = {k: sum(b == k for b in best) for k in EVIDENCE_CLASSES}
            counts["unstated"] = sum(b is None for b in best)
            keys = [(s, rung, t) for t in fm["_tid"]]
            wl = [world.get(k) for k in keys] if len(world) else []
            wl = [x for x in wl if x is not None and not _is_missing(x)]
            if "domain" in fm.columns:
                in_se = fm["domain"].astype(str).isin(STACKEXCHANGE_DOMAINS).to_numpy()
            else:
                in_se = np.zeros(n, dtype=bool)
            n_se = int(in_se.sum())
            se_thread = sum(b == "same_thread" for b, x in zip(best, in_se) if x)
            labelled = g[g["label"].notna().to_numpy()]
            n_copy, n_named = _copy_named(labelled, where)
            share_named = lo = hi = _NAN
            if n_copy.sum():
                share_named = _ratio_of_sums(n_named, n_copy)
                res = bootstrap_statistic([n_named, n_copy], _ratio_of_sums, n_resamples=boot["n_resamples"],
                                          seed=boot["seed"], clusters=_clusters(labelled, boot, where))
                lo, hi = res["ci_low"], res["ci_high"]
            tied = sum(counts[k] for k in DIALOGUE_TIED)
            rows.append({"slice": s, "rung": rung, "labeller": primary, "n_false_miss": n,
                         **{f"share_{k}": (v / n if n else _NAN) for k, v in counts.items()},
                         **{f"n_{k}": v for k, v in counts.items()},
                         "share_tied": tied / n if n else _NAN,
                         "n_world": int(len(wl)), "share_world_sufficient": float(np.mean([x == "yes" for x in wl]))
                         if wl else _NAN,
                         "n_false_miss_stackexchange": n_se,
                         "share_same_thread_stackexchange": se_thread / n_se if n_se else _NAN,
                         "n_copy_docs": int(n_copy.sum()), "n_copy_docs_named": int(n_named.sum()),
                         "share_copy_docs_named": share_named, "copy_docs_named_ci_low": lo,
                         "copy_docs_named_ci_high": hi})
    return pd.DataFrame(rows, columns=EVIDENCE_COLUMNS) if rows else _empty(EVIDENCE_COLUMNS)


# ---- Table 3 ------------------------------------------------------------------------------------

def table3(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Table 3 (the MTRAG replication, ``ctx.replication_slice``): per rung of the slice's ladder
    (paper: questions_bm25, last_bm25, rewrite_bm25, hybrid, dense), the macro nDCG@10, the share
    of the rung's contexts without gold (71% -> 37%), the share of the primary labeller's
    parsable labels that are "no" (46% -> 18%), the false-miss share (the "yes" share of its
    labelled no-gold contexts: 23% -> 38-40%) and the precision of "no gold" with its CI
    ("partial" dropped: .72 -> .50), as ``figure2b``. Empty when ``replication_slice`` is None.
    (AUROC columns: ``abstention.auroc_columns``.)"""
    rep = ctx.get("replication_slice")
    if rep is None or _is_empty(contexts, labels):
        return _empty(TABLE3_COLUMNS)
    where = "table3"
    rep = str(rep)
    primary = str(_key(ctx, "primary", where))
    c = _contexts(contexts, ["no_gold"], where)
    lab = _labels(labels, ctx, where)
    boot = _boot(ctx)
    j = _join(c, lab)
    rows = []
    for rung in _ladder(c, ctx, rep):
        rc = c[(c["slice"] == rep) & (c["set"] == rung)]
        g = j[(j["slice"] == rep) & (j["set"] == rung) & (j["labeller"] == primary)]
        if g.empty:
            continue
        r = _report(g, ctx, boot, where)
        rows.append({"slice": rep, "rung": rung, "labeller": primary, "ndcg10": _macro_ndcg(rc),
                     "share_no_gold": _share_no_gold(rc), "share_content_no": r["share_content_no"],
                     "false_miss_share": r["false_miss_share"], "precision": r["precision"],
                     "precision_ci_low": r["precision_ci_low"], "precision_ci_high": r["precision_ci_high"],
                     "n": r["n"], "n_unlabelled": r["n_unlabelled"]})
    return pd.DataFrame(rows, columns=TABLE3_COLUMNS) if rows else _empty(TABLE3_COLUMNS)


TARGETS: dict[str, Callable[..., pd.DataFrame]] = {
    "figure2a": figure2a,
    "figure2b": figure2b,
    "table1": table1,
    "copies": copies,
    "negative_control": negative_control,
    "agreement": agreement,
    "evidence": evidence,
    "table3": table3,
}
