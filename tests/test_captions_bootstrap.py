"""Captions are built from what the run did (issue 45, item 3): the bootstrap's resamples and
seed come from the config the run used, never from fixed text, and a retrieval-only mtrag_un run
lists no generation settings. Built from configs alone, without a run: a target's caption is its
fixed text plus the study's run note (convrag.report.targets.build_target, the rules'
target_caption)."""

import copy

import pytest

from convrag.config import load_config, validate_config
from convrag.resources import REPO_ROOT
from convrag.studies import get_study

BOOTSTRAPPED = [("worse_labels", "figure2b_precision"), ("lic_rag", "table2_full_vs_sharded"),
                ("mtrag_un", "rewrite_gain"), ("mtrag_un", "table4_setting_gain")]


@pytest.fixture(scope="module")
def default():
    return load_config(REPO_ROOT / "config" / "config.yaml")


def _caption(study: str, target: str, config: dict) -> str:
    s = get_study(study)
    return f"{s.caption(target)} {s.run_note(target, config)}"


@pytest.mark.parametrize("study,target", BOOTSTRAPPED)
def test_bootstrap_settings_follow_the_config(default, study, target):
    cfg = copy.deepcopy(default)
    cfg[study]["bootstrap"].update(n_resamples=300, seed=1)
    cfg = validate_config(cfg, "non-default bootstrap")
    text = _caption(study, target, cfg)
    assert "300 resamples, seed 1" in text
    assert "1,000" not in text and "seed 0" not in text
    assert "1,000 resamples, seed 0" in _caption(study, target, default)


def test_worse_labels_caption_names_the_resampling_unit(default):
    cfg = copy.deepcopy(default)
    cfg["worse_labels"]["bootstrap"]["unit"] = "dialogue"
    assert "resampling dialogues" in _caption("worse_labels", "figure2b_precision", cfg)
    assert "resampling turns" in _caption("worse_labels", "figure2b_precision", default)


def test_retrieval_only_mtrag_un_lists_no_generation(default):
    cfg = copy.deepcopy(default)
    cfg["mtrag_un"]["generation"]["models"] = []
    note = get_study("mtrag_un").run_note("table2_retrieval", cfg)
    assert "generation: not run (retrieval only)" in note
    for absent in ("generation settings", "generation models", "judge model", "bertscore", "RAG passages",
                   "idk:", "rb_llm:"):
        assert absent not in note, absent
    assert "judge model: " in get_study("mtrag_un").run_note("table2_retrieval", default)
