"""The mtrag_un grid: its retrieval runs (one per benchmark domain x retriever x query
policy), its generation jobs (one per model x setting x domain, each then evaluated by the
judges) and the optional re-scoring of MTRAG's human-evaluated responses, built from the
validated config block."""

from __future__ import annotations

# The paper's names for the query policies of Table 2 (the registry's names are the keys).
POLICY_LABELS = {"current": "LT", "rewrite": "RW (shipped)", "llm_rewrite": "RW", "history": "all questions"}
ANSWERABILITY = ("ANSWERABLE", "PARTIAL", "UNANSWERABLE", "UNDERSPECIFIED")


def domains(config: dict) -> list[str]:
    from convrag.data.benchmarks import benchmark_loader

    spec = config["benchmarks"][config["mtrag_un"]["benchmark"]]
    return benchmark_loader(spec["kind"]).domains(spec)


def retrieval_jobs(config: dict) -> list[dict]:
    m = config["mtrag_un"]
    return [dict(benchmark=m["benchmark"], domain=d, retriever=r, policy=p)
            for d in domains(config) for r in m["retrievers"] for p in m["policies"]]


def mtrag_retrieval_domains(config: dict) -> list[str]:
    """The domains of the MTRAG retrieval-task benchmark of the mtrag_retrieval target (none when off)."""
    from convrag.data.benchmarks import benchmark_loader

    name = config["mtrag_un"]["mtrag_retrieval"]["benchmark"]
    if name is None:
        return []
    spec = config["benchmarks"][name]
    return benchmark_loader(spec["kind"]).domains(spec)


def statistics_domains(config: dict) -> list[str]:
    """The domains of the benchmarks whose statistics benchmark_statistics adds (in order, once)."""
    from convrag.data.benchmarks import benchmark_loader

    out: list[str] = []
    for name in config["mtrag_un"]["statistics_benchmarks"]:
        spec = config["benchmarks"][name]
        out += [d for d in benchmark_loader(spec["kind"]).domains(spec) if d not in out]
    return out


def mtrag_retrieval_jobs(config: dict) -> list[dict]:
    """The retrieval runs of the mtrag_retrieval target (MTRAG's retrieval tasks x retriever x shipped
    query form); none while ``mtrag_un.mtrag_retrieval.benchmark`` is null."""
    mr = config["mtrag_un"]["mtrag_retrieval"]
    return [dict(benchmark=mr["benchmark"], domain=d, retriever=r, policy=p)
            for d in mtrag_retrieval_domains(config) for r in mr["retrievers"] for p in mr["policies"]]


def rag_run(config: dict) -> tuple[str, str]:
    """(retriever, policy) whose run feeds the RAG setting: the configured one, else the first
    retriever with the last policy (the rewrite, in the paper's order LT, RW)."""
    m = config["mtrag_un"]
    rag = m["generation"]["rag"]
    return rag["retriever"] or m["retrievers"][0], rag["policy"] or m["policies"][-1]


def generation_jobs(config: dict) -> list[dict]:
    m = config["mtrag_un"]
    g = m["generation"]
    return [dict(benchmark=m["benchmark"], model=model, setting=s, domain=d)
            for model in g["models"] for s in g["settings"] for d in domains(config)]


def model_jobs(config: dict) -> list[dict]:
    """Every model-calling job (for sizing): rewrites, answers, judge passes."""
    m = config["mtrag_un"]
    judge = m["evaluation"]["judge_model"]
    jobs = [dict(stage="retrieve", role="rewriter", model=m["rewrite"]["model"], **j)
            for j in retrieval_jobs(config) if j["policy"] == "llm_rewrite"]
    for j in generation_jobs(config):
        jobs += [dict(stage="answer", role="reader", **j), dict(stage="evaluate", role="judge", **{**j, "judge": judge})]
    if m["evaluation"]["human_evaluations"]:
        jobs.append(dict(stage="human_eval", role="judge", model=judge, benchmark="mtrag_human"))
    return jobs
