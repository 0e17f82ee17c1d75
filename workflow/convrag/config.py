"""Workflow configuration: schema validation with defaults, and cross-reference checks.

The Snakefile and every CLI stage go through ``validate_config`` so that a typo in a key, a
wrong type, an unknown model / retriever / dataset name or retriever param stops the run
*before* any job starts, with an error naming the key (``lic_rag.models[1]``) and the config
file and line it came from (``convrag.schema.ConfigOrigin``), not a KeyError deep in a job.

Shared keys (corpora, datasets, retrievers, knowledge graph, paths) are validated here
against ``workflow/schemas/config.schema.yaml`` (the machinery: ``convrag.schema``); each study's block against the study's own
schema fragment, and its cross-references by the study's ``check``. A study runs when it is
listed in ``studies:``, or, without that list, when its block is present.
"""

from __future__ import annotations

import os
from pathlib import Path

from convrag.errors import ConfigError
# what the rule files and the stages read from here; they live below (a study imports them there)
from convrag.resources import REPO_ROOT, read_prompt_file, read_yaml  # noqa: F401
from convrag.schema import (SCHEMA_DIR, SCHEMA_PATH, ConfigOrigin, _load_schema, _schema, _validate,  # noqa: F401
                            apply_overrides, check_names, config_registry, typed_overrides, unknown_name,
                            validate_fragment)


def validate_config(config: dict, source: "str | ConfigOrigin" = "config", registry: dict | None = None) -> dict:
    """Validate ``config`` in place (filling defaults, setting ``studies`` to the active
    studies) and return it; raise ConfigError naming the key. With a ``ConfigOrigin`` as
    ``source`` (the workflow's config files and --config values), the files are first read
    strictly (a duplicate key is an error) and an error about a key names the file and line
    that set it (``ConfigOrigin.locate``)."""
    if not isinstance(source, ConfigOrigin):
        return _validate_config(config, source, registry)
    source.check_files()
    try:
        return _validate_config(config, str(source), registry)
    except ConfigError as e:
        raise source.locate(e) from None


def _validate_config(config: dict, source: str, registry: dict | None) -> dict:
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


def _check_shared(config: dict, source: str, registry: dict) -> None:
    for name, ds in config["datasets"].items():
        if ds["corpus"] not in config["corpora"]:
            raise unknown_name(source, f"datasets.{name}.corpus", ds["corpus"], config["corpora"])
    for name, c in config["corpora"].items():
        if "empty_passages" in c and c["kind"] != "hipporag":
            raise ConfigError(f"{source}: invalid config key 'corpora.{name}.empty_passages': only for kind hipporag "
                              f"(a corpus read from files); kind {c['kind']} is generated and has no empty passages")
        if c["kind"] == "hipporag":
            if "format" not in c:
                raise ConfigError(f"{source}: invalid config key 'corpora.{name}.format': required for kind hipporag")
            if ("source" in c) == ("local" in c):
                raise ConfigError(
                    f"{source}: invalid config key 'corpora.{name}': give exactly one of 'source' (download) or 'local'"
                )
    from convrag.data.benchmarks import BENCHMARK_LOADERS, benchmark_corpora, benchmark_loader
    from convrag.registry import did_you_mean
    from convrag.retrieval import KINDS

    for key, kinds in (("benchmark_plugins", BENCHMARK_LOADERS), ("retriever_plugins", KINDS)):
        try:
            kinds.plug_in(config[key])
        except ConfigError as e:
            raise ConfigError(f"{source}: invalid config key '{key}': {e}") from None
    for name, b in config["benchmarks"].items():
        try:
            loader = benchmark_loader(b["kind"])
        except ConfigError as e:
            raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.kind': {e}") from None
        # every kind: a corpus that is a sample may miss gold ids (convrag.data.gold counts them)
        if not isinstance(b.get("allow_missing_gold", False), bool):
            raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.allow_missing_gold': true or false, "
                              f"got {b['allow_missing_gold']!r}")
        if "empty_passages" in b and not loader.EMPTY_PASSAGES:
            raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.empty_passages': not a key of kind "
                              f"{b['kind']} (it reads no passage file)")
        loader.check(name, {k: v for k, v in b.items() if k != "allow_missing_gold"}, source)
    for cid in benchmark_corpora(config):
        if cid in config["corpora"]:
            raise ConfigError(f"{source}: invalid config key 'corpora.{cid}': the name of a benchmark domain's corpus")
    if config["knowledge_graph"]["model"] not in registry:
        raise unknown_name(source, "knowledge_graph.model", config["knowledge_graph"]["model"], registry)
    for name, r in config["retrievers"].items():
        # the params each retriever kind takes are its module's DEFAULTS: an unknown one (a typo,
        # k3 for k1) fails here, before any job, instead of in the index build
        try:
            known = KINDS.get(r["kind"]).DEFAULTS
        except ConfigError as e:
            raise ConfigError(f"{source}: invalid config key 'retrievers.{name}.kind': {e}") from None
        unknown = sorted(set(r.get("params") or {}) - set(known))
        if unknown:
            raise ConfigError(f"{source}: invalid config key 'retrievers.{name}.params.{unknown[0]}': not a param of "
                              f"retriever kind '{r['kind']}' (known: {', '.join(sorted(known)) or 'none'})"
                              f"{did_you_mean(unknown[0], known)}")
        m = (r.get("params") or {}).get("llm")
        if m is not None and m not in registry:
            raise unknown_name(source, f"retrievers.{name}.params.llm", m, registry)


def plugin_environment(config: dict) -> dict[str, str]:
    """The variables by which every job's ``convrag`` call finds the run's plug-in studies,
    retriever kinds and benchmark kinds (the config's ``*_plugins`` folders)."""
    from convrag.data.benchmarks import BENCHMARK_PATH_ENV
    from convrag.registry import plugin_folders
    from convrag.retrieval import RETRIEVER_PATH_ENV
    from convrag.studies import STUDY_PATH_ENV

    return {env: os.pathsep.join(plugin_folders(env, config[key])) for key, env in (
        ("study_plugins", STUDY_PATH_ENV), ("retriever_plugins", RETRIEVER_PATH_ENV),
        ("benchmark_plugins", BENCHMARK_PATH_ENV))}


def load_config(path: str | Path, registry: dict | None = None) -> dict:
    """Read one config file, validate it (schema defaults fill what it leaves out) and return it:
    the workflow reads a ``--configfile`` the same way, without the embedded default."""
    path = Path(path)
    config = read_yaml(path)
    return validate_config(config, source=ConfigOrigin([path]), registry=registry)


def load_configs(paths: "list[str | Path]", registry: dict | None = None) -> dict:
    """Several config files laid over each other as Snakemake merges ``--configfile a b``
    (mappings merged key by key, a later file's lists and scalars replacing), then validated
    once: a miniature overlay (config/miniatures/) is only a config over its paper config."""
    from convrag.schema import merge_into

    paths = [Path(p) for p in paths]
    config: dict = {}
    for p in paths:
        merge_into(config, read_yaml(p) or {})
    return validate_config(config, source=ConfigOrigin(paths), registry=registry)


# ---- shared helpers of the rule files (the configured retriever's kind and LLM: convrag.retrieval)
from convrag.retrieval import is_closed_book, retriever_kind, retriever_llm  # noqa: E402,F401
