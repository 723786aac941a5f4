"""Registries of classes by kind, in the manner of timm's ``@register_model``."""

from __future__ import annotations

from typing import Callable, MutableMapping, TypeVar

from autoprox.core.errors import ConfigError

T = TypeVar("T", bound=type)


def kind_registrar(table: MutableMapping[str, type], what: str) -> Callable[[str], Callable[[T], T]]:
    """A decorator factory: ``@registrar(KIND)`` sets the class's ``kind`` and enters it in ``table``;
    registering a kind twice is a ConfigError naming ``what`` it is (``objective``, ``evaluator``)."""

    def registrar(kind: str) -> Callable[[T], T]:
        def register(cls: T) -> T:
            if kind in table:
                raise ConfigError(f"{what} {kind!r} is registered already")
            cls.kind = kind
            table[kind] = cls
            return cls

        return register

    return registrar


__all__ = ["kind_registrar"]
