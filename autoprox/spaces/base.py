"""The interface every search space implements: :class:`SearchSpace`.

A space is a plug-in: an object that validates and parses an architecture config into a
frozen record, turns a record back into its config, draws random architectures (within a
parameter or multiply-accumulate budget), counts parameters and MACs without building a
network, and lists its choices. Records carry the name of their space in ``record.space``,
which is how every other part of autoprox finds the space of an architecture
(:func:`autoprox.spaces.registry.space_of`). The network itself is built by
:func:`autoprox.networks.models.build_model`, which calls the space's :meth:`build_model`
unless a builder is registered for the record type (the built-in spaces' are).

Pure Python: nothing here imports torch.
"""

from __future__ import annotations

import json
import math
import random
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from autoprox.core.errors import ArchitectureError

__all__ = ["SearchSpace", "SpaceDefinitionError", "fmt_set", "is_int", "is_number"]


class SpaceDefinitionError(ArchitectureError):
    """A space definition (a ``--space-file``, a plug-in) that cannot be used; names the bad field."""


def fmt_set(choices: Sequence[Any]) -> str:
    """``{1, 2, 3}``: how error messages show a set of choices."""
    return "{" + ", ".join(str(c) for c in choices) + "}"


def is_int(value: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """An int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class SearchSpace(ABC):
    """A ViT search space, as autoprox uses it.

    Subclasses set :attr:`name` (the registry key, and ``record.space`` of every record
    the space makes), :attr:`summary` and :attr:`markers`, and implement the abstract
    methods. Records must be hashable and compare equal exactly when they describe the
    same network; their ``space`` attribute must be :attr:`name`.
    """

    #: Registry key; ``record.space`` of this space's records.
    name: str = ""
    #: One line for ``autoprox spaces``.
    summary: str = ""
    #: Config keys that identify this space's configs (``detect_space`` looks for them).
    markers: tuple[str, ...] = ()

    # ------------------------------------------------------------ architecture records
    @abstractmethod
    def parse(self, config: Mapping) -> Any:
        """Validate ``config`` (the benchmark's JSON form) and return its frozen record.

        Raises :class:`~autoprox.core.errors.ArchitectureError` naming the bad key or value,
        its message starting with ``"<name> arch: "``.
        """

    @abstractmethod
    def to_config(self, arch: Any) -> dict[str, Any]:
        """The JSON-able config of ``arch`` (lists, not tuples); ``parse`` reads it back."""

    def arch_key(self, arch: Any) -> str:
        """Canonical compact JSON of ``arch``, for cache keys and de-duplication."""
        return json.dumps(self.to_config(arch), sort_keys=True, separators=(",", ":"))

    def claims(self, config: Mapping) -> bool:
        """Whether ``config`` looks like one of this space's (all :attr:`markers` present)."""
        return bool(self.markers) and all(key in config for key in self.markers)

    # ---------------------------------------------------------------------- counting
    @abstractmethod
    def blocks(self, arch: Any) -> list[tuple[int, int, int]]:
        """(width D, heads, MLP hidden width) of every transformer block, in forward order."""

    @abstractmethod
    def count_params(self, arch: Any, num_classes: int = 100) -> int:
        """Exact number of trainable parameters of the built network."""

    @abstractmethod
    def count_macs(self, arch: Any, num_classes: int = 100) -> int:
        """Multiply-accumulates of one 224x224 image: linear and convolution layers plus the
        attention matmuls (softmax, norms, GELU and additions are free)."""

    # ---------------------------------------------------------------------- sampling
    @abstractmethod
    def draw(self, rng: random.Random) -> Any:
        """One architecture, drawn with ``rng`` only (no budget)."""

    def extremes(self) -> tuple[Any, Any] | None:
        """The smallest and the largest architecture, or None when the space has none
        (its counts then have no range and budgets cannot be checked up front)."""
        return None

    def configurations(self, limit: int) -> list[Any] | None:
        """Every architecture of the space, once each, when it has at most about ``limit``; else None
        (the default: a space that cannot list its architectures)."""
        return None

    def param_range(self, num_classes: int = 100) -> tuple[int, int] | None:
        """Smallest and largest parameter count of the space (None: see :meth:`extremes`)."""
        ends = self.extremes()
        if ends is None:
            return None
        return self.count_params(ends[0], num_classes), self.count_params(ends[1], num_classes)

    def macs_range(self, num_classes: int = 100) -> tuple[int, int] | None:
        """Smallest and largest MAC count of the space (None: see :meth:`extremes`)."""
        ends = self.extremes()
        if ends is None:
            return None
        return self.count_macs(ends[0], num_classes), self.count_macs(ends[1], num_classes)

    def sample(self, rng: random.Random, params_range: tuple[float, float] | None = None,
               num_classes: int = 100, max_tries: int = 10000,
               macs_range: tuple[float, float] | None = None) -> Any:
        """Draw architectures with ``rng`` until one lies within the budgets (inclusive, raw counts).

        Raises :class:`ArchitectureError` naming the feasible range when no architecture can
        meet a budget, or when none is found in ``max_tries`` draws.
        """
        budgets = [(what, bounds, counter, feasible)
                   for what, bounds, counter, feasible in (
                       ("params_range", params_range, self.count_params, self.param_range),
                       ("macs_range", macs_range, self.count_macs, self.macs_range))
                   if bounds is not None]
        if not budgets:
            return self.draw(rng)
        for what, (lo, hi), _, feasible in budgets:
            ends = feasible(num_classes)
            if math.isnan(lo) or math.isnan(hi) or lo > hi or (ends is not None and (hi < ends[0] or lo > ends[1])):
                raise self._budget_error("no architecture can meet", what, (lo, hi), ends, num_classes)
        for _ in range(max_tries):
            arch = self.draw(rng)
            if all(lo <= counter(arch, num_classes) <= hi for _, (lo, hi), counter, _ in budgets):
                return arch
        what, bounds, _, feasible = budgets[0]
        raise self._budget_error(f"no architecture found in {max_tries} draws for", what, bounds,
                                 feasible(num_classes), num_classes)

    def _budget_error(self, why: str, what: str, bounds: tuple[float, float],
                      feasible: tuple[int, int] | None, num_classes: int) -> ArchitectureError:
        unit = "parameters" if what == "params_range" else "MACs"
        span = f"feasible range is [{feasible[0]:,}, {feasible[1]:,}] {unit}" if feasible else "its range is not known"
        return ArchitectureError(f"{self.name} space: {why} {what} [{bounds[0]:,}, {bounds[1]:,}]; "
                                 f"{span} ({num_classes} classes)")

    # ---------------------------------------------------------------------- listing
    @abstractmethod
    def choices(self) -> dict[str, str]:
        """Each choice of the space, as text for ``autoprox spaces`` (field -> values)."""

    # ----------------------------------------------------------------------- network
    def build_model(self, arch: Any, num_classes: int = 100):
        """The PyTorch network of ``arch`` with timm's module names (``blocks.N.attn.qkv``, ...).

        Called by :func:`autoprox.networks.models.build_model` (which seeds it) when no
        builder is registered for the record type; a plug-in implements it.
        """
        raise NotImplementedError(f"space {self.name!r} does not build networks: implement build_model "
                                  f"or register a builder with autoprox.networks.models.register_builder")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
