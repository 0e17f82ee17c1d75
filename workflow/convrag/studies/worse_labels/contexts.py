"""The contexts every worse_labels analysis reads: one per (turn, context set).

A context is what a reader sees: the top ``k`` documents of a ladder rung's run for the turn, the
turn's gold documents (``gold``: the paper's setting 2b), nothing (``none``), or another
dialogue's context of the control rung in the same domain with the turn's own gold removed
(``control``: the negative control; the dialogue is the next one in sorted order, its turn of the
same index or its last). Per context the table records what the labels and analyses need:

* the qrels label: ``all`` (every gold document of the turn in the context), ``part`` (some),
  ``none`` (no gold: what an abstention study would call "unanswerable"), and ``no_gold``;
* ``has_copy``: a non-gold document of the context is a near-verbatim copy of a gold document
  of the turn (``convrag.metrics.overlap.is_copy``: the judge-free copy count);
* ``doc_classes`` (one per document, the false-miss evidence classes of the paper's section
  4.2): ``gold``; else the benchmark's own ground truth where it has one (the generated world's
  ``labels.unjudged_answer_docs``: same_thread / near_duplicate / other_chunk / other_turn_gold,
  and its same-thread negatives); else ``near_duplicate`` (a near-duplicate of a gold document
  of the turn by word 8-gram containment >= .8 alone, as §4.2 defines the evidence class; the
  copy count's Jaccard >= .7 alternative makes ``has_copy``, not this class), ``other_turn_gold``
  (gold of another turn of the dialogue), ``other_chunk`` (same page as a gold document: equal
  id once a trailing ``#chunk<n>`` (the world's chunks) or ``<n>.txt`` (BRIGHT's numbered page
  files) is removed), ``same_thread`` (a StackExchange document of the dialogue's thread:
  the id holds the conversation id, RECOR's ``<domain>_<conv>_doc_<n>``), ``other``;
* retrieval-score features ``top1``, ``margin`` (rank 1 minus rank 2) and ``top1_z`` (top1
  z-normalised within domain and rung), and the turn's nDCG@10 of the full run (ir_measures);
* ``world_label`` (yes / no) and ``world_support`` (the 1-based positions of those documents),
  where the benchmark knows every answer-bearing document (the generated world): a context is
  sufficient when it holds a gold or planted answer document.

``items.jsonl`` holds what readers and judges are shown (question, history, passage texts in
context order, the reference answer), keyed by ``context_id`` = ``<set>|<task_id>``.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
import pandas as pd

from convrag.errors import DataError

CONTEXT_COLUMNS = ("context_id", "slice", "domain", "dialogue", "task_id", "turn", "set", "doc_ids", "n_gold",
                   "n_gold_in", "qrels_label", "no_gold", "has_copy", "doc_classes", "top1", "margin", "top1_z",
                   "ndcg10", "world_label", "world_support")


def context_id(set_: str, task_id: str) -> str:
    return f"{set_}|{task_id}"


def select_tasks(tasks: list, answerability: list[str] | None) -> list:
    """The audited turns: those with gold (qrels), and with a listed answerability if given."""
    out = [t for t in tasks if t.gold_docs]
    if answerability is not None:
        out = [t for t in out if t.labels.get("answerability") in answerability]
    return out


_PAGE = re.compile(r"(#chunk\d+|\d+\.txt)$")  # the world's chunks; BRIGHT's numbered page files


def page_key(doc_id: str) -> str:
    return _PAGE.sub("", doc_id)


def doc_class(doc: str, task, texts: dict, other_gold: set, copy_of_gold) -> str:
    if doc in task.gold_docs:
        return "gold"
    world = task.labels.get("unjudged_answer_docs")
    if world is not None:
        if doc in world:
            return world[doc]
        if doc in set(task.labels.get("unjudged_negative_docs") or ()):
            return "same_thread"
    if copy_of_gold(doc):
        return "near_duplicate"
    if doc in other_gold:
        return "other_turn_gold"
    if page_key(doc) != doc and page_key(doc) in {k for g in task.gold_docs for k in (g, page_key(g))}:
        return "other_chunk"
    conv = task.conversation_id.split("/")[-1]
    if conv and re.search(rf"(^|_){re.escape(conv)}_doc_", doc):
        return "same_thread"
    return "other"


def _ndcg10(run: dict, tasks: list) -> dict[str, float]:
    import ir_measures

    qrels = [ir_measures.Qrel(t.task_id, d, int(r)) for t in tasks for d, r in t.gold_docs.items()]
    scored = [ir_measures.ScoredDoc(q, d, float(s)) for q, hits in run.items() for d, s in hits.items()]
    out = {t.task_id: 0.0 for t in tasks}
    for m in ir_measures.iter_calc([ir_measures.nDCG @ 10], qrels, scored):
        out[m.query_id] = float(m.value)
    return out


def build_contexts(slice_: str, tasks: list, runs: dict[str, dict], texts: dict[str, str], top_k: int,
                   control: str | None) -> tuple[pd.DataFrame, list[dict]]:
    """(contexts table, reader/judge items). ``runs``: rung -> {task id -> {doc: score}} over all
    domains; ``texts``: doc id -> text of every document a context shows."""
    from convrag.metrics.overlap import CONTAINMENT_THRESHOLD, is_copy

    by_dialogue = defaultdict(list)
    for t in tasks:
        by_dialogue[t.conversation_id].append(t)
    rows, items = [], []
    copy_cache: dict[str, dict[str, tuple[bool, bool]]] = {}

    def copy_checker(task, containment_only: bool = False):
        """doc -> is it a copy of a gold document of the turn: the copy count's rule (word 8-gram
        containment >= .8 or character 5-gram Jaccard >= .7, §4.2 "Without any judge"), or with
        ``containment_only`` the evidence class's (containment >= .8, §4.2 "What a false miss
        contains")."""
        golds = {g: texts[g] for g in task.gold_docs if g in texts}

        def check(doc):
            if doc not in copy_cache.setdefault(task.task_id, {}):
                m = is_copy(texts[doc], golds) if doc in texts and golds else None
                contained = bool(m and m.is_copy and m.containment >= CONTAINMENT_THRESHOLD - 1e-12)
                copy_cache[task.task_id][doc] = (bool(m and m.is_copy), contained)
            return copy_cache[task.task_id][doc][1 if containment_only else 0]
        return check

    def text(doc, where):
        if doc not in texts:
            raise DataError(f"{where}: document '{doc}' is not in the domain's corpus")
        return texts[doc]

    def add(task, set_, docs, hits=None, ndcg=np.nan):
        other_gold = {d for o in by_dialogue[task.conversation_id] if o.task_id != task.task_id for d in o.gold_docs}
        copies = copy_checker(task)
        classes = [doc_class(d, task, texts, other_gold, copy_checker(task, containment_only=True)) for d in docs]
        n_in = sum(1 for d in docs if d in task.gold_docs)
        scores = list(hits.values()) if hits else []
        world = task.labels.get("unjudged_answer_docs")
        answer_docs = set(task.gold_docs) | set(world or ())
        rows.append(dict(
            context_id=context_id(set_, task.task_id), slice=slice_, domain=task.labels.get("domain", ""),
            dialogue=task.conversation_id, task_id=task.task_id, turn=int(task.turn), set=set_, doc_ids=list(docs),
            n_gold=len(task.gold_docs), n_gold_in=n_in,
            qrels_label="none" if n_in == 0 else ("all" if n_in == len(task.gold_docs) else "part"),
            no_gold=n_in == 0, has_copy=any(c != "gold" and copies(d) for d, c in zip(docs, classes)),
            doc_classes=classes, top1=scores[0] if scores else np.nan,
            margin=scores[0] - scores[1] if len(scores) > 1 else np.nan, top1_z=np.nan, ndcg10=ndcg,
            world_label=None if world is None else ("yes" if answer_docs & set(docs) else "no"),
            world_support=[] if world is None else [i + 1 for i, d in enumerate(docs) if d in answer_docs]))
        items.append(dict(context_id=context_id(set_, task.task_id), slice=slice_, set=set_, task_id=task.task_id,
                          question=task.question, history=task.history,
                          passages=[text(d, f"{set_}|{task.task_id}") for d in docs],
                          reference=(task.reference_answers or [""])[0]))

    for rung, run in runs.items():
        ndcg = _ndcg10(run, tasks)
        for t in tasks:
            hits = dict(sorted(run.get(t.task_id, {}).items(), key=lambda kv: (-kv[1], kv[0]))[:top_k])
            add(t, rung, list(hits), hits, ndcg[t.task_id])
    for t in tasks:
        # the gold passages the corpus has: all of them unless the benchmark allows missing gold
        # (a corpus sample; convrag.data.gold counts them and the captions say so)
        add(t, "gold", [d for d in t.gold_docs if d in texts])
        add(t, "none", [])
    if control is not None:
        dialogues = defaultdict(list)  # domain -> sorted dialogue ids
        for conv, ts in sorted(by_dialogue.items()):
            dialogues[ts[0].labels.get("domain", "")].append(conv)
        for t in tasks:
            convs = dialogues[t.labels.get("domain", "")]
            if len(convs) < 2:
                continue  # a domain of one dialogue has no control; counted by its absence
            other = by_dialogue[convs[(convs.index(t.conversation_id) + 1) % len(convs)]]
            o = next((x for x in other if x.turn == t.turn), other[-1])
            hits = sorted(runs[control].get(o.task_id, {}).items(), key=lambda kv: (-kv[1], kv[0]))
            add(t, "control", [d for d, _ in hits if d not in t.gold_docs][:top_k])
    df = pd.DataFrame(rows, columns=list(CONTEXT_COLUMNS))
    ret = df["set"].isin(list(runs))
    grp = df[ret].groupby(["domain", "set"])["top1"]
    df.loc[ret, "top1_z"] = (df.loc[ret, "top1"] - grp.transform("mean")) / grp.transform("std", ddof=0).replace(0, np.nan)
    return df, items
