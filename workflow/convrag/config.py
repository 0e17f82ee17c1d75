"""Workflow configuration: schema validation with defaults, and cross-reference checks.

The Snakefile and every CLI stage go through ``validate_config`` so that a typo in a key, a
wrong type, or an unknown model / retriever / dataset name stops the run *before* any job
starts, with an error naming the key (``lic_rag.models[1]``), not a KeyError deep in a job.
"""

from __future__ import annotations

import copy
import functools
import math
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from convrag.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO_ROOT / "workflow" / "schemas" / "config.schema.yaml"


def _with_defaults(validator_class):
    """A validator that fills in ``default`` values before descending into properties."""
    validate_props = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


@functools.lru_cache(maxsize=1)
def _schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _key_path(err: jsonschema.ValidationError) -> str:
    key = ""
    for p in err.absolute_path:
        key += f"[{p}]" if isinstance(p, int) else (f".{p}" if key else str(p))
    if err.validator == "additionalProperties":
        extra = re.findall(r"'([^']+)' (?:was|were) unexpected", err.message)
        if extra:
            key = f"{key}.{extra[0]}" if key else extra[0]
    return key or "<top level>"


def validate_config(config: dict, source: str = "config", registry: dict | None = None) -> dict:
    """Validate ``config`` in place (filling defaults) and return it; raise ConfigError."""
    cls = _with_defaults(jsonschema.validators.validator_for(_schema()))
    errors = sorted(cls(_schema()).iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        if e.validator == "additionalProperties":
            msg = "unknown key"
        else:
            msg = e.message
        raise ConfigError(f"{source}: invalid config key '{_key_path(e)}': {msg}")
    _check_references(config, source, registry)
    return config


def _check_references(config: dict, source: str, registry: dict | None) -> None:
    def unknown(key: str, value: str, known) -> None:
        raise ConfigError(
            f"{source}: invalid config key '{key}': unknown name '{value}' "
            f"(known: {', '.join(sorted(known)) or 'none'})"
        )

    for name, ds in config["datasets"].items():
        if ds["corpus"] not in config["corpora"]:
            unknown(f"datasets.{name}.corpus", ds["corpus"], config["corpora"])
    for name, c in config["corpora"].items():
        if c["kind"] == "hipporag":
            if "format" not in c:
                raise ConfigError(f"{source}: invalid config key 'corpora.{name}.format': required for kind hipporag")
            if ("source" in c) == ("local" in c):
                raise ConfigError(
                    f"{source}: invalid config key 'corpora.{name}': give exactly one of 'source' (download) or 'local'"
                )
    lic = config["lic_rag"]
    for i, d in enumerate(lic["datasets"]):
        if d not in config["datasets"]:
            unknown(f"lic_rag.datasets[{i}]", d, config["datasets"])
    for i, r in enumerate(lic["retrievers"]):
        if r not in config["retrievers"]:
            unknown(f"lic_rag.retrievers[{i}]", r, config["retrievers"])
    if registry is None:
        from convrag.llm.registry import load_registry

        path = Path(config["models_registry"])
        registry = load_registry(path if path.is_absolute() else REPO_ROOT / path)
    for i, m in enumerate(lic["models"]):
        if m not in registry:
            unknown(f"lic_rag.models[{i}]", m, registry)
    if lic["sharding"]["model"] not in registry:
        unknown("lic_rag.sharding.model", lic["sharding"]["model"], registry)
    for key in ("user_simulator", "classifier", "judge"):
        m = lic[key]["model"]
        if m is not None and m not in registry:
            unknown(f"lic_rag.{key}.model", m, registry)
    if config["knowledge_graph"]["model"] not in registry:
        unknown("knowledge_graph.model", config["knowledge_graph"]["model"], registry)
    for name, r in config["retrievers"].items():
        m = (r.get("params") or {}).get("llm")
        if m is not None and m not in registry:
            unknown(f"retrievers.{name}.params.llm", m, registry)
    if lic["recall_k"] < lic["top_k"]:
        raise ConfigError(f"{source}: invalid config key 'lic_rag.recall_k': {lic['recall_k']} is below top_k ({lic['top_k']})")
    for d in lic["sharding"]["reviews"]:
        if d not in lic["datasets"]:
            unknown(f"lic_rag.sharding.reviews.{d}", d, lic["datasets"])


def role_model(config: dict, role: str) -> str:
    """The registry model of a lic_rag role (user_simulator, classifier, judge): its own
    ``model`` or, when null, the sharding model."""
    lic = config["lic_rag"]
    return lic[role]["model"] or lic["sharding"]["model"]


def retriever_llm(config: dict, retriever: str) -> str | None:
    """The query/build-time LLM of an LLM-using retriever (params.llm or the KG model)."""
    from convrag.retrieval import uses_llm

    kind = retriever_kind(config, retriever)
    if not uses_llm(kind):
        return None
    return (config["retrievers"][retriever].get("params") or {}).get("llm") or config["knowledge_graph"]["model"]


def load_config(path: str | Path, registry: dict | None = None) -> dict:
    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {e}") from e
    return validate_config(config, source=str(path), registry=registry)


# ---- grid planning helpers used by the Snakefile ------------------------------------


def n_chunks(config: dict, dataset: str) -> int:
    return math.ceil(config["datasets"][dataset]["n_questions"] / config["lic_rag"]["chunk_size"])


def retriever_kind(config: dict, retriever: str) -> str:
    return config["retrievers"][retriever]["kind"]


MULTI_TURN = ("SHARDED", "RECAP", "SNOWBALL")


def cells(config: dict, closed: bool = False) -> list[tuple[str, str]]:
    """(condition, policy) pairs simulated for one retriever.

    FULL and CONCAT are single-turn, so HISTORY and CURRENT would send the same query: they
    run once with policy ``none``. The multi-turn conditions (SHARDED, RECAP, SNOWBALL) run
    once per policy. Closed-book retrieves nothing: every condition uses ``none``.
    """
    lic = config["lic_rag"]
    out = []
    for cond in lic["conditions"]:
        if cond in MULTI_TURN and not closed:
            out.extend((cond, p) for p in lic["policies"])
        else:
            out.append((cond, "none"))
    return list(dict.fromkeys(out))


def is_closed_book(config: dict, retriever: str) -> bool:
    return retriever_kind(config, retriever) == "closed_book"


def simulate_jobs(config: dict) -> list[dict]:
    """Every simulate job of the lic_rag grid: one per (dataset, model, retriever, chunk),
    running all of that retriever's cells in lockstep (one batch per turn for all cells)."""
    lic = config["lic_rag"]
    return [
        dict(dataset=ds, model=model, retriever=ret, chunk=chunk, cells=cells(config, is_closed_book(config, ret)))
        for ds in lic["datasets"] for model in lic["models"] for ret in lic["retrievers"]
        for chunk in range(n_chunks(config, ds))
    ]


def simulate_cells(config: dict) -> list[dict]:
    """Every (dataset, model, retriever, condition, policy, chunk) cell of the grid: one
    conversation file each."""
    return [
        dict(dataset=j["dataset"], model=j["model"], retriever=j["retriever"], condition=c, policy=p, chunk=j["chunk"])
        for j in simulate_jobs(config) for c, p in j["cells"]
    ]
