"""Terminal sets: the named groups of inputs a genome may read.

A genome's leaves are terminals. They come in sets, each one registered record
(:class:`TerminalSet`) and chosen by name in ``GenomeSpace(terminals=(...))`` or
``--terminals``:

* ``stats``: the eight per-block statistics ``F1 ... F4g`` of the paper (the default set,
  :data:`PAPER_TERMINALS`);
* ``spread``: the spread over the batch's samples ``S1g ... S4g``, per block, read from
  extra cache entries (:mod:`autoprox.data.extras`);
* ``arch``: architecture-level scalars (parameter count, MACs, depth, width, heads, MLP
  ratio and their logarithms, :mod:`autoprox.spaces.descriptors`), the same in every block;
* ``zoo``: hand-crafted proxies' values of each architecture (SNIP, NWOT, ZiCo, SynFlow,
  grad-norm, and any registered since: :data:`autoprox.proxies.zoo.ZOO_TERMINALS`), the same in
  every block, so that a formula can combine a zoo proxy with the statistics. The zoo lives with
  the proxies, a layer above this one: :mod:`autoprox.proxies.zoo_scores`, which computes the
  values, registers the set here (every module that reads a proxy imports it; a module that only
  parses genomes calls its ``zoo_terminal_set()``); this module does not import it.

A set is of one of two kinds. A ``matrix`` set holds per-block statistics: the statistics
cache holds their values, in the eight's entries or in the entries of the extra statistics
sets that name them (:func:`autoprox.data.extras.extras_for`). A ``scalar`` set holds one
value per architecture: its ``values`` function computes them from the architecture
(:func:`architecture_values` gathers every scalar set's), or, for a set computed from the
network itself (the zoo's), its ``table`` function computes them for many architectures at
once from a :class:`TerminalSource` (the statistics' input, seed and class count, and the
cache that keeps them; :func:`terminal_table` gathers both kinds). A further set (zoo proxy scores
of each architecture, scale-free variants of the statistics, ...) is one more call of
:func:`register_terminal_set`; the primitive set, the genome parser, the template's genes,
free trees and :class:`~autoprox.genome.tree.GenomeSpace` all read this registry.

Register a set before any genome is parsed or any search starts (at import of the module
that defines it): the typed primitive set is built once per registry content.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from autoprox.core.errors import GenomeError
from autoprox.core.registry import Registry
from autoprox.data.extras import extras_for
from autoprox.networks.names import SPREAD_NAMES
from autoprox.networks.statistics import STAT_NAMES, InputSpec
from autoprox.spaces.descriptors import terminal_names, terminal_values

__all__ = ["MATRIX", "PAPER_TERMINALS", "SCALAR", "TERMINAL_SETS", "TerminalSet", "TerminalSource",
           "architecture_values", "check_terminals", "computed_sets", "register_terminal_set", "terminal_kinds",
           "terminal_table", "terminals_of"]

#: A per-block statistic (a 2-D value in each block, from the statistics cache).
MATRIX = "matrix"
#: An architecture-level scalar (one value per architecture, the same in every block).
SCALAR = "scalar"
KINDS = (MATRIX, SCALAR)

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class TerminalSet:
    """One named set of genome terminals.

    Attributes
    ----------
    name : str
        What ``terminals=(...)`` and ``--terminals`` call it.
    names : sequence of str
        Its terminals, as genome strings spell them (in the order a search draws from them): a
        tuple, or a live sequence (:class:`~autoprox.core.registry.LiveNames`) for a set whose
        terminals are registered elsewhere (the zoo's).
    kind : str
        :data:`MATRIX` (per-block statistics from the cache) or :data:`SCALAR` (one value per
        architecture, from ``values``).
    description : str
        One line for ``--help`` and the docs; ``{names}`` in it stands for the set's terminals
        as they are when it is read (:attr:`summary`).
    values : callable, optional
        For a scalar set computed from the architecture alone: ``values(arch, num_classes)`` ->
        the value of each of ``names``.
    table : callable, optional
        For a scalar set computed from each architecture's network (it needs an input, a seed
        and a class count, and is worth caching): ``table(archs, source)`` -> per architecture,
        the value of each of ``names`` (:class:`TerminalSource`).
    """

    name: str
    names: Sequence[str]
    kind: str
    description: str
    values: Callable[[Any, int], Mapping[str, float]] | None = None
    table: Callable[[Sequence, "TerminalSource"], list[Mapping[str, float]]] | None = None

    @property
    def summary(self) -> str:
        """The description with its terminals written in for ``{names}``."""
        return self.description.replace("{names}", ", ".join(self.names))

    @property
    def computed(self) -> bool:
        """Whether the set's values come from each architecture's network (``table``), not from its config."""
        return self.table is not None

    @property
    def extras(self) -> tuple[str, ...]:
        """The extra statistics sets (:mod:`autoprox.data.extras`) that hold this set's values."""
        return extras_for(self.names) if self.kind == MATRIX else ()


@dataclass(frozen=True)
class TerminalSource:
    """What a computed scalar set (:attr:`TerminalSet.table`) needs: the network's input, seed and
    class count (those of the statistics it goes with), where its values are cached (None: not
    cached) and how many workers compute them (a count or an executor)."""

    spec: InputSpec
    seed: int
    num_classes: int
    cache_root: Path | str | None = None
    workers: Any = 1
    progress: Callable[[int, int], None] | None = None
    #: The terminals wanted (None: every one of the set): a genome that reads one zoo terminal
    #: needs that proxy's passes alone.
    names: tuple[str, ...] | None = None


#: Terminal sets by name, in registration order (the order of a space's inputs).
TERMINAL_SETS: Registry[str, TerminalSet] = Registry("terminal set", unknown=GenomeError,
                                                     describe=lambda terminal_set: terminal_set.summary)

#: The paper's terminals: the eight statistics.
PAPER_TERMINALS: tuple[str, ...] = ("stats",)


def register_terminal_set(terminal_set: TerminalSet) -> TerminalSet:
    """Add ``terminal_set`` to :data:`TERMINAL_SETS`; returns it.

    Raises
    ------
    RegistryError
        A taken set name.
    ValueError
        A set name that is not a plain name, a terminal name another set has or that a genome
        string cannot spell, an unknown kind, or a scalar set without ``values``.
    """
    TERMINAL_SETS.check_free(terminal_set.name)
    if not _NAME.match(terminal_set.name):
        raise ValueError(f"terminal set name {terminal_set.name!r} is not a plain name")
    if terminal_set.kind not in KINDS:
        raise ValueError(f"terminal set {terminal_set.name}: kind must be one of {', '.join(KINDS)}")
    if not terminal_set.names or len(set(terminal_set.names)) != len(terminal_set.names):
        raise ValueError(f"terminal set {terminal_set.name}: needs distinct terminal names")
    taken = terminal_kinds()
    for name in terminal_set.names:
        if not _NAME.match(name) or name in taken:
            raise ValueError(f"terminal set {terminal_set.name}: terminal {name!r} is taken or not a plain name")
    if terminal_set.kind == SCALAR and (terminal_set.values is None) == (terminal_set.table is None):
        raise ValueError(f"terminal set {terminal_set.name}: a scalar set needs one of a values or a table function")
    if terminal_set.kind == MATRIX and (terminal_set.values is not None or terminal_set.table is not None):
        raise ValueError(f"terminal set {terminal_set.name}: a matrix set's values are in the statistics cache")
    return TERMINAL_SETS.add(terminal_set.name, terminal_set)


def terminal_kinds() -> dict[str, str]:
    """Every registered terminal -> its kind (:data:`MATRIX` or :data:`SCALAR`)."""
    return {name: ts.kind for ts in TERMINAL_SETS.values() for name in ts.names}


def check_terminals(names: Iterable[str]) -> tuple[str, ...]:
    """Terminal-set names checked, without repeats, in registration order.

    Raises
    ------
    GenomeError
        An unknown set (naming the known ones), a string or non-sequence, or no set of
        per-block statistics among them (each block needs one to reduce).
    """
    if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
        raise GenomeError(f"terminals must be a sequence of terminal-set names, got {names!r}"[:200])
    given = list(names)
    for name in given:
        TERMINAL_SETS.lookup(name)
    chosen = tuple(name for name in TERMINAL_SETS if name in given)
    if not any(TERMINAL_SETS[name].kind == MATRIX for name in chosen):
        matrix = ", ".join(name for name, ts in TERMINAL_SETS.items() if ts.kind == MATRIX)
        raise GenomeError(f"{', '.join(chosen) or 'no terminal set'} alone: at least one set of per-block "
                          f"statistics ({matrix}) is needed")
    return chosen


def terminals_of(sets: Iterable[str]) -> tuple[str, ...]:
    """The terminal names of the sets ``sets`` (registered names), set after set."""
    return tuple(name for set_name in sets for name in TERMINAL_SETS[set_name].names)


def architecture_values(arch: Any, num_classes: int = 100, sets: Iterable[str] | None = None) -> dict[str, float]:
    """The values of every scalar terminal of ``sets`` (default: every registered scalar set) that the
    architecture alone gives, for ``arch`` (a computed set, :attr:`TerminalSet.computed`, is left out:
    :func:`terminal_table` gives it)."""
    chosen = TERMINAL_SETS if sets is None else {name: TERMINAL_SETS[name] for name in sets}
    values: dict[str, float] = {}
    for ts in chosen.values():
        if ts.kind == SCALAR and ts.values is not None:
            values.update(ts.values(arch, num_classes))
    return values


def computed_sets(names: Iterable[str]) -> tuple[str, ...]:
    """The computed scalar sets (:attr:`TerminalSet.computed`) that hold any of the terminals or sets ``names``."""
    wanted = set(names)
    return tuple(name for name, ts in TERMINAL_SETS.items()
                 if ts.computed and (name in wanted or wanted.intersection(ts.names)))


def terminal_table(archs: Sequence, source: TerminalSource | None = None, computed: Iterable[str] = (),
                   num_classes: int = 100) -> list[dict[str, float]]:
    """Per architecture of ``archs``, its scalar terminal values: every set the architecture alone gives
    (:func:`architecture_values`, with a ``num_classes`` head), and the computed sets ``computed``
    (names of registered sets; :func:`computed_sets` finds those a genome reads) from ``source``.

    Raises
    ------
    ValueError
        A computed set asked for without a source.
    """
    rows = [architecture_values(arch, num_classes) for arch in archs]
    for name in computed:
        ts = TERMINAL_SETS[name]
        if source is None:
            raise ValueError(f"terminal set {name} is computed from the networks: it needs a TerminalSource")
        for row, values in zip(rows, ts.table(archs, source), strict=True):
            row.update(values)
    return rows


register_terminal_set(TerminalSet("stats", tuple(STAT_NAMES), MATRIX,
                                  "the eight per-block statistics of the paper (F1 ... F4g)"))
register_terminal_set(TerminalSet("spread", tuple(SPREAD_NAMES), MATRIX,
                                  "the spread over the batch's samples (S1g, S2g, S3g: per-sample weight gradients; "
                                  "S4, S4g: the MLP hidden activation and its gradient), in extra cache entries"))
register_terminal_set(TerminalSet("arch", tuple(terminal_names()), SCALAR,
                                  "architecture-level scalars: parameter count, MACs, depth, width, heads, MLP ratio "
                                  "and their logarithms", values=terminal_values))
