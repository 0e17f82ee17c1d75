"""worse_labels' calibrated rehearsal (issue 40, item 4: proof of the verdict rules without a GPU).

Per-unit values are drawn as exact counts so that each published number worse_labels can drive
lands on its published value (those rows must read "reproduced"); moved by three of our 95%
interval widths (three tolerances and a step for a deterministic number), "not reproduced". The
entries it cannot drive are listed with why, and the set is pinned here so that a new one is
noticed.

The paper config is cut to keep the test fast, every driven entry's row kept: the four small
judges of the panel, the readers but Qwen3-4B (Table 3's) and the answer judges go; no driven
entry reads them (the panel's and readers' numbers are aggregates or AUROCs, undriven either way).
The slices are drawn at the paper's size: RECOR dev's 858 turns in 211 dialogues of 3-5 turns,
MTRAG's 777 (their counts are entries, and a share's interval is as narrow as the paper's only
there).
"""

import math
import time

import pandas as pd
import pytest

from convrag.config import REPO_ROOT, load_config
from convrag.report.rehearsal import RESOLVED, plan, rehearse_calibrated
from convrag.report.reproduction import load_published, published_path
from convrag.studies import get_study

QUICK = 50  # bootstrap resamples

# drawn, but at the paper's size their 95% interval is wider than the width rule's four margins
TOO_WIDE = {"precision_no_gold_phi4.bm25_hist", "precision_no_gold_other.bm25_hist.phi4", "precision_no_gold_phi4.fusion",
            "precision_no_gold_other.qwen3_14b.hybrid", "precision_no_gold_other.bm25_hist.qwen3_14b",
            "false_miss_share.fusion", "false_miss_share.hybrid", "youden_j.hybrid",
            "partial_as_insufficient.precision.hybrid", "table3_mtrag.precision_no_gold.hybrid",
            "table3_mtrag.precision_no_gold.dense"}
AGREEMENT = {f"agreement.{m}.{p}" for m in ("binary_kappa", "raw_three_label") for p in
             ("phi4_qwen14b", "audit_phi4", "audit_qwen14b")} | {
    "agreement.cohen_kappa_phi4_qwen14b", "agreement.cohen_kappa_audit_phi4", "agreement.cohen_kappa_audit_qwen14b"}
AUROC_DIFFS = {f"auroc_gap_qwen3_4b.{r}" for r in ("bm25_turn", "bm25_hist", "fusion", "hybrid")} | {
    f"score_detectors.sign_change_top1z_minus_qwen3_4b.{r}.{l}" for r in ("bm25_turn", "bm25_hist")
    for l in ("qrels", "content")}
AUDIT = {f"precision_no_gold_other.audit.{r}" for r in ("bm25_turn", "bm25_hist", "fusion", "hybrid")} | {
    "precision_no_gold_other.bm25_hist.audit"}
CONTRASTS = {"contrast_2b_2c.fusion", "contrast_2b_2c.hybrid", "table3_mtrag.within_turn_contrast_hybrid.content",
             "table3_mtrag.within_turn_contrast_hybrid.qrels"}
PAIRED = {"precision_no_gold_phi4.fusion_to_hybrid", "youden_j.diff", "table3_mtrag.dense_minus_questions_precision"}
OTHER = {"false_miss_evidence.precision_discounting_dialogue_tied.bm25_turn",
         "false_miss_evidence.precision_discounting_dialogue_tied.hybrid", "copy_detection.fusion_over_bm25_turn",
         "negative_control.phi4_count", "ndcg10.query2doc_bm25.paper_expansions"}
WITH_INTERVAL = TOO_WIDE | AGREEMENT | AUROC_DIFFS | AUDIT | CONTRASTS | PAIRED | OTHER


def _cut(cfg: dict) -> dict:
    w = cfg["worse_labels"]
    w["judges"]["panel"] = []
    w["readers"]["models"] = ["qwen3-4b-instruct-2507"]
    w["judges"]["answer"] = []
    return cfg


def _epsilon(scale: str) -> float:
    """The step added to a deterministic number's tolerance: one unit of a count, a thousandth
    of a share."""
    return {"count": 1.0, "share": 0.001}.get(scale, 0.01)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    cfg = _cut(load_config(REPO_ROOT / "config" / "studies" / "worse_labels.yaml"))
    study = get_study("worse_labels")
    t0 = time.time()
    tables, undriven = rehearse_calibrated(study, cfg, tmp_path_factory.mktemp("worse_labels_calibrated"), shift=0,
                                           n_resamples=QUICK)
    print(f"calibrated rehearsal at shift 0: {time.time() - t0:.0f} s")
    df = plan(study, cfg, tables).set_index("id")
    repro = pd.read_csv(tables["reproduction"]).set_index("id")
    return cfg, study, df, repro, undriven


def test_the_undriven_entries_are_pinned_with_their_reasons(calibrated):
    _, _, df, repro, undriven = calibrated
    pub = load_published(published_path("worse_labels"), "worse_labels")
    given = {e.id for e in pub.entries if e.ours is not None and e.kind != "statement"}
    for eid, why in sorted(undriven.items()):  # shown on failure (-rA), one line each
        print(f"undriven {eid}: {why}")
    assert set(undriven) <= given and len(given) == 190
    # 103 estimates whose tables give no 95% interval (42 of them aggregates over rows): inconclusive
    # whatever their value; those this rehearsal draws (Table 3's no-gold and false-miss shares and
    # nDCG of the hybrid and dense) stand at their value all the same
    no_interval = {i for i, why in undriven.items() if "gives no 95% interval" in why}
    assert len(no_interval) == 103 and sum("an aggregate" in undriven[i] for i in no_interval) == 42
    for eid in no_interval:
        assert math.isnan(repro.loc[eid, "ours_ci_low"]) and repro.loc[eid, "verdict"] != "reproduced", eid
    for r in ("questions_bm25", "hybrid", "dense"):
        assert abs(repro.loc[f"table3_mtrag.no_gold.{r}", "ours"] - repro.loc[f"table3_mtrag.no_gold.{r}", "published"]) < 0.005
    # the 45 with an interval, by reason
    assert set(undriven) - no_interval == WITH_INTERVAL
    for eid in TOO_WIDE:  # drawn at the value, but no size the paper has makes the interval narrow enough
        assert "wide, more than four margins" in undriven[eid], eid
        assert abs(repro.loc[eid, "ours"] - repro.loc[eid, "published"]) < 0.02, eid
    assert all("joint label table" in undriven[i] for i in AGREEMENT)
    assert all("two AUROCs" in undriven[i] for i in AUROC_DIFFS)
    assert all("fixed sample" in undriven[i] for i in AUDIT)
    assert all("refusal shares" in undriven[i] for i in CONTRASTS)
    assert all("difference of two drawn numbers" in undriven[i] for i in PAIRED)
    for eid in PAIRED - {"table3_mtrag.dense_minus_questions_precision"}:  # land with their two ends
        assert repro.loc[eid, "ours"] == pytest.approx(repro.loc[eid, "published"], abs=0.01), eid
    judged = set(df.index[df.judged])
    driven = given - set(undriven)
    # 42 driven, all judged: 42 of the 190 numbers (22%); of the 87 that have a 95% interval or a
    # tolerance (those a draw can bring to "reproduced"), 42 (48%)
    assert len(driven) == 42 and driven <= judged
    assert len(driven) + len(WITH_INTERVAL) == 87


def test_every_driven_judged_number_is_reproduced_at_its_published_value(calibrated):
    _, _, df, repro, undriven = calibrated
    judged = [i for i in df.index[df.judged] if i not in undriven and repro.loc[i, "kind"] != "statement"]
    assert len(judged) == 42 and (df.loc[judged, "status"] == RESOLVED).all()
    for eid in judged:
        r = repro.loc[eid]
        assert r.verdict == "reproduced", (eid, r.ours, r.reason)
        if r.kind == "deterministic":
            assert abs(r.ours - r.published) <= r.tolerance, eid
        else:
            assert r.ours_ci_low <= r.published <= r.ours_ci_high, eid
    # the paper's shape drawn as counts: 858 turns in 211 dialogues of 3-5 turns, 4,290 contexts judged
    assert repro.loc["data.recor.turns", "ours"] == 858 and repro.loc["data.recor.dialogues", "ours"] == 211
    assert repro.loc["data.recor.contexts_judged", "ours"] == 4290 and repro.loc["data.mtrag.turns", "ours"] == 777
    # both readings of BM25-turn's nDCG (.183 and the official .1827) met at once
    assert abs(repro.loc["ndcg10.bm25_turn", "ours"] - 0.1827) <= 0.00005
    assert repro.loc["negative_control.phi4", "ours"] == pytest.approx(35 / 858)


def test_three_widths_away_every_driven_judged_number_is_not_reproduced(calibrated, tmp_path):
    cfg, study, df, repro, undriven = calibrated
    judged = [i for i in df.index[df.judged] if i not in undriven and repro.loc[i, "kind"] != "statement"]
    widths = {}
    for eid in judged:
        r = repro.loc[eid]
        # an interval of width 0 (Qwen3-14B's control share: none of 858) moves by a share's hundredth
        widths[eid] = (r.tolerance + _epsilon(r.scale) if r.kind == "deterministic"
                       else max(r.ours_ci_high - r.ours_ci_low, 0.01))
        assert math.isfinite(widths[eid]) and widths[eid] > 0, eid
    tables, moved_undriven = rehearse_calibrated(study, cfg, tmp_path, shift=3, widths=widths, n_resamples=QUICK)
    moved = pd.read_csv(tables["reproduction"]).set_index("id")
    for eid in judged:
        r = moved.loc[eid]
        assert r.verdict == "not reproduced", (eid, r.ours, r.reason)
    # moved together, some cannot all reach their targets: they give way and say so, still moved
    # (BM25-turn's two nDCG readings cannot both move; a minimum of 6 turns per dialogue takes
    # fewer dialogues than 214; the hybrid keeps a tenth of its turns without gold for its labels)
    gave_way = set(moved_undriven) - set(undriven)
    assert {"ndcg10.official_baselines_exact.bm25_turn", "data.recor.dialogues", "gold_in_top5.hybrid"} <= gave_way
    assert gave_way <= set(judged)
