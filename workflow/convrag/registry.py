"""One registry class for every kind of named entry a config can name: retriever kinds, benchmark
kinds, corpus loaders, query policies, answer metrics, judges and studies.

An entry is registered where it is defined (``REG.register(name)`` as a decorator, or
``REG.add(name, entry)``), or listed by module name and imported on its first lookup
(``lazy={name: "package.module"}`` or ``"package.module:attribute"``), so a registry never
imports what it lists and the import floors hold. A module listed without an attribute is the
entry itself unless importing it registered the name. An unknown name is a ConfigError that
lists the known names and suggests the nearest one.
"""

from __future__ import annotations

import difflib
import importlib
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


class Registry(Generic[T]):
    def __init__(self, kind: str, lazy: dict[str, str] | None = None, check=None):
        self.kind = kind  # what an entry is, for messages ("retriever kind", "query policy")
        self._entries: dict[str, T] = {}
        self._lazy: dict[str, str] = dict(lazy or {})
        self._check = check  # check(name, entry): raise ConfigError when an entry is not one

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
        if name not in self._entries and name in self._lazy:
            self._load(name)
        if name not in self._entries:
            raise ConfigError(unknown_name(self.kind, name, self.names(), where))
        return self._entries[name]

    def _load(self, name: str) -> None:
        module, _, attr = self._lazy[name].partition(":")
        mod = importlib.import_module(module)
        if name not in self._entries:
            self.add(name, getattr(mod, attr, None) if attr else mod)

    def load_all(self) -> "Registry[T]":
        for name in self._lazy:
            if name not in self._entries:
                self._load(name)
        return self

    def names(self) -> list[str]:
        """Every name, registered or listed, in the order they were listed or registered."""
        return list(dict.fromkeys([*self._lazy, *self._entries]))

    def items(self) -> list[tuple[str, T]]:
        self.load_all()
        return [(n, self._entries[n]) for n in self.names()]

    def __contains__(self, name) -> bool:
        return name in self._entries or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __getitem__(self, name: str) -> T:
        return self.get(name)
