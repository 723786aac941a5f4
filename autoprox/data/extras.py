"""Extra statistics sets: statistics beyond the eight, computed and cached only when asked for.

A set is registered with its statistics' names and a version that is part of its cache
entries' keys (:mod:`autoprox.data.cache`); ``compute_statistics(..., NAME=True)``
computes it (:mod:`autoprox.networks.statistics`). The one set today is ``spread``: the
spread over the batch's samples (:data:`autoprox.networks.names.SPREAD_NAMES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from autoprox.core.errors import ConfigError
from autoprox.core.registry import Registry
from autoprox.networks.names import SPREAD_NAMES


@dataclass(frozen=True)
class ExtraSet:
    """Statistics beyond the eight, computed and cached only when asked for."""

    name: str
    #: The statistics it adds to each block, in storage order.
    stat_names: tuple[str, ...]
    #: Part of its entries' keys: bump it when its statistics' code changes.
    version: str


#: Extra statistics sets by name (``StatsRequest.extras``).
EXTRA_SETS: Registry[str, ExtraSet] = Registry(
    "extra statistics set", describe=lambda extra: ", ".join(extra.stat_names), unknown=ConfigError)


def register_extra_set(name: str, stat_names: Sequence[str], version: str) -> ExtraSet:
    """Register an extra statistics set (its computation is ``compute_statistics(..., name=True)``)."""
    return EXTRA_SETS.add(name, ExtraSet(name, tuple(stat_names), version))


register_extra_set("spread", SPREAD_NAMES, "spread-v1")


def extras_for(stat_names: Sequence[str]) -> tuple[str, ...]:
    """The extra sets holding any of ``stat_names`` (in registration order)."""
    wanted = set(stat_names)
    return tuple(name for name, extra in EXTRA_SETS.items() if wanted & set(extra.stat_names))


def check_extras(extras: Sequence[str]) -> tuple[str, ...]:
    """``extras`` without repeats; ConfigError naming one that is not registered."""
    for name in extras:
        EXTRA_SETS.lookup(name)
    return tuple(dict.fromkeys(extras))
