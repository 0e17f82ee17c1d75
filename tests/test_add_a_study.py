"""Adding a study is a folder: a plug-in written into a temporary folder (its package with a
CLI stage, its schema fragment, its rule file, its caption and a config) plans and builds its
table through Snakemake, and no file of the repository changes (docs/adding_a_study.md)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import yaml

from convrag.config import REPO_ROOT

STUDY = '''
"""A toy study: the number of benchmark tasks per domain, counted by its own stage."""
from convrag.studies import Study, Target


def _counts(inputs, ctx):
    import json

    import pandas as pd

    counts = json.loads(open(inputs["counts"]).read())
    return pd.DataFrame([{"domain": d, "tasks": n} for d, n in sorted(counts.items())])


def cmd_count(a):
    from collections import Counter

    from convrag.io import write_json
    from convrag.records import TurnTask, read_records

    write_json(a.out, dict(Counter(t.labels.get("domain") for t in read_records(a.tasks, TurnTask))))


class Toy(Study):
    key = "toy"
    title = "Task counts per domain (a plug-in written by a test)"

    def targets(self):
        return {"task_counts": Target("task_counts", "table", _counts, inputs=("counts",))}

    def artifacts(self, config, layout):
        return {"counts": f"{layout.study('toy')}/counts.json"}

    def add_cli(self, sub):
        s = sub.add_parser("count", help="count a benchmark's tasks per domain")
        s.set_defaults(fn=cmd_count)
        s.add_argument("--tasks", required=True)
        s.add_argument("--out", required=True)


STUDY = Toy()
'''

RULES = '''
localrules:
    toy,
    toy_count,


rule toy:
    input:
        study_targets("toy"),


rule toy_count:
    input:
        L.benchmark_tasks(config["toy"]["benchmark"]),
    output:
        f"{L.study('toy')}/counts.json",
    log:
        L.log("toy/count.log"),
    conda:
        conda_env()
    shell:
        "convrag toy count --tasks {input} --out {output} 2> {log}"
'''

SCHEMA = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
          "additionalProperties": False, "required": ["benchmark"],
          "properties": {"benchmark": {"type": "string"}}}


def _git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO_ROOT,
                          capture_output=True, text=True).stdout


def write_toy(folder: Path) -> Path:
    """The toy study's four pieces in ``folder``/toy and a config that runs it; returns the config
    (tests/test_lint.py lints the same rule file)."""
    home = folder / "toy"
    (home / "report").mkdir(parents=True)
    (home / "__init__.py").write_text(textwrap.dedent(STUDY))
    (home / "rules.smk").write_text(RULES.lstrip())
    (home / "schema.yaml").write_text(yaml.safe_dump(SCHEMA))
    (home / "report" / "task_counts.rst").write_text("Tasks per domain of the configured benchmark (toy study).\n")
    cfg = {"studies": ["toy"], "study_plugins": [str(home)], "warm_start": False,
           "benchmarks": {"mini": {"kind": "miniworld_mtrag", "domains": {
               "alpha": {"seed": 21, "conversations": 1}, "beta": {"seed": 22, "conversations": 1}}}},
           "toy": {"benchmark": "mini"}}
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg))
    return folder / "config.yaml"


@pytest.mark.workflow
def test_a_study_in_a_temporary_folder_plans_and_builds_its_table(tmp_path):
    before = _git_status()
    write_toy(tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    base = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO_ROOT / "Snakefile"), "--directory",
            str(tmp_path), "--configfile", str(tmp_path / "config.yaml")]
    plan = subprocess.run(base + ["-n", "--quiet", "rules"], capture_output=True, text=True, env=env, timeout=300)
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert {"toy_count", "benchmark_tasks", "study_table"} <= set(plan.stdout.split()), plan.stdout
    proc = subprocess.run(base + ["--cores", "1"], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    tasks = [json.loads(x) for x in (tmp_path / "results/benchmarks/mini/tasks.jsonl").read_text().splitlines()]
    table = pd.read_csv(tmp_path / "results/toy/tables/task_counts.csv")
    want = {d: sum(t["labels"]["domain"] == d for t in tasks) for d in ("alpha", "beta")}
    assert dict(zip(table.domain, table.tasks)) == want and min(want.values()) > 0
    assert (tmp_path / "results/toy/tables/task_counts.md").read_text().startswith("Tasks per domain")
    assert _git_status() == before  # no file of the repository was edited or added
