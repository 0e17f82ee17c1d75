"""Where every output lives: one place for the rule files and the Python code alike.

A path function takes plain strings, so the same call gives a concrete path
(``layout.corpus("miniworld")``) or a Snakemake pattern (``layout.corpus("{corpus}")``).
Shared artifacts (raw downloads, corpora, question selections, knowledge graphs, indexes, the
LLM cache) sit at the top of the results folder; everything a study writes sits under
``<results>/<study>/``, with its tables and figures in ``tables/`` and ``figures/``.
"""

from __future__ import annotations

from dataclasses import dataclass

TABLE_EXTS = ("csv", "md")
FIGURE_EXTS = ("png", "pdf", "csv", "md")


@dataclass(frozen=True)
class Layout:
    root: str = "results"

    # ---- shared artifacts -------------------------------------------------------------
    @property
    def cache(self) -> str:
        return f"{self.root}/cache/llm.sqlite"

    def raw(self, source: str, filename: str) -> str:
        return f"{self.root}/raw/{source}/{filename}"

    def corpus(self, corpus: str) -> str:
        return f"{self.root}/corpora/{corpus}/corpus.jsonl"

    def questions_all(self, corpus: str) -> str:
        return f"{self.root}/corpora/{corpus}/questions_all.jsonl"

    def questions(self, dataset: str) -> str:
        return f"{self.root}/datasets/{dataset}/questions.jsonl"

    def benchmark_tasks(self, benchmark: str) -> str:
        """Every TurnTask of a benchmark (``report.json`` beside it counts what was read)."""
        return f"{self.root}/benchmarks/{benchmark}/tasks.jsonl"

    def benchmark_report(self, benchmark: str) -> str:
        return f"{self.root}/benchmarks/{benchmark}/report.json"

    def corpus_gold(self, corpus: str) -> str:
        """The gold-in-corpus check of one benchmark domain's corpus (convrag.data.gold), counted."""
        return f"{self.root}/corpora/{corpus}/gold.json"

    def graph_manifest(self, corpus: str) -> str:
        return f"{self.root}/graphs/{corpus}/manifest.json"

    def graph_accounting(self, corpus: str) -> str:
        return f"{self.root}/graphs/{corpus}/accounting.json"

    def index_manifest(self, corpus: str, retriever: str) -> str:
        return f"{self.root}/indexes/{corpus}/{retriever}/manifest.json"

    def log(self, path: str) -> str:
        """A job's log (or Snakemake benchmark file): under the results folder, so a run with an
        absolute ``results_dir`` writes nothing into the working directory."""
        return f"{self.root}/logs/{path}"

    # ---- a study's outputs ------------------------------------------------------------
    def study(self, study: str) -> str:
        return f"{self.root}/{study}"

    def table(self, study: str, name: str) -> str:
        """The stem of a table (``.csv`` full precision, ``.md`` with its caption)."""
        return f"{self.root}/{study}/tables/{name}"

    def figure(self, study: str, name: str) -> str:
        """The stem of a figure (``.png``, ``.pdf``, and its plotted numbers as ``.csv``/``.md``)."""
        return f"{self.root}/{study}/figures/{name}"

    def table_files(self, study: str, name: str) -> list[str]:
        return [f"{self.table(study, name)}.{ext}" for ext in TABLE_EXTS]

    def figure_files(self, study: str, name: str) -> list[str]:
        return [f"{self.figure(study, name)}.{ext}" for ext in FIGURE_EXTS]

    def target_files(self, study: str, name: str, kind: str) -> list[str]:
        return self.table_files(study, name) if kind == "table" else self.figure_files(study, name)


def layout(config: dict) -> Layout:
    return Layout(config.get("results_dir", "results"))
