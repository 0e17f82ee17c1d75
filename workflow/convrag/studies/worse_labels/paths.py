"""Where worse_labels writes its own outputs (under ``<results>/worse_labels/``); arguments may
be Snakemake patterns. ``part`` is ``eval`` (the slice's benchmark) or ``train`` (its train
benchmark, only for fitting fusion weights)."""

from __future__ import annotations

from convrag.layout import Layout

KEY = "worse_labels"


def root(L: Layout) -> str:
    return L.study(KEY)


def run(L: Layout, slice_: str, part: str, rung: str, domain: str, ext: str = "trec") -> str:
    """``trec`` (the ranking), ``queries.jsonl``, ``accounting.json``."""
    return f"{root(L)}/runs/{slice_}/{part}/{rung}/{domain}.{ext}"


def components(L: Layout, slice_: str, part: str, rung: str, domain: str, ext: str = "json") -> str:
    """An expansion rung's per-expansion BM25 runs (``json``), its expansions (``expansions.jsonl``)
    and ``accounting.json``."""
    return f"{root(L)}/components/{slice_}/{part}/{rung}/{domain}.{ext}"


def weights(L: Layout, slice_: str, rung: str) -> str:
    return f"{root(L)}/weights/{slice_}/{rung}.json"


def contexts(L: Layout, slice_: str, ext: str = "parquet") -> str:
    """``parquet`` (one row per context: qrels label, copies, evidence classes, score features,
    nDCG) and ``items.jsonl`` (what readers and judges see: question, history, passage texts)."""
    return f"{root(L)}/contexts/{slice_}.{ext}"


def reads(L: Layout, slice_: str, reader: str, ext: str = "jsonl") -> str:
    return f"{root(L)}/reads/{slice_}/{reader}.{ext}"


def correctness(L: Layout, slice_: str, reader: str, ext: str = "jsonl") -> str:
    return f"{root(L)}/correctness/{slice_}/{reader}.{ext}"


def labels(L: Layout, slice_: str, judge: str, ext: str = "jsonl") -> str:
    return f"{root(L)}/labels/{slice_}/{judge}.{ext}"


def audit(L: Layout, slice_: str, ext: str = "jsonl") -> str:
    return f"{root(L)}/audit/{slice_}.{ext}"


def released(L: Layout, slice_: str, rung: str, fmt: str = "jsonl") -> str:
    """An expansion rung's released expansions, downloaded (``released.url``)."""
    return f"{root(L)}/released/{slice_}/{rung}.{fmt}"


def human(L: Layout, ext: str = "parquet") -> str:
    """MTRAG's annotator feedback (``parquet``: ``followups.human_feedback``) and the single
    passages the annotators judged (``items.jsonl``), for ``human_feedback`` / ``mtrag_human``."""
    return f"{root(L)}/human/feedback.{ext}"


def human_labels(L: Layout, judge: str, ext: str = "jsonl") -> str:
    """The content judge's labels of the single human-judged passages (and ``accounting.json``)."""
    return f"{root(L)}/human/labels/{judge}.{ext}"
