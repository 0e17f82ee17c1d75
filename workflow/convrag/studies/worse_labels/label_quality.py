"""worse_labels: how good is the qrels label "no gold in the top k"? (Figure 2, Tables 1 and 3,
and the numbers of sections 4.1-4.2.)

Inputs (the pipeline's contract; every function takes ``(contexts, labels, ctx, reads=None)``
and returns a tidy DataFrame; ``reads`` is accepted for a uniform signature and unused here):

* ``contexts``: one row per (slice, task_id, set): ``set`` is a ladder rung, ``gold``, ``none``
  or ``control``; ``no_gold`` is the qrels label "unanswerable"; ``has_copy``,
  ``doc_classes`` (aligned with ``doc_ids``), ``ndcg10`` (per turn, rungs only), ``domain``,
  ``dialogue``.
* ``labels``: long, one row per (slice, task_id, set, labeller): ``label`` yes / partial / no,
  or None for an unparsable judge output; ``support`` (1-based positions in ``doc_ids``).
* ``ctx``: ``ladder`` (ordered rungs; a list, or a dict slice -> list), ``primary``,
  ``labellers``, ``panel_members``, ``audit``, ``main_slice``, ``replication_slice``,
  ``boot`` {n_resamples, seed, unit: turn | dialogue}, ``partial_insufficient``.

Conventions (the same in every function):

* A labeller's sample of a context set is the contexts that have a label row of that labeller
  (the audit labels only the audited contexts, so its sample is the audited ones); ``n`` counts
  the parsable labels, ``n_unlabelled`` the unparsable ones (label None), which are dropped.
* Insufficient = label "no"; "partial" counts as sufficient unless ``ctx.partial_insufficient``
  (``convrag.stats.detection.insufficient_from_labels``). A false miss is a no_gold context
  labelled sufficient.
* Statistics are ``convrag.stats``' (``detector_report``, ``paired_detector_change``,
  ``cohen_kappa``, ``fleiss_kappa``, ``gwet_ac1``, ``raw_agreement``, ``bootstrap_ci``,
  ``cluster_bootstrap_ci``): percentile intervals with ``boot.n_resamples`` resamples and
  ``boot.seed``; ``boot.unit == "dialogue"`` resamples whole dialogues (clusters = the
  ``dialogue`` column; if one dialogue id occurs in two domains of a slice, domain + dialogue).
* Rungs: the slice's ladder (``ctx.ladder[slice]`` when ``ladder`` is a dict, else
  ``ctx.ladder``) restricted to the rungs the slice has; a slice with none of them (e.g. the
  MTRAG replication under a RECOR ladder) uses its own retrieval sets ordered by macro nDCG@10
  (the paper orders Table 3's retrievers by nDCG).
* Labellers: ``ctx.labellers`` first, then any other labeller present in ``labels`` (sorted);
  ``audit`` is dropped when ``ctx.audit`` is False. A labeller with no label in a group gives no
  row there.
* nDCG@10 is macro: the mean over domains of the per-turn mean (over all the rung's contexts of
  the slice, whatever the labeller).

Note on "false-miss share". ``false_miss_share`` here is the detector's fp / (tp + fp) =
1 - precision (partial per the setting). The published values do not add up that way
(precision 0.68 / 0.10 and false-miss share 0.28 / 0.72 for BM25-turn / Hybrid, sums 0.96 and
0.82), which fits a "yes"-only share; ``yes_share_no_gold`` (share of labelled no_gold contexts
labelled exactly "yes") and ``partial_share_no_gold`` are reported beside it.
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
                    "false_miss_share", "false_miss_ci_low", "false_miss_ci_high", "yes_share_no_gold",
                    "partial_share_no_gold", "youden_j", "youden_j_ci_low", "youden_j_ci_high", "recall",
                    "specificity", "n_no_gold", "n", "n_unlabelled", "unit", "precision_partial_insufficient",
                    "precision_partial_insufficient_ci_low", "precision_partial_insufficient_ci_high"]
COPIES_COLUMNS = ["slice", "rung", "share_copy", "ci_low", "ci_high", "n_copy", "n_no_gold", "n_contexts", "unit"]
NEGATIVE_CONTROL_COLUMNS = ["slice", "labeller", "control_yes_share", "control_partial_share", "control_no_share",
                            "n_control", "n_control_unlabelled", "rung", "false_miss_share",
                            "corrected_false_miss_share", "corrected_false_miss_share_rescaled",
                            "yes_share_no_gold", "corrected_yes_share_no_gold"]
AGREEMENT_COLUMNS = ["slice", "measure", "labeller_a", "labeller_b", "value", "n"]
EVIDENCE_COLUMNS = ["slice", "rung", "labeller", "n_false_miss",
                    *[f"share_{c}" for c in (*EVIDENCE_CLASSES, "unstated")],
                    *[f"n_{c}" for c in (*EVIDENCE_CLASSES, "unstated")],
                    "n_world", "share_world_sufficient", "n_false_miss_stackexchange",
                    "share_same_thread_stackexchange"]
TABLE3_COLUMNS = ["slice", "rung", "labeller", "ndcg10", "share_no_gold", "share_content_no", "false_miss_share",
                  "yes_share_no_gold", "precision", "precision_ci_low", "precision_ci_high", "n", "n_unlabelled"]


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


def _partial(ctx: dict) -> bool:
    return bool(ctx.get("partial_insufficient", False))


# ---- shared computations ------------------------------------------------------------------------

def _labelled(g: pd.DataFrame, ctx: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(no_gold, insufficient, labels) of g's labelled rows."""
    ins = insufficient_from_labels(g["label"].tolist(), partial_insufficient=_partial(ctx))
    keep = ~np.isnan(ins)
    return g["no_gold"].to_numpy(bool)[keep], ins[keep].astype(bool), g["label"].to_numpy(object)[keep]


def _label_shares(labels: np.ndarray, mask: np.ndarray | None = None) -> dict:
    lab = labels if mask is None else labels[mask]
    n = lab.size
    return {k: (float(np.count_nonzero(lab == k)) / n if n else _NAN) for k in CONTENT_LABELS}


def _report(g: pd.DataFrame, ctx: dict, boot: dict, where: str) -> dict:
    """detector_report of one group of labelled contexts (NaN entries when none is labelled)."""
    ng, ins, labs = _labelled(g, ctx)
    out = {"n": int(ng.size), "n_unlabelled": int(len(g) - ng.size), "n_no_gold": int(ng.sum())}
    sh = _label_shares(labs, ng)
    out["yes_share_no_gold"], out["partial_share_no_gold"] = sh["yes"], sh["partial"]
    out["share_content_no"] = _label_shares(labs)["no"]
    if ng.size == 0:
        for m in ("precision", "false_miss_share", "youden_j", "recall", "specificity", "share_no_gold"):
            out[m] = out[f"{m}_ci_low"] = out[f"{m}_ci_high"] = _NAN
        return out
    rep = detector_report(g["no_gold"].to_numpy(bool), g["label"].tolist(), partial_insufficient=_partial(ctx),
                          clusters=_clusters(g, boot, where), n_resamples=boot["n_resamples"], seed=boot["seed"])
    for m in ("precision", "false_miss_share", "youden_j", "recall", "specificity", "share_no_gold"):
        out[m], out[f"{m}_ci_low"], out[f"{m}_ci_high"] = (rep[m]["estimate"], rep[m]["ci_low"], rep[m]["ci_high"])
    return out


def _groups(j: pd.DataFrame, slice_: str, rung: str, labellers: list[str]):
    g = j[(j["slice"] == slice_) & (j["set"] == rung)]
    for lab in labellers:
        gl = g[g["labeller"] == lab]
        if len(gl):
            yield lab, gl


# ---- Figure 2a ----------------------------------------------------------------------------------

def figure2a(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Figure 2a / section 4.1 "insufficiency_share": per slice x rung x labeller, the share of
    contexts without gold (``share_no_gold``, the qrels label) against the share judged
    insufficient (``share_insufficient``: label "no", partial per ``partial_insufficient``), both
    over the labeller's labelled contexts of the rung, their ``ratio`` (no_gold / insufficient;
    paper, phi-4: 1.6 on BM25-turn, 3.8 on Hybrid) and the rung's macro nDCG@10 (the x axis).
    ``share_partial`` is the share labelled "partial"; ``n_insufficient`` counts the contexts judged
    insufficient (§4.1's "none" counts: phi-4, 386 on BM25-turn to 42 on Hybrid, of 858). Point
    values (``detector_metrics``). ``ratio_partial_insufficient``: the ratio with "partial" counted
    insufficient whatever the run's setting (§4.1's 1.07-1.30 in that setting)."""
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
            nd = _macro_ndcg(rc)
            for who, g in _groups(j, s, rung, labellers):
                ng, ins, labs = _labelled(g, ctx)
                m = detector_metrics(ng, ins) if ng.size else {}
                ng_p, ins_p, _ = _labelled(g, {**ctx, "partial_insufficient": True})
                m_p = detector_metrics(ng_p, ins_p) if ng_p.size else {}
                rows.append({"slice": s, "rung": rung, "labeller": who, "ndcg10": nd,
                             "ratio_partial_insufficient": m_p.get("ratio", _NAN),
                             "share_no_gold": m.get("share_no_gold", _NAN),
                             "share_insufficient": m.get("share_insufficient", _NAN),
                             "share_partial": _label_shares(labs)["partial"], "ratio": m.get("ratio", _NAN),
                             "n": int(ng.size), "n_unlabelled": int(len(g) - ng.size), "n_contexts": int(len(rc)),
                             "n_insufficient": int(np.sum(ins))})
    return pd.DataFrame(rows, columns=FIGURE2A_COLUMNS) if rows else _empty(FIGURE2A_COLUMNS)


# ---- Figure 2b ----------------------------------------------------------------------------------

def figure2b(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Figure 2b / section 4.1 ("precision_no_gold_*", "false_miss_share", "youden_j"): per slice
    x rung x labeller, the precision of "no gold" as a detector of insufficiency (share of the
    labelled no_gold contexts judged insufficient; paper, phi-4: 0.68 [0.65, 0.72] on BM25-turn
    -> 0.10 [0.05, 0.16] on Hybrid) with its percentile CI, the false-miss share (1 - precision)
    and Youden's J with CIs, recall, specificity, from ``detector_report`` (one resample set for
    every metric; whole dialogues when ``boot.unit == "dialogue"``). ``yes_share_no_gold`` /
    ``partial_share_no_gold``: the shares labelled exactly yes / partial among labelled no_gold
    contexts (see the module note on the published false-miss share). With "partial" counted
    sufficient (the default), ``precision_partial_insufficient`` and its CI give the precision
    with it counted insufficient (§4.1's .72 -> .28 in that setting; same resamples); with it
    already insufficient they equal ``precision``."""
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
                rp = r if _partial(ctx) else _report(g, {**ctx, "partial_insufficient": True}, boot, where)
                rows.append({"slice": s, "rung": rung, "labeller": who,
                             "precision_partial_insufficient": rp["precision"],
                             "precision_partial_insufficient_ci_low": rp["precision_ci_low"],
                             "precision_partial_insufficient_ci_high": rp["precision_ci_high"],
                             "precision": r["precision"], "precision_ci_low": r["precision_ci_low"],
                             "precision_ci_high": r["precision_ci_high"],
                             "false_miss_share": r["false_miss_share"],
                             "false_miss_ci_low": r["false_miss_share_ci_low"],
                             "false_miss_ci_high": r["false_miss_share_ci_high"],
                             "yes_share_no_gold": r["yes_share_no_gold"],
                             "partial_share_no_gold": r["partial_share_no_gold"],
                             "youden_j": r["youden_j"], "youden_j_ci_low": r["youden_j_ci_low"],
                             "youden_j_ci_high": r["youden_j_ci_high"], "recall": r["recall"],
                             "specificity": r["specificity"], "n_no_gold": r["n_no_gold"], "n": r["n"],
                             "n_unlabelled": r["n_unlabelled"], "unit": boot["unit"]})
    return pd.DataFrame(rows, columns=FIGURE2B_COLUMNS) if rows else _empty(FIGURE2B_COLUMNS)


# ---- Table 1 ------------------------------------------------------------------------------------

def table1_columns(rungs) -> list[str]:
    """Table 1's columns for a ladder (precision and its CI per rung come first)."""
    per = [x for r in rungs for x in (f"precision_{r}", f"precision_{r}_ci_low", f"precision_{r}_ci_high",
                                      f"n_no_gold_{r}")]
    return ["slice", "labeller", *per, "first_rung", "last_rung", "change", "change_ci_low", "change_ci_high",
            "change_n", "youden_change", "youden_change_ci_low", "youden_change_ci_high", "kappa_audit", "n_audit",
            "control_yes_share", "n_control", "n_unparsable", "n_unparsable_max_set"]


def _paired(ga: pd.DataFrame, gb: pd.DataFrame, metric: str, ctx: dict, boot: dict, where: str) -> dict:
    """paired_detector_change b - a over the turns (task_id) both groups hold; NaN if none."""
    a, b = ga.set_index("_tid"), gb.set_index("_tid")
    common = a.index.intersection(b.index)
    nan = {"estimate": _NAN, "ci_low": _NAN, "ci_high": _NAN, "n": 0}
    if common.empty:
        return nan
    a, b = a.loc[common], b.loc[common]
    try:
        return paired_detector_change(a["no_gold"].to_numpy(bool), a["label"].tolist(), b["no_gold"].to_numpy(bool),
                                      b["label"].tolist(), metric=metric, partial_insufficient=_partial(ctx),
                                      clusters=_clusters(a, boot, where), n_resamples=boot["n_resamples"],
                                      seed=boot["seed"])
    except DataError:  # no turn labelled under both rungs
        return nan


def table1(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Table 1 (main slice): per labeller, the precision of "no gold" at each rung with its CI
    (as ``figure2b``), its change first -> last rung (paper: BM25-turn -> Hybrid) as
    ``paired_detector_change`` (last - first) over the turns labelled under both rungs, aligned
    by task_id, and the same for Youden's J (paper: -0.37 [-0.51, -0.22]); Cohen's kappa
    (three labels) with the audit over the rung contexts both labelled (NaN for the audit itself,
    without an audit, or with no common context); the negative-control "yes" share (share of the
    labeller's parsable labels on ``control`` contexts that are exactly "yes": partial does not
    count as yes; paper: phi-4 0.041, Qwen3-14B 0.0); and the unparsable labels (label None)
    over all the slice's context sets: the total and the most in one set (paper: <= 27 of 858)."""
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
            row[f"n_no_gold_{rung}"] = r.get("n_no_gold", 0)
        if len(rungs) >= 2:
            ga, gb = jl[jl["set"] == rungs[0]], jl[jl["set"] == rungs[-1]]
            ch = _paired(ga, gb, "precision", ctx, boot, where)
            yj = _paired(ga, gb, "youden_j", ctx, boot, where)
            row.update(first_rung=rungs[0], last_rung=rungs[-1], change=ch["estimate"], change_ci_low=ch["ci_low"],
                       change_ci_high=ch["ci_high"], change_n=int(ch["n"]), youden_change=yj["estimate"],
                       youden_change_ci_low=yj["ci_low"], youden_change_ci_high=yj["ci_high"])
        else:
            row.update(first_rung=rungs[0] if rungs else None, last_rung=rungs[-1] if rungs else None, change=_NAN,
                       change_ci_low=_NAN, change_ci_high=_NAN, change_n=0, youden_change=_NAN,
                       youden_change_ci_low=_NAN, youden_change_ci_high=_NAN)
        kappa, n_audit = _NAN, 0
        if who != "audit" and len(audit):
            mine = ladder_rows[ladder_rows["labeller"] == who].set_index(["set", "_tid"])["label"]
            common = mine.index.intersection(audit.index)
            if len(common):
                k = cohen_kappa(mine.loc[common].tolist(), audit.loc[common].tolist(), CONTENT_LABELS)
                kappa, n_audit = k["value"], k["n_items"]
        ctl = jl[jl["set"] == "control"]["label"].dropna()
        unp = jl[jl["label"].isna()].groupby("set").size()
        row.update(kappa_audit=kappa, n_audit=int(n_audit),
                   control_yes_share=float((ctl == "yes").mean()) if len(ctl) else _NAN, n_control=int(len(ctl)),
                   n_unparsable=int(unp.sum()), n_unparsable_max_set=int(unp.max()) if len(unp) else 0)
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


# ---- copies -------------------------------------------------------------------------------------

def copies(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Section 4.2 "copy_detection": per slice x rung, the share of no_gold contexts holding a
    near-verbatim copy of a gold document (``has_copy``; paper: 0.016 [0.007, 0.028] on
    BM25-turn, 0.164 [0.112, 0.217] on Fusion), a judge-free count of false misses, with a
    percentile CI (``bootstrap_ci`` over contexts, ``cluster_bootstrap_ci`` over dialogues).
    Over all no_gold contexts of the rung (no label needed; ``labels`` is not read)."""
    if _is_empty(contexts):
        return _empty(COPIES_COLUMNS)
    where = "copies"
    c = _contexts(contexts, ["no_gold", "has_copy"], where)
    boot = _boot(ctx)
    rows = []
    for s in _slices(c):
        for rung in _ladder(c, ctx, s):
            rc = c[(c["slice"] == s) & (c["set"] == rung)]
            ng = rc[rc["no_gold"]]
            x = ng["has_copy"].to_numpy(float)
            share, lo, hi = _NAN, _NAN, _NAN
            if x.size:
                cl = _clusters(ng, boot, where)
                res = (bootstrap_ci(x, n_resamples=boot["n_resamples"], seed=boot["seed"]) if cl is None else
                       cluster_bootstrap_ci(x, cl, n_resamples=boot["n_resamples"], seed=boot["seed"]))
                share, lo, hi = res["mean"], res["ci_low"], res["ci_high"]
            rows.append({"slice": s, "rung": rung, "share_copy": share, "ci_low": lo, "ci_high": hi,
                         "n_copy": int(x.sum()), "n_no_gold": int(x.size), "n_contexts": int(len(rc)),
                         "unit": boot["unit"]})
    return pd.DataFrame(rows, columns=COPIES_COLUMNS) if rows else _empty(COPIES_COLUMNS)


# ---- negative control ---------------------------------------------------------------------------

def negative_control(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Section 4.2 / Table 1 "negative_control": per slice x labeller, the shares labelled yes /
    partial / no on the ``control`` contexts (another dialogue's context: should be "no"; paper:
    phi-4 yes 0.041), over the parsable labels; and per rung the false-miss share corrected for
    that base rate. ``corrected_false_miss_share`` is the RAW difference false_miss_share -
    control_yes_share (not clipped at 0, so it can be negative); ``..._rescaled`` is
    (false_miss_share - c) / (1 - c), the usual chance correction. The published phi-4 values
    (0.25 / 0.70 from 0.28 / 0.72 and c = 0.041) fit the rescaled form, not the raw difference.
    ``yes_share_no_gold`` and its raw-difference correction are given too (see the module note).
    One row per (slice, labeller, rung); a labeller with no rung label gets one row, rung None."""
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
            labs = ctl["label"].dropna().to_numpy(object)
            sh = _label_shares(labs)
            base = {"slice": s, "labeller": who, "control_yes_share": sh["yes"], "control_partial_share": sh["partial"],
                    "control_no_share": sh["no"], "n_control": int(labs.size),
                    "n_control_unlabelled": int(len(ctl) - labs.size)}
            cy = sh["yes"]
            made = False
            for rung in rungs:
                g = js[(js["set"] == rung) & (js["labeller"] == who)]
                if g.empty:
                    continue
                ng, ins, rl = _labelled(g, ctx)
                fm = detector_metrics(ng, ins)["false_miss_share"] if ng.size else _NAN
                ys = _label_shares(rl, ng)["yes"]
                rows.append({**base, "rung": rung, "false_miss_share": fm, "corrected_false_miss_share": fm - cy,
                             "corrected_false_miss_share_rescaled": (fm - cy) / (1 - cy) if cy < 1 else _NAN,
                             "yes_share_no_gold": ys, "corrected_yes_share_no_gold": ys - cy})
                made = True
            if not made:
                rows.append({**base, "rung": None, "false_miss_share": _NAN, "corrected_false_miss_share": _NAN,
                             "corrected_false_miss_share_rescaled": _NAN, "yes_share_no_gold": _NAN,
                             "corrected_yes_share_no_gold": _NAN})
    return pd.DataFrame(rows, columns=NEGATIVE_CONTROL_COLUMNS) if rows else _empty(NEGATIVE_CONTROL_COLUMNS)


# ---- agreement ----------------------------------------------------------------------------------

def _binary(x):
    return None if x is None else ("no" if x == "no" else "sufficient")


def agreement(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Section 4.2 "agreement", long format (slice, measure, labeller_a, labeller_b, value, n).

    Items: the slice's rung contexts (``ctx.agreement_sets`` overrides: a list of sets).
    Per labeller pair (the audit included): ``cohen_kappa`` (three labels; paper, phi-4 vs
    Qwen3-14B: 0.44), ``binary_kappa`` (no vs yes/partial; 0.59-0.79) and ``raw_agreement``
    (share of identical three-way labels; 0.64-0.70), over the contexts both labelled (parsable).
    Over ``ctx.panel_members`` (labeller_a = "panel_members"): ``fleiss_kappa`` (paper: 0.26),
    ``gwet_ac1`` and ``panel_raw_agreement`` over the items x members table (missing ratings
    allowed; items with < 2 ratings dropped, as ``convrag.stats.agreement``'s default).
    Per labeller: ``gold_labelled_no``, the number of ``gold`` contexts (the turn's own gold
    documents) labelled "no" (paper: phi-4 59, Qwen3-14B 56), n = its parsable gold labels."""
    if _is_empty(contexts, labels):
        return _empty(AGREEMENT_COLUMNS)
    where = "agreement"
    c = _contexts(contexts, [], where)
    lab = _labels(labels, ctx, where)
    j, labellers = _join(c, lab), _labellers(lab, ctx)
    members = [str(m) for m in (ctx.get("panel_members") or [])]
    rows = []
    for s in _slices(c):
        sets = [str(x) for x in ctx["agreement_sets"]] if ctx.get("agreement_sets") else _ladder(c, ctx, s)
        items = j[(j["slice"] == s) & j["set"].isin(sets)]
        wide = items.pivot(index=["set", "_tid"], columns="labeller", values="label") if len(items) else pd.DataFrame()
        for a, b in combinations([x for x in labellers if x in wide.columns], 2):
            both = wide[[a, b]].dropna()
            if both.empty:
                continue
            xa, xb = both[a].tolist(), both[b].tolist()
            k3 = cohen_kappa(xa, xb, CONTENT_LABELS)
            k2 = cohen_kappa([_binary(x) for x in xa], [_binary(x) for x in xb], ["no", "sufficient"])
            n = len(both)
            rows += [{"slice": s, "measure": "cohen_kappa", "labeller_a": a, "labeller_b": b, "value": k3["value"],
                      "n": n},
                     {"slice": s, "measure": "binary_kappa", "labeller_a": a, "labeller_b": b, "value": k2["value"],
                      "n": n},
                     {"slice": s, "measure": "raw_agreement", "labeller_a": a, "labeller_b": b,
                      "value": float(np.mean([x == y for x, y in zip(xa, xb)])), "n": n}]
        present = [m for m in members if m in wide.columns]
        if len(present) >= 2:
            table = wide[present].astype(object).where(wide[present].notna(), None)
            for measure, f in (("fleiss_kappa", fleiss_kappa), ("gwet_ac1", gwet_ac1),
                               ("panel_raw_agreement", raw_agreement)):
                res = f(table, CONTENT_LABELS)
                rows.append({"slice": s, "measure": measure, "labeller_a": "panel_members",
                             "labeller_b": "+".join(present), "value": res["value"], "n": res["n_items"]})
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


def evidence(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Section 4.2 "false_miss_evidence": per slice x rung, among the false misses (no_gold and
    the primary labeller says sufficient: yes or partial, partial per ``partial_insufficient``),
    the share whose supporting documents (``support`` positions -> ``doc_classes``) include each
    class: same_thread, near_duplicate, other_turn_gold, other_chunk, other (paper, Fusion: 0.41,
    0.14, 0.19, 0.13); classes overlap, so shares can add to more than 1. A false miss listing no
    support counts in ``unstated`` (and in no class). ``share_world_sufficient``: among the false
    misses the ``world`` labeller (the generated benchmark's ground truth) labels, the share it
    calls sufficient too (NaN without world labels). ``share_same_thread_stackexchange``: the
    same-thread share among the false misses of RECOR's five StackExchange domains
    (``n_false_miss_stackexchange``; the only domains whose corpora hold the thread's own
    negatives; paper: .63-.69), NaN without such false misses."""
    from convrag.data.recor import STACKEXCHANGE_DOMAINS

    if _is_empty(contexts, labels):
        return _empty(EVIDENCE_COLUMNS)
    where = "evidence"
    primary = str(_key(ctx, "primary", where))
    c = _contexts(contexts, ["no_gold", "doc_classes"], where)
    lab = _labels(labels, ctx, where, support=True)
    j = _join(c, lab)
    world = j[j["labeller"] == "world"].set_index(["slice", "set", "_tid"])["label"]
    rows = []
    for s in _slices(c):
        for rung in _ladder(c, ctx, s):
            g = j[(j["slice"] == s) & (j["set"] == rung) & (j["labeller"] == primary)]
            if g.empty:
                continue
            ins = insufficient_from_labels(g["label"].tolist(), partial_insufficient=_partial(ctx))
            fm = g[g["no_gold"].to_numpy(bool) & (ins == 0.0)]
            n = len(fm)
            counts = dict.fromkeys((*EVIDENCE_CLASSES, "unstated"), 0)
            for _, r in fm.iterrows():
                cls = _support_classes(r, where)
                if not _positions(r["support"]):
                    counts["unstated"] += 1
                for k in EVIDENCE_CLASSES:
                    counts[k] += k in cls
            keys = [(s, rung, t) for t in fm["_tid"]]
            wl = [world.get(k) for k in keys] if len(world) else []
            wl = [x for x in wl if x is not None and not _is_missing(x)]
            w_ins = insufficient_from_labels(wl, partial_insufficient=_partial(ctx)) if wl else np.array([])
            se = fm[fm["domain"].astype(str).isin(STACKEXCHANGE_DOMAINS)] if "domain" in fm.columns else fm.iloc[0:0]
            n_se = len(se)
            se_thread = sum("same_thread" in _support_classes(r, where) for _, r in se.iterrows())
            row = {"slice": s, "rung": rung, "labeller": primary, "n_false_miss": n,
                   **{f"share_{k}": (v / n if n else _NAN) for k, v in counts.items()},
                   **{f"n_{k}": v for k, v in counts.items()},
                   "n_world": int(len(wl)), "share_world_sufficient": float((w_ins == 0).mean()) if wl else _NAN,
                   "n_false_miss_stackexchange": n_se, "share_same_thread_stackexchange": se_thread / n_se if n_se
                   else _NAN}
            rows.append(row)
    return pd.DataFrame(rows, columns=EVIDENCE_COLUMNS) if rows else _empty(EVIDENCE_COLUMNS)


# ---- Table 3 ------------------------------------------------------------------------------------

def table3(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Table 3 (the MTRAG replication, ``ctx.replication_slice``): per rung of the slice's ladder
    (paper: questions_bm25, last_bm25, rewrite_bm25, hybrid, dense), the macro nDCG@10, the share
    of the primary labeller's labelled contexts without gold (0.71 -> 0.37), the share labelled
    exactly "no" (0.46 -> 0.18), the false-miss share (1 - precision; ``yes_share_no_gold``
    beside it, see the module note) and the precision of "no gold" with its CI (0.72 -> 0.50), as
    in ``figure2b``. Empty when ``replication_slice`` is None. (AUROC columns: another module.)"""
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
                     "share_no_gold": r["share_no_gold"], "share_content_no": r["share_content_no"],
                     "false_miss_share": r["false_miss_share"], "yes_share_no_gold": r["yes_share_no_gold"],
                     "precision": r["precision"], "precision_ci_low": r["precision_ci_low"],
                     "precision_ci_high": r["precision_ci_high"], "n": r["n"], "n_unlabelled": r["n_unlabelled"]})
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
