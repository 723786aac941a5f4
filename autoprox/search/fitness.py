"""Fitness: how well a genome's scores rank architectures by their true accuracies.

A genome is scored on cached statistics only (never by re-running a network). The
fitness is, by default, the joint correlation metric (JCM) over the chosen targets;
Spearman and Pearson are kept beside Kendall. A genome is invalid when any
architecture's score is NaN or inf, a shape does not fit, or all scores are equal.
Results are memoised by the genome's canonical form.

Other fitness modes (:class:`FitnessMode`, ``--fitness``) reward what a genome adds
beyond a descriptor baseline (``BASE``: ``params``, ``coarse`` or ``blend`` of
:mod:`autoprox.proxies.baselines`, fitted per target on the search part once per run):

``partial:BASE``
    per target, Kendall's partial tau of the scores with the accuracies given BASE's
    scores (:func:`partial_figure`);
``combined:BASE[:W]``
    per target, Kendall of ``W * rank(scores) + (1 - W) * rank(BASE)``, ranks scaled to
    [0, 1] within the evaluated architectures (:func:`combined_figure`; W default 0.5).

Either is combined over targets with the JCM weights. A record's ``jcm`` then holds
this fitness (evolution and the hall of fame compare it); its ``kendall`` stays the
plain Kendall per target, ``plain_jcm`` the plain JCM and ``fitness_targets`` the
per-target figures.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Iterable, Mapping, Sequence

import numpy as np
import torch
from scipy.stats import rankdata

from autoprox.core.correlation import jcm as joint_metric
from autoprox.core.correlation import kendall, partial_kendall
from autoprox.core.errors import ConfigError
from autoprox.core.parallel import ThreadedMap
from autoprox.data.cache import StatsKey
from autoprox.genome.counted import (
    DEFAULT_EVALUATION,
    EVALUATIONS,
    CountedBlocks,
    NotCounted,
    counted_scores,
    is_counted_form,
)
from autoprox.genome.memo import SubtreeMemo
from autoprox.genome.tree import (
    DEFAULT_KERNELS,
    GenomeError,
    InvalidProxy,
    canonical_string,
    genome_to_string,
    kernel_map,
    score_architecture,
)
from autoprox.networks.statistics import BlockStats, torch_threads
from autoprox.proxies.baselines import BASELINES
from autoprox.proxies.figures import _nan_to_none, figures
from autoprox.proxies.scorers import mean_over_seeds


@dataclass
class FitnessRecord:
    """The outcome of evaluating one genome on one set of architectures."""

    genome: str
    canonical: str
    valid: bool
    jcm: float = math.nan
    kendall: dict[str, float] = field(default_factory=dict)
    spearman: dict[str, float] = field(default_factory=dict)
    pearson: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    #: With cross-validated fitness: the JCM of each fold, and of all search architectures.
    fold_jcm: list[float] = field(default_factory=list)
    jcm_all: float | None = None
    #: With a fitness other than plain JCM (:class:`FitnessMode`): its name, the plain JCM
    #: (``jcm`` then holds the fitness) and the fitness figure of each target.
    fitness: str = "jcm"
    plain_jcm: float | None = None
    fitness_targets: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        """A JSON-safe dict: NaN (here and in the per-target figures) becomes None.

        The cross-validation and fitness-mode fields are left out when unused, so
        paper-setting records stay as they were.
        """
        data = {k: _nan_to_none(v) for k, v in asdict(self).items()}
        if not self.fold_jcm:
            data.pop("fold_jcm")
            data.pop("jcm_all")
        if self.fitness == "jcm":
            for name in ("fitness", "plain_jcm", "fitness_targets"):
                data.pop(name)
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> "FitnessRecord":
        values = dict(data)
        if values.get("jcm") is None:
            values["jcm"] = math.nan
        for name in ("kendall", "spearman", "pearson", "fitness_targets"):
            if name in values:
                values[name] = {t: (math.nan if v is None else v) for t, v in (values[name] or {}).items()}
        return cls(**values)


# ------------------------------------------------------------------ fitness modes

@dataclass(frozen=True)
class FitnessMode:
    """What the search maximises: ``jcm`` (the paper's) or a figure beyond a baseline ``base``."""

    kind: str = "jcm"
    base: str | None = None
    weight: float = 0.5

    @property
    def name(self) -> str:
        """The canonical text (what ``config.json`` records): ``jcm``, ``partial:blend``, ``combined:blend:0.3``."""
        if self.kind == "jcm":
            return "jcm"
        if self.kind == "combined" and self.weight != 0.5:
            return f"combined:{self.base}:{self.weight:g}"
        return f"{self.kind}:{self.base}"

    @property
    def plain(self) -> bool:
        return self.kind == "jcm"


def parse_fitness(text: str) -> FitnessMode:
    """The fitness mode of ``text`` (``jcm``, ``partial:BASE``, ``combined:BASE[:W]``); ConfigError otherwise."""
    parts = str(text).strip().split(":")
    kind = parts[0]
    usage = "use jcm, partial:BASE or combined:BASE[:W] with BASE one of " + ", ".join(BASELINES)
    if kind == "jcm" and len(parts) == 1:
        return FitnessMode()
    if kind not in FITNESS_FIGURES or len(parts) < 2 or len(parts) > (3 if kind == "combined" else 2):
        raise ConfigError(f"unknown fitness {text!r}; {usage}")
    base = parts[1]
    if base not in BASELINES:
        raise ConfigError(f"fitness {text!r}: unknown base {base!r}; {usage}")
    weight = 0.5
    if len(parts) == 3:
        try:
            weight = float(parts[2])
        except ValueError:
            weight = math.nan
        if not 0 < weight <= 1:
            raise ConfigError(f"fitness {text!r}: the weight W must be a number in (0, 1], got {parts[2]!r}")
    return FitnessMode(kind, base, weight)


def _measured(accuracies: np.ndarray, *columns: np.ndarray) -> list[np.ndarray]:
    """``accuracies`` and ``columns`` cut to the rows whose accuracy is measured (not NaN)."""
    y = np.asarray(accuracies, dtype=np.float64)
    keep = ~np.isnan(y)
    return [y[keep], *(np.asarray(c, dtype=np.float64)[keep] for c in columns)]


def scaled_ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks of ``values`` scaled to [0, 1] (the lowest 0, the highest 1; one value: 0)."""
    ranks = rankdata(values)
    return (ranks - 1.0) / max(len(ranks) - 1, 1)


def partial_figure(scores: np.ndarray, accuracies: np.ndarray, base: np.ndarray, weight: float = 0.5) -> float:
    """Kendall's partial tau of ``scores`` and ``accuracies`` given ``base`` on the measured rows
    (:func:`autoprox.core.correlation.partial_kendall`); NaN when undefined, for instance when the
    scores rank exactly as the base does. ``weight`` is unused."""
    y, x, z = _measured(accuracies, scores, base)
    return partial_kendall(x, y, z)


def combined_figure(scores: np.ndarray, accuracies: np.ndarray, base: np.ndarray, weight: float = 0.5) -> float:
    """Kendall tau-b of ``weight * rank(scores) + (1 - weight) * rank(base)`` with the accuracies, ranks
    scaled to [0, 1] within the measured rows; NaN when undefined."""
    y, x, z = _measured(accuracies, scores, base)
    return kendall(weight * scaled_ranks(x) + (1.0 - weight) * scaled_ranks(z), y)


#: Per-target figure of each fitness kind other than ``jcm``: ``(scores, accuracies, base, weight) -> float``.
FITNESS_FIGURES = {"partial": partial_figure, "combined": combined_figure}


def fitness_value(mode: FitnessMode, scores: Mapping[int, np.ndarray], accuracies: Mapping[str, np.ndarray],
                  bases: Mapping[str, np.ndarray], targets: Sequence[str], target_classes: Mapping[str, int],
                  weights: Mapping[str, float] | None = None) -> tuple[float, dict[str, float]]:
    """The fitness of ``mode`` (not ``jcm``) and its per-target figures; rows of all arguments agree.
    The fitness is NaN when a target's figure is."""
    figure = FITNESS_FIGURES[mode.kind]
    per_target = {t: figure(scores[target_classes[t]], accuracies[t], bases[t], mode.weight) for t in targets}
    if any(math.isnan(v) for v in per_target.values()):
        return math.nan, per_target
    return joint_metric(per_target, weights), per_target


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
        canonical = canonical_string(tree)
        if canonical in self.memo:
            return self.memo[canonical]
        start = time.perf_counter()
        record = self._evaluate(tree, canonical)
        self.seconds += time.perf_counter() - start
        self.evaluations += 1
        self.memo[canonical] = record
        return record

    def _evaluate(self, tree, canonical: str) -> FitnessRecord:
        raise NotImplementedError


class FitnessEvaluator(MemoisedFitness):
    """Scores genomes on in-memory statistics of a fixed set of architectures."""

    def __init__(self, stats: Mapping[StatsKey, Sequence[Sequence[BlockStats]]],
                 accuracies: Mapping[str, np.ndarray], targets: Sequence[str],
                 target_classes: Mapping[str, int], weights: Mapping[str, float] | None = None,
                 terminals: Sequence[Mapping[str, float]] | None = None,
                 folds: Sequence[Sequence[int]] | None = None, fold_mode: str = "mean",
                 remote=None, subtree_memo: bool = True, fitness: FitnessMode | None = None,
                 bases: Mapping[str, np.ndarray] | None = None, reduce_early: bool = False,
                 kernels: str = DEFAULT_KERNELS, threads: int = 1, evaluation: str = DEFAULT_EVALUATION) -> None:
        """``remote``: where the architectures' scores come from instead of ``stats`` in this
        process (a :class:`autoprox.search.shards.ShardedScorer`, whose statistics stay on a Dask
        cluster's workers; ``stats`` then only says which sets and how many architectures).
        ``terminals``: per architecture, its architecture-level terminal values (for
        genomes that use them). ``folds``: disjoint index sets of the architectures; when
        given, the fitness is the mean (``fold_mode="mean"``) or the lowest (``"worst"``)
        JCM over the folds, each computed on that fold's architectures alone.
        ``subtree_memo``: keep each architecture's scalar subtree values between genomes
        (:class:`~autoprox.genome.memo.SubtreeMemo`; exact: the same records).
        ``fitness``: what the records' ``jcm`` holds (default plain JCM); another mode needs
        ``bases``, the base's scores per target on these architectures (fitted elsewhere,
        on the search part).
        ``reduce_early`` (with ``subtree_memo``; not exact, off by default): the mean of a sum or
        difference of two matrices taken as the sum or difference of their means, each branch's
        mean kept per architecture and block (scores equal to float32 rounding; see
        :class:`~autoprox.genome.memo.SubtreeMemo`).
        ``kernels``: the kernel set genomes are evaluated with (:data:`primitives.KERNEL_SETS`):
        ``torch`` (default; the committed runs' numbers bitwise) or ``numpy`` (NumPy's tanh, exp
        and log, faster here; scores equal to a few float32 ulps, ``tests/test_kernels.py``).
        ``threads``: architectures scored side by side in this many threads of this process, on
        the one copy of the statistics (:class:`~autoprox.core.parallel.ThreadedMap`); each
        architecture's score is computed as with one thread, so the records are the same bits
        whatever the count (the kernels run outside the GIL). Call :meth:`close` when done.
        ``evaluation``: ``exact`` (default; entry by entry, the committed runs' numbers bitwise) or
        ``counted`` (:mod:`autoprox.genome.counted`: once per distinct stored value for all blocks at
        once, the exact path for what it does not cover; scores equal to float32 rounding, needs the
        statistics held as stored float16)."""
        self.stats = stats
        # Each scoring thread's torch runs one intra-op thread, as torch_threads(1) makes this one.
        self.threads = ThreadedMap(threads, initializer=partial(torch.set_num_threads, 1))
        self.kernels = kernels
        self.kernel_functions = kernel_map(kernels)
        self.remote = remote
        self.terminals = list(terminals) if terminals is not None else None
        self.folds = [list(f) for f in folds] if folds else []
        if fold_mode not in ("mean", "worst"):
            raise ConfigError(f"unknown fold mode {fold_mode!r}; use mean or worst")
        self.fold_mode = fold_mode
        self.accuracies = accuracies
        self.targets = list(targets)
        self.target_classes = dict(target_classes)
        self.weights = dict(weights or {})
        sizes = {len(v) for v in stats.values()}
        if len(sizes) != 1:
            raise ValueError("every statistics set must hold the same architectures")
        self.size = sizes.pop()
        # Misconfiguration is caught here: evaluate() must only ever fail on the genome.
        if not self.targets:
            raise ConfigError("no target to evaluate genomes on")
        loaded_classes = {classes for _, classes in stats}
        for target in self.targets:
            if target not in self.accuracies:
                raise ConfigError(f"no accuracies for target {target!r}")
            if len(self.accuracies[target]) != self.size:
                raise ConfigError(f"target {target!r} has {len(self.accuracies[target])} accuracies "
                                 f"for {self.size} architectures")
            if self.target_classes.get(target) not in loaded_classes:
                raise ConfigError(f"target {target!r} needs {self.target_classes.get(target)}-class statistics; "
                                 f"loaded: {sorted(loaded_classes)}")
        if self.terminals is not None and len(self.terminals) != self.size:
            raise ValueError(f"{len(self.terminals)} terminal sets for {self.size} architectures")
        covered = sorted(i for fold in self.folds for i in fold)
        if self.folds and covered != list(range(self.size)):
            raise ValueError("folds must split the architectures into disjoint sets covering all of them")
        self.fitness = fitness or FitnessMode()
        self.bases = {t: np.asarray(v, dtype=np.float64) for t, v in (bases or {}).items()}
        if not self.fitness.plain:
            for target in self.targets:
                if target not in self.bases or len(self.bases[target]) != self.size:
                    raise ConfigError(f"fitness {self.fitness.name} needs the base's {self.size} scores "
                                      f"for target {target!r}")
        self.memo: dict[str, FitnessRecord] = {}
        self.subtree_memos: dict[StatsKey, list[SubtreeMemo]] | None = (
            {key: [SubtreeMemo(len(blocks), reduce_early=reduce_early) for blocks in archs]
             for key, archs in stats.items()}
            if subtree_memo and remote is None else None)
        if reduce_early and self.subtree_memos is None:
            raise ConfigError("reducing early needs the subtree memo (and statistics in this process)")
        if evaluation not in EVALUATIONS:
            raise ConfigError(f"unknown evaluation {evaluation!r}; use {' or '.join(EVALUATIONS)}")
        self.evaluation = evaluation
        self.counted: dict[StatsKey, CountedBlocks] | None = None
        if evaluation == "counted":
            if remote is not None:
                raise ConfigError("counted evaluation runs on statistics in this process, not on a cluster's workers")
            if not all(is_counted_form(archs) for archs in stats.values()):
                raise ConfigError("counted evaluation needs the statistics held as stored float16 "
                                  "(cache precision float16, not loaded as float32)")
            self.counted = {key: CountedBlocks(archs) for key, archs in stats.items()}
        #: Genomes scored by counted evaluation and by the exact path (with ``evaluation="counted"``).
        self.path_counts = {"counted": 0, "exact": 0}
        self.evaluations = 0
        self.seconds = 0.0

    def prepare(self) -> float:
        """Count every statistic now rather than on first use (counted evaluation), in the scoring
        threads; the seconds it took."""
        start = time.perf_counter()
        for blocks in (self.counted or {}).values():
            names = blocks.statistic_names
            self.threads(lambda i, blocks=blocks, names=names: float(blocks.statistic(names[i]).blocks), len(names))
        return time.perf_counter() - start

    def architecture_scores(self, tree) -> dict[int, np.ndarray]:
        """Scores per class count, each the mean over seeds; raises InvalidProxy.

        Each architecture's value is the genome's (:func:`score_architecture`), as the
        scoring core's (:class:`autoprox.proxies.scorers.GenomeScorer`) on cached statistics,
        here on statistics held in memory and stopping at the first invalid one; the mean
        over seeds is the core's :func:`~autoprox.proxies.scorers.mean_over_seeds`. Computed
        single-threaded whatever the caller's torch setting, so that they are the very
        numbers :meth:`autoprox.proxies.proxy.Proxy.score` gives (a parallel reduction sums
        in another order and moves the last bits); with ``threads``, whole architectures run
        side by side instead, each with one intra-op thread.
        """
        if self.remote is not None:
            return self.remote.architecture_scores(tree)
        if self.counted is not None:
            try:
                per_key = {key: counted_scores(tree, blocks, self.terminals, self.kernel_functions)
                           for key, blocks in self.counted.items()}
                self.path_counts["counted"] += 1
                return mean_over_seeds(per_key)
            except NotCounted:
                self.path_counts["exact"] += 1
        per_key = {}
        with torch_threads(1):
            for key, archs in self.stats.items():
                terminals = self.terminals or [None] * len(archs)
                memos = self.subtree_memos[key] if self.subtree_memos is not None else [None] * len(archs)

                def score(i: int, archs=archs, terminals=terminals, memos=memos) -> float:
                    return score_architecture(tree, archs[i], terminals[i], memos[i], self.kernel_functions)

                per_key[key] = self.threads(score, len(archs))
        return mean_over_seeds(per_key)

    def close(self) -> None:
        """Stop the scoring threads, if any."""
        self.threads.close()

    def _evaluate(self, tree, canonical: str) -> FitnessRecord:
        text = genome_to_string(tree)
        try:
            scores = self.architecture_scores(tree)
        except (InvalidProxy, GenomeError) as exc:
            return FitnessRecord(text, canonical, False, reason=f"invalid: {exc}"[:200])
        if any(np.ptp(v) == 0 for v in scores.values()):
            return FitnessRecord(text, canonical, False, reason="all scores equal")
        result = figures(scores, self.accuracies, self.targets, self.target_classes, self.weights)
        per_target = result["targets"]
        if any(math.isnan(per_target[t]["kendall"]) for t in self.targets):
            return FitnessRecord(text, canonical, False, reason="undefined correlation")
        record = FitnessRecord(
            genome=text,
            canonical=canonical,
            valid=True,
            jcm=result["jcm"],
            kendall={t: per_target[t]["kendall"] for t in self.targets},
            spearman={t: per_target[t]["spearman"] for t in self.targets},
            pearson={t: per_target[t]["pearson"] for t in self.targets},
        )
        if not self.fitness.plain:
            value, by_target = fitness_value(self.fitness, scores, self.accuracies, self.bases, self.targets,
                                             self.target_classes, self.weights)
            if math.isnan(value):
                return FitnessRecord(text, canonical, False, reason=f"undefined {self.fitness.name} fitness")
            record.fitness, record.plain_jcm, record.fitness_targets = self.fitness.name, record.jcm, by_target
            record.jcm = value
        if self.folds:
            fold_jcms = [self._fold_jcm(scores, fold) for fold in self.folds]
            if any(math.isnan(v) for v in fold_jcms):
                return FitnessRecord(text, canonical, False, reason="undefined correlation on a fold")
            record.fold_jcm = fold_jcms
            record.jcm_all = record.jcm
            record.jcm = float(np.mean(fold_jcms)) if self.fold_mode == "mean" else min(fold_jcms)
        return record

    def _fold_jcm(self, scores: Mapping[int, np.ndarray], fold: Sequence[int]) -> float:
        part = {classes: values[list(fold)] for classes, values in scores.items()}
        accuracies = {t: self.accuracies[t][list(fold)] for t in self.targets}
        if not self.fitness.plain:
            bases = {t: self.bases[t][list(fold)] for t in self.targets}
            return fitness_value(self.fitness, part, accuracies, bases, self.targets, self.target_classes,
                                 self.weights)[0]
        return figures(part, accuracies, self.targets, self.target_classes, self.weights)["jcm"]

    def remember(self, records: Iterable[FitnessRecord]) -> None:
        """Pre-fill the memo (a resumed run reloads what it already evaluated)."""
        for record in records:
            self.memo.setdefault(record.canonical, record)


def make_folds(size: int, count: int, seed: int = 0) -> list[list[int]]:
    """``count`` disjoint folds of ``range(size)`` after a seeded shuffle (sizes differ by at most 1)."""
    if not 2 <= count <= size:
        raise ConfigError(f"cross-validation needs between 2 and {size} folds, got {count}")
    order = list(range(size))
    random.Random(seed).shuffle(order)
    return [sorted(order[i::count]) for i in range(count)]
