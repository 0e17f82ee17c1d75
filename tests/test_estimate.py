"""`convrag estimate`: lic_rag's measurement (studies/lic_rag/estimate.py) and the generic cost
model (cost.py), from hand-made accounting files. No model runs; every number is worked out here.

Measured run (results in a tmp dir, files placed with Layout and lic_rag.paths): the default
config cut to retrievers closed_book, bm25, hipporag; conditions FULL, SHARDED, RECAP; policy
history; top_k 2; one dataset (miniworld, 2 questions, 1 run, one chunk): three simulate jobs. Per job
and cell (conversations; role requests / prompt / completion tokens):

  closed_book  FULL_none 2: assistant 2 / 400 / 40       SHARDED_none 2: assistant 6 / 1800 / 120,
               user 4 / 400 / 40                         RECAP_none 2: assistant 2 / 1000 / 20
  bm25         FULL_none 2: assistant 2 / 1000 / 40      SHARDED_history 2: assistant 6 / 3000 / 120,
               user 4 / 400 / 40                         RECAP_history 2: assistant 2 / 1400 / 20
  hipporag     the same cells as bm25, plus retriever 20 / 2000 / 200 (2 calls per assistant request)

Every job: classifier 16 / 1600 / 32 (16 labelled turns: 2 + 6 + 2 assistant requests plus the 6
of RECAP's SHARDED twin, whose turns its file repeats), judge 3 / 300 / 3 (6 conversations).
Everything is distinct (unique_requests = requests) except bm25's assistant: 10 requests, 8
distinct (cold share 0.8). Shards: 4 / 2000 / 200 for 2 questions; knowledge graph: 10 / 5000 /
1000 for 10 passages.

Pooled per conversation: FULL closed 1 / 200 / 20, SHARDED closed 3 / 900 / 60 (+ user 2 / 200 /
20), FULL open 1 / 500 / 20, SHARDED open 3 / 1500 / 60 (+ user 2 / 200 / 20), RECAP open 1 / 700
/ 10; open cells' backend share (0.8 + 1) / 2 = 0.9. Per unit: classifier 1 / 100 / 2 per labelled
turn, judge 0.5 / 50 / 0.5 per conversation, hipporag 2 / 200 / 20 per assistant request, sharding
2 / 1000 / 100 per question, graph 1 / 500 / 100 per passage. Passages: open FULL call 500 -
closed 200 = 300 tokens for the 2 shown, 150 each.

Target grid: datasets A (10 questions) and B (4), chunk_size 4 (A: chunks of 4, 4, 2; B: 4), 3
runs, models big (vLLM 8B, one A100) and api (OpenAI; user simulator, sharding, classifier and
judge too), retrievers closed_book, bm25, hipporag (its LLM: the knowledge-graph model tiny, a
CPU model), conditions FULL and SHARDED, policy history, top_k 3, assistant max_tokens 100, user
50, classifier and judge 8, sharding 100, knowledge graph 128. Per model 3 retrievers x 4 chunks =
12 jobs of 2 cells; per (model, retriever) and cell (10 + 4) x 3 = 42 conversations. Every open
assistant call gets 3 x 150 - 300 = +150 prompt tokens.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from convrag.config import REPO_ROOT, validate_config
from convrag.cost import Throughput, Tokens, Work, WorkList, summarize
from convrag.errors import DataError
from convrag.layout import Layout
from convrag.llm.registry import load_registry
from convrag.studies.lic_rag import paths
from convrag.studies.lic_rag.estimate import estimate, measure

REGISTRY_YAML = {
    "big": {"backend": "vllm", "weights": {"hf_repo": "org/big"}, "gpus": 1, "gpu_model": "a100",
            "tensor_parallel": 1, "params_b": 8.0},
    "api": {"backend": "openai", "api_model": "x", "base_url": "http://localhost", "api_key_env": "NO_KEY",
            "params_b": None},
    "tiny": {"backend": "transformers", "weights": {"hf_repo": "org/tiny"}, "gpus": 0, "params_b": 0.1},
}
# prefill 1,000 tok/s and decode 100 tok/s for an 8B model on an A100 (19,500 tok/s at efficiency
# 1: 312e12 / (2 x 8e9)); load 4 s + 16 GB at 16/6 GB/s = 10 s
EASY = Throughput(prefill_mfu=1 / 19.5, decode_mfu=0.1 / 19.5, load_fixed_s=4.0, load_gb_per_s=16 / 6)


def _acc(requests, prompt, completion, unique=None, hits=0, **extra):
    """An Engine accounting dict; ``unique`` distinct requests (default: all), ``hits`` of them cached."""
    unique = requests if unique is None else unique
    return {"requests": requests, "unique_requests": unique, "cache_hits": hits, "calls": unique - hits,
            "prompt_tokens": prompt, "completion_tokens": completion,
            "backend_prompt_tokens": prompt * (unique - hits) / max(requests, 1),
            "backend_completion_tokens": completion * (unique - hits) / max(requests, 1), **extra}


def _cell(conv, assistant, user=None):
    c = {"conversations": conv, "unanswered_turns": 0, "assistant": _acc(*assistant)}
    if user:
        c["user_simulator"] = _acc(*user)
    return c


def _only_lic_rag(cfg: dict) -> None:
    """Drop every other study's block of the default (the registry says which: a new study in the
    default needs no edit here)."""
    from convrag.studies import all_studies

    for key in all_studies():
        if key != "lic_rag":
            cfg.pop(key, None)


def _measured_config() -> dict:
    cfg = copy.deepcopy(yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text()))
    _only_lic_rag(cfg)  # lic_rag's measurement only
    cfg["datasets"]["miniworld"]["n_questions"] = 2  # x 1 run: 2 conversations per cell
    cfg["lic_rag"].update(retrievers=["closed_book", "bm25", "hipporag"], conditions=["FULL", "SHARDED", "RECAP"],
                          policies=["history"], top_k=2, runs=1)
    return cfg


def _write(path: str, data) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def _job_file(res: Path, retriever: str) -> Path:
    return Path(paths.job_accounting(Layout(str(res)), "miniworld", "smollm2-135m", retriever, 0))


@pytest.fixture
def measured(tmp_path) -> dict:
    res = tmp_path / "results"
    L = Layout(str(res))
    closed, pol = {"FULL_none": (2, (2, 400, 40)), "SHARDED_none": (2, (6, 1800, 120), (4, 400, 40)),
                   "RECAP_none": (2, (2, 1000, 20))}, "history"
    opened = {"FULL_none": (2, (2, 1000, 40)), f"SHARDED_{pol}": (2, (6, 3000, 120), (4, 400, 40)),
              f"RECAP_{pol}": (2, (2, 1400, 20))}
    labels = {"classifier": _acc(16, 1600, 32), "judge": _acc(3, 300, 3), "job": {"conversations": 6}}
    for retriever, cells, extra in (
            ("closed_book", closed, {"assistant": _acc(10, 3200, 180)}),
            ("bm25", opened, {"assistant": _acc(10, 5400, 180, unique=8, hits=3)}),
            ("hipporag", opened, {"assistant": _acc(10, 5400, 180), "retriever": _acc(20, 2000, 200)})):
        acc = {**extra, "user_simulator": _acc(4, 400, 40), **labels,
               "cells": {name: _cell(*c) for name, c in cells.items()}}
        _write(_job_file(res, retriever), acc)
    _write(paths.shards(L, "miniworld", "accounting.json"), _acc(4, 2000, 200))
    _write(L.questions("miniworld"), "".join(json.dumps({"qid": f"q{i}"}) + "\n" for i in range(2)))
    _write(L.graph_accounting("miniworld"), _acc(10, 5000, 1000))
    _write(L.graph_manifest("miniworld"), {"n_docs": 10})
    return {"results": str(res), "config": validate_config(_measured_config())}


@pytest.fixture
def registry_path(tmp_path) -> Path:
    return _write(str(tmp_path / "models.yaml"), yaml.safe_dump(REGISTRY_YAML))


def _target_dict(tmp_path: Path, registry_path: Path, **lic) -> dict:
    cfg = copy.deepcopy(yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text()))
    _only_lic_rag(cfg)  # lic_rag's sizing only
    cfg["models_registry"] = str(registry_path)
    cfg["results_dir"] = str(tmp_path / "target")
    cfg["datasets"] = {"A": {"corpus": "miniworld", "n_questions": 10}, "B": {"corpus": "miniworld", "n_questions": 4}}
    cfg["retrievers"] = {"closed_book": {"kind": "closed_book"}, "bm25": {"kind": "bm25"},
                         "hipporag": {"kind": "hipporag"}}
    cfg["knowledge_graph"].update(model="tiny", max_tokens=128)
    cfg["lic_rag"].update({
        "datasets": ["A", "B"], "models": ["big", "api"], "retrievers": list(cfg["retrievers"]),
        "conditions": ["FULL", "SHARDED"], "policies": ["history"], "runs": 3, "chunk_size": 4, "top_k": 3,
        "recall_k": 5, "assistant": {"temperature": 1.0, "max_tokens": 100},
        "user_simulator": {"model": "api", "temperature": 1.0, "max_tokens": 50},
        "sharding": {"model": "api", "attempts": 3, "max_tokens": 100, "fallback": "none"},
        "classifier": {"model": None, "max_tokens": 8}, "judge": {"model": None, "max_tokens": 8}})
    cfg["lic_rag"].update(lic)
    # the target corpus is prepared: 20 passages
    _write(Layout(cfg["results_dir"]).corpus("miniworld"), "".join(f'{{"doc_id": "p{i}"}}\n' for i in range(20)))
    return cfg


def _target(tmp_path, registry_path, **lic) -> dict:
    return validate_config(_target_dict(tmp_path, registry_path, **lic), registry=load_registry(registry_path))


def _total(work, sc="measured", **match) -> Tokens:
    """The Work items of one scenario that match (fields of Work), added up."""
    t = Tokens()
    for w in work:
        if w.scenario == sc and all(getattr(w, k) == v for k, v in match.items()):
            t.add(w.tokens)
    return t


def _sum(work, sc="measured", **match):
    """(requests, prompt, completion) of the matching Work items, for comparison with a tuple."""
    t = _total(work, sc, **match)
    return pytest.approx((t.requests, t.prompt_tokens, t.completion_tokens))


def _backend(work, sc="measured", **match) -> tuple:
    t = _total(work, sc, **match)
    return t.calls, t.backend_prompt_tokens, t.backend_completion_tokens


def test_measure_pools_cells_and_units_and_reads_the_cache_cold(measured):
    m = measure(measured["results"], measured["config"])
    assert m.jobs == 3 and m.top_k == 2
    full_open = m.cells[("FULL", "none", "open")]["assistant"]
    # bm25 2 / 1000 / 40 at share 0.8 and hipporag 2 / 1000 / 40 at share 1: calls 1.6 + 2
    assert (full_open.units, full_open.tokens.requests, full_open.tokens.calls) == (4, 4, pytest.approx(3.6))
    assert full_open.tokens.backend_prompt_tokens == pytest.approx(800 + 1000)
    per = m.cells[("SHARDED", "history", "open")]["user_simulator"].per_unit()
    assert (per.requests, per.prompt_tokens, per.completion_tokens) == pytest.approx((2, 200, 20))
    # closed-book SHARDED runs with policy none and is keyed closed
    assert m.cells[("SHARDED", "none", "closed")]["assistant"].per_unit().prompt_tokens == pytest.approx(900)
    for pool, expected in ((m.classifier, (48, 1, 100, 2)), (m.judge, (18, 0.5, 50, 0.5)),
                           (m.retriever["hipporag"], (10, 2, 200, 20)), (m.sharding, (2, 2, 1000, 100)),
                           (m.graph, (10, 1, 500, 100))):
        t = pool.per_unit()
        assert (pool.units, t.requests, t.prompt_tokens, t.completion_tokens) == pytest.approx(expected)
    assert "bm25" not in m.retriever  # BM25 calls no LLM
    # the kind's own assistant requests per conversation of a cell scale its retriever work
    assert m.turns[("hipporag", "SHARDED", "history")].per_unit().requests == pytest.approx(3)
    assert any("1 measured job(s) found answers in the LLM cache" in n for n in m.notes)


def test_sizing_the_measured_config_gives_back_the_measured_totals(measured):
    """Target = the measured config (top_k 2, passages as measured): the job files' sums per role,
    backend calls = distinct requests (closed 10 + bm25 8 + hipporag 10)."""
    work = estimate(measured["config"], measured)
    assert _sum(work, role="assistant") == (30, 3_200 + 2 * 5_400, 3 * 180)
    assert _total(work, role="assistant").calls == pytest.approx(28)
    assert _sum(work, role="user_simulator") == (12, 1_200, 120)
    assert _sum(work, role="classifier") == (48, 4_800, 96)
    assert _sum(work, role="judge") == (9, 900, 9)
    assert _sum(work, role="retriever") == (20, 2_000, 200)
    assert _sum(work, role="sharding") == (4, 2_000, 200)


def test_a_warm_cache_run_is_not_cheaper_than_a_cold_one(measured, tmp_path, registry_path):
    """The bm25 job again, its 8 distinct assistant requests all answered from the cache (calls 0,
    backend tokens 0): the target's backend figures do not change."""
    cfg = _target(tmp_path, registry_path)
    cold = estimate(cfg, measured)
    p = _job_file(Path(measured["results"]), "bm25")
    acc = json.loads(p.read_text())
    acc["assistant"] = _acc(10, 5400, 180, unique=8, hits=8)
    p.write_text(json.dumps(acc))
    warm = estimate(cfg, measured)
    assert _backend(warm, model="big", role="assistant") == pytest.approx(_backend(cold, model="big", role="assistant"))
    # open cells at share 0.9: big's backend calls 42 x (1 + 3) x (1 + 2 x 0.9) = 470.4
    assert _total(cold, model="big", role="assistant").calls == pytest.approx(470.4)


def test_per_conversation_scaling_of_the_planned_grid(measured, tmp_path, registry_path):
    work = estimate(_target(tmp_path, registry_path), measured)
    assert len({w.job for w in work if w.kind == "simulate"}) == 24
    # per conversation closed FULL + SHARDED 4 / 1,100 / 80; open (+150 per call) 1 / 650 / 20 + 3 / 1,950 / 60
    # = 4 / 2,600 / 80; 42 conversations per cell: 42 x (4 + 2 x 4) = 504 requests, 42 x (1,100 + 2 x 2,600)
    assert _sum(work, model="big", role="assistant") == (504, 264_600, 10_080)
    assert _sum(work, model="api", role="assistant") == (504, 264_600, 10_080)
    # user simulator: SHARDED 2 / 200 / 20 per conversation, 6 (model, retriever) pairs x 42
    assert _sum(work, role="user_simulator") == (504, 50_400, 5_040)
    # hipporag's LLM (tiny): 2 / 200 / 20 per assistant request, 4 requests per conversation pair, 2 x 42
    assert _sum(work, model="tiny", role="retriever") == (672, 67_200, 6_720)
    # classifier: 4 labelled turns per conversation pair (FULL 1, SHARDED 3) x 252 x 1 / 100 / 2
    assert _sum(work, role="classifier") == (1_008, 100_800, 2_016)
    # judge: 504 conversations x 0.5 / 50 / 0.5
    assert _sum(work, role="judge") == (252, 25_200, 252)
    # sharding 14 questions x 2 / 1,000 / 100; the graph of miniworld once: 20 passages x 1 / 500 / 100
    assert _sum(work, role="sharding") == (28, 14_000, 1_400)
    assert _sum(work, model="tiny", role="knowledge_graph") == (20, 10_000, 2_000)
    assert {w.units for w in work if w.job.startswith("A/big/bm25/")} == {4, 2}
    assert not work.notes[1:]  # only the cache note


def test_long_scenario_and_caps(measured, tmp_path, registry_path):
    work = estimate(_target(tmp_path, registry_path), measured)
    # every assistant reply at 100 (measured 20 per call: +80); the k-th call holds k-1 earlier
    # replies: SHARDED (3 calls) +80 x 3 prompt. Per conversation pair closed 200 + 1,140, open
    # 650 + 2,190; completion 4 x 100
    assert _sum(work, "long", model="big", role="assistant") == (504, 42 * (1_340 + 2 * 2_840), 504 * 100)
    # user simulator at 50 (+40 per call); its j-th call holds j replies: 1 + 2 = 3 x 80 more prompt
    assert _sum(work, "long", role="user_simulator") == (504, 252 * 440, 504 * 50)
    # classifier at 8, its prompt holds the reply it labels (+80); judge at 8; sharding at 100 per call
    assert _sum(work, "long", role="classifier") == (1_008, 100_800 + 1_008 * 80, 1_008 * 8)
    assert _sum(work, "long", role="judge") == (252, 25_200, 252 * 8)
    assert _sum(work, "long", role="sharding") == (28, 14_000, 2_800)
    assert _sum(work, "long", role="knowledge_graph") == (20, 10_000, 20 * 128)
    assert _sum(work, "long", role="retriever") == (672, 67_200, 6_720)  # retriever calls as measured
    # measured scenario under a cap of 15: every call loses 5 tokens, and so does every prompt
    # that holds the reply (SHARDED: 3 per conversation)
    capped = estimate(_target(tmp_path, registry_path, assistant={"temperature": 1.0, "max_tokens": 15}), measured)
    assert _sum(capped, model="big", role="assistant") == (504, 264_600 - 3 * 42 * 3 * 5, 10_080 - 504 * 5)
    # a model's own cap (assistant_by_model) sizes that model only
    own = estimate(_target(tmp_path, registry_path, assistant_by_model={"big": {"max_tokens": 15}}), measured)
    def tot(w, model):
        t = _total(w, "measured", model=model, role="assistant")
        return t.requests, t.prompt_tokens, t.completion_tokens

    assert _sum(own, model="big", role="assistant") == tot(capped, "big")
    assert _sum(own, model="api", role="assistant") == tot(work, "api") != tot(capped, "api")


def test_passages_rescaled_with_passage_tokens(measured, tmp_path, registry_path):
    cfg = _target(tmp_path, registry_path, conditions=["FULL"])
    base = estimate(cfg, measured)
    longer = estimate(cfg, {**measured, "passage_tokens": 200})  # 3 x 200 - 300 = +300 per open call
    assert "+150 prompt tokens" in base.facts["passages"] and "+300 prompt tokens" in longer.facts["passages"]
    # 42 conversations per retriever, one call each: closed 200, open 500 + 150 or + 300
    assert _total(base, model="big", role="assistant").prompt_tokens == pytest.approx(42 * (200 + 2 * 650))
    assert _total(longer, model="big", role="assistant").prompt_tokens == pytest.approx(42 * (200 + 2 * 800))


def test_recap_holds_its_twins_replies_and_the_twin_runs_unwritten(measured, tmp_path, registry_path):
    """Target: RECAP only, model big, bm25, dataset B (4 questions), 1 run: one job, 4 conversations.
    Its SHARDED twin runs (charged, not written): assistant per conversation RECAP 1 / 850 / 10 (700 +
    150 passages) + twin 3 / 1,950 / 60."""
    cfg = _target(tmp_path, registry_path, conditions=["RECAP"], models=["big"], retrievers=["bm25"],
                  datasets=["B"], runs=1)
    work = estimate(cfg, measured)
    assert _sum(work, role="assistant") == (16, 11_200, 280)
    # long: RECAP's reply +90 and its prompt holds the twin's 3 replies (+80 each); twin +240 prompt
    assert _sum(work, "long", role="assistant") == (16, 4 * (850 + 240 + 1_950 + 240), 4 * 400)
    assert _sum(work, role="user_simulator") == (8, 800, 80)  # the twin's
    # the RECAP file is labelled: its recap turn and the 3 repeated ones; judged: RECAP only
    assert _sum(work, role="classifier") == (16, 1_600, 32)
    assert _sum(work, role="judge") == (2, 200, 2)
    assert any("RECAP cell without its SHARDED twin" in n for n in work.notes)


def test_unmeasured_cells_and_retriever_kinds_fall_back_or_are_left_out(measured, tmp_path, registry_path):
    d = _target_dict(tmp_path, registry_path, policies=["current"], retrievers=["lightrag", "tog2"])
    d["retrievers"] = {"lightrag": {"kind": "lightrag"}, "tog2": {"kind": "tog2"}}
    cfg = validate_config(d, registry=load_registry(registry_path))
    work = estimate(cfg, measured)
    assert any("SHARDED/current/open was not measured: using SHARDED/history/open" in n for n in work.notes)
    assert any("lightrag was not measured: using the pooled query_llm kinds (hipporag)" in n for n in work.notes)
    assert any("tog2 was not measured: its query-time LLM work is left out" in n for n in work.notes)
    # lightrag: 2 models x 42 conversations x 4 requests x 2 / 200 / 20; tog2 nothing
    assert _sum(work, role="retriever") == (672, 67_200, 6_720)


def test_gpu_seconds_of_one_model_from_the_flop_model():
    tp = Throughput()  # the defaults: prefill 0.40, decode 0.15, 90 s + 1 GB/s
    # 8B on an A100: 2 x 8e9 FLOP per token; 0.40 x 312e12 / 1.6e10 = 7,800 tok/s, 0.15 x ... = 2,925
    assert tp.rates(8.0, "a100") == pytest.approx((7_800, 2_925))
    # 70B on 4 H100 (tp efficiency 0.8): 0.40 x 989e12 / 1.4e11 = 2,825.7 tok/s per GPU
    assert tp.gpu_seconds(2_825_714.3, 0, 70.0, "h100", 4) == pytest.approx(1_000 / 0.8, rel=1e-6)
    assert tp.load_seconds(8.0) == pytest.approx(90 + 16)
    assert tp.peak_flops("unknown") == tp.peak_flops("a100")


def test_gpu_hours_loads_api_and_cpu_models(measured, tmp_path, registry_path):
    work = estimate(_target(tmp_path, registry_path), measured)
    s = summarize({"lic_rag": work}, load_registry(registry_path), EASY)
    big, api, tiny = (next(m for m in s["models"] if m["model"] == n) for n in ("big", "api", "tiny"))
    # big's backend tokens: closed 42 x 1,100 + open 2 x 42 x 2,600 x 0.9 = 242,760 prompt,
    # 42 x 80 + 2 x 42 x 80 x 0.9 = 9,408 completion -> 242.76 + 94.08 s, + 12 jobs x 10 s load
    assert big["jobs"] == 12 and big["kind"] == "gpu"
    assert big["gpu_hours"]["measured"] == pytest.approx((242.76 + 94.08 + 120) / 3600, abs=1e-3)
    assert api["gpu_hours"] == {"measured": None, "long": None} and api["kind"] == "api"
    assert tiny["gpu_hours"]["measured"] is None and tiny["kind"] == "cpu"
    assert [c["size_class"] for c in s["size_classes"]] == ["small (<=10B)"]
    assert s["totals"]["gpu_hours"]["measured"] == big["gpu_hours"]["measured"]
    # a GPU classifier loads once in each job it labels: big's own 12 and api's 12
    work = estimate(_target(tmp_path, registry_path, classifier={"model": "big", "max_tokens": 8}), measured)
    s = summarize({"lic_rag": work}, load_registry(registry_path), EASY)
    big = next(m for m in s["models"] if m["model"] == "big")
    assert big["jobs"] == 24 and big["roles"] == ["assistant", "classifier"]
    # + 1,008 calls x 100 prompt / 2 completion (x 1: no dedupe) and 12 more loads
    assert big["gpu_hours"]["measured"] == pytest.approx((242.76 + 94.08 + 100.8 + 20.16 + 240) / 3600, abs=1e-3)
    rows = {r["models"]: r for r in s["layout"]["rows"] if r["kind"] == "simulate"}
    assert rows["big"]["jobs"] == 24 and rows["big"]["gpus"] == "a100:1"


def test_layout_recommends_the_largest_balanced_chunk_that_fits(measured, tmp_path, registry_path):
    work = estimate(_target(tmp_path, registry_path), measured)
    s = summarize({"lic_rag": work}, load_registry(registry_path), EASY, job_minutes=4.0)
    # long, per conversation of an open job: backend prompt 2,840 x 0.9 / 1,000 + 400 x 0.9 / 100
    # = 6.156 s, 18.468 s per question (3 runs); closed jobs 1.34 + 4 = 5.34 s. Now (4 questions):
    # 10 + 4 x 18.468 = 83.87 s. Budget 50% of 4 min = 120 s: (120 - 10) / 18.468 = 5.96 questions;
    # balanced chunks of A (10) and B (4): 10, 5, 4, ... -> 5; A in 2 jobs, B in 1, x 6 pairs.
    row = next(r for r in s["layout"]["rows"] if r["models"] == "big")
    assert row["max_minutes"]["long"] == pytest.approx(83.872 / 60, abs=0.01)
    # measured: 2,600 x 0.9 / 1,000 + 80 x 0.9 / 100 = 3.06 s per conversation, x 12 + 10
    assert row["max_minutes"]["measured"] == pytest.approx(46.72 / 60, abs=0.01)
    assert row["minutes_recommended_long"] == pytest.approx((10 + 5 * 18.468) / 60, abs=0.01)
    chunk = s["layout"]["chunking"][0]
    assert (chunk["units_per_job_now"], chunk["units_per_job_recommended"]) == (4, 5)
    assert (chunk["jobs_now"], chunk["jobs_recommended"]) == (24, 18)
    assert next(r for r in s["layout"]["rows"] if r["models"] == "-" and r["kind"] == "simulate")["jobs"] == 12


def test_summarize_is_study_agnostic():
    t = Tokens(requests=10, calls=10, prompt_tokens=1_000, completion_tokens=100, backend_prompt_tokens=1_000,
               backend_completion_tokens=100)
    work = WorkList([Work("other", "run", "j1", "gpt-4o-mini", "writer", sc, t) for sc in ("measured", "long")],
                    notes=["a note"], facts={"grid": "one job"})
    s = summarize({"other": work}, load_registry(REPO_ROOT / "config" / "models.yaml"))
    assert s["studies"][0]["jobs"] == {"run": 1} and s["studies"][0]["facts"] == {"grid": "one job"}
    assert s["roles"][0]["tokens"]["long"]["prompt_tokens"] == 1_000 and s["notes"] == ["other: a note"]
    assert s["totals"]["gpu_hours"]["measured"] is None and s["layout"]["chunking"] == []


def test_errors_name_the_file_and_key(measured, tmp_path, registry_path):
    cfg = _target(tmp_path, registry_path)
    p = _job_file(Path(measured["results"]), "bm25")
    good = json.loads(p.read_text())
    p.write_text("{not json")
    with pytest.raises(DataError, match=r"bm25/chunk0\.accounting\.json: cannot read accounting"):
        estimate(cfg, measured)
    bad = copy.deepcopy(good)
    del bad["cells"]["FULL_none"]["conversations"]
    p.write_text(json.dumps(bad))
    with pytest.raises(DataError, match=r"bm25/chunk0\.accounting\.json: key 'cells\.FULL_none\.conversations'"):
        estimate(cfg, measured)
    bad = copy.deepcopy(good)
    bad["cells"]["SHARDED_history"]["user_simulator"]["prompt_tokens"] = "many"
    p.write_text(json.dumps(bad))
    with pytest.raises(DataError, match=r"key 'cells\.SHARDED_history\.user_simulator\.prompt_tokens' is missing or"):
        estimate(cfg, measured)
    p.write_text(json.dumps(good))
    man = Path(Layout(measured["results"]).graph_manifest("miniworld"))
    man.write_text("{}")
    with pytest.raises(DataError, match=r"graphs/miniworld/manifest\.json: key 'n_docs'"):
        estimate(cfg, measured)
    shutil.rmtree(Path(measured["results"]) / "lic_rag" / "conversations")
    with pytest.raises(DataError, match=r"none of the measured config's 3 simulate jobs has an accounting file"):
        estimate(cfg, measured)


def test_cli_sizes_every_active_study(measured, tmp_path, registry_path):
    """`convrag estimate` on the tiny measured tree, in a subprocess: table and JSON."""
    cfg_path = _write(str(tmp_path / "target.yaml"), yaml.safe_dump(_target_dict(tmp_path, registry_path)))
    mcfg_path = _write(str(tmp_path / "measured.yaml"), yaml.safe_dump(_measured_config()))
    cmd = [sys.executable, "-m", "convrag.cli", "estimate", "--config", str(cfg_path), "--measured",
           measured["results"], "--measured-config", str(mcfg_path), "--job-minutes", "4"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "lic_rag: 24 simulate jobs, 2 shard jobs, 1 graph jobs" in out.stdout
    assert "GPU-hours per model size" in out.stdout and "SLURM layout" in out.stdout
    out = subprocess.run(cmd + ["--json", "--out", str(tmp_path / "e.json")], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    s = json.loads((tmp_path / "e.json").read_text())
    big = next(m for m in s["models"] if m["model"] == "big")
    assert big["tokens"]["measured"]["prompt_tokens"] == 264_600
    out = subprocess.run(cmd[:-4] + ["--measured", str(tmp_path / "nowhere")], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 2 and "no such folder" in out.stderr
