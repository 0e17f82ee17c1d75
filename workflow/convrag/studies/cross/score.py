"""Scoring one benchmark's cells of the cross grid: retrieval, answers, judge, content label.

Every cell's final answers (the last turn of a sharded conversation) are scored with
* the retrieval measures (ir_measures, ``cross.measures``) of the ``recall_k`` passages the
  reader's retriever returned, over the items with qrels;
* the answer metrics (``cross.answer_metrics`` plus the benchmark's own,
  ``cross.benchmark_metrics.<benchmark>``) of the reader's answer against the reference answers;
  an unanswered turn scores 0 and is counted;
* the answer-correctness judge (``answer_correctness``: exact match by rule, else the LLM;
  correct = 1) over the items with reference answers;
* the content-sufficiency label of the worse_labels study (``worse_labels_content``, its prompt
  and parser) of the ``top_k`` passages the reader was shown, over the items with qrels:
  ``sufficient`` = 1 for yes (and partial, unless ``partial_insufficient``), 0 for no. Beside it
  ``no_gold`` (no qrels-relevant document among them): the qrels-derived label the content
  label checks. A context (item, shown documents) shared by several readers is judged once.

A judge reply no parser reads is recorded (``verdicts.jsonl``) with value NaN in its row and
counted (``n_missing`` in the long table), never guessed. The judge of a sharded conversation
gets the question whole: the shards are the conversation's way of asking it.
"""

from __future__ import annotations

import math

import pandas as pd

from convrag.errors import DataError

ROW_KEYS = ("benchmark", "domain", "conversation_id", "item_id", "retriever", "policy", "reader", "delivery")


def final_records(answer_files: list[dict], read) -> list[dict]:
    """The final-turn records of every answer file; ``answer_files`` = [{path, benchmark,
    retriever, policy, reader, delivery}], ``read(path)`` -> records."""
    out = []
    for f in answer_files:
        for i, r in enumerate(read(f["path"]), 1):
            if "item_id" not in r or "final" not in r:
                raise DataError(f"{f['path']}:{i}: an answer record needs 'item_id' and 'final' (convrag cross answer)")
            if r["final"]:
                out.append({**r, **{k: f[k] for k in ("benchmark", "retriever", "policy", "reader", "delivery")}})
    return out


def _base(r: dict, task) -> dict:
    return {"benchmark": r["benchmark"], "domain": task.labels.get("domain"), "conversation_id": task.conversation_id,
            "item_id": task.task_id, "retriever": r["retriever"], "policy": r["policy"], "reader": r["reader"],
            "delivery": r["delivery"]}


def _task(tasks: dict, r: dict, where: str):
    t = tasks.get(r["item_id"])
    if t is None:
        raise DataError(f"{where}: answer for task '{r['item_id']}', which is not in the benchmark's tasks")
    return t


def cell_key(r: dict) -> tuple:
    return tuple(r[k] for k in ("retriever", "policy", "reader", "delivery"))


def retrieval_rows(records: list[dict], tasks: dict, measures: list[str]) -> list[dict]:
    """One row per (cell, item with qrels, measure)."""
    from convrag.metrics.registry import retrieval_scores

    cells: dict[tuple, list[dict]] = {}
    for r in records:
        cells.setdefault(cell_key(r), []).append(r)
    rows = []
    for recs in cells.values():
        qrels = {r["item_id"]: tasks[r["item_id"]].gold_docs for r in recs if tasks[r["item_id"]].gold_docs}
        if not qrels or not measures:
            continue
        run = {r["item_id"]: {h["doc_id"]: float(h["score"]) for h in r.get("retrieved") or []} for r in recs}
        by_id = {r["item_id"]: r for r in recs}
        for rec in retrieval_scores(run, qrels, measures).to_dict("records"):
            r = by_id[rec["query_id"]]
            base = _base(r, tasks[r["item_id"]])
            rows += [{**base, "kind": "retrieval", "metric": m, "value": float(rec[m])} for m in measures]
    return rows


def answer_rows(records: list[dict], tasks: dict, metrics: list[str]) -> list[dict]:
    """One row per (cell, item with reference answers, metric); no answer scores 0."""
    import convrag.metrics.citation  # noqa: F401  (registers bleu1)
    import convrag.metrics.text  # noqa: F401  (registers rougeL)
    from convrag.metrics.registry import answer_metric

    fns = {m: answer_metric(m) for m in metrics}
    rows = []
    for r in records:
        t = tasks[r["item_id"]]
        if not t.reference_answers:
            continue
        pred = r.get("answer") if r.get("answered") else None
        base = _base(r, t)
        rows += [{**base, "kind": "answer", "metric": m, "value": float(fn(pred, list(t.reference_answers)))
                  if pred is not None else 0.0} for m, fn in fns.items()]
        rows.append({**base, "kind": "answer", "metric": "answered", "value": float(bool(pred is not None))})
    return rows


def judge_items(records: list[dict], tasks: dict) -> list[dict]:
    """Items of the answer-correctness judge: key, question, answers, prediction."""
    items = []
    for r in records:
        t = tasks[r["item_id"]]
        if t.reference_answers:
            items.append({"key": "|".join((*cell_key(r), r["item_id"])), "question": t.question,
                          "answers": list(t.reference_answers),
                          "prediction": r.get("answer") if r.get("answered") else None})
    return items


def judge_rows(records: list[dict], tasks: dict, verdicts: dict) -> list[dict]:
    rows = []
    for r in records:
        t = tasks[r["item_id"]]
        if not t.reference_answers:
            continue
        v = verdicts["|".join((*cell_key(r), r["item_id"]))]
        rows.append({**_base(r, t), "kind": "judge", "metric": "correct",
                     "value": math.nan if v["correct"] is None else float(v["correct"])})
    return rows


def shown_docs(r: dict, top_k: int) -> list[str]:
    return [h["doc_id"] for h in (r.get("retrieved") or [])[:top_k]]


def context_id(r: dict, docs: list[str]) -> str:
    """One id per (item, retriever, policy, delivery, shown documents): readers that were shown
    the same documents share the context and its label."""
    return "|".join((r["retriever"], r["policy"], r["delivery"], r["item_id"], ",".join(docs)))


def content_items(records: list[dict], tasks: dict, corpus: dict, top_k: int) -> list[dict]:
    """Distinct contexts of the items with qrels whose reader was shown passages."""
    items = {}
    for r in records:
        t = tasks[r["item_id"]]
        docs = shown_docs(r, top_k)
        if not t.gold_docs or not docs:
            continue
        cid = context_id(r, docs)
        if cid in items:
            continue
        missing = [d for d in docs if d not in corpus]
        if missing:
            raise DataError(f"cell {cell_key(r)}: retrieved doc id '{missing[0]}' is not in the corpus of "
                            f"domain '{t.labels.get('domain')}'")
        history = [] if r["delivery"] == "sharded" else [{"role": h["role"], "text": h["text"]} for h in t.history]
        items[cid] = {"item_id": cid, "question": t.question, "history": history,
                      "passages": [corpus[d].text for d in docs]}
    return list(items.values())


def content_rows(records: list[dict], tasks: dict, labels: dict, top_k: int,
                 partial_insufficient: bool) -> tuple[list[dict], list[dict]]:
    """(metric rows ``sufficient`` per cell, one context row per distinct context)."""
    rows, contexts = [], {}
    for r in records:
        t = tasks[r["item_id"]]
        docs = shown_docs(r, top_k)
        if not t.gold_docs or not docs:
            continue
        cid = context_id(r, docs)
        label = labels.get(cid)
        suff = math.nan if label is None else float(label == "yes" or (label == "partial" and not partial_insufficient))
        base = _base(r, t)
        rows.append({**base, "kind": "content", "metric": "sufficient", "value": suff})
        no_gold = not any(t.gold_docs.get(d, 0) > 0 for d in docs)
        contexts.setdefault(cid, {**{k: base[k] for k in ROW_KEYS if k != "reader"}, "context_id": cid,
                                  "no_gold": no_gold, "label": label, "n_shown": len(docs)})
    return rows, list(contexts.values())


def long_frame(rows: list[dict]) -> pd.DataFrame:
    cols = [*ROW_KEYS, "kind", "metric", "value"]
    return pd.DataFrame(rows, columns=cols)


def answer_accounting_path(answers_path: str) -> str:
    return answers_path.removesuffix(".jsonl") + ".accounting.json"


def sum_accounting(parts: list[dict]) -> dict:
    """Numeric leaves summed across the cells' accounting files (nested keys kept; ``wall_seconds``
    summed too: job-seconds, not wall time). Non-numeric leaves are dropped."""
    out: dict = {}
    for part in parts:
        for k, v in part.items():
            if isinstance(v, dict):
                out[k] = sum_accounting([out.get(k, {}), v]) if isinstance(out.get(k, {}), dict) else v
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = out.get(k, 0) + v
    return out


def merge_accounting(parts: list[dict]) -> dict:
    """The accounting of scoring chunks as one job's: numeric leaves summed (``sum_accounting``),
    each non-numeric leaf kept from the first chunk that has it."""
    out = sum_accounting(parts)

    def fill(dst: dict, src: dict) -> None:
        for k, v in src.items():
            if isinstance(v, dict):
                if isinstance(dst.get(k), dict):
                    fill(dst[k], v)
            elif k not in dst:
                dst[k] = v

    for part in parts:
        fill(out, part)
    return out
