"""worse_labels captions give a true reason for each blank cell (``blank_reasons``): hand-made rows
of each target, where the row proves the reason, and rows where it does not (still "reason not
recorded", so an unexplained blank stays visible)."""

from __future__ import annotations

import math

import pandas as pd
from convrag.report.blanks import UNRECORDED, blank_reasons
from convrag.studies.base import Target
from convrag.studies.worse_labels.blank_reasons import attach
from convrag.studies.worse_labels.corrected import AUDIT_OFF
from convrag.studies.worse_labels.targets import _explained

NAN = math.nan


def _reasons(name, rows, inputs=None, ctx=None):
    return blank_reasons(attach(name, pd.DataFrame(rows), inputs or {}, ctx or {}))


def test_targets_attach_reasons_to_the_frame_the_build_returns():
    df = pd.DataFrame([{"slice": "s", "rung": "r", "share_copy": NAN, "ci_low": NAN, "ci_high": NAN, "n_copy": 0,
                        "n_no_gold": 0}])
    t = _explained(Target("copies", "table", lambda inputs, ctx: df))
    out = t.build({}, {})
    assert blank_reasons(out)["ci_low"] == {"no context without gold at this rung (n_no_gold = 0)": 1}
    other = Target("negative_control", "table", lambda inputs, ctx: df)
    assert _explained(other) is other  # no reasons of its own: left to the shared rules


def test_copies_blank_only_explained_without_no_gold_contexts():
    r = _reasons("copies", [{"share_copy": NAN, "ci_low": NAN, "ci_high": NAN, "n_copy": 0, "n_no_gold": 0},
                            {"share_copy": 0.5, "ci_low": NAN, "ci_high": NAN, "n_copy": 1, "n_no_gold": 2}])
    assert r["ci_low"] == {"no context without gold at this rung (n_no_gold = 0)": 1, UNRECORDED: 1}


def test_agreement_single_labeller_measure():
    r = _reasons("agreement", [{"measure": "gold_labelled_no", "labeller_a": "j", "labeller_b": None, "value": 3.0},
                               {"measure": "cohen_kappa", "labeller_a": "j", "labeller_b": None, "value": 0.1}])
    assert r["labeller_b"] == {"gold_labelled_no counts one labeller's labels: there is no second labeller": 1,
                               UNRECORDED: 1}


def test_evidence_world_share():
    rows = [{"n_false_miss": 0, "n_world": 0, "share_same_thread": NAN, "share_world_sufficient": NAN},
            {"n_false_miss": 2, "n_world": 0, "share_same_thread": 0.5, "share_world_sufficient": NAN}]
    r = _reasons("evidence", rows)
    assert r["share_world_sufficient"] == {
        "no false misses at this rung (n_false_miss = 0)": 1,
        "the world labeller (the generated benchmark's ground truth) labels none of the false misses (n_world = 0)": 1}
    assert r["share_same_thread"] == {"no false misses at this rung (n_false_miss = 0)": 1}


def test_figure2b_precision_and_specificity():
    rows = [{"precision": NAN, "specificity": 1.0, "recall": 0.0, "youden_j": 0.0, "n": 5, "n_no_gold": 0,
             "n_binary": 5},
            {"precision": 1.0, "specificity": NAN, "recall": 0.75, "youden_j": NAN, "n": 8, "n_no_gold": 6,
             "n_binary": 7}]
    r = _reasons("figure2b_precision", rows)
    assert r["precision"] == {"no labelled context without gold at this rung (n_no_gold = 0)": 1}
    spec = "no context is judged yes, so specificity = tn / (tn + fp) has no denominator"
    assert r["specificity"] == {spec: 1}
    assert r["youden_j"] == {"specificity is undefined: " + spec: 1}


def test_table1_youden_change():
    rows = [{"first_rung": "a", "last_rung": "b", "change_n": 8, "youden_change": NAN},
            {"first_rung": "a", "last_rung": "b", "change_n": 0, "youden_change": NAN}]
    r = _reasons("table1_labellers", rows)["youden_change"]
    assert r["no turn labelled under both the first and the last rung (change_n = 0)"] == 1
    assert any(k.startswith("Youden's J is undefined at a or b") for k in r)


def test_table1_control_share_of_a_labeller_without_control_labels():
    rows = [{"labeller": "audit", "n_control": 0, "control_yes_share": NAN, "n_control_yes": NAN},
            {"labeller": "j", "n_control": 0, "control_yes_share": NAN, "n_control_yes": NAN}]
    r = _reasons("table1_labellers", rows)["control_yes_share"]
    assert r == {"the audit labels only its sample of the rung contexts, no control context (n_control = 0)": 1,
                 "no control context labelled by this labeller (n_control = 0)": 1}


def test_table2_diff_needs_paired_turns():
    rows = [{"n_false_miss": 0, "n_paired": 0, "diff": NAN}, {"n_false_miss": 3, "n_paired": 0, "diff": NAN},
            {"n_false_miss": 3, "n_paired": 2, "diff": NAN}]
    assert _reasons("table2_false_misses", rows)["diff"] == {
        "no false misses at this rung (n_false_miss = 0), so no turn to pair (n_paired = 0)": 1,
        "no false-miss turn is scored both with the rung's context and with no documents (n_paired = 0)": 1,
        UNRECORDED: 1}


def test_table3_and_auroc_one_class():
    rows = [{"n": 5, "share_no_gold": 0.0, "precision": NAN, "auroc_qrels": NAN, "n_qrels": 5, "n_pos_qrels": 5},
            {"n": 5, "share_no_gold": 0.2, "precision": NAN, "auroc_qrels": NAN, "n_qrels": 5, "n_pos_qrels": 2}]
    r = _reasons("table3_mtrag", rows)
    assert r["precision"] == {"no context without gold at this rung (share_no_gold = 0)": 1, UNRECORDED: 1}
    assert r["auroc_qrels"] == {"one class only (n_pos_qrels = n_qrels: every context answerable under qrels): "
                                "the AUROC is undefined": 1, UNRECORDED: 1}


def test_figure3_row_kinds():
    base = {"ci_low": NAN, "ci_high": NAN, "auroc_content": NAN, "auroc_qrels": NAN, "n_resamples_used": NAN}
    rows = [{**base, "measure": "auroc", "label": "qrels", "value": NAN, "n": 5, "n_pos": 5},
            {**base, "measure": "auroc", "label": "j", "value": 0.6, "n": 8, "n_pos": 3},
            {**base, "measure": "gap", "label": "j", "value": NAN, "n": 5, "n_pos": 2, "auroc_content": 0.5,
             "n_resamples_used": 0}]
    r = _reasons("figure3_auroc", rows)
    assert r["value"] == {"one class only (n_pos = n: every context answerable under qrels): the AUROC is undefined": 1,
                          "auroc_qrels on these contexts is undefined (one class only)": 1}
    assert r["ci_low"] == {"an AUROC row has no interval (only the gap rows are bootstrapped)": 2,
                           "its estimate (value) is blank": 1}
    assert r["auroc_qrels"] == {"only the gap rows carry it (measure auroc)": 2,
                                "the qrels label gives the contexts it keeps one class only: the AUROC is undefined": 1}


def test_score_detectors():
    rows = [{"measure": "auroc", "label": "qrels", "value": NAN, "ci_low": NAN, "ci_high": NAN, "n": 4, "n_pos": 0,
             "n_resamples_used": NAN},
            {"measure": "top1_z_minus_reader", "label": "qrels", "value": 0.1, "ci_low": NAN, "ci_high": NAN, "n": 4,
             "n_pos": 2, "n_resamples_used": 0}]
    r = _reasons("score_detectors", rows)
    assert r["value"] == {"one class only (n_pos = 0: no context insufficient under qrels): the AUROC is undefined": 1}
    assert r["ci_low"] == {"an AUROC row has no interval (only the top1_z_minus_reader rows are bootstrapped)": 1,
                           UNRECORDED: 1}


def test_changed_conclusions_row_kinds_and_estimates():
    base = {"base_label": "qrels", "other_label": "j", "est_other": 0.0, "ci_low_other": 0.0, "ci_high_other": 0.0,
            "n_other": 5, "reader": "q"}
    rows = [{**base, "family": "auroc_rungs", "rung": None, "first": "a", "second": "b", "est_base": NAN,
             "ci_low_base": NAN, "ci_high_base": NAN, "n_base": 5},
            {**base, "family": "refusal_gap", "rung": "a", "first": None, "second": None, "est_base": NAN,
             "ci_low_base": NAN, "ci_high_base": NAN, "n_base": 5},
            {**base, "family": "refusal_rungs", "rung": None, "first": "a", "second": "b", "est_base": NAN,
             "ci_low_base": NAN, "ci_high_base": NAN, "n_base": 0},
            {**base, "family": "kitagawa_rate", "rung": None, "first": "a", "second": "b", "est_base": NAN,
             "ci_low_base": NAN, "ci_high_base": NAN, "n_base": 5}]
    r = _reasons("changed_conclusions", rows)
    assert r["rung"] == {"a comparison between two rungs (first, second)": 3}
    assert r["first"] == {"a comparison within one reader and rung: nothing is compared pairwise": 1}
    assert r["ci_low_base"] == {
        "at one of the two rungs the qrels label gives the compared turns one class only: an AUROC is undefined": 1,
        "no context insufficient, or none sufficient, under the qrels label has a status line: "
        "a refusal rate is undefined": 1,
        "no items to compute it from (n_base = 0)": 1,
        "at one of the two rungs no context has both a status line and a qrels label that keeps it (sufficient or "
        "insufficient): a Kitagawa term is undefined": 1}


def test_ladder_steps_diff_and_intervals():
    row = {"metric": "precision", "first": "a", "second": "b", "n": 5, "n_unlabelled": 0, "value_first": 1.0,
           "value_second": NAN, "diff": NAN, "ci_low": NAN, "ci_high": NAN, "ci_low_alt": NAN, "ci_high_alt": NAN,
           "ci_shift": NAN}
    r = _reasons("ladder_steps", [row])
    why = "the precision is undefined at the second rung (value_second blank)"
    assert r["diff"] == {why: 1}
    assert r["ci_shift"] == {f"its estimate (diff) is blank: {why}, so in every resample too": 1}
    assert r["value_second"] == {'no compared turn lacks gold at that rung: the precision of "no gold" is undefined '
                                 "there": 1}


def test_dialogue_tied_audit_reason_follows_the_config():
    rows = [{"n_no_gold": 0, "n_false_miss": 0, "n_tied": 0, "share_tied": NAN, "precision": NAN,
             "n_audit_false_miss": 0, "share_audit_tied": NAN, "n_docs_no_gold": 0, "share_docs_tied": NAN}]
    off = _reasons("dialogue_tied", rows, ctx={"audit": False})
    on = _reasons("dialogue_tied", rows, ctx={"audit": True})
    assert off["share_audit_tied"] == {"the audit is off (worse_labels.judges.audit.model is null), so the audit "
                                       "has no false miss here (n_audit_false_miss = 0)": 1}
    assert on["share_audit_tied"] == {"the audit judges none of its audited no-gold contexts here 'yes' "
                                      "(n_audit_false_miss = 0)": 1}
    assert off["precision"] == {"no context without gold judged yes or no (n_no_gold = 0; partial is dropped)": 1}
    assert off["share_tied"] == {"no false misses at this rung (n_false_miss = 0)": 1}
    assert off["share_docs_tied"] == {"no context without gold (n_docs_no_gold = 0)": 1}


def test_figure2b_precision_blank_when_every_no_gold_context_is_partial():
    rows = [{"n": 3, "n_no_gold": 2, "n_no_gold_binary": 0, "n_binary": 1, "precision": NAN, "precision_ci_low": NAN,
             "precision_ci_high": NAN, "false_miss_share": 0.0, "recall": NAN, "specificity": 0.0, "youden_j": NAN}]
    got = _reasons("figure2b_precision", rows)
    assert got["precision"] == {"every labelled context without gold is judged partial, which the binary metrics "
                                "drop (n_no_gold_binary = 0)": 1}
    assert got["recall"] == {"no context is judged no, so recall = tp / (tp + fn) has no denominator": 1}
    assert "false_miss_share" not in got


def test_false_miss_origin_feedback_given_or_not():
    rows = [{"n_false_miss": 2, "has_feedback": False, "n_rejected": NAN, "share_rejected": NAN, "share_other": 0.5,
             "n_rejected_only": NAN}]
    absent = _reasons("false_miss_origin", rows, inputs={"human_feedback": []})
    given = _reasons("false_miss_origin", rows, inputs={"human_feedback": ["h.parquet"]})
    assert absent["n_rejected"] == {"no annotator feedback in this run (worse_labels.human_feedback is not set; "
                                    "has_feedback False)": 1}
    assert given["share_rejected"] == {"the annotator feedback covers no conversation of this slice "
                                       "(has_feedback False)": 1}


def test_judge_corrected_audit_off_and_difference_rows():
    rows = [{"row": "system", "baseline": None, "estimate": NAN, "agreement": NAN, "n_labelled": NAN, "n_all": 8,
             "judge_mean": 0.0, "judge_excludes_0": None, "n_unjudged": 0, "reason": AUDIT_OFF},
            {"row": "difference", "baseline": "b", "estimate": 0.1, "agreement": NAN, "n_labelled": 10, "n_all": 16,
             "judge_mean": 0.0, "judge_excludes_0": False, "n_unjudged": NAN, "reason": None}]
    r = _reasons("judge_corrected", rows)
    assert r["baseline"] == {"a system row has no baseline (only difference rows do)": 1}
    assert r["estimate"] == {AUDIT_OFF: 1}
    assert r["agreement"] == {AUDIT_OFF: 1, "not computed for a difference of two systems": 1}
    assert r["judge_excludes_0"] == {"only difference rows test whether the interval excludes 0": 1}


def test_ladder_retrieval_weights_and_domains(tmp_path):
    ctx_file = tmp_path / "contexts.parquet"
    pd.DataFrame({"slice": ["s", "s", "s"], "set": ["bm25", "fuse", "fuse"], "domain": ["a", "a", "b"],
                  "ndcg10": [0.1, 0.2, 0.3]}).to_parquet(ctx_file)
    (tmp_path / "s").mkdir()
    inputs = {"contexts": [str(ctx_file)], "weights": [str(tmp_path / "s" / "fuse.json")]}
    rows = [{"slice": "s", "rung": "bm25", "ndcg10_a": 0.1, "ndcg10_b": NAN, "weights": None, "weights_source": None},
            {"slice": "s", "rung": "fuse", "ndcg10_a": 0.2, "ndcg10_b": NAN, "weights": None, "weights_source": None}]
    r = _reasons("ladder_retrieval", rows, inputs=inputs)
    assert r["ndcg10_b"] == {"no context of this rung is in domain b": 1, UNRECORDED: 1}
    assert r["weights"] == {"no weights file for this rung (only expansion and fusion rungs have weights)": 1,
                            UNRECORDED: 1}
