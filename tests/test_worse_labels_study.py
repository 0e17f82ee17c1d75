"""worse_labels' own machinery on hand-made inputs: the config checks of the study block (errors
name the key), the grid's jobs (train part only where a fit reads it), the query modes, and the
contexts table (qrels labels, copies, evidence classes, control pairing, score features, the
world label) against hand-computed values."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from convrag.errors import ConfigError, DataError
from convrag.records import TurnTask
from convrag.studies.worse_labels import plan
from convrag.studies.worse_labels.contexts import build_contexts, page_key
from convrag.studies.worse_labels.retrieve import check_query, query_texts
from worse_labels_helpers import base_config as _config, checked as _check





def test_the_test_config_is_valid_and_plans_its_jobs():
    c = _check(_config())
    jobs = plan.rung_jobs(c)
    # 5 rungs x 2 domains, eval only (no train benchmark)
    assert len(jobs) == 10 and {j["part"] for j in jobs} == {"eval"}
    assert plan.sets(c, "recor") == ["bm25_turn", "bm25_hist", "fusion", "dense", "hybrid", "gold", "none", "control"]
    stages = sorted(j["stage"] for j in plan.model_jobs(c))
    assert stages == ["audit", "correctness", "expand", "expand", "label", "read"]


def test_train_part_runs_only_what_a_fit_reads():
    cfg = _config()
    cfg["worse_labels"]["slices"]["recor"]["train"] = "wl_recor"
    c = _check(cfg)
    # fusion's weights are given in the test config: only hybrid is fitted, and it reads fusion + dense
    train = sorted({j["rung"] for j in plan.rung_jobs(c) if j["part"] == "train"})
    assert train == ["dense", "fusion"]
    cfg["worse_labels"]["slices"]["recor"]["ladder"]["hybrid"]["weights"] = [0.5, 0.5]
    assert not [j for j in plan.rung_jobs(_check(cfg)) if j["part"] == "train"]
    cfg["worse_labels"]["slices"]["recor"]["ladder"]["fusion"]["weights"] = None
    assert sorted({j["rung"] for j in plan.rung_jobs(_check(cfg)) if j["part"] == "train"}) == ["fusion"]


@pytest.mark.parametrize("edit, key", [
    (lambda w: w["slices"]["recor"]["ladder"]["bm25_turn"].update(retriever="nope"),
     "worse_labels.slices.recor.ladder.bm25_turn.retriever"),
    (lambda w: w["slices"]["recor"]["ladder"]["hybrid"].update(rungs=["fusion", "nope"]),
     "worse_labels.slices.recor.ladder.hybrid.rungs[1]"),
    (lambda w: w["slices"]["recor"]["ladder"]["hybrid"].update(rungs=["fusion", "hybrid"]),
     "worse_labels.slices.recor.ladder.hybrid.rungs[1]"),
    (lambda w: w["slices"]["recor"]["ladder"].update(dense={"kind": "fuse", "rungs": ["bm25_turn", "hybrid"]}),
     "worse_labels.slices.recor.ladder: fuse rungs form a cycle"),
    (lambda w: w["slices"]["recor"]["ladder"]["fusion"].update(weights=[1.0]),
     "worse_labels.slices.recor.ladder.fusion.weights"),
    (lambda w: w["slices"]["recor"]["ladder"]["fusion"].pop("model"), "worse_labels.slices.recor.ladder.fusion"),
    (lambda w: w["slices"]["recor"].update(control="nope"), "worse_labels.slices.recor.control"),
    (lambda w: w["slices"]["recor"].update(benchmark="nope"), "worse_labels.slices.recor.benchmark"),
    (lambda w: w.update(main="nope"), "worse_labels.main"),
    (lambda w: w["judges"].update(primary="nope"), "worse_labels.judges.primary"),
    (lambda w: w["judges"].update(content=[]), "worse_labels.judges.content"),
    (lambda w: w["judges"]["audit"].update(strata=[{"set": "nope", "n": 1}]), "worse_labels.judges.audit.strata[0].set"),
    (lambda w: w["readers"].update(models=["nope"]), "worse_labels.readers.models[0]"),
    (lambda w: w.setdefault("fit", {}).update(step=0.3), "worse_labels.fit.step"),
])
def test_config_errors_name_the_key(edit, key):
    cfg = _config()
    edit(cfg["worse_labels"])
    with pytest.raises(ConfigError) as e:
        _check(cfg)
    assert key in str(e.value) and "cfg.yaml" in str(e.value)


def test_ladder_order_does_not_bind_fuse_rungs():
    """A YAML writer that sorts keys (yaml.safe_dump) puts 'hybrid' before the rungs it fuses:
    still valid, and the tables keep the ladder's given order."""
    cfg = _config()
    ladder = cfg["worse_labels"]["slices"]["recor"]["ladder"]
    cfg["worse_labels"]["slices"]["recor"]["ladder"] = dict(sorted(ladder.items()))
    c = _check(cfg)
    assert list(c["worse_labels"]["slices"]["recor"]["ladder"])[:2] == ["bm25_hist", "bm25_turn"]


def test_train_benchmark_must_cover_the_domains():
    cfg = _config()
    cfg["benchmarks"]["small"] = {"kind": "miniworld_recor", "domains": {"alpha": {"seed": 3}}}
    cfg["worse_labels"]["slices"]["recor"]["train"] = "small"
    with pytest.raises(ConfigError, match=r"worse_labels\.slices\.recor\.train: .* lacks the domain\(s\) beta"):
        _check(cfg)


def _task(tid, conv, turn, question, gold, labels=None, history=()):
    return TurnTask(task_id=tid, benchmark="b", conversation_id=conv, turn=turn, history=list(history),
                    question=question, reference_answers=[f"answer {tid}"], gold_docs=dict.fromkeys(gold, 1),
                    labels={"domain": "d", **(labels or {})})


def test_query_modes():
    t = _task("d/c_turn_2", "d/c", 2, "and its founder?", ["g"], {"official_history": "Q: who?\nA: x",
                                                                 "standalone_query": "Who founded Orvik?"},
              history=[{"role": "user", "text": "who?"}, {"role": "assistant", "text": "x"}])
    # a query rung's query is a shared query policy (convrag.rag.policies)
    assert query_texts([t], "current") == ["and its founder?"]
    assert query_texts([t], "history") == ["who?\nand its founder?"]
    assert query_texts([t], "official_history") == ["and its founder?\n\nConversation History:\nQ: who?\nA: x"]
    assert query_texts([t], "standalone") == ["Who founded Orvik?"]
    with pytest.raises(DataError, match=r"query policy 'rewrite': turn d/c_turn_2 has no shipped rewrite"):
        query_texts([t], "rewrite")
    t1 = _task("d/c_turn_1", "d/c", 1, "who?", ["g"], {"official_history": "No previous conversation."})
    assert query_texts([t1], "official_history") == ["who?"]  # the baseline leaves the empty history out
    t2 = _task("d/c_turn_3", "d/c", 1, "who?", ["g"], {"official_history": ""})
    assert query_texts([t2], "official_history") == ["who?"]  # an empty history is a first turn's, not missing
    with pytest.raises(DataError, match=r"query policy 'official_history': turn d/c_turn_4 has no "
                                        r"labels.official_history"):
        query_texts([_task("d/c_turn_4", "d/c", 1, "who?", ["g"])], "official_history")
    with pytest.raises(DataError, match=r"query policy 'standalone': turn d/c_turn_1 has no labels.standalone_query"):
        query_texts([t1], "standalone")


def test_query_rung_names_a_shared_policy():
    """The rung's old query names fail with the policy to write; an unknown one lists the known."""
    check_query("official_history", "w")
    with pytest.raises(ConfigError, match=r"w: 'turn' is now the shared query policy 'current' .*write query: current"):
        check_query("turn", "w")
    with pytest.raises(ConfigError, match=r"w: 'questions' is now the shared query policy 'history'"):
        check_query("questions", "w")
    with pytest.raises(ConfigError, match=r"w: unknown query policy 'llm_rewrite' \(known: history, current, rewrite"):
        check_query("llm_rewrite", "w")


def test_page_key():
    assert page_key("humidity_and_rain/Kelvin_equation5.txt") == "humidity_and_rain/Kelvin_equation"
    assert page_key("alpha/17#chunk2") == "alpha/17"


GOLD_TEXT = "Orvik Theatre was founded in 1921 by the engineer Ilse Drent in the old harbour district of Kamira."


def test_contexts_hand_computed():
    texts = {"g1": GOLD_TEXT, "g2": "A note on the theatre's origins.", "g3": "Gold of the other turn.",
             "copy": GOLD_TEXT.replace("engineer", "builder"), "page#chunk2": "Another chunk.",
             "x": "Unrelated text about rivers.", "y": "Unrelated text about hills.", "h": "Gold of dialogue two.",
             "g1#chunk1": "the same page as g1, another chunk"}
    t1 = _task("d/c1_turn_1", "d/c1", 1, "When was Orvik Theatre founded?", ["g1", "g2"])
    t2 = _task("d/c1_turn_2", "d/c1", 2, "Who founded it?", ["g3"])
    t3 = _task("d/c2_turn_1", "d/c2", 1, "Where is the hill?", ["h"],
               {"unjudged_answer_docs": {"y": "same_thread"}, "unjudged_negative_docs": ["x"]})
    runs = {"r": {"d/c1_turn_1": {"g1": 9.0, "copy": 8.0, "g3": 5.0, "g1#chunk1": 4.0, "x": 1.0, "y": 0.5},
                  "d/c1_turn_2": {"x": 3.0, "y": 2.0},
                  "d/c2_turn_1": {"y": 6.0, "x": 2.0, "h": 1.0}}}
    df, items = build_contexts("s", [t1, t2, t3], runs, texts, top_k=5, control="r")
    df = df.set_index("context_id")
    a = df.loc["r|d/c1_turn_1"]
    assert a["doc_ids"] == ["g1", "copy", "g3", "g1#chunk1", "x"]
    assert a["qrels_label"] == "part" and a["n_gold_in"] == 1 and a["n_gold"] == 2 and not a["no_gold"]
    # "copy" changes one word of g1: word 8-gram containment 3/11 (the 8 of 11 windows holding the
    # changed word differ), character 5-gram Jaccard .81: a copy for the judge-free count (has_copy,
    # containment >= .8 or Jaccard >= .7), not a near-duplicate evidence class (containment >= .8, §4.2)
    assert a["doc_classes"] == ["gold", "other", "other_turn_gold", "other_chunk", "other"]
    assert a["has_copy"] and a["top1"] == 9.0 and a["margin"] == 1.0
    b = df.loc["r|d/c1_turn_2"]
    assert b["qrels_label"] == "none" and b["no_gold"] and not b["has_copy"] and b["ndcg10"] == 0.0
    c = df.loc["r|d/c2_turn_1"]
    assert c["qrels_label"] == "all" and c["doc_classes"] == ["same_thread", "same_thread", "gold"]
    assert c["world_label"] == "yes" and pd.isna(a["world_label"])
    assert list(c["world_support"]) == [1, 3] and list(a["world_support"]) == []  # y (planted answer), h (gold)
    # nDCG@10 of turn 1: gold at ranks 1 of 2 relevant -> 1 / (1 + 1/log2(3))
    assert a["ndcg10"] == pytest.approx(1 / (1 + 1 / np.log2(3)))
    # top1_z within (domain, rung): top1 = 9, 3, 6 -> mean 6, population sd sqrt(6)
    assert a["top1_z"] == pytest.approx(3 / np.sqrt(6)) and b["top1_z"] == pytest.approx(-3 / np.sqrt(6))
    assert df.loc["gold|d/c1_turn_1", "qrels_label"] == "all" and df.loc["none|d/c1_turn_1", "doc_ids"] == []
    # control: the next dialogue of the domain, the same turn index (or its last), own gold removed
    assert df.loc["control|d/c1_turn_1", "doc_ids"] == ["y", "x", "h"]
    assert df.loc["control|d/c1_turn_2", "doc_ids"] == ["y", "x", "h"]  # c2 has no turn 2: its last
    assert df.loc["control|d/c2_turn_1", "doc_ids"] == ["g1", "copy", "g3", "g1#chunk1", "x"]
    assert df.loc["control|d/c2_turn_1", "qrels_label"] == "none"
    it = {i["context_id"]: i for i in items}
    assert it["r|d/c1_turn_2"]["passages"] == [texts["x"], texts["y"]] and it["none|d/c1_turn_1"]["passages"] == []
    assert it["gold|d/c2_turn_1"]["reference"] == "answer d/c2_turn_1"


def test_near_duplicate_class_is_containment_only():
    """§4.2: the evidence class "near-duplicate of a gold document" is word 8-gram containment >= .8;
    the judge-free copy count also takes character 5-gram Jaccard >= .7. "dup" is g in capitals
    (normalised: identical, containment 1); "jac" changes one word (containment 3/11, Jaccard .81)."""
    texts = {"g": GOLD_TEXT, "dup": GOLD_TEXT.upper(), "jac": GOLD_TEXT.replace("engineer", "builder"),
             "x": "Unrelated text about rivers."}
    t = _task("d/c_turn_1", "d/c", 1, "When was Orvik Theatre founded?", ["g"])
    runs = {"r": {"d/c_turn_1": {"dup": 3.0, "jac": 2.0}}, "q": {"d/c_turn_1": {"jac": 2.0, "x": 1.0}}}
    df = build_contexts("s", [t], runs, texts, top_k=5, control=None)[0].set_index("context_id")
    assert df.loc["r|d/c_turn_1", "doc_classes"] == ["near_duplicate", "other"]
    assert df.loc["q|d/c_turn_1", "doc_classes"] == ["other", "other"]
    assert df.loc["r|d/c_turn_1", "has_copy"] and df.loc["q|d/c_turn_1", "has_copy"]  # jac counts as a copy


def test_contexts_unknown_document_names_it():
    t = _task("d/c_turn_1", "d/c", 1, "q", ["g"])
    with pytest.raises(DataError, match=r"r\|d/c_turn_1: document 'zz' is not in the domain's corpus"):
        build_contexts("s", [t], {"r": {"d/c_turn_1": {"zz": 1.0}}}, {"g": "gold"}, 5, None)


def test_label_assembly_panel_audit_world_and_primary_fallback(tmp_path):
    """The labels the analyses read: judge verdicts (unparsable -> None), the panel's majority
    (ties -> partial), the audit's final label, the world's truth with its support; and the
    primary labeller falls back to the first content judge on a slice the world does not label."""
    import json

    from convrag.studies.worse_labels.targets import load_labels, primary_for

    ctx = pd.DataFrame([dict(slice="s", task_id="t1", set="r", world_label="no", world_support=[]),
                        dict(slice="s", task_id="t2", set="r", world_label="yes", world_support=[2]),
                        dict(slice="m", task_id="u1", set="r", world_label=None, world_support=[])])
    ctx.to_parquet(tmp_path / "s.parquet")

    def verdicts(slice_, judge, values):
        p = tmp_path / "labels" / slice_ / f"{judge}.jsonl"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(json.dumps({"item_id": f"r|{t}", "judge_model": judge,
                                         "value": None if v is None else {"label": v, "support": [1]}}) + "\n"
                             for t, v in values.items()))
        return str(p)

    files = [verdicts("s", "a", {"t1": "yes", "t2": "no"}), verdicts("s", "b", {"t1": "yes", "t2": None}),
             verdicts("s", "c", {"t1": "no", "t2": "yes"}), verdicts("m", "a", {"u1": "no"})]
    audit = tmp_path / "audit" / "s.jsonl"
    audit.parent.mkdir()
    audit.write_text(json.dumps({"context_id": "r|t2", "final": "partial"}) + "\n")
    lab = load_labels({"contexts": [str(tmp_path / "s.parquet")], "labels": files, "audit": [str(audit)]},
                      {"panel_members": ["a", "b", "c"]})
    got = {(r.slice, r.task_id, r.labeller): r.label for r in lab.itertuples()}
    assert pd.isna(got[("s", "t2", "b")])  # unparsable: kept, counted by the analyses
    assert got[("s", "t1", "panel")] == "yes"  # 2 of 3
    assert got[("s", "t2", "panel")] == "partial"  # a: no, c: yes, b: unparsable -> a tie
    assert got[("s", "t2", "audit")] == "partial" and ("s", "t1", "audit") not in got
    assert got[("s", "t2", "world")] == "yes" and got[("s", "t1", "world")] == "no" and ("m", "u1", "world") not in got
    assert list(lab[(lab.labeller == "world") & (lab.task_id == "t2")]["support"].iloc[0]) == [2]
    settings = {"primary": "world", "labellers": ["a", "b", "c", "panel"]}
    assert primary_for(lab, settings, "s") == "world" and primary_for(lab, settings, "m") == "a"


@pytest.mark.realdata
def test_the_study_stages_on_the_official_pilot(shared_data, tmp_path):
    """The worse_labels path of the two RETECO baselines (``convrag worse-labels retrieve`` with
    queries ``turn`` and ``official_history`` over a lucene_bm25 index, then the contexts stage)
    on the organisers' pilot sample: every turn's nDCG@10 in the contexts table equals a hand
    computation from the written run (trec_eval's order: score descending, ties by doc id
    descending). The pilot ships only its 15 gold documents, so these are not estimates of the
    published .1827 / .4379; the real dev split needs the Hugging Face download."""
    import math

    from convrag.cli import main
    from convrag.data.recor import load_recor_pilot, read_documents
    from convrag.metrics.retrieval import read_trec_run
    from convrag.records import write_records
    from convrag.retrieval import build_index

    pilot = shared_data / "recor_pilot"
    tasks, _ = load_recor_pilot(pilot / "benchmark.jsonl", pilot / "documents.jsonl", pilot / "qrels.txt")
    write_records(tmp_path / "tasks.jsonl", tasks)
    write_records(tmp_path / "corpus.jsonl", read_documents(pilot / "documents.jsonl"))
    build_index("lucene_bm25", tmp_path / "corpus.jsonl", tmp_path / "idx", {})
    domains = sorted({t.labels["domain"] for t in tasks})
    runs = {}
    for rung, query in (("bm25_turn", "current"), ("bm25_hist", "official_history")):
        for d in domains:
            out = tmp_path / rung / d
            main(["worse-labels", "retrieve", "--tasks", str(tmp_path / "tasks.jsonl"), "--domain", d,
                  "--index-dir", str(tmp_path / "idx"), "--retriever", "lucene_bm25", "--recall-k", "1000",
                  "--rung", rung, "--query", query, "--out-run", f"{out}.trec", "--out-queries",
                  f"{out}.queries.jsonl", "--accounting", f"{out}.accounting.json"])
        runs[rung] = [str(tmp_path / rung / f"{d}.trec") for d in domains]
    main(["worse-labels", "contexts", "--tasks", str(tmp_path / "tasks.jsonl"), "--slice", "pilot",
          "--runs", json.dumps(runs), "--corpora", str(tmp_path / "corpus.jsonl"), "--domains", *domains,
          "--top-k", "5", "--out", str(tmp_path / "c.parquet"), "--items", str(tmp_path / "items.jsonl")])
    c = pd.read_parquet(tmp_path / "c.parquet").set_index("context_id")
    scored = [t for t in tasks if t.gold_docs]
    for rung, paths in runs.items():
        run = {q: h for p in paths for q, h in read_trec_run(p).items()}
        for t in scored:
            ranked = sorted(sorted(run[t.task_id].items(), reverse=True), key=lambda h: -h[1])
            dcg = sum(1 / math.log2(i + 2) for i, (d, _) in enumerate(ranked[:10]) if d in t.gold_docs)
            ideal = sum(1 / math.log2(i + 2) for i in range(min(len(t.gold_docs), 10)))
            assert c.loc[f"{rung}|{t.task_id}", "ndcg10"] == pytest.approx(dcg / ideal, abs=1e-9), (rung, t.task_id)
    hist = c[c["set"] == "bm25_hist"]
    assert len(hist) == len(scored) and (c.loc[c["set"] == "gold", "qrels_label"] == "all").all()


def test_gold_context_of_a_corpus_sample_shows_the_gold_it_has():
    """With allow_missing_gold (a corpus sample) a gold id may lack its text: the gold context
    shows the gold passages the corpus has; a retrieved id without text is still an error."""
    t = _task("d/c_turn_1", "d/c", 1, "q", ["g", "gone"])
    df, items = build_contexts("s", [t], {"r": {"d/c_turn_1": {"g": 1.0}}}, {"g": "gold"}, 5, None)
    gold = {i["context_id"]: i for i in items}["gold|d/c_turn_1"]
    assert gold["passages"] == ["gold"]
    row = df.set_index("context_id").loc["gold|d/c_turn_1"]
    assert row["doc_ids"] == ["g"] and row["n_gold"] == 2 and row["qrels_label"] == "part"
