"""worse_labels' answer judges as a list: the config forms, the correctness job with every judge
(one batched call each), the per-judge reads, and the two analyses that compare the judges
(Table 2 per judge with the largest difference between judges; the refusal-based changed
conclusions that survive under each judge), on hand-made inputs worked by hand."""

from __future__ import annotations

import json
import types

import numpy as np
import pandas as pd
import pytest

from convrag.config import REPO_ROOT
from convrag.errors import ConfigError, DataError
from convrag.studies.worse_labels import answer_judges as AJ
from convrag.studies.worse_labels import plan, wiring
from convrag.studies.worse_labels.targets import load_correctness, load_reads
from worse_labels_helpers import base_config as _config, checked as _check

A, U = "ANSWERABLE", "UNANSWERABLE"




# ---- the config -------------------------------------------------------------------------------


def test_a_single_mapping_is_one_judge_and_a_list_any_number():
    c = _check(_config())
    assert plan.answer_judges(c) == [{"model": "smollm2-135m", "max_tokens": 4}]
    assert c["worse_labels"]["judges"]["answer"] == [{"model": "smollm2-135m", "max_tokens": 4}]
    assert "correctness_compared" in wiring.artifacts(c, _layout(c)) and \
        wiring.artifacts(c, _layout(c))["correctness_compared"] is None  # one judge: nothing to compare
    cfg = _config()
    cfg["worse_labels"]["judges"]["answer"] = [{"model": "smollm2-135m"}]
    c = _check(cfg)
    assert plan.answer_judges(c) == [{"model": "smollm2-135m", "max_tokens": 8}]  # the default filled
    cfg["worse_labels"]["judges"]["answer"] = {"model": None}
    c = _check(cfg)
    assert plan.answer_judges(c) == [] and wiring.artifacts(c, _layout(c))["correctness"] is None
    assert not [j for j in plan.model_jobs(c) if j["stage"] == "correctness"]


def _layout(c):
    from convrag.layout import layout

    return layout(c)


@pytest.mark.parametrize("answer, key", [
    ([{"model": "smollm2-135m"}, {"model": "nope"}], "worse_labels.judges.answer[1].model"),
    ([{"model": "smollm2-135m"}, {"model": "smollm2-135m"}], "worse_labels.judges.answer: a model is listed twice"),
    ([{"model": None}], "worse_labels.judges.answer[0].model"),
    ([{"model": "smollm2-135m", "temperature": 0}], "worse_labels"),
])
def test_bad_answer_judges_name_the_key(answer, key):
    cfg = _config()
    cfg["worse_labels"]["judges"]["answer"] = answer
    with pytest.raises(ConfigError, match=key.replace("[", r"\[").replace("]", r"\]")):
        _check(cfg)


def test_the_paper_config_lists_its_two_answer_judges():
    from convrag.config import load_config

    c = load_config(REPO_ROOT / "config" / "studies" / "worse_labels.yaml")
    assert [a["model"] for a in plan.answer_judges(c)] == ["phi-4", "qwen3-8b"]
    L = _layout(c)
    arts = wiring.artifacts(c, L)
    assert arts["correctness_compared"] == arts["correctness"] and len(arts["correctness"]) == 2 * 3  # slices x readers
    assert json.loads(wiring.answer_args(c).split(" ", 1)[1].strip("'")) == [
        {"model": "phi-4", "max_tokens": 8}, {"model": "qwen3-8b", "max_tokens": 8}]
    jobs = [j for j in plan.model_jobs(c) if j["stage"] == "correctness"]
    assert len(jobs) == 2 * 3 * 2 and {j["model"] for j in jobs} == {"phi-4", "qwen3-8b"}


# ---- the correctness job ----------------------------------------------------------------------


class _Engine:
    """Scores by a table: judge model -> answer -> reply; records each generate call."""

    def __init__(self, model, replies, calls):
        self.model, self.replies, self.calls = model, replies, calls
        self.accounting = types.SimpleNamespace(to_dict=lambda: {"model": model})

    def generate(self, requests, desc=None):
        self.calls.append((self.model, len(requests)))
        out = []
        for r in requests:
            answer = r.messages[-1]["content"].split("Answer to grade: ")[1].split("\n")[0]
            out.append(types.SimpleNamespace(text=self.replies[self.model][answer]))
        return out


def test_the_correctness_job_runs_every_judge_once_each(tmp_path, monkeypatch, capsys):
    from convrag.cli import main
    from convrag.io import read_json, read_jsonl, write_jsonl
    from convrag.rag import jobs

    calls = []
    replies = {"j1": {"Paris": "5", "Lyon": "2"}, "j2": {"Paris": "4", "Lyon": "Score: 4"}}

    def engine(self, model, role, template_kwargs=None):
        self.roles[role] = e = _Engine(model, replies, calls)
        return e

    monkeypatch.setattr(jobs.Job, "engine", engine)
    items = [{"context_id": f"r1|t{i}", "question": "Capital of France?", "reference": "Paris"} for i in (1, 2, 3, 4)]
    reads = [{"item_id": "r1|t1", "status": A, "answer": "Paris"}, {"item_id": "r1|t2", "status": A, "answer": "Lyon"},
             {"item_id": "r1|t3", "status": U, "answer": ""}, {"item_id": "r1|t4", "status": A, "answer": ""}]
    write_jsonl(tmp_path / "items.jsonl", items)
    write_jsonl(tmp_path / "reads.jsonl", reads)
    out = tmp_path / "correctness" / "recor" / "A.jsonl"
    judges = [{"model": "j1", "max_tokens": 8}, {"model": "j2", "max_tokens": 8}]
    main(["worse-labels", "correctness", "--items", str(tmp_path / "items.jsonl"), "--reads",
          str(tmp_path / "reads.jsonl"), "--judges", json.dumps(judges), "--registry", "unused", "--cache",
          str(tmp_path / "cache"), "--prompts-dir", str(REPO_ROOT / "resources" / "prompts"), "--out", str(out),
          "--accounting", str(tmp_path / "acc.json")])
    assert calls == [("j1", 2), ("j2", 2)]  # one batched call per judge, the two answered replies only
    v = read_jsonl(out)
    got = {(x["judge_model"], x["item_id"]): x["value"] for x in v}
    assert got == {("j1", "r1|t1"): 5, ("j1", "r1|t2"): 2, ("j1", "r1|t3"): None, ("j1", "r1|t4"): 1,
                   ("j2", "r1|t1"): 4, ("j2", "r1|t2"): 4, ("j2", "r1|t3"): None, ("j2", "r1|t4"): 1}
    acc = read_json(tmp_path / "acc.json")
    assert set(acc) >= {"judge:j1", "judge:j2", "job"}
    assert acc["job"]["judges"]["j1"]["method_llm"] == 2 and acc["job"]["judges"]["j2"]["method_skipped"] == 1
    # the reads under each judge: correct = answered and >= 4
    read_rows = [{**r, "reader": "A", "p_answerable": 0.5} for r in reads]
    write_jsonl(tmp_path / "reads" / "recor" / "A.jsonl", read_rows)
    inputs = {"reads": [str(tmp_path / "reads" / "recor" / "A.jsonl")], "correctness": [str(out)]}
    cor = load_correctness(inputs)
    assert len(cor) == 8 and set(cor["judge"]) == {"j1", "j2"}
    r1, r2 = load_reads(inputs, "j1"), load_reads(inputs, "j2")
    assert r1["correct"].tolist() == [True, False, False, False]
    assert r2["correct"].tolist() == [True, True, False, False]
    assert load_reads(inputs)["correct"].tolist() == [True, False, False, False]  # the file's first judge
    assert main(["worse-labels", "correctness", "--items", str(tmp_path / "items.jsonl"), "--reads",
              str(tmp_path / "reads.jsonl"), "--judges", "[{}]", "--registry", "x", "--cache", "y",
              "--prompts-dir", "z", "--out", str(out), "--accounting", str(tmp_path / "acc.json")]) != 0
    assert "--judges must list {model, max_tokens} mappings" in capsys.readouterr().err


# ---- the analyses -----------------------------------------------------------------------------


def _ctx():
    return {"ladder": ["r1"], "primary": "j", "labellers": ["j"], "readers": ["A"], "main_slice": "s",
            "replication_slice": None, "boot": {"n_resamples": 200, "seed": 0, "unit": "turn"}}


def _frames():
    """Rung r1: t1-t4 without gold, t5 with. Content label: t1, t2 yes (false misses), t3, t4 no
    (true misses), t5 yes."""
    label = {1: "yes", 2: "yes", 3: "no", 4: "no", 5: "yes"}
    c = pd.DataFrame([{"slice": "s", "domain": "x", "dialogue": f"d{t}", "task_id": f"t{t}", "set": "r1",
                       "no_gold": t <= 4, "qrels_label": "none" if t <= 4 else "all"} for t in range(1, 6)])
    lab = pd.DataFrame([{"slice": "s", "task_id": f"t{t}", "set": "r1", "labeller": "j", "label": label[t]}
                        for t in range(1, 6)])
    return c, lab


def _reads(rung: dict, none: dict) -> pd.DataFrame:
    """correct per turn on the rung and with no documents (t1, t2 only)."""
    rows = [{"slice": "s", "task_id": f"t{t}", "set": "r1", "reader": "A", "status": A if ok else U,
             "p_answerable": 0.5, "correct": ok} for t, ok in rung.items()]
    rows += [{"slice": "s", "task_id": f"t{t}", "set": "none", "reader": "A", "status": A if ok else U,
              "p_answerable": 0.5, "correct": ok} for t, ok in none.items()]
    return pd.DataFrame(rows)


def test_answer_judges_per_judge_and_largest_difference_by_hand():
    c, lab = _frames()
    reads = {
        # J1: false misses 2/2, true misses 0/2, no documents 0/2, paired diff 1
        "J1": _reads({1: True, 2: True, 3: False, 4: False, 5: True}, {1: False, 2: False}),
        # J2: false misses 1/2, true misses 1/2, no documents 0/2, paired diff .5
        "J2": _reads({1: True, 2: False, 3: True, 4: False, 5: True}, {1: False, 2: False}),
        # J3: false misses 0/2, true misses 0/2, no documents 1/2, paired diff -.5
        "J3": _reads({1: False, 2: False, 3: False, 4: False, 5: True}, {1: True, 2: False}),
    }
    out = AJ.answer_judges(c, lab, reads, _ctx())
    assert list(out.columns) == AJ.ANSWER_JUDGES_COLUMNS
    by = out.set_index("judge")
    assert by.loc["J1", ["correct_false_miss", "correct_true_miss", "correct_no_docs", "diff"]].tolist() == [1, 0, 0, 1]
    assert by.loc["J2", ["correct_false_miss", "correct_true_miss", "correct_no_docs", "diff"]].tolist() == [.5, .5, 0, .5]
    assert by.loc["J3", ["correct_false_miss", "correct_true_miss", "correct_no_docs", "diff"]].tolist() == [0, 0, .5, -.5]
    big = by.loc[AJ.LARGEST]
    # pairwise |a - b|: false misses max(.5, 1, .5) = 1; true misses .5; no documents .5; diff max(.5, 1.5, 1) = 1.5
    assert (big["correct_false_miss"], big["correct_true_miss"], big["correct_no_docs"]) == (1.0, 0.5, 0.5)
    assert big["diff"] == 1.5 and big[AJ.LARGEST] == 1.0 and big["n_judges"] == 3
    # two judges only: J1 vs J2
    two = AJ.answer_judges(c, lab, {k: reads[k] for k in ("J1", "J2")}, _ctx()).set_index("judge").loc[AJ.LARGEST]
    assert (two["correct_false_miss"], two["correct_true_miss"], two["correct_no_docs"], two[AJ.LARGEST]) == \
        (0.5, 0.5, 0.0, 0.5)
    # one judge: nothing to compare
    one = AJ.answer_judges(c, lab, {"J1": reads["J1"]}, _ctx()).set_index("judge").loc[AJ.LARGEST]
    assert np.isnan(one[AJ.LARGEST]) and one["n_judges"] == 1
    with pytest.raises(DataError, match="no answer judge"):
        AJ.answer_judges(c, lab, {}, _ctx())


def _changed(rows):
    keys = ["slice", "comparison", "reader", "rung", "first", "second", "defined", "changed", "base_label"]
    return pd.DataFrame([dict(zip(keys, r)) for r in rows])


def _per_judge(rows):
    keys = ["slice", "reader", "rung", "judge", "n_paired", "diff_ci_low"]
    return pd.DataFrame([dict(zip(keys, r)) for r in rows])


def test_judge_survival_by_hand():
    # rows as followups.changed_all writes them (§4.3's enumeration): pairwise families name their
    # two rungs (refusal_rungs, the Kitagawa terms) or readers (refusal_readers) in first / second,
    # per-cell ones a reader x rung
    Q = "qrels"
    changed = _changed([
        ("s", "refusal_rungs", "A", None, "r1", "r2", True, True, Q),     # c1: J1 > 0 on A@r1, A@r2; J2 not on A@r2
        ("s", "refusal_rungs", "A", None, "r1", "r3", True, True, Q),     # J2 scores no false miss on A@r3: not checkable
        ("s", "refusal_readers", None, "r1", "A", "B", True, True, Q),    # c2: cells A@r1, B@r1 > 0 under both
        ("s", "refusal_gap", "B", "r2", None, None, True, True, Q),       # c3: cell B@r2 > 0 under both
        ("s", "contrast_2b_2c", "A", "r2", None, None, True, True, Q),    # c4: cell A@r2: J1 0.1 > 0, J2 -0.1
        ("s", "refusal_rungs", "B", None, "r1", "r3", True, False, Q),    # unchanged
        ("s", "auroc_rungs", "A", None, "r1", "r2", True, True, Q),       # not refusal-based
        ("s", "refusal_rungs", "A", None, "r2", "r3", False, False, Q),   # undefined
        ("s", "kitagawa_rate", "B", None, "r1", "r2", True, True, Q),     # c5: cells B@r1, B@r2 > 0 under both
        ("s", "refusal_gap", "B", "r2", None, None, True, True, "phi"),   # a judge-swap row: not the qrels rows
    ])
    per = _per_judge([
        ("s", "A", "r1", "J1", 5, 0.2), ("s", "A", "r2", "J1", 4, 0.1), ("s", "A", "r3", "J1", 3, 0.3),
        ("s", "A", "r1", "J2", 5, 0.2), ("s", "A", "r2", "J2", 4, -0.1), ("s", "A", "r3", "J2", 0, np.nan),
        ("s", "B", "r1", "J1", 6, 0.4), ("s", "B", "r2", "J1", 6, 0.05),
        ("s", "B", "r1", "J2", 6, 0.3), ("s", "B", "r2", "J2", 6, 0.01),
    ])
    out = AJ.judge_survival(changed, per, ["J1", "J2"])
    assert list(out.columns) == AJ.SURVIVAL_COLUMNS
    by = out.set_index("judge")
    # refusal-based and changed: c1, the A r1->r3 pair, c2, c3, c4, c5 = 6; checkable: all but A r1->r3 = 5
    assert by["n_refusal_changed"].tolist() == [6, 6, 6] and by["n_checkable"].tolist() == [5, 5, 5]
    c1, c2 = "refusal_rungs:A:r1->r2", "refusal_readers:r1:A->B"
    c3, c4, c5 = "refusal_gap:B@r2", "contrast_2b_2c:A@r2", "kitagawa_rate:B:r1->r2"
    assert by.loc["J1", "n_survive"] == 5 and by.loc["J1", "surviving"] == "; ".join([c1, c2, c3, c4, c5])
    assert by.loc["J2", "n_survive"] == 3 and by.loc["J2", "surviving"] == "; ".join([c2, c3, c5])
    assert by.loc[AJ.EVERY, "n_survive"] == 3 and by.loc[AJ.EVERY, "surviving"] == "; ".join([c2, c3, c5])
    # the judge-swap rows are another enumeration: asked for, only they count (one row, B@r2 > 0 under both)
    swap = AJ.judge_survival(changed, per, ["J1", "J2"], base="phi").set_index("judge")
    assert swap.loc[AJ.EVERY, "n_checkable"] == 1 and swap.loc[AJ.EVERY, "surviving"] == c3
    with pytest.raises(DataError, match="per_judge lacks column"):
        AJ.judge_survival(changed, per.drop(columns=["n_paired"]), ["J1"])


# ---- the run's answer judges and auditor, against the published entries ------------------------


def test_the_reproduction_context_names_answer_judges_and_auditor():
    from convrag.config import load_config
    from convrag.llm.registry import load_registry
    from convrag.report.reproduction import load_published, published_path, requirement_failures
    from convrag.studies import get_study

    c = load_config(REPO_ROOT / "config" / "studies" / "worse_labels.yaml")
    run = get_study("worse_labels").context(c)["reproduction"]
    # the text names them: phi-4 and Qwen3-8B as answer judges, Claude Opus 5.5 as the auditor
    assert run["answer_judges"] == ["phi-4", "qwen3-8b"] and run["auditor"] == "claude-opus-5.5"
    spec = load_registry()["claude-opus-5.5"]
    assert spec.backend == "openai" and spec.api_key_env == "ANTHROPIC_API_KEY" and spec.model_family() == "claude"
    pub = {e.id: e for e in load_published(published_path("worse_labels"), "worse_labels").entries}
    audit = pub["precision_no_gold_other.audit.hybrid"]
    assert requirement_failures(audit.requires, run) == []
    assert requirement_failures(audit.requires, {**run, "auditor": "gpt-4.1-mini"}) == [
        "different auditor: the paper's claude-opus-5.5 (this run: gpt-4.1-mini)"]
    swap = pub["reader_false_misses.answer_judge_swap_within"]
    assert requirement_failures(swap.requires, {**run, "answer_judges": ["phi-4"]}) == [
        "different answer judges: the paper's qwen3-8b (this run: phi-4)"]
