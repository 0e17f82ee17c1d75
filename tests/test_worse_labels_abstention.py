"""worse_labels.abstention: the reader-side analyses on small hand-made frames, worked by hand."""

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from convrag.errors import ConfigError, DataError
from convrag.stats.bootstrap import bootstrap_statistic, paired_bootstrap, paired_cluster_bootstrap
from convrag.stats.detection import _auroc_ranks
from convrag.studies.worse_labels import abstention as ab

NAN = float("nan")
A, U = "ANSWERABLE", "UNANSWERABLE"


def make_ctx(**kw):
    ctx = {"ladder": ["r1", "r2"], "primary": "j1", "labellers": ["j1"], "readers": ["A", "B"],
           "main_slice": "s", "replication_slice": None,
           "boot": {"n_resamples": 200, "seed": 0, "unit": "turn"}}
    ctx.update(kw)
    return ctx


def dia(t: int) -> str:
    """Turns 1-2 in d1, 3-4 in d2, ..."""
    return f"d{(t + 1) // 2}"


def C(t, st, no_gold, top1=NAN, margin=NAN, top1_z=NAN, sl="s", qrels=None):
    q = qrels or ("none" if no_gold else "all")
    return {"slice": sl, "domain": "x", "dialogue": dia(t), "task_id": f"t{t}", "turn": t, "set": st,
            "doc_ids": [], "n_gold": 2, "n_gold_in": {"none": 0, "part": 1, "all": 2}[q], "qrels_label": q,
            "no_gold": no_gold, "has_copy": False, "doc_classes": [], "top1": top1, "margin": margin,
            "top1_z": top1_z, "ndcg10": NAN}


def L(t, st, label, labeller="j1", sl="s"):
    return {"slice": sl, "task_id": f"t{t}", "set": st, "labeller": labeller, "label": label, "support": []}


def R(t, st, reader, status=A, p=0.5, correct=None, sl="s"):
    return {"slice": sl, "task_id": f"t{t}", "set": st, "reader": reader, "status": status, "p_answerable": p,
            "answer": "", "correctness": None, "correct": correct}


def frames(c, lab, r):
    return pd.DataFrame(c), pd.DataFrame(lab), pd.DataFrame(r)


# ---------------------------------------------------------------------------------------
# Table 2
# ---------------------------------------------------------------------------------------


def table2_frames():
    # rung r1: t1-t6 lack gold, t7-t8 hold it. j1: t1 yes, t3 yes (false misses), t2 partial
    # (neither), t4 unlabelled, t5 / t6 no (true misses), t7 yes, t8 none.
    labels = {1: "yes", 2: "partial", 3: "yes", 4: None, 5: "no", 6: "no", 7: "yes", 8: None}
    c = [C(t, "r1", t <= 6) for t in range(1, 9)]
    lab = [L(t, "r1", labels[t]) for t in range(1, 9)]
    r = [R(1, "r1", "A", A, correct=True), R(2, "r1", "A", None, correct=True),  # no status line, answered
         R(3, "r1", "A", A, correct=False), R(4, "r1", "A", A, correct=True),
         R(5, "r1", "A", A, correct=False), R(6, "r1", "A", A, correct=None),  # t6 unscored
         R(7, "r1", "A", A, correct=True), R(8, "r1", "A", A, correct=True),
         R(1, "none", "A", U, correct=False), R(2, "none", "A", U, correct=False),
         R(3, "none", "A", None, correct=False),  # no status line
         R(5, "none", "A", U, correct=True)]  # a true-miss turn: not in the no-documents column
    return frames(c, lab, r)


def test_table2_by_hand():
    c, lab, r = table2_frames()
    out = ab.table2(c, lab, r, make_ctx())
    assert list(out.columns) == ab.TABLE2_COLUMNS
    assert len(out) == 1  # reader B has no reads, rung r2 no contexts
    row = out.iloc[0]
    assert (row["slice"], row["reader"], row["rung"]) == ("s", "A", "r1")
    assert row["n_false_miss"] == 2 and row["correct_false_miss"] == pytest.approx(1 / 2)
    assert row["n_unscored_false_miss"] == 0
    assert row["n_true_miss"] == 2 and row["correct_true_miss"] == 0.0 and row["n_unscored_true_miss"] == 1
    assert row["n_no_docs"] == 2 and row["correct_no_docs"] == 0.0 and row["n_unscored_no_docs"] == 0
    # paired within turn over t1, t3: [1, 0] - [0, 0]
    assert row["diff"] == pytest.approx(1 / 2) and row["n_paired"] == 2
    ref = paired_bootstrap([1, 0], [0, 0], n_resamples=200, seed=0)
    assert (row["diff_ci_low"], row["diff_ci_high"]) == pytest.approx((ref["ci_low"], ref["ci_high"]))
    # one of the two no-document responses has a status line; it abstains
    assert row["abstain_no_docs"] == 1.0 and row["n_status_no_docs"] == 1
    assert row["n_no_status_no_docs"] == 1 and row["n_no_status_false_miss"] == 0
    assert row["n_no_status_true_miss"] == 0
    assert row["n_unlabelled"] == 1 and row["n_partial"] == 1  # t4 unlabelled, t2 partial
    # every response of A on r1's eight contexts: t2's has no status line
    assert (row["n_reads"], row["n_no_status"], row["share_no_status"]) == (8, 1, pytest.approx(1 / 8))


def test_table2_dialogue_clusters():
    c, lab, r = table2_frames()
    row = ab.table2(c, lab, r, make_ctx(boot={"n_resamples": 200, "seed": 0, "unit": "dialogue"})).iloc[0]
    ref = paired_cluster_bootstrap([1, 0], [0, 0], ["d1", "d2"], n_resamples=200, seed=0)
    assert (row["diff_ci_low"], row["diff_ci_high"]) == pytest.approx((ref["ci_low"], ref["ci_high"]))


# ---------------------------------------------------------------------------------------
# Figure 3 and the Table 3 AUROC columns
# ---------------------------------------------------------------------------------------

P = {1: 0.9, 2: 0.4, 3: 0.7, 4: 0.5, 5: 0.2}
CONTENT = {1: "yes", 2: "yes", 3: "partial", 4: "no", 5: "no"}
NO_GOLD = {1: False, 2: True, 3: False, 4: True, 5: True}


def auroc_frames(j2=True):
    c = [C(t, "r1", NO_GOLD[t]) for t in P]
    lab = [L(t, "r1", CONTENT[t]) for t in P]
    if j2:  # a second labeller that labels t1-t4 only (the common contexts)
        lab += [L(t, "r1", "yes" if t < 4 else "no", "j2") for t in range(1, 5)] + [L(5, "r1", None, "j2")]
    r = [R(t, "r1", "A", A, p=P[t]) for t in P]
    return frames(c, lab, r)


def test_figure3_auroc_by_hand_and_sklearn():
    c, lab, r = auroc_frames()
    out = ab.figure3(c, lab, r, make_ctx(labellers=["j1", "j2"]))
    assert list(out.columns) == ab.FIGURE3_COLUMNS
    f = out[~out["restricted"]].set_index(["measure", "label"])
    # content, yes vs no (t3's partial dropped): positives p .9 .4 vs negatives .5 .2: 3 of 4 pairs
    assert f.loc[("auroc", "j1"), "value"] == pytest.approx(3 / 4)
    assert f.loc[("auroc", "j1"), "value"] == pytest.approx(roc_auc_score([1, 1, 0, 0], [.9, .4, .5, .2]))
    assert (f.loc[("auroc", "j1"), "n"], f.loc[("auroc", "j1"), "n_pos"], f.loc[("auroc", "j1"), "n_dropped"]) == (4, 2, 1)
    # qrels: gold in t1 (.9) and t3 (.7), above every no-gold context
    assert f.loc[("auroc", "qrels"), "value"] == 1.0 and f.loc[("auroc", "qrels"), "n_pos"] == 2
    assert f.loc[("auroc", "j2"), "n"] == 4 and f.loc[("auroc", "j2"), "n_unlabelled"] == 1
    # the gap: content on its four contexts, qrels on its five, one resample of the five for both
    gap = f.loc[("gap", "j1")]
    assert gap["value"] == pytest.approx(3 / 4 - 1) and gap["n"] == 5
    assert (gap["auroc_content"], gap["auroc_qrels"], gap["n_content"], gap["n_qrels"]) == pytest.approx((3 / 4, 1.0, 4, 5))
    assert gap["ci_low"] <= gap["value"] <= gap["ci_high"]
    # restricted to the contexts both labels keep (t1, t2, t4, t5): content .9 .4 vs .5 .2 (3/4),
    # qrels .9 vs .4 .5 .2 (1)
    g = out[out["restricted"]].set_index(["measure", "label"])
    assert g.loc[("auroc", "j1"), "value"] == pytest.approx(3 / 4) and g.loc[("auroc", "j1"), "n"] == 4
    assert g.loc[("auroc", "qrels"), "n"] == 4 and g.loc[("auroc", "qrels"), "value"] == 1.0
    assert g.loc[("gap", "j1"), "value"] == pytest.approx(3 / 4 - 1.0)


def test_figure3_gap_is_zero_with_zero_width_ci_when_labels_agree():
    c = [C(t, "r1", NO_GOLD[t]) for t in P]
    lab = [L(t, "r1", "no" if NO_GOLD[t] else "yes") for t in P]
    r = [R(t, "r1", "A", A, p=P[t]) for t in P]
    out = ab.figure3(*frames(c, lab, r), make_ctx())
    gap = out[(out["measure"] == "gap") & ~out["restricted"]].iloc[0]
    assert gap["value"] == 0.0 and gap["ci_low"] == 0.0 and gap["ci_high"] == 0.0


def test_figure3_nan_auroc_when_one_class_is_absent_keeps_the_row():
    c = [C(t, "r1", False) for t in P]  # every context holds gold
    lab = [L(t, "r1", CONTENT[t]) for t in P]
    r = [R(t, "r1", "A", A, p=P[t]) for t in P] + [R(9, "r1", "A", A, p=None)]
    c.append(C(9, "r1", False))
    out = ab.figure3(*frames(c, lab, r), make_ctx())
    q = out[(out["label"] == "qrels") & ~out["restricted"]].iloc[0]
    assert math.isnan(q["value"]) and q["n"] == 5 and q["n_pos"] == 5 and q["n_no_p"] == 1
    # the content AUROC on the same contexts is defined (yes .9 .4 over no .5 .2; partial t3 dropped)
    j = out[(out["label"] == "j1") & (out["measure"] == "auroc") & ~out["restricted"]].iloc[0]
    assert j["value"] == pytest.approx(3 / 4)
    gap = out[(out["measure"] == "gap") & ~out["restricted"]].iloc[0]
    assert math.isnan(gap["value"]) and gap["n_resamples_used"] == 0


def test_auroc_columns_matches_figure3():
    c, lab, r = auroc_frames(j2=False)
    out = ab.auroc_columns(c, lab, r, make_ctx(), "A")
    assert list(out.columns) == ab.AUROC_COLUMNS_COLUMNS and len(out) == 1
    row = out.iloc[0]
    assert row["auroc_qrels"] == 1.0 and row["auroc_content"] == pytest.approx(3 / 4)
    assert (row["n_qrels"], row["n_pos_qrels"], row["n_content"], row["n_pos_content"]) == (5, 2, 4, 2)
    assert (row["n_dropped_qrels"], row["n_dropped_content"]) == (0, 1)
    assert ab.auroc_columns(c, lab, r, make_ctx(), "B").empty
    assert ab.auroc_columns(c, lab, r, make_ctx(), "A", slice="other").empty


# ---------------------------------------------------------------------------------------
# The 2b / 2c contrast
# ---------------------------------------------------------------------------------------


def test_contrast_2b_2c_by_hand():
    # rung r1: t1, t2 lack gold; j1 judges t1 t2 t4 t6 "no" (the retrieval failed under the content
    # label), t3 partial (neither), t5 yes
    c = [C(t, "r1", t <= 2) for t in range(1, 7)] + [C(t, "gold", False) for t in range(1, 7)]
    labels = {1: "no", 2: "no", 3: "partial", 4: "no", 5: "yes", 6: "no"}
    lab = [L(t, "r1", labels[t]) for t in range(1, 7)]
    rung = {1: U, 2: U, 3: A, 4: None, 5: U, 6: U}
    gold = {1: A, 2: U, 3: A, 4: A, 5: None, 6: A}
    r = [R(t, "r1", "A", rung[t]) for t in rung] + [R(t, "gold", "A", gold[t]) for t in gold]
    out = ab.contrast_2b_2c(*frames(c, lab, r), make_ctx())
    assert list(out.columns) == ab.CONTRAST_COLUMNS
    f = out.set_index("label")
    j = f.loc["j1"]
    # the four "no" turns: the rung's context refused 3 of 3 with a status line (t4 has none); the
    # gold (setting 2b) over every turn of the rung: U at t2 only, of the 5 with a status line (t5 has
    # none): 1/5 (§4.3: "than when it had the gold"; the same turns' gold, 1 of 4, is the within-turn side)
    assert j["n_turns"] == 4 and j["n_rung"] == 3 and j["n_gold"] == 5 and j["n_unlabelled"] == 1
    assert j["refusal_rung"] == 1.0 and j["refusal_gold"] == pytest.approx(0.2)
    assert j["pooled_diff"] == pytest.approx(0.8)
    assert j["pooled_ci_low"] <= 0.8 <= j["pooled_ci_high"]
    # within turn: t1, t2, t6 have both: [1, 1, 1] - [0, 1, 0]
    assert j["within_diff"] == pytest.approx(2 / 3) and j["n_paired"] == 3
    ref = paired_bootstrap([1, 1, 1], [0, 1, 0], n_resamples=200, seed=0)
    assert (j["within_ci_low"], j["within_ci_high"]) == pytest.approx((ref["ci_low"], ref["ci_high"]))
    assert j["n_no_status_rung"] == 1 and j["n_no_status_gold"] == 1
    # the same pooled interval straight from bootstrap_statistic over the six turns (the rung side
    # NaN where the label does not call the context insufficient)
    a, b = np.array([1, 1, NAN, NAN, NAN, 1]), np.array([0, 1, 0, 0, NAN, 0])

    def diff(x, y):  # NaN for a resample without a failed turn (skipped)
        return np.mean(x[~np.isnan(x)]) - np.mean(y[~np.isnan(y)]) if (~np.isnan(x)).any() else NAN
    ref = bootstrap_statistic([a, b], diff, n_resamples=200, seed=0)
    assert (j["pooled_ci_low"], j["pooled_ci_high"]) == pytest.approx((ref["ci_low"], ref["ci_high"]))
    # qrels: no gold in t1, t2; rung refusals U, U = 1; the gold of every turn 1/5 (pooled 1 - .2 = .8),
    # of the same turns A, U = 1/2 (within)
    q = f.loc["qrels"]
    assert q["n_turns"] == 2 and q["refusal_rung"] == 1.0 and q["refusal_gold"] == pytest.approx(0.2)
    assert q["pooled_diff"] == pytest.approx(0.8)
    assert q["within_diff"] == 0.5 and q["n_paired"] == 2


# ---------------------------------------------------------------------------------------
# Score detectors
# ---------------------------------------------------------------------------------------


def test_score_detectors_by_hand():
    top1 = {1: 10, 2: 8, 3: 9, 4: 7, 5: 5}
    margin = {1: 1, 2: 2, 3: 0.5, 4: 1.5, 5: 0.1}
    z = {1: 0.5, 2: 0.6, 3: 0.7, 4: 0.65, 5: 0.1}
    pa = {1: 0.9, 2: 0.8, 3: 0.3, 4: 0.2, 5: 0.6}
    ng = {1: False, 2: False, 3: True, 4: True, 5: True}
    c = [C(t, "r1", ng[t], top1[t], margin[t], z[t]) for t in top1]
    lab = [L(t, "r1", "no" if t >= 4 else "yes") for t in top1]
    r = [R(t, "r1", "A", A, p=pa[t]) for t in pa] + [R(t, "r1", "B", A, p=0.5) for t in pa]
    out = ab.score_detectors(*frames(c, lab, r), make_ctx())
    assert list(out.columns) == ab.SCORE_COLUMNS
    f = out[(out["label"] == "j1") & (out["measure"] == "auroc")].set_index("detector")
    # insufficient (positive): t4, t5
    assert f.loc["top1", "value"] == 1.0
    assert f.loc["margin", "value"] == pytest.approx(4 / 6)
    assert f.loc["top1_z", "value"] == pytest.approx(4 / 6)
    assert f.loc["A", "value"] == pytest.approx(5 / 6) and f.loc["B", "value"] == 0.5
    assert f.loc["top1", "n"] == 5 and f.loc["top1", "n_pos"] == 2
    assert f["best"].tolist() == [True, False, False, False, False]
    assert f.loc["A", "best_reader"] and not f.loc["B", "best_reader"]
    d = out[(out["label"] == "j1") & (out["measure"] == "top1_z_minus_reader")].set_index("detector")
    assert d.loc["A", "value"] == pytest.approx(4 / 6 - 5 / 6) and d.loc["A", "best_reader"]
    assert d.loc["B", "value"] == pytest.approx(4 / 6 - 0.5)
    y = np.array([0, 0, 0, 1, 1])
    sz = -np.array([z[t] for t in z])
    sa = 1 - np.array([pa[t] for t in pa])
    ref = bootstrap_statistic([y, sa, sz], lambda y, a, b: _auroc_ranks(y, b) - _auroc_ranks(y, a),
                              n_resamples=200, seed=0)
    assert (d.loc["A", "ci_low"], d.loc["A", "ci_high"]) == pytest.approx((ref["ci_low"], ref["ci_high"]))
    # under the qrels label (insufficient = no gold: t3-t5), checked against scikit-learn
    q = out[(out["label"] == "qrels") & (out["measure"] == "auroc")].set_index("detector")
    yq = [0, 0, 1, 1, 1]
    assert q.loc["top1", "value"] == pytest.approx(roc_auc_score(yq, [-top1[t] for t in top1]))
    assert q.loc["A", "value"] == pytest.approx(roc_auc_score(yq, [1 - pa[t] for t in pa]))
    # by hand: -top1 orders 5 of the 6 (no gold, gold) pairs; 1 - p(A) orders all 6, so the best
    # detector is the reader under the qrels label and top1 under the content label
    assert q.loc["top1", "value"] == pytest.approx(5 / 6) and q.loc["A", "value"] == 1.0
    assert q["best"].tolist() == [False, False, False, True, False]


# ---------------------------------------------------------------------------------------
# Kitagawa
# ---------------------------------------------------------------------------------------


def test_kitagawa_by_hand():
    # r1: t1-t4 insufficient (refused 3/4), t5-t8 sufficient (refused 1/4);
    # r2: t1-t2 insufficient (1/2), t3-t8 sufficient (1/6). t9: unlabelled at r1, no status at r2.
    c = [C(t, rung, False) for t in range(1, 10) for rung in ("r1", "r2")]
    lab = ([L(t, "r1", "no" if t <= 4 else "yes") for t in range(1, 9)] + [L(9, "r1", None)]
           + [L(t, "r2", "no" if t <= 2 else "yes") for t in range(1, 10)])
    s1 = {1: U, 2: U, 3: U, 4: A, 5: U, 6: A, 7: A, 8: A, 9: A}
    s2 = {1: U, 2: A, 3: U, 4: A, 5: A, 6: A, 7: A, 8: A, 9: None}
    r = [R(t, "r1", "A", s1[t]) for t in s1] + [R(t, "r2", "A", s2[t]) for t in s2]
    out = ab.kitagawa_table(*frames(c, lab, r), make_ctx())
    assert list(out.columns) == ab.KITAGAWA_COLUMNS and len(out) == 1
    row = out.iloc[0]
    assert (row["from_rung"], row["to_rung"]) == ("r1", "r2")
    assert row["refusal_from"] == pytest.approx(0.5) and row["refusal_to"] == pytest.approx(0.25)
    assert row["total"] == pytest.approx(-0.25)
    rate = (1 / 6 - 1 / 4) * (0.75 + 0.5) / 2 + (1 / 2 - 3 / 4) * (0.25 + 0.5) / 2
    comp = (0.75 - 0.5) * (1 / 6 + 1 / 4) / 2 + (0.25 - 0.5) * (1 / 2 + 3 / 4) / 2
    assert row["rate"] == pytest.approx(rate) and row["composition"] == pytest.approx(comp)
    assert row["rate"] + row["composition"] == pytest.approx(row["total"])
    assert row["share_sufficient_from"] == 0.5 and row["share_sufficient_to"] == 0.75
    assert row["refusal_sufficient_to"] == pytest.approx(1 / 6) and row["refusal_insufficient_from"] == 0.75
    assert (row["n_from"], row["n_to"]) == (8, 8)
    assert row["n_unlabelled_from"] == 1 and row["n_no_status_to"] == 1 and row["n_no_status_from"] == 0


# ---------------------------------------------------------------------------------------
# Changed conclusions
# ---------------------------------------------------------------------------------------


def test_changed_summary_skips_undefined():
    df = pd.DataFrame({"defined": [True, False], "sign_change": [True, False],
                       "significance_change": [False, False], "changed": [True, False]})
    assert ab.changed_summary(df) == {"total": 1, "changed": 1, "by_sign": 1, "by_significance": 0, "undefined": 1}


# ---------------------------------------------------------------------------------------
# Empty inputs, missing columns, bad values
# ---------------------------------------------------------------------------------------

FUNCS = [(ab.table2, ab.TABLE2_COLUMNS), (ab.figure3, ab.FIGURE3_COLUMNS),
         (ab.contrast_2b_2c, ab.CONTRAST_COLUMNS), (ab.score_detectors, ab.SCORE_COLUMNS),
         (ab.kitagawa_table, ab.KITAGAWA_COLUMNS)]


@pytest.mark.parametrize("func,cols", FUNCS)
def test_empty_inputs_give_empty_frames(func, cols):
    e = pd.DataFrame()
    out = func(e, e, e, make_ctx())
    assert out.empty and list(out.columns) == cols
    c, lab, _ = table2_frames()  # contexts but no reads
    out = func(c, lab, e, make_ctx())
    assert list(out.columns) == cols
    if func is ab.score_detectors:  # the retrieval scores need no reader (all NaN here)
        assert set(out["kind"]) == {"retrieval"} and len(out) == 6 and out["value"].isna().all()
    else:
        assert out.empty
    out = ab.auroc_columns(e, e, e, make_ctx(), "A")
    assert out.empty and list(out.columns) == ab.AUROC_COLUMNS_COLUMNS


def test_missing_columns_raise_data_error_naming_them():
    c, lab, r = auroc_frames(j2=False)
    with pytest.raises(DataError, match="no_gold"):
        ab.figure3(c.drop(columns=["no_gold"]), lab, r, make_ctx())
    with pytest.raises(DataError, match="p_answerable"):
        ab.figure3(c, lab, r.drop(columns=["p_answerable"]), make_ctx())
    with pytest.raises(DataError, match="labeller"):
        ab.table2(c, lab.drop(columns=["labeller"]), r, make_ctx())
    with pytest.raises(DataError, match="top1_z"):
        ab.score_detectors(c.drop(columns=["top1_z"]), lab, r, make_ctx())
    with pytest.raises(DataError, match="status"):
        ab.contrast_2b_2c(c, lab, r.drop(columns=["status"]), make_ctx())


def test_bad_values_and_config():
    c, lab, r = auroc_frames(j2=False)
    bad = r.copy()
    bad.loc[0, "status"] = "MAYBE"
    with pytest.raises(DataError, match="MAYBE"):
        ab.contrast_2b_2c(c, lab, bad, make_ctx())
    with pytest.raises(DataError, match="key"):
        ab.figure3(pd.concat([c, c.iloc[:1]]), lab, r, make_ctx())
    with pytest.raises(ConfigError, match="ladder"):
        ab.figure3(c, lab, r, make_ctx(ladder=None))
    with pytest.raises(ConfigError, match="unit"):
        ab.figure3(c, lab, r, make_ctx(boot={"unit": "question"}))


def test_slices_and_per_slice_ladder():
    c, lab, r = auroc_frames(j2=False)
    c2, lab2, r2 = (df.assign(slice="m") for df in (c, lab, r))
    c2["set"], lab2["set"], r2["set"] = "q1", "q1", "q1"
    ctx = make_ctx(ladder={"s": ["r1"], "m": ["q1"]}, main_slice="m", replication_slice="s")
    out = ab.auroc_columns(pd.concat([c, c2]), pd.concat([lab, lab2]), pd.concat([r, r2]), ctx, "A")
    assert out[["slice", "rung"]].values.tolist() == [["m", "q1"], ["s", "r1"]]
    assert out["auroc_content"].tolist() == pytest.approx([3 / 4, 3 / 4])
