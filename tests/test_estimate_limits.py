"""`convrag estimate` on the paper configs against the SLURM time limit (issue 47, item 1), sized
from the default run's results/: lic_rag with one simulate job per dataset (chunk_size 150)
runs past the 240-minute limit in the 'long' scenario and the estimate exits 2 naming the rule,
the job's minutes, the limit and the config key with the value to set; that value brings every
job within half the limit. benchmarks/slurm_tables.py keeps the layout of every paper config."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
MEASURED = REPO / "results"

pytestmark = pytest.mark.skipif(not any(MEASURED.glob("lic_rag/**/*.accounting.json")),
                                reason="needs the default run's results/ (`snakemake --cores all`)")


def _estimate(config: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "convrag.cli", "estimate", "--config", str(config),
                           "--measured", str(MEASURED), *extra], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def _lic_rag(tmp_path: Path, chunk_size: int) -> Path:
    cfg = yaml.safe_load((REPO / "config" / "studies" / "lic_rag.yaml").read_text())
    cfg["lic_rag"]["chunk_size"] = chunk_size
    path = tmp_path / f"lic_rag_chunk{chunk_size}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_simulate_job_over_its_limit_names_rule_minutes_limit_and_key(tmp_path):
    out = _estimate(_lic_rag(tmp_path, 150))
    assert out.returncode == 2, out.stderr[-2000:]
    m = re.search(r"rule lic_rag_simulate \(lic_rag simulate jobs on (\S+)\): the fullest job takes (\d+) minutes "
                  r"in the 'long' scenario, over the 240-minute limit: set lic_rag\.chunk_size to (\d+) \(now 150 "
                  r"units per job", out.stderr)
    assert m, out.stderr[-3000:]
    model, minutes, advice = m.group(1), int(m.group(2)), int(m.group(3))
    assert minutes > 240 and 1 <= advice < 150
    # the tables came first (stdout), the error after them
    assert "SLURM layout" in out.stdout and "OVER THE TIME LIMIT" in out.stdout
    # the advised chunk: exit 0 and that model's jobs, every job, within half the limit
    ok = _estimate(_lic_rag(tmp_path, advice), "--json")
    assert ok.returncode == 0, ok.stderr[-2000:]
    s = json.loads(ok.stdout)
    rows = [r for r in s["layout"]["rows"] if r["max_minutes"]["long"] is not None]
    assert max(r["max_minutes"]["long"] for r in rows) <= 120.0
    assert next(r for r in rows if r["models"] == model)["units_max"] == advice


def test_the_limit_is_a_flag_and_the_error_follows_it(tmp_path):
    """The paper config as shipped fits 240 minutes at half; against a 60-minute limit its
    fullest jobs do not, and the estimate says so with the same wording."""
    out = _estimate(REPO / "config" / "studies" / "lic_rag.yaml", "--job-minutes", "60")
    assert out.returncode == 2
    assert "over the 60-minute limit: set lic_rag.chunk_size to " in out.stderr, out.stderr[-2000:]
