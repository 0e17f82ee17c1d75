"""The study registry.

Built-in studies are the sub-packages of this package (each defines ``STUDY``), found by
listing the package (a lazy ``convrag.registry.Registry``: a study's package is imported when
it is first asked for), so a new study needs no registry edit. Plug-in studies live in any
folder named in the config's ``study_plugins`` (or in ``$CONVRAG_STUDY_PATH``, which the
Snakefile sets from the config so that every job's ``convrag`` call finds them too).
"""

from __future__ import annotations

import functools
import pkgutil
from pathlib import Path

from convrag.errors import ConfigError
from convrag.registry import Registry, import_file, plugin_folders, unknown_name
from convrag.studies.base import Study, Target

__all__ = ["Study", "Target", "all_studies", "get_study", "active_studies", "plugin_paths", "STUDY_PATH_ENV"]

STUDY_PATH_ENV = "CONVRAG_STUDY_PATH"


def _is_study(key: str, study) -> None:
    if not isinstance(study, Study) or study.key != key:
        raise ConfigError(f"{__name__}.{key}: a study package must define STUDY (a convrag Study with key '{key}')")


@functools.lru_cache(maxsize=1)
def _builtin() -> "Registry[Study]":
    return Registry("study", check=_is_study, lazy={
        info.name: f"{__name__}.{info.name}:STUDY" for info in pkgutil.iter_modules(__path__) if info.ispkg})


@functools.lru_cache(maxsize=None)
def _plugin(path: str) -> Study:
    folder = Path(path).resolve()
    init = folder / "__init__.py"
    if not init.exists():
        raise ConfigError(f"study_plugins: {path}: no __init__.py (a plug-in study is a package folder)")
    study = getattr(import_file(init, f"convrag_study_plugin_{folder.name}"), "STUDY", None)
    if not isinstance(study, Study):
        raise ConfigError(f"study_plugins: {init}: must define STUDY (a convrag Study)")
    study.home = folder
    return study


def plugin_paths(extra=()) -> list[str]:
    return plugin_folders(STUDY_PATH_ENV, extra)


def all_studies(plugins=()) -> dict[str, Study]:
    """Built-in studies plus the plug-ins in ``plugins`` and ``$CONVRAG_STUDY_PATH``."""
    out = dict(_builtin().items())
    for path in plugin_paths(plugins):
        study = _plugin(path)
        if study.key in out and out[study.key] is not study:
            raise ConfigError(f"study_plugins: {path}: study key '{study.key}' is already taken")
        out[study.key] = study
    return out


def get_study(key: str, plugins=()) -> Study:
    if not plugin_paths(plugins):
        return _builtin().get(key)  # only that study's package is imported
    studies = all_studies(plugins)
    if key not in studies:
        raise ConfigError(unknown_name("study", key, sorted(studies)))
    return studies[key]


def active_studies(config: dict) -> list[Study]:
    """The studies a validated config runs (``config['studies']``, filled by validation)."""
    studies = all_studies(config.get("study_plugins", ()))
    return [studies[k] for k in config["studies"]]
