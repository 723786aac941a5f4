"""One registry mechanism for every kind of thing registered by name.

A :class:`Registry` holds the entries of one kind (search spaces, primitives, aggregations,
zoo proxies, objectives, ...) by name, in registration order, and is read live: an entry
registered after import is listed and found like a built-in one. It is a read-only
:class:`~collections.abc.Mapping` (``name in registry``, ``registry[name]``, iteration in
registration order), and adds:

* :meth:`Registry.add`, the one duplicate-name rule: the same entry again is a no-op;
  another entry under a taken name is refused with :class:`~autoprox.core.errors.RegistryError`
  (a :class:`~autoprox.core.errors.ConfigError`), in one message form for every kind;
* :meth:`Registry.lookup`, the entry or one error naming the known ones;
* :meth:`Registry.names` and :meth:`Registry.describe` (rows of name and description);
* a name space shared by several registries (``shares_names_with``): the built-in proxies
  of three kinds, say, where registering a name any of them holds is refused from every side;
* :meth:`Registry.unregister` and the context manager :meth:`Registry.registered`, which
  removes the entry again on leaving (for tests and short-lived plug-ins).

Modules keep their public decorators (``register_zoo``, ``register_space``,
``register_primitive``, ...) as thin layers over their registry.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Callable, Generic, Hashable, TypeVar

from autoprox.core.errors import RegistryError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T", bound=type)


def _article(kind: str) -> str:
    return "an" if kind[:1].lower() in "aeiou" else "a"


def _label(name: Any) -> str:
    """A name as messages show it: a string quoted, a class by its name."""
    return name.__qualname__ if isinstance(name, type) else repr(name)


class Registry(Mapping, Generic[K, V]):
    """Entries of one kind by name, in registration order.

    Parameters
    ----------
    kind : str
        What an entry is, as messages name it (``"zoo proxy"``, ``"aggregation"``).
    describe : callable, optional
        ``entry -> str``, one line about an entry (:meth:`describe`); by default the entry's
        ``description`` attribute, else its docstring's first line, else ``""``.
    unknown : type of Exception, optional
        The error :meth:`lookup` raises for a name that is not registered (default
        :class:`~autoprox.core.errors.RegistryError`).
    same : callable, optional
        ``(held, new) -> bool``: whether ``new`` is the entry already held (registering it
        again is then a no-op); by default only the very same object is.
    shares_names_with : Registry, optional
        Join that registry's name space: a name held by any registry of the space cannot be
        registered in another.
    """

    def __init__(self, kind: str, *, describe: Callable[[V], str] | None = None,
                 unknown: type[Exception] = RegistryError, same: Callable[[V, V], bool] | None = None,
                 shares_names_with: "Registry | None" = None) -> None:
        self.kind = kind
        self._entries: dict[K, V] = {}
        self._describe = describe
        self._unknown = unknown
        self._same = same
        self._name_space: list[Registry] = shares_names_with._name_space if shares_names_with is not None else []
        self._name_space.append(self)
        #: How many times an entry was registered or forgotten: what was built from the entries (a cache keyed
        #: by it) is out of date once it moves, even where a name came back with another entry.
        self.version = 0

    # ------------------------------------------------------------------ registering
    def holder(self, name: K) -> "Registry | None":
        """The registry of this name space that holds ``name`` (this one first), or None."""
        if name in self._entries:
            return self
        return next((registry for registry in self._name_space if name in registry._entries), None)

    def check_free(self, name: K) -> None:
        """RegistryError when ``name`` is held in this registry's name space."""
        holder = self.holder(name)
        if holder is not None:
            raise RegistryError(f"cannot register {self.kind} {_label(name)}: {_article(holder.kind)} {holder.kind} "
                                "of that name is already registered; give this one another name")

    def add(self, name: K, entry: V) -> V:
        """Register ``entry`` as ``name``; returns the entry held.

        The same entry again (the same object, or what ``same`` accepts) is a no-op that
        returns the one held; another entry under a name taken in the name space is refused
        with :class:`~autoprox.core.errors.RegistryError`.
        """
        if name in self._entries:
            held = self._entries[name]
            if held is entry or (self._same is not None and self._same(held, entry)):
                return held
        self.check_free(name)
        self._entries[name] = entry
        self.version += 1
        return entry

    def register(self, name: K) -> Callable[[V], V]:
        """A decorator registering the decorated object as ``name`` (returns it unchanged)."""

        def decorate(entry: V) -> V:
            self.add(name, entry)
            return entry

        return decorate

    def unregister(self, name: K) -> V | None:
        """Forget ``name``; returns the entry it held (None if none). Meant for tests and plug-ins
        that withdraw what they registered: code that read the entry keeps its copy."""
        if name in self._entries:
            self.version += 1
        return self._entries.pop(name, None)

    @contextmanager
    def registered(self, name: K, entry: V) -> Iterator[V]:
        """``with registry.registered(name, entry):`` the entry is registered inside the block only."""
        held = self.add(name, entry)
        try:
            yield held
        finally:
            if self._entries.get(name) is held:
                del self._entries[name]
                self.version += 1

    # ---------------------------------------------------------------------- reading
    def lookup(self, name: K) -> V:
        """The entry ``name``; the registry's ``unknown`` error naming the known ones otherwise."""
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            known = ", ".join(str(n) if isinstance(n, str) else _label(n) for n in self._entries)
            raise self._unknown(f"unknown {self.kind} {_label(name)}; known: {known}") from None

    def names(self) -> list[K]:
        """The registered names, in registration order."""
        return list(self._entries)

    def describe(self) -> list[tuple[K, str]]:
        """``(name, one line about it)`` for every entry, in registration order."""
        return [(name, self._description(entry)) for name, entry in self._entries.items()]

    def _description(self, entry: V) -> str:
        if self._describe is not None:
            return self._describe(entry)
        text = getattr(entry, "description", None)
        if isinstance(text, str):
            return text
        doc = getattr(entry, "__doc__", None) if callable(entry) else None
        return doc.strip().splitlines()[0] if doc and doc.strip() else ""

    def where(self, keep: Callable[[V], bool]) -> "RegistryView[K, V]":
        """A live read-only view of the entries for which ``keep(entry)`` is true."""
        return RegistryView(self, keep)

    # ---------------------------------------------------------------------- Mapping
    def __getitem__(self, name: K) -> V:
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        try:
            return name in self._entries
        except TypeError:
            return False

    def __iter__(self) -> Iterator[K]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(map(_label, self._entries))})"


class RegistryView(Mapping, Generic[K, V]):
    """A live read-only view of the entries of a :class:`Registry` that a test keeps."""

    def __init__(self, registry: Registry[K, V], keep: Callable[[V], bool]) -> None:
        self._registry = registry
        self._keep = keep

    def __getitem__(self, name: K) -> V:
        entry = self._registry[name]
        if not self._keep(entry):
            raise KeyError(name)
        return entry

    def __contains__(self, name: object) -> bool:
        return name in self._registry and self._keep(self._registry[name])

    def __iter__(self) -> Iterator[K]:
        return (name for name, entry in self._registry.items() if self._keep(entry))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"RegistryView({', '.join(map(_label, self))})"


class LiveNames(Sequence):
    """A live sequence of names, recomputed on every read (``names()`` of one or more
    registries); equal to any sequence with the same names in the same order."""

    def __init__(self, names: Callable[[], Sequence[str]]) -> None:
        self._names = names

    def __getitem__(self, index):
        return tuple(self._names())[index]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._names()))

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Sequence, LiveNames)) and not isinstance(other, str):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # it changes as entries are registered

    def __repr__(self) -> str:
        return repr(tuple(self))


def kind_registrar(registry: Registry[str, type]) -> Callable[[str], Callable[[T], T]]:
    """A decorator factory: ``@registrar(KIND)`` sets the class's ``kind`` and registers it in
    ``registry`` under ``KIND`` (the one duplicate-name rule of :meth:`Registry.add`)."""

    def registrar(kind: str) -> Callable[[T], T]:
        def register(cls: T) -> T:
            registry.add(kind, cls)
            cls.kind = kind
            return cls

        return register

    return registrar


__all__ = ["LiveNames", "Registry", "RegistryView", "kind_registrar"]
