"""worse_labels: the section 4.2 / 4.3 / Table 3 analyses built on the existing artifacts
(``contexts``, ``labels``, ``reads``) and on MTRAG's annotator feedback.

* ``ladder_steps``: the paired change of the precision of "no gold" (and of Youden's J) for
  EVERY pair of rungs of a slice, consecutive pairs flagged (``table1`` tests first vs last
  only): the paper's Fusion -> Hybrid change (-0.08 [-0.14, -0.02]) and Table 3's dense minus
  questions_bm25 (-0.22 [-0.29, -0.16]).
* ``dialogue_tied``: the share of false misses tied to the dialogue (their supporting
  documents include a same-thread, near-duplicate, other-turn-gold or other-chunk document;
  paper: 0.86 over the strong retrievers) and the precision of "no gold" with those false
  misses discounted (0.89 -> 0.45).
* ``false_miss_origin``: each false miss of a rung by the origin of its supporting documents
  (Table 3: the dense retriever's 109 MTRAG false misses, 29 other-turn gold, 21 other chunk,
  56 never seen by the annotators; 1 rests on rejected passages only).
* ``human_feedback`` / ``mtrag_human``: MTRAG's annotator judgments of the passages shown in
  its conversations, and the primary judge's "yes" share on single passages the annotators
  accepted (0.59) or rejected (0.08 [0.06, 0.11]).
* ``changed_all``: the comparisons of §4.3's enumeration (the families its text lists; its
  docstring says over which grid, and why the total is not the paper's 258).

Conventions are ``label_quality``'s and ``abstention``'s (their module docstrings, which give the
paper's sentences): binary metrics (precision, Youden's J, AUROC, refusal on sufficient or
insufficient contexts) compare "yes" with "no" and drop "partial", and the qrels label's AUROC
compares "all" with "none" and drops "part"; a false miss is a no-gold context the primary
labeller judges "yes" (a "partial" one is neither a false nor a true miss); intervals are
percentile bootstraps with ``boot`` (turns, or whole dialogues when ``boot.unit ==
"dialogue"``).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from convrag.errors import ConfigError, DataError
from convrag.stats.bootstrap import bootstrap_statistic
from convrag.stats.detection import _auroc_ranks, paired_detector_change
from convrag.studies.worse_labels.label_quality import (
    DIALOGUE_TIED,
    _boot,
    _clusters,
    _contexts,
    _empty,
    _is_empty,
    _join,
    _key,
    _labellers,
    _labels,
    _ladder,
    _positions,
    _slices,
    _support_classes,
    best_class,
)

__all__ = ["CHANGED_ALL_COLUMNS", "DIALOGUE_TIED", "DIALOGUE_TIED_COLUMNS", "HUMAN_COLUMNS", "LADDER_STEPS_COLUMNS",
           "MTRAG_HUMAN_COLUMNS", "ORIGIN_COLUMNS", "ORIGINS", "audit_procedures", "changed_all", "dialogue_tied", "false_miss_origin",
           "human_feedback", "human_passages", "ladder_steps", "mtrag_human", "swap_pair"]

_NAN = float("nan")
STEP_METRICS = ("precision", "youden_j")

LADDER_STEPS_COLUMNS = ["slice", "labeller", "metric", "first", "second", "consecutive", "value_first", "value_second",
                        "diff", "ci_low", "ci_high", "significant", "n", "n_unlabelled", "unit", "alt_unit",
                        "ci_low_alt", "ci_high_alt", "ci_shift"]
DIALOGUE_TIED_COLUMNS = ["slice", "rung", "labeller", "n_no_gold", "n_insufficient", "n_false_miss", "n_tied",
                         "share_tied", "precision", "precision_discounted", "precision_discounted_ci_low",
                         "precision_discounted_ci_high", "precision_tied_insufficient", "n_docs_no_gold",
                         "share_docs_tied", "rungs", "unit", "n_audited_no_gold", "n_audit_false_miss",
                         "n_audit_tied", "share_audit_tied"]
ORIGINS = ("other_turn_gold", "other_chunk", "near_duplicate", "same_thread", "rejected", "shown", "never_seen",
           "other", "unstated")
ORIGIN_COLUMNS = ["slice", "rung", "labeller", "n_false_miss", *[f"n_{o}" for o in ORIGINS],
                  *[f"share_{o}" for o in ORIGINS], "n_rejected_only", "has_feedback"]
HUMAN_COLUMNS = ["conversation_id", "turn", "task_id", "doc_id", "judgment", "domain"]
MTRAG_HUMAN_COLUMNS = ["labeller", "judgment", "n", "n_unlabelled", "yes_share", "ci_low", "ci_high",
                       "partial_share", "no_share", "unit"]


# ---- (c) every step of the ladder ----------------------------------------------------------------

def ladder_steps(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Per slice x labeller x metric (precision of "no gold", Youden's J) x pair of rungs
    (first, second) in ladder order, every pair, ``consecutive`` when adjacent in the ladder:
    ``paired_detector_change`` second - first over the turns labelled under both rungs (aligned
    by task_id; the pairs resampled together, whole dialogues when ``boot.unit`` is dialogue;
    "partial" dropped at each rung, as every binary metric of the paper),
    with its percentile interval; ``significant`` when the interval excludes 0 (a two-sided
    test at ``1 - alpha``). ``n``: turns in both; ``n_unlabelled``: of those, dropped for a
    missing label under either rung. ``ci_low_alt`` / ``ci_high_alt``: the same interval with
    the other resampling unit ``alt_unit`` (whole dialogues when ``boot.unit`` is turn, else
    turns; same seed and resamples), and ``ci_shift`` the larger move of its two ends: the
    paper's robustness check (intervals move by at most .03 when dialogues are resampled)."""
    if _is_empty(contexts, labels):
        return _empty(LADDER_STEPS_COLUMNS)
    where = "ladder_steps"
    c = _contexts(contexts, ["no_gold"], where)
    lab = _labels(labels, ctx, where)
    boot = _boot(ctx)
    alt = {**boot, "unit": "turn" if boot["unit"] == "dialogue" else "dialogue"}
    j = _join(c, lab)
    rows = []
    for s in _slices(c):
        rungs = _ladder(c, ctx, s)
        js = j[j["slice"] == s]
        for who in _labellers(js, ctx):
            jl = js[js["labeller"] == who]
            for i, k in combinations(range(len(rungs)), 2):
                a = jl[jl["set"] == rungs[i]].set_index("_tid")
                b = jl[jl["set"] == rungs[k]].set_index("_tid")
                common = a.index.intersection(b.index)
                if common.empty:
                    continue
                a, b = a.loc[common], b.loc[common]
                for metric in STEP_METRICS:
                    row = {"slice": s, "labeller": who, "metric": metric, "first": rungs[i], "second": rungs[k],
                           "consecutive": k == i + 1, "n": int(len(common)), "unit": boot["unit"],
                           "alt_unit": alt["unit"]}

                    def change(b_, a=a, b=b, metric=metric):
                        return paired_detector_change(a["no_gold"].to_numpy(bool), a["label"].tolist(),
                                                      b["no_gold"].to_numpy(bool), b["label"].tolist(), metric=metric,
                                                      partial="drop",
                                                      clusters=_clusters(a.reset_index(), b_, where),
                                                      n_resamples=b_["n_resamples"], seed=b_["seed"])
                    try:
                        r, ra = change(boot), change(alt)
                    except DataError:  # no turn labelled under both rungs
                        continue
                    lo, hi = r["ci_low"], r["ci_high"]
                    row.update(value_first=r["value_a"], value_second=r["value_b"], diff=r["estimate"], ci_low=lo,
                               ci_high=hi, significant=bool(np.isfinite(lo) and np.isfinite(hi) and (lo > 0 or hi < 0)),
                               n_unlabelled=int(r["n_unlabelled"]), ci_low_alt=ra["ci_low"], ci_high_alt=ra["ci_high"],
                               ci_shift=float(max(abs(lo - ra["ci_low"]), abs(hi - ra["ci_high"]))))
                    rows.append(row)
    return pd.DataFrame(rows, columns=LADDER_STEPS_COLUMNS) if rows else _empty(LADDER_STEPS_COLUMNS)


# ---- (b) dialogue-tied false misses and the discounted precision ------------------------------

def _discounted(ins, tied) -> float:
    """no / (yes + no - dialogue-tied false misses), over the no-gold contexts judged yes or no."""
    den = ins.size - int(np.count_nonzero(tied))
    return float(np.count_nonzero(ins)) / den if den else _NAN


def strong_rungs(ctx: dict, slice_: str, rungs: list[str]) -> list[str]:
    """The "strong retrievers" a pooled row covers: ``ctx.strong_rungs[slice]`` when given, else
    every rung after the first two (the two BM25 rungs of the paper's ladder)."""
    given = (ctx.get("strong_rungs") or {}).get(slice_)
    if given is None:
        return rungs[2:]
    bad = [r for r in given if r not in rungs]
    if bad:
        raise ConfigError(f"worse_labels.dialogue_tied: strong_rungs.{slice_} names {bad}, not rungs of the slice "
                          f"({', '.join(rungs)})")
    return list(given)


def dialogue_tied(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, reads=None) -> pd.DataFrame:
    """Section 4.2 ("What a false miss contains"): per slice x rung, the primary labeller's false
    misses (no-gold contexts it judges "yes") whose best evidence document (``label_quality.
    best_class``: the first supporting document it names) is tied to the dialogue (``doc_classes``
    same_thread, near_duplicate, other_turn_gold or other_chunk: the qrels miss them because the
    dialogue's annotators judged a neighbour, not the document itself): ``n_tied`` of
    ``n_false_miss``, ``share_tied`` (86% on both strong retrievers); ``share_docs_tied``, the
    share of all documents of the rung's no-gold contexts that are dialogue-tied (72-74%: where
    false misses sit, not why); and the precision of "no gold" with the tied false misses
    discounted. Precision drops "partial" as every binary metric (``precision`` = no / (yes +
    no) over the no-gold contexts), and ``precision_discounted`` = no / (yes + no - tied) takes
    the tied false misses out of the no-gold set (a tied false miss is a qrels gap, not a case
    of "no gold" failing), with a bootstrap interval over the no-gold contexts: the paper's .89
    -> .45 from .68 -> .10 (worked on BM25-turn: no .61, yes .28, 73% of them tied: .61 / (.89 -
    .20) = .89). ``precision_tied_insufficient`` is the other reading ((no + tied) / (yes + no)),
    given beside it. Row ``rung == "strong"`` pools the ``strong_rungs`` (``rungs`` names them).
    The blind audit's own false misses (the paper's 90% and 100%): of the no-gold contexts the
    audit labelled (``n_audited_no_gold``), those it judges "yes" (``n_audit_false_miss``), and
    of those the ones whose best evidence document the audit names is tied to the dialogue
    (``n_audit_tied``, ``share_audit_tied``; NaN without audit labels)."""
    if _is_empty(contexts, labels):
        return _empty(DIALOGUE_TIED_COLUMNS)
    where = "dialogue_tied"
    primary = str(_key(ctx, "primary", where))
    c = _contexts(contexts, ["no_gold", "doc_classes"], where)
    lab = _labels(labels, ctx, where, support=True)
    boot = _boot(ctx)
    j = _join(c, lab)
    audit = j[j["labeller"] == "audit"]
    rows = []
    for s in _slices(c):
        rungs = _ladder(c, ctx, s)
        parts = {}
        for rung in rungs:
            g = j[(j["slice"] == s) & (j["set"] == rung) & (j["labeller"] == primary)]
            if g.empty:
                continue
            sub = g[g["no_gold"].to_numpy(bool) & g["label"].isin(["yes", "no"]).to_numpy()]
            ins = (sub["label"] == "no").to_numpy()
            tied = np.array([not i and best_class(r, where) in DIALOGUE_TIED for (_, r), i in zip(sub.iterrows(), ins)],
                            dtype=bool)
            au = audit[(audit["slice"] == s) & (audit["set"] == rung) & audit["no_gold"].to_numpy(bool)
                       & audit["label"].notna().to_numpy()]
            audited = np.ones(len(au), dtype=bool)
            confirmed = (au["label"] == "yes").to_numpy()
            a_tied = np.array([bool(y) and best_class(r, where) in DIALOGUE_TIED for (_, r), y in
                               zip(au.iterrows(), confirmed)], dtype=bool)
            docs = c[(c["slice"] == s) & (c["set"] == rung) & c["no_gold"]]["doc_classes"]
            classes = [str(x) for d in docs for x in _positions(d)]
            parts[rung] = (sub, ins, tied, audited, confirmed, len(classes),
                           sum(x in DIALOGUE_TIED for x in classes), a_tied)
        for name, members in [*[(r, [r]) for r in parts], ("strong", [r for r in strong_rungs(ctx, s, rungs)
                                                                         if r in parts])]:
            if not members:
                continue
            sub = pd.concat([parts[r][0] for r in members], ignore_index=True)
            ins_, tied, audited, confirmed, a_tied = (np.concatenate([parts[r][k] for r in members])
                                                      for k in (1, 2, 3, 4, 7))
            n_docs, n_docs_tied = (sum(parts[r][k] for r in members) for k in (5, 6))
            n_conf, n_conf_tied = int(confirmed.sum()), int(a_tied.sum())
            n, n_ins, n_tied = int(ins_.size), int(ins_.sum()), int(tied.sum())
            n_fm = n - n_ins
            lo = hi = _NAN
            if n:
                res = bootstrap_statistic([ins_, tied], _discounted, n_resamples=boot["n_resamples"],
                                          seed=boot["seed"], clusters=_clusters(sub, boot, where))
                lo, hi = res["ci_low"], res["ci_high"]
            rows.append({"slice": s, "rung": name, "labeller": primary, "n_no_gold": n, "n_insufficient": n_ins,
                         "n_false_miss": n_fm, "n_tied": n_tied, "share_tied": n_tied / n_fm if n_fm else _NAN,
                         "precision": n_ins / n if n else _NAN,
                         "precision_discounted": _discounted(ins_, tied) if n else _NAN,
                         "precision_discounted_ci_low": lo, "precision_discounted_ci_high": hi,
                         "precision_tied_insufficient": (n_ins + n_tied) / n if n else _NAN,
                         "n_docs_no_gold": n_docs, "share_docs_tied": n_docs_tied / n_docs if n_docs else _NAN,
                         "rungs": " ".join(members), "unit": boot["unit"],
                         "n_audited_no_gold": int(audited.sum()), "n_audit_false_miss": n_conf,
                         "n_audit_tied": n_conf_tied, "share_audit_tied": n_conf_tied / n_conf if n_conf else _NAN})
    return pd.DataFrame(rows, columns=DIALOGUE_TIED_COLUMNS) if rows else _empty(DIALOGUE_TIED_COLUMNS)


# ---- the audit's two procedures -------------------------------------------------------------------

AUDIT_PROCEDURES_MEASURE = "audit_procedures_agree"


def audit_procedures(records: pd.DataFrame) -> pd.DataFrame:
    """§3's "the audit's two runs agree on 97% of items": per slice, the share of the audited
    contexts whose two procedures (``holistic``, ``claims``: claim by claim) gave the same
    readable label, the audit's own ``agree`` (the rest went to the adjudicating third run),
    over every audited context (``n``). ``records``: the audit files' records with a ``slice``
    column; rows in ``agreement``'s columns (measure ``audit_procedures_agree``, labeller_a
    holistic, labeller_b claims)."""
    from convrag.studies.worse_labels.label_quality import AGREEMENT_COLUMNS

    if records is None or records.empty:
        return _empty(AGREEMENT_COLUMNS)
    missing = [k for k in ("slice", "holistic", "claims") if k not in records.columns]
    if missing:
        raise DataError(f"worse_labels.audit_procedures: audit records lack field(s) {', '.join(missing)}")
    rows = []
    for s, g in records.groupby(records["slice"].astype(str), sort=True):
        same = [isinstance(a, str) and isinstance(b, str) and a.strip().lower() == b.strip().lower()
                for a, b in zip(g["holistic"], g["claims"])]
        rows.append({"slice": s, "measure": AUDIT_PROCEDURES_MEASURE, "labeller_a": "holistic",
                     "labeller_b": "claims", "value": float(np.mean(same)), "n": int(len(g))})
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


# ---- MTRAG's annotator feedback ------------------------------------------------------------------

def human_feedback(conversations: str, questions: dict[str, str] | None = None,
                   index_to_id_tsv: str | None = None) -> pd.DataFrame:
    """MTRAG's ``conversations.json`` -> one row per passage shown with an agent turn: the
    conversation id (``convrag.data.mtrag``'s id matching), the user turn it answers, its
    task id ``<conversation><::><turn>``, the doc id and ``judgment``: ``relevant`` (the
    conversation's editor said yes, or the author where the editor gave none: MTRAG's qrels),
    ``rejected`` (said no) or ``unjudged``; ``domain``."""
    from pathlib import Path

    from convrag.data.mtrag import ID_SEP, _conversation_ids, _read_json, _relevant, conversation_ids_from_queries
    from convrag.data.mtrag import domain_of

    path = Path(conversations)
    data, _ = _read_json(path)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON array of conversations")
    from collections import Counter

    ids = (conversation_ids_from_queries(data, path, questions) if questions else
           _conversation_ids(data, path, Path(index_to_id_tsv) if index_to_id_tsv else None, Counter()))
    rows = []
    for i, (conv, cid) in enumerate(zip(data, ids)):
        dom = domain_of(conv.get("domain"), f"{path}: conversation {i}", "domain")
        turn = 0
        for j, m in enumerate(conv.get("messages") or []):
            if m.get("speaker") == "user":
                turn += 1
                continue
            for k, cx in enumerate(m.get("contexts") or []):
                doc = cx.get("document_id") if isinstance(cx, dict) else None
                if not isinstance(doc, str) or not doc:
                    raise DataError(f"{path}: conversation {i} ({cid}), message {j}: field 'contexts[{k}].document_id'"
                                    " is missing or not a string")
                r = _relevant(cx, conv.get("editor"), conv.get("author"))
                rows.append({"conversation_id": cid, "turn": turn, "task_id": f"{cid}{ID_SEP}{turn}", "doc_id": doc,
                             "judgment": "unjudged" if r is None else ("relevant" if r else "rejected"),
                             "domain": dom})
    return pd.DataFrame(rows, columns=HUMAN_COLUMNS)


HUMAN_SET = "human"


def human_passages(conversations: str, questions: dict[str, str] | None = None, index_to_id_tsv: str | None = None,
                   domains: list[str] | None = None) -> tuple[pd.DataFrame, list[dict]]:
    """(``human_feedback`` of ``conversations``, the single-passage items a content judge labels).

    Feedback rows outside ``domains`` (None: all) are dropped. One item per distinct (task,
    passage) the annotators judged (``relevant`` or ``rejected``; unjudged passages are not
    asked): the turn's question and history as ``convrag.data.mtrag.load_conversations`` gives
    them and that one passage (its title line, then its text, as the conversation shows it), so
    the judge sees each passage alone, as section 4.2 does. The item's ``context_id`` is
    ``human|<task_id>|<doc_id>`` (the label rule's item id; ``mtrag_human`` reads the labels' task
    id ``<task_id>|<doc_id>``); ``set`` is ``human``."""
    from pathlib import Path

    from convrag.data.mtrag import load_conversations

    fb = human_feedback(conversations, questions, index_to_id_tsv)
    if domains is not None:
        fb = fb[fb["domain"].isin(list(domains))].reset_index(drop=True)
    tasks, _ = load_conversations(conversations, None if questions else index_to_id_tsv,
                                  questions=questions or None, contexts="shown")
    by_task = {t.task_id: t for t in tasks}
    items = []
    judged = fb[fb["judgment"].isin(["relevant", "rejected"])].drop_duplicates(["task_id", "doc_id"])
    for r in judged.itertuples():
        t = by_task.get(r.task_id)
        shown = {c["doc_id"]: c for c in (t.contexts if t is not None else [])}
        if r.doc_id not in shown:
            raise DataError(f"{Path(conversations)}: passage '{r.doc_id}' judged at task {r.task_id} is not among "
                            "the passages that turn shows (conversation and feedback disagree)")
        c = shown[r.doc_id]
        text = f"{c['title']}\n{c['text']}" if c.get("title") else c["text"]
        items.append(dict(context_id=f"{HUMAN_SET}|{r.task_id}|{r.doc_id}", slice=HUMAN_SET, set=HUMAN_SET,
                          task_id=f"{r.task_id}|{r.doc_id}", question=t.question, history=t.history,
                          passages=[text], reference=(t.reference_answers or [""])[0], judgment=r.judgment,
                          conversation_id=r.conversation_id, domain=r.domain))
    return fb, items


def mtrag_human(feedback: pd.DataFrame, labels: pd.DataFrame, ctx: dict) -> pd.DataFrame:
    """Section 4.2 (phi-4 on MTRAG's passages shown one at a time): per labeller and annotator
    judgment (``relevant``: the passages MTRAG's annotators accepted, its gold; ``rejected``:
    those they turned down), the share of the single-passage contexts the labeller calls "yes"
    (paper: 0.59 on gold, 0.08 [0.06, 0.11] on rejected), with a bootstrap interval over
    passages (whole conversations when ``boot.unit`` is dialogue), and the partial / no shares.
    ``labels``: one row per judged passage, set ``human``, task_id ``<task_id>|<doc_id>``;
    unparsable labels (None) drop and are counted. A passage shown at several turns is judged
    at each."""
    if _is_empty(feedback, labels):
        return _empty(MTRAG_HUMAN_COLUMNS)
    where = "mtrag_human"
    for col in ("task_id", "doc_id", "judgment", "conversation_id"):
        if col not in feedback.columns:
            raise DataError(f"worse_labels.{where}: the feedback table lacks the column {col}")
    boot = _boot(ctx)
    fb = feedback.drop_duplicates(["task_id", "doc_id"]).copy()
    fb["_key"] = fb["task_id"].astype(str) + "|" + fb["doc_id"].astype(str)
    lab = labels[labels["set"].astype(str) == "human"].copy()
    lab["_key"] = lab["task_id"].astype(str)
    unknown = sorted(set(lab["_key"]) - set(fb["_key"]))
    if unknown:
        raise DataError(f"worse_labels.{where}: label of passage '{unknown[0]}' (set human) has no row in the "
                        "annotator feedback table")
    j = lab.merge(fb[["_key", "judgment", "conversation_id"]], on="_key", how="inner")
    rows = []
    for who in _labellers(j, ctx):
        for judgment in ("relevant", "rejected"):
            g = j[(j["labeller"] == who) & (j["judgment"] == judgment)]
            if g.empty:
                continue
            got = g["label"].tolist()
            keep = [not pd.isna(x) for x in got]
            x = np.array([str(v).strip().lower() for v, k in zip(got, keep) if k], dtype=object)
            lo = hi = _NAN
            if x.size:
                cl = (g["conversation_id"].astype(str).to_numpy()[np.array(keep)] if boot["unit"] == "dialogue"
                      else None)
                res = bootstrap_statistic([(x == "yes").astype(float)], np.mean, n_resamples=boot["n_resamples"],
                                          seed=boot["seed"], clusters=cl)
                lo, hi = res["ci_low"], res["ci_high"]
            share = (lambda v: float(np.mean(x == v)) if x.size else _NAN)
            rows.append({"labeller": who, "judgment": judgment, "n": int(x.size), "n_unlabelled": int(len(g) - x.size),
                         "yes_share": share("yes"), "ci_low": lo, "ci_high": hi, "partial_share": share("partial"),
                         "no_share": share("no"), "unit": boot["unit"]})
    return pd.DataFrame(rows, columns=MTRAG_HUMAN_COLUMNS) if rows else _empty(MTRAG_HUMAN_COLUMNS)


# ---- (d) false misses by origin -------------------------------------------------------------------

def _origin(classes: set[str], support: list[str], seen: dict[str, str]) -> str:
    """One false miss's origin from its supporting documents, first that applies: a gold
    document of another turn, another chunk of a gold page, a near-duplicate of gold, a
    same-thread document; then, with the turn's annotator feedback (``seen``: doc id -> its
    judgment at this turn), a passage the annotators rejected at this turn, one shown to them at
    this turn without a judgment, one never shown to them for this turn; else ``other``;
    ``unstated`` when the label names no supporting document."""
    if not support:
        return "unstated"
    for k in ("other_turn_gold", "other_chunk", "near_duplicate", "same_thread"):
        if k in classes:
            return k
    if seen is not None:
        st = [seen.get(d) for d in support]
        if "rejected" in st:
            return "rejected"
        if any(x is not None for x in st):
            return "shown"
        return "never_seen"
    return "other"


def false_miss_origin(contexts: pd.DataFrame, labels: pd.DataFrame, ctx: dict, feedback: pd.DataFrame | None = None
                      ) -> pd.DataFrame:
    """Table 3's split of false misses by origin: per slice x rung, each false miss of the
    primary labeller (no gold, judged "yes") counted once under ``_origin`` of its supporting documents (``support``
    positions -> ``doc_ids`` / ``doc_classes``). With MTRAG's annotator feedback
    (``human_feedback``), per TURN, as the text counts them (§4.4: passages "the annotators
    never saw for that turn"; §4.2: MTRAG records which passages its annotators saw and rejected
    "for a turn"): matched on the context's ``task_id`` (``<conversation><::><turn>``, the
    feedback's), a passage is ``rejected`` when that turn's annotators turned it down and did not
    accept it, ``shown`` when shown at that turn without a judgment, ``never_seen`` when not
    shown at that turn (a passage shown only at another turn of the conversation counts as never
    seen for this one). A slice none of whose conversations (``dialogue``) has feedback has
    those counts NaN (``has_feedback`` False). ``n_rejected_only``: false misses all of whose
    supporting documents that turn's annotators rejected (paper: 1 of 109)."""
    if _is_empty(contexts, labels):
        return _empty(ORIGIN_COLUMNS)
    where = "false_miss_origin"
    primary = str(_key(ctx, "primary", where))
    c = _contexts(contexts, ["no_gold", "doc_classes", "doc_ids", "dialogue"], where)
    lab = _labels(labels, ctx, where, support=True)
    j = _join(c, lab)
    seen_by_turn: dict[str, dict[str, str]] = {}  # task id -> doc id -> that turn's judgment
    convs: set[str] = set()
    if feedback is not None and len(feedback):
        convs = set(feedback["conversation_id"].astype(str))
        for tid, g in feedback.groupby(feedback["task_id"].astype(str)):
            st: dict[str, str] = {}
            for doc, jg in g.groupby("doc_id")["judgment"]:
                js = set(jg)
                st[doc] = "relevant" if "relevant" in js else ("rejected" if "rejected" in js else "unjudged")
            seen_by_turn[tid] = st
    rows = []
    for s in _slices(c):
        has_fb = bool(convs) and bool(set(c.loc[c["slice"] == s, "dialogue"].astype(str)) & convs)
        for rung in _ladder(c, ctx, s):
            g = j[(j["slice"] == s) & (j["set"] == rung) & (j["labeller"] == primary)]
            if g.empty:
                continue
            fm = g[g["no_gold"].to_numpy(bool) & (g["label"] == "yes").to_numpy()]
            counts = dict.fromkeys(ORIGINS, 0)
            rejected_only = 0
            for _, r in fm.iterrows():
                classes = _support_classes(r, where)
                docs = _positions(r["doc_ids"])
                support = [str(docs[int(p) - 1]) for p in _positions(r["support"])]
                seen = seen_by_turn.get(str(r["task_id"]), {}) if has_fb else None
                counts[_origin(classes, support, seen)] += 1
                if seen is not None and support and all(seen.get(d) == "rejected" for d in support):
                    rejected_only += 1
            n = len(fm)
            na = ("rejected", "shown", "never_seen")
            rows.append({"slice": s, "rung": rung, "labeller": primary, "n_false_miss": n,
                         **{f"n_{o}": (counts[o] if has_fb or o not in na else _NAN) for o in ORIGINS},
                         **{f"share_{o}": (counts[o] / n if n and (has_fb or o not in na) else _NAN) for o in ORIGINS},
                         "n_rejected_only": rejected_only if has_fb else _NAN, "has_feedback": has_fb})
    return pd.DataFrame(rows, columns=ORIGIN_COLUMNS) if rows else _empty(ORIGIN_COLUMNS)


# ---- (e) the enumerated comparisons --------------------------------------------------------------

CHANGED_ALL_COLUMNS = ["slice", "family", "comparison", "reader", "rung", "first", "second", "base_label",
                       "other_label", "est_base", "ci_low_base", "ci_high_base", "n_base", "est_other", "ci_low_other",
                       "ci_high_other", "n_other", "defined", "sign_change", "significance_change", "changed"]
PAIR_FAMILIES = ("auroc_rungs", "auroc_readers", "refusal_rungs", "refusal_readers", "kitagawa_composition",
                 "kitagawa_rate")
CELL_FAMILIES = ("auroc_chance", "refusal_gap", "contrast_2b_2c")
KITAGAWA_FAMILIES = ("kitagawa_composition", "kitagawa_rate")


def _nanmean(x) -> float:
    x = np.asarray(x, dtype=float)
    m = ~np.isnan(x)
    return float(x[m].mean()) if m.any() else _NAN


def _mean_diff(first, second) -> float:
    return _nanmean(second) - _nanmean(first)


def _auroc_minus_half(y, p) -> float:
    return _auroc_ranks(y, p) - 0.5


def _auroc_b_minus_a(y, a, b) -> float:
    return _auroc_ranks(y, b) - _auroc_ranks(y, a)


def _kitagawa_terms(y_from, s_from, y_to, s_to) -> tuple[float, float]:
    """(composition, rate) of refusal_to - refusal_from (``convrag.stats.decomposition.kitagawa``
    with population a = to, b = from, and its convention for a stratum absent from one
    population), strata sufficient (s = 1) and insufficient (s = 0); a row with a NaN outcome or
    stratum is not in its population. NaN when a population is empty. The bootstrap's fast path."""
    pops = []
    for y, s in ((y_to, s_to), (y_from, s_from)):
        y, s = np.asarray(y, dtype=float), np.asarray(s, dtype=float)
        k = ~np.isnan(y) & ~np.isnan(s)
        y, s = y[k], s[k]
        if y.size == 0:
            return _NAN, _NAN
        pops.append({v: (float(np.mean(s == v)), float(y[s == v].mean()) if np.any(s == v) else _NAN)
                     for v in (1.0, 0.0)})
    a, b = pops
    comp = rate = 0.0
    for v in (1.0, 0.0):
        (wa, ra), (wb, rb) = a[v], b[v]
        ra = ra if wa > 0 else (rb if wb > 0 else 0.0)
        rb = rb if wb > 0 else ra
        rate += (ra - rb) * (wa + wb) / 2.0
        comp += (wa - wb) * (ra + rb) / 2.0
    return comp, rate


def _kitagawa_composition(y_from, s_from, y_to, s_to) -> float:
    return _kitagawa_terms(y_from, s_from, y_to, s_to)[0]


def _kitagawa_rate(y_from, s_from, y_to, s_to) -> float:
    return _kitagawa_terms(y_from, s_from, y_to, s_to)[1]


def compared_rungs(ctx: dict, slice_: str, rungs: list[str]) -> list[str]:
    """The rungs ``changed_all`` compares on a slice: ``ctx.compared_rungs[slice]`` (the
    paper's RECOR tables show bm25_turn, bm25_hist, fusion and hybrid, not the dense component
    of the hybrid) in that order, else every rung."""
    given = (ctx.get("compared_rungs") or {}).get(slice_)
    if given is None:
        return rungs
    bad = [r for r in given if r not in rungs]
    if bad:
        raise ConfigError(f"worse_labels.changed_all: compared_rungs of slice {slice_} names {bad}, not rungs with "
                          f"contexts ({', '.join(rungs)}); config key worse_labels.slices.{slice_}.compared")
    return list(given)


def swap_pair(ctx: dict) -> tuple[str, str] | None:
    """The judge swap of §4.3 (25 of the 258 conclusions change when one content judge replaces
    the other): (first, second) of ``ctx.content_judges`` when it names two or more, else None."""
    judges = [str(x) for x in (ctx.get("content_judges") or [])]
    return (judges[0], judges[1]) if len(judges) >= 2 else None


def changed_all(contexts, labels, reads, ctx, *, base: str = "qrels", other: str | None = None) -> pd.DataFrame:
    """§4.3 ``changed_conclusions``: the comparisons an abstention study of this grid reports,
    each estimated under two labels (``base``: the qrels label; ``other``: the primary content
    labeller, or a second judge for the judge swap), each label over the contexts it keeps
    (the qrels label "all" vs "none", a content label "yes" vs "no", as Figure 3), and whether
    its conclusion changes (sign of two non-zero point estimates, or whether the 95% interval
    excludes 0). Not a multiple-comparison correction: the paper reports its comparisons
    uncorrected, the count indicating scale (§5, Limitations).

    The families are the ones §4.3 lists: "refusal rates and AUROC between retrievers and
    between readers; refusal gaps between insufficient and sufficient contexts and between
    retrieved insufficient contexts and the gold (the 2b/2c contrast); AUROC against chance;
    and, for each change of retriever, the composition and rate terms of a Kitagawa
    decomposition of the refusal change". The text gives the families and the total (258), not
    the grid each family runs over; here: both slices, the paper's rungs (RECOR: bm25_turn,
    bm25_hist, fusion, hybrid, ``compared_rungs``; MTRAG: its five) and its three readers. Per
    slice with K rungs and R readers:

    * pairwise families, each estimate second - first: ``auroc_rungs`` (per reader, rung
      pairs; AUROC of p(answerable), paired over turns) and ``auroc_readers`` (per rung, reader
      pairs; paired over contexts), ``refusal_rungs`` (per reader, rung pairs) and
      ``refusal_readers`` (per rung, reader pairs), refusal = UNANSWERABLE among the responses
      with a status line on the contexts INSUFFICIENT under the label: 2 R C(K,2) + 2 K C(R,2);
    * ``kitagawa_composition`` and ``kitagawa_rate`` (per reader, each change of retriever as
      ``abstention.kitagawa_table`` makes it: the first rung -> each later rung): the two terms
      of refusal_to - refusal_from over each rung's labelled contexts with a status line,
      strata sufficient / insufficient under the label (``_kitagawa_terms``; the turns of both
      rungs resampled together): 2 R (K - 1);
    * three families per reader x rung cell: ``auroc_chance`` (AUROC - 0.5: does the reader
      beat chance?), ``refusal_gap`` (refusal on insufficient minus on sufficient contexts) and
      ``contrast_2b_2c`` (refusal on the contexts the label calls insufficient minus with the
      gold documents over every turn, ``abstention.contrast_2b_2c``'s pooled contrast: the 2b/2c
      question, "does a reader refuse more when its retrieval failed than when it had the
      gold"): 3 R K.

    RECOR (K=4, R=3): 36 + 24 + 18 + 36 = 114; MTRAG (K=5, R=3): 60 + 30 + 24 + 45 = 159;
    together 273, not the paper's 258: no grid of these families that the text suggests gives
    258 (its text does not say which retriever pairs, readers or changes of retriever each
    family covers). The score detectors' gap (top1_z minus the reader, §4.3 "The wrong detector
    wins") is not one of the listed families and is not enumerated (``score_detectors`` reports
    it). Intervals: bootstrap with ``boot`` (dialogue clusters when unit dialogue), ``n_*`` the
    rows resampled."""
    from convrag.studies.worse_labels import abstention as ab

    d = ab._Data(contexts, labels, reads, ctx, where="changed_all", read_cols=("status", "p_answerable"))
    other = d.s.primary if other is None else str(other)
    for name, val in (("base", base), ("other", other)):
        if val != ab.QRELS and val not in d.s.labellers:
            raise ConfigError(f"changed_all: {name} = {val!r} is neither '{ab.QRELS}' nor one of ctx.labellers "
                              f"{list(d.s.labellers)}")

    def kept(v, lab):
        return d.suff(v, lab).notna().to_numpy()

    rows = []

    def add(key, results):
        (eb, lb, hb, nb), (eo, lo, ho, no) = results[base], results[other]
        defined = bool(np.isfinite(eb) and np.isfinite(eo))
        sign = defined and eb * eo < 0
        sig = defined and ab._excludes_zero(lb, hb) != ab._excludes_zero(lo, ho)
        rows.append({**key, "base_label": base, "other_label": other, "est_base": eb, "ci_low_base": lb,
                     "ci_high_base": hb, "n_base": nb, "est_other": eo, "ci_low_other": lo, "ci_high_other": ho,
                     "n_other": no, "defined": defined, "sign_change": bool(sign), "significance_change": bool(sig),
                     "changed": bool(sign or sig)})

    def stat(arrays, f, dia):
        r = d.statistic(arrays, f, dia)
        return r["estimate"], r["ci_low"], r["ci_high"], int(r["n"])

    def refused_where(v, lab, suff_value):
        return np.where(d.suff(v, lab).to_numpy() == suff_value, v["refused"].to_numpy(dtype=float), np.nan)

    for sl in d.slices():
        rungs, readers = compared_rungs(ctx, sl, d.rungs(sl)), d.readers(sl)
        views = {(r, q): d.view(sl, r, q) for r in rungs for q in readers}
        for q in readers:  # auroc_rungs
            for r1, r2 in combinations(rungs, 2):
                v1, v2 = views[(r1, q)], views[(r2, q)]
                res = {}
                for lab in (base, other):
                    t = v1.index[v1["p"].notna().to_numpy() & kept(v1, lab)].intersection(
                        v2.index[v2["p"].notna().to_numpy() & kept(v2, lab)], sort=False)
                    a, b = v1.loc[t], v2.loc[t]
                    res[lab] = stat([d.suff(a, lab).to_numpy().astype(int), a["p"].to_numpy(),
                                     d.suff(b, lab).to_numpy().astype(int), b["p"].to_numpy()],
                                    ab._auroc_diff_two_rungs, a["dialogue"].to_numpy())
                add({"slice": sl, "family": "auroc_rungs", "comparison": "auroc_rungs", "reader": q, "rung": None,
                     "first": r1, "second": r2}, res)
        for r in rungs:  # auroc_readers
            for q1, q2 in combinations(readers, 2):
                v1, v2 = views[(r, q1)], views[(r, q2)]
                res = {}
                for lab in (base, other):
                    keep = v1["p"].notna().to_numpy() & v2["p"].notna().to_numpy() & kept(v1, lab)
                    res[lab] = stat([d.suff(v1, lab).to_numpy()[keep].astype(int), v1["p"].to_numpy()[keep],
                                     v2["p"].to_numpy()[keep]], _auroc_b_minus_a, v1["dialogue"].to_numpy()[keep])
                add({"slice": sl, "family": "auroc_readers", "comparison": "auroc_readers", "reader": None, "rung": r,
                     "first": q1, "second": q2}, res)
        for q in readers:  # refusal_rungs: turns with either rung's value, resampled together
            for r1, r2 in combinations(rungs, 2):
                v1, v2 = views[(r1, q)], views[(r2, q)]
                turns = v1.index.union(v2.index, sort=False)
                dia = v1["dialogue"].reindex(turns)
                dia = dia.where(dia.notna(), v2["dialogue"].reindex(turns)).to_numpy()
                res = {}
                for lab in (base, other):
                    ra = pd.Series(refused_where(v1, lab, 0.0), index=v1.index).reindex(turns).to_numpy()
                    rb = pd.Series(refused_where(v2, lab, 0.0), index=v2.index).reindex(turns).to_numpy()
                    use = ~np.isnan(ra) | ~np.isnan(rb)
                    res[lab] = stat([ra[use], rb[use]], _mean_diff, dia[use])
                add({"slice": sl, "family": "refusal_rungs", "comparison": "refusal_rungs", "reader": q, "rung": None,
                     "first": r1, "second": r2}, res)
        for r in rungs:  # refusal_readers: the same contexts, two readers
            for q1, q2 in combinations(readers, 2):
                v1, v2 = views[(r, q1)], views[(r, q2)]
                res = {}
                for lab in (base, other):
                    ra, rb = refused_where(v1, lab, 0.0), refused_where(v2, lab, 0.0)
                    use = ~np.isnan(ra) | ~np.isnan(rb)
                    res[lab] = stat([ra[use], rb[use]], _mean_diff, v1["dialogue"].to_numpy()[use])
                add({"slice": sl, "family": "refusal_readers", "comparison": "refusal_readers", "reader": None,
                     "rung": r, "first": q1, "second": q2}, res)
        for q in readers:  # kitagawa: each change of retriever, first rung -> each later one
            for r2 in rungs[1:]:
                r1 = rungs[0]
                v1, v2 = views[(r1, q)], views[(r2, q)]
                turns = v1.index.union(v2.index, sort=False)
                dia = v1["dialogue"].reindex(turns)
                dia = dia.where(dia.notna(), v2["dialogue"].reindex(turns)).to_numpy()
                res = {f: {} for f in KITAGAWA_FAMILIES}
                for lab in (base, other):
                    arrays = [x.reindex(turns).to_numpy(dtype=float) for x in
                              (v1["refused"], d.suff(v1, lab), v2["refused"], d.suff(v2, lab))]
                    y1, s1, y2, s2 = (~np.isnan(a) for a in arrays)
                    use = (y1 & s1) | (y2 & s2)
                    for fam, f in zip(KITAGAWA_FAMILIES, (_kitagawa_composition, _kitagawa_rate)):
                        res[fam][lab] = stat([a[use] for a in arrays], f, dia[use])
                for fam in KITAGAWA_FAMILIES:
                    add({"slice": sl, "family": fam, "comparison": fam, "reader": q, "rung": None, "first": r1,
                         "second": r2}, res[fam])
        for q in readers:  # the three per-cell families
            for r in rungs:
                v = views[(r, q)]
                dia = v["dialogue"].to_numpy()
                key = {"slice": sl, "reader": q, "rung": r, "first": None, "second": None}
                res = {}
                for lab in (base, other):
                    keep = v["p"].notna().to_numpy() & kept(v, lab)
                    res[lab] = stat([d.suff(v, lab).to_numpy()[keep].astype(int), v["p"].to_numpy()[keep]],
                                    _auroc_minus_half, dia[keep])
                add({**key, "family": "auroc_chance", "comparison": "auroc_chance"}, res)
                res = {}
                for lab in (base, other):
                    ri, rs = refused_where(v, lab, 0.0), refused_where(v, lab, 1.0)
                    use = ~np.isnan(ri) | ~np.isnan(rs)
                    res[lab] = stat([rs[use], ri[use]], _mean_diff, dia[use])  # insufficient - sufficient
                add({**key, "family": "refusal_gap", "comparison": "refusal_gap"}, res)
                gold = d.read(sl, "gold", q, v.index)["refused"].to_numpy(dtype=float)  # 2b: every turn
                res = {}
                for lab in (base, other):
                    miss = d.suff(v, lab).to_numpy() == 0.0  # the retrieval failed under the label
                    a = np.where(miss, v["refused"].to_numpy(dtype=float), np.nan)
                    res[lab] = stat([gold, a], _mean_diff, dia)  # rung (failed) - gold (every turn)
                add({**key, "family": "contrast_2b_2c", "comparison": "contrast_2b_2c"}, res)
    return pd.DataFrame(rows, columns=CHANGED_ALL_COLUMNS)
