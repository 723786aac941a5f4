"""What a search maximises: objectives, registered by name, in the manner of timm's ``@register_model``.

One registry, :data:`OBJECTIVES`, holds every objective, each one class; what it is a figure of is its
``scopes``: ``targets``, a search's fitness over a set of architectures' per-target figures (``search
--fitness``), or ``spaces``, one figure of per-space figures (the N-space protocol's rank-formula search,
``evaluate --leave-space-out --rank-formulas --objective``), or both. ``--fitness`` and ``--objective`` list
and take the kinds of their scope, read from the registry when they are shown.

An objective turns a genome's scores on a set of architectures (one array per statistics class
count, as :meth:`autoprox.search.evaluators.Evaluator.architecture_scores` gives them) and that
set's data (:class:`ObjectiveData`: accuracies, targets, weights, a descriptor base's scores)
into one figure, the fitness, with its per-target figures (:class:`Outcome`). The data is an
argument, not part of the objective, so one objective serves any set of architectures: a fold,
the whole search part, or one space of a multi-space search.

Registered kinds (``--fitness``, :func:`parse_fitness`):

``jcm``
    the joint correlation metric, the weighted mean of Kendall's tau over the targets (the paper's);
``partial:BASE``
    per target, Kendall's partial tau of the scores with the accuracies given BASE's scores
    (:func:`partial_figure`), BASE one of :data:`autoprox.proxies.baselines.BASELINES`;
``combined:BASE[:W]``
    per target, Kendall of ``W * rank(scores) + (1 - W) * rank(BASE)``, ranks scaled to [0, 1]
    within the architectures (:func:`combined_figure`; W default 0.5).

The last two combine their per-target figures with the JCM weights. Cross-validation is not a
kind but a wrapper around any objective (:class:`CrossValidated`): the mean or the lowest of the
objective over disjoint folds of the architectures. A new kind is one class decorated with
:func:`register_objective`, whose ``parse`` makes it from the text after ``KIND:``, and whose ``form`` and
``summary`` say how ``--fitness`` writes it and what it is (``--help`` and the messages list every registered
kind by them: :func:`usage`, :func:`fitness_help`).

Registered kinds over spaces (``--objective``, :func:`space_objective`), each a reduction (:meth:`Objective.over`)
of the per-space figures:

``mean``
    the mean Kendall over the training spaces;
``worst``
    the worst Kendall over the training spaces;
``margin``
    the worst lead over the training spaces of the Kendall over each space's better size count
    (:attr:`Objective.against_size`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Mapping, Sequence

import numpy as np

from autoprox.core.correlation import jcm as joint_metric
from autoprox.core.correlation import kendall, partial_kendall
from autoprox.core.errors import ConfigError
from autoprox.core.registry import Registry, kind_registrar
from autoprox.proxies.baselines import BASELINES
from autoprox.proxies.figures import figures

#: Scores of a genome: one array per statistics class count.
Scores = Mapping[int, np.ndarray]


@dataclass(frozen=True)
class ObjectiveData:
    """What an objective reads of one set of architectures besides the scores.

    ``accuracies``: per target, one value per architecture (NaN: not measured); ``targets`` and
    ``target_classes`` (the statistics class count each target's scores come from); ``weights``:
    the JCM weight of each target (absent: 1); ``bases``: per target, a descriptor base's scores
    on the same architectures (objectives beyond a base only; fitted elsewhere).
    """

    accuracies: Mapping[str, np.ndarray]
    targets: tuple[str, ...]
    target_classes: Mapping[str, int]
    weights: Mapping[str, float] = field(default_factory=dict)
    bases: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", tuple(self.targets))
        object.__setattr__(self, "bases", {t: np.asarray(v, dtype=np.float64) for t, v in self.bases.items()})

    def rows(self, indices: Sequence[int]) -> "ObjectiveData":
        """The same data cut to the architectures ``indices`` (a fold)."""
        index = list(indices)
        return ObjectiveData({t: np.asarray(self.accuracies[t])[index] for t in self.targets}, self.targets,
                             self.target_classes, self.weights, {t: v[index] for t, v in self.bases.items()})


@dataclass(frozen=True)
class Outcome:
    """An objective's figure on a set of architectures.

    ``value``: the fitness (NaN: undefined, the genome is then invalid for ``reason``);
    ``targets``: the per-target figures of an objective other than the JCM (empty for the JCM,
    whose per-target figures are the Kendalls); ``folds``: with :class:`CrossValidated`, the
    wrapped objective on each fold, and ``whole`` its value on all the architectures.
    """

    value: float
    targets: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    folds: tuple[float, ...] = ()
    whole: float | None = None

    @property
    def defined(self) -> bool:
        return not math.isnan(self.value)


class Objective(ABC):
    """What a search maximises; see the module's docstring. Subclasses are frozen dataclasses."""

    #: The kind's name in ``--fitness`` text (set by :func:`register_objective`).
    kind: ClassVar[str] = ""
    #: How ``--fitness`` writes the kind with its arguments (``partial:BASE``); empty: the kind alone.
    form: ClassVar[str] = ""
    #: What it maximises, a phrase for ``--fitness``'s or ``--objective``'s help (empty: none).
    summary: ClassVar[str] = ""
    #: What it is a figure of: ``targets`` (a search's fitness, ``--fitness``), ``spaces`` (one figure of per-space
    #: figures, ``--objective``), or both (:data:`SCOPES`).
    scopes: ClassVar[frozenset[str]] = frozenset({"targets"})
    #: Over spaces: whether each space's figure enters :meth:`over` as its lead over the space's better size count.
    against_size: ClassVar[bool] = False

    @property
    @abstractmethod
    def name(self) -> str:
        """The canonical text (what ``config.json`` records as ``fitness``)."""

    @property
    def base(self) -> str | None:
        """The descriptor base (:data:`~autoprox.proxies.baselines.BASELINES`) whose scores it needs, or None."""
        return None

    @property
    def plain(self) -> bool:
        """Whether the fitness is the plain JCM of all the architectures (the paper's)."""
        return False

    @abstractmethod
    def __call__(self, scores: Scores, data: ObjectiveData) -> Outcome:
        """The outcome of ``scores`` (rows as in ``data``)."""

    def check(self, data: ObjectiveData, size: int) -> None:
        """ConfigError when ``data`` (of ``size`` architectures) lacks what this objective reads."""
        if self.base is None:
            return
        for target in data.targets:
            if target not in data.bases or len(data.bases[target]) != size:
                raise ConfigError(f"fitness {self.name} needs the base's {size} scores for target {target!r}")

    def over(self, figures: Sequence[float]) -> float:
        """One figure of several per-space figures (an objective over spaces); ConfigError for one that is not."""
        raise ConfigError(f"objective {self.name} is not one over spaces; use {_one_of(objective_kinds('spaces'))}")

    @classmethod
    def parse(cls, arguments: Sequence[str], text: str) -> "Objective":
        """The objective of ``KIND:ARGUMENTS`` (``arguments`` split at ``:``); ConfigError when they do not fit."""
        if arguments:
            raise ConfigError(f"unknown fitness {text!r}; {usage()}")
        return cls()


#: Every registered objective kind, by name, whatever its scope.
OBJECTIVES: Registry[str, type[Objective]] = Registry("objective", unknown=ConfigError)
#: What an objective can be a figure of.
SCOPES = ("targets", "spaces")


#: Class decorator ``@register_objective(KIND)``: register an :class:`Objective` subclass as ``--fitness KIND[:...]``.
register_objective = kind_registrar(OBJECTIVES)


def _one_of(items: Sequence[str], comma: bool = False) -> str:
    """``a, b or c`` (``comma``: ``a, b, or c``, for items that hold commas themselves)."""
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + ("," if comma and len(items) > 2 else "") + " or " + items[-1]


def objective_kinds(scope: str) -> list[str]:
    """The registered kinds of ``scope`` (``targets`` or ``spaces``), in registration order, read now."""
    if scope not in SCOPES:
        raise ValueError(f"unknown objective scope {scope!r}; one of {', '.join(SCOPES)}")
    return [kind for kind, cls in OBJECTIVES.items() if scope in cls.scopes]


def space_objectives() -> list[tuple[str, str]]:
    """``(kind, summary)`` of every registered objective over spaces (``--objective``'s help)."""
    return [(kind, OBJECTIVES[kind].summary) for kind in objective_kinds("spaces")]


def space_objective(kind: str) -> "Objective":
    """The objective over spaces ``kind``; ConfigError naming those there are when it is none."""
    if kind not in objective_kinds("spaces"):
        raise ConfigError(f"unknown objective {kind!r}; use {_one_of(objective_kinds('spaces'))}")
    return OBJECTIVES[kind]()


def _forms() -> list[tuple[str, str]]:
    """``(form, summary)`` of every registered kind of a search's fitness, in registration order."""
    return [(OBJECTIVES[kind].form or kind, OBJECTIVES[kind].summary) for kind in objective_kinds("targets")]


def usage() -> str:
    """What ``--fitness`` takes, for messages: every registered kind's form."""
    return f"use {_one_of([form for form, _ in _forms()])} with BASE one of " + ", ".join(BASELINES)


def fitness_help() -> str:
    """``--fitness``'s help: every registered kind's form and summary, and the bases."""
    kinds = [f"{form} ({summary})" if summary else form for form, summary in _forms()]
    return (f"what the search maximises: {_one_of(kinds, comma=True)}; BASE is {_one_of(list(BASELINES))}, "
            "fitted on the search part only; each combined over targets with the JCM weights")


def parse_fitness(text: str) -> Objective:
    """The objective of ``text`` (``jcm``, ``partial:BASE``, ``combined:BASE[:W]``, any registered kind);
    ConfigError otherwise."""
    kind, *arguments = str(text).strip().split(":")
    if kind not in objective_kinds("targets"):
        raise ConfigError(f"unknown fitness {text!r}; {usage()}")
    return OBJECTIVES[kind].parse(arguments, str(text))


# ------------------------------------------------------------------ the kinds

@register_objective("jcm")
@dataclass(frozen=True)
class JointCorrelation(Objective):
    """The JCM: the weighted mean of Kendall's tau over the targets (:func:`autoprox.proxies.figures.figures`)."""

    summary: ClassVar[str] = "the paper's"

    @property
    def name(self) -> str:
        return "jcm"

    @property
    def plain(self) -> bool:
        return True

    def __call__(self, scores: Scores, data: ObjectiveData) -> Outcome:
        value = figures(scores, data.accuracies, data.targets, data.target_classes, data.weights)["jcm"]
        return Outcome(value, reason="undefined correlation")


def _measured(accuracies: np.ndarray, *columns: np.ndarray) -> list[np.ndarray]:
    """``accuracies`` and ``columns`` cut to the rows whose accuracy is measured (not NaN)."""
    y = np.asarray(accuracies, dtype=np.float64)
    keep = ~np.isnan(y)
    return [y[keep], *(np.asarray(c, dtype=np.float64)[keep] for c in columns)]


def scaled_ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks of ``values`` scaled to [0, 1] (the lowest 0, the highest 1; one value: 0)."""
    from scipy.stats import rankdata  # on first use: --help imports this module

    ranks = rankdata(values)
    return (ranks - 1.0) / max(len(ranks) - 1, 1)


def partial_figure(scores: np.ndarray, accuracies: np.ndarray, base: np.ndarray) -> float:
    """Kendall's partial tau of ``scores`` and ``accuracies`` given ``base`` on the measured rows
    (:func:`autoprox.core.correlation.partial_kendall`); NaN when undefined, for instance when the
    scores rank exactly as the base does."""
    y, x, z = _measured(accuracies, scores, base)
    return partial_kendall(x, y, z)


def combined_ranking(scores: np.ndarray, base: np.ndarray, weight: float = 0.5) -> np.ndarray:
    """``weight * rank(scores) + (1 - weight) * rank(base)``, ranks scaled to [0, 1] within these rows: how
    the ``combined`` fitness ranks architectures (the leave-one-space-out protocol ranks a left-out space so)."""
    return weight * scaled_ranks(scores) + (1.0 - weight) * scaled_ranks(base)


def combined_figure(scores: np.ndarray, accuracies: np.ndarray, base: np.ndarray, weight: float = 0.5) -> float:
    """Kendall tau-b of :func:`combined_ranking` with the accuracies, on the measured rows; NaN when undefined."""
    y, x, z = _measured(accuracies, scores, base)
    return kendall(combined_ranking(x, z, weight), y)


@dataclass(frozen=True)
class BeyondBase(Objective):
    """A per-target figure of the scores beside a descriptor base's, combined over targets with the JCM weights."""

    base_name: str = "blend"
    weight: float = 0.5

    @property
    def base(self) -> str:
        return self.base_name

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.base_name}"

    @abstractmethod
    def figure(self, scores: np.ndarray, accuracies: np.ndarray, base: np.ndarray) -> float:
        """The figure of one target's ``scores`` with its ``accuracies`` beside the ``base``'s scores."""

    def __call__(self, scores: Scores, data: ObjectiveData) -> Outcome:
        per_target = {t: self.figure(scores[data.target_classes[t]], data.accuracies[t], data.bases[t])
                      for t in data.targets}
        reason = f"undefined {self.name} fitness"
        if any(math.isnan(v) for v in per_target.values()):
            return Outcome(math.nan, per_target, reason)
        return Outcome(joint_metric(per_target, data.weights), per_target, reason)

    @classmethod
    def parse(cls, arguments: Sequence[str], text: str) -> "BeyondBase":
        if len(arguments) != 1:
            raise ConfigError(f"unknown fitness {text!r}; {usage()}")
        return cls(_base(arguments[0], text))


def _base(name: str, text: str) -> str:
    if name not in BASELINES:
        raise ConfigError(f"fitness {text!r}: unknown base {name!r}; {usage()}")
    return name


@register_objective("partial")
@dataclass(frozen=True)
class PartialBeyondBase(BeyondBase):
    """Per target, Kendall's partial tau given the base (:func:`partial_figure`)."""

    form: ClassVar[str] = "partial:BASE"
    summary: ClassVar[str] = "per target, partial Kendall given BASE"

    def figure(self, scores: np.ndarray, accuracies: np.ndarray, base: np.ndarray) -> float:
        return partial_figure(scores, accuracies, base)


@register_objective("combined")
@dataclass(frozen=True)
class CombinedWithBase(BeyondBase):
    """Per target, Kendall of the scores' and the base's ranks mixed with weight ``weight`` (:func:`combined_figure`)."""

    form: ClassVar[str] = "combined:BASE[:W]"
    summary: ClassVar[str] = "per target, Kendall of W*rank(proxy)+(1-W)*rank(BASE), W default 0.5"

    @property
    def name(self) -> str:
        return f"combined:{self.base_name}" + (f":{self.weight:g}" if self.weight != 0.5 else "")

    def figure(self, scores: np.ndarray, accuracies: np.ndarray, base: np.ndarray) -> float:
        return combined_figure(scores, accuracies, base, self.weight)

    @classmethod
    def parse(cls, arguments: Sequence[str], text: str) -> "CombinedWithBase":
        if len(arguments) not in (1, 2):
            raise ConfigError(f"unknown fitness {text!r}; {usage()}")
        weight = 0.5
        if len(arguments) == 2:
            try:
                weight = float(arguments[1])
            except ValueError:
                weight = math.nan
            if not 0 < weight <= 1:
                raise ConfigError(f"fitness {text!r}: the weight W must be a number in (0, 1], got {arguments[1]!r}")
        return cls(_base(arguments[0], text), weight)


# ------------------------------------------------------------------ the kinds over spaces

@dataclass(frozen=True)
class SpaceAggregate(Objective):
    """An objective over spaces alone: :meth:`over` of the per-space figures (the kind's name is its text)."""

    scopes: ClassVar[frozenset[str]] = frozenset({"spaces"})

    @property
    def name(self) -> str:
        return self.kind

    def __call__(self, scores: Scores, data: ObjectiveData) -> Outcome:
        raise ConfigError(f"objective {self.name} is one over spaces, not a search's fitness; {usage()}")

    @abstractmethod
    def over(self, figures: Sequence[float]) -> float:
        """One figure of the per-space figures."""


@register_objective("mean")
@dataclass(frozen=True)
class MeanOverSpaces(SpaceAggregate):
    """The mean of the per-space figures."""

    summary: ClassVar[str] = "the mean Kendall over the training spaces"

    def over(self, figures: Sequence[float]) -> float:
        return float(np.mean(list(figures)))


@register_objective("worst")
@dataclass(frozen=True)
class WorstOverSpaces(SpaceAggregate):
    """The lowest of the per-space figures."""

    summary: ClassVar[str] = "the worst Kendall over the training spaces"

    def over(self, figures: Sequence[float]) -> float:
        return float(np.min(list(figures)))


@register_objective("margin")
@dataclass(frozen=True)
class MarginOverSpaces(WorstOverSpaces):
    """The lowest of the per-space leads over each space's better size count."""

    summary: ClassVar[str] = ("the worst lead over the training spaces of the Kendall over the better of the "
                              "parameter and MAC counts there")
    against_size: ClassVar[bool] = True


# ------------------------------------------------------------------ cross-validation

#: How :class:`CrossValidated` combines its folds (by default, and ``--cv-mode``'s: their mean).
DEFAULT_FOLD_MODE = "mean"
FOLD_MODES = (DEFAULT_FOLD_MODE, "worst")


@dataclass(frozen=True)
class CrossValidated(Objective):
    """Any objective over disjoint folds of the architectures: the mean (``mode="mean"``) or the lowest
    (``"worst"``) of its value on each fold, computed on that fold's rows alone (the base cut to them).

    The wrapped objective is computed on all the rows first (``Outcome.whole``, with its per-target
    figures); a genome it leaves undefined there, or on any fold, is invalid.
    """

    inner: Objective
    folds: tuple[tuple[int, ...], ...]
    mode: str = DEFAULT_FOLD_MODE

    def __post_init__(self) -> None:
        if self.mode not in FOLD_MODES:
            raise ConfigError(f"unknown fold mode {self.mode!r}; use mean or worst")
        object.__setattr__(self, "folds", tuple(tuple(int(i) for i in f) for f in self.folds))
        if len(self.folds) < 2:
            raise ConfigError(f"cross-validation needs at least 2 folds, got {len(self.folds)}")

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def base(self) -> str | None:
        return self.inner.base

    def check(self, data: ObjectiveData, size: int) -> None:
        covered = sorted(i for fold in self.folds for i in fold)
        if covered != list(range(size)):
            raise ConfigError("folds must split the architectures into disjoint sets covering all of them")
        self.inner.check(data, size)

    def __call__(self, scores: Scores, data: ObjectiveData) -> Outcome:
        whole = self.inner(scores, data)
        if not whole.defined:
            return whole
        values = []
        for fold in self.folds:
            index = list(fold)
            values.append(self.inner({c: v[index] for c, v in scores.items()}, data.rows(index)).value)
        reason = "undefined correlation on a fold"
        if any(math.isnan(v) for v in values):
            return Outcome(math.nan, whole.targets, reason)
        value = float(np.mean(values)) if self.mode == "mean" else min(values)
        return Outcome(value, whole.targets, reason, tuple(values), whole.value)


def search_objective(fitness: str, folds: Sequence[Sequence[int]] | None = None,
                     mode: str = DEFAULT_FOLD_MODE) -> Objective:
    """The objective of a search's settings: ``fitness`` text, cross-validated over ``folds`` when given."""
    objective = parse_fitness(fitness)
    return CrossValidated(objective, tuple(tuple(f) for f in folds), mode) if folds else objective


__all__ = ["DEFAULT_FOLD_MODE", "FOLD_MODES", "OBJECTIVES", "SCOPES", "BeyondBase", "CombinedWithBase", "CrossValidated",
           "JointCorrelation", "MarginOverSpaces", "MeanOverSpaces", "Objective", "ObjectiveData", "Outcome", "PartialBeyondBase", "Scores",
           "SpaceAggregate", "WorstOverSpaces", "combined_figure", "combined_ranking", "fitness_help",
           "objective_kinds", "parse_fitness", "partial_figure", "register_objective", "scaled_ranks",
           "search_objective", "space_objective", "space_objectives", "usage"]
