"""Where mtrag_un writes its own outputs (under ``<results>/mtrag_un/``); arguments may be
Snakemake patterns."""

from __future__ import annotations

from convrag.layout import Layout

KEY = "mtrag_un"


def root(L: Layout) -> str:
    return L.study(KEY)


def run(L: Layout, benchmark: str, domain: str, retriever: str, policy: str, ext: str = "trec") -> str:
    """``trec`` (the ranking), ``queries.jsonl`` (the queries), ``accounting.json``."""
    return f"{root(L)}/runs/{benchmark}/{retriever}/{policy}/{domain}.{ext}"


def retrieval_scores(L: Layout) -> str:
    return f"{root(L)}/scores/retrieval.parquet"
