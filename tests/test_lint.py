"""Static checks of the workflow: `snakemake --lint` reports nothing, `snakefmt --check .` passes; the
same for the study guide's template, a plug-in rule file (tests/test_add_a_study.py)."""

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


PLUGIN = "plugin_study"  # the study guide's template, written into a temporary folder


def _lint(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--lint", *args],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, env=_env(),
    )


@pytest.fixture(scope="module")
def lint_results(tmp_path_factory) -> dict:
    """Every config's lint, run as concurrent processes (each is mostly single-threaded parsing);
    a plug-in's rule file is linted when a config names it, as the guide's template is here."""
    from concurrent.futures import ThreadPoolExecutor

    from test_add_a_study import write_toy

    args = {**CONFIGS, PLUGIN: ["--configfile", str(write_toy(tmp_path_factory.mktemp("plugin")))]}
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        return dict(zip(sorted(args), pool.map(_lint, [args[c] for c in sorted(args)])))


@pytest.mark.parametrize("config", sorted([*CONFIGS, PLUGIN]))
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



def test_the_study_guides_rule_file_is_formatted_as_a_built_in_one(tmp_path):
    """`snakefmt --check .` checks a built-in study's rule file: the template copied in passes it."""
    if importlib.util.find_spec("snakefmt") is None:
        pytest.skip("snakefmt is not installed")
    from test_add_a_study import RULES

    (tmp_path / "toy.smk").write_text(RULES.lstrip())
    proc = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "--config", str(REPO_ROOT / "pyproject.toml"),
                           str(tmp_path / "toy.smk")], capture_output=True, text=True, timeout=120, env=_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
