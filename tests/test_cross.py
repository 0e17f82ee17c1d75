"""The cross study's machinery on hand-made inputs: multi-hop tasks, sharded delivery, scoring,
the tables, the plan; and the paper-scale grid's size (its build runs in the default workflow
test, tests/test_workflow.py)."""

import math
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from convrag.config import REPO_ROOT, load_config
from convrag.errors import ConfigError, DataError
from convrag.records import Passage, Question, ShardSet, TurnTask
from convrag.studies.cross import deliver, plan, score, targets, wiring
from convrag.studies.cross.tasks import multihop_tasks


def _q(qid, answers=("Paris",), docs=("d1", "d2")):
    return Question(qid=qid, dataset="mh", question=f"question {qid}?", answers=list(answers),
                    supporting_doc_ids=list(docs), hops=2)


def _set(qid, texts, passed=True):
    # shard ids out of order on purpose: delivery follows the ids
    shards = [{"shard_id": i, "text": t} for i, t in reversed(list(enumerate(texts, 1)))]
    return ShardSet(qid=qid, shards=shards, passed=passed)


# ---- multi-hop tasks ---------------------------------------------------------------------------

def test_multihop_tasks_keep_passed_shard_sets_in_order_and_count_the_rest():
    qs = [_q("a"), _q("b"), _q("c")]
    tasks, report = multihop_tasks(qs, [_set("a", ["first", "second"]), _set("b", ["x"], passed=False)])
    assert [t.task_id for t in tasks] == ["a"]
    t = tasks[0]
    assert t.labels["shards"] == ["first", "second"] and t.rewrite == t.question == "question a?"
    assert t.gold_docs == {"d1": 1, "d2": 1} and t.reference_answers == ["Paris"] and t.history == []
    assert report["excluded"] == {"no_shard_set": 1, "failed_checks": 1}
    assert report["excluded_ids"] == {"no_shard_set": ["c"], "failed_checks": ["b"]}
    # recorded delivery only: every question, no shards
    tasks, report = multihop_tasks(qs, None)
    assert len(tasks) == 3 and "shards" not in tasks[0].labels and report["excluded"]["failed_checks"] == 0


def test_multihop_tasks_reject_a_shard_set_of_an_unknown_question():
    with pytest.raises(DataError, match="unknown question 'zz'"):
        multihop_tasks([_q("a")], [_set("zz", ["x"])], where="s.jsonl")


# ---- delivery ------------------------------------------------------------------------------------

def _tt(tid, shards=None, domain="all"):
    labels = {"domain": domain, **({"shards": shards} if shards else {})}
    return TurnTask(task_id=tid, benchmark="mh", conversation_id=tid, turn=1, history=[], question=f"q {tid}",
                    reference_answers=["A"], gold_docs={"d1": 1}, rewrite=f"q {tid}", labels=labels)


def test_sharded_delivery_answers_turn_by_turn_with_the_readers_own_replies():
    batches = []

    def fake(batch):
        batches.append([(b.task_id, b.question, [h["text"] for h in b.history]) for b in batch])
        return [{"task_id": b.task_id, "text": f"reply to {b.question}", "answer": "A", "answered": True}
                for b in batch]

    out = deliver.answer([_tt("a", ["a1", "a2", "a3"]), _tt("b", ["b1"])], "sharded", fake)
    assert batches == [[("a#1", "a1", []), ("b#1", "b1", [])],
                       [("a#2", "a2", ["a1", "reply to a1"])],
                       [("a#3", "a3", ["a1", "reply to a1", "a2", "reply to a2"])]]
    assert [(r["item_id"], r["final"], r["n_turns"]) for r in out] == [
        ("a", False, 3), ("b", True, 1), ("a", False, 3), ("a", True, 3)]
    assert all(r["delivery"] == "sharded" for r in out)


def test_recorded_delivery_is_one_batch_and_sharded_needs_shards():
    calls = []
    out = deliver.answer([_tt("a"), _tt("b")], "recorded",
                         lambda b: calls.append(len(b)) or [{"text": "t", "answered": False} for _ in b])
    assert calls == [2] and [(r["item_id"], r["final"]) for r in out] == [("a", True), ("b", True)]
    with pytest.raises(DataError, match="task 'a' has no shards"):
        deliver.answer([_tt("a")], "sharded", lambda b: [])


# ---- scoring ------------------------------------------------------------------------------------

def _rec(item, retrieved, answer="Paris France", reader="m1", policy="current", delivery="recorded",
         answered=True):
    return {"item_id": item, "benchmark": "mh", "retriever": "bm25", "policy": policy, "reader": reader,
            "delivery": delivery, "answer": answer, "answered": answered,
            "retrieved": [{"doc_id": d, "score": float(10 - i)} for i, d in enumerate(retrieved)]}


def test_retrieval_and_answer_rows_match_hand_computed_values():
    tasks = {"q1": _tt("q1"), "q2": _tt("q2")}
    tasks["q1"].reference_answers = ["Paris"]
    tasks["q2"].reference_answers = []  # no reference: no answer row
    recs = [_rec("q1", ["d2", "d1"]), _rec("q2", ["d1"], answered=False, answer=None)]
    rows = pd.DataFrame(score.retrieval_rows(recs, tasks, ["R@5", "nDCG@5"]))
    got = rows.set_index(["item_id", "metric"])["value"]
    assert got[("q1", "R@5")] == 1.0 and got[("q1", "nDCG@5")] == pytest.approx(1 / math.log2(3))
    assert got[("q2", "nDCG@5")] == 1.0
    ans = pd.DataFrame(score.answer_rows(recs, tasks, ["f1", "em"])).set_index("metric")["value"]
    # "Paris France" vs "Paris": precision 1/2, recall 1 -> F1 2/3; EM 0
    assert ans["f1"] == pytest.approx(2 / 3) and ans["em"] == 0.0 and ans["answered"] == 1.0
    # a benchmark's own metric (MTRAG's ROUGE-L): LCS 1 of 2 predicted and 1 reference tokens -> 2/3
    assert pd.DataFrame(score.answer_rows(recs, tasks, ["rougeL"])).set_index("metric")["value"]["rougeL"] == \
        pytest.approx(2 / 3)
    assert set(pd.DataFrame(score.answer_rows(recs, tasks, ["f1"]))["item_id"]) == {"q1"}


def test_unanswered_turn_scores_zero_and_an_unreadable_verdict_is_nan():
    tasks = {"q1": _tt("q1")}
    recs = [_rec("q1", ["d1"], answer=None, answered=False)]
    ans = pd.DataFrame(score.answer_rows(recs, tasks, ["f1"])).set_index("metric")["value"]
    assert ans["f1"] == 0.0 and ans["answered"] == 0.0
    items = score.judge_items(recs, tasks)
    assert items == [{"key": "bm25|current|m1|recorded|q1", "question": "q q1", "answers": ["A"], "prediction": None}]
    rows = score.judge_rows(recs, tasks, {items[0]["key"]: {"correct": None}})
    assert math.isnan(rows[0]["value"]) and rows[0]["metric"] == "correct"


def test_content_contexts_are_shared_by_readers_and_labelled_against_the_qrels():
    tasks = {"q1": _tt("q1"), "q2": _tt("q2")}
    corpus = {d: Passage(doc_id=d, title="", text=f"text {d}") for d in ("d1", "d2", "d3")}
    recs = [_rec("q1", ["d2", "d1", "d3"], reader="m1"), _rec("q1", ["d2", "d1", "d3"], reader="m2"),
            _rec("q2", ["d2", "d3", "d1"], reader="m1")]
    items = score.content_items(recs, tasks, corpus, top_k=2)
    assert len(items) == 2  # the two readers of q1 saw the same two passages
    assert items[0]["passages"] == ["text d2", "text d1"] and items[1]["passages"] == ["text d2", "text d3"]
    labels = {items[0]["item_id"]: "partial", items[1]["item_id"]: None}
    rows, ctx = score.content_rows(recs, tasks, labels, 2, partial_insufficient=False)
    assert [r["value"] for r in rows][:2] == [1.0, 1.0] and math.isnan(rows[2]["value"])
    assert [(c["item_id"], c["no_gold"]) for c in ctx] == [("q1", False), ("q2", True)]
    rows, _ = score.content_rows(recs, tasks, labels, 2, partial_insufficient=True)
    assert rows[0]["value"] == 0.0
    with pytest.raises(DataError, match="'d9' is not in the corpus"):
        score.content_items([_rec("q1", ["d9"])], tasks, corpus, top_k=2)


def test_accounting_of_the_cells_is_summed():
    got = score.sum_accounting([{"reader": {"calls": 2, "t": {"in": 5}}, "job": {"wall_seconds": 1.5, "n": "x"}},
                                {"reader": {"calls": 3, "t": {"in": 1}}, "job": {"wall_seconds": 2}}])
    assert got == {"reader": {"calls": 5, "t": {"in": 6}}, "job": {"wall_seconds": 3.5}}


def test_scoring_chunks_merge_into_one_jobs_outputs(tmp_path):
    """cross.score_chunks: the chunks' rows and verdicts joined in chunk order, their accounting
    summed with each non-numeric leaf kept from the first chunk (issue 47, item 1)."""
    import json

    parts = []
    for k in range(2):
        d = {"scores": tmp_path / f"c{k}.parquet", "contexts": tmp_path / f"c{k}.contexts.parquet",
             "verdicts": tmp_path / f"c{k}.verdicts.jsonl", "accounting": tmp_path / f"c{k}.accounting.json"}
        pd.DataFrame({"item": [f"a{k}", f"b{k}"], "value": [k, k + 0.5]}).to_parquet(d["scores"])
        pd.DataFrame({"context_id": [f"x{k}"], "label": ["sufficient"]}).to_parquet(d["contexts"])
        d["verdicts"].write_text(json.dumps({"judge": "j", "key": k}) + "\n")
        d["accounting"].write_text(json.dumps({
            "worse_labels_content": {"requests": 3 + k, "model": "phi-4"}, "job": {"final_answers": 10, "rows": 4},
            "verdicts": {"worse_labels_content": {"items": 5, "unparsed": k}}, "cells": {f"r/p/m/d{k}": {"tasks": 5}}}))
        parts.append(d)
    out = {k: tmp_path / f"merged.{k}" for k in ("parquet", "contexts", "verdicts", "accounting")}
    cmd = [sys.executable, "-m", "convrag.cli", "cross", "merge-scores"]
    for k in ("scores", "contexts", "verdicts", "accounting"):
        cmd += [f"--{k}", *(str(d[k]) for d in parts)]
    cmd += ["--out", str(out["parquet"]), "--out-contexts", str(out["contexts"]), "--out-verdicts", str(out["verdicts"]),
            "--out-accounting", str(out["accounting"])]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert pd.read_parquet(out["parquet"])["item"].tolist() == ["a0", "b0", "a1", "b1"]
    assert pd.read_parquet(out["contexts"])["context_id"].tolist() == ["x0", "x1"]
    assert [json.loads(x)["key"] for x in out["verdicts"].read_text().splitlines()] == [0, 1]
    assert json.loads(out["accounting"].read_text()) == {
        "worse_labels_content": {"requests": 7, "model": "phi-4"}, "job": {"final_answers": 20, "rows": 8},
        "verdicts": {"worse_labels_content": {"items": 10, "unparsed": 1}},
        "cells": {"r/p/m/d0": {"tasks": 5}, "r/p/m/d1": {"tasks": 5}}}


def test_score_chunks_split_a_benchmark_into_jobs_and_a_merge(tmp_path):
    """The default with cross.score_chunks 2: each benchmark's scoring is 2 chunk jobs and a merge
    (the default itself, score_chunks 1, keeps its one cross_score job per benchmark)."""
    assert load_config(REPO_ROOT / "config" / "config.yaml")["cross"]["score_chunks"] == 1
    over = tmp_path / "chunks.yaml"
    over.write_text("cross:\n  score_chunks: 2\n")
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--forceall", "--quiet", "rules", "--configfile",
                        str(REPO_ROOT / "config" / "config.yaml"), str(over)], capture_output=True, text=True,
                       cwd=REPO_ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    counts = dict(re.findall(r"^(cross_score\w*)\s+(\d+)$", r.stdout + r.stderr, re.M))
    n = len(plan.benchmarks(load_config(REPO_ROOT / "config" / "config.yaml")))
    assert counts == {"cross_score_chunk": str(2 * n), "cross_score_merge": str(n)}, counts


# ---- tables ------------------------------------------------------------------------------------

def test_results_long_means_and_missing_counts():
    rows = [dict(benchmark="b", domain="d", conversation_id=c, item_id=f"{c}{i}", retriever="r", policy="p",
                 reader="m", delivery="recorded", kind="judge", metric="correct", value=v)
            for c, i, v in [("c1", 1, 1.0), ("c1", 2, 0.0), ("c2", 1, 1.0), ("c2", 2, np.nan)]]
    out = targets.results_long(pd.DataFrame(rows), {"n_resamples": 200, "seed": 0})
    r = out.iloc[0]
    assert r["mean"] == pytest.approx(2 / 3) and r["n"] == 3 and r["n_missing"] == 1 and r["conversations"] == 2
    assert 0.0 <= r["ci_low"] <= r["mean"] <= r["ci_high"] <= 1.0


def test_qrels_vs_content_precision_by_hand():
    # four no-gold contexts: no, no, yes, partial; two gold contexts: yes, no; one unlabelled
    labels = ["no", "no", "yes", "partial", "yes", "no", None]
    no_gold = [True, True, True, True, False, False, True]
    ctx = pd.DataFrame({"benchmark": "b", "retriever": "r", "conversation_id": [f"c{i}" for i in range(7)],
                        "no_gold": no_gold, "label": labels})
    boot = {"n_resamples": 200, "seed": 0}
    r = targets.qrels_vs_content(ctx, False, boot).iloc[0]
    assert (r["contexts"], r["n_unlabelled"], r["no_gold"], r["n_gold"]) == (7, 1, 4, 2)
    assert r["precision"] == 0.5 and r["yes_share_no_gold"] == 0.25 and r["partial_share_no_gold"] == 0.25
    assert r["precision_gold"] == 0.5 and r["share_no_gold"] == pytest.approx(4 / 6)
    assert targets.qrels_vs_content(ctx, True, boot).iloc[0]["precision"] == 0.75


def test_heatmap_averages_readers_and_policies_under_one_delivery():
    long = pd.DataFrame([dict(benchmark="b", retriever="r", policy=p, reader=m, delivery=d, kind="answer",
                              metric="f1", mean=v, ci_low=0, ci_high=1, n=1, n_missing=0, conversations=1)
                         for p, m, d, v in [("p1", "m1", "recorded", 0.2), ("p2", "m1", "recorded", 0.4),
                                            ("p1", "m2", "recorded", 0.6), ("p1", "m1", "sharded", 0.0)]])
    h = targets.heatmap_frame(long, "recorded")
    assert h.to_dict("records") == [{"metric": "f1", "benchmark": "b", "retriever": "r", "value": pytest.approx(0.4),
                                     "cells": 3}]


# ---- the plan -----------------------------------------------------------------------------------

def test_plan_shards_only_multihop_and_gives_closed_book_one_policy():
    g = {"benchmarks": ["t"], "multihop": ["m"], "retrievers": {"closed_book": True, "bm25": False},
         "policies": ["current", "history"], "readers": ["x"], "delivery": ["recorded", "sharded"]}
    cells = pd.DataFrame(plan.grid_cells(g))
    assert len(cells) == 2 * (1 + 2) * 2  # benchmarks x (closed book's none + 2 policies) x deliveries
    assert set(cells[cells.retriever == "closed_book"]["policy"]) == {"none"}
    off = cells[~cells.planned]
    assert set(off["benchmark"]) == {"t"} and set(off["delivery"]) == {"sharded"}
    assert off["reason"].str.contains("only the multi-hop datasets").all()
    cells = pd.DataFrame(plan.grid_cells({**g, "benchmark_policies": {"t": ["current"]}}))
    off = cells[~cells.planned & (cells.delivery == "recorded")]
    assert list(off["policy"]) == ["history"] and "cross.benchmark_policies.t: current" in off["reason"].iloc[0]


def test_default_slice_and_its_errors(tmp_path):
    import yaml

    cfg = load_config(REPO_ROOT / "config" / "config.yaml")
    jobs = plan.answer_jobs(cfg)
    # mini_recor x 2 retrievers x 2 policies recorded + miniworld x 2 x 2 x 2 deliveries
    assert len(jobs) == 12 and sum(j["delivery"] == "sharded" for j in jobs) == 4
    # mini_mtrag is left out of the default slice but keeps its own metric for a run that adds it
    assert "--metrics f1 rougeL" in wiring.score_args({**cfg, "cross": {**cfg["cross"], "benchmarks": [
        "mini_mtrag", "mini_recor"]}}, "mini_mtrag", "prompts") and "rougeL" not in wiring.score_args(
        cfg, "mini_recor", "prompts")
    # the test slice, as `--configfile config/tests/cross.yaml` reads it (the whole config)
    raw = yaml.safe_load((REPO_ROOT / "config" / "tests" / "cross.yaml").read_text())
    for key, value, message in [("multihop", ["mini_recor"], "'cross.multihop': 'mini_recor' is also in cross.benchmarks"),
                                ("retrievers", ["bm99"], "'cross.retrievers"),
                                ("recall_k", 1, "'cross.recall_k': 1 < top_k 2")]:
        bad = tmp_path / f"{key}.yaml"
        bad.write_text(yaml.safe_dump({**raw, "cross": {**raw["cross"], key: value}}))
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_config(bad)


def test_the_paper_grid_plans_with_fewer_than_20000_jobs():
    cfg = load_config(REPO_ROOT / "config" / "studies" / "cross.yaml")
    # (5 TurnTask benchmarks, recorded) + (5 multi-hop sets, 2 deliveries), 33 retriever-policy pairs, 3
    # readers; RECOR, MTRAG-UN and MTRAG's conversations ship no rewrite, MTRAG's retrieval tasks take the
    # shipped queries only (no llm_rewrite): their 8 cells per reader are left out
    assert len(plan.answer_jobs(cfg)) == 5 * 33 * 3 + 5 * 33 * 3 * 2 - 4 * 8 * 3
    assert not any(j["policy"] == "rewrite" for j in plan.answer_jobs(cfg) if j["benchmark"] == "mtrag_un")
    assert {j["policy"] for j in plan.answer_jobs(cfg) if j["benchmark"] == "mtrag_retrieval"} == {
        "none", "current", "history", "rewrite"}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", "config/studies/cross.yaml",
                           "--directory", str(REPO_ROOT)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    total = int(re.search(r"^total\s+(\d+)", proc.stdout, re.MULTILINE).group(1))
    assert 1500 < total < 20000
