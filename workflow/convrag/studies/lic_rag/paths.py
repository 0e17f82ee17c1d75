"""Where lic_rag writes its own outputs (under ``<results>/lic_rag/``), for the rule file and
the Python code alike. Arguments may be Snakemake patterns (``"{dataset}"``)."""

from __future__ import annotations

from convrag.layout import Layout

KEY = "lic_rag"


def root(L: Layout) -> str:
    return L.study(KEY)


def shards(L: Layout, dataset: str, name: str = "shards.jsonl") -> str:
    """``shards.jsonl`` (generated), ``final.jsonl`` (review applied), ``shard_report.md``,
    ``review.yaml``, ``accounting.json``; ``reserve_questions.jsonl`` (sharding.replace_failed)
    and ``variability.json`` (sharding.variability) when those are on."""
    return f"{root(L)}/shards/{dataset}/{name}"


def job_dir(L: Layout, dataset: str, model: str, retriever: str) -> str:
    return f"{root(L)}/conversations/{dataset}/{model}/{retriever}"


def conversations(L: Layout, dataset: str, model: str, retriever: str, condition: str, policy: str, chunk) -> str:
    return f"{job_dir(L, dataset, model, retriever)}/{condition}_{policy}/chunk{chunk}.jsonl"


def job_accounting(L: Layout, dataset: str, model: str, retriever: str, chunk) -> str:
    return f"{job_dir(L, dataset, model, retriever)}/chunk{chunk}.accounting.json"


def scores(L: Layout, name: str) -> str:
    """``conversations.parquet`` or ``turns.parquet``."""
    return f"{root(L)}/scores/{name}"
