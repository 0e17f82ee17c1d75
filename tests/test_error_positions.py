"""Where a data error is: a JSON error keeps its position (line, column) in every reader, and a
CORAL qrels error names the line of the bad row (issue 27, item 6). The real CORAL sample is
read by path from the shared data folder; broken copies go to tmp_path."""

import json
import re

import pytest

import convrag.data.coral as coral
from convrag.data.coral import load_coral, read_conversations
from convrag.data.mtrag import load_generation_tasks
from convrag.data.recor import read_documents
from convrag.errors import DataError
from convrag.io import iter_jsonl, read_json


def _json_pos(text: str) -> tuple[str, int, int]:
    with pytest.raises(json.JSONDecodeError) as e:
        json.loads(text)
    return e.value.msg, e.value.lineno, e.value.colno


def test_a_truncated_json_line_keeps_its_column_in_every_reader(tmp_path):
    rec = {"doc_id": "d1", "content": "a passage long enough to be cut in the middle of a word"}
    good = json.dumps(rec)
    cut = good[:50]  # inside "content"'s string
    msg, _, col = _json_pos(cut)
    assert (msg, col) == ("Unterminated string starting at", 29)
    p = tmp_path / "docs.jsonl"
    p.write_text(good + "\n" + good.replace("d1", "d2") + "\n" + cut + "\n")
    want = rf"docs\.jsonl:3: malformed JSON line \(Unterminated string starting at: column 29\)"
    with pytest.raises(DataError, match=want):
        list(iter_jsonl(p))
    with pytest.raises(DataError, match=want):  # RECOR's documents
        read_documents(p)
    # CORAL and MTRAG read the line with its newline: the cut string then holds a control
    # character, the message of the issue, which now says where it is
    msg, _, col = _json_pos(cut + "\n")
    assert (msg, col) == ("Invalid control character at", 51)
    control = r"malformed JSON line \(Invalid control character at: column 51\)"
    with pytest.raises(DataError, match=r"docs\.jsonl:3: " + control):
        list(coral._iter_json_records(p))
    p.write_text(cut + "\n")  # MTRAG checks each record as it comes: the cut line alone
    with pytest.raises(DataError, match=r"docs\.jsonl:1: " + control):
        load_generation_tasks(p, "mtrag_un")
    whole = tmp_path / "whole.json"
    whole.write_text('{\n  "a": [1, 2,\n        3,, 4]\n}\n')
    assert _json_pos(whole.read_text()) == ("Expecting value", 3, 11)
    with pytest.raises(DataError, match=r"whole\.json:3: invalid JSON \(Expecting value: line 3 column 11\)"):
        read_json(whole)


def test_a_broken_coral_array_names_line_and_column(shared_data, tmp_path):
    text = (shared_data / "coral" / "test" / "new_test_conversation.sample.json").read_text()
    cut = text[:5000]
    bad = tmp_path / "cut.json"
    bad.write_text(cut)
    msg, line, col = _json_pos(cut)
    assert (msg, line, col) == ("Unterminated string starting at", 59, 29)
    with pytest.raises(DataError, match=rf"cut\.json:59: invalid JSON \({msg}: line 59 column 29\)$"):
        read_conversations(bad)


def test_the_column_survives_the_streaming_buffer(shared_data, tmp_path, monkeypatch):
    """One-line array, read 64 characters at a time: the text already done with is dropped from
    the buffer, and the column of a control character in the 5th conversation still matches json's."""
    convs = json.loads((shared_data / "coral" / "test" / "new_test_conversation.sample.json").read_text())
    convs[4]["turns"][0]["question"] = "Who\x01 is it?"
    text = json.dumps(convs, ensure_ascii=False).replace("\\u0001", "\x01")
    msg, line, col = _json_pos(text)
    assert (msg, line) == ("Invalid control character at", 1) and col > 5000
    p = tmp_path / "one_line.json"
    p.write_text(text)
    monkeypatch.setattr(coral, "_CHUNK", 64)
    with pytest.raises(DataError, match=rf"one_line\.json:1: invalid JSON \({msg}: line 1 column {col}\)$"):
        read_conversations(p)


@pytest.fixture
def qrels_lines(shared_data):
    lines = (shared_data / "coral" / "test" / "new_test_qrel.sample.trec").read_text().splitlines(keepends=True)
    assert len(lines) == 34 and lines[0].startswith("Test_a_2_2\t0\t5\t1")
    return lines


def _load(shared_data, tmp_path, lines):
    q = tmp_path / "q.trec"
    q.write_text("".join(lines))
    load_coral(shared_data / "coral" / "test" / "new_test_conversation.sample.json", qrels=q)


def test_a_bad_coral_qrels_row_on_line_35_is_reported_at_line_35(shared_data, tmp_path, qrels_lines):
    """The issue's case: a row appended on line 35 for the turn whose qrels start on line 1."""
    with pytest.raises(DataError, match=r"differs from the qrels of 'Test_a_2_2' in \S*q\.trec:35: \['5', '99'\]$"):
        _load(shared_data, tmp_path, qrels_lines + ["Test_a_2_2\t0\t99\t1\n"])
    # a TREC row that lost a column is not read as a BEIR row with relevance 99
    with pytest.raises(DataError, match=r"q\.trec:35: expected 'qid iter pid rel' \(TREC, as line 1\), got 3 columns$"):
        _load(shared_data, tmp_path, qrels_lines + ["Test_a_2_2\t0\t99\n"])
    with pytest.raises(DataError, match=r"q\.trec:35: field 'rel': relevance 'x' is not an integer$"):
        _load(shared_data, tmp_path, qrels_lines + ["Test_a_2_2\t0\t99\tx\n"])


def test_a_golden_passage_judged_not_relevant_points_at_its_row(shared_data, tmp_path, qrels_lines):
    """Test_a_6_1's rows are lines 14-18; its passage 27 (line 17) judged 0 is reported at line 17,
    and with the row gone, the message says which passage has no row."""
    assert [ln.split()[0] for ln in qrels_lines[13:18]] == ["Test_a_6_1"] * 5 and qrels_lines[16].split()[2] == "27"
    zero = qrels_lines[:16] + [qrels_lines[16].replace("\t1\n", "\t0\n")] + qrels_lines[17:]
    with pytest.raises(DataError, match=r"'Test_a_6_1' in \S*q\.trec:17: \['23', '24', '25', '28'\]$"):
        _load(shared_data, tmp_path, zero)
    with pytest.raises(DataError, match=re.escape("q.trec:14: ['23', '24', '25', '28'] (no row for passage '27')")):
        _load(shared_data, tmp_path, qrels_lines[:16] + qrels_lines[17:])
