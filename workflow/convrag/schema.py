"""Config validation machinery, below every study: the JSON schema with defaults filled in,
errors that name the key, study-fragment validation, name checks, the model registry a config
names, and typed ``--config`` values. The top-level ``validate_config`` / ``load_config``
(``convrag.config``) use it with the registries of studies and benchmarks; a study's ``check``
uses it without importing them."""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path

import jsonschema
import yaml
from referencing import Registry, Resource

from convrag.errors import ConfigError
from convrag.resources import REPO_ROOT

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
    from convrag.registry import did_you_mean

    return ConfigError(f"{source}: invalid config key '{key}': unknown name '{value}' "
                       f"(known: {', '.join(sorted(known)) or 'none'}){did_you_mean(value, known)}")


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
