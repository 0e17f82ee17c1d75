"""The reader: retrieve -> build the prompt -> one batched generate -> turn records.

Every study answers questions this way (lic_rag's simulated assistant, the replay of
benchmark turns), so it lives once. A call handles a whole batch: one ``search`` for every
query, one ``generate`` for every prompt; never one item at a time.

A turn record holds the query, the ``recall_k`` retrieved passages with their scores (the
first ``top_k`` are shown to the model), the reply, the extracted answer (``answered: false``
when the reply has none: counted, never dropped) and, for retrievers that use an LLM, what
the retrieval cost (``retrieval_cost``). Closed book is decided by the retriever kind's
capabilities: the prompt then carries no passage and no query is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from convrag.errors import ConfigError, DataError
from convrag.llm.types import Request, Response, Sampling
from convrag.rag.answers import extract_answer
from convrag.retrieval.base import Capabilities, SearchResult


@dataclass
class Reader:
    """``build_messages(item, passages) -> chat messages`` is the study's prompt; ``passages``
    are the shown Passage records (empty in closed book)."""

    retriever: Any
    capabilities: Capabilities
    passages: dict  # doc_id -> Passage
    engine: Any
    sampling: Sampling
    build_messages: Callable[[Any, list], list[dict]]
    top_k: int
    recall_k: int
    seed: int = 0
    parse_answer: Callable[[str], str | None] = extract_answer

    def __post_init__(self):
        if self.recall_k < self.top_k:
            raise ConfigError(f"recall_k ({self.recall_k}) must be >= top_k ({self.top_k})")

    @property
    def closed_book(self) -> bool:
        return self.capabilities.closed_book

    def retrieve(self, queries: list[str | None]) -> SearchResult:
        if self.closed_book:
            return SearchResult([[] for _ in queries])
        res = self.retriever.search(list(queries), max(self.top_k, self.recall_k))
        return res if isinstance(res, SearchResult) else SearchResult(res)

    def shown(self, hits) -> list:
        out = []
        for doc_id, _ in hits[: self.top_k]:
            if doc_id not in self.passages:
                raise DataError(f"retriever returned doc id '{doc_id}', which is not in the corpus")
            out.append(self.passages[doc_id])
        return out

    def answer(self, items: list, queries: list[str | None], sample_indices: list[int],
               desc: str | None = None, results: SearchResult | None = None) -> tuple[list[dict], list[Response]]:
        """One turn record per item (and the raw responses, for accounting); ``desc`` names the
        batch in the job's progress lines (convrag.progress); ``results``: ``retrieve(queries)``
        when the caller ran it already (elsewhere: lic_rag's simulate retrieves with an API model
        while the GPU answers other conversations)."""
        if self.closed_book:
            queries = [None] * len(items)
        if results is None:
            results = self.retrieve(queries)
        elif len(results) != len(items):
            raise ValueError(f"answer: {len(results)} retrieval results for {len(items)} items")
        reqs = [Request(messages=self.build_messages(it, self.shown(hits)), sampling=self.sampling, seed=self.seed,
                        sample_index=si) for it, hits, si in zip(items, results, sample_indices)]
        resps = self.engine.generate(reqs) if desc is None else self.engine.generate(reqs, desc=desc)
        turns = []
        record_cost = self.capabilities.uses_llm
        for q, hits, cost, r in zip(queries, results, results.costs, resps):
            answer = self.parse_answer(r.text)
            turn = {"role": "assistant", "text": r.text, "query": q,
                    "retrieved": [{"doc_id": d, "score": float(s)} for d, s in hits],
                    "answer": answer, "answered": answer is not None}
            if record_cost:
                turn["retrieval_cost"] = cost.to_dict()
            turns.append(turn)
        return turns, resps
