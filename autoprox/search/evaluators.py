"""How a genome's scores are computed: evaluator strategies behind one method, registered by name.

An :class:`Evaluator` holds the statistics of a fixed set of architectures (or knows where they
are) and gives, for a genome, ``architecture_scores(tree)``: per statistics class count, the mean
over seeds of each architecture's score, raising :class:`~autoprox.genome.tree.InvalidProxy`
when the genome fails on one. What is made of the scores (the fitness) is an objective's
business (:mod:`autoprox.search.objectives`), the memo around both is
:class:`autoprox.search.fitness.FitnessEvaluator`.

Registered strategies (:data:`EVALUATORS`; :func:`evaluator_class` finds one, whose own constructor
the caller then calls; :data:`EVALUATIONS`, those on statistics held here, which ``--evaluation`` names):

``exact``
    entry by entry on statistics held in this process (or memory-mapped), the committed runs'
    numbers bitwise; optionally in several threads and with the subtree memo;
``counted``
    once per distinct stored float16 value for all blocks at once (:mod:`autoprox.genome.counted`),
    the exact path for what it does not cover; scores equal to float32 rounding;
``sharded``
    on statistics sharded across a Dask cluster's workers (:class:`autoprox.search.shards.ShardedScorer`),
    the same numbers as ``exact``.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from functools import partial
from typing import TYPE_CHECKING, ClassVar, Mapping, Sequence

import numpy as np

from autoprox.core.errors import ConfigError
from autoprox.core.registry import LiveNames, Registry, kind_registrar
from autoprox.core.parallel import ThreadedMap
from autoprox.data.cache import StatsKey
from autoprox.genome.memo import SubtreeMemo
from autoprox.genome.tree import DEFAULT_KERNELS, kernel_map, score_architecture
from autoprox.networks.statistics import BlockStats, torch_threads
from autoprox.proxies.scorers import mean_over_seeds
from autoprox.search.shards import ShardedScorer

if TYPE_CHECKING:
    from autoprox.genome.counted import CountedBlocks

#: Statistics of a set of architectures: per (seed, class count), per architecture, its blocks.
HeldStatistics = Mapping[StatsKey, Sequence[Sequence[BlockStats]]]


class Evaluator(ABC):
    """A strategy computing a genome's scores on a fixed set of architectures; see the module's docstring.

    ``keys``: the statistics sets (seed, class count) it scores on; ``size``: its architectures.
    """

    #: The strategy's registered name (set by :func:`register_evaluator`).
    kind: ClassVar[str] = ""
    #: Whether it scores statistics held in this process, built as ``cls(stats, **strategy)``
    #: (:meth:`autoprox.search.fitness.FitnessEvaluator.from_statistics`): then ``--evaluation`` may name it.
    held: ClassVar[bool] = True
    keys: tuple[StatsKey, ...]
    size: int

    @abstractmethod
    def architecture_scores(self, tree) -> dict[int, np.ndarray]:
        """Per class count, the mean over seeds of each architecture's score; raises InvalidProxy."""

    @property
    def counted(self) -> dict[StatsKey, CountedBlocks] | None:
        """The statistics as value counts (counted evaluation), else None."""
        return None

    @property
    def path_counts(self) -> dict[str, int]:
        """Genomes scored by counted evaluation and by the exact path (counted evaluation only)."""
        return {"counted": 0, "exact": 0}

    def prepare(self) -> float:
        """Work done now rather than on first use; the seconds it took."""
        return 0.0

    def close(self) -> None:
        """Release threads or remote resources, if any."""


#: The registered strategies, by name.
EVALUATORS: Registry[str, type[Evaluator]] = Registry("evaluation", unknown=ConfigError)


#: The strategies on statistics held in this process (:attr:`Evaluator.held`), by name, read live: what
#: ``--evaluation`` may name.
EVALUATIONS: Sequence[str] = LiveNames(lambda: tuple(EVALUATORS.where(lambda cls: cls.held)))
#: The evaluation where none is asked for: entry by entry, the committed runs' numbers bitwise.
DEFAULT_EVALUATION = "exact"


#: Class decorator ``@register_evaluator(KIND)``: register an :class:`Evaluator` subclass under ``kind``.
register_evaluator = kind_registrar(EVALUATORS)


def evaluator_class(kind: str) -> type[Evaluator]:
    """The evaluator class registered as ``kind`` (the strategies' constructors differ: the caller
    calls the one it asked for); ConfigError naming the known kinds otherwise."""
    return EVALUATORS.lookup(kind)


def _size(stats: HeldStatistics) -> int:
    sizes = {len(v) for v in stats.values()}
    if len(sizes) != 1:
        raise ConfigError("every statistics set must hold the same architectures")
    return sizes.pop()


@register_evaluator("exact")
class ExactEvaluator(Evaluator):
    """Scores on statistics held in this process, entry by entry (the committed runs' numbers bitwise).

    ``terminals``: per architecture, its architecture-level terminal values (for genomes that use
    them). ``subtree_memo``: keep each architecture's scalar subtree values between genomes
    (:class:`~autoprox.genome.memo.SubtreeMemo`; exact: the same scores).
    ``kernels``: the kernel set (:data:`autoprox.primitives.KERNEL_SETS`): ``torch`` (default; the committed
    runs' numbers bitwise) or ``numpy`` (scores equal to a few float32 ulps). ``threads``:
    architectures scored side by side in this many threads on the one copy of the statistics,
    each as with one thread, so the scores are the same bits whatever the count.
    """

    def __init__(self, stats: HeldStatistics, terminals: Sequence[Mapping[str, float]] | None = None,
                 subtree_memo: bool = True, kernels: str = DEFAULT_KERNELS, threads: int = 1) -> None:
        import torch  # here, not at the top: listing the evaluators (--help) must not load torch

        self.stats = stats
        self.keys = tuple(stats)
        self.size = _size(stats)
        self.terminals = list(terminals) if terminals is not None else None
        if self.terminals is not None and len(self.terminals) != self.size:
            raise ConfigError(f"{len(self.terminals)} terminal sets for {self.size} architectures")
        self.kernels = kernels
        self.kernel_functions = kernel_map(kernels)
        self.subtree_memos: dict[StatsKey, list[SubtreeMemo]] | None = (
            {key: [SubtreeMemo(len(blocks)) for blocks in archs]
             for key, archs in stats.items()} if subtree_memo else None)
        # Each scoring thread's torch runs one intra-op thread, as torch_threads(1) makes this one.
        self.threads = ThreadedMap(threads, initializer=partial(torch.set_num_threads, 1))

    def architecture_scores(self, tree) -> dict[int, np.ndarray]:
        """Per class count, the mean over seeds of each architecture's score; raises InvalidProxy.

        Each architecture's value is the genome's (:func:`score_architecture`), as the scoring
        core's (:class:`autoprox.proxies.scorers.GenomeScorer`) on cached statistics, stopping at
        the first invalid one; the mean over seeds is the core's
        :func:`~autoprox.proxies.scorers.mean_over_seeds`. Computed single-threaded whatever the
        caller's torch setting, so that they are the very numbers
        :meth:`autoprox.proxies.proxy.Proxy.score` gives; with ``threads``, whole architectures run
        side by side instead, each with one intra-op thread.
        """
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
        self.threads.close()


@register_evaluator("counted")
class CountedEvaluator(ExactEvaluator):
    """Counted evaluation (:mod:`autoprox.genome.counted`): a genome evaluated once per distinct stored
    value for every block at once, the exact path (:class:`ExactEvaluator`) for what it does not cover.
    Needs the statistics held as stored float16; the same arguments as :class:`ExactEvaluator`."""

    def __init__(self, stats: HeldStatistics, terminals: Sequence[Mapping[str, float]] | None = None,
                 subtree_memo: bool = True, kernels: str = DEFAULT_KERNELS, threads: int = 1) -> None:
        from autoprox.genome.counted import CountedBlocks, is_counted_form  # needs torch: see ExactEvaluator

        if not all(is_counted_form(archs) for archs in stats.values()):
            raise ConfigError("counted evaluation needs the statistics held as stored float16 "
                              "(cache precision float16, not loaded as float32)")
        super().__init__(stats, terminals, subtree_memo, kernels, threads)
        self._counted = {key: CountedBlocks(archs) for key, archs in stats.items()}
        self._path_counts = {"counted": 0, "exact": 0}

    @property
    def counted(self) -> dict[StatsKey, CountedBlocks]:
        return self._counted

    @property
    def path_counts(self) -> dict[str, int]:
        return self._path_counts

    def prepare(self) -> float:
        """Count every statistic now rather than on first use, in the scoring threads; the seconds it took."""
        start = time.perf_counter()
        for blocks in self._counted.values():
            names = blocks.statistic_names
            self.threads(lambda i, blocks=blocks, names=names: float(blocks.statistic(names[i]).blocks), len(names))
        return time.perf_counter() - start

    def architecture_scores(self, tree) -> dict[int, np.ndarray]:
        from autoprox.genome.counted import NotCounted, counted_scores

        try:
            per_key = {key: counted_scores(tree, blocks, self.terminals, self.kernel_functions)
                       for key, blocks in self._counted.items()}
            self._path_counts["counted"] += 1
            return mean_over_seeds(per_key)
        except NotCounted:
            self._path_counts["exact"] += 1
        return super().architecture_scores(tree)


@register_evaluator("sharded")
class ShardedEvaluator(Evaluator):
    """Scores on statistics sharded across a Dask cluster's workers (:class:`~autoprox.search.shards.ShardedScorer`),
    the same numbers as :class:`ExactEvaluator`. ``keys`` names the statistics sets, ``size`` the architectures."""

    held = False

    def __init__(self, scorer: ShardedScorer, keys: Sequence[StatsKey], size: int) -> None:
        self.scorer = scorer
        self.keys = tuple(keys)
        self.size = int(size)

    def architecture_scores(self, tree) -> dict[int, np.ndarray]:
        return self.scorer.architecture_scores(tree)


__all__ = ["DEFAULT_EVALUATION", "EVALUATIONS", "EVALUATORS", "CountedEvaluator", "Evaluator", "ExactEvaluator", "HeldStatistics", "ShardedEvaluator",
           "evaluator_class", "register_evaluator"]
