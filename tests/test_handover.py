"""Results handed to a colleague are not rebuilt (README: "Moving a run, or handing it over").

A checkout (every tracked file of this repository, as a fresh clone has it) runs a small real
target: the mini world's shard sets, made by SmolLM2 from the project's prompt files. Its
``results/`` and Snakemake's ``.snakemake/metadata`` are packed with the README's command; a
second, newer checkout unpacks them. Its prompt files are newer than every output, yet
Snakemake plans nothing: the metadata carries each small input's checksum, and Snakemake
reruns a job for a newer input only when its content changed. Without the metadata (only
``results/`` copied over, what a user would try first) the same dry run plans the jobs again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.workflow, pytest.mark.tinymodel]

ROOT = Path(__file__).resolve().parents[1]
TARGET = "results/lic_rag/shards/miniworld/final.jsonl"
PACK = ["tar", "-czf", "run.tar.gz", "results", ".snakemake/metadata"]  # the README's command


def _checkout(dest: Path) -> Path:
    """Every tracked file of the working tree, written now (new modification times), as a
    fresh clone of this commit would have them."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest / rel)
    return dest


def _snakemake(workdir: Path, *extra: str) -> str:
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--snakefile", str(workdir / "Snakefile"),
           "--directory", str(workdir), *extra]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_a_packed_run_unpacked_in_a_fresh_checkout_plans_nothing(tmp_path):
    a = _checkout(tmp_path / "original")
    _snakemake(a, TARGET)
    subprocess.run(PACK, cwd=a, check=True)
    time.sleep(1.1)  # the colleague's checkout is newer than every output, as it is in real life
    b = _checkout(tmp_path / "colleague")
    shutil.copy(a / "run.tar.gz", b)
    subprocess.run(["tar", "-xzf", "run.tar.gz"], cwd=b, check=True)
    prompts = b / "resources/prompts/shard.yaml"
    assert prompts.exists() and prompts.stat().st_mtime > (b / TARGET).stat().st_mtime
    out = _snakemake(b, "-n", TARGET)
    assert "Nothing to be done" in out, out[-3000:]

    # results/ alone: the newer prompt files make Snakemake plan the shard jobs again
    c = _checkout(tmp_path / "results-only")
    subprocess.run(["tar", "-xzf", str(a / "run.tar.gz"), "results"], cwd=c, check=True)
    out = _snakemake(c, "-n", TARGET)
    assert "Nothing to be done" not in out and "lic_rag_shard" in out, out[-3000:]
