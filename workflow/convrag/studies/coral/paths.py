"""Where coral writes its own outputs (under ``<results>/coral/``); arguments may be Snakemake
patterns."""

from __future__ import annotations

from convrag.layout import Layout

KEY = "coral"


def root(L: Layout) -> str:
    return L.study(KEY)


def pages(L: Layout, source: str) -> str:
    """The generated world rendered as Wikipedia-like HTML pages (one JSON record per page)."""
    return f"{root(L)}/construction/{source}/pages.jsonl"


def flows(L: Layout, source: str, ext: str = "jsonl") -> str:
    """``jsonl`` (one sampled conversation flow per line), ``report.json`` (counts, skips)."""
    return f"{root(L)}/construction/{source}/flows.{ext}"


def tasks(L: Layout, source: str, ext: str = "jsonl") -> str:
    """``jsonl`` (the contextualised conversations as TurnTasks), ``accounting.json``, ``report.json``."""
    return f"{root(L)}/construction/{source}/tasks.{ext}"


def run(L: Layout, source: str, retriever: str, policy: str, ext: str = "trec") -> str:
    """``trec`` (the ranking), ``queries.jsonl``, ``accounting.json``."""
    return f"{root(L)}/runs/{source}/{retriever}/{policy}.{ext}"


def session_encoder(L: Layout, source: str, encoder: str) -> str:
    """A trained session encoder (a sentence-transformers folder with ``training.json``)."""
    return f"{root(L)}/session_encoders/{source}/{encoder}"


def sft(L: Layout, source: str, name: str, ext: str | None = None) -> str:
    """A fine-tuned model: the folder (``model/`` merged weights, ``training.json``), or with
    ``ext="report.json"`` the examples report beside it."""
    return f"{root(L)}/sft/{source}/{name}" + (f".{ext}" if ext else "")


def answers(L: Layout, source: str, model: str, strategy: str, ext: str = "jsonl") -> str:
    """``jsonl`` (one answer record per turn), ``report.json``, ``accounting.json``."""
    return f"{root(L)}/answers/{source}/{model}/{strategy}.{ext}"


def evaluation(L: Layout, source: str, model: str, strategy: str, ext: str = "parquet") -> str:
    """``parquet`` (metrics per turn), ``verdicts.jsonl`` (every NLI verdict), ``accounting.json``."""
    return f"{root(L)}/evaluation/{source}/{model}/{strategy}.{ext}"


def retrieval_scores(L: Layout) -> str:
    return f"{root(L)}/scores/retrieval.parquet"
