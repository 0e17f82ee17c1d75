"""mtrag_un's judge_corrected table (``convrag.studies.mtrag_un.corrected``): the seeded labelled
share, the 1-4 -> 0-1 rescaling, judge mean / PPI / human-only / all-items human mean per system
and for a paired difference against hand computation, items without a judge score, and the target
built by the shared report machinery."""

from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd
import pytest
import yaml

from convrag.errors import DataError
from convrag.studies.mtrag_un.corrected import COLUMNS, human_score, judge_corrected_table, labelled_tasks

Z95 = 1.959963984540054


def _rows():
    """Two systems on tasks t1-t4 (ANSWERABLE) and t5 (UNANSWERABLE, outside the subset).
    Human faithfulness on 1-4: 4, 2.5, 4, 1 (A) and 2.5, 2.5, 3.25, 1 (B) -> 0-1: 1, .5, 1, 0 and .5, .5, .75, 0."""
    a_f, a_h = [0.8, 0.6, 1.0, 0.4, 0.9], [4.0, 2.5, 4.0, 1.0, 1.0]
    b_f, b_h = [0.5, 0.5, 0.6, 0.2, 0.1], [2.5, 2.5, 3.25, 1.0, 4.0]
    rows = []
    for system, fs, hs in (("A", a_f, a_h), ("B", b_f, b_h)):
        for i, (f, h) in enumerate(zip(fs, hs), start=1):
            rows.append({"task_id": f"t{i}", "system": system,
                         "answerability": "UNANSWERABLE" if i == 5 else "ANSWERABLE", "RL_F": f,
                         "human_faithfulness": h, "n_faithfulness": 3})
    return pd.DataFrame(rows)


def test_labelled_tasks_seeded_uniform_share():
    ids = [f"t{i}" for i in range(1, 5)]
    assert labelled_tasks(ids, 0.5, 0) == {"t3", "t4"}  # the draw the hand example below uses
    assert labelled_tasks(list(reversed(ids)) + ids, 0.5, 0) == {"t3", "t4"}  # order and repeats do not matter
    assert len(labelled_tasks(ids, 0.1, 0)) == 2 and labelled_tasks(ids, 1.0, 3) == set(ids)  # at least 2; all
    assert len(labelled_tasks([f"x{i}" for i in range(10)], 0.25, 0)) == 3  # ceil(2.5)
    # uniform: over seeds every task is drawn about equally often (share 0.5 of 4 -> 1/2 each)
    counts = pd.Series([t for seed in range(2000) for t in labelled_tasks(ids, 0.5, seed)]).value_counts() / 2000
    assert counts.to_dict() == pytest.approx({t: 0.5 for t in ids}, abs=0.04)
    with pytest.raises(DataError, match="share"):
        labelled_tasks(ids, 0.0, 0)


def test_human_score_rescales_and_averages():
    df = pd.DataFrame({"human_faithfulness": [4.0, 1.0, 2.5], "human_appropriateness": [1.0, 1.0, np.nan],
                       "human_completeness": [2.5, 4.0, 4.0]})
    assert human_score(df, ["faithfulness"]).tolist() == pytest.approx([1.0, 0.0, 0.5])
    got = human_score(df, ["faithfulness", "appropriateness", "completeness"])
    assert got[:2].tolist() == pytest.approx([0.5, 1 / 3]) and math.isnan(got[2])  # (1 + 0 + .5)/3; (0 + 0 + 1)/3
    with pytest.raises(DataError, match="human_naturalness"):
        human_score(df, ["naturalness"])


def test_hand_example_systems_and_paired_difference():
    t = judge_corrected_table(_rows(), labelled_share=0.5, seed=0)  # labelled: t3, t4
    assert list(t.columns) == COLUMNS
    assert set(t["metric"]) == {"RL_F"} and set(t["judge"]) == {"project"}  # no RB_llm / official columns here
    assert (t["human"] == "faithfulness").all()
    a, b, d = (t.iloc[i] for i in range(3))
    assert (a["row"], a["system"], b["system"], d["row"], d["system"], d["baseline"]) == (
        "system", "A", "B", "difference", "A", "B")
    # A: f = .8 .6 1 .4 (mean .7), labelled f = 1, .4, y = 1, 0: residual 0, -.4 (mean -.2, s^2 .08)
    # estimate .7 - .2 = .5; se^2 = s^2(y)/N + (1/n - 1/N) s^2(resid) = .5/4 + (1/2 - 1/4) .08 = .145
    assert a["judge_mean"] == pytest.approx(0.7) and a["estimate"] == pytest.approx(0.5)
    assert a["se"] == pytest.approx(math.sqrt(0.145))
    assert (a["low"], a["high"]) == pytest.approx((0.5 - Z95 * math.sqrt(0.145), 0.5 + Z95 * math.sqrt(0.145)))
    assert (a["n_labelled"], a["n_all"], a["lam"], a["n_no_judge"]) == (2, 4, 1.0, 0)
    # human-only on the labelled share: mean .5, se^2 .5/2; all items: 1 .5 1 0 -> .625, s^2 .6875/3
    assert a["human_mean"] == pytest.approx(0.5) and a["human_high"] - a["human_mean"] == pytest.approx(Z95 * 0.5)
    assert a["human_all_mean"] == pytest.approx(0.625)
    assert a["human_all_high"] - a["human_all_mean"] == pytest.approx(Z95 * math.sqrt(0.6875 / 3 / 4))
    assert a["judge_bias"] == pytest.approx(0.2) and a["pearson_r"] == pytest.approx(1.0)
    # B: f mean 1.8/4 = .45; labelled f .6 .2, y .75 0: residual .15 -.2, mean -.025 -> .425
    assert b["judge_mean"] == pytest.approx(0.45) and b["estimate"] == pytest.approx(0.425)
    # A - B per task: f .3 .1 .4 .2 (mean .25, s^2 .05/3), y .5 0 .25 0 (all: .1875); labelled t3, t4:
    # f .4 .2, y .25 0, residual -.15 -.2 (mean -.175, s^2 .00125) -> estimate .075,
    # se^2 = .03125/4 + (1/2 - 1/4) .00125 = .008125: [-0.1017, 0.2517] contains 0, the judge's [.1235, .3765] not
    assert d["judge_mean"] == pytest.approx(0.25) and d["estimate"] == pytest.approx(0.075)
    assert d["se"] == pytest.approx(math.sqrt(0.008125))
    assert d["judge_high"] - d["judge_mean"] == pytest.approx(Z95 * math.sqrt(0.05 / 3 / 4))
    assert d["human_all_mean"] == pytest.approx(0.1875) and (d["n_labelled"], d["n_all"]) == (2, 4)
    assert d["judge_excludes_0"] is True and d["ppi_excludes_0"] is False  # the judge's gap does not survive
    assert pd.isna(a["judge_excludes_0"]) and t["reason"].isna().all()


def test_items_without_judge_score_and_cells_without_labels():
    rows = _rows()
    rows.loc[(rows.system == "A") & (rows.task_id == "t1"), "RL_F"] = np.nan
    t = judge_corrected_table(rows, labelled_share=0.5, seed=0)
    a, d = t.iloc[0], t.iloc[2]
    # A without t1: judge mean (.6 + 1 + .4)/3, residual mean -.2 as before
    assert (a["n_all"], a["n_no_judge"]) == (3, 1) and a["estimate"] == pytest.approx(2 / 3 - 0.2)
    assert d["n_all"] == 3 and d["n_no_judge"] == 1  # the pair over the 3 shared tasks
    # seed 3 draws t1 and t3: A keeps one labelled task with a judge score, so no estimate, and the reason says so
    assert labelled_tasks([f"t{i}" for i in range(1, 5)], 0.5, 3) == {"t1", "t3"}
    t3 = judge_corrected_table(rows, labelled_share=0.5, seed=3)
    a3, b3, d3 = (t3.iloc[i] for i in range(3))
    assert pd.isna(a3["estimate"]) and "only 1 labelled" in a3["reason"] and a3["n_labelled"] == 1
    assert a3["judge_mean"] == pytest.approx(2 / 3) and a3["n_all"] == 3
    assert pd.isna(d3["estimate"]) and d3["reason"].startswith("no PPI estimate") and d3["n_labelled"] == 1
    # B has both labels: (.5 + .5 + .6 + .2)/4 + mean(.5 - .5, .75 - .6) = .45 + .075
    assert b3["estimate"] == pytest.approx(0.525) and pd.isna(b3["reason"])


def test_a_system_without_any_judge_score_is_a_blank_row_with_its_reason():
    """A metric no item of a system has (a cut human-evaluation file: RL_F unparsed everywhere for
    A) gives that system's row and its pair's a reason, not an IndexError (was: t.iloc[-1] of an
    empty ppi_table, or ppi_table's refusal of a pair naming it)."""
    rows = _rows()
    rows.loc[rows.system == "A", "RL_F"] = np.nan
    t = judge_corrected_table(rows, labelled_share=0.5, seed=0)
    a, b, d = t.iloc[0], t.iloc[1], t.iloc[2]
    assert a["reason"] == "no PPI estimate: no item of A has a judge score" and a["n_all"] == 0
    assert a["n_no_judge"] == 4 and pd.isna(a["estimate"]) and pd.isna(a["judge_mean"])
    assert d["reason"] == "no PPI estimate: no item of A has a judge score" and d["n_no_judge"] == 4
    # B unchanged: seed 0 labels t3 and t4, (.5 + .5 + .6 + .2)/4 + mean(.75 - .6, 0 - .2) = .45 - .025
    assert labelled_tasks([f"t{i}" for i in range(1, 5)], 0.5, 0) == {"t3", "t4"}
    assert b["estimate"] == pytest.approx(0.425) and pd.isna(b["reason"])


def test_official_and_composite_pairs():
    rows = _rows()
    rows["official_rl_f"] = rows["RL_F"]
    rows["RB_llm"] = 0.5
    rows["human_appropriateness"] = 4.0
    rows["human_completeness"] = 4.0
    t = judge_corrected_table(rows, labelled_share=0.5, seed=0)
    assert list(dict.fromkeys(zip(t.metric, t.judge))) == [("RL_F", "project"), ("RL_F", "official"),
                                                           ("RB_llm", "project")]
    rb = t[(t.metric == "RB_llm") & (t.row == "system") & (t.system == "A")].iloc[0]
    assert rb["human"] == "mean(faithfulness, appropriateness, completeness)"
    # y = (faith + 1 + 1)/3 on t3, t4 = 1, 2/3; constant judge .5 -> estimate .5 + mean(y - .5) = mean(y)
    assert rb["estimate"] == pytest.approx((1 + 2 / 3) / 2) and math.isnan(rb["pearson_r"])
    off = t[(t.judge == "official")].reset_index(drop=True)
    proj = t[(t.judge == "project") & (t.metric == "RL_F")].reset_index(drop=True)
    pd.testing.assert_series_equal(off["estimate"], proj["estimate"])


def test_duplicate_rows_are_an_error():
    rows = pd.concat([_rows(), _rows().iloc[[0]]])
    with pytest.raises(DataError, match="appears twice"):
        judge_corrected_table(rows)


def test_the_target_builds_through_the_report_machinery(tmp_path):
    from convrag.config import REPO_ROOT, validate_config
    from convrag.layout import Layout
    from convrag.report.targets import build_target
    from convrag.studies import get_study

    study = get_study("mtrag_un")
    assert study.targets()["judge_corrected"].inputs == ("human",)
    cfg = yaml.safe_load((REPO_ROOT / "config" / "tests" / "mtrag_un.yaml").read_text())
    cfg["retrievers"] = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())["retrievers"]
    off = validate_config(copy.deepcopy(cfg), source="cfg.yaml")
    assert off["mtrag_un"]["evaluation"]["ppi"] == {"labelled_share": 0.25, "seed": 0, "tuned": False, "alpha": 0.05}
    layout = Layout(off["results_dir"])
    names = lambda c: {p.split("/")[-1] for p in study.final_files(c, layout)}  # noqa: E731
    assert "judge_corrected.csv" not in names(off)  # no human evaluations: not built (as figure5)
    cfg["mtrag_un"]["evaluation"] = {"human_evaluations": "x.json", "ppi": {"labelled_share": 0.5}}
    on = validate_config(copy.deepcopy(cfg), source="cfg.yaml")
    assert "judge_corrected.csv" in names(on)
    path = tmp_path / "scores.parquet"
    _rows().to_parquet(path)
    stem = tmp_path / "tables" / "judge_corrected"
    build_target(study, "judge_corrected", {"human": str(path)}, {"ppi": on["mtrag_un"]["evaluation"]["ppi"]},
                 str(stem))
    got = pd.read_csv(f"{stem}.csv")
    assert got.loc[0, "estimate"] == pytest.approx(0.5) and got.loc[2, "estimate"] == pytest.approx(0.075)
    md = (tmp_path / "tables" / "judge_corrected.md").read_text()
    assert study.caption("judge_corrected").split(":")[0] in md
