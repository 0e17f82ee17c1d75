"""worse_labels' MTRAG human-passage check wired end to end: the feedback and single-passage items
from MTRAG's conversations (the shared verbatim sample), the primary content judge over them (a
scripted judge), the mtrag_human table (shares hand-counted) and the human_feedback artifact,
config, rules and published entries."""

import copy
import json
from pathlib import Path

import pandas as pd
import pytest

from convrag.config import REPO_ROOT, load_config, validate_config
from convrag.errors import ConfigError
from convrag.llm.types import Response
from convrag.studies.worse_labels import followups as F
from convrag.studies.worse_labels import plan, wiring

SHARED = REPO_ROOT.parent / "shared" / "data" / "mtrag" / "conversations"
needs_sample = pytest.mark.skipif(not SHARED.exists(), reason="../shared/data/mtrag is absent (a fresh clone)")
CONV = "d44c3196b3d832f85160b5b4fbee1332"  # govt, index 6 of the sample


def _files():
    return {"conversations.json": str(SHARED / "conversations.sample.json"),
            "conversation_index_to_id.tsv": str(SHARED / "conversation_index_to_id.tsv")}


@needs_sample
def test_human_feedback_cli_writes_feedback_and_single_passage_items(tmp_path):
    from convrag.cli import main
    from convrag.io import read_jsonl

    main(["worse-labels", "human-feedback", "--files", json.dumps(_files()), "--domains", "govt",
          "--out", str(tmp_path / "fb.parquet"), "--items", str(tmp_path / "items.jsonl")])
    fb, items = pd.read_parquet(tmp_path / "fb.parquet"), read_jsonl(tmp_path / "items.jsonl")
    assert set(fb["domain"]) == {"govt"} and {i["domain"] for i in items} == {"govt"}
    mine = [i for i in items if i["conversation_id"] == CONV]
    # by hand from the file: turns 1-3 and 5 show 1 + 4 + 1 + 3 passages only the author judged ("yes"),
    # turns 4 and 6 show 2 + 1 the author accepted and the editor rejected: the editor's "no" wins
    assert [i["judgment"] for i in mine] == ["relevant"] * 6 + ["rejected"] * 2 + ["relevant"] * 3 + ["rejected"]
    assert [i["task_id"].split("|")[0][-1] for i in mine] == list("122223445556")
    first = mine[0]
    assert first["context_id"] == f"human|{CONV}<::>1|a618f0371eb48adf-2-1800" and first["set"] == "human"
    raw = json.loads((SHARED / "conversations.sample.json").read_text())[6]
    shown = raw["messages"][1]["contexts"][0]
    assert shown["document_id"] == "a618f0371eb48adf-2-1800"
    title = f"{shown['title']}\n" if shown.get("title") else ""
    assert first["passages"] == [title + shown["text"]] and first["history"] == []
    assert first["question"] == raw["messages"][0]["text"]
    assert len(mine[6]["history"]) == 6  # turn 4: three earlier user and agent messages
    # every judged (task, passage) of the domain is one item; unjudged ones are not asked
    judged = fb[fb["judgment"] != "unjudged"].drop_duplicates(["task_id", "doc_id"])
    assert len(items) == len(judged) == 38  # 27 accepted + 11 rejected over the 3 govt conversations
    assert sum(i["judgment"] == "rejected" for i in items) == 11


class _Judge:
    """Replies by the passage the request shows."""

    def __init__(self, by_passage):
        self.by_passage, self.calls = by_passage, 0

    def generate(self, reqs, desc=None):
        self.calls += 1
        out = []
        for r in reqs:
            user = r.messages[-1]["content"]
            hit = [v for p, v in self.by_passage.items() if p.strip() in user]
            assert len(hit) == 1
            out.append(Response(text=hit[0], prompt_tokens=1, completion_tokens=1, finish_reason="stop"))
        return out


@needs_sample
def test_mtrag_human_shares_on_the_sample_with_a_scripted_judge(tmp_path):
    from convrag.io import write_jsonl, write_parquet
    from convrag.studies.worse_labels import judges
    from convrag.studies.worse_labels.targets import TARGETS

    fb, items = F.human_passages(_files()["conversations.json"], index_to_id_tsv=_files()["conversation_index_to_id.tsv"])
    fb = fb[fb["conversation_id"] == CONV]
    items = [{**i, "item_id": i["context_id"]} for i in items if i["conversation_id"] == CONV]
    # accepted: turns 1-2 yes (5), turn 3 partial, turn 5 no, no, unreadable; rejected: turn 4 no, no, turn 6 yes
    replies = ["yes\nSupport: 1"] * 5 + ["partial\nSupport: 1", "no\nSupport: none", "no\nSupport: none",
                                         "no\nSupport: none", "no\nSupport: none", "I cannot tell", "Yes\nSupport: 1"]
    order = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    eng = _Judge({items[k]["passages"][0]: replies[k] for k in order})
    prompts = judges.load_prompts(REPO_ROOT / "resources" / "prompts", which=("content",))["content"]
    verdicts = judges.judge_content(items, eng, prompts)
    assert eng.calls == 1  # one batched call
    write_parquet(fb, tmp_path / "fb.parquet")
    write_jsonl(tmp_path / "phi-4.jsonl", [{**v, "judge_model": "phi-4"} for v in verdicts])
    ctx = {"labellers": ["phi-4"], "boot": {"n_resamples": 200, "seed": 0, "unit": "turn"}}
    out = TARGETS["mtrag_human"].build({"human_feedback": [str(tmp_path / "fb.parquet")],
                                        "human_labels": [str(tmp_path / "phi-4.jsonl")]}, ctx).set_index("judgment")
    rel, rej = out.loc["relevant"], out.loc["rejected"]
    assert (rel["n"], rel["n_unlabelled"], rej["n"], rej["n_unlabelled"]) == (8, 1, 3, 0)
    assert rel["yes_share"] == pytest.approx(5 / 8) and rel["partial_share"] == pytest.approx(1 / 8)
    assert rel["no_share"] == pytest.approx(2 / 8)
    assert rej["yes_share"] == pytest.approx(1 / 3) and rej["no_share"] == pytest.approx(2 / 3)
    assert rel["ci_low"] <= 5 / 8 <= rel["ci_high"] and 0 <= rej["ci_low"] <= 1 / 3 <= rej["ci_high"] <= 1
    assert set(out["labeller"]) == {"phi-4"}


def _config():
    c = load_config(REPO_ROOT / "config" / "studies" / "worse_labels.yaml")
    return validate_config(copy.deepcopy(c), source="cfg.yaml")


def test_the_paper_config_wires_the_feedback_and_the_human_judge():
    from convrag.layout import layout
    from convrag.report.reproduction import load_published, published_path, requirement_failures
    from convrag.studies import get_study
    from convrag.studies.worse_labels.targets import TARGETS

    c = _config()
    L = layout(c)
    assert plan.human_benchmark(c) == "mtrag_conversations" and plan.human_judge(c) == "phi-4"
    assert c["benchmarks"]["mtrag_conversations"]["kind"] == "mtrag_conversations"
    assert wiring.human_raw_names(c) == ["conversations.json", *(f"{d}_questions.jsonl" for d in
                                                                 ("clapnq", "cloud", "fiqa", "govt"))]
    arts = wiring.artifacts(c, L)
    assert arts["human_feedback"] == [L.study("worse_labels") + "/human/feedback.parquet"]
    assert arts["human_labels"] == [L.study("worse_labels") + "/human/labels/phi-4.jsonl"]
    assert arts["human_labels"][0] in wiring.model_outputs(c, L)
    assert [j for j in plan.model_jobs(c) if j["stage"] == "label_human"] == [
        {"stage": "label_human", "role": "judge", "model": "phi-4", "benchmark": "mtrag_conversations"}]
    assert "human_feedback" in TARGETS["false_miss_origin"].inputs
    assert set(TARGETS["mtrag_human"].inputs) == {"human_feedback", "human_labels"}
    run = get_study("worse_labels").context(c)["reproduction"]
    assert run["human_data"] == ["mtrag_conversations"]
    pub = {e.id: e for e in load_published(published_path("worse_labels"), "worse_labels").entries}
    for eid, judgment in (("mtrag_human.gold_yes", "relevant"), ("mtrag_human.rejected_yes", "rejected")):
        e = pub[eid]
        assert e.ours.target == "mtrag_human" and e.ours.where == {"labeller": "phi-4", "judgment": judgment}
        assert (e.ours.value, e.ours.low, e.ours.high) == ("yes_share", "ci_low", "ci_high")
        assert not requirement_failures(e.requires, run)
    ns = pub["table3_mtrag.dense_false_misses.never_seen"]
    assert ns.ours.value == "n_never_seen" and not requirement_failures(ns.requires, run)
    assert requirement_failures(ns.requires, {**run, "human_data": []})


def test_the_default_config_has_no_human_jobs_and_a_bad_benchmark_is_named():
    from convrag.layout import layout

    d = load_config(REPO_ROOT / "config" / "config.yaml")
    assert plan.human_judge(d) is None
    arts = wiring.artifacts(d, layout(d))
    assert arts["human_feedback"] == [] and arts["human_labels"] is None
    assert not [j for j in plan.model_jobs(d) if j["stage"] == "label_human"]
    c = load_config(REPO_ROOT / "config" / "studies" / "worse_labels.yaml")
    bad = copy.deepcopy(c)
    bad["worse_labels"]["human_feedback"] = "mtrag"  # kind mtrag_retrieval
    with pytest.raises(ConfigError, match="worse_labels.human_feedback: benchmarks.mtrag is of kind mtrag_retrieval"):
        validate_config(bad, source="cfg.yaml")
    bad["worse_labels"]["human_feedback"] = "nope"
    with pytest.raises(ConfigError, match="worse_labels.human_feedback"):
        validate_config(bad, source="cfg.yaml")


def test_rule_file_runs_the_label_stage_on_the_human_items():
    text = (REPO_ROOT / "workflow" / "rules" / "studies" / "worse_labels.smk").read_text()
    rule = text.split("rule worse_labels_human_label:")[1]
    assert "convrag worse-labels label --items {input.ctx_items} --sets human" in rule
    assert Path(REPO_ROOT / "workflow" / "report" / "worse_labels" / "mtrag_human.rst").exists()
