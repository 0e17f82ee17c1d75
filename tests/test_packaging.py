"""Packaging hygiene: LICENSE and CITATION.cff agree with pyproject, the package's version."""

import hashlib
import importlib.metadata
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_license_is_the_apache_2_text_pyproject_declares():
    assert PYPROJECT["project"]["license"] == {"text": "Apache-2.0"}
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
    assert cff["license"] == PYPROJECT["project"]["license"]["text"]
    assert str(cff["version"]) == PYPROJECT["project"]["version"] == importlib.metadata.version("convrag")
