"""Errors that name what a user must fix: the field, the JSON position, the right line."""

import json

import pytest

from convrag.data.coral import load_coral
from convrag.data.mtrag import load_conversations, load_generation_tasks
from convrag.errors import DataError
from convrag.io import iter_jsonl, read_json


def test_a_truncated_json_line_keeps_its_position(tmp_path):
    good = json.dumps({"task_id": "c<::>1", "text": "a long value"})
    p = tmp_path / "t.jsonl"
    p.write_text(good + "\n" + good[:36] + "\n")  # cut inside the string "a long value"
    with pytest.raises(DataError, match=r"t\.jsonl:2: malformed JSON line \(Unterminated string starting at: column 31\)"):
        list(iter_jsonl(p))
    # MTRAG's reader keeps the newline: the cut string then holds a control character, at column 37
    p.write_text(good[:36] + "\n")
    with pytest.raises(DataError, match=r"t\.jsonl:1: malformed JSON line \(Invalid control character at: column 37\)"):
        load_generation_tasks(p, "mtrag_un")
    p.write_text('{"a": "x\ty"}')  # a raw tab inside a string
    with pytest.raises(DataError, match=r"t\.jsonl:1: invalid JSON \(Invalid control character at: line 1 column 9\)"):
        read_json(p)


def test_a_missing_speaker_names_the_field(shared_data, tmp_path):
    src = shared_data / "mtrag" / "conversations"
    convs = json.loads((src / "conversations.sample.json").read_text())
    del convs[2]["messages"][3]["speaker"]
    (tmp_path / "c.json").write_text(json.dumps(convs))
    with pytest.raises(DataError, match=r"c\.json: conversation 2, message 3: field 'speaker' must be user or agent, "
                                        r"got '\(missing\)'"):
        load_conversations(tmp_path / "c.json", src / "conversation_index_to_id.tsv")


def test_a_coral_qrels_mismatch_points_at_the_row(shared_data, tmp_path):
    """Turn Test_a_2_3 has two qrels rows (lines 2 and 3): a wrong pid on line 3 is reported at
    line 3, not at the turn's first row."""
    src = shared_data / "coral" / "test"
    lines = (src / "new_test_qrel.sample.trec").read_text().splitlines(keepends=True)
    assert lines[1].split()[0] == lines[2].split()[0] == "Test_a_2_3"
    cols = lines[2].split()
    cols[2] = "999999"
    (tmp_path / "q.trec").write_text("".join(lines[:2] + ["\t".join(cols) + "\n"] + lines[3:]))
    with pytest.raises(DataError, match=r"differs from the qrels of 'Test_a_2_3' in .*q\.trec:3: "):
        load_coral(src / "new_test_conversation.sample.json", qrels=tmp_path / "q.trec")
