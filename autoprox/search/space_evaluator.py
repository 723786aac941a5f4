"""The fitness evaluator of one benchmark's search: its statistics built, then held, memory-mapped or
sharded on a Dask cluster's workers, and scored by the settings' evaluator strategy
(:mod:`autoprox.search.evaluators`) under the settings' objective (:mod:`autoprox.search.objectives`).

A single-space search uses one; a multi-space search (:mod:`autoprox.search.multispace`) one per benchmark.
"""

from __future__ import annotations

from autoprox.core.parallel import DaskExecutor, Executor
from autoprox.core.progress import Progress
from autoprox.data.cache import build_cache, load_statistics
from autoprox.search.context import RunContext
from autoprox.search.evaluators import ShardedEvaluator, evaluator_class
from autoprox.search.fitness import FitnessEvaluator, make_folds
from autoprox.search.objectives import ObjectiveData, search_objective
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


def space_evaluator(context: RunContext, executor: Executor | None, quiet: bool
                    ) -> tuple[FitnessEvaluator, dict | None]:
    """The fitness of one benchmark's search part (its statistics built first, then held, memory-mapped
    or sharded on a Dask cluster's workers), and the fitted base of an objective beyond one (None
    otherwise): the settings' evaluator strategy (:mod:`autoprox.search.evaluators`) and objective
    (:func:`autoprox.search.objectives.search_objective`) in one memo."""
    settings, split, plan, cache = context.settings, context.split, context.plan, context.cache
    search_archs = context.archs("search")
    build_cache(cache, plan.requests(search_archs), workers=executor if executor is not None else settings.workers,
                progress=None if quiet else Progress("statistics", every=15))
    terminals = context.scalar_terminals(search_archs, executor, quiet)
    folds = make_folds(len(split.search), settings.cv_folds, settings.split_seed) if settings.cv_folds else None
    objective = search_objective(settings.fitness, folds, settings.cv_mode)
    # The base of an objective beyond it: fitted per target on the search part, once per run.
    fitness_choices, bases = context.fitness_bases() if objective.base is not None else (None, None)
    data = ObjectiveData(context.accuracies("search"), tuple(context.targets), plan.target_classes,
                         settings.weights, bases or {})
    if isinstance(executor, DaskExecutor):  # statistics stay on the workers; genomes go to them
        scorer = ShardedScorer(executor.client, cache, plan, search_archs, terminals, kernels=settings.kernels)
        evaluator = ShardedEvaluator(scorer, plan.keys(), len(search_archs))
    else:
        # Counted evaluation holds the statistics as code counts; the stored arrays, which only the
        # genomes it does not cover read, are then memory-mapped rather than held a second time.
        stats = load_statistics(cache, plan, search_archs, mapped=settings.evaluation == "counted"
                                or hold_mapped(len(search_archs), len(plan.keys())))
        evaluator = evaluator_class(settings.evaluation)(stats, terminals=terminals, kernels=settings.kernels,
                                                             threads=max(1, settings.workers))
    try:
        return FitnessEvaluator(evaluator, data, objective), fitness_choices
    except BaseException:
        evaluator.close()
        raise


__all__ = ["MAP_STATISTICS_ABOVE", "hold_mapped", "space_evaluator"]
