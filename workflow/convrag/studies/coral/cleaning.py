"""The construction's cleaning filters (CORAL §3.1) and the dataset statistics of §3.3 / Table 1.

Why: the paper drops unusable reference passages before any conversation is built, and a run
should say what its conversations and corpus amount to next to the paper's 8,000 conversations,
3.17 golden passages per turn, 255-token responses and 200K passages.

The filters, as the paper describes them and the CORAL repository applies them (read at
Ariya12138/CORAL, ``Constructing_Process/Single_Tree_Random_Walk/cleaning_data.py``; written
here in the project's own code):

- :func:`too_short`: a passage of fewer than ``min_words`` (16) whitespace words is dropped;
- :func:`non_english_share`: the share of a passage's characters that are not printable ASCII
  (letters, digits, space, ASCII punctuation); over ``max_non_english`` (0.3) it is dropped;
- :func:`term_recall`: the share of a response sentence's content words (lower-cased word
  tokens, minus a small stop-word list and punctuation) that occur in a passage; a passage
  counts as supporting the sentence (its citation is kept) when the recall exceeds
  ``min_recall`` (0.3), as the repository's ``check_cited`` keeps a reference.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

import numpy as np

MIN_WORDS = 16
MAX_NON_ENGLISH = 0.3
MIN_RECALL = 0.3
_WORD = re.compile(r"\w+", re.UNICODE)
_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_ENGLISH = re.compile(r"[\x20-\x7E]")  # printable ASCII: letters, digits, space, punctuation
# a short English function-word list (the filter needs only the words that carry no content)
STOPWORDS = frozenset("""a an and are as at be been but by for from had has have he her his i if in into is it its
of on or our she so that the their them then there these they this to was we were what when where which who will
with you your""".split())


def too_short(text: str, min_words: int = MIN_WORDS) -> bool:
    """Fewer than ``min_words`` whitespace-separated words."""
    return len((text or "").split()) < min_words


def non_english_share(text: str) -> float:
    """Share of the characters (whitespace other than space counted as space) that are not
    printable ASCII; 0 for an empty text."""
    t = re.sub(r"\s", " ", text or "")
    return (len(t) - len(_ENGLISH.findall(t))) / len(t) if t else 0.0


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall((text or "").lower()) if w not in STOPWORDS}


def term_recall(sentence: str, passage: str) -> float:
    """Share of the sentence's content words found in the passage (0 when it has none)."""
    words = content_words(sentence)
    return len(words & content_words(passage)) / len(words) if words else 0.0


def clean_passages(passages: Iterable[Mapping], min_words: int = MIN_WORDS,
                   max_non_english: float = MAX_NON_ENGLISH) -> tuple[list[Mapping], dict]:
    """(kept passages, report): passages (``{..., text}``) without the too-short and the
    non-English ones; the report counts ``given``, ``kept`` and the drops by reason
    (``too_short`` first, then ``non_english``) with their ids (``id`` or ``doc_id``)."""
    kept, dropped = [], {"too_short": [], "non_english": []}
    given = 0
    for p in passages:
        given += 1
        text = p.get("text") or ""
        pid = p.get("id", p.get("doc_id"))
        if too_short(text, min_words):
            dropped["too_short"].append(pid)
        elif non_english_share(text) > max_non_english:
            dropped["non_english"].append(pid)
        else:
            kept.append(p)
    return kept, {"given": given, "kept": len(kept), "dropped": {k: len(v) for k, v in dropped.items()},
                  "dropped_ids": dropped, "min_words": min_words, "max_non_english": max_non_english}


def supported_citations(sentence: str, cited: Mapping[str, str], min_recall: float = MIN_RECALL) -> list[str]:
    """The ids of ``cited`` (id -> passage text) whose term recall of ``sentence`` exceeds
    ``min_recall``, in the given order: the citations the term-recall filter keeps."""
    return [pid for pid, text in cited.items() if term_recall(sentence, text) > min_recall]


_MARKED = re.compile(r"((?:\[[^\[\]]+\])+)")  # a run of citation markers after a sentence
_MARKER = re.compile(r"\[([^\[\]]+)\]")


def clean_tasks(tasks: Sequence, corpus: Mapping[str, str], *, min_words: int = MIN_WORDS,
                max_non_english: float = MAX_NON_ENGLISH, min_recall: float = MIN_RECALL) -> tuple[list, dict]:
    """The filters applied to built conversations (TurnTasks with ``labels.reference_with_citations``
    and ``labels.cited_passages``, as :mod:`convrag.studies.coral.contextualise` writes them):
    a citation ``[doc id]`` stays only when the passage (``corpus``: doc id -> text) passes
    :func:`clean_passages` and :func:`term_recall` of the text before the marker run (since the
    previous run) exceeds ``min_recall``. ``cited_passages``, ``gold_docs``, ``n_citations`` and
    ``has_gold`` follow the kept citations; a marker that names no cited passage (``[citation
    needed]``) is left as it is. Returns (new tasks, report: ``citations`` given and kept,
    ``dropped`` by reason, ``turns_losing_gold``)."""
    from dataclasses import replace

    cited_ids = {d for t in tasks for d in t.labels.get("cited_passages") or []}
    missing = sorted(cited_ids - set(corpus))
    if missing:
        raise ValueError(f"clean_tasks: cited passage {missing[0]!r} is not in the corpus ({len(missing)} missing)")
    _, rep = clean_passages(({"id": d, "text": corpus[d]} for d in sorted(cited_ids)), min_words, max_non_english)
    bad = {d: why for why, ids in rep["dropped_ids"].items() for d in ids}
    dropped = {"too_short": 0, "non_english": 0, "term_recall": 0}
    given = kept_n = lost = 0
    out = []
    for t in tasks:
        marked = t.labels.get("reference_with_citations")
        cited = set(t.labels.get("cited_passages") or [])
        if not isinstance(marked, str) or not cited:
            out.append(t)
            continue
        parts, last, order = [], 0, []
        for m in _MARKED.finditer(marked):
            sentence = marked[last:m.start()]
            keep = []
            for ref in _MARKER.findall(m.group(1)):
                if ref not in cited:
                    keep.append(ref)
                    continue
                given += 1
                why = bad.get(ref) or ("term_recall" if term_recall(sentence, corpus[ref]) <= min_recall else None)
                if why:
                    dropped[why] += 1
                else:
                    kept_n += 1
                    keep.append(ref)
                    order += [ref] if ref not in order else []
            parts.append(sentence + "".join(f"[{r}]" for r in keep))
            last = m.end()
        parts.append(marked[last:])
        n = sum(1 for m in _MARKER.finditer("".join(parts)) if m.group(1) in cited)
        lost += bool(t.gold_docs) and not order
        labels = {**t.labels, "reference_with_citations": "".join(parts), "cited_passages": order,
                  "n_citations": n, "has_gold": bool(order)}
        out.append(replace(t, labels=labels, gold_docs={d: 1 for d in order}))
    return out, {"citations": given, "kept": kept_n, "dropped": dropped, "turns_losing_gold": lost,
                 "min_words": min_words, "max_non_english": max_non_english, "min_recall": min_recall}


# ---------------------------------------------------------------------------------------
# §3.3 / Table 1: what the conversations and the corpus amount to
# ---------------------------------------------------------------------------------------


def tokens(text: str | None) -> int:
    """Word and punctuation tokens (``\\w+`` runs and single other characters), close to NLTK's
    word tokenizer that the CORAL repository uses; the paper does not name its tokenizer."""
    return len(_TOKEN.findall(text or ""))


def _boot_ci(values_by_conv: Sequence[np.ndarray], n: int, seed: int) -> tuple[float, float]:
    """95% percentile interval of the per-turn mean, conversations resampled with replacement."""
    if len(values_by_conv) < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    sums = np.array([v.sum() for v in values_by_conv])
    counts = np.array([len(v) for v in values_by_conv])
    idx = rng.integers(0, len(sums), size=(n, len(sums)))
    means = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def dataset_statistics(tasks: Sequence, corpus_size: int | None, n_resamples: int = 1000, seed: int = 0):
    """Table 1 / §3.3: one row: ``conversations``, ``turns``, ``turns_per_conversation``,
    ``passages_per_turn`` (golden passages with grade > 0, mean over turns), ``response_tokens``
    (:func:`tokens` of the golden response, mean over turns with one), each mean with a 95%
    interval (``*_low`` / ``*_high``; conversations resampled), and ``corpus_passages`` (blank for
    ``corpus_size`` None: no corpus read)."""
    import pandas as pd

    by_conv: dict[str, list] = {}
    for t in tasks:
        by_conv.setdefault(t.conversation_id, []).append(t)
    gold = [np.array([sum(1 for g in t.gold_docs.values() if g > 0) for t in ts], float) for ts in by_conv.values()]
    resp = [np.array([tokens(t.reference_answers[0]) for t in ts if t.reference_answers], float)
            for ts in by_conv.values()]
    resp = [r for r in resp if len(r)]
    turns = sum(len(g) for g in gold)
    row = {"conversations": len(by_conv), "turns": turns,
           "turns_per_conversation": turns / len(by_conv) if by_conv else float("nan")}
    for name, vals, s in (("passages_per_turn", gold, seed), ("response_tokens", resp, seed + 1)):
        total = sum(len(v) for v in vals)
        row[name] = float(sum(v.sum() for v in vals) / total) if total else float("nan")
        row[f"{name}_low"], row[f"{name}_high"] = _boot_ci(vals, n_resamples, s)
    row["corpus_passages"] = int(corpus_size) if corpus_size is not None else float("nan")
    return pd.DataFrame([row])


def count_lines(path) -> int:
    """Records of a JSONL file (non-blank lines), without parsing them (a 200K-passage corpus)."""
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())
