"""Searching rank formulas over several labelled spaces at once.

A rank formula (:mod:`autoprox.genome.rank_formula`) is scored on a space by the mean Kendall
over the space's (table, target) pairs; a search over N spaces maximises an **objective**
that aggregates the N per-space figures (an objective over spaces of the one objective registry,
:data:`autoprox.search.objectives.OBJECTIVES`: ``mean``; ``worst``, the worst case over spaces; ``margin``,
the worst lead over the better size count of each space; :func:`space_value`), less a small parsimony
pressure per node. The evolution is the engine's (Algorithm 1 of
:mod:`autoprox.search.evolution`, elitism-preserving) over a
:class:`~autoprox.genome.formula_variation.RankFormulaSpace`: children by subtree crossover with a
member of the sample's top, subtree mutation and point mutation. All randomness comes from one
``random.Random(seed)``.

Terminals are the standard proxy columns the training spaces offer (``lr(X)`` and ``z(X)``).
A space that lacks a column a formula reads scores it as no information (``missing =
"neutral"``, the default), so every formula is scored on every space; or, with ``missing =
"skip"``, the formula's objective leaves that space out, and a formula must be scored on all
training spaces but one, and on two at least (:data:`MISSING_POLICIES`).

The search is scored on at most ``max_rows`` rows of each table (a seeded draw, the same for
every formula of one search), so a 9,445-row table costs what a 1,500-row one does; the
figures a protocol reports are computed on every row (:func:`space_figure`).

Two simpler searchers share the objective: :func:`best_single` (the single standard proxy with
the best objective) and :func:`greedy_lrsum` (the AZ-NAS log-rank sum over the subset of
proxies chosen by forward selection).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Sequence

import numpy as np

from autoprox.core.correlation import kendall_or_zero
from autoprox.core.errors import ConfigError
from autoprox.data.proxy_tables import STANDARD_PROXIES, TableSpace
from autoprox.genome.formula_variation import RankFormulaSpace
from autoprox.genome.rank_formula import Node, RankFormula, parse_formula
from autoprox.search.evolution import EvolutionConfig, EvolutionState, evolve_step, initial_population, rng_state_to_json
from autoprox.search.fitness import FitnessRecord, MemoisedFitness
from autoprox.search.objectives import Objective, space_objective

__all__ = ["MISSING_POLICIES", "PreparedSpace", "RankSearchSettings", "SearchOutcome", "best_single", "figures_on",
           "greedy_lrsum", "prepare_spaces", "search_rank_formula", "space_figure", "space_leads",
           "space_value"]

#: How a search treats a training space lacking a column a formula reads: ``neutral`` scores the column as
#: no information there; ``skip`` leaves the space out of that formula's objective (at most one space, and
#: two are kept at least). Scoring one formula on one table has its own rule
#: (:data:`autoprox.genome.rank_formula.MISSING_COLUMN_SCORING`).
MISSING_POLICIES = ("neutral", "skip")

def space_leads(per_space: dict[str, float], prepared: Sequence["PreparedSpace"], against_size: bool) -> list[float]:
    """A formula's figures per space (keyed by name, the spaces of ``prepared``), or with ``against_size`` each
    space's lead over its better size count (``r(params)`` or ``r(flops)``, whichever ranks that space better; a
    lead, so a formula is judged by what it adds to the parameter count on every space)."""
    if not against_size:
        return list(per_space.values())
    sizes = {p.name: p.size_figure for p in prepared}
    return [value - sizes[name] for name, value in per_space.items()]


def space_value(objective: Objective, per_space: dict[str, float], prepared: Sequence["PreparedSpace"]) -> float:
    """The objective over spaces ``objective`` of a formula's figures per space (:func:`space_leads`)."""
    return objective.over(space_leads(per_space, prepared, objective.against_size))


@dataclass
class PreparedSpace:
    """A space ready for scoring many formulas: per table, its columns, its targets' accuracies
    (rows drawn once) and a cache of transformed columns."""

    name: str
    tables: list[tuple[dict[str, np.ndarray], list[np.ndarray], dict]] = field(default_factory=list)

    def has_columns(self, formula: RankFormula) -> bool:
        """Whether every table of the space has every column ``formula`` reads."""
        return all(name in columns for columns, _, _ in self.tables for name in formula.columns)

    @cached_property
    def size_figure(self) -> float:
        """The better figure of ``r(params)`` and ``r(flops)`` on this space (of those every table has; 0 with
        neither), computed once."""
        sizes = [self.figure(RankFormula(Node("r", column=name))) for name in ("params", "flops")
                 if all(name in columns for columns, _, _ in self.tables)]
        return max(sizes) if sizes else 0.0

    def figure(self, formula: RankFormula) -> float:
        """The mean Kendall over the space's (table, target) pairs, missing columns neutral."""
        values = []
        for columns, accuracies, cache in self.tables:
            scores = formula.score(columns, missing="neutral", cache=cache)
            values.extend(kendall_or_zero(scores, accuracy) for accuracy in accuracies)
        return float(np.mean(values))


def prepare_spaces(spaces: Sequence[TableSpace], max_rows: int | None, rng: random.Random) -> list[PreparedSpace]:
    """Each space's tables with at most ``max_rows`` rows each (drawn with ``rng``; None: every row)."""
    prepared = []
    for space in spaces:
        entry = PreparedSpace(space.name)
        for table, targets in zip(space.tables, space.targets):
            rows = np.arange(len(table))
            if max_rows is not None and len(table) > max_rows:
                rows = np.sort(np.asarray(rng.sample(range(len(table)), max_rows)))
            columns = {name: values[rows] for name, values in table.proxies.items()}
            entry.tables.append((columns, [table.accuracies[t][rows] for t in targets], {}))
        prepared.append(entry)
    return prepared


def space_figure(formula: RankFormula, space: TableSpace) -> float:
    """The space's figure of ``formula`` on every row (missing columns neutral)."""
    return prepare_spaces([space], None, random.Random(0))[0].figure(formula)


def figures_on(formula: RankFormula, prepared: Sequence[PreparedSpace], missing: str = "neutral"
               ) -> dict[str, float] | None:
    """The formula's figure on each prepared space. With ``missing="skip"``, only on the spaces that have
    every column it reads, and None when that leaves out more than one of them or keeps fewer than two."""
    if missing == "skip":
        kept = [p for p in prepared if p.has_columns(formula)]
        if len(kept) < min(len(prepared), max(2, len(prepared) - 1)):
            return None
        prepared = kept
    return {p.name: p.figure(formula) for p in prepared}


# ------------------------------------------------------------------------- the evolution
@dataclass(frozen=True)
class RankSearchSettings:
    """A rank-formula search's whole configuration (what ``protocol.json`` records).

    Parameters
    ----------
    objective : str
        An objective over spaces of :data:`autoprox.search.objectives.OBJECTIVES` (``mean``, ``worst``,
        ``margin``, any registered kind of scope ``spaces``).
    population, iterations : int
        The evolution's population and iterations (Algorithm 1 of :mod:`autoprox.search.evolution`). The
        default 100 iterations evaluate about as many distinct formulas (594 on average over the default
        N-space protocol's 25 searches) as the generational search that came before (48 x 25 generations:
        556).
    max_size : int
        The most nodes a formula may have.
    parsimony : float
        Subtracted from the objective per node.
    max_rows : int
        Rows of each table the search scores on (a seeded draw).
    transforms : tuple of str
        The transforms terminals use.
    missing : str
        A key of :data:`MISSING_POLICIES`: how a training space lacking a column a formula reads counts.
    """

    objective: str = "worst"
    population: int = 48
    iterations: int = 100
    max_size: int = 9
    parsimony: float = 0.002
    max_rows: int = 1500
    transforms: tuple[str, ...] = ("lr", "z")
    missing: str = "neutral"

    def check(self) -> "RankSearchSettings":
        space_objective(self.objective)
        EvolutionConfig(population_size=self.population, iterations=self.iterations)  # bounded as every search's
        if min(self.iterations, self.max_size, self.max_rows) < 1:
            raise ConfigError("iterations, max_size and max_rows must be positive")
        if self.missing not in MISSING_POLICIES:
            raise ConfigError(f"unknown missing-column policy {self.missing!r}; known: {', '.join(MISSING_POLICIES)}")
        return self


@dataclass
class SearchOutcome:
    """A search's hall of fame: ``(fitness, formula text, per-space figures)``, best first."""

    hall_of_fame: list[tuple[float, str, dict[str, float]]]
    evaluations: int

    @property
    def best(self) -> str:
        return self.hall_of_fame[0][1]


def _terminals(spaces: Sequence[TableSpace], transforms: Sequence[str], columns: Sequence[str] | None = None
               ) -> list[Node]:
    offered = [name for name in STANDARD_PROXIES if any(name in t.proxies for s in spaces for t in s.tables)
               and (columns is None or name in columns)]
    if not offered:
        raise ConfigError("the training spaces share no standard proxy column to build formulas from")
    return [Node(transform, column=name) for name in offered for transform in transforms]


class SpaceFitness(MemoisedFitness):
    """The fitness of rank formulas on prepared training spaces: the objective of their per-space figures less
    ``parsimony`` per node (rounded, so that the last bits of a logarithm on another CPU cannot reorder two
    formulas); a formula skipped on too many spaces (``missing="skip"``) is no candidate (invalid)."""

    def __init__(self, prepared: Sequence[PreparedSpace], settings: "RankSearchSettings") -> None:
        self.prepared, self.settings = list(prepared), settings
        self.objective = space_objective(settings.objective)
        self.memo, self.seconds, self.evaluations = {}, 0.0, 0

    def canonical_of(self, tree: Node) -> str:
        """The memo's key: the formula's text (two trees of one text score alike)."""
        return str(tree)

    def _evaluate(self, tree: Node, canonical: str) -> FitnessRecord:
        per_space = figures_on(RankFormula(tree), self.prepared, self.settings.missing)
        if per_space is None:
            return FitnessRecord(canonical, canonical, False, reason="skipped on more than one training space")
        value = round(space_value(self.objective, per_space, self.prepared) - self.settings.parsimony * tree.size, 9)
        return FitnessRecord(canonical, canonical, True, jcm=value, kendall=dict(per_space), fitness=value,
                             objective=self.settings.objective)


def search_rank_formula(spaces: Sequence[TableSpace], seed: int, settings: RankSearchSettings = RankSearchSettings(),
                        seeds: Sequence[str] = (), progress: Callable[[int, int], None] | None = None,
                        keep: int = 20, columns: Sequence[str] | None = None) -> SearchOutcome:
    """Evolve rank formulas on ``spaces`` (the training spaces) with the engine's evolution (Algorithm 1 of
    :mod:`autoprox.search.evolution`, elitism-preserving) and return the hall of fame.

    Parameters
    ----------
    spaces : sequence of TableSpace
        The labelled spaces the search may read the labels of.
    seed : int
        The one source of randomness (the row draw and the evolution).
    settings : RankSearchSettings
        The configuration.
    seeds : sequence of str
        Formulas put in the first population (e.g. the log-rank sum of every proxy); one over
        ``settings.max_size`` nodes is left out.
    keep : int
        How many distinct formulas the hall of fame keeps.
    columns : sequence of str, optional
        The only proxy columns formulas may read (the protocol gives those the left-out space has:
        which columns a space offers is not a label).
    """
    settings.check()
    rng = random.Random(seed)
    prepared = prepare_spaces(spaces, settings.max_rows, rng)
    space = RankFormulaSpace(tuple(_terminals(spaces, settings.transforms, columns)), settings.max_size)
    evaluator = SpaceFitness(prepared, settings)
    config = EvolutionConfig(population_size=settings.population, iterations=settings.iterations, seed=seed,
                             margin=0.0)
    kept = [text for text in seeds if parse_formula(text).root.size <= settings.max_size]
    population, fresh, invalid = initial_population(evaluator, config, rng, kept, space=space)
    state = EvolutionState(0, population, rng_state_to_json(rng), fresh, invalid)
    while state.iteration < config.iterations:
        evolve_step(state, evaluator, config, rng, space=space)
        if progress:
            progress(state.iteration, config.iterations)
    best = sorted((r for r in evaluator.memo.values() if r.valid), key=lambda r: (-r.fitness, r.genome))[:keep]
    return SearchOutcome([(r.fitness, r.genome, dict(r.kendall)) for r in best], len(evaluator.memo))


# ------------------------------------------------------------------------- simpler searchers
def _objective_on(formula: RankFormula, prepared: Sequence[PreparedSpace], objective: str) -> float:
    return space_value(space_objective(objective), {p.name: p.figure(formula) for p in prepared}, prepared)


def best_single(spaces: Sequence[TableSpace], objective: str = RankSearchSettings.objective,
                candidates: Sequence[str] = STANDARD_PROXIES) -> tuple[str, float]:
    """The standard proxy whose ``r(X)`` has the best objective on ``spaces`` (every row), and that value.
    Proxies every space has are the candidates (a single proxy a space lacks cannot rank it), or, when no
    candidate is in every space, those any space has."""
    prepared = prepare_spaces(spaces, None, random.Random(0))
    shared = [c for c in candidates if all(c in t.proxies for s in spaces for t in s.tables)]
    if not shared:  # then those some space has: a space without one scores it as no information
        shared = [c for c in candidates if any(c in t.proxies for s in spaces for t in s.tables)]
    if not shared:
        raise ConfigError("the training spaces have none of the candidate proxy columns")
    values = {name: _objective_on(RankFormula(Node("r", column=name)), prepared, objective) for name in shared}
    name = max(shared, key=lambda n: (values[n], -shared.index(n)))
    return name, values[name]


def greedy_lrsum(spaces: Sequence[TableSpace], objective: str = RankSearchSettings.objective,
                 candidates: Sequence[str] = STANDARD_PROXIES) -> tuple[str, float]:
    """Forward selection of the columns of an AZ-NAS log-rank sum on ``spaces`` (every row): start from
    the best single column, add the column that raises the objective most, stop when none does.
    Returns the formula text and its objective."""
    prepared = prepare_spaces(spaces, None, random.Random(0))
    offered = [c for c in candidates if any(c in t.proxies for s in spaces for t in s.tables)]
    chosen: list[str] = []
    best_value = -math.inf
    while True:
        trials = {c: _objective_on(RankFormula(Node("lrsum", columns=tuple(chosen + [c]))), prepared, objective)
                  for c in offered if c not in chosen}
        if not trials:
            break
        column = max(trials, key=lambda c: (trials[c], -offered.index(c)))
        if trials[column] <= best_value + 1e-9:
            break
        chosen.append(column)
        best_value = trials[column]
    return f"lrsum({', '.join(chosen)})", best_value

