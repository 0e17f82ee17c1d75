"""Table 2's conversational retrieval beyond one query string per turn, over the dense index
the ad-hoc runs already built (passages stay embedded by the frozen ad-hoc encoder):

- **session encoders** (KD-ANCE, Conv-ANCE; ``convrag.retrieval.conv_dense`` trains them): the
  whole session (question + earlier turns, most recent first) is ONE query embedding;
- **LLM4CS** (Mao et al. 2023, "Large Language Models Know Your Contextual Search Intent"): n
  rewrites sampled from an LLM, each embedded by the ad-hoc encoder, their mean (re-normalised)
  is the query; the paper's "REW" prompting with "Mean" aggregation. Its "RAR" prompting (a
  rewrite followed by a hypothetical response) is not built.

Both write the same run, queries and accounting files as ``convrag retrieve``, so the shared
scoring step reads them like any other run.
"""

from __future__ import annotations

import numpy as np

from convrag.errors import ConfigError
from convrag.records import TurnTask

SESSION_PREFIX = "session_"
LLM4CS = "llm4cs"


def session_policy(encoder: str) -> str:
    """The run's policy name (and file stem) of a session encoder: ``session_<name>``."""
    return SESSION_PREFIX + encoder


def session_runs(tasks: list[TurnTask], retriever, model_dir, k: int, policy: str, max_turns: int | None = None,
                 batch_size: int = 32) -> tuple[dict, list[dict], dict]:
    """(run, query records, counts) of one trained session encoder searched in ``retriever``'s
    (a DenseRetriever) index."""
    from convrag.retrieval.conv_dense import encode_sessions, session_text

    sessions = [session_text(t.history, t.question, max_turns) for t in tasks]
    res = retriever.search_vectors(encode_sessions(model_dir, sessions, batch_size=batch_size), k)
    return _run(tasks, res, policy, [{"query": s} for s in sessions], 0)


def _check_n(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ConfigError(f"llm4cs: n must be a positive integer, got {n!r}")


def llm4cs_rewrites(engine, tasks: list[TurnTask], prompts: dict, n: int, sampling, seed: int = 0
                    ) -> tuple[list[list[str]], int]:
    """n sampled rewrites per turn in one batched call (``sample_index`` 0..n-1 makes the samples
    distinct and each one cached); an empty sample falls back to the question (counted)."""
    from convrag.llm.types import Request
    from convrag.rag.policies import rewrite_messages
    from convrag.rag.retrieve import query_states

    _check_n(n)
    states = query_states(tasks)
    reqs = [Request(messages=rewrite_messages(s, prompts), sampling=sampling, seed=seed, sample_index=i)
            for s in states for i in range(n)]
    replies = engine.generate(reqs, desc="LLM4CS rewrites") if reqs else []
    out, fallbacks = [], 0
    for j, s in enumerate(states):
        texts = []
        for r in replies[j * n:(j + 1) * n]:
            text = r.text.strip().strip('"').strip()
            fallbacks += not text
            texts.append(text or s.user_turns[-1])
        out.append(texts)
    return out, fallbacks


def mean_embeddings(groups: list[np.ndarray]) -> np.ndarray:
    """LLM4CS's "Mean" aggregation: per turn, the mean of its rewrites' (normalised) embeddings,
    L2-normalised again so that inner product stays cosine."""
    if not groups:
        return np.zeros((0, 0), dtype=np.float32)
    means = np.stack([g.mean(axis=0) for g in groups]).astype(np.float32)
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    return means / np.where(norms > 0, norms, 1.0)


def llm4cs_runs(tasks: list[TurnTask], retriever, rewrites: list[list[str]], k: int, fallbacks: int = 0
                ) -> tuple[dict, list[dict], dict]:
    """(run, query records, counts): the mean embedding of each turn's rewrites searched in
    ``retriever``'s (a DenseRetriever) index; all rewrites are embedded in one batch."""
    flat = [r for rs in rewrites for r in rs]
    emb = retriever.encode_queries(flat) if flat else np.zeros((0, 0), dtype=np.float32)
    groups, i = [], 0
    for rs in rewrites:
        groups.append(emb[i:i + len(rs)])
        i += len(rs)
    res = retriever.search_vectors(mean_embeddings(groups), k) if groups else []
    return _run(tasks, res, LLM4CS, [{"query": rs[0], "rewrites": rs} for rs in rewrites], fallbacks)


def _run(tasks, res, policy: str, queries: list[dict], fallbacks: int) -> tuple[dict, list[dict], dict]:
    run, records = {}, []
    for t, q, hits in zip(tasks, queries, res):
        run[t.task_id] = {d: float(s) for d, s in hits}
        records.append({"task_id": t.task_id, "policy": policy, **q, "hits": len(hits)})
    counts = {"tasks": len(tasks), "policy_fallbacks": fallbacks,
              "empty_rankings": sum(1 for r in records if r["hits"] == 0)}
    return run, records, counts
