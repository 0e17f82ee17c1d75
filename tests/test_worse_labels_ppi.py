"""worse_labels' judge_corrected table (``convrag.studies.worse_labels.corrected``): the stratified
PPI of the share of sufficient contexts per retriever set against hand computation (strata,
scorings, unreadable labels, design-weighted agreement, the difference between sets), overlapping
strata, the audit-off rows with their reason, and the target built by the report machinery."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml

from convrag.studies.worse_labels.corrected import AUDIT_OFF, COLUMNS, judge_corrected

Z95 = 1.959963984540054
STRATA = [{"set": "A", "qrels_label": "none", "n": 3}, {"set": "A", "qrels_label": "any_gold", "n": 2},
          {"set": "B", "qrels_label": "none", "n": 2}]

# (set, task, qrels label, judge label, audit final; "-" = not audited)
CONTEXTS = [
    # A without gold: judge yes yes no yes no yes; audited t1-t4 (t4's final unreadable)
    ("A", "t1", "none", "yes", "yes"), ("A", "t2", "none", "yes", "no"), ("A", "t3", "none", "no", "no"),
    ("A", "t4", "none", "yes", None), ("A", "t5", "none", "no", "-"), ("A", "t6", "none", "yes", "-"),
    # A with gold: judge no no yes no; audited t7, t8
    ("A", "t7", "all", "no", "yes"), ("A", "t8", "part", "no", "no"), ("A", "t9", "all", "yes", "-"),
    ("A", "t10", "all", "no", "-"),
    # B without gold: yes partial no yes, t5 unreadable; audited t1, t2; B with gold: outside every stratum
    ("B", "t1", "none", "yes", "yes"), ("B", "t2", "none", "partial", "no"), ("B", "t3", "none", "no", "-"),
    ("B", "t4", "none", "yes", "-"), ("B", "t5", "none", None, "-"), ("B", "t6", "all", "yes", "-"),
    ("B", "t7", "all", "yes", "-"),
]


def _frames():
    c = pd.DataFrame([{"slice": "s", "task_id": t, "set": st, "qrels_label": q, "doc_ids": ["d"]}
                      for st, t, q, *_ in CONTEXTS])
    rows = [{"slice": "s", "task_id": t, "set": st, "labeller": "j", "label": j, "support": []}
            for st, t, _, j, _ in CONTEXTS]
    rows += [{"slice": "s", "task_id": t, "set": st, "labeller": "audit", "label": a, "support": []}
             for st, t, _, _, a in CONTEXTS if a != "-"]
    rows += [{"slice": "other", "task_id": "t1", "set": "A", "labeller": "j", "label": "no", "support": []}]
    return c, pd.DataFrame(rows)


def _ctx(**kw):
    return {"main_slice": "s", "ladders": {"s": ["A", "B"], "other": ["A"]}, "labellers": ["j"], "audit": True,
            "audit_strata": STRATA, "ppi": {"alpha": 0.05, "tuned": False}, **kw}


def _row(t, scoring, system, row="system"):
    hit = t[(t.scoring == scoring) & (t.system == system) & (t.row == row)]
    assert len(hit) == 1
    return hit.iloc[0]


def test_stratified_estimate_by_hand():
    c, lab = _frames()
    t = judge_corrected(c, lab, _ctx())
    assert list(t.columns) == COLUMNS
    assert list(t.scoring.unique()) == ["yes", "partial_half", "yes_or_partial"]
    assert set(t.slice) == {"s"} and set(t.judge) == {"j"}
    a = _row(t, "yes", "A")
    # stratum "A none": f = 1 1 0 1 0 1 (N 6), audited and readable t1-t3: f 1 1 0, y 1 0 0
    #   -> estimate 2/3 - 1/3 = 1/3, se^2 = (1/3)/6 + (1/3 - 1/6)(1/3) = 1/9
    # stratum "A any_gold": f = 0 0 1 0 (N 4), audited t7, t8: f 0 0, y 1 0 -> 1/4 + 1/2 = 3/4, se^2 1/4
    # combined, weights 6/10 and 4/10: 0.5, se^2 = .36/9 + .16/4 = .08 (tests/test_stats_ppi.py's example)
    assert a["estimate"] == pytest.approx(0.5) and a["se"] == pytest.approx(math.sqrt(0.08))
    assert (a["low"], a["high"]) == pytest.approx((0.5 - Z95 * math.sqrt(0.08), 0.5 + Z95 * math.sqrt(0.08)))
    assert a["judge_mean"] == pytest.approx(0.5) and a["audit_mean"] == pytest.approx(0.4)
    assert (a["n_labelled"], a["n_all"], a["n_unjudged"], a["n_audit_unread"]) == (5, 10, 0, 1)
    assert a["population"] == "A: qrels none + qrels any_gold" and pd.isna(a["reason"]) and a["lam"] == 1.0
    # agreement on the 5 audited contexts, each weighted N_h / n_h = 2: (1,1) (1,0) (0,0) (0,1) (0,0)
    assert a["agreement"] == pytest.approx(0.6) and a["judge_bias"] == pytest.approx(0.0)
    b = _row(t, "yes", "B")
    # B: only its stratum without gold (4 judged, t5 unreadable; its gold contexts are in no stratum):
    # f 1 0 0 1, audited f 1 0, y 1 0 -> residual 0: estimate .5, se^2 = s^2(y)/N = .5/4
    assert b["estimate"] == pytest.approx(0.5) and b["se"] == pytest.approx(math.sqrt(0.125))
    assert (b["n_all"], b["n_unjudged"], b["n_labelled"]) == (4, 1, 2) and b["agreement"] == pytest.approx(1.0)
    # partial = 0.5: f 1 .5 0 1 (mean .625), audited f 1 .5, y 1 0: residual 0 -.5 (mean -.25, s^2 .125)
    # -> .375, se^2 = .5/4 + (1/2 - 1/4) .125 = .15625
    bh = _row(t, "partial_half", "B")
    assert bh["judge_mean"] == pytest.approx(0.625) and bh["estimate"] == pytest.approx(0.375)
    assert bh["se"] == pytest.approx(math.sqrt(0.15625)) and bh["agreement"] == pytest.approx(0.5)
    # yes or partial = sufficient: f 1 1 0 1 (.75), audited f 1 1, y 1 0 -> .75 - .5 = .25
    assert _row(t, "yes_or_partial", "B")["estimate"] == pytest.approx(0.25)
    # A - B: independent strata, se^2 = .08 + .125; neither the judge nor PPI separates them
    d = _row(t, "yes", "A", "difference")
    assert d["baseline"] == "B" and d["estimate"] == pytest.approx(0.0)
    assert d["se"] == pytest.approx(math.sqrt(0.205))
    assert d["high"] == pytest.approx(Z95 * math.sqrt(0.205)) and d["ppi_excludes_0"] is False
    assert d["audit_mean"] == pytest.approx(0.4 - 0.5) and d["judge_mean"] == pytest.approx(0.5 - 0.5)


def test_one_audit_label_moves_only_its_stratum_and_tuning_per_stratum():
    c, lab = _frames()
    lab.loc[(lab.labeller == "audit") & (lab.task_id == "t8") & (lab.set == "A"), "label"] = "yes"
    t = judge_corrected(c, lab, _ctx())
    a = _row(t, "yes", "A")
    # "A any_gold": audited f 0 0, y 1 1 -> 1/4 + 1 = 5/4 with se 0; "A none" unchanged (1/3, se^2 1/9)
    assert a["estimate"] == pytest.approx(0.6 / 3 + 0.4 * 1.25) and a["se"] == pytest.approx(math.sqrt(0.36 / 9))
    # tuned: "A none" lam = Cov(f, y)/Var(f) = (1/6)/(1/3) = .5 -> .5 * 2/3 + mean(y - .5 f) = 1/3;
    # "A any_gold": judge constant on its audited contexts -> lam 0, the audit mean 1; combined .2 + .4
    tu = _row(judge_corrected(c, lab, _ctx(ppi={"alpha": 0.05, "tuned": True})), "yes", "A")
    assert tu["estimate"] == pytest.approx(0.6) and math.isnan(tu["lam"])


def test_too_few_audit_labels_and_overlapping_strata():
    c, lab = _frames()
    lab = lab[~((lab.labeller == "audit") & (lab.set == "B") & (lab.task_id == "t2"))]
    t = judge_corrected(c, lab, _ctx())
    b = _row(t, "yes", "B")
    assert pd.isna(b["estimate"]) and "only 1 labelled" in b["reason"] and b["judge_mean"] == pytest.approx(0.5)
    assert _row(t, "yes", "A", "difference")["reason"] == "no PPI estimate for B"
    assert _row(t, "yes", "A")["estimate"] == pytest.approx(0.5)
    over = judge_corrected(c, lab, _ctx(audit_strata=[{"set": "A", "qrels_label": None, "n": 3}, *STRATA]))
    assert over["estimate"].isna().all() and over["reason"].str.contains("strata overlap").all()


def test_audit_off_rows_say_why_and_invent_nothing():
    c, lab = _frames()
    lab = lab[lab.labeller != "audit"]
    t = judge_corrected(c, lab, _ctx(audit=False, labellers=["j", "panel"]))
    assert list(t.system) == ["A", "B"] and (t.row == "system").all()
    assert (t.reason == AUDIT_OFF).all() and "worse_labels.judges.audit.model" in AUDIT_OFF
    for col in ("estimate", "low", "high", "se", "audit_mean", "audit_low", "audit_high", "n_labelled", "lam",
                "agreement", "judge_bias", "pearson_r"):
        assert t[col].isna().all(), col
    # the judge's share over every context of the set is data, not an estimate: yes = 1
    assert t.judge.tolist() == ["j", "j"]  # no panel labels in the frame: the first judge with labels
    assert t.judge_mean.tolist() == pytest.approx([0.5, 4 / 6]) and t.n_unjudged.tolist() == [0, 1]


def test_the_target_builds_through_the_report_machinery(tmp_path):
    from convrag.config import REPO_ROOT, validate_config
    from convrag.layout import Layout
    from convrag.report.targets import build_target
    from convrag.studies import get_study
    from convrag.studies.worse_labels import wiring

    study = get_study("worse_labels")
    assert study.targets()["judge_corrected"].inputs == ("gold", "contexts", "labels", "audit")
    base = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    cfg = yaml.safe_load((REPO_ROOT / "config" / "tests" / "worse_labels.yaml").read_text())
    cfg["retrievers"] = base["retrievers"]
    on = validate_config(copy.deepcopy(cfg), source="cfg.yaml")
    ctx = wiring.context(on)
    assert ctx["ppi"] == {"alpha": 0.05, "tuned": False} and ctx["audit_strata"][1] == {
        "set": "bm25_turn", "qrels_label": None, "n": 2}
    cfg["worse_labels"]["judges"]["audit"] = {"model": None}
    off = validate_config(copy.deepcopy(cfg), source="cfg.yaml")
    layout = Layout(off["results_dir"])
    assert any(p.endswith("/judge_corrected.csv") for p in study.final_files(off, layout))  # built with the audit off
    c, lab = _frames()
    c.assign(world_label=None, world_support=[[] for _ in range(len(c))]).to_parquet(tmp_path / "s.parquet")
    labels = tmp_path / "labels" / "s" / "j.jsonl"
    labels.parent.mkdir(parents=True)
    labels.write_text("".join(json.dumps({"item_id": f"{st}|{t}", "judge_model": "j",
                                          "value": None if j is None else {"label": j, "support": []}}) + "\n"
                              for st, t, _, j, _ in CONTEXTS))
    audit = tmp_path / "audit" / "s.jsonl"
    audit.parent.mkdir()
    audit.write_text("".join(json.dumps({"context_id": f"{st}|{t}", "final": a}) + "\n"
                             for st, t, _, _, a in CONTEXTS if a != "-"))
    inputs = {"contexts": [str(tmp_path / "s.parquet")], "labels": [str(labels)], "audit": [str(audit)]}
    stem = tmp_path / "tables" / "judge_corrected"
    build_target(study, "judge_corrected", inputs, {**_ctx(), "panel_members": []}, str(stem))
    got = pd.read_csv(f"{stem}.csv")
    row = got[(got.scoring == "yes") & (got.system == "A") & (got.row == "system")].iloc[0]
    assert row["estimate"] == pytest.approx(0.5) and row["n_audit_unread"] == 1
    build_target(study, "judge_corrected", {**inputs, "audit": []}, {**_ctx(audit=False), "panel_members": []},
                 str(stem))
    got = pd.read_csv(f"{stem}.csv")
    assert len(got) == 2 and got["estimate"].isna().all() and (got["reason"] == AUDIT_OFF).all()
    assert study.caption("judge_corrected").split(".")[0] in (tmp_path / "tables" / "judge_corrected.md").read_text()
    assert np.isfinite(got["judge_mean"]).all()
