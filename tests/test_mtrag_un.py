"""mtrag_un so far: the mini world's MTRAG-UN-like benchmark, the benchmark registry and its
config errors, the retrieval analyses on hand-computed runs (Table 2 per domain, macro and
task-weighted; Table 3; the paired policy gain). The study runs end to end in the embedded
default (tests/test_workflow.py)."""

import math

import pandas as pd
import pytest
import yaml

from convrag.config import REPO_ROOT, validate_config
from convrag.data.benchmarks import benchmark_corpora, benchmark_loader
from convrag.data.miniworld_turns import render_mtrag
from convrag.errors import ConfigError
from convrag.metrics.retrieval import write_trec_run
from convrag.records import TurnTask
from convrag.studies.mtrag_un import analyses as A

TEST_CONFIG = REPO_ROOT / "config" / "tests" / "mtrag_un.yaml"
RETRIEVERS = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())["retrievers"]
SMALL = {"n_people": 12, "n_places": 6, "n_organisations": 8, "n_works": 6, "n_distractors": 4}


def test_miniworld_view_has_every_turn_kind_with_exact_gold():
    tasks, passages = render_mtrag({"alpha": {"seed": 21, "spec": SMALL, "conversations": 3}}, "mini")
    again, _ = render_mtrag({"alpha": {"seed": 21, "spec": SMALL, "conversations": 3}}, "mini")
    assert [t.to_dict() for t in tasks] == [t.to_dict() for t in again]  # seeded
    labels = pd.DataFrame([t.labels for t in tasks])
    assert set(labels.answerability) == {"ANSWERABLE", "PARTIAL", "UNANSWERABLE", "UNDERSPECIFIED"}
    assert set(labels.multi_turn) == {"N/A", "Follow-up", "Clarification"} and set(labels.standalone) == {True, False}
    text = {p.doc_id: p.text for p in passages}
    for t in tasks:
        TurnTask.from_dict(t.to_dict())
        a = t.labels["answerability"]
        assert bool(t.gold_docs) == (a in ("ANSWERABLE", "PARTIAL")), t.task_id
        assert t.history == [] if t.turn == 1 else len(t.history) == 2 * (t.turn - 1)
        if a == "ANSWERABLE":
            # the fact the reference states is in the gold passage (its last word: a name or a year)
            value = t.reference_answers[0].rstrip(".").split(" in ")[-1].split(" by ")[-1].split(" at ")[-1]
            assert any(value in text[d] for d in t.gold_docs), (t.task_id, value)
        if a == "UNDERSPECIFIED":
            nxt = next(x for x in tasks if x.conversation_id == t.conversation_id and x.turn == t.turn + 1)
            assert nxt.labels["multi_turn"] == "Clarification" and nxt.question.startswith("I mean ")
    assert {p.source for p in passages} == {"alpha"} and all(p.doc_id.startswith("alpha/") for p in passages)


def test_benchmark_registry_and_config_errors():
    cfg = yaml.safe_load(TEST_CONFIG.read_text())
    base = {"retrievers": RETRIEVERS, **{k: cfg[k] for k in ("benchmarks", "mtrag_un")}}
    ok = validate_config({**base, "studies": ["mtrag_un"]}, registry={"smollm2-135m": {}})
    assert benchmark_corpora(ok) == {"mini_mtrag.alpha": ("mini_mtrag", "alpha"), "mini_mtrag.beta": ("mini_mtrag", "beta")}
    bad = yaml.safe_load(TEST_CONFIG.read_text())
    bad["benchmarks"]["mini_mtrag"]["kind"] = "nope"
    with pytest.raises(ConfigError, match=r"'benchmarks\.mini_mtrag\.kind'.*unknown benchmark kind 'nope'"):
        validate_config({"retrievers": RETRIEVERS, **{k: bad[k] for k in ("benchmarks", "mtrag_un")}}, registry={"smollm2-135m": {}})
    bad = yaml.safe_load(TEST_CONFIG.read_text())
    bad["benchmarks"]["mini_mtrag"]["domains"]["alpha"]["convs"] = 2
    with pytest.raises(ConfigError, match=r"'benchmarks\.mini_mtrag\.domains\.alpha\.convs'"):
        validate_config({"retrievers": RETRIEVERS, **{k: bad[k] for k in ("benchmarks", "mtrag_un")}}, registry={"smollm2-135m": {}})
    bad = yaml.safe_load(TEST_CONFIG.read_text())
    bad["mtrag_un"]["measures"] = ["R@5", "Recall@five"]
    with pytest.raises(ConfigError, match="Recall@five"):
        validate_config({"retrievers": RETRIEVERS, **{k: bad[k] for k in ("benchmarks", "mtrag_un")}}, registry={"smollm2-135m": {}})
    assert benchmark_loader("miniworld_mtrag").domains(cfg["benchmarks"]["mini_mtrag"]) == ["alpha", "beta"]


def _task(tid, conv, domain, gold, standalone=True):
    return TurnTask(task_id=tid, benchmark="b", conversation_id=conv, turn=1, history=[], question="q",
                    gold_docs=gold, labels={"domain": domain, "standalone": standalone, "answerability": "ANSWERABLE"})


def test_retrieval_scores_and_tables_hand_computed(tmp_path):
    tasks = [_task("a1", "ca", "x", {"d1": 1, "d2": 1}), _task("a2", "ca", "x", {"d3": 1}, standalone=False),
             _task("b1", "cb", "y", {"e1": 2}), _task("u", "cb", "y", {})]  # u: no qrels, not a retrieval task
    runs = []
    for policy, rank in [("current", {"a1": {"d1": 3, "z": 2, "d2": 1}, "a2": {"z": 1}, "b1": {}}),
                         ("rewrite", {"a1": {"d1": 3, "d2": 2}, "a2": {"d3": 1}, "b1": {"e1": 1}})]:
        for dom in ("x", "y"):
            path = tmp_path / f"{policy}-{dom}.trec"
            write_trec_run(path, {q: r for q, r in rank.items() if r and q.startswith("a" if dom == "x" else "b")})
            runs.append({"retriever": "bm25", "policy": policy, "domain": dom, "path": str(path)})
    s = A.score_runs(tasks, runs, ["R@2", "nDCG@3"])
    cur = s[s.policy == "current"].set_index(["task_id", "measure"]).value
    # a1: d1 at rank 1, z, d2 at rank 3 -> R@2 = 1/2; nDCG@3 = (1 + 1/log2(4)) / (1 + 1/log2(3)) = 1.5 / 1.6309
    assert cur[("a1", "R@2")] == 0.5 and cur[("a1", "nDCG@3")] == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    assert cur[("a2", "R@2")] == 0.0 and cur[("b1", "R@2")] == 0.0  # empty ranking counts as 0
    assert "u" not in set(s.task_id)
    t2 = A.retrieval_table(s).set_index(["policy", "domain"])
    # current R@2: domain x = (0.5 + 0) / 2 = 0.25, y = 0; macro = 0.125; weighted over 3 tasks = 0.5 / 3
    assert t2.loc[("current", "x"), "R@2"] == 0.25 and t2.loc[("current", "macro"), "R@2"] == 0.125
    assert t2.loc[("current", "all (weighted)"), "R@2"] == pytest.approx(0.5 / 3)
    assert t2.loc[("rewrite", "macro"), "R@2"] == 1.0 and list(t2.columns[-2:]) == ["R@2", "nDCG@3"]
    t3 = A.standalone_table(s, "R@2").set_index("policy")
    # current: standalone tasks a1 (x, 0.5) and b1 (y, 0) -> macro (0.5 + 0) / 2; non-standalone a2: 0
    assert t3.loc["current", "standalone"] == 0.25 and t3.loc["current", "non-standalone"] == 0.0
    assert t3.loc["current", "standalone_tasks"] == 2
    gain = A.policy_gain(s, "current", "rewrite", {"n_resamples": 200, "seed": 0}).set_index("measure")
    # R@2 gains per task: a1 0.5, a2 1, b1 1 -> mean 2.5 / 3; two conversations resampled
    assert gain.loc["R@2", "gain"] == pytest.approx(2.5 / 3) and gain.loc["R@2", "conversations"] == 2
    assert gain.loc["R@2", "ci_low"] <= gain.loc["R@2", "gain"] <= gain.loc["R@2", "ci_high"]
