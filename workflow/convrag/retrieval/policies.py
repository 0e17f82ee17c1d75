"""Query policies: what a conversational RAG system sends to the retriever at each turn.

These are the paper's policies: HISTORY (``history``) concatenates every user turn so far,
so information given in earlier shards keeps steering retrieval; CURRENT (``current``) uses
only the latest user turn. ``none`` is for single-turn conditions (FULL / CONCAT), where the
one user message is the query, so it equals ``current``. A policy is independent of the
retriever: it maps conversation state to a query string.
"""

from __future__ import annotations

from convrag.errors import ConfigError, DataError

POLICIES = ("history", "current", "none")


def make_query(policy: str, user_turns: list[str]) -> str:
    if policy not in POLICIES:
        raise ConfigError(f"unknown query policy '{policy}' (known: {', '.join(POLICIES)})")
    if not user_turns:
        raise DataError(f"query policy '{policy}': no user turns yet")
    if policy == "history":
        return "\n".join(user_turns)
    return user_turns[-1]
