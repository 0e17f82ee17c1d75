"""The blank-cell reasons the lic_rag, coral and mtrag_un builders give (``df.attrs["blank_reasons"]``),
on hand-made inputs: each blank names the reason the row proves, and a row outside the rule
stays unexplained ("reason not recorded") rather than given a reason it does not have."""

from __future__ import annotations

import pandas as pd
from convrag.records import TurnTask
from convrag.report.blanks import UNRECORDED, blank_reasons

BOOT = {"n_resamples": 50, "seed": 0}


def _reasons(df: pd.DataFrame, col: str) -> dict[str, int]:
    return blank_reasons(df).get(col, {})


# ---- coral ------------------------------------------------------------------------------------

def _coral_scores(**extra) -> pd.DataFrame:
    return pd.DataFrame([{"task_id": f"t{i}", "model": "m", "strategy": "rewrite", "bleu1": 0.5, "rougeL": 0.5,
                          "citation_recall": 0.0, "citation_precision": 0.0, "prompt_tokens": 10,
                          "citation_skipped": False, "comparison": "draw", **extra} for i in range(2)])


def test_coral_table3_blank_framework_columns_only_from_answers_without_labels():
    from convrag.studies.coral.analyses import generator_size_table
    from convrag.studies.coral.evaluate import table3

    old = table3(_coral_scores())  # answers of a version that wrote no retrieval / compression
    assert _reasons(old, "retrieval") == {
        "its answers carry no retrieval label (answer or score files from before the jobs recorded it; "
        "a current answer job always writes one)": 1}
    assert list(_reasons(old, "compression")) == [
        ("its answers carry no compression label (answer or score files from before the jobs recorded it; "
        "a current answer job always writes one)")]
    current = table3(_coral_scores(retrieval="shared:bm25/rewrite", compression="none"))
    assert current.loc[0, "compression"] == "none" and "retrieval" not in blank_reasons(current)
    sized = generator_size_table(old, {})  # Table 5 keeps Table 3's reasons; no size for "m"
    assert list(_reasons(sized, "retrieval")) == list(_reasons(old, "retrieval"))
    assert _reasons(sized, "params_b") == {"the registry gives no parameter count for this model": 1}


def test_coral_history_sweep_gain_reasons():
    from convrag.studies.coral.analyses import history_sweep_table

    def rows(model, m, rouge):
        return [{"task_id": f"{model}{m}{i}", "model": model, "max_history_turns": m, "bleu1": 0.1, "rougeL": rouge,
                 "citation_recall": 0.0, "citation_precision": 0.0, "prompt_tokens": 5, "citation_skipped": False,
                 "comparison": "draw"} for i in range(2)]

    # base: ROUGE-L 0 at m = 2, no answers at m = 4; tuned answers at m = 2 and 4
    df = pd.DataFrame(rows("base", 2, 0.0) + rows("tuned", 2, 0.3) + rows("tuned", 4, 0.4))
    t = history_sweep_table(df, {"tuned": "base"}).set_index(["model", "m"])
    assert t["rougeL_gain"].isna().all()
    assert _reasons(t.reset_index(), "base_model") == {"not a fine-tuned generator (sft false)": 1}
    assert _reasons(t.reset_index(), "rougeL_gain") == {
        "not a fine-tuned generator (sft false): no base model to compare with": 1,
        "its base model's ROUGE-L at m = 2 is 0 (a relative gain over 0 is undefined)": 1,
        "its base model (base) has no ROUGE-L at m = 4": 1}


def test_coral_judge_kappa_reasons():
    from convrag.studies.coral.analyses import JUDGE_COLUMN, judge_table

    draws = pd.DataFrame([{"task_id": f"t{i}", "model": "m", "strategy": "rewrite", "compare_model": "big",
                           "comparison": "draw", f"{JUDGE_COLUMN}small": "draw"} for i in range(3)])
    # the compare model's own row (Figure 5 lists it first) has no agreement with itself to show
    self_row = "the compare model itself (its agreement with itself is 1 by definition, not a measure)"
    t = judge_table(draws)
    assert list(t.role) == ["compare model", "other judge"]
    assert _reasons(t, "kappa") == {
        self_row: 1, "a single outcome class (every pair a draw for both judges) leaves kappa undefined": 1}
    assert _reasons(t, "agreement") == {self_row: 1} and t.agreement.iloc[1] == 1.0
    one = draws.assign(**{f"{JUDGE_COLUMN}small": ["win", None, None]})
    t = judge_table(one)
    assert t.kappa.isna().all()
    assert _reasons(t, "kappa") == {self_row: 1, "fewer than two pairs decided by both judges (both_decided = 1)": 1}
    # kappa defined where the outcomes differ: only the compare model's own row is blank
    mixed = judge_table(draws.assign(comparison=["win", "draw", "lose"]))
    assert mixed.kappa.iloc[1] == 0.0 and blank_reasons(mixed)["kappa"] == {self_row: 1}


# ---- lic_rag ----------------------------------------------------------------------------------

def _lic_scores(vals: dict, retriever="bm25", model="m") -> pd.DataFrame:
    """vals: (qid, condition, policy) -> final F1 per run."""
    return pd.DataFrame([{"dataset": "d", "model": model, "retriever": retriever, "condition": cond, "policy": pol,
                          "qid": qid, "run": run, "final_f1": f}
                         for (qid, cond, pol), fs in vals.items() for run, f in enumerate(fs)])


def test_lic_rag_table8_reasons():
    from convrag.studies.lic_rag.analyses import aptitude_unreliability

    # FULL runs agree (unreliability 0 on every unit); SHARDED runs differ
    s = _lic_scores({("q1", "FULL", "none"): [0.5, 0.5], ("q1", "SHARDED", "history"): [0.0, 1.0],
                     ("q2", "FULL", "none"): [1.0, 1.0], ("q2", "SHARDED", "history"): [1.0, 0.0]})
    t = aptitude_unreliability(s, BOOT, {}, closed_retrievers=["closed_book"])
    pooled = t[t.dataset == "all"]  # FULL and SHARDED over all, per LLM (m) and per retriever (bm25)
    assert len(pooled) == 6 and pooled.runs_per_question.isna().all() and t.runs_per_question.notna().sum() == 2
    assert _reasons(t, "runs_per_question") == {"a row pooled over datasets and retrievers gives no runs per question": 6}
    only = "the FULL -> SHARDED change is given only on the pooled SHARDED rows (dataset = all)"
    assert _reasons(t, "aptitude_change") == {only: 5}
    assert t.loc[(t.dataset == "all") & (t.condition == "SHARDED"), "unreliability_rise"].gt(0).all()
    assert _reasons(t, "unreliability_relative_rise") == {
        only: 5, "the paired FULL units' mean unreliability is 0 (a relative rise over 0 is undefined)": 3}
    # FULL runs that differ: the relative rise is defined, so only the "only pooled SHARDED" reason remains
    s2 = s.assign(final_f1=[0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0])
    t2 = aptitude_unreliability(s2, BOOT, {}, closed_retrievers=["closed_book"])
    assert _reasons(t2, "unreliability_relative_rise") == {only: 5}


def test_lic_rag_complete_coverage_reason_needs_zero_covered_pairs():
    from convrag.studies.lic_rag.analyses import complete_coverage

    s = _lic_scores({("q1", "FULL", "none"): [0.5], ("q1", "SHARDED", "history"): [0.0],
                     ("q1", "SHARDED", "current"): [0.0]})
    s["final_cum_recall"] = [1.0, 0.5, 1.0]  # only the current policy's pair is fully covered
    t = complete_coverage(s, BOOT).set_index("policy")
    assert t.loc["history", "covered_pairs"] == 0 and t.loc["current", "covered_pairs"] == 1
    assert _reasons(t.reset_index(), "gap_covered") == {
        "no pair where FULL and SHARDED both retrieved every supporting passage (covered_pairs = 0)": 1}


def test_lic_rag_closed_book_retention_reasons():
    from convrag.studies.lic_rag.analyses import closed_book_retention

    s = pd.concat([_lic_scores({("q1", "FULL", "none"): [0.5], ("q1", "CONCAT", "none"): [0.5]},
                               retriever="closed_book", model=m) for m in ("big", "zero")], ignore_index=True)
    s.loc[(s.model == "zero"), "final_f1"] = 0.0
    t = closed_book_retention(s, ["closed_book"], {"fam": "big"})
    # per dataset, then over all datasets (kept on a single-dataset run), then the largest per family
    assert list(t.model) == ["big", "zero", "big", "zero", "largest_per_family"]
    assert _reasons(t, "models") == {"only the largest_per_family row names its LLMs": 4}
    assert _reasons(t, "retention_ci_low") == {
        "a single dataset's row has no interval (given only over all datasets)": 2,
        "its estimate (retention) is blank": 1}
    assert _reasons(t, "retention") == {"closed-book FULL F1 is 0 (a ratio over 0 is undefined)": 2}


def test_lic_rag_response_category_intervals_only_pooled():
    from convrag.studies.lic_rag.analyses import response_categories

    turns = pd.DataFrame({"dataset": "d", "qid": ["q1", "q2", "q1", "q2"], "retriever": ["bm25", "bm25", "dense", "dense"],
                          "condition": "SHARDED", "policy": "history",
                          "category": ["answer_attempt", "hedge", "answer_attempt", None]})
    t = response_categories(turns, ["closed_book"], BOOT)
    assert list(t.retriever) == ["bm25", "dense", "all"] and t.loc[2, ["hedge_ci_low", "hedge_ci_high"]].notna().all()
    assert _reasons(t, "hedge_ci_high") == {"intervals are given only on the pooled retrieval rows (retriever = all)": 2}


def test_lic_rag_tokens_vs_tog2_reasons():
    from convrag.studies.lic_rag.analyses import retrieval_cost

    turns = pd.DataFrame({
        "dataset": "d", "model": "m", "policy": "history",
        "condition": ["SHARDED", "SHARDED", "FULL", "FULL"], "retriever": ["pog", "tog2", "pog", "pog"],
        "conv_id": ["p1", "t1", "p2", "p3"], "turn": 1, "retrieval_llm_calls": [2, 0, 1, 1],
        "retrieval_prompt_tokens": [100, 0, 50, 50], "retrieval_completion_tokens": [10, 0, 5, 5],
        "retrieval_parse_failures": 0})
    t = retrieval_cost(turns, ["pog", "tog2"])
    blank = t[t.tokens_vs_tog2.isna()]
    assert len(blank) == len(t)  # ToG-2 spent 0 tokens on SHARDED and has no FULL turn
    assert _reasons(t, "tokens_vs_tog2") == {
        "the ratio to ToG-2 is given only on the pooled rows (dataset, model, policy = all)": 3,
        "no ToG-2 (tog2) retrievals in this run to compare with": 1,
        "ToG-2 spent no tokens here (a ratio over 0 is undefined)": 4}


# ---- mtrag_un ---------------------------------------------------------------------------------

def test_mtrag_un_statistics_count_of_only_on_shares():
    from convrag.studies.mtrag_un.analyses import benchmark_statistics

    SHARES = ("unanswerable_or_partial", "clarification", "underspecified", "first_turn", "nonstandalone")

    tasks = [TurnTask(task_id=f"t{i}", benchmark="b", conversation_id="c", turn=i, history=[{}] * (2 * i - 2),
                      question="q", labels={"answerability": "ANSWERABLE"}) for i in (1, 2)]
    t = benchmark_statistics(tasks, "b")
    counts = t[~t.statistic.isin(SHARES)]
    assert len(counts) == 7 and counts["count"].isna().all() and t.loc[t.statistic.isin(SHARES), "count"].notna().all()
    assert _reasons(t, "of") == {
        "a count or mean, not a share (count / of: a share's numerator and denominator)": len(counts)}
    # no task has a standalone label: that share is over 0 tasks
    assert _reasons(t, "value") == {"a share over 0 tasks (of = 0)": 1}


def test_a_blank_outside_the_rules_stays_unrecorded():
    from convrag.studies.coral.analyses import JUDGE_COLUMN, judge_table

    # agreement 1 over 2 both-decided pairs, but the judge's own shares are not one class (a third
    # pair only it decided): the row does not show why kappa is blank, so no reason is invented
    df = pd.DataFrame([{"task_id": f"t{i}", "model": "m", "strategy": "rewrite", "compare_model": "big",
                        "comparison": c, f"{JUDGE_COLUMN}small": o}
                       for i, (c, o) in enumerate([("draw", "draw"), ("draw", "draw"), (None, "win")])])
    t = judge_table(df)
    assert _reasons(t, "kappa")[UNRECORDED] == 1


def test_lic_rag_figure7_per_dataset_rows_name_why_they_have_no_interval():
    from convrag.studies.lic_rag.analyses import full_vs_sharded_of

    s = _lic_scores({("q1", "FULL", "none"): [0.5, 1.0], ("q1", "SHARDED", "history"): [0.0, 0.5],
                     ("q2", "FULL", "none"): [1.0, 1.0], ("q2", "SHARDED", "history"): [1.0, 0.0]}, retriever="pog")
    t = full_vs_sharded_of(s, ["pog"], {"n_resamples": 200, "seed": 0})
    assert list(t.dataset) == ["d", "all"]
    # FULL 0.875, SHARDED 0.375 over both rows: gap 0.5, bootstrapped only on the pooled row
    assert t.gap.tolist() == [0.5, 0.5] and t.gap_ci_low.isna().tolist() == [True, False]
    (why, k), = _reasons(t, "gap_ci_low").items()
    assert k == 1 and why.startswith("a per-dataset row is the mean of Table 2's per-LLM gaps")


def test_worse_labels_contrast_and_kitagawa_reasons():
    from convrag.studies.worse_labels.abstention import CONTRAST_COLUMNS, KITAGAWA_COLUMNS
    from convrag.studies.worse_labels.blank_reasons import attach

    nan = float("nan")
    base = dict.fromkeys(CONTRAST_COLUMNS, nan) | {"slice": "s", "reader": "r", "rung": "bm25", "n_gold": 4,
                                                   "n_unlabelled": 0, "n_no_status_rung": 0, "n_no_status_gold": 0}
    c = pd.DataFrame([base | {"label": "qrels", "n_turns": 0, "n_rung": 0, "n_paired": 0},
                      base | {"label": "judge", "n_turns": 2, "n_rung": 0, "n_paired": 0},
                      base | {"label": "judge", "n_turns": 3, "n_rung": 3, "n_paired": 3, "pooled_diff": 0.25,
                              "pooled_ci_low": -0.1, "pooled_ci_high": 0.5, "within_diff": 0.0,
                              "within_ci_low": 0.0, "within_ci_high": 0.0, "refusal_rung": 0.5, "refusal_gold": 0.25}],
                     columns=CONTRAST_COLUMNS)
    c = attach("contrast_2b_2c", c, {}, {})
    assert _reasons(c, "pooled_diff") == {
        "no turn whose context the qrels label calls a failed retrieval (n_turns = 0)": 1,
        "none of the 2 failed retrievals under the judge label has a response with a status line (n_rung = 0)": 1}
    assert _reasons(c, "within_ci_high") == {
        "no failed retrieval under the qrels label has a status line both with its context and with the gold of "
        "its turn (n_paired = 0)": 1,
        "no failed retrieval under the judge label has a status line both with its context and with the gold of "
        "its turn (n_paired = 0)": 1}

    kb = dict.fromkeys(KITAGAWA_COLUMNS, nan) | {"slice": "s", "reader": "r", "from_rung": "bm25",
                                                 "n_no_status_from": 0, "n_no_status_to": 0,
                                                 "n_unlabelled_from": 0, "n_unlabelled_to": 0}
    full = {"total": -0.2, "composition": -0.1, "rate": -0.1, "refusal_from": 0.4, "refusal_to": 0.2}
    k = pd.DataFrame([kb | {"to_rung": "dense", "n_from": 0, "n_to": 5},
                      kb | full | {"to_rung": "hybrid", "n_from": 5, "n_to": 5, "share_sufficient_from": 0.4,
                                   "share_sufficient_to": 1.0, "refusal_sufficient_from": 0.5,
                                   "refusal_sufficient_to": 0.2, "refusal_insufficient_from": 1 / 3}],
                     columns=KITAGAWA_COLUMNS)
    k = attach("kitagawa", k, {}, {})
    assert _reasons(k, "refusal_sufficient_to") == {
        "no context at the from rung (bm25) has both a status line and a primary label (n_from = 0)": 1}
    assert _reasons(k, "refusal_insufficient_to") == {
        "no context at the from rung (bm25) has both a status line and a primary label (n_from = 0)": 1,
        "every context at the to rung (hybrid) is judged sufficient (share_sufficient_to = 1): an empty stratum "
        "has no refusal rate": 1}
    assert UNRECORDED not in str(blank_reasons(k)) and UNRECORDED not in str(blank_reasons(c))


def test_worse_labels_table2_blames_the_empty_group_not_its_unscored_count():
    """worse_labels Table 2: a rung without false misses (n_false_miss = 0, so n_unscored_false_miss
    = 0 too) is blank because the group is empty, not for want of unscored reads; its no-document
    reads (of the same turns) are empty with it; a group read but never scored says so."""
    from convrag.studies.worse_labels.abstention import TABLE2_COLUMNS
    from convrag.studies.worse_labels.blank_reasons import attach

    nan = float("nan")
    zero = {c: 0 for c in TABLE2_COLUMNS if c.startswith("n_")}
    base = dict.fromkeys(TABLE2_COLUMNS, nan) | zero | {"slice": "s", "reader": "r"}
    t = pd.DataFrame([base | {"rung": "bm25", "n_true_miss": 3, "correct_true_miss": 2 / 3, "n_reads": 3,
                              "n_no_status": 0, "share_no_status": 0.0},
                      base | {"rung": "dense", "n_false_miss": 2, "n_unscored_false_miss": 2, "n_no_docs": 2,
                              "correct_no_docs": 0.5, "n_status_no_docs": 2, "abstain_no_docs": 0.5,
                              "n_true_miss": 1, "correct_true_miss": 1.0, "n_reads": 3, "n_no_status": 0,
                              "share_no_status": 0.0},
                      base | {"rung": "hybrid"}], columns=TABLE2_COLUMNS)
    t = attach("table2_false_misses", t, {}, {})
    assert _reasons(t, "correct_false_miss") == {
        "no false miss (no gold, judged sufficient) context at this rung (n_false_miss = 0)": 2,
        "none of the 2 false miss (no gold, judged sufficient) contexts has a correctness score "
        "(n_unscored_false_miss = n_false_miss)": 1}
    assert _reasons(t, "correct_no_docs") == {
        "no false misses at this rung (n_false_miss = 0), so no turn to read with no documents (n_no_docs = 0)": 2}
    assert _reasons(t, "abstain_no_docs") == _reasons(t, "correct_no_docs")
    assert _reasons(t, "correct_true_miss") == {
        "no true miss (no gold, judged insufficient) context at this rung (n_true_miss = 0)": 1}
    assert _reasons(t, "share_no_status") == {"the reader read no context at this rung (n_reads = 0)": 1}
    assert "n_unscored" not in str({c: _reasons(t, c) for c in ("correct_false_miss", "correct_no_docs")}).replace(
        "(n_unscored_false_miss = n_false_miss)", "")
    assert UNRECORDED not in str(_reasons(t, "diff"))
