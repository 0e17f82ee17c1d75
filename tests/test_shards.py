from convrag.records import Question
from convrag.sharding import check_shards, entities, parse_shards, shard_questions, shard_report, ShardPrompts
from convrag.llm.types import Response

Q = Question(qid="q1", dataset="d", question='In which city was the founder of the company that released the album "Cold Rivers" born?',
             answers=["Ranholm"], supporting_doc_ids=["d/1", "d/2", "d/3"], hops=3, type="bridge",
             decomposition=["I want a city where someone was born.", 'Start from the album "Cold Rivers".', "Then take its label's founder."])
CMP = Question(qid="q2", dataset="d", question="Who was born first, Malin Ostranova or Telostin Draberg?",
               answers=["Malin Ostranova"], supporting_doc_ids=["d/4", "d/5"], hops=2, type="comparison")


def test_entities_finds_names_and_numbers_not_question_words():
    assert entities(Q.question) == ["Cold Rivers"]
    assert entities(CMP.question) == ["Malin Ostranova", "Telostin Draberg"]
    assert entities("What happened in 1987 at the Bank of Velmora?") == ["1987", "Bank of Velmora"]


def test_parse_shards_numbered_lines_only():
    text = "Sure!\n1. I need a city.\n2) The person founded a company.\n- The album is Cold Rivers.\nThanks"
    assert parse_shards(text) == ["I need a city.", "The person founded a company.", "The album is Cold Rivers."]


def test_checks_pass_fail_cases():
    good = check_shards(Q, ["I need a city where someone was born.", "That person founded a company.", "It released Cold Rivers."])
    assert good["passed"] and good["missing_entities"] == []
    missing = check_shards(Q, ["I need a city.", "Someone founded a company."])
    assert not missing["passed"] and missing["missing_entities"] == ["Cold Rivers"]
    leaked = check_shards(Q, ["The city is Ranholm.", "The album is Cold Rivers."])
    assert not leaked["passed"] and leaked["leaked_answers"] == ["Ranholm"]
    one = check_shards(Q, ["Where was the founder of the label of Cold Rivers born?"])
    assert not one["min_two_shards"] and not one["passed"]
    # a comparison question names its candidate answers: not a leak
    cmp_ok = check_shards(CMP, ["I want the person born first.", "One is Malin Ostranova.", "The other is Telostin Draberg."])
    assert cmp_ok["passed"]


class Scripted:
    """A stand-in engine returning fixed texts per (question, attempt)."""

    def __init__(self, outputs):
        self.outputs, self.calls = outputs, []

    def generate(self, reqs, desc=None):
        self.calls.append(len(reqs))
        out = []
        for r in reqs:
            q = r.messages[-1]["content"]
            out.append(Response(text=self.outputs[(q, r.sample_index)], prompt_tokens=1, completion_tokens=1,
                                finish_reason="stop", label_logprobs=None, cached=False))
        return out


def test_shard_questions_attempts_are_batched_and_fallback_recorded():
    prompts = ShardPrompts(system="s", examples=[], user="Question: {question}")
    uq, uc = f"Question: {Q.question}", f"Question: {CMP.question}"
    eng = Scripted({
        (uq, 0): "1. The city is Ranholm.\n2. Cold Rivers", (uq, 1): "1. nothing", (uq, 2): "nope",
        (uc, 0): "1. I want who was born first.\n2. One is Malin Ostranova.\n3. Other is Telostin Draberg.",
    })
    sets = shard_questions([Q, CMP], eng, prompts, {"attempts": 3, "fallback": "decomposition"})
    assert eng.calls == [2, 1, 1]  # round 1 batches both questions; only the failing one retried
    q_set, c_set = sets
    assert c_set.passed and c_set.method == "llm" and c_set.checks["passing_attempt"] == 0
    assert q_set.method == "decomposition" and q_set.passed
    assert [s["text"] for s in q_set.shards] == Q.decomposition
    assert len(q_set.checks["attempts"]) == 3
    sets_none = shard_questions([Q], eng, prompts, {"attempts": 3, "fallback": "none"})
    assert not sets_none[0].passed
    report = shard_report(sets_none, [Q])
    assert "failed (excluded from the grid): 1" in report and "`q1`" in report


def test_invented_entities_fail_the_check():
    # a 135M model often "helps" by naming a city: that adds a fact the question did not give
    bad = check_shards(Q, ["I need the city where someone was born.", "The album Cold Rivers came out of New York City."])
    assert not bad["passed"] and bad["added_entities"] == ["New York City"]
    # sentence-opening ordinary words are not entities
    assert entities("Start from the album. Then take its label.") == []
    assert entities("Malin Ostranova was born first.") == ["Malin Ostranova"]


# ---- two-step sharding, replacement of failed sets, wording variability -----------------------

import json  # noqa: E402

import pytest  # noqa: E402

from convrag.sharding import (StepPrompt, VARIABILITY_OFFSET, shard_settings, shard_variability,  # noqa: E402
                              shard_with_replacements)

TWO = ShardPrompts(system="s", examples=[], user="Question: {question}",
                   segment=StepPrompt(system="seg", examples=[{"question": "Ex?", "output": ["Goal: x.", "y"]}],
                                      user="Question: {question}"),
                   rephrase=StepPrompt(system="reph", examples=[], user="Question: {question}\nUnits:\n{units}"))


class ByStep:
    """A scripted engine for two-step sharding: the reply depends on the step (system prompt),
    the question and the sample index; records every request."""

    def __init__(self, seg, reph):
        self.seg, self.reph, self.calls, self.reqs = seg, reph, [], []

    def generate(self, reqs, desc=None):
        self.calls.append((desc, len(reqs)))
        self.reqs += reqs
        out = []
        for r in reqs:
            q = r.messages[-1]["content"].split("\n")[0].removeprefix("Question: ")
            table = self.seg if r.messages[0]["content"] == "seg" else self.reph
            out.append(Response(text=table.get((q, r.sample_index), table.get((q, None), "")), prompt_tokens=1,
                                completion_tokens=1, finish_reason="stop", label_logprobs=None, cached=False))
        return out


GOOD_Q = "1. I need a city where someone was born.\n2. That person founded a company.\n3. It released Cold Rivers."
GOOD_C = "1. I want who was born first.\n2. One is Malin Ostranova.\n3. Other is Telostin Draberg."


def test_two_step_sharding_batches_each_step_and_records_both():
    eng = ByStep(
        seg={(Q.question, 0): "1. Goal: a birth city.\n2. founder of a company\n3. album Cold Rivers",
             (Q.question, 1): "1. Goal: a birth city.\n2. album Cold Rivers",
             (CMP.question, 0): "nothing numbered here"},
        reph={(Q.question, 0): "1. The city is Ranholm.\n2. Cold Rivers", (Q.question, 1): GOOD_Q,
              (CMP.question, 1): GOOD_C})
    sets = shard_questions([Q, CMP], eng, TWO, {"steps": 2, "attempts": 2, "fallback": "none"})
    # one call per step per attempt round; CMP's step 1 gave no units, so its step 2 was skipped in round 1
    assert eng.calls == [("shard attempt 1, step 1 (segment)", 2), ("shard attempt 1, step 2 (rephrase)", 1),
                         ("shard attempt 2, step 1 (segment)", 2), ("shard attempt 2, step 2 (rephrase)", 1)]
    assert [r.sample_index for r in eng.reqs] == [0, 0, 0, 1, 1, 1]
    # step 2 sees the question and step 1's units as numbered lines
    assert eng.reqs[2].messages[-1]["content"] == (f"Question: {Q.question}\nUnits:\n1. Goal: a birth city.\n"
                                                   "2. founder of a company\n3. album Cold Rivers")
    # the segment example is a user/assistant pair with numbered output
    assert [m["content"] for m in eng.reqs[0].messages[:3]] == ["seg", "Question: Ex?", "1. Goal: x.\n2. y"]
    q_set, c_set = sets
    assert q_set.passed and q_set.checks["passing_attempt"] == 1
    assert [s["text"] for s in q_set.shards] == ["I need a city where someone was born.",
                                                 "That person founded a company.", "It released Cold Rivers."]
    log = q_set.checks["attempts"]
    assert [a["units"] for a in log] == [["Goal: a birth city.", "founder of a company", "album Cold Rivers"],
                                         ["Goal: a birth city.", "album Cold Rivers"]]
    assert log[0]["raw_segment"].startswith("1. Goal") and log[0]["raw"].startswith("1. The city is Ranholm")
    assert not log[0]["passed"] and log[0]["leaked_answers"] == ["Ranholm"]
    # CMP: round 1 had no units (no step 2, no shards), round 2 has no scripted step-1 reply either
    assert not c_set.passed and [a["units"] for a in c_set.checks["attempts"]] == [[], []]
    assert c_set.checks["attempts"][0]["raw"] == "" and c_set.checks["attempts"][0]["n_shards"] == 0


def test_one_step_sharding_is_unchanged_by_the_two_step_prompts():
    # steps absent (= 1): one call per round with the one-step prompt, no step-1 fields in the log
    uq = f"Question: {Q.question}"
    eng = Scripted({(uq, 0): GOOD_Q})
    (s,) = shard_questions([Q], eng, TWO, {"attempts": 2})
    assert eng.calls == [1] and s.passed and set(s.checks["attempts"][0]) == {
        "attempt", "raw", "passed", "missing_entities", "added_entities", "leaked_answers",
        "exposed_intermediate_answers", "goal_first", "bad_followups", "n_shards"}
    with pytest.raises(Exception, match="segment"):
        shard_questions([Q], eng, prompts_without_steps(), {"steps": 2})


def prompts_without_steps():
    return ShardPrompts(system="s", examples=[], user="Question: {question}")


def test_shard_settings_drop_the_keys_that_are_off():
    block = {"model": "m", "attempts": 3, "steps": 1, "replace_failed": 0, "variability": {"questions": 0, "samples": 15}}
    assert shard_settings(block) == {"model": "m", "attempts": 3}
    on = {**block, "steps": 2, "replace_failed": 5, "variability": {"questions": 1, "samples": 15}}
    assert shard_settings(on) == on


def _q(i, text=None):
    return Question(qid=f"r{i}", dataset="d", question=text or f"Who founded the label of the album Record{i}?",
                    answers=[f"Founder{i}"], supporting_doc_ids=[], hops=2, type="bridge")


def _good(q):  # goal first, then one clue per message, every entity kept
    return f"1. I want to know who founded something.\n2. It is a record label.\n3. The label released Record{q.qid[1:]}."


def test_failed_shard_sets_are_replaced_from_the_reserve_in_order():
    main = [_q(1), _q(2), _q(3)]
    reserve = [_q(10), _q(11), _q(12), _q(13)]
    ok = {main[0].qid, reserve[1].qid, reserve[2].qid, reserve[3].qid}  # r2, r3 fail; r10 fails as well
    outputs = {(f"Question: {q.question}", i): (_good(q) if q.qid in ok else "1. nothing")
               for q in main + reserve for i in range(2)}
    eng = Scripted(outputs)
    sets, summary = shard_with_replacements(main, reserve, eng, prompts_without_steps(), {"attempts": 2})
    # round 1: the three questions (2 attempts); then 2 reserve questions (r10 fails, r11 passes);
    # then the one still missing (r12 passes): the reserve's last question is never tried
    assert eng.calls == [3, 2, 2, 1, 1]
    assert [s.qid for s in sets] == ["r1", "r2", "r3", "r10", "r11", "r12"]
    assert sum(s.passed for s in sets) == 3 == summary["passed"] == summary["target"]
    assert summary["replacements"] == [("r2", "r11"), ("r3", "r12")]
    assert summary["reserve_tried"] == 3 and summary["short"] == 0
    by = {s.qid: s for s in sets}
    assert by["r2"].checks["replaced_by"] == "r11" and by["r11"].checks["replaces"] == "r2"
    assert by["r10"].checks["reserve"] and not by["r10"].passed and "replaces" not in by["r10"].checks
    report = shard_report(sets, main + reserve[:3], summary)
    assert "| r2 | r11 |" in report and "| r3 | r12 |" in report
    assert "- `r2`: " in report and "(replaced by `r11`)" in report
    assert "reserve questions tried: 3 of 4" in report and "- short by: 0" in report


def test_a_short_reserve_is_reported():
    main, reserve = [_q(1), _q(2)], [_q(10)]
    eng = Scripted({(f"Question: {q.question}", 0): "1. nothing" for q in main + reserve})
    sets, summary = shard_with_replacements(main, reserve, eng, prompts_without_steps(), {"attempts": 1})
    assert summary["passed"] == 0 and summary["short"] == 2 and summary["replacements"] == []
    assert "SHORT by 2 question(s): the reserve is exhausted" in shard_report(sets, main + reserve, summary)


def test_variability_samples_have_their_own_sample_indices():
    q = _q(1)
    outs = {(f"Question: {q.question}", VARIABILITY_OFFSET + k): (_good(q) if k % 2 else "1. nothing") for k in range(4)}
    eng = Scripted(outs)
    v = shard_variability([q], eng, prompts_without_steps(), {"attempts": 3}, samples=4)
    assert eng.calls == [4]  # one batch
    assert v["samples"] == 4 and v["steps"] == 1 and len(v["questions"]) == 1
    row = v["questions"][0]
    assert row["qid"] == "r1" and row["dataset"] == "d"
    assert [s["sample"] for s in row["samples"]] == [0, 1, 2, 3]
    assert [s["passed"] for s in row["samples"]] == [False, True, False, True]
    assert row["samples"][0]["shards"] == ["nothing"]
    assert VARIABILITY_OFFSET > 100  # far above any attempt index


def test_select_questions_reserve_continues_the_same_draw(tmp_path):
    from convrag.cli import main as cli
    from convrag.records import read_records, write_records

    pool = [_q(i) for i in range(30)]
    write_records(tmp_path / "all.jsonl", pool)
    spec = json.dumps({"n_questions": 10, "sample_seed": 3})
    base = ["select-questions", "--dataset", "ds", "--spec", spec, "--questions", str(tmp_path / "all.jsonl")]
    assert cli(base + ["--out", str(tmp_path / "plain.jsonl")]) == 0
    assert cli(base + ["--reserve", "5", "--reserve-out", str(tmp_path / "reserve.jsonl")]) == 0
    assert cli(base + ["--out", str(tmp_path / "both.jsonl"), "--reserve", "50",
                       "--reserve-out", str(tmp_path / "big.jsonl")]) == 0
    plain = (tmp_path / "plain.jsonl").read_bytes()
    assert (tmp_path / "both.jsonl").read_bytes() == plain  # the first n never change
    first = [q.qid for q in read_records(tmp_path / "plain.jsonl", Question)]
    reserve = [q.qid for q in read_records(tmp_path / "reserve.jsonl", Question)]
    big = [q.qid for q in read_records(tmp_path / "big.jsonl", Question)]
    assert len(reserve) == 5 and not set(reserve) & set(first)
    assert len(big) == 20 and big[:5] == reserve  # capped at the pool; same order
    from convrag.data.hipporag import sample_questions

    assert first + reserve == [q.qid for q in sample_questions(pool, 15, 3)]
    assert all(q.dataset == "ds" for q in read_records(tmp_path / "reserve.jsonl", Question))


@pytest.mark.tinymodel
def test_two_step_sharding_with_the_real_tiny_model(tmp_path):
    import yaml

    from convrag.llm.engine import load_engine
    from convrag.resources import REPO_ROOT

    prompts = ShardPrompts.from_dict(yaml.safe_load(open(REPO_ROOT / "resources" / "prompts" / "shard.yaml")), "hotpotqa")
    eng = load_engine("smollm2-135m", REPO_ROOT / "config" / "models.yaml", tmp_path / "c.sqlite")
    qs = [Q, CMP]
    sets = shard_questions(qs, eng, prompts, {"steps": 2, "attempts": 1, "max_tokens": 48, "fallback": "none"})
    assert [s.qid for s in sets] == ["q1", "q2"]
    for s in sets:
        (a,) = s.checks["attempts"]
        assert a["raw_segment"].strip() and isinstance(a["units"], list)
        assert ("raw" in a) and (a["raw"].strip() or not a["units"])  # step 2 ran wherever step 1 gave units
        assert s.passed == a["passed"]
    steps = 1 + any(s.checks["attempts"][0]["units"] for s in sets)
    assert eng.accounting.batches == steps
    assert eng.accounting.requests == 2 + sum(bool(s.checks["attempts"][0]["units"]) for s in sets)


def test_shard_stage_with_reserve_and_variability_end_to_end(tmp_path, monkeypatch):
    """convrag shard with --reserve and --variability (scripted engine), then the review step
    with both question files, then the datasets table: the replacement enters the grid."""
    from convrag.cli import main as cli
    from convrag.rag.jobs import Job
    from convrag.records import ShardSet, read_records, write_records
    from convrag.studies.lic_rag.targets import dataset_table

    main, reserve = [_q(1), _q(2)], [_q(10), _q(11)]
    eng = Scripted({(f"Question: {q.question}", i): (_good(q) if q.qid in {"r1", "r11"} else "1. nothing")
                    for q in main + reserve for i in [0, VARIABILITY_OFFSET, VARIABILITY_OFFSET + 1]})
    eng.write_accounting = lambda path: open(path, "w").write("{}")
    monkeypatch.setattr(Job, "engine", lambda self, model, role, template_kwargs=None: eng)
    write_records(tmp_path / "q.jsonl", main)
    write_records(tmp_path / "reserve.jsonl", reserve)
    (tmp_path / "p.yaml").write_text("system: s\nuser: 'Question: {question}'\n")
    (tmp_path / "corpus.jsonl").write_text("{}\n")
    out = {k: str(tmp_path / k) for k in ("shards.jsonl", "report.md", "acc.json", "var.json", "final.jsonl")}
    settings = {"attempts": 1, "replace_failed": 2, "variability": {"questions": 1, "samples": 2}}
    assert cli(["shard", "--questions", str(tmp_path / "q.jsonl"), "--prompts", str(tmp_path / "p.yaml"),
                "--model", "m", "--registry", "r", "--cache", "c", "--out", out["shards.jsonl"],
                "--report", out["report.md"], "--accounting", out["acc.json"], "--settings", json.dumps(settings),
                "--reserve", str(tmp_path / "reserve.jsonl"), "--variability", out["var.json"]]) == 0
    sets = read_records(out["shards.jsonl"], ShardSet)
    assert [(s.qid, s.passed) for s in sets] == [("r1", True), ("r2", False), ("r10", False), ("r11", True)]
    report = open(out["report.md"]).read()
    assert "| r2 | r11 |" in report and "reserve questions tried: 2 of 2" in report
    var = json.load(open(out["var.json"]))
    assert [q["qid"] for q in var["questions"]] == ["r1"] and len(var["questions"][0]["samples"]) == 2
    assert cli(["lic-rag", "shard-review", "apply", "--shards", out["shards.jsonl"], "--questions",
                str(tmp_path / "q.jsonl"), str(tmp_path / "reserve.jsonl"), "--out", out["final.jsonl"]]) == 0
    df = dataset_table({"d": {"questions": str(tmp_path / "q.jsonl"), "shards": out["final.jsonl"],
                              "corpus": str(tmp_path / "corpus.jsonl")}})
    assert df.iloc[0].questions == 2 and df.iloc[0].in_grid == 2 and df.iloc[0].failed_checks == 1
