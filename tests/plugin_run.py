"""What the add-a-kind tests share: the repository's git status (a plug-in edits no file of
it) and one table planned and built through Snakemake with a config in a temporary folder."""

import os
import subprocess
import sys
from pathlib import Path

from convrag.config import REPO_ROOT


def git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO_ROOT,
                          capture_output=True, text=True).stdout


def plan_and_build(folder: Path, target: str, unset_env: str) -> set[str]:
    """Plan ``target`` with ``folder/config.yaml`` (the rules planned are returned), then build it.
    ``unset_env`` (the plug-in path variable) is dropped so that the config alone names the folder."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop(unset_env, None)
    base = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO_ROOT / "Snakefile"), "--directory",
            str(folder), "--configfile", str(folder / "config.yaml")]
    plan = subprocess.run(base + ["-n", "--cores", "1", target, "--quiet", "rules"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert plan.returncode == 0, plan.stderr[-3000:]
    proc = subprocess.run(base + ["--cores", "1", target], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return set(plan.stdout.split())
