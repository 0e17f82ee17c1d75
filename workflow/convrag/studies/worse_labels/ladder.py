"""The Fusion and Hybrid rungs of the retriever ladder of *Better Retrievers, Worse Labels*
(RETECO track 2 / RECOR): LLM query expansions, min-max score fusion and weights fitted on train.

Ladder: BM25-turn, BM25-hist (the official baselines, ``convrag.data.recor.official_query``),
**Fusion** (BM25 over three LLM expansions of the turn, the three runs fused) and **Hybrid**
(Fusion plus a dense run, fused the same way). This module holds the pure-Python parts of the
last two; running BM25 and the dense retriever is someone else's.

**Expansions** (prompts: ``resources/prompts/worse_labels/expand.yaml``, the project's own
wording; every expansion sees the conversation so far and the current question):

- ``query2doc``: the LLM writes a short passage answering the question (Query2doc, Wang et al.
  2023, arXiv 2303.07678). Its sparse recipe repeats the query before the passage so that the
  long passage does not drown the query's terms (the paper: the query 5 times); here the query
  is the official with-history query and ``query_repeats`` (default 5) sets the repetitions.
- ``rewrite_passage``: ``Rewrite: <standalone question>`` then ``Passage: <answer passage>``;
  the retrieval query is the rewrite, a newline, the passage (rewrite-then-expand, as in LLM
  conversational query reformulation work such as LLM4CS, Mao et al. 2023).
- ``rewrite_hyde``: ``Rewrite: ...`` then ``Document: <hypothetical document as it would read
  in the corpus>`` (HyDE, Gao et al. 2022, arXiv 2212.10496, used here as sparse query text,
  not embedded); the query is the rewrite, a newline, the document.

All tasks x kinds go to the engine in ONE batched ``generate`` call, greedy (temperature 0), so
the expansions are reproducible and cached. A reply that cannot be read (empty; no ``Rewrite:``
line for the rewrite kinds) falls back to the official with-history query and is counted
(``fallback``), never dropped; a rewrite without its passage is used alone (not a fallback).

**Fusion** (``fuse``): per query, the weighted sum of each run's min-max normalised scores
(a document a run did not return adds 0 for that run), top ``k``, ties by doc id. Min-max
fusion is the usual CombSUM-with-normalisation baseline (Fox & Shaw 1994; Lee 1997); the
weights are fitted on the train split by a grid over the simplex (``fit_weights``), the
measure computed by ir_measures. Deviation: no paper fixes the grid; step 0.1 by default.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from convrag.resources import REPO_ROOT
from convrag.data.recor import NO_HISTORY, official_query
from convrag.errors import ConfigError, DataError
from convrag.llm.types import Request, Sampling
from convrag.records import TurnTask

__all__ = [
    "EXPANSIONS", "PROMPT_FILE", "QUERY_REPEATS", "check_prompts", "load_prompts", "conversation_text",
    "expansion_messages", "expansion_requests", "parse_reply", "expansion_query", "expand",
    "fallback_counts", "queries_by_kind", "minmax", "fuse", "weight_grid", "fit_weights",
    "write_weights", "read_weights",
]

EXPANSIONS = ("query2doc", "rewrite_passage", "rewrite_hyde")
PROMPT_FILE = REPO_ROOT / "resources" / "prompts" / "worse_labels" / "expand.yaml"
QUERY_REPEATS = 5  # Query2doc's sparse recipe: the query 5 times, then the passage
_PASSAGE_LABEL = {"query2doc": "passage", "rewrite_passage": "passage", "rewrite_hyde": "document"}
# A label at the start of a line, markdown decorations allowed ("**Rewrite:**", "- Passage:").
_LABEL = re.compile(r"^[ \t>*_#-]*(rewrite|passage|document)[ \t*_]*:[ \t*_]*", re.I | re.M)
_DECIMALS = 12  # fused scores are rounded so float noise cannot order exact ties


# ---- prompts ---------------------------------------------------------------------------------


def _check_kinds(kinds: Sequence[str]) -> tuple[str, ...]:
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    if not kinds:
        raise ConfigError(f"expansion kinds: none given (known: {', '.join(EXPANSIONS)})")
    for k in kinds:
        if k not in EXPANSIONS:
            raise ConfigError(f"expansion kinds: unknown kind {k!r} (known: {', '.join(EXPANSIONS)})")
    if len(set(kinds)) != len(kinds):
        raise ConfigError(f"expansion kinds: a kind is listed twice in {list(kinds)}")
    return kinds


def check_prompts(prompts: Any, where: str = "prompts", kinds: Sequence[str] = EXPANSIONS) -> None:
    """Every section, key and placeholder ``expand`` fills, checked before any model call."""
    if not isinstance(prompts, Mapping):
        raise ConfigError(f"{where}: expected a mapping with one section per expansion kind")
    for kind in _check_kinds(kinds):
        sec = prompts.get(kind)
        if not isinstance(sec, Mapping):
            raise ConfigError(f"{where}: missing section {kind!r}")
        for key in ("system", "user"):
            if not isinstance(sec.get(key), str) or not sec[key].strip():
                raise ConfigError(f"{where}: section {kind!r} lacks a non-empty '{key}'")
        for ph in ("{history}", "{question}"):
            if ph not in sec["user"]:
                raise ConfigError(f"{where}: {kind}.user lacks the placeholder {ph}")
        try:
            sec["user"].format(history="", question="")
        except (KeyError, IndexError, ValueError) as e:
            raise ConfigError(f"{where}: {kind}.user has a placeholder other than {{history}} and "
                              f"{{question}} ({e!r})") from None
        examples = sec.get("examples") or []
        if not isinstance(examples, list):
            raise ConfigError(f"{where}: {kind}.examples must be a list")
        for i, ex in enumerate(examples):
            for key in ("history", "question", "reply"):
                if not isinstance(ex, Mapping) or not isinstance(ex.get(key), str):
                    raise ConfigError(f"{where}: {kind}.examples[{i}] lacks '{key}'")


def load_prompts(path: str | Path | None = None, kinds: Sequence[str] = EXPANSIONS) -> dict:
    """The expansion prompt file (default :data:`PROMPT_FILE`), checked for ``kinds``."""
    from convrag.resources import read_prompt_file

    return read_prompt_file(path if path is not None else PROMPT_FILE,
                            lambda p, where: check_prompts(p, where, kinds), "worse_labels expansion prompts")


def conversation_text(task: TurnTask) -> str:
    """The conversation before the turn, as the expansion prompt shows it. RECOR's own
    ``conversation_history`` string (``labels.official_history``, "Q: ... / A: ..." lines) when the
    task carries it, so the LLM sees what the official with-history baseline sees; otherwise the
    task's history turns in the same "Q: / A:" form. "(none)" when there is no history (also for
    RECOR's "No previous conversation.")."""
    official = task.labels.get("official_history")
    if official is not None:
        if not isinstance(official, str):
            raise DataError(f"task {task.task_id}: labels.official_history must be a string, "
                            f"got {type(official).__name__}")
        text = official.strip()
        return "(none)" if not text or text == NO_HISTORY else text
    lines = []
    for i, t in enumerate(task.history):
        if not isinstance(t, Mapping) or not isinstance(t.get("text"), str):
            raise DataError(f"task {task.task_id}: history[{i}] needs a 'text' string")
        lines.append(f"{'Q' if t.get('role') == 'user' else 'A'}: {t['text'].strip()}")
    return "\n".join(lines) or "(none)"


def expansion_messages(task: TurnTask, prompts: Mapping, kind: str) -> list[dict]:
    """System prompt, the section's worked examples as user / assistant turns, then this turn."""
    if not isinstance(task.question, str) or not task.question.strip():
        raise DataError(f"task {task.task_id}: empty question, nothing to expand")
    sec = prompts[kind]
    msgs = [{"role": "system", "content": sec["system"].strip()}]
    for ex in sec.get("examples") or []:
        msgs.append({"role": "user", "content": sec["user"].format(history=ex["history"], question=ex["question"])})
        msgs.append({"role": "assistant", "content": ex["reply"].strip()})
    msgs.append({"role": "user", "content": sec["user"].format(history=conversation_text(task),
                                                               question=task.question.strip())})
    return msgs


def expansion_requests(tasks: Sequence[TurnTask], prompts: Mapping, kinds: Sequence[str], sampling: Sampling) -> list[Request]:
    """One request per task and kind, task-major (task 1's kinds in ``kinds`` order, then task 2's):
    ``expand`` reads the replies back in this order."""
    kinds = _check_kinds(kinds)
    return [Request(messages=expansion_messages(t, prompts, k), sampling=sampling) for t in tasks for k in kinds]


# ---- replies -> queries ----------------------------------------------------------------------


def _sections(text: str) -> dict[str, str]:
    """Label (lower case) -> the text after it up to the next label; the first of each wins."""
    found = list(_LABEL.finditer(text))
    out: dict[str, str] = {}
    for m, nxt in zip(found, found[1:] + [None]):
        out.setdefault(m.group(1).lower(), text[m.end():nxt.start() if nxt else len(text)].strip())
    return out


def parse_reply(kind: str, text: str | None) -> dict:
    """``{rewrite, passage, parsed}`` of one reply. query2doc: the passage is the reply (a leading
    "Passage:" label dropped); parsed when non-empty. Rewrite kinds: the rewrite is the first line
    after "Rewrite:" (quotes stripped; what follows on later lines before the next label is left
    in ``raw`` only, so an unlabelled passage cannot leak into the rewrite), the passage the text
    after "Passage:" / "Document:" ("" when missing); parsed when the rewrite is non-empty."""
    _check_kinds([kind])
    text = (text or "").strip()
    sec = _sections(text)
    if kind == "query2doc":
        passage = sec["passage"] if "passage" in sec else text
        return {"rewrite": "", "passage": passage, "parsed": bool(passage)}
    lines = [x.strip() for x in sec.get("rewrite", "").splitlines() if x.strip()]
    rewrite = lines[0].strip('"').strip() if lines else ""
    return {"rewrite": rewrite, "passage": sec.get(_PASSAGE_LABEL[kind], ""), "parsed": bool(rewrite)}


def expansion_query(task: TurnTask, kind: str, parsed: Mapping, query_repeats: int = QUERY_REPEATS) -> str:
    """The BM25 query of one expansion (see the module doc); the official with-history query when
    the reply was not parsed."""
    base = official_query(task, with_history=True)
    if not parsed["parsed"]:
        return base
    if kind == "query2doc":
        return "\n".join([base] * query_repeats + [parsed["passage"]])
    return parsed["rewrite"] + ("\n" + parsed["passage"] if parsed["passage"] else "")


def expand(tasks: Sequence[TurnTask], engine, prompts: Mapping, kinds: Sequence[str] = EXPANSIONS, *,
           sampling: Sampling, query_repeats: int = QUERY_REPEATS) -> list[dict]:
    """Expand every task with every kind in one batched ``engine.generate`` call, with ``sampling``
    (``--sampling``, from the rung's config: greedy, its ``max_tokens``).

    Returns one record per task and kind, task-major: ``{task_id, kind, raw, rewrite, passage,
    query, fallback}``; ``fallback`` marks a reply that could not be parsed (``query`` is then the
    official with-history query). ``query_repeats``: how often query2doc repeats the query.
    """
    kinds = _check_kinds(kinds)
    check_prompts(prompts, "expansion prompts", kinds)
    if isinstance(query_repeats, bool) or not isinstance(query_repeats, int) or query_repeats < 1:
        raise ConfigError(f"expand: query_repeats must be a positive integer, got {query_repeats!r}")
    tasks = list(tasks)
    seen: set[str] = set()
    for t in tasks:
        if t.task_id in seen:
            raise DataError(f"expand: task {t.task_id} is listed twice")
        seen.add(t.task_id)
    requests = expansion_requests(tasks, prompts, kinds, sampling)
    replies = engine.generate(requests, desc="expand queries") if requests else []
    if len(replies) != len(requests):
        raise DataError(f"expand: the engine returned {len(replies)} replies for {len(requests)} requests")
    out = []
    pairs = [(t, k) for t in tasks for k in kinds]
    for (task, kind), reply in zip(pairs, replies):
        parsed = parse_reply(kind, reply.text)
        out.append({"task_id": task.task_id, "kind": kind, "raw": reply.text, "rewrite": parsed["rewrite"],
                    "passage": parsed["passage"], "query": expansion_query(task, kind, parsed, query_repeats),
                    "fallback": not parsed["parsed"]})
    return out


def fallback_counts(records: Iterable[Mapping]) -> dict[str, int]:
    """kind -> how many of its replies fell back to the official query (every kind of the records listed)."""
    out: dict[str, int] = {}
    for r in records:
        out[r["kind"]] = out.get(r["kind"], 0) + int(bool(r["fallback"]))
    return out


def queries_by_kind(records: Iterable[Mapping]) -> dict[str, dict[str, str]]:
    """kind -> {task_id: query}: the input of one BM25 run per expansion."""
    out: dict[str, dict[str, str]] = {}
    for r in records:
        q = out.setdefault(r["kind"], {})
        if r["task_id"] in q:
            raise DataError(f"expansion records: task {r['task_id']} has two '{r['kind']}' records")
        q[r["task_id"]] = r["query"]
    return out


# ---- fusion ----------------------------------------------------------------------------------


def minmax(scores: Mapping[str, float]) -> dict[str, float]:
    """Scores mapped to [0, 1]: (s - min) / (max - min). When all scores are equal (one hit, or a
    tie) every document gets 1.0, not 0: the run did return them, and 1.0 lets that evidence count
    as much as the top of a spread-out run. Empty in, empty out."""
    if not scores:
        return {}
    for d, s in scores.items():
        if not isinstance(s, (int, float)) or isinstance(s, bool) or not math.isfinite(s):
            raise DataError(f"minmax: doc '{d}' has a non-finite or non-numeric score {s!r}")
    lo, hi = min(scores.values()), max(scores.values())
    if hi == lo:
        return {d: 1.0 for d in scores}
    return {d: (s - lo) / (hi - lo) for d, s in scores.items()}


def _check_weights(weights: Sequence[float], n_runs: int, where: str = "fuse") -> np.ndarray:
    if n_runs < 1:
        raise ConfigError(f"{where}: no runs to fuse")
    w = list(weights)
    if len(w) != n_runs:
        raise ConfigError(f"{where}: {len(w)} weights for {n_runs} runs (one weight per run)")
    for i, x in enumerate(w):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            raise ConfigError(f"{where}: weights[{i}] must be a finite number >= 0, got {x!r}")
    if not any(w):
        raise ConfigError(f"{where}: all weights are 0 (at least one run must count)")
    return np.array(w, dtype=float)


def _check_k(k: int, where: str) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"{where}: k must be a positive integer, got {k!r}")


class _Query:
    """One query's runs as arrays: docs sorted by id (so an index order is a doc id order),
    ``norm[r, i]`` the min-max score of doc i in run r (0 if absent), ``present[r, i]``."""

    def __init__(self, qid: str, runs: Sequence[Mapping]):
        per_run = [minmax(run.get(qid) or {}) for run in runs]
        self.docs = sorted(set().union(*per_run))
        index = {d: i for i, d in enumerate(self.docs)}
        self.norm = np.zeros((len(runs), len(self.docs)))
        self.present = np.zeros((len(runs), len(self.docs)), dtype=bool)
        for r, scores in enumerate(per_run):
            for d, s in scores.items():
                self.norm[r, index[d]] = s
                self.present[r, index[d]] = True

    def ranked(self, weights: np.ndarray, depth: int) -> list[list[tuple[str, float]]]:
        """For each row of ``weights`` (candidates x runs): the top ``depth`` (doc, fused score),
        best first, ties by doc id ascending. A run with weight 0 is left out entirely (its docs
        do not enter the pool), so weights (1, 0) give exactly the first run's ranking. The runs
        are summed in a fixed order, so one candidate ranks the same alone or in a batch."""
        fused = np.zeros((weights.shape[0], len(self.docs)))
        for r in range(weights.shape[1]):
            fused += weights[:, [r]] * self.norm[r]
        fused = np.round(fused, _DECIMALS)
        pooled = (weights > 0).astype(int) @ self.present.astype(int) > 0
        idx = np.arange(len(self.docs))
        out = []
        for c in range(weights.shape[0]):
            keep = idx[pooled[c]]
            order = keep[np.lexsort((keep, -fused[c, keep]))][:depth]
            out.append([(self.docs[i], float(fused[c, i])) for i in order])
        return out


def fuse(runs: Sequence[Mapping[str, Mapping[str, float]]], weights: Sequence[float],
         k: int) -> dict[str, dict[str, float]]:
    """Weighted min-max fusion: per query, ``sum_r weights[r] * minmax(run_r)[doc]`` (0 for a run
    without the doc), the top ``k`` in ranked order (dicts keep it), ties broken by doc id
    ascending so the result is deterministic. Fused scores are rounded to 12 decimals so that
    float noise cannot order documents that tie exactly. Weights need not sum to 1 (the order
    only depends on their ratios); each >= 0, not all 0, one per run, else ConfigError. A query
    with no document in any weighted run is left out."""
    runs = list(runs)
    w = _check_weights(weights, len(runs))
    _check_k(k, "fuse")
    for i, run in enumerate(runs):
        if not isinstance(run, Mapping):
            raise ConfigError(f"fuse: runs[{i}] must be a mapping qid -> {{doc: score}}")
    out = {}
    for qid in sorted(set().union(*runs)):
        ranked = _Query(qid, runs).ranked(w[None, :], k)[0]
        if ranked:
            out[qid] = dict(ranked)
    return out


# ---- fitting the weights ---------------------------------------------------------------------


def _grid_steps(step: float) -> int:
    if isinstance(step, bool) or not isinstance(step, (int, float)) or not 0 < step <= 1:
        raise ConfigError(f"fit_weights: step must be in (0, 1], got {step!r}")
    n = round(1 / step)
    if abs(1 / step - n) > 1e-9:
        raise ConfigError(f"fit_weights: step {step!r} does not divide 1 (1/step = {1 / step:.6g} "
                          "is not an integer)")
    return n


def _compositions(total: int, parts: int):
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in _compositions(total - first, parts - 1):
            yield (first, *rest)


def weight_grid(n_runs: int, step: float) -> list[tuple[float, ...]]:
    """Every weight vector of ``n_runs`` multiples of ``step`` summing to 1, in ascending
    lexicographic order (weights are ``i / n`` with n = 1/step, so 0.3 is exactly 3/10)."""
    n = _grid_steps(step)
    if n_runs < 1:
        raise ConfigError("fit_weights: no runs to fuse")
    return [tuple(c / n for c in comp) for comp in _compositions(n, n_runs)]


def _mean_measure(ranked: Mapping[str, list[tuple[str, float]]], qrels: Mapping[str, Mapping[str, int]],
                  measure) -> float:
    """Mean of ``measure`` over every query of ``qrels`` (a query without results scores 0). The
    run is handed to ir_measures with rank-derived scores (depth, depth-1, ...): trec_eval re-sorts
    by score and breaks ties by doc id descending, which would undo ``fuse``'s tie order."""
    import ir_measures

    run = {q: {d: float(len(hits) - i) for i, (d, _) in enumerate(hits)} for q, hits in ranked.items() if hits}
    values = {q: 0.0 for q in qrels}
    if run:
        for m in ir_measures.iter_calc([measure], {q: dict(g) for q, g in qrels.items()}, run):
            values[m.query_id] = float(m.value)
    return sum(values.values()) / len(values)


def fit_weights(component_runs: Sequence[Mapping[str, Mapping[str, float]]],
                qrels: Mapping[str, Mapping[str, int]], step: float = 0.1, measure: str = "nDCG@10",
                k: int = 1000) -> dict:
    """The fusion weights that maximise ``measure`` on ``qrels`` (the train split).

    Grid search over the simplex (:func:`weight_grid`); each candidate's fused run (``fuse``,
    depth ``k``) is scored by ir_measures as the mean over the queries of ``qrels`` that have a
    relevant (rel > 0) doc: a query without one has nothing to find (RECOR does not score turns
    without gold) and is skipped, counted in ``n_skipped``. Ties (scores within 1e-12) go to the
    candidate closest to equal weights (squared distance): fusing all components evenly is the
    prior a flat stretch of the grid gives no reason to leave; remaining ties to the first in the
    grid's ascending lexicographic order. A measure with a cutoff (``@10``) is scored on the top
    ``min(k, cutoff)`` only, which gives the same value faster.

    Returns ``{weights, score, n_candidates, measure, step, k, n_queries, n_skipped, n_tied}``.
    """
    from convrag.metrics.registry import retrieval_measure

    runs = list(component_runs)
    n_given = len(qrels)
    grid = weight_grid(len(runs), step)
    _check_k(k, "fit_weights")
    m = retrieval_measure(measure)
    judged = {q: dict(g) for q, g in qrels.items() if any(r > 0 for r in g.values())}
    if not judged:
        raise DataError(f"fit_weights: none of the {len(qrels)} qrels queries has a relevant doc (nothing to fit on)")
    qrels = judged
    cutoff = m.params.get("cutoff")
    depth = min(k, cutoff) if cutoff else k
    w = np.array(grid)
    per_query = {q: _Query(q, runs).ranked(w, depth) for q in sorted(qrels) if any(q in r for r in runs)}
    scores = [_mean_measure({q: rk[c] for q, rk in per_query.items()}, qrels, m) for c in range(len(grid))]
    best = max(scores)
    tied = [c for c in range(len(grid)) if scores[c] >= best - 1e-12]
    # distance to equal weights in integers (grid weights are i/n): no float rounding decides a tie
    steps, n_runs = _grid_steps(step), len(runs)
    chosen = min(tied, key=lambda c: (sum((n_runs * round(x * steps) - steps) ** 2 for x in grid[c]), c))
    return {"weights": list(grid[chosen]), "score": scores[chosen], "n_candidates": len(grid),
            "measure": measure, "step": step, "k": k, "n_queries": len(qrels),
            "n_skipped": n_given - len(qrels), "n_tied": len(tied)}


def write_weights(path: str | Path, result: Mapping) -> None:
    """The ``fit_weights`` result as JSON, atomically (the weights checked first)."""
    from convrag.io import write_json

    if not isinstance(result, Mapping) or "weights" not in result:
        raise ConfigError(f"write_weights: {path}: the result has no 'weights'")
    w = result["weights"]
    _check_weights(w, len(w), f"write_weights: {path}")
    write_json(path, dict(result))


def read_weights(path: str | Path) -> dict:
    """A weights file of ``write_weights``; DataError naming the file if its weights are unusable."""
    from convrag.io import read_json

    obj = read_json(path)
    if not isinstance(obj, dict) or not isinstance(obj.get("weights"), list):
        raise DataError(f"{path}: field 'weights' is missing or not a list")
    try:
        _check_weights(obj["weights"], len(obj["weights"]), str(path))
    except ConfigError as e:
        raise DataError(str(e)) from None
    return obj
