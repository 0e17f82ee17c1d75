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


def mtrag_retrieval_scores(L: Layout) -> str:
    """Per-task scores of the runs over MTRAG's retrieval tasks (the mtrag_retrieval target)."""
    return f"{root(L)}/scores/mtrag_retrieval.parquet"


def answers(L: Layout, benchmark: str, model: str, setting: str, domain: str, ext: str = "jsonl") -> str:
    """``jsonl`` (one answer record per task), ``accounting.json``."""
    return f"{root(L)}/answers/{benchmark}/{model}/{setting}/{domain}.{ext}"


def evaluation(L: Layout, benchmark: str, model: str, setting: str, domain: str, ext: str = "parquet") -> str:
    """``parquet`` (metrics per task), ``verdicts.jsonl`` (every judge verdict), ``accounting.json``."""
    return f"{root(L)}/evaluation/{benchmark}/{model}/{setting}/{domain}.{ext}"


def human_scores(L: Layout, ext: str = "parquet") -> str:
    """The human-evaluated responses re-scored by the project's metrics and judges."""
    return f"{root(L)}/evaluation/human/scores.{ext}"


def official_prompt(L: Layout, judge: str) -> str:
    """IBM's judge prompt, downloaded at the pinned commit and adapted (``evaluation.prompts``)."""
    return f"{root(L)}/prompts/official_{judge}.yaml"
