"""Fitness: how well a genome's scores rank architectures by their true accuracies.

A genome is scored on cached statistics only (never by re-running a network), by one
evaluator strategy (:mod:`autoprox.search.evaluators`: exact, counted or sharded), and its
fitness is one objective's figure of those scores (:mod:`autoprox.search.objectives`:
``jcm``, the paper's, by default; ``partial:BASE`` or ``combined:BASE[:W]`` beyond a
descriptor base; any of them cross-validated). :class:`FitnessEvaluator` is the memo around
the two: results are kept by the genome's canonical form. A genome is invalid when any
architecture's score is NaN or inf, a shape does not fit, all scores are equal, a target's
Kendall is undefined or the objective is.

A record (:class:`FitnessRecord`) keeps its ``fitness`` (what evolution and the hall of fame
compare) and its ``jcm`` (always the plain JCM on all the architectures) apart; with the
paper's setting the two are equal and the record's JSON holds the JCM alone, as it always did.
Records written before the two were kept apart (``jcm`` holding the fitness, ``plain_jcm``,
``jcm_all``, ``fold_jcm``, ``fitness`` naming the mode) are converted on reading
(:meth:`FitnessRecord.from_json`).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from autoprox.core.errors import ConfigError
from autoprox.data.cache import StatsKey
from autoprox.genome.tree import InvalidProxy, canonical_string, genome_to_string
from autoprox.core.errors import GenomeError
from autoprox.networks.statistics import BlockStats
from autoprox.proxies.figures import nan_to_none, figures
from autoprox.search.evaluators import DEFAULT_EVALUATION, EVALUATIONS, Evaluator, evaluator_class
from autoprox.search.objectives import (
    DEFAULT_FOLD_MODE,
    CrossValidated,
    JointCorrelation,
    Objective,
    ObjectiveData,
    parse_fitness,
)


@dataclass
class FitnessRecord:
    """The outcome of evaluating one genome on one set of architectures.

    ``fitness`` is what the search maximises (the objective's value; evolution and the hall of
    fame compare it) and ``jcm`` the plain JCM on all the architectures; ``fitness`` left out
    (None) means the plain JCM. With an objective other than the JCM, ``objective`` names it
    (what ``config.json`` records as ``fitness``) and ``fitness_targets`` holds its figure per
    target; cross-validated, ``fold_fitness`` holds its value on each fold and ``fitness_all``
    on all the architectures.
    """

    genome: str
    canonical: str
    valid: bool
    jcm: float = math.nan
    kendall: dict[str, float] = field(default_factory=dict)
    spearman: dict[str, float] = field(default_factory=dict)
    pearson: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    fitness: float | None = None
    objective: str = "jcm"
    fitness_targets: dict[str, float] = field(default_factory=dict)
    fold_fitness: list[float] = field(default_factory=list)
    fitness_all: float | None = None

    def __post_init__(self) -> None:
        if self.fitness is None:
            self.fitness = self.jcm

    @property
    def plain(self) -> bool:
        """Whether the fitness is the plain JCM (the paper's setting: JCM objective, no folds)."""
        return self.objective == "jcm" and not self.fold_fitness

    def to_json(self) -> dict:
        """A JSON-safe dict: NaN (here and in the per-target figures) becomes None.

        What the paper's setting does not use is left out (``fitness``, equal to ``jcm`` there,
        the objective's fields, the folds'), so paper-setting records stay as they always were.
        """
        data = {k: nan_to_none(v) for k, v in asdict(self).items()}
        if self.plain:
            data.pop("fitness")
        if self.objective == "jcm":
            data.pop("objective")
            data.pop("fitness_targets")
        if not self.fold_fitness:
            data.pop("fold_fitness")
            data.pop("fitness_all")
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> "FitnessRecord":
        """The record of a JSON object of either layout (:func:`convert_record` for the old one)."""
        values = convert_record(data)
        for name in ("jcm", "fitness"):
            if values.get(name) is None and (name == "jcm" or name in values):
                values[name] = math.nan
        for name in ("kendall", "spearman", "pearson", "fitness_targets"):
            if name in values:
                values[name] = {t: (math.nan if v is None else v) for t, v in (values[name] or {}).items()}
        return cls(**values)


#: The fields of a record written before ``fitness`` and ``jcm`` were kept apart, and only there.
OLD_FIELDS = ("plain_jcm", "jcm_all", "fold_jcm")


def convert_record(data: Mapping) -> dict:
    """A record's JSON object in the current layout (a copy); one of the old layout converted.

    The old layout is told by a ``fitness`` that is a name (``"partial:blend"``) or by one of
    :data:`OLD_FIELDS`. There ``jcm`` held the fitness; the plain JCM was ``plain_jcm`` (a
    fitness other than the JCM), else ``jcm_all`` (cross-validated), else ``jcm`` itself.
    """
    values = dict(data)
    if not (isinstance(values.get("fitness"), str) or any(name in values for name in OLD_FIELDS)):
        return values
    objective = values.pop("fitness", "jcm")
    plain_jcm, jcm_all, folds = values.pop("plain_jcm", None), values.pop("jcm_all", None), values.pop("fold_jcm", [])
    fitness = values.get("jcm")
    if objective != "jcm":
        values["jcm"] = plain_jcm
    elif folds:
        values["jcm"] = jcm_all
    values["fitness"] = fitness
    if objective != "jcm":
        values["objective"] = objective
    if folds:
        values["fold_fitness"], values["fitness_all"] = list(folds), jcm_all
    return values


class MemoisedFitness:
    """``evaluate``: a genome's record, computed once per canonical form by ``_evaluate(tree, canonical)``.

    Subclasses hold ``memo`` (canonical string -> record), ``seconds`` (time spent computing) and
    ``evaluations`` (records computed, not read from the memo).
    """

    memo: dict
    seconds: float
    evaluations: int

    def evaluate(self, tree) -> FitnessRecord:
        """The genome's fitness record (memoised by canonical form)."""
        canonical = self.canonical_of(tree)
        if canonical in self.memo:
            return self.memo[canonical]
        start = time.perf_counter()
        record = self._evaluate(tree, canonical)
        self.seconds += time.perf_counter() - start
        self.evaluations += 1
        self.memo[canonical] = record
        return record

    def canonical_of(self, tree) -> str:
        """The canonical form the memo is keyed by (a tree of the statistics': :func:`canonical_string`)."""
        return canonical_string(tree)

    def _evaluate(self, tree, canonical: str) -> FitnessRecord:
        raise NotImplementedError

    def remember(self, records: Iterable[FitnessRecord]) -> None:
        """Pre-fill the memo (a resumed run reloads what it already evaluated)."""
        for record in records:
            self.memo.setdefault(record.canonical, record)


class FitnessEvaluator(MemoisedFitness):
    """The fitness of genomes on a fixed set of architectures: one evaluator strategy (how the scores
    are computed), one objective (what is made of them) and the objective's data, memoised by
    canonical genome.

    ``evaluator``: an :class:`~autoprox.search.evaluators.Evaluator`; ``objective``: an
    :class:`~autoprox.search.objectives.Objective` (default: the JCM); ``data``: the
    architectures' accuracies, targets, weights and (beyond a base) the base's scores, rows as
    the evaluator's. Everything is checked here: :meth:`evaluate` only ever fails on the genome.
    Call :meth:`close` when done. :meth:`from_statistics` makes one from statistics in memory.
    """

    def __init__(self, evaluator: Evaluator, data: ObjectiveData, objective: Objective | None = None) -> None:
        self.evaluator = evaluator
        self.data = data
        self.objective = objective if objective is not None else JointCorrelation()
        check_data(data, evaluator.size, {classes for _, classes in evaluator.keys})
        self.objective.check(data, evaluator.size)
        self.memo: dict[str, FitnessRecord] = {}
        self.evaluations = 0
        self.seconds = 0.0

    @classmethod
    def from_statistics(cls, stats: Mapping[StatsKey, Sequence[Sequence[BlockStats]]],
                        accuracies: Mapping[str, np.ndarray], targets: Sequence[str],
                        target_classes: Mapping[str, int], weights: Mapping[str, float] | None = None, *,
                        fitness: str | Objective = "jcm", bases: Mapping[str, np.ndarray] | None = None,
                        folds: Sequence[Sequence[int]] | None = None, fold_mode: str = DEFAULT_FOLD_MODE,
                        evaluation: str = DEFAULT_EVALUATION, **strategy) -> "FitnessEvaluator":
        """The fitness on statistics held in memory: the ``evaluation`` strategy (``exact`` or ``counted``;
        ``strategy``: its keyword arguments, :class:`~autoprox.search.evaluators.ExactEvaluator`'s), the
        objective ``fitness`` (text or object) cross-validated over ``folds`` when given, the data of
        ``accuracies``, ``targets``, ``target_classes``, ``weights`` and ``bases``."""
        if evaluation not in EVALUATIONS:
            raise ConfigError(f"unknown evaluation {evaluation!r}; use {' or '.join(EVALUATIONS)}")
        data = ObjectiveData(accuracies, tuple(targets), dict(target_classes), dict(weights or {}), dict(bases or {}))
        objective = parse_fitness(fitness) if isinstance(fitness, str) else fitness
        if folds:
            objective = CrossValidated(objective, tuple(tuple(f) for f in folds), fold_mode)
        evaluator = evaluator_class(evaluation)(stats, **strategy)
        try:
            return cls(evaluator, data, objective)
        except BaseException:
            evaluator.close()
            raise

    # What the strategy holds, as the engine and the multi-space fitness ask for it.
    @property
    def counted(self):
        """The statistics as value counts (counted evaluation), else None."""
        return self.evaluator.counted

    @property
    def path_counts(self) -> dict[str, int]:
        """Genomes scored by counted evaluation and by the exact path (counted evaluation)."""
        return self.evaluator.path_counts

    def prepare(self) -> float:
        """The strategy's work done now rather than on first use (counting); the seconds it took."""
        return self.evaluator.prepare()

    def architecture_scores(self, tree) -> dict[int, np.ndarray]:
        """The strategy's scores (:meth:`~autoprox.search.evaluators.Evaluator.architecture_scores`)."""
        return self.evaluator.architecture_scores(tree)

    def close(self) -> None:
        """Stop the strategy's threads, if any."""
        self.evaluator.close()

    def _evaluate(self, tree, canonical: str) -> FitnessRecord:
        text = genome_to_string(tree)
        data = self.data
        try:
            scores = self.evaluator.architecture_scores(tree)
        except (InvalidProxy, GenomeError) as exc:
            return FitnessRecord(text, canonical, False, reason=f"invalid: {exc}"[:200])
        if any(np.ptp(v) == 0 for v in scores.values()):
            return FitnessRecord(text, canonical, False, reason="all scores equal")
        result = figures(scores, data.accuracies, data.targets, data.target_classes, data.weights)
        per_target = result["targets"]
        if any(math.isnan(per_target[t]["kendall"]) for t in data.targets):
            return FitnessRecord(text, canonical, False, reason="undefined correlation")
        record = FitnessRecord(
            genome=text,
            canonical=canonical,
            valid=True,
            jcm=result["jcm"],
            kendall={t: per_target[t]["kendall"] for t in data.targets},
            spearman={t: per_target[t]["spearman"] for t in data.targets},
            pearson={t: per_target[t]["pearson"] for t in data.targets},
        )
        if self.objective.plain:  # the paper's: the fitness is the JCM just computed
            return record
        outcome = self.objective(scores, data)
        if not outcome.defined:
            return FitnessRecord(text, canonical, False, reason=outcome.reason)
        record.fitness, record.objective, record.fitness_targets = outcome.value, self.objective.name, outcome.targets
        if outcome.folds:
            record.fold_fitness, record.fitness_all = list(outcome.folds), outcome.whole
        return record


def check_data(data: ObjectiveData, size: int, classes: set[int]) -> None:
    """ConfigError when ``data`` does not fit an evaluator of ``size`` architectures with statistics of ``classes``."""
    if not data.targets:
        raise ConfigError("no target to evaluate genomes on")
    for target in data.targets:
        if target not in data.accuracies:
            raise ConfigError(f"no accuracies for target {target!r}")
        if len(data.accuracies[target]) != size:
            raise ConfigError(f"target {target!r} has {len(data.accuracies[target])} accuracies "
                              f"for {size} architectures")
        if data.target_classes.get(target) not in classes:
            raise ConfigError(f"target {target!r} needs {data.target_classes.get(target)}-class statistics; "
                              f"loaded: {sorted(classes)}")


def make_folds(size: int, count: int, seed: int = 0) -> list[list[int]]:
    """``count`` disjoint folds of ``range(size)`` after a seeded shuffle (sizes differ by at most 1)."""
    if not 2 <= count <= size:
        raise ConfigError(f"cross-validation needs between 2 and {size} folds, got {count}")
    order = list(range(size))
    random.Random(seed).shuffle(order)
    return [sorted(order[i::count]) for i in range(count)]


__all__ = ["FitnessEvaluator", "FitnessRecord", "MemoisedFitness", "OLD_FIELDS", "check_data", "convert_record",
           "make_folds"]
