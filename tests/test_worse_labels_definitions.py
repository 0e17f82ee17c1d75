"""The Worse Labels paper's definitions, worked by hand on small labelled sets (issue 41).

The paper (§3) compares "yes" with "no" and drops "partial" in every binary metric, scores the
qrels label's AUROC as "all" vs "none" (Figure 3), and gives the false-miss share as the share of
no-gold contexts a judge finds sufficient (§4.1). On the set below, dropping "partial" (and
"part") changes each value: the precision of "no gold", Youden's J and both AUROCs; the values of
the other convention (partial counted as sufficient, any gold counted as sufficient) are written
beside them to show the difference.
"""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from convrag.stats.detection import detector_report, paired_detector_change
from convrag.studies.worse_labels import abstention as ab
from convrag.studies.worse_labels import label_quality as lq

BOOT = {"n_resamples": 200, "seed": 0, "unit": "turn"}

# ten contexts of one rung: (qrels label, content label of j1, reader A's p(answerable))
SET = {
    "t0": ("all", "yes", 0.95),
    "t1": ("all", "yes", 0.45),
    "t2": ("all", "partial", 0.30),
    "t3": ("part", "yes", 0.90),
    "t4": ("part", "no", 0.20),
    "t5": ("none", "yes", 0.80),
    "t6": ("none", "partial", 0.85),
    "t7": ("none", "no", 0.10),
    "t8": ("none", "no", 0.40),
    "t9": ("none", "no", 0.50),
}


def _frames(items=SET, rung="r"):
    c, lab, rd = [], [], []
    for i, (t, (q, label, p)) in enumerate(items.items()):
        c.append({"slice": "s", "domain": "d", "dialogue": f"D{i // 2}", "task_id": t, "turn": 1, "set": rung,
                  "doc_ids": ["a", "b"], "n_gold": 2, "n_gold_in": {"all": 2, "part": 1, "none": 0}[q],
                  "qrels_label": q, "no_gold": q == "none", "has_copy": False, "doc_classes": ["other", "other"],
                  "top1": np.nan, "margin": np.nan, "top1_z": np.nan, "ndcg10": 0.5})
        lab.append({"slice": "s", "task_id": t, "set": rung, "labeller": "j1", "label": label, "support": []})
        rd.append({"slice": "s", "task_id": t, "set": rung, "reader": "A", "status": "ANSWERABLE",
                   "p_answerable": p, "answer": "", "correctness": None, "correct": None})
    return pd.DataFrame(c), pd.DataFrame(lab), pd.DataFrame(rd)


def _ctx(**kw):
    return {"ladder": ["r"], "primary": "j1", "labellers": ["j1"], "readers": ["A"], "main_slice": "s",
            "replication_slice": None, "boot": dict(BOOT), **kw}


def test_precision_and_youden_drop_partial_by_hand():
    c, lab, _ = _frames()
    r = lq.figure2b(c, lab, _ctx()).iloc[0]
    # no gold: t5 yes, t6 partial, t7-t9 no. Partial dropped: 3 "no" of the 4 judged yes or no
    assert r.precision == pytest.approx(3 / 4) and (r.n_no_gold, r.n_no_gold_binary) == (5, 4)
    # the other conventions, named: partial sufficient 3/5, partial insufficient 4/5
    assert r.precision_partial_sufficient == pytest.approx(3 / 5)
    assert r.precision_partial_insufficient == pytest.approx(4 / 5)
    # Youden's J over the 8 contexts judged yes or no: "no" t4 t7 t8 t9, flagged t7-t9: recall 3/4;
    # "yes" t0 t1 t3 t5, flagged t5: specificity 3/4; J = 1/2
    assert (r.recall, r.specificity, r.youden_j) == pytest.approx((3 / 4, 3 / 4, 1 / 2))
    assert (r.n_binary, r.n_partial) == (8, 2)
    # partial counted as sufficient instead: specificity 4/6 (t5, t6 flagged of six), J = 5/12
    ng = c["no_gold"].to_numpy(bool)
    old = detector_report(ng, lab["label"].tolist(), partial="sufficient", n_resamples=20)
    assert old["youden_j"]["estimate"] == pytest.approx(5 / 12)
    # the false-miss share: "yes" among all five no-gold contexts (1/5); "now including partial" 2/5
    assert r.false_miss_share == pytest.approx(1 / 5) and r.false_miss_share_with_partial == pytest.approx(2 / 5)
    assert r.partial_share_no_gold == pytest.approx(1 / 5)
    assert r.precision_ci_low <= r.precision <= r.precision_ci_high
    assert r.youden_j_ci_low <= r.youden_j <= r.youden_j_ci_high


def test_both_aurocs_drop_their_middle_label_by_hand():
    c, lab, rd = _frames()
    out = ab.figure3(c, lab, rd, _ctx())
    f = out[~out["restricted"]].set_index(["measure", "label"])
    # content, yes vs no (partial t2, t6 dropped): positives .95 .45 .90 .80 over negatives .20 .10
    # .40 .50: every pair ordered but .45 < .50, so 15 of 16
    assert f.loc[("auroc", "j1"), "value"] == pytest.approx(15 / 16)
    assert (f.loc[("auroc", "j1"), "n"], f.loc[("auroc", "j1"), "n_dropped"]) == (8, 2)
    # qrels, all vs none (part t3, t4 dropped): positives .95 .45 .30 over negatives .80 .85 .10 .40
    # .50: 5 + 2 + 1 = 8 of 15
    assert f.loc[("auroc", "qrels"), "value"] == pytest.approx(8 / 15)
    assert (f.loc[("auroc", "qrels"), "n"], f.loc[("auroc", "qrels"), "n_dropped"]) == (8, 2)
    # the other conventions give other values: partial sufficient 21/24, any gold sufficient 14/25
    p = np.array([v[2] for v in SET.values()])
    assert roc_auc_score([v[1] != "no" for v in SET.values()], p) == pytest.approx(21 / 24)
    assert roc_auc_score([v[0] != "none" for v in SET.values()], p) == pytest.approx(14 / 25)
    # the gap: each AUROC over the contexts its own label keeps, on one resample of contexts
    gap = f.loc[("gap", "j1")]
    assert gap["value"] == pytest.approx(15 / 16 - 8 / 15)
    assert (gap["auroc_content"], gap["auroc_qrels"]) == pytest.approx((15 / 16, 8 / 15))
    assert (gap["n_content"], gap["n_qrels"], gap["n"]) == (8, 8, 10)
    assert gap["ci_low"] <= gap["value"] <= gap["ci_high"]
    # restricted to the contexts both labels keep (t0 t1 t5 t7 t8 t9): content 8/9, qrels 6/8
    g = out[out["restricted"]].set_index(["measure", "label"])
    assert g.loc[("gap", "j1"), "value"] == pytest.approx(8 / 9 - 6 / 8) and g.loc[("gap", "j1"), "n"] == 6
    assert g.loc[("auroc", "qrels"), "value"] == pytest.approx(6 / 8)
    # Table 3's AUROC columns are the unrestricted ones
    a = ab.auroc_columns(c, lab, rd, _ctx(), "A").iloc[0]
    assert (a["auroc_qrels"], a["auroc_content"]) == pytest.approx((8 / 15, 15 / 16))
    assert (a["n_dropped_qrels"], a["n_dropped_content"]) == (2, 2)


def test_the_papers_bm25_turn_numbers_fit_only_its_definition():
    # §4.1 on BM25-turn: no-gold contexts judged yes .28, partial .11, no .61 (100 here)
    items = {f"t{i}": ("none", "yes" if i < 28 else ("partial" if i < 39 else "no"), 0.5) for i in range(100)}
    c, lab, _ = _frames(items)
    r = lq.figure2b(c, lab, _ctx()).iloc[0]
    assert r.precision == pytest.approx(61 / 89)  # .685: the published .68 [.65, .72]
    assert r.precision_partial_sufficient == pytest.approx(0.61)  # the convention the paper does not use
    assert r.false_miss_share == pytest.approx(0.28)  # "28%"
    # the second setting (partial counted insufficient): precision .72, false misses now including partial .39
    assert r.precision_partial_insufficient == pytest.approx(0.72)
    assert r.false_miss_share_with_partial == pytest.approx(0.39)


def test_the_change_between_rungs_drops_partial_at_each_rung():
    # rung a: t0-t3 no gold, labels no, no, partial, yes -> 2/3; rung b: the same turns, labels
    # partial, yes, no, yes -> 1/3; change 1/3 - 2/3 (t0 and t2 are partial at one rung only)
    la, lb = ["no", "no", "partial", "yes"], ["partial", "yes", "no", "yes"]
    ng = np.ones(4, dtype=bool)
    ch = paired_detector_change(ng, la, ng, lb, partial="drop", n_resamples=50)
    assert (ch["value_a"], ch["value_b"], ch["estimate"]) == pytest.approx((2 / 3, 1 / 3, -1 / 3))
    assert ch["n_partial_dropped"] == 2
    # partial counted sufficient instead: 2/4 -> 1/4
    old = paired_detector_change(ng, la, ng, lb, partial="sufficient", n_resamples=50)
    assert old["estimate"] == pytest.approx(-1 / 4)


def test_table2_false_and_true_misses_are_yes_and_no():
    c, lab, rd = _frames()
    rd["correct"] = [True, True, False, True, False, True, True, False, True, False]
    out = ab.table2(c, lab, rd, _ctx()).iloc[0]
    # no gold: false miss t5 (yes), true misses t7-t9 (no); t6 (partial) is neither
    assert (out["n_false_miss"], out["n_true_miss"], out["n_partial"]) == (1, 3, 1)
    assert out["correct_false_miss"] == 1.0 and out["correct_true_miss"] == pytest.approx(1 / 3)


def test_the_2b_2c_contrast_takes_the_contexts_the_label_calls_insufficient():
    c, lab, rd = _frames()
    gold = c.assign(set="gold", qrels_label="all", no_gold=False)
    c = pd.concat([c, gold], ignore_index=True)
    refuse = {"t4": True, "t7": True, "t8": False, "t9": True, "t5": False, "t6": True}
    rd["status"] = ["UNANSWERABLE" if refuse.get(t) else "ANSWERABLE" for t in rd["task_id"]]
    rd = pd.concat([rd, rd.assign(set="gold", status="ANSWERABLE")], ignore_index=True)
    out = ab.contrast_2b_2c(c, lab, rd, _ctx()).set_index("label")
    # content: "no" contexts t4, t7, t8, t9 refuse 3 of 4, gold none: +.75
    assert out.loc["j1", "n_turns"] == 4 and out.loc["j1", "pooled_diff"] == pytest.approx(0.75)
    # qrels: "none" contexts t5-t9 refuse t6 t7 t9: 3 of 5
    assert out.loc["qrels", "n_turns"] == 5 and out.loc["qrels", "pooled_diff"] == pytest.approx(0.6)
    assert out.loc["j1", "n_paired"] == 4


def test_the_pooled_2b_2c_contrast_compares_with_the_gold_of_every_turn():
    """§4.3: "whether a reader refuses more when its retrieval failed than when it had the gold";
    "compared within turns" is the second reading, so the first compares the failed retrievals
    with the 2b setting as a whole. Six turns; j1 calls t1, t2 "no" (qrels: no gold there too).
    The reader refuses t1, t2 with the rung's context AND with their gold (hard turns), answers
    everything else: pooled 2/2 - 2/6 = +2/3 (over the failed turns' gold only it would be 0),
    within turn [1, 1] - [1, 1] = 0 on 2 turns."""
    from convrag.studies.worse_labels import followups as F

    c, lab, rd = [], [], []
    for i in range(1, 7):
        t, fail = f"t{i}", i <= 2
        for st in ("r", "gold"):
            q = "none" if (fail and st == "r") else "all"
            c.append({"slice": "s", "dialogue": f"D{i}", "task_id": t, "set": st, "qrels_label": q,
                      "no_gold": q == "none", "top1_z": 0.0})
            lab.append({"slice": "s", "task_id": t, "set": st, "labeller": "j1", "label": "no" if fail and st == "r"
                        else "yes"})
            rd.append({"slice": "s", "task_id": t, "set": st, "reader": "A", "p_answerable": 0.5,
                       "status": "UNANSWERABLE" if fail else "ANSWERABLE"})
    c, lab, rd = pd.DataFrame(c), pd.DataFrame(lab), pd.DataFrame(rd)
    out = ab.contrast_2b_2c(c, lab, rd, _ctx()).set_index("label")
    for label in ("j1", "qrels"):
        r = out.loc[label]
        assert (r["n_turns"], r["n_rung"], r["n_gold"]) == (2, 2, 6)
        assert (r["refusal_rung"], r["refusal_gold"]) == pytest.approx((1.0, 1 / 3))
        assert r["pooled_diff"] == pytest.approx(2 / 3)
        assert (r["within_diff"], r["n_paired"]) == (0.0, 2)
    # the 258 comparisons' 2b/2c family reads the same pooled contrast
    k = F.changed_all(c, lab, rd, _ctx(ladder={"s": ["r"]}))
    k = k[k["comparison"] == "contrast_2b_2c"].iloc[0]
    assert (k["est_base"], k["est_other"]) == pytest.approx((2 / 3, 2 / 3))


def test_a_response_without_a_status_line_leaves_the_aurocs():
    # §3: such responses are excluded from refusal rates and AUROCs; label mode still scored a p
    c, lab, rd = _frames()
    rd.loc[rd["task_id"] == "t1", "status"] = None  # t1 (all, yes, p .45) has no status line
    f = ab.figure3(c, lab, rd, _ctx())
    f = f[~f["restricted"]].set_index(["measure", "label"])
    # content: positives .95 .90 .80 over .20 .10 .40 .50: 12 of 12; qrels: .95 .30 over the five: 5 + 1
    assert f.loc[("auroc", "j1"), "value"] == 1.0 and f.loc[("auroc", "j1"), "n_no_p"] == 1
    assert f.loc[("auroc", "qrels"), "value"] == pytest.approx(6 / 10)
