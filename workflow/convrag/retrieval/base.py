"""Shared pieces of every retriever: the interface, the params check and the index manifest.

An index is an expensive, cached artifact (ARCHITECTURE section 5/6), reused by many search
jobs. Each index folder therefore carries a ``manifest.json`` saying which retriever and which
params built it from which corpus; loading with different params is an error rather than a
silent mix of configurations.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from convrag.errors import ConfigError, DataError
from convrag.io import public_tree, read_json, temp_dir, write_json
from convrag.records import Passage, read_records

MANIFEST = "manifest.json"
MARKER = ".convrag-artifact"
MANIFEST_VERSION = 1

Hits = list[tuple[str, float]]


@dataclass
class QueryCost:
    """What one query cost its retriever in LLM work (cached answers count too: this is the
    method's cost, not this run's bill)."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    parse_failures: int = 0  # LLM outputs that were not the JSON asked for (then a documented fallback)

    def add(self, responses) -> None:
        for r in responses:
            self.llm_calls += 1
            self.prompt_tokens += int(r.prompt_tokens)
            self.completion_tokens += int(r.completion_tokens)

    def to_dict(self) -> dict[str, int]:
        return {"llm_calls": self.llm_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "parse_failures": self.parse_failures}


@dataclass(frozen=True)
class Capabilities:
    """What a retriever kind needs and costs, declared once in its module (``CAPABILITIES``)
    and read everywhere else: the rule files (graph inputs, LLM and GPU of index builds,
    scheduling priority), the reader (closed-book prompts), sizing (query-time LLM work).

    ``cost_class``: ``cheap`` (no LLM call per query), ``query_llm`` (one LLM round per
    query: HippoRAG, HippoRAG2, LightRAG), ``explorer`` (several rounds per query: ToG-2, PoG).
    """

    closed_book: bool = False  # retrieves nothing: the model answers from its own knowledge
    needs_graph: bool = False  # reads the shared knowledge-graph artifact of its corpus
    llm_at_build: bool = False  # its index build calls an LLM (RAPTOR's summaries)
    llm_at_query: bool = False  # its search calls an LLM
    cost_class: str = "cheap"
    # its jobs need the Java (Lucene) environment: a flag, or a test of the retriever's params
    needs_jdk: bool | Callable[[dict], bool] = False

    def __post_init__(self):
        if self.cost_class not in COST_CLASSES:
            raise ValueError(f"cost_class must be one of {COST_CLASSES}, not {self.cost_class!r}")

    @property
    def uses_llm(self) -> bool:
        return self.llm_at_build or self.llm_at_query


COST_CLASSES = ("cheap", "query_llm", "explorer")


class SearchResult(list):
    """What ``Retriever.search`` returns: the ranked hits of each query (the list itself, one
    entry per query) with what each query cost its retriever (``costs``, one QueryCost per
    query; zeros for retrievers without LLM calls) and, where a retriever traces its work,
    one diagnostic dict per query (``details``)."""

    def __init__(self, hits=(), costs=None, details=None):
        super().__init__(hits)
        self.costs: list[QueryCost] = list(costs) if costs is not None else [QueryCost() for _ in self]
        self.details: list[dict] = list(details or [])
        if len(self.costs) != len(self):
            raise ValueError(f"SearchResult: {len(self)} hit lists but {len(self.costs)} costs")
        if self.details and len(self.details) != len(self):
            raise ValueError(f"SearchResult: {len(self)} hit lists but {len(self.details)} details")


class Retriever:
    """A loaded index. ``search`` is batched: one call for all queries of a job, returning a
    ``SearchResult``."""

    name: str = ""

    def search(self, queries: list[str], k: int) -> SearchResult:
        raise NotImplementedError


def batched_llm(engine, per_query: list[list], costs: list[QueryCost], desc: str | None = None) -> list[list]:
    """Send every query's requests to ``engine`` in ONE batched call and split the answers
    back per query, adding them to that query's cost. Graph retrievers use this at every
    step, so their LLM work is batched across all queries of a job, never one at a time."""
    flat = [r for reqs in per_query for r in reqs]
    resps = engine.generate(flat, desc=desc) if flat else []
    out, i = [], 0
    for reqs, cost in zip(per_query, costs):
        part = resps[i:i + len(reqs)]
        cost.add(part)
        out.append(part)
        i += len(reqs)
    return out


def check_k(k: int) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"retrieval k must be a positive integer, got {k!r}")
    return k


def normalize_params(retriever: str, params: dict | None, defaults: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults and reject unknown keys, so a typo in a config cannot pass unnoticed."""
    params = dict(params or {})
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ConfigError(
            f"retriever '{retriever}': unknown param '{unknown[0]}' (allowed: {', '.join(sorted(defaults))})"
        )
    return {**defaults, **params}


def passage_text(p: Passage) -> str:
    """What gets indexed: title and text, as in the HippoRAG corpora."""
    return f"{p.title}\n{p.text}" if p.title else p.text


def read_corpus(corpus_path: str | os.PathLike) -> list[Passage]:
    passages = read_records(corpus_path, Passage)
    if not passages:
        raise DataError(f"{corpus_path}: corpus is empty")
    seen: set[str] = set()
    for p in passages:
        if p.doc_id in seen:
            raise DataError(f"{corpus_path}: duplicate doc_id '{p.doc_id}'")
        seen.add(p.doc_id)
    return passages


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def staging_dir(out_dir: str | os.PathLike) -> Iterator[Path]:
    """Build an index in a temporary folder beside ``out_dir`` and move it into place on success.

    A killed build never leaves a half-written index that has a manifest. An existing
    ``out_dir`` is replaced only if it is empty or is itself an index (has a manifest).
    """
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    ours = (out_dir / MANIFEST).exists() or (out_dir / MARKER).exists()
    if out_dir.exists() and any(out_dir.iterdir()) and not ours:
        raise DataError(f"{out_dir}: exists and is not an index folder (no {MANIFEST}); not overwriting it")
    tmp = temp_dir(out_dir.parent, prefix=f".{out_dir.name}.", suffix=".tmp")  # mkdir()'s mode, not 0700
    # The marker survives Snakemake deleting the manifest (the rule's output) before a
    # rebuild, so the old index folder is still recognised as ours and replaced.
    (tmp / MARKER).write_text("built by convrag\n")
    try:
        yield tmp
        public_tree(tmp)  # what a library wrote private (safetensors weights: 0600) gets the umask's mode
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def relative_to_index(path, index_dir) -> str:
    """``path`` as seen from an index folder (or its staging folder beside it, which gives the
    same answer): a manifest holds no absolute path of this machine, so a results folder copied
    or moved elsewhere still finds its own files, never those of the folder it came from."""
    return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(index_dir))).as_posix()


def manifest_corpus(index_dir, man: dict) -> Path:
    """The corpus an index was built from, resolved against the index folder (manifests of
    older versions hold the path as given to the build, kept as it is)."""
    where = man["corpus"]
    return Path(where) if os.path.isabs(where) else Path(os.path.normpath(Path(index_dir) / where))


def write_manifest(index_dir: Path, retriever: str, params: dict, corpus_path, n_docs: int, seconds: float) -> None:
    write_json(
        Path(index_dir) / MANIFEST,
        {
            "manifest_version": MANIFEST_VERSION,
            "retriever": retriever,
            "params": params,
            "corpus": relative_to_index(corpus_path, index_dir),
            "corpus_sha256": file_sha256(corpus_path),
            "n_docs": n_docs,
            "build_seconds": round(seconds, 3),
        },
    )


def check_manifest(
    index_dir: str | os.PathLike,
    retriever: str,
    params: dict,
    runtime_keys: frozenset[str] = frozenset(),
    corpus_path: str | os.PathLike | None = None,
) -> dict:
    """Compare a loaded index with the params asked for; ``runtime_keys`` may differ freely."""
    index_dir = Path(index_dir)
    if not (index_dir / MANIFEST).exists():
        raise DataError(f"{index_dir}: not a retrieval index (no {MANIFEST}); run build_index first")
    man = read_json(index_dir / MANIFEST)
    if man.get("retriever") != retriever:
        raise ConfigError(
            f"{index_dir}: index was built for retriever '{man.get('retriever')}', not '{retriever}'"
        )
    built = man.get("params", {})
    for key in sorted((set(built) | set(params)) - runtime_keys):
        if built.get(key) != params.get(key):
            raise ConfigError(
                f"{index_dir}: index was built with {key}={built.get(key)!r} but {key}={params.get(key)!r} "
                f"was requested; rebuild the index or use the params it was built with"
            )
    if corpus_path is not None and file_sha256(corpus_path) != man.get("corpus_sha256"):
        raise DataError(f"{index_dir}: index was built from a different corpus than {corpus_path}")
    return man
