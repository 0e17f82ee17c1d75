"""A multi-hop dataset (HippoRAG's sets, the mini world) as TurnTasks of the cross grid.

Each question becomes one single-turn task (``recorded`` delivery: the question whole): its gold
answers are the reference answers, its supporting passages the qrels (relevance 1). When the
grid delivers it sharded, the question's shard set (``convrag lic-rag shard``) rides along in
``labels["shards"]`` (texts in shard-id order), and only questions whose shard set passed enter
the grid, so both deliveries answer the same questions; the report counts the others.
"""

from __future__ import annotations

from convrag.errors import DataError
from convrag.records import Question, ShardSet, TurnTask


def multihop_tasks(questions: list[Question], shard_sets: list[ShardSet] | None, domain: str = "all",
                   where: str = "shards") -> tuple[list[TurnTask], dict]:
    """(tasks, report). ``shard_sets`` None: recorded delivery only, every question enters."""
    by_q = None
    if shard_sets is not None:
        by_q = {}
        for s in shard_sets:
            if s.qid in by_q:
                raise DataError(f"{where}: question '{s.qid}' has two shard sets")
            by_q[s.qid] = s
        known = {q.qid for q in questions}
        unknown = sorted(set(by_q) - known)
        if unknown:
            raise DataError(f"{where}: shard set of unknown question '{unknown[0]}' ({len(unknown)} unknown)")
    tasks, excluded = [], {"no_shard_set": [], "failed_checks": []}
    for q in questions:
        labels = {"domain": domain, "hops": q.hops, "type": q.type}
        if by_q is not None:
            s = by_q.get(q.qid)
            if s is None:
                excluded["no_shard_set"].append(q.qid)
                continue
            if not s.passed:
                excluded["failed_checks"].append(q.qid)
                continue
            texts = [str(x["text"]).strip() for x in sorted(s.shards, key=lambda x: int(x["shard_id"]))]
            if not texts or not all(texts):
                raise DataError(f"{where}: question '{q.qid}' has an empty shard")
            labels.update(shards=texts, shard_method=s.method)
        tasks.append(TurnTask(task_id=q.qid, benchmark=q.dataset, conversation_id=q.qid, turn=1, history=[],
                              question=q.question, reference_answers=list(q.answers),
                              gold_docs={d: 1 for d in q.supporting_doc_ids}, rewrite=q.question, labels=labels))
    report = {"questions": len(questions), "tasks": len(tasks),
              "excluded": {k: len(v) for k, v in excluded.items()},
              "excluded_ids": {k: v for k, v in excluded.items() if v}}
    return tasks, report
