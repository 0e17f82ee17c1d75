"""The ladder's searches: the query of a turn per mode, one batched search per rung and domain."""

from __future__ import annotations

from convrag.errors import DataError

QUERY_MODES = ("turn", "questions", "official_history", "rewrite", "standalone")


def query_text(task, mode: str) -> str:
    """turn = the current turn (BM25-turn); questions = every user turn so far, one a line;
    official_history = the RETECO baseline's turn + "Conversation History:" block (BM25-hist,
    ``convrag.data.recor.official_query``); rewrite = the shipped standalone rewrite;
    standalone = the generated world's resolved question. A turn without what its mode reads is
    an error naming it, never a silent fallback."""
    from convrag.data.recor import official_query

    if mode == "turn":
        return task.question
    if mode == "questions":
        return "\n".join([*(h["text"] for h in task.history if h["role"] == "user"), task.question])
    if mode == "official_history":
        if "official_history" not in task.labels:
            raise DataError(f"task {task.task_id}: query 'official_history' needs labels.official_history "
                            "(RECOR's conversation_history); this benchmark has none")
        return official_query(task, with_history=True)
    if mode == "rewrite":
        if not task.rewrite:
            raise DataError(f"task {task.task_id}: query 'rewrite' needs the benchmark's shipped rewrite")
        return task.rewrite
    if mode == "standalone":
        q = task.labels.get("standalone_query")
        if not q:
            raise DataError(f"task {task.task_id}: query 'standalone' needs labels.standalone_query")
        return q
    raise DataError(f"unknown query mode '{mode}' (known: {', '.join(QUERY_MODES)})")


def search(retriever, tasks: list, queries: list[str], k: int) -> tuple[dict, list[dict]]:
    """(run: task id -> {doc: score}, query records) from one batched search."""
    res = retriever.search(queries, k)
    run, records = {}, []
    for t, q, hits in zip(tasks, queries, res):
        run[t.task_id] = {d: float(s) for d, s in hits}
        records.append({"task_id": t.task_id, "query": q, "hits": len(hits)})
    return run, records
