"""kill -9 in the middle of a real `convrag lic-rag simulate` job (SmolLM2-135M, transformers backend).

Two copies of one job start together, each with its own cache: A runs to the end; B is
SIGKILLed as soon as its SQLite cache holds answers (after its first backend batch of 2,
with batches still to come). Proven: the killed job leaves no output file (conversations,
accounting, or a temp file), its cache is intact; its rerun completes with conversations
byte-identical to A's, answers from the cache exactly what was paid before the kill, and
makes only the remaining backend calls.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from openai_fault_server import MINI_SETTINGS, build_mini_inputs, files_under, run_logged, simulate_argv

pytestmark = pytest.mark.tinymodel

ROOT = Path(__file__).resolve().parents[1]

MODEL = "smollm2-135m"
N_REQUESTS = 3 * MINI_SETTINGS["runs"]  # FULL, no nudges: one assistant request per conversation
BATCH = 2


def rows(cache: Path) -> int | None:
    """Entries in the cache, or None while the job has not created it yet."""
    if not cache.exists():
        return None
    try:
        con = sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:  # table not created yet
        return None


def entries(cache: Path) -> dict[str, dict]:
    with sqlite3.connect(cache) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return {k: json.loads(v) for k, v in con.execute("SELECT key, value FROM responses")}


def test_sigkill_midway_then_rerun_reproduces_the_uninterrupted_job(tmp_path):
    inputs = build_mini_inputs(tmp_path / "inputs")
    spec = yaml.safe_load((ROOT / "config" / "models.yaml").read_text())[MODEL]
    registry = tmp_path / "models.yaml"
    registry.write_text(yaml.safe_dump({MODEL: {**spec, "batch_size": BATCH}}))
    env = dict(os.environ)

    def argv(name):
        return simulate_argv(inputs, model=MODEL, registry=registry, cache=tmp_path / name / "cache" / "llm.sqlite",
                             out_dir=tmp_path / name / "out")

    cache_a, out_a = tmp_path / "A" / "cache" / "llm.sqlite", tmp_path / "A" / "out"
    cache_b, out_b = tmp_path / "B" / "cache" / "llm.sqlite", tmp_path / "B" / "out"
    (tmp_path / "logs").mkdir()
    log_a, log_b = open(tmp_path / "logs" / "A.log", "wb"), open(tmp_path / "logs" / "B.log", "wb")
    a = subprocess.Popen(argv("A"), stdout=subprocess.DEVNULL, stderr=log_a, env=env)
    b = subprocess.Popen(argv("B"), stdout=subprocess.DEVNULL, stderr=log_b, env=env)
    try:
        deadline = time.monotonic() + 300
        while not rows(cache_b):
            assert b.poll() is None, f"job B ended (rc {b.returncode}) before its cache held an answer"
            assert time.monotonic() < deadline, "job B wrote no cache entry in 300 s"
            time.sleep(0.02)
        alive = b.poll() is None
        os.kill(b.pid, signal.SIGKILL)
        assert b.wait(30) == -signal.SIGKILL and alive
        rc_a = a.wait(300)
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()
                p.wait()
        log_a.close()
        log_b.close()
    assert rc_a == 0, (tmp_path / "logs" / "A.log").read_text()[-3000:]

    # the killed job: no output of any kind, an intact cache holding part of the work
    assert files_under(out_b) == []
    paid = entries(cache_b)
    n_before = len(paid)
    assert 0 < n_before < N_REQUESTS and n_before % BATCH == 0  # whole batches only, some still missing

    # rerun to completion
    rc, _ = run_logged(argv("B"), tmp_path / "logs" / "B-rerun.log", env=env, timeout=300)
    assert rc == 0, (tmp_path / "logs" / "B-rerun.log").read_text()[-3000:]
    assert sorted(p.name for p in files_under(out_b)) == ["chunk0.accounting.json", "chunk0.jsonl"]
    assert (out_b / "FULL_none" / "chunk0.jsonl").read_bytes() == (out_a / "FULL_none" / "chunk0.jsonl").read_bytes()
    convs = [json.loads(line) for line in (out_a / "FULL_none" / "chunk0.jsonl").read_text().splitlines()]
    assert len(convs) == N_REQUESTS and all(c["turns"][1]["role"] == "assistant" for c in convs)

    acc_a = json.loads((out_a / "chunk0.accounting.json").read_text())["assistant"]
    acc_b = json.loads((out_b / "chunk0.accounting.json").read_text())["assistant"]
    assert (acc_a["calls"], acc_a["cache_hits"], acc_a["batches"]) == (N_REQUESTS, 0, N_REQUESTS // BATCH)
    assert acc_b["cache_hits"] >= n_before and acc_b["cache_hits"] == n_before
    assert acc_b["calls"] == N_REQUESTS - n_before < acc_a["calls"]
    assert acc_b["batches"] == (N_REQUESTS - n_before) // BATCH
    assert acc_b["prompt_tokens"] == acc_a["prompt_tokens"] and acc_b["completion_tokens"] == acc_a["completion_tokens"]
    # the caches end equal: the answers paid before the kill are the ones A computed
    final_a, final_b = entries(cache_a), entries(cache_b)
    assert final_a == final_b and len(final_a) == N_REQUESTS
    assert {k: final_a[k] for k in paid} == paid
