"""Bounds on a declarative family's size: what a space file may define, and what this machine can build.

A family whose largest architecture has more than ``limits.max_params`` parameters (default
1e9) or needs more than ``limits.max_activation_gb`` of float32 activations for a batch of 8
(default 64 GB, estimated from the config) is refused when its file is read; within those
bounds, a network whose weights, gradients and activations need more memory than the machine
has is refused before any tensor of it is allocated. The functions read a family
through its geometry methods (``tokens``, ``map_sides``, ``blocks``, ...), so that this module
does not import :mod:`autoprox.spaces.family`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from autoprox.core.errors import ArchitectureError
from autoprox.spaces.base import SpaceDefinitionError, is_number

__all__ = ["DEFAULT_MAX_ACTIVATION_GB", "DEFAULT_MAX_PARAMS", "IMAGE_SIZE", "IN_CHANS", "LIMIT_BATCH",
           "activation_bytes", "machine_memory_bytes", "check_buildable", "check_limits", "normalise_limits"]

IMAGE_SIZE = 224  # the statistics' minibatch is 224x224 (autoprox.networks.statistics)
IN_CHANS = 3
#: Default bounds on a family's largest architecture (a file's ``limits`` field may change them).
DEFAULT_MAX_PARAMS = 1_000_000_000
DEFAULT_MAX_ACTIVATION_GB = 64.0
#: Batch of the activation bound: the statistics' minibatch (autoprox.networks.statistics).
LIMIT_BATCH = 8
FLOAT_BYTES = 4


def activation_bytes(family, arch, batch: int = LIMIT_BATCH) -> int:
    """Bytes of the float32 activations one forward pass of ``arch`` keeps for the backward pass.

    Counted from the config, without building anything: per block and token the two
    LayerNorm outputs, q/k/v, the attention output, the projection, the residual, the
    MLP's hidden layer before and after GELU, and the attention matrix (scores and
    softmax) per head; the patch embedding and the input. An estimate within a small
    factor of what PyTorch allocates, enough to refuse what cannot run.
    """
    tokens, sides = family.tokens(), family.map_sides()
    floats = IN_CHANS * IMAGE_SIZE * IMAGE_SIZE + tokens[0] * arch.widths[0]
    for (width, heads, hidden), s in zip(family.blocks(arch), family.stage_of_blocks(arch)):
        q, n = family.attention_width(width, heads), tokens[s]
        floats += n * (5 * width + 4 * q + 2 * hidden) + 2 * heads * n * n
    for s in range(family.stages - 1):
        floats += sides[s + 1] ** 2 * arch.widths[s + 1]
    return batch * FLOAT_BYTES * floats


def check_buildable(family, arch, batch: int = LIMIT_BATCH) -> None:
    """Refuse (:class:`ArchitectureError`) an architecture this machine's memory cannot hold: its
    weights and their gradients plus the activations of one batch, against the machine's memory."""
    params = family.count_params(arch)
    needed = 2 * FLOAT_BYTES * params + activation_bytes(family, arch, batch)
    memory = machine_memory_bytes()
    if memory is not None and needed > memory:
        raise ArchitectureError(f"{family.name} arch: needs about {needed / 1e9:,.1f} GB ({params:,} parameters, "
                                f"activations of a batch of {batch}), more than this machine's "
                                f"{memory / 1e9:,.1f} GB of memory; not built")


def normalise_limits(limits: Any, source: str) -> dict[str, float]:
    """A file's ``limits`` field (``max_params``, ``max_activation_gb``) with the defaults filled in."""
    out = {"max_params": DEFAULT_MAX_PARAMS, "max_activation_gb": DEFAULT_MAX_ACTIVATION_GB}
    if limits is None:
        return out
    if not isinstance(limits, Mapping):
        raise SpaceDefinitionError(f"{source}: field 'limits': a mapping of max_params and max_activation_gb, "
                                   f"got {_short(limits)}")
    for key, value in limits.items():
        if key not in out:
            raise SpaceDefinitionError(f"{source}: field 'limits.{key}': unknown; known: max_params, "
                                       "max_activation_gb")
        if not is_number(value) or not math.isfinite(value) or value <= 0:
            raise SpaceDefinitionError(f"{source}: field 'limits.{key}': must be a positive number, "
                                       f"got {_short(value)}")
        out[key] = value
    return out


def check_limits(family, largest, source: str) -> None:
    """The family's largest architecture within its ``limits`` (SpaceDefinitionError in one line)."""
    limits = family.definition["limits"]
    params = family.count_params(largest)
    activation_gb = activation_bytes(family, largest) / 1e9
    if params > limits["max_params"]:
        raise SpaceDefinitionError(f"{source}: its largest architecture has {params:,} parameters, more than the "
                                   f"bound of {limits['max_params']:,.0f}; shrink the choices, or raise "
                                   f"limits.max_params in the file")
    if activation_gb > limits["max_activation_gb"]:
        raise SpaceDefinitionError(f"{source}: its largest architecture needs about {activation_gb:,.1f} GB of "
                                   f"activations at batch {LIMIT_BATCH}, more than the bound of "
                                   f"{limits['max_activation_gb']:g} GB; shrink the choices, or raise "
                                   f"limits.max_activation_gb in the file")


def machine_memory_bytes() -> int | None:
    """This machine's physical memory, or ``None`` if unknown.

    All of it, not what other processes leave free now: a network beyond it can never be
    built here, while one within it may only have to wait for memory (refusing it on a busy
    machine would be wrong).
    """
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
