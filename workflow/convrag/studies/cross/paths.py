"""Where the cross study writes its own outputs (under ``<results>/cross/``); arguments may be
Snakemake patterns."""

from __future__ import annotations

from convrag.layout import Layout

KEY = "cross"


def root(L: Layout) -> str:
    return L.study(KEY)


def shards(L: Layout, dataset: str, name: str = "shards.jsonl") -> str:
    """A multi-hop dataset's shard sets (``convrag lic-rag shard``): ``shards.jsonl``,
    ``shard_report.md``, ``accounting.json``."""
    return f"{root(L)}/shards/{dataset}/{name}"


def multihop_tasks(L: Layout, dataset: str) -> str:
    """A multi-hop dataset as TurnTasks (one single-turn task per question, its shards kept)."""
    return f"{root(L)}/tasks/{dataset}.jsonl"


def answers(L: Layout, benchmark: str, retriever: str, policy: str, reader: str, delivery: str,
            ext: str = "jsonl") -> str:
    """``jsonl`` (one record per answered turn), ``accounting.json``."""
    return f"{root(L)}/answers/{benchmark}/{retriever}/{policy}/{reader}/{delivery}.{ext}"


def scores(L: Layout, benchmark: str, ext: str = "parquet") -> str:
    """``parquet`` (one row per scored item and metric), ``verdicts.jsonl`` (every judge verdict),
    ``contexts.parquet`` (qrels vs content label per context), ``accounting.json``."""
    return f"{root(L)}/scores/{benchmark}.{ext}"


def score_chunk(L: Layout, benchmark: str, chunk, ext: str = "parquet") -> str:
    """One scoring chunk's outputs (``cross.score_chunks`` > 1): every n-th answer file of the
    benchmark, joined into ``scores`` by the merge job."""
    return f"{root(L)}/scores/{benchmark}/chunk{chunk}.{ext}"
