"""The mtrag_un grid: its retrieval runs (one per benchmark domain x retriever x query
policy), built from the validated config block."""

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
