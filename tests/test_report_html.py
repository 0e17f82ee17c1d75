"""The HTML report of a run (issue 45): ``snakemake --report report.html`` shows each target's
Markdown file, read after the run (workflow/report/target.rst): the caption with the run's settings
and why each blank cell is blank, then the numbers as the Markdown formats them; each figure's
plotted numbers are their own item; a landing page (workflow/report/workflow.rst,
convrag.report.landing) says what was run.

The rendering is checked without Snakemake (Jinja and docutils as snakemake.report uses them); a
plug-in toy study, run for real through Snakemake in a temporary folder (seconds), checks the
report of a run (tests/test_workflow.py: the report of the default run).
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from convrag.config import REPO_ROOT, load_config
from convrag.report.tables import write_table

TEMPLATE = REPO_ROOT / "workflow" / "report" / "target.rst"


def _render(template: Path, **kw) -> str:
    """A caption as ``snakemake --report`` renders it: Jinja (trim_blocks, lstrip_blocks), then
    docutils' HTML body (snakemake.report.FileRecord.render)."""
    from docutils.core import publish_parts
    from jinja2 import Environment

    env = Environment(trim_blocks=True, lstrip_blocks=True)
    return publish_parts(env.from_string(template.read_text()).render(**kw), writer_name="html")["body"]


def _plain(fragment: str) -> str:
    """The text of an HTML fragment, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _md_caption(text: str) -> str:
    return text.splitlines()[0]


# ---- the caption template, without Snakemake -----------------------------------------------------


def test_a_table_caption_is_its_markdown_after_the_run(tmp_path):
    """The first line of the .md (caption, run note, blank-cell reasons) as a paragraph; the table as
    the Markdown formats it (counts as integers, shares to 3 decimals), not the CSV's full floats."""
    from convrag.report.blanks import blanks_sentence

    df = pd.DataFrame({"retriever": ["bm25", "dense"], "n_turns": [3.0, 0.0], "recall_turns": [0.1 + 0.2, np.nan],
                       "questions": [750.0, 1500000.0]})
    caption = "Table 9. Recall per retriever, *as rst*. This run: top_k: 2."
    blanks = blanks_sentence(df)
    assert blanks.startswith("Blank cells: recall_turns (1 of 2 rows: no items to compute it from (n_turns = 0)")
    _, md = write_table(df, tmp_path / "t9", caption=f"{caption} {blanks}")
    shown = _render(TEMPLATE, snakemake=SimpleNamespace(output=SimpleNamespace(md=str(md))))
    assert "System Message" not in shown and "system-message" not in shown
    first, block = shown.split('<pre class="literal-block">', 1)
    assert "<em>as rst</em>" in first and _plain(first) == _plain(html.escape(f"{caption} {blanks}")).replace("*", "")
    assert "| retriever" in block and "0.300" in block and "1500000" in block
    assert "0.30000000000000004" not in shown and "1500000.0" not in shown


def test_a_figure_caption_shows_its_plotted_numbers(tmp_path):
    """A figure's .md is its caption and the numbers it plots (convrag.report.targets.build_target):
    the report shows both; a placeholder's note is part of the caption line."""
    df = pd.DataFrame({"condition": ["FULL", "SHARDED"], "mean_f1": [0.5, 1 / 3]})
    caption = "Figure 2. F1 per condition. (Placeholder: the grid has no cells this analysis needs.)"
    _, md = write_table(df, tmp_path / "f2", caption=caption)
    shown = _render(TEMPLATE, snakemake=SimpleNamespace(output=SimpleNamespace(md=str(md))))
    assert "Placeholder: the grid has no cells" in shown.split("<pre", 1)[0]
    assert "SHARDED" in shown and "0.333" in shown and "0.3333" not in shown


def test_the_report_shows_a_page_under_its_summary_line(tmp_path):
    """A target with its own page (the reproduction table) writes a one-line summary, then the page:
    the summary is the description's first paragraph, the page below it as text."""
    page = tmp_path / "reproduction.md"
    page.write_text("8 published numbers: 1 reproduced, 7 not comparable\n\nReproduction of the demo paper.\n\n"
                    "## Table 2\n\n| id | verdict |\n|---|---|\n| t2.outside | not reproduced |\n\n## Notes\n")
    shown = _render(TEMPLATE, snakemake=SimpleNamespace(output=SimpleNamespace(md=str(page))))
    assert shown.startswith("<p>8 published numbers: 1 reproduced, 7 not comparable</p>")
    block = shown.split('<pre class="literal-block">', 1)[1]
    for text in ("Reproduction of the demo paper", "## Table 2", "t2.outside", "## Notes"):
        assert text in block, text
    assert "System Message" not in shown


def test_every_figure_csv_is_a_report_item_and_no_caption_is_parsed_before_the_run():
    rules = (REPO_ROOT / "workflow" / "rules" / "report.smk").read_text()
    assert rules.count('caption="../report/target.rst"') == 2 and 'caption="../report/figure_data.rst"' in rules
    assert "snakemake.params" not in TEMPLATE.read_text()  # params are computed when the workflow is parsed
    assert "report: \"workflow/report/workflow.rst\"" in (REPO_ROOT / "Snakefile").read_text()


def test_the_landing_page_says_what_was_run(tmp_path):
    """Config files, each study with its settings and a link to its reproduction page (with the
    page's verdict counts), the models with their sizes, the data."""
    from docutils.core import publish_parts

    from convrag.report.landing import landing_page, show_result
    from convrag.studies import active_studies

    cfg = load_config(REPO_ROOT / "config" / "config.yaml")
    studies = {s.key: s for s in active_studies(cfg)}
    (tmp_path / "results" / "coral" / "tables").mkdir(parents=True)
    (tmp_path / "results" / "coral" / "tables" / "reproduction.md").write_text("54 published numbers: 54 not comparable\n")
    rst = landing_page(cfg, [str(REPO_ROOT / "config" / "config.yaml")], {"lic_rag": "{runs: 1}"}, studies,
                       ["results/coral/tables/reproduction.csv"], basedir=str(REPO_ROOT), workdir=tmp_path)
    body = publish_parts(rst, writer_name="html")["html_body"]
    assert "System Message" not in body and "system-message" not in body
    text = _plain(body)
    assert "Config files: config/config.yaml (the embedded default); set on the command line: lic_rag={runs: 1}" in text
    for key in studies:
        assert f"{key}: {studies[key].title}" in text, key
    assert f'href="{show_result("results/coral/tables/reproduction.csv")}"' in body
    assert "Reproduction page: 54 published numbers: 54 not comparable" in text
    assert text.count("No reproduction page in this report.") == len(studies) - 1
    assert "smollm2-135m: 0.135B parameters (a small stand-in" in text and "This run: " in text
    assert "miniworld (corpus, kind miniworld): generated by the project" in text


# ---- a run through Snakemake ---------------------------------------------------------------------

STUDY = '''
"""A toy study for the report test: a table with a blank cell and a figure."""
from convrag.studies import Study, Target


def _counts(inputs, ctx):
    import json

    import pandas as pd

    counts = json.loads(open(inputs["counts"]).read())
    rows = [{"domain": d, "tasks": n, "n_long": 0 if d == "beta" else n,
             "share_long": float("nan") if d == "beta" else 1 / 3} for d, n in sorted(counts.items())]
    return pd.DataFrame(rows)


def _plot(df, stem):
    from convrag.report.figures import grouped_bars

    grouped_bars(df.assign(kind="tasks"), stem, x="domain", hue="kind", y="tasks", ylabel="tasks")


def cmd_count(a):
    from collections import Counter

    from convrag.io import write_json
    from convrag.records import TurnTask, read_records

    write_json(a.out, dict(Counter(t.labels.get("domain") for t in read_records(a.tasks, TurnTask))))


class Toy(Study):
    key = "toy"
    title = "Task counts per domain (a plug-in written by a test)"

    def targets(self):
        return {"task_counts": Target("task_counts", "table", _counts, inputs=("counts",)),
                "task_bars": Target("task_bars", "figure", _counts, plot=_plot, inputs=("counts",))}

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
rule toy:
    input:
        study_targets("toy"),


rule toy_count:
    input:
        L.benchmark_tasks(config["toy"]["benchmark"]),
    output:
        L.study("toy") + "/counts.json",
    log:
        L.log("toy/count.log"),
    shell:
        "convrag toy count --tasks {input} --out {output} 2> {log}"

'''

SCHEMA = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
          "additionalProperties": False, "required": ["benchmark"], "properties": {"benchmark": {"type": "string"}}}


def _smk(wd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO_ROOT / "Snakefile"), "--directory", str(wd),
           "--configfile", str(wd / "config.yaml"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    wd = tmp_path_factory.mktemp("toy_run")
    home = wd / "plugin" / "toy"
    (home / "report").mkdir(parents=True)
    (home / "__init__.py").write_text(textwrap.dedent(STUDY))
    (home / "rules.smk").write_text(RULES.lstrip())
    (home / "schema.yaml").write_text(yaml.safe_dump(SCHEMA))
    (home / "report" / "task_counts.rst").write_text("Tasks per domain of the configured benchmark (toy study).\n")
    (home / "report" / "task_bars.rst").write_text("Tasks per domain, as bars (toy study).\n")
    cfg = {"studies": ["toy"], "study_plugins": [str(home)], "warm_start": False,
           "benchmarks": {"mini": {"kind": "miniworld_mtrag", "domains": {
               "alpha": {"seed": 21, "conversations": 1}, "beta": {"seed": 22, "conversations": 1}}}},
           "toy": {"benchmark": "mini"}}
    (wd / "config.yaml").write_text(yaml.safe_dump(cfg))
    run = _smk(wd, "--cores", "1")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = _smk(wd, "--report", str(wd / "report.html"))
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
    return SimpleNamespace(wd=wd, html=(wd / "report.html").read_text())


def report_items(page: str) -> tuple[dict, str]:
    """The report's files (path -> entry with its rendered caption) and its landing page (HTML)."""
    results = json.loads(re.search(r"var results = (\{.*?\});\n", page, re.S).group(1))
    desc = json.loads(re.search(r"var workflow_desc = (\".*?\");\n", page, re.S).group(1))
    return results, desc


@pytest.mark.workflow
def test_the_report_of_a_run_has_the_markdown_captions(toy_run):
    results, desc = report_items(toy_run.html)
    tables = toy_run.wd / "results" / "toy" / "tables"
    md = (tables / "task_counts.md").read_text()
    assert "Blank cells: share_long (1 of 2 rows: no items to compute it from (n_long = 0))" in _md_caption(md)
    caption = results["results/toy/tables/task_counts.csv"]["caption"]
    assert _plain(_md_caption(md)) in _plain(caption)
    assert "0.333" in caption and "0.3333" not in caption  # the Markdown's formatting, not the CSV's floats
    fig = results["results/toy/figures/task_bars.png"]["caption"]
    assert "Tasks per domain, as bars" in fig and "| domain" in fig  # the plotted numbers under the caption
    assert "results/toy/figures/task_bars.csv" in results  # and as their own item
    landing = _plain(desc)
    assert "ConvRAG-Grid run" in landing and "toy: Task counts per domain" in landing
    assert "Config files: " in landing and "config.yaml" in landing and "No reproduction page" in landing
