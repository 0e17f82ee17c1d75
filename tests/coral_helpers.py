"""The coral test slice's config, validated with one change applied (shared by the coral tests)."""

from __future__ import annotations

import copy

import yaml

from convrag.config import REPO_ROOT, validate_config

TEST_CONFIG = yaml.safe_load((REPO_ROOT / "config" / "tests" / "coral.yaml").read_text())
RETRIEVERS = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())["retrievers"]


def validated(change=None) -> dict:
    """config/tests/coral.yaml's corpora and coral block (with the default's retrievers), after
    ``change(cfg)``, through the schema and the study's checks."""
    cfg = copy.deepcopy({"retrievers": RETRIEVERS, "studies": ["coral"],
                         **{k: TEST_CONFIG[k] for k in ("corpora", "coral")}})
    if change:
        change(cfg)
    return validate_config(cfg, source="x.yaml", registry={"smollm2-135m": {}, "judge-b": {}})
