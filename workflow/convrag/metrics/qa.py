"""SQuAD v1.1 answer metrics (exact match and token F1), max over gold aliases.

Reimplemented to match the official SQuAD v1.1 ``evaluate-v1.1.py`` exactly so that scores
are comparable with published numbers: the same normalisation (lower-case, strip ASCII
punctuation, drop the articles a/an/the, collapse whitespace) and the same F1 (multiset
token overlap).  Edge case kept from the official script: when either side normalises to
no tokens, F1 is 0 (even if both are empty), while EM compares the normalised strings
(so two empty strings give EM 1).  A missing prediction (``None``) scores 0 on both.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Iterable

__all__ = ["normalize_answer", "exact_match", "f1_score"]

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """Lower-case, remove punctuation, remove articles, collapse whitespace (SQuAD order)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _golds(golds: str | Iterable[str]) -> list[str]:
    out = [golds] if isinstance(golds, str) else list(golds)
    if not out:
        # An empty gold list is a data bug; scoring it 0 would silently hide it.
        raise ValueError("no gold answers given (need the answer and/or its aliases)")
    return out


def _em_one(pred: str, gold: str) -> float:
    return float(normalize_answer(pred) == normalize_answer(gold))


def _f1_one(pred: str, gold: str) -> float:
    p, g = normalize_answer(pred).split(), normalize_answer(gold).split()
    num_same = sum((Counter(p) & Counter(g)).values())
    if num_same == 0:
        return 0.0
    precision, recall = num_same / len(p), num_same / len(g)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str | None, golds: str | Iterable[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold, else 0.0."""
    golds = _golds(golds)
    if prediction is None:
        return 0.0
    return max(_em_one(prediction, g) for g in golds)


def f1_score(prediction: str | None, golds: str | Iterable[str]) -> float:
    """Token-level F1 (SQuAD v1.1), the maximum over the gold answer and its aliases."""
    golds = _golds(golds)
    if prediction is None:
        return 0.0
    return max(_f1_one(prediction, g) for g in golds)
