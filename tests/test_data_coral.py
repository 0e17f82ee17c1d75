"""CORAL loader (convrag.data.coral): every record of the real v2 test-split sample in
../shared/data/coral (counts computed here from the raw files, independently of the loader), one
hand-checked turn, line numbers, the streaming reader, malformed input (small files written in
tmp_path) and the registered ``coral`` benchmark loader. The release ships no passage corpus
sample: the corpus tests use small corpora this test writes itself."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

import convrag.data.coral as coral
from convrag.data.benchmarks import benchmark_loader
from convrag.data.coral import (
    check_citations,
    cited_ids,
    flow_of,
    iter_conversations,
    iter_passages,
    load_coral,
    load_passages,
    read_coral_qrels,
    read_rewrites,
    strip_citations,
)
from convrag.errors import ConfigError, DataError
from convrag.records import Passage, TurnTask

CONV = "new_test_conversation.sample.json"
QRELS = "new_test_qrel.sample.trec"
REWRITES = "test_rewrite_new.sample.jsonl"
MARKER = re.compile(r"\[([0-9]+)\]")  # the test's own citation pattern


@pytest.fixture
def sample(shared_data) -> Path:
    return shared_data / "coral" / "test"


def _raw(sample: Path):
    convs = json.loads((sample / CONV).read_text(encoding="utf-8"))
    qrels = [line.split("\t") for line in (sample / QRELS).read_text(encoding="utf-8").splitlines() if line.strip()]
    rewrites = [json.loads(line) for line in (sample / REWRITES).read_text(encoding="utf-8").splitlines() if line]
    return convs, qrels, rewrites


def _load(sample: Path, **kw):
    return load_coral(sample / CONV, qrels=sample / QRELS, rewrites=sample / REWRITES, **kw)


def _write_convs(path: Path, convs: list) -> str:
    """Write conversations as the release does (``json.dump(list, indent=4)``); return the text."""
    text = json.dumps(convs, indent=4)
    path.write_text(text, encoding="utf-8")
    return text


def _line_of_turn(text: str, conv_id: str, turn: int) -> int:
    """The line where turn ``turn`` of ``conv_id`` opens ('{'), found in the text independently."""
    at = text.index(f'"conv_id": "{conv_id}"')
    at = text.index(f'"turn_id": {turn},', at)
    return text.count("\n", 0, at)  # the '{' is on the line above "turn_id"


def _synthetic_convs() -> list[dict]:
    return [
        {"conv_id": "Test_a_1", "turns": [
            {"turn_id": 1, "question": "Who is X?", "response": " x is a thing.[3]", "golden_docs_pids": [3]},
            {"turn_id": 2, "question": "And then?", "response": " then y happened.", "golden_docs_pids": []},
        ]},
        {"conv_id": "Test_d_7", "turns": [
            {"turn_id": 1, "question": "What is Z?", "response": " z.[4][5] more [4].", "golden_docs_pids": [4, 5]},
        ]},
    ]


def _corpus(path: Path, ids, extra: int = 3) -> Path:
    """A corpus in the format third-party readers assume (JSONL ref_id / ref_string), written here."""
    with open(path, "w", encoding="utf-8") as fh:
        for i in [*ids, *range(900001, 900001 + extra)]:
            fh.write(json.dumps({"ref_id": int(i), "ref_string": f"synthetic passage {i}"}) + "\n")
    return path


# ---- every record of the real sample ----------------------------------------------------------


@pytest.mark.realdata
def test_every_record_of_the_sample(sample):
    convs, qrels, rewrites = _raw(sample)
    tasks, report = _load(sample)
    raw_turns = [(c["conv_id"], t) for c in convs for t in c["turns"]]
    assert len(tasks) == len(raw_turns) == report["tasks"] == report["turns"] == 35
    assert report["conversations"] == len(convs) == 8
    assert [t.task_id for t in tasks] == [f"{c}_{t['turn_id']}" for c, t in raw_turns]
    assert report["qrels_rows"] == len(qrels) == 34
    assert report["rewrite_lines"] == report["rewrites"] == len(rewrites) == 35
    assert report["turns_without_rewrite"] == 0
    with_gold = sum(bool(t["golden_docs_pids"]) for _, t in raw_turns)
    assert report["turns_with_gold"] == with_gold == 19
    assert report["turns_without_gold"] == len(raw_turns) - with_gold
    assert report["gold_passages"] == sum(len(t["golden_docs_pids"]) for _, t in raw_turns)
    assert report["distinct_gold_passages"] == len({p for _, t in raw_turns for p in t["golden_docs_pids"]})
    assert report["qrels_turns"] == len({q[0] for q in qrels})
    assert report["citations"] == sum(len(MARKER.findall(t["response"])) for _, t in raw_turns) == 38
    assert report["turns_with_citations"] == sum(bool(MARKER.search(t["response"])) for _, t in raw_turns)
    letters = Counter(c["conv_id"].split("_")[1] for c in convs)
    assert report["conversations_by_flow"] == {"LDS": letters["a"], "SIDS": letters["b"]} == {"LDS": 6, "SIDS": 2}
    assert report["turns_by_flow"] == {"LDS": 19, "SIDS": 16}
    assert report["qrels_mismatches"] == report["unknown_qrels_ids"] == report["unknown_rewrite_ids"] == 0
    assert report["gold_not_cited"] == report["citations_not_gold"] == report["duplicate_gold_pids"] == 0
    assert report["ignored_fields"] == {} and report["empty_responses"] == 0
    # per record, against the raw files
    raw_qrels: dict[str, dict[str, int]] = {}
    for qid, _, pid, rel in qrels:
        raw_qrels.setdefault(qid, {})[pid] = int(rel)
    raw_rw = {r["sample_id"]: r["rewrite"] for r in rewrites}
    for task, (cid, t) in zip(tasks, raw_turns):
        assert task.benchmark == "coral" and task.conversation_id == cid and task.turn == t["turn_id"]
        assert task.question == t["question"]
        assert task.reference_answers == [MARKER.sub("", t["response"]).strip()]
        assert task.labels["reference_with_citations"] == t["response"].strip()
        assert task.gold_docs == raw_qrels.get(task.task_id, {}) == {str(p): 1 for p in t["golden_docs_pids"]}
        assert task.rewrite == raw_rw[task.task_id].strip()
        assert task.labels["cited_passages"] == list(dict.fromkeys(MARKER.findall(t["response"])))
        assert len(task.history) == 2 * (t["turn_id"] - 1)
        assert task.labels["domain"] == "coral" and task.labels["split"] == "test"
        assert task.contexts == []  # no corpus given
        again = TurnTask.from_dict(json.loads(json.dumps(task.to_dict())))
        assert again == task


@pytest.mark.realdata
def test_hand_checked_turn(sample):
    """Test_a_2 turn 3 (lines 42-49 of the sample), compared with the raw JSON and by hand."""
    convs, _, rewrites = _raw(sample)
    raw = next(c for c in convs if c["conv_id"] == "Test_a_2")["turns"]
    tasks, _ = _load(sample)
    t = next(x for x in tasks if x.task_id == "Test_a_2_3")
    assert len(t.history) == 4
    assert [h["role"] for h in t.history] == ["user", "assistant", "user", "assistant"]
    assert t.history[0]["text"] == raw[0]["question"]
    assert raw[0]["question"] == "Who is David Faupala and which football club does he currently play for?"
    assert t.history[3]["text"] == raw[1]["response"].strip()[: -len("[5]")]  # the marker at its end removed
    assert t.history[3]["text"].endswith("scoring the equalising goal for city in the 37th minute.")
    assert t.question == raw[2]["question"] == "What happened during his loan to NAC Breda?"
    assert t.reference_answers[0].startswith("on 10 august 2016, faupala was loaned to nac breda for the "
                                             "2016\u201317 season.   he made")
    assert t.reference_answers[0].endswith("with faupala having played 4 games.")
    assert "[6]" in t.labels["reference_with_citations"] and "[8]" in t.labels["reference_with_citations"]
    assert t.labels["reference_with_citations"] == raw[2]["response"][1:]
    assert raw[2]["golden_docs_pids"] == [6, 8] and t.gold_docs == {"6": 1, "8": 1}
    assert t.rewrite == ("What details can you provide about David Faupala's loan to NAC Breda during his club career "
                         "at Manchester City?")
    assert " " + t.rewrite == next(r["rewrite"] for r in rewrites if r["sample_id"] == "Test_a_2_3")
    assert t.labels["flow"] == "LDS" and t.labels["flow_code"] == "a" and t.labels["n_turns"] == 3
    assert t.labels["cited_passages"] == ["6", "8"] and t.labels["n_citations"] == 2


@pytest.mark.realdata
def test_line_numbers_and_chunked_streaming(sample, monkeypatch):
    text = (sample / CONV).read_text(encoding="utf-8")
    lines = text.split("\n")
    expect = []
    for i, ln in enumerate(lines, start=1):
        if ln.strip().startswith('"conv_id"'):
            expect.append((i - 1, ln.split('"')[3], []))
        elif ln.strip().startswith('"turn_id"'):
            expect[-1][2].append(i - 1)
    got = [(line, c["conv_id"], tl) for line, c, tl in iter_conversations(sample / CONV)]
    assert got == expect and got[1][2] == [28, 34, 42]
    whole, _ = _load(sample)
    for chunk in (1, 7, 64, 4096):  # elements split across reads at every position
        monkeypatch.setattr(coral, "_CHUNK", chunk)
        assert [(line, c["conv_id"], tl) for line, c, tl in iter_conversations(sample / CONV)] == expect
        again, _ = _load(sample)
        assert again == whole


@pytest.mark.realdata
def test_jsonl_conversations_read_the_same(sample, tmp_path):
    convs, _, _ = _raw(sample)
    p = tmp_path / "conv.jsonl"
    p.write_text("".join(json.dumps(c) + "\n" for c in convs), encoding="utf-8")
    a, _ = load_coral(p, qrels=sample / QRELS, rewrites=sample / REWRITES)
    b, _ = _load(sample)
    assert a == b


@pytest.mark.realdata
def test_contexts_from_a_corpus(sample, tmp_path):
    convs, _, _ = _raw(sample)
    gold = sorted({p for c in convs for t in c["turns"] for p in t["golden_docs_pids"]})
    corpus = _corpus(tmp_path / "passage_corpus.json", gold)
    tasks, report = _load(sample, corpus=corpus)
    assert report["corpus_passages"] == len(gold) + 3 and report["gold_missing_from_corpus"] == 0
    assert report["contexts"] == sum(len(t["golden_docs_pids"]) for c in convs for t in c["turns"])
    t = next(x for x in tasks if x.task_id == "Test_a_6_3")
    assert [c["doc_id"] for c in t.contexts] == ["30", "25", "28"]  # golden_docs_pids order
    assert t.contexts[0] == {"doc_id": "30", "title": "", "text": "synthetic passage 30"}
    # a golden passage missing from the corpus
    _corpus(tmp_path / "short.json", [p for p in gold if p != 22])
    with pytest.raises(DataError, match=r"conversation 'Test_a_5', turn 3: field 'golden_docs_pids': passage '22' is "
                                        r"not in the corpus"):
        _load(sample, corpus=tmp_path / "short.json")
    _, rep = _load(sample, corpus=tmp_path / "short.json", strict=False)
    assert rep["gold_missing_from_corpus"] == 1 and rep["cited_missing_from_corpus"] == 1


# ---- citations, ids ---------------------------------------------------------------------------


def test_citation_helpers():
    text = " a [12] b.[3][12] [citation needed] c"
    assert cited_ids(text) == ["12", "3", "12"]
    assert strip_citations(text) == " a  b. [citation needed] c"
    assert check_citations(text, {"3", "12"}, "f.json:9: conversation 'X', turn 2") == ["12", "3", "12"]
    with pytest.raises(DataError, match=r"^f\.json:9: conversation 'X', turn 2: field 'response' cites passage \[3\], "
                                        r"which is not a known passage id$"):
        check_citations(text, {"12"}, "f.json:9: conversation 'X', turn 2")
    assert flow_of("Test_a_2") == ("test", "a", "LDS")
    assert flow_of("Train_d_1700") == ("train", "d", "DTRW")
    assert flow_of("Test_c_5")[2] == "STRW" and flow_of("Test_b_5")[2] == "SIDS"
    assert flow_of("something") == (None, None, None)


def test_synthetic_conversations_and_counts(tmp_path):
    p = tmp_path / "conv.json"
    _write_convs(p, _synthetic_convs())
    tasks, report = load_coral(p)
    assert [t.task_id for t in tasks] == ["Test_a_1_1", "Test_a_1_2", "Test_d_7_1"]
    assert tasks[1].gold_docs == {} and tasks[1].labels["has_gold"] is False  # no golden passages: not an error
    assert report["turns_without_gold"] == 1 and report["turns_with_gold"] == 2
    assert tasks[1].history == [{"role": "user", "text": "Who is X?"}, {"role": "assistant", "text": "x is a thing."}]
    assert tasks[2].labels["flow"] == "DTRW" and tasks[2].labels["cited_passages"] == ["4", "5"]
    assert tasks[2].reference_answers == ["z. more ."] and report["citations"] == 4
    assert all(t.rewrite is None for t in tasks) and report["turns_without_rewrite"] == 3


def test_v1_turns_with_rewrite_and_passage_texts(tmp_path):
    convs = _synthetic_convs()
    convs[1]["turns"][0].update(golden_rewrite=" What is Z, really?", golden_docs_text=["text four", "text five"])
    convs[0]["extra"] = 1
    p = tmp_path / "conv.json"
    _write_convs(p, convs)
    tasks, report = load_coral(p)
    assert tasks[2].rewrite == "What is Z, really?" and report["rewrites_from_conversations"] == 1
    assert tasks[2].contexts == [{"doc_id": "4", "title": "", "text": "text four"},
                                 {"doc_id": "5", "title": "", "text": "text five"}]
    assert report["ignored_fields"] == {"extra": 1}
    convs[1]["turns"][0]["golden_docs_text"] = ["only one"]
    _write_convs(p, convs)
    with pytest.raises(DataError, match=r"conversation 'Test_d_7', turn 1: field 'golden_docs_text'"):
        load_coral(p)


# ---- malformed input: file, line and field named -----------------------------------------------


def test_conversation_file_that_is_not_json(tmp_path):
    p = tmp_path / "conv.json"
    text = _write_convs(p, _synthetic_convs())
    bad = text.replace('"question": "And then?"', '"question": And then?', 1)
    p.write_text(bad, encoding="utf-8")
    line = bad[: bad.index("And then?")].count("\n") + 1
    col = len(bad[: bad.index("And then?")].rsplit("\n", 1)[-1]) + 1
    with pytest.raises(DataError, match=rf"^{re.escape(str(p))}:{line}: invalid JSON \(Expecting value: "
                                        rf"line {line} column {col}\)"):
        load_coral(p)
    p.write_text(text[:-40], encoding="utf-8")  # cut short
    with pytest.raises(DataError, match=rf"^{re.escape(str(p))}:\d+: invalid JSON"):
        load_coral(p)
    p.write_text(text + "\n[]\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{re.escape(str(p))}:{text.count(chr(10)) + 2}: invalid JSON \(extra data"):
        load_coral(p)
    p.write_text('{"conv_id": "Test_a_1", "turns": []}\nnot json\n', encoding="utf-8")  # JSON Lines
    with pytest.raises(DataError, match=rf"^{re.escape(str(p))}:1: conversation 'Test_a_1': field 'turns' must be"):
        load_coral(p)
    p.write_text(json.dumps(_synthetic_convs()[0]) + "\nnot json\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{re.escape(str(p))}:2: malformed JSON line"):
        load_coral(p)
    with pytest.raises(DataError, match="file not found"):
        load_coral(tmp_path / "absent.json")


def test_missing_question(tmp_path):
    convs = _synthetic_convs()
    del convs[0]["turns"][1]["question"]
    p = tmp_path / "conv.json"
    text = _write_convs(p, convs)
    line = _line_of_turn(text, "Test_a_1", 2)
    with pytest.raises(DataError, match=rf"^{re.escape(str(p))}:{line}: conversation 'Test_a_1', turn 2: field "
                                        r"'question' is missing$"):
        load_coral(p)
    convs[0]["turns"][1]["question"] = "  "
    text = _write_convs(p, convs)
    with pytest.raises(DataError, match=rf":{_line_of_turn(text, 'Test_a_1', 2)}: conversation 'Test_a_1', turn 2: "
                                        r"field 'question' must be a non-empty string"):
        load_coral(p)


def test_other_malformed_turns(tmp_path):
    p = tmp_path / "conv.json"
    cases = [
        (lambda c: c[0]["turns"][1].pop("response"), "field 'response' is missing"),
        (lambda c: c[0]["turns"][1].pop("golden_docs_pids"), "field 'golden_docs_pids' is missing"),
        (lambda c: c[0]["turns"][1].update(golden_docs_pids=["x", -1]),
         "field 'golden_docs_pids[1]' must be a passage"),
        (lambda c: c[0]["turns"][1].update(turn_id=3), "field 'turn_id' is 3, expected 2"),
        (lambda c: c[0]["turns"][1].update(turn_id=1), "field 'turn_id' is 1, expected 2"),
        (lambda c: c[0]["turns"][1].update(turn_id=True), "field 'turn_id' is True"),
    ]
    for change, msg in cases:
        convs = _synthetic_convs()
        change(convs)
        text = _write_convs(p, convs)
        at = text.index('"question": "And then?"') if "And then?" in text else text.index('"turn_id": 3')
        line = text.count("\n", 0, text.rindex("{", 0, at)) + 1
        with pytest.raises(DataError, match=rf"^{re.escape(str(p))}:{line}: conversation 'Test_a_1', turn 2: "
                                            + re.escape(msg)):
            load_coral(p)
    convs = _synthetic_convs()
    del convs[1]["conv_id"]
    text = _write_convs(p, convs)
    second = text.rindex("{", 0, text.rindex('"turns"'))  # the '{' of the second conversation
    with pytest.raises(DataError, match=rf"^{re.escape(str(p))}:{text.count(chr(10), 0, second) + 1}: conversation 1: "
                                        r"field 'conv_id' is missing"):
        load_coral(p)


def test_unknown_cited_passage(tmp_path):
    convs = _synthetic_convs()
    convs[0]["turns"][1]["response"] = " then y happened.[99]"
    p = tmp_path / "conv.json"
    text = _write_convs(p, convs)
    line = _line_of_turn(text, "Test_a_1", 2)
    with pytest.raises(DataError, match=rf"^{re.escape(str(p))}:{line}: conversation 'Test_a_1', turn 2: field "
                                        r"'response' cites passage \[99\], which is not among the turn's "
                                        r"golden_docs_pids \[\]$"):
        load_coral(p)
    tasks, report = load_coral(p, strict=False)
    assert report["citations_not_gold"] == 1 and tasks[1].labels["cited_passages"] == ["99"]
    # cited and golden, but not in the corpus
    convs[0]["turns"][1]["golden_docs_pids"] = [99]
    _write_convs(p, convs)
    corpus = _corpus(tmp_path / "c.jsonl", [3, 4, 5])
    with pytest.raises(DataError, match=rf":{line}: conversation 'Test_a_1', turn 2: field 'golden_docs_pids': "
                                        r"passage '99' is not in the corpus"):
        load_coral(p, corpus=corpus)


def test_duplicate_ids(tmp_path):
    convs = _synthetic_convs()
    convs[1]["conv_id"] = "Test_a_1"
    p = tmp_path / "conv.json"
    text = _write_convs(p, convs)
    second = text.count("\n", 0, text.rindex('"conv_id"'))  # the '{' of the second conversation
    with pytest.raises(DataError, match=rf"^{re.escape(str(p))}:{second}: conversation 'Test_a_1': field 'conv_id': "
                                        r"duplicate conversation id 'Test_a_1' \(first on line 2\)$"):
        load_coral(p)
    # a rewrite given twice
    _write_convs(p, _synthetic_convs())
    rw = tmp_path / "rw.jsonl"
    rw.write_text('{"sample_id": "Test_a_1_1", "rewrite": " a"}\n\n{"sample_id": "Test_a_1_1", "rewrite": " b"}\n')
    with pytest.raises(DataError, match=rf"^{re.escape(str(rw))}:3: field 'sample_id': duplicate rewrite of "
                                        r"'Test_a_1_1' \(first on line 1\)$"):
        load_coral(p, rewrites=rw)
    # a qrels row given twice
    q = tmp_path / "q.trec"
    q.write_text("Test_a_1_1\t0\t3\t1\nTest_d_7_1\t0\t4\t1\nTest_a_1_1\t0\t3\t1\n")
    with pytest.raises(DataError, match=rf"^{re.escape(str(q))}:3: field 'pid': duplicate qrels row for 'Test_a_1_1' "
                                        r"and passage '3' \(first on line 1\)$"):
        load_coral(p, qrels=q)
    # a passage id given twice
    c = tmp_path / "c.jsonl"
    c.write_text("".join(json.dumps({"ref_id": i, "ref_string": t}) + "\n" for i, t in [(3, "a"), (4, "b"), (3, "c")]))
    with pytest.raises(DataError, match=rf"^{re.escape(str(c))}:3: field 'ref_id': duplicate passage id '3' \(first on "
                                        r"line 1\)$"):
        load_passages(c)


def test_malformed_rewrites_qrels_and_corpus(tmp_path):
    p = tmp_path / "conv.json"
    _write_convs(p, _synthetic_convs())
    rw = tmp_path / "rw.jsonl"
    rw.write_text('{"sample_id": "Test_a_1_1", "rewrite": " a"}\n{"sample_id": "Test_a_1_2", "rewrite": \n')
    with pytest.raises(DataError, match=rf"^{re.escape(str(rw))}:2: malformed JSON line"):
        read_rewrites(rw)
    rw.write_text('{"sample_id": "Test_a_1_1"}\n')
    with pytest.raises(DataError, match=rf"^{re.escape(str(rw))}:1: field 'rewrite' is missing"):
        read_rewrites(rw)
    rw.write_text('{"sample_id": "Test_a_1_1", "rewrite": "a"}\n{"sample_id": "Test_z_1_1", "rewrite": "b"}\n')
    with pytest.raises(DataError, match=rf"^{re.escape(str(rw))}:2: field 'sample_id' 'Test_z_1_1' is not a turn of"):
        load_coral(p, rewrites=rw)
    assert load_coral(p, rewrites=rw, strict=False)[1]["unknown_rewrite_ids"] == 1
    q = tmp_path / "q.trec"
    q.write_text("Test_a_1_1 0 3 1 x\n")
    with pytest.raises(DataError, match=rf"^{re.escape(str(q))}:1: expected 'qid iter pid rel' \(TREC\)"):
        read_coral_qrels(q)
    q.write_text("Test_a_1_1 3 1\n")  # three columns without a header: query-id corpus-id score
    assert read_coral_qrels(q) == ({"Test_a_1_1": {"3": 1}}, {"Test_a_1_1": 1}, 1, {("Test_a_1_1", "3"): 1})
    q.write_text("Test_a_1_1\t0\t3\tyes\n")
    with pytest.raises(DataError, match=rf"^{re.escape(str(q))}:1: field 'rel': relevance 'yes' is not an integer"):
        read_coral_qrels(q)
    q.write_text("Test_a_1_1\t0\t3\t1\nTest_a_9_1\t0\t4\t1\nTest_d_7_1\t0\t4\t1\nTest_d_7_1\t0\t5\t1\n")
    with pytest.raises(DataError, match=rf"^{re.escape(str(q))}:2: field 'qid' 'Test_a_9_1' is not a turn of"):
        load_coral(p, qrels=q)
    q.write_text("Test_a_1_1\t0\t3\t1\nTest_d_7_1\t0\t4\t2\n")  # turn Test_d_7_1 also has passage 5
    with pytest.raises(DataError, match=r"conversation 'Test_d_7', turn 1: field 'golden_docs_pids' \['4', '5'\] "
                                        rf"differs from the qrels of 'Test_d_7_1' in {re.escape(str(q))}:2: \['4'\]"):
        load_coral(p, qrels=q)
    tasks, rep = load_coral(p, qrels=q, strict=False)  # the qrels win, graded as given
    assert rep["qrels_mismatches"] == 1 and tasks[2].gold_docs == {"4": 2}
    q.write_text("query-id\tcorpus-id\tscore\nTest_a_1_1\t3\t1\nTest_d_7_1\t4\t1\nTest_d_7_1\t5\t1\n")  # BEIR
    assert read_coral_qrels(q)[0] == {"Test_a_1_1": {"3": 1}, "Test_d_7_1": {"4": 1, "5": 1}}
    assert load_coral(p, qrels=q)[1]["qrels_rows"] == 3
    c = tmp_path / "c.jsonl"
    c.write_text('{"ref_id": 3, "ref_string": "a"}\n{"ref_id": 4, "ref_string": "b"\n')
    with pytest.raises(DataError, match=rf"^{re.escape(str(c))}:2: malformed JSON line"):
        load_passages(c)
    c.write_text('{"ref_id": 3, "ref_string": "a"}\n{"ref_string": "b"}\n')
    with pytest.raises(DataError, match=rf"^{re.escape(str(c))}:2: field 'ref_id' is missing"):
        load_passages(c)
    c.write_text('{"ref_id": 3, "title": "T"}\n')
    with pytest.raises(DataError, match=rf"^{re.escape(str(c))}:1: field 'ref_string' is missing \(passage '3'"):
        load_passages(c)
    c.write_text('{"ref_id": 3, "ref_string": 7}\n')
    with pytest.raises(DataError, match=rf"^{re.escape(str(c))}:1: field 'ref_string' must be a string"):
        load_passages(c)


def test_passage_corpus_formats_stream(tmp_path, monkeypatch):
    rows = [{"ref_id": 1, "ref_string": "one"}, {"ref_id": 20, "ref_string": "twenty", "title": "T", "x": 0}]
    a = tmp_path / "a.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in rows))
    b = tmp_path / "b.json"
    b.write_text(json.dumps(rows, indent=2))
    c = tmp_path / "c.jsonl"
    c.write_text(json.dumps({"pid": "1", "text": "one"}) + "\n" + json.dumps({"_id": 20, "contents": "twenty",
                                                                           "title": "T"}) + "\n")
    want = [Passage("1", "", "one", "coral"), Passage("20", "T", "twenty", "coral")]
    monkeypatch.setattr(coral, "_CHUNK", 5)
    for path in (a, b, c):
        assert load_passages(path) == want
    stats: Counter = Counter()
    it = iter_passages(a, stats=stats)
    assert next(it) == want[0] and stats["passages"] == 1  # a generator: one record at a time
    assert list(it) == want[1:] and stats["ignored:x"] == 1 and stats["titles"] == 1
    b.write_text('[{"ref_id": 1, "ref_string": "one"},\n {"ref_id": 2 "ref_string": "two"}]')
    with pytest.raises(DataError, match=rf"^{re.escape(str(b))}:2: invalid JSON \(Expecting ',' delimiter: "
                                        r"line 2 column 15\)"):
        load_passages(b)


# ---- the registered loader ---------------------------------------------------------------------


@pytest.mark.realdata
def test_registered_loader_reads_the_sample(sample, tmp_path):
    loader = benchmark_loader("coral")
    assert isinstance(loader, coral.Coral)
    convs, _, _ = _raw(sample)
    gold = sorted({p for c in convs for t in c["turns"] for p in t["golden_docs_pids"]})
    corpus = _corpus(tmp_path / "passage_corpus.json", gold, extra=5)
    files = {"conversations.json": sample / CONV, "qrels.trec": sample / QRELS, "rewrites.jsonl": sample / REWRITES,
             "passage_corpus.json": corpus}
    spec = {"kind": "coral", "files": {n: {"local": str(p)} for n, p in files.items()}}
    loader.check("coral_sample", spec, "cfg.yaml")  # no revision needed: every file is local
    assert loader.domains(spec) == ["coral"]
    assert loader.raw_files(spec) == {n: {"local": str(p)} for n, p in files.items()}
    assert loader.task_inputs(spec) == ["conversations.json", "qrels.trec", "rewrites.jsonl", "passage_corpus.json"]
    assert loader.corpus_inputs(spec, "coral") == ["passage_corpus.json"]
    tasks, report = loader.tasks("coral_sample", spec, files)
    assert len(tasks) == report["tasks"] == 35 and {t.benchmark for t in tasks} == {"coral_sample"}
    assert report["contexts"] == 34 and report["corpus_passages"] == len(gold) + 5
    assert all(len(t.contexts) == len(t.gold_docs) for t in tasks)
    passages = loader.corpus("coral_sample", spec, "coral", files)
    assert len(passages) == len(gold) + 5 and {p.source for p in passages} == {"coral"}
    ids = {p.doc_id for p in passages}
    assert all(d in ids for t in tasks for d in t.gold_docs)
    # contexts: none -> the corpus is not a task input
    spec_none = {**spec, "contexts": "none"}
    loader.check("coral_sample", spec_none, "cfg.yaml")
    assert "passage_corpus.json" not in loader.task_inputs(spec_none)
    tasks2, _ = loader.tasks("coral_sample", spec_none, {k: v for k, v in files.items() if k != "passage_corpus.json"})
    assert [t.task_id for t in tasks2] == [t.task_id for t in tasks] and all(not t.contexts for t in tasks2)


def test_registered_loader_config():
    loader = benchmark_loader("coral")
    with pytest.raises(ConfigError, match=r"'benchmarks\.c\.revision': required"):
        loader.check("c", {"kind": "coral"}, "cfg.yaml")
    spec = {"kind": "coral", "revision": "abc123"}
    loader.check("c", spec, "cfg.yaml")
    urls = loader.raw_files(spec)
    base = "https://huggingface.co/datasets/ariya2357/CORAL/resolve/abc123"
    assert urls == {"conversations.json": {"url": f"{base}/test/new_test_conversation.json", "sha256": None},
                    "qrels.trec": {"url": f"{base}/test/new_test_qrel.trec", "sha256": None},
                    "rewrites.jsonl": {"url": f"{base}/test/test_rewrite_new.jsonl", "sha256": None},
                    "passage_corpus.json": {"url": f"{base}/passage_corpus.json", "sha256": None}}
    v1 = loader.raw_files({**spec, "release": "v1", "split": "train"})
    assert v1["conversations.json"]["url"] == f"{base}/train/train_conversation.json"
    assert v1["qrels.tsv"]["url"] == f"{base}/train/train_qrel.tsv" and "rewrites.jsonl" not in v1
    for bad, key in [({"nope": 1}, "nope"), ({"release": "v3"}, "release"), ({"split": "dev"}, "split"),
                     ({"strict": "yes"}, "strict"), ({"contexts": "all"}, "contexts"),
                     ({"domains": ["a", "b"]}, "domains"), ({"files": {"x.json": {"local": "x"}}}, r"files\.x\.json"),
                     ({"files": {"qrels.trec": "q.trec"}}, r"files\.qrels\.trec")]:
        with pytest.raises(ConfigError, match=rf"'benchmarks\.c\.{key}'"):
            loader.check("c", {**spec, **bad}, "cfg.yaml")
    with pytest.raises(DataError, match="raw file 'conversations.json' not given"):
        loader.tasks("c", spec, {})
