"""End to end: the default grid (reduced to three questions) through Snakemake with the real
SmolLM2 and MiniLM models; then the caching guarantees: a rerun does nothing, and deleting
one simulation output recomputes only that job and its dependents, from the LLM cache."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from convrag.config import REPO_ROOT

pytestmark = [pytest.mark.workflow, pytest.mark.tinymodel]

SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def _config() -> dict:
    cfg = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    cfg = copy.deepcopy(cfg)
    cfg["corpora"]["miniworld"]["spec"]["questions"] = {"2": 1, "3": 1, "4": 1}
    cfg["corpora"]["miniworld"]["spec"]["comparison_share"] = 0.0
    cfg["datasets"]["miniworld"]["n_questions"] = 3
    cfg["lic_rag"]["runs"] = 2
    cfg["lic_rag"]["sharding"]["attempts"] = 1
    return cfg


def _snakemake(workdir: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = SNAKEMAKE + ["--cores", "2", "--snakefile", str(REPO_ROOT / "Snakefile"), "--directory", str(workdir),
                       "--configfile", str(workdir / "config.yaml"), *extra]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    wd = tmp_path_factory.mktemp("grid")
    (wd / "config.yaml").write_text(yaml.safe_dump(_config()))
    _snakemake(wd)
    return wd


def _read_jsonl(p: Path) -> list[dict]:
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def test_every_cell_simulated_with_all_runs(grid):
    conv_dir = grid / "results/lic_rag/conversations/miniworld/smollm2-135m"
    files = sorted(conv_dir.glob("*/*/chunk0.jsonl"))
    cells = {(f.parent.parent.name, f.parent.name) for f in files}
    assert cells == {
        ("closed_book", "FULL_none"), ("closed_book", "CONCAT_none"), ("closed_book", "SHARDED_none"),
        ("bm25", "FULL_none"), ("bm25", "CONCAT_none"), ("bm25", "SHARDED_history"), ("bm25", "SHARDED_current"),
        ("dense", "FULL_none"), ("dense", "CONCAT_none"), ("dense", "SHARDED_history"), ("dense", "SHARDED_current"),
    }
    questions = _read_jsonl(grid / "results/datasets/miniworld/questions.jsonl")
    assert sorted(q["hops"] for q in questions) == [2, 3, 4]
    for f in files:
        convs = _read_jsonl(f)
        assert len(convs) == 3 * 2
        assert sorted({c["run"] for c in convs}) == [0, 1]
        for c in convs:
            assert c["turns"][0]["role"] == "user" and c["turns"][1]["role"] == "assistant"
            retrieved = [len(t["retrieved"]) for t in c["turns"] if t["role"] == "assistant"]
            assert all(n == (0 if "closed_book" in str(f) else 3) for n in retrieved)
            if c["condition"] == "SHARDED":
                shard_ids = [t["shard_id"] for t in c["turns"] if t["role"] == "user" and t["shard_id"]]
                assert shard_ids == list(range(1, len(shard_ids) + 1))  # at most one new shard per turn
        acc = json.loads(f.with_name("chunk0.accounting.json").read_text())
        assert acc["assistant"]["requests"] >= 6 and acc["assistant"]["prompt_tokens"] > 0
        assert acc["job"]["unanswered_turns"] == sum(c["n_unanswered_turns"] for c in convs)


def test_table_and_figure(grid):
    t = pd.read_csv(grid / "results/lic_rag/tables/table2_full_vs_sharded.csv")
    assert set(zip(t.retriever, t.policy)) == {("closed_book", "none"), ("bm25", "history"), ("bm25", "current"),
                                                ("dense", "history"), ("dense", "current")}
    assert (t.n_questions == 3).all()
    assert t[["f1_full", "f1_sharded"]].apply(lambda c: c.between(0, 1)).all().all()
    assert ((t.gap_ci_low <= t.gap + 1e-12) & (t.gap <= t.gap_ci_high + 1e-12)).all()
    assert (t.gap - (t.f1_full - t.f1_sharded)).abs().max() < 1e-9
    scores = pd.read_parquet(grid / "results/lic_rag/scores/conversations.parquet")
    full = scores[(scores.retriever == "bm25") & (scores.condition == "FULL")]
    assert abs(full.groupby("qid").final_f1.mean().mean() - t[(t.retriever == "bm25")].f1_full.iloc[0]) < 1e-9
    for ext in ("png", "pdf"):
        assert (grid / f"results/lic_rag/figures/delivery_conditions.{ext}").stat().st_size > 5000
    assert "| " in (grid / "results/lic_rag/tables/table2_full_vs_sharded.md").read_text()


def test_rerun_does_nothing_and_one_deleted_output_comes_from_cache(grid):
    table = grid / "results/lic_rag/tables/table2_full_vs_sharded.csv"
    before = table.stat().st_mtime_ns
    proc = _snakemake(grid)
    assert "Nothing to be done" in proc.stdout + proc.stderr
    assert table.stat().st_mtime_ns == before

    conv_dir = grid / "results/lic_rag/conversations/miniworld/smollm2-135m"
    target = conv_dir / "bm25/SHARDED_history/chunk0.jsonl"
    other = conv_dir / "dense/SHARDED_history/chunk0.jsonl"
    old_text, other_mtime = target.read_text(), other.stat().st_mtime_ns
    target.unlink()
    proc = _snakemake(grid)
    log = proc.stdout + proc.stderr
    assert log.count("rule simulate:") == 1 or log.count("localrule simulate:") == 1
    assert other.stat().st_mtime_ns == other_mtime
    assert target.read_text() == old_text  # same conversations, byte for byte
    acc = json.loads(target.with_name("chunk0.accounting.json").read_text())["assistant"]
    assert acc["calls"] == 0 and acc["cache_hits"] == acc["unique_requests"] > 0
    assert acc["load_seconds"] == 0  # fully cached: the model was never loaded
