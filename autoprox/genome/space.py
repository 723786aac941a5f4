"""Which genomes a search explores: :class:`GenomeSpace` (kind, aggregations, terminal sets, operators), and
:class:`SearchedSpace`, what the evolution asks of every genome space.

Below :mod:`autoprox.genome.tree` and :mod:`autoprox.genome.template`: a space is data, and
those modules draw, mutate and check genomes with it. Each kind's module registers in :data:`GENOME_KINDS` how a
space of its kind is searched (:meth:`GenomeSpace.bound`); importing :mod:`autoprox.genome` registers the two
kinds, ``template`` and ``free``, which :data:`TREE_KINDS` lists as they register. The paper's space,
``PAPER_SPACE``, is therefore made where its kind registers (:mod:`autoprox.genome.template`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from deap import gp

from autoprox.core.errors import GenomeError
from autoprox.data.extras import extras_for
from autoprox.core.registry import LiveNames, Registry
from autoprox.genome.aggregations import AGGREGATION_REGISTRY
from autoprox.genome.terminals import PAPER_TERMINALS, check_terminals, terminals_of
from autoprox.networks.statistics import STAT_NAMES
from autoprox.primitives import BINARY, PAPER_BINARY, PAPER_UNARY, PRIMITIVES, UNARY, check_operators

__all__ = ["AGGREGATIONS", "DEFAULT_AGGREGATION", "FREE", "GENE_CHOICES", "GENOME_KINDS", "GenomeKind", "LEGACY_TERMINAL_FLAGS",
           "TEMPLATE", "TREE_KINDS", "GenomeSpace", "SearchedSpace"]

TEMPLATE = "template"
FREE = "free"
#: Aggregations over blocks (:mod:`autoprox.genome.aggregations`), the paper's mean first: the names
#: registered now (read live, so one registered after import is a genome token like the others).
AGGREGATIONS = LiveNames(AGGREGATION_REGISTRY.names)
DEFAULT_AGGREGATION = "block_mean"


def _op_name(node_name: str) -> str:
    return node_name.split(".", 1)[0]  # as autoprox.genome.tree.op_name


#: The template's genes and their values in the paper's space (the paper's operators only,
#: whatever else is registered).
GENE_CHOICES = {
    "input_a": STAT_NAMES,
    "unary_a1": PAPER_UNARY,
    "unary_a2": PAPER_UNARY,
    "input_b": STAT_NAMES,
    "unary_b1": PAPER_UNARY,
    "unary_b2": PAPER_UNARY,
    "binary": PAPER_BINARY,
}


class SearchedSpace(Protocol):
    """What the evolution (:mod:`autoprox.search.evolution`) asks of a genome space, whatever its kind.

    A space of a kind whose operators read settings of the evolution (the template mutation's
    ``gene_probability``) is searched bound to them: :meth:`bound` gives the space with those arguments
    (as DEAP's toolbox binds an operator's arguments once); a space whose operators read none is its own.
    """

    #: Whether :meth:`vary` draws on partners from the population (the evolution parses them only then).
    uses_partners: bool

    def bound(self, settings: Any) -> "SearchedSpace":
        """This space with its operators bound to ``settings``
        (an :class:`~autoprox.search.evolution.EvolutionConfig`)."""

    def random_genome(self, rng: random.Random) -> Any:
        """A random genome of this space."""

    def vary(self, parent: Any, rng: random.Random, partners: Sequence[Any] = ()) -> Any:
        """One child of ``parent``; ``partners``, other genomes of the population, where :attr:`uses_partners`."""

    def parse(self, text: str) -> Any:
        """The genome a text stands for."""

    def contains(self, genome: Any) -> bool:
        """Whether ``genome`` is in this space."""


class GenomeKind(Protocol):
    """A kind of :class:`GenomeSpace`, as :data:`GENOME_KINDS` holds it: how a space of the kind is searched, and
    which genomes a search of it can start from."""

    def of(self, space: "GenomeSpace", settings: Any) -> SearchedSpace:
        """``space`` as the evolution searches it, its operators bound to ``settings``."""

    def check_seed(self, tree: gp.PrimitiveTree) -> None:
        """GenomeError saying why a search of this kind cannot start from ``tree`` (its shape; whether it is
        within the searched space is the search's own check)."""


#: Each kind of :class:`GenomeSpace`, a :class:`GenomeKind` (registered by :mod:`autoprox.genome.template` and
#: :mod:`autoprox.genome.free`).
GENOME_KINDS: Registry[str, GenomeKind] = Registry("genome kind", unknown=GenomeError)
#: The kinds of :class:`GenomeSpace`, whose genomes are trees of the statistics: the names registered in
#: :data:`GENOME_KINDS` (read live), the paper's template trees and free-form typed trees. A space of another
#: kind, such as :class:`~autoprox.genome.weighted.WeightedSpace`, is its own class and draws, varies and parses
#: its genomes itself.
TREE_KINDS = LiveNames(GENOME_KINDS.names)


#: The ``config.json`` flag of each terminal set that earlier runs recorded as a boolean (``genome`` field).
LEGACY_TERMINAL_FLAGS = {"arch": "arch_terminals", "spread": "spread_terminals"}


@dataclass(frozen=True, init=False)
class GenomeSpace:
    """Which genomes a search explores.

    The default is the paper's: template trees, the mean over blocks, the eight
    statistics as the only inputs.

    Parameters
    ----------
    kind : str
        ``template`` (the paper's tree shape) or ``free`` (free-form typed trees).
    aggregations : tuple of str
        The aggregations over blocks; more than one makes the aggregation a gene.
    terminals : sequence of str, optional
        The terminal sets genomes read (:mod:`autoprox.genome.terminals`: ``stats``, the
        eight statistics; ``spread``, the spread statistics in extra cache entries; ``arch``,
        architecture-level scalars; and any set registered since). None is the paper's
        (``("stats",)``). Kept in registration order, whatever order they are given in.
    operators : sequence of str, optional
        The operations genomes are built from; None is the paper's 24 + 4, and a primitive
        of your own (:func:`autoprox.primitives.register_primitive`) takes part only when named.
    arch_terminals, spread_terminals : bool
        The earlier spelling of ``terminals``: each adds its set (``arch``, ``spread``).
    """

    kind: str
    aggregations: tuple[str, ...]
    terminals: tuple[str, ...]
    operators: tuple[str, ...] | None

    def __init__(self, kind: str = TEMPLATE, aggregations: Sequence[str] = (DEFAULT_AGGREGATION,),
                 terminals: Sequence[str] | None = None, operators: Sequence[str] | None = None, *,
                 arch_terminals: bool = False, spread_terminals: bool = False) -> None:
        if kind not in TREE_KINDS:
            raise GenomeError(f"unknown genome kind {kind!r}; use {' or '.join(TREE_KINDS) or 'a registered one'}")
        aggregations = tuple(aggregations)
        if not aggregations:
            raise GenomeError("at least one aggregation is needed")
        for name in aggregations:
            if name not in AGGREGATIONS:
                raise GenomeError(f"unknown aggregation {name!r}; known: {', '.join(AGGREGATIONS)}")
        if isinstance(terminals, bool):
            raise GenomeError("terminals is a sequence of terminal-set names (arch_terminals=True is "
                              "terminals=('stats', 'arch'))")
        chosen = list(PAPER_TERMINALS if terminals is None else terminals)
        chosen += [name for name, on in (("arch", arch_terminals), ("spread", spread_terminals)) if on]
        if operators is not None:
            operators = tuple(operators)
            try:
                check_operators(operators)
            except ValueError as exc:
                raise GenomeError(str(exc)) from None
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "aggregations", aggregations)
        object.__setattr__(self, "terminals", check_terminals(chosen))
        object.__setattr__(self, "operators", operators)

    @property
    def arch_terminals(self) -> bool:
        """Whether genomes may read the architecture-level scalars (the ``arch`` set)."""
        return "arch" in self.terminals

    @property
    def spread_terminals(self) -> bool:
        """Whether genomes may read the spread statistics (the ``spread`` set)."""
        return "spread" in self.terminals

    @property
    def unary_operators(self) -> tuple[str, ...]:
        """The unary operations of this space, in the order given (the paper's by default)."""
        return PAPER_UNARY if self.operators is None else tuple(n for n in self.operators if n in UNARY)

    @property
    def binary_operators(self) -> tuple[str, ...]:  # noqa: D102 - as unary_operators
        return PAPER_BINARY if self.operators is None else tuple(n for n in self.operators if n in BINARY)

    @property
    def inputs(self) -> tuple[str, ...]:
        """Every terminal genomes of this space may read, set after set."""
        return terminals_of(self.terminals)

    def gene_choices(self) -> dict[str, tuple[str, ...]]:
        """The template's genes and the values each may take in this space."""
        choices = dict(GENE_CHOICES, input_a=self.inputs, input_b=self.inputs)
        if self.operators is not None:
            unary = self.unary_operators
            choices.update(unary_a1=unary, unary_a2=unary, unary_b1=unary, unary_b2=unary,
                           binary=self.binary_operators)
        if len(self.aggregations) > 1:
            choices["aggregation"] = self.aggregations
        return choices

    def reads_only_inputs(self, tree: gp.PrimitiveTree) -> bool:
        """Whether every terminal of ``tree`` is one of this space's :attr:`inputs`."""
        inputs = set(self.inputs)
        return all(n.name in inputs for n in tree if isinstance(n, gp.Terminal))

    def contains(self, tree: gp.PrimitiveTree) -> bool:
        """Whether ``tree`` uses only this space's aggregations, operations and inputs."""
        names = [_op_name(n.name) for n in tree]
        if names[0] not in self.aggregations:
            return False
        allowed = set(self.unary_operators) | set(self.binary_operators)
        if any(n in PRIMITIVES and n not in allowed for n in names):
            return False
        return self.reads_only_inputs(tree)

    def bound(self, settings: Any) -> SearchedSpace:
        """This space as the evolution searches it: its kind's operators (:data:`GENOME_KINDS`) bound to the
        evolution's ``settings`` they read (the template mutation's ``gene_probability``)."""
        return GENOME_KINDS.lookup(self.kind).of(self, settings)

    @property
    def extras(self) -> tuple[str, ...]:
        """The extra statistics sets (:mod:`autoprox.data.extras`) this space's genomes may read."""
        return extras_for(self.inputs)

    def to_json(self) -> dict:
        """The ``genome`` field of ``config.json``.

        The sets earlier runs recorded as booleans keep that form (``arch_terminals`` always,
        ``spread_terminals`` when true), so the records of those runs and of new runs with the
        same sets are alike; ``terminals`` is written only for a choice the booleans cannot
        express (a set registered since, or one without ``stats``).
        """
        data = {"kind": self.kind, "aggregations": list(self.aggregations), "arch_terminals": self.arch_terminals}
        if self.spread_terminals:  # absent otherwise: the spaces of earlier runs record what they did
            data["spread_terminals"] = True
        if set(self.terminals) - set(LEGACY_TERMINAL_FLAGS) != set(PAPER_TERMINALS):
            data["terminals"] = list(self.terminals)
        if self.operators is not None:  # likewise
            data["operators"] = list(self.operators)
        return data

    @classmethod
    def from_json(cls, data: dict | None) -> "GenomeSpace":
        """The space a ``genome`` field of ``config.json`` records (absent or empty: the paper's)."""
        if not data:
            return cls()
        operators = data.get("operators")
        flags = {flag: bool(data.get(flag, False)) for flag in LEGACY_TERMINAL_FLAGS.values()}
        terminals = data.get("terminals")
        if terminals is not None:
            if not isinstance(terminals, list) or not all(isinstance(t, str) for t in terminals):
                raise GenomeError(f"genome terminals must be a list of terminal-set names, got {terminals!r}"[:200])
            space = cls(data["kind"], tuple(data["aggregations"]), tuple(terminals),
                        None if operators is None else tuple(str(name) for name in operators))
            recorded = {flag: name in space.terminals for name, flag in LEGACY_TERMINAL_FLAGS.items()}
            if any(on and not recorded[flag] for flag, on in flags.items()):
                raise GenomeError(f"genome terminals {terminals} leave out a set its flags "
                                  f"({', '.join(f for f, on in flags.items() if on)}) turn on")
            return space
        return cls(data["kind"], tuple(data["aggregations"]), None,
                   None if operators is None else tuple(str(name) for name in operators), **flags)

