"""The functions that work on an architecture of any registered space.

Pure Python (no torch): parsing and validation of an architecture's JSON form, its
canonical key, exact parameter and multiply-accumulate counts (computed without building a
network) and a seeded sampler. Each goes to the architecture's space
(:mod:`autoprox.spaces.registry`, :class:`autoprox.spaces.base.SearchSpace`); the two spaces
of ViT-Bench-101, AutoFormer-Ti and PiT, are declarative families like any other
(:mod:`autoprox.spaces.builtin`, the formulas of docs/spaces.md).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from autoprox.core.errors import ArchitectureError
from autoprox.spaces.registry import detect_space_of_config, get_space, space_of

__all__ = [
    "SPACES",
    "Arch",
    "detect_space",
    "parse_arch",
    "arch_to_config",
    "arch_key",
    "count_params",
    "count_macs",
    "transformer_widths",
    "param_range",
    "sample_arch",
]

#: The spaces of ViT-Bench-101 (``space_names()`` lists every space).
SPACES: tuple[str, ...] = ("autoformer", "pit")

#: An architecture record: any space's (``record.space`` names its space).
Arch = Any


def detect_space(config: Mapping) -> str:
    """Name the space a config belongs to, from its marker keys: ``hidden_dim`` -> autoformer,
    ``base_dim`` -> pit, and so on for every registered space (:meth:`SpaceRegistry.detect`)."""
    return str(detect_space_of_config(config).name)


def parse_arch(config: Mapping | Arch, space: str | None = None) -> Arch:
    """Validate a benchmark-style config and return its frozen architecture record.

    Unknown or missing keys are errors; when ``space`` is given the config
    must belong to it.  An already-parsed record is returned as is.
    """
    if not isinstance(config, Mapping) and isinstance(getattr(config, "space", None), str):
        owner = space_of(config)  # an already-parsed record
        if space is not None and get_space(space) is not owner:
            raise ArchitectureError(f"arch is a {owner.name} arch but space {space!r} was requested")
        return config
    target = get_space(space if space is not None else detect_space(config))
    if space is not None:
        if not isinstance(config, Mapping):
            raise ArchitectureError(f"arch config must be a mapping, got {type(config).__name__}")
        if not target.claims(config):
            try:
                found = detect_space(config)
            except ArchitectureError:
                found = target.name  # no space's marker key: report the missing key below
            if found != target.name:
                raise ArchitectureError(f"{target.name} arch: config looks like a {found} arch (keys {list(config)})")
    return target.parse(config)


def arch_to_config(arch: Arch) -> dict[str, Any]:
    """JSON-able config in the benchmark's form (lists, not tuples)."""
    return space_of(arch).to_config(arch)


def arch_key(arch: Arch) -> str:
    """Canonical compact JSON (sorted keys) of an architecture, for caches and dedup."""
    return space_of(arch).arch_key(arch)


def transformer_widths(arch: Arch) -> list[tuple[int, int, int]]:
    """(width D, heads, MLP hidden h = int(D * mlp_ratio)) of every block, in forward order."""
    return space_of(arch).blocks(arch)


def count_params(arch: Arch, num_classes: int = 100) -> int:
    """Exact number of trainable parameters of the built network (spaces.md formula)."""
    return space_of(arch).count_params(arch, num_classes)


def count_macs(arch: Arch, num_classes: int = 100) -> int:
    """Multiply-accumulates of one 224x224 image: linear and conv layers plus attention matmuls.

    Convention: a layer costs (output elements) x (inputs per output); softmax,
    norms, GELU, additions and pooling of tokens are free.
    """
    return space_of(arch).count_macs(arch, num_classes)


def param_range(space: str, num_classes: int = 100) -> tuple[int, int]:
    """Smallest and largest parameter count any architecture of ``space`` has."""
    found = get_space(space).param_range(num_classes)
    if found is None:
        raise ArchitectureError(f"{space} space has no parameter range (its architectures are not sampled)")
    return found


def sample_arch(
    space: str,
    rng: random.Random,
    params_range: tuple[float, float] | None = None,
    num_classes: int = 100,
    max_tries: int = 10000,
    macs_range: tuple[float, float] | None = None,
) -> Arch:
    """Draw a random architecture of ``space`` using only ``rng``.

    With ``params_range=(min, max)`` (raw parameter counts, inclusive) draws
    are rejected until one fits; likewise ``macs_range`` for multiply-accumulates.
    If none fits after ``max_tries`` draws (or
    the range cannot be met at all) an ArchitectureError names the space's
    feasible range.
    """
    return get_space(space).sample(rng, params_range, num_classes, max_tries, macs_range)
