"""worse_labels' released expansions (the paper's Fusion from its released artifacts): the two
file layouts, the queries they give (the same path as regenerated replies, checked by hand), the
error for missing task ids, the config checks, the rule wiring (a local file, a pinned download)
and the reproduction key that says which expansions a run used."""

from __future__ import annotations

import json

import pytest

from convrag.config import REPO_ROOT, load_config
from convrag.errors import ConfigError, DataError
from convrag.records import TurnTask
from convrag.studies.worse_labels import plan, wiring
from convrag.studies.worse_labels.released import read_released, released_records
from worse_labels_helpers import base_config as _config, checked as _check

HIST = "Q: What is a hydrofoil?\nA: A wing under the hull that lifts the boat."


def _task(tid, question, official):
    return TurnTask(task_id=tid, benchmark="recor", conversation_id=tid.split("_turn_")[0], turn=1, history=[],
                    question=question, labels={"domain": "drones", "official_history": official})


T1 = _task("drones/c1_turn_1", "What is a hydrofoil?", "No previous conversation.")
T2 = _task("drones/c1_turn_2", "How fast can it go?", HIST)
KINDS = ["query2doc", "rewrite_passage", "rewrite_hyde"]


def _released_jsonl(path):
    """A released file in the documented jsonl layout, written for the test."""
    rows = [
        {"task_id": T1.task_id, "kind": "query2doc", "text": "Passage: A hydrofoil is a lifting surface."},
        {"task_id": T1.task_id, "kind": "rewrite_passage", "text": "Rewrite: What is a hydrofoil?\nPassage: A wing."},
        {"task_id": T1.task_id, "kind": "rewrite_hyde", "text": "Rewrite: hydrofoil definition\nDocument: Hydrofoils."},
        {"task_id": T2.task_id, "kind": "query2doc", "text": "Foil boats reach 50 knots."},
        {"task_id": T2.task_id, "kind": "rewrite_passage", "text": "**Rewrite:** How fast can a hydrofoil boat go?"},
        {"task_id": T2.task_id, "kind": "rewrite_hyde", "text": ""},  # unreadable: falls back
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_released_jsonl_gives_the_queries_by_hand(tmp_path):
    rel = read_released(_released_jsonl(tmp_path / "rel.jsonl"))
    assert len(rel) == 6
    recs = released_records([T1, T2], rel, KINDS, where="rel.jsonl")
    q = {(r["task_id"], r["kind"]): r for r in recs}
    base2 = "How fast can it go?\n\nConversation History:\n" + HIST
    # query2doc: the official with-history query 5 times, then the passage (its label dropped)
    assert q[(T1.task_id, "query2doc")]["query"] == "\n".join(["What is a hydrofoil?"] * 5 + ["A hydrofoil is a lifting surface."])
    assert q[(T2.task_id, "query2doc")]["query"] == "\n".join([base2] * 5 + ["Foil boats reach 50 knots."])
    # rewrite kinds: the rewrite, a newline, the passage / document; a rewrite alone is used alone
    assert q[(T1.task_id, "rewrite_passage")]["query"] == "What is a hydrofoil?\nA wing."
    assert q[(T1.task_id, "rewrite_hyde")]["query"] == "hydrofoil definition\nHydrofoils."
    assert q[(T2.task_id, "rewrite_passage")]["query"] == "How fast can a hydrofoil boat go?"
    # an empty released text: the official with-history query, counted as a fallback
    assert q[(T2.task_id, "rewrite_hyde")]["query"] == base2 and q[(T2.task_id, "rewrite_hyde")]["fallback"]
    assert sum(r["fallback"] for r in recs) == 1 and {r["source"] for r in recs} == {"released"}
    assert [(r["task_id"], r["kind"]) for r in recs] == [(t.task_id, k) for t in (T1, T2) for k in KINDS]


def test_released_json_layout_reads_the_same(tmp_path):
    a = read_released(_released_jsonl(tmp_path / "rel.jsonl"))
    nested = {}
    for (tid, kind), text in a.items():
        nested.setdefault(tid, {})[kind] = text
    (tmp_path / "rel.json").write_text(json.dumps(nested))
    assert read_released(tmp_path / "rel.json", "json") == a


def test_missing_task_ids_and_bad_records_are_clear_errors(tmp_path):
    rel = read_released(_released_jsonl(tmp_path / "rel.jsonl"))
    del rel[(T2.task_id, "rewrite_hyde")]
    with pytest.raises(DataError, match=r"rel\.jsonl: no released expansion for 1 of 2 task\(s\): drones/c1_turn_2 \(rewrite_hyde\)"):
        released_records([T1, T2], rel, KINDS, where="rel.jsonl")
    bad = tmp_path / "bad.jsonl"
    for line, msg in ((json.dumps({"task_id": "x", "kind": "hyde", "text": "t"}), "line 1: unknown expansion kind 'hyde'"),
                      (json.dumps({"task_id": "x", "text": "t"}), "line 1: expected an object with task_id, kind and text"),
                      ("{not json", "line 1: not JSON")):
        bad.write_text(line + "\n")
        with pytest.raises(DataError, match=msg):
            read_released(bad)
    bad.write_text("\n".join([json.dumps({"task_id": "x", "kind": "query2doc", "text": "t"})] * 2))
    with pytest.raises(DataError, match="line 2: task x has a second 'query2doc' expansion"):
        read_released(bad)
    with pytest.raises(DataError, match="not found"):
        read_released(tmp_path / "nope.jsonl")






def test_released_config_wiring_and_reproduction_key(tmp_path):
    from convrag.layout import layout

    cfg = _config()
    fusion = cfg["worse_labels"]["slices"]["recor"]["ladder"]["fusion"]
    c = _check(cfg)
    model = fusion["model"]
    assert wiring.expansions_used(c, "recor") == f"regenerated:{model}"
    assert [j for j in plan.model_jobs(c) if j["stage"] == "expand"]
    # a local file: no model needed, no expansion model job, the file is the rule's input
    fusion.pop("model")
    fusion["released"] = {"path": str(tmp_path / "rel.jsonl")}
    c = _check(cfg)
    L = layout(c)
    assert wiring.expansions_used(c, "recor") == "released"
    assert not [j for j in plan.model_jobs(c) if j["stage"] == "expand"] and not wiring.search_models(c, "recor", "fusion")
    ins = wiring.search_inputs(c, L, "resources/prompts", "recor", "eval", "fusion", "d1")
    assert ins["released"] == str(tmp_path / "rel.jsonl")
    args = wiring.search_args(c, "recor", "fusion", "models.yaml", "cache")
    assert "--released-format jsonl" in args and "--model" not in args
    # a pinned download: the released rule's output, its spec the URL and sha256
    fusion["released"] = {"url": "https://example.org/expansions.json", "sha256": "a" * 64, "format": "json"}
    c = _check(cfg)
    assert wiring.search_inputs(c, layout(c), "p", "recor", "eval", "fusion", "d1")["released"].endswith(
        "worse_labels/released/recor/fusion.json")
    assert json.loads(wiring.download_spec(c, "recor", "fusion")) == {"url": "https://example.org/expansions.json",
                                                                        "sha256": "a" * 64}
    assert wiring.released_rungs(c) == [{"slice": "recor", "rung": "fusion", "url": "https://example.org/expansions.json",
                                         "sha256": "a" * 64, "format": "json"}]
    from convrag.downloads import config_downloads, problems

    e = [x for x in config_downloads(c) if x["key"] == "worse_labels.slices.recor.ladder.fusion.released"]
    assert len(e) == 1 and e[0]["sha256"] == "a" * 64 and not problems(e)  # pinned, so `convrag sources` passes it


@pytest.mark.parametrize("released, key", [
    ({"url": "https://example.org/x.jsonl"}, "ladder.fusion.released.sha256"),
    ({"path": "a.jsonl", "url": "https://example.org/x.jsonl", "sha256": "a" * 64}, "ladder.fusion.released: give exactly one"),
    ({}, "ladder.fusion.released: give exactly one"),
    ({"path": "a.jsonl", "format": "csv"}, "worse_labels"),
])
def test_bad_released_settings_name_the_key(released, key):
    cfg = _config()
    cfg["worse_labels"]["slices"]["recor"]["ladder"]["fusion"]["released"] = released
    with pytest.raises(ConfigError, match=key):
        _check(cfg)


def test_the_paper_config_says_its_fusion_entries_need_released_expansions():
    from convrag.report.reproduction import load_published, published_path, requirement_failures
    from convrag.studies import get_study

    c = load_config(REPO_ROOT / "config" / "studies" / "worse_labels.yaml")
    run = get_study("worse_labels").context(c)["reproduction"]
    assert run["expansions"] == "regenerated:qwen3-8b"  # no released file is known yet
    pub = {e.id: e for e in load_published(published_path("worse_labels"), "worse_labels").entries}
    for eid in ("ndcg10.fusion", "ndcg10.hybrid", "gold_in_top5.fusion", "gold_in_top5.hybrid"):
        assert requirement_failures(pub[eid].requires, run) == [
            "different expansions: the paper's released (this run: regenerated:qwen3-8b)"]
        assert requirement_failures(pub[eid].requires, {**run, "expansions": "released"}) == []
    assert "expansions" not in pub["ndcg10.bm25_hist"].requires


@pytest.mark.realdata
def test_the_expand_stage_reads_released_expansions_on_the_pilot(shared_data, tmp_path):
    """``convrag worse-labels expand --released`` on the organisers' pilot sample: no model, the
    written queries are those of ``released_records`` and each kind's run is that query's search."""
    from convrag.cli import main
    from convrag.data.recor import load_recor_pilot, read_documents
    from convrag.io import read_json, read_jsonl
    from convrag.records import write_records
    from convrag.retrieval import build_index, load_retriever
    from convrag.studies.worse_labels.retrieve import search

    pilot = shared_data / "recor_pilot"
    tasks, _ = load_recor_pilot(pilot / "benchmark.jsonl", pilot / "documents.jsonl", pilot / "qrels.txt")
    write_records(tmp_path / "tasks.jsonl", tasks)
    write_records(tmp_path / "corpus.jsonl", read_documents(pilot / "documents.jsonl"))
    build_index("lucene_bm25", tmp_path / "corpus.jsonl", tmp_path / "idx", {})
    d = sorted({t.labels["domain"] for t in tasks})[0]
    mine = [t for t in tasks if t.labels["domain"] == d and t.gold_docs]
    rows = [{"task_id": t.task_id, "kind": k, "text": f"Rewrite: {t.question}\nPassage: drone battery {i}"}
            for i, t in enumerate(tasks) for k in KINDS]
    (tmp_path / "rel.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    out = tmp_path / "fusion" / d
    main(["worse-labels", "expand", "--tasks", str(tmp_path / "tasks.jsonl"), "--domain", d, "--index-dir",
          str(tmp_path / "idx"), "--retriever", "lucene_bm25", "--recall-k", "100", "--expansions", *KINDS,
          "--prompts", str(REPO_ROOT / "resources/prompts/worse_labels/expand.yaml"), "--released",
          str(tmp_path / "rel.jsonl"), "--out-components", f"{out}.json", "--out-expansions", f"{out}.jsonl",
          "--accounting", f"{out}.acc.json"])
    recs = read_jsonl(f"{out}.jsonl")
    want = released_records(mine, read_released(tmp_path / "rel.jsonl"), KINDS, "rel.jsonl")
    got = {(r["task_id"], r["kind"]): r["query"] for r in recs}
    assert all(got[(w["task_id"], w["kind"])] == w["query"] for w in want)
    assert read_json(f"{out}.acc.json")["job"]["expansions"] == "released"
    comps = read_json(f"{out}.json")
    assert list(comps) == KINDS
    by = {(r["task_id"], r["kind"]): r["query"] for r in recs}
    ts = [t for t in tasks if t.labels["domain"] == d and (t.task_id, "rewrite_hyde") in by]
    direct = search(load_retriever("lucene_bm25", str(tmp_path / "idx"), {}), ts,
                    [by[(t.task_id, "rewrite_hyde")] for t in ts], 100)[0]
    assert {q: dict(h) for q, h in comps["rewrite_hyde"].items()} == {q: dict(h) for q, h in direct.items()}
