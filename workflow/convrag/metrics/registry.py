"""Metrics by name, shared by the studies (multi-hop QA, MTRAG-UN, CORAL, RECOR).

Configs list metrics as strings; this module turns them into numbers and rejects unknown
names early (``check_metric_names``), naming the config key, instead of failing after a
long run.

Retrieval metrics are ir_measures names (``R@5``, ``R@100``, ``nDCG@3``, ``nDCG@10``, ``RR``
(alias ``MRR``), ``AP`` (alias ``MAP``), ``P@5``, ``RR@10``; trec_eval names such as
``ndcg_cut_10`` or ``recip_rank`` are accepted too) and are computed by ir_measures, which
uses pytrec_eval (trec_eval's own C code) for all of these except ``RR@10`` (its msmarco
provider), so the numbers match published ones. Never a hand-written loop. With graded qrels
(0/1/2...):

* ``nDCG`` uses the grade itself as the gain with trec_eval's discount 1/log2(rank + 1);
* ``R``, ``P``, ``RR``, ``AP`` count a document as relevant when its grade >= ``rel``, and
  ``rel`` defaults to 1 as in trec_eval: a rel=2 document counts once, exactly like a rel=1
  one. ``R(rel=2)@5`` counts only documents graded >= 2 (also in the denominator).
* Ties in score are broken as trec_eval does (by doc id, descending), so give distinct scores
  when the order matters.

Scores are per query of the *qrels*: a query missing from the run, or with an empty ranking
(e.g. closed book), scores 0 on every measure -- trec_eval's ``-c`` convention, so a
retriever cannot look better by returning nothing for hard queries. Queries only in the run
are ignored; a query whose qrels hold no relevant document scores 0 too.

Answer metrics map a name to ``fn(prediction: str | None, references: list[str]) -> float``.
``em`` and ``f1`` (SQuAD v1.1, ``metrics/qa.py``) are built in. A study adds its own in its own
module with the same decorator, e.g. in ``convrag/studies/coral/metrics.py``::

    from convrag.metrics.registry import register_answer_metric

    @register_answer_metric("rougeL")
    def rouge_l(prediction, references):
        ...

and imports that module (e.g. from the study package's ``__init__``) before its config is
checked, so ``check_metric_names`` and ``answer_metric`` know the name.
"""

from __future__ import annotations

from typing import Callable, Iterable

import pandas as pd

from convrag.errors import ConfigError, DataError
from convrag.metrics.qa import exact_match, f1_score
from convrag.metrics.retrieval import Qrels, Run
from convrag.registry import Registry, unknown_name

__all__ = [
    "ANSWER_METRICS",
    "RETRIEVAL_EXAMPLES",
    "answer_metric",
    "answer_metric_names",
    "check_metric_names",
    "mean_retrieval_scores",
    "register_answer_metric",
    "retrieval_measure",
    "retrieval_scores",
]

AnswerMetric = Callable[[str | None, list[str]], float]
ANSWER_METRICS: "Registry[AnswerMetric]" = Registry("answer metric")
RETRIEVAL_EXAMPLES = ("R@5", "R@100", "nDCG@3", "nDCG@10", "RR", "RR@10", "AP", "P@5", "R(rel=2)@10")


def register_answer_metric(name: str) -> Callable[[AnswerMetric], AnswerMetric]:
    """Decorator adding ``fn`` to ``ANSWER_METRICS`` under ``name``.

    Registering a second, different function under a taken name is a ConfigError: two
    studies silently disagreeing on what ``rougeL`` means would corrupt comparisons.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"register_answer_metric: name must be a non-empty string, got {name!r}")
    return ANSWER_METRICS.register(name)


register_answer_metric("em")(exact_match)
register_answer_metric("f1")(f1_score)


def answer_metric_names() -> list[str]:
    return sorted(ANSWER_METRICS)


def answer_metric(name: str) -> AnswerMetric:
    """The answer metric registered as ``name``; ConfigError listing the known ones if none."""
    return ANSWER_METRICS.get(name)


def retrieval_measure(name: str):
    """Parse ``name`` into an ir_measures measure, or raise ConfigError naming it.

    Besides parsing, rejects a cutoff below 1 (``nDCG@0`` parses but means nothing) and
    measures no installed ir_measures provider can compute (found now, not after retrieval).
    """
    import ir_measures

    hint = f"examples: {', '.join(RETRIEVAL_EXAMPLES)} (ir_measures syntax)"
    if not isinstance(name, str):
        raise ConfigError(f"retrieval metric must be a string, got {name!r}; {hint}")
    try:
        measure = ir_measures.parse_measure(name)
    except Exception:
        try:  # trec_eval spelling, e.g. ndcg_cut_10; only if it names exactly one measure
            parsed = ir_measures.parse_trec_measure(name)
        except Exception:
            parsed = []
        if len(parsed) != 1:
            raise ConfigError(f"unknown retrieval metric {name!r}; {hint}") from None
        measure = parsed[0]
    cutoff = measure.params.get("cutoff")
    if cutoff is not None and (not isinstance(cutoff, int) or cutoff < 1):
        raise ConfigError(f"retrieval metric {name!r}: cutoff must be a positive integer; {hint}")
    try:
        supported = ir_measures.DefaultPipeline.supports(measure)
    except Exception:
        supported = False
    if not supported:
        raise ConfigError(f"retrieval metric {name!r} is not computable by the installed ir_measures providers; {hint}")
    return measure


def check_metric_names(names: Iterable[str], where: str, kind: str = "any") -> None:
    """Validate a config's metric list early; ConfigError names ``where[i]`` and the name.

    ``kind`` is ``"retrieval"``, ``"answer"`` or ``"any"`` (either kind). Duplicates are
    rejected because they would give two result columns with the same name.
    """
    if kind not in ("retrieval", "answer", "any"):
        raise ValueError(f"check_metric_names: kind must be retrieval, answer or any, got {kind!r}")
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise ConfigError(f"invalid config key '{where}': expected a list of metric names, got {names!r}")
    seen: set = set()
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise ConfigError(f"invalid config key '{where}[{i}]': metric names are strings, got {name!r}")
        if name in seen:
            raise ConfigError(f"invalid config key '{where}[{i}]': metric {name!r} listed twice")
        seen.add(name)
        if kind != "retrieval" and name in ANSWER_METRICS:
            continue
        if kind == "answer":
            raise ConfigError(unknown_name("answer metric", name, answer_metric_names(),
                                           where=f"invalid config key '{where}[{i}]'"))
        try:
            retrieval_measure(name)
        except ConfigError as e:
            extra = f"; answer metrics: {', '.join(answer_metric_names())}" if kind == "any" else ""
            raise ConfigError(f"invalid config key '{where}[{i}]': {e}{extra}") from None


def retrieval_scores(run: Run, qrels: Qrels, measures: list[str]) -> pd.DataFrame:
    """One row per query of ``qrels`` (sorted): ``query_id`` + one column per name in ``measures``.

    Columns are named exactly as given (``MRR`` stays ``MRR`` though ir_measures calls it RR).
    Missing or empty rankings score 0 on every measure (trec_eval ``-c``).
    """
    import ir_measures

    if isinstance(measures, str):
        raise ConfigError(f"retrieval_scores: measures must be a list of names, got the string {measures!r}")
    measures = list(measures)
    parsed = {name: retrieval_measure(name) for name in measures}
    if len(parsed) != len(measures):
        raise ConfigError(f"retrieval_scores: a measure is listed twice in {measures}")
    if not qrels:
        raise DataError("retrieval_scores: qrels are empty; nothing to evaluate")
    qids = sorted(qrels)
    table = {name: dict.fromkeys(qids, 0.0) for name in measures}
    run_f = {q: {d: float(s) for d, s in docs.items()} for q, docs in run.items() if docs}
    qrels_i = {q: {d: int(r) for d, r in docs.items()} for q, docs in qrels.items() if docs}
    if parsed and run_f and qrels_i:
        by_measure: dict = {}
        for name, m in parsed.items():
            by_measure.setdefault(m, []).append(name)
        for res in ir_measures.iter_calc(list(by_measure), qrels_i, run_f):
            for name in by_measure[res.measure]:
                if res.query_id in table[name]:
                    table[name][res.query_id] = float(res.value)
    return pd.DataFrame({"query_id": qids, **{n: [table[n][q] for q in qids] for n in measures}})


def mean_retrieval_scores(run: Run, qrels: Qrels, measures: list[str]) -> dict[str, float]:
    """Mean of ``retrieval_scores`` over all qrels queries (trec_eval ``-c`` averages)."""
    df = retrieval_scores(run, qrels, measures)
    return {name: float(df[name].mean()) for name in df.columns[1:]}


def score_task_runs(tasks, runs: list[dict], measures: list[str], labels: tuple[str, ...] = ()):
    """Per-task retrieval scores of several TREC runs over benchmark turns: one row per (task,
    run, measure). ``runs`` = [{retriever, policy, domain, path}]; the qrels are the tasks'
    graded ``gold_docs`` (tasks without gold are not scored: they have no qrels); ``labels``
    names task labels copied into every row (the study's breakdowns). Shared by the studies
    that score conversational retrieval runs (mtrag_un, coral)."""
    import pandas as pd

    from convrag.metrics.retrieval import read_trec_run

    by_id = {t.task_id: t for t in tasks}
    rows = []
    for r in runs:
        qrels = {t.task_id: t.gold_docs for t in tasks if t.gold_docs and t.labels.get("domain") == r["domain"]}
        if not qrels:
            continue
        scores = retrieval_scores(read_trec_run(r["path"]), qrels, measures)
        for rec in scores.to_dict("records"):
            t = by_id[rec["query_id"]]
            base = {"task_id": t.task_id, "conversation_id": t.conversation_id, "turn": t.turn,
                    "domain": r["domain"], "retriever": r["retriever"], "policy": r["policy"],
                    **{k: t.labels.get(k) for k in labels}}
            rows += [{**base, "measure": m, "value": float(rec[m])} for m in measures]
    return pd.DataFrame(rows)

