"""The MTRAG / MTRAG-UN scorer, exact where IBM's official scripts are exact.

Reproduces ``IBM/mt-rag-benchmark`` ``scripts/evaluation/`` at commit ``cc5b1d4``
(``run_algorithmic.py``, ``judge_utils.py``, ``judge_wrapper.py``, ``run_retrieval_eval.py``)
in the project's own code. The official pipeline stores every metric per task and never
averages over tasks; the corpus means, NaN handling and the leaderboard harmonic mean below
are the conventions this project uses to report them (each function says which).

Per task, in the official order:

1. Algorithmic metrics (``algorithmic_scores``, ``rb_alg``): prediction = the first
   prediction's text. ROUGE-L vs the first target (``convrag.metrics.text.rouge_l``);
   BERTScore recall vs the first target and precision vs every passage text
   (``convrag.metrics.text.bertscore_parts``, paper configuration ``PAPER_BERTSCORE``);
   SQuAD-style token recall vs the first target (only a fallback). RB_alg (``RB_agg`` in the
   code) is the harmonic mean of R, L and E, see ``rb_alg``.
2. Clarification judge, MTRAG-UN only (``parse_clarification``).
3. IDK judge (``parse_idk``).
4. RAGAS faithfulness = RL_F (an LLM judge; not here).
5. RB_llm judge (``parse_rb_llm_rating``, ``rb_llm_median``; inputs ``render_conversation``
   and ``split_conversation``).
6. Conditioning of RL_F, RB_llm and RB_alg on answerability (``condition_metric``).

Retrieval (``aggregate_retrieval``): per-collection means and the official "all" row, which
weights each collection by its number of submitted tasks, plus the papers' macro average
over domains.

Where the papers differ from the code (the code is what is reproduced):

* the MTRAG-UN paper's clarification-judge figure shows a plain yes/no output; the code asks
  for JSON ``{"decision": ..., "explanation": ...}`` and parses it as ``parse_clarification``;
* the task page promises retrieval @10; the script computes @1, @3, @5 only; the MTRAG-UN paper
  reports @5 and @10 as macro averages over domains, the script's "all" row is a task-weighted
  average (``aggregate_retrieval`` gives both);
* the shipped RB_llm scores are medians over several judges; the script as released runs one
  judge (the median of one value), so a single judge will not match the shipped values.
"""

from __future__ import annotations

import json
import math
import re
import string
from collections import Counter
from typing import Iterable, Mapping, Sequence

from convrag.metrics.qa import normalize_answer
from convrag.metrics.text import bertscore_parts, rouge_l

__all__ = [
    "ANSWERABLE",
    "CONDITIONED_METRICS",
    "CONVERSATIONAL",
    "IDK_UNKNOWN",
    "NO_ANSWER_CLASSES",
    "PARTIAL",
    "RATING_PATTERNS",
    "UNANSWERABLE",
    "UNDERSPECIFIED",
    "aggregate_retrieval",
    "algorithmic_scores",
    "condition_metric",
    "conditioned_metrics",
    "domain_of",
    "harmonic_mean",
    "idk_from_conditional_idk",
    "leaderboard",
    "parse_clarification",
    "parse_idk",
    "parse_rb_llm_rating",
    "rb_alg",
    "rb_llm_median",
    "render_conversation",
    "split_conversation",
    "token_recall",
]

ANSWERABLE = "ANSWERABLE"
PARTIAL = "PARTIAL"
UNANSWERABLE = "UNANSWERABLE"
CONVERSATIONAL = "CONVERSATIONAL"
UNDERSPECIFIED = "UNDERSPECIFIED"
NO_ANSWER_CLASSES = (UNANSWERABLE, CONVERSATIONAL)
CONDITIONED_METRICS = ("RL_F", "RB_llm", "RB_alg")  # the official order of conditioning
IDK_UNKNOWN = "unknown"


# ---------------------------------------------------------------------------------------
# Algorithmic metrics and RB_alg
# ---------------------------------------------------------------------------------------


def token_recall(prediction: str, target: str) -> float:
    """Share of the target's tokens found in the prediction (multiset overlap).

    The official ``recall`` (RB_alg's fallback for a missing BERTScore recall): both texts
    normalised as SQuAD does (lower-case, ASCII punctuation removed, articles a/an/the
    removed, whitespace collapsed: ``convrag.metrics.qa.normalize_answer``); 0 when nothing
    overlaps (so an empty target gives 0, not a division error).
    """
    pred, gold = normalize_answer(prediction).split(), normalize_answer(target).split()
    common = sum((Counter(pred) & Counter(gold)).values())
    return 0.0 if common == 0 else common / len(gold)


def rb_alg(
    bert_recall: float | None,
    rouge_l_f: float,
    passage_precisions: Sequence[float | None],
    token_recall_value: float | None = None,
) -> float:
    """RB_alg (``RB_agg`` in the official code) from its three parts.

    * R = (BERTScore recall vs the FIRST target + 1) / 2. When the BERTScore recall is missing
      (``None``), the official code falls back to the raw token recall vs the first target
      (``token_recall``; NOT shifted by (x+1)/2); ``token_recall_value`` must then be given.
    * L = ROUGE-L F vs the first target.
    * E = (max over passages of the BERTScore precision + 1) / 2; a ``None`` precision counts
      as 0 before the max (so E = 0.5, not 0); no passages at all gives E = 0.
    * RB_alg = 0 if any of R, L, E equals 0, else 3RLE / (RL + RE + LE) (their harmonic mean).

    R = 0 only for a rescaled recall of exactly -1; rescaled precisions can be negative, so
    E lies in (0, 1]. NaN inputs propagate (the official arithmetic does the same).
    """
    if bert_recall is None:
        if token_recall_value is None:
            raise ValueError("rb_alg: BERTScore recall missing and no token recall to fall back on")
        r = float(token_recall_value)
    else:
        r = (float(bert_recall) + 1) / 2
    lf = float(rouge_l_f)
    if len(passage_precisions) == 0:
        e = 0.0
    else:
        e = (max(0.0 if p is None else float(p) for p in passage_precisions) + 1) / 2
    if r == 0 or lf == 0 or e == 0:
        return 0.0
    return 3 * r * lf * e / (r * lf + r * e + lf * e)


def algorithmic_scores(
    predictions: Sequence[str],
    targets_per_item: Sequence[Sequence[str]],
    passages_per_item: Sequence[Sequence[str]],
    bertscore: Mapping,
    batch_size: int = 64,
    device: str | None = None,
) -> list[dict]:
    """The official algorithmic metrics per task, with RB_alg.

    ``predictions[i]``: the task's prediction text (the official scorer uses
    ``predictions[0].text``); ``targets_per_item[i]``: its target texts (only the first is
    used for RB_alg; ROUGE-L and BERTScore recall are reported against the first target);
    ``passages_per_item[i]``: its context texts (text only, no title, as the official
    scorer). ``bertscore``: ``PAPER_BERTSCORE`` or ``OFFLINE_BERTSCORE`` (or any
    ``bertscore_parts`` keywords). All BERTScore pairs go in one batched call.

    Returns per task ``{"RougeL", "BertscoreR", "BertKPrec" (list, passage order),
    "BertKPrec_max" (None without passages), "Recall", "RB_alg"}``. A task without targets
    is a data error here (the official scorer silently writes no metrics for it).
    """
    n = len(predictions)
    if len(targets_per_item) != n or len(passages_per_item) != n:
        raise ValueError("algorithmic_scores: need one target list and one passage list per prediction")
    firsts = []
    for i, targets in enumerate(targets_per_item):
        targets = [targets] if isinstance(targets, str) else list(targets)
        if not targets:
            raise ValueError(f"algorithmic_scores: item {i} has no target")
        firsts.append(targets[0])
    parts = bertscore_parts(
        list(predictions), firsts, [list(p) for p in passages_per_item],
        batch_size=batch_size, device=device, **dict(bertscore),
    )
    out = []
    for pred, target, part in zip(predictions, firsts, parts):
        rl = rouge_l(pred, target)
        tr = token_recall(pred, target)
        precs = list(part.passage_precisions)
        out.append({
            "RougeL": rl,
            "BertscoreR": part.recall,
            "BertKPrec": precs,
            "BertKPrec_max": max(precs) if precs else None,
            "Recall": tr,
            "RB_alg": rb_alg(part.recall, rl, precs, tr),
        })
    return out


# ---------------------------------------------------------------------------------------
# RB_llm: judge inputs and rating parser
# ---------------------------------------------------------------------------------------


def render_conversation(turns: Iterable[Mapping]) -> str:
    """The conversation as the judges see it: one ``speaker: text`` line per turn."""
    return "\n".join(f"{t['speaker']}: {t['text']}" for t in turns)


def split_conversation(rendered: str) -> tuple[str, str]:
    """(previous conversation, current question) for the RB_llm prompt, as the official code.

    Official quirks kept: lines are ``str.splitlines`` of the rendered conversation; the
    question is the text after the first ``"user: "`` of the LAST line starting with
    ``"user:"`` (stripped; text after a second ``"user: "`` on that line is lost, and lines
    of a multi-line question after the first are dropped); the previous conversation is
    every line except the LAST LINE of the rendering (not "the lines before the question"),
    and it is empty whenever the conversation has exactly one user line, even if agent lines
    precede it. No user line, or a ``"user:"`` line without the space, raises ValueError
    (the official code crashes there).
    """
    lines = rendered.splitlines()
    users = [ln for ln in lines if ln.startswith("user:")]
    if not users:
        raise ValueError("split_conversation: no 'user:' line in the conversation")
    pieces = users[-1].split("user: ")
    if len(pieces) < 2:
        raise ValueError(f"split_conversation: cannot find 'user: ' in {users[-1]!r}")
    question = pieces[1].strip()
    if len(users) == 1:
        return "", question
    return "\n".join(lines[:-1]), question


_EXAMPLE_TAIL = re.compile(r"for example:[^\n]*", re.IGNORECASE)
_INT = r"(\d+)"
_DEC = r"([0-9]*[.]?[0-9]+)"  # ASCII digits only, as in the official patterns that use [0-9]
_SIGNED = r"([-+]?\d*[.]?\d+)"

# (documented form, pattern); tried in this order, and the LAST pattern that matches anywhere
# decides (its first match in the text). Case-insensitive; the spaces are literal single spaces.
RATING_PATTERNS: tuple[tuple[str, re.Pattern], ...] = tuple(
    (form, re.compile(rx, re.IGNORECASE))
    for form, rx in (
        ("Rating: [[n]]", r"rating: \[\[" + _INT + r"\]\]"),
        ("Rating: n", r"rating: " + _INT),
        ("[[n]]", r"\[\[" + _INT + r"\]\]"),
        ("[n]", r"\[" + _INT + r"\]"),
        ("Rating: [[x.y]]", r"rating: \[\[" + _DEC + r"\]\]"),
        ("Overall Rating: x.y", r"overall rating: " + _DEC),
        ("Score: x.y/10", r"score: " + _DEC + r"/10"),
        ("Score: x.y", r"score: " + _DEC),
        ("[Rating]<newline>n", r"\[rating\]\n" + _INT),
        ("Rating: [[n/10]]", r"rating: \[\[" + _INT + r"/10\]\]"),
        ("Rating: [[x (unclosed, signed)", r"rating: \[\[" + _SIGNED),
        ("x out of 10 (signed)", _SIGNED + r" out of 10"),
    )
)


def parse_rb_llm_rating(text) -> float:
    """The RB_llm judge's rating on a 0-1 scale, as the official ``extract_rating``.

    * the input is turned into a string (``None`` -> "None", so it falls back to 0.5);
    * on every line, the text from "for example:" (any case) to the end of that line is
      removed first (the prompt's own example "Rating: [[5]]" must not count if echoed);
    * each of the twelve ``RATING_PATTERNS`` is tried in order; for a pattern that matches,
      the value is its FIRST match in the text / 10, and a later pattern in the list
      overrides an earlier one (so "Rating: [[8]] ... 6 out of 10" gives 0.6, and "[1]" in a
      citation loses to "Rating: [[7]]");
    * the final value must lie in (0, 1]: otherwise (0, negative, above 10 on the judge's
      scale, e.g. "Score: 86/100" -> 8.6) the score is 0.5, even if an earlier pattern had a
      valid value. Nothing matching also gives 0.5.
    """
    s = _EXAMPLE_TAIL.sub("", str(text))
    value = 0.5
    for _form, rx in RATING_PATTERNS:
        m = rx.search(s)
        if m:
            value = float(m.group(1)) / 10
    if value <= 0 or value > 1:
        return 0.5
    return value


def rb_llm_median(ratings: Sequence[float]) -> float:
    """RB_llm of one task: the median of the judges' parsed ratings (one judge: its rating)."""
    vals = sorted(float(x) for x in ratings)
    if not vals:
        raise ValueError("rb_llm_median: no ratings")
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


# ---------------------------------------------------------------------------------------
# IDK and clarification judges
# ---------------------------------------------------------------------------------------

_FIRST_WORD = re.compile(r"\s*([A-Za-z]+)")


def parse_idk(text):
    """The IDK judge's verdict from its output, as the official ``first_token_idk``.

    After leading whitespace, the maximal run of ASCII letters is the word (lower-cased):
    "yes" -> 1 (the response says it cannot answer), "no" -> 0, any other word -> 0.5 (the
    prompt's "partial", but also "Yesterday", "Nope", "Output", ...). Punctuation ends the
    word ("Yes." and "no_answer" count), a leading non-letter does not ("**Yes**", "1. yes",
    "" and non-ASCII letters give ``IDK_UNKNOWN`` = "unknown", which keeps the raw metric in
    the conditioning). A non-string output (e.g. a missing one) gives None, which the
    conditioning also treats as "keep the raw metric".
    """
    if not isinstance(text, str):
        return None
    m = _FIRST_WORD.match(text)
    if m is None:
        return IDK_UNKNOWN
    word = m.group(1).lower()
    return 1 if word == "yes" else 0 if word == "no" else 0.5


_FENCED = re.compile(r"```json\s*(.*?)\s*```", re.DOTALL)
_BRACED = re.compile(r"\{\s*(.*?)\s*\}", re.DOTALL)
_JSON_ESCAPES = set('"\\/bfnrt')


def _drop_bad_escapes(s: str) -> str:
    """Remove every backslash not followed by a JSON escape character or ``u`` + 4 hex digits.

    Each backslash is judged by the character after it alone (a backslash kept because the
    next one follows it does not protect that next one), as the official clean-up does.
    """
    out = []
    for i, ch in enumerate(s):
        if ch == "\\":
            nxt = s[i + 1 : i + 2]
            hex4 = s[i + 2 : i + 6]
            unicode_escape = nxt == "u" and len(hex4) == 4 and all(c in string.hexdigits for c in hex4)
            if not (nxt in _JSON_ESCAPES or unicode_escape):
                continue  # an invalid escape: drop the backslash
        out.append(ch)
    return "".join(out)


def _clarification_json(raw: str):
    if "```json" in raw:
        m = _FENCED.search(raw)
    else:
        m = _BRACED.search(raw)
    if m is None:
        raise ValueError("no JSON object")
    body = _drop_bad_escapes(m.group(1))
    if not body.startswith("{"):
        body = "{" + body
    if not body.endswith("}"):
        body = body + "}"
    return json.loads(body)


def parse_clarification(text) -> float:
    """The clarification judge's decision (MTRAG-UN): yes -> 1, no -> 0, else 0.5.

    Official extraction: if the output contains "```json" (lower case), the JSON is the
    shortest text between it and the next "```" (no closing fence -> 0.5, even if a valid
    object follows); otherwise it is the text between the FIRST "{" and the FIRST "}" after
    it (so an explanation containing "}" or a nested object breaks it -> 0.5). Backslashes
    that do not start a JSON escape are deleted, braces are added where missing, and the
    result must parse as a JSON object whose "decision" is a string; its lower-cased value
    must be exactly "yes" or "no" ("Yes" counts, " yes" or "yes." do not). Anything else --
    no JSON, invalid JSON, a list, a missing or non-string decision, a non-string output --
    gives 0.5.
    """
    try:
        decision = _clarification_json(text).get("decision", "").lower()
    except Exception:
        return 0.5
    return 1.0 if decision == "yes" else 0.0 if decision == "no" else 0.5


# ---------------------------------------------------------------------------------------
# Conditioning on answerability
# ---------------------------------------------------------------------------------------


def _answerability(value) -> str | None:
    if value is None or isinstance(value, str):
        return value
    values = list(value)
    return values[0] if values else None


def condition_metric(raw, answerability, idk, clarification=None):
    """RL_F, RB_llm or RB_alg after the official answerability conditioning.

    ``answerability``: the task's class, or its list (the official code reads element 0;
    an empty list counts as missing). Compared exactly (upper case, as in the data).
    ``idk``: ``parse_idk``'s verdict (1, 0, 0.5, "unknown" or None); ``clarification``:
    ``parse_clarification``'s (1, 0, 0.5), required for UNDERSPECIFIED tasks. In order:

    1. UNDERSPECIFIED: 1 if the clarification judge gave 1, else 0 (0.5 included);
    2. UNANSWERABLE or CONVERSATIONAL: 1 if IDK = 1; 0 if IDK is 0 or 0.5;
    3. any other class (ANSWERABLE, PARTIAL, missing) with IDK = 1: 0;
    4. otherwise the raw value, unchanged (also NaN): an answerable task with a "partial"
       IDK is not penalised, and an unanswerable one with an "unknown" (or None) IDK keeps
       its raw score. PARTIAL is treated exactly as ANSWERABLE.

    Overrides are returned as floats (the official code writes the ints 1 and 0).
    """
    cls = _answerability(answerability)
    if cls == UNDERSPECIFIED:
        if clarification is None:
            raise ValueError("condition_metric: an UNDERSPECIFIED task needs the clarification judge's decision")
        return 1.0 if clarification == 1 else 0.0
    if cls in NO_ANSWER_CLASSES:
        if idk == 1:
            return 1.0
        if idk in (0, 0.5):
            return 0.0
    elif idk == 1:
        return 0.0
    return raw


def conditioned_metrics(raw: Mapping[str, float], answerability, idk, clarification=None) -> dict:
    """``condition_metric`` applied to RL_F, RB_llm and RB_alg (the keys present in ``raw``)."""
    return {k: condition_metric(raw[k], answerability, idk, clarification) for k in CONDITIONED_METRICS if k in raw}


def idk_from_conditional_idk(answerability, conditional_idk):
    """An IDK verdict consistent with a human-evaluation file's ``conditional_idk``.

    In ``reference_subset_with_human_evaluations.json`` ``conditional_idk`` is 1 when the
    IDK behaviour was right, not the raw verdict. Mapping back (a representative verdict;
    every verdict of its group conditions the same way):

    * UNANSWERABLE / CONVERSATIONAL: 1 -> IDK 1 (said it cannot answer); 0 -> IDK 0
      (answered; a "partial" 0.5 conditions identically);
    * ANSWERABLE / PARTIAL / missing: 1 -> IDK 0 (stands for 0, 0.5, "unknown": raw kept);
      0 -> IDK 1 (wrongly refused: metrics 0).

    The file cannot express an "unknown" verdict on an unanswerable task (raw kept), and has
    no UNDERSPECIFIED class (ValueError).
    """
    cls = _answerability(answerability)
    if cls == UNDERSPECIFIED:
        raise ValueError("idk_from_conditional_idk: UNDERSPECIFIED tasks are conditioned on the clarification judge")
    if conditional_idk not in (0, 1):
        raise ValueError(f"idk_from_conditional_idk: conditional_idk must be 0 or 1, got {conditional_idk!r}")
    right = conditional_idk == 1
    if cls in NO_ANSWER_CLASSES:
        return 1 if right else 0
    return 0 if right else 1


# ---------------------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------------------


def harmonic_mean(values: Sequence[float]) -> float:
    """Harmonic mean; 0 if any value is 0 (its limit), NaN if any is NaN; negatives rejected."""
    vals = [float(v) for v in values]
    if not vals:
        raise ValueError("harmonic_mean: no values")
    if any(math.isnan(v) for v in vals):
        return math.nan
    if any(v < 0 for v in vals):
        raise ValueError(f"harmonic_mean: negative value in {vals}")
    if any(v == 0 for v in vals):
        return 0.0
    return len(vals) / sum(1 / v for v in vals)


def leaderboard(per_task, columns: Sequence[str] = CONDITIONED_METRICS) -> dict:
    """Corpus means of the conditioned metrics and their harmonic mean (the ranking score).

    ``per_task``: a DataFrame (or mapping of column -> values) of CONDITIONED per-task values.
    The MTRAGEval ranking is the harmonic mean of the three system-level means (RL_F, RB_llm,
    RB_alg), not a mean of per-task harmonic means. The official scripts do not average, so
    the NaN rule is this project's: a NaN (e.g. RAGAS found no statements) is left out of
    that metric's mean and counted in ``n_nan``.
    """
    import pandas as pd

    df = per_task if isinstance(per_task, pd.DataFrame) else pd.DataFrame(per_task)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"leaderboard: columns {missing} missing (have {list(df.columns)})")
    means = {c: float(pd.to_numeric(df[c]).mean()) for c in columns}
    return {
        **means,
        "HM": harmonic_mean(list(means.values())),
        "n": int(len(df)),
        "n_nan": {c: int(pd.to_numeric(df[c]).isna().sum()) for c in columns},
    }


_DOMAINS = {"clapnq": "clapnq", "cloud": "cloud", "ibmcloud": "cloud", "fiqa": "fiqa", "govt": "govt"}


def domain_of(collection: str) -> str:
    """MTRAG's long collection names and MTRAG-UN's short ones -> clapnq / cloud / fiqa / govt.

    ``mt-rag-ibmcloud-elser-512-100-20240502`` and ``ibmcloud`` are both "cloud"; other names
    (e.g. MTRAG-UN's unreleased banking / telco) are returned unchanged.
    """
    name = str(collection)
    if name in _DOMAINS:
        return _DOMAINS[name]
    m = re.match(r"mt-rag-([a-z]+)-", name)
    if m and m.group(1) in _DOMAINS:
        return _DOMAINS[m.group(1)]
    return name


def aggregate_retrieval(
    per_task,
    measures: Sequence[str],
    collection_col: str = "collection",
    submitted: Mapping[str, int] | None = None,
    decimals: int | None = 5,
):
    """Per-collection retrieval means, the official "all" row and the papers' macro average.

    ``per_task``: one row per scored task with ``collection_col`` and one column per measure
    (e.g. from ``convrag.metrics.registry.retrieval_scores`` plus the task's collection).
    Returns a DataFrame with one row per collection (sorted) then "all" and "macro":

    * collection rows: the mean over the collection's scored tasks, rounded to ``decimals``
      (the official script rounds each collection mean to 5 decimals before weighting;
      ``None`` keeps full precision); ``count`` = the collection's number of SUBMITTED tasks
      (``submitted``; default: its number of rows). The official script scores only tasks
      that are both submitted and in the qrels (a task missing from the qrels is skipped in
      the mean but still counted in ``count``; an empty context list scores 0 and counts);
    * "all" (official): the collection means weighted by ``count``, not rounded;
    * "macro" (the MTRAG and MTRAG-UN papers' tables): the plain mean of the collection
      means; its ``count`` is the number of collections.
    """
    import pandas as pd

    df = per_task if isinstance(per_task, pd.DataFrame) else pd.DataFrame(per_task)
    measures = list(measures)
    missing = [c for c in [collection_col, *measures] if c not in df.columns]
    if missing:
        raise ValueError(f"aggregate_retrieval: columns {missing} missing (have {list(df.columns)})")
    if df.empty:
        raise ValueError("aggregate_retrieval: no tasks")
    rows = []
    for coll, g in sorted(df.groupby(collection_col, sort=False), key=lambda kv: str(kv[0])):
        means = {m: float(pd.to_numeric(g[m]).mean()) for m in measures}
        if decimals is not None:
            means = {m: round(v, decimals) for m, v in means.items()}
        if submitted is not None and coll not in submitted:
            raise ValueError(f"aggregate_retrieval: no submitted-task count for collection {coll!r}")
        count = len(g) if submitted is None else int(submitted[coll])
        rows.append({"collection": coll, "count": count, **means})
    total = sum(r["count"] for r in rows)
    if total <= 0:
        raise ValueError("aggregate_retrieval: no submitted tasks to weight by")
    rows.append({"collection": "all", "count": total,
                 **{m: sum(r[m] * r["count"] for r in rows) / total for m in measures}})
    coll_rows = rows[:-1]
    rows.append({"collection": "macro", "count": len(coll_rows),
                 **{m: sum(r[m] for r in coll_rows) / len(coll_rows) for m in measures}})
    return pd.DataFrame(rows, columns=["collection", "count", *measures])
