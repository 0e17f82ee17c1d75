import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

# Offline everywhere: no test may reach a model or dataset hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real-data samples not present at {SHARED_DATA} (they sit beside the repo in CI)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def default_run(tmp_path_factory) -> Path:
    """The embedded default config run once per session (the costliest fixture of the suite, half
    of CI's time): in a fresh folder, or, with CONVRAG_TEST_GRID=DIR, a folder where the default has
    already run (`snakemake --cores 2 --directory DIR`), brought up to date here. Session-scoped so
    that every test module that reads a default run (tests/test_workflow.py, and
    tests/test_workflow_replay.py when both are collected) shares this one instead of building its
    own."""
    given = os.environ.get("CONVRAG_TEST_GRID")
    wd = Path(given) if given else tmp_path_factory.mktemp("grid")
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--snakefile", str(REPO / "Snakefile"),
           "--directory", str(wd)]  # the default config of the repository, as `snakemake --cores all` runs it
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return wd

