"""How one benchmark's search part is scored: its statistics built, then held, memory-mapped or sharded on a
Dask cluster's workers, and scored by an evaluator strategy (:mod:`autoprox.search.evaluators`) under an
objective (:mod:`autoprox.search.objectives`).

:meth:`autoprox.search.context.RunContext.fitness_evaluator` calls it with what the run's settings and data
give; a multi-space search (:mod:`autoprox.search.multispace`) makes one per benchmark through it.
"""

from __future__ import annotations

from typing import Sequence

from autoprox.core.parallel import DaskExecutor, Executor
from autoprox.core.progress import Progress
from autoprox.data.cache import StatisticsCache, StatsPlan, build_cache, load_statistics
from autoprox.search.evaluators import ShardedEvaluator, evaluator_class
from autoprox.search.fitness import FitnessEvaluator
from autoprox.search.objectives import Objective, ObjectiveData
from autoprox.search.shards import ShardedScorer

#: Above this many statistics sets (search architectures times the plan's seed and class-count
#: sets) a search memory-maps its statistics instead of holding them (the same numbers; about
#: 26 MB per AutoFormer set would otherwise be held, 13 GB at 500; below it holding them is the
#: faster: 0.25 s against 0.33-0.40 s per genome at 60).
MAP_STATISTICS_ABOVE = 200


def hold_mapped(architectures: int, sets_per_architecture: int = 1) -> bool:
    """Whether a search over ``architectures``, each with ``sets_per_architecture`` statistics sets
    (seeds times class counts), memory-maps its statistics (:data:`MAP_STATISTICS_ABOVE`): three
    seeds of 80 architectures hold as much as 240 architectures of one."""
    return architectures * sets_per_architecture > MAP_STATISTICS_ABOVE


def build_search_statistics(cache: StatisticsCache, plan: StatsPlan, archs: Sequence, workers: Executor | int,
                            quiet: bool) -> None:
    """The statistics of ``archs`` computed into ``cache`` where missing (with ``workers``: a count or an
    executor), with a progress line unless ``quiet``: a search's first step, before its evolution."""
    build_cache(cache, plan.requests(archs), workers=workers, progress=None if quiet else Progress("statistics", every=15))


def space_evaluator(cache: StatisticsCache, plan: StatsPlan, archs: Sequence, terminals: list[dict[str, float]],
                    data: ObjectiveData, objective: Objective, evaluation: str, kernels: str, workers: int,
                    executor: Executor | None = None) -> FitnessEvaluator:
    """The fitness of ``archs`` (their statistics built: :func:`build_search_statistics`), held, memory-mapped
    or sharded on a Dask cluster's workers (``executor``), with their scalar ``terminals``: the evaluator
    strategy ``evaluation`` (:mod:`autoprox.search.evaluators`) with ``kernels`` and ``workers`` threads, and
    ``objective`` on ``data``, in one memo."""
    if isinstance(executor, DaskExecutor):  # statistics stay on the workers; genomes go to them
        scorer = ShardedScorer(executor.client, cache, plan, archs, terminals, kernels=kernels)
        evaluator = ShardedEvaluator(scorer, plan.keys(), len(archs))
    else:
        # Counted evaluation holds the statistics as code counts; the stored arrays, which only the
        # genomes it does not cover read, are then memory-mapped rather than held a second time.
        stats = load_statistics(cache, plan, archs, mapped=evaluation == "counted"
                                or hold_mapped(len(archs), len(plan.keys())))
        evaluator = evaluator_class(evaluation)(stats, terminals=terminals, kernels=kernels, threads=max(1, workers))
    try:
        return FitnessEvaluator(evaluator, data, objective)
    except BaseException:
        evaluator.close()
        raise


__all__ = ["MAP_STATISTICS_ABOVE", "build_search_statistics", "hold_mapped", "space_evaluator"]
