"""Table 2 and the condition means on a hand-made score table."""

import pandas as pd
import pytest

from convrag.records import Conversation, Question, write_records
from convrag.studies.lic_rag.analyses import delivery_summary, table2
from convrag.studies.lic_rag.score import score_conversations


def _rows():
    rows = []
    # question q1: FULL F1 1.0 and 0.5 over two runs (mean 0.75); SHARDED/history 0.0 and 0.5 (0.25)
    # question q2: FULL 1.0, 1.0 (1.0); SHARDED/history 0.5, 0.5 (0.5)
    vals = {("q1", "FULL", "none"): [1.0, 0.5], ("q1", "SHARDED", "history"): [0.0, 0.5],
            ("q2", "FULL", "none"): [1.0, 1.0], ("q2", "SHARDED", "history"): [0.5, 0.5]}
    for (qid, cond, pol), fs in vals.items():
        for run, f in enumerate(fs):
            rows.append(dict(dataset="d", model="m", retriever="bm25", condition=cond, policy=pol, qid=qid, run=run,
                             final_f1=f))
    return pd.DataFrame(rows)


def test_table2_hand_computed():
    t = table2(_rows(), n_resamples=200, seed=0)
    assert len(t) == 1
    r = t.iloc[0]
    # FULL mean over questions = (0.75 + 1.0) / 2 = 0.875; SHARDED = (0.25 + 0.5) / 2 = 0.375
    assert r.f1_full == pytest.approx(0.875) and r.f1_sharded == pytest.approx(0.375)
    assert r.gap == pytest.approx(0.5)
    # the relative gap (FULL - SHARDED) / FULL has gap's sign: a drop of 0.5 from 0.875 is +57%
    assert r.rel_gap == pytest.approx((0.875 - 0.375) / 0.875) and r.rel_gap > 0
    # both per-question gaps are 0.5, so every resample's mean gap is 0.5: a zero-width CI
    assert r.gap_ci_low == pytest.approx(0.5) and r.gap_ci_high == pytest.approx(0.5)
    assert r.n_questions == 2


def test_delivery_summary_one_value_per_question():
    d = delivery_summary(_rows(), n_resamples=200, seed=0)
    s = d[d.dataset == "d"].set_index("condition")
    assert s.loc["FULL", "mean_f1"] == pytest.approx(0.875) and s.loc["FULL", "n"] == 2
    assert s.loc["SHARDED", "mean_f1"] == pytest.approx(0.375)
    # "all": every condition and policy per question: q1 (1 + .5 + 0 + .5) / 4 = .5, q2 (1 + 1 + .5 + .5) / 4 = .75
    assert s.loc["all", "mean_f1"] == pytest.approx(0.625)
    # a single-dataset run keeps the rows over all datasets (the published map reads them)
    every = d[d.dataset == "all"].set_index("condition")
    assert every.loc["FULL", "mean_f1"] == pytest.approx(0.875) and every.loc["all", "mean_f1"] == pytest.approx(0.625)


def test_score_conversations_final_best_unanswered_and_recall(tmp_path):
    q = Question(qid="q1", dataset="d", question="Who?", answers=["Tala Vess", "Vess"],
                 supporting_doc_ids=["d/1", "d/2"], hops=2)
    turns = [
        {"role": "user", "text": "a"},
        {"role": "assistant", "text": "Answer: Tala Vess", "answer": "Tala Vess", "answered": True, "query": "a",
         "retrieved": [{"doc_id": "d/1", "score": 2.0}, {"doc_id": "d/9", "score": 1.0}]},
        {"role": "user", "text": "b"},
        {"role": "assistant", "text": "no idea", "answer": None, "answered": False, "query": "a b",
         "retrieved": [{"doc_id": "d/2", "score": 2.0}, {"doc_id": "d/9", "score": 1.0}]},
        {"role": "user", "text": "c"},
        {"role": "assistant", "text": "Answer: Tala", "answer": "Tala", "answered": True, "query": "a b c",
         "retrieved": [{"doc_id": "d/8", "score": 2.0}, {"doc_id": "d/9", "score": 1.0}]},
    ]
    c = Conversation(conv_id="c1", study="lic_rag", qid="q1", dataset="d", condition="SHARDED", policy="history",
                     retriever="bm25", model="m", run=0, turns=turns, final_answer="Tala", answered=True,
                     n_unanswered_turns=1)
    write_records(tmp_path / "q.jsonl", [q])
    write_records(tmp_path / "c.jsonl", [c])
    convs, per_turn = score_conversations([str(tmp_path / "c.jsonl")], [str(tmp_path / "q.jsonl")], recall_k=2)
    row = convs.iloc[0]
    # final answer "Tala" vs "Tala Vess": P = 1/1, R = 1/2, F1 = 2/3; vs alias "Vess": F1 0 -> max 2/3
    assert row.final_f1 == pytest.approx(2 / 3) and row.final_em == 0.0
    assert row.best_f1 == 1.0 and row.n_unanswered_turns == 1 and row.n_turns == 3
    assert per_turn["f1"].tolist() == pytest.approx([1.0, 0.0, 2 / 3])
    # Recall@2 per turn: {d/1} -> 1/2, {d/2} -> 1/2, {} -> 0; cumulative: 1/2, 1, 1
    assert per_turn["recall@2"].tolist() == pytest.approx([0.5, 0.5, 0.0])
    assert per_turn["cum_recall"].tolist() == pytest.approx([0.5, 1.0, 1.0])


def test_table2_target_shows_f1_points_and_keeps_the_csv_on_0_1(tmp_path):
    """Issue 45: F1 in the paper's points in the Markdown (gap 0.5 -> 50.0), 0-1 in the CSV (the
    published map's ``scale: 100`` reads it); rel_gap, a ratio, stays as it is."""
    from convrag.report.tables import write_table
    from convrag.studies.lic_rag.targets import TARGETS

    scores, turns = tmp_path / "scores.parquet", tmp_path / "turns.parquet"
    _rows().to_parquet(scores)
    pd.DataFrame({"conv_id": ["c"]}).to_parquet(turns)
    ctx = {"boot": {"n_resamples": 200, "seed": 0}, "closed_retrievers": [], "pool": None}
    df = TARGETS["table2_full_vs_sharded"].build({"scores": str(scores), "turns": str(turns)}, ctx)
    assert df.attrs["points"][:2] == ["f1_full", "f1_sharded"] and "gap_ci_high" in df.attrs["points"]
    assert "rel_gap" not in df.attrs["points"] and "n_questions" not in df.attrs["points"]
    csv, md = write_table(df, tmp_path / "t2", caption="Table 2.")
    back = pd.read_csv(csv)
    row = back[back.dataset == "d"].iloc[0]
    assert row.gap == pytest.approx(0.5) and row.f1_full == pytest.approx(0.875)
    text = md.read_text()
    assert text.startswith("Table 2. Points: f1_full, f1_sharded, gap, gap_ci_low, gap_ci_high")
    line = next(ln for ln in text.splitlines() if ln.startswith("| d "))
    cells = [c.strip() for c in line.strip("|").split("|")]
    header = [c.strip() for c in next(ln for ln in text.splitlines() if ln.startswith("| dataset")).strip("|").split("|")]
    got = dict(zip(header, cells))
    assert (got["f1_full"], got["f1_sharded"], got["gap"], got["gap_ci_low"]) == ("87.5", "37.5", "50.0", "50.0")
    assert got["rel_gap"] == "0.571" and got["n_questions"] == "2"
