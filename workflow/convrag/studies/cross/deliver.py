"""Answering one cell of the cross grid: recorded or sharded delivery of a benchmark's tasks.

``recorded``: each task as the benchmark records it (its history, its question), one batched
``answer_tasks`` call. ``sharded``: a multi-hop question's shards (``labels["shards"]``) are the
user turns, revealed in order; turn t of every conversation is answered in one batch (retrieval
by the query policy over the shards so far, the reader seeing its own earlier replies), so
there are as many batches as the longest shard set. Every turn is recorded; the last one is
``final`` (the one scored, as lic_rag scores the final answer).
"""

from __future__ import annotations

from convrag.errors import DataError
from convrag.records import TurnTask


def _record(rec: dict, task: TurnTask, delivery: str, final: bool, n_turns: int) -> dict:
    return {**rec, "item_id": task.task_id, "delivery": delivery, "final": final, "n_turns": n_turns}


def answer(tasks: list[TurnTask], delivery: str, answer_fn) -> list[dict]:
    """``answer_fn(turn_tasks) -> records`` answers one batch (``convrag.rag.replay.answer_tasks``
    with the cell's retriever, reader and policy bound); one output record per answered turn."""
    if delivery == "recorded":
        return [_record(r, t, delivery, True, 1) for t, r in zip(tasks, answer_fn(tasks))]
    if delivery != "sharded":
        raise DataError(f"unknown delivery '{delivery}' (known: recorded, sharded)")
    for t in tasks:
        if not t.labels.get("shards"):
            raise DataError(f"task '{t.task_id}' has no shards: sharded delivery needs a multi-hop dataset's "
                            "tasks built with its shard sets")
    history = {t.task_id: [] for t in tasks}
    out = []
    for i in range(max((len(t.labels["shards"]) for t in tasks), default=0)):
        active = [t for t in tasks if len(t.labels["shards"]) > i]
        turn_tasks = [TurnTask(task_id=f"{t.task_id}#{i + 1}", benchmark=t.benchmark, conversation_id=t.task_id,
                               turn=i + 1, history=list(history[t.task_id]), question=t.labels["shards"][i],
                               reference_answers=t.reference_answers, gold_docs=t.gold_docs, rewrite=t.rewrite,
                               labels={k: v for k, v in t.labels.items() if k != "shards"})
                      for t in active]
        for t, r in zip(active, answer_fn(turn_tasks)):
            n = len(t.labels["shards"])
            out.append(_record(r, t, delivery, i + 1 == n, n))
            history[t.task_id] += [{"role": "user", "text": t.labels["shards"][i]},
                                   {"role": "assistant", "text": r["text"]}]
    return out
