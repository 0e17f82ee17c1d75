"""The paper's conversational RAG framework (CORAL, section 4): P_k = R(f(H_k), q_k), then an
optional post-retrieval compression f_p(P_k) by an LLM before the generator sees the passages.

Each history strategy f builds its OWN retrieval query from the history H_k and the current
question q_k (:func:`retrieval_query`), so the passages differ by strategy:

- ``raw_context``: every earlier turn (questions and responses) verbatim, then the question;
- ``last_response``: the last earlier response, then the question;
- ``rewrite``: the standalone rewrite alone (by the configured rewriting model, or the golden
  rewrite as an option; the caller reads it from that retrieval run: its query IS the rewrite);
- ``llm_summary``: the LLM summary of the earlier turns, then the question.

``max_history_turns`` (Figure 4's m) cuts the history in the query as in the prompt. Query
texts are the turns' own words joined by newlines: no prompt wording enters a query.

f_p (:func:`compress`): each retrieved passage is rewritten by an LLM to what bears on the
turn's retrieval query, in ONE batched call; passages keep their ids, titles and numbers, so the
generator's ``[n]`` citations still name the passage retrieved n-th. An empty compression keeps
the passage's own text and is counted (never dropped: that would renumber the citations).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from convrag.errors import ConfigError, DataError
from convrag.records import TurnTask

__all__ = ["RETRIEVAL_MODES", "REWRITE_SOURCES", "asked_rewrites", "compress", "compression_label", "retrieval_label",
           "retrieval_queries", "retrieval_query"]

RETRIEVAL_MODES = ("strategy", "shared")  # each strategy's own query | one configured run for all
REWRITE_SOURCES = ("model", "golden")     # the rewrite strategy's rewrite: coral.rewrite.model | golden


def _kept(task: TurnTask, max_history_turns: int | None) -> list[dict]:
    from convrag.studies.coral.generate import keep_last_turns

    return keep_last_turns(task.history, max_history_turns)


def retrieval_query(task: TurnTask, strategy: str, *, summary: str | None = None, rewrite: str | None = None,
                    max_history_turns: int | None = None) -> str:
    """f(H_k) + q_k of one turn under ``strategy`` (module doc). ``rewrite`` is the rewrite the
    rewrite strategy searches with; ``summary`` the llm_summary strategy's summary ("" = none)."""
    if strategy == "rewrite":
        if not (rewrite or "").strip():
            raise DataError(f"coral framework: task {task.task_id!r} has no rewrite to retrieve with")
        return rewrite.strip()
    kept = _kept(task, max_history_turns)
    if strategy == "raw_context":
        parts = [h["text"].strip() for h in kept]
    elif strategy == "last_response":
        parts = [h["text"].strip() for h in kept if h["role"] != "user"][-1:]
    elif strategy == "llm_summary":
        if kept and summary is None:
            raise ConfigError(f"coral framework: task {task.task_id!r} has earlier turns but no summary")
        parts = [summary.strip()] if kept and summary and summary.strip() else []
    else:
        raise ConfigError(f"coral framework: strategy {strategy!r} has no retrieval query")
    return "\n".join([p for p in parts if p] + [task.question.strip()])


def retrieval_queries(tasks: Sequence[TurnTask], strategy: str, *, summaries: Mapping[str, str] | None = None,
                      rewrites: Mapping[str, str] | None = None, max_history_turns: int | None = None) -> list[str]:
    """:func:`retrieval_query` of every task (``summaries`` / ``rewrites``: task id -> text)."""
    return [retrieval_query(t, strategy, summary=(summaries or {}).get(t.task_id),
                            rewrite=(rewrites or {}).get(t.task_id), max_history_turns=max_history_turns)
            for t in tasks]


def asked_rewrites(tasks: Sequence[TurnTask], queries: Mapping[str, str]) -> list[TurnTask]:
    """The rewrite strategy's tasks with the rewrite they retrieved with (the rewriting model's,
    from its run's queries) as the rewrite the generator is asked; a task without one keeps its own."""
    import dataclasses

    return [dataclasses.replace(t, rewrite=queries[t.task_id]) if (queries.get(t.task_id) or "").strip() else t
            for t in tasks]


def retrieval_label(strategy: str, mode: str, *, rewrite_source: str = "model", rewrite_model: str | None = None,
                    summary_model: str | None = None, shared_run: str | None = None) -> str:
    """What a Table 3 row retrieved with (its ``retrieval`` column)."""
    if mode not in RETRIEVAL_MODES:
        raise ConfigError(f"coral framework: retrieval mode {mode!r} is not one of {', '.join(RETRIEVAL_MODES)}")
    if mode == "shared":
        return f"shared:{shared_run}"
    if strategy == "rewrite":
        return "rewrite:golden" if rewrite_source == "golden" else f"rewrite:{rewrite_model}"
    if strategy == "llm_summary":
        return f"llm_summary:{summary_model}"
    return strategy


COMPRESS_MAX_TOKENS = 128  # a compressed passage's budget when none is named (the schema's default too)


def compression_label(model: str | None) -> str:
    """The ``compression`` column: the f_p model, or "none"."""
    return model or "none"


def compress(engine, queries: Mapping[str, str], passages_by_task: Mapping[str, Sequence[Mapping]], prompts: Mapping,
             sampling, *, seed: int = 0, desc: str | None = "coral compression") -> tuple[dict, dict]:
    """f_p: every shown passage compressed with respect to its turn's retrieval query (``queries``:
    task id -> query), one request per passage in ONE generate call. Returns ``(task id ->
    passages with compressed text, report)``; a passage keeps ``id``, ``title`` and gets
    ``original_text``. Report: ``passages``, ``compressed``, ``empty_kept`` (+ task ids),
    ``truncated``, ``cached``, ``chars_before``, ``chars_after``."""
    from convrag.llm.types import Request

    for k in ("system", "user"):
        if not isinstance(prompts.get(k), str):
            raise ConfigError(f"coral compression prompts: missing {k!r}")
    asked = []
    for tid, ps in passages_by_task.items():
        if tid not in queries:
            raise DataError(f"coral compression: no retrieval query for task {tid!r}")
        for i, p in enumerate(ps):
            user = prompts["user"].format(query=queries[tid], title=p.get("title") or "", text=p["text"])
            msgs = [{"role": "system", "content": prompts["system"].strip()}, {"role": "user", "content": user}]
            asked.append((tid, i, Request(messages=msgs, sampling=sampling, seed=seed)))
    replies = engine.generate([r for _, _, r in asked], desc=desc) if asked else []
    if len(replies) != len(asked):
        raise DataError(f"coral compression: the engine returned {len(replies)} responses for {len(asked)} requests")
    out = {tid: [dict(p) for p in ps] for tid, ps in passages_by_task.items()}
    empty = []
    for (tid, i, _), r in zip(asked, replies):
        p = out[tid][i]
        text = (r.text or "").strip()
        p["original_text"] = p["text"]
        if text:
            p["text"] = text
        else:
            empty.append(tid)
    report = {"passages": len(asked), "compressed": len(asked) - len(empty), "empty_kept": len(empty),
              "empty_tasks": sorted(set(empty)), "truncated": sum(1 for r in replies if r.finish_reason == "length"),
              "cached": sum(1 for r in replies if r.cached),
              "chars_before": sum(len(p["original_text"]) for ps in out.values() for p in ps),
              "chars_after": sum(len(p["text"]) for ps in out.values() for p in ps)}
    return out, report
