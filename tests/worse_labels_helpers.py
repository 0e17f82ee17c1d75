"""The worse_labels test config, as the tests of its study, answer judges and released expansions read it."""

from __future__ import annotations

import copy

import yaml

from convrag.config import REPO_ROOT, validate_config

TEST_CONFIG = REPO_ROOT / "config" / "tests" / "worse_labels.yaml"


def base_config() -> dict:
    """The test config over the default's retrievers (as Snakemake merges them)."""
    cfg = yaml.safe_load(TEST_CONFIG.read_text())
    cfg["retrievers"] = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())["retrievers"]
    return cfg


def checked(cfg: dict) -> dict:
    return validate_config(copy.deepcopy(cfg), source="cfg.yaml")
