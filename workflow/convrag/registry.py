"""One registry class for every kind of named entry a config can name: retriever kinds, benchmark
kinds, corpus loaders, query policies, answer metrics, judges and studies.

An entry is registered where it is defined (``REG.register(name)`` as a decorator, or
``REG.add(name, entry)``), or listed by module name and imported on its first lookup
(``lazy={name: "package.module"}`` or ``"package.module:attribute"``), so a registry never
imports what it lists and the import floors hold. A module listed without an attribute is the
entry itself unless importing it registered the name. A lazy list can be read from a folder
(``listed_modules``: the modules with a marker line), and a registry with ``plugins`` also reads
the plug-in folders a config or an environment variable names, so adding a kind is adding one
module. An unknown name is a ConfigError that lists the known names and suggests the nearest one.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Generic, Iterator, TypeVar

from convrag.errors import ConfigError

T = TypeVar("T")


def did_you_mean(name, known) -> str:
    """``; did you mean '<nearest>'?`` when a known name is close to ``name``, else ``""``."""
    near = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    return f"; did you mean '{near[0]}'?" if near else ""


def unknown_name(kind: str, name, known, where: str | None = None) -> str:
    """``unknown <kind> '<name>' (known: ...); did you mean '<nearest>'?``, prefixed by ``where``."""
    known = list(known)
    return (f"{where + ': ' if where else ''}unknown {kind} '{name}' (known: {', '.join(map(str, known)) or 'none'})"
            + did_you_mean(name, known))


def listed_modules(folder, pattern: str, package: str | None = None) -> dict[str, str]:
    """name -> module of each module in ``folder`` with a line matching ``pattern`` (the name is
    its group, else the file's stem): a registry's lazy list read from the folder, not imported.
    Modules are ``<package>.<stem>``, or without a package the file's path (a plug-in). With
    ``folder`` None the package's own folder is read (found by import, not from a module's
    ``__file__``: only convrag.resources knows where files sit)."""
    if folder is None:
        import importlib

        folder = importlib.import_module(package).__path__[0]
    out = {}
    for f in sorted(Path(folder).glob("*.py")):
        for m in re.finditer(pattern, f.read_text(encoding="utf-8"), re.M):
            out[m.group(1) if m.re.groups else f.stem] = f"{package}.{f.stem}" if package else str(f)
    return out


def plugin_folders(env: str, extra=()) -> list[str]:
    """The folders in ``extra`` (a config's list, relative to the working directory) and in
    ``$env`` (how each job's ``convrag`` call finds a run's plug-ins), absolute, each once."""
    paths = [*extra, *(p for p in os.environ.get(env, "").split(os.pathsep) if p)]
    return list(dict.fromkeys(str(Path(p).resolve()) for p in paths))


def import_file(path, name: str):
    """A plug-in's module (a package when ``path`` is an ``__init__.py``), imported once as ``name``."""
    if name not in sys.modules:
        folder = [str(Path(path).parent)] if Path(path).name == "__init__.py" else None
        spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=folder)
        sys.modules[name] = mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


class Registry(Generic[T]):
    def __init__(self, kind: str, lazy: dict[str, str] | None = None, check=None, plugins=None):
        self.kind = kind  # what an entry is, for messages ("retriever kind", "query policy")
        self._entries: dict[str, T] = {}
        self._lazy: dict[str, str] = dict(lazy or {})
        self._check = check  # check(name, entry): raise ConfigError when an entry is not one
        self._plugins = plugins  # (env variable, pattern): plug-in folders add their modules (plug_in)
        self._folders: set[str] = set()

    def plug_in(self, folders=()) -> "Registry[T]":
        """List the modules of the plug-in folders ``folders`` and ``$<env variable>``."""
        env, pattern = self._plugins or ("", "")
        for folder in plugin_folders(env, folders) if self._plugins else ():
            if folder in self._folders:
                continue
            if not Path(folder).is_dir():
                raise ConfigError(f"{self.kind} plug-in folder {folder}: not a folder")
            for name, module in listed_modules(folder, pattern).items():
                if self._lazy.get(name, module) != module or name in self._entries:
                    raise ConfigError(f"{module}: {self.kind} '{name}' is already taken")
                self._lazy[name] = module
            self._folders.add(folder)
        return self

    def add(self, name: str, entry: T) -> T:
        if name in self._entries and self._entries[name] is not entry:
            raise ConfigError(f"{self.kind} '{name}' is registered twice")
        if self._check is not None:
            self._check(name, entry)
        self._entries[name] = entry
        return entry

    def remove(self, name: str) -> None:
        """Forget an entry (a test's own registration)."""
        self._entries.pop(name, None)
        self._lazy.pop(name, None)

    def register(self, name: str):
        """Decorator: ``@REG.register("name")`` adds the decorated object under ``name``."""
        def deco(entry: T) -> T:
            return self.add(name, entry)
        return deco

    def get(self, name: str, where: str | None = None) -> T:
        self.plug_in()
        if name not in self._entries and name in self._lazy:
            self._load(name)
        if name not in self._entries:
            raise ConfigError(unknown_name(self.kind, name, self.names(), where))
        return self._entries[name]

    def _load(self, name: str) -> None:
        module, _, attr = self._lazy[name].partition(":")
        mod = (import_file(module, "convrag_plugin_" + re.sub(r"\W", "_", module)) if module.endswith(".py")
               else importlib.import_module(module))
        if name not in self._entries:
            self.add(name, getattr(mod, attr, None) if attr else mod)

    def load_all(self) -> "Registry[T]":
        for name in self._lazy:
            if name not in self._entries:
                self._load(name)
        return self

    def names(self) -> list[str]:
        """Every name, registered or listed, in the order they were listed or registered."""
        self.plug_in()
        return list(dict.fromkeys([*self._lazy, *self._entries]))

    def items(self) -> list[tuple[str, T]]:
        self.load_all()
        return [(n, self._entries[n]) for n in self.names()]

    def __contains__(self, name) -> bool:
        self.plug_in()
        return name in self._entries or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __getitem__(self, name: str) -> T:
        return self.get(name)
