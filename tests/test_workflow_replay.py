"""Offline rebuild of a default-run target from a cache bundle (issue 15, item 3): trace the
target's jobs over a built grid's LLM cache, export the entries they used, import the bundle into
a new, empty folder and rebuild the target there under strict replay: byte-identical files and
no backend call. With one entry removed, the strict rebuild fails and names the missing request.

The target is mtrag_un's Table 2 (retrieval with and without the LLM query rewrite): its jobs
call the model (the rewrites), its files hold no timings, and its whole DAG is 17 small jobs.
"""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from convrag.config import REPO_ROOT

pytestmark = [pytest.mark.workflow, pytest.mark.tinymodel]

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
TARGET = "results/mtrag_un/tables/table2_retrieval"
FILES = [f"{TARGET}.csv", f"{TARGET}.md"]
RUNS = "results/mtrag_un/runs/mini_mtrag"  # the jobs that call the model write their rewrites here
CACHE = "results/cache/llm.sqlite"
LLM_RULE = "mtrag_un_retrieve"


def _snakemake(workdir: Path, *extra: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = SNAKEMAKE + ["--cores", "2", "--snakefile", str(REPO_ROOT / "Snakefile"), "--directory", str(workdir),
                       *extra]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("CONVRAG_LLM_REPLAY", None)
    env.pop("CONVRAG_LLM_TRACE", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc


def _convrag(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "convrag.cli", *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _copy_cache(src: Path, dst: Path) -> None:
    """A consistent one-file copy of a (WAL-mode) SQLite cache."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


def _accounting(workdir: Path) -> list[tuple[Path, str, dict]]:
    """(file, role, totals) of every LLM role in every job accounting file of a results tree."""
    out = []
    for f in sorted((workdir / "results").rglob("*accounting.json")):
        for role, acc in json.loads(f.read_text()).items():
            if isinstance(acc, dict) and "calls" in acc:
                out.append((f, role, acc))
    return out


def _default_run_in_session(request) -> bool:
    """Whether a test collected in this session uses conftest's default run (tests/test_workflow.py)."""
    return any("default_run" in getattr(item, "fixturenames", ()) for item in request.session.items)


@pytest.fixture(scope="module")
def grid(request, tmp_path_factory):
    """A folder where the default config built the target: the session's default run (conftest's
    default_run: CONVRAG_TEST_GRID=DIR, or the full default run tests/test_workflow.py builds when
    it is collected too, as in CI; a second build of the target would repeat its jobs), brought up
    to date for the target; or else a fresh folder where the target alone is built from scratch
    (its rewrites then call the packaged model)."""
    if os.environ.get("CONVRAG_TEST_GRID") or _default_run_in_session(request):
        wd = request.getfixturevalue("default_run")
    else:
        wd = tmp_path_factory.mktemp("grid")
    _snakemake(wd, f"{TARGET}.csv")
    return wd


@pytest.fixture(scope="module")
def exported(grid, tmp_path_factory):
    """The target's jobs rerun with tracing over a copy of the grid's cache, and their bundle."""
    base = tmp_path_factory.mktemp("replay")
    src, trace, bundle = base / "traced", base / "trace", base / "table2.convrag-cache"
    _copy_cache(grid / CACHE, src / CACHE)
    _snakemake(src, f"{TARGET}.csv", "--forceall", "--config", f"llm_cache={{trace: {trace}}}")
    out = _convrag("cache", "export", "--cache", str(src / CACHE), "--trace", str(trace), "--out", str(bundle))
    assert out.startswith(f"exported {bundle}")
    return {"base": base, "src": src, "trace": trace, "bundle": bundle}


def _manifest(bundle: Path) -> dict:
    import zipfile

    with zipfile.ZipFile(bundle) as z:
        return json.loads(z.read("manifest.json"))


def test_traced_rerun_used_only_the_grids_cache(exported):
    roles = _accounting(exported["src"])
    assert {r for _, r, _ in roles} == {"rewriter"} and len(roles) == 4  # 2 retrievers x 2 domains
    assert all(acc["calls"] == 0 and acc["requests"] > 0 for _, _, acc in roles), roles
    m = _manifest(exported["bundle"])
    traced = [json.loads(line) for f in sorted(exported["trace"].glob("*.jsonl")) for line in f.read_text().splitlines()]
    assert m["counts"]["entries"] == len({t["key"] for t in traced}) > 0
    assert m["counts"]["trace_records"] == len(traced) and m["counts"]["jobs"] == 4
    assert [x["names"] for x in m["models"]] == [["smollm2-135m"]]
    assert all(x["roles"] == ["rewriter"] and len(x["prompt_sha256"]) == 64 for x in m["requests"])
    assert all(t["hit"] for t in traced)  # the grid's cache answered every request


def test_strict_replay_in_a_new_folder_is_byte_identical(exported):
    new = exported["base"] / "replayed"
    new.mkdir()
    out = _convrag("cache", "import", str(exported["bundle"]), "--cache", str(new / CACHE))
    n = _manifest(exported["bundle"])["counts"]["entries"]
    assert f"{n} entries, {n} added, 0 already present" in out
    _snakemake(new, f"{TARGET}.csv", "--config", "llm_cache={replay: strict}")
    src = exported["src"]
    llm_files = sorted(p.relative_to(src).as_posix() for p in (src / RUNS).glob("*/llm_rewrite/*.queries.jsonl"))
    assert len(llm_files) == 4
    for rel in FILES + llm_files:
        assert (new / rel).read_bytes() == (src / rel).read_bytes(), rel
    roles = _accounting(new)
    assert len(roles) == 4 and sum(acc["requests"] for _, _, acc in roles) > 0
    for f, role, acc in roles:  # every answer came from the imported bundle; no model was loaded
        assert acc["calls"] == 0 and acc["batches"] == 0 and acc["load_seconds"] == 0.0, (f, role, acc)


def test_strict_replay_names_a_missing_entry(exported):
    """One entry fewer: the strict rebuild of the model jobs fails, naming key, model, role and job."""
    replayed, broken = exported["base"] / "replayed", exported["base"] / "broken"
    if not (replayed / FILES[0]).exists():
        pytest.skip("needs the strict rebuild of test_strict_replay_in_a_new_folder_is_byte_identical")
    # its built inputs (corpora, indexes) are reused; the cache is a second import with one key deleted
    shutil.copytree(replayed, broken, ignore=shutil.ignore_patterns("cache", ".snakemake"))
    _convrag("cache", "import", str(exported["bundle"]), "--cache", str(broken / CACHE))
    key = _manifest(exported["bundle"])["requests"][0]["key"]
    with sqlite3.connect(broken / CACHE) as con:
        assert con.execute("DELETE FROM responses WHERE key = ?", (key,)).rowcount == 1
    proc = _snakemake(broken, f"{TARGET}.csv", "--forcerun", LLM_RULE, "--config", "llm_cache={replay: strict}",
                      check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    jobs = {json.loads(line)["job"] for f in exported["trace"].glob("*.jsonl") for line in f.read_text().splitlines()
            if json.loads(line)["key"] == key}
    errors = [line for line in out.splitlines() if line.startswith("convrag retrieve: error: strict replay")]
    assert errors, out[-4000:]
    for e in errors:
        assert "1 of " in e and f"first missing key {key}:" in e, e
        assert "model smollm2-135m (" in e and "role rewriter" in e, e
        assert any(f"job `{j}`" in e for j in jobs), (e, jobs)
