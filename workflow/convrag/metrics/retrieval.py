"""Retrieval metrics and TREC-format files.

Recall@k comes from ir_measures' pytrec_eval provider (trec_eval's own code), not a
hand-written loop, so numbers match what other papers compute. The readers name file and
line on bad input; qrels that point at passages missing from the corpus (which would otherwise
just lower recall silently) are caught when a benchmark's corpus is written (convrag.data.gold).
"""

from __future__ import annotations

import os

from convrag.errors import ConfigError, DataError
from convrag.io import atomic_open, iter_lines

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]


def recall_at_k(run: Run, qrels: Qrels, k: int) -> dict[str, float]:
    """R@k per query of ``qrels``: the share of relevant (rel > 0) docs found in the top k.

    A query missing from ``run`` (or with no hits, e.g. closed book) scores 0.0; a query
    with no relevant doc scores 0.0 too (trec_eval's convention).
    """
    import ir_measures

    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"recall_at_k: k must be a positive integer, got {k!r}")
    measure = ir_measures.R @ k
    run_f = {q: {d: float(s) for d, s in docs.items()} for q, docs in run.items() if docs}
    qrels_i = {q: {d: int(r) for d, r in docs.items()} for q, docs in qrels.items()}
    out = {q: 0.0 for q in qrels_i}
    for m in ir_measures.pytrec_eval.iter_calc([measure], qrels_i, run_f):
        out[m.query_id] = float(m.value)
    return out


def write_trec_run(path: str | os.PathLike, run: Run, tag: str = "convrag") -> None:
    """Write ``qid Q0 doc rank score tag`` lines, best score first (ties by doc id)."""
    with atomic_open(path) as fh:
        for qid in sorted(run):
            ranked = sorted(run[qid].items(), key=lambda x: (-x[1], x[0]))
            for rank, (doc, score) in enumerate(ranked, start=1):
                fh.write(f"{qid} Q0 {doc} {rank} {score:.6f} {tag}\n")


def read_trec_run(path: str | os.PathLike) -> Run:
    run: Run = {}
    for lineno, line in iter_lines(path):
        cols = line.split()
        if len(cols) != 6:
            raise DataError(f"{path}:{lineno}: expected 6 columns 'qid Q0 doc rank score tag', got {len(cols)}")
        qid, _, doc, _, score, _ = cols
        try:
            value = float(score)
        except ValueError as e:
            raise DataError(f"{path}:{lineno}: score '{score}' is not a number") from e
        if doc in run.setdefault(qid, {}):
            raise DataError(f"{path}:{lineno}: doc '{doc}' listed twice for query '{qid}'")
        run[qid][doc] = value
    return run


def read_qrels(path: str | os.PathLike) -> Qrels:
    """Read TREC qrels (``qid iter doc rel``) or BEIR tsv (header, then ``qid<TAB>doc<TAB>rel``)."""
    qrels: Qrels = {}
    beir = None
    for lineno, line in iter_lines(path):
        if beir is None:
            beir = "\t" in line and len(line.split("\t")) == 3
            if beir:
                try:
                    int(line.split("\t")[2])
                except ValueError:
                    continue  # the header line
                raise DataError(f"{path}:{lineno}: BEIR qrels need a header line 'query-id\\tcorpus-id\\tscore'")
        cols = line.split("\t") if beir else line.split()
        if len(cols) != (3 if beir else 4):
            fmt = "query-id<TAB>corpus-id<TAB>score" if beir else "qid iter doc rel"
            raise DataError(f"{path}:{lineno}: expected '{fmt}', got {len(cols)} columns")
        qid, doc, rel = (cols[0], cols[1], cols[2]) if beir else (cols[0], cols[2], cols[3])
        try:
            qrels.setdefault(qid, {})[doc] = int(rel)
        except ValueError as e:
            raise DataError(f"{path}:{lineno}: relevance '{rel}' is not an integer") from e
    return qrels
