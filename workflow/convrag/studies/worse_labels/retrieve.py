"""The ladder's searches: a query rung's queries (a shared query policy, convrag.rag.policies),
one batched search per rung and domain."""

from __future__ import annotations

# The names a query rung took before it used the shared query policies, and the policy each is.
RENAMED = {"turn": "current", "questions": "history"}


def check_query(policy: str, where: str) -> None:
    """A query rung's query: a shared query policy that needs no LLM (its old names say which)."""
    from convrag.errors import ConfigError
    from convrag.rag.policies import POLICIES

    if policy in RENAMED:
        raise ConfigError(f"{where}: '{policy}' is now the shared query policy '{RENAMED[policy]}' "
                          f"(convrag.rag.policies): write query: {RENAMED[policy]}")
    known = [p for p in POLICIES if not POLICIES.get(p).needs_llm and p != "none"]
    if policy not in known:
        raise ConfigError(f"{where}: unknown query policy '{policy}' (known: {', '.join(known)})")


def query_texts(tasks: list, policy: str) -> list[str]:
    """Each turn's query under a shared query policy that needs no LLM (``current``, ``history``,
    ``official_history``, ``rewrite``, ``standalone``); a turn without what its policy reads is an
    error naming it, never a silent fallback."""
    from convrag.rag.policies import make_queries
    from convrag.rag.retrieve import query_states

    check_query(policy, "query")
    return make_queries(policy, query_states(tasks)).queries


def search(retriever, tasks: list, queries: list[str], k: int) -> tuple[dict, list[dict]]:
    """(run: task id -> {doc: score}, query records) from one batched search."""
    res = retriever.search(queries, k)
    run, records = {}, []
    for t, q, hits in zip(tasks, queries, res):
        run[t.task_id] = {d: float(s) for d, s in hits}
        records.append({"task_id": t.task_id, "query": q, "hits": len(hits)})
    return run, records
