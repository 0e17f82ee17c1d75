"""The QReCC loader (convrag.data.qrecc, benchmark kind ``qrecc``) on a sample each test writes
in the release's own format: ``qrecc_data.zip`` holding ``qrecc_train.json`` / ``qrecc_test.json``,
JSON arrays of turn objects as apple/ml-qrecc's README documents them (pretty-printed, so every
turn object starts on a line of its own)."""

import json
import zipfile

import pytest

from convrag.data.benchmarks import benchmark_loader, corpus_id
from convrag.data.qrecc import DOMAIN, REPO, REPO_PATH, ZIP, load_qrecc, read_turns
from convrag.errors import ConfigError, DataError

Q1, A1 = "What are the pros and cons of electric cars?", "Some pros are: they are quiet. Some cons are: short ranges."
Q2, A2 = "Tell me more about Tesla", "Tesla Inc. is an American automotive and energy company."


def turn(conv, k, question, answer, context, rewrite=None, source="trec", url="https://en.wikipedia.org/wiki/X"):
    return {"Context": context, "Question": question, "Rewrite": question if rewrite is None else rewrite,
            "Answer": answer, "Answer_URL": url, "Conversation_no": conv, "Turn_no": k,
            "Conversation_source": source}


TRAIN = [
    turn(74, 1, Q1, A1, []),
    turn(74, 2, Q2, A2, [Q1, A1], rewrite="Tell me more about Tesla the car company."),
    turn(74, 3, "Who founded it?", "", [Q1, A1, Q2, A2], rewrite="Who founded Tesla Inc.?"),   # unanswered (QuAC-style)
    turn(5, 1, "Where is Kyiv?", "Kyiv is the capital of Ukraine.", [], source="nq"),
    turn(5, 2, "How old is it?", "It was founded in the 5th century.", ["Where is Kyiv?", "Kyiv is in Ukraine."],
         rewrite="", source="nq"),                                                             # no rewrite; context differs
]
TEST = [turn(900, 1, "What is QReCC?", "A conversational QA dataset.", [], source="quac")]


def write_release(path, train=TRAIN, test=TEST, folder=""):
    """The release zip: the two splits as pretty-printed JSON arrays (``folder``: inside a subfolder)."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{folder}qrecc_train.json", json.dumps(train, indent=4))
        zf.writestr(f"{folder}qrecc_test.json", json.dumps(test, indent=4))
    return path


def test_turns_become_tasks_with_history_rewrite_answer_and_gold(tmp_path):
    tasks, passages, report = load_qrecc(write_release(tmp_path / ZIP), split="train", benchmark="qrecc_train")
    by = {t.task_id: t for t in tasks}
    assert [t.task_id for t in tasks] == ["5_1", "5_2", "74_1", "74_2", "74_3"]  # conversations in order, turns in order
    t = by["74_2"]
    assert t.benchmark == "qrecc_train" and t.conversation_id == "74" and t.turn == 2
    assert t.history == [{"role": "user", "text": Q1}, {"role": "assistant", "text": A1}]
    assert t.question == Q2 and t.rewrite == "Tell me more about Tesla the car company."
    assert t.reference_answers == [A2] and t.gold_docs == {"74_2": 1}
    assert t.labels == {"domain": "qrecc", "split": "train", "source": "trec", "answer_url": "https://en.wikipedia.org/wiki/X",
                        "turn": 2, "first_turn": False, "n_turns": 3}
    assert len(by["74_3"].history) == 4 and by["74_3"].reference_answers == [] and by["74_3"].gold_docs == {}
    assert by["5_2"].rewrite is None and by["5_1"].labels["first_turn"] and by["5_1"].labels["n_turns"] == 2
    # one passage per answered turn: the answer, under the task's id (the positives of Conv-ANCE)
    assert [(p.doc_id, p.text, p.title, p.source) for p in passages] == [
        ("5_1", "Kyiv is the capital of Ukraine.", "", DOMAIN), ("5_2", "It was founded in the 5th century.", "", DOMAIN),
        ("74_1", A1, "", DOMAIN), ("74_2", A2, "", DOMAIN)]
    assert report["tasks"] == 5 and report["conversations"] == 2 and report["tasks_with_gold"] == 4
    assert report["unanswered"] == 1 and report["without_rewrite"] == 1 and report["turn_gaps"] == 0
    # turn 5_2's context says "Kyiv is in Ukraine." where turn 5_1 answered otherwise: counted, kept
    assert report["context_differs_from_earlier_turns"] == 1 and report["context_length_mismatch"] == 0
    assert report["sources"] == {"nq": 2, "trec": 3} and report["positives"] == "answer"
    assert report["file"].endswith(f"{ZIP}[qrecc_train.json]")


def test_the_test_split_and_a_member_in_a_subfolder(tmp_path):
    tasks, passages, report = load_qrecc(write_release(tmp_path / ZIP, folder="qrecc_data/"), split="test",
                                         benchmark="qrecc_test")
    assert [(t.task_id, t.labels["source"], t.labels["split"]) for t in tasks] == [("900_1", "quac", "test")]
    assert report["file"].endswith("[qrecc_data/qrecc_test.json]") and len(passages) == 1


def test_gaps_and_short_contexts_are_counted(tmp_path):
    rows = [turn(1, 1, "a?", "x", []), turn(1, 3, "c?", "z", ["a?", "x"])]  # turn 2 missing, context of one turn
    _, _, report = load_qrecc(write_release(tmp_path / ZIP, train=rows), split="train", benchmark="q")
    assert report["turn_gaps"] == 1 and report["context_length_mismatch"] == 1


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.pop("Rewrite"), "turn object 1: field 'Rewrite' is missing"),
    (lambda r: r.update(Turn_no="2"), "field 'Turn_no' must be an integer, got '2'"),
    (lambda r: r.update(Conversation_no=True), "field 'Conversation_no' must be an integer"),
    (lambda r: r.update(Context=[Q1, 3]), "field 'Context[1]' must be a string"),
    (lambda r: r.update(Question="  "), "field 'Question' is empty"),
    (lambda r: r.update(Turn_no=0), "field 'Turn_no' is 0, turns are numbered from 1"),
    (lambda r: r.update(Turn_no=1), "Conversation_no 74 Turn_no 1 repeats the turn on line 2"),
])
def test_a_malformed_turn_names_the_file_member_line_and_field(tmp_path, edit, message):
    rows = [dict(r) for r in TRAIN]
    edit(rows[1])
    path = write_release(tmp_path / ZIP, train=rows)
    with pytest.raises(DataError) as e:
        read_turns(path, "train")
    # the second object starts on line 12 of the pretty-printed array (10 lines per object)
    assert f"{path}[qrecc_train.json]:12: turn object 1" in str(e.value) and message in str(e.value)


def test_broken_files_say_what_is_wrong(tmp_path):
    with pytest.raises(DataError, match="not a zip file"):
        (tmp_path / "bad.zip").write_text("no zip")
        read_turns(tmp_path / "bad.zip", "train")
    with zipfile.ZipFile(tmp_path / "empty.zip", "w") as zf:
        zf.writestr("README", "x")
    with pytest.raises(DataError, match="must hold exactly one qrecc_train.json, found 0"):
        read_turns(tmp_path / "empty.zip", "train")
    with zipfile.ZipFile(tmp_path / "cut.zip", "w") as zf:
        zf.writestr("qrecc_train.json", json.dumps(TRAIN, indent=4)[:-40])
    with pytest.raises(DataError, match=r"cut.zip\[qrecc_train.json\]:\d+: invalid JSON"):
        read_turns(tmp_path / "cut.zip", "train")
    with zipfile.ZipFile(tmp_path / "obj.zip", "w") as zf:
        zf.writestr("qrecc_train.json", json.dumps({"Context": []}))
    with pytest.raises(DataError, match="expected a JSON array of turn objects"):
        read_turns(tmp_path / "obj.zip", "train")
    with zipfile.ZipFile(tmp_path / "latin.zip", "w") as zf:
        zf.writestr("qrecc_train.json", b'[\n{"Question": "caf\xe9"}]')
    with pytest.raises(DataError, match=r"latin.zip\[qrecc_train.json\]:2: not UTF-8 text at byte offset 19"):
        read_turns(tmp_path / "latin.zip", "train")


def test_the_loader_is_a_benchmark_kind_pinned_to_the_release(tmp_path):
    loader = benchmark_loader("qrecc")
    commit = "cf44d03cb6676f7414471cec509d4a6c6858b0d3"
    spec = {"kind": "qrecc", "split": "train", "revision": commit}
    loader.check("qrecc_train", spec, "c.yaml")
    assert loader.domains(spec) == ["qrecc"] and corpus_id("qrecc_train", "qrecc") == "qrecc_train.qrecc"
    raw = loader.raw_files(spec)[ZIP]
    assert raw["url"] == f"https://raw.githubusercontent.com/{REPO}/{commit}/{REPO_PATH}"
    assert raw["git_blob"] == "4b2e03a230edeb3657aeaf1ced59f281335516ed"  # resources/sources.yaml
    path = write_release(tmp_path / ZIP)
    local = {**spec, "files": {ZIP: {"local": str(path)}}}
    tasks, report = loader.tasks("qrecc_train", local, {ZIP: str(path)})
    assert len(tasks) == report["tasks"] == 5
    assert [p.doc_id for p in loader.corpus("qrecc_train", local, "qrecc", {ZIP: str(path)})] == [
        "5_1", "5_2", "74_1", "74_2"]
    with pytest.raises(ConfigError, match="'benchmarks.q.split': 'dev' is not one of train, test"):
        loader.check("q", {**spec, "split": "dev"}, "c.yaml")
    with pytest.raises(ConfigError, match="'benchmarks.q.revision': required .* apple/ml-qrecc"):
        loader.check("q", {"kind": "qrecc"}, "c.yaml")
    with pytest.raises(ConfigError, match="unknown key"):
        loader.check("q", {**spec, "strict": True}, "c.yaml")
    loader.check("q", {"kind": "qrecc", "files": {ZIP: {"local": str(path)}}}, "c.yaml")  # no revision needed
