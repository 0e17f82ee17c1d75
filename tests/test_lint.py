"""Static checks of the workflow: `snakemake --lint` reports nothing, `snakefmt --check .` passes."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from convrag.config import REPO_ROOT

CONFIGS = {
    "default": [],
    **{f"study_{p.stem}": ["--configfile", str(p)] for p in sorted((REPO_ROOT / "config" / "studies").glob("*.yaml"))},
    **{f"test_{p.stem}": ["--configfile", str(p)] for p in sorted((REPO_ROOT / "config" / "tests").glob("*.yaml"))},
}


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def _lint(config: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--lint", *CONFIGS[config]],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, env=_env(),
    )


@pytest.fixture(scope="module")
def lint_results() -> dict:
    """Every config's lint, run as concurrent processes (each is mostly single-threaded parsing)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        return dict(zip(sorted(CONFIGS), pool.map(_lint, sorted(CONFIGS))))


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_snakemake_lint_is_clean(config, lint_results):
    proc = lint_results[config]
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Lints for" not in out, out[-6000:]
    assert "Congratulations, your workflow is in a good condition" in out, out[-4000:]


def test_snakefmt_check_passes():
    if importlib.util.find_spec("snakefmt") is None:
        pytest.skip("snakefmt is not installed (pip install 'snakefmt==2.1.0'; it belongs in the test extra)")
    proc = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "."],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, env=_env(),
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"snakefmt would reformat files (run `snakefmt .`):\n{out[-4000:]}"
