"""Workflow configuration: schema validation with defaults, and cross-reference checks.

The Snakefile and every CLI stage go through ``validate_config`` so that a typo in a key, a
wrong type, or an unknown model / retriever / dataset name stops the run *before* any job
starts, with an error naming the key (``lic_rag.models[1]``), not a KeyError deep in a job.

Shared keys (corpora, datasets, retrievers, knowledge graph, paths) are validated here
against ``workflow/schemas/config.schema.yaml``; each study's block against the study's own
schema fragment, and its cross-references by the study's ``check``. A study runs when it is
listed in ``studies:``, or, without that list, when its block is present.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path

import jsonschema
import yaml
from referencing import Registry, Resource

from convrag.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO_ROOT / "workflow" / "schemas"
SCHEMA_PATH = SCHEMA_DIR / "config.schema.yaml"


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


@functools.lru_cache(maxsize=None)
def _load_schema(path: str) -> dict:
    return yaml.safe_load(Path(path).read_text())


def _schema() -> dict:
    return _load_schema(str(SCHEMA_PATH))


def _validate(instance, schema: dict, source: str, prefix: str = "") -> None:
    registry = Registry().with_resource("config.schema.yaml", Resource.from_contents(_schema()))
    cls = _with_defaults(jsonschema.validators.validator_for(schema))
    errors = sorted(cls(schema, registry=registry).iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        msg = "unknown key" if e.validator == "additionalProperties" else e.message
        raise ConfigError(f"{source}: invalid config key '{_key_path(e, prefix)}': {msg}")


def _key_path(err: jsonschema.ValidationError, prefix: str = "") -> str:
    key = prefix
    for p in err.absolute_path:
        key += f"[{p}]" if isinstance(p, int) else (f".{p}" if key else str(p))
    if err.validator == "additionalProperties":
        extra = re.findall(r"'([^']+)' (?:was|were) unexpected", err.message)
        if extra:
            key = f"{key}.{extra[0]}" if key else extra[0]
    return key or "<top level>"


def unknown_name(source: str, key: str, value, known) -> ConfigError:
    return ConfigError(f"{source}: invalid config key '{key}': unknown name '{value}' "
                       f"(known: {', '.join(sorted(known)) or 'none'})")


def validate_config(config: dict, source: str = "config", registry: dict | None = None) -> dict:
    """Validate ``config`` in place (filling defaults, setting ``studies`` to the active
    studies) and return it; raise ConfigError naming the key."""
    from convrag.studies import all_studies

    shared = set(_schema()["properties"])
    studies = all_studies(config.get("study_plugins") or ())
    for key in config:
        if key not in shared and key not in studies:
            raise ConfigError(f"{source}: invalid config key '{key}': unknown key (neither a shared key nor a "
                              f"study; studies: {', '.join(sorted(studies))})")
    base = {k: v for k, v in config.items() if k in shared}
    _validate(base, _schema(), source)
    config.update(base)
    listed = config.get("studies")
    if listed is None:
        listed = [k for k in studies if k in config]
    for i, key in enumerate(listed):
        if key not in studies:
            raise unknown_name(source, f"studies[{i}]", key, studies)
    config["studies"] = list(listed)
    if not listed:
        raise ConfigError(f"{source}: no study to run: add a study block (known: {', '.join(sorted(studies))}) "
                          "or list one under 'studies'")
    for key in listed:
        config.setdefault(key, {})
        _validate(config[key], _load_schema(str(studies[key].schema_path)), source, prefix=key)
    if registry is None:
        registry = config_registry(config)
    _check_shared(config, source, registry)
    for key in listed:
        studies[key].check(config, registry, source)
    return config


def validate_fragment(block: dict, schema_path, keys, source: str, prefix: str = "") -> dict:
    """Validate (filling defaults) the ``keys`` of a study block against the study's schema
    fragment: how a stage run by hand gets the same defaults as the config."""
    frag = _load_schema(str(schema_path))
    sub = {**{k: v for k, v in frag.items() if k not in ("properties", "required")},
           "properties": {k: frag["properties"][k] for k in keys}}
    _validate(block, sub, source, prefix)
    return block


def config_registry(config: dict) -> dict:
    """The model registry a config names (``models_registry``, relative to the repository)."""
    from convrag.llm.registry import load_registry

    path = Path(config["models_registry"])
    return load_registry(path if path.is_absolute() else REPO_ROOT / path)


def _check_shared(config: dict, source: str, registry: dict) -> None:
    for name, ds in config["datasets"].items():
        if ds["corpus"] not in config["corpora"]:
            raise unknown_name(source, f"datasets.{name}.corpus", ds["corpus"], config["corpora"])
    for name, c in config["corpora"].items():
        if c["kind"] == "hipporag":
            if "format" not in c:
                raise ConfigError(f"{source}: invalid config key 'corpora.{name}.format': required for kind hipporag")
            if ("source" in c) == ("local" in c):
                raise ConfigError(
                    f"{source}: invalid config key 'corpora.{name}': give exactly one of 'source' (download) or 'local'"
                )
    from convrag.data.benchmarks import benchmark_corpora, benchmark_loader

    for name, b in config["benchmarks"].items():
        try:
            loader = benchmark_loader(b["kind"])
        except ConfigError as e:
            raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.kind': {e}") from None
        # every kind: a corpus that is a sample may miss gold ids (convrag.data.gold counts them)
        if not isinstance(b.get("allow_missing_gold", False), bool):
            raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.allow_missing_gold': true or false, "
                              f"got {b['allow_missing_gold']!r}")
        loader.check(name, {k: v for k, v in b.items() if k != "allow_missing_gold"}, source)
    for cid in benchmark_corpora(config):
        if cid in config["corpora"]:
            raise ConfigError(f"{source}: invalid config key 'corpora.{cid}': the name of a benchmark domain's corpus")
    if config["knowledge_graph"]["model"] not in registry:
        raise unknown_name(source, "knowledge_graph.model", config["knowledge_graph"]["model"], registry)
    for name, r in config["retrievers"].items():
        m = (r.get("params") or {}).get("llm")
        if m is not None and m not in registry:
            raise unknown_name(source, f"retrievers.{name}.params.llm", m, registry)


def check_names(source: str, key: str, names, known) -> None:
    """Every entry of the list ``names`` (config key ``key``) must be in ``known``."""
    for i, n in enumerate(names):
        if n not in known:
            raise unknown_name(source, f"{key}[{i}]", n, known)


def _typed(value):
    """A ``--config`` value with its string leaves read as YAML scalars: Snakemake parses a nested
    value (``lic_rag={runs: 1}``) with YAML's base loader, which keeps every leaf a string."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, str):
        try:
            v = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        if v is None or isinstance(v, (int, float)) and not isinstance(v, bool):
            return v
        if isinstance(v, bool) and value.strip().lower() in ("true", "false"):
            return v  # not YAML 1.1's yes/no/on/off: those stay strings
    return value


def typed_overrides(cli_config) -> dict:
    """The ``--config`` values typed (``_typed``): numbers, booleans and null as YAML reads them."""
    return _typed({k: v for k, v in dict(cli_config or {}).items()})


def apply_overrides(config: dict, cli_config) -> dict:
    """Set the typed ``--config`` values in ``config`` (nested mappings merged key by key, as
    Snakemake merges them), so that ``--config "lic_rag={runs: 1}"`` gives ``runs: 1``."""

    def merge(dst: dict, src: dict) -> None:
        for k, v in src.items():
            if isinstance(v, dict) and isinstance(dst.get(k), dict):
                merge(dst[k], v)
            else:
                dst[k] = v

    merge(config, typed_overrides(cli_config))
    return config


def load_config(path: str | Path, registry: dict | None = None) -> dict:
    """Read one config file, validate it (schema defaults fill what it leaves out) and return it:
    the workflow reads a ``--configfile`` the same way, without the embedded default."""
    path = Path(path)
    config = read_yaml(path)
    return validate_config(config, source=str(path), registry=registry)


def read_prompt_file(path: str | Path, check=None, what: str = "prompts") -> dict:
    """A prompt YAML file, checked by ``check(prompts, where)`` so that a missing key fails
    before any model call."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: {what} not found")
    prompts = read_yaml(p)
    if not isinstance(prompts, dict):
        raise ConfigError(f"{p}: expected a mapping of prompts")
    if check is not None:
        check(prompts, str(p))
    return prompts


def read_yaml(path: Path) -> dict:
    try:
        return yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {e}") from e


# ---- shared helpers of the rule files ------------------------------------------------------


def retriever_kind(config: dict, retriever: str) -> str:
    return config["retrievers"][retriever]["kind"]


def retriever_llm(config: dict, retriever: str) -> str | None:
    """The query/build-time LLM of an LLM-using retriever (params.llm or the KG model)."""
    from convrag.retrieval import capabilities

    if not capabilities(retriever_kind(config, retriever)).uses_llm:
        return None
    return (config["retrievers"][retriever].get("params") or {}).get("llm") or config["knowledge_graph"]["model"]


def is_closed_book(config: dict, retriever: str) -> bool:
    from convrag.retrieval import capabilities

    return capabilities(retriever_kind(config, retriever)).closed_book
