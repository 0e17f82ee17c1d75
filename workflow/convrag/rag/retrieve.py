"""Retrieval runs over benchmark turns: one TREC run per (tasks, retriever, query policy).

Every benchmark with qrels (MTRAG-UN, CORAL, RECOR) evaluates retrieval this way: the query
of each turn comes from a registered policy (last turn, all questions, shipped rewrite, LLM
rewrite), one batched ``search`` answers them all, and the ranking is written as a TREC run
(``qid Q0 doc rank score tag``, best first) beside a JSONL of the queries (with the LLM's
rewrite where one was asked and whether the policy fell back), so metrics are computed from
files by ir_measures and a changed metric never reruns retrieval.
"""

from __future__ import annotations

from convrag.metrics.retrieval import write_trec_run
from convrag.rag.policies import QueryState, make_queries
from convrag.records import TurnTask


def query_states(tasks: list[TurnTask]) -> list[QueryState]:
    return [QueryState([*(h["text"] for h in t.history if h["role"] == "user"), t.question],
                       [*t.history, {"role": "user", "text": t.question}], rewrite=t.rewrite, key=t.task_id,
                       labels=t.labels)
            for t in tasks]


def retrieve_tasks(tasks: list[TurnTask], retriever, policy: str, k: int, llm=None, rewrite_prompts=None,
                   rewrite_max_tokens: int | None = None) -> tuple[dict, list[dict], dict]:
    """(run: task id -> {doc: score}, query records, counts). Task ids must be unique."""
    pol = make_queries(policy, query_states(tasks), llm=llm, prompts=rewrite_prompts, max_tokens=rewrite_max_tokens)
    res = retriever.search(pol.queries, k)
    run, records = {}, []
    costs = getattr(res, "costs", None) or [None] * len(tasks)
    for i, (t, q, hits, cost) in enumerate(zip(tasks, pol.queries, res, costs)):
        run[t.task_id] = {d: float(s) for d, s in hits}
        rec = {"task_id": t.task_id, "policy": policy, "query": q, "hits": len(hits)}
        if pol.raw:
            rec["policy_output"] = pol.raw[i]
            rec["fallback"] = not pol.raw[i].strip()
        if cost is not None and cost.llm_calls:
            rec["retrieval_cost"] = cost.to_dict()
        records.append(rec)
    counts = {"tasks": len(tasks), "policy_fallbacks": pol.fallbacks,
              "empty_rankings": sum(1 for r in records if r["hits"] == 0)}
    return run, records, counts


def write_run(path, run: dict, tag: str) -> None:
    write_trec_run(path, run, tag=tag)


def retrieve_cli_args(config: dict, retriever: str, policy: str, k: int, rewrite: dict, registry: str | None = None,
                      cache: str | None = None) -> str:
    """The arguments a stage that retrieves (``convrag retrieve``, ``convrag cross answer``) takes
    for one (retriever, policy): the retriever's kind and LLM, the depth, and the rewrite model of
    the llm_rewrite policy (``rewrite`` = the study's {model, max_tokens} block); the model
    registry and cache when given and a model is called."""
    from convrag.retrieval import retriever_kind, retriever_llm

    args = [f"--retriever {retriever_kind(config, retriever)} --retriever-name {retriever}", f"--recall-k {k}"]
    llm = retriever_llm(config, retriever)
    if registry and (llm or policy == "llm_rewrite"):
        args.append(f"--registry {registry} --cache {cache}")
    if llm:
        args.append(f"--retriever-llm {llm}")
    if policy == "llm_rewrite":
        args.append(f"--rewrite-model {rewrite['model']} --rewrite-max-tokens {rewrite['max_tokens']}")
    return " ".join(args)


def retrieve_models(config: dict, retriever: str, policy: str, rewrite: dict) -> list[str]:
    """The registry models one retrieval job loads (for its conda env and GPU request)."""
    from convrag.retrieval import retriever_llm

    return [x for x in [retriever_llm(config, retriever), rewrite["model"] if policy == "llm_rewrite" else None] if x]

