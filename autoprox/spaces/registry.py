"""The registry of search spaces: built-in ones, third-party plug-ins and space files.

Spaces are found by name. The built-in ones register when :mod:`autoprox.spaces` is
imported (``autoformer``, ``pit``, ``autoformer-s``, ``autoformer-b``) and when
:mod:`autoprox.networks` is (``timm``); third-party packages register theirs through the
``autoprox.spaces`` entry-point group, the way pytest finds its plug-ins::

    [project.entry-points."autoprox.spaces"]
    my-vit = "my_package.space:MyViTSpace"     # a SearchSpace subclass or instance

and a declarative family read from a JSON or TOML file (``--space-file``) registers under
the name it declares. Entry points are loaded the first time a name is not found (or the
spaces are listed); one that fails to load is reported with a warning and skipped.

A file's space is named by a :class:`SpaceName`: a ``str`` (so it is a directory name and a
JSON value like any other space name) that carries the family's definition, so that a
worker process which receives ``(record.space, config)`` parses the architecture without
having read the file.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from importlib import metadata
from typing import Any

from autoprox.core.errors import ArchitectureError
from autoprox.core.registry import Registry
from autoprox.spaces.base import SearchSpace, SpaceDefinitionError
from autoprox.spaces.family import FamilySpace, SpaceName, load_family

__all__ = [
    "ENTRY_POINT_GROUP",
    "REGISTRY",
    "SpaceName",
    "SpaceRegistry",
    "detect_space_of_config",
    "get_space",
    "register_space",
    "space_names",
    "space_of",
]

#: The entry-point group third-party spaces register under.
ENTRY_POINT_GROUP = "autoprox.spaces"


class SpaceRegistry:
    """Name -> :class:`SearchSpace`, in registration order: a :class:`~autoprox.core.registry.Registry`
    (its duplicate-name rule: the same space, or a file's family with the same definition, again is a
    no-op; another space under a taken name is a RegistryError) with entry points, space files and
    detection of a config's space around it."""

    def __init__(self) -> None:
        self._spaces: Registry[str, SearchSpace] = Registry("search space", same=_same_family,
                                                            unknown=ArchitectureError)
        self._from_files: set[str] = set()  # names of spaces read from a file (or a carried definition)
        #: Name -> where the space comes from ("built-in", "plug-in ...", "file ...").
        self.origins: dict[str, str] = {}
        self._entry_points_loaded = False
        #: ``(entry point, reason)`` of every plug-in that failed to load.
        self.load_errors: list[tuple[str, str]] = []

    # ------------------------------------------------------------------- registering
    def register(self, space: SearchSpace | type[SearchSpace], origin: str = "built-in") -> SearchSpace:
        """Add ``space`` (an instance, or a class made with no arguments); returns the instance.

        Registering the same object again is a no-op; another space under a taken name is
        refused with :class:`~autoprox.core.errors.RegistryError`; a space without a usable name
        with :class:`SpaceDefinitionError`.
        """
        if isinstance(space, type) and isinstance(self._spaces.get(str(getattr(space, "name", ""))), space):
            return self._spaces[str(space.name)]  # the class of a registered space (an entry point, say)
        instance = space() if isinstance(space, type) else space
        if not isinstance(instance, SearchSpace):
            raise SpaceDefinitionError(f"{instance!r} is not a SearchSpace (autoprox.spaces.base.SearchSpace)")
        if not isinstance(instance.name, str) or not instance.name.strip() or instance.name != instance.name.strip():
            raise SpaceDefinitionError(f"{type(instance).__name__}: a space needs a name, got {instance.name!r}")
        if os.sep in instance.name or (os.altsep and os.altsep in instance.name):
            raise SpaceDefinitionError(f"space name {instance.name!r} must not contain a path separator")
        held = self._spaces.add(str(instance.name), instance)
        if held is instance:
            self.origins.setdefault(str(instance.name), origin)
        return held

    def unregister(self, name: str) -> None:
        """Forget the space called ``name`` (records made by it keep working where they are held)."""
        self._spaces.unregister(str(name))
        self._from_files.discard(str(name))
        self.origins.pop(str(name), None)

    def register_file(self, path: str | os.PathLike) -> FamilySpace:
        """Read a declarative family from a JSON or TOML file and register it (see :mod:`autoprox.spaces.family`)."""
        family = self.register(load_family(path), origin=f"file {path}")
        self._from_files.add(str(family.name))
        return family  # type: ignore[return-value]

    # ----------------------------------------------------------------------- finding
    def get(self, name: str) -> SearchSpace:
        """The space called ``name``; raises :class:`ArchitectureError` naming the known ones."""
        if not isinstance(name, str):
            raise ArchitectureError(f"a space name is a string, got {name!r}")
        space = self._spaces.get(str(name))
        if space is None and isinstance(name, SpaceName) and name.definition is not None:
            space = self.register(FamilySpace(name.definition), origin="file (definition carried by its name)")
            self._from_files.add(str(space.name))
        if space is None and not self._entry_points_loaded:
            self.load_entry_points()
            space = self._spaces.get(str(name))
        if space is None:
            raise ArchitectureError(f"unknown search space {str(name)!r}, expected one of {self.names()}"
                                    + self._failed_plugins(str(name)))
        return space

    def _failed_plugins(self, name: str) -> str:
        """For an unknown space's error: the plug-ins that failed to load (the one named ``name`` alone if
        one is), or nothing."""
        failed = [(label, reason) for label, reason in self.load_errors if label.split(" = ")[0] == name] \
            or self.load_errors
        return "".join(f"; space plug-in {label!r} not loaded ({reason})" for label, reason in failed)

    def names(self) -> list[str]:
        """Names of the registered spaces (entry-point plug-ins included), in registration order."""
        self.load_entry_points()
        return self._spaces.names()

    def spaces(self) -> list[SearchSpace]:
        """The registered spaces (entry-point plug-ins included), in registration order."""
        self.load_entry_points()
        return list(self._spaces.values())

    def load_entry_points(self, force: bool = False) -> list[str]:
        """Load the ``autoprox.spaces`` entry points once; returns the names registered now."""
        if self._entry_points_loaded and not force:
            return []
        self._entry_points_loaded = True
        added = []
        for point in _entry_points(ENTRY_POINT_GROUP):
            label = f"{point.name} = {point.value}"
            try:
                loaded = point.load()
                before = set(self._spaces)
                dist = getattr(getattr(point, "dist", None), "name", None)
                space = self.register(loaded, origin=f"plug-in {point.value}" + (f" ({dist})" if dist else ""))
            except Exception as exc:  # noqa: BLE001 - a broken plug-in must not stop autoprox
                reason = f"{type(exc).__name__}: {exc}"
                self.load_errors.append((label, reason))
                warnings.warn(f"space plug-in {label!r} not loaded ({reason})", stacklevel=2)
                continue
            if space.name not in before:
                added.append(str(space.name))
        return added

    def is_from_file(self, space: SearchSpace) -> bool:
        """Whether ``space`` was read from a space file (rather than built in or a plug-in)."""
        return str(space.name) in self._from_files

    # -------------------------------------------------------------------- detecting
    def fitting(self, config: Mapping) -> list[SearchSpace]:
        """Every registered space that parses ``config``."""
        return [s for s in self.spaces() if s.claims(config) and _parses(s, config)]

    def detect(self, config: Mapping) -> SearchSpace:
        """The space a config belongs to, from its marker keys (then from which space parses it).

        When a built-in or plug-in space and spaces read from files both parse it, the former
        wins: a space file never changes how the released benchmark files are read.
        """
        if not isinstance(config, Mapping):
            raise ArchitectureError(f"arch config must be a mapping, got {type(config).__name__}")
        spaces = self.spaces()
        claimants = [s for s in spaces if s.claims(config)]
        if not claimants:
            groups = _marker_groups(spaces)
            options = " nor ".join(f"{' and '.join(repr(k) for k in markers)} ({', '.join(names)})"
                                   for markers, names in groups.items())
            raise ArchitectureError(f"arch config has neither {options}: keys {sorted(config)}")
        if len(claimants) == 1:
            return claimants[0]
        fitting = [s for s in claimants if _parses(s, config)]
        if len(fitting) > 1 and any(not self.is_from_file(s) for s in fitting):
            fitting = [s for s in fitting if not self.is_from_file(s)]
        if len(fitting) == 1:
            return fitting[0]
        if fitting:
            raise ArchitectureError(f"arch config fits several spaces ({', '.join(s.name for s in fitting)}); "
                                    f"name the space (a 'space' column or key in the benchmark)")
        marker_sets = [set(s.markers) for s in claimants]
        if all(a.isdisjoint(b) for i, a in enumerate(marker_sets) for b in marker_sets[i + 1:]):
            keys = sorted({k for group in marker_sets for k in group})
            raise ArchitectureError(f"arch config has both {' and '.join(repr(k) for k in keys)}; space is ambiguous")
        return claimants[0]  # none parses it: parsing with the first names what is wrong


def _entry_points(group: str) -> Iterable[Any]:
    found = metadata.entry_points()
    if hasattr(found, "select"):
        return found.select(group=group)
    return found.get(group, [])  # Python < 3.10's dict form


def _marker_groups(spaces: Iterable[SearchSpace]) -> dict[tuple[str, ...], list[str]]:
    groups: dict[tuple[str, ...], list[str]] = {}
    for space in spaces:
        if space.markers:
            groups.setdefault(space.markers, []).append(str(space.name))
    return groups


def _parses(space: SearchSpace, config: Mapping) -> bool:
    try:
        space.parse(config)
    except ArchitectureError:
        return False
    return True


def _same_family(a: SearchSpace, b: SearchSpace) -> bool:
    return isinstance(a, FamilySpace) and isinstance(b, FamilySpace) and a.digest == b.digest


#: The registry autoprox uses.
REGISTRY = SpaceRegistry()


def register_space(space: SearchSpace | type[SearchSpace]) -> Any:
    """Register a space in :data:`REGISTRY`; usable as a class decorator (returns its argument)."""
    REGISTRY.register(space)
    return space


def get_space(name: str) -> SearchSpace:
    """The registered space called ``name``."""
    return REGISTRY.get(name)


def space_names() -> list[str]:
    """Names of every registered space."""
    return REGISTRY.names()


def space_of(arch: Any) -> SearchSpace:
    """The space of an architecture record (its ``space`` attribute)."""
    name = getattr(arch, "space", None)
    if not isinstance(name, str):
        raise ArchitectureError(f"not an architecture record: {arch!r}")
    return REGISTRY.get(name)


def detect_space_of_config(config: Mapping) -> SearchSpace:
    """The registered space a config belongs to (see :meth:`SpaceRegistry.detect`)."""
    return REGISTRY.detect(config)
