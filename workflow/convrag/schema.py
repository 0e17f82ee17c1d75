"""Config validation machinery, below every study: the JSON schema with defaults filled in,
errors that name the key, study-fragment validation, name checks, the model registry a config
names, and typed ``--config`` values. The top-level ``validate_config`` / ``load_config``
(``convrag.config``) use it with the registries of studies and benchmarks; a study's ``check``
uses it without importing them."""

from __future__ import annotations

import copy
import functools
import os
import re
from pathlib import Path

import jsonschema
import yaml
from referencing import Registry, Resource

from convrag.errors import ConfigError
from convrag.io import StrictLoader, read_text, read_yaml
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


_UNKNOWN = ("additionalProperties", "unevaluatedProperties")


def _masking(err: jsonschema.ValidationError, others: list) -> bool:
    """An ``unevaluatedProperties`` error is only true when nothing below it failed: a subschema
    that fails (``allOf: [..., {$ref: sampling}]`` with a temperature of -0.5) drops the
    annotations of the properties it did evaluate, so every valid key of that block is then
    reported as unexpected (``'stop' was unexpected``) and hides the real error."""
    path = list(err.absolute_path)
    return err.validator == "unevaluatedProperties" and any(
        o is not err and o.validator != "unevaluatedProperties" and list(o.absolute_path)[:len(path)] == path
        for o in others)


def _allowed(schema: dict) -> str:
    """The allowed values of a number key, as its schema says (``a number > 0 and <= 1``)."""
    kind = "an integer" if schema.get("type") == "integer" else "a number"
    bounds = [f"{op} {schema[k]}" for k, op in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                                 ("maximum", "<="), ("exclusiveMaximum", "<")) if k in schema]
    return f"{kind} {' and '.join(bounds)}" if bounds else kind


def _message(err: jsonschema.ValidationError) -> str:
    if err.validator in _UNKNOWN:
        return "unknown key"
    if err.validator == "required":
        return "required, not set"
    bounded = isinstance(err.schema, dict) and {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} & set(
        err.schema)
    if bounded and err.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "type"):
        return f"{err.message} (allowed: {_allowed(err.schema)})"
    return err.message


def _validate(instance, schema: dict, source: str, prefix: str = "") -> None:
    registry = Registry().with_resource("config.schema.yaml", Resource.from_contents(_schema()))
    cls = _with_defaults(jsonschema.validators.validator_for(schema))
    errors = list(cls(schema, registry=registry).iter_errors(instance))
    errors = sorted((e for e in errors if not _masking(e, errors)), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        raise ConfigError(f"{source}: invalid config key '{_key_path(e, prefix)}': {_message(e)}")


def _key_path(err: jsonschema.ValidationError, prefix: str = "") -> str:
    key = prefix
    for p in err.absolute_path:
        key += f"[{p}]" if isinstance(p, int) else (f".{p}" if key else str(p))
    extra = []
    if err.validator in _UNKNOWN:
        extra = re.findall(r"'([^']+)' (?:was|were) unexpected", err.message)
    elif err.validator == "required":  # the missing key is the one to name
        extra = re.findall(r"^'([^']+)' is a required property", err.message)
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


def merge_into(dst: dict, src: dict) -> dict:
    """``src`` laid over ``dst`` in place as Snakemake merges configs: mappings key by key, a
    later list or scalar replacing; returns ``dst``."""
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            merge_into(dst[k], v)
        else:
            dst[k] = v
    return dst


def apply_overrides(config: dict, cli_config) -> dict:
    """Set the typed ``--config`` values in ``config`` (nested mappings merged key by key, as
    Snakemake merges them), so that ``--config "lic_rag={runs: 1}"`` gives ``runs: 1``."""
    return merge_into(config, typed_overrides(cli_config))


# ---- where a config key came from ---------------------------------------------------------------

_KEY_ERROR = re.compile(r"invalid config key '([^']+)'")


def _shown(path) -> str:
    """A config file as a user names it: relative to the working directory when inside it."""
    p = os.path.abspath(path)
    rel = os.path.relpath(p)
    return p if rel.startswith("..") else rel


def _walk(node, key: str) -> tuple[bool, int | None, str]:
    """Follow the dotted key path ``key`` (``a.b[2].c``; a name may itself hold dots) down a composed
    YAML node (or a plain dict of --config values: line None). Returns (found whole, line of the
    deepest key found, that key's path)."""
    rest, line, done = key, None, ""
    while rest:
        m = re.match(r"\[(\d+)\]\.?", rest)
        if m:
            i = int(m.group(1))
            items = node.value if isinstance(node, yaml.SequenceNode) else node if isinstance(node, list) else None
            if items is None or i >= len(items):
                break
            node = items[i]
            line = node.start_mark.line + 1 if isinstance(node, yaml.Node) else line
            done, rest = done + f"[{i}]", rest[m.end():]
            continue
        if isinstance(node, yaml.MappingNode):
            pairs = [(k.value, k.start_mark.line + 1, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]
        elif isinstance(node, dict):
            pairs = [(str(k), None, v) for k, v in node.items()]
        else:
            break
        hits = [p for p in pairs if rest == p[0] or rest.startswith(p[0] + ".") or rest.startswith(p[0] + "[")]
        if not hits:
            break
        name, at, node = max(hits, key=lambda p: len(p[0]))  # the last of a repeated key, as YAML keeps it
        line = at if at is not None else line
        done = f"{done}.{name}" if done else name
        rest = rest[len(name):].removeprefix(".")
    return not rest, line, done


class ConfigOrigin:
    """Where a workflow's config came from, so that an error names the user's file and line rather
    than ``config`` in general: the YAML (or JSON) files in the order Snakemake merged them (a later
    file wins, key by key) and the ``--config`` values set on top.

    ``str()`` is the short label (``config/studies/x.yaml + --config``) the checks put first in
    each message; ``locate`` turns a message about ``invalid config key 'a.b.c'`` into one that
    starts ``x.yaml:12:``, the line of that key in the last file that sets it (or of its nearest
    parent there, when the key is not written out: a required key, a default)."""

    def __init__(self, files=(), overrides: dict | None = None):
        self.files = [Path(f) for f in files]
        self.overrides = dict(overrides or {})
        self._nodes: dict[Path, object] = {}

    def __str__(self) -> str:
        parts = [_shown(f) for f in self.files] + (["--config"] if self.overrides else [])
        return " + ".join(parts) or "config"

    def check_files(self) -> None:
        """Read every file strictly (``convrag.io.read_yaml``): Snakemake reads a --configfile with
        PyYAML's plain loader, which keeps the last of two equal keys silently."""
        for f in self.files:
            read_yaml(f, error=ConfigError)

    def _node(self, path: Path):
        if path not in self._nodes:
            try:
                self._nodes[path] = yaml.compose(read_text(path, error=ConfigError), Loader=StrictLoader)
            except (ConfigError, yaml.YAMLError):
                self._nodes[path] = None
        return self._nodes[path]

    def where(self, key: str) -> str:
        """``file:line`` of ``key`` (module docstring of the class), ``--config`` when set there."""
        if _walk(self.overrides, key)[0]:
            return f"--config {key.split('.')[0]}=..."
        best = None  # (depth, file, line, path found)
        for f in self.files:
            whole, line, done = _walk(self._node(f), key)
            if whole:
                return f"{_shown(f)}:{line}"
            if line is not None and (best is None or len(done) >= best[0]):
                best = (len(done), f, line, done)
        if best is None:
            return str(self)
        return f"{_shown(best[1])}:{best[2]} (under '{best[3]}')"

    def locate(self, err: ConfigError) -> ConfigError:
        """``err`` (a message starting with this origin's label) restarted at the key's place."""
        msg, label = str(err), str(self)
        if not msg.startswith(label + ": "):
            return err
        rest = msg[len(label) + 2:]
        m = _KEY_ERROR.match(rest)
        return ConfigError(f"{self.where(m.group(1)) if m else label}: {rest}")
