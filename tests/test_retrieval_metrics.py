"""Recall@k (ir_measures) against hand-computed values; TREC run/qrels readers."""

import pytest

from convrag.errors import ConfigError, DataError
from convrag.metrics.retrieval import (
    read_qrels,
    read_trec_run,
    recall_at_k,
    write_trec_run,
)

QRELS = {"q1": {"a": 1, "b": 1, "n": 0}, "q2": {"c": 1}, "q3": {"d": 1, "e": 1, "f": 1}}
RUN = {
    "q1": {"a": 3.0, "x": 2.0, "b": 1.0},  # top-2: a, x -> 1 of 2
    "q2": {"c": 0.5, "y": 0.4},  # top-2: c -> 1 of 1
    "q3": {"d": 0.9, "e": 0.8, "z": 0.7, "f": 0.1},  # top-2: d, e -> 2 of 3
}


def test_recall_hand_computed():
    r = recall_at_k(RUN, QRELS, 2)
    assert r == pytest.approx({"q1": 0.5, "q2": 1.0, "q3": 2 / 3})
    assert round(r["q3"], 3) == 0.667
    assert recall_at_k(RUN, QRELS, 3) == pytest.approx({"q1": 1.0, "q2": 1.0, "q3": 2 / 3})
    assert recall_at_k(RUN, QRELS, 4)["q3"] == pytest.approx(1.0)


def test_recall_missing_or_empty_queries_score_zero():
    r = recall_at_k({"q1": {"a": 1.0}, "q2": {}}, QRELS, 5)
    assert r == {"q1": 0.5, "q2": 0.0, "q3": 0.0}
    assert recall_at_k({}, QRELS, 5) == {"q1": 0.0, "q2": 0.0, "q3": 0.0}
    with pytest.raises(ConfigError):
        recall_at_k(RUN, QRELS, 0)


def test_trec_run_round_trip_and_errors(tmp_path):
    write_trec_run(tmp_path / "run.txt", RUN, tag="t")
    lines = (tmp_path / "run.txt").read_text().splitlines()
    assert lines[0] == "q1 Q0 a 1 3.000000 t" and lines[2] == "q1 Q0 b 3 1.000000 t"
    assert read_trec_run(tmp_path / "run.txt") == RUN
    (tmp_path / "bad.txt").write_text("q1 Q0 a 1 3.0 t\nq1 Q0 b 2 high t\n")
    with pytest.raises(DataError, match=r"bad\.txt:2: score 'high'"):
        read_trec_run(tmp_path / "bad.txt")
    (tmp_path / "short.txt").write_text("q1 Q0 a 1\n")
    with pytest.raises(DataError, match=r"short\.txt:1: expected 6 columns"):
        read_trec_run(tmp_path / "short.txt")


def test_read_qrels_trec_and_beir(tmp_path):
    (tmp_path / "q.trec").write_text("q1 0 a 1\nq1 0 n 0\nq2 0 c 2\n")
    assert read_qrels(tmp_path / "q.trec") == {"q1": {"a": 1, "n": 0}, "q2": {"c": 2}}
    (tmp_path / "q.tsv").write_text("query-id\tcorpus-id\tscore\nq1\ta\t1\nq2\tc\t1\n")
    assert read_qrels(tmp_path / "q.tsv") == {"q1": {"a": 1}, "q2": {"c": 1}}
    (tmp_path / "nohead.tsv").write_text("q1\ta\t1\n")
    with pytest.raises(DataError, match=r"nohead\.tsv:1: BEIR qrels need a header"):
        read_qrels(tmp_path / "nohead.tsv")
    (tmp_path / "bad.tsv").write_text("query-id\tcorpus-id\tscore\nq1\ta\t1\nq2\tc\tyes\n")
    with pytest.raises(DataError, match=r"bad\.tsv:3: relevance 'yes'"):
        read_qrels(tmp_path / "bad.tsv")
    (tmp_path / "bad.trec").write_text("q1 0 a 1\nq1 a 1\n")
    with pytest.raises(DataError, match=r"bad\.trec:2: expected"):
        read_qrels(tmp_path / "bad.trec")
