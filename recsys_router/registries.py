"""The one registration mechanism of the package: routers, datasets and encoders by name.

Reference: the plug-in registry pattern (a name -> factory table filled by the code that
defines each entry), as in scikit-learn's ``all_estimators`` or Hugging Face's ``AutoModel``
mappings.

A :class:`Registry` maps case-insensitive names (and aliases) to entries. An entry may be a
``"package.module:attribute"`` string, imported on first use so that registering costs no
import; only strings written by code are ever imported - a name given by a user (a
command-line argument, a config, a request) only selects among registered entries. A
registry may ``discover`` a package: on first lookup it imports every public module of it,
so adding an entry is adding one file that registers itself.

Example
-------
>>> colours = Registry("colour")
>>> colours.register("red", 1, aliases=("rouge",))
>>> colours.get("ROUGE"), colours.names()
(1, ['red'])
>>> colours.get("blue")
Traceback (most recent call last):
...
KeyError: "unknown colour 'blue'; available: red"
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable, Iterable

__all__ = ["Registry", "MAX_NAME_LENGTH"]

#: the longest name a registry accepts (a name from outside is refused beyond that)
MAX_NAME_LENGTH = 200


class Registry:
    """Named entries of one kind.

    Parameters
    ----------
    kind : str
        What the entries are (``"router"``...), used in error messages.
    entries : dict, optional
        Initial ``name -> entry`` pairs.
    discover : str, optional
        A package whose public modules (names not starting with ``_``) are imported on the
        first lookup; they register their entries on import.
    """

    def __init__(self, kind: str, entries: dict | None = None, *, discover: str | None = None):
        self.kind = kind
        self._entries: dict[str, Any] = {}
        self._aliases: dict[str, str] = {}
        self._discover = discover
        self._discovered = discover is None
        for name, entry in (entries or {}).items():
            self.register(name, entry)

    # ------------------------------------------------------------------ names
    def key(self, name) -> str:
        """The normalised (stripped, lower-case) form of ``name``; ValueError if it is not a
        non-empty string of at most :data:`MAX_NAME_LENGTH` characters."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{self.kind} name must be a non-empty string, got {name!r}")
        if len(name) > MAX_NAME_LENGTH:
            raise ValueError(f"{self.kind} name is {len(name)} characters long; the limit is "
                             f"{MAX_NAME_LENGTH}")
        return name.strip().lower()

    def _load(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        package = importlib.import_module(self._discover)
        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.startswith("_"):
                importlib.import_module(f"{self._discover}.{info.name}")

    def canonical(self, name) -> str | None:
        """The registered name ``name`` stands for (itself or an alias), or None."""
        self._load()
        key = self.key(name)
        key = self._aliases.get(key, key)
        return key if key in self._entries else None

    def __contains__(self, name) -> bool:
        try:
            return self.canonical(name) is not None
        except ValueError:
            return False

    def names(self) -> list[str]:
        """Registered names (aliases left out), sorted."""
        self._load()
        return sorted(self._entries)

    def items(self) -> list[tuple[str, Any]]:
        """``(name, entry)`` pairs, sorted by name (string entries not imported)."""
        self._load()
        return sorted(self._entries.items())

    # ------------------------------------------------------------------ changes
    def register(self, name: str, entry: Any = None, *, aliases: Iterable[str] = (),
                 overwrite: bool = False):
        """Add ``entry`` under ``name`` and ``aliases``; without ``entry``, a decorator.

        Parameters
        ----------
        name : str
        entry : object or str, optional
            The entry, or ``"package.module:attribute"`` imported on first use.
        aliases : iterable of str
        overwrite : bool
            Replace an existing different entry instead of raising ValueError.
        """
        if entry is None:
            def decorate(obj):
                self.register(name, obj, aliases=aliases, overwrite=overwrite)
                return obj
            return decorate
        if isinstance(entry, str) and (entry.count(":") != 1 or not all(entry.split(":"))):
            raise ValueError(f"a {self.kind} given as a string must look like "
                             f"'package.module:attribute', got {entry!r}")
        key = self.key(name)
        keys = [key, *(self.key(a) for a in aliases)]
        for k in keys:
            owner = self._aliases.get(k, k)
            old = self._entries.get(owner)
            if old is not None and not overwrite and old != entry:
                raise ValueError(f"{self.kind} {k!r} is already registered ({old!r}); pass "
                                 "overwrite=True to replace it")
        for k in keys:            # a name or alias now means this entry, and only it
            self._aliases.pop(k, None)
        self._entries[key] = entry
        for a in keys[1:]:
            self._entries.pop(a, None)
            self._aliases[a] = key
        return None

    def unregister(self, name: str) -> None:
        """Remove an entry and its aliases (KeyError naming the available ones if unknown)."""
        key = self._require(name)
        del self._entries[key]
        self._aliases = {a: k for a, k in self._aliases.items() if k != key}

    # ------------------------------------------------------------------ lookup
    def _require(self, name) -> str:
        key = self.canonical(name)
        if key is None:
            raise KeyError(f"unknown {self.kind} {name!r}; available: {', '.join(self.names())}")
        return key

    def raw(self, name) -> Any:
        """The entry as registered (a string entry is not imported)."""
        return self._entries[self._require(name)]

    def get(self, name) -> Any:
        """The entry of ``name``, a string entry imported (ImportError naming it if it cannot be)."""
        key = self._require(name)
        entry = self._entries[key]
        if isinstance(entry, str):
            module, attr = entry.split(":")
            try:
                return getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as err:
                raise ImportError(f"{self.kind} {key!r} is registered as {entry!r}, which cannot "
                                  f"be imported: {err}") from err
        return entry

    def find(self, predicate: Callable[[Any], bool]) -> list[str]:
        """Names whose (imported) entry satisfies ``predicate``."""
        return [n for n in self.names() if predicate(self.get(n))]
