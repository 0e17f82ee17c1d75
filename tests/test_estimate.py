"""`convrag estimate`: the arithmetic from hand-made accounting files (job layout) to grid totals.

Measured run (dataset d, model tiny; one job per retriever x chunk, all cells in lockstep).
Per cell: conversations, then per role (requests, prompt tokens, completion tokens); no cache
hits and no duplicates, so every backend figure equals the asked-for one:

  closed_book/chunk0  FULL_none        4 conv  assistant  6 / 1200 / 120
                      SHARDED_none     4 conv  assistant 12 / 2400 / 240, user_simulator 8 / 800 / 80
  bm25/chunk0         FULL_none        4 conv  assistant  4 / 2000 /  80
                      SHARDED_history  4 conv  assistant 12 / 4000 / 400, user_simulator 8 / 800 / 80
  bm25/chunk1         FULL_none        2 conv  assistant  2 / 1000 /  40
                      SHARDED_history  2 conv  assistant  6 / 2600 / 140, user_simulator 4 / 400 / 40
  hipporag/chunk0     FULL_none        2 conv  assistant  2 / 1000 /  40
                      SHARDED_history  2 conv  assistant  6 / 2200 / 180, user_simulator 4 / 400 / 40
                      retriever (job) 8 / 920 / 92, classifier (job) 7 / 700 / 14, judge (job) 3 / 450 / 3
  hipporag conversation files: FULL 1 assistant turn per conversation, retrieval_cost 1 / 100 / 10;
  SHARDED 3 assistant turns (2 of the user turns from the simulator), each 1 / 120 / 12;
  every turn retrieved 5 passages (recall_k), the measured run showed top_k 3. One SHARDED reply
  is empty (labelled missing by rule): 2 + 5 = 7 classifier calls. Judgments: FULL one
  exact_match, one llm; SHARDED both llm (distinct answers): 3 judge calls.
  Only the hipporag job carries classifier and judge accounting (the others have no files).
  shards/d (3 questions) 9 / 3000 / 600; graphs/miniworld (10 passages) 10 / 5000 / 1000.

Per conversation (ratio of sums): FULL closed 1.5 / 300 / 30, FULL open (6 + 2 conv) 1 / 500 / 20,
SHARDED closed 3 / 600 / 60 (+ user 2 / 200 / 20), SHARDED open (8 conv) 3 / 1100 / 90 (+ user
2 / 200 / 20); hipporag retriever FULL 1 / 100 / 10, SHARDED 3 / 360 / 36. Per shard question
3 / 1000 / 200, per classified assistant turn 700 / 7 = 1 / 100 / 2, per judged conversation
450 / 3 = 1 / 150 / 1, per passage 1 / 500 / 100. Passages: open FULL call 500 - closed 200 = 300
for 3 shown, 100 each. From the files: classified turns per conversation FULL open 1, SHARDED
open 2.5 (3 turns); judged share FULL open 1/2, SHARDED open 2/2. Closed cells have no files:
classifier calls = their charged assistant calls (1.5, 3), judged share borrowed from the open
cell of the condition (0.5, 1).

Target grid: datasets A (10 questions) and B (4), chunk_size 4 (A: 3 chunks, B: 1), 3 runs,
models big (vLLM 8B, one A100) and api (OpenAI; also user simulator, sharding, classifier and
judge model), retrievers closed_book, bm25 and hipporag (its LLM: the knowledge-graph model
tiny), conditions FULL and SHARDED, policy history, top_k 3. Per model 3 retrievers x 4 chunks =
12 jobs with 2 cells each; per cell (10 + 4) x 3 = 42 conversations. So per assistant model:
requests 42 x (1.5 + 3 + 2 x (1 + 3)) = 525, prompt 42 x (300 + 600 + 2 x 1600) = 172,200,
completion 42 x (30 + 60 + 2 x 110) = 13,020; user simulator over both models 2 x 42 x 3 x
(2 / 200 / 20) = 504 / 50,400 / 5,040; retriever (tiny) 2 x 42 x (4 / 460 / 46) = 336 / 38,640 /
3,864; classifier, inside each job, 2 x 42 x (1.5 + 3 [closed: no file, their calls] + 2 x (1 + 2.5))
= 966 calls -> 966 / 96,600 / 1,932; judge 2 x 42 x (0.5 + 1 + 2 x (0.5 + 1)) = 378 judged
conversations -> 378 / 56,700 / 378; sharding 14 questions -> 42 / 14,000 / 2,800; knowledge graph
of miniworld (20 passages) once -> 20 / 10,000 / 2,000.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from convrag.cli import main
from convrag.config import REPO_ROOT, validate_config
from convrag.errors import DataError
from convrag.estimate import (
    Throughput,
    Tokens,
    cold_backend,
    estimate,
    measure,
    read_simulate_accounting,
    scan_conversations,
)
from convrag.llm.registry import load_registry

REGISTRY_YAML = {
    "big": {"backend": "vllm", "weights": {"hf_repo": "org/big"}, "gpus": 1, "gpu_model": "a100",
            "tensor_parallel": 1, "params_b": 8.0},
    "api": {"backend": "openai", "api_model": "x", "base_url": "http://localhost", "api_key_env": "NO_KEY",
            "params_b": None},
    "tiny": {"backend": "transformers", "weights": {"hf_repo": "org/tiny"}, "gpus": 0, "params_b": 0.1},
}
MEASURED_CONFIG = {"retrievers": {"closed_book": {"kind": "closed_book"}, "bm25": {"kind": "bm25"},
                                  "hipporag": {"kind": "hipporag"}},
                   "lic_rag": {"top_k": 3}}


def _acc(requests, prompt, completion, calls=None, backend_prompt=None, backend_completion=None,
         unique=None, hits=0):
    """An Engine accounting dict (by default: nothing cached, nothing duplicated)."""
    calls = requests if calls is None else calls
    return {"requests": requests, "unique_requests": calls + hits if unique is None else unique, "cache_hits": hits,
            "calls": calls, "batches": 1, "prompt_tokens": prompt, "completion_tokens": completion,
            "backend_prompt_tokens": prompt if backend_prompt is None else backend_prompt,
            "backend_completion_tokens": completion if backend_completion is None else backend_completion,
            "backend_seconds": 1.0, "load_seconds": 0.0, "wall_seconds": 1.0}


def _usage(requests, prompt, completion, calls=None, backend_prompt=None, backend_completion=None):
    """A cell's per-role figures (the runner's tally: calls and backend_* count every uncached request)."""
    return {"requests": requests, "calls": requests if calls is None else calls, "prompt_tokens": prompt,
            "completion_tokens": completion,
            "backend_prompt_tokens": prompt if backend_prompt is None else backend_prompt,
            "backend_completion_tokens": completion if backend_completion is None else backend_completion}


def _write_job(root: Path, retriever: str, chunk: int, cells: dict, job_roles: dict | None = None,
               retriever_acc: dict | None = None, model: str = "tiny") -> Path:
    """``cells``: {"FULL_none": (conversations, assistant usage, user usage | None)}. The job's
    assistant and user-simulator accounting defaults to the sum of its cells (no cache, no
    duplicates); ``job_roles`` overrides them and adds others (classifier, judge)."""
    d = root / "lic_rag" / "conversations" / "d" / model / retriever
    d.mkdir(parents=True, exist_ok=True)
    acc: dict = {}
    job_roles = job_roles or {}
    for role, idx in (("assistant", 1), ("user_simulator", 2)):
        if role in job_roles:
            acc[role] = job_roles[role]
            continue
        parts = [c[idx] for c in cells.values() if c[idx] is not None]
        acc[role] = _acc(sum(p["requests"] for p in parts), sum(p["prompt_tokens"] for p in parts),
                         sum(p["completion_tokens"] for p in parts))
    for role in set(job_roles) - {"assistant", "user_simulator"}:
        acc[role] = job_roles[role]
    if retriever_acc is not None:
        acc["retriever"] = retriever_acc
    acc["cells"] = {}
    for name, (conv, a, u) in cells.items():
        acc["cells"][name] = {"conversations": conv, "unanswered_turns": 0, "assistant": a}
        if u is not None:
            acc["cells"][name]["user_simulator"] = u
    acc["job"] = {"conversations": sum(c[0] for c in cells.values()), "questions": 4, "cells": len(cells),
                  "wall_seconds": 1.0, "unanswered_turns": 0}
    p = d / f"chunk{chunk}.accounting.json"
    p.write_text(json.dumps(acc))
    return p


def _assistant(cost=None, retrieved=5, query="q", text="reply", category_raw=None) -> dict:
    """An assistant turn; ``category_raw`` (str) adds the classifier's labels (judges.label)."""
    t = {"role": "assistant", "text": text, "query": query,
         "retrieved": [{"doc_id": f"p{i}", "score": 1.0} for i in range(retrieved if query is not None else 0)],
         "answer": None, "answered": False}
    if cost is not None:
        t["retrieval_cost"] = {"llm_calls": cost[0], "prompt_tokens": cost[1], "completion_tokens": cost[2],
                               "parse_failures": 0}
    if category_raw is not None:
        t.update(category="missing" if not text.strip() else "answer_attempt", category_parsed=True,
                 category_raw=category_raw)
    return t


def _judged(turns: list[dict], qid: str, final_answer: str | None, method: str) -> dict:
    """A conversation record with the judge's verdict (judges.label)."""
    return {"dataset": "d", "qid": qid, "final_answer": final_answer, "turns": turns,
            "judgment": {"correct": method == "exact_match", "method": method, "parsed": True,
                         "raw": "INCORRECT" if method == "llm" else ""}}


def _sim(text="clue") -> dict:
    return {"role": "user", "text": text, "shard_id": 2, "rephrased": True, "selection": "llm"}


def _write_convs(job: Path, cell: str, convs: list) -> None:
    """``convs``: turn lists, or whole conversation records (dicts)."""
    d = job.parent / cell
    d.mkdir(parents=True, exist_ok=True)
    chunk = job.name.split(".")[0]
    (d / f"{chunk}.jsonl").write_text("".join(json.dumps(c if isinstance(c, dict) else {"turns": c}) + "\n"
                                              for c in convs))


@pytest.fixture
def measured_run(tmp_path) -> Path:
    res = tmp_path / "results"
    _write_job(res, "closed_book", 0, {"FULL_none": (4, _usage(6, 1200, 120), None),
                                       "SHARDED_none": (4, _usage(12, 2400, 240), _usage(8, 800, 80))})
    _write_job(res, "bm25", 0, {"FULL_none": (4, _usage(4, 2000, 80), None),
                                "SHARDED_history": (4, _usage(12, 4000, 400), _usage(8, 800, 80))})
    _write_job(res, "bm25", 1, {"FULL_none": (2, _usage(2, 1000, 40), None),
                                "SHARDED_history": (2, _usage(6, 2600, 140), _usage(4, 400, 40))})
    hip = _write_job(res, "hipporag", 0, {"FULL_none": (2, _usage(2, 1000, 40), None),
                                          "SHARDED_history": (2, _usage(6, 2200, 180), _usage(4, 400, 40))},
                     job_roles={"classifier": _acc(7, 700, 14), "judge": _acc(3, 450, 3)},
                     retriever_acc=_acc(8, 920, 92))
    full = [{"role": "user", "text": "the question", "shard_id": None}, _assistant((1, 100, 10), category_raw="a")]
    goal = {"role": "user", "text": "goal", "shard_id": 1, "selection": "first"}

    def sharded(second_reply: str) -> list[dict]:
        return [goal, _assistant((1, 120, 12), category_raw="a"), _sim(),
                _assistant((1, 120, 12), text=second_reply, category_raw="a" if second_reply else ""), _sim(),
                _assistant((1, 120, 12), category_raw="a")]

    _write_convs(hip, "FULL_none", [_judged(full, "q1", "gold", "exact_match"), _judged(full, "q2", "x", "llm")])
    _write_convs(hip, "SHARDED_history", [_judged(sharded(""), "q1", "y", "llm"),
                                          _judged(sharded("reply"), "q2", "z", "llm")])
    shards = res / "lic_rag" / "shards" / "d"
    shards.mkdir(parents=True)
    (shards / "accounting.json").write_text(json.dumps({"model": "tiny", **_acc(9, 3000, 600)}))
    (shards / "shards.jsonl").write_text("".join(json.dumps({"qid": f"q{i}", "shards": []}) + "\n" for i in range(3)))
    graph = res / "graphs" / "miniworld"
    graph.mkdir(parents=True)
    (graph / "accounting.json").write_text(json.dumps({"model": "tiny", **_acc(10, 5000, 1000)}))
    (graph / "manifest.json").write_text(json.dumps({"retriever": "knowledge_graph", "n_docs": 10}))
    return res


@pytest.fixture
def registry_path(tmp_path) -> Path:
    p = tmp_path / "models.yaml"
    p.write_text(yaml.safe_dump(REGISTRY_YAML))
    return p


def _target(registry_path: Path, retrievers=None, **lic) -> dict:
    cfg = copy.deepcopy(yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text()))
    cfg["models_registry"] = str(registry_path)
    cfg["datasets"] = {"A": {"corpus": "miniworld", "n_questions": 10}, "B": {"corpus": "miniworld", "n_questions": 4}}
    cfg["retrievers"] = retrievers or {"closed_book": {"kind": "closed_book"},
                                       "bm25": {"kind": "bm25", "params": {"backend": "bm25s"}},
                                       "hipporag": {"kind": "hipporag"}}
    cfg["knowledge_graph"]["model"] = "tiny"
    cfg["lic_rag"].update({
        "datasets": ["A", "B"], "models": ["big", "api"], "retrievers": list(cfg["retrievers"]),
        "conditions": ["FULL", "SHARDED"], "policies": ["history"], "runs": 3, "chunk_size": 4, "top_k": 3,
        "recall_k": 5, "assistant": {"temperature": 1.0, "max_tokens": 1000},
        "user_simulator": {"model": "api", "temperature": 1.0, "max_tokens": 1000},
        "sharding": {"model": "api", "attempts": 3, "max_tokens": 100, "fallback": "none"},
        "classifier": {"model": None, "max_tokens": 8}, "judge": {"model": None, "max_tokens": 8},
    })
    cfg["lic_rag"].update(lic)
    return validate_config(cfg, registry=load_registry(registry_path))


def _measure(res: Path, **kw):
    kw.setdefault("measured_config", MEASURED_CONFIG)
    return measure([str(res / "lic_rag/conversations/**/chunk*.accounting.json")],
                   [str(res / "lic_rag/shards/*/accounting.json")],
                   graph_globs=[str(res / "graphs/*/accounting.json")],
                   index_manifest_globs=[str(res / "indexes/*/*/manifest.json")], **kw)


def _est(res: Path, registry_path: Path, cfg: dict | None = None, **kw) -> dict:
    kw.setdefault("corpus_passages", {"miniworld": 20})
    return estimate(cfg or _target(registry_path), _measure(res), load_registry(registry_path), **kw)


def _model(est: dict, name: str) -> dict:
    return next(m for m in est["models"] if m["model"] == name)


def _tok(m: dict, role: str | None = None, sc: str = "measured") -> tuple:
    t = m["tokens"][sc] if role is None else m["by_role"][role][sc]
    return t["requests"], t["prompt_tokens"], t["completion_tokens"]


def test_per_conversation_means_pool_cells_over_jobs(measured_run):
    m = _measure(measured_run)
    assert (m.files, m.sharding.files, m.sharding.units) == (4, 1, 3)
    sharded = m.cells[("SHARDED", "history", "open")]
    assert (sharded.jobs, sharded.conversations) == (3, 8)
    per = sharded.per_conversation()
    assert (per["assistant"].requests, per["assistant"].prompt_tokens, per["assistant"].completion_tokens) \
        == pytest.approx((3.0, 1100.0, 90.0))
    assert (per["user_simulator"].requests, per["user_simulator"].prompt_tokens) == pytest.approx((2.0, 200.0))
    full = m.cells[("FULL", "none", "closed")].per_conversation()["assistant"]
    assert (full.requests, full.prompt_tokens, full.completion_tokens) == pytest.approx((1.5, 300.0, 30.0))
    # closed-book SHARDED runs with policy none and is keyed as closed
    assert ("SHARDED", "none", "closed") in m.cells
    # only the hipporag job has conversation files: 2 of the 8 SHARDED open conversations, 3 turns each
    assert (sharded.file_conversations, sharded.turns_per_conversation()) == (2, pytest.approx(3.0))
    assert sharded.history_per_conversation() == pytest.approx((0 + 1 + 2, 1 + 2))
    assert m.cells[("FULL", "none", "closed")].turns_per_conversation() is None
    # the retriever's LLM work per kind: 3 calls of 120 / 12 per SHARDED conversation
    rc = m.retriever_cells[("hipporag", "SHARDED", "history")]
    assert (rc.conversations, rc.queries) == (2, 6)
    r = rc.per_conversation()
    assert (r.requests, r.prompt_tokens, r.completion_tokens) == pytest.approx((3.0, 360.0, 36.0))
    assert ("bm25", "FULL", "none") not in m.retriever_cells  # BM25 calls no LLM
    # passages: 5 retrieved (recall_k) per turn, 3 shown (the measured top_k)
    assert m.measured_passages_per_turn() == pytest.approx(3.0)
    assert m.passage_block_tokens() == pytest.approx(300.0)
    # classifier and judge from the hipporag job's accounting, per unit its files give
    assert (m.classifier.files, m.classifier.units, m.judge.files, m.judge.units) == (1, 7, 1, 3)
    c, j = m.classifier.per_unit(), m.judge.per_unit()
    assert (c.requests, c.prompt_tokens, c.completion_tokens) == pytest.approx((1.0, 100.0, 2.0))
    assert (j.requests, j.prompt_tokens, j.completion_tokens) == pytest.approx((1.0, 150.0, 1.0))
    assert sharded.classified_per_conversation() == pytest.approx(2.5)  # one of the 6 replies is empty
    assert (sharded.judged_share(), m.cells[("FULL", "none", "open")].judged_share()) == pytest.approx((1.0, 0.5))
    assert m.cells[("FULL", "none", "closed")].judged_share() is None
    assert any("'classifier' measured in 1 of 4 simulate jobs" in n for n in m.notes)
    assert not any("requests, its conversation files" in n for n in m.notes)  # 7 calls, 3 judged pairs: as asked
    assert m.graph.per_unit().completion_tokens == pytest.approx(100.0)


def test_grid_totals_per_model_and_role(measured_run, registry_path):
    est = _est(measured_run, registry_path)
    g = est["grid"]
    assert (g["simulate_jobs"], g["conversations"], g["questions"]) == (24, 2 * 6 * 42, 14)
    assert g["shard_jobs"] == 2 and "classifier_jobs" not in g and "judge_jobs" not in g
    assert (g["assistant_turns_classified"], g["conversations_judged"]) == pytest.approx((966, 378))
    assert g["graph_builds"] == [{"corpus": "miniworld", "retriever": None, "model": "tiny", "passages": 20}]
    big, api, tiny = _model(est, "big"), _model(est, "api"), _model(est, "tiny")
    assert (big["simulate_jobs"], big["conversations"]) == (12, 252)
    assert big["roles"] == ["assistant"]
    assert _tok(big) == pytest.approx((525, 172_200, 13_020))
    assert api["roles"] == ["assistant", "classifier", "judge", "sharding", "user_simulator"]
    assert _tok(api, "user_simulator") == pytest.approx((504, 50_400, 5_040))
    assert _tok(api, "classifier") == pytest.approx((966, 96_600, 1_932))
    assert _tok(api, "judge") == pytest.approx((378, 56_700, 378))
    assert _tok(api, "sharding") == pytest.approx((42, 14_000, 2_800))
    assert _tok(api) == pytest.approx((525 + 504 + 966 + 378 + 42, 172_200 + 50_400 + 96_600 + 56_700 + 14_000,
                                       13_020 + 5_040 + 1_932 + 378 + 2_800))
    # the retriever's LLM work goes to the retriever's LLM (here the knowledge-graph model), not to
    # the assistant; the knowledge graph is built once per corpus
    assert tiny["roles"] == ["knowledge_graph", "retriever"]
    assert _tok(tiny, "retriever") == pytest.approx((336, 38_640, 3_864))
    assert _tok(tiny, "knowledge_graph") == pytest.approx((20, 10_000, 2_000))
    # one load per job and model: big its 12 jobs; api its own 12 jobs (all its roles), big's 12
    # (user simulator, classifier, judge: one load) + 2 shard jobs; tiny the 8 hipporag jobs + 1 graph build
    assert (big["model_loads"], api["model_loads"], tiny["model_loads"]) == (12, 26, 9)
    assert api["model_loads_simulate"] == 24
    assert est["totals"]["measured"]["prompt_tokens"] == pytest.approx(
        2 * 172_200 + 50_400 + 96_600 + 56_700 + 14_000 + 38_640 + 10_000)
    assert not any("not measured" in n or "left out" in n for n in est["notes"])


def test_classifier_and_judge_are_measured_per_call_from_the_job(tmp_path):
    """One bm25 job, FULL 3 conversations and SHARDED 1. FULL replies: empty (labelled missing by
    rule: no call), "x" whose classifier output was empty (category_raw "": still a call), "x";
    SHARDED 2 replies. Classifier calls 2 + 2 = 4, accounting 4 / 400 / 8. Judgments: FULL
    no_answer, llm (q1, "x") twice (one shared call), SHARDED llm (q2, "w"): 3 judged
    conversations, 2 calls, accounting 2 / 300 / 2."""
    res = tmp_path / "results"
    cells = {"FULL_none": (3, _usage(3, 300, 30), None),
             "SHARDED_history": (1, _usage(2, 400, 40), _usage(1, 100, 10))}
    roles = {"classifier": _acc(4, 400, 8), "judge": _acc(2, 300, 2)}
    job = _write_job(res, "bm25", 0, cells, job_roles=roles)
    q = {"role": "user", "text": "q"}
    full = [_judged([q, _assistant(text="", category_raw="")], "q1", None, "no_answer"),
            _judged([q, _assistant(text="x", category_raw="")], "q1", "x", "llm"),
            _judged([q, _assistant(text="x", category_raw="INCORRECT?")], "q1", "x", "llm")]
    sharded = [_judged([q, _assistant(category_raw="a"), _sim(), _assistant(category_raw="a")], "q2", "w", "llm")]
    _write_convs(job, "FULL_none", full)
    _write_convs(job, "SHARDED_history", sharded)
    acc = read_simulate_accounting(job, top_k=3)
    assert not acc.notes
    (n_cls, cls), (n_judged, judge) = acc.labels["classifier"], acc.labels["judge"]
    assert (n_cls, cls.requests, cls.prompt_tokens, cls.completion_tokens) == (4, 4, 400, 8)
    assert (n_judged, judge.requests, judge.prompt_tokens) == (3, 2, 300)
    m = measure([str(res / "lic_rag/conversations/**/chunk*.accounting.json")], measured_config=MEASURED_CONFIG)
    c, j = m.classifier.per_unit(), m.judge.per_unit()
    assert (c.requests, c.prompt_tokens, c.completion_tokens) == pytest.approx((1.0, 100.0, 2.0))
    assert (j.requests, j.prompt_tokens, j.completion_tokens) == pytest.approx((2 / 3, 100.0, 2 / 3))
    f = m.cells[("FULL", "none", "open")]
    assert (f.turns_per_conversation(), f.classified_per_conversation(), f.judged_share()) \
        == pytest.approx((1.0, 2 / 3, 2 / 3))
    # an accounting that disagrees with its files is noted, naming the file
    job = _write_job(res, "bm25", 0, cells, job_roles={**roles, "classifier": _acc(5, 500, 10)})
    assert any("chunk0.accounting.json: its 'classifier' accounting has 5 requests, its conversation files 4 "
               "assistant turns with a non-empty reply" in n for n in read_simulate_accounting(job, top_k=3).notes)
    # labels missing from a file whose job has the role: a stale file, an error naming it
    _write_convs(job, "SHARDED_history", [{"turns": [q, _assistant()]}])
    with pytest.raises(DataError, match=r"SHARDED_history/chunk0\.jsonl: record 1: an assistant turn has no "
                                        r"'category_raw', but .*chunk0\.accounting\.json has a 'classifier'"):
        read_simulate_accounting(job, top_k=3)
    job = _write_job(res, "bm25", 0, cells, job_roles={"judge": roles["judge"]})
    with pytest.raises(DataError, match=r"SHARDED_history/chunk0\.jsonl: record 1: no 'judgment', but"):
        read_simulate_accounting(job, top_k=3)
    # without all its conversation files a job's labels are not used
    (job.parent / "SHARDED_history" / "chunk0.jsonl").unlink()
    acc = read_simulate_accounting(job, top_k=3)
    assert acc.labels["judge"] is None
    assert any("its 'judge' accounting is not used" in n for n in acc.notes)


def test_a_gpu_classifier_and_judge_load_with_every_simulate_job(measured_run, registry_path):
    """Classifier and judge on big (the fixture's measurements): no jobs of their own; big loads
    once in each of its 12 jobs (all three roles) and once in each of api's 12."""
    # prefill 100 tok/s, decode 10 tok/s; load 4 s + 16 GB at 16/6 GB/s = 10 s per job
    tp = Throughput(prefill_mfu=0.1 / 19.5, decode_mfu=0.01 / 19.5, load_fixed_s=4.0, load_gb_per_s=16 / 6)
    cfg = _target(registry_path, classifier={"model": "big", "max_tokens": 8}, judge={"model": "big", "max_tokens": 8})
    est = _est(measured_run, registry_path, cfg, throughput=tp)
    big, api = _model(est, "big"), _model(est, "api")
    assert big["roles"] == ["assistant", "classifier", "judge"]
    assert _tok(big, "classifier") == pytest.approx((966, 96_600, 1_932))
    assert _tok(big, "judge") == pytest.approx((378, 56_700, 378))
    assert "classifier" not in api["by_role"] and "judge" not in api["by_role"]
    assert (big["model_loads"], big["model_loads_simulate"], api["model_loads"]) == (24, 24, 26)
    # (172,200 + 96,600 + 56,700) / 100 + (13,020 + 1,932 + 378) / 10 + 24 loads x 10 s
    assert big["gpu_hours"]["measured"] == pytest.approx((3_255 + 1_533 + 240) / 3600, abs=0.005)
    # the job's wall time includes its labelling: per question-run of a bm25 (or hipporag) job
    # assistant 500 + 1,100 / 20 + 90, classifier (1 + 2.5) x 100 / 2, judge (0.5 + 1) x 150 / 1:
    # 2,175 / 100 + 118.5 / 10 = 33.6 s (the closed_book job: 1,575 / 100.5, 25.8 s); 12 per chunk
    assert big["max_job_minutes"]["measured"] == pytest.approx((10 + 12 * 33.6) / 60, abs=0.05)
    assert any("big: runs as user simulator, retriever LLM, classifier or judge inside other models' simulate jobs"
               in n for n in est["notes"])


def test_a_job_of_two_cells_is_charged_the_sum_of_its_cells(tmp_path, registry_path):
    """One measured bm25 job with two cells; a target of one dataset of 2 questions, 1 run,
    one bm25 job: its assistant tokens are FULL's plus SHARDED's, and big loads once."""
    res = tmp_path / "results"
    _write_job(res, "bm25", 0, {"FULL_none": (2, _usage(2, 600, 40), None),
                                "SHARDED_history": (2, _usage(6, 3000, 180), _usage(4, 800, 40))})
    m = measure([str(res / "lic_rag/conversations/**/chunk*.accounting.json")], measured_config=MEASURED_CONFIG)
    cfg = _target(registry_path, retrievers={"bm25": {"kind": "bm25", "params": {"backend": "bm25s"}}},
                  datasets=["B"], models=["big"], runs=1, chunk_size=4)
    cfg["datasets"]["B"]["n_questions"] = 2
    est = estimate(cfg, m, load_registry(registry_path))
    big = _model(est, "big")
    assert (est["grid"]["simulate_jobs"], big["model_loads"]) == (1, 1)
    # per conversation FULL 1 / 300 / 20, SHARDED 3 / 1500 / 90; 2 conversations per cell
    assert _tok(big) == pytest.approx((2 * (1 + 3), 2 * (300 + 1500), 2 * (20 + 90)))
    assert big["conversations"] == 4


def test_gpu_hours_and_the_job_time_is_the_sum_over_its_cells(measured_run, registry_path):
    # A100 bf16 peak 312 TFLOP/s, 8B params: 2 x 8e9 FLOP per token -> 19,500 tok/s at efficiency 1;
    # prefill 1,000 tok/s and decode 100 tok/s; load 4 s + 16 GB at 16/6 GB/s = 10 s per job.
    tp = Throughput(prefill_mfu=1 / 19.5, decode_mfu=0.1 / 19.5, load_fixed_s=4.0, load_gb_per_s=16 / 6)
    est = _est(measured_run, registry_path, throughput=tp, job_minutes=40.0)
    big, api = _model(est, "big"), _model(est, "api")
    assert big["load_seconds"] == pytest.approx(10.0)
    expected_s = 172_200 / 1000 + 13_020 / 100 + 12 * 10.0
    assert big["gpu_hours"]["measured"] == pytest.approx(expected_s / 3600, abs=0.005)
    assert api["gpu_hours"]["measured"] is None  # API: tokens only
    assert _model(est, "tiny")["gpu_hours"]["measured"] == 0.0  # a CPU model
    assert [s["size_class"] for s in est["size_classes"]] == ["small (<=10B)"]
    # Long scenario, per question-run (one conversation of each cell), everything at 1,000 tokens:
    #   closed_book job: FULL 1.5 calls -> 1,500 completion, prompt 300 + 980 x 0.375 (earlier
    #   replies, no file: 1.5 x 0.5 / 2); SHARDED 3 calls -> 3,000, prompt 600 + 980 x 3 = 3,540:
    #   4,207.5 / 1,000 + 4,500 / 100 = 49.2075 s.  bm25 / hipporag jobs: FULL 500 + 1,000 / 100;
    #   SHARDED 1,100 + 970 x 3 (from the files) + 3,000 / 100: 4.51 + 40 = 44.51 s.
    # The heaviest job (closed_book) at chunk c takes 10 + 3c x 49.2075 s; the budget is half of 40
    # minutes, 1,200 s: chunk 10 takes 1,486 s (its heaviest single cell alone, 33.54 s per
    # question-run, would fit: 1,016 s), chunk 5 takes 748.1 s: 5 is recommended.
    assert big["max_job_minutes"]["long"] == pytest.approx((10 + 12 * 49.2075) / 60, abs=0.05)
    lay = est["layout"]
    assert lay["chunk_size_recommended"] == 5
    big_layout = next(m for m in lay["models"] if m["model"] == "big")
    assert (big_layout["jobs_now"], big_layout["jobs_recommended"]) == (12, 9)  # 3 retrievers x (2 + 1) chunks
    assert big_layout["sbatch_gpus"] == "a100:1"
    assert big_layout["job_minutes_recommended_long"] == pytest.approx(748.1125 / 60, abs=0.05)
    assert big_layout["gpu_hours_recommended"]["measured"] == pytest.approx((expected_s - 3 * 10.0) / 3600, abs=0.005)


def test_retriever_on_the_assistant_model_loads_once_per_job(measured_run, registry_path):
    retrievers = {"closed_book": {"kind": "closed_book"}, "bm25": {"kind": "bm25", "params": {"backend": "bm25s"}},
                  "hipporag": {"kind": "hipporag", "params": {"llm": "big"}}}
    est = _est(measured_run, registry_path, _target(registry_path, retrievers=retrievers))
    big = _model(est, "big")
    # its 12 jobs (its own hipporag jobs load it once for both roles) + api's 4 hipporag jobs
    assert (big["model_loads"], big["model_loads_simulate"]) == (16, 16)
    assert _tok(big, "retriever") == pytest.approx((336, 38_640, 3_864))
    assert _tok(big) == pytest.approx((525 + 336, 172_200 + 38_640, 13_020 + 3_864))
    assert "retriever" not in _model(est, "tiny")["by_role"]
    assert any("big: runs as user simulator, retriever LLM, classifier or judge inside other models' simulate jobs"
               in n for n in est["notes"])


def test_completion_caps_and_long_scenario(measured_run, registry_path):
    # long scenario: every assistant reply reaches max_tokens (1000)
    est = _est(measured_run, registry_path)
    assert _model(est, "big")["tokens"]["long"]["completion_tokens"] == pytest.approx(525 * 1000)
    # in the long scenario no reply is empty: every assistant turn is classified (open SHARDED 3
    # per conversation, not 2.5: 1,050 calls), and the reply in its prompt adds 980 (FULL, closed
    # SHARDED) or 970 (open SHARDED) tokens: 2 x 42 x (1.5 x 980 + 3 x 980 + 2 x (980 + 3 x 970))
    api = _model(est, "api")
    assert api["by_role"]["classifier"]["long"]["requests"] == pytest.approx(1_050)
    assert api["by_role"]["classifier"]["long"]["prompt_tokens"] == pytest.approx(105_000 + 84 * 12_190)
    assert api["by_role"]["classifier"]["long"]["completion_tokens"] == pytest.approx(1_050 * 8)
    # measured scenario under a cap of 25 tokens: only SHARDED open (30 per call) is cut, by 5 per
    # call; its prompts hold 3 earlier replies per conversation (assistant and user simulator)
    est = _est(measured_run, registry_path, _target(registry_path, assistant={"temperature": 1.0, "max_tokens": 25}))
    big, api = _model(est, "big"), _model(est, "api")
    assert big["tokens"]["measured"]["completion_tokens"] == pytest.approx(13_020 - 42 * 2 * 3 * 5)
    assert big["tokens"]["measured"]["prompt_tokens"] == pytest.approx(172_200 - 42 * 2 * 3 * 5)
    assert api["by_role"]["user_simulator"]["measured"]["prompt_tokens"] == pytest.approx(50_400 - 2 * 42 * 2 * 3 * 5)
    # the classifier: 2.5 classified turns per open SHARDED conversation, 5 tokens shorter each
    assert api["by_role"]["classifier"]["measured"]["prompt_tokens"] == pytest.approx(96_600 - 2 * 42 * 2 * 2.5 * 5)
    # the judge's 1 completion token per call is under its cap (8); long: 8 per call
    assert _tok(api, "judge", "long") == pytest.approx((378, 56_700, 378 * 8))


def test_unmeasured_cell_falls_back_with_a_note(measured_run, registry_path):
    est = _est(measured_run, registry_path, _target(registry_path, policies=["current"]))
    assert any("SHARDED/current/open was not measured: using SHARDED/history/open" in n for n in est["notes"])
    assert any("hipporag/SHARDED/current was not measured: using hipporag/SHARDED/history" in n for n in est["notes"])
    assert _model(est, "big")["tokens"]["measured"]["prompt_tokens"] == pytest.approx(172_200)


def test_unmeasured_retriever_kind_and_corpus_size_are_left_out_with_notes(measured_run, registry_path):
    retrievers = {"closed_book": {"kind": "closed_book"}, "tog2": {"kind": "tog2"}}
    est = _est(measured_run, registry_path, _target(registry_path, retrievers=retrievers), corpus_passages={})
    assert any("retriever kind tog2 calls an LLM per query, but no measured conversation" in n for n in est["notes"])
    assert any("knowledge graph of corpus miniworld: its passage count is unknown" in n for n in est["notes"])
    assert "retriever" not in _model(est, "tiny")["by_role"] and "knowledge_graph" not in _model(est, "tiny")["by_role"]


def test_recap_is_charged_its_recap_turn_and_its_sharded_twin_runs_unwritten(tmp_path, registry_path):
    """Measured: a SHARDED conversation of 2 assistant turns and its RECAP copy (the same turns +
    the recap). The RECAP cell's accounting holds only the recap call, whose prompt carries the 2
    earlier replies. Target: RECAP only, 1 job of 2 conversations: the SHARDED twin is simulated
    (charged) but not written (not classified)."""
    res = tmp_path / "results"
    job = _write_job(res, "bm25", 0, {"SHARDED_history": (1, _usage(2, 300, 20), _usage(1, 100, 10)),
                                      "RECAP_history": (1, _usage(1, 400, 10), None)})
    goal = {"role": "user", "text": "goal", "shard_id": 1, "selection": "first"}
    sharded = [goal, _assistant(), _sim(), _assistant()]
    recap = sharded + [{"role": "user", "text": "all clues", "shard_id": None, "recap": True}, _assistant()]
    _write_convs(job, "SHARDED_history", [sharded])
    _write_convs(job, "RECAP_history", [recap])
    s = scan_conversations([{"turns": recap}], "RECAP", 3)
    assert (s.assistant_turns, s.assistant_history, s.user_history, s.open_turns) == (3, 2, 0, 1)
    m = measure([str(res / "lic_rag/conversations/**/chunk*.accounting.json")], measured_config=MEASURED_CONFIG)
    cfg = _target(registry_path, retrievers={"bm25": {"kind": "bm25", "params": {"backend": "bm25s"}}},
                  datasets=["B"], models=["big"], runs=1, chunk_size=4, conditions=["RECAP"],
                  assistant={"temperature": 1.0, "max_tokens": 100},
                  user_simulator={"model": "api", "temperature": 1.0, "max_tokens": 50})
    cfg["datasets"]["B"]["n_questions"] = 2
    est = estimate(cfg, m, load_registry(registry_path))
    big, api = _model(est, "big"), _model(est, "api")
    assert est["grid"]["conversations"] == 2 and big["conversations"] == 2
    assert est["grid"]["assistant_turns_classified"] == pytest.approx(2 * 3)
    # no classifier or judge accounting in the measured job: their calls are left out, with notes
    assert est["grid"]["conversations_judged"] is None
    assert "classifier" not in api["by_role"] and "judge" not in api["by_role"]
    assert any("no measured simulate job has a 'judge' accounting" in n and "left out" in n for n in est["notes"])
    assert any("RECAP cell without its SHARDED twin" in n for n in est["notes"])
    # measured: twin 2 / 300 / 20 + recap 1 / 400 / 10 per conversation
    assert _tok(big) == pytest.approx((6, 1400, 60))
    # long (replies at 100, 90 more each): twin prompt 300 + 90 x 1, recap 400 + 90 x 2;
    # user simulator 100 + 90 x 1 prompt, 50 completion
    assert _tok(big, sc="long") == pytest.approx((6, 2 * (390 + 580), 2 * 300))
    assert _tok(api, "user_simulator", "long") == pytest.approx((2, 2 * 190, 2 * 50))


def test_cold_cache_counts_cached_answers_as_backend_work():
    # 10 requests, 8 distinct, 3 of them cache hits; the cells' uncached requests: 6 calls
    # (one duplicate) of 600 / 60 tokens. Cached: 4 requests, 3 distinct, 400 / 40 tokens.
    acc = _acc(10, 1000, 100, calls=5, backend_prompt=450, backend_completion=50, unique=8, hits=3)
    t = cold_backend(acc, Tokens(requests=10, calls=6, backend_prompt_tokens=600, backend_completion_tokens=60))
    assert (t.calls, t.backend_prompt_tokens, t.backend_completion_tokens) == pytest.approx((8, 450 + 300, 50 + 30))
    # without the cells: distinct hits as long as the distinct misses
    t = cold_backend(acc)
    assert (t.calls, t.backend_prompt_tokens) == pytest.approx((8, 450 * 8 / 5))
    # nothing cached: exactly the measured backend figures
    t = cold_backend(_acc(10, 1000, 100, calls=8, backend_prompt=900, backend_completion=90))
    assert (t.calls, t.backend_prompt_tokens, t.backend_completion_tokens) == pytest.approx((8, 900, 90))


def test_a_cell_answered_from_an_earlier_runs_cache_still_costs_backend_tokens(tmp_path):
    res = tmp_path / "results"
    p = _write_job(res, "bm25", 0,
                   {"FULL_none": (2, _usage(2, 400, 20, calls=0, backend_prompt=0, backend_completion=0), None),
                    "SHARDED_history": (2, _usage(4, 1200, 80), None)},
                   job_roles={"assistant": _acc(6, 1600, 100, calls=4, backend_prompt=1200, backend_completion=80,
                                                unique=6, hits=2)})
    job = read_simulate_accounting(p, top_k=3)
    full = job.cells[("FULL", "none")].roles["assistant"]
    assert (full.calls, full.backend_prompt_tokens, full.backend_completion_tokens) == pytest.approx((2, 400, 20))
    assert job.warm_cache


def test_old_per_cell_layout_is_refused_naming_the_file(tmp_path):
    d = tmp_path / "results/lic_rag/conversations/d/tiny/bm25/FULL_none"
    d.mkdir(parents=True)
    p = d / "chunk0.accounting.json"
    p.write_text(json.dumps({"assistant": _acc(1, 10, 1), "job": {"conversations": 1}}))
    with pytest.raises(DataError, match=r"FULL_none/chunk0\.accounting\.json: a per-cell accounting file of the old"):
        read_simulate_accounting(p)
    # a conversation file that disagrees with its accounting is an error too
    job = _write_job(tmp_path / "r2", "bm25", 0, {"FULL_none": (2, _usage(2, 10, 1), None)})
    _write_convs(job, "FULL_none", [[_assistant()]])
    with pytest.raises(DataError, match=r"1 conversations, but .* cells\.FULL_none\.conversations = 2"):
        read_simulate_accounting(job)


def test_passages_rescaled_to_the_target_top_k(tmp_path, registry_path):
    """Measured: FULL with retrieval costs 500 prompt tokens per call, closed-book 300, so the 2
    passages shown (measured top_k 2 of the 5 retrieved) carry 200 tokens, 100 each. Target:
    top_k 3 passages of 150 tokens: +250 tokens on every open-retrieval assistant call."""
    res = tmp_path / "results"
    _write_job(res, "closed_book", 0, {"FULL_none": (2, _usage(2, 600, 20), None)})
    p = _write_job(res, "bm25", 0, {"FULL_none": (2, _usage(2, 1000, 20), None)})
    conv = [{"role": "user", "text": "q"}, _assistant(retrieved=5)]
    _write_convs(p, "FULL_none", [conv, conv])
    m = measure([str(res / "lic_rag/conversations/**/chunk*.accounting.json")],
                measured_config={**MEASURED_CONFIG, "lic_rag": {"top_k": 2}})
    assert m.measured_passages_per_turn() == pytest.approx(2.0)
    assert m.passage_block_tokens() == pytest.approx(200.0)
    retrievers = {"closed_book": {"kind": "closed_book"}, "bm25": {"kind": "bm25", "params": {"backend": "bm25s"}}}
    cfg = _target(registry_path, retrievers=retrievers, models=["big"], conditions=["FULL"], runs=1, top_k=3)
    base = estimate(cfg, m, load_registry(registry_path))  # passages as long as measured: 3 x 100
    longer = estimate(cfg, m, load_registry(registry_path), passage_tokens=150)
    assert longer["config"]["passage_tokens_added_per_open_call"] == pytest.approx(250.0)
    assert base["config"]["passage_tokens_added_per_open_call"] == pytest.approx(100.0)
    # 14 conversations per cell, 1 assistant call each: closed 300, open 500 + 250
    assert _model(longer, "big")["tokens"]["measured"]["prompt_tokens"] == pytest.approx(14 * 300 + 14 * 750)


def test_cli_prints_table_and_json(measured_run, registry_path, tmp_path, capsys, monkeypatch):
    """The default globs read ./results (here the fixture) and the prepared corpus sizes there;
    the measured run's config defaults to the repo's config/config.yaml (top_k 3)."""
    monkeypatch.chdir(tmp_path)
    corpus = measured_run / "corpora" / "miniworld"
    corpus.mkdir(parents=True)
    (corpus / "corpus.jsonl").write_text("".join(json.dumps({"doc_id": f"p{i}"}) + "\n" for i in range(20)))
    cfg_path = tmp_path / "target.yaml"
    cfg_path.write_text(yaml.safe_dump(_target(registry_path)))
    args = ["estimate", "--config", str(cfg_path)]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "24 simulate jobs" in table and "GPU-hours per model size" in table and "SLURM layout" in table
    assert "Per role (all models)" in table
    assert main(args + ["--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert _tok(_model(est, "big")) == pytest.approx((525, 172_200, 13_020))
    assert _tok(_model(est, "tiny"), "knowledge_graph") == pytest.approx((20, 10_000, 2_000))
    assert est["config"]["corpus_passages"] == {"miniworld": 20}
    assert main(["estimate", "--config", str(cfg_path), "--accounting-glob", str(tmp_path / "none/*.json")]) == 2
    assert "no simulate accounting file matches" in capsys.readouterr().err
