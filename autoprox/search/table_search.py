"""The search of a weighted formula on a table's columns, from its labelled rows.

A user with a proxy table (``id``, accuracies, proxy columns; :mod:`autoprox.data.proxy_tables`) and the trained
accuracy of some of its architectures wants a proxy that ranks the rest. The proxy searched here is a weighted
formula (:mod:`autoprox.genome.weighted`): the centred ranks of the table's columns, a fixed basis beside them
(``ffx`` by default: hinges of each column's rank and minima of pairs of ranks) and evolved nonlinear terms, the
weights fitted by bagged ridge on the labelled rows (:mod:`autoprox.proxies.weighted_fit`).

The terms are evolved by the engine's evolution (:mod:`autoprox.search.evolution`, Algorithm 1,
elitism-preserving) over a :class:`~autoprox.genome.weighted.WeightedSpace`; a genome's fitness is the
out-of-bag R^2 of its bagged ridge (:class:`WeightedFitness`). The genome of no term, ``weighted()`` (the ridge
fit of the columns and the basis), is always in the first population, so the search starts where that fit ends.

How many terms the proxy may keep is chosen by inner cross-validation on the labelled rows
(:func:`choose_term_cap`): on each of ``inner_folds`` folds the evolution runs on the other folds' rows, the best
genome with at most ``c`` terms for each ``c`` of ``term_caps`` is fitted there and predicts the fold; the cap
whose pooled out-of-fold predictions rank the labels best is kept (ties: fewer terms). With few labels it is
often 0: the proxy is then the ridge fit itself, never worse by a choice made on noise. The penalty is chosen by
leave-one-out in every fit. All randomness comes from ``seed``.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Mapping, Sequence

import numpy as np

from autoprox.core.correlation import kendall as tau_b, kendall_null_sd
from autoprox.core.errors import BenchmarkError, ConfigError
from autoprox.core.numbers import format_float
from autoprox.core.parallel import blas_threads
from autoprox.genome.rank_formula import Node, RankFormula
from autoprox.genome.weighted import (BASES, WeightedFormula, WeightedGenome, WeightedSpace, basis_members,
                                      parse_weighted)
from autoprox.proxies.weighted_fit import BaggedRidge, label_ranks, ridge_loo, subsamples, usable_columns
from autoprox.search.evolution import (EvolutionConfig, EvolutionState, evolve_step, initial_population,
                                       rng_from_json, rng_state_to_json)
from autoprox.search.fitness import FitnessRecord, MemoisedFitness

__all__ = ["FEW_LABELS", "MIN_LABELS", "SIGNAL_LEVEL", "TableFit", "TableSearchSettings", "WeightedFitness",
           "LabelledTable", "chance_p_value", "check_labels", "choose_term_cap", "fit_table_proxy", "held_out_signal",
           "search_table"]

#: Fewest labelled rows a table search learns from.
MIN_LABELS = 10

#: Below this many labelled rows the out-of-bag Kendall of the best genome (chosen among many by that very
#: figure) is said to be optimistic.
FEW_LABELS = 20

#: A table search warns when its held-out Kendall is not above chance at this one-sided level (p >= it).
SIGNAL_LEVEL = 0.05

#: The fitness a table search's records name (what ``objective`` says in ``evaluations.jsonl``).
OBJECTIVE = "oob-r2"


@dataclass(frozen=True)
class TableSearchSettings:
    """A table search's whole configuration (what its ``config.json`` records).

    Parameters
    ----------
    population, iterations : int
        The evolution's population and iterations (Algorithm 1) of the final search; the inner folds' searches
        use the same.
    max_terms, max_term_size : int
        The most evolved terms a genome holds, and the most nodes of one term.
    term_caps : tuple of int
        The caps on the number of terms the inner cross-validation chooses among (0: the ridge fit alone).
    inner_folds : int
        Folds of the labelled rows for that choice.
    bags : int
        Subsamples a genome is fitted on (out-of-bag fitness; the proxy's weights are their mean).
    bag_fraction : float
        The share of the rows each subsample holds.
    max_bag_rows : int or None
        The most rows a subsample holds (None: no bound). With many labelled rows a genome's fits are bounded in
        time, while its out-of-bag predictions still cover every row; the proxy's weights are fitted on every
        labelled row (:meth:`WeightedFitness.fitted`). The default, 200, leaves every search of up to 300 labelled
        rows as it was. A recorded configuration without it (a run of an earlier version) reads as None.
    seed : int
        The one source of randomness (any integer; NumPy reads a negative one modulo 2**64).
    average_top : int
        The proxy averages the fitted formulas of this many best genomes within the cap (1: the best alone).
    cap_margin : float
        A larger cap is kept only when its out-of-fold Kendall exceeds every smaller cap's by this much.
    basis : str
        The fixed members beside the plain columns (:data:`~autoprox.genome.weighted.BASES`): ``ffx``, the hinges
        of each column's rank and the minima of pairs, or ``linear``, none. A recorded configuration without it
        (a run of an earlier version) reads as ``linear``, what that version searched.
    """

    population: int = 20
    iterations: int = 80
    max_terms: int = 4
    max_term_size: int = 5
    term_caps: tuple[int, ...] = (0, 1, 2, 4)
    inner_folds: int = 4
    bags: int = 8
    bag_fraction: float = 2 / 3
    max_bag_rows: int | None = 200
    seed: int = 0
    average_top: int = 5
    cap_margin: float = 0.0
    basis: str = "ffx"

    def __post_init__(self) -> None:
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ConfigError(f"the seed is an integer, got {self.seed!r}")
        self.evolution(self.seed)  # population and iterations, checked and bounded as every search's
        if not self.term_caps or min(self.term_caps) < 0 or max(self.term_caps) > self.max_terms:
            raise ConfigError(f"term caps must lie in 0..{self.max_terms} (max_terms), got {list(self.term_caps)}")
        if self.average_top < 1 or not 0 <= self.cap_margin < 1:
            raise ConfigError(f"average_top must be at least 1 and cap_margin in [0, 1), got {self.average_top} and "
                              f"{self.cap_margin}")
        if self.basis not in BASES:
            raise ConfigError(f"unknown basis {self.basis!r}; known: {', '.join(BASES)}")
        if self.inner_folds < 2 or self.bags < 1 or not 0 < self.bag_fraction < 1:
            raise ConfigError(f"inner folds must be at least 2, bags at least 1 and the bag fraction in (0, 1); got "
                              f"{self.inner_folds}, {self.bags} and {self.bag_fraction}")
        if self.max_bag_rows is not None and (not isinstance(self.max_bag_rows, int)
                                              or isinstance(self.max_bag_rows, bool) or self.max_bag_rows < 3):
            raise ConfigError(f"max_bag_rows must be None or an integer of at least 3, got {self.max_bag_rows!r}")

    def to_json(self) -> dict:
        data = asdict(self)
        data["term_caps"] = list(self.term_caps)
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> "TableSearchSettings":
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        known.setdefault("basis", "linear")
        known.setdefault("max_bag_rows", None)
        if "term_caps" in known:
            known["term_caps"] = tuple(int(c) for c in known["term_caps"])
        return cls(**known)

    def evolution(self, seed: int) -> EvolutionConfig:
        """Algorithm 1's settings for one evolution of this search."""
        return EvolutionConfig(population_size=self.population, iterations=self.iterations, seed=seed,
                               parsimony=True, margin=1e-6)


def check_labels(labels: np.ndarray, columns: Mapping[str, np.ndarray], plain: Sequence[str], where: str,
                 target: str, ids: Sequence[str] | None = None) -> np.ndarray:
    """The indices of the labelled rows (finite label), checked: at least :data:`MIN_LABELS` of them, more than
    one distinct label, and no labelled row whose cells in the columns read (``plain``) are all empty; ``ids``, the
    rows' ids, name such a row.

    Raises
    ------
    BenchmarkError
        In one line naming the table, the target and what is wrong.
    """
    labels = np.asarray(labels, dtype=np.float64)
    labelled = np.flatnonzero(np.isfinite(labels))
    if len(labelled) < MIN_LABELS:
        raise BenchmarkError(f"{where}: target {target!r} has {len(labelled)} labelled row(s); a search needs at "
                             f"least {MIN_LABELS} (a row is labelled when its {target} cell is a number)")
    if np.ptp(labels[labelled]) == 0:
        raise BenchmarkError(f"{where}: target {target!r} has the same value on every labelled row "
                             f"({labels[labelled][0]:g}); a constant target ranks nothing")
    if plain:
        filled = np.zeros(len(labels), dtype=bool)
        for name in plain:
            filled |= np.isfinite(np.asarray(columns[name], dtype=np.float64))
        empty = [int(i) for i in labelled if not filled[i]]
        if empty:
            named = f" (id {ids[empty[0]]!r})" if ids is not None else ""
            more = f", and {len(empty) - 1} more labelled row(s) alike" if len(empty) > 1 else ""
            raise BenchmarkError(f"{where}: labelled row {empty[0] + 1}{named} has no proxy value in the columns read "
                                 f"({', '.join(plain)}){more}; fill its cells or leave its label empty")
    return labelled


@dataclass
class LabelledTable:
    """A table ready for many fits: its columns (every row), the labels (NaN: unlabelled), the plain columns
    read, and each member's values on the labelled rows, computed once. Fits read labelled rows alone, so a member
    is kept on those: on every row, the thousands a search makes would hold the table thousands of times (a
    425,000-row table took 6.6 GB)."""

    columns: Mapping[str, np.ndarray]
    labels: np.ndarray
    plain: tuple[str, ...]
    target: str = "target"
    cache: dict = field(default_factory=dict)
    members: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.labelled = np.flatnonzero(np.isfinite(self.labels))
        self._position = np.full(len(self.labels), -1, dtype=np.int64)
        self._position[self.labelled] = np.arange(len(self.labelled))

    @classmethod
    def make(cls, columns: Mapping[str, np.ndarray], labels: np.ndarray, target: str = "target",
             where: str = "table", ids: Sequence[str] | None = None) -> "LabelledTable":
        columns = {name: np.asarray(values, dtype=np.float64) for name, values in columns.items()}
        plain = tuple(usable_columns(columns))
        if not plain:
            raise BenchmarkError(f"{where}: no proxy column has values on more than half the rows and two distinct "
                                 "values; nothing to rank with")
        labels = np.asarray(labels, dtype=np.float64)
        check_labels(labels, columns, plain, where, target, ids)
        return cls(columns, labels, plain, target)

    def member(self, node, rows: np.ndarray) -> np.ndarray:
        """One member's values on ``rows``, labelled rows of the table (missing columns neutral)."""
        text = str(node)
        if text not in self.members:
            with np.errstate(all="ignore"):
                values = RankFormula(node).score(self.columns, missing="neutral", cache=self.cache)[self.labelled]
            self.members[text] = np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
        positions = self._position[np.asarray(rows, dtype=np.int64)]
        if np.any(positions < 0):
            raise ValueError("a member's values are kept on the labelled rows alone; an unlabelled row was asked for")
        return self.members[text][positions]

    def features(self, genome: WeightedGenome, rows: np.ndarray, basis: Sequence[Node] = ()) -> np.ndarray:
        """The members' values (plain columns, the ``basis``, then the genome's terms) on ``rows``, labelled rows."""
        members = [Node("r", column=name) for name in self.plain] + list(basis) + list(genome.terms)
        return np.column_stack([self.member(node, rows) for node in members])

    def space(self, settings: TableSearchSettings) -> WeightedSpace:
        return WeightedSpace(self.plain, settings.max_terms, settings.max_term_size)


class WeightedFitness(MemoisedFitness):
    """The fitness of weighted genomes on some labelled rows: the out-of-bag R^2 of their bagged ridge
    (:class:`~autoprox.proxies.weighted_fit.BaggedRidge`); the record's ``jcm`` and ``kendall`` hold the out-of-bag
    Kendall."""

    def __init__(self, table: LabelledTable, rows: np.ndarray, bags: Sequence[np.ndarray],
                 basis: Sequence[Node] = ()) -> None:
        self.table, self.rows, self.bags, self.basis = table, np.asarray(rows), list(bags), tuple(basis)
        self.targets = label_ranks(table.labels[self.rows])
        self.fixed = table.features(WeightedGenome(), self.rows, self.basis)
        self.bagged = BaggedRidge(self.fixed, self.targets, self.bags)
        self.memo, self.seconds, self.evaluations = {}, 0.0, 0
        self.counted = None

    def canonical_of(self, genome: WeightedGenome) -> str:
        return genome.canonical

    def _evaluate(self, genome: WeightedGenome, canonical: str) -> FitnessRecord:
        judged = self.bagged.judge(self.terms(genome))
        valid = math.isfinite(judged.r2)
        return FitnessRecord(str(genome), canonical, valid, jcm=judged.kendall,
                             kendall={self.table.target: judged.kendall},
                             reason="" if valid else "no out-of-bag prediction",
                             fitness=round(judged.r2, 9) if valid else -math.inf, objective=OBJECTIVE,
                             fitness_targets={self.table.target: judged.r2})

    def close(self) -> None:
        """Nothing to release (the interface of the engine's evaluators)."""

    def terms(self, genome: WeightedGenome) -> np.ndarray | None:
        """The genome's terms' values on the evaluator's rows (None: no term)."""
        if not genome.terms:
            return None
        return np.column_stack([self.table.member(term, self.rows) for term in genome.terms])

    def features(self, genome: WeightedGenome) -> np.ndarray:
        """The members' values on the evaluator's rows: the plain columns and the basis (computed once), then the
        genome's terms."""
        terms = self.terms(genome)
        return self.fixed if terms is None else np.hstack([self.fixed, terms])

    def fitted(self, genome: WeightedGenome) -> WeightedFormula:
        """The genome's proxy: its ridge fit on every row of the evaluator (the penalty by leave-one-out)."""
        model = ridge_loo(self.features(genome), self.targets)
        return WeightedFormula(self.table.plain, genome.terms, tuple(float(w) for w in model.weights),
                               float(model.intercept), basis=self.basis)


def _generator(seed: int) -> np.random.Generator:
    """NumPy's generator for ``seed``: a negative seed (which NumPy refuses, and the evolution's ``random.Random``
    takes) is read modulo 2**64, so that every integer seed gives one reproducible search."""
    return np.random.default_rng(seed % 2**64 if seed < 0 else seed)


def evolve(table: LabelledTable, rows: np.ndarray, settings: TableSearchSettings, seed: int,
           on_evaluation: Callable[[FitnessRecord, int], None] | None = None,
           on_iteration: Callable[[EvolutionState, dict], None] | None = None,
           state: EvolutionState | None = None, evaluator: WeightedFitness | None = None
           ) -> tuple[WeightedFitness, EvolutionState]:
    """The evolution of terms on ``rows`` (Algorithm 1 of :mod:`autoprox.search.evolution`), from ``state`` when
    given (a resumed run), else from a first population holding the linear member ``weighted()``."""
    config = settings.evolution(seed)
    space = table.space(settings)
    if evaluator is None:
        bags = subsamples(len(rows), settings.bags, settings.bag_fraction, _generator(seed), settings.max_bag_rows)
        evaluator = WeightedFitness(table, rows, bags, basis_members(table.plain, settings.basis))
    if state is None:
        rng = random.Random(seed)
        population, fresh, invalid = initial_population(evaluator, config, rng, [str(WeightedGenome())],
                                                        on_evaluation, space=space)
        state = EvolutionState(0, population, rng_state_to_json(rng), fresh, invalid)
    else:
        rng = rng_from_json(state.rng_state)
    while state.iteration < config.iterations:
        record = evolve_step(state, evaluator, config, rng, on_evaluation, space=space)
        if on_iteration is not None:
            on_iteration(state, record)
    return evaluator, state


def best_within(records: Sequence[FitnessRecord], cap: int, count: int = 1) -> list[FitnessRecord]:
    """The ``count`` records of highest fitness among the valid genomes of at most ``cap`` terms, best first (ties:
    fewer nodes, then the text)."""
    kept = [(r, genome) for r in records if r.valid for genome in (parse_weighted(r.genome),) if len(genome) <= cap]
    kept.sort(key=lambda item: (-item[0].fitness, item[1].size, item[0].canonical))
    return [record for record, _ in kept[:count]]


def averaged(formulas: Sequence[WeightedFormula]) -> WeightedFormula:
    """The mean of weighted formulas over the same plain columns and basis: one formula over the union of their
    terms (a term's weight is its mean over the formulas, 0 where one lacks it)."""
    if len(formulas) == 1:
        return formulas[0]
    plain, basis = formulas[0].plain, formulas[0].basis
    fixed = len(plain) + len(basis)
    terms = {str(term): term for formula in formulas for term in formula.terms}
    order = sorted(terms)
    weights = np.zeros(fixed + len(order))
    for formula in formulas:
        weights[:fixed] += formula.weights[:fixed]
        for term, weight in zip(formula.terms, formula.weights[fixed:]):
            weights[fixed + order.index(str(term))] += weight
    weights /= len(formulas)
    intercept = float(np.mean([f.intercept for f in formulas]))
    return WeightedFormula(plain, tuple(terms[t] for t in order), tuple(float(w) for w in weights), intercept,
                           basis=basis)


def fitted_top(evaluator: "WeightedFitness", cap: int, count: int) -> tuple[WeightedFormula, FitnessRecord]:
    """The proxy of an evolution: the mean of the fitted formulas of its ``count`` best genomes within ``cap``,
    and the best one's record."""
    records = best_within(list(evaluator.memo.values()), cap, count)
    return averaged([evaluator.fitted(WeightedGenome(_terms(r))) for r in records]), records[0]


@dataclass(frozen=True)
class CapChoice:
    """The inner cross-validation's figures per cap (pooled out-of-fold Kendall) and the cap chosen."""

    cap: int
    kendall: dict[int, float]

    def to_json(self) -> dict:
        return {"cap": self.cap, "out_of_fold_kendall": {str(c): v for c, v in self.kendall.items()}}

    def describe(self, figures: bool = True) -> str:
        """How the cap was chosen, as the search's summary and ``show`` say it: by the inner cross-validation
        (with its figures unless ``figures`` is False), or by none (:func:`runs_inner_cv` false: nothing evolved
        to choose among)."""
        if not self.kendall:
            return f"no inner cross-validation ran, nothing evolved to choose among: at most {self.cap} terms"
        return (f"terms kept by inner cross-validation: at most {self.cap}" + (" (out-of-fold Kendall by cap: "
                + ", ".join(f"{c}: {format_float(v)}" for c, v in self.kendall.items()) + ")" if figures else ""))

    @classmethod
    def from_json(cls, data: Mapping) -> "CapChoice":
        """The choice :meth:`to_json` wrote (a checkpoint's or a ``best.json``'s ``inner_cv``)."""
        return cls(int(data["cap"]), {int(c): float(v) for c, v in data["out_of_fold_kendall"].items()})


def runs_inner_cv(settings: TableSearchSettings) -> bool:
    """Whether :func:`choose_term_cap` cross-validates: there are caps to choose among and iterations to evolve
    terms in."""
    return sorted(set(settings.term_caps)) != [0] and settings.iterations > 0


@blas_threads(1)
def choose_term_cap(table: LabelledTable, settings: TableSearchSettings,
                    progress: Callable[..., None] | None = None) -> CapChoice:
    """The cap on the number of terms whose genomes, evolved and fitted on the other folds, rank each inner fold
    best (pooled out-of-fold Kendall; ties: the smaller cap). ``progress(done, total, note)``: the iterations of
    every fold's evolution, done and in all, and which fold runs. Its many small ridge fits run on one BLAS thread
    (:func:`~autoprox.core.parallel.blas_threads`), as :func:`search_table`'s do."""
    caps = sorted(set(settings.term_caps))
    if not runs_inner_cv(settings):
        return CapChoice(0 if 0 in caps else caps[0], {})
    rows = table.labelled
    order = _generator(settings.seed + 1).permutation(len(rows))
    folds = np.array_split(order, settings.inner_folds)
    predictions = {cap: np.full(len(rows), np.nan) for cap in caps}
    for index, fold in enumerate(folds):
        train = np.setdiff1d(np.arange(len(rows)), fold)
        ticker = None
        if progress:
            def ticker(state, _record, before=index * settings.iterations, fold_number=index + 1):
                progress(before + state.iteration, len(folds) * settings.iterations, f"fold {fold_number}/{len(folds)}")
        evaluator, _ = evolve(table, rows[train], settings, settings.seed + 100 + index, on_iteration=ticker)
        for cap in caps:
            formula, _ = fitted_top(evaluator, cap, settings.average_top)
            predictions[cap][fold] = formula.score(table.columns, cache=table.cache)[rows[fold]]
    truth = table.labels[rows]
    kendall = {cap: tau_b(values, truth) for cap, values in predictions.items()}
    kendall = {cap: (value if math.isfinite(value) else -1.0) for cap, value in kendall.items()}
    best = caps[0]
    for cap in caps[1:]:
        if kendall[cap] > max(kendall[c] for c in caps if c < cap) + settings.cap_margin + 1e-9 \
                and kendall[cap] > kendall[best]:
            best = cap
    return CapChoice(best, kendall)


def chance_p_value(tau: float, rows: int) -> float:
    """The one-sided p-value of a Kendall tau at least ``tau`` between ``rows`` pairs of independent values: the
    normal approximation of its null distribution, ``z = tau / kendall_null_sd(n)`` (no ties)."""
    if rows < 2 or not math.isfinite(tau):
        return 1.0
    return 0.5 * math.erfc(tau / kendall_null_sd(rows) / math.sqrt(2.0))


def held_out_signal(choice: CapChoice, out_of_bag_kendall: float, rows: int) -> tuple[str, float, float]:
    """The proxy's held-out Kendall on the ``rows`` labelled rows, what it is, and its :func:`chance_p_value`.

    The figure is the inner cross-validation's pooled out-of-fold Kendall of the cap kept: each row is predicted by
    proxies evolved and fitted without it. The best genome's out-of-bag Kendall is not: that genome was chosen
    among all those evaluated by its out-of-bag fit, so on a target of pure noise it is often well above 0. Where
    no inner cross-validation ran (a single cap of 0, or no iterations), the proxy's ``out_of_bag_kendall`` is the
    figure (with a cap of 0 it is the ridge fit of the columns, which nothing chose).
    """
    if choice.cap in choice.kendall:
        tau, what = choice.kendall[choice.cap], "out-of-fold Kendall of the inner cross-validation"
    else:
        tau, what = out_of_bag_kendall, "out-of-bag Kendall"
    return what, float(tau), chance_p_value(float(tau), rows)


def _terms(record: FitnessRecord):
    return parse_weighted(record.genome).terms


@dataclass(frozen=True)
class TableFit:
    """A finished table search: the proxy, the genome it fits, the cap chosen, and the final evolution's
    evaluator (its memo holds every genome evaluated)."""

    formula: WeightedFormula
    record: FitnessRecord
    choice: CapChoice
    evaluator: WeightedFitness
    state: EvolutionState


@blas_threads(1)
def search_table(table: LabelledTable, settings: TableSearchSettings = TableSearchSettings(),
                 on_evaluation: Callable[[FitnessRecord, int], None] | None = None,
                 on_iteration: Callable[[EvolutionState, dict], None] | None = None,
                 progress: Callable[..., None] | None = None, choice: CapChoice | None = None,
                 state: EvolutionState | None = None, remembered: Sequence[FitnessRecord] = ()) -> TableFit:
    """The whole search: the cap by inner cross-validation (or ``choice``, a resumed run's), then the evolution on
    every labelled row (from ``state`` with the ``remembered`` records when resuming), and the best genome within
    the cap fitted as the proxy. Its many small ridge fits run on one BLAS thread
    (:func:`~autoprox.core.parallel.blas_threads`): more threads slow them down, by 13 times on a busy 2-core
    machine."""
    if choice is None:
        choice = choose_term_cap(table, settings, progress)
    evaluator = None
    if state is not None:
        bags = subsamples(len(table.labelled), settings.bags, settings.bag_fraction,
                          _generator(settings.seed), settings.max_bag_rows)
        evaluator = WeightedFitness(table, table.labelled, bags, basis_members(table.plain, settings.basis))
        evaluator.remember(remembered)
    evaluator, state = evolve(table, table.labelled, settings, settings.seed, on_evaluation, on_iteration, state,
                              evaluator)
    formula, record = fitted_top(evaluator, choice.cap, settings.average_top)
    return TableFit(formula, record, choice, evaluator, state)


def fit_table_proxy(columns: Mapping[str, np.ndarray], labels: np.ndarray, seed: int = 0,
                    settings: TableSearchSettings | None = None) -> np.ndarray:
    """The engine's few-label method: search a weighted formula on the rows whose label is finite, and score every
    row with it (higher: predicted better).

    Parameters
    ----------
    columns : mapping of str to ndarray
        The table's proxy columns, every row (raw values, NaN = not measured).
    labels : ndarray
        The target on every row, NaN where unlabelled.
    seed : int
        The search's seed (replaces ``settings.seed``).
    """
    settings = replace(settings or TableSearchSettings(), seed=seed)
    table = LabelledTable.make(columns, labels)
    fit = search_table(table, settings)
    return fit.formula.score(table.columns, cache=table.cache)
