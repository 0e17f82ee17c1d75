"""README figures that cannot go stale (issue 33, item 6): benchmarks/readme_figures.py counts a
dry run's jobs (a hand-made plan here) and renders the measured profile that
benchmarks/default_profile.py --save summarises (hand-made Snakemake metadata here); the README's
row for the embedded default equals a real `snakemake -n`."""

import base64
import importlib.util
import json
import re
import subprocess
import sys

from convrag.config import REPO_ROOT


def _load(name):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


rf = _load("readme_figures")

PLAN = """Building DAG of jobs...
Job stats:
job               count
--------------  -------
all                   1
build_index           2
lic_rag_score         1
study_table           2
total                 6

Select jobs to execute...

[Fri Dec  4 10:00:00 2026]
rule build_index:
    output: /r/indexes/miniworld/bm25/manifest.json
    jobid: 1

[Fri Dec  4 10:00:00 2026]
rule build_index:
    output: /r/indexes/miniworld/dense/manifest.json
    jobid: 2

[Fri Dec  4 10:00:00 2026]
localrule lic_rag_score:
    output: /r/lic_rag/scores/turns.parquet, /r/lic_rag/scores/conversations.parquet
    jobid: 3

[Fri Dec  4 10:00:00 2026]
rule study_table:
    output: /r/lic_rag/tables/recovery.csv, /r/lic_rag/tables/recovery.md
    wildcards: study=lic_rag, target=recovery

[Fri Dec  4 10:00:00 2026]
rule study_table:
    output: /r/cross/tables/plan.csv, /r/cross/tables/plan.md
    wildcards: study=cross, target=plan

[Fri Dec  4 10:00:00 2026]
localrule all:
    input: /r/lic_rag/tables/recovery.csv
    jobid: 0
Job stats:
job               count
--------------  -------
total                 6
"""


def test_count_jobs_of_a_known_plan():
    c = rf.count_jobs(PLAN, "/r")
    assert c == {"total": 6, "with_outputs": 5, "rules": {"all": 1, "build_index": 2, "lic_rag_score": 1,
                                                          "study_table": 2},
                 "studies": {"shared": 3, "lic_rag": 2, "cross": 1}}


def _metadata(workdir, jobs):
    meta = workdir / ".snakemake" / "metadata"
    meta.mkdir(parents=True)
    for rule, outs, inputs, start, end in jobs:
        for o in outs:
            name = base64.b64encode(o.encode()).decode().replace("/", "@")
            (meta / name).write_text(json.dumps({"rule": rule, "input": inputs, "starttime": start, "endtime": end,
                                                 "job_hash": hash(rule + outs[0]), "incomplete": False}))


def test_profile_summary_and_render(tmp_path):
    """Three jobs: corpus 0-10 s, then index 10-40 s and a lic_rag table 10-20 s on two cores:
    makespan 40 s, 50 job-seconds, critical path 40 s (corpus -> index); lic_rag 10 of 50 = 20%."""
    _metadata(tmp_path, [
        ("prepare_corpus", ["results/corpora/w/corpus.jsonl"], [], 1000.0, 1010.0),
        ("build_index", ["results/indexes/w/bm25/manifest.json"], ["results/corpora/w/corpus.jsonl"], 1010.0, 1040.0),
        ("study_table", ["results/lic_rag/tables/t.csv", "results/lic_rag/tables/t.md"],
         ["results/corpora/w/corpus.jsonl"], 1010.0, 1020.0)])
    stem = tmp_path / "prof" / "default_2026-12-05"
    stem.parent.mkdir()
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "default_profile.py"), "--directory",
                           str(tmp_path), "--cores", "2", "--wall-clock", "1:05", "--save", str(stem),
                           "--date", "2026-12-05", "--host", "2-core VM"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(stem.with_suffix(".json").read_text())
    assert summary == {"date": "2026-12-05", "config": "embedded default", "host": "2-core VM", "note": "",
                       "wall_clock_s": 65.0, "profile": "default_2026-12-05.md", "jobs": 3, "cores": 2,
                       "makespan_s": 40.0, "job_seconds": 50.0, "critical_path_s": 40.0,
                       "critical_path": ["prepare_corpus", "build_index"],
                       "studies": {"lic_rag": {"jobs": 1, "job_seconds": 10.0},
                                   "shared": {"jobs": 2, "job_seconds": 40.0}}}
    assert stem.with_suffix(".md").read_text() == proc.stdout
    (stem.parent / "default_2026-12-01.json").write_text(json.dumps({**summary, "date": "2026-12-01"}))
    assert rf.latest_profile(stem.parent)["date"] == "2026-12-05"
    block = rf.render({rf.DEFAULT: rf.count_jobs(PLAN, "/r")}, rf.latest_profile(stem.parent))
    assert "| embedded default | 6 | 2 | 0 | 0 | 0 | 1 | 3 | build_index 2, study_table 2, all 1 |" in block
    assert ("**1 min 05 s** wall clock for 3 jobs; makespan 40 s, 50 job-seconds, critical path 40 s "
            "(prepare_corpus -> build_index). Share of the job-seconds: shared 80% (2 jobs), lic_rag 20% (1 jobs).") in block
    # the plan has 5 jobs with outputs, the measured run 3: the figure is marked stale
    assert "**Stale:** that run had 3 jobs with outputs; the default now plans 5." in block
    readme = f"intro\n{rf.BEGIN}\nold\n{rf.END}\nrest\n"
    assert rf.replace_block(readme, block) == f"intro\n{block}\nrest\n"
    assert rf.read_block(rf.replace_block(readme, block)) == block


def test_readme_default_row_equals_a_dry_run(tmp_path):
    """The README's generated row for the embedded default is what `snakemake -n` plans now."""
    readme = (REPO_ROOT / "README.md").read_text()
    row = re.search(r"^\| embedded default \| .*$", rf.read_block(readme), re.M)
    assert row, "README.md has no generated row for the embedded default (run benchmarks/readme_figures.py)"
    res = str(tmp_path / "results")
    now = rf.render({rf.DEFAULT: rf.count_jobs(rf.dry_run(rf.DEFAULT, res), res)}, None)
    assert row[0] in now.splitlines(), f"stale README row:\n{row[0]}\nnow:\n{now}"
