"""`convrag estimate`: the arithmetic from hand-made accounting files to grid totals.

Measured run (dataset d, model tiny), per job: conversations, then per role
(requests, prompt tokens, completion tokens):

  closed_book/FULL_none/chunk0         4 conv  assistant  6 / 1200 / 120
  bm25/FULL_none/chunk0                4 conv  assistant  4 / 2000 /  80
  closed_book/SHARDED_none/chunk0      4 conv  assistant 12 / 2400 / 240, user_simulator 8 / 800 / 80
  bm25/SHARDED_history/chunk0          4 conv  assistant 12 / 4000 / 400, user_simulator 8 / 800 / 80
  bm25/SHARDED_history/chunk1          2 conv  assistant  6 / 2600 / 140, user_simulator 4 / 400 / 40
  shards/d (3 questions)                       9 / 3000 / 600

Per conversation (ratio of sums; the two SHARDED_history chunks pool to 6 conversations):
  FULL closed 1.5 / 300 / 30, FULL open 1 / 500 / 20, SHARDED closed 3 / 600 / 60 (+ user 2 / 200 / 20),
  SHARDED open 3 / 1100 / 90 (+ user 2 / 200 / 20); per shard question 3 / 1000 / 200.

Target grid: datasets A (10 questions) and B (4), chunk_size 4, 3 runs, models big (vLLM 8B, one
A100) and api (OpenAI; also user simulator and sharding model), retrievers closed_book and
bm25, conditions FULL and SHARDED, policy history. Per model: 4 cells x (3 + 1) chunks = 16
jobs; per cell (10 + 4) x 3 = 42 conversations. So per assistant model: requests
42 x (1.5 + 1 + 3 + 3) = 357, prompt 42 x 2500 = 105,000, completion 42 x 200 = 8,400; user
simulator over both models 2 x 42 x (2 + 2) = 336 / 33,600 / 3,360; sharding 14 questions:
42 / 14,000 / 2,800.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from convrag.cli import main
from convrag.config import REPO_ROOT, validate_config
from convrag.estimate import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD_TOKENS,
    Throughput,
    estimate,
    measure,
    read_simulate_accounting,
    user_simulator_share,
)
from convrag.llm.registry import load_registry

REGISTRY_YAML = {
    "big": {"backend": "vllm", "weights": {"hf_repo": "org/big"}, "gpus": 1, "gpu_model": "a100",
            "tensor_parallel": 1, "params_b": 8.0},
    "api": {"backend": "openai", "api_model": "x", "base_url": "http://localhost", "api_key_env": "NO_KEY",
            "params_b": None},
    "tiny": {"backend": "transformers", "weights": {"hf_repo": "org/tiny"}, "gpus": 0, "params_b": 0.1},
}


def _acc(requests, prompt, completion, calls=None, backend_prompt=None, backend_completion=None):
    return {"requests": requests, "unique_requests": requests, "cache_hits": 0,
            "calls": requests if calls is None else calls, "batches": 1,
            "prompt_tokens": prompt, "completion_tokens": completion,
            "backend_prompt_tokens": prompt if backend_prompt is None else backend_prompt,
            "backend_completion_tokens": completion if backend_completion is None else backend_completion,
            "backend_seconds": 1.0, "load_seconds": 0.0, "wall_seconds": 1.0}


def _write_job(root: Path, retriever: str, cell: str, chunk: int, conversations: int, assistant: dict,
               user: dict | None = None) -> Path:
    d = root / "lic_rag" / "conversations" / "d" / "tiny" / retriever / cell
    d.mkdir(parents=True, exist_ok=True)
    acc = {"assistant": assistant}
    if user is not None:
        acc["user_simulator"] = user
    acc["job"] = {"conversations": conversations, "questions": conversations, "wall_seconds": 1.0,
                  "unanswered_turns": 0}
    p = d / f"chunk{chunk}.accounting.json"
    p.write_text(json.dumps(acc))
    return p


@pytest.fixture
def measured_run(tmp_path) -> Path:
    res = tmp_path / "results"
    _write_job(res, "closed_book", "FULL_none", 0, 4, _acc(6, 1200, 120))
    _write_job(res, "bm25", "FULL_none", 0, 4, _acc(4, 2000, 80))
    _write_job(res, "closed_book", "SHARDED_none", 0, 4, _acc(12, 2400, 240), _acc(8, 800, 80))
    _write_job(res, "bm25", "SHARDED_history", 0, 4, _acc(12, 4000, 400), _acc(8, 800, 80))
    _write_job(res, "bm25", "SHARDED_history", 1, 2, _acc(6, 2600, 140), _acc(4, 400, 40))
    shards = res / "lic_rag" / "shards" / "d"
    shards.mkdir(parents=True)
    shard_acc = {"model": "tiny", **_acc(9, 3000, 600)}
    (shards / "accounting.json").write_text(json.dumps(shard_acc))
    (shards / "shards.jsonl").write_text("".join(json.dumps({"qid": f"q{i}", "shards": []}) + "\n" for i in range(3)))
    return res


@pytest.fixture
def registry_path(tmp_path) -> Path:
    p = tmp_path / "models.yaml"
    p.write_text(yaml.safe_dump(REGISTRY_YAML))
    return p


def _target(registry_path: Path, **lic) -> dict:
    cfg = copy.deepcopy(yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text()))
    cfg["models_registry"] = str(registry_path)
    cfg["datasets"] = {"A": {"corpus": "miniworld", "n_questions": 10}, "B": {"corpus": "miniworld", "n_questions": 4}}
    cfg["retrievers"] = {"closed_book": {"kind": "closed_book"}, "bm25": {"kind": "bm25", "params": {"backend": "bm25s"}}}
    cfg["lic_rag"].update({
        "datasets": ["A", "B"], "models": ["big", "api"], "retrievers": ["closed_book", "bm25"],
        "conditions": ["FULL", "SHARDED"], "policies": ["history"], "runs": 3, "chunk_size": 4, "top_k": 3,
        "assistant": {"temperature": 1.0, "max_tokens": 1000},
        "user_simulator": {"model": "api", "temperature": 1.0, "max_tokens": 1000},
        "sharding": {"model": "api", "attempts": 3, "max_tokens": 100, "fallback": "none"},
    })
    cfg["lic_rag"].update(lic)
    return validate_config(cfg, registry=load_registry(registry_path))


def _globs(res: Path) -> tuple[list[str], list[str]]:
    return ([str(res / "lic_rag/conversations/**/chunk*.accounting.json")],
            [str(res / "lic_rag/shards/*/accounting.json")])


def _model(est: dict, name: str) -> dict:
    return next(m for m in est["models"] if m["model"] == name)


def test_per_conversation_means_pool_jobs_by_cell(measured_run):
    m = measure(*_globs(measured_run), prompts_path=None)
    assert m.files == 5 and m.shard_files == 1 and m.shard_questions == 3
    sharded = m.cells[("SHARDED", "history", "open")]
    assert (sharded.jobs, sharded.conversations) == (2, 6)
    per = sharded.per_conversation()
    assert per["assistant"].requests == pytest.approx(3.0)
    assert per["assistant"].prompt_tokens == pytest.approx(1100.0)
    assert per["assistant"].completion_tokens == pytest.approx(90.0)
    assert per["user_simulator"].prompt_tokens == pytest.approx(200.0)
    full = m.cells[("FULL", "none", "closed")].per_conversation()["assistant"]
    assert (full.requests, full.prompt_tokens, full.completion_tokens) == pytest.approx((1.5, 300.0, 30.0))
    # closed-book SHARDED runs with policy none and is keyed as closed
    assert ("SHARDED", "none", "closed") in m.cells


def test_grid_totals_per_model(measured_run, registry_path):
    cfg = _target(registry_path)
    est = estimate(cfg, measure(*_globs(measured_run), prompts_path=None), load_registry(registry_path))
    assert est["grid"]["simulate_jobs"] == 32
    assert est["grid"]["conversations"] == 2 * 4 * 42
    assert est["grid"]["questions"] == 14
    big, api = _model(est, "big"), _model(est, "api")
    assert (big["simulate_jobs"], big["conversations"]) == (16, 168)
    assert big["roles"] == ["assistant"]
    tok = big["tokens"]["measured"]
    assert (tok["requests"], tok["prompt_tokens"], tok["completion_tokens"]) == pytest.approx((357, 105_000, 8_400))
    assert api["roles"] == ["assistant", "sharding", "user_simulator"]
    by_role = api["by_role"]
    assert by_role["user_simulator"]["measured"]["requests"] == pytest.approx(336)
    assert by_role["user_simulator"]["measured"]["prompt_tokens"] == pytest.approx(33_600)
    assert by_role["user_simulator"]["measured"]["completion_tokens"] == pytest.approx(3_360)
    assert by_role["sharding"]["measured"]["prompt_tokens"] == pytest.approx(14_000)
    assert by_role["sharding"]["measured"]["completion_tokens"] == pytest.approx(2_800)
    tok = api["tokens"]["measured"]
    assert (tok["requests"], tok["prompt_tokens"], tok["completion_tokens"]) == pytest.approx(
        (357 + 336 + 42, 105_000 + 33_600 + 14_000, 8_400 + 3_360 + 2_800))
    assert est["totals"]["measured"]["prompt_tokens"] == pytest.approx(105_000 + 152_600)
    # the measured run has no conversation files: passages cannot be measured, prompts stay as measured
    assert any("passage length not measurable" in n for n in est["notes"])


def test_gpu_hours_follow_the_throughput_model(measured_run, registry_path):
    # A100 bf16 peak 312 TFLOP/s, 8B params: 2 x 8e9 FLOP per token -> 19,500 tok/s at efficiency 1;
    # prefill 1,000 tok/s and decode 100 tok/s; load 4 s + 16 GB at 16/6 GB/s = 10 s per job.
    tp = Throughput(prefill_mfu=1 / 19.5, decode_mfu=0.1 / 19.5, load_fixed_s=4.0, load_gb_per_s=16 / 6)
    cfg = _target(registry_path)
    est = estimate(cfg, measure(*_globs(measured_run), prompts_path=None), load_registry(registry_path), tp)
    big, api = _model(est, "big"), _model(est, "api")
    assert big["load_seconds"] == pytest.approx(10.0)
    expected_s = 105_000 / 1000 + 8_400 / 100 + 16 * 10.0
    assert big["gpu_hours"]["measured"] == pytest.approx(expected_s / 3600, abs=0.01)
    assert api["gpu_hours"]["measured"] is None  # API: tokens only
    assert [s["size_class"] for s in est["size_classes"]] == ["small (<=10B)"]
    # every job is tiny: one chunk of a whole dataset is recommended (10 questions -> chunk 10)
    lay = est["layout"]
    assert lay["chunk_size_recommended"] == 10
    big_layout = next(m for m in lay["models"] if m["model"] == "big")
    assert (big_layout["jobs_now"], big_layout["jobs_recommended"]) == (16, 8)  # 4 cells x (1 + 1) chunks
    assert big_layout["sbatch_gpus"] == "a100:1"
    assert big_layout["gpu_hours_recommended"]["measured"] == pytest.approx((expected_s - 8 * 10.0) / 3600, abs=0.01)


def test_completion_caps_and_long_scenario(measured_run, registry_path):
    m = measure(*_globs(measured_run), prompts_path=None)
    # long scenario: every assistant reply reaches max_tokens
    est = estimate(_target(registry_path), m, load_registry(registry_path))
    assert _model(est, "big")["tokens"]["long"]["completion_tokens"] == pytest.approx(357 * 1000)
    # measured scenario under a cap of 25 tokens: only SHARDED open (30 per call) is cut, to 25
    est = estimate(_target(registry_path, assistant={"temperature": 1.0, "max_tokens": 25}), m,
                   load_registry(registry_path))
    assert _model(est, "big")["tokens"]["measured"]["completion_tokens"] == pytest.approx(8_400 - 42 * 3 * 5)


def test_unmeasured_cell_falls_back_with_a_note(measured_run, registry_path):
    est = estimate(_target(registry_path, policies=["current"]), measure(*_globs(measured_run), prompts_path=None),
                   load_registry(registry_path))
    assert any("SHARDED/current/open was not measured: using SHARDED/history/open" in n for n in est["notes"])
    assert _model(est, "big")["tokens"]["measured"]["prompt_tokens"] == pytest.approx(105_000)


def test_shared_engine_is_split_by_the_conversation_file(tmp_path):
    """User simulator == assistant model: one engine, one accounting section. The conversation
    file beside it gives the calls exactly (user turns with 'rephrased') and the tokens from text."""
    res = tmp_path / "results"
    p = _write_job(res, "bm25", "SHARDED_history", 0, 1, _acc(5, 10_000, 500))
    turns = [
        {"role": "user", "text": "first shard", "shard_id": 1},
        {"role": "assistant", "text": "reply one", "query": "first shard", "retrieved": [{"doc_id": "a"}]},
        {"role": "user", "text": "second clue here", "shard_id": 2, "rephrased": True},
        {"role": "assistant", "text": "reply two", "query": "q", "retrieved": [{"doc_id": "a"}]},
        {"role": "user", "text": "third", "shard_id": 3, "rephrased": False},
        {"role": "assistant", "text": "reply three", "query": "q", "retrieved": [{"doc_id": "a"}]},
    ]
    p.with_name("chunk0.jsonl").write_text(json.dumps({"turns": turns}) + "\n")
    prompts = {"user_system": "S" * 10, "user": "H:{history}|C:{shard}"}
    a_calls, u_calls, u_prompt, u_completion = user_simulator_share([{"turns": turns}], prompts)
    assert (a_calls, u_calls) == (3, 2)
    hist1 = "User: first shard\nAssistant: reply one"
    hist2 = hist1 + "\nUser: second clue here\nAssistant: reply two"
    chars = [10 + len(f"H:{hist1}|C:second clue here"), 10 + len(f"H:{hist2}|C:third")]
    assert u_prompt == pytest.approx(sum(c / CHARS_PER_TOKEN + 2 * MESSAGE_OVERHEAD_TOKENS for c in chars))
    assert u_completion == pytest.approx((len("second clue here") + len("third")) / CHARS_PER_TOKEN)

    job = read_simulate_accounting(p, prompts)
    a, u = job.roles["assistant"], job.roles["user_simulator"]
    assert job.key == ("SHARDED", "history", "open")
    assert u.requests == pytest.approx(5 * 2 / 5) and a.requests == pytest.approx(5 * 3 / 5)
    assert u.prompt_tokens == pytest.approx(u_prompt)
    assert a.prompt_tokens + u.prompt_tokens == pytest.approx(10_000)
    assert a.completion_tokens + u.completion_tokens == pytest.approx(500)
    assert (job.open_turns, job.retrieved) == (3, 3)


def test_passages_rescaled_to_the_target_top_k(tmp_path, registry_path):
    """Measured: FULL with retrieval costs 500 prompt tokens per call, closed-book 300, so the 2
    measured passages (top_k from the conversation file) carry 200 tokens, 100 each. Target:
    top_k 3 passages of 150 tokens: +250 tokens on every open-retrieval assistant call."""
    res = tmp_path / "results"
    _write_job(res, "closed_book", "FULL_none", 0, 2, _acc(2, 600, 20))
    p = _write_job(res, "bm25", "FULL_none", 0, 2, _acc(2, 1000, 20))
    conv = {"turns": [{"role": "user", "text": "q"},
                      {"role": "assistant", "text": "a", "query": "q", "retrieved": [{"doc_id": "x"}, {"doc_id": "y"}]}]}
    p.with_name("chunk0.jsonl").write_text((json.dumps(conv) + "\n") * 2)
    m = measure([str(res / "lic_rag/conversations/**/chunk*.accounting.json")], [], prompts_path=None)
    assert m.measured_top_k() == pytest.approx(2.0)
    assert m.passage_block_tokens() == pytest.approx(200.0)
    cfg = _target(registry_path, models=["big"], conditions=["FULL"], runs=1, top_k=3)
    base = estimate(cfg, m, load_registry(registry_path))  # passages as long as measured: 3 x 100
    longer = estimate(cfg, m, load_registry(registry_path), passage_tokens=150)
    assert longer["config"]["passage_tokens_added_per_open_call"] == pytest.approx(250.0)
    assert base["config"]["passage_tokens_added_per_open_call"] == pytest.approx(100.0)
    # 14 conversations per cell, 1 assistant call each: closed 300, open 500 + 250
    big = _model(longer, "big")["tokens"]["measured"]
    assert big["prompt_tokens"] == pytest.approx(14 * 300 + 14 * 750)


def test_cli_prints_table_and_json(measured_run, registry_path, tmp_path, capsys):
    cfg = _target(registry_path)
    cfg_path = tmp_path / "target.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    acc_glob, shard_glob = _globs(measured_run)
    args = ["estimate", "--config", str(cfg_path), "--accounting-glob", acc_glob[0],
            "--shard-accounting-glob", shard_glob[0]]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "32 simulate jobs" in table and "GPU-hours per model size" in table and "SLURM layout" in table
    assert main(args + ["--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert _model(est, "big")["tokens"]["measured"]["prompt_tokens"] == pytest.approx(105_000)
    assert main(["estimate", "--config", str(cfg_path), "--accounting-glob", str(tmp_path / "none/*.json")]) == 2
    assert "no simulate accounting file matches" in capsys.readouterr().err
