"""mtrag_un's benchmark_statistics with the earlier MTRAG beside the study's benchmark
(``mtrag_un.statistics_benchmarks``): the compared rows on the shared sample of MTRAG's
conversations, counted by hand and independently from the raw JSON; the config key."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from convrag.config import REPO_ROOT, load_config
from convrag.errors import ConfigError
from convrag.records import TurnTask
from convrag.studies.mtrag_un import analyses as A


def _sample_tasks(shared_data):
    from convrag.data.benchmarks import benchmark_loader

    conv = shared_data / "mtrag" / "conversations"
    spec = {"kind": "mtrag_conversations", "domains": ["clapnq", "cloud", "fiqa", "govt"]}
    files = {"conversations.json": conv / "conversations.sample.json",
             "conversation_index_to_id.tsv": conv / "conversation_index_to_id.tsv"}
    tasks, _ = benchmark_loader("mtrag_conversations").tasks("mtrag", spec, files)
    return tasks, conv / "conversations.sample.json"


def test_mtrag_rows_on_the_shared_sample_hand_counted(shared_data):
    """The sample's 12 conversations (3 per domain) have 73 user turns, each followed by an agent
    turn, so 73 tasks (12 first turns). Answerability over the 73: ANSWERABLE 46 (7 first + 39
    later), PARTIAL 11 (2 + 9), UNANSWERABLE 11 (2 + 9), CONVERSATIONAL 5 (1 + 4): unanswerable or
    partial 22 of 73 = 30.1%. Multi-Turn: N/A on the 12 first turns, Follow-up 50, Clarification 11.
    Standalone Type on one turn only (conversation 3, its third question: Non-standalone, the turn
    with a rewritten alternative)."""
    tasks, path = _sample_tasks(shared_data)
    # an independent count from the raw file: every user turn of every conversation
    users = [m for c in json.loads(path.read_text(encoding="utf-8")) for m in c["messages"] if m["speaker"] == "user"]
    ans = [m["enrichments"]["Answerability"][0] for m in users]
    mt = [m["enrichments"]["Multi-Turn"][0] for m in users]
    assert len(users) == 73
    assert sum(a in ("UNANSWERABLE", "PARTIAL") for a in ans) == 22
    assert (mt.count("N/A"), mt.count("Follow-up"), mt.count("Clarification")) == (12, 50, 11)

    st = A.benchmark_statistics([], "mtrag_un", {"mtrag": tasks})
    studied, mtrag = (st[st.role == r].set_index("statistic") for r in ("studied", "compared"))
    assert set(mtrag.benchmark) == {"mtrag"} and studied.loc["tasks", "value"] == 0
    assert mtrag.loc["tasks", "value"] == 73 and mtrag.loc["conversations", "value"] == 12
    row = mtrag.loc["unanswerable_or_partial"]
    assert (row["count"], row["of"]) == (22, 73) and row["value"] == pytest.approx(22 / 73)
    assert round(row["value"], 3) == 0.301
    assert mtrag.loc["clarification", "count"] == 11 and mtrag.loc["first_turn", "count"] == 12
    assert mtrag.loc["underspecified", "value"] == 0  # MTRAG has CONVERSATIONAL instead
    # the standalone label: one labelled turn of 73, non-standalone: the row says so through 'of'
    assert (mtrag.loc["nonstandalone", "count"], mtrag.loc["nonstandalone", "of"]) == (1, 1)


def test_rows_carry_benchmark_and_role_and_keep_the_studied_counts():
    t = TurnTask(task_id="a", benchmark="b", conversation_id="c", turn=1, history=[], question="q?",
                 labels={"answerability": "PARTIAL", "multi_turn": "N/A", "standalone": None})
    st = A.benchmark_statistics([t], "mine", {"other": [t, t]})
    assert list(st.columns) == A.STATISTICS_COLUMNS
    assert st.groupby("role").benchmark.unique().map(list).to_dict() == {"compared": ["other"], "studied": ["mine"]}
    # one row per (benchmark, statistic): the published entries' where (role, statistic) picks one
    assert not st.duplicated(["role", "statistic"]).any()
    assert math.isnan(st.set_index(["role", "statistic"]).loc[("studied", "nonstandalone"), "value"])
    assert st.set_index(["role", "statistic"]).loc[("compared", "tasks"), "value"] == 2


def test_statistics_benchmarks_config(tmp_path):
    paper = load_config(REPO_ROOT / "config" / "studies" / "mtrag_un.yaml")
    assert paper["mtrag_un"]["statistics_benchmarks"] == ["mtrag"]
    assert paper["benchmarks"]["mtrag"]["kind"] == "mtrag_conversations"
    # the embedded default builds no MTRAG task file (it stays off there)
    assert load_config(REPO_ROOT / "config" / "config.yaml")["mtrag_un"]["statistics_benchmarks"] == []
    raw = yaml.safe_load((REPO_ROOT / "config" / "studies" / "mtrag_un.yaml").read_text())
    path = tmp_path / "c.yaml"
    for bad, match in ((["nope"], "statistics_benchmarks"), (["mtrag_un"], "not the study's own"),
                       (["mtrag", "mtrag"], "each benchmark once")):
        raw["mtrag_un"]["statistics_benchmarks"] = bad
        path.write_text(yaml.safe_dump(raw))
        with pytest.raises(ConfigError, match=match):
            load_config(path)
