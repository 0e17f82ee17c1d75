"""Passages whose text is empty (or only whitespace), in a corpus a loader reads from files.

Why an error by default: an empty passage can only be retrieved by chance (it shares no term with
any query) yet it counts in the corpus, and, when it is a gold passage, it turns a turn's recall
into zero without a word; a corpus that holds some usually was cut or converted wrongly. A corpus
that really has them (a release with blank pages) says so with the config key ``empty_passages:
drop`` (``benchmarks.<name>.empty_passages`` for MTRAG-type benchmarks, ``corpora.<name>.
empty_passages`` for HippoRAG corpora): they are then left out and counted, with the file and line
of the first ones, in the corpus's check report (``results/corpora/<corpus>/gold.json``, beside
the gold ids missing from it, and in the captions of the retrieval tables built on it) or, for a
HippoRAG corpus, in the log of the job that prepares it.
"""

from __future__ import annotations

from typing import Any

from convrag.errors import ConfigError, DataError

MODES = ("error", "drop")
SHOWN = 5  # places of dropped passages named in a report


class EmptyPassages:
    """What one corpus read does with passages with empty text: ``mode`` (``error`` | ``drop``)
    from the config key ``key`` (named in the error, so the message says how to accept them)."""

    def __init__(self, mode: str | None = "error", key: str = "empty_passages"):
        mode = mode or "error"
        if mode not in MODES:
            raise ConfigError(f"{key}: error or drop, got {mode!r}")
        self.mode, self.key = mode, key
        self.dropped: list[str] = []

    def keep(self, text: str, where: str, doc_id: str) -> bool:
        """False for a passage to leave out (counted); raise in ``error`` mode; True otherwise."""
        if text.strip():
            return True
        if self.mode == "error":
            raise DataError(f"{where}: field 'text' of passage '{doc_id}' is empty: an empty passage can never be "
                            f"retrieved on its terms; fix the corpus, or set {self.key}: drop to leave such passages "
                            "out and count them")
        self.dropped.append(f"{where} ('{doc_id}')")
        return False

    def report(self) -> dict[str, Any]:
        """The counts for a corpus's check report."""
        return {"empty_passages": self.mode, "empty_passages_dropped": len(self.dropped),
                "first_empty_passages": self.dropped[:SHOWN]}


def caption_part(r: dict) -> str | None:
    """``<benchmark> <domain> <n> empty passages dropped`` for a check report that dropped some."""
    n = r.get("empty_passages_dropped")
    return f"{r['benchmark']} {r['domain']} {n:,} empty passages dropped" if n else None
