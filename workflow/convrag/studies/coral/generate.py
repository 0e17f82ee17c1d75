"""CORAL generation with citations (Cheng et al. 2024, arXiv 2410.23090, section 5.2, Table 3).

The model answers the current question of a conversation from numbered passages and cites
them with ``[n]`` markers (n = the passage's number in the list shown). The paper compares four
ways of giving it the conversation so far (``STRATEGIES``), and reports the generator's input
tokens for each, since shorter histories are the point of the comparison:

1. ``raw_context``: every earlier turn verbatim (questions and golden responses), then the
   current question;
2. ``last_response``: every earlier question, but only the LAST golden response (placed after
   the last earlier question, where it was said);
3. ``rewrite``: no history; the current question is replaced by its standalone rewrite
   (``TurnTask.rewrite``: the golden rewrite offline, i.e. the full question of the
   construction). A task without a rewrite keeps its question: counted as a fallback;
4. ``llm_summary``: an LLM summary of the earlier turns, then the current question. The
   summaries are one batched call over every task with earlier turns (:func:`summaries`);
   first turns get "" without a call. The engine caches them, so a rerun pays nothing.

``max_history_turns`` (m) keeps only the last m earlier turns (a turn = a user message and
the replies after it) in every strategy that shows history, including the summariser's input:
the paper's Figure 4 sweep at turn 12 (m in 2, 4, 6, 8, 10). ``None`` keeps all.

Why the history is text inside the user message and not chat turns (unlike
``convrag.rag.replay``): the summary and last-response strategies have no natural chat form,
and one layout for all four makes their input-token counts comparable. Input tokens are the
backend's ``Response.prompt_tokens`` (every backend reports them, cached answers too).

No input truncation happens here: the paper's 32k-token input limit is the model's context
(``max_model_len`` of the registry); a longer prompt fails in the backend, loudly.

All wording lives in ``resources/prompts/coral/generate.yaml``; this module keeps none.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence


from convrag.resources import REPO_ROOT
from convrag.errors import ConfigError, DataError
from convrag.llm.types import Request, Sampling
from convrag.records import Passage, TurnTask

__all__ = [
    "at_turn",
    "PAPER_MAX_INPUT_TOKENS",
    "PAPER_TEMPERATURE",
    "PAPER_TOP_P",
    "PROMPT_FILE",
    "STRATEGIES",
    "answer",
    "generation_requests",
    "history_block",
    "keep_last_turns",
    "load_prompts",
    "parse_summary",
    "shown_passages",
    "summaries",
    "uses_rewrite_fallback",
]

STRATEGIES = ("raw_context", "last_response", "rewrite", "llm_summary")
HISTORY_STRATEGIES = ("raw_context", "last_response", "llm_summary")  # the ones m applies to
PROMPT_FILE = REPO_ROOT / "resources" / "prompts" / "coral" / "generate.yaml"

# The paper's generation settings (section 5.2), for configs to cite; offline runs may decode
# greedily. The output length is not stated in the paper, so it is the config's choice.
PAPER_TOP_P = 0.9
PAPER_TEMPERATURE = 1.0
PAPER_MAX_INPUT_TOKENS = 32768

_TOP_KEYS = ("system", "passage", "passage_untitled", "no_passages", "user_line", "assistant_line", "user")


# ---------------------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------------------


def load_prompts(path: str | Path | None = None) -> dict:
    """The prompt file (default :data:`PROMPT_FILE`), checked so that a missing key fails
    before any model call."""
    from convrag.resources import read_prompt_file

    return read_prompt_file(path if path is not None else PROMPT_FILE, check_prompts, "CORAL generation prompts")


def check_prompts(prompts: Any, where: str = "prompts") -> None:
    if not isinstance(prompts, Mapping):
        raise ConfigError(f"{where}: expected a mapping of prompts")
    for k in _TOP_KEYS:
        if not isinstance(prompts.get(k), str):
            raise ConfigError(f"{where}: missing {k!r}")
    sections = prompts.get("history_section")
    if not isinstance(sections, Mapping) or not all(isinstance(sections.get(s), str) for s in HISTORY_STRATEGIES):
        raise ConfigError(f"{where}: history_section needs a template for each of {', '.join(HISTORY_STRATEGIES)}")
    summary = prompts.get("summary")
    if not isinstance(summary, Mapping) or not all(isinstance(summary.get(k), str) for k in ("system", "user")):
        raise ConfigError(f"{where}: summary needs 'system' and 'user'")


def _check_strategy(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise ConfigError(f"coral generation: strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")


def _check_m(max_history_turns: int | None) -> None:
    if max_history_turns is not None and (isinstance(max_history_turns, bool) or not isinstance(max_history_turns, int)
                                          or max_history_turns < 0):
        raise ConfigError(f"coral generation: max_history_turns must be a non-negative integer or None, "
                          f"got {max_history_turns!r}")


# ---------------------------------------------------------------------------------------
# History
# ---------------------------------------------------------------------------------------


def keep_last_turns(history: Sequence[Mapping], max_history_turns: int | None) -> list[dict]:
    """The last ``max_history_turns`` turns of ``history`` (all when None). A turn starts at a
    ``user`` item and takes the items after it up to the next ``user`` item."""
    _check_m(max_history_turns)
    turns: list[list[dict]] = []
    for h in history:
        if h["role"] == "user" or not turns:
            turns.append([])
        turns[-1].append(dict(h))
    if max_history_turns is not None:
        turns = turns[len(turns) - max_history_turns:] if max_history_turns else []
    return [h for t in turns for h in t]


def _line(prompts: Mapping, item: Mapping) -> str:
    key = "user_line" if item["role"] == "user" else "assistant_line"
    return prompts[key].format(text=item["text"])


def _history_lines(prompts: Mapping, items: Sequence[Mapping]) -> str:
    return "\n".join(_line(prompts, h) for h in items)


def uses_rewrite_fallback(task: TurnTask, strategy: str) -> bool:
    """True when the rewrite strategy has to ask the task's own question (no rewrite)."""
    return strategy == "rewrite" and not (task.rewrite or "").strip()


def history_block(task: TurnTask, strategy: str, prompts: Mapping, summary: str | None = None,
                  max_history_turns: int | None = None) -> tuple[str, str]:
    """``(history_text, question)`` of ``task`` under ``strategy`` (module doc).

    ``history_text`` is "" for the rewrite strategy and for a task without (kept) earlier
    turns; under llm_summary it is ``summary`` (stripped), which must be given when the task
    has earlier turns. ``question`` is the rewrite under the rewrite strategy, falling back to
    the question when there is none (:func:`uses_rewrite_fallback`; the caller counts it)."""
    _check_strategy(strategy)
    if strategy == "rewrite":
        return "", (task.question if uses_rewrite_fallback(task, strategy) else task.rewrite.strip())
    kept = keep_last_turns(task.history, max_history_turns)
    if not kept:
        return "", task.question
    if strategy == "raw_context":
        return _history_lines(prompts, kept), task.question
    if strategy == "last_response":
        last = max((i for i, h in enumerate(kept) if h["role"] != "user"), default=None)
        shown = [h for i, h in enumerate(kept) if h["role"] == "user" or i == last]
        return _history_lines(prompts, shown), task.question
    if summary is None:
        raise ConfigError(f"coral generation: task {task.task_id!r} has earlier turns but no summary "
                          "(llm_summary needs summaries(...) first)")
    return summary.strip(), task.question


# ---------------------------------------------------------------------------------------
# Summaries (strategy llm_summary)
# ---------------------------------------------------------------------------------------

_SUMMARY_LABEL = re.compile(r"^\s*\**\s*summary\s*\**\s*:\s*\**", re.IGNORECASE)


def parse_summary(reply: str | None) -> str | None:
    """The summary in a reply: stripped, a leading "Summary:" label dropped; None when empty."""
    text = _SUMMARY_LABEL.sub("", (reply or "").strip(), count=1).strip()
    return text or None


def summaries(engine, tasks: Sequence[TurnTask], prompts: Mapping, sampling: Sampling,
              max_history_turns: int | None = None, *, seed: int = 0,
              desc: str | None = "coral summaries") -> tuple[dict[str, str], dict]:
    """LLM summaries of every task's earlier turns (the last ``max_history_turns``), in ONE
    batched generate call; a task without earlier turns gets "" and no request.

    Returns ``(task id -> summary, report)``. An empty reply (after :func:`parse_summary`)
    is kept as "" and counted; every raw reply is kept. Report: ``tasks``, ``no_history``
    (no request), ``requests``, ``summarised``, ``empty`` (+ ``empty_tasks``), ``truncated``
    (finish_reason "length", kept), ``cached``, ``prompt_tokens``, ``completion_tokens``,
    ``raw_replies`` (task id -> reply text)."""
    _check_m(max_history_turns)
    out: dict[str, str] = {}
    asked: list[tuple[TurnTask, Request]] = []
    for t in tasks:
        kept = keep_last_turns(t.history, max_history_turns)
        if not kept:
            out[t.task_id] = ""
            continue
        msgs = [{"role": "system", "content": prompts["summary"]["system"].strip()},
                {"role": "user", "content": prompts["summary"]["user"].format(history=_history_lines(prompts, kept))}]
        asked.append((t, Request(messages=msgs, sampling=sampling, seed=seed)))
    responses = engine.generate([r for _, r in asked], desc=desc) if asked else []
    if len(responses) != len(asked):
        raise DataError(f"summaries: the engine returned {len(responses)} responses for {len(asked)} requests")
    empty, raw = [], {}
    for (t, _), r in zip(asked, responses):
        raw[t.task_id] = r.text
        text = parse_summary(r.text)
        if text is None:
            empty.append(t.task_id)
        out[t.task_id] = text or ""
    report = {
        "tasks": len(tasks), "no_history": len(tasks) - len(asked), "requests": len(asked),
        "summarised": len(asked) - len(empty), "empty": len(empty), "empty_tasks": empty,
        "truncated": sum(1 for r in responses if r.finish_reason == "length"),
        "cached": sum(1 for r in responses if r.cached),
        "prompt_tokens": sum(r.prompt_tokens for r in responses),
        "completion_tokens": sum(r.completion_tokens for r in responses),
        "raw_replies": raw,
    }
    return out, report


# ---------------------------------------------------------------------------------------
# Passages
# ---------------------------------------------------------------------------------------


def _as_passage(p: Passage | Mapping, where: str) -> dict:
    if isinstance(p, Passage):
        return {"id": p.doc_id, "title": p.title or "", "text": p.text}
    if isinstance(p, Mapping) and "text" in p and ("id" in p or "doc_id" in p):
        return {"id": str(p["id"] if "id" in p else p["doc_id"]), "title": p.get("title") or "", "text": p["text"]}
    raise DataError(f"{where}: a passage must be a Passage or a mapping with id (or doc_id) and text, got {p!r:.80}")


def shown_passages(passages_by_task: Mapping[str, Sequence], task: TurnTask) -> list[dict]:
    """The task's passages as ``[{id, title, text}]``, in the order shown (numbered 1..k)."""
    if task.task_id not in passages_by_task:
        raise DataError(f"coral generation: no passages for task {task.task_id!r} (give [] for none)")
    return [_as_passage(p, f"task {task.task_id} passage {i}") for i, p in enumerate(passages_by_task[task.task_id])]


def _passages_text(prompts: Mapping, passages: Sequence[Mapping]) -> str:
    if not passages:
        return prompts["no_passages"]
    return "\n".join((prompts["passage"] if p["title"] else prompts["passage_untitled"])
                     .format(n=n, title=p["title"], text=p["text"]) for n, p in enumerate(passages, start=1))


# ---------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------


def _messages(task: TurnTask, passages: list[dict], strategy: str, prompts: Mapping, summary: str | None,
              max_history_turns: int | None) -> tuple[list[dict], str, str]:
    history, question = history_block(task, strategy, prompts, summary, max_history_turns)
    section = prompts["history_section"][strategy].format(history=history) if history else ""
    user = prompts["user"].format(passages=_passages_text(prompts, passages), history=section, question=question)
    msgs = [{"role": "system", "content": prompts["system"].strip()}, {"role": "user", "content": user}]
    return msgs, history, question


def _summary_of(task: TurnTask, strategy: str, summaries_by_task: Mapping[str, str] | None) -> str | None:
    if strategy != "llm_summary":
        return None
    return (summaries_by_task or {}).get(task.task_id)


def generation_requests(tasks: Sequence[TurnTask], passages_by_task: Mapping[str, Sequence], strategy: str,
                        prompts: Mapping, sampling: Sampling, seed: int, summaries: Mapping[str, str] | None = None,
                        max_history_turns: int | None = None) -> list[Request]:
    """One request per task (system + user message; module doc). ``summaries`` (task id ->
    text, from :func:`summaries`) is needed for llm_summary tasks with earlier turns."""
    _check_strategy(strategy)
    _check_m(max_history_turns)
    return [Request(messages=_messages(t, shown_passages(passages_by_task, t), strategy, prompts,
                                       _summary_of(t, strategy, summaries), max_history_turns)[0],
                    sampling=sampling, seed=seed)
            for t in tasks]


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def answer(engine, tasks: Sequence[TurnTask], passages_by_task: Mapping[str, Sequence], strategy: str,
           prompts: Mapping, *, sampling: Sampling, seed: int = 0, max_history_turns: int | None = None,
           summary_engine=None, summary_sampling: Sampling | None = None,
           summaries_by_task: Mapping[str, str] | None = None, summary_report: dict | None = None,
           desc: str | None = "coral generation") -> tuple[list[dict], dict]:
    """Answer every task under ``strategy`` in ONE generate call (plus one summary call for
    llm_summary, on ``summary_engine`` or ``engine``, with ``summary_sampling`` or ``sampling``).

    One record per task, in order: ``task_id, conversation_id, turn, model, strategy,
    max_history_turns, question_asked, history_text (the history as shown: "" for none, the
    summary for llm_summary), response (the raw reply), passages ([{id, title, text}] as shown,
    in order), prompt_tokens, completion_tokens, finish_reason, cached, used_rewrite_fallback``.

    Report: ``strategy, max_history_turns, model, tasks, with_history`` (tasks whose history
    section is shown), ``rewrite_fallbacks`` (+ ``rewrite_fallback_tasks``), ``summary`` (the
    :func:`summaries` report, None for other strategies), ``summary_empty`` (llm_summary tasks
    with earlier turns but an empty summary: shown without history), ``prompt_tokens_total``,
    ``prompt_tokens_mean`` (the paper's input-token comparison), ``completion_tokens_total``,
    ``completion_tokens_mean``, ``finish_reasons``, ``empty_responses``, ``passages_mean``,
    ``cached``. ``summaries_by_task`` (with its ``summary_report``) are llm_summary's summaries
    made earlier (the framework retrieves with them first): then no summary call is made."""
    _check_strategy(strategy)
    _check_m(max_history_turns)
    tasks = list(tasks)
    ids = [t.task_id for t in tasks]
    if len(set(ids)) != len(ids):
        raise DataError(f"coral generation: duplicate task id {next(i for i in ids if ids.count(i) > 1)!r}")
    shown = [shown_passages(passages_by_task, t) for t in tasks]
    summary_map = None
    if strategy == "llm_summary" and summaries_by_task is not None:
        summary_map = dict(summaries_by_task)
    elif strategy == "llm_summary":
        summary_map, summary_report = summaries(summary_engine or engine, tasks, prompts, summary_sampling or sampling,
                                                max_history_turns, seed=seed)
    built = [_messages(t, p, strategy, prompts, _summary_of(t, strategy, summary_map), max_history_turns)
             for t, p in zip(tasks, shown)]
    requests = [Request(messages=m, sampling=sampling, seed=seed) for m, _, _ in built]
    responses = engine.generate(requests, desc=desc) if requests else []
    if len(responses) != len(requests):
        raise DataError(f"coral generation: the engine returned {len(responses)} responses for "
                        f"{len(requests)} requests")
    spec = getattr(engine, "spec", None)
    model = getattr(spec, "name", None)
    records = []
    for t, p, (_, history, question), r in zip(tasks, shown, built, responses):
        records.append({
            "task_id": t.task_id, "conversation_id": t.conversation_id, "turn": t.turn, "model": model,
            "strategy": strategy, "max_history_turns": max_history_turns, "question_asked": question,
            "history_text": history, "response": r.text, "passages": p,
            "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
            "finish_reason": r.finish_reason, "cached": r.cached,
            "used_rewrite_fallback": uses_rewrite_fallback(t, strategy),
        })
    fallbacks = [rec["task_id"] for rec in records if rec["used_rewrite_fallback"]]
    prompt_tokens = [rec["prompt_tokens"] for rec in records]
    completion_tokens = [rec["completion_tokens"] for rec in records]
    report = {
        "strategy": strategy, "max_history_turns": max_history_turns, "model": model, "tasks": len(tasks),
        "with_history": sum(1 for rec in records if rec["history_text"]),
        "rewrite_fallbacks": len(fallbacks), "rewrite_fallback_tasks": fallbacks,
        "summary": summary_report,
        "summary_empty": summary_report["empty"] if summary_report else 0,
        "prompt_tokens_total": sum(prompt_tokens), "prompt_tokens_mean": _mean(prompt_tokens),
        "completion_tokens_total": sum(completion_tokens), "completion_tokens_mean": _mean(completion_tokens),
        "finish_reasons": dict(Counter(rec["finish_reason"] for rec in records)),
        "empty_responses": sum(1 for rec in records if not (rec["response"] or "").strip()),
        "passages_mean": _mean([len(p) for p in shown]),
        "cached": sum(1 for r in responses if r.cached),
    }
    return records, report


def at_turn(tasks: Sequence[TurnTask], turn: int, conversations: int, seed: int = 0) -> list[TurnTask]:
    """Figure 4's tasks: turn ``turn`` (1-based) of ``conversations`` conversations drawn at
    random (``random.Random(seed).sample`` of the ids, sorted, that reach it; all when fewer
    reach it), as the paper samples 50 at random. Each task carries its own history, so nothing
    else of the conversation is needed. Returned in conversation-id order."""
    import random

    reach = sorted({t.conversation_id for t in tasks if t.turn == turn})
    keep = set(reach if len(reach) <= conversations else random.Random(seed).sample(reach, conversations))
    return sorted((t for t in tasks if t.turn == turn and t.conversation_id in keep), key=lambda t: t.conversation_id)

