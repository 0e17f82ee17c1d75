"""Benchmarks of conversation turns (``TurnTask``) with one passage corpus per domain, behind
one registry: MTRAG-UN, MTRAG, CORAL, QReCC, RECOR and the mini world's views of them.

A benchmark is a config entry ``benchmarks.<name>: {kind, ...}``; its loader (a class in any
module of this package or of the config's ``benchmark_plugins`` folders, registered by the line
``@register_benchmark_loader("<kind>")`` above it: docs/adding_a_benchmark.md) says which raw
files it needs (downloaded by the workflow's own rule, with sha256), which domains it has, and
turns the raw files into ``results/benchmarks/<name>/tasks.jsonl`` (every task, with a counted
``report.json``) and one corpus per domain, ``results/corpora/<name>.<domain>/corpus.jsonl``, so
the shared index rules build one index per (benchmark domain, retriever).
"""

from __future__ import annotations

from typing import Any

from convrag.errors import ConfigError
from convrag.registry import Registry, listed_modules

BENCHMARK_PATH_ENV = "CONVRAG_BENCHMARK_PATH"  # the run's benchmark_plugins, for every job (common.smk)
# the registering lines are read, not imported: a kind's module is imported when the kind is asked for
_KIND = r"""^@register_benchmark_loader\(["'](\w+)["']\)"""
BENCHMARK_LOADERS: "Registry[BenchmarkLoader]" = Registry("benchmark kind", plugins=(BENCHMARK_PATH_ENV, _KIND),
                                                          lazy=listed_modules(None, _KIND, __package__))


class BenchmarkLoader:
    """Base class of a benchmark loader; a loader overrides what it has."""

    kind = ""
    KEYS: tuple[str, ...] = ()  # the config keys a loader knows (``check_keys``)
    EMPTY_PASSAGES = False  # reads passage files and honours ``empty_passages`` (convrag.data.empty_passages)

    def check_keys(self, name: str, spec: dict, source: str) -> None:
        """An unknown key of ``benchmarks.<name>`` is an error naming it and the known ones."""
        unknown = sorted(set(spec) - set(self.KEYS))
        if unknown:
            raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.{unknown[0]}': unknown key "
                              f"(known: {', '.join(self.KEYS)})")

    def check(self, name: str, spec: dict, source: str) -> None:
        """Validate the config entry (raise ConfigError naming ``benchmarks.<name>.<key>``)."""

    def domains(self, spec: dict) -> list[str]:
        return list(spec["domains"])

    def raw_files(self, spec: dict) -> dict[str, dict]:
        """File name -> download spec ``{url, sha256}`` (or ``{local: path}``) of every raw file."""
        return {}

    def task_inputs(self, spec: dict) -> list[str]:
        """The raw file names the tasks are read from."""
        return []

    def corpus_inputs(self, spec: dict, domain: str) -> list[str]:
        """The raw file names one domain's corpus is read from."""
        return []

    def tasks(self, name: str, spec: dict, files: dict[str, str]) -> tuple[list, dict[str, Any]]:
        """(TurnTasks, counted report) from the raw files (name -> path)."""
        raise NotImplementedError

    def corpus(self, name: str, spec: dict, domain: str, files: dict[str, str]) -> list:
        """The Passage records of one domain."""
        raise NotImplementedError

    def corpus_with_counts(self, name: str, spec: dict, domain: str, files: dict[str, str]) -> tuple[list, dict]:
        """The Passage records of one domain and the counts of what the loader left out of them
        (``empty_passages: drop``), which the corpus's check report (gold.json) carries beside the
        missing gold ids. A loader that leaves nothing out has no counts."""
        return self.corpus(name, spec, domain, files), {}

    def check_files_given(self, name: str, spec: dict, source: str, repo: str, why: str = "") -> None:
        """Without ``revision`` (a commit of ``repo`` to download from), every raw file must be given
        under ``files``: the error lists the ones that are not, and ``why`` says what they hold."""
        missing = [n for n in self.raw_names(spec) if n not in (spec.get("files") or {})]  # a loader with raw_names
        if "revision" not in spec and missing:
            raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.revision': required (a commit of {repo}, "
                              f"to download the raw files) unless every raw file is given under 'files'; not given "
                              f"there: {', '.join(missing)}{why}")


def register_benchmark_loader(kind: str):
    """Class decorator: ``@register_benchmark_loader("<kind>")`` registers one instance of the
    class as ``kind`` (its ``kind``); written so, on the line above the class, it lists the kind."""
    def deco(cls: type[BenchmarkLoader]) -> type[BenchmarkLoader]:
        cls.kind = kind
        BENCHMARK_LOADERS.add(kind, cls())
        return cls
    return deco


def benchmark_loader(kind: str) -> BenchmarkLoader:
    return BENCHMARK_LOADERS.get(kind)


def corpus_id(benchmark: str, domain: str) -> str:
    """The corpus name of one benchmark domain (``results/corpora/<id>/``, ``results/indexes/<id>/``)."""
    return f"{benchmark}.{domain}"


def benchmark_corpora(config: dict) -> dict[str, tuple[str, str]]:
    """Every benchmark domain corpus of a config: corpus id -> (benchmark, domain)."""
    return {corpus_id(b, d): (b, d) for b, spec in config.get("benchmarks", {}).items()
            for d in benchmark_loader(spec["kind"]).domains(spec)}
