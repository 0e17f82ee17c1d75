"""Shard checks added for lic_rag (intermediate answers, goal first, one clue per follow-up),
per-source prompt pairs, and the manual review round trip (export -> edit -> apply)."""

import pytest
import yaml

from convrag.config import REPO_ROOT
from convrag.errors import DataError
from convrag.records import Question, ShardSet
from convrag.studies.lic_rag.review import apply_review, export_review
from convrag.sharding import ShardPrompts, check_shards

Q = Question(qid="q1", dataset="d", question="In which city was the founder of Wenlo Press born?", answers=["Ranholm"],
             supporting_doc_ids=["d/1", "d/2"], hops=2, intermediate_answers=["Tala Vess"])
GOOD = ["I want the city where someone was born.", "That person founded Wenlo Press."]


def test_intermediate_answer_goal_first_and_one_clue():
    assert check_shards(Q, GOOD)["passed"]
    c = check_shards(Q, ["I want the city where someone was born.", "It is Tala Vess, who founded Wenlo Press."])
    assert not c["no_intermediate_answers"] and c["exposed_intermediate_answers"] == ["Tala Vess"]
    assert not c["passed"]
    c = check_shards(Q, ["Wenlo Press matters here.", "I want a birth city."])
    assert not c["goal_first"] and not c["passed"]
    c = check_shards(Q, ["I want the city where someone was born.", "That person founded Wenlo Press.",
                         "That person founded Wenlo Press."])
    assert c["bad_followups"] == [3] and not c["one_clue_per_followup"]
    cmp_q = Question(qid="q2", dataset="d", question="Who was born first, Telel Voani or Vessor Saberg?",
                     answers=["Telel Voani"], supporting_doc_ids=["d/3", "d/4"], hops=2)
    c = check_shards(cmp_q, ["I want whichever of two people was born first.", "They are Telel Voani and Vessor Saberg."])
    assert c["bad_followups"] == [2]  # two clues (two entities) in one follow-up
    titled = Question(qid="q3", dataset="d", question='Who recorded the album "An Orchard for Thoemis"?',
                      answers=["Rela Ostic"], supporting_doc_ids=["d/5"], hops=1)
    assert check_shards(titled, ["I want a musician.", 'The album is "An Orchard for Thoemis".'])["one_clue_per_followup"]


def test_prompt_pairs_per_source():
    d = yaml.safe_load((REPO_ROOT / "resources" / "prompts" / "shard.yaml").read_text())
    seen = set()
    for source in ("hotpotqa", "2wikimultihopqa", "musique", "miniworld"):
        p = ShardPrompts.from_dict(d, source)
        assert p.examples, source
        seen.add(p.examples[0]["question"])
        # the worked examples obey the checks they teach
        for ex in p.examples:
            q = Question(qid="x", dataset="d", question=ex["question"], answers=["zzz"], supporting_doc_ids=[], hops=2)
            assert check_shards(q, ex["shards"])["passed"], (source, ex["question"], check_shards(q, ex["shards"]))
    assert len(seen) == 4  # one set of pairs per source (miniworld is also the default)
    assert ShardPrompts.from_dict(d, "unknown").examples == ShardPrompts.from_dict(d, "miniworld").examples


def _sets():
    q2 = Question(qid="q2", dataset="d", question="Who founded Kerrow Films?", answers=["Tala"],
                  supporting_doc_ids=["d/3"], hops=1)
    q3 = Question(qid="q3", dataset="d", question="Who founded Orvik Theatre?", answers=["Sera"],
                  supporting_doc_ids=["d/4"], hops=1)
    sets = [ShardSet("q1", [{"shard_id": i, "text": t} for i, t in enumerate(GOOD, 1)], check_shards(Q, GOOD), "auto", True, "llm"),
            ShardSet("q2", [{"shard_id": 1, "text": "Kerrow Films founder?"}], {"n_shards": 1}, "auto", False, "llm"),
            ShardSet("q3", [{"shard_id": 1, "text": "I want a founder."}, {"shard_id": 2, "text": "It is Orvik Theatre."}],
                     {}, "auto", True, "llm")]
    return sets, [Q, q2, q3]


def test_review_round_trip(tmp_path):
    sets, qs = _sets()
    text = export_review(sets, qs)
    assert text.startswith("# Shard review file")
    data = yaml.safe_load(text)
    e = {x["qid"]: x for x in data["reviews"]}
    assert e["q1"]["decision"] == "accept" and e["q2"]["decision"] == "reject" and e["q1"]["shards"] == GOOD
    # the reviewer edits q2 (fixing it), rejects q3 with a reason, keeps q1
    e["q2"].update(decision="edit", shards=["I want the founder of a company.", "The company is Kerrow Films."])
    e["q3"].update(decision="reject", reason="clue 2 names the wrong kind of place")
    path = tmp_path / "review.yaml"
    path.write_text(yaml.safe_dump(data))
    out = {s.qid: s for s in apply_review(sets, qs, path)}
    assert out["q1"].review_status == "accepted" and out["q1"].passed
    assert out["q2"].review_status == "edited" and out["q2"].passed and out["q2"].method == "edited"
    assert [s["text"] for s in out["q2"].shards] == ["I want the founder of a company.", "The company is Kerrow Films."]
    assert out["q2"].checks["passed"] and out["q2"].checks["generated_checks"]["n_shards"] == 1
    assert out["q3"].review_status == "rejected" and not out["q3"].passed
    assert out["q3"].checks["review_reason"] == "clue 2 names the wrong kind of place"
    assert [s.qid for s in apply_review(sets, qs, path)] == ["q1", "q2", "q3"]  # nothing lost, order kept


@pytest.mark.parametrize("edit, match", [
    ({"decision": "maybe"}, r"reviews\[0\] \(qid q1\): decision must be one of accept, edit, reject"),
    ({"decision": "reject", "reason": ""}, "a rejected question needs a 'reason'"),
    ({"decision": "edit", "shards": []}, "'shards' must be a non-empty list"),
    ({"qid": "zz"}, "unknown qid 'zz'"),
])
def test_review_errors_name_the_entry(tmp_path, edit, match):
    sets, qs = _sets()
    data = yaml.safe_load(export_review(sets, qs))
    data["reviews"][0].update(edit)
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(DataError, match=match):
        apply_review(sets, qs, path)


def test_review_file_problems(tmp_path):
    sets, qs = _sets()
    with pytest.raises(DataError, match="review file not found"):
        apply_review(sets, qs, tmp_path / "none.yaml")
    (tmp_path / "bad.yaml").write_text("reviews: {qid: 1}\n")
    with pytest.raises(DataError, match="top-level 'reviews:' list"):
        apply_review(sets, qs, tmp_path / "bad.yaml")


def test_a_review_never_gives_more_questions_than_the_grid_holds():
    """n_questions 2: q1 passed, q2 failed and replaced by r1 (passed), then the reviewer passes q2.
    Three pass: the first two in file order stay (q1, q2), r1 leaves the grid with the reason."""
    from convrag.studies.lic_rag.review import keep_first

    sets = [ShardSet("q1", [{"shard_id": 1, "text": "a"}], {}, "auto", True),
            ShardSet("q2", [{"shard_id": 1, "text": "b"}], {}, "accepted", True),
            ShardSet("r1", [{"shard_id": 1, "text": "c"}], {"x": 1}, "auto", True),
            ShardSet("r2", [{"shard_id": 1, "text": "d"}], {}, "auto", False)]
    out = keep_first(sets, 2)
    assert [(s.qid, s.passed, s.review_status) for s in out] == [
        ("q1", True, "auto"), ("q2", True, "accepted"), ("r1", False, "over_n"), ("r2", False, "auto")]
    assert "n_questions (2)" in out[2].checks["review_reason"] and out[2].checks["x"] == 1
    assert keep_first(sets, 3) == sets
