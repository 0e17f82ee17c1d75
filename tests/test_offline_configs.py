"""Shipped configs that say they run offline plan no download (issue 39, item 2).

The embedded default and every sample config (``config/studies/*_sample.yaml``, which read the
real-data samples in ``../shared/data`` by path) say they run without network: a dry run of
each plans no ``download_file`` job (the rule that fetches a URL) and no ``convrag download``.
The CORAL sample planned the whole CORAL passage corpus from the hub for Table 1, though it has
no corpus and its config says it builds Table 4 from the local files.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from convrag.config import REPO_ROOT

OFFLINE = [None, *sorted((REPO_ROOT / "config" / "studies").glob("*_sample.yaml"))]


def dry_run(config, results_dir) -> str:
    cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--directory", str(REPO_ROOT),
           "--snakefile", str(REPO_ROOT / "Snakefile")]
    if config is not None:
        cmd += ["--configfile", str(config)]
    cmd += ["--config", f"results_dir={results_dir}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout + out.stderr


def downloads(plan: str) -> list[str]:
    """The download jobs of a dry run: each planned download_file job's output."""
    return re.findall(r"rule download_file:\n\s+output: (\S+)", plan)


def test_downloads_finds_a_planned_download():
    plan = ("[Sun Dec  6 02:09:11 2026]\nlocalrule download_file:\n    output: r/raw/coral_sample/passage_corpus.json\n"
            "    jobid: 3\n")
    assert downloads(plan) == ["r/raw/coral_sample/passage_corpus.json"]


@pytest.mark.parametrize("config", OFFLINE, ids=["default", *(p.stem for p in OFFLINE[1:])])
def test_an_offline_config_plans_no_download(config, tmp_path):
    plan = dry_run(config, tmp_path / "results")
    assert "Job stats" in plan  # the dry run planned jobs (an empty results folder: everything)
    assert not downloads(plan) and "convrag download" not in plan, downloads(plan)


def test_the_coral_sample_builds_its_tables_from_the_local_files(tmp_path):
    """The CORAL sample's Table 1 and Table 4 read only its three local files: Table 1 counts no
    corpus (none is read: its caption says why) instead of downloading CORAL's."""
    plan = dry_run(REPO_ROOT / "config" / "studies" / "coral_sample.yaml", tmp_path / "results")
    assert "study_table" in plan and "table4_structure" in plan and "table1_statistics" in plan
    assert "benchmark_corpus" not in plan and "passage_corpus.json" not in plan
    assert "huggingface.co" not in plan
