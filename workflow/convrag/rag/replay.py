"""Replay: answer benchmark turns (``TurnTask``) after their fixed, recorded histories.

The generation half of MTRAG-UN, CORAL and RECOR: every task of a chunk is answered at once
by the shared reader (one search, one batched generate), with the query from a registered
policy (last turn, history, shipped rewrite, LLM rewrite). Passages come from a retriever
(``passages: retrieved``), from a retrieval run already on disk (``run``: a TREC run and its
queries from ``convrag retrieve``, so a study's generation reads the rankings its retrieval
table scored instead of searching again), from the task's own reference contexts
(``reference``: MTRAG-UN's reference setting, the first ``top_k`` of ``contexts``), or not at
all (``none``).

The prompt (a YAML file) is the study's; its layout is fixed here so that a conversation's
tokens come first and stay a shared prefix: system message, worked examples, the history as
chat turns, then one user message with the passages and the question. Keys: ``system``,
``examples`` (optional ``[{question, passages, reply}]``), ``passage`` (format with rank,
doc_id, title, text), ``user`` (format with passages, question), ``no_passages`` (what
``{passages}`` becomes without passages) and ``answer`` (``text``: the whole reply is the
answer; ``answer_line``: the last ``Answer:`` line, else unanswered).

One answer record per (task, run): the task's keys, the setting (model, retriever, policy,
passages, run), the query and retrieved passages with scores, the reply, the answer, the
retrieval cost for retrievers that call an LLM, and whether the policy fell back.
"""

from __future__ import annotations

from dataclasses import dataclass

from convrag.errors import ConfigError, DataError
from convrag.llm.types import Sampling
from convrag.rag.answers import extract_answer, visible_reply
from convrag.rag.policies import make_queries
from convrag.rag.reader import Reader
from convrag.rag.retrieve import query_states
from convrag.records import Passage, TurnTask
from convrag.retrieval.base import Capabilities, SearchResult

PASSAGE_SOURCES = ("retrieved", "run", "reference", "none")
ANSWER_FORMATS = {"text": lambda s: visible_reply(s).strip() or None, "answer_line": extract_answer}


@dataclass
class ChatPrompt:
    prompts: dict

    def __post_init__(self):
        missing = [k for k in ("system", "passage", "user", "no_passages") if k not in self.prompts]
        if missing:
            raise ConfigError(f"reader prompt: missing key(s) {', '.join(missing)}")
        if self.prompts.get("answer", "text") not in ANSWER_FORMATS:
            raise ConfigError(f"reader prompt: answer must be one of {', '.join(ANSWER_FORMATS)}")

    @property
    def parse(self):
        return ANSWER_FORMATS[self.prompts.get("answer", "text")]

    def passages_block(self, passages: list) -> str:
        if not passages:
            return self.prompts["no_passages"]
        return "\n".join(self.prompts["passage"].format(rank=i, doc_id=p.doc_id, title=p.title, text=p.text)
                         for i, p in enumerate(passages, start=1))

    def messages(self, task: TurnTask, passages: list) -> list[dict]:
        p = self.prompts
        msgs = [{"role": "system", "content": p["system"].strip()}]
        for ex in p.get("examples", []):
            shown = [Passage(doc_id=f"ex{i}", title=x.get("title", ""), text=x["text"])
                     for i, x in enumerate(ex.get("passages", []))]
            msgs.append({"role": "user", "content": p["user"].format(passages=self.passages_block(shown),
                                                                      question=ex["question"])})
            msgs.append({"role": "assistant", "content": ex["reply"]})
        msgs += [{"role": t["role"], "content": t["text"]} for t in task.history]
        msgs.append({"role": "user", "content": p["user"].format(passages=self.passages_block(passages),
                                                                  question=task.question)})
        return msgs


class _Reference:
    """A 'retriever' that returns each task's own reference contexts (reference setting)."""

    def __init__(self, tasks: list[TurnTask]):
        self.tasks = tasks

    def search(self, queries, k):
        return SearchResult([[(c["doc_id"], float(len(t.contexts) - i)) for i, c in enumerate(t.contexts[:k])]
                             for t in self.tasks])


class _Run:
    """A 'retriever' that returns each task's ranking from a TREC run (best first; equal scores
    keep the file's order). A task missing from the run is an error, not an empty ranking."""

    def __init__(self, tasks: list[TurnTask], run: dict[str, dict[str, float]]):
        missing = [t.task_id for t in tasks if t.task_id not in run]
        if missing:
            raise DataError(f"the retrieval run has no ranking for task '{missing[0]}' ({len(missing)} missing)")
        self.rankings = [sorted(run[t.task_id].items(), key=lambda x: -x[1]) for t in tasks]

    def search(self, queries, k):
        return SearchResult([r[:k] for r in self.rankings])


def read_run(run_path, queries_path) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """A retrieval job's TREC run and its queries (task id -> query); a task searched with no hit
    has no line in the TREC file and gets an empty ranking."""
    from convrag.io import read_jsonl
    from convrag.metrics.retrieval import read_trec_run

    run = read_trec_run(run_path)
    queries = {q["task_id"]: q["query"] for q in read_jsonl(queries_path)}
    for tid in queries:
        run.setdefault(tid, {})
    return run, queries


def ranked_passages(tasks: list[TurnTask], run: dict[str, dict[str, float]], corpus: dict[str, Passage],
                    k: int) -> dict[str, list[Passage]]:
    """Each task's top ``k`` passages of a TREC run (best first), looked up in ``corpus``; a
    ranked doc id the corpus lacks is an error naming it."""
    out = {}
    for t, ranking in zip(tasks, _Run(tasks, run).search(None, k)):
        missing = [d for d, _ in ranking if d not in corpus]
        if missing:
            raise DataError(f"the retrieval run ranks doc '{missing[0]}' for task '{t.task_id}', which the corpus lacks")
        out[t.task_id] = [corpus[d] for d, _ in ranking]
    return out


def reference_passages(tasks: list[TurnTask]) -> dict[str, Passage]:
    out = {}
    for t in tasks:
        for c in t.contexts:
            out[c["doc_id"]] = Passage(doc_id=c["doc_id"], title=c.get("title", ""), text=c["text"])
    return out


def answer_tasks(tasks: list[TurnTask], *, engine, prompt: ChatPrompt, sampling: Sampling, policy: str,
                 passages_from: str, retriever=None, capabilities: Capabilities | None = None,
                 corpus: dict | None = None, top_k: int = 5, recall_k: int | None = None, runs: int = 1,
                 seed: int = 0, setting: dict | None = None, rewrite_llm=None, rewrite_prompts: dict | None = None,
                 rewrite_max_tokens: int | None = None, run: dict | None = None, run_queries: dict | None = None) -> list[dict]:
    """Answer every task ``runs`` times (distinct seeded samples) in one batch per run.

    ``passages_from="run"`` takes ``run`` (task id -> {doc: score}, e.g. ``read_trec_run``),
    ``run_queries`` (task id -> the query that produced it, recorded) and ``corpus``."""
    if passages_from not in PASSAGE_SOURCES:
        raise ConfigError(f"passages: '{passages_from}' is not one of {', '.join(PASSAGE_SOURCES)}")
    if passages_from == "retrieved" and (retriever is None or capabilities is None):
        raise ConfigError("passages 'retrieved' needs a retriever and its capabilities")
    if not tasks:
        return []
    ids = [t.task_id for t in tasks]
    if len(set(ids)) != len(ids):
        raise DataError(f"duplicate task id in one chunk: {sorted({i for i in ids if ids.count(i) > 1})[0]}")
    if passages_from == "run" and (run is None or corpus is None):
        raise ConfigError("passages 'run' needs the run and the corpus")
    if passages_from == "reference":
        retriever, corpus, capabilities = _Reference(tasks), reference_passages(tasks), Capabilities()
    elif passages_from == "run":
        retriever, capabilities = _Run(tasks, run), Capabilities()
    elif passages_from == "none":
        capabilities, corpus = Capabilities(closed_book=True), {}
    reader = Reader(retriever=retriever, capabilities=capabilities, passages=corpus or {}, engine=engine,
                    sampling=sampling, build_messages=prompt.messages, top_k=top_k, recall_k=recall_k or top_k,
                    seed=seed, parse_answer=prompt.parse)
    states = query_states(tasks)
    pol = make_queries(policy, states, llm=rewrite_llm, prompts=rewrite_prompts,
                       max_tokens=rewrite_max_tokens) if passages_from == "retrieved" \
        else None
    queries = pol.queries if pol else [None] * len(tasks)
    if passages_from == "run":
        queries = [(run_queries or {}).get(t.task_id) for t in tasks]
    out = []
    for run in range(runs):
        turns, _ = reader.answer(tasks, queries, [run] * len(tasks), desc=f"answers, run {run + 1} of {runs}")
        for i, (t, turn) in enumerate(zip(tasks, turns)):
            rec = {"task_id": t.task_id, "benchmark": t.benchmark, "conversation_id": t.conversation_id,
                   "turn": t.turn, **(setting or {}), "policy": policy if pol or passages_from == "run" else None,
                   "passages": passages_from,
                   "run": run, **{k: v for k, v in turn.items() if k != "role"}}
            if pol and pol.raw:
                rec["policy_output"] = pol.raw[i]
            out.append(rec)
    return out


def shown_passages(tasks, run_path: str, queries_path: str, corpus_path: str, k: int):
    """Each task's shown passages from a retrieval job's files: the top ``k`` of its TREC run
    (``read_run``) with their corpus texts (a task searched with no hit has none)."""
    from convrag.records import Passage, read_records

    run, _ = read_run(run_path, queries_path)
    return ranked_passages(tasks, run, {p.doc_id: p for p in read_records(corpus_path, Passage)}, k)
