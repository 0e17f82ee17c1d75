"""Judge-free copy detector: is a context document a near-verbatim copy of a gold document?

Some "false misses" of a retriever are not new evidence but a duplicate of a gold document
under another id (a mirrored page, another chunking). The "Worse Labels" study counts them
without a judge: a candidate document is a copy of a gold document when

    word 8-gram containment >= 0.8   OR   character 5-gram Jaccard >= 0.7.

Normalisation (``normalize``), applied to both texts first: Unicode NFKC, lower-case
(``str.casefold``), every character that is neither a letter, a digit nor whitespace
(punctuation, symbols, "_") replaced by a space, whitespace collapsed to single spaces and
stripped. Punctuation thus separates words and never counts: "don't" becomes "don t",
"e-mail" "e mail", and two texts differing only in punctuation or line breaks are equal.

* Word 8-gram containment = |G8(candidate) & G8(gold)| / |G8(candidate)| over SETS of word
  8-grams (the words of the normalised text): the share of the candidate's distinct 8-grams
  found in the gold document. It is asymmetric: a short excerpt of a long gold document
  scores 1. A candidate of fewer than 8 words has no 8-grams, so containment is undefined
  (NaN) and only the Jaccard rule decides. A gold document of fewer than 8 words contains
  none of a longer candidate's 8-grams (containment 0).
* Character 5-gram Jaccard = |C5(c) & C5(g)| / |C5(c) | C5(g)| over SETS of character
  5-grams of the normalised text (spaces included). A text of fewer than 5 characters has no
  5-grams; when both sets are empty Jaccard is undefined (NaN), when one is, it is 0.

A NaN score never satisfies its rule; an empty candidate is never a copy. Thresholds are
inclusive (a ratio equal to the threshold, up to 1e-12 for floating point, passes).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Mapping, NamedTuple, Sequence

from convrag.errors import ConfigError, DataError

__all__ = [
    "CONTAINMENT_THRESHOLD",
    "JACCARD_THRESHOLD",
    "CopyMatch",
    "char_ngram_jaccard",
    "is_copy",
    "normalize",
    "word_ngram_containment",
]

WORD_N = 8
CHAR_N = 5
CONTAINMENT_THRESHOLD = 0.8
JACCARD_THRESHOLD = 0.7
_EPS = 1e-12
_NON_WORD = re.compile(r"[\W_]+")  # \W is Unicode-aware: letters and digits of any script survive
_NAN = float("nan")


class CopyMatch(NamedTuple):
    """``is_copy``'s answer: unpacks as (is_copy, gold, containment, jaccard)."""

    is_copy: bool
    gold: object  # the best-matching gold's key (mapping) or index (sequence); None without golds
    containment: float
    jaccard: float


def normalize(text: str) -> str:
    """NFKC, casefold, non-letter/digit characters -> space, whitespace collapsed (see module doc)."""
    if not isinstance(text, str):
        raise DataError(f"overlap: expected a document text (str), got {type(text).__name__}")
    return " ".join(_NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).split())


def _word_ngrams(norm: str, n: int = WORD_N) -> set[tuple[str, ...]]:
    words = norm.split()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _char_ngrams(norm: str, n: int = CHAR_N) -> set[str]:
    return {norm[i:i + n] for i in range(len(norm) - n + 1)}


def _containment(cand: set, gold: set) -> float:
    return len(cand & gold) / len(cand) if cand else _NAN


def _jaccard(a: set, b: set) -> float:
    union = len(a | b)
    return len(a & b) / union if union else _NAN


def word_ngram_containment(candidate: str, gold: str, n: int = WORD_N) -> float:
    """Share of the candidate's distinct word n-grams found in ``gold``; NaN under n words."""
    return _containment(_word_ngrams(normalize(candidate), n), _word_ngrams(normalize(gold), n))


def char_ngram_jaccard(a: str, b: str, n: int = CHAR_N) -> float:
    """Jaccard similarity of the two texts' character n-gram sets; NaN when both have none."""
    return _jaccard(_char_ngrams(normalize(a), n), _char_ngrams(normalize(b), n))


def _passes(x: float, threshold: float) -> bool:
    return x == x and x >= threshold - _EPS  # NaN fails


def is_copy(
    candidate: str,
    golds: Sequence[str] | Mapping[object, str],
    *,
    containment_threshold: float = CONTAINMENT_THRESHOLD,
    jaccard_threshold: float = JACCARD_THRESHOLD,
) -> CopyMatch:
    """Is ``candidate`` a near-verbatim copy of one of ``golds`` (texts, or id -> text)?

    Returns ``CopyMatch(is_copy, gold, containment, jaccard)`` for the best-matching gold:
    golds are ranked by (passes the rule, containment, Jaccard), NaN lowest, first wins ties;
    when nothing passes, the closest gold is still named so a near miss can be inspected.
    """
    for name, t in (("containment_threshold", containment_threshold), ("jaccard_threshold", jaccard_threshold)):
        if not 0.0 < t <= 1.0:
            raise ConfigError(f"is_copy: {name} must be in (0, 1], got {t!r}")
    if isinstance(golds, str):
        raise DataError("is_copy: golds must be a list of gold texts or a mapping id -> text, got one string")
    items = list(golds.items()) if isinstance(golds, Mapping) else list(enumerate(golds))
    cand = normalize(candidate)
    c_words, c_chars = _word_ngrams(cand), _char_ngrams(cand)
    best, best_key = None, None
    for key, text in items:
        g = normalize(text)
        cont, jac = _containment(c_words, _word_ngrams(g)), _jaccard(c_chars, _char_ngrams(g))
        ok = _passes(cont, containment_threshold) or _passes(jac, jaccard_threshold)
        rank = (ok, cont if cont == cont else -1.0, jac if jac == jac else -1.0)
        if best is None or rank > best[0]:
            best, best_key = (rank, cont, jac), key
    if best is None:
        return CopyMatch(False, None, _NAN, _NAN)
    return CopyMatch(bool(best[0][0]), best_key, float(best[1]), float(best[2]))
